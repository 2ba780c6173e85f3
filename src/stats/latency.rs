//! Latency histograms: HDR, nanoseconds, 3 significant digits.
//!
//! One histogram per worker thread, recorded only during the measurement
//! window, merged by adding at the end. The range (1 ns to 1 hour) is fixed up
//! front so recording never allocates.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

const MAX_NS: u64 = 3_600_000_000_000;

/// A latency histogram in nanoseconds.
#[derive(Clone, Debug)]
pub struct LatencyHistogram {
    h: Histogram<u64>,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram::new()
    }
}

impl LatencyHistogram {
    pub fn new() -> LatencyHistogram {
        LatencyHistogram {
            h: Histogram::new_with_bounds(1, MAX_NS, 3).expect("static histogram bounds are valid"),
        }
    }

    /// Record one latency; values beyond an hour count as an hour.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.h.saturating_record(ns.max(1));
    }

    pub fn merge(&mut self, other: &LatencyHistogram) {
        self.h
            .add(&other.h)
            .expect("histograms with equal bounds always merge");
    }

    pub fn count(&self) -> u64 {
        self.h.len()
    }

    pub fn summary(&self) -> Option<LatencySummary> {
        if self.h.is_empty() {
            return None;
        }
        let q = |p: f64| self.h.value_at_quantile(p);
        Some(LatencySummary {
            count: self.h.len(),
            min: self.h.min(),
            mean: self.h.mean(),
            stddev: self.h.stdev(),
            p50: q(0.50),
            p90: q(0.90),
            p99: q(0.99),
            p99_9: q(0.999),
            max: self.h.max(),
        })
    }
}

/// The latency figures every RR-type result reports, in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    pub count: u64,
    pub min: u64,
    pub mean: f64,
    pub stddev: f64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p99_9: u64,
    pub max: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn empty_has_no_summary() {
        assert!(LatencyHistogram::new().summary().is_none());
    }

    #[test]
    fn percentiles_are_ordered_and_close() {
        let mut h = LatencyHistogram::new();
        for v in 1..=100_000u64 {
            h.record(v * 10);
        }
        let s = h.summary().unwrap();
        assert!(
            s.min <= s.p50
                && s.p50 <= s.p90
                && s.p90 <= s.p99
                && s.p99 <= s.p99_9
                && s.p99_9 <= s.max
        );
        // 3 significant digits: within 0.1 %.
        assert!(
            (s.p50 as f64 - 500_000.0).abs() / 500_000.0 < 0.001,
            "{}",
            s.p50
        );
    }

    proptest! {
        /// Merging per-thread histograms equals one histogram of all values.
        #[test]
        fn merge_equals_union(a in proptest::collection::vec(1u64..10_000_000_000, 0..200),
                              b in proptest::collection::vec(1u64..10_000_000_000, 0..200)) {
            let mut ha = LatencyHistogram::new();
            let mut hb = LatencyHistogram::new();
            let mut hu = LatencyHistogram::new();
            for v in &a { ha.record(*v); hu.record(*v); }
            for v in &b { hb.record(*v); hu.record(*v); }
            ha.merge(&hb);
            prop_assert_eq!(ha.summary(), hu.summary());
        }
    }
}
