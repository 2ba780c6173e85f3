//! The latency-vs-throughput curve (`thrum curve`): its record
//! (results.json, schema `thrum.curve.v1`), the rates it steps through, and
//! the two points it names, the knee and the saturation point. Everything
//! here is a pure function of measured steps, so `thrum report` reaches the
//! same verdict from a saved file as the run did, and the unit tests below
//! check it on constructed steps. The gathering is in `cmd::curve`; the
//! terminal table and curve.csv are `export::curve`'s, the chart
//! `export::draw::curve`'s and the page `export::page::curve`'s.
//!
//! The knee is a measured rate, never extrapolated (docs/curve.md): the
//! highest achieved rate of an unsaturated step whose response-time
//! percentile meets the SLO (or, without an SLO, the highest unsaturated
//! step). The saturation point is the first step where the system under test
//! stopped keeping up: achieved below [`KEPT_UP`] × offered, or response
//! time growing without bound over the step.

use std::fmt::Write;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::plan::limits::MAX_OFFERED_PER_S;
use crate::stats::latency::LatencySummary;
use crate::units::{fmt_ns, parse_duration, parse_rate};

/// The schema name results.json carries.
pub const SCHEMA: &str = "thrum.curve.v1";

/// A step kept up when it achieved at least this share of its offered rate.
pub const KEPT_UP: f64 = 0.98;

/// Latency grows without bound over a step when the median of the
/// per-interval p50s rises from the step's first third to its middle third
/// by [`MIDDLE_FACTOR`] and to its last third by [`GROWTH_FACTOR`]: a
/// queue that fills all through the step. Medians of thirds, so that one
/// stall (a descheduled process, a burst of other work) is not taken for it.
pub const GROWTH_FACTOR: f64 = 3.0;
pub const MIDDLE_FACTOR: f64 = 1.5;
/// Intervals a step needs before its growth is judged (two per third).
pub const MIN_GROWTH_INTERVALS: usize = 6;

/// `auto`: the first and last step as shares of the closed-loop maximum,
/// and the geometric steps between them.
pub const AUTO_FROM: f64 = 0.05;
pub const AUTO_TO: f64 = 1.2;
pub const AUTO_STEPS: usize = 8;
/// `auto`: steps added between the last good step and the first bad one.
pub const REFINE_STEPS: usize = 2;
/// `auto`: steps beyond [`AUTO_TO`], at the same ratio, while none has
/// saturated. An open loop keeps many transactions in flight where the
/// closed-loop probe kept one, so the turn can lie well above the probe.
pub const AUTO_BEYOND: usize = 4;

/// Bad `--rates` or `--slo`; each message names the flag and what it accepts.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CurveError {
    #[error(
        "--rates: {0} (accepted: auto, or rates in transactions/s, each 1..={MAX_OFFERED_PER_S}, strictly increasing, as 1000,5k,20k)"
    )]
    Rates(String),
    #[error(
        "--slo: {0} (accepted: PCT=DURATION with PCT one of p50, p90, p99, p99.9, max, as p99=500us)"
    )]
    Slo(String),
}

/// `--rates`: measured steps given, or found from a closed-loop probe.
#[derive(Clone, Debug, PartialEq)]
pub enum Rates {
    Auto,
    List(Vec<u64>),
}

impl FromStr for Rates {
    type Err = CurveError;
    fn from_str(s: &str) -> Result<Rates, CurveError> {
        if s.trim() == "auto" {
            return Ok(Rates::Auto);
        }
        let mut v: Vec<u64> = Vec::new();
        for part in s.split(',') {
            let part = part.trim();
            if part.is_empty() {
                return Err(CurveError::Rates(format!("'{s}' has an empty entry")));
            }
            let r = parse_rate(part)
                .map_err(|e| CurveError::Rates(format!("'{part}' is not a rate: {e}")))?
                .0;
            if !(r >= 1.0 && r <= MAX_OFFERED_PER_S as f64) || r.fract() != 0.0 {
                return Err(CurveError::Rates(format!("'{part}' is out of range")));
            }
            let r = r as u64;
            if let Some(&last) = v.last()
                && r <= last
            {
                return Err(CurveError::Rates(format!(
                    "'{part}' does not rise above {last}"
                )));
            }
            v.push(r);
        }
        Ok(Rates::List(v))
    }
}

/// Which response-time figure an SLO bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SloPercentile {
    P50,
    P90,
    P99,
    P99_9,
    Max,
}

impl SloPercentile {
    /// The figure from a step's response time.
    pub fn of(self, l: &LatencySummary) -> u64 {
        match self {
            SloPercentile::P50 => l.p50,
            SloPercentile::P90 => l.p90,
            SloPercentile::P99 => l.p99,
            SloPercentile::P99_9 => l.p99_9,
            SloPercentile::Max => l.max,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SloPercentile::P50 => "p50",
            SloPercentile::P90 => "p90",
            SloPercentile::P99 => "p99",
            SloPercentile::P99_9 => "p99.9",
            SloPercentile::Max => "max",
        }
    }
}

/// `--slo p99=500us`: a bound on one percentile of response time.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Slo {
    pub percentile: SloPercentile,
    pub bound_ns: u64,
}

impl std::fmt::Display for Slo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} <= {}",
            self.percentile.name(),
            fmt_ns(self.bound_ns as f64)
        )
    }
}

impl FromStr for Slo {
    type Err = CurveError;
    fn from_str(s: &str) -> Result<Slo, CurveError> {
        let (p, d) = s
            .split_once('=')
            .ok_or_else(|| CurveError::Slo(format!("'{s}' has no '='")))?;
        let percentile = match p.trim() {
            "p50" => SloPercentile::P50,
            "p90" => SloPercentile::P90,
            "p99" => SloPercentile::P99,
            "p99.9" | "p99_9" => SloPercentile::P99_9,
            "max" => SloPercentile::Max,
            other => return Err(CurveError::Slo(format!("'{other}' is not a percentile"))),
        };
        let bound = parse_duration(d.trim())
            .map_err(|e| CurveError::Slo(format!("'{d}' is not a duration: {e}")))?;
        let bound_ns = bound.as_nanos().min(u64::MAX as u128) as u64;
        if bound_ns == 0 {
            return Err(CurveError::Slo(format!("'{d}' is not above zero")));
        }
        Ok(Slo {
            percentile,
            bound_ns,
        })
    }
}

/// One end's CPU over a step's window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StepCpu {
    /// Overall utilisation of the host, percent (100 = every CPU busy).
    pub cpu_util_percent: Option<f64>,
    /// µs of CPU per transaction.
    pub service_demand_us_per_tran: Option<f64>,
}

/// One open-loop run of the curve.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Step {
    /// 0-based, in order of offered rate.
    pub index: usize,
    /// Transactions/s the open-loop schedule offered.
    pub offered_per_s: f64,
    /// Transactions/s completed in the step's window.
    pub achieved_per_s: f64,
    /// Response time from the intended start.
    pub latency_ns: Option<LatencySummary>,
    /// Service time, from the actual send.
    pub service_latency_ns: Option<LatencySummary>,
    /// Transactions without a response (udp_rr timeouts), in the window.
    pub lost: u64,
    /// Requests sent more than one schedule gap after their intended start.
    pub late: u64,
    /// The generator's lateness behind its schedule, p99.
    pub generator_lag_p99_ns: Option<u64>,
    /// p50 of response time per measure interval, in order: what says
    /// whether latency grew without bound over the step.
    pub interval_p50_ns: Vec<u64>,
    pub local: StepCpu,
    pub remote: StepCpu,
    /// Why the step's run failed; null when it did not.
    pub error: Option<String>,
}

/// A named point of the curve (the knee, the saturation point).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Point {
    pub achieved_per_s: f64,
    /// Index into `steps`.
    pub step: usize,
    pub reason: String,
}

/// What was asked for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CurveSpec {
    /// `auto` or the list given.
    pub rates: String,
    pub step_s: f64,
    pub warmup_s: f64,
    pub interval_s: f64,
    pub flows: u32,
    pub threads: u32,
    pub request_bytes: u64,
    pub response_bytes: u64,
    pub arrivals: String,
    pub max_inflight: u32,
    pub slo: Option<Slo>,
    /// `auto`: transactions/s of the closed-loop probe the steps scale from.
    pub closed_loop_per_s: Option<f64>,
}

/// results.json of `thrum curve`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Curve {
    pub schema: String,
    pub test: String,
    pub server: String,
    pub spec: CurveSpec,
    /// In order of offered rate.
    pub steps: Vec<Step>,
    pub knee: Option<Point>,
    pub saturation: Option<Point>,
    /// Ctrl-C or SIGTERM ended the curve early: `steps` are the ones it
    /// completed (the step under way was cut short and is not kept).
    /// Records written before this field read as false.
    #[serde(default)]
    pub interrupted: bool,
}

/// Why `s` shows a system that no longer keeps up, or None.
pub fn saturated(s: &Step) -> Option<String> {
    if let Some(e) = &s.error {
        return Some(format!("the step failed: {e}"));
    }
    if s.achieved_per_s < KEPT_UP * s.offered_per_s {
        let mut why = format!(
            "achieved {:.0}/s is below {KEPT_UP} x offered {:.0}/s",
            s.achieved_per_s, s.offered_per_s
        );
        // A generator that fell behind its own schedule is the bottleneck
        // as much as the system under test is: say so.
        if s.late as f64 > (1.0 - KEPT_UP) * s.offered_per_s {
            let _ = write!(why, "; {} requests left the generator late", s.late);
        }
        return Some(why);
    }
    if growing(&s.interval_p50_ns) {
        let (a, b) = (s.interval_p50_ns[0], *s.interval_p50_ns.last().unwrap());
        return Some(format!(
            "response time grew without bound over the step: p50 per interval rose from {} to {}",
            fmt_ns(a as f64),
            fmt_ns(b as f64)
        ));
    }
    None
}

/// Whether per-interval p50s rise all through the step (see
/// [`GROWTH_FACTOR`]).
pub fn growing(p50s: &[u64]) -> bool {
    let n = p50s.len();
    if n < MIN_GROWTH_INTERVALS {
        return false;
    }
    let median = |part: &[u64]| {
        let mut v = part.to_vec();
        v.sort_unstable();
        v[v.len() / 2] as f64
    };
    let third = n / 3;
    let first = median(&p50s[..third]).max(1.0);
    let middle = median(&p50s[third..n - third]);
    let last = median(&p50s[n - third..]);
    middle >= MIDDLE_FACTOR * first && last >= GROWTH_FACTOR * first && last > middle
}

/// The saturation point: the first step (by offered rate) from which no
/// step keeps up. Capacity is monotone, so a step that keeps up at a higher
/// rate shows that an earlier shortfall was a passing disturbance (a busy
/// machine descheduling the generator), not the system's limit.
pub fn saturation(steps: &[Step]) -> Option<Point> {
    let k = steps
        .iter()
        .rposition(|s| saturated(s).is_none())
        .map_or(0, |i| i + 1);
    let s = steps.get(k)?;
    Some(Point {
        achieved_per_s: s.achieved_per_s,
        step: s.index,
        reason: saturated(s).expect("no step after the last that kept up keeps up"),
    })
}

/// The knee: the highest achieved rate among the steps below saturation
/// whose response time meets `slo`; without an SLO, the highest of them.
pub fn knee(steps: &[Step], slo: Option<&Slo>) -> Option<Point> {
    let sat = saturation(steps).map(|p| p.step);
    let below = steps
        .iter()
        .filter(|s| sat.is_none_or(|k| s.index < k) && saturated(s).is_none());
    let best = match slo {
        None => below
            .max_by(|a, b| a.achieved_per_s.total_cmp(&b.achieved_per_s))
            .map(|s| (s, "the highest achieved rate below saturation (no --slo given)".to_string())),
        Some(slo) => below
            .filter_map(|s| {
                let v = slo.percentile.of(s.latency_ns.as_ref()?);
                (v <= slo.bound_ns).then_some((s, v))
            })
            .max_by(|a, b| a.0.achieved_per_s.total_cmp(&b.0.achieved_per_s))
            .map(|(s, v)| {
                (
                    s,
                    format!(
                        "the highest achieved rate below saturation whose {} of {} meets the SLO {slo}",
                        slo.percentile.name(),
                        fmt_ns(v as f64)
                    ),
                )
            }),
    }?;
    Some(Point {
        achieved_per_s: best.0.achieved_per_s,
        step: best.0.index,
        reason: best.1,
    })
}

/// `auto`'s first pass: [`AUTO_STEPS`] rates spaced geometrically from
/// [`AUTO_FROM`] to [`AUTO_TO`] of the closed-loop maximum, each at least 1/s.
pub fn auto_rates(closed_loop_per_s: f64) -> Vec<u64> {
    let lo = (AUTO_FROM * closed_loop_per_s).max(1.0);
    let hi = (AUTO_TO * closed_loop_per_s).max(lo);
    let ratio = (hi / lo).powf(1.0 / (AUTO_STEPS - 1) as f64);
    let mut v: Vec<u64> = (0..AUTO_STEPS)
        .map(|k| {
            (lo * ratio.powi(k as i32))
                .round()
                .clamp(1.0, MAX_OFFERED_PER_S as f64) as u64
        })
        .collect();
    v.dedup();
    v
}

/// `auto`'s `k`-th step (1-based) beyond the first pass `first`, at the
/// first pass's ratio.
pub fn beyond(first: &[u64], k: usize) -> u64 {
    let (lo, hi) = (first[0] as f64, *first.last().unwrap() as f64);
    let ratio = if first.len() > 1 {
        (hi / lo).powf(1.0 / (first.len() - 1) as f64)
    } else {
        2.0
    };
    (hi * ratio.powi(k as i32))
        .round()
        .min(MAX_OFFERED_PER_S as f64) as u64
}

/// `auto`'s refinement: [`REFINE_STEPS`] rates spaced geometrically between
/// the last good step and the first one that is saturated or misses the SLO,
/// none already measured. Empty when there is no such turn.
pub fn refine_rates(steps: &[Step], slo: Option<&Slo>) -> Vec<u64> {
    let bad = |s: &Step| {
        saturated(s).is_some()
            || slo.is_some_and(|o| {
                s.latency_ns
                    .as_ref()
                    .is_none_or(|l| o.percentile.of(l) > o.bound_ns)
            })
    };
    let Some(k) = steps.iter().position(bad) else {
        return Vec::new();
    };
    if k == 0 {
        return Vec::new();
    }
    let (lo, hi) = (steps[k - 1].offered_per_s, steps[k].offered_per_s);
    let ratio = (hi / lo).powf(1.0 / (REFINE_STEPS + 1) as f64);
    let mut v: Vec<u64> = (1..=REFINE_STEPS)
        .map(|j| (lo * ratio.powi(j as i32)).round() as u64)
        .filter(|r| !steps.iter().any(|s| s.offered_per_s as u64 == *r))
        .filter(|r| (*r as f64) > lo && (*r as f64) < hi)
        .collect();
    v.dedup();
    v
}

/// Order steps by offered rate, number them, and name the two points.
pub fn analyse(c: &mut Curve) {
    c.steps
        .sort_by(|a, b| a.offered_per_s.total_cmp(&b.offered_per_s));
    for (i, s) in c.steps.iter_mut().enumerate() {
        s.index = i;
    }
    c.saturation = saturation(&c.steps);
    c.knee = knee(&c.steps, c.spec.slo.as_ref());
}

impl Curve {
    /// Whether a step's run failed: the curve's verdict, as a run's.
    pub fn failed(&self) -> bool {
        self.steps.iter().any(|s| s.error.is_some())
    }
}

/// Constructed steps and curves, for the tests here and the exporters'.
#[cfg(test)]
pub(crate) mod fixtures {
    use super::*;

    pub(crate) fn lat(p50: u64, p99: u64) -> LatencySummary {
        LatencySummary {
            count: 1000,
            min: p50 / 2,
            mean: p50 as f64,
            stddev: 0.0,
            p50,
            p90: (p50 + p99) / 2,
            p99,
            p99_9: p99 * 2,
            max: p99 * 4,
            percentiles: Vec::new(),
        }
    }

    pub(crate) fn step(offered: f64, achieved: f64, p50: u64, p99: u64) -> Step {
        Step {
            index: 0,
            offered_per_s: offered,
            achieved_per_s: achieved,
            latency_ns: Some(lat(p50, p99)),
            service_latency_ns: None,
            lost: 0,
            late: 0,
            generator_lag_p99_ns: None,
            interval_p50_ns: vec![p50; 5],
            local: StepCpu::default(),
            remote: StepCpu::default(),
            error: None,
        }
    }

    pub(crate) fn numbered(mut v: Vec<Step>) -> Vec<Step> {
        for (i, s) in v.iter_mut().enumerate() {
            s.index = i;
        }
        v
    }

    /// A curve with its turn at 4,000/s: the step offered 5,000 achieves 4,300.
    pub(crate) fn curve() -> Vec<Step> {
        numbered(vec![
            step(1000.0, 1000.0, 50_000, 80_000),
            step(2000.0, 1999.0, 52_000, 120_000),
            step(4000.0, 3990.0, 60_000, 700_000),
            step(5000.0, 4300.0, 9_000_000, 40_000_000),
            step(6000.0, 4310.0, 20_000_000, 90_000_000),
        ])
    }

    /// A curve record of `steps` with a plain spec, not yet analysed.
    pub(crate) fn record(steps: Vec<Step>) -> Curve {
        Curve {
            schema: SCHEMA.into(),
            test: "tcp_rr".into(),
            server: "x".into(),
            spec: CurveSpec {
                rates: "auto".into(),
                step_s: 1.0,
                warmup_s: 0.0,
                interval_s: 0.1,
                flows: 1,
                threads: 1,
                request_bytes: 1,
                response_bytes: 1,
                arrivals: "fixed".into(),
                max_inflight: 1024,
                slo: None,
                closed_loop_per_s: None,
            },
            steps,
            knee: None,
            saturation: None,
            interrupted: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::*;
    use super::*;

    #[test]
    fn saturation_is_the_first_step_that_falls_behind() {
        let p = saturation(&curve()).unwrap();
        assert_eq!(p.step, 3);
        assert_eq!(p.achieved_per_s, 4300.0);
        assert!(p.reason.contains("below 0.98"), "{}", p.reason);
        // 0.98 exactly keeps up; a hair below does not.
        assert!(saturated(&step(1000.0, 980.0, 1, 1)).is_none());
        assert!(saturated(&step(1000.0, 979.0, 1, 1)).is_some());
        // A generator that fell behind is named in the reason.
        let mut s = step(1000.0, 900.0, 1, 1);
        s.late = 100;
        assert!(saturated(&s).unwrap().contains("late"));
    }

    #[test]
    fn unbounded_growth_saturates_though_the_rate_is_held() {
        let mut v = curve();
        v[2].interval_p50_ns = vec![100_000, 120_000, 300_000, 280_000, 900_000, 2_000_000];
        let p = saturation(&v).unwrap();
        assert_eq!(p.step, 2);
        assert!(p.reason.contains("grew without bound"), "{}", p.reason);
        // Noise, a rise that falls back, one stall at the end, a slow
        // drift, or too few intervals: not growth.
        assert!(!growing(&[100, 90, 110, 100, 105, 95]));
        assert!(!growing(&[100, 1000, 200, 900, 150, 1000]));
        assert!(!growing(&[
            100, 100, 100, 100, 100, 100, 100, 100, 100, 50_000
        ]));
        assert!(!growing(&[100, 110, 120, 130, 140, 150]));
        assert!(!growing(&[100, 200, 400, 800]));
        assert!(growing(&[100, 150, 200, 400, 800, 1600]));
    }

    #[test]
    fn failed_step_saturates() {
        // The curve stops at a failed step: it is the last.
        let mut v = curve()[..2].to_vec();
        v[1].error = Some("server went away".into());
        let p = saturation(&v).unwrap();
        assert_eq!(p.step, 1);
        assert!(p.reason.contains("server went away"));
    }

    #[test]
    fn a_shortfall_that_a_higher_step_recovers_is_not_saturation() {
        let mut v = curve();
        // The generator was descheduled in step 1; step 2 kept up at a higher rate.
        v[1].achieved_per_s = 1800.0;
        v[1].late = 300;
        let p = saturation(&v).unwrap();
        assert_eq!(p.step, 3);
        // Nor can the disturbed step be the knee.
        assert_eq!(knee(&v, None).unwrap().step, 2);
        // Had step 2 fallen short too, none kept up after step 0.
        v[2].achieved_per_s = 3000.0;
        assert_eq!(knee(&v, None).unwrap().step, 0);
        assert_eq!(saturation(&v).unwrap().step, 1);
        // Nothing kept up: the first step is the saturation point.
        for s in &mut v {
            s.achieved_per_s = 0.5 * s.offered_per_s;
        }
        assert_eq!(saturation(&v).unwrap().step, 0);
        assert!(knee(&v, None).is_none());
    }

    #[test]
    fn knee_meets_the_slo_below_saturation() {
        let v = curve();
        let slo: Slo = "p99=500us".parse().unwrap();
        let k = knee(&v, Some(&slo)).unwrap();
        assert_eq!((k.step, k.achieved_per_s), (1, 1999.0));
        assert!(k.reason.contains("p99"), "{}", k.reason);
        let loose: Slo = "p99=1s".parse().unwrap();
        // Saturated steps never count, however the SLO reads.
        assert_eq!(knee(&v, Some(&loose)).unwrap().step, 2);
        // Without an SLO: the highest step below saturation.
        assert_eq!(knee(&v, None).unwrap().step, 2);
        // An SLO that no step meets: no knee.
        let tight: Slo = "p50=1us".parse().unwrap();
        assert!(knee(&v, Some(&tight)).is_none());
        assert!(knee(&[], None).is_none());
    }

    #[test]
    fn analyse_orders_and_numbers() {
        let mut v = curve();
        v.reverse();
        let mut c = record(v);
        analyse(&mut c);
        assert_eq!(c.steps[0].offered_per_s, 1000.0);
        assert_eq!(c.saturation.as_ref().unwrap().step, 3);
        assert_eq!(c.knee.as_ref().unwrap().step, 2);
    }

    #[test]
    fn auto_spans_five_to_120_percent() {
        let v = auto_rates(10_000.0);
        assert_eq!(v.len(), AUTO_STEPS);
        assert_eq!(v[0], 500);
        assert_eq!(*v.last().unwrap(), 12_000);
        assert!(v.windows(2).all(|w| w[0] < w[1]));
        // A tiny maximum still gives rising rates of at least 1/s.
        let v = auto_rates(3.0);
        assert!(v[0] >= 1 && v.windows(2).all(|w| w[0] < w[1]));
        // Beyond the first pass, at its ratio.
        let v = auto_rates(10_000.0);
        let r = v[1] as f64 / v[0] as f64;
        let b1 = beyond(&v, 1) as f64;
        assert!((b1 / 12_000.0 / r - 1.0).abs() < 0.01, "{b1}");
        assert!(beyond(&v, 2) > beyond(&v, 1));
    }

    #[test]
    fn refinement_lands_between_good_and_bad() {
        let v = curve();
        let r = refine_rates(&v, None);
        assert_eq!(r.len(), REFINE_STEPS);
        assert!(r.iter().all(|&x| x > 4000 && x < 5000), "{r:?}");
        // With an SLO the turn is where p99 crosses it.
        let slo: Slo = "p99=500us".parse().unwrap();
        let r = refine_rates(&v, Some(&slo));
        assert!(r.iter().all(|&x| x > 2000 && x < 4000), "{r:?}");
        // Nothing turned, or the first step already bad: nothing to refine.
        assert!(refine_rates(&v[..3], None).is_empty());
        assert!(refine_rates(&v[3..], None).is_empty());
    }

    #[test]
    fn rates_and_slo_parse_or_name_the_flag() {
        assert_eq!("auto".parse::<Rates>(), Ok(Rates::Auto));
        assert_eq!(
            "1000,5k,20k".parse::<Rates>(),
            Ok(Rates::List(vec![1000, 5000, 20_000]))
        );
        for bad in ["", "0", "1000,500", "100,100", "x", "1,,2", "1.5"] {
            let e = bad.parse::<Rates>().unwrap_err().to_string();
            assert!(e.starts_with("--rates") && e.contains("accepted"), "{e}");
        }
        let s: Slo = "p99=500us".parse().unwrap();
        assert_eq!(s.percentile, SloPercentile::P99);
        assert_eq!(s.bound_ns, 500_000);
        assert_eq!(
            "p99.9=2ms".parse::<Slo>().unwrap().percentile,
            SloPercentile::P99_9
        );
        for bad in ["p99", "p98=1ms", "p99=", "p99=0us", "p99=fast"] {
            let e = bad.parse::<Slo>().unwrap_err().to_string();
            assert!(e.starts_with("--slo") && e.contains("accepted"), "{e}");
        }
    }
}
