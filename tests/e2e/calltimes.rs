//! Send and receive call-time histograms of the bulk tests (issue 20,
//! item 12), as netperf's `-v 2` shows them.

use std::time::Duration;

use serde_json::Value;

use crate::common::{ServerProc, assert_schema, json, run_client, u};

/// Calls counted in a histogram's buckets.
fn bucketed(h: &Value) -> u64 {
    let rows: u64 = h["rows"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r.as_array().unwrap())
        .map(u)
        .sum();
    rows + u(&h["over_100_s"])
}

/// With `--call-times` both ends time their calls; without it neither does
/// (two clock reads per call are not spent unasked).
#[test]
fn stream_tests_report_send_and_receive_call_times() {
    let server = ServerProc::start(&[]);
    let out = run_client(
        &[
            "run",
            "tcp_stream",
            "-H",
            &server.addr,
            "-l",
            "0.5s",
            "--warmup",
            "0s",
            "--call-times",
            "--json",
        ],
        Duration::from_secs(30),
    );
    let doc = json(&out);
    assert!(out.status.success(), "{}", doc["summary"]["error"]);
    assert_schema(&doc);
    let (local, remote) = (
        &doc["summary"]["local"]["call_times"],
        &doc["summary"]["remote"]["call_times"],
    );
    // The client sends, the server receives: every call lands in a bucket.
    for h in [&local["send"], &remote["recv"]] {
        assert!(u(&h["calls"]) > 0, "{h}");
        assert_eq!(bucketed(h), u(&h["calls"]), "{h}");
    }
    let text = run_client(
        &[
            "run",
            "tcp_stream",
            "-H",
            &server.addr,
            "-l",
            "0.5s",
            "--warmup",
            "0s",
            "--call-times",
            "-v",
        ],
        Duration::from_secs(30),
    );
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("local send call times") && text.contains("UNIT_USEC"),
        "{text}"
    );
    // Not asked: no histograms, and the flag is refused where it means nothing.
    let plain = run_client(
        &[
            "run",
            "tcp_stream",
            "-H",
            &server.addr,
            "-l",
            "0.3s",
            "--warmup",
            "0s",
            "--json",
        ],
        Duration::from_secs(30),
    );
    let plain = json(&plain);
    assert!(plain["summary"]["local"]["call_times"].is_null());
    assert!(plain["summary"]["remote"]["call_times"].is_null());
    crate::common::assert_rejected(&[(
        &["run", "tcp_rr", "--call-times"],
        &["--call-times", "tcp_stream"],
    )]);
}
