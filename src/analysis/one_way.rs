//! `--one-way`'s figures from its raw record: the flows' two histograms
//! and the server's clock before and after the run, turned into
//! `summary.owd_ns` with its error bound. A pure function.

use crate::plan::TestPlan;
use crate::result::one_way::OneWaySummary;
use crate::stats::latency::LatencyHistogram;
use crate::stats::offset::ClockMap;

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

/// What the client gathered for `--one-way`.
pub(crate) struct OneWayRecord {
    pub(crate) up: LatencyHistogram,
    pub(crate) down: LatencyHistogram,
    pub(crate) clamped: u64,
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
    }
}
