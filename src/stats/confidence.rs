//! Confidence intervals over repeated runs (netperf's `-i`/`-I`).
//!
//! The whole test is repeated; after each run the Student-t interval of the
//! mean of the figure of merit (and of CPU utilisation, when measured) is
//! computed, and the runs stop once every interval is within the requested
//! width, or at the maximum count. The width is the whole interval as a
//! percentage of the mean: 5 % means the mean ± 2.5 %, as netperf states it.

use serde::Serialize;
use statrs::distribution::{ContinuousCDF, StudentsT};

/// The two-sided Student-t quantile for `level` (0.95, 0.99) with `df` degrees of freedom.
pub fn t_quantile(level: f64, df: u32) -> f64 {
    let t = StudentsT::new(0.0, 1.0, df.max(1) as f64).expect("df >= 1 is a valid Student-t");
    t.inverse_cdf(1.0 - (1.0 - level) / 2.0)
}

/// The interval around the mean of a set of figures.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct MeanInterval {
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation.
    pub stddev: f64,
    /// Half of the interval, in the figure's unit.
    pub half_width: f64,
    /// The whole interval as a percentage of the mean.
    pub width_percent: f64,
}

/// The interval of the mean at `level`; None with fewer than two figures.
pub fn mean_interval(xs: &[f64], level: f64) -> Option<MeanInterval> {
    let n = xs.len();
    if n < 2 {
        return None;
    }
    let mean = xs.iter().sum::<f64>() / n as f64;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let stddev = var.sqrt();
    let half_width = t_quantile(level, (n - 1) as u32) * stddev / (n as f64).sqrt();
    let width_percent = if mean.abs() > 0.0 {
        200.0 * half_width / mean.abs()
    } else if half_width == 0.0 {
        0.0
    } else {
        f64::INFINITY
    };
    Some(MeanInterval {
        n,
        mean,
        stddev,
        half_width,
        width_percent,
    })
}

/// The stopping rule.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rule {
    pub min: u32,
    pub max: u32,
    /// 0.95 or 0.99.
    pub level: f64,
    /// Whole interval width in percent of the mean.
    pub width_percent: f64,
}

impl Rule {
    /// Stop after these runs? Every series (the figure, and CPU when
    /// measured) must be within the width; at `max` runs it stops regardless.
    pub fn done(&self, series: &[&[f64]]) -> bool {
        let n = series.first().map_or(0, |s| s.len()) as u32;
        if n >= self.max {
            return true;
        }
        n >= self.min.max(2) && self.achieved(series)
    }

    /// Is every series within the width?
    pub fn achieved(&self, series: &[&[f64]]) -> bool {
        series.iter().all(|s| {
            mean_interval(s, self.level).is_some_and(|m| m.width_percent <= self.width_percent)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_quantiles_match_the_tables() {
        assert!((t_quantile(0.95, 9) - 2.262).abs() < 0.001);
        assert!((t_quantile(0.99, 9) - 3.250).abs() < 0.001);
        assert!((t_quantile(0.95, 1) - 12.706).abs() < 0.001);
        assert!((t_quantile(0.99, 29) - 2.756).abs() < 0.001);
    }

    #[test]
    fn interval_of_a_known_sample() {
        // mean 100, sample stddev 1 (n = 10): half width = 2.262 * 1 / sqrt(10).
        let xs = [
            99.0, 101.0, 99.0, 101.0, 99.0, 101.0, 99.0, 101.0, 100.0, 100.0,
        ];
        let m = mean_interval(&xs, 0.95).unwrap();
        assert_eq!(m.mean, 100.0);
        let sd = (8.0f64 / 9.0).sqrt();
        assert!((m.stddev - sd).abs() < 1e-12);
        let hw = 2.262 * sd / 10f64.sqrt();
        assert!((m.half_width - hw).abs() < 1e-3, "{}", m.half_width);
        assert!((m.width_percent - 2.0 * hw).abs() < 1e-3);
    }

    #[test]
    fn stopping_rule_on_fixed_sequences() {
        let rule = Rule {
            min: 3,
            max: 10,
            level: 0.99,
            width_percent: 5.0,
        };
        // Identical runs: done as soon as the minimum is reached, not before.
        let steady = [100.0; 10];
        assert!(!rule.done(&[&steady[..2]]));
        assert!(rule.done(&[&steady[..3]]));
        // Runs that swing ±10 %: never within 5 %, so it stops at the maximum.
        let swinging: Vec<f64> = (0..10)
            .map(|i| if i % 2 == 0 { 90.0 } else { 110.0 })
            .collect();
        for n in 3..10 {
            assert!(!rule.done(&[&swinging[..n]]), "stopped early at {n}");
        }
        assert!(rule.done(&[&swinging[..10]]));
        assert!(!rule.achieved(&[&swinging[..10]]));
        // Tight figures but a wild CPU series: the CPU series holds it back.
        let cpu = [50.0, 70.0, 40.0, 65.0];
        assert!(!rule.done(&[&steady[..4], &cpu[..]]));
        // Small swings of ±1 %: within 5 % at 99 % after a few runs.
        let small = [100.0, 101.0, 99.0, 100.5, 99.5];
        assert!(!rule.done(&[&small[..2]]));
        assert!(rule.done(&[&small[..]]));
    }

    #[test]
    fn a_single_run_has_no_interval() {
        assert!(mean_interval(&[5.0], 0.95).is_none());
    }
}
