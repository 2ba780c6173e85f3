//! The single test's result: its intervals, and the summary of the
//! measurement window as their sum, with the figures of merit, the
//! senders' rate, latency, the open-loop figures, loss, stability, both
//! ends' sides and the warnings where the figures cannot be taken at face
//! value.

use super::capacity::apply_capacity;
use super::goodput::Window;
use super::intervals::{figures, interval};
use super::record::Gathered;
use super::sides::{apply_windows, side};
use super::stability;
use crate::plan::Loss;
use crate::plan::{Phase, TestPlan};
use crate::result::{
    GeneratorLag, Interval, OpenLoop, Provenances, SCHEMA, Spec, Summary, TestResult,
};
use crate::stats::counters::Counts;
use crate::warning::{Code, Warning, Warnings};

/// The result of a run from its record; `error` is why it ended early.
pub(crate) fn assemble(plan: &TestPlan, g: Gathered, error: Option<String>) -> TestResult {
    assemble_over(plan, g, error, None)
}

/// [`assemble`] with the summary's window narrowed to the measure
/// intervals within `over` (a phased mix's loaded phase, for the bulk parts
/// that ran only in it); the intervals stay all of them.
///
/// Over 120 lines on purpose: most of it is the summary's fields, one per
/// line, each from a figure computed elsewhere (`remote_window_s`,
/// `sent_bps`, `intervals::figures`, `stability::of`); splitting it would
/// scatter one table over several functions.
pub(crate) fn assemble_over(
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
    let fig = figures(plan, local_w, remote_w, local_s, remote_s);
    // The client's senders: every flow but those a reversed direction
    // turned into receivers.
    let sending = (0..plan.flows)
        .filter(|&f| plan.test.traits().flow_ways(plan, f).client_sends)
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
    if error.is_none() && over.is_none() {
        warnings.extend(window_overran(plan, local_s));
    }
    let latency = g.latency.summary_with(&plan.percentiles);
    let is_stream = plan.test.is_stream();
    let stability = stability::of(plan, &measure, plan.count_limited());
    // capacity's load is its probe: trains at a set average pace, each sent
    // whole at its turn, so a second holds one, two or none of them. That
    // load's trend or a flow idle between trains says nothing about the
    // path (the estimate is from the gaps within trains), so it warns of
    // neither.
    let probe_load = plan.test.traits().rate == crate::plan::Rate::ProbeBits;
    if error.is_none() && !probe_load {
        warnings.extend(stability.warnings);
    }
    let test = plan.test.traits();
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
        open_loop: plan.offered_per_s.map(|offered| OpenLoop {
            offered_per_s: offered as f64,
            // An open-loop test is a transaction test: it has a rate.
            achieved_per_s: fig.transactions_per_s.unwrap_or(0.0),
            late: local_w.late,
            service_latency_ns: g.service_latency.summary_with(&plan.percentiles),
            generator_lag_ns: g.generator_lag.summary().map(|s| GeneratorLag {
                p50: s.p50,
                p99: s.p99,
                max: s.max,
            }),
            mean_in_flight: (local_s > 0.0).then(|| local_w.in_flight_ns as f64 / (local_s * 1e9)),
        }),
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
        jitter_ns: measure.last().and_then(|iv| iv.sum.jitter_ns),
        local: side(
            local_w,
            local_s,
            g.local_total.unwrap_or_default(),
            g.local_rusage,
        ),
        remote: side(
            remote_w,
            remote_s,
            g.remote_total.unwrap_or_default(),
            g.remote_rusage,
        ),
        setup_s: g.setup_s,
        owd_ns: g
            .one_way
            .as_ref()
            .and_then(|r| super::one_way::summary(r, plan)),
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
        provenance: Provenances {
            local: g.local_provenance,
            remote: g.remote_provenance,
        },
        intervals,
        summary,
        iterations: Vec::new(),
        confidence: None,
        clock: Vec::new(),
    }
}

/// How far past the asked length a measurement window may run before the
/// reader is told: more than a quarter of it *and* more than 250 ms. The
/// timeline ends a window at the first clock check after its end (every
/// 20 ms, or a tick), and the scheduler may hold the control thread a few
/// timeslices more (CFS: a few ms each): tens of milliseconds are the
/// mechanism, not an anomaly. A quarter of a second more, and a quarter of
/// the window, means the control thread was starved (an overloaded host,
/// a stopped process): the rate is still honest, over the window as it
/// ran, but that window is not the one asked for, and what starved the
/// thread may have held the data path too. The absolute floor keeps short
/// windows (`-l 200ms`) quiet about one late tick; the fraction keeps long
/// ones (`-l 60s`) quiet about a second's delay.
pub(crate) const OVERRUN_FRACTION: f64 = 0.25;
pub(crate) const OVERRUN_MIN_S: f64 = 0.25;

/// [`Code::WindowOverran`] when a timed window of a single test ran past
/// its asked length by more than [`OVERRUN_FRACTION`] and
/// [`OVERRUN_MIN_S`]. A count-limited run (`--transactions`, `--bytes`) has no asked
/// length, and a mix's window holds the drain between its phases by design.
fn window_overran(plan: &TestPlan, local_s: f64) -> Option<Warning> {
    if plan.count_limited() || !plan.parts.is_empty() || plan.duration_ns == 0 {
        return None;
    }
    let asked = plan.duration_ns as f64 / 1e9;
    let over = local_s - asked;
    (over > OVERRUN_FRACTION * asked && over > OVERRUN_MIN_S).then(|| {
        Warning::new(
            Code::WindowOverran,
            format!(
                "the measurement window ran {local_s:.3} s where {asked:.3} s was asked: the rates are over the {local_s:.3} s it ran, but something held thrum's control thread (an overloaded host?), which may have held the data path too"
            ),
        )
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
    test: crate::plan::Ways,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::record::fixtures::{counts, record};
    use crate::plan::TestKind;
    use crate::stats::calltime::SendRecvTimes;
    use crate::stats::latency::LatencyHistogram;

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

    /// `-l 1s` that ran 3.87 s on an overloaded host says so, with both
    /// lengths; a window late by the mechanism's tens of milliseconds does
    /// not, nor one late by 300 ms of 10 s (3 %), nor a count-limited run.
    #[test]
    fn a_window_far_longer_than_asked_is_told() {
        let mut plan = TestPlan::new(TestKind::TcpStream);
        plan.warmup_ns = 0;
        plan.duration_ns = 1_000_000_000;
        let run = |plan: &TestPlan, window_ms: u64| {
            let mut g = record(|k| counts(k, 0, 0), |k| Some(counts(0, k, 0)));
            // Samples at 0 and at the window's end, all measure.
            g.local.truncate(2);
            g.remote.truncate(2);
            g.local[1].at = std::time::Duration::from_millis(window_ms);
            g.local[1].phase = Phase::Measure;
            assemble(plan, g, None).summary.warnings
        };
        let w = run(&plan, 3870);
        let told: Vec<_> = w.iter().filter(|w| w.code == Code::WindowOverran).collect();
        assert_eq!(told.len(), 1, "{w:?}");
        let m = &told[0].message;
        assert!(m.contains("3.870 s") && m.contains("1.000 s"), "{m}");
        // 240 ms over 1 s: within the floor.
        assert!(!run(&plan, 1240).has(Code::WindowOverran));
        assert!(run(&plan, 1260).has(Code::WindowOverran));
        // 300 ms over 10 s: within the fraction.
        plan.duration_ns = 10_000_000_000;
        assert!(!run(&plan, 10_300).has(Code::WindowOverran));
        assert!(run(&plan, 12_600).has(Code::WindowOverran));
        plan.transactions = Some(1000);
        assert!(!run(&plan, 12_600).has(Code::WindowOverran));
    }
}
