//! udp_rr's responses matched to their own requests under real loss:
//! three namespaces in a line, A (client) — R (router) — B (server), R's
//! egress toward B shaped by htb to 100 kbit/s over a byte FIFO of 100
//! bytes, and TCP around it (`Path3::tcp_around`), so that only the
//! datagrams cross the bottleneck.
//!
//! A 1-byte request is a 43-byte frame (1 + UDP 8 + IP 20 + Ethernet 14):
//! at 400 requests/s the client offers 138 kbit/s, so the FIFO stays full
//! and R drops about a quarter of the requests, and a request that gets
//! through waits at most for the FIFO's 100 bytes and the frame on the
//! wire, 8 × 143 / 100,000 s = 11.4 ms. Matched oldest first, as thrum did
//! for requests under 8 bytes, every drop charged the responses after it
//! to an earlier request, 2.5 ms more each, until the charged ones reached
//! the timeout: a median of hundreds of milliseconds. The server's flow
//! runs on the blocking driver (its worker owns one socket), the path the
//! watchdog's signal wakes: its responses must still go out as requests
//! arrive.
//!
//! Needs root and `ip netns`; skips like the `netns` module, and runs
//! alone as every shaped-link test does (`common::serial`).

use std::time::Duration;

use crate::common::{Path3, TOWARD_B, u};

/// The FIFO's bytes and the shaped rate, and what a request can wait:
/// the FIFO full and one frame on the wire.
const FIFO_BYTES: f64 = 100.0;
const RATE_BPS: f64 = 100e3;
const FRAME_BYTES: f64 = 43.0;

#[test]
fn a_lost_request_leaves_the_others_matched() {
    let Some(path) = Path3::build(229, 40) else {
        return;
    };
    path.tcp_around();
    path.htb_bfifo(TOWARD_B, "100kbit", "100");
    let server = path.server();
    let dropped_before = path.drops(TOWARD_B);
    let doc = path
        .client(&server, "udp_rr")
        .len("4s")
        .args(["--rate", "400", "--rr-timeout", "500ms"])
        .timeout(Duration::from_secs(60))
        .json();
    let s = &doc["summary"];
    assert!(s["error"].is_null(), "{}", s["error"]);
    let dropped = path.drops(TOWARD_B) - dropped_before;
    let lost = u(&s["lost"]);
    let service = &s["service_latency_ns"];
    let p50_ms = service["p50"].as_f64().unwrap() / 1e6;
    eprintln!(
        "rr_matching: R dropped {dropped}, lost {lost} of {} sent; service p50 {p50_ms:.2} ms, p90 {:.2} ms; server drivers {}",
        u(&s["local"]["total"]["datagrams_sent"]),
        service["p90"].as_f64().unwrap() / 1e6,
        doc["environment"]["remote_drivers"]
    );
    // The run is what the test is about: requests were dropped on the path.
    assert!(dropped > 0 && lost > 0, "R dropped {dropped}, lost {lost}");
    assert_eq!(
        doc["environment"]["remote_drivers"],
        serde_json::json!(["blocking"]),
        "the server's flow on the blocking driver"
    );
    // The physics bound, doubled for a host busy with other work.
    let bound_ms = 8.0 * (FIFO_BYTES + FRAME_BYTES) / RATE_BPS * 1e3;
    assert!(
        p50_ms < 2.0 * bound_ms,
        "service p50 {p50_ms:.2} ms, where the path holds a request {bound_ms:.1} ms at most"
    );
}
