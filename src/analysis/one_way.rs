//! `--one-way`'s figures from its raw record: the flows' two histograms
//! and the server's clock before and after the run, turned into
//! `summary.owd_ns` with its error bound. A pure function.

use crate::plan::TestPlan;
use crate::result::one_way::{OneWaySummary, PhaseOneWay, QueueDirection};
use crate::stats::latency::LatencyHistogram;
use crate::stats::offset::ClockMap;

/// The least growth of a way's median under load that names a queue, ns.
/// A standing queue of a few packets at the bottleneck already adds
/// milliseconds (one 1,500-byte packet is 0.24 ms at 50 Mbit/s, 1.2 ms at
/// 10), while the host alone moves a way's median by less: the bulk
/// flows' receive and send processing on the same CPUs delays a probe's
/// stamp by tens to hundreds of µs, both ways alike (the stamps are read
/// in user space). So 1 ms; and on a longer path a tenth of its idle
/// round trip, since a wide-area path's delay wanders by a few percent
/// with routes and cross traffic that are not this run's load.
pub(crate) const QUEUE_FLOOR_NS: u64 = 1_000_000;

/// How the server's offset was found (`OneWaySummary::method`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockMethod {
    /// Clock pings on the control connection (`stats::offset`).
    Exchanges,
    /// Both ends read one kernel's CLOCK_MONOTONIC: exact.
    SameKernel,
}

impl ClockMethod {
    pub fn name(self) -> &'static str {
        match self {
            ClockMethod::Exchanges => "exchanges_monotonic",
            ClockMethod::SameKernel => "same_kernel",
        }
    }
}

/// What the client gathered for `--one-way` (a single test's flows, or
/// one part's of a mix).
#[derive(Clone)]
pub(crate) struct OneWayRecord {
    pub(crate) up: LatencyHistogram,
    pub(crate) down: LatencyHistogram,
    pub(crate) clamped: u64,
    /// A phased mix's probe: every flow's ways per interval (interval
    /// index, up, down), for the phases; empty otherwise.
    pub(crate) intervals: Vec<crate::workload::one_way::Interval>,
    /// The server's clock before the run (what the flows corrected by)
    /// and after it.
    pub(crate) clock: ClockMap,
    pub(crate) method: ClockMethod,
}

/// The bound on every one-way figure corrected by `clock.before`'s
/// offset, ns: the offset lies within each estimate's bound of it at
/// that estimate's moment, so anywhere in the run within the larger
/// bound of the line between them, and the line is off the offset used
/// by at most the distance it moved.
pub(crate) fn error_ns(clock: &ClockMap) -> u64 {
    let b = clock.before;
    match clock.after {
        Some(a) => b.error_ns.max(a.error_ns) + (a.offset_ns - b.offset_ns).unsigned_abs(),
        None => b.error_ns,
    }
}

/// The bound on the difference of two one-way figures of the run, ns
/// (loaded less idle): both are corrected by `clock.before`'s offset, so
/// its error cancels and only the true offset's movement between them
/// remains, which is no more than its movement over the run: the two
/// estimates' distance plus both their bounds. Without the estimate after
/// the run, the one bound there is.
pub(crate) fn growth_error_ns(clock: &ClockMap) -> u64 {
    let b = clock.before;
    match clock.after {
        Some(a) => b.error_ns + a.error_ns + (a.offset_ns - b.offset_ns).unsigned_abs(),
        None => b.error_ns,
    }
}

/// The ways up and down of `records`' intervals in `from..to` (a phase of
/// a mix), merged; None without a transaction in it.
pub(crate) fn phase(
    records: &[&OneWayRecord],
    from: u32,
    to: u32,
    percentiles: &[f64],
) -> Option<PhaseOneWay> {
    let (mut up, mut down) = (LatencyHistogram::new(), LatencyHistogram::new());
    for (_, u, d) in records
        .iter()
        .flat_map(|r| &r.intervals)
        .filter(|i| (from..to).contains(&i.0))
    {
        up.merge_sparse(u);
        down.merge_sparse(d);
    }
    Some(PhaseOneWay {
        up: up.summary_with(percentiles)?,
        down: down.summary_with(percentiles)?,
    })
}

/// Which way the queue is: each way's loaded p50 less its idle p50, named
/// where it is more than the floor ([`QUEUE_FLOOR_NS`], or a tenth of the
/// idle round trip) plus the clock's bound on it.
pub(crate) fn queue_direction(
    idle: &PhaseOneWay,
    loaded: &PhaseOneWay,
    clock: &ClockMap,
    probes: Vec<String>,
    not_measured: Vec<String>,
) -> QueueDirection {
    let grew = |l: u64, i: u64| l as i64 - i as i64;
    let up_ns = grew(loaded.up.p50, idle.up.p50);
    let down_ns = grew(loaded.down.p50, idle.down.p50);
    let error_ns = growth_error_ns(clock);
    let floor_ns = QUEUE_FLOOR_NS.max((idle.up.p50 + idle.down.p50) / 10);
    let queued = |g: i64| g > (floor_ns + error_ns) as i64;
    let direction = match (queued(up_ns), queued(down_ns)) {
        (true, true) => "both",
        (true, false) => "up",
        (false, true) => "down",
        (false, false) => "neither",
    };
    QueueDirection {
        direction: direction.into(),
        up_ns,
        down_ns,
        error_ns,
        floor_ns,
        probes,
        not_measured,
    }
}

/// `summary.owd_ns` of a run with `plan`, None without a transaction.
pub(crate) fn summary(r: &OneWayRecord, plan: &TestPlan) -> Option<OneWaySummary> {
    Some(OneWaySummary {
        up: r.up.summary_with(&plan.percentiles)?,
        down: r.down.summary_with(&plan.percentiles)?,
        error_ns: error_ns(&r.clock),
        offset_ns: r.clock.before.offset_ns,
        offset_after_ns: r.clock.after.map(|a| a.offset_ns),
        drift_ppm: r.clock.drift_ppm(),
        method: r.method.name().into(),
        stamps: "user_space".into(),
        clamped: r.clamped,
        request_bytes: plan.request_bytes,
        response_bytes: plan.response_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::offset::Estimate;

    fn est(offset_ns: i64, error_ns: u64, at_ns: u64) -> Estimate {
        Estimate {
            offset_ns,
            error_ns,
            at_ns,
            min_path_ns: 2 * error_ns,
            kept: 8,
            exchanges: 24,
        }
    }

    /// The bound: the larger estimate's, plus how far the offset moved;
    /// one estimate alone, its own.
    #[test]
    fn the_bound_covers_both_estimates_and_the_drift() {
        let c = ClockMap {
            before: est(1_000, 40_000, 0),
            after: Some(est(-4_000, 60_000, 6_000_000_000)),
        };
        assert_eq!(error_ns(&c), 65_000);
        let alone = ClockMap {
            before: est(1_000, 40_000, 0),
            after: None,
        };
        assert_eq!(error_ns(&alone), 40_000);
        let mut r = OneWayRecord {
            up: LatencyHistogram::new(),
            down: LatencyHistogram::new(),
            clamped: 0,
            intervals: Vec::new(),
            clock: c,
            method: ClockMethod::Exchanges,
        };
        let plan = TestPlan::new(crate::plan::TestKind::UdpRr);
        assert_eq!(summary(&r, &plan), None);
        r.up.record(100_000_000);
        r.down.record(1_000_000);
        let s = summary(&r, &plan).unwrap();
        assert_eq!(
            (s.error_ns, s.offset_ns, s.offset_after_ns),
            (65_000, 1_000, Some(-4_000))
        );
        assert_eq!(s.method, "exchanges_monotonic");
        // The growth's bound: the offset's movement and both bounds, its
        // constant error cancelling.
        assert_eq!(growth_error_ns(&c), 105_000);
        assert_eq!(growth_error_ns(&alone), 40_000);
    }

    fn ways(up_ms: f64, down_ms: f64) -> PhaseOneWay {
        let one = |ms: f64| {
            let mut h = LatencyHistogram::new();
            h.record((ms * 1e6) as u64);
            h.summary().unwrap()
        };
        PhaseOneWay {
            up: one(up_ms),
            down: one(down_ms),
        }
    }

    /// The verdict names a way whose median grew by more than the floor
    /// (1 ms, or a tenth of the idle round trip) and the clock's bound.
    #[test]
    fn the_queue_is_where_the_median_grew_past_the_floor_and_bound() {
        let exact = ClockMap {
            before: est(0, 0, 0),
            after: Some(est(0, 0, 1)),
        };
        let dir = |idle: PhaseOneWay, loaded: PhaseOneWay, c: &ClockMap| {
            queue_direction(&idle, &loaded, c, vec!["udp_rr".into()], Vec::new())
        };
        let q = dir(ways(0.2, 0.2), ways(98.6, 0.3), &exact);
        assert_eq!(
            (q.direction.as_str(), q.floor_ns, q.error_ns),
            ("up", 1_000_000, 0)
        );
        assert!((q.up_ns - 98_400_000).abs() < 200_000, "{q:?}");
        assert_eq!(
            dir(ways(0.2, 0.2), ways(0.3, 50.0), &exact).direction,
            "down"
        );
        assert_eq!(
            dir(ways(0.2, 0.2), ways(9.0, 9.0), &exact).direction,
            "both"
        );
        assert_eq!(
            dir(ways(0.2, 0.2), ways(0.9, 1.1), &exact).direction,
            "neither"
        );
        // A 40 ms path: its floor is 4 ms, a 3.5 ms rise is not named.
        let far = dir(ways(20.0, 20.0), ways(23.5, 20.0), &exact);
        assert_eq!(far.direction, "neither");
        assert!(far.floor_ns.abs_diff(4_000_000) < 10_000, "{far:?}");
        // A clock that moved 3 ms over the run: a 3.5 ms rise is not named.
        let moved = ClockMap {
            before: est(0, 100_000, 0),
            after: Some(est(3_000_000, 100_000, 1)),
        };
        let q = dir(ways(0.2, 0.2), ways(3.7, 0.2), &moved);
        assert_eq!((q.direction.as_str(), q.error_ns), ("neither", 3_200_000));
    }
}
