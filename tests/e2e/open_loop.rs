//! Open-loop request/response (`--rate`): the schedule, not the responses,
//! decides when transactions start, so a stalled server is charged for
//! every transaction that should have started in the stall.

use std::process::Command;
use std::thread;
use std::time::Duration;

use serde_json::Value;

use crate::common::{
    ServerProc, assert_rejected, assert_schema, f, json, not_beside_floods, run_client, u,
};

/// The open-loop tests the stall test runs (tcp_cc is tcp_crr's machine
/// without the request).
const OPEN_LOOP_TESTS: &[&str] = &["tcp_rr", "udp_rr", "tcp_crr"];

/// `thrum run TEST -H server ... --json` that must succeed.
fn run(server: &ServerProc, test: &str, extra: &[&str]) -> Value {
    let mut args = vec!["run", test, "-H", &server.addr, "--json"];
    args.extend_from_slice(extra);
    let out = run_client(&args, Duration::from_secs(60));
    let doc = json(&out);
    assert!(
        out.status.success(),
        "{test} {extra:?}: {}",
        doc["summary"]["error"]
    );
    assert_schema(&doc);
    doc
}

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("kill")
        .success();
    assert!(ok, "kill {sig} {pid}");
}

/// Run `test` for 5 s at 1,000 transactions/s (open loop) or closed loop,
/// with the server stopped (SIGSTOP) for 300 ms in the middle.
fn stalled_run(test: &str, open: bool) -> Value {
    let server = ServerProc::start(&[]);
    let pid = server.pid();
    let idle_fds = server.open_fds();
    let stopper = thread::spawn(move || {
        // Timed from the client's arrival (its control connection is a new
        // descriptor on the server), not from here: a busy machine may take
        // seconds to start the client. Warm-up 0, set-up milliseconds, so
        // 1.5 s after it is well inside the 5 s window, and the 300 ms
        // stall ends 3 s before the window does.
        let fds = || std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count());
        let t = std::time::Instant::now();
        while fds() <= idle_fds && t.elapsed() < Duration::from_secs(60) {
            thread::sleep(Duration::from_millis(5));
        }
        thread::sleep(Duration::from_millis(1500));
        signal(pid, "-STOP");
        thread::sleep(Duration::from_millis(300));
        signal(pid, "-CONT");
    });
    let mut extra = vec!["-l", "5s", "--warmup", "0", "--nodelay"];
    if open {
        extra.extend_from_slice(&["--rate", "1000"]);
    }
    if test == "udp_rr" {
        // A response held 300 ms is late, not lost.
        extra.extend_from_slice(&["--rr-timeout", "2s"]);
    }
    let doc = run(&server, test, &extra);
    stopper.join().unwrap();
    doc
}

/// The coordinated-omission pair: a 300 ms stall in a 5 s run at 1,000/s.
/// Open loop, the ~300 transactions due in the stall wait for its end, from
/// 0 to 300 ms each: 6 % of all, so p99 of response time is at least
/// 150 ms (the top 1 % waited 250 ms or more). Closed loop the flow is
/// stuck on one transaction for the stall, so it records one slow one
/// among thousands and its p99 stays far below the stall.
#[test]
fn a_stall_is_charged_to_every_transaction_due_in_it() {
    let _quiet = not_beside_floods();
    for &test in OPEN_LOOP_TESTS {
        let open = stalled_run(test, true);
        let s = &open["summary"];
        let p99 = u(&s["latency_ns"]["p99"]);
        assert!(p99 >= 150_000_000, "{test} open loop: p99 {p99} ns");
        // Every transaction is in the histogram, the stalled ones included.
        assert_eq!(
            u(&s["latency_ns"]["count"]),
            u(&s["transactions"]),
            "{test}: each completed transaction has its response time"
        );
        assert!(f(&s["offered_per_s"]) == 1000.0);
        // Service time (from the actual send) sees the stall too: the
        // requests sent into it waited for the server.
        assert!(u(&s["service_latency_ns"]["max"]) >= 150_000_000, "{s}");

        let closed = stalled_run(test, false);
        let c = &closed["summary"];
        let p99 = u(&c["latency_ns"]["p99"]);
        assert!(
            p99 < 150_000_000,
            "{test} closed loop: p99 {p99} ns (one slow transaction among thousands)"
        );
        assert!(c["offered_per_s"].is_null() && c["service_latency_ns"].is_null());
    }
}

/// The offered rate is held: completed transactions/s within 1 % of the
/// schedule's rate below saturation. Over a window of W seconds the
/// counting error is the transactions in flight at its two edges (a few
/// per flow at these rates), far below 1 % of rate × W.
#[test]
fn the_offered_rate_is_held() {
    let _quiet = not_beside_floods();
    let server = ServerProc::start(&[]);
    for (rate, flows) in [("1000", "1"), ("10000", "4")] {
        for arrivals in ["fixed", "poisson"] {
            let doc = run(
                &server,
                "tcp_rr",
                &[
                    "--rate",
                    rate,
                    "--arrivals",
                    arrivals,
                    "-F",
                    flows,
                    "-T",
                    "2".min(flows),
                    "-l",
                    "3s",
                    "--warmup",
                    "500ms",
                    "--nodelay",
                ],
            );
            let s = &doc["summary"];
            let offered: f64 = rate.parse().unwrap();
            let achieved = f(&s["achieved_per_s"]);
            // A generator that stalled (a busy machine) sends what it owes
            // when it wakes: a backlog of up to its worst lag may complete
            // inside the 3 s window on top of the rate. That much slack is
            // the setup's, not the schedule's.
            let stall = u(&s["generator_lag_ns"]["max"]) as f64 / 1e9 / 3.0;
            let off = (achieved / offered - 1.0).abs();
            if arrivals == "fixed" {
                assert!(
                    off < 0.01 + stall,
                    "{rate}/s {arrivals}: achieved {achieved} (stall allowance {stall:.4})"
                );
            } else {
                // Poisson counts over 3 s vary as a Poisson variable:
                // sd = sqrt(rate × 3); 5 sd of slack.
                let n = offered * 3.0;
                let tol = 5.0 * n.sqrt() / n;
                assert!(
                    off < tol.max(0.01) + stall,
                    "{rate}/s {arrivals}: achieved {achieved} (stall allowance {stall:.4})"
                );
            }
            assert_eq!(doc["spec"]["arrivals"], arrivals);
            let lag = &s["generator_lag_ns"];
            assert!(u(&lag["p50"]) <= u(&lag["p99"]) && u(&lag["p99"]) <= u(&lag["max"]));
            // Intervals carry the service time too.
            assert!(
                doc["intervals"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|i| i["service_latency_ns"]["count"].as_u64().unwrap_or(0) > 0)
            );
        }
    }
}

/// Little's law, L = λW: the mean number in flight that the flows integrate
/// from their own queues (`mean_in_flight`, counted from each intended
/// start to its response) equals the achieved rate times the mean response
/// time from the histogram, within 5 %. The two are computed apart (queue
/// lengths and the clock at the flows' own moments against per-transaction
/// timestamps), so a response time taken from the wrong origin (the send
/// instead of the intended start), transactions that leave the queues
/// unrecorded, or rates over another window than the latencies' break it.
/// The physics leaves the window's edges: a transaction that straddles one
/// counts its whole response time in λW but only its part inside the window
/// in L, an error of order W/window (under 0.1 % on an idle machine, where
/// W is tens of µs; a stalled machine can make W a large share of the
/// window), and the histogram's 3-digit buckets.
fn assert_littles_law(what: &str, s: &Value) {
    let lambda = f(&s["achieved_per_s"]);
    let w = f(&s["latency_ns"]["mean"]) / 1e9;
    let l = f(&s["mean_in_flight"]);
    let edges = w / f(&s["duration_s"]);
    assert!(
        l > 0.0 && (l / (lambda * w) - 1.0).abs() < 0.05 + edges,
        "{what}: mean in flight {l}, achieved {lambda}/s x mean response {w} s = {} (edge allowance {edges:.4})",
        lambda * w
    );
}

/// udp_rr holds its offered rate within 1 % at 1k, 10k and 100k
/// transactions/s with 16 flows on 2 threads, client and server on the
/// same loopback, and Little's law holds at each rate.
///
/// The physics of this setup: at 100k/s each of the 16 flows sends every
/// 160 us and the flows are staggered by 10 us, so each client thread wakes
/// every 20 us and the server answers 100k datagrams/s, all on the same CPUs.
/// Closed loop, one debug-build flow makes ~250k transactions/s here, so
/// 100k/s is below saturation; on this 2-CPU VM shared with compiles the
/// generator's lag p99 was 0.1-1.5 ms at 100k/s (the thread is descheduled),
/// which a later catch-up absorbs: the owed requests go out as soon as the
/// thread runs, so the completed count over 3 s still lands within 1 % (it
/// was 100,000.7/s). A stall of the generator that straddles an edge of the
/// window moves up to rate × stall completions across it (seen: a 150 ms
/// stall in the warm-up, its backlog completed in the window, 1,052/s at
/// 1,000/s), so the tolerance is 1 % plus the generator's worst lag over the
/// window's length: on a quiet machine that is 1 %, and a generator that
/// drops, doubles or falls behind for good fails it all the same.
///
/// "Below saturation" is read from the run itself: with `--rr-timeout 2s`
/// a transaction is lost on loopback only when a datagram was dropped, i.e.
/// a socket buffer overflowed because its reader was starved (at 10k/s a
/// 100 ms starvation is 1,000 datagrams, over the default receive buffer's
/// few hundred). Such a run was saturated by the machine, not by thrum's
/// schedule, and the rate and Little's-law checks do not apply to it; it
/// is reported. At 1,000/s a starvation short of 200 ms overflows nothing,
/// so that step must always hold.
#[test]
fn udp_rr_holds_its_rate_to_100k_and_littles_law() {
    // 100k datagrams/s each way takes both CPUs: alone, as the floods are.
    let _solo = crate::common::one_at_a_time();
    let server = ServerProc::start(&[]);
    for rate in ["1000", "10000", "100000"] {
        let doc = run(
            &server,
            "udp_rr",
            &[
                "--rate",
                rate,
                "-F",
                "16",
                "-T",
                "2",
                "-l",
                "3s",
                "--warmup",
                "500ms",
                "--rr-timeout",
                "2s",
            ],
        );
        let s = &doc["summary"];
        let offered: f64 = rate.parse().unwrap();
        let lost = u(&s["lost"]);
        if lost > 0 && rate != "1000" {
            eprintln!(
                "udp_rr {rate}/s: saturated on this machine ({lost} datagrams dropped, generator lag {}): the 1 % check does not apply",
                s["generator_lag_ns"]
            );
            continue;
        }
        assert_eq!(lost, 0, "udp_rr {rate}/s on loopback");
        let achieved = f(&s["achieved_per_s"]);
        let stall_s = u(&s["generator_lag_ns"]["max"]) as f64 / 1e9;
        let tol = 0.01 + stall_s / f(&s["duration_s"]);
        assert!(
            (achieved / offered - 1.0).abs() < tol,
            "udp_rr {rate}/s: achieved {achieved}, generator lag {}",
            s["generator_lag_ns"]
        );
        assert_littles_law(&format!("udp_rr {rate}/s"), s);
    }
    // And for a test of one connection per transaction, and tcp_rr.
    for (test, rate) in [("tcp_crr", "1000"), ("tcp_rr", "5000")] {
        let doc = run(
            &server,
            test,
            &["--rate", rate, "-l", "2s", "--warmup", "200ms", "--nodelay"],
        );
        assert_littles_law(&format!("{test} {rate}/s"), &doc["summary"]);
    }
}

/// Open-loop flags are checked, and combinations that make no sense are
/// refused naming both flags.
#[test]
fn open_loop_flags_are_checked() {
    assert_rejected(&[
        (
            &["run", "tcp_rr", "--rate", "1000", "-b", "4"],
            &["--burst", "--rate"],
        ),
        (
            &["run", "tcp_stream", "--arrivals", "poisson"],
            &["--arrivals", "--rate"],
        ),
        (
            &["run", "tcp_rr", "--max-inflight", "8"],
            &["--max-inflight", "--rate"],
        ),
        (
            &["run", "tcp_rr", "--rate", "1000", "--max-inflight", "0"],
            &["--max-inflight", "1..="],
        ),
        (
            &["run", "tcp_rr", "--rate", "1000", "--arrivals", "bursty"],
            &["--arrivals", "fixed", "poisson"],
        ),
        (
            &["run", "tcp_crr", "--rate", "1000", "--max-inflight", "8"],
            &["--max-inflight", "tcp_crr", "-F"],
        ),
    ]);
}

/// The human table and the keyval lines carry the open-loop figures.
#[test]
fn open_loop_figures_are_printed() {
    let server = ServerProc::start(&[]);
    let args = [
        "run",
        "udp_rr",
        "-H",
        &server.addr,
        "--rate",
        "1000",
        "-l",
        "500ms",
        "--warmup",
        "0",
    ];
    let out = run_client(&args, Duration::from_secs(60));
    let human = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{human}");
    assert!(
        human.contains("open loop  offered 1000/s  achieved ")
            && human.contains("service p50 ")
            && human.contains("generator lag p99 "),
        "{human}"
    );
    let mut kv_args = args.to_vec();
    kv_args.push("--keyval");
    let out = run_client(&kv_args, Duration::from_secs(60));
    let kv = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{kv}");
    for key in [
        "OFFERED_RATE=1000.00\n",
        "ACHIEVED_RATE=",
        "LATE=",
        "P50_SERVICE_LATENCY=",
        "P99_SERVICE_LATENCY=",
        "P99_GENERATOR_LAG=",
    ] {
        assert!(kv.contains(key), "{key} in {kv}");
    }
}

/// Open-loop tcp_rr runs without Nagle. Poisson arrivals put a second
/// request in flight now and then (some gaps are shorter than a round
/// trip); with Nagle on, the server then holds each response until the
/// next request acks the last, and service times become the gaps to the
/// next arrival (median 0.69 × 5 ms here). Without it they stay a
/// loopback round trip: the bound, 1 ms, is 3.5 times below the locked
/// median and far above a busy loopback's.
#[test]
fn open_loop_tcp_rr_is_not_held_by_nagle() {
    let server = ServerProc::start(&[]);
    let doc = run(
        &server,
        "tcp_rr",
        &[
            "--rate",
            "200",
            "--arrivals",
            "poisson",
            "-l",
            "3s",
            "--warmup",
            "0",
        ],
    );
    let s = &doc["summary"];
    let p50 = f(&s["service_latency_ns"]["p50"]);
    assert!(p50 < 1e6, "service p50 {p50} ns: {s}");
}
