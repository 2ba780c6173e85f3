//! `--bytes` (iperf3's `-n`): a run that ends once it has moved exactly
//! that many bytes of payload, split over its flows to a byte, as the
//! receiver counts it and the interface carried it, with its rate over the
//! time it took; and `-f` setting the unit of the figures printed.

use std::process::Command;
use std::time::Duration;

use crate::common::{ServerProc, Thrum, keyval, read_json};

/// A server in a namespace of its own, whose loopback carries only this
/// test's traffic: its packet counters are the ground truth of what moved.
fn lo_bytes(server: &ServerProc) -> Option<u64> {
    let ns = server.ns.as_ref()?;
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            ns,
            "cat",
            "/sys/class/net/lo/statistics/rx_bytes",
        ])
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

/// `--bytes 200M` moves exactly 200 MiB (thrum's sizes:
/// M = 2^20) as the receiver counts it, split over the flows to a byte;
/// the interface carried at least that (and no more than its headers and
/// the control connection add); the rate is over the time it took; and
/// `-f M` gives THROUGHPUT in MBytes/s from the same figure.
#[test]
fn bytes_move_exactly_that_many_and_format_sets_the_unit() {
    let server = ServerProc::isolated("bytes", &[]);
    let dir = tempfile::tempdir().unwrap();
    for (test, size, want, flows) in [
        ("tcp_stream", "200M", 200u64 << 20, 2u64),
        ("tcp_maerts", "100000001", 100_000_001, 3),
    ] {
        let json = dir.path().join(format!("{test}.json"));
        let before = lo_bytes(&server);
        let out = Thrum::run(test)
            .on(&server)
            .args(["--bytes", size, "-F", &flows.to_string(), "-f", "M"])
            .args(["--keyval", "--output-fields"])
            .arg("THROUGHPUT,THROUGHPUT_UNITS,THROUGHPUT_BPS,ELAPSED_TIME")
            .arg("--export-json")
            .arg(&json)
            .timeout(Duration::from_secs(60))
            .output();
        let after = lo_bytes(&server);
        let out = out.ok();
        let r = read_json(&json);
        let s = &r["summary"];
        // The receiver: the server for tcp_stream, the client for maerts.
        let (rx, tx) = if test == "tcp_stream" {
            (&s["remote"], &s["local"])
        } else {
            (&s["local"], &s["remote"])
        };
        assert_eq!(rx["total"]["bytes_received"].as_u64(), Some(want), "{s}");
        assert_eq!(tx["total"]["bytes_sent"].as_u64(), Some(want), "{s}");
        // All of it inside the measurement window (no warm-up), and so in
        // the rate.
        assert_eq!(rx["bytes_received"].as_u64(), Some(want), "{s}");
        // Each flow's share, summed over the intervals.
        let side = if test == "tcp_stream" {
            "remote"
        } else {
            "local"
        };
        let mut per_flow = vec![0u64; flows as usize];
        for iv in r["intervals"].as_array().unwrap() {
            for (f, c) in iv[side].as_array().unwrap().iter().enumerate() {
                per_flow[f] += c["bytes_received"].as_u64().unwrap();
            }
        }
        let share: Vec<u64> = (0..flows)
            .map(|f| want / flows + u64::from(f < want % flows))
            .collect();
        assert_eq!(per_flow, share, "{test}");
        // Over the receiver's window, on the receiver's clock.
        let secs = rx["window_s"].as_f64().unwrap();
        let bps = s["throughput_bps"].as_f64().unwrap();
        let rate = want as f64 * 8.0 / secs;
        assert!((bps - rate).abs() <= rate * 1e-6, "{bps} vs {rate}");
        let got = keyval(&out.stdout());
        assert_eq!(got["THROUGHPUT_UNITS"], "MBytes/s");
        let mib = got["THROUGHPUT_BPS"].parse::<f64>().unwrap() / 8.0 / 1048576.0;
        assert!(
            (got["THROUGHPUT"].parse::<f64>().unwrap() - mib).abs() <= 0.006,
            "{got:?}"
        );
        // Ground truth: the namespace's loopback carried the bytes, each
        // segment with its headers (at most ~1 % for 64 KiB segments,
        // more with small ones), plus the control connection.
        if let (Some(b), Some(a)) = (before, after) {
            let moved = a - b;
            eprintln!("{test}: lo carried {moved} bytes for {want} of payload");
            assert!(
                moved >= want && moved <= want + want / 10 + 1_000_000,
                "{test}: lo carried {moved} bytes for {want}"
            );
        }
    }
}

/// udp_stream: the sender sends exactly SIZE bytes of
/// payload (the last datagram carries what is left), and each datagram
/// is received or counted lost.
#[test]
fn udp_stream_sends_exactly_its_bytes() {
    let server = ServerProc::start(&[]);
    let want = 3_000_001u64;
    let r = Thrum::run("udp_stream")
        .on(&server)
        .args(["--bytes", "3000001", "-F", "2", "--rate", "100M"])
        .json();
    let s = &r["summary"];
    assert_eq!(
        s["local"]["total"]["bytes_sent"].as_u64(),
        Some(want),
        "{s}"
    );
    let size = r["spec"]["send_bytes"].as_u64().unwrap();
    let per_flow = |f: u64| (want / 2 + u64::from(f < want % 2)).div_ceil(size);
    let sent = s["datagrams_sent"].as_u64().unwrap();
    assert_eq!(sent, per_flow(0) + per_flow(1), "{s}");
    // Over the whole test: datagrams still in flight when the last was
    // sent arrive in the drain, after the window.
    let total = &s["remote"]["total"];
    let got = total["datagrams_received"].as_u64().unwrap();
    assert_eq!(got + s["lost"].as_u64().unwrap(), sent, "{s}");
    let bytes = total["bytes_received"].as_u64().unwrap();
    assert!(bytes <= want && (got < sent || bytes == want), "{s}");
}
