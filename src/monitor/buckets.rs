//! The fixed latency buckets of the monitor's histograms: their bounds,
//! as the `le` label writes them, and one run's HDR histogram read into
//! them. Apart from the metrics and the probes' runs because both use
//! them: a run reads its histogram into buckets, the metrics add them up
//! and write them.

use crate::stats::latency::LatencyHistogram;

/// The latency buckets' upper bounds, ns: 1, 2 and 5 times each power of
/// ten from 10 µs to 10 s, the span of network round trips from a
/// loopback or a data centre's rack to a satellite link under load.
/// Fixed for every probe and every monitor, so that buckets from
/// anywhere in a fleet add up; anything slower counts in `+Inf` only.
pub const BOUNDS_NS: [u64; 19] = [
    10_000,
    20_000,
    50_000,
    100_000,
    200_000,
    500_000,
    1_000_000,
    2_000_000,
    5_000_000,
    10_000_000,
    20_000_000,
    50_000_000,
    100_000_000,
    200_000_000,
    500_000_000,
    1_000_000_000,
    2_000_000_000,
    5_000_000_000,
    10_000_000_000,
];

/// [`BOUNDS_NS`] as the `le` label writes them, seconds.
pub const LE: [&str; 19] = [
    "1e-05", "2e-05", "5e-05", "0.0001", "0.0002", "0.0005", "0.001", "0.002", "0.005", "0.01",
    "0.02", "0.05", "0.1", "0.2", "0.5", "1", "2", "5", "10",
];

/// A latency histogram in the metrics' buckets: how many latencies were
/// at most each bound (cumulative, as Prometheus' `_bucket` series are),
/// how many in all and their sum.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Buckets {
    pub at_most: [u64; BOUNDS_NS.len()],
    pub count: u64,
    pub sum_s: f64,
}

impl Buckets {
    /// The buckets of one run's histogram.
    pub fn of(h: &LatencyHistogram) -> Buckets {
        Buckets {
            at_most: BOUNDS_NS.map(|b| h.count_at_most(b)),
            count: h.count(),
            sum_s: h.sum_ns() / 1e9,
        }
    }

    /// Add another run's buckets.
    pub fn add(&mut self, o: &Buckets) {
        for (a, b) in self.at_most.iter_mut().zip(o.at_most) {
            *a += b;
        }
        self.count += o.count;
        self.sum_s += o.sum_s;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_and_their_labels_agree() {
        for (b, le) in BOUNDS_NS.iter().zip(LE) {
            assert_eq!(*b as f64 / 1e9, le.parse::<f64>().unwrap(), "{le}");
        }
        assert!(BOUNDS_NS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn buckets_of_a_histogram_add_up_over_runs() {
        let mut h = LatencyHistogram::new();
        for ns in [5_000, 15_000, 15_000, 40_000, 3_000_000, 20_000_000_000] {
            h.record(ns);
        }
        let b = Buckets::of(&h);
        assert_eq!(b.count, 6);
        assert_eq!(&b.at_most[..4], &[1, 3, 4, 4]);
        // 3 ms is at most 5 ms; 20 s is in +Inf alone.
        assert_eq!(b.at_most[7], 4);
        assert_eq!(b.at_most[8], 5);
        assert_eq!(b.at_most[18], 5);
        assert!((b.sum_s - 20.003075).abs() < 0.03, "{}", b.sum_s);
        let mut total = b.clone();
        total.add(&b);
        assert_eq!(total.count, 12);
        assert_eq!(total.at_most[1], 6);
    }
}
