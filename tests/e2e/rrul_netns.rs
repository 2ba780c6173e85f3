//! Latency under load against ground truth: three namespaces in
//! a line, A (client) — R (router) — B (server), each of R's egresses
//! shaped to 50 Mbit/s by htb with a byte FIFO under it (shared/TESTING.md).
//! This kernel has no fq_codel, cake or netem, so the lever is buffer
//! depth, whose delay is known from its size: a bfifo of L bytes drained at
//! R bit/s holds at most 8·L/R seconds. The bulk flows run cubic (bbr
//! keeps its own queue short).
//!
//! - a deep buffer (1,250,000 bytes, 200 ms) adds at least 150 ms to the
//!   probes' median under load; a shallow one (16,000 bytes, 2.6 ms each
//!   way) keeps their p99 under 10 ms; goodput in the loaded phase is at
//!   least 0.7 × 50 Mbit/s each way and 0.8 × 100 Mbit/s in sum with
//!   either (the deep buffer's over a 20 s loaded phase: its cubic flows
//!   ramp up on a 400 ms ack clock);
//! - the fairness index is Jain's formula over the per-flow goodputs the
//!   result reports, and every part conserves its totals;
//! - the idle phase agrees with a separate run of the probe alone within
//!   10 %, both pinned to one CPU;
//! - a `dscp=EF` part's packets carry the mark on the wire, up (the client
//!   marks) and down (the server marks), and so do a single test's with
//!   `--tos`: an htb class on R that only EF packets enter (a u32 filter on
//!   the TOS byte) counts at least the marked bytes.
//!
//! Needs root and `ip netns`; skips like the `netns` module, and runs alone
//! as the other shaped-link tests do (common/serial.rs).

use std::time::Duration;

use serde_json::Value;

use crate::common::{Path3, ServerProc, TOWARD_A, TOWARD_B, bin, ns_exec, run_ok, u};
use crate::mix::{
    assert_conserved, assert_interval_fairness, assert_interval_retransmits, flow_goodputs, jain,
};

/// The shaped rate each way, bits/s.
const RATE_BPS: f64 = 50e6;
/// A deep buffer: 200 ms at 50 Mbit/s.
const DEEP: &str = "1250000";
/// A shallow buffer: 16,000 bytes, 2.6 ms at 50 Mbit/s.
const SHALLOW: &str = "16000";

/// R's egresses: toward A (the server-to-client way) and toward B.
const VETH_RA: &str = TOWARD_A;
const VETH_RB: &str = TOWARD_B;

/// The A — R — B path (`Path3`) on 10.217.`subnet`.0/24 and
/// 10.217.`subnet`+1.0/24, both of R's egresses shaped to 50 Mbit/s by
/// htb with a bfifo of `limit` bytes under it; deleted on drop (also when
/// a test panics).
struct Bottleneck(Path3);

impl Bottleneck {
    fn new(subnet: u8, limit: &str) -> Option<Bottleneck> {
        let path = Path3::build(217, subnet)?;
        for dev in [VETH_RA, VETH_RB] {
            path.htb_bfifo(dev, "50mbit", limit);
        }
        Some(Bottleneck(path))
    }

    fn tc(&self, args: &[&str]) {
        self.0.tc(args);
    }

    /// A second class on R's egress `dev` (toward B: `VETH_RB`, toward A:
    /// `VETH_RA`) that only packets marked EF (DSCP 46, TOS 0xb8 under the
    /// mask 0xfc) enter: its counters are what crossed the wire with the
    /// mark.
    fn count_ef(&self, dev: &str) {
        self.tc(&[
            "class", "add", "dev", dev, "parent", "1:", "classid", "1:2", "htb", "rate", "50mbit",
        ]);
        self.tc(&[
            "qdisc", "add", "dev", dev, "parent", "1:2", "bfifo", "limit", SHALLOW,
        ]);
        self.tc(&[
            "filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1", "u32",
            "match", "ip", "tos", "0xb8", "0xfc", "flowid", "1:2",
        ]);
    }

    /// Bytes htb class `id` on R's egress `dev` has sent, from `tc -s class
    /// show` (this tc prints no JSON for classes): the line after `class
    /// htb ID ...` reads ` Sent N bytes M pkt ...`.
    fn class_bytes(&self, dev: &str, id: &str) -> u64 {
        let out = run_ok(ns_exec(&self.0.r, "tc").args(["-s", "class", "show", "dev", dev]));
        let text = String::from_utf8_lossy(&out.stdout);
        let head = format!("class htb {id} ");
        let mut lines = text.lines().skip_while(|l| !l.starts_with(&head));
        lines
            .next()
            .unwrap_or_else(|| panic!("no class {id}:\n{text}"));
        let sent = lines.next().unwrap_or_default();
        sent.split_whitespace()
            .nth(1)
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no byte count for class {id}:\n{text}"))
    }

    /// Niced (`common::NICED`), as the client: these tests read the
    /// path's queues in milliseconds, and on a busy host a probe's
    /// response otherwise waits tens of them for a CPU (service p99 20 to
    /// 350 ms in 7 of 10 runs beside three builds, 5.4 ms alone).
    fn server(&self) -> ServerProc {
        self.0.niced_server()
    }

    /// The server in B pinned to CPU 0 (`taskset` execs thrum, so the
    /// child is still the server).
    fn pinned_server(&self) -> ServerProc {
        let mut cmd = ns_exec(&self.0.b, "taskset");
        cmd.args(["-c", "0", bin()]);
        ServerProc::start_with(cmd, &self.0.addr_b(), &[])
    }

    /// The EF class's and the default class's bytes on R's egress `dev`
    /// over `run` (the classes count from their creation: differenced).
    fn classes_over(&self, dev: &str, run: impl FnOnce() -> Value) -> (Value, u64, u64) {
        let before = (self.class_bytes(dev, "1:2"), self.class_bytes(dev, "1:1"));
        let doc = run();
        let after = (self.class_bytes(dev, "1:2"), self.class_bytes(dev, "1:1"));
        (doc, after.0 - before.0, after.1 - before.1)
    }

    /// `thrum run TEST -H server ARGS` in A (no warm-up); its JSON result,
    /// which must be a success.
    fn client(&self, server: &ServerProc, test: &str, args: &[&str]) -> Value {
        self.0
            .client(server, test)
            .niced()
            .args(args)
            .timeout(Duration::from_secs(90))
            .json()
    }

    /// The same on CPU 0 alone, beside a `pinned_server`.
    fn pinned_client(&self, server: &ServerProc, test: &str, args: &[&str]) -> Value {
        self.0
            .client(server, test)
            .under(&["taskset", "-c", "0"])
            .args(args)
            .timeout(Duration::from_secs(90))
            .json()
    }
}

/// The phases of a run through the bottleneck (after no warm-up: the
/// client's default): 3 s idle, `loaded` with the bulk flows (cubic), 2 s
/// recovery.
fn phases(loaded: &'static str) -> [&'static str; 8] {
    [
        "--cc",
        "cubic",
        "--idle",
        "3s",
        "-l",
        loaded,
        "--recovery",
        "2s",
    ]
}

/// rrul_be's bulk flows with only a udp_rr probe, open loop at 50/s: 150
/// samples in the 3 s idle phase, so that a median compared within 10 %
/// is not at the mercy of a few noisy ones (at 10/s, 30 samples, it
/// missed by 11 % once in a full run).
const UDP_MIX: &str = "--mix=tcp_stream*4,tcp_maerts*4,udp_rr@rate=50";

/// The probes' phase an interval lies in (every phase boundary is a tick),
/// or "drain" between loaded and recovery.
fn probe_phase(doc: &Value, iv: &Value) -> &'static str {
    let ph = &doc["summary"]["phases"];
    let (start, end) = (
        iv["start_s"].as_f64().unwrap(),
        iv["end_s"].as_f64().unwrap(),
    );
    ["idle", "loaded", "recovery"]
        .into_iter()
        .find(|name| {
            let p = &ph[*name];
            start >= p["start_s"].as_f64().unwrap() - 1e-6
                && end <= p["end_s"].as_f64().unwrap() + 1e-6
        })
        .unwrap_or("drain")
}

/// Each interval's phase and bulk goodput up and down, Mbit/s: where the
/// loaded phase's goodput went (the flows' ramp, a stall).
fn interval_goodputs(doc: &Value) -> Vec<(String, f64, f64)> {
    let parts = doc["summary"]["parts"].as_array().unwrap();
    let at = |k: usize, dir: &str| -> f64 {
        parts
            .iter()
            .filter(|p| p["direction"] == dir)
            .filter_map(|p| p["intervals"][k]["sum"]["throughput_bps"].as_f64())
            .sum::<f64>()
            / 1e6
    };
    doc["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(k, iv)| (probe_phase(doc, iv).to_string(), at(k, "up"), at(k, "down")))
        .collect()
}

/// The goodput bounds a buffer must meet in the loaded phase (`each` of
/// the shaped rate each way, `sum` of twice it in all), the fairness
/// formula, and conservation per part.
fn check_loaded(doc: &Value, what: &str, each: f64, sum: f64) {
    let loaded = &doc["summary"]["phases"]["loaded"];
    let up = loaded["throughput_up_bps"].as_f64().unwrap();
    let down = loaded["throughput_down_bps"].as_f64().unwrap();
    let ph = &doc["summary"]["phases"];
    let per_interval: Vec<String> = interval_goodputs(doc)
        .iter()
        .map(|(phase, u, d)| format!("{phase} {u:.1}/{d:.1}"))
        .collect();
    eprintln!(
        "{what}: idle p50 {:.3} ms, loaded p50/p99 {:.1}/{:.1} ms, recovery p50 {:.3} ms, up/down {:.1}/{:.1} Mbit/s (recovery {:.1}/{:.1}), fairness {}; per interval up/down Mbit/s: {}",
        probe_ns(doc, "idle", "p50") / 1e6,
        probe_ns(doc, "loaded", "p50") / 1e6,
        probe_ns(doc, "loaded", "p99") / 1e6,
        ph["recovery"]["probe_latency_ns"]["p50"]
            .as_f64()
            .unwrap_or(f64::NAN)
            / 1e6,
        up / 1e6,
        down / 1e6,
        ph["recovery"]["throughput_up_bps"]
            .as_f64()
            .unwrap_or(f64::NAN)
            / 1e6,
        ph["recovery"]["throughput_down_bps"]
            .as_f64()
            .unwrap_or(f64::NAN)
            / 1e6,
        doc["summary"]["fairness"],
        per_interval.join(", ")
    );
    // The recovery phase starts once every bulk flow has read its peer's
    // EOF: no bulk byte arrives in it, and the drain before it took time.
    for dir in ["up", "down"] {
        let rec = ph["recovery"][format!("throughput_{dir}_bps")].as_f64();
        assert_eq!(rec, Some(0.0), "{what}: recovery {dir}");
    }
    assert!(ph["drain_s"].as_f64().unwrap() > 0.0, "{what}: {ph}");
    assert!(up >= each * RATE_BPS, "{what}: up {up}");
    assert!(down >= each * RATE_BPS, "{what}: down {down}");
    assert!(
        up + down >= sum * 2.0 * RATE_BPS,
        "{what}: sum {}",
        up + down
    );
    for dir in ["up", "down"] {
        let x = flow_goodputs(doc, dir);
        let got = doc["summary"]["fairness"][dir].as_f64().unwrap();
        assert!(
            (got - jain(&x)).abs() < 1e-9,
            "{what} {dir}: {got} vs {x:?}"
        );
    }
    // And interval by interval, with the retransmits the cubic flows make
    // at the full FIFO adding up to no more than each part's total.
    assert_interval_fairness(doc, 4);
    assert_interval_retransmits(doc);
    assert_conserved(doc);
}

fn probe_ns(doc: &Value, phase: &str, q: &str) -> f64 {
    doc["summary"]["phases"][phase]["probe_latency_ns"][q]
        .as_f64()
        .unwrap_or_else(|| panic!("no {phase} {q}: {}", doc["summary"]["phases"]))
}

#[test]
fn a_deep_buffer_adds_its_delay_under_load() {
    let Some(path) = Bottleneck::new(10, DEEP) else {
        return;
    };
    let server = path.server();
    // rrul_be: 4 cubic flows each way, a udp_rr and a tcp_rr probe at 10/s.
    // The loaded phase is 20 s, not 8: each direction's acks wait behind
    // the other direction's 200 ms queue, so cubic grows its windows on a
    // 400+ ms, bursty ack clock. The first loaded second carried 30 to 42
    // Mbit/s up (6 runs, per interval), and on a busy host a receiver
    // starved of CPU for a second or two reads its backlog later (seen: 24
    // Mbit/s in one second, 519 the next). Inside an 8 s phase those cost
    // one direction up to a third of its goodput (32 to 48 Mbit/s over 8
    // runs); over 20 s they are diluted: 46.8 to 47.9 Mbit/s each way in
    // 6 runs at load averages of 2 to 9.
    let doc = path.client(&server, "rrul_be", &phases("20s"));
    let lul = doc["summary"]["latency_under_load_ns"]["p50"]
        .as_f64()
        .unwrap();
    // 200 ms of buffer at the bottleneck each way; the probe's request and
    // response each wait behind one of them: at least 150 ms more in all.
    assert!(lul >= 150e6, "latency under load {} ms", lul / 1e6);
    // Drained before the recovery phase, the queue is empty in it: its
    // median is back far below the buffer's 200 ms (measured 0.2 ms; a
    // tenth of the buffer leaves room for a starved host).
    let recovery = probe_ns(&doc, "recovery", "p50");
    assert!(recovery < 20e6, "recovery p50 {} ms", recovery / 1e6);
    assert_eq!(
        lul,
        probe_ns(&doc, "loaded", "p50") - probe_ns(&doc, "idle", "p50")
    );
    // The bounds of a loaded link: both ways.
    check_loaded(&doc, "deep", 0.7, 0.8);
}

#[test]
fn a_shallow_buffer_keeps_the_probes_fast() {
    let Some(path) = Bottleneck::new(12, SHALLOW) else {
        return;
    };
    let server = path.server();
    // A UDP probe: a TCP probe's lost segment waits out a retransmission
    // timeout (200 ms at least), which a shallow buffer's drops make common
    // (measured: loaded p99 15 to 120 ms with tcp_rr); a lost datagram is a
    // lost transaction, not a late one.
    //
    // A run whose probe the host itself held up is set aside and run again
    // (up to four runs): its generator lag p99, how late the probe's own
    // requests left against their schedule, over the 5 ms the bound below
    // leaves above the path's 5.3 ms says the probe's thread waited for a
    // CPU, and then its responses waited too (beside three builds at a
    // load of 6 to 11: lag p99 6 to 1,440 ms, service p99 18 to 245 ms in
    // 7 runs of 10, niced). The fault this test guards against, a response
    // read half a loss timeout late, showed with a lag p99 of 0.13 ms: it
    // is judged in any undisturbed run, and the last run is judged whatever
    // its lag, so a host busy every time fails the test and says so.
    let mut tries = 0;
    let doc = loop {
        tries += 1;
        let doc = path.client(
            &server,
            UDP_MIX,
            &[&phases("8s")[..], &["--percentiles", "99.5"]].concat(),
        );
        let lag = doc["summary"]["parts"][2]["generator_lag_ns"]["p99"]
            .as_f64()
            .unwrap_or(f64::INFINITY);
        if lag < 5e6 || tries == 4 {
            break doc;
        }
        eprintln!(
            "shallow: run {tries} set aside, its probe's generator lag p99 {} ms",
            lag / 1e6
        );
    };
    let p99 = probe_ns(&doc, "loaded", "p99");
    let probe = &doc["summary"]["parts"][2];
    let service = &probe["service_latency_ns"];
    let service_p99 = service["p99"].as_f64().unwrap();
    eprintln!(
        "shallow: loaded p99 {} ms from the intended start; service p99 {} ms, p99.5 {}; generator lag p99 {} ms",
        p99 / 1e6,
        service_p99 / 1e6,
        service["percentiles"][0]["ns"],
        probe["generator_lag_ns"]["p99"]
            .as_f64()
            .unwrap_or(f64::NAN)
            / 1e6
    );
    // 2.6 ms of buffer each way: well under 10 ms at the 99th percentile,
    // on the path. The loaded phase's p99 (response time, from the intended
    // start) also charges the client's own lateness in sending, its
    // generator lag, and that is the host, not the queue: 6.2 ms on a quiet
    // machine (lag p99 3.6 ms), 9.1 ms beside two CPU-bound loops (lag p99
    // 10 ms), 11.1 ms at a load average of 8 (service p99.5 6.8 ms), 83 ms
    // on a busy one (lag p99 30 ms). On a machine whose two
    // CPUs the bulk flows' workers, the router, the server and other tests
    // share, only the service time, from the actual send, is the path's
    // (6.5 ms beside the two loops), so the bound is on that.
    //
    // The service times come for the whole window (idle, loaded, drain,
    // recovery: n_w of them), the loaded phase's n_l among them. If more
    // than 1 % of the loaded ones took over 10 ms, more than 0.01·n_l of
    // all did, and the window's quantile at 1 − 0.01·n_l/n_w would exceed
    // 10 ms; its p99.5 is that or above while the loaded phase holds half
    // the samples or more (8 s of 3 + 8 + 2 and the drain). So p99.5 of
    // the window under 10 ms bounds the loaded phase's service p99.
    let n_l = u(&doc["summary"]["phases"]["loaded"]["probe_latency_ns"]["count"]) as f64;
    let n_w = u(&service["count"]) as f64;
    assert!(n_l >= 0.5 * n_w, "{n_l} loaded of {n_w} service times");
    let p99_5 = service["percentiles"][0]["ns"].as_f64().unwrap();
    assert!(
        p99_5 < 10e6,
        "service p99.5 {} ms (p99 {} ms) in run {tries} of 4 (the earlier ones disturbed by the host)",
        p99_5 / 1e6,
        service_p99 / 1e6
    );
    check_loaded(&doc, "shallow", 0.7, 0.8);
}

/// The scheduler slice (ns) of every thread named `thrum-probe-*` on the
/// machine now, from /proc/PID/task/TID/sched (`se.slice`); None for a
/// thread whose kernel does not report it.
fn probe_thread_slices() -> Vec<Option<u64>> {
    let mut out = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return out;
    };
    for p in procs.flatten() {
        let Ok(tasks) = std::fs::read_dir(p.path().join("task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
            if !comm.starts_with("thrum-probe-") {
                continue;
            }
            let sched = std::fs::read_to_string(t.path().join("sched")).unwrap_or_default();
            out.push(sched.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == "se.slice").then(|| v.trim().parse().ok())?
            }));
        }
    }
    out
}

/// A probe that shares its CPU with bulk workers (both
/// ends, the router and the rest of the host on two CPUs) must not go out
/// late behind them, or the loaded p99 from its intended start carries
/// the tool's lateness instead of the path's queue. Each part of a mix
/// runs on workers of its own, on both ends; a probe's ask the scheduler
/// for a 0.1 ms slice (engine::sched), so a waking probe preempts a bulk
/// sender instead of waiting out its 1.4 ms slice; and a worker at 10/s
/// stops sleeping 500 µs before each send (engine::pacer_spin), so the
/// wake-up of a CPU that was idle or busy (190 µs and up on this VM) is
/// over before the send is due.
#[test]
fn the_probes_do_not_wait_behind_the_bulk_flows() {
    let Some(path) = Bottleneck::new(18, SHALLOW) else {
        return;
    };
    let server = path.server();
    // Where the kernel keeps custom slices (6.12 on), a thread may take
    // the probe's; then the probe workers must have it.
    let granted = std::thread::spawn(|| {
        use thrum::engine::sched::{PROBE_SLICE, set_slice, slice};
        set_slice(PROBE_SLICE).is_ok() && slice().ok() == Some(PROBE_SLICE)
    })
    .join()
    .unwrap_or(false);
    // The lag bound: p99 under 200 µs, against a queue the
    // load built of 3.3 to 3.6 ms here (the loaded median over the idle
    // one, up to 2.6 ms of buffer each way). Measured with this test's
    // debug build on a quiet host: p99 88 µs (it was 222 to 265 µs with
    // the 30 µs spin, and 2.4 to 3.1 ms with the probes on the bulk
    // flows' threads). That holds only
    // where the tool has the CPUs it asks for: on this 2-CPU machine at a
    // load average of 7 to 9 (compilers beside the test), stalls of the
    // whole host put runs over it with either binary (lag p99 1.2 to 112
    // ms, max up to 190 ms), which no placement of ours can beat. So the
    // bound holds when the host had a CPU to spare as the test began (the
    // one-minute load average under the CPU count), as the best of three
    // runs; the placement and the slice are checked always.
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let load: f64 = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0);
    let quiet = load < cpus;
    let mut seen = Vec::new();
    for attempt in 1..=3 {
        // In the loaded phase (after the 3 s idle one), the probe workers
        // of both ends, by name: only a probe part's workers carry it.
        let watch = std::thread::spawn(|| {
            std::thread::sleep(Duration::from_secs(6));
            probe_thread_slices()
        });
        let doc = path.client(&server, UDP_MIX, &phases("8s"));
        let slices = watch.join().unwrap();
        assert!(
            slices.len() >= 2,
            "probe worker threads seen in the loaded phase: {slices:?} (one each end at least)"
        );
        if granted {
            for s in slices.iter().flatten() {
                assert_eq!(*s, 100_000, "probe worker slice {s} ns: {slices:?}");
            }
        }
        let probe = &doc["summary"]["parts"][2];
        assert_eq!(probe["name"], "udp_rr");
        let lag = &probe["generator_lag_ns"];
        let lag_p99 = lag["p99"].as_f64().unwrap();
        let queue = probe_ns(&doc, "loaded", "p50") - probe_ns(&doc, "idle", "p50");
        eprintln!(
            "run {attempt}: probe lag p50 {} µs p99 {} µs max {} µs; queueing delay {} ms; slices {slices:?}",
            u(&lag["p50"]) / 1000,
            lag_p99 / 1e3,
            u(&lag["max"]) / 1000,
            queue / 1e6
        );
        assert!(queue > 1e6, "queueing delay {} ms", queue / 1e6);
        if !quiet {
            eprintln!("load average {load} on {cpus} CPUs: the lag bound is not asserted");
            return;
        }
        if lag_p99 < 200e3 {
            return;
        }
        seen.push(format!(
            "lag p99 {} µs, queue {} ms",
            lag_p99 / 1e3,
            queue / 1e6
        ));
    }
    panic!("the probes' generator lag p99 over 200 µs in 3 runs: {seen:?}");
}

#[test]
fn the_idle_phase_agrees_with_a_lone_probe() {
    let Some(path) = Bottleneck::new(16, SHALLOW) else {
        return;
    };
    // The idle phase is the probe alone on the same path: a separate run of
    // the probe's test at the same rate agrees on the median within 10 %.
    // Unpinned, a sub-millisecond median moves from run to run on this kind
    // of VM by more than that (TESTING.md: ±20 %, a cross-CPU wake-up costs
    // about 75 µs; here 103 to 146 µs): which CPU each end's thread wakes
    // on is the scheduler's draw, not the tool. Client and server (and so
    // the router's forwarding, done in their softirqs) run on CPU 0 alone,
    // where pinned RR is stable to ±3 % on a quiet machine. On a busy one
    // the share of CPU 0 the host leaves still moves it: at a load average
    // of 7, consecutive pinned lone runs read 179 to 293 µs. So the lone
    // probe runs before and after the mix, and the idle median must be
    // within 10 % of the band those runs span (it fell inside the band
    // itself in 5 runs of 6, within 10 % of it in all 6). On a quiet
    // machine, too, consecutive runs of this test read an idle median 32 %
    // over the band (301 µs against 195-228) and 11 % under it (212 µs
    // against 238-242): the draw moves it by more than 10 % either way. What
    // the test guards is that no bulk traffic is in the idle phase, and a
    // bulk flow in it would queue every probe behind the shallow buffer's
    // 2.6 ms. So the idle median must lie between half the band's low end
    // and its high end plus a quarter of that queue (650 µs): wide of the
    // noise, and still a quarter of what one queued bulk flow would add.
    let server = path.pinned_server();
    let lone = || {
        let alone = path.pinned_client(&server, "udp_rr", &["--rate", "50", "-l", "3s"]);
        alone["summary"]["latency_ns"]["p50"].as_f64().unwrap()
    };
    let mut lones = vec![lone()];
    let doc = path.pinned_client(&server, UDP_MIX, &phases("2s"));
    lones.push(lone());
    lones.push(lone());
    let (lo, hi) = lones
        .iter()
        .fold((f64::MAX, 0.0f64), |(a, b), &x| (a.min(x), b.max(x)));
    let idle = probe_ns(&doc, "idle", "p50");
    eprintln!("idle p50 {idle} ns, lone probes' p50 {lones:?} ns");
    // The shallow buffer's delay at 50 Mbit/s: 16,000 B × 8 / 50e6 s.
    let queue_ns = 16_000.0 * 8.0 / 50e6 * 1e9;
    assert!(
        idle >= 0.5 * lo && idle <= hi + queue_ns / 4.0,
        "idle p50 {idle} ns against lone probes' {lones:?} ns (bound: half the lowest, or the highest plus a quarter of the {queue_ns} ns queue)"
    );
    assert_conserved(&doc);
}

/// What an EF class and the default class beside it counted against the
/// bytes of the marked and the unmarked flows: the class counts whole
/// frames (headers too, under a fifth more at these sizes) of the marked
/// flows alone; the unmarked flows and the control connection (never
/// marked) go to the default class.
fn assert_marked(what: &str, marked: u64, unmarked: u64, ef: u64, plain: u64) {
    eprintln!(
        "{what}: EF class {marked} B for {ef} B marked; default class {unmarked} B for {plain} B"
    );
    assert!(marked >= ef, "{what}: EF class {marked} B, marked {ef} B");
    assert!(
        marked < ef + ef / 5 + 100_000,
        "{what}: EF class {marked} B: more than the marked {ef} B"
    );
    assert!(
        unmarked >= plain,
        "{what}: default class {unmarked} B, unmarked {plain} B"
    );
}

#[test]
fn dscp_marks_reach_the_wire() {
    let Some(path) = Bottleneck::new(14, SHALLOW) else {
        return;
    };
    path.count_ef(VETH_RB);
    path.count_ef(VETH_RA);
    let server = path.server();
    let short = ["-l", "2s"];
    let total = |p: &Value, side: &str| u(&p[side]["total"]["bytes_received"]);
    // Up, toward B: the client marks the EF part's sockets.
    let (doc, marked, unmarked) = path.classes_over(VETH_RB, || {
        path.client(&server, "--mix=tcp_stream@dscp=EF,tcp_stream", &short)
    });
    let parts = doc["summary"]["parts"].as_array().unwrap();
    let (ef, plain) = (total(&parts[0], "remote"), total(&parts[1], "remote"));
    assert_marked("up", marked, unmarked, ef, plain);
    assert_conserved(&doc);
    // Down, toward A: the server marks its end of the EF part's flows.
    let (doc, marked, unmarked) = path.classes_over(VETH_RA, || {
        path.client(&server, "--mix=tcp_maerts@dscp=EF,tcp_maerts", &short)
    });
    let parts = doc["summary"]["parts"].as_array().unwrap();
    let (ef, plain) = (total(&parts[0], "local"), total(&parts[1], "local"));
    assert_marked("down", marked, unmarked, ef, plain);
    assert_conserved(&doc);
    // A single test's --tos marks every data socket: all its bytes go to
    // the EF class, and the default class sees only the control
    // connection's few kilobytes (and a SYN if it left unmarked).
    let (doc, marked, unmarked) = path.classes_over(VETH_RB, || {
        path.client(
            &server,
            "tcp_stream",
            &[&short[..], &["--tos", "EF"]].concat(),
        )
    });
    let ef = total(&doc["summary"], "remote");
    assert_marked("--tos", marked, unmarked, ef, 0);
    assert!(
        unmarked < 100_000,
        "--tos: {unmarked} B unmarked beside {ef} B marked"
    );
}
