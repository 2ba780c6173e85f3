//! The results store's flags: what every measuring command flattens
//! (`--db`, `--no-save`, `--label`, `--name`; [`StoreArgs`]), `run`'s
//! `--baseline`, and the commands that read the store: `history`, `show`
//! and `compare`. `--fail-on`'s and `history --chart`'s values are the
//! store's own `FailOn`, given clap's [`ValueEnum`] here, and
//! `ChartField`, checked here.

use std::path::PathBuf;

use anyhow::{Result, bail};
use clap::builder::PossibleValue;
use clap::{Args, ValueEnum};

use super::agg::AggOutputArgs;
use crate::store::compare::{Baseline, FailOn};
use crate::store::headline::ChartField;
use crate::store::{Labels, parse_label, parse_new_label};

/// The heading the store's flags go under in `--help`.
pub const HEADING: &str = "Results store";

/// `--label` values, checked here rather than by clap, whose error would
/// echo the value raw and whole (a 120,000-character label, an escape
/// sequence) before the message: a run's labels bounded
/// ([`parse_new_label`]), a filter's as any stored label may be
/// ([`parse_label`]).
fn labels(given: &[String], new: bool) -> Result<Labels> {
    let parse = if new { parse_new_label } else { parse_label };
    let mut labels = Labels::new();
    for s in given {
        let (k, v) = parse(s).map_err(|e| anyhow::anyhow!("--label: {e}"))?;
        if labels.insert(k.clone(), v).is_some() {
            bail!(
                "--label: the key '{}' is given twice",
                crate::text::echo(&k)
            );
        }
    }
    Ok(labels)
}

/// Where a measuring command saves its result, and what it is tagged with.
#[derive(Debug, Args, Clone, Default)]
pub struct StoreArgs {
    /// The results store (default: $THRUM_DB, else $XDG_DATA_HOME/thrum/results.db, else ~/.local/share/thrum/results.db).
    #[arg(long, value_name = "PATH")]
    #[arg(help_heading = HEADING)]
    pub db: Option<PathBuf>,
    /// Do not save this run in the results store.
    #[arg(long)]
    #[arg(help_heading = HEADING)]
    pub no_save: bool,
    /// Tag the saved run with KEY=VALUE (repeatable), for `thrum history --label` and `compare label:KEY=VALUE`.
    #[arg(long = "label", value_name = "KEY=VALUE")]
    #[arg(help_heading = HEADING)]
    pub labels: Vec<String>,
    /// A name for the saved run, shown by `thrum history`.
    #[arg(long, value_name = "TEXT")]
    #[arg(help_heading = HEADING)]
    pub name: Option<String>,
}

/// What a measuring command does with the store, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct StoreRequest {
    /// The store: `--db`, else the default (an unknowable default kept as
    /// the warning it becomes).
    pub path: Result<PathBuf, String>,
    /// Save the run (not `--no-save`).
    pub save: bool,
    pub labels: Labels,
    pub name: Option<String>,
}

impl StoreArgs {
    /// The one conversion: the path (`--db`, else the default; an
    /// unknowable default is kept as the warning it becomes), the labels.
    pub fn to_request(&self) -> Result<StoreRequest> {
        let labels = labels(&self.labels, true)?;
        if let Some(n) = &self.name {
            crate::store::check_name(n).map_err(|e| anyhow::anyhow!("--name: {e}"))?;
        }
        let path = match &self.db {
            Some(p) if !p.as_os_str().is_empty() => {
                // Named on the command line: a link or a missing directory
                // is refused now, before the run, not warned of after it.
                if !self.no_save {
                    crate::store::check_place(p).map_err(|e| anyhow::anyhow!("--db: {e}"))?;
                }
                Ok(p.clone())
            }
            _ => crate::store::default_path(),
        };
        Ok(StoreRequest {
            path,
            save: !self.no_save,
            labels,
            name: self.name.clone(),
        })
    }
}

/// The path of the store a reading command opens: `--db`, else the default.
fn db_path(db: &Option<PathBuf>) -> Result<PathBuf> {
    match db {
        Some(p) if !p.as_os_str().is_empty() => Ok(p.clone()),
        _ => crate::store::default_path().map_err(anyhow::Error::msg),
    }
}

impl ValueEnum for FailOn {
    fn value_variants<'a>() -> &'a [Self] {
        &[FailOn::Regression]
    }
    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(match self {
            FailOn::Regression => PossibleValue::new("regression")
                .help("A gated figure regressed (--gate; default: the kind's headline figures)"),
        })
    }
}

/// `--gate`'s names: each 1 to 200 characters, none empty.
fn gate(given: &Option<Vec<String>>) -> Result<Option<Vec<String>>> {
    let Some(names) = given else {
        return Ok(None);
    };
    for n in names {
        if n.is_empty() || n.chars().count() > 200 || n.chars().any(char::is_control) {
            bail!(
                "--gate: '{}' is not a figure's name (accepted: names as compare prints them, e.g. throughput, udp_rr:latency_under_load_p50, comma-separated)",
                crate::text::echo(n)
            );
        }
    }
    Ok(Some(names.clone()))
}

/// `thrum run --baseline`: compare the new run with stored ones.
#[derive(Debug, Args, Clone, Default)]
pub struct BaselineArgs {
    /// When done, compare this run with stored ones (an id, or label:KEY=VALUE for every run so labelled of this test and target), on stderr.
    #[arg(long, value_name = "RUN")]
    #[arg(help_heading = HEADING)]
    pub baseline: Option<String>,
    /// With --baseline label:KEY=VALUE: only the newest N runs so labelled.
    #[arg(long, value_name = "N", requires = "baseline", value_parser = clap::value_parser!(u32).range(1..))]
    #[arg(help_heading = HEADING)]
    pub baseline_last: Option<u32>,
    /// With --baseline: exit 3 when a gated figure regressed.
    #[arg(long, value_name = "WHAT", requires = "baseline")]
    #[arg(help_heading = HEADING)]
    pub fail_on: Option<FailOn>,
    /// With --baseline: the figures --fail-on looks at, comma-separated (default: the test's headline figures).
    #[arg(
        long,
        value_name = "FIGURE,...",
        value_delimiter = ',',
        requires = "baseline"
    )]
    #[arg(help_heading = HEADING)]
    pub gate: Option<Vec<String>>,
    /// With --baseline: a change under this many percent is "no change".
    #[arg(long, value_name = "PERCENT", value_parser = threshold, requires = "baseline")]
    #[arg(help_heading = HEADING)]
    pub threshold: Option<f64>,
}

impl BaselineArgs {
    /// The one conversion: None without `--baseline`.
    pub fn to_baseline(&self) -> Result<Option<Baseline>> {
        let gate = gate(&self.gate)?;
        Ok(self.baseline.as_ref().map(|run| Baseline {
            run: run.clone(),
            last: self.baseline_last,
            threshold: self
                .threshold
                .unwrap_or(crate::store::compare::DEFAULT_THRESHOLD),
            fail_on: self.fail_on,
            gate,
        }))
    }
}

fn threshold(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("'{s}' is not a percentage (accepted: 0 to 100)"))?;
    if !(0.0..=100.0).contains(&v) {
        return Err(format!("{v} is out of range (accepted: 0 to 100)"));
    }
    Ok(v)
}

/// `thrum history`.
#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// The results store (default: $THRUM_DB, else $XDG_DATA_HOME/thrum/results.db, else ~/.local/share/thrum/results.db).
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Only runs of this test (tcp_rr, ping, a mix's name, …).
    #[arg(long, value_name = "TEST")]
    pub test: Option<String>,
    /// Only runs against this target as given (-H's value; `embedded` for an embedded server).
    #[arg(long, value_name = "TARGET")]
    pub target: Option<String>,
    /// Only runs with this label (repeatable: all must match).
    #[arg(long = "label", value_name = "KEY=VALUE")]
    pub labels: Vec<String>,
    /// Only runs at or after this time: a date (2026-11-26, 2026-11-26T14:00:00Z, UTC) or an age (2h, 7d).
    #[arg(long, value_name = "WHEN")]
    pub since: Option<String>,
    /// Only runs at or before this time (as --since).
    #[arg(long, value_name = "WHEN")]
    pub until: Option<String>,
    /// Only the newest N runs.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub last: Option<u32>,
    /// Print a JSON array of the runs instead of the table.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print the runs as CSV instead of the table.
    #[arg(long)]
    pub csv: bool,
    /// Draw FIELD over time as SVG into --out, one series per label set: throughput, transactions_per_s, latency (median line, p10–p90 and p99 bands), loss, local_cpu, remote_cpu, or any figure compare names (history --json lists each run's figures).
    #[arg(long, value_name = "FIELD", requires = "out")]
    pub chart: Option<String>,
    /// The SVG file --chart writes.
    #[arg(long, value_name = "FILE", requires = "chart")]
    pub out: Option<PathBuf>,
    /// Copy the whole store into FILE (a new file), consistent even while runs are being saved; no listing.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["test", "target", "labels", "since", "until", "last", "json", "csv", "chart"])]
    pub backup: Option<PathBuf>,
}

/// `thrum history`, checked.
#[derive(Debug)]
pub struct HistoryRequest {
    pub db: PathBuf,
    pub filter: crate::store::Filter,
    pub json: bool,
    pub csv: bool,
    pub chart: Option<(ChartField, PathBuf)>,
    /// The store named on the command line (`--db`), not the default.
    pub named: bool,
    /// `--backup FILE`: copy the store there instead of listing it.
    pub backup: Option<PathBuf>,
}

impl HistoryArgs {
    pub fn to_request(&self) -> Result<HistoryRequest> {
        let now = crate::clock::unix_now();
        let when = |flag: &str, v: &Option<String>| -> Result<Option<f64>> {
            v.as_deref()
                .map(|s| parse_when(s, now).map_err(|e| anyhow::anyhow!("--{flag}: {e}")))
                .transpose()
        };
        Ok(HistoryRequest {
            db: db_path(&self.db)?,
            filter: crate::store::Filter {
                test: self.test.clone(),
                target: self.target.clone(),
                labels: labels(&self.labels, false)?,
                since_unix_s: when("since", &self.since)?,
                until_unix_s: when("until", &self.until)?,
                last: self.last,
                ok_only: false,
            },
            json: self.json,
            csv: self.csv,
            chart: self
                .chart
                .as_deref()
                .map(chart_field)
                .transpose()?
                .zip(self.out.clone()),
            named: self.db.is_some(),
            backup: self.backup.clone(),
        })
    }
}

/// `--chart FIELD`: one of the headline columns, or any figure's name.
fn chart_field(s: &str) -> Result<ChartField> {
    if s.is_empty() || s.chars().any(char::is_control) {
        bail!(
            "--chart: '{}' is not a figure (accepted: throughput, transactions_per_s, latency, loss, local_cpu, remote_cpu, or a figure's name as history --json lists it)",
            crate::text::echo(s)
        );
    }
    Ok(ChartField::ALL
        .into_iter()
        .find(|f| f.name() == s)
        .unwrap_or_else(|| ChartField::Figure(s.to_string())))
}

/// A time as `--since` takes it: an age (`2h`, `7d`, `90s`) before `now`,
/// or a UTC date `YYYY-MM-DD[THH:MM[:SS]][Z]`; Unix seconds.
pub fn parse_when(s: &str, now: f64) -> Result<f64, String> {
    let t = s.trim();
    if let Some(days) = t.strip_suffix('d').and_then(|d| d.parse::<f64>().ok()) {
        return Ok(now - days * 86_400.0);
    }
    if let Ok(d) = crate::units::parse_duration(t)
        && t.ends_with(|c: char| c.is_ascii_alphabetic())
    {
        return Ok(now - d.as_secs_f64());
    }
    let bad = || {
        format!(
            "'{}' is neither an age (2h, 7d) nor a date (2026-11-26, 2026-11-26T14:00:00Z)",
            crate::text::echo(s)
        )
    };
    let t = t.trim_end_matches('Z');
    let (date, time) = t.split_once(['T', ' ']).unwrap_or((t, "00:00:00"));
    let d: Vec<i64> = date
        .split('-')
        .map(|x| x.parse().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    let tm: Vec<i64> = time
        .split(':')
        .map(|x| x.parse().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    if d.len() != 3 || tm.is_empty() || tm.len() > 3 {
        return Err(bad());
    }
    let (y, m, day) = (d[0], d[1], d[2]);
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) {
        return Err(bad());
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = tm[0] * 3600 + tm.get(1).unwrap_or(&0) * 60 + tm.get(2).unwrap_or(&0);
    Ok((days * 86_400 + secs) as f64)
}

/// `thrum show ID`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// A stored run's id (or the start of one, 4 characters at least).
    #[arg(value_name = "ID")]
    pub id: String,
    /// The results store (default: $THRUM_DB, else $XDG_DATA_HOME/thrum/results.db, else ~/.local/share/thrum/results.db).
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    #[command(flatten)]
    pub output: AggOutputArgs,
}

/// `thrum show`, checked.
#[derive(Debug)]
pub struct ShowRequest {
    pub id: String,
    pub db: PathBuf,
    pub output: super::AggOutput,
}

impl ShowArgs {
    pub fn to_request(&self) -> Result<ShowRequest> {
        Ok(ShowRequest {
            id: self.id.clone(),
            db: db_path(&self.db)?,
            output: self.output.to_output(),
        })
    }
}

/// `thrum compare A B`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The first (old) result: a stored run's id, label:KEY=VALUE (every run so labelled, as a set) or a result file thrum wrote.
    #[arg(value_name = "A")]
    pub a: String,
    /// The second (new) result, as A.
    #[arg(value_name = "B")]
    pub b: String,
    /// The results store (default: $THRUM_DB, else $XDG_DATA_HOME/thrum/results.db, else ~/.local/share/thrum/results.db).
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// A change under this many percent is "no change", however certain.
    #[arg(long, value_name = "PERCENT", default_value_t = crate::store::compare::DEFAULT_THRESHOLD, value_parser = threshold)]
    pub threshold: f64,
    /// Exit 3 when a gated figure regressed (for a CI job to gate on).
    #[arg(long, value_name = "WHAT")]
    pub fail_on: Option<FailOn>,
    /// The figures --fail-on looks at, comma-separated (default: the headline figures of the results' kind).
    #[arg(long, value_name = "FIGURE,...", value_delimiter = ',')]
    pub gate: Option<Vec<String>>,
    /// label:KEY=VALUE finds runs of this test (default: the other side's, or its newest run's).
    #[arg(long, value_name = "TEST")]
    pub test: Option<String>,
    /// label:KEY=VALUE finds runs against this target (default: the other side's, or its newest run's).
    #[arg(long, value_name = "TARGET")]
    pub target: Option<String>,
    /// label:KEY=VALUE takes only the newest N runs so labelled.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub last: Option<u32>,
    /// Print {"figures": [...]} as JSON instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// `thrum compare`, checked.
#[derive(Debug)]
pub struct CompareRequest {
    pub a: String,
    pub b: String,
    /// The store, when one can be found (a comparison of two files needs none).
    pub db: Result<PathBuf, String>,
    pub threshold: f64,
    pub fail_on: Option<FailOn>,
    /// `--gate`; None: the headline figures.
    pub gate: Option<Vec<String>>,
    /// What `label:` finds: of this test, against this target, the newest N.
    pub test: Option<String>,
    pub target: Option<String>,
    pub last: Option<u32>,
    pub json: bool,
}

impl CompareArgs {
    pub fn to_request(&self) -> Result<CompareRequest> {
        Ok(CompareRequest {
            a: self.a.clone(),
            b: self.b.clone(),
            db: db_path(&self.db).map_err(|e| e.to_string()),
            threshold: self.threshold,
            fail_on: self.fail_on,
            gate: gate(&self.gate)?,
            test: self.test.clone(),
            target: self.target.clone(),
            last: self.last,
            json: self.json,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times() {
        assert_eq!(parse_when("1970-01-02", 0.0).unwrap(), 86_400.0);
        assert_eq!(
            parse_when("2026-11-26T14:00:00Z", 0.0).unwrap(),
            1_795_701_600.0
        );
        assert_eq!(parse_when("2h", 10_000.0).unwrap(), 2_800.0);
        assert_eq!(parse_when("1d", 100_000.0).unwrap(), 13_600.0);
        assert!(parse_when("yesterday", 0.0).is_err());
        assert!(parse_when("2026-13-01", 0.0).is_err());
    }
}
