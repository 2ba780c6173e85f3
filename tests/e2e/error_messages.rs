//! Error messages that teach: every test named, limits in the units they
//! are typed in, compound durations, the `[v6]:port` form, and netperf's
//! and iperf3's habits answered with a tip rather than taken as aliases.

use crate::common::{Thrum, assert_rejected};

#[test]
fn errors_name_every_choice_in_the_units_typed() {
    assert_rejected(&[
        (
            &["run", "udp_foo"],
            &[
                "unknown test 'udp_foo'",
                "tcp_stream",
                "tcp_cc",
                "udp_stream",
                "udp_rr",
            ],
        ),
        (
            &["run", "tcp_rr", "-l", "100us"],
            &["--duration 100us is out of range (accepted: 1ms..=24h)"],
        ),
        // A compound duration is read whole: 24h30m is over the limit.
        (
            &["run", "tcp_rr", "-l", "24h30m"],
            &["--duration 24h30m is out of range (accepted: 1ms..=24h)"],
        ),
        (
            &["run", "tcp_rr", "-l", "30m1h"],
            &["'30m1h'", "largest down as in 1h30m"],
        ),
        (
            &["run", "udp_stream", "--rate", "4"],
            &["--rate 4 bit/s is out of range (accepted: 8 bit/s..=1T bit/s)"],
        ),
        (
            &["run", "tcp_rr", "-i", "1ms"],
            &["--interval 1ms is out of range (accepted: 10ms..=24h)"],
        ),
        (
            &["run", "tcp_rr", "-H", "::1:99999"],
            &["not an IPv6 address", "[ADDRESS]:PORT"],
        ),
        // Foreign habits: an error with the way to say it here.
        (
            &["run", "-t", "TCP_RR"],
            &["tip: the test is positional", "thrum run TCP_RR"],
        ),
        (&["run", "tcp_stream", "-P", "4"], &["tip:", "-F 4"]),
        (
            &["run", "tcp_stream", "-R"],
            &["tip:", "thrum run tcp_maerts"],
        ),
        (&["run", "tcp_stream", "-J"], &["tip:", "--json"]),
    ]);
    // A compound duration runs: 0m0.3s is 300 ms.
    let doc = Thrum::run("tcp_rr").len("0m300ms").json();
    assert_eq!(doc["spec"]["duration_ns"], 300_000_000);
    // One style: thrum's errors read as clap's do.
    let err = Thrum::cmd(&["run", "tcp_rr", "-F", "0"]).output().stderr();
    assert!(err.starts_with("error: "), "{err}");
}

/// `-H ::1:PORT` is an IPv6 address on the default port; when that fails,
/// the user is told how to write a port.
#[test]
fn a_bare_ipv6_address_with_a_port_gets_a_tip_when_it_fails() {
    let err = Thrum::run("tcp_rr")
        .host("::1:9")
        .len("0.3s")
        .fails()
        .stderr();
    assert!(err.contains("tip: ") && err.contains("-H [::1]:9"), "{err}");
}

/// iperf3's habits, each answered with thrum's way:
/// `-t 10` is the duration (-l 10s), `-c HOST` the server (-H HOST), and
/// `-b 100M` a bit rate (--rate or --pacing-rate; -b is netperf's burst).
#[test]
fn iperf3_duration_client_and_bitrate_get_tips() {
    assert_rejected(&[
        (
            &["run", "-t", "10"],
            &["tip: the duration is -l here", "-l 10s"],
        ),
        (&["run", "tcp_stream", "-t", "2m"], &["tip:", "-l 2m"]),
        // -c is --local-cpu, so HOST is taken for the test.
        (
            &["run", "-c", "HOST"],
            &[
                "unknown test 'HOST'",
                "tip: thrum's client takes the server as -H HOST",
                "thrum run tcp_stream -H HOST",
            ],
        ),
        (
            &["run", "tcp_stream", "-c", "HOST"],
            &["tip:", "thrum run tcp_stream -H HOST"],
        ),
        (
            &["run", "tcp_stream", "-b", "100M"],
            &[
                "tip: -b is the burst here",
                "--rate 100M",
                "--pacing-rate 100M",
            ],
        ),
    ]);
}
