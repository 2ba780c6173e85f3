//! Latency under load against ground truth (issue 17): three namespaces in
//! a line, A (client) — R (router) — B (server), each of R's egresses
//! shaped to 50 Mbit/s by htb with a byte FIFO under it (shared/TESTING.md).
//! This kernel has no fq_codel, cake or netem, so the lever is buffer
//! depth, whose delay is known from its size: a bfifo of L bytes drained at
//! R bit/s holds at most 8·L/R seconds. The bulk flows run cubic (bbr
//! keeps its own queue short).
//!
//! - a deep buffer (1,250,000 bytes, 200 ms) adds at least 150 ms to the
//!   probes' median under load; a shallow one (16,000 bytes, 2.6 ms each
//!   way) keeps their p99 under 10 ms; goodput is at least 0.7 × 50 Mbit/s
//!   each way and 0.8 × 100 Mbit/s in sum with the shallow buffer, 0.5 and
//!   0.7 with the deep one (whose acks queue behind 200 ms each way);
//! - the fairness index is Jain's formula over the per-flow goodputs the
//!   result reports, and every part conserves its totals;
//! - the idle phase agrees with a separate run of the probe alone;
//! - a `dscp=EF` part's packets carry the mark on the wire: an htb class
//!   on R that only EF packets enter (a u32 filter on the TOS byte) counts
//!   at least the part's bytes.
//!
//! Needs root and `ip netns`; skips like the `netns` module, and takes the
//! lock that keeps shaped-link tests apart.

use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::common::{
    ServerProc, ip, json, netns_add_or_skip, ns_client_cmd, ns_exec, ns_server, one_at_a_time,
    run_cmd, run_ok, u,
};
use crate::mix::{
    assert_conserved, assert_interval_fairness, assert_interval_retransmits, flow_goodputs, jain,
};

/// The shaped rate each way, bits/s.
const RATE_BPS: f64 = 50e6;
/// A deep buffer: 200 ms at 50 Mbit/s.
const DEEP: &str = "1250000";
/// A shallow buffer: 16,000 bytes, 2.6 ms at 50 Mbit/s.
const SHALLOW: &str = "16000";

const VETH_A: &str = "va";
const VETH_RA: &str = "ra";
const VETH_RB: &str = "rb";
const VETH_B: &str = "vb";

/// A — R — B on 10.217.`subnet`.0/24 and 10.217.`subnet`+1.0/24, both of
/// R's egresses shaped; the namespaces carry the process id and the
/// subnet, and are deleted on drop (also when a test panics).
struct Bottleneck {
    a: String,
    r: String,
    b: String,
    subnet: u8,
}

impl Bottleneck {
    fn new(subnet: u8, limit: &str) -> Option<Bottleneck> {
        let pid = std::process::id();
        let [a, r, b] = ["a", "r", "b"].map(|end| format!("thr{pid}l{end}{subnet}"));
        if !netns_add_or_skip(&a) {
            return None;
        }
        let path = Bottleneck { a, r, b, subnet };
        let (a, r, b) = (path.a.as_str(), path.r.as_str(), path.b.as_str());
        ip(&["netns", "add", r]);
        ip(&["netns", "add", b]);
        for ns in [a, r, b] {
            run_ok(ns_exec(ns, "sysctl").args([
                "-qw",
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
            ]));
        }
        ip(&[
            "link", "add", VETH_A, "netns", a, "type", "veth", "peer", "name", VETH_RA, "netns", r,
        ]);
        ip(&[
            "link", "add", VETH_B, "netns", b, "type", "veth", "peer", "name", VETH_RB, "netns", r,
        ]);
        let (near, far) = (subnet, subnet + 1);
        for (ns, dev, addr) in [
            (a, VETH_A, format!("10.217.{near}.1/24")),
            (r, VETH_RA, format!("10.217.{near}.254/24")),
            (r, VETH_RB, format!("10.217.{far}.254/24")),
            (b, VETH_B, format!("10.217.{far}.1/24")),
        ] {
            ip(&["-n", ns, "addr", "add", &addr, "dev", dev]);
            ip(&["-n", ns, "link", "set", dev, "up"]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        ip(&[
            "-n",
            a,
            "route",
            "add",
            "default",
            "via",
            &format!("10.217.{near}.254"),
        ]);
        ip(&[
            "-n",
            b,
            "route",
            "add",
            "default",
            "via",
            &format!("10.217.{far}.254"),
        ]);
        run_ok(ns_exec(r, "sysctl").args(["-qw", "net.ipv4.ip_forward=1"]));
        for dev in [VETH_RA, VETH_RB] {
            path.tc(&[
                "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "1", "r2q",
                "100",
            ]);
            path.tc(&[
                "class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate",
                "50mbit",
            ]);
            path.tc(&[
                "qdisc", "add", "dev", dev, "parent", "1:1", "bfifo", "limit", limit,
            ]);
        }
        Some(path)
    }

    fn tc(&self, args: &[&str]) {
        run_ok(ns_exec(&self.r, "tc").args(args));
    }

    /// A second class on R's egress toward B that only packets marked EF
    /// (DSCP 46, TOS 0xb8 under the mask 0xfc) enter: its counters are what
    /// crossed the wire with the mark.
    fn count_ef(&self) {
        self.tc(&[
            "class", "add", "dev", VETH_RB, "parent", "1:", "classid", "1:2", "htb", "rate",
            "50mbit",
        ]);
        self.tc(&[
            "qdisc", "add", "dev", VETH_RB, "parent", "1:2", "bfifo", "limit", SHALLOW,
        ]);
        self.tc(&[
            "filter", "add", "dev", VETH_RB, "parent", "1:", "protocol", "ip", "prio", "1", "u32",
            "match", "ip", "tos", "0xb8", "0xfc", "flowid", "1:2",
        ]);
    }

    /// Bytes htb class `id` on R's egress toward B has sent, from `tc -s
    /// class show` (this tc prints no JSON for classes): the line after
    /// `class htb ID ...` reads ` Sent N bytes M pkt ...`.
    fn class_bytes(&self, id: &str) -> u64 {
        let out = run_ok(ns_exec(&self.r, "tc").args(["-s", "class", "show", "dev", VETH_RB]));
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

    fn server(&self) -> ServerProc {
        ns_server(&self.b, &format!("10.217.{}.1", self.subnet + 1))
    }

    /// `thrum run ARGS -H server --json` in A, which must succeed.
    fn client(&self, server: &ServerProc, test: &str, args: &[&str]) -> Value {
        let out = run_cmd(
            &mut ns_client_cmd(&self.a, server, test, args),
            Duration::from_secs(90),
        );
        let doc = json(&out);
        assert!(
            out.status.success(),
            "{test} {args:?}: {}\n{}",
            doc["summary"]["error"],
            String::from_utf8_lossy(&out.stderr)
        );
        doc
    }
}

impl Drop for Bottleneck {
    fn drop(&mut self) {
        for ns in [&self.a, &self.r, &self.b] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

/// rrul_be through the bottleneck: 4 cubic flows each way and a udp_rr
/// and a tcp_rr probe at 10/s each; 3 s idle, 8 s loaded, 2 s recovery.
const RRUL: &[&str] = &[
    "--cc",
    "cubic",
    "--warmup",
    "0",
    "--idle",
    "3s",
    "-l",
    "8s",
    "--recovery",
    "2s",
];

/// rrul_be's bulk flows with only a udp_rr probe, open loop at 50/s: 150
/// samples in the 3 s idle phase, so that a median compared within 10 %
/// is not at the mercy of a few noisy ones (at 10/s, 30 samples, it
/// missed by 11 % once in a full run).
const UDP_MIX: &str = "--mix=tcp_stream*4,tcp_maerts*4,udp_rr@rate=50";

/// The goodput bounds a buffer must meet in the loaded phase (`each` of
/// the shaped rate each way, `sum` of twice it in all), the fairness
/// formula, and conservation per part.
fn check_loaded(doc: &Value, what: &str, each: f64, sum: f64) {
    let loaded = &doc["summary"]["phases"]["loaded"];
    let up = loaded["throughput_up_bps"].as_f64().unwrap();
    let down = loaded["throughput_down_bps"].as_f64().unwrap();
    let ph = &doc["summary"]["phases"];
    eprintln!(
        "{what}: idle p50 {:.3} ms, loaded p50/p99 {:.1}/{:.1} ms, recovery p50 {:.3} ms, up/down {:.1}/{:.1} Mbit/s (recovery {:.1}/{:.1}), fairness {}",
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
        doc["summary"]["fairness"]
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
    let _serial = one_at_a_time();
    let Some(path) = Bottleneck::new(10, DEEP) else {
        return;
    };
    let server = path.server();
    let doc = path.client(&server, "rrul_be", RRUL);
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
    // Each direction's acks wait behind the other direction's 200 ms
    // queue, so cubic's window grows on a 400+ ms, bursty ack clock; over
    // 8 s one direction got 32 to 48 Mbit/s (measured, 8 runs), the other
    // 47 to 48. What this test needs of goodput is that the link is loaded
    // both ways: more than half of it each way, 70 % in sum.
    check_loaded(&doc, "deep", 0.5, 0.7);
}

#[test]
fn a_shallow_buffer_keeps_the_probes_fast_and_idle_agrees_with_a_lone_probe() {
    let _serial = one_at_a_time();
    let Some(path) = Bottleneck::new(12, SHALLOW) else {
        return;
    };
    let server = path.server();
    // A UDP probe: a TCP probe's lost segment waits out a retransmission
    // timeout (200 ms at least), which a shallow buffer's drops make common
    // (measured: loaded p99 15 to 120 ms with tcp_rr); a lost datagram is a
    // lost transaction, not a late one.
    let doc = path.client(&server, UDP_MIX, RRUL);
    let p99 = probe_ns(&doc, "loaded", "p99");
    let probe = &doc["summary"]["parts"][2];
    let service_p99 = probe["service_latency_ns"]["p99"].as_f64().unwrap();
    eprintln!(
        "shallow: loaded p99 {} ms from the intended start; service p99 {} ms; generator lag p99 {} ms",
        p99 / 1e6,
        service_p99 / 1e6,
        probe["generator_lag_ns"]["p99"]
            .as_f64()
            .unwrap_or(f64::NAN)
            / 1e6
    );
    // 2.6 ms of buffer each way: well under 10 ms at the 99th percentile,
    // on the path. The response time from the intended start also charges
    // the client's own lateness in sending (its generator lag): on a
    // machine whose two CPUs the bulk flows' workers, the router and the
    // server share, that is the host, not the queue, so the bound is on
    // the service time, from the actual send.
    assert!(service_p99 < 10e6, "service p99 {} ms", service_p99 / 1e6);
    check_loaded(&doc, "shallow", 0.7, 0.8);
    // The idle phase is the probe alone on the same path: a separate run of
    // the probe's test at the same rate agrees on the median within 10 %.
    // An unpinned sub-millisecond median moves from run to run on this
    // kind of VM by about as much (TESTING.md: ±20 % for unpinned RR; here
    // 103 to 146 µs), so the lone probe runs three times and the idle
    // median must fall within 10 % of the band the three span.
    let lone: Vec<f64> = (0..3)
        .map(|_| {
            let alone = path.client(
                &server,
                "udp_rr",
                &["--rate", "50", "-l", "3s", "--warmup", "0"],
            );
            alone["summary"]["latency_ns"]["p50"].as_f64().unwrap()
        })
        .collect();
    let (lo, hi) = lone
        .iter()
        .fold((f64::MAX, 0.0f64), |(a, b), &x| (a.min(x), b.max(x)));
    let idle = probe_ns(&doc, "idle", "p50");
    eprintln!("idle p50 {idle} ns, lone probes' p50 {lone:?} ns");
    // Or within one cross-CPU wake-up (75 µs on this kind of VM,
    // TESTING.md): the mix's idle phase runs both probes and keeps the bulk
    // parts' idle workers, so its probe can wake on the other CPU where a
    // lone probe did not (CI: 152 µs against 118-122 µs).
    let within = |x: f64| x >= 0.9 * lo - 75e3 && x <= 1.1 * hi + 75e3;
    assert!(
        within(idle),
        "idle p50 {idle} ns against lone probes' {lone:?} ns"
    );
}

#[test]
fn dscp_marks_reach_the_wire() {
    let _serial = one_at_a_time();
    let Some(path) = Bottleneck::new(14, SHALLOW) else {
        return;
    };
    path.count_ef();
    let server = path.server();
    let doc = path.client(
        &server,
        "--mix=tcp_stream@dscp=EF,tcp_stream",
        &["-l", "2s", "--warmup", "0"],
    );
    let parts = doc["summary"]["parts"].as_array().unwrap();
    let ef = u(&parts[0]["remote"]["total"]["bytes_received"]);
    let plain = u(&parts[1]["remote"]["total"]["bytes_received"]);
    let (marked, unmarked) = (path.class_bytes("1:2"), path.class_bytes("1:1"));
    eprintln!(
        "EF class {marked} B for the EF part's {ef} B; default class {unmarked} B for {plain} B"
    );
    // The class counts whole frames (headers too) of the marked flow alone;
    // the unmarked flow and the control connection go to the default class.
    assert!(marked >= ef, "EF class {marked} bytes, EF part {ef} bytes");
    assert!(
        marked < ef + ef / 5 + 100_000,
        "EF class {marked} bytes: more than the EF part's"
    );
    assert!(
        unmarked >= plain,
        "default class {unmarked}, unmarked part {plain}"
    );
    assert_conserved(&doc);
}
