//! The analysis of one run: the raw record both ends' samples and totals
//! make ([`Gathered`]) turned into a [`TestResult`].
//!
//! Gathering talks to the network (`client`); this is a pure function of
//! what was gathered, with no socket, clock or file, so it is tested on
//! recorded inputs. Intervals are differences of consecutive cumulative
//! samples, the summary is the sum of the measurement phase's intervals,
//! and the warnings say where the figures cannot be taken at face value.

use std::collections::BTreeMap;
use std::time::Duration;

use super::proto::Rusage;
use crate::io::socket::SocketBuffers;
use crate::io::zerocopy::ZeroCopyCounts;
use crate::plan::{Phase, TestPlan};
use crate::result::{
    Environment, Fairness, Figures, GeneratorLag, Interval, LatencyUnderLoad, PartInterval,
    PartSummary, PhaseFigures, ProbePhases, SCHEMA, Side, Spec, Stability, Summary, TestResult,
    jain,
};
use crate::sensors::Provenance;
use crate::sensors::window::WindowStats;
use crate::stats::calltime::SendRecvTimes;
use crate::stats::counters::Counts;
use crate::stats::latency::{LatencyHistogram, LatencySummary};
use crate::warning::{Code, Warning, Warnings};
use crate::workload::kinds::Loss;

pub(crate) struct LocalSample {
    pub(crate) at: Duration,
    pub(crate) unix_s: f64,
    pub(crate) counts: Vec<Counts>,
    /// The phase of the interval that ends at this sample.
    pub(crate) phase: Phase,
    /// A mix: each part's TCP retransmissions so far (empty otherwise).
    pub(crate) retransmits: Vec<Option<u64>>,
    /// The client interface's counters, read beside `counts` on the
    /// control thread (None where they cannot be read).
    pub(crate) if_counters: Option<crate::sensors::IfCounters>,
}

pub(crate) struct RemoteSample {
    pub(crate) elapsed_ns: u64,
    pub(crate) counts: Vec<Counts>,
    /// A mix: each part's TCP retransmissions so far, the server's end.
    pub(crate) retransmits: Vec<Option<u64>>,
}

/// What one part of a mix leaves on the client: its own histograms and
/// retransmissions (the counters are the part's slice of the samples).
#[derive(Clone, Default)]
pub(crate) struct PartRecord {
    pub(crate) latency: LatencyHistogram,
    pub(crate) interval_latency: BTreeMap<u32, LatencySummary>,
    pub(crate) service_latency: LatencyHistogram,
    pub(crate) service_interval_latency: BTreeMap<u32, LatencySummary>,
    pub(crate) generator_lag: LatencyHistogram,
    pub(crate) local_retransmits: Option<u64>,
    pub(crate) remote_retransmits: Option<u64>,
    /// Probes: each interval's histogram, for the phases.
    pub(crate) interval_histograms: BTreeMap<u32, LatencyHistogram>,
}

impl PartRecord {
    pub(crate) fn of(out: &crate::engine::EngineOutcome) -> PartRecord {
        PartRecord {
            latency: out.latency.clone(),
            interval_latency: out.interval_latency.clone(),
            service_latency: out.service_latency.clone(),
            service_interval_latency: out.service_interval_latency.clone(),
            generator_lag: out.generator_lag.clone(),
            local_retransmits: crate::engine::tcp_retransmits(&out.flows),
            remote_retransmits: None,
            interval_histograms: out.interval_histograms.clone(),
        }
    }
}

/// Everything gathered so far, whatever happens: the raw record of one run.
pub(crate) struct Gathered {
    pub(crate) local: Vec<LocalSample>,
    pub(crate) remote: Vec<Option<RemoteSample>>,
    pub(crate) latency: LatencyHistogram,
    pub(crate) interval_latency: BTreeMap<u32, LatencySummary>,
    /// Open loop: service time, whole run and per interval, and the
    /// generator's lag behind its schedule.
    pub(crate) service_latency: LatencyHistogram,
    pub(crate) service_interval_latency: BTreeMap<u32, LatencySummary>,
    pub(crate) generator_lag: LatencyHistogram,
    pub(crate) local_total: Option<Counts>,
    pub(crate) remote_total: Option<Counts>,
    /// Each flow's totals after the drain, both ends: a mix's parts take
    /// their slices.
    pub(crate) local_final: Vec<Counts>,
    pub(crate) remote_final: Vec<Counts>,
    /// Each part's own record, in the plan's order (one for a single test).
    pub(crate) parts: Vec<PartRecord>,
    /// A phased mix: the ticks (local sample indices) that begin the idle
    /// and loaded phases, end the loaded one, begin the recovery phase (once
    /// the bulk flows have drained) and end it.
    pub(crate) load_bounds: Vec<u32>,
    pub(crate) local_rusage: Option<Rusage>,
    pub(crate) remote_rusage: Option<Rusage>,
    pub(crate) env: Environment,
    pub(crate) server_address: Option<String>,
    pub(crate) warnings: Vec<Warning>,
    pub(crate) local_window: Option<WindowStats>,
    /// The client interface's link speed, for each interval's utilisation.
    pub(crate) link_speed_bps: Option<u64>,
    pub(crate) remote_window: Option<WindowStats>,
    pub(crate) local_provenance: Option<Provenance>,
    pub(crate) remote_provenance: Option<Provenance>,
    pub(crate) local_retransmits: Option<u64>,
    pub(crate) remote_retransmits: Option<u64>,
    pub(crate) local_zerocopy: Option<ZeroCopyCounts>,
    pub(crate) remote_zerocopy: Option<ZeroCopyCounts>,
    /// Bulk flows' send and receive call times (`engine::call_times`).
    pub(crate) local_call_times: Option<SendRecvTimes>,
    pub(crate) remote_call_times: Option<SendRecvTimes>,
    /// Socket buffers as set (`SocketBuffers::as_set`); the server's from
    /// its final message.
    pub(crate) local_socket_buffers: Option<SocketBuffers>,
    pub(crate) remote_socket_buffers: Option<SocketBuffers>,
    /// capacity: the packet-train gaps the server recorded (client to
    /// server; they come in its final report) ...
    pub(crate) train_gaps: Option<crate::stats::dispersion::TrainGaps>,
    /// ... and those the client's own receivers recorded (`--reverse`,
    /// `--both`: server to client).
    pub(crate) local_train_gaps: Option<crate::stats::dispersion::TrainGaps>,
    /// The server runs on this host as a separate process.
    pub(crate) server_on_this_host: bool,
    pub(crate) setup_s: Option<f64>,
    /// The server as the user named it (`host:port`), or `embedded`.
    pub(crate) server_label: String,
    pub(crate) embedded: bool,
    /// The local address data sockets were bound to (`--bind`).
    pub(crate) bind: Option<String>,
    /// This host is a virtual machine: CPU readings are judged by rusage.
    pub(crate) hypervisor: bool,
}

impl Gathered {
    /// An empty record for a run against `server_label`.
    pub(crate) fn new(
        env: Environment,
        server_label: String,
        embedded: bool,
        bind: Option<String>,
        hypervisor: bool,
    ) -> Gathered {
        Gathered {
            local: Vec::new(),
            remote: Vec::new(),
            latency: LatencyHistogram::new(),
            interval_latency: BTreeMap::new(),
            service_latency: LatencyHistogram::new(),
            service_interval_latency: BTreeMap::new(),
            generator_lag: LatencyHistogram::new(),
            local_total: None,
            remote_total: None,
            local_final: Vec::new(),
            remote_final: Vec::new(),
            parts: Vec::new(),
            load_bounds: Vec::new(),
            local_rusage: None,
            remote_rusage: None,
            env,
            server_address: None,
            warnings: Vec::new(),
            local_window: None,
            link_speed_bps: None,
            remote_window: None,
            local_provenance: None,
            remote_provenance: None,
            local_retransmits: None,
            remote_retransmits: None,
            local_zerocopy: None,
            remote_zerocopy: None,
            local_call_times: None,
            remote_call_times: None,
            local_socket_buffers: None,
            remote_socket_buffers: None,
            train_gaps: None,
            local_train_gaps: None,
            server_on_this_host: false,
            setup_s: None,
            server_label,
            embedded,
            bind,
            hypervisor,
        }
    }
}

/// The interval that ends at local sample `k`, both ends' counts of it.
pub(crate) fn interval(plan: &TestPlan, g: &Gathered, k: usize) -> Interval {
    let a = &g.local[k - 1];
    let b = &g.local[k];
    let local: Vec<Counts> = b
        .counts
        .iter()
        .zip(&a.counts)
        .map(|(x, y)| *x - *y)
        .collect();
    let (remote, remote_s) = match (
        g.remote.get(k - 1).and_then(|x| x.as_ref()),
        g.remote.get(k).and_then(|x| x.as_ref()),
    ) {
        (Some(ra), Some(rb)) => (
            rb.counts
                .iter()
                .zip(&ra.counts)
                .map(|(x, y)| *x - *y)
                .collect(),
            rb.elapsed_ns.saturating_sub(ra.elapsed_ns) as f64 / 1e9,
        ),
        _ => (Vec::new(), 0.0),
    };
    let local_s = (b.at - a.at).as_secs_f64();
    let parts = part_intervals(plan, g, k, &local, &remote, local_s, remote_s);
    let sum = Figures::compute(
        plan,
        Counts::sum(&local),
        Counts::sum(&remote),
        local_s,
        remote_s,
    );
    Interval {
        index: (k - 1) as u32,
        phase: b.phase,
        start_s: a.at.as_secs_f64(),
        end_s: b.at.as_secs_f64(),
        unix_end_s: b.unix_s,
        local,
        remote,
        sum,
        latency_ns: g.interval_latency.get(&((k - 1) as u32)).cloned(),
        service_latency_ns: g.service_interval_latency.get(&((k - 1) as u32)).cloned(),
        fairness: interval_fairness(plan, g, k),
        parts,
        link_util_percent: link_util(a, b, g.link_speed_bps),
    }
}

/// The client interface's utilisation each way between two samples: its
/// byte counters' change over the time between them, against the link
/// speed; null where either is unknown.
fn link_util(a: &LocalSample, b: &LocalSample, speed: Option<u64>) -> crate::result::LinkUtil {
    let (Some(x), Some(y), Some(speed)) = (a.if_counters, b.if_counters, speed) else {
        return crate::result::LinkUtil::default();
    };
    let d = y.since(&x);
    let secs = b.at.saturating_sub(a.at).as_secs_f64();
    let util = |bytes| crate::sensors::link_util_percent(bytes, secs, speed);
    crate::result::LinkUtil {
        tx: util(d.tx_bytes),
        rx: util(d.rx_bytes),
    }
}

/// A mix: each part's figures in the interval that ends at local sample
/// `k`, from its slice of both ends' per-flow counts, and its
/// retransmissions (latency is the engine's, added by whoever has it).
fn part_intervals(
    plan: &TestPlan,
    g: &Gathered,
    k: usize,
    local: &[Counts],
    remote: &[Counts],
    local_s: f64,
    remote_s: f64,
) -> Vec<PartInterval> {
    if plan.parts.is_empty() {
        return Vec::new();
    }
    let offsets = plan.part_offsets();
    let part_plans = plan.part_plans();
    let slice =
        |v: &[Counts], i: usize| Counts::sum(v.get(offsets[i]..offsets[i + 1]).unwrap_or(&[]));
    plan.parts
        .iter()
        .zip(&part_plans)
        .enumerate()
        .map(|(i, (part, part_plan))| PartInterval {
            name: Some(part.name.clone()),
            index: (k - 1) as u32,
            phase: g.local[k].phase,
            start_s: g.local[k - 1].at.as_secs_f64(),
            end_s: g.local[k].at.as_secs_f64(),
            sum: Figures::compute(
                part_plan,
                slice(local, i),
                slice(remote, i),
                local_s,
                remote_s,
            ),
            latency_ns: None,
            tcp_retransmits: interval_retransmits(g, i, k),
        })
        .collect()
}

/// Part `i`'s TCP retransmissions in the interval that ends at local
/// sample `k`: both ends' TCP_INFO at the two ticks, differenced; the
/// client's alone when the server's samples lack them. None for a part
/// without long-lived TCP connections.
fn interval_retransmits(g: &Gathered, i: usize, k: usize) -> Option<u64> {
    let at = |v: &[Option<u64>]| v.get(i).copied().flatten();
    let local = at(&g.local[k].retransmits)
        .map(|b| b.saturating_sub(at(&g.local[k - 1].retransmits).unwrap_or(0)));
    let remote = match (
        g.remote.get(k - 1).and_then(Option::as_ref),
        g.remote.get(k).and_then(Option::as_ref),
    ) {
        (Some(a), Some(b)) => {
            at(&b.retransmits).map(|y| y.saturating_sub(at(&a.retransmits).unwrap_or(0)))
        }
        _ => None,
    };
    match (local, remote) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
    }
}

/// A mix with bulk flows: Jain's index over each direction's per-flow
/// goodputs in the interval that ends at local sample `k`, each flow's
/// bytes as its receiver counted them (as `summary.fairness` over the
/// loaded phase). None without bulk parts.
fn interval_fairness(plan: &TestPlan, g: &Gathered, k: usize) -> Option<Fairness> {
    if plan.parts.is_empty() {
        return None;
    }
    let offsets = plan.part_offsets();
    let (mut up, mut down) = (Vec::new(), Vec::new());
    for (i, part) in plan.parts.iter().enumerate() {
        if !part.test.is_stream() {
            continue;
        }
        let goodput = flow_goodput(g, part.test, offsets[i]..offsets[i + 1], (k - 1, k));
        match crate::plan::mix::direction(part.test) {
            "up" => up.extend(goodput),
            "down" => down.extend(goodput),
            _ => {}
        }
    }
    (!up.is_empty() || !down.is_empty()).then(|| Fairness {
        up: jain(&up),
        down: jain(&down),
    })
}

/// The record of part `i` of a mix alone: its slice of every sample and
/// total, its own histograms; the session's environment and readings.
fn part_record(g: &Gathered, range: std::ops::Range<usize>, rec: &PartRecord) -> Gathered {
    let slice = |v: &[Counts]| {
        v.get(range.clone())
            .map(<[Counts]>::to_vec)
            .unwrap_or_default()
    };
    let mut p = Gathered::new(
        g.env.clone(),
        g.server_label.clone(),
        g.embedded,
        g.bind.clone(),
        g.hypervisor,
    );
    p.local = g
        .local
        .iter()
        .map(|l| LocalSample {
            at: l.at,
            unix_s: l.unix_s,
            counts: slice(&l.counts),
            phase: l.phase,
            retransmits: Vec::new(),
            if_counters: l.if_counters,
        })
        .collect();
    p.remote = g
        .remote
        .iter()
        .map(|r| {
            r.as_ref().map(|r| RemoteSample {
                elapsed_ns: r.elapsed_ns,
                counts: slice(&r.counts),
                retransmits: Vec::new(),
            })
        })
        .collect();
    p.latency = rec.latency.clone();
    p.interval_latency = rec.interval_latency.clone();
    p.service_latency = rec.service_latency.clone();
    p.service_interval_latency = rec.service_interval_latency.clone();
    p.generator_lag = rec.generator_lag.clone();
    p.local_final = slice(&g.local_final);
    p.remote_final = slice(&g.remote_final);
    p.local_total = g.local_total.map(|_| Counts::sum(&p.local_final));
    p.remote_total = g.remote_total.map(|_| Counts::sum(&p.remote_final));
    p.local_retransmits = rec.local_retransmits;
    p.remote_retransmits = rec.remote_retransmits;
    p.server_on_this_host = g.server_on_this_host;
    p.setup_s = g.setup_s;
    p.server_address = g.server_address.clone();
    p
}

/// The result of a mix: each part analysed as the test it is, alone, and
/// the session's result with the parts in `summary.parts`. The session's
/// own figures of merit are left out: a sum over different tests' flows
/// means nothing (the parts, phases and fairness carry the figures).
pub(crate) fn assemble_mix(plan: &TestPlan, g: Gathered, error: Option<String>) -> TestResult {
    let offsets = plan.part_offsets();
    let held = plan.held_parts();
    // Over the loaded phase when there is one: the bulk flows run only then.
    let loaded = loaded_window(&g);
    let window = loaded.unwrap_or_else(|| measure_window(&g));
    let mut parts = Vec::with_capacity(plan.parts.len());
    for (i, (part, pplan)) in plan.parts.iter().zip(plan.part_plans()).enumerate() {
        let rec = g.parts.get(i).cloned().unwrap_or_default();
        let pg = part_record(&g, offsets[i]..offsets[i + 1], &rec);
        // A bulk part held for the loaded phase is measured over it, as
        // its flows' goodputs and the phase table are: over the whole
        // window its figure would be diluted by the idle and recovery
        // phases it sat out (issue 29).
        let over = loaded.filter(|_| held.get(i).copied().unwrap_or(false));
        let r = assemble_over(&pplan, pg, error.clone(), over);
        let flow_throughput_bps = if part.test.is_stream() {
            flow_goodput(&g, part.test, offsets[i]..offsets[i + 1], window)
        } else {
            Vec::new()
        };
        let tcp_retransmits = match (rec.local_retransmits, rec.remote_retransmits) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
        let mut summary = r.summary;
        // The session's warnings are said once, at the top.
        summary.warnings = Warnings::default();
        summary.error = None;
        parts.push(PartSummary {
            name: part.name.clone(),
            test: part.test,
            flows: part.flows,
            direction: crate::plan::mix::direction(part.test),
            tos: pplan.tos,
            flow_throughput_bps,
            tcp_retransmits,
            summary: Box::new(summary),
            intervals: r
                .intervals
                .iter()
                .map(|iv| PartInterval {
                    name: None,
                    index: iv.index,
                    phase: iv.phase,
                    start_s: iv.start_s,
                    end_s: iv.end_s,
                    sum: iv.sum.clone(),
                    latency_ns: iv.latency_ns.clone(),
                    tcp_retransmits: interval_retransmits(&g, i, iv.index as usize + 1),
                })
                .collect(),
        });
    }
    let phases = probe_phases(plan, &g);
    let fairness = {
        let of = |dir: &str| -> Vec<f64> {
            parts
                .iter()
                .filter(|p| p.direction == dir)
                .flat_map(|p| p.flow_throughput_bps.iter().copied())
                .collect()
        };
        let (up, down) = (of("up"), of("down"));
        (!up.is_empty() || !down.is_empty()).then(|| Fairness {
            up: jain(&up),
            down: jain(&down),
        })
    };
    let mut r = assemble(plan, g, error);
    let s = &mut r.summary;
    s.latency_under_load_ns = phases.as_ref().and_then(|ph| {
        let (idle, loaded) = (
            ph.idle.probe_latency_ns.as_ref()?,
            ph.loaded.probe_latency_ns.as_ref()?,
        );
        Some(LatencyUnderLoad {
            p50: loaded.p50 as i64 - idle.p50 as i64,
            p99: loaded.p99 as i64 - idle.p99 as i64,
        })
    });
    s.phases = phases;
    s.fairness = fairness;
    // The session's stability is a sum over unlike parts, and in a phased
    // mix the bulk flows are idle by design outside the loaded phase:
    // neither a trend nor a stalled flow says anything there.
    s.warnings
        .0
        .retain(|w| !matches!(w.code, Code::Trend | Code::FlowStalled));
    s.throughput_bps = None;
    s.throughput_bps_c2s = None;
    s.throughput_bps_s2c = None;
    s.throughput_bps_sent = None;
    s.transactions_per_s = None;
    s.transactions = None;
    s.latency_ns = None;
    s.histogram = None;
    s.offered_per_s = None;
    s.achieved_per_s = None;
    s.late = None;
    s.service_latency_ns = None;
    s.generator_lag_ns = None;
    s.datagrams_sent = None;
    s.datagrams_received = None;
    s.lost = None;
    s.reordered = None;
    s.duplicates = None;
    s.stability_cv = None;
    s.trend_percent = None;
    s.parts = parts;
    for iv in &mut r.intervals {
        iv.latency_ns = None;
        iv.service_latency_ns = None;
        // Each part's intervals are in `summary.parts[].intervals`.
        iv.parts = Vec::new();
    }
    r
}

/// Two local sample indices: a stretch of the run between two ticks.
type Window = (usize, usize);

/// The loaded phase of a phased mix, when all its bounds were reached.
fn loaded_window(g: &Gathered) -> Option<Window> {
    match g.load_bounds[..] {
        [_, a, b, _, _] => Some((a as usize, b as usize)),
        _ => None,
    }
}

/// The measurement window: from the first tick of the measure phase to the last.
fn measure_window(g: &Gathered) -> Window {
    let first = g.local.iter().position(|l| l.phase == Phase::Measure);
    let last = g.local.iter().rposition(|l| l.phase == Phase::Measure);
    match (first, last) {
        // Sample k closes the interval (k-1, k] of its phase.
        (Some(a), Some(b)) => (a.saturating_sub(1), b),
        _ => (0, 0),
    }
}

fn window_s(g: &Gathered, (a, b): Window) -> f64 {
    match (g.local.get(a), g.local.get(b)) {
        (Some(x), Some(y)) if b > a => (y.at - x.at).as_secs_f64(),
        _ => 0.0,
    }
}

/// Bytes the receiving end of flow `f` took in over the window: the
/// server for what the client sent, the client for what the server sent.
fn received(g: &Gathered, f: usize, (a, b): Window, by_server: bool) -> u64 {
    if by_server {
        match (
            g.remote.get(a).and_then(Option::as_ref),
            g.remote.get(b).and_then(Option::as_ref),
        ) {
            (Some(x), Some(y)) => {
                let at = |s: &RemoteSample| s.counts.get(f).map_or(0, |c| c.bytes_received);
                at(y).saturating_sub(at(x))
            }
            _ => 0,
        }
    } else {
        let at = |k: usize| {
            g.local
                .get(k)
                .and_then(|l| l.counts.get(f))
                .map_or(0, |c| c.bytes_received)
        };
        at(b).saturating_sub(at(a))
    }
}

/// Each flow's goodput over the window, bits/s, as its receiver counted it.
fn flow_goodput(
    g: &Gathered,
    test: crate::plan::TestKind,
    flows: std::ops::Range<usize>,
    w: Window,
) -> Vec<f64> {
    let secs = window_s(g, w);
    let down = crate::plan::mix::direction(test) == "down";
    flows
        .map(|f| {
            let bytes = received(g, f, w, !down);
            if secs > 0.0 {
                bytes as f64 * 8.0 / secs
            } else {
                0.0
            }
        })
        .collect()
}

/// The probes' latency and the goodput each way in the idle, loaded and
/// recovery phases of a phased mix; None when the run did not reach the
/// end of its recovery phase.
fn probe_phases(plan: &TestPlan, g: &Gathered) -> Option<ProbePhases> {
    let [b0, b1, b2, b3, b4] = g.load_bounds[..] else {
        return None;
    };
    let offsets = plan.part_offsets();
    let t0 = |k: u32| g.local.get(k as usize).map_or(0.0, |l| l.at.as_secs_f64());
    let phase = |a: u32, b: u32| {
        let w = (a as usize, b as usize);
        let secs = window_s(g, w);
        let mut hist = LatencyHistogram::new();
        let (mut up, mut down) = (0u64, 0u64);
        for (i, part) in plan.parts.iter().enumerate() {
            let flows = offsets[i]..offsets[i + 1];
            if part.is_probe() {
                if let Some(rec) = g.parts.get(i) {
                    for (_, h) in rec.interval_histograms.range(a..b) {
                        hist.merge(h);
                    }
                }
                continue;
            }
            match crate::plan::mix::direction(part.test) {
                "up" => up += flows.map(|f| received(g, f, w, true)).sum::<u64>(),
                "down" => down += flows.map(|f| received(g, f, w, false)).sum::<u64>(),
                "both" => {
                    up += flows.clone().map(|f| received(g, f, w, true)).sum::<u64>();
                    down += flows.map(|f| received(g, f, w, false)).sum::<u64>();
                }
                _ => {}
            }
        }
        let bps = |bytes: u64| {
            if secs > 0.0 {
                bytes as f64 * 8.0 / secs
            } else {
                0.0
            }
        };
        PhaseFigures {
            start_s: t0(a),
            end_s: t0(b),
            probe_latency_ns: hist.summary_with(&plan.percentiles),
            throughput_up_bps: bps(up),
            throughput_down_bps: bps(down),
        }
    };
    Some(ProbePhases {
        idle: phase(b0, b1),
        loaded: phase(b1, b2),
        recovery: phase(b3, b4),
        drain_s: t0(b3) - t0(b2),
    })
}

/// The result of a run from its record; `error` is why it ended early.
/// Over 120 lines on purpose: most of it is the summary's fields, one per
/// line, each from a figure computed above (`remote_window_s`, `sent_bps`,
/// `Figures::compute`, `Stability::of`); splitting it would scatter one
/// table over several functions.
pub(crate) fn assemble(plan: &TestPlan, g: Gathered, error: Option<String>) -> TestResult {
    assemble_over(plan, g, error, None)
}

/// [`assemble`] with the summary's window narrowed to the measure
/// intervals within `over` (a phased mix's loaded phase, for the bulk parts
/// that ran only in it); the intervals stay all of them.
fn assemble_over(
    plan: &TestPlan,
    mut g: Gathered,
    error: Option<String>,
    over: Option<Window>,
) -> TestResult {
    let intervals: Vec<Interval> = (1..g.local.len()).map(|k| interval(plan, &g, k)).collect();
    // Interval `index` ends at sample `index + 1`.
    let within =
        |i: &Interval| over.is_none_or(|(a, b)| a <= i.index as usize && (i.index as usize) < b);
    let measure: Vec<&Interval> = intervals
        .iter()
        .filter(|i| i.phase == Phase::Measure && within(i))
        .collect();
    // fold from +0.0: an empty f64 sum is -0.0.
    let local_s: f64 = measure.iter().fold(0.0, |a, i| a + (i.end_s - i.start_s));
    let local_w = Counts::sum(measure.iter().map(|i| &i.sum.local));
    let remote_w = Counts::sum(measure.iter().map(|i| &i.sum.remote));
    // The server's window on its own clock, when all its samples arrived.
    let remote_complete = measure.iter().all(|i| !i.remote.is_empty());
    let remote_s = if remote_complete {
        remote_window_s(&g, &measure)
    } else {
        0.0
    };
    let mut warnings = std::mem::take(&mut g.warnings);
    if !measure.is_empty() && !remote_complete && error.is_none() {
        warnings.push(Warning::new(
            Code::ServerSamplesMissing,
            "some server samples did not arrive; server-side figures are incomplete",
        ));
    }
    // A window of zero length (e.g. the server's samples never came) has no rate.
    let bps = |bytes: u64, secs: f64| (secs > 0.0).then(|| bytes as f64 * 8.0 / secs);
    let fig = Figures::compute(plan, local_w, remote_w, local_s, remote_s);
    // The client's senders: every flow but those a reversed direction
    // turned into receivers.
    let sending = (0..plan.flows)
        .filter(|&f| plan.test.desc().flow_ways(plan, f).client_sends)
        .count();
    if let (Some(rate), Some(sent)) = (plan.rate_bps, bps(local_w.bytes_sent, local_s)) {
        let wanted = rate as f64 * sending as f64;
        if sent < 0.95 * wanted && error.is_none() {
            warnings.push(Warning::new(
                Code::RateNotReached,
                format!(
                    "--rate asked for {} in all, the senders reached {} ({:.0} %)",
                    crate::units::BitsPerSec(wanted),
                    crate::units::BitsPerSec(sent),
                    100.0 * sent / wanted
                ),
            ));
        }
    }
    let latency = g.latency.summary_with(&plan.percentiles);
    let is_stream = plan.test.is_stream();
    let stability = Stability::of(plan, &measure, plan.transactions.is_some());
    if error.is_none() {
        warnings.extend(stability.warnings);
    }
    let test = plan.test.desc();
    let sent_bps = if is_stream && !measure.is_empty() {
        sent_bps(test.ways(plan), &local_w, local_s, &remote_w, remote_s)
    } else {
        None
    };
    let datagrams = test.loss == Loss::Datagrams;
    let mut summary = Summary {
        duration_s: local_s,
        throughput_bps: fig.throughput_bps,
        throughput_bps_c2s: fig.throughput_bps_c2s,
        throughput_bps_s2c: fig.throughput_bps_s2c,
        throughput_bps_sent: sent_bps,
        transactions_per_s: fig.transactions_per_s,
        transactions: (!is_stream).then_some(local_w.transactions),
        histogram: (!is_stream && latency.is_some()).then(|| g.latency.to_base64()),
        latency_ns: if is_stream { None } else { latency },
        offered_per_s: plan.offered_per_s.map(|r| r as f64),
        achieved_per_s: plan.offered_per_s.and(fig.transactions_per_s),
        late: plan.offered_per_s.map(|_| local_w.late),
        service_latency_ns: plan
            .offered_per_s
            .and_then(|_| g.service_latency.summary_with(&plan.percentiles)),
        generator_lag_ns: plan
            .offered_per_s
            .and_then(|_| g.generator_lag.summary())
            .map(|s| GeneratorLag {
                p50: s.p50,
                p99: s.p99,
                max: s.max,
            }),
        mean_in_flight: plan
            .offered_per_s
            .filter(|_| local_s > 0.0)
            .map(|_| local_w.in_flight_ns as f64 / (local_s * 1e9)),
        stability_cv: stability.cv,
        trend_percent: stability.trend_percent,
        interface: None,
        tx_packets_per_s: None,
        rx_packets_per_s: None,
        link_speed_bps: None,
        link_util_percent: Default::default(),
        capacity_bps: None,
        capacity_interval_bps: None,
        probe_load_fraction: None,
        shaper: None,
        dispersion_histogram: None,
        datagrams_sent: datagrams.then_some(local_w.datagrams_sent),
        datagrams_received: datagrams.then_some(remote_w.datagrams_received),
        lost: match test.loss {
            Loss::Datagrams => Some(remote_w.lost.saturating_sub(remote_w.reordered)),
            Loss::Transactions => Some(local_w.lost),
            Loss::None => None,
        },
        reordered: datagrams.then_some(remote_w.reordered),
        duplicates: datagrams.then_some(remote_w.duplicates),
        local: Side::new(
            local_w,
            local_s,
            g.local_total.unwrap_or_default(),
            g.local_rusage,
        ),
        remote: Side::new(
            remote_w,
            remote_s,
            g.remote_total.unwrap_or_default(),
            g.remote_rusage,
        ),
        setup_s: g.setup_s,
        warnings: Warnings(warnings),
        error,
        ..Summary::default()
    };
    apply_windows(plan, &fig, &g, &mut summary);
    apply_capacity(&g, plan.send_bytes, &mut summary);
    TestResult {
        schema: SCHEMA,
        test: plan.test,
        spec: Spec {
            plan: plan.clone(),
            server: g.server_label,
            server_address: g.server_address,
            embedded_server: g.embedded,
            bind: g.bind,
        },
        environment: g.env,
        provenance: crate::result::Provenances {
            local: g.local_provenance,
            remote: g.remote_provenance,
        },
        intervals,
        summary,
        iterations: Vec::new(),
        confidence: None,
    }
}

/// capacity: each direction's estimate from its receivers' train gaps,
/// and the probe's own average load (its frames, as the link carries
/// them) over it. The top-level fields carry client to server when it was
/// measured (what scripts read), else server to client.
fn apply_capacity(g: &Gathered, payload: u64, s: &mut Summary) {
    let up = g
        .train_gaps
        .as_ref()
        .and_then(|t| capacity_of(t, payload, s.local.send_bps, "client to server", s));
    let down = g
        .local_train_gaps
        .as_ref()
        .and_then(|t| capacity_of(t, payload, s.remote.send_bps, "server to client", s));
    if g.train_gaps.is_none() && g.local_train_gaps.is_none() {
        return;
    }
    if let Some(c) = up.as_ref().or(down.as_ref()) {
        s.capacity_bps = Some(c.capacity_bps);
        s.capacity_interval_bps = Some(c.capacity_interval_bps);
        s.probe_load_fraction = Some(c.probe_load_fraction);
        s.shaper = Some(c.shaper);
        s.dispersion_histogram = Some(c.dispersion_histogram.clone());
    }
    s.capacity_by_direction = Some(crate::result::CapacityDirections { c2s: up, s2c: down });
}

/// One direction's estimate from the gaps its receivers saw, the probe
/// sending datagrams of `payload` bytes, `payload_bps` on average; None
/// (and a warning naming the direction) when too few trains arrived whole.
fn capacity_of(
    gaps: &crate::stats::dispersion::TrainGaps,
    payload: u64,
    payload_bps: f64,
    way: &str,
    s: &mut Summary,
) -> Option<crate::result::CapacityEstimate> {
    let Some(e) = crate::stats::dispersion::estimate(gaps) else {
        if s.error.is_none() {
            s.warnings.push(Warning::new(
                Code::CapacityNoEstimate,
                format!(
                    "capacity {way}: too few trains arrived whole for an estimate ({} trains, {} broken, {} of {} datagrams lost)",
                    gaps.trains,
                    gaps.broken,
                    gaps.lost,
                    gaps.datagrams + gaps.lost
                ),
            ));
        }
        return None;
    };
    let payload = payload.max(1);
    let wire_bps = payload_bps * gaps.frame_bytes as f64 / payload as f64;
    if let Some(sender) = e.sender_rate_bps.filter(|_| e.sender_limited()) {
        s.warnings.push(Warning::new(
            Code::CapacitySenderLimited,
            format!(
                "capacity {way}: trains of up to {n} packets arrived about as fast as the sender put them out ({} against the sender's {}): nothing on the path slowed them, so the estimate is not the path's capacity but the sender's limit (its CPU; the path carries more) or the burst of a token bucket deeper than {n} packets (its sustained rate unseen); larger packets (--packet-size) take the sender less time per bit",
                crate::units::BitsPerSec(e.capacity_bps),
                crate::units::BitsPerSec(sender),
                n = e.longest_train,
            ),
        ));
    }
    let offered = gaps.datagrams + gaps.lost;
    Some(crate::result::CapacityEstimate {
        capacity_bps: e.capacity_bps,
        capacity_interval_bps: e.interval_bps,
        probe_load_fraction: wire_bps / e.capacity_bps,
        shaper: e.shaper,
        dispersion_histogram: e.histogram,
        trains: gaps.trains,
        broken: gaps.broken,
        datagrams_received: gaps.datagrams,
        datagrams_lost: gaps.lost,
        loss_percent: (offered > 0).then(|| 100.0 * gaps.lost as f64 / offered as f64),
        sender_rate_bps: e.sender_rate_bps,
    })
}

/// The server's measurement window on its own clock: the sum of its
/// measure intervals, between its samples.
fn remote_window_s(g: &Gathered, measure: &[&Interval]) -> f64 {
    measure
        .iter()
        .map(|i| {
            let k = i.index as usize;
            let a = g.remote[k].as_ref().map_or(0, |r| r.elapsed_ns);
            let b = g.remote[k + 1].as_ref().map_or(0, |r| r.elapsed_ns);
            b.saturating_sub(a) as f64 / 1e9
        })
        // fold from +0.0: an empty f64 sum is -0.0.
        .fold(0.0, |a, x| a + x)
}

/// What the senders handed to the kernel (bits/s), each direction counted
/// at its sender, summed over the directions the test's flows carry.
fn sent_bps(
    test: crate::workload::kinds::Ways,
    local: &Counts,
    local_s: f64,
    remote: &Counts,
    remote_s: f64,
) -> Option<f64> {
    // A window of zero length (e.g. the server's samples never came) has no rate.
    let bps = |bytes: u64, secs: f64| (secs > 0.0).then(|| bytes as f64 * 8.0 / secs);
    let c2s = test.client_sends.then(|| bps(local.bytes_sent, local_s));
    let s2c = test
        .client_receives
        .then(|| bps(remote.bytes_sent, remote_s));
    match (c2s, s2c) {
        (Some(a), Some(b)) => a.zip(b).map(|(a, b)| a + b),
        (Some(x), None) | (None, Some(x)) => x,
        (None, None) => None,
    }
}

/// CPU, service demand, packet counters and retransmissions of both ends
/// from their window readings, and the warnings they call for.
fn apply_windows(plan: &TestPlan, fig: &Figures, g: &Gathered, s: &mut Summary) {
    let per_kb = plan.test.is_stream();
    let units_per_s = if per_kb {
        fig.throughput_bps.unwrap_or(0.0) / 8.0
    } else {
        fig.transactions_per_s.unwrap_or(0.0)
    };
    let cpu_s =
        |w: &Option<WindowStats>| w.as_ref().and_then(|w| w.rusage).map_or(0.0, |r| r.cpu_s());
    let hypervisor = g.hypervisor;
    let embedded = g.embedded;
    let mut warnings = Vec::new();
    for (end, side, window, other) in [
        ("local", &mut s.local, &g.local_window, &g.remote_window),
        ("remote", &mut s.remote, &g.remote_window, &g.local_window),
    ] {
        if let Some(w) = window {
            side.apply_window(
                &crate::result::CpuBasis {
                    end,
                    window: w,
                    units_per_s,
                    per_kb,
                    other_thrum_cpu_s: if g.server_on_this_host {
                        cpu_s(other)
                    } else {
                        0.0
                    },
                    hypervisor,
                    warn: end == "local" || !(g.server_on_this_host || embedded),
                },
                &mut warnings,
            );
        }
    }
    s.local.tcp_retransmits = g.local_retransmits;
    s.remote.tcp_retransmits = g.remote_retransmits;
    s.local.zerocopy = g.local_zerocopy;
    s.remote.zerocopy = g.remote_zerocopy;
    s.local.call_times = g.local_call_times.clone();
    s.remote.call_times = g.remote_call_times.clone();
    s.local.socket_buffers = g.local_socket_buffers;
    s.remote.socket_buffers = g.remote_socket_buffers;
    if plan.zerocopy {
        warnings.extend(zerocopy_warnings(plan, g));
    }
    s.interface = s.local.interface.clone();
    s.tx_packets_per_s = s.local.tx_packets_per_s;
    s.rx_packets_per_s = s.local.rx_packets_per_s;
    s.link_speed_bps = s.local.link_speed_bps;
    s.link_util_percent = s.local.link_util_percent;
    if s.error.is_none() {
        if let Some(w) = packets_warning(plan, s, g) {
            warnings.push(w);
        }
        s.warnings.extend(warnings);
    }
}

/// Copied sends above this share of completions (percent) get a warning.
const ZEROCOPY_COPIED_WARN_PERCENT: f64 = 50.0;

/// `--zerocopy`: say when the kernel copied most sends anyway, and when a
/// sending server did not report any (an older thrum ignores the option).
fn zerocopy_warnings(plan: &TestPlan, g: &Gathered) -> Vec<Warning> {
    let mut w = Vec::new();
    let server_sends = plan.test.desc().server_sends();
    if server_sends && g.remote_zerocopy.is_none() {
        w.push(Warning::new(Code::ZerocopyNotReported, "--zerocopy: the server reported no zero-copy sends (a thrum server older than the option sends with copies)"));
    }
    for (end, zc) in [("local", &g.local_zerocopy), ("remote", &g.remote_zerocopy)] {
        if let Some(zc) = zc {
            let pct = zc.copied_percent();
            if pct > ZEROCOPY_COPIED_WARN_PERCENT {
                w.push(Warning::new(Code::ZerocopyCopied, format!(
                    "--zerocopy: the kernel copied {pct:.0} % of {end} sends ({} of {} completed; loopback/veth deliver through a copy)",
                    zc.copied, zc.completions
                )));
            }
        }
    }
    w
}

/// Largest header overhead of one segment (IPv6 + TCP with timestamps).
const SEGMENT_HEADERS: u64 = 40 + 32;

/// RR tests whose requests and responses each fit one segment should move
/// one packet per message each way (two on loopback, where each packet is
/// counted leaving and arriving); when packets/s and transactions/s part by
/// more than 2 %, segments carried several messages (TCP coalescing, --burst)
/// or were retransmitted.
fn packets_warning(plan: &TestPlan, s: &Summary, g: &Gathered) -> Option<Warning> {
    if !plan.test.is_rr() {
        return None;
    }
    let mtu = g
        .local_provenance
        .as_ref()
        .and_then(|p| p.interface.as_ref())
        .and_then(|i| i.mtu)
        .unwrap_or(1500) as u64;
    if plan.request_bytes.max(plan.response_bytes) + SEGMENT_HEADERS > mtu {
        return None;
    }
    let (dt, dr) = s.packets_off_percent()?;
    let iface = s.interface.as_deref().unwrap_or("?");
    (dt.abs() > PACKETS_WARN_PERCENT || dr.abs() > PACKETS_WARN_PERCENT).then(|| {
        let fewer = dt < -PACKETS_WARN_PERCENT || dr < -PACKETS_WARN_PERCENT;
        let more = dt > PACKETS_WARN_PERCENT || dr > PACKETS_WARN_PERCENT;
        let burst = if plan.burst > 0 { ", --burst" } else { "" };
        let why = match (fewer, more) {
            (true, false) => format!(
                "segments carried several requests or responses (TCP coalescing{burst})"
            ),
            (false, _) => "packets that carried no message moved too (pure ACKs when a delayed ACK fired before the reply, retransmissions)".to_string(),
            (true, true) => format!(
                "segments carried several messages one way (TCP coalescing{burst}) and packets without one moved the other (pure ACKs, retransmissions)"
            ),
        };
        Warning::new(Code::PacketsPartFromTransactions, format!(
            "packets/s on {iface} ({:.0} tx, {:.0} rx{}) differ from transactions/s ({:.0}) by {dt:+.1} % / {dr:+.1} %: {why}, so per-transaction figures are not per-packet ones (other traffic on {iface} counts too)",
            s.tx_packets_per_s.unwrap_or(0.0),
            s.rx_packets_per_s.unwrap_or(0.0),
            if iface == "lo" { ", two per transaction on loopback" } else { "" },
            s.transactions_per_s.unwrap_or(0.0),
        ))
    })
}

/// RR packets/s that part from transactions/s by more than this get a warning.
const PACKETS_WARN_PERCENT: f64 = 2.0;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::TestKind;

    fn counts(bytes_sent: u64, bytes_received: u64, transactions: u64) -> Counts {
        Counts {
            bytes_sent,
            bytes_received,
            transactions,
            ..Counts::default()
        }
    }

    /// A record of a 1 s warm-up and 2 s measurement: one flow, samples
    /// every second on both ends; `client(k)` and `server(k)` are the
    /// cumulative counts at sample k, `None` a server sample that never came.
    fn record(client: impl Fn(u64) -> Counts, server: impl Fn(u64) -> Option<Counts>) -> Gathered {
        let mut g = Gathered::new(
            Environment::default(),
            "lg:12880".into(),
            false,
            None,
            false,
        );
        let phases = [Phase::Warmup, Phase::Warmup, Phase::Measure, Phase::Measure];
        for (k, phase) in phases.into_iter().enumerate() {
            g.local.push(LocalSample {
                at: Duration::from_secs(k as u64),
                unix_s: 1_800_000_000.0 + k as f64,
                counts: vec![client(k as u64)],
                phase,
                retransmits: Vec::new(),
                if_counters: None,
            });
            g.remote.push(server(k as u64).map(|c| RemoteSample {
                elapsed_ns: k as u64 * 1_000_000_000,
                counts: vec![c],
                retransmits: Vec::new(),
            }));
        }
        g
    }

    #[test]
    fn interval_retransmits_difference_both_ends_ticks() {
        let mut g = record(|_| Counts::default(), |_| Some(Counts::default()));
        // Part 0 is TCP (cumulative 0, 2, 5, 9 here and 0, 1, 1, 4 there),
        // part 1 has no TCP socket; the server's sample at tick 2 is lost.
        for (k, l) in g.local.iter_mut().enumerate() {
            l.retransmits = vec![Some([0, 2, 5, 9][k]), None];
        }
        for (k, r) in g.remote.iter_mut().enumerate() {
            r.as_mut().unwrap().retransmits = vec![Some([0, 1, 1, 4][k]), None];
        }
        g.remote[2] = None;
        assert_eq!(interval_retransmits(&g, 0, 1), Some(2 + 1));
        // Either side of the lost sample: the client's count alone.
        assert_eq!(interval_retransmits(&g, 0, 2), Some(3));
        assert_eq!(interval_retransmits(&g, 0, 3), Some(4));
        assert_eq!(interval_retransmits(&g, 1, 1), None);
        // A single test's samples carry none.
        let g = record(|_| Counts::default(), |_| Some(Counts::default()));
        assert_eq!(interval_retransmits(&g, 0, 1), None);
    }

    #[test]
    fn call_times_reach_both_sides_of_the_summary() {
        let plan = TestPlan::new(TestKind::TcpStream);
        let mut g = record(|k| counts(k, 0, 0), |k| Some(counts(0, k, 0)));
        let mut t = SendRecvTimes::default();
        t.send.record(12_000);
        g.local_call_times = Some(t.clone());
        t.recv.record(3_000);
        g.remote_call_times = Some(t);
        let r = assemble(&plan, g, None);
        let (l, rm) = (&r.summary.local.call_times, &r.summary.remote.call_times);
        assert_eq!(
            l.as_ref().map(|t| (t.send.rows[1][1], t.recv.calls)),
            Some((1, 0))
        );
        assert_eq!(rm.as_ref().map(|t| t.recv.rows[0][3]), Some(1));
    }

    #[test]
    fn a_stream_run_sums_its_measured_intervals_and_totals_add_up() {
        let mut plan = TestPlan::new(TestKind::TcpStream);
        plan.warmup_ns = 1_000_000_000;
        plan.duration_ns = 2_000_000_000;
        // 100 MB/s sent and received, steady.
        let mb = 100_000_000;
        let g = record(|k| counts(k * mb, 0, 0), |k| Some(counts(0, k * mb, 0)));
        let r = assemble(&plan, g, None);
        assert_eq!(r.intervals.len(), 3);
        assert_eq!(r.intervals[0].phase, Phase::Warmup);
        let s = &r.summary;
        assert_eq!(s.duration_s, 2.0);
        assert_eq!(s.throughput_bps, Some(8.0 * mb as f64));
        assert_eq!(s.local.bytes_sent, 2 * mb);
        assert_eq!(s.remote.bytes_received, 2 * mb);
        // The intervals add up to the whole run, warm-up included.
        let sent: u64 = r.intervals.iter().map(|i| i.sum.local.bytes_sent).sum();
        assert_eq!(sent, 3 * mb);
        assert_eq!(r.spec.server, "lg:12880");
        assert!(s.latency_ns.is_none() && s.transactions.is_none());
        assert!(s.error.is_none());
        assert!(
            !s.warnings.has(Code::ServerSamplesMissing),
            "{:?}",
            s.warnings
        );
    }

    #[test]
    fn a_missing_server_sample_leaves_its_side_incomplete_and_says_so() {
        let plan = TestPlan::new(TestKind::TcpStream);
        let mb = 100_000_000;
        let g = record(
            |k| counts(k * mb, 0, 0),
            |k| (k != 3).then(|| counts(0, k * mb, 0)),
        );
        let r = assemble(&plan, g, None);
        assert!(r.intervals[2].remote.is_empty());
        assert_eq!(r.summary.remote.window_s, 0.0);
        assert!(
            r.summary.warnings.has(Code::ServerSamplesMissing),
            "{:?}",
            r.summary.warnings
        );
    }

    #[test]
    fn an_rr_run_reports_rate_latency_and_its_histogram() {
        let plan = TestPlan::new(TestKind::TcpRr);
        let mut g = record(
            |k| counts(k * 10_000, k * 10_000, k * 10_000),
            |k| Some(counts(k * 10_000, k * 10_000, k * 10_000)),
        );
        for ns in [40_000, 50_000, 60_000] {
            g.latency.record(ns);
        }
        let r = assemble(&plan, g, None);
        let s = &r.summary;
        assert_eq!(s.transactions_per_s, Some(10_000.0));
        assert_eq!(s.transactions, Some(20_000));
        let lat = s.latency_ns.as_ref().expect("latency");
        assert!((40_000..=60_000).contains(&lat.p50), "{lat:?}");
        let h = LatencyHistogram::from_base64(s.histogram.as_deref().unwrap()).unwrap();
        assert_eq!(h.count(), 3);
    }

    /// Issue 29: a phased mix of a bulk tcp_stream (100 MB/s while loaded)
    /// and an open-loop tcp_rr probe, 1 s idle, 4 s loaded, 1 s recovery.
    /// The bulk part's goodput is the loaded phase's, 800 Mbit/s, as its
    /// flow's and the phase table's are, not 800 × 4/6 over the window.
    #[test]
    fn a_held_bulk_part_is_measured_over_the_loaded_phase() {
        let mut plan = TestPlan::new(TestKind::TcpStream);
        plan.parts = crate::plan::mix::parse_spec("tcp_stream,tcp_rr@rate=10").unwrap();
        plan.flows = 2;
        plan.warmup_ns = 0;
        plan.idle_ns = 1_000_000_000;
        plan.duration_ns = 4_000_000_000;
        plan.recovery_ns = 1_000_000_000;
        assert_eq!(plan.held_parts(), [true, false]);
        let mb = 100_000_000;
        let bulk = |k: u64| k.saturating_sub(1).min(4) * mb;
        let mut g = Gathered::new(Environment::default(), "lg".into(), false, None, false);
        for k in 0..=6u64 {
            let phase = if k == 0 {
                Phase::Warmup
            } else {
                Phase::Measure
            };
            let rr = counts(k * 10, k * 10, k * 10);
            g.local.push(LocalSample {
                at: Duration::from_secs(k),
                unix_s: k as f64,
                counts: vec![counts(bulk(k), 0, 0), rr],
                phase,
                retransmits: Vec::new(),
                if_counters: None,
            });
            g.remote.push(Some(RemoteSample {
                elapsed_ns: k * 1_000_000_000,
                counts: vec![counts(0, bulk(k), 0), rr],
                retransmits: Vec::new(),
            }));
        }
        g.load_bounds = vec![0, 1, 5, 5, 6];
        g.parts = vec![PartRecord::default(); 2];
        let r = assemble_mix(&plan, g, None);
        let s = &r.summary;
        let bulk = &s.parts[0];
        assert_eq!(bulk.summary.throughput_bps, Some(8.0 * mb as f64));
        assert_eq!(bulk.summary.duration_s, 4.0);
        assert_eq!(bulk.flow_throughput_bps, [8.0 * mb as f64]);
        let loaded = &s.phases.as_ref().expect("phases").loaded;
        assert_eq!(loaded.throughput_up_bps, 8.0 * mb as f64);
        // Per interval: the loaded seconds carry the flow's rate, the idle
        // and recovery ones nothing.
        let per: Vec<_> = bulk
            .intervals
            .iter()
            .map(|i| i.sum.throughput_bps)
            .collect();
        let (on, off) = (Some(8.0 * mb as f64), Some(0.0));
        assert_eq!(per, [off, on, on, on, on, off]);
        // The probe ran all along: its rate is over the whole window.
        assert_eq!(s.parts[1].summary.duration_s, 6.0);
        assert_eq!(s.parts[1].summary.transactions_per_s, Some(10.0));
    }

    /// A run that ended early keeps what was gathered and says why, without
    /// the warnings a finished run's figures would call for.
    #[test]
    fn an_error_keeps_the_intervals_and_silences_figure_warnings() {
        let plan = TestPlan::new(TestKind::TcpStream);
        let g = record(
            |k| counts(k * 1000, 0, 0),
            |k| (k < 2).then(|| counts(0, k * 1000, 0)),
        );
        let r = assemble(&plan, g, Some("server gone".into()));
        assert_eq!(r.summary.error.as_deref(), Some("server gone"));
        assert_eq!(r.intervals.len(), 3);
        assert!(
            !r.summary.warnings.has(Code::ServerSamplesMissing),
            "{:?}",
            r.summary.warnings
        );
    }
}
