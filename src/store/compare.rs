//! `thrum compare`'s method: for every headline figure both results have,
//! the change from A to B in percent, a 95 % interval around it that holds
//! run-to-run noise, and a verdict. docs/history.md writes it down with a
//! worked example.
//!
//! Two runs of one setup differ by more than either run's own spread says
//! (shared/DESIGN.md §8: tcp_rr on loopback, between-run CV 4.9 % against a
//! within-run standard error of 1.7 %), so the interval is built from the
//! between-run coefficient of variation σ of one run's figure, worked on
//! the log scale (ln B − ln A, whose standard deviation is σ·√2):
//!
//! 1. **learned**: the newest runs of A's setup and of B's (same command,
//!    test, target and labels) in the store, each setup's log deviations
//!    pooled; the Student-t quantile of their degrees of freedom (one
//!    setup with two runs is enough, and gives a wide interval);
//! 2. else **iterations**: the `--iterations` of each result, pooled the
//!    same way (throughput and transactions/s, the figure they repeat);
//! 3. else **prior**: σ = [`PRIOR_CV`] (5 %, DESIGN.md §8), drawn
//!    [`PRIOR_FACTOR`] times as wide (z = 1.96 × 3): with nothing learned,
//!    only a change far beyond any noise seen is called.
//!
//! Latency is multiplicative (a queue or a slower CPU scales it), so every
//! figure, latency included, is compared as the ratio B/A on the log scale
//! and the percentages are converted back (e^x − 1): a 10× spread of idle
//! p50 between stored runs is σ ≈ 1 of ln, not a spread in nanoseconds.
//! Latency percentiles also carry each run's own uncertainty from its
//! histogram: the distribution-free interval of a quantile from the ranks
//! n·p ± 1.96·√(n·p·(1−p)) (a rank test's interval). With learned noise,
//! whose between-run spread already holds that sampling error, it is a
//! floor under the run-to-run part; with a prior or iterations it adds in
//! quadrature. A verdict: an interval clear of zero is `improved` or
//! `regressed` (as the figure is better higher or lower) unless the change
//! is under the threshold (`no change`); an interval across zero is `no
//! change` when it lies within ± the threshold, else `inconclusive`.

use serde::Serialize;
use serde_json::Value;

use super::Headline;
use crate::stats::confidence::t_quantile;
use crate::stats::latency::LatencyHistogram;

/// The between-run CV assumed when nothing is learned (DESIGN.md §8's
/// measured 4.9 %, rounded up).
pub const PRIOR_CV: f64 = 0.05;
/// How much wider than the prior's the interval is drawn when nothing is
/// learned: a verdict then needs a change far beyond plausible noise
/// (with one run a side: beyond ±(e^(1.96·3·0.05·√2) − 1) ≈ 52 % up, 34 % down).
pub const PRIOR_FACTOR: f64 = 3.0;
/// `--threshold`'s default, percent.
pub const DEFAULT_THRESHOLD: f64 = 2.0;
/// Stored runs of a setup read to learn its noise.
pub const LEARN_FROM: u32 = 30;

/// What makes a comparison fail its command (`--fail-on`, exit 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailOn {
    /// Any figure regressed.
    Regression,
}

impl FailOn {
    /// Does comparison `c` fail the command?
    pub fn fails(self, c: &Comparison) -> bool {
        match self {
            FailOn::Regression => c.regressed(),
        }
    }
}

/// `run --baseline`: the stored run a new run is compared with when done,
/// and how.
#[derive(Clone, Debug, PartialEq)]
pub struct Baseline {
    /// The stored run: an id, or `label:KEY=VALUE` for the newest so labelled.
    pub run: String,
    /// A change under this many percent is "no change" (`--threshold`).
    pub threshold: f64,
    /// `--fail-on`: what fails the run; None: nothing.
    pub fail_on: Option<FailOn>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Verdict {
    #[serde(rename = "improved")]
    Improved,
    #[serde(rename = "regressed")]
    Regressed,
    #[serde(rename = "no change")]
    NoChange,
    #[serde(rename = "inconclusive")]
    Inconclusive,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Improved => "improved",
            Verdict::Regressed => "regressed",
            Verdict::NoChange => "no change",
            Verdict::Inconclusive => "inconclusive",
        }
    }
}

/// One result compared: its figures, document and the stored runs of its setup.
pub struct Side {
    pub headline: Headline,
    pub doc: Value,
    /// The headline figures of the stored runs of its setup, itself included when stored.
    pub setup_runs: Vec<Headline>,
}

/// One figure's comparison.
#[derive(Clone, Debug, Serialize)]
pub struct Figure {
    pub name: &'static str,
    pub unit: String,
    pub a: f64,
    pub b: f64,
    /// (B − A) / A, percent; null when A is 0 and B is not.
    pub change_percent: Option<f64>,
    /// The 95 % interval of the change, percent.
    pub interval_percent: Option<[f64; 2]>,
    pub verdict: Verdict,
    /// Where the run-to-run noise came from: `learned from N stored runs`,
    /// `iterations`, or `prior`.
    pub noise: String,
    /// Higher is better (throughput) or lower (latency, loss, CPU).
    pub higher_is_better: bool,
}

/// The document `compare --json` prints.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub a: String,
    pub b: String,
    pub threshold_percent: f64,
    pub figures: Vec<Figure>,
}

impl Comparison {
    pub fn regressed(&self) -> bool {
        self.figures.iter().any(|f| f.verdict == Verdict::Regressed)
    }
}

struct Def {
    name: &'static str,
    unit: &'static str,
    get: fn(&Headline) -> Option<f64>,
    higher_is_better: bool,
    /// A latency quantile, whose histogram adds within-run uncertainty.
    quantile: Option<f64>,
    /// The figure `--iterations` repeats (their `figure`).
    iterated: bool,
}

const DEFS: &[Def] = &[
    Def {
        name: "throughput",
        unit: "bit/s",
        get: |h| h.throughput_bps,
        higher_is_better: true,
        quantile: None,
        iterated: true,
    },
    Def {
        name: "transactions_per_s",
        unit: "trans/s",
        get: |h| h.transactions_per_s,
        higher_is_better: true,
        quantile: None,
        iterated: true,
    },
    Def {
        name: "latency_p50",
        unit: "ns",
        get: |h| h.latency_p50_ns,
        higher_is_better: false,
        quantile: Some(0.5),
        iterated: false,
    },
    Def {
        name: "latency_p99",
        unit: "ns",
        get: |h| h.latency_p99_ns,
        higher_is_better: false,
        quantile: Some(0.99),
        iterated: false,
    },
    Def {
        name: "loss",
        unit: "%",
        get: |h| h.loss_percent,
        higher_is_better: false,
        quantile: None,
        iterated: false,
    },
    Def {
        name: "local_cpu",
        unit: "%",
        get: |h| h.local_cpu_percent,
        higher_is_better: false,
        quantile: None,
        iterated: false,
    },
    Def {
        name: "remote_cpu",
        unit: "%",
        get: |h| h.remote_cpu_percent,
        higher_is_better: false,
        quantile: None,
        iterated: false,
    },
    Def {
        name: "local_service_demand",
        unit: "",
        get: |h| h.local_service_demand,
        higher_is_better: false,
        quantile: None,
        iterated: false,
    },
    Def {
        name: "remote_service_demand",
        unit: "",
        get: |h| h.remote_service_demand,
        higher_is_better: false,
        quantile: None,
        iterated: false,
    },
];

/// Sum of squared deviations of the logs of `v` (positive values) and its
/// degrees of freedom.
fn log_ss(v: &[f64]) -> (f64, u32) {
    let logs: Vec<f64> = v.iter().filter(|x| **x > 0.0).map(|x| x.ln()).collect();
    if logs.len() < 2 {
        return (0.0, 0);
    }
    let m = logs.iter().sum::<f64>() / logs.len() as f64;
    (
        logs.iter().map(|x| (x - m).powi(2)).sum(),
        logs.len() as u32 - 1,
    )
}

/// Pooled σ (of ln) and its degrees of freedom over groups of runs.
fn pooled(groups: &[Vec<f64>]) -> Option<(f64, u32)> {
    let (ss, dof) = groups
        .iter()
        .map(|g| log_ss(g))
        .fold((0.0, 0), |(s, d), (s2, d2)| (s + s2, d + d2));
    (dof >= 1).then(|| ((ss / f64::from(dof)).sqrt(), dof))
}

/// The `--iterations` figures of a result document.
fn iteration_figures(doc: &Value) -> Vec<f64> {
    doc["iterations"]
        .as_array()
        .map(|its| {
            its.iter()
                .filter(|i| i["error"].is_null())
                .filter_map(|i| i["figure"].as_f64())
                .collect()
        })
        .unwrap_or_default()
}

/// The half-width on the log scale of a run's own quantile `q`, from its
/// histogram: the ranks n·q ± 1.96·√(n·q·(1−q)).
fn quantile_half_width(doc: &Value, q: f64) -> Option<f64> {
    let h = LatencyHistogram::from_base64(doc["summary"]["histogram"].as_str()?).ok()?;
    let n = h.count() as f64;
    if n < 2.0 {
        return None;
    }
    let d = 1.96 * (n * q * (1.0 - q)).sqrt();
    let lo = h.quantile(((n * q - d) / n).clamp(0.0, 1.0)).max(1) as f64;
    let hi = h.quantile(((n * q + d) / n).clamp(0.0, 1.0)).max(1) as f64;
    Some((hi.ln() - lo.ln()) / 2.0)
}

/// A latency quantile's log-scale half-width from the run-to-run part
/// `between` and the two runs' own histogram part `within`. Learned from
/// stored runs, the between-run spread of the quantile already holds each
/// run's sampling error, so the histograms only set a floor (a lucky,
/// narrow few runs cannot make the interval narrower than the samples
/// allow); a prior or iterations say nothing of the quantile's sampling,
/// so the two add in quadrature.
fn combine(between: f64, within: f64, learned: bool) -> f64 {
    if learned {
        between.max(within)
    } else {
        between.hypot(within)
    }
}

/// Whether A and B are the same setup (one group of stored runs, not two).
pub fn compare(
    a_name: &str,
    a: &Side,
    b_name: &str,
    b: &Side,
    same_setup: bool,
    threshold_percent: f64,
) -> Comparison {
    let mut figures = Vec::new();
    for d in DEFS {
        let (Some(va), Some(vb)) = ((d.get)(&a.headline), (d.get)(&b.headline)) else {
            continue;
        };
        let unit = if d.unit.is_empty() {
            a.headline.service_demand_unit.clone().unwrap_or_default()
        } else {
            d.unit.to_string()
        };
        let values = |s: &Side| -> Vec<f64> { s.setup_runs.iter().filter_map(d.get).collect() };
        let mut groups = vec![values(a)];
        if !same_setup {
            groups.push(values(b));
        }
        let iterations = [iteration_figures(&a.doc), iteration_figures(&b.doc)];
        let (sigma, q, noise, learned) = if let Some((s, dof)) = pooled(&groups) {
            let n: usize = groups.iter().map(Vec::len).sum();
            (
                s,
                t_quantile(0.95, dof),
                format!("learned from {n} stored runs"),
                true,
            )
        } else if let Some((s, dof)) = pooled(&iterations).filter(|_| d.iterated) {
            (s, t_quantile(0.95, dof), "iterations".to_string(), false)
        } else {
            (
                PRIOR_CV,
                1.96 * PRIOR_FACTOR,
                format!("prior (CV {:.0} %)", PRIOR_CV * 100.0),
                false,
            )
        };
        let between = q * sigma * std::f64::consts::SQRT_2;
        let hw = match d.quantile {
            Some(p) => {
                let within = [a, b]
                    .iter()
                    .map(|s| quantile_half_width(&s.doc, p).unwrap_or(0.0).powi(2))
                    .sum::<f64>()
                    .sqrt();
                combine(between, within, learned)
            }
            None => between,
        };
        figures.push(judge(d, unit, va, vb, hw, noise, threshold_percent));
    }
    Comparison {
        a: a_name.to_string(),
        b: b_name.to_string(),
        threshold_percent,
        figures,
    }
}

/// The change, its interval from the log-scale half-width `hw`, and the verdict.
fn judge(d: &Def, unit: String, a: f64, b: f64, hw: f64, noise: String, threshold: f64) -> Figure {
    let mut f = Figure {
        name: d.name,
        unit,
        a,
        b,
        change_percent: None,
        interval_percent: None,
        verdict: Verdict::Inconclusive,
        noise,
        higher_is_better: d.higher_is_better,
    };
    if a == 0.0 && b == 0.0 {
        f.change_percent = Some(0.0);
        f.interval_percent = Some([0.0, 0.0]);
        f.verdict = Verdict::NoChange;
        return f;
    }
    if a <= 0.0 || b <= 0.0 {
        // From or to zero (loss): no ratio to put an interval on.
        return f;
    }
    let l = (b / a).ln();
    let change = (l.exp() - 1.0) * 100.0;
    let lo = ((l - hw).exp() - 1.0) * 100.0;
    let hi = ((l + hw).exp() - 1.0) * 100.0;
    f.change_percent = Some(change);
    f.interval_percent = Some([lo, hi]);
    f.verdict = if lo > 0.0 || hi < 0.0 {
        if change.abs() < threshold {
            Verdict::NoChange
        } else if (change > 0.0) == d.higher_is_better {
            Verdict::Improved
        } else {
            Verdict::Regressed
        }
    } else if lo >= -threshold && hi <= threshold {
        Verdict::NoChange
    } else {
        Verdict::Inconclusive
    };
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(bps: f64, history: &[f64]) -> Side {
        Side {
            headline: Headline {
                throughput_bps: Some(bps),
                ..Headline::default()
            },
            doc: Value::Null,
            setup_runs: history
                .iter()
                .map(|&x| Headline {
                    throughput_bps: Some(x),
                    ..Headline::default()
                })
                .collect(),
        }
    }

    fn verdict(a: &Side, b: &Side, same: bool) -> (Verdict, f64) {
        let c = compare("a", a, "b", b, same, DEFAULT_THRESHOLD);
        (c.figures[0].verdict, c.figures[0].change_percent.unwrap())
    }

    #[test]
    fn one_run_a_side_and_nothing_stored_needs_a_change_far_beyond_noise() {
        assert_eq!(
            verdict(&side(100.0, &[]), &side(80.0, &[]), false).0,
            Verdict::Inconclusive
        );
        assert_eq!(
            verdict(&side(100.0, &[]), &side(50.0, &[]), false).0,
            Verdict::Regressed
        );
        assert_eq!(
            verdict(&side(100.0, &[]), &side(200.0, &[]), false).0,
            Verdict::Improved
        );
    }

    #[test]
    fn learned_noise_calls_a_change_beyond_it() {
        // Two stored runs of A's setup 0.4 % apart, B 20 % lower.
        let a = side(100.0, &[100.0, 99.6]);
        let b = side(80.0, &[80.0]);
        let (v, ch) = verdict(&a, &b, false);
        assert_eq!(v, Verdict::Regressed);
        assert!((ch + 20.0).abs() < 1e-9);
        // A against A: never a verdict of a change.
        let (v, _) = verdict(&side(99.6, &[100.0, 99.6]), &a, true);
        assert!(
            matches!(v, Verdict::NoChange | Verdict::Inconclusive),
            "{v:?}"
        );
    }

    #[test]
    fn a_significant_change_under_the_threshold_is_no_change() {
        let many: Vec<f64> = (0..20).map(|i| 100.0 + (i % 2) as f64 * 0.01).collect();
        let (v, _) = verdict(&side(100.0, &many), &side(101.0, &many), true);
        assert_eq!(v, Verdict::NoChange);
    }

    #[test]
    fn lower_is_better_for_latency() {
        let h = |p50: f64| Side {
            headline: Headline {
                latency_p50_ns: Some(p50),
                ..Headline::default()
            },
            doc: Value::Null,
            setup_runs: vec![],
        };
        let c = compare("a", &h(100.0), "b", &h(300.0), false, DEFAULT_THRESHOLD);
        assert_eq!(c.figures[0].verdict, Verdict::Regressed);
        assert!(c.regressed());
    }

    fn latency(p50: f64, history: &[f64], hist: Option<&LatencyHistogram>) -> Side {
        let h = |x: f64| Headline {
            latency_p50_ns: Some(x),
            ..Headline::default()
        };
        Side {
            headline: h(p50),
            doc: hist.map_or(
                Value::Null,
                |hist| serde_json::json!({"summary": {"histogram": hist.to_base64()}}),
            ),
            setup_runs: history.iter().map(|&x| h(x)).collect(),
        }
    }

    #[test]
    fn latency_is_compared_on_the_log_scale_with_its_spread_learned() {
        // The busy VM's idle p50: 0.1 to 1 ms from run to run (σ of ln ≈ 0.9).
        let idle = [100e3, 300e3, 1e6, 150e3, 500e3, 120e3];
        let queued = 100e6;
        let c = compare(
            "a",
            &latency(idle[5], &idle, None),
            "b",
            &latency(queued, &[queued], None),
            false,
            DEFAULT_THRESHOLD,
        );
        let f = &c.figures[0];
        assert_eq!(f.verdict, Verdict::Regressed, "{f:?}");
        let ch = f.change_percent.unwrap();
        assert!((ch - (queued / idle[5] - 1.0) * 100.0).abs() < 1e-6 * ch);
        let [lo, hi] = f.interval_percent.unwrap();
        // Multiplicative: the interval is ratio × e^(±hw), asymmetric in percent.
        let (rl, rh) = (lo / 100.0 + 1.0, hi / 100.0 + 1.0);
        let r = ch / 100.0 + 1.0;
        assert!(((r / rl).ln() - (rh / r).ln()).abs() < 1e-9);
        // Three of those runs (2 degrees of freedom) are honestly too few to
        // call even a several-hundred-fold rise.
        let c = compare(
            "a",
            &latency(idle[1], &idle[..3], None),
            "b",
            &latency(queued, &[queued], None),
            false,
            DEFAULT_THRESHOLD,
        );
        assert_eq!(c.figures[0].verdict, Verdict::Inconclusive);
    }

    #[test]
    fn a_runs_histogram_is_a_floor_under_learned_noise_and_adds_to_a_prior() {
        // 40 samples spread from 1 to 2 ms: the median's rank interval is wide.
        let mut h = LatencyHistogram::new();
        for i in 0..40 {
            h.record(1_000_000 + i * 25_000);
        }
        let within = quantile_half_width(
            &serde_json::json!({"summary": {"histogram": h.to_base64()}}),
            0.5,
        )
        .unwrap();
        assert!(within > 0.05, "{within}");
        // Stored runs 0.1 % apart, B 10 % up: the histograms keep it from a call.
        let runs = [1.5e6, 1.5015e6, 1.499e6];
        let c = compare(
            "a",
            &latency(1.5e6, &runs, Some(&h)),
            "b",
            &latency(1.65e6, &[1.65e6], Some(&h)),
            false,
            DEFAULT_THRESHOLD,
        );
        assert_eq!(c.figures[0].verdict, Verdict::Inconclusive);
        assert_eq!(combine(0.3, 0.1, true), 0.3);
        assert!((combine(0.3, 0.4, false) - 0.5).abs() < 1e-12);
    }
}
