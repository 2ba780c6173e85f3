//! Send and receive call-time histograms of the bulk tests, as netperf's
//! `-v 2` shows them.

use serde_json::Value;

use crate::common::{ServerProc, Thrum, assert_schema, u};

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
    let stream = Thrum::run("tcp_stream").host(&server.addr);
    let doc = stream.clone().len("0.5s").arg("--call-times").json();
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
    let text = stream
        .clone()
        .len("0.5s")
        .args(["--call-times", "-v"])
        .stdout();
    assert!(
        text.contains("local send call times") && text.contains("UNIT_USEC"),
        "{text}"
    );
    // Not asked: no histograms, and the flag is refused where it means nothing.
    let plain = stream.len("0.3s").json();
    assert!(plain["summary"]["local"]["call_times"].is_null());
    assert!(plain["summary"]["remote"]["call_times"].is_null());
    crate::common::assert_rejected(&[(
        &["run", "tcp_rr", "--call-times"],
        &["--call-times", "tcp_stream"],
    )]);
}
