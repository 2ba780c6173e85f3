//! A mix (`--mix`, the `rrul` presets): each part analysed as the single
//! test it is, over its slice of the record (a bulk part of a phased mix
//! over the loaded phase it ran in), and the session's own figures: the
//! idle, loaded and recovery phases, the latency under load and the
//! fairness (docs/latency-under-load.md).

use super::goodput::{flow_goodput, jain, loaded_window, measure_window, received, window_s};
use super::intervals::interval_retransmits;
use super::record::{Gathered, LocalSample, PartRecord, RemoteSample};
use super::summary::{assemble, assemble_over};
use crate::plan::TestPlan;
use crate::result::one_way::QueueDirection;
use crate::result::{
    Fairness, LatencyUnderLoad, PartInterval, PartSummary, PhaseFigures, ProbePhases, TestResult,
};
use crate::stats::counters::Counts;
use crate::stats::latency::LatencyHistogram;
use crate::warning::{Code, Warnings};

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
            tcp_info: Vec::new(),
            if_counters: l.if_counters,
            rusage: l.rusage,
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
                tcp_info: Vec::new(),
                cpu: r.cpu,
                rusage: r.rusage,
            })
        })
        .collect();
    p.latency = rec.latency.clone();
    p.interval_latency = rec.interval_latency.clone();
    p.service_latency = rec.service_latency.clone();
    p.service_interval_latency = rec.service_interval_latency.clone();
    p.generator_lag = rec.generator_lag.clone();
    p.one_way = rec.one_way.clone();
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
        // phases it sat out.
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
    let phases = probe_phases(plan, &g, None);
    // Each probe's own phases and latency under load beside the merged
    // ones: probes of unlike kinds (udp_rr, tcp_rr) queue unlike, and a
    // comparison of two runs reads each probe's apart.
    for (i, part) in plan.parts.iter().enumerate() {
        if part.is_probe()
            && let Some(ph) = probe_phases(plan, &g, Some(i))
            && let Some(p) = parts.get_mut(i)
        {
            p.summary.latency_under_load_ns = latency_under_load(&ph);
            p.summary.phases = Some(ph);
        }
    }
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
    let queue = phases.as_ref().and_then(|ph| queue_direction(plan, &g, ph));
    let mut r = assemble(plan, g, error);
    let s = &mut r.summary;
    s.queue_direction = queue;
    s.latency_under_load_ns = phases.as_ref().and_then(latency_under_load);
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
    s.open_loop = None;
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

/// `--one-way`: which way the queue is, from the probes' ways in the idle
/// and loaded phases `ph` (None without both, or without the stamps).
fn queue_direction(plan: &TestPlan, g: &Gathered, ph: &ProbePhases) -> Option<QueueDirection> {
    let (idle, loaded) = (ph.idle.one_way_ns.as_ref()?, ph.loaded.one_way_ns.as_ref()?);
    let error_ns = g
        .parts
        .iter()
        .filter_map(|r| r.one_way.as_ref())
        .map(|r| r.growth_error_ns())
        .max()?;
    let probes = plan
        .parts
        .iter()
        .zip(&g.parts)
        .filter(|(p, r)| p.is_probe() && r.one_way.is_some())
        .map(|(p, _)| p.name.clone())
        .collect();
    let without = plan.parts_without_one_way();
    Some(super::one_way::queue_direction(
        idle,
        loaded,
        error_ns,
        probes,
        without.into_iter().map(String::from).collect(),
    ))
}

/// Loaded minus idle probe latency (p50, p99) of `ph`.
fn latency_under_load(ph: &ProbePhases) -> Option<LatencyUnderLoad> {
    let (idle, loaded) = (
        ph.idle.probe_latency_ns.as_ref()?,
        ph.loaded.probe_latency_ns.as_ref()?,
    );
    Some(LatencyUnderLoad {
        p50: loaded.p50 as i64 - idle.p50 as i64,
        p99: loaded.p99 as i64 - idle.p99 as i64,
    })
}

/// The probes' latency (every probe's merged, or part `only`'s alone) and
/// the goodput each way in the idle, loaded and recovery phases of a
/// phased mix; None when the run did not reach the end of its recovery
/// phase.
fn probe_phases(plan: &TestPlan, g: &Gathered, only: Option<usize>) -> Option<ProbePhases> {
    let [b0, b1, b2, b3, b4] = g.load_bounds[..] else {
        return None;
    };
    let offsets = plan.part_offsets();
    // The probes that carried the one-way stamps (`only`'s alone).
    let one_way: Vec<_> = plan
        .parts
        .iter()
        .zip(&g.parts)
        .enumerate()
        .filter(|(i, (p, _))| p.is_probe() && only.is_none_or(|o| o == *i))
        .filter_map(|(_, (_, r))| r.one_way.as_ref())
        .collect();
    let t0 = |k: u32| g.local.get(k as usize).map_or(0.0, |l| l.at.as_secs_f64());
    let phase = |a: u32, b: u32| {
        let w = (a as usize, b as usize);
        let secs = window_s(g, w);
        let mut hist = LatencyHistogram::new();
        let (mut up, mut down) = (0u64, 0u64);
        for (i, part) in plan.parts.iter().enumerate() {
            let flows = offsets[i]..offsets[i + 1];
            if part.is_probe() {
                if only.is_none_or(|o| o == i)
                    && let Some(rec) = g.parts.get(i)
                {
                    for (_, h) in rec.interval_histograms.range(a..b) {
                        hist.merge_sparse(h);
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
            probe_latency_histogram: (hist.count() > 0).then(|| hist.to_base64()),
            throughput_up_bps: bps(up),
            throughput_down_bps: bps(down),
            one_way_ns: super::one_way::phase(&one_way, a, b, &plan.percentiles),
        }
    };
    Some(ProbePhases {
        idle: phase(b0, b1),
        loaded: phase(b1, b2),
        recovery: phase(b3, b4),
        drain_s: t0(b3) - t0(b2),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::record::fixtures::counts;
    use crate::plan::{Phase, TestKind};
    use crate::result::Environment;
    use std::time::Duration;

    /// Second `k` of a record: each flow's counts at the client (`local`)
    /// and the server (`remote`), second 0 the warm-up.
    fn second(g: &mut Gathered, k: u64, local: Vec<Counts>, remote: Vec<Counts>) {
        g.local.push(LocalSample {
            at: Duration::from_secs(k),
            unix_s: k as f64,
            counts: local,
            phase: if k == 0 {
                Phase::Warmup
            } else {
                Phase::Measure
            },
            retransmits: Vec::new(),
            tcp_info: Vec::new(),
            if_counters: None,
            rusage: None,
        });
        g.remote.push(Some(RemoteSample {
            elapsed_ns: k * 1_000_000_000,
            counts: remote,
            retransmits: Vec::new(),
            tcp_info: Vec::new(),
            cpu: None,
            rusage: None,
        }));
    }

    /// A phased mix of a bulk tcp_stream (100 MB/s while loaded)
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
            let rr = counts(k * 10, k * 10, k * 10);
            let local = vec![counts(bulk(k), 0, 0), rr];
            second(&mut g, k, local, vec![counts(0, bulk(k), 0), rr]);
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

    /// Each probe carries its own phases and latency under load beside the
    /// merged ones: a tcp_rr probe queued 50 ms under load and a udp_rr
    /// probe that was not (as a prioritised class would be) are told apart.
    #[test]
    fn each_probe_has_its_own_latency_under_load() {
        let mut plan = TestPlan::new(TestKind::TcpStream);
        plan.parts =
            crate::plan::mix::parse_spec("tcp_stream,tcp_rr@rate=10,udp_rr@rate=10").unwrap();
        plan.flows = 3;
        plan.warmup_ns = 0;
        plan.idle_ns = 1_000_000_000;
        plan.duration_ns = 4_000_000_000;
        plan.recovery_ns = 1_000_000_000;
        let mut g = Gathered::new(Environment::default(), "lg".into(), false, None, false);
        let mut parts = vec![PartRecord::default(); 3];
        let one = |ns: u64| {
            let mut h = LatencyHistogram::new();
            for _ in 0..10 {
                h.record(ns);
            }
            crate::stats::latency::SparseHistogram::of(&h)
        };
        for k in 0..=6u64 {
            let loaded = (2..=5).contains(&k);
            let sample = vec![counts(k, 0, 0), counts(k, k, k), counts(k, k, k)];
            second(&mut g, k, sample.clone(), sample);
            if k > 0 {
                let i = k as u32 - 1;
                let tcp = if loaded { 50_000_000 } else { 1_000_000 };
                parts[1].interval_histograms.insert(i, one(tcp));
                parts[2].interval_histograms.insert(i, one(1_000_000));
            }
        }
        g.load_bounds = vec![0, 1, 5, 5, 6];
        g.parts = parts;
        let r = assemble_mix(&plan, g, None);
        let s = &r.summary;
        let added = |p: usize| {
            let l = s.parts[p]
                .summary
                .latency_under_load_ns
                .expect("a probe's own");
            l.p50 as f64 / 1e6
        };
        assert!((added(1) - 49.0).abs() < 1.0, "tcp_rr queued: {}", added(1));
        assert!(added(2).abs() < 0.1, "udp_rr not: {}", added(2));
        assert!(s.parts[0].summary.phases.is_none(), "a bulk part has none");
        let own = s.parts[1].summary.phases.as_ref().unwrap();
        assert!(own.loaded.probe_latency_histogram.is_some());
        // The merged probes' median under load is either probe's.
        assert!(s.latency_under_load_ns.is_some());
    }

    /// `--one-way`: a udp_rr probe whose way up read 100 ms while loaded
    /// and its way down 0.3 ms throughout: each phase has its ways, the
    /// probe's own `owd_ns` is over the whole window, and the verdict
    /// names the way up.
    #[test]
    fn the_verdict_names_the_way_that_queued() {
        use crate::analysis::one_way::{ClockMethod, OneWayRecord};
        use crate::stats::latency::SparseHistogram;
        use crate::stats::offset::{ClockMap, Estimate};
        let mut plan = TestPlan::new(TestKind::TcpStream);
        plan.parts =
            crate::plan::mix::parse_spec("tcp_stream,udp_rr@rate=10,tcp_rr@rate=10").unwrap();
        plan.flows = 3;
        plan.warmup_ns = 0;
        plan.idle_ns = 1_000_000_000;
        plan.duration_ns = 4_000_000_000;
        plan.recovery_ns = 1_000_000_000;
        plan.one_way = true;
        let mut g = Gathered::new(Environment::default(), "lg".into(), false, None, false);
        let ten = |ns: u64| {
            let mut h = LatencyHistogram::new();
            for _ in 0..10 {
                h.record(ns);
            }
            h
        };
        let mut intervals = std::collections::BTreeMap::new();
        for k in 0..=6u64 {
            let sample = vec![counts(k, 0, 0), counts(k, k, k), counts(k, k, k)];
            second(&mut g, k, sample.clone(), sample);
            if k > 0 {
                let loaded = (2..=5).contains(&k);
                let (u, d) = (
                    ten(if loaded { 100_000_000 } else { 200_000 }),
                    ten(300_000),
                );
                let i = k as u32 - 1;
                let iv = crate::stats::latency::OneWayInterval {
                    up: SparseHistogram::of(&u),
                    down: SparseHistogram::of(&d),
                    fastest: Default::default(),
                };
                intervals.insert(i, iv);
            }
        }
        let at = |offset_ns: i64| Estimate {
            offset_ns,
            error_ns: 0,
            at_ns: 0,
            min_path_ns: 0,
            kept: 8,
            exchanges: 24,
        };
        let mut parts = vec![PartRecord::default(); 3];
        parts[1].one_way = Some(OneWayRecord {
            clamped: 0,
            intervals,
            clock: ClockMap {
                before: at(0),
                after: Some(at(0)),
            },
            method: ClockMethod::SameKernel,
            interval_ns: 1_000_000_000,
            settled: None,
        });
        g.load_bounds = vec![0, 1, 5, 5, 6];
        g.parts = parts;
        let r = assemble_mix(&plan, g, None);
        let s = &r.summary;
        let ph = s.phases.as_ref().unwrap();
        let (idle, loaded) = (
            ph.idle.one_way_ns.as_ref().unwrap(),
            ph.loaded.one_way_ns.as_ref().unwrap(),
        );
        assert_eq!((idle.up.count, loaded.up.count), (10, 40));
        assert!(loaded.up.p50 > 99_000_000 && idle.up.p50 < 300_000);
        let own = s.parts[1].summary.owd_ns.as_ref().expect("the probe's own");
        assert_eq!(own.up.count, 60);
        assert!(
            s.parts[1]
                .summary
                .phases
                .as_ref()
                .unwrap()
                .loaded
                .one_way_ns
                .is_some()
        );
        assert!(s.parts[2].summary.owd_ns.is_none());
        let q = s.queue_direction.as_ref().unwrap();
        assert_eq!(q.direction, "up");
        // The tcp_rr probe left no stamps here: the verdict is the udp_rr
        // probe's alone.
        assert_eq!(q.probes, ["udp_rr"]);
        assert!(q.not_measured.is_empty());
        assert!(q.down_ns.abs() < 10_000, "{q:?}");
    }

    /// A mix's interval rows carry its bulk flows' goodput up
    /// and down apart (not the single-test reading of the summed counts,
    /// which took the upload alone) and the segment of the window they lie
    /// in: warm-up, idle, loaded, drain, recovery (the human row that
    /// shows them is e2e `mix::mix_rows_show_both_directions_and_their_phase`).
    #[test]
    fn a_mix_interval_has_both_directions_and_its_segment() {
        let mut plan = TestPlan::new(TestKind::TcpStream);
        plan.parts = crate::plan::mix::parse_spec("tcp_stream,tcp_maerts,tcp_rr@rate=10").unwrap();
        plan.flows = 3;
        plan.idle_ns = 1_000_000_000;
        plan.duration_ns = 2_000_000_000;
        plan.recovery_ns = 1_000_000_000;
        let mb = 1_000_000;
        // Samples at 0..=6 s: warm-up 0-1, idle 1-2, loaded 2-4, drain
        // 4-5, recovery 5-6; up 100 MB/s and down 300 MB/s while loaded.
        let moved = |k: u64, per: u64| k.saturating_sub(2).min(2) * per;
        let mut g = Gathered::new(Environment::default(), "lg".into(), false, None, false);
        for k in 0..=6u64 {
            let (up, down, rr) = (moved(k, 100 * mb), moved(k, 300 * mb), k * 10);
            let local = vec![counts(up, 0, 0), counts(0, down, 0), counts(rr, rr, rr)];
            let remote = vec![counts(0, up, 0), counts(down, 0, 0), counts(rr, rr, rr)];
            second(&mut g, k, local, remote);
        }
        g.load_bounds = vec![1, 2, 4, 5, 6];
        g.parts = vec![PartRecord::default(); 3];
        let r = assemble_mix(&plan, g, None);
        let segments: Vec<_> = r
            .intervals
            .iter()
            .map(|iv| iv.load_phase.map(|p| p.name()))
            .collect();
        assert_eq!(
            segments,
            [
                None,
                Some("idle"),
                Some("loaded"),
                Some("loaded"),
                Some("drain"),
                Some("recovery")
            ]
        );
        let loaded = &r.intervals[2].sum;
        assert_eq!(loaded.throughput_bps_c2s, Some(800.0 * mb as f64));
        assert_eq!(loaded.throughput_bps_s2c, Some(2400.0 * mb as f64));
        assert_eq!(loaded.throughput_bps, Some(3200.0 * mb as f64));
        assert_eq!(r.intervals[1].sum.throughput_bps_s2c, Some(0.0));
    }

    /// Live, the later bounds are not known yet: an interval is placed by
    /// the bounds at or before its start alone.
    #[test]
    fn a_segment_needs_only_the_bounds_before_it() {
        use crate::result::LoadPhase;
        assert_eq!(super::super::intervals::load_phase(&[], 3), None);
        assert_eq!(super::super::intervals::load_phase(&[2], 2), None);
        assert_eq!(
            super::super::intervals::load_phase(&[2], 3),
            Some(LoadPhase::Idle)
        );
        assert_eq!(
            super::super::intervals::load_phase(&[2, 3], 4),
            Some(LoadPhase::Loaded)
        );
        // No drain interval: loaded straight to recovery.
        let b = [0, 1, 3, 3, 4];
        assert_eq!(
            super::super::intervals::load_phase(&b, 3),
            Some(LoadPhase::Loaded)
        );
        assert_eq!(
            super::super::intervals::load_phase(&b, 4),
            Some(LoadPhase::Recovery)
        );
        // After the recovery: none.
        assert_eq!(super::super::intervals::load_phase(&b, 5), None);
    }
}
