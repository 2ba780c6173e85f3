//! iperf3's per-interval figures: the TCP stream tests' `tcp_info` in
//! every interval (retransmissions, congestion window, RTT), checked
//! against the kernel's own counts over a shaped path that drops, and on
//! loopback.
//!
//! The shaped tests need root and `ip netns`; they skip without them
//! unless `THRUM_E2E_NETNS=required`.

use std::time::Duration;

use serde_json::Value;

use crate::common::{
    Path3, ServerProc, TOWARD_A, TOWARD_B, bin, ns_exec, run_cmd, run_json, run_ok, u,
};

/// Namespace counter `Tcp: RetransSegs` of `ns`: the kernel's count of
/// every TCP segment retransmitted there (a fresh namespace: this test's).
fn retrans_segs(ns: &str) -> u64 {
    let out = run_ok(ns_exec(ns, "cat").arg("/proc/net/snmp"));
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines().filter(|l| l.starts_with("Tcp:"));
    let (names, values) = (lines.next().unwrap(), lines.next().unwrap());
    let at = names
        .split_whitespace()
        .position(|n| n == "RetransSegs")
        .expect("Tcp RetransSegs");
    values.split_whitespace().nth(at).unwrap().parse().unwrap()
}

/// Every interval has `tcp_info` with a congestion window and an RTT;
/// their retransmissions, summed.
fn interval_retransmits(doc: &Value) -> u64 {
    let ivs = doc["intervals"].as_array().expect("intervals");
    assert!(!ivs.is_empty(), "{doc}");
    ivs.iter()
        .map(|iv| {
            let t = &iv["tcp_info"];
            assert!(u(&t["cwnd"]) > 0, "no cwnd in {iv}");
            assert!(u(&t["srtt_us"]) > 0, "no srtt in {iv}");
            assert!(!t["sockets"].as_array().expect("sockets").is_empty());
            u(&t["retransmits"])
        })
        .sum()
}

/// Over R's 20 Mbit/s htb with a 16 KB byte FIFO each way, one cubic
/// flow overflows the FIFO again and again: the sender retransmits. The
/// intervals' retransmissions (the sender's `tcpi_total_retrans` at each
/// tick, differenced) must add up to no more than the run's total from the
/// sender's final TCP_INFO (`summary.local` for tcp_stream, `.remote` for
/// tcp_maerts, the server sending), which is in turn no more than the
/// kernel's namespace-wide `RetransSegs` of the sender's namespace; what
/// the intervals miss is what the drain after the last tick retransmits
/// (the queued tail of 32 KB socket buffers, a small share of the run:
/// measured 80 of 1,191 and 179 of 1,001).
#[test]
fn tcp_info_retransmits_add_up_over_a_lossy_path() {
    let Some(path) = Path3::build(219, 40) else {
        return;
    };
    for dev in [TOWARD_B, TOWARD_A] {
        path.htb_bfifo(dev, "20mbit", "16000");
    }
    let server = path.server();
    let args = [
        "-l", "2s", "-i", "0.5s", "--warmup", "0s", "-s", "32K", "-S", "32K",
    ];
    for (test, sender_ns, end) in [
        ("tcp_stream", path.a.clone(), "local"),
        ("tcp_maerts", path.b.clone(), "remote"),
    ] {
        let before = retrans_segs(&sender_ns);
        let doc = run_json(
            &mut path.client_cmd(&server, test, &args),
            Duration::from_secs(30),
            test,
        );
        let kernel = retrans_segs(&sender_ns) - before;
        let intervals = interval_retransmits(&doc);
        let total = u(&doc["summary"][end]["tcp_retransmits"]);
        eprintln!(
            "{test}: intervals {intervals}, final TCP_INFO {total}, namespace RetransSegs {kernel}"
        );
        assert!(
            intervals > 0,
            "{test}: no retransmission over a path that drops: {doc}"
        );
        assert!(
            intervals <= total,
            "{test}: intervals {intervals} > total {total}"
        );
        assert!(
            total <= kernel,
            "{test}: TCP_INFO {total} > the kernel's {kernel}"
        );
        // The drain's share: its tail, not the run.
        assert!(
            total - intervals <= total / 2,
            "{test}: intervals {intervals} of {total}"
        );
        for iv in doc["intervals"].as_array().unwrap() {
            let end_of = iv["tcp_info"]["sockets"][0]["end"].as_str().unwrap();
            let want = if test == "tcp_stream" {
                "client"
            } else {
                "server"
            };
            assert_eq!(end_of, want, "{test}: the sender's view");
        }
    }
}

/// On loopback, tcp_bidir's intervals carry both ends' sending sockets,
/// each with a congestion window; a tcp_stream's human rows carry
/// iperf3's `Retr` and `Cwnd` columns.
#[test]
fn tcp_info_in_every_interval_on_loopback() {
    let server = ServerProc::start(&[]);
    let doc = run_json(
        server
            .thrum()
            .args([
                "run",
                "tcp_bidir",
                "-H",
                &server.addr,
                "-F",
                "2",
                "-l",
                "1s",
                "-i",
                "0.25s",
            ])
            .args(["--warmup", "0s", "--json"]),
        Duration::from_secs(30),
        "tcp_bidir",
    );
    let intervals = interval_retransmits(&doc);
    let total = u(&doc["summary"]["local"]["tcp_retransmits"])
        + u(&doc["summary"]["remote"]["tcp_retransmits"]);
    assert!(intervals <= total, "intervals {intervals} > total {total}");
    for iv in doc["intervals"].as_array().unwrap() {
        let ends: Vec<&str> = iv["tcp_info"]["sockets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["end"].as_str().unwrap())
            .collect();
        assert!(ends.contains(&"client") && ends.contains(&"server"), "{iv}");
    }
    let out = run_cmd(
        std::process::Command::new(bin()).args([
            "run",
            "tcp_stream",
            "-H",
            &server.addr,
            "-l",
            "0.5s",
            "-i",
            "0.25s",
            "--warmup",
            "0s",
        ]),
        Duration::from_secs(30),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let head = text.lines().nth(1).unwrap_or_default();
    assert!(head.contains("Retr") && head.contains("Cwnd"), "{text}");
    assert!(text.contains("Bytes"), "a cwnd in bytes: {text}");
}
