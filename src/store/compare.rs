//! `thrum compare`'s method: two sets of runs of one kind and test (an id
//! is a set of one, `label:KEY=VALUE` every run so labelled), every figure
//! both have ([`super::figures`]), the change between the sets' centres
//! with an interval that holds run-to-run noise, and a verdict whose
//! false alarms are bounded over the whole family of figures shown.
//! docs/history.md writes it down with worked examples and the A/A rates
//! measured.
//!
//! **The log scale.** Every figure is compared as a ratio: a queue or a
//! slower CPU scales latency, and a run-to-run spread is a factor. A set's
//! centre is the mean of its runs' logs (the geometric mean), the change
//! is ln B̄ − ln Ā, and percentages are converted back (e^x − 1).
//!
//! **The spread.** Two runs of one setup differ by more than either run's
//! own spread says (shared/DESIGN.md §8: tcp_rr on loopback, between-run
//! CV 4.9 % against a within-run standard error of 1.7 %), so each set's
//! variance is a between-run variance of one run's log, from, per set:
//!
//! 1. **its own runs**, when it has three or more (n − 1 degrees of
//!    freedom);
//! 2. with one or two runs, the largest of: its own two runs' spread,
//!    the **stored runs of its settings** ([`super::settings`]: the same
//!    command, test and target, grouped by their labels, each group's
//!    squared log deviations pooled), and a single run's
//!    **`--iterations`** (for the figure they repeat). Two runs that happen
//!    to agree cannot make the interval narrower than the stored runs
//!    allow: the learned noise is a floor;
//! 3. with nothing of its own, **the other set's** estimate (the
//!    equal-variance assumption of the pooled t test, the best there is);
//! 4. else the **prior**: σ = [`PRIOR_CV`] (5 %, DESIGN.md §8), drawn
//!    [`PRIOR_FACTOR`] times as wide with infinite degrees of freedom: with
//!    nothing learned, only a change far beyond any noise seen is called.
//!
//! The change's variance is Σ v_k / n_k, its degrees of freedom Welch's
//! (Satterthwaite's), each estimate counted once where both sets lean on
//! the same one. Latency quantiles also carry each run's own sampling
//! error, from its histogram (the distribution-free ranks n·p ±
//! z·√(n·p·(1−p))): a floor under the interval when the spread was
//! learned (which already holds it), added in quadrature to a prior or
//! iterations (which say nothing of it).
//!
//! **The family of figures.** One 95 % interval per figure calls a change
//! between identical setups once in twenty figures, and a comparison
//! shows five to ten: measured 2026-11-27, twenty A/A pairs called some
//! figure changed in 4. So the 5 % is spent over the family (Bonferroni,
//! so that the interval shown is the one the verdict reads): the gated
//! figures ([`Role::Headline`] ones unless `--gate` names others) share
//! [`GATED_ALPHA`] = 4 %, the other judged figures [`OTHER_ALPHA`] = 1 %
//! (all 5 % when one group is empty), each figure's interval at
//! 1 − its share. CPU % is shown with its change and interval but never
//! judged (`not judged`): it moves with the load, and service demand is
//! the CPU story. Between identical setups, then, at most 5 % of
//! comparisons call any figure changed, and the figures a CI job gates
//! on keep most of the power.
//!
//! A verdict: an interval clear of zero is `improved` or `regressed` (as
//! the figure is better higher or lower) unless the change is under the
//! threshold (`no change`); an interval across zero is `no change` when
//! it lies within ± the threshold, else `inconclusive`.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;
use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

use super::figures::{self, Role};
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
/// Stored runs of one settings key read to learn its noise.
pub const LEARN_FROM: u32 = 200;
/// The false-alarm budget of one comparison, over all its judged figures.
pub const FAMILY_ALPHA: f64 = 0.05;
/// The gated figures' share of it when other figures are judged too.
pub const GATED_ALPHA: f64 = 0.04;
/// The other judged figures' share.
pub const OTHER_ALPHA: f64 = FAMILY_ALPHA - GATED_ALPHA;
/// A set with fewer runs than this leans on learned noise as a floor.
pub const OWN_SPREAD_FROM: usize = 3;

/// What makes a comparison fail its command (`--fail-on`, exit 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailOn {
    /// A gated figure regressed.
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

/// `run --baseline`: the stored runs a new run is compared with when
/// done, and how.
#[derive(Clone, Debug, PartialEq)]
pub struct Baseline {
    /// An id, or `label:KEY=VALUE` for every run so labelled.
    pub run: String,
    /// With a label: only the newest this many (`--baseline-last`).
    pub last: Option<u32>,
    /// A change under this many percent is "no change" (`--threshold`).
    pub threshold: f64,
    /// `--fail-on`: what fails the run; None: nothing.
    pub fail_on: Option<FailOn>,
    /// `--gate`: the figures `--fail-on` looks at; None: the headline ones.
    pub gate: Option<Vec<String>>,
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
    /// CPU %: shown, never judged on its own.
    #[serde(rename = "not judged")]
    NotJudged,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Improved => "improved",
            Verdict::Regressed => "regressed",
            Verdict::NoChange => "no change",
            Verdict::Inconclusive => "inconclusive",
            Verdict::NotJudged => "not judged",
        }
    }
}

/// One run of a set: its id (None for a result file), document and figures.
#[derive(Clone, Debug)]
pub struct Run {
    /// The stored id, or the file's path.
    pub id: String,
    pub doc: Value,
    pub figures: Vec<figures::Figure>,
}

impl Run {
    pub fn new(id: String, doc: Value) -> Run {
        let figures = figures::of(&doc);
        Run { id, doc, figures }
    }

    /// A stored run by the figures the store keeps of it, its document
    /// not read (what a look over every setup's runs affords): without the
    /// document, a quantile's own sampling error and `--iterations` add
    /// nothing to the interval.
    pub fn stored(id: String, stored: &figures::StoredFigures) -> Run {
        let figures = stored
            .iter()
            .map(|(name, f)| figures::Figure {
                name: name.clone(),
                value: f.value,
                unit: f.unit.clone(),
                higher_is_better: f.higher_is_better,
                role: f.role,
                quantile: None,
                iterated: false,
            })
            .collect();
        Run {
            id,
            doc: Value::Null,
            figures,
        }
    }

    fn get(&self, name: &str) -> Option<&figures::Figure> {
        self.figures.iter().find(|f| f.name == name)
    }
}

/// One side of a comparison: one run, or every run of a label.
#[derive(Clone, Debug)]
pub struct Set {
    /// As the user named it, with what it resolved to.
    pub name: String,
    pub runs: Vec<Run>,
    /// The runs' settings key ([`super::settings::key`]).
    pub settings: String,
}

/// The stored runs of one settings key, grouped by their labels (a group
/// is one setup; a label that changes is a change of setup): what a set's
/// noise is learned from. Each run is its figures by name.
#[derive(Clone, Debug, Default)]
pub struct Pool {
    pub settings: String,
    pub groups: Vec<Vec<BTreeMap<String, f64>>>,
}

impl Pool {
    /// The pooled variance of one run's log of `name` and its degrees of
    /// freedom, and how many runs it came from; None without one degree.
    fn learned(&self, name: &str) -> Option<Estimate> {
        let (mut ss, mut dof, mut runs) = (0.0, 0usize, 0usize);
        for g in &self.groups {
            let logs: Vec<f64> = g
                .iter()
                .filter_map(|r| r.get(name).copied())
                .filter(|x| *x > 0.0)
                .map(f64::ln)
                .collect();
            if logs.len() >= 2 {
                ss += mean_ss(&logs).1;
                dof += logs.len() - 1;
                runs += logs.len();
            }
        }
        (dof >= 1).then(|| Estimate {
            var: ss / dof as f64,
            dof: dof as f64,
            runs,
            source: Source::Pool(self.settings.clone()),
        })
    }
}

/// One figure's comparison.
#[derive(Clone, Debug, Serialize)]
pub struct Figure {
    pub name: String,
    pub unit: String,
    /// A's centre: the geometric mean of its runs (the value, for one run).
    pub a: f64,
    pub b: f64,
    /// (B − A) / A, percent; null when a side has no ratio (zero).
    pub change_percent: Option<f64>,
    /// The interval of the change at `level_percent`, percent.
    pub interval_percent: Option<[f64; 2]>,
    pub verdict: Verdict,
    /// Where the run-to-run noise came from.
    pub noise: String,
    /// Higher is better (throughput) or lower (latency, loss, CPU).
    pub higher_is_better: bool,
    /// Runs of A, and of B, that have this figure.
    pub a_n: usize,
    pub b_n: usize,
    /// The confidence of the interval: 1 − this figure's share of the
    /// family's 5 %, percent (a CPU %, never judged: 95).
    pub level_percent: f64,
    /// `--fail-on regression` looks at this figure (`--gate`).
    pub gated: bool,
}

/// The document `compare --json` prints.
#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub a: String,
    pub b: String,
    pub threshold_percent: f64,
    pub figures: Vec<Figure>,
    /// How many runs each set holds.
    pub a_runs: usize,
    pub b_runs: usize,
    /// The runs: stored ids, or a result file's path.
    pub a_ids: Vec<String>,
    pub b_ids: Vec<String>,
    /// The figures `--fail-on regression` looks at.
    pub gate: Vec<String>,
    /// The false-alarm budget over every judged figure.
    pub family_alpha: f64,
}

impl Comparison {
    /// Whether a gated figure regressed.
    pub fn regressed(&self) -> bool {
        self.figures
            .iter()
            .any(|f| f.gated && f.verdict == Verdict::Regressed)
    }
}

/// Which set a variance estimate belongs to.
#[derive(Clone, Debug, PartialEq)]
enum Source {
    /// The set's own runs (0: A, 1: B).
    Own(usize),
    /// The stored runs of a settings key.
    Pool(String),
    /// A single run's `--iterations` (0: A, 1: B).
    Iterations(usize),
    Prior,
}

/// A variance of one run's log, its degrees of freedom (infinite for the
/// prior) and the runs (or iterations) it came from.
#[derive(Clone, Debug)]
struct Estimate {
    var: f64,
    dof: f64,
    runs: usize,
    source: Source,
}

/// The mean of `x` and its sum of squared deviations.
fn mean_ss(x: &[f64]) -> (f64, f64) {
    let m = x.iter().sum::<f64>() / x.len() as f64;
    (m, x.iter().map(|v| (v - m).powi(2)).sum())
}

/// The sample variance of `x` as an estimate from `source`; None under two.
fn spread(x: &[f64], source: Source) -> Option<Estimate> {
    (x.len() >= 2).then(|| {
        let (_, ss) = mean_ss(x);
        Estimate {
            var: ss / (x.len() - 1) as f64,
            dof: (x.len() - 1) as f64,
            runs: x.len(),
            source,
        }
    })
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

/// The two-sided quantile at `level` of Student's t with `dof` degrees of
/// freedom (any real number; infinite: the normal's).
fn quantile(level: f64, dof: f64) -> f64 {
    let p = 1.0 - (1.0 - level) / 2.0;
    if dof.is_finite() && dof < 1e7 {
        StudentsT::new(0.0, 1.0, dof.max(1.0))
            .expect("dof >= 1 is a valid Student-t")
            .inverse_cdf(p)
    } else {
        Normal::standard().inverse_cdf(p)
    }
}

/// The half-width on the log scale of a run's own quantile `q` at 95 %,
/// from the histogram at JSON pointer `at`: the ranks n·q ± 1.96·√(n·q·(1−q)).
fn quantile_half_width(doc: &Value, at: &str, q: f64) -> Option<f64> {
    let h = LatencyHistogram::from_base64(doc.pointer(at)?.as_str()?).ok()?;
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
/// `between` and the runs' own histogram part `within`. Learned from runs,
/// the between-run spread of the quantile already holds each run's
/// sampling error, so the histograms only set a floor (a lucky, narrow few
/// runs cannot make the interval narrower than the samples allow); a prior
/// or iterations say nothing of the quantile's sampling, so the two add
/// in quadrature.
fn combine(between: f64, within: f64, learned: bool) -> f64 {
    if learned {
        between.max(within)
    } else {
        between.hypot(within)
    }
}

/// The figures `--fail-on` looks at, checked against those compared:
/// `gate`'s names, or every headline figure. A name compared in neither
/// set, or a CPU figure, is an error naming `--gate`.
fn gated(gate: Option<&[String]>, shared: &[(String, Role)]) -> Result<Vec<String>, String> {
    let Some(names) = gate else {
        return Ok(shared
            .iter()
            .filter(|(_, r)| *r == Role::Headline)
            .map(|(n, _)| n.clone())
            .collect());
    };
    for n in names {
        match shared.iter().find(|(s, _)| s == n) {
            Some((_, Role::Cpu)) => {
                return Err(format!(
                    "--gate {}: CPU % is shown but never judged on its own (it moves with the load); gate on the service demand instead",
                    crate::text::echo(n)
                ));
            }
            Some(_) => {}
            None => {
                let list: Vec<&str> = shared
                    .iter()
                    .filter(|(_, r)| *r != Role::Cpu)
                    .map(|(s, _)| s.as_str())
                    .collect();
                return Err(format!(
                    "--gate {}: no such figure in both sets (accepted: {})",
                    crate::text::echo(n),
                    list.join(", ")
                ));
            }
        }
    }
    Ok(names.to_vec())
}

/// The figures both sets have, in A's order, with their role.
fn shared(a: &Set, b: &Set) -> Vec<(String, Role)> {
    let mut out: Vec<(String, Role)> = Vec::new();
    for f in a.runs.iter().flat_map(|r| &r.figures) {
        if out.iter().any(|(n, _)| *n == f.name) {
            continue;
        }
        if b.runs.iter().any(|r| r.get(&f.name).is_some()) {
            out.push((f.name.clone(), f.role));
        }
    }
    out
}

/// Check `gate` against the figures `a` and `b` share: the names
/// `--fail-on` will look at.
pub fn check_gate(a: &Set, b: &Set, gate: Option<&[String]>) -> Result<Vec<String>, String> {
    gated(gate, &shared(a, b))
}

/// Compare set `a` with set `b`, learning noise from `pools` (one per
/// settings key of the sets; may be empty). `gate`: the figures
/// `--fail-on` looks at (None: the headline ones).
pub fn compare(
    a: &Set,
    b: &Set,
    pools: &[Pool],
    threshold_percent: f64,
    gate: Option<&[String]>,
) -> Result<Comparison, String> {
    let shared = shared(a, b);
    let gate = gated(gate, &shared)?;
    let judged = |gated: bool| {
        shared
            .iter()
            .filter(|(n, r)| *r != Role::Cpu && gate.contains(n) == gated)
            .count()
    };
    let (m_gated, m_other) = (judged(true), judged(false));
    let share = |gated: bool| -> f64 {
        match (m_gated, m_other) {
            (0, m) | (m, 0) => FAMILY_ALPHA / m.max(1) as f64,
            _ if gated => GATED_ALPHA / m_gated as f64,
            _ => OTHER_ALPHA / m_other as f64,
        }
    };
    let mut figures = Vec::new();
    for (name, role) in &shared {
        let is_gated = gate.contains(name);
        // CPU %, shown only, at the usual 95 %.
        let alpha = if *role == Role::Cpu {
            FAMILY_ALPHA
        } else {
            share(is_gated)
        };
        let sets = [a, b];
        let values: [Vec<(f64, &Run, &figures::Figure)>; 2] = sets.map(|s| {
            s.runs
                .iter()
                .filter_map(|r| r.get(name).map(|f| (f.value, r, f)))
                .collect()
        });
        let meta = values[0][0].2;
        let mut f = Figure {
            name: name.clone(),
            unit: meta.unit.clone(),
            a: 0.0,
            b: 0.0,
            change_percent: None,
            interval_percent: None,
            verdict: Verdict::Inconclusive,
            noise: String::new(),
            higher_is_better: meta.higher_is_better,
            a_n: values[0].len(),
            b_n: values[1].len(),
            level_percent: (1.0 - alpha) * 100.0,
            gated: is_gated,
        };
        let positive = values.iter().flatten().all(|(v, _, _)| *v > 0.0);
        if !positive {
            // A zero (loss) has no logarithm: the arithmetic means, and
            // no interval unless both are nothing at all.
            let mean = |v: &[(f64, &Run, &figures::Figure)]| {
                v.iter().map(|x| x.0).sum::<f64>() / v.len() as f64
            };
            (f.a, f.b) = (mean(&values[0]), mean(&values[1]));
            if f.a == 0.0 && f.b == 0.0 {
                f.change_percent = Some(0.0);
                f.interval_percent = Some([0.0, 0.0]);
                f.verdict = Verdict::NoChange;
            }
            f.noise = "none: a zero has no ratio".into();
            if *role == Role::Cpu {
                f.verdict = Verdict::NotJudged;
            }
            figures.push(f);
            continue;
        }
        let logs: [Vec<f64>; 2] = [0, 1].map(|k| values[k].iter().map(|x| x.0.ln()).collect());
        let centre = |x: &[f64]| x.iter().sum::<f64>() / x.len() as f64;
        (f.a, f.b) = (centre(&logs[0]).exp(), centre(&logs[1]).exp());
        // Each set's estimate, before borrowing.
        let own: [Option<Estimate>; 2] = [0, 1].map(|k| {
            let set = sets[k];
            let n = logs[k].len();
            if n >= OWN_SPREAD_FROM {
                return spread(&logs[k], Source::Own(k));
            }
            let mut c: Vec<Estimate> = Vec::new();
            c.extend(spread(&logs[k], Source::Own(k)));
            c.extend(
                pools
                    .iter()
                    .find(|p| p.settings == set.settings)
                    .and_then(|p| p.learned(name)),
            );
            if n == 1 && meta.iterated {
                let its: Vec<f64> = iteration_figures(&values[k][0].1.doc)
                    .into_iter()
                    .filter(|x| *x > 0.0)
                    .map(f64::ln)
                    .collect();
                c.extend(spread(&its, Source::Iterations(k)));
            }
            c.into_iter().max_by(|x, y| x.var.total_cmp(&y.var))
        });
        let learned = |e: &Option<Estimate>| {
            e.as_ref()
                .filter(|e| matches!(e.source, Source::Own(_) | Source::Pool(_)))
                .cloned()
        };
        let prior = || Estimate {
            var: (PRIOR_FACTOR * PRIOR_CV).powi(2),
            dof: f64::INFINITY,
            runs: 0,
            source: Source::Prior,
        };
        let est: [Estimate; 2] = [0, 1].map(|k| {
            own[k]
                .clone()
                .or_else(|| learned(&own[1 - k]))
                .unwrap_or_else(prior)
        });
        // Σ v/n per distinct estimate, then Satterthwaite's degrees.
        let mut terms: Vec<(Source, f64, f64, usize)> = Vec::new();
        for k in 0..2 {
            let e = &est[k];
            let v = e.var / logs[k].len() as f64;
            match terms.iter_mut().find(|t| t.0 == e.source) {
                Some(t) => t.1 += v,
                None => terms.push((e.source.clone(), v, e.dof, e.runs)),
            }
        }
        let var: f64 = terms.iter().map(|t| t.1).sum();
        let denom: f64 = terms
            .iter()
            .filter(|t| t.2.is_finite())
            .map(|t| t.1 * t.1 / t.2)
            .sum();
        let dof = if denom > 0.0 {
            var * var / denom
        } else {
            f64::INFINITY
        };
        let level = 1.0 - alpha;
        let mut hw = quantile(level, dof) * var.sqrt();
        if let Some((at, q)) = &meta.quantile {
            // Each run's own sampling error of its quantile, at this level.
            let z = quantile(level, f64::INFINITY) / 1.96;
            let within = [0, 1]
                .map(|k| {
                    let n = values[k].len() as f64;
                    values[k]
                        .iter()
                        .map(|(_, r, _)| quantile_half_width(&r.doc, at, *q).unwrap_or(0.0).powi(2))
                        .sum::<f64>()
                        / (n * n)
                })
                .iter()
                .sum::<f64>()
                .sqrt()
                * z;
            let by_runs = est.iter().all(|e| learned(&Some(e.clone())).is_some());
            hw = combine(hw, within, by_runs);
        }
        f.noise = noise(&est, &terms, dof);
        judge(&mut f, logs_change(&logs), hw, threshold_percent);
        if *role == Role::Cpu {
            f.verdict = Verdict::NotJudged;
        }
        figures.push(f);
    }
    let ids = |s: &Set| s.runs.iter().map(|r| r.id.clone()).collect::<Vec<_>>();
    Ok(Comparison {
        a: a.name.clone(),
        b: b.name.clone(),
        threshold_percent,
        figures,
        a_runs: a.runs.len(),
        b_runs: b.runs.len(),
        a_ids: ids(a),
        b_ids: ids(b),
        gate,
        family_alpha: FAMILY_ALPHA,
    })
}

/// ln B̄ − ln Ā: the difference of the sets' mean logs.
fn logs_change(logs: &[Vec<f64>; 2]) -> f64 {
    let m = |x: &[f64]| x.iter().sum::<f64>() / x.len() as f64;
    m(&logs[1]) - m(&logs[0])
}

/// Where the noise came from, in words: `learned from N runs (A: its 3
/// runs; B: its 3 runs; 3.9 dof)`, `iterations (…)`, `prior (CV 5 %)`.
fn noise(est: &[Estimate; 2], terms: &[(Source, f64, f64, usize)], dof: f64) -> String {
    let side = ["A", "B"];
    let what = |e: &Estimate| match &e.source {
        Source::Own(k) => format!("{}'s {} runs", side[*k], e.runs),
        Source::Pool(_) => format!("{} stored runs of its settings", e.runs),
        Source::Iterations(k) => format!("{}'s {} iterations", side[*k], e.runs),
        Source::Prior => format!("prior, CV {:.0} %", PRIOR_CV * 100.0),
    };
    if terms.iter().all(|t| t.0 == Source::Prior) {
        return format!("prior (CV {:.0} %)", PRIOR_CV * 100.0);
    }
    let parts: Vec<String> = if est[0].source == est[1].source {
        vec![format!("A and B: {}", what(&est[0]))]
    } else {
        (0..2)
            .map(|k| format!("{}: {}", side[k], what(&est[k])))
            .collect()
    };
    let runs: usize = terms
        .iter()
        .filter(|t| matches!(t.0, Source::Own(_) | Source::Pool(_)))
        .map(|t| t.3)
        .sum();
    let dof = if dof.is_finite() {
        format!("{dof:.1} dof")
    } else {
        "z".into()
    };
    let head = if runs > 0 {
        format!("learned from {runs} runs")
    } else {
        "iterations".into()
    };
    format!("{head} ({}; {dof})", parts.join("; "))
}

/// The change `l` (log scale), its interval from the half-width `hw`, and
/// the verdict.
fn judge(f: &mut Figure, l: f64, hw: f64, threshold: f64) {
    let change = (l.exp() - 1.0) * 100.0;
    let lo = ((l - hw).exp() - 1.0) * 100.0;
    let hi = ((l + hw).exp() - 1.0) * 100.0;
    f.change_percent = Some(change);
    f.interval_percent = Some([lo, hi]);
    f.verdict = if lo > 0.0 || hi < 0.0 {
        if change.abs() < threshold {
            Verdict::NoChange
        } else if (change > 0.0) == f.higher_is_better {
            Verdict::Improved
        } else {
            Verdict::Regressed
        }
    } else if lo >= -threshold && hi <= threshold {
        Verdict::NoChange
    } else {
        Verdict::Inconclusive
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn bulk(bps: f64, cpu: f64, sd: f64) -> Value {
        json!({"schema": "thrum.result.v1", "test": "tcp_stream", "summary": {
            "throughput_bps": bps,
            "local": {"cpu_util_percent": cpu, "service_demand_us_per_kb": sd},
            "remote": {}}})
    }

    fn set(name: &str, bps: &[f64]) -> Set {
        Set {
            name: name.into(),
            runs: bps
                .iter()
                .enumerate()
                .map(|(i, &x)| Run::new(format!("{name}{i}"), bulk(x, 10.0, 0.1)))
                .collect(),
            settings: "s".into(),
        }
    }

    fn pool(groups: &[&[f64]]) -> Pool {
        Pool {
            settings: "s".into(),
            groups: groups
                .iter()
                .map(|g| {
                    g.iter()
                        .map(|&x| BTreeMap::from([("throughput".to_string(), x)]))
                        .collect()
                })
                .collect(),
        }
    }

    fn throughput(c: &Comparison) -> &Figure {
        c.figures.iter().find(|f| f.name == "throughput").unwrap()
    }

    fn cmp(a: &Set, b: &Set, pools: &[Pool]) -> Comparison {
        compare(a, b, pools, DEFAULT_THRESHOLD, None).unwrap()
    }

    #[test]
    fn one_run_a_side_and_nothing_stored_needs_a_change_far_beyond_noise() {
        let v = |b: f64| throughput(&cmp(&set("a", &[100.0]), &set("b", &[b]), &[])).verdict;
        assert_eq!(v(80.0), Verdict::Inconclusive);
        assert_eq!(v(50.0), Verdict::Regressed);
        assert_eq!(v(200.0), Verdict::Improved);
        let c = cmp(&set("a", &[100.0]), &set("b", &[80.0]), &[]);
        assert_eq!(throughput(&c).noise, "prior (CV 5 %)");
    }

    #[test]
    fn sets_compare_their_geometric_means_with_welch_on_the_logs() {
        let a = set("a", &[100.0, 98.0, 102.0]);
        let b = set("b", &[90.0, 89.0, 91.5]);
        let c = cmp(&a, &b, &[]);
        let f = throughput(&c);
        let g = |x: &[f64]| (x.iter().map(|v: &f64| v.ln()).sum::<f64>() / 3.0).exp();
        assert!((f.a - g(&[100.0, 98.0, 102.0])).abs() < 1e-9);
        let ch = f.change_percent.unwrap();
        assert!((ch - (f.b / f.a - 1.0) * 100.0).abs() < 1e-9);
        assert_eq!(f.verdict, Verdict::Regressed, "{f:?}");
        assert_eq!((f.a_n, f.b_n, c.a_runs, c.b_runs), (3, 3, 3, 3));
        assert!(
            f.noise
                .starts_with("learned from 6 runs (A: A's 3 runs; B: B's 3 runs; ")
        );
        // By hand: Welch's interval on the logs, at the gated share (4 %).
        let la: Vec<f64> = [100.0f64, 98.0, 102.0].iter().map(|x| x.ln()).collect();
        let lb: Vec<f64> = [90.0f64, 89.0, 91.5].iter().map(|x| x.ln()).collect();
        let var = |x: &[f64]| mean_ss(x).1 / 2.0;
        let (va, vb) = (var(&la) / 3.0, var(&lb) / 3.0);
        let dof = (va + vb).powi(2) / (va * va / 2.0 + vb * vb / 2.0);
        let hw = quantile(0.96, dof) * (va + vb).sqrt();
        let l = (f.b / f.a).ln();
        let [lo, hi] = f.interval_percent.unwrap();
        assert!((lo - ((l - hw).exp() - 1.0) * 100.0).abs() < 1e-9);
        assert!((hi - ((l + hw).exp() - 1.0) * 100.0).abs() < 1e-9);
        assert!((f.level_percent - 96.0).abs() < 1e-9);
    }

    #[test]
    fn a_set_of_one_leans_on_the_stored_runs_of_its_settings() {
        // The stored runs of one setup 0.4 % apart, B 20 % lower.
        let p = pool(&[&[100.0, 99.6], &[80.0]]);
        let f = cmp(&set("a", &[100.0]), &set("b", &[80.0]), &[p]);
        let f = throughput(&f);
        assert_eq!(f.verdict, Verdict::Regressed);
        assert!(
            f.noise
                .starts_with("learned from 2 runs (A and B: 2 stored runs"),
            "{}",
            f.noise
        );
        // One estimate for both: 1 degree of freedom, not Welch's 2.
        assert!(f.noise.ends_with("1.0 dof)"), "{}", f.noise);
        // Two runs that agree closely do not beat the stored spread: a floor.
        let wide = pool(&[&[100.0, 90.0, 110.0, 95.0, 105.0]]);
        let c = cmp(&set("a", &[100.0, 100.1]), &set("b", &[95.0]), &[wide]);
        assert!(throughput(&c).noise.contains("stored runs"));
        assert_eq!(throughput(&c).verdict, Verdict::Inconclusive);
    }

    #[test]
    fn a_set_with_nothing_of_its_own_borrows_the_others_spread() {
        let c = cmp(
            &set("a", &[100.0, 98.0, 102.0, 99.0]),
            &set("b", &[80.0]),
            &[],
        );
        let f = throughput(&c);
        assert_eq!(f.verdict, Verdict::Regressed);
        assert!(
            f.noise
                .starts_with("learned from 4 runs (A and B: A's 4 runs"),
            "{}",
            f.noise
        );
    }

    #[test]
    fn the_family_shares_five_percent_and_cpu_is_never_judged() {
        let a = Set {
            name: "a".into(),
            runs: [(100.0, 10.0, 0.10), (99.0, 11.0, 0.11), (101.0, 9.0, 0.09)]
                .iter()
                .enumerate()
                .map(|(i, &(t, c, s))| Run::new(format!("a{i}"), bulk(t, c, s)))
                .collect(),
            settings: "s".into(),
        };
        let b = Set {
            runs: [(100.5, 5.0, 0.2), (99.5, 5.1, 0.21), (100.0, 4.9, 0.19)]
                .iter()
                .enumerate()
                .map(|(i, &(t, c, s))| Run::new(format!("b{i}"), bulk(t, c, s)))
                .collect(),
            ..a.clone()
        };
        let c = cmp(&a, &b, &[]);
        let by = |n: &str| c.figures.iter().find(|f| f.name == n).unwrap();
        assert_eq!(c.gate, ["throughput"]);
        assert_eq!(by("throughput").level_percent, 96.0);
        assert_eq!(by("local_service_demand").level_percent, 99.0);
        assert_eq!(by("local_cpu").verdict, Verdict::NotJudged);
        assert_eq!(by("local_cpu").level_percent, 95.0);
        // Service demand doubled: regressed, but not gated, so no failure.
        assert_eq!(by("local_service_demand").verdict, Verdict::Regressed);
        assert!(!c.regressed());
        assert!(!FailOn::Regression.fails(&c));
        // Gated on it: it fails, and the whole 5 % is its.
        let gate = ["local_service_demand".to_string()];
        let c = compare(&a, &b, &[], DEFAULT_THRESHOLD, Some(&gate)).unwrap();
        assert!(c.regressed());
        let by = |n: &str| c.figures.iter().find(|f| f.name == n).unwrap().clone();
        assert_eq!(by("local_service_demand").level_percent, 96.0);
        assert_eq!(by("throughput").level_percent, 99.0);
        let e = compare(&a, &b, &[], 2.0, Some(&["local_cpu".to_string()])).unwrap_err();
        assert!(
            e.contains("--gate local_cpu") && e.contains("service demand"),
            "{e}"
        );
        let e = compare(&a, &b, &[], 2.0, Some(&["nope".to_string()])).unwrap_err();
        assert!(e.contains("--gate nope") && e.contains("throughput"), "{e}");
    }

    #[test]
    fn a_significant_change_under_the_threshold_is_no_change() {
        let many: Vec<f64> = (0..20).map(|i| 100.0 + (i % 2) as f64 * 0.01).collect();
        let up: Vec<f64> = many.iter().map(|x| x * 1.01).collect();
        let c = cmp(&set("a", &many), &set("b", &up), &[]);
        assert_eq!(throughput(&c).verdict, Verdict::NoChange);
    }

    fn latency(p50: f64, hist: Option<&LatencyHistogram>) -> Run {
        let mut doc = json!({"schema": "thrum.result.v1", "test": "udp_rr", "summary": {
            "transactions_per_s": 200.0, "offered_per_s": 200.0,
            "latency_ns": {"p50": p50, "p99": p50 * 2.0}, "local": {}, "remote": {}}});
        if let Some(h) = hist {
            doc["summary"]["histogram"] = h.to_base64().into();
        }
        Run::new("r".into(), doc)
    }

    fn lat_set(p50s: &[f64], hist: Option<&LatencyHistogram>) -> Set {
        Set {
            name: "l".into(),
            runs: p50s.iter().map(|&x| latency(x, hist)).collect(),
            settings: "l".into(),
        }
    }

    fn p50(c: &Comparison) -> &Figure {
        c.figures.iter().find(|f| f.name == "latency_p50").unwrap()
    }

    #[test]
    fn latency_is_compared_on_the_log_scale_with_its_spread_learned() {
        // The busy VM's idle p50: 0.1 to 1 ms from run to run (σ of ln ≈ 0.9).
        let idle = [100e3, 300e3, 1e6, 150e3, 500e3, 120e3];
        let queued = 100e6;
        let c = cmp(&lat_set(&idle, None), &lat_set(&[queued], None), &[]);
        let f = p50(&c);
        assert_eq!(f.verdict, Verdict::Regressed, "{f:?}");
        assert!(f.gated, "open loop: latency is the headline");
        let [lo, hi] = f.interval_percent.unwrap();
        // Multiplicative: the interval is ratio × e^(±hw), asymmetric in percent.
        let r = f.change_percent.unwrap() / 100.0 + 1.0;
        let (rl, rh) = (lo / 100.0 + 1.0, hi / 100.0 + 1.0);
        assert!(((r / rl).ln() - (rh / r).ln()).abs() < 1e-9);
        // Three of those runs are honestly too few to call a 100-fold rise.
        let c = cmp(&lat_set(&idle[..3], None), &lat_set(&[30e6], None), &[]);
        assert_eq!(p50(&c).verdict, Verdict::Inconclusive);
    }

    #[test]
    fn a_runs_histogram_is_a_floor_under_learned_noise_and_adds_to_a_prior() {
        // 40 samples spread from 1 to 2 ms: the median's rank interval is wide.
        let mut h = LatencyHistogram::new();
        for i in 0..40 {
            h.record(1_000_000 + i * 25_000);
        }
        let doc = json!({"summary": {"histogram": h.to_base64()}});
        let within = quantile_half_width(&doc, "/summary/histogram", 0.5).unwrap();
        assert!(within > 0.05, "{within}");
        // Runs 0.1 % apart, B 8 % up: the histograms keep it from a call.
        let c = cmp(
            &lat_set(&[1.5e6, 1.5015e6, 1.499e6], Some(&h)),
            &lat_set(&[1.62e6, 1.621e6, 1.619e6], Some(&h)),
            &[],
        );
        assert_eq!(p50(&c).verdict, Verdict::Inconclusive, "{:?}", p50(&c));
        assert_eq!(combine(0.3, 0.1, true), 0.3);
        assert!((combine(0.3, 0.4, false) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn t_quantiles_of_any_degrees_and_the_normals() {
        assert!((quantile(0.95, 2.0) - 4.303).abs() < 1e-3);
        assert!((quantile(0.95, f64::INFINITY) - 1.96).abs() < 1e-3);
        let mid = quantile(0.95, 2.5);
        assert!(mid < 4.303 && mid > quantile(0.95, 3.0));
    }
}
