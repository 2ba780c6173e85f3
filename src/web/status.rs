//! How a setup stands against its own normal, for a cell of the overview:
//! its newest run compared by `thrum compare`'s method
//! ([`crate::store::compare`]) with the runs of the same setup before it
//! (their medians as A, their spread as the learned run-to-run noise), on
//! the setup's headline figure (throughput, else transactions/s, else
//! the median latency, else loss). One figure, not every figure compare
//! shows: a grid of many cells each judged on several figures would raise
//! a false alarm somewhere on almost every look.

use serde::Serialize;

use crate::export::draw::smoke::Quantity;
use crate::store::compare::{self, Side, Verdict};
use crate::store::{Headline, Row};

/// Where a setup stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Fewer than [`MIN_HISTORY`] earlier runs: no normal learned yet.
    New,
    /// Within its normal (no change, or inconclusive).
    Normal,
    /// Changed for the better beyond its noise.
    Changed,
    /// Changed for the worse beyond its noise.
    Regressed,
    /// The newest run ended with an error.
    Failing,
    /// No run for much longer than its runs came before.
    Stale,
}

impl Status {
    /// Every status, in the legend's order.
    pub const ALL: [Status; 6] = [
        Status::Normal,
        Status::Changed,
        Status::Regressed,
        Status::Failing,
        Status::Stale,
        Status::New,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Status::New => "new",
            Status::Normal => "normal",
            Status::Changed => "changed",
            Status::Regressed => "regressed",
            Status::Failing => "failing",
            Status::Stale => "stale",
        }
    }

    /// What it means, for the legend.
    pub fn meaning(self) -> &'static str {
        match self {
            Status::New => "too few runs yet to know its normal",
            Status::Normal => "within its own run-to-run noise",
            Status::Changed => "better than its normal, beyond the noise",
            Status::Regressed => "worse than its normal, beyond the noise",
            Status::Failing => "the newest run failed",
            Status::Stale => "no run for 3× its usual gap",
        }
    }

    /// Its colour, for a sparkline's last point.
    pub fn colour(self) -> &'static str {
        match self {
            Status::New => "#868e96",
            Status::Normal => "#2f9e44",
            Status::Changed => "#1c7ed6",
            Status::Regressed => "#e8590c",
            Status::Failing => "#c92a2a",
            Status::Stale => "#adb5bd",
        }
    }
}

/// The earlier runs needed before a setup has a normal (two give one
/// degree of freedom to learn its noise from).
pub const MIN_HISTORY: usize = 2;
/// A setup is stale past this many of its usual gaps without a run.
pub const STALE_GAPS: f64 = 3.0;
/// …and never sooner than this, seconds (a probe every minute that
/// misses two is not yet news).
pub const STALE_FLOOR_S: f64 = 600.0;

/// A setup's headline figure: its name as compare gives it, its value,
/// what it is.
pub fn headline(h: &Headline) -> Option<(&'static str, f64, Quantity)> {
    if let Some(v) = h.throughput_bps {
        return Some(("throughput", v, Quantity::BitsPerSec));
    }
    if let Some(v) = h.transactions_per_s {
        return Some(("transactions_per_s", v, Quantity::TransPerSec));
    }
    if let Some(v) = h.latency_p50_ns {
        return Some(("latency_p50", v, Quantity::Latency));
    }
    h.loss_percent.map(|v| ("loss", v, Quantity::Percent))
}

/// A figure's name as `thrum compare` gives it, as a reader says it.
pub fn figure_name(name: &str) -> &str {
    match name {
        "throughput" => "throughput",
        "transactions_per_s" => "transactions/s",
        "latency_p50" => "latency p50",
        "latency_p99" => "latency p99",
        "loss" => "loss",
        "local_cpu" => "local CPU",
        "remote_cpu" => "remote CPU",
        "local_service_demand" => "local service demand",
        "remote_service_demand" => "remote service demand",
        other => other,
    }
}

/// A figure as a cell shows it, in the unit its quantity reads in.
pub fn show(v: f64, q: Quantity) -> String {
    match q {
        Quantity::BitsPerSec => crate::units::BitsPerSec(v).to_string(),
        Quantity::TransPerSec => format!("{} trans/s", crate::units::fmt_si(v)),
        Quantity::Latency => crate::units::fmt_ns(v),
        Quantity::Percent => format!("{v:.2} %"),
    }
}

/// The median of `v`'s values that are there.
fn median(v: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let mut xs: Vec<f64> = v.flatten().filter(|x| x.is_finite()).collect();
    if xs.is_empty() {
        return None;
    }
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    Some(if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    })
}

/// The medians of every headline figure of `runs`.
fn medians(runs: &[&Headline]) -> Headline {
    let m = |f: fn(&Headline) -> Option<f64>| median(runs.iter().map(|h| f(h)));
    Headline {
        throughput_bps: m(|h| h.throughput_bps),
        transactions_per_s: m(|h| h.transactions_per_s),
        latency_p50_ns: m(|h| h.latency_p50_ns),
        latency_p99_ns: m(|h| h.latency_p99_ns),
        loss_percent: m(|h| h.loss_percent),
        local_cpu_percent: m(|h| h.local_cpu_percent),
        remote_cpu_percent: m(|h| h.remote_cpu_percent),
        local_service_demand: m(|h| h.local_service_demand),
        remote_service_demand: m(|h| h.remote_service_demand),
        service_demand_unit: runs.first().and_then(|h| h.service_demand_unit.clone()),
    }
}

/// A setup judged: its status and a sentence saying why.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Judged {
    pub status: Status,
    pub why: String,
}

/// Judge a setup by its runs, newest first, at `now` (Unix seconds).
pub fn judge(runs: &[&Row], now: f64) -> Judged {
    let Some(newest) = runs.first() else {
        return Judged {
            status: Status::New,
            why: "no run".into(),
        };
    };
    if !newest.ok {
        return Judged {
            status: Status::Failing,
            why: "the newest run ended with an error".into(),
        };
    }
    let mut gaps: Vec<f64> = runs
        .windows(2)
        .take(10)
        .map(|w| w[0].time_unix_s - w[1].time_unix_s)
        .collect();
    if gaps.len() >= 2 {
        gaps.sort_by(f64::total_cmp);
        let usual = gaps[gaps.len() / 2];
        let age = now - newest.time_unix_s;
        if age > (STALE_GAPS * usual).max(STALE_FLOOR_S) {
            return Judged {
                status: Status::Stale,
                why: format!(
                    "no run for {} (runs came about every {})",
                    span(age),
                    span(usual)
                ),
            };
        }
    }
    let before: Vec<&Headline> = runs[1..]
        .iter()
        .filter(|r| r.ok)
        .take(compare::LEARN_FROM as usize)
        .map(|r| &r.headline)
        .collect();
    if before.len() < MIN_HISTORY {
        return Judged {
            status: Status::New,
            why: format!(
                "{} earlier run(s) without an error: {MIN_HISTORY} are needed to learn its normal",
                before.len()
            ),
        };
    }
    let Some((name, value, q)) = headline(&newest.headline) else {
        return Judged {
            status: Status::Normal,
            why: "no headline figure to judge (a mix, an aggregate): it ran without an error"
                .into(),
        };
    };
    let normal = Side {
        headline: medians(&before),
        doc: serde_json::Value::Null,
        setup_runs: before.iter().map(|h| (*h).clone()).collect(),
    };
    let this = Side {
        headline: newest.headline.clone(),
        doc: serde_json::Value::Null,
        setup_runs: Vec::new(),
    };
    let c = compare::compare(
        "normal",
        &normal,
        "newest",
        &this,
        true,
        compare::DEFAULT_THRESHOLD,
    );
    let Some(f) = c.figures.iter().find(|f| f.name == name) else {
        return Judged {
            status: Status::Normal,
            why: "no headline figure in common with the runs before".into(),
        };
    };
    let status = match f.verdict {
        Verdict::Regressed => Status::Regressed,
        Verdict::Improved => Status::Changed,
        Verdict::NoChange | Verdict::Inconclusive => Status::Normal,
    };
    let change = match (f.change_percent, f.interval_percent) {
        (Some(c), Some([lo, hi])) => format!(" {c:+.1} % (95 %: {lo:+.1} … {hi:+.1} %)"),
        _ => String::new(),
    };
    Judged {
        status,
        why: format!(
            "{}: {}{change} against the median {} of the {} runs before ({}): {}",
            figure_name(name),
            show(value, q),
            show(f.a, q),
            before.len(),
            f.noise,
            f.verdict.name()
        ),
    }
}

/// A span of seconds in the largest unit that fits: `40 s`, `12 min`, `3.5 h`, `2.0 d`.
pub fn span(s: f64) -> String {
    if s < 120.0 {
        format!("{s:.0} s")
    } else if s < 7200.0 {
        format!("{:.0} min", s / 60.0)
    } else if s < 172_800.0 {
        format!("{:.1} h", s / 3600.0)
    } else {
        format!("{:.1} d", s / 86400.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(t: f64, tps: f64, ok: bool) -> Row {
        Row {
            id: format!("{:08x}", t as u32),
            time: String::new(),
            time_unix_s: t,
            command: "run".into(),
            test: "tcp_rr".into(),
            target: "embedded".into(),
            name: None,
            labels: Default::default(),
            schema: "thrum.result.v1".into(),
            ok,
            headline: Headline {
                transactions_per_s: Some(tps),
                ..Headline::default()
            },
        }
    }

    fn judged(rows: &[Row], now: f64) -> Status {
        let refs: Vec<&Row> = rows.iter().collect();
        judge(&refs, now).status
    }

    #[test]
    fn a_setup_is_judged_against_its_own_normal() {
        // Newest first, a minute apart, within 1 % of each other.
        let steady: Vec<Row> = (0..8)
            .map(|i| {
                row(
                    1000.0 - 60.0 * f64::from(i),
                    50_000.0 + f64::from(i % 3) * 300.0,
                    true,
                )
            })
            .collect();
        assert_eq!(judged(&steady, 1010.0), Status::Normal);
        let mut down = steady.clone();
        down[0].headline.transactions_per_s = Some(30_000.0);
        assert_eq!(judged(&down, 1010.0), Status::Regressed);
        let mut up = steady.clone();
        up[0].headline.transactions_per_s = Some(80_000.0);
        assert_eq!(judged(&up, 1010.0), Status::Changed);
        let mut failed = steady.clone();
        failed[0].ok = false;
        assert_eq!(judged(&failed, 1010.0), Status::Failing);
        // Runs every minute, none for an hour.
        assert_eq!(judged(&steady, 1000.0 + 3600.0), Status::Stale);
        assert_eq!(judged(&steady[..2], 1010.0), Status::New);
        let refs: Vec<&Row> = down.iter().collect();
        let why = judge(&refs, 1010.0).why;
        assert!(
            why.contains("regressed") && why.contains("7 runs before"),
            "{why}"
        );
    }

    #[test]
    fn medians_and_spans() {
        assert_eq!(
            median([Some(3.0), None, Some(1.0), Some(2.0)].into_iter()),
            Some(2.0)
        );
        assert_eq!(median([Some(1.0), Some(2.0)].into_iter()), Some(1.5));
        assert_eq!(median(std::iter::empty()), None);
        assert_eq!(span(30.0), "30 s");
        assert_eq!(span(3600.0), "60 min");
        assert_eq!(span(86400.0 * 3.0), "3.0 d");
    }
}
