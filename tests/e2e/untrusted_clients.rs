//! What a server gives to and takes from clients it does not know: its
//! machine's details only to a client that proved the key, the TOS of its
//! replies only within the classes below CS6 unless its operator allows
//! any, and its log at a bounded rate however fast clients connect.

use std::time::Duration;

use serde_json::Value;

use crate::common::{ServerProc, Thrum};

fn key_file(dir: &std::path::Path) -> String {
    let key = dir.join("key");
    std::fs::write(&key, "a key of at least sixteen bytes\n").unwrap();
    key.to_str().unwrap().to_string()
}

/// `thrum run tcp_rr` against `server` for 300 ms, `extra` added; the JSON.
fn tcp_rr(server: &ServerProc, extra: &[&str]) -> Value {
    Thrum::run("tcp_rr")
        .host(&server.addr)
        .len("300ms")
        .args(extra)
        .json()
}

/// `final.provenance` once gave every client, keyed or not, the server's
/// command line, hostname, kernel build, CPU, sysctls and NIC. Without a
/// key it carries the version only.
#[test]
fn provenance_goes_only_to_a_client_that_proved_the_key() {
    let open = ServerProc::start(&[]);
    let p = tcp_rr(&open, &[])["provenance"]["remote"].clone();
    eprintln!("unkeyed: {p}");
    assert!(!p["thrum_version"].as_str().unwrap().is_empty(), "{p}");
    assert_eq!(p["command_line"], "", "{p}");
    for field in [
        "hostname",
        "kernel",
        "cpu_model",
        "cpus",
        "interface",
        "congestion_control",
    ] {
        assert!(p[field].is_null(), "{field}: {p}");
    }
    assert_eq!(p["sysctls"], serde_json::json!({}), "{p}");

    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path());
    let keyed = ServerProc::start(&["--psk-file", &key]);
    let p = tcp_rr(&keyed, &["--psk-file", &key])["provenance"]["remote"].clone();
    assert!(
        p["command_line"].as_str().unwrap().contains("--psk-file"),
        "{p}"
    );
    assert!(
        p["kernel"].is_object() && p["interface"]["name"] == "lo",
        "{p}"
    );
}

/// A mix part with `tos=255` once made the server's replies carry DSCP 63 and ECN CE, and CS6/CS7 were taken too. A server takes
/// DSCP classes below CS6 with the ECN bits clear, unless its operator
/// says `--allow-tos-any`; the refusal names the field.
#[test]
fn a_server_takes_only_tos_below_cs6_unless_allowed() {
    let server = ServerProc::start(&[]);
    let run = |server: &ServerProc, extra: &[&str]| {
        Thrum::run_without_test()
            .host(&server.addr)
            .len("300ms")
            .args(extra)
    };
    for (extra, named) in [
        (
            &["--mix", "tcp_rr@tos=255"][..],
            "part 'tcp_rr' tos 0xff (DSCP 63, ECN 3)",
        ),
        (
            &["tcp_rr", "--tos", "CS6"][..],
            "--tos 0xc0 (DSCP 48, ECN 0)",
        ),
        (&["tcp_rr", "--tos", "224"][..], "--tos 0xe0"),
        (&["tcp_rr", "--tos", "1"][..], "--tos 0x01 (DSCP 0, ECN 1)"),
    ] {
        let err = run(&server, extra).fails().stderr();
        eprintln!("{extra:?}: {err}");
        assert!(
            err.contains(named) && err.contains("--allow-tos-any"),
            "{extra:?}: {err}"
        );
    }
    for extra in [
        &["tcp_rr", "--tos", "EF"][..],
        &["--mix", "tcp_rr@dscp=CS5"][..],
    ] {
        run(&server, extra).ok();
    }
    let any = ServerProc::start(&["--allow-tos-any"]);
    run(&any, &["--mix", "tcp_rr@tos=255"]).ok();
}

/// `thrum ping --tcp PORT -c 3000 -i 1ms` once wrote 3,000 log lines, one per connection. A connection that closes before it sends
/// a byte (a TCP ping, a readiness probe) is not logged at all now; one
/// that sends something the server refuses is, and the server's log passes
/// a burst of ten seconds' worth of `--log-rate` (10 lines/s by default),
/// then that rate, and counts what it dropped in a line of its own.
#[test]
fn connection_log_lines_are_rate_limited() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let server = ServerProc::start_logged(&["--log-format", "json"], &log);
    let port = server.addr.rsplit_once(':').unwrap().1.to_string();
    Thrum::cmd(&[
        "ping",
        "--tcp",
        &port,
        "-c",
        "3000",
        "-i",
        "1ms",
        "-W",
        "1s",
        "127.0.0.1",
    ])
    .timeout(Duration::from_secs(60))
    .ok();
    std::thread::sleep(Duration::from_millis(300));
    let pings = ServerProc::log_lines(&log)
        .iter()
        .filter(|l| l["peer"].is_string())
        .count();
    assert!(
        pings < 10,
        "{pings} lines for 3,000 TCP pings that sent nothing"
    );
    // 3,000 connections that each send one byte of no hello and close.
    for _ in 0..3000 {
        let mut s = std::net::TcpStream::connect(&server.addr).unwrap();
        let _ = s.write_all(b"x");
        drop(s);
        std::thread::sleep(Duration::from_millis(1));
    }
    // The last sessions end when their hello times out; then one real
    // test, whose line carries the count of what was dropped before it.
    std::thread::sleep(Duration::from_secs(7));
    let doc = tcp_rr(&server, &[]);
    assert!(doc["summary"]["error"].is_null());
    std::thread::sleep(Duration::from_millis(300));
    let lines = ServerProc::log_lines(&log);
    let sessions = lines.iter().filter(|l| l["peer"].is_string()).count();
    let dropped: u64 = lines
        .iter()
        .filter(|l| l["event"] == "log lines suppressed")
        .map(|l| l["suppressed"].as_u64().unwrap())
        .sum();
    eprintln!(
        "3,000 refused connections: {sessions} session lines written, {dropped} counted as suppressed"
    );
    // 100 at once, 10 a second for the ~12 s of the test, and slack.
    // Every line counted: written or suppressed (the pings add at most 10).
    assert!(sessions < 300, "{sessions}");
    assert!(sessions as u64 + dropped >= 3000, "{sessions} + {dropped}");
    assert!(
        lines
            .last()
            .is_some_and(|l| l["outcome"] == "ok" && l["test"] == "tcp_rr"),
        "{:?}",
        lines.last()
    );
}
