//! Interim series and the interval arithmetic of the aggregate method.
//!
//! Every stream yields interim samples: a rate that held over the interval
//! ending at a CLOCK_REALTIME timestamp. The aggregate at any instant is the
//! sum of the streams' rates then, so the aggregate's integral over a window
//! is the sum of each sample's rate times the part of its interval inside the
//! window. Everything here (per-second series, step average/min/max) is that
//! one integral over different windows, so the figures agree with each other
//! and with a hand sum of the samples.

use serde::{Deserialize, Serialize};

/// One interim sample: `value` units/s over the `interval_s` seconds ending at `end` (unix s).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Sample {
    /// CLOCK_REALTIME at the end of the sample's interval, unix seconds.
    pub end: f64,
    /// Length of the interval the value covers, seconds.
    pub interval_s: f64,
    /// The stream's rate over that interval, in the test's unit.
    pub value: f64,
}

impl Sample {
    pub fn start(&self) -> f64 {
        self.end - self.interval_s
    }

    /// Units completed inside `[a, b)`: the rate spread evenly over the sample's interval.
    pub fn units_in(&self, a: f64, b: f64) -> f64 {
        let overlap = (self.end.min(b) - self.start().max(a)).max(0.0);
        self.value * overlap
    }
}

/// Units all `series` completed inside `[a, b)`.
pub fn units_in(series: &[&[Sample]], a: f64, b: f64) -> f64 {
    series
        .iter()
        .flat_map(|s| s.iter())
        .map(|x| x.units_in(a, b))
        .sum()
}

/// The per-second aggregate from `origin`: element k is the summed rate over
/// `[origin + k, origin + k + 1)`, for every whole second up to `end` (a
/// last partial second would read low).
pub fn per_second(series: &[&[Sample]], origin: f64, end: f64) -> Vec<f64> {
    // The epsilon keeps a whole number of seconds whole despite rounding.
    let n = ((end - origin + 1e-9).floor().max(0.0)) as usize;
    (0..n)
        .map(|k| {
            let a = origin + k as f64;
            units_in(series, a, a + 1.0)
        })
        .collect()
}

/// Average, minimum and maximum of the aggregate over one measurement window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WindowStats {
    pub average: f64,
    pub minimum: f64,
    pub maximum: f64,
}

/// The window's pieces: whole seconds from `a`, a remainder shorter than a
/// second folded into the last piece; a window shorter than a second is one piece.
pub fn pieces(a: f64, b: f64) -> Vec<(f64, f64)> {
    let whole = ((b - a).floor() as usize).max(1);
    (0..whole)
        .map(|k| {
            let s = a + k as f64;
            let e = if k + 1 == whole { b } else { s + 1.0 };
            (s, e)
        })
        .collect()
}

/// Stats of the per-second aggregate over `[a, b)`; None for an empty window.
/// The average is the exact integral over the window divided by its length, so
/// it does not depend on how the window is cut into seconds.
pub fn window_stats(series: &[&[Sample]], a: f64, b: f64) -> Option<WindowStats> {
    if b <= a || !a.is_finite() || !b.is_finite() {
        return None;
    }
    let average = units_in(series, a, b) / (b - a);
    let mut minimum = f64::INFINITY;
    let mut maximum = f64::NEG_INFINITY;
    for (s, e) in pieces(a, b) {
        let v = units_in(series, s, e) / (e - s);
        minimum = minimum.min(v);
        maximum = maximum.max(v);
    }
    Some(WindowStats {
        average,
        minimum,
        maximum,
    })
}

/// Trim a step to its measurement window: from `trim_s` after its last stream
/// started to `trim_s` before the next step starts. None when nothing is left.
pub fn trim(last_stream_start: f64, next_step_start: f64, trim_s: f64) -> Option<(f64, f64)> {
    let (a, b) = (last_stream_start + trim_s, next_step_start - trim_s);
    (b > a).then_some((a, b))
}

/// Whether a series covers the whole of `[a, b)` without a gap larger than `slack` seconds.
pub fn covers(series: &[Sample], a: f64, b: f64, slack: f64) -> bool {
    let mut reached = a;
    for s in series {
        if s.end <= reached {
            continue;
        }
        if s.start() > reached + slack {
            return false;
        }
        reached = s.end;
        if reached >= b - slack {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(end: f64, interval_s: f64, value: f64) -> Sample {
        Sample {
            end,
            interval_s,
            value,
        }
    }

    #[test]
    fn a_sample_spreads_over_the_seconds_it_covers() {
        // 100/s over [9.5, 10.5): half a second in each of two seconds.
        let x = [s(10.5, 1.0, 100.0)];
        assert_eq!(per_second(&[&x], 9.0, 11.0), vec![50.0, 50.0]);
    }

    #[test]
    fn streams_add_per_second() {
        let a = [s(1.0, 1.0, 10.0), s(2.0, 1.0, 20.0)];
        let b = [s(1.0, 0.5, 4.0), s(2.0, 0.5, 8.0)];
        // second 0: 10 + 4*0.5; second 1: 20 + 8*0.5
        assert_eq!(per_second(&[&a, &b], 0.0, 2.0), vec![12.0, 24.0]);
    }

    #[test]
    fn window_trimming() {
        assert_eq!(trim(100.2, 110.0, 1.0), Some((101.2, 109.0)));
        assert_eq!(trim(100.0, 102.0, 1.0), None);
        assert_eq!(pieces(0.0, 2.5), vec![(0.0, 1.0), (1.0, 2.5)]);
        assert_eq!(pieces(0.0, 0.4), vec![(0.0, 0.4)]);
    }

    #[test]
    fn window_stats_average_min_max() {
        let x = [s(1.0, 1.0, 10.0), s(2.0, 1.0, 30.0), s(3.0, 1.0, 20.0)];
        let w = window_stats(&[&x], 0.0, 3.0).unwrap();
        assert_eq!(w.average, 20.0);
        assert_eq!(w.minimum, 10.0);
        assert_eq!(w.maximum, 30.0);
        // A partial window: exact integral over [0.5, 2) = 5 + 30 = 35 over 1.5 s.
        let w = window_stats(&[&x], 0.5, 2.0).unwrap();
        assert!((w.average - 35.0 / 1.5).abs() < 1e-9);
        assert!(window_stats(&[&x], 2.0, 2.0).is_none());
    }

    #[test]
    fn coverage() {
        let x = [s(1.0, 0.5, 1.0), s(1.5, 0.5, 1.0), s(2.0, 0.5, 1.0)];
        assert!(covers(&x, 0.6, 1.9, 0.0));
        assert!(!covers(&x, 0.2, 1.9, 0.0));
        assert!(!covers(&x, 0.6, 2.5, 0.0));
        let gap = [s(1.0, 0.5, 1.0), s(2.0, 0.5, 1.0)];
        assert!(!covers(&gap, 0.6, 1.9, 0.1));
    }

    proptest::proptest! {
        /// Spreading is conservative: the seconds add up to the whole, and a
        /// window's average lies between its minimum and maximum.
        #[test]
        fn spreading_conserves_units(
            raw in proptest::collection::vec((0.05f64..2.0, 0.0f64..1e6), 1..40),
            a in 0.0f64..10.0,
            len in 0.1f64..20.0,
        ) {
            let mut end = 0.3;
            let xs: Vec<Sample> = raw.iter().map(|&(d, v)| { end += d; s(end, d, v) }).collect();
            let all = [xs.as_slice()];
            let total: f64 = xs.iter().map(|x| x.value * x.interval_s).sum();
            let secs: f64 = per_second(&all, 0.0, end.ceil()).iter().sum();
            proptest::prop_assert!((secs - total).abs() <= 1e-6 * total.max(1.0));
            let w = window_stats(&all, a, a + len).unwrap();
            proptest::prop_assert!(w.minimum <= w.average + 1e-6 * w.average.max(1.0));
            proptest::prop_assert!(w.average <= w.maximum + 1e-6 * w.maximum.max(1.0));
        }
    }
}
