//! How a setup stands against its own normal, for a cell of the overview:
//! its newest run compared by `thrum compare`'s method
//! ([`crate::store::compare::compare`]) with the runs of the same setup
//! and settings before it (set A, whose own spread is the run-to-run
//! noise; the newest run is set B), read from the figures the store keeps
//! of each run. Only the gated figures colour a box, as `--fail-on
//! regression` reads them (each kind's headline figures: throughput,
//! transactions/s, a mix's latency under load per probe, …): a grid of
//! many cells, each coloured by every figure compare shows, would raise a
//! false alarm somewhere on almost every look.

use serde::Serialize;

use crate::export::draw::smoke::Quantity;
use crate::store::compare::{self, Run, Set, Verdict};
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

/// The figure a box shows and its sparkline draws: its name as compare
/// gives it, its value, what it is.
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

/// A figure as a cell shows it, in the unit its quantity reads in (as
/// compare's table prints it).
pub fn show(v: f64, q: Quantity) -> String {
    let unit = match q {
        Quantity::BitsPerSec => "bit/s",
        Quantity::TransPerSec => "trans/s",
        Quantity::Latency => "ns",
        Quantity::Percent => "%",
    };
    crate::store::figures::format(unit, v)
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
    // Like with like: the runs before of the newest one's settings.
    let before: Vec<&Row> = runs[1..]
        .iter()
        .copied()
        .filter(|r| r.ok && r.settings == newest.settings)
        .take(compare::LEARN_FROM as usize)
        .collect();
    if before.len() < MIN_HISTORY {
        return Judged {
            status: Status::New,
            why: format!(
                "{} earlier run(s) of its settings without an error: {MIN_HISTORY} are needed to learn its normal",
                before.len()
            ),
        };
    }
    let set = |name: &str, rows: &[&Row]| Set {
        name: name.into(),
        runs: rows
            .iter()
            .map(|r| Run::stored(r.id.clone(), &r.figures))
            .collect(),
        settings: newest.settings.clone(),
    };
    let c = match compare::compare(
        &set("normal", &before),
        &set("newest", &[newest]),
        &[],
        compare::DEFAULT_THRESHOLD,
        None,
    ) {
        Ok(c) => c,
        Err(e) => {
            return Judged {
                status: Status::Normal,
                why: format!("not judged ({e}): it ran without an error"),
            };
        }
    };
    let gated: Vec<&compare::Figure> = c.figures.iter().filter(|f| f.gated).collect();
    let pick = |v: Verdict| gated.iter().find(|f| f.verdict == v).copied();
    let (status, f) = if let Some(f) = pick(Verdict::Regressed) {
        (Status::Regressed, f)
    } else if let Some(f) = pick(Verdict::Improved) {
        (Status::Changed, f)
    } else if let Some(f) = gated.first() {
        (Status::Normal, *f)
    } else {
        return Judged {
            status: Status::Normal,
            why: "no figure of its kind to judge: it ran without an error".into(),
        };
    };
    let change = match (f.change_percent, f.interval_percent) {
        (Some(c), Some([lo, hi])) => format!(
            " {c:+.1} % ({}: {lo:+.1} … {hi:+.1} %)",
            level(f.level_percent)
        ),
        _ => String::new(),
    };
    let others = match gated.len() {
        1 => String::new(),
        n => format!(" ({n} figures judged)"),
    };
    let value = crate::store::figures::format;
    Judged {
        status,
        why: format!(
            "{}: {}{change} against the mean {} of the {} runs before ({}): {}{others}",
            figure_name(&f.name),
            value(&f.unit, f.b),
            value(&f.unit, f.a),
            before.len(),
            f.noise,
            f.verdict.name()
        ),
    }
}

/// An interval's confidence as a reader says it: `99 %`, `98.667 %`.
pub fn level(percent: f64) -> String {
    let l = format!("{percent:.3}");
    format!("{} %", l.trim_end_matches('0').trim_end_matches('.'))
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
pub(super) mod tests {
    use super::*;

    /// A stored tcp_rr run of `tps` at `t`, as the store lists it (the
    /// overview's tests build theirs here too).
    pub fn tcp_rr_row(id: &str, t: f64, tps: f64, ok: bool) -> Row {
        Row {
            id: id.into(),
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
            settings: "s".into(),
            figures: tps_figure(tps),
        }
    }

    fn row(t: f64, tps: f64, ok: bool) -> Row {
        tcp_rr_row(&format!("{:08x}", t as u32), t, tps, ok)
    }

    /// The figures the store keeps of a tcp_rr run of `tps`.
    fn tps_figure(tps: f64) -> crate::store::figures::StoredFigures {
        let doc = serde_json::json!({"schema": crate::result::SCHEMA, "test": "tcp_rr",
            "summary": {"transactions_per_s": tps, "local": {}, "remote": {}}});
        crate::store::figures::stored(&doc)
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
        down[0] = row(1000.0, 30_000.0, true);
        assert_eq!(judged(&down, 1010.0), Status::Regressed);
        let mut up = steady.clone();
        up[0] = row(1000.0, 80_000.0, true);
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
        // Earlier runs of other settings are no normal of this one.
        let mut other = steady.clone();
        for r in &mut other[2..] {
            r.settings = "t".into();
        }
        assert_eq!(judged(&other, 1010.0), Status::New);
    }

    #[test]
    fn spans_and_levels() {
        assert_eq!(span(30.0), "30 s");
        assert_eq!(span(3600.0), "60 min");
        assert_eq!(span(86400.0 * 3.0), "3.0 d");
        assert_eq!(level(99.0), "99 %");
        assert_eq!(level(98.6666666), "98.667 %");
    }
}
