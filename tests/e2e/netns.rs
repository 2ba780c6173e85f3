//! Accuracy against ground truth on a real, shaped link: two network
//! namespaces joined by a veth pair, with a token-bucket filter (tbf) on the
//! sending end. Loopback can only check that thrum's figures agree with
//! themselves; here the kernel's own numbers are the referee. A bulk test
//! must read the tbf rate minus header overhead (iperf3 reads 0.957 of it on
//! this topology, see shared/TESTING.md), and a request/response test's
//! transaction count must agree with the interface packet counters.
//!
//! Needs root and `ip netns`. Without them each test says why on stderr and
//! returns, unless `THRUM_E2E_NETNS=required` is set: a root CI job should
//! set it, so that losing the capability fails instead of passing silently.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{
    Pair, Thrum, VETH_A, VETH_B, diagnostics, f, ip, ns_exec, run_ok, stream_into_files, u,
    wait_for_lines,
};

/// The tbf rate, bits/s; `TBF` spells the same rate for tc (shared/TESTING.md).
const SHAPED_BPS: f64 = 200e6;
const TBF: [&str; 8] = [
    "root", "tbf", "rate", "200mbit", "burst", "64kb", "latency", "50ms",
];

/// Which end of the link gets the tbf. tbf shapes egress only, and on the
/// sender's own interface it never drops: the kernel holds the socket back
/// instead, so TCP sees a clean 200 Mbit/s pipe.
#[derive(Clone, Copy)]
enum Shaper {
    None,
    A,
    B,
}

/// Two namespaces A (client) and B (server) on 10.213.`subnet`.0/24, joined
/// by a veth (the harness's `Pair`). Dropping it deletes both namespaces,
/// which destroys the veth with them, also when the test panics. Declare
/// it before any process running inside it so that those are dropped
/// (killed) first.
pub(crate) struct Link(Pair);

impl std::ops::Deref for Link {
    type Target = Pair;
    fn deref(&self) -> &Pair {
        &self.0
    }
}

impl Link {
    /// Build the link, or explain on stderr why this machine cannot and
    /// return None so the caller skips. `subnet` must be unique per test:
    /// tests in this binary run in parallel threads of one process, so the
    /// process id alone does not separate them.
    fn new(subnet: u8, shaper: Shaper) -> Option<Link> {
        Link::build(subnet, shaper, &TBF)
    }

    /// A link whose client end (A) is shaped by `tbf` (tc's words after
    /// `qdisc add dev DEV`), for tests of other modules.
    pub(crate) fn client_shaped(subnet: u8, tbf: &[&str]) -> Option<Link> {
        Link::build(subnet, Shaper::A, tbf)
    }

    fn build(subnet: u8, shaper: Shaper, tbf: &[&str]) -> Option<Link> {
        let link = Link(Pair::build(213, subnet)?);
        let shaped = match shaper {
            Shaper::None => None,
            Shaper::A => Some((&link.a, VETH_A)),
            Shaper::B => Some((&link.b, VETH_B)),
        };
        if let Some((ns, dev)) = shaped {
            link.tc(ns, &[&["qdisc", "add", "dev", dev][..], tbf].concat());
        }
        Some(link)
    }

    /// One of A's veth counters (`tx_packets`, `rx_packets`, ...). /sys is
    /// per namespace: `ip netns exec` remounts it, so this reads A's view.
    fn counter_a(&self, name: &str) -> u64 {
        let path = format!("/sys/class/net/{VETH_A}/statistics/{name}");
        let out = run_ok(ns_exec(&self.a, "cat").arg(&path));
        let text = String::from_utf8_lossy(&out.stdout);
        text.trim()
            .parse()
            .unwrap_or_else(|e| panic!("{path}: {text:?}: {e}"))
    }
}

/// What must hold for a bulk test on the shaped link: goodput near the tbf
/// rate, both ends' totals agreeing after the drain, and the window being
/// the sum of its intervals. Returns goodput as a fraction of the tbf rate.
fn check_bulk(doc: &Value, test: &str) -> f64 {
    let s = &doc["summary"];
    let bps = f(&s["throughput_bps"]);
    let ratio = bps / SHAPED_BPS;
    eprintln!(
        "{test}: {:.2} Mbit/s over tbf 200 Mbit/s = {ratio:.4}",
        bps / 1e6
    );
    // Goodput cannot beat the shaped rate by more than tbf's 64 KB bucket
    // (0.07 % of the window); the slack above 1 only absorbs where the two
    // processes put the window's edges. Below, headers cost ~4.3 % (iperf3
    // reads 0.957) and the rest is room for a busy machine.
    assert!(
        (0.90..=1.02).contains(&ratio),
        "{test}: {bps} bit/s is {ratio:.4} of the tbf rate"
    );

    // Conservation: once drained, every byte one end sent the other read.
    let (lt, rt) = (&s["local"]["total"], &s["remote"]["total"]);
    assert_eq!(
        u(&lt["bytes_sent"]),
        u(&rt["bytes_received"]),
        "{test}: client sent vs server received"
    );
    assert_eq!(
        u(&rt["bytes_sent"]),
        u(&lt["bytes_received"]),
        "{test}: server sent vs client received"
    );

    // The server's window figure is exactly the sum of its measure intervals.
    let ivs = doc["intervals"].as_array().expect("intervals");
    let measured: u64 = ivs
        .iter()
        .filter(|i| i["phase"] == "measure")
        .map(|i| u(&i["sum"]["remote"]["bytes_received"]))
        .sum();
    assert_eq!(
        measured,
        u(&s["remote"]["bytes_received"]),
        "{test}: measure intervals vs window"
    );
    ratio
}

#[test]
fn tcp_stream_matches_tbf_rate() {
    let Some(link) = Link::new(1, Shaper::A) else {
        return;
    };
    let server = link.server();
    let doc = link
        .client(&server, "tcp_stream")
        .len("4s")
        .default_warmup()
        .json();
    check_bulk(&doc, "tcp_stream");
}

#[test]
fn tcp_maerts_matches_tbf_rate() {
    let Some(link) = Link::new(2, Shaper::B) else {
        return;
    };
    let server = link.server();
    let doc = link
        .client(&server, "tcp_maerts")
        .len("4s")
        .default_warmup()
        .json();
    check_bulk(&doc, "tcp_maerts");
}

/// `--zerocopy` over the shaped veth, both directions: goodput still reads
/// the tbf rate within the same tolerance, the byte totals agree, and the
/// sending end reaped a completion for every send. veth delivers into a
/// local socket, so the kernel usually copies; the count is printed.
#[test]
fn zerocopy_stream_and_maerts_match_tbf_rate() {
    for (subnet, test, shaper, end) in [
        (60, "tcp_stream", Shaper::A, "local"),
        (61, "tcp_maerts", Shaper::B, "remote"),
    ] {
        let Some(link) = Link::new(subnet, shaper) else {
            return;
        };
        let server = link.server();
        let doc = link
            .client(&server, test)
            .len("3s")
            .arg("--zerocopy")
            .default_warmup()
            .json();
        check_bulk(&doc, &format!("{test} --zerocopy"));
        crate::zerocopy::assert_all_reaped(
            &doc["summary"][end],
            &format!("{test} --zerocopy over veth"),
        );
    }
}

/// With TCP_NODELAY and one 1-byte transaction in flight, every request is
/// its own segment out of A and every response its own segment into A, so
/// the client's transaction count is checked against what the kernel's
/// interface counters saw. Not shaped: the point is counting, not rate.
#[test]
fn tcp_rr_counts_match_interface_packets() {
    let Some(link) = Link::new(3, Shaper::None) else {
        return;
    };
    let server = link.server();
    let (tx0, rx0) = (link.counter_a("tx_packets"), link.counter_a("rx_packets"));
    let started = Instant::now();
    let doc = link
        .client(&server, "tcp_rr")
        .arg("--nodelay")
        .len("2s")
        .json();
    let elapsed = started.elapsed();
    let (tx, rx) = (
        link.counter_a("tx_packets") - tx0,
        link.counter_a("rx_packets") - rx0,
    );

    // The whole test, warm-up and drain included, since the counters span
    // the client's whole run.
    let trans = u(&doc["summary"]["local"]["total"]["transactions"]);
    eprintln!(
        "tcp_rr: {trans} transactions in {elapsed:.2?}; A sent {tx} packets (+{}), received {rx} (+{})",
        tx - trans.min(tx),
        rx - trans.min(rx)
    );
    assert!(trans > 1000, "tcp_rr: only {trans} transactions");

    // Lower bound: at least one segment per request out of A and one per
    // response into A; fewer packets than transactions would mean thrum
    // counts transactions that never crossed the wire.
    //
    // Upper bound: a fixed overhead plus what scheduling stalls add, and
    // nothing proportional to the transaction count.
    // - Fixed: the control connection (handshake, hello, spec, start, a
    //   sample per interval, stop, results, close), the data connection's
    //   handshake and close, one ARP exchange. Measured: always +21 or +22
    //   out of A and +15 or +16 into A, over 13k..131k transactions, alone,
    //   beside the loopback tests, and with four CPU hogs on the two vCPUs.
    // - Stalls: pure ACKs ride on the next request or response, which
    //   follows within microseconds, well inside the delayed-ACK timer
    //   (TCP_DELACK_MIN, 40 ms). Only an end that is stalled for longer lets
    //   that timer fire, which sends a bare ACK and drops the connection out
    //   of pingpong (delayed-ACK) mode until the next exchange. SIGSTOPping
    //   either end for 100 ms, ten times in a run, added 2 packets per stall,
    //   sent by the stalled end's kernel; 10 ms stalls added none. At most
    //   one such stall fits in each 40 ms of the run.
    let stalls = elapsed.as_millis() as u64 / 40 + 1;
    let upper = trans + 50 + 2 * stalls;
    assert!(
        (trans..=upper).contains(&tx),
        "tcp_rr: A sent {tx} packets for {trans} transactions (allowed {trans}..={upper})"
    );
    assert!(
        (trans..=upper).contains(&rx),
        "tcp_rr: A received {rx} packets for {trans} transactions (allowed {trans}..={upper})"
    );
}

/// One end's packet rates from thrum's own interface counters, checked
/// against its transaction rate: within 2 %.
fn assert_packets_match(side: &Value, iface: &str, tps: f64, what: &str) {
    assert_eq!(side["interface"], iface, "{what}: {side}");
    for k in ["tx_packets_per_s", "rx_packets_per_s"] {
        let pps = f(&side[k]);
        let off = (pps - tps).abs() / tps;
        eprintln!(
            "{what}: {k} {pps:.1} vs {tps:.1} transactions/s ({:.3} %)",
            100.0 * off
        );
        assert!(
            off <= 0.02,
            "{what}: {k} {pps} is {:.2} % off {tps}",
            100.0 * off
        );
    }
}

/// 1-byte udp_rr over the veth moves one datagram each way per
/// transaction, so thrum's packets/s (read from the kernel's counters over
/// the window, on both ends) must agree with its transactions/s, and no
/// coalescing warning may appear. The same run checks the CPU fields and
/// the provenance of both ends.
#[test]
fn udp_rr_packet_rates_match_transactions_on_both_ends() {
    let Some(link) = Link::new(4, Shaper::None) else {
        return;
    };
    let server = link.server();
    let doc = link
        .client(&server, "udp_rr")
        .len("2s")
        .warmup("500ms")
        .args(["--rr-timeout", "2s"])
        .json();
    let s = &doc["summary"];
    let tps = f(&s["transactions_per_s"]);
    assert!(tps > 1000.0, "{tps}");
    assert_eq!(s["interface"], VETH_A);
    assert_eq!(
        f(&s["tx_packets_per_s"]),
        f(&s["local"]["tx_packets_per_s"])
    );
    assert_packets_match(&s["local"], VETH_A, tps, "client");
    assert_packets_match(&s["remote"], VETH_B, tps, "server");
    let parted = diagnostics(&doc, "packets_part_from_transactions");
    assert!(parted.is_empty(), "{parted:?}");
    for end in ["local", "remote"] {
        crate::measure::assert_cpu_side(&s[end], end);
    }
    let p = &doc["provenance"]["local"];
    assert_eq!(p["interface"]["name"], VETH_A, "{p}");
    assert_eq!(p["interface"]["driver"], "veth", "{p}");
    assert_eq!(u(&p["interface"]["mtu"]), 1500, "{p}");
    // A server without a key tells an unkeyed client its version only;
    // its interface is in the summary's packet rates.
    let p = &doc["provenance"]["remote"];
    assert!(p["interface"].is_null() && p["hostname"].is_null(), "{p}");
    assert!(!p["thrum_version"].as_str().unwrap().is_empty(), "{p}");
}

/// The same referee for the io_uring completion path on many flows:
/// udp_rr `-F 16 -T 2 -b 16 --driver uring` still moves exactly one
/// datagram each way per transaction on both ends, so no receive completion
/// was lost or counted twice and no send went out twice.
#[test]
fn uring_udp_rr_packet_rates_match_transactions_on_both_ends() {
    let Some(link) = Link::new(50, Shaper::None) else {
        return;
    };
    let server = link.server();
    let doc = link
        .client(&server, "udp_rr")
        .flows(16)
        .threads(2)
        .args(["-b", "16", "--driver", "uring"])
        .len("2s")
        .warmup("500ms")
        .args(["--rr-timeout", "2s"])
        .json();
    let s = &doc["summary"];
    if !crate::common::ran_on_uring(&doc, 2) {
        return;
    }
    let tps = f(&s["transactions_per_s"]);
    assert!(tps > 1000.0, "{tps}");
    assert_eq!(
        u(&s["local"]["total"]["transactions"]),
        u(&s["remote"]["total"]["transactions"])
    );
    assert_packets_match(&s["local"], VETH_A, tps, "client");
    assert_packets_match(&s["remote"], VETH_B, tps, "server");
}

/// A counter of one namespace's TCP MIB (`/proc/net/snmp`, line `Tcp:`),
/// which is per network namespace, so only this test's connections count.
fn tcp_mib(ns: &str, name: &str) -> u64 {
    let out = run_ok(ns_exec(ns, "cat").arg("/proc/net/snmp"));
    let text = String::from_utf8_lossy(&out.stdout);
    let mut rows = text.lines().filter(|l| l.starts_with("Tcp:"));
    let (keys, vals) = (rows.next().unwrap(), rows.next().unwrap());
    let i = keys.split_whitespace().position(|k| k == name).unwrap();
    vals.split_whitespace().nth(i).unwrap().parse().unwrap()
}

/// Sockets in TIME_WAIT in one namespace.
fn time_wait(ns: &str) -> u64 {
    let out = run_ok(ns_exec(ns, "ss").args(["-Htan", "state", "time-wait"]));
    String::from_utf8_lossy(&out.stdout).lines().count() as u64
}

/// `--close` against the kernel's own books: with `fin` (the default) each
/// tcp_crr connection ends gracefully, no reset, and the server holds the
/// TIME_WAIT; with `rst` the client resets each connection once it has the
/// response, and no TIME_WAIT is left on either end. The counters are the
/// namespaces' TCP MIB and `ss`, so only this test's connections count.
#[test]
fn tcp_crr_close_modes_match_kernel_counters() {
    let n: u64 = 2000;
    for (mode, subnet) in [("fin", 62u8), ("rst", 63u8)] {
        let Some(link) = Link::new(subnet, Shaper::None) else {
            return;
        };
        let server = link.server();
        let (opens0, rsts0) = (tcp_mib(&link.a, "ActiveOpens"), tcp_mib(&link.a, "OutRsts"));
        let doc = link
            .client(&server, "tcp_crr")
            .args(["-n", &n.to_string(), "-F", "4", "-T", "2", "--close", mode])
            .json();
        assert_eq!(doc["spec"]["close"], mode, "{}", doc["spec"]);
        let trans = u(&doc["summary"]["local"]["total"]["transactions"]);
        let opens = tcp_mib(&link.a, "ActiveOpens") - opens0;
        let rsts = tcp_mib(&link.a, "OutRsts") - rsts0;
        let (tw_a, tw_b) = (time_wait(&link.a), time_wait(&link.b));
        eprintln!(
            "tcp_crr --close {mode}: {trans} transactions, {opens} connects, {rsts} resets out of A, TIME_WAIT A {tw_a} B {tw_b}"
        );
        assert!(
            trans >= n,
            "--close {mode}: {trans} transactions for -n {n}"
        );
        // Every transaction was its own connection (plus the control
        // connection and the warm-up's, all counted in `trans` or small).
        assert!(
            (trans..=trans + 2).contains(&opens),
            "--close {mode}: {opens} connects for {trans} transactions"
        );
        match mode {
            "fin" => {
                assert!(rsts <= 2, "--close fin: {rsts} resets");
                assert!(tw_a <= 2, "--close fin: {tw_a} TIME_WAIT on the client");
                // Each of the 4 flows' last connections may still be
                // closing (the server in FIN_WAIT_2, the client's FIN not
                // yet sent) when the states are counted: CI read 1,996.
                assert!(
                    tw_b + 4 >= trans,
                    "--close fin: {tw_b} TIME_WAIT on the server for {trans}"
                );
            }
            _ => {
                // One reset per connection from its close; a second one
                // when the server's FIN arrives after the client has
                // already closed (its kernel answers the FIN with a reset):
                // 2 % of connections in 4 flows on loopback veth.
                assert!(
                    (trans..=2 * trans + 2).contains(&rsts),
                    "--close rst: {rsts} resets for {trans} transactions"
                );
                assert!(tw_a + tw_b <= 2, "--close rst: TIME_WAIT A {tw_a} B {tw_b}");
            }
        }
    }
}

/// With 33 requests in flight and Nagle on, TCP packs several requests
/// into one segment: packets/s falls below transactions/s and thrum must
/// say so rather than let the figures pass as per-packet ones.
#[test]
fn burst_tcp_rr_warns_of_coalescing() {
    let Some(link) = Link::new(5, Shaper::None) else {
        return;
    };
    let server = link.server();
    let doc = link
        .client(&server, "tcp_rr")
        .args(["-b", "32"])
        .len("1s")
        .warmup("300ms")
        .json();
    let s = &doc["summary"];
    let tps = f(&s["transactions_per_s"]);
    let tx = f(&s["tx_packets_per_s"]);
    eprintln!("tcp_rr -b 32: {tps:.0} transactions/s, {tx:.0} packets/s out");
    assert!(
        tx < 0.98 * tps,
        "no coalescing seen: {tx} packets/s for {tps} transactions/s"
    );
    // The code, and in its sentence the client's interface and the cause.
    let parted = diagnostics(&doc, "packets_part_from_transactions");
    assert!(
        parted
            .iter()
            .any(|w| w.contains(&format!("packets/s on {VETH_A}")) && w.contains("TCP coalescing")),
        "{parted:?}"
    );
}

/// The data path cut mid-test: the veth between the namespaces is deleted
/// while a stream runs, so no packet gets through any more and no socket
/// sees an error (TCP would retransmit for minutes). The client must notice
/// from the unanswered ticks, end with a clear error within 5 s of the cut
/// and a non-zero exit, and have written every interval so far.
#[test]
fn data_path_cut_mid_test_ends_cleanly() {
    let Some(link) = Link::new(9, Shaper::A) else {
        return;
    };
    let server = link.server();
    let dir = tempfile::tempdir().unwrap();
    let (res, csv) = (dir.path().join("r.json"), dir.path().join("s.csv"));
    let mut client = stream_into_files(link.client(&server, "tcp_stream"), &res, &csv);
    // Five intervals' rows (and the header) in the samples: then the cut.
    wait_for_lines(&csv, 6);
    ip(&["-n", &link.a, "link", "del", VETH_A]);
    let cut = Instant::now();
    let status = loop {
        if let Some(s) = client.try_wait().unwrap() {
            break s;
        }
        if cut.elapsed() > Duration::from_secs(5) {
            let _ = client.kill();
            panic!("the client was still running 5 s after the link was cut");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(!status.success());
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut client.stderr.take().unwrap(), &mut stderr).unwrap();
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&res).unwrap()).unwrap();
    let e = doc["summary"]["error"].as_str().unwrap();
    assert!(e.contains("has not answered"), "{e}");
    assert!(stderr.contains(e), "the error is on stderr too: {stderr}");
    let n = doc["intervals"].as_array().unwrap().len();
    assert!(n >= 5, "only {n} intervals kept");
    let rows = std::fs::read_to_string(&csv).unwrap().lines().count() - 1;
    assert_eq!(rows, n, "one CSV row per interval for one flow");
}

/// The client's own queue full: udp_stream at 150 Mbit/s
/// into A's tbf of 100 Mbit/s. The control connection shares that queue,
/// so the ticks' segments are dropped with the datagrams and TCP resends
/// them seconds late. The server must count each interval up to when its
/// tick was due, not when it arrived: every interval then holds what the
/// link delivered, a steady rate × length (before the fix: [20676, 6,
/// 10264, 8, 8210] where 8267 a second crossed), the window its sum, and
/// no run ends with "has not answered" (before: 2 runs of 7).
#[test]
fn udp_stream_through_a_full_sender_queue_keeps_its_intervals() {
    let tbf = [
        "root", "tbf", "rate", "100mbit", "burst", "32kbit", "latency", "5ms",
    ];
    let Some(link) = Link::client_shaped(77, &tbf) else {
        return;
    };
    let server = link.server();
    // tbf charges the whole frame: 1470 payload + 8 UDP + 20 IPv4 + 14
    // Ethernet bytes.
    let per_s = 100e6 / 8.0 / (1470.0 + 8.0 + 20.0 + 14.0);
    // B's UDP receive-buffer drops: the server fell behind the link.
    let rcvbuf_errors = || {
        let out = run_ok(ns_exec(&link.b, "cat").arg("/proc/net/snmp"));
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut udp = text.lines().filter(|l| l.starts_with("Udp:"));
        let (names, values) = (udp.next().unwrap(), udp.next().unwrap());
        let at = names
            .split_whitespace()
            .position(|n| n == "RcvbufErrors")
            .unwrap();
        values
            .split_whitespace()
            .nth(at)
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    let mut judged = 0;
    for run in 1..=3 {
        let dropped_before = rcvbuf_errors();
        let doc = link
            .client(&server, "udp_stream")
            .len("5s")
            .args(["--rate", "150M", "-m", "1470"])
            .default_warmup()
            .json();
        let dropped = rcvbuf_errors() - dropped_before;
        let s = &doc["summary"];
        let window = u(&s["remote"]["datagrams_received"]);
        let window_s = f(&s["remote"]["window_s"]);
        // What reached the server each second: the link's rate. A server
        // that fell behind it (a machine too busy to run it) read in
        // bursts, and B's socket dropped what it could not hold: an
        // interval then counts less than the link delivered, by no more
        // than every datagram dropped. From above it is held to the link's
        // rate all the same: no interval may count more than the link
        // delivered in it, as one did when a late tick moved a second's
        // datagrams into the next (before the fix: 9985 where the link
        // delivered 8270).
        let starved = dropped > 0;
        if starved {
            eprintln!("run {run}: B's socket dropped {dropped}: an interval may be short by that");
        }
        // What the link delivers in an interval: its rate × the interval,
        // while the client kept A's queue full. A client starved of CPU
        // sends in bursts that the 5 ms queue drops and then leaves the
        // link idle: an interval in which it sent under 1.3 × the link's
        // rate (150 Mbit/s is 1.54 ×) says nothing about the ticks, and
        // is not judged (nor is the window of a run that had one).
        let counts: Vec<(u64, f64, bool)> = doc["intervals"]
            .as_array()
            .expect("intervals")
            .iter()
            .filter(|i| i["phase"] == "measure")
            .map(|i| {
                let want = (f(&i["end_s"]) - f(&i["start_s"])) * per_s;
                let sent = u(&i["sum"]["local"]["datagrams_sent"]) as f64;
                (
                    u(&i["sum"]["remote"]["datagrams_received"]),
                    want,
                    sent >= 1.3 * want,
                )
            })
            .collect();
        let want = window_s * per_s;
        eprintln!(
            "run {run}: server per interval (count, link delivers, client kept the queue full) {counts:?}; window {window} of {want:.0}"
        );
        assert!(counts.len() >= 4, "run {run}: {counts:?}");
        let within = |n: u64, want: f64, share: f64| {
            let n = n as f64;
            n <= want * (1.0 + share) && n >= want * (1.0 - share) - dropped as f64
        };
        for &(n, want, fed) in &counts {
            judged += usize::from(fed);
            assert!(
                !fed || within(n, want, 0.15),
                "run {run}: an interval counted {n}, the link delivered {want:.0}: {counts:?}"
            );
        }
        assert!(
            counts.iter().any(|c| !c.2) || within(window, want, 0.05),
            "run {run}: the window counted {window}, the link delivered {want:.0}"
        );
        let warnings = s["warnings"].as_array().expect("warnings");
        assert!(
            starved
                || counts.iter().any(|c| !c.2)
                || !warnings
                    .iter()
                    .any(|w| w.as_str().is_some_and(|w| w.contains("trend"))),
            "run {run}: {warnings:?}"
        );
    }
    // A machine so busy that the client never kept the queue full tests
    // nothing; one with a third of the intervals fed still does.
    assert!(
        judged >= 5,
        "only {judged} of the intervals had the queue full"
    );
}

/// Each interval's link utilisation (the counters read at its two ticks):
/// a full interval's tx bytes, utilisation × speed × length, are the
/// frames of the datagrams thrum sent in it (1400 + 42 bytes each) within
/// 2 % and one frame; the intervals together are the kernel's counters
/// over the run (`counted` bytes: they tile it, and no datagram is sent
/// outside them); and their mean over the measure phase, weighted by
/// length, is the summary's `window_tx` within 2 %.
fn intervals_util_agree(doc: &Value, speed: f64, counted: f64, window_tx: f64) {
    const FRAME: f64 = 1400.0 + 42.0;
    let (mut implied, mut weighted, mut measure_s) = (0.0, 0.0, 0.0);
    let mut full = 0;
    for iv in doc["intervals"].as_array().expect("intervals") {
        let secs = f(&iv["end_s"]) - f(&iv["start_s"]);
        let tx = f(&iv["link_util_percent"]["tx"]);
        assert!(iv["link_util_percent"]["rx"].as_f64().is_some(), "{iv}");
        let bytes = tx / 100.0 * speed * secs / 8.0;
        implied += bytes;
        if iv["phase"] == "measure" {
            weighted += tx * secs;
            measure_s += secs;
        }
        let sent: u64 = iv["local"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| u(&c["datagrams_sent"]))
            .sum();
        let want = sent as f64 * FRAME;
        eprintln!(
            "interval {}: {secs:.3} s, tx {tx:.4} % = {bytes:.0} B, datagrams' frames {want:.0} B",
            iv["index"]
        );
        if secs >= 0.9 {
            full += 1;
            assert!(
                (bytes - want).abs() <= 0.02 * want + FRAME,
                "interval {}: {bytes} B from the utilisation, {want} B sent",
                iv["index"]
            );
        }
    }
    assert!(full >= 2, "only {full} full intervals");
    assert!(
        (implied - counted).abs() <= 0.02 * counted,
        "the intervals' {implied} B against the counters' {counted} B"
    );
    let mean = weighted / measure_s;
    assert!(
        (mean - window_tx).abs() <= 0.02 * window_tx,
        "intervals' mean {mean} % against the summary's {window_tx} %"
    );
}

/// Link utilisation against the kernel's own counters: a udp_stream paced
/// at 25 Mbit/s over the unshaped veth (veth reports 10 Gbit/s) must report
/// the share of the link speed that A's byte counters give. The test reads
/// those counters around the whole run (no warm-up, so every datagram is
/// sent inside the window) and divides by the window's length; what it adds
/// beyond the window is the control connection's few kilobytes, far under
/// the 2 % allowed. On `lo`, which has no speed, both figures are null.
#[test]
fn link_utilisation_matches_interface_counters_and_speed() {
    let Some(link) = Link::new(180, Shaper::None) else {
        return;
    };
    let speed_text = run_ok(ns_exec(&link.a, "cat").arg(format!("/sys/class/net/{VETH_A}/speed")));
    let speed: f64 = String::from_utf8_lossy(&speed_text.stdout)
        .trim()
        .parse::<f64>()
        .expect("veth speed")
        * 1e6;
    let server = link.server();
    let before = link.counter_a("tx_bytes");
    let doc = link
        .client(&server, "udp_stream")
        .args(["-m", "1400", "--rate", "25M"])
        .len("3s")
        .json();
    let after = link.counter_a("tx_bytes");
    crate::common::assert_schema(&doc);
    let s = &doc["summary"];
    assert_eq!(f(&s["link_speed_bps"]), speed, "link speed as sysfs says");
    let window_s = f(&s["local"]["window_s"]);
    let expected = 100.0 * (after - before) as f64 * 8.0 / window_s / speed;
    let got = f(&s["link_util_percent"]["tx"]);
    eprintln!("link util tx: thrum {got:.4} %, counters {expected:.4} % of {speed} bit/s");
    assert!(
        (got - expected).abs() <= 0.02 * expected,
        "tx utilisation {got} % vs {expected} % from the counters"
    );
    // 25 Mbit/s of 1400-byte payloads is 25.75 Mbit/s of frames: 0.2575 %.
    assert!((0.2..0.3).contains(&got), "{got}");
    let rx = f(&s["link_util_percent"]["rx"]);
    assert!(
        rx < 0.01 * got.max(0.01) + 0.01,
        "rx carries only control: {rx}"
    );
    assert_eq!(s["link_util_percent"], s["local"]["link_util_percent"]);
    assert!(s["remote"]["link_util_percent"]["rx"].as_f64().is_some());
    intervals_util_agree(&doc, speed, (after - before) as f64, got);

    // Loopback: no speed, so no utilisation, said as null.
    let doc = Thrum::run("tcp_rr")
        .len("300ms")
        .arg("--json")
        .output()
        .json();
    let s = &doc["summary"];
    assert_eq!(s["interface"], "lo");
    assert!(s["link_speed_bps"].is_null(), "{}", s["link_speed_bps"]);
    assert!(s["link_util_percent"]["tx"].is_null());
    assert!(s["link_util_percent"]["rx"].is_null());
}
