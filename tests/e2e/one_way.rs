//! udp_rr's and tcp_rr's `--one-way` against a standing queue one way: three namespaces
//! in a line, A (client) — R (router) — B (server), R's egress toward B
//! shaped by htb to 50 Mbit/s over a byte FIFO of 625,000 bytes, which
//! drains in 8 × 625,000 / 50e6 = 100 ms when full. A tcp_stream of four
//! cubic flows (named: the host's default may be BBR, which keeps the
//! queue short) from A to B keeps it full: cubic fills the FIFO until it drops,
//! the flow that lost backs off to 0.7 of its window and fills it again,
//! and with no other delay on the path the windows are the queue, so the
//! queue stands between 70 ms (all four backing off at once) and 100 ms. A request to B waits in it; a response to A crosses R's other
//! egress, unshaped, where only the bulk flow's ACKs go. So the way up
//! reads the queue, 70 to 100 ms (the 70–130 ms bound leaves 30 ms for the
//! scheduler of a busy machine, both ends niced), and the way down only
//! the stacks, under 10 ms; without the bulk flow both are under 10 ms.
//!
//! tcp_rr's probe shares the FIFO with the bulk flows and its requests
//! drop with theirs when it overflows (cubic drives it to overflow, a
//! packet or so every few round trips): a lost request comes again after
//! TCP's retransmission timeout (200 ms at least), and the requests sent
//! behind it wait in the server's receive queue for it, so a loss adds a
//! few hundred ms to the way up of the 10 to 20 transactions around it.
//! Of 300 at 50/s those are a few percent at the rates this FIFO sees,
//! so the way up's p50 still reads the queue alone; its tail does not,
//! and no bound is put on it.
//!
//! The namespaces share one kernel, so both ends read one CLOCK_MONOTONIC:
//! the offset is exact (`same_kernel`), its bound 0, and no way reads
//! below zero. Clock pings over the loaded path could not have told the
//! way up from the way down (they would have put half the queue on each,
//! within a bound of half of it).
//!
//! The offset followed through a run has ground truth too: a server in a
//! time namespace whose CLOCK_MONOTONIC runs exactly 5 s ahead, and the
//! hidden `--clock-method exchanges`, which makes the client find it by
//! the exchanges alone.
//!
//! Needs root and `ip netns`; skips like the `netns` module, and runs
//! alone as every shaped-link test does (`common::serial`).

use std::time::Duration;

use serde_json::Value;

use crate::common::{NICED, Path3, ServerProc, TOWARD_A, TOWARD_B, Thrum, f, ns_exec_ahead, u};

const MS: u64 = 1_000_000;

/// `thrum run TEST --rate 50 --one-way -l 6s` from A, niced: its JSON.
fn probe(path: &Path3, server: &ServerProc, test: &str) -> Value {
    path.client(server, test)
        .niced()
        .args(["--rate", "50", "--one-way"])
        .len("6s")
        .timeout(Duration::from_secs(60))
        .json()
}

/// The way up's and the way down's p50, ns, after checking the clock's
/// account: exact, nothing clamped, the sizes raised to carry the stamps.
fn p50s(doc: &Value) -> (u64, u64) {
    // 50/s for 6 s: about 300 transactions each way.
    p50s_of(&doc["summary"]["owd_ns"], 200)
}

/// The same of `summary.owd_ns` (or a mix's part's) `o`, with at least
/// `count` transactions.
fn p50s_of(o: &Value, count: u64) -> (u64, u64) {
    assert_eq!(o["method"], "same_kernel", "{o}");
    assert_eq!(o["stamps"], "user_space", "{o}");
    assert_eq!(u(&o["error_ns"]), 0, "{o}");
    assert_eq!(u(&o["clamped"]), 0, "{o}");
    assert_eq!(
        (u(&o["request_bytes"]), u(&o["response_bytes"])),
        (16, 32),
        "{o}"
    );
    assert!(u(&o["up"]["count"]) >= count, "{o}");
    (u(&o["up"]["p50"]), u(&o["down"]["p50"]))
}

#[test]
fn a_standing_queue_reads_on_the_way_up_only() {
    let Some(path) = Path3::build(231, 40) else {
        return;
    };
    path.htb_bfifo(TOWARD_B, "50mbit", "625000");
    let server = path.niced_server();

    for test in ["udp_rr", "tcp_rr"] {
        let quiet = probe(&path, &server, test);
        let (up, down) = p50s(&quiet);
        eprintln!("{test} quiet: up p50 {up} ns, down p50 {down} ns");
        assert!(
            up < 10 * MS && down < 10 * MS,
            "{test} quiet: up {up}, down {down}"
        );
    }

    // Longer than the probe with its set-up and clock exchanges. Four
    // flows: one cubic flow leaves slow start early (HyStart sees the
    // delay grow) and takes seconds to grow its window to the FIFO's 431
    // packets; four fill it within a second or two, and one flow backing
    // off after a drop empties the FIFO by a few percent, not 30. Both
    // probes, one after the other (7 s each with the warm-up, and their
    // set-up and clock exchanges), within it.
    let bulk = path
        .client(&server, "tcp_stream")
        .args(["--cc", "cubic"])
        .flows(4)
        .len("28s")
        .spawn();
    std::thread::sleep(Duration::from_secs(3));
    let loaded: Vec<(&str, u64, u64)> = ["udp_rr", "tcp_rr"]
        .into_iter()
        .map(|test| {
            let (up, down) = p50s(&probe(&path, &server, test));
            eprintln!("{test} loaded: up p50 {up} ns, down p50 {down} ns");
            (test, up, down)
        })
        .collect();
    let ran = bulk.wait();
    assert!(ran.success(), "{}", ran.report());
    for (test, up, down) in loaded {
        assert!(
            (70 * MS..=130 * MS).contains(&up),
            "{test}: the way up reads the standing queue (70–100 ms): {up} ns"
        );
        assert!(
            down < 10 * MS,
            "{test}: the way down crosses no queue: {down} ns"
        );
    }
}

/// A mix with `--one-way` through the same FIFO on one egress: the
/// preset `preset` (`upload`: four cubic flows A to B; `download`: B to
/// A) with its udp_rr and tcp_rr probes at 10/s, 3 s idle, 10 s loaded,
/// 1 s recovery. Returns the JSON's summary after checking what holds
/// either way: both probes measured one way on the exact clock, each
/// its own `owd_ns` (the tcp_rr probe's 1-byte messages raised to carry
/// the stamps), and every phase's ways in the JSON.
fn mix_one_way(path: &Path3, server: &ServerProc, preset: &str) -> Value {
    let doc = path
        .client(server, preset)
        .niced()
        .args([
            "--one-way",
            "--cc",
            "cubic",
            "--idle",
            "3s",
            "--recovery",
            "1s",
        ])
        .len("10s")
        .timeout(Duration::from_secs(90))
        .json();
    let s = doc["summary"].clone();
    let q = &s["queue_direction"];
    assert_eq!(q["probes"], serde_json::json!(["udp_rr", "tcp_rr"]), "{q}");
    assert!(q.get("not_measured").is_none(), "{q}");
    assert_eq!(u(&q["error_ns"]), 0, "one kernel: {q}");
    for probe in ["udp_rr", "tcp_rr"] {
        let p = s["parts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == probe)
            .expect("the probe");
        p50s_of(&p["owd_ns"], 100);
    }
    for phase in ["idle", "loaded", "recovery"] {
        let w = &s["phases"][phase]["one_way_ns"];
        assert!(u(&w["up"]["count"]) >= 5, "{phase}: {w}");
    }
    s
}

/// Each way's p50 in `phase` of summary `s`, ns.
fn phase_p50s(s: &Value, phase: &str) -> (u64, u64) {
    let w = &s["phases"][phase]["one_way_ns"];
    (u(&w["up"]["p50"]), u(&w["down"]["p50"]))
}

/// rrul's question, which way the queue is, on a path with a deep FIFO
/// one way only (the module's 625,000 bytes at 50 Mbit/s, 100 ms full):
/// first on the way up with `upload`'s flows filling it, then on the way
/// down, the FIFO on R's egress toward A and `download`'s flows. The
/// loaded phase's p50 on the queued way is the standing queue's, 70 to
/// 100 ms as the module says (60 to 130: the first second of the loaded
/// phase is cubic filling it, and a busy host's scheduler), the other
/// way grows by less than 10 ms, both ways idle under 10 ms, and the
/// verdict names the queued way.
#[test]
fn rrul_names_the_way_the_queue_is() {
    for (subnet, shaped, preset, way) in [
        (42, TOWARD_B, "upload", "up"),
        (44, TOWARD_A, "download", "down"),
    ] {
        let Some(path) = Path3::build(231, subnet) else {
            return;
        };
        path.htb_bfifo(shaped, "50mbit", "625000");
        let server = path.niced_server();
        let s = mix_one_way(&path, &server, preset);
        let (idle, loaded) = (phase_p50s(&s, "idle"), phase_p50s(&s, "loaded"));
        eprintln!("{preset}: idle up/down p50 {idle:?} ns, loaded {loaded:?} ns");
        let q = &s["queue_direction"];
        assert_eq!(q["direction"], way, "{preset}: {q}");
        assert!(
            idle.0 < 10 * MS && idle.1 < 10 * MS,
            "{preset}: idle {idle:?}"
        );
        let (queued, other) = if way == "up" {
            (loaded.0, loaded.1)
        } else {
            (loaded.1, loaded.0)
        };
        assert!(
            (60 * MS..=130 * MS).contains(&queued),
            "{preset}: the way {way} reads the standing queue (70–100 ms): {queued} ns"
        );
        assert!(
            other < 10 * MS,
            "{preset}: the other way crosses no queue: {other} ns"
        );
        let grew = |k: &str| q[k].as_i64().unwrap();
        let (q_way, q_other) = if way == "up" {
            (grew("up_ns"), grew("down_ns"))
        } else {
            (grew("down_ns"), grew("up_ns"))
        };
        assert_eq!(
            q_way,
            queued as i64 - if way == "up" { idle.0 } else { idle.1 } as i64
        );
        assert!(q_other < 10 * MS as i64, "{preset}: {q}");
    }
}

/// Over loopback, closed loop with four in flight, against the embedded
/// server: each transaction's way up and way down add up to its round
/// trip less the server's turnaround, so over the same transactions the
/// two means add up to no more than the round trip's (1 % for the
/// histograms' rounding). udp_rr and tcp_rr (whose stamps cross a byte
/// stream, four requests in one segment or split); `-r` is raised to
/// carry the stamps, and a test without them is refused, naming the flag
/// and the tests that take it.
#[test]
fn the_two_ways_fit_in_the_round_trip() {
    for test in ["udp_rr", "tcp_rr"] {
        let doc = Thrum::run(test)
            .args(["--one-way", "--burst", "3"])
            .len("1s")
            .json();
        let s = &doc["summary"];
        let o = &s["owd_ns"];
        p50s(&doc);
        assert_eq!(
            u(&o["up"]["count"]),
            u(&s["latency_ns"]["count"]),
            "{test}: {o}"
        );
        let ways = f(&o["up"]["mean"]) + f(&o["down"]["mean"]);
        let rtt = f(&s["latency_ns"]["mean"]);
        assert!(
            ways <= rtt * 1.01,
            "{test}: up + down {ways} ns, round trip {rtt} ns"
        );
    }
    Thrum::run("tcp_crr")
        .arg("--one-way")
        .len("1s")
        .refused(&["--one-way", "tcp_rr", "udp_rr"]);
}

/// `--clock-method exchanges` against a server on the client's kernel in a
/// time namespace 5 s ahead (niced, as the client), over the quiet path:
/// the offset is exactly 5 s. Every interval's own estimate holds it
/// within its bound; the offset each interval was corrected by holds it
/// within that interval's bound, which is the one-way figures the exact
/// offset gives lying within the bound of the ones reported (the way up
/// is the server's arrival stamp less the offset less the send stamp: a
/// correction off by d moves it by exactly d). At least one interval's
/// estimate is used, the run's fastest at least. The default method on
/// the same server finds the exact offset, and checks every interval's
/// estimate against it.
#[test]
fn the_refreshed_offset_holds_the_exact_one() {
    const AHEAD_NS: i64 = 5_000_000_000;
    let Some(path) = Path3::build(231, 60) else {
        return;
    };
    let cmd = ns_exec_ahead(&path.b, NICED, 5);
    let mut server = ServerProc::start_with(cmd, &path.addr_b(), &[]);
    server.ns = Some(path.b.clone());
    let run = |extra: &[&str]| {
        path.client(&server, "udp_rr")
            .niced()
            .args(["--rate", "500", "--one-way", "-i", "500ms"])
            .args(extra)
            .len("4s")
            .timeout(Duration::from_secs(60))
            .json()
    };
    // Rounding: an estimate's mean is to the nanosecond, the track's to one.
    const ROUND: u64 = 1_000;
    let doc = run(&["--clock-method", "exchanges"]);
    let o = &doc["summary"]["owd_ns"];
    assert_eq!(o["method"], "exchanges_refreshed", "{o}");
    let offsets = o["offsets"].as_array().unwrap();
    assert!(offsets.len() >= 6, "{o}");
    assert!(offsets.iter().any(|w| w["used"] == true), "{o}");
    for w in offsets {
        let off = w["offset_ns"].as_i64().unwrap();
        assert!(
            (off - AHEAD_NS).unsigned_abs() <= u(&w["error_ns"]) + ROUND,
            "an interval's estimate misses the exact offset: {w}"
        );
    }
    let mut corrected = 0;
    for iv in doc["intervals"].as_array().unwrap() {
        let Some(w) = iv.get("owd_ns") else { continue };
        corrected += 1;
        let off = w["offset_ns"].as_i64().unwrap();
        assert!(
            (off - AHEAD_NS).unsigned_abs() <= u(&w["error_ns"]) + ROUND,
            "an interval corrected by an offset off the exact one by more than its bound: {w}"
        );
        assert!(u(&w["error_ns"]) <= u(&o["error_ns"]), "{w} {o}");
    }
    assert!(corrected >= 6, "{doc}");
    eprintln!(
        "exchanges: bound {} ns, offset before {} ns; {}",
        u(&o["error_ns"]),
        o["offset_ns"],
        offsets
            .iter()
            .map(|w| format!(
                "{}±{}{}",
                w["offset_ns"].as_i64().unwrap() - AHEAD_NS,
                w["error_ns"],
                if w["used"] == true { "" } else { "x" }
            ))
            .collect::<Vec<_>>()
            .join(" ")
    );

    let exact = run(&[]);
    let e = &exact["summary"]["owd_ns"];
    assert_eq!(e["method"], "same_kernel", "{e}");
    assert_eq!(e["offset_ns"].as_i64(), Some(AHEAD_NS), "{e}");
    let checked = e["offsets"].as_array().unwrap();
    assert!(!checked.is_empty(), "{e}");
    assert!(
        checked
            .iter()
            .all(|w| w["holds_exact"] == true && w["used"] == false),
        "{e}"
    );
}
