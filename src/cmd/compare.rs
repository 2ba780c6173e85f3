//! `thrum compare A B` and `thrum run … --baseline RUN`: two results
//! figure by figure, by [`crate::store::compare`]'s method, as a table
//! (verdicts coloured on a terminal) or `{"figures": [...]}`. A and B are
//! stored runs (an id, or `label:KEY=VALUE` for the newest so labelled) or
//! result files; the store also gives the runs of each one's setup, from
//! which the run-to-run noise is learned.

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow, bail};
use serde_json::Value;

use crate::cli::store::CompareRequest;
use crate::cli::{CompareArgs, StoreRequest};
use crate::store::compare::{self, Baseline, Comparison, Side, Verdict};
use crate::store::{Headline, Labels, Setup, Store, headline};
use crate::units::Fixed;

/// The exit code of a regression under `--fail-on regression`.
pub const EXIT_REGRESSED: u8 = 3;

/// A result to compare, found.
pub struct Subject {
    /// As the user named it (an id, label:…, a file).
    pub name: String,
    pub setup: Setup,
    pub doc: Value,
}

/// Find `spec` (an id, `label:KEY=VALUE`, a result file) in `store` or on disk.
fn resolve(store: Option<&Result<Store, String>>, spec: &str) -> Result<Subject> {
    let need = || -> Result<&Store> {
        match store {
            Some(Ok(s)) => Ok(s),
            Some(Err(e)) => Err(anyhow!("{e}")),
            None => Err(anyhow!(
                "no results store to look '{}' up in",
                crate::text::echo(spec)
            )),
        }
    };
    let by_id = |s: &Store, id: &str, name: String| -> Result<Subject> {
        let (row, doc) = s.get(id).map_err(anyhow::Error::msg)?.ok_or_else(|| {
            anyhow!(
                "no run '{}' in {}",
                crate::text::echo(id),
                s.path().display()
            )
        })?;
        Ok(Subject {
            name,
            setup: Setup {
                command: row.command,
                test: row.test,
                target: row.target,
                labels: row.labels,
            },
            doc,
        })
    };
    if let Some(l) = spec.strip_prefix("label:") {
        let (k, v) = crate::store::parse_label(l)
            .map_err(|e| anyhow!("{}: {e}", crate::text::echo(spec)))?;
        let s = need()?;
        let id = s
            .latest_with_label(&k, &v)
            .map_err(anyhow::Error::msg)?
            .ok_or_else(|| {
                anyhow!(
                    "no stored run is labelled {}={} (in {})",
                    crate::text::echo(&k),
                    crate::text::echo(&v),
                    s.path().display()
                )
            })?;
        return by_id(s, &id, format!("{id} ({k}={v})"));
    }
    let path = Path::new(spec);
    if path.exists() {
        let doc = super::report::read_document(path)?;
        let (command, test, target) = headline::identity(&doc);
        if command.is_empty() {
            bail!(
                "{spec}: a {} document has no headline figures to compare (accepted: thrum.result.v1, thrum.ping.v1)",
                crate::text::echo(doc["schema"].as_str().unwrap_or("schema-less"))
            );
        }
        return Ok(Subject {
            name: spec.to_string(),
            setup: Setup {
                command,
                test,
                target,
                labels: Labels::new(),
            },
            doc,
        });
    }
    let s = need().with_context(|| {
        format!(
            "'{}' is no file, so it would be a stored run's id",
            crate::text::echo(spec)
        )
    })?;
    by_id(s, spec, spec.to_string())
}

/// A subject as one side of the comparison, with its setup's stored runs.
fn side(store: Option<&Result<Store, String>>, s: &Subject) -> Side {
    let setup_runs = match store {
        Some(Ok(st)) => st
            .setup_runs(&s.setup, compare::LEARN_FROM)
            .unwrap_or_else(|e| {
                eprintln!("warning: {e}: noise not learned from stored runs");
                Vec::new()
            }),
        _ => Vec::new(),
    };
    Side {
        headline: Headline::of(&s.doc),
        doc: s.doc.clone(),
        setup_runs,
    }
}

fn run_compare(
    store: Option<&Result<Store, String>>,
    a: &Subject,
    b: &Subject,
    threshold: f64,
) -> Comparison {
    let same = a.setup == b.setup;
    compare::compare(
        &a.name,
        &side(store, a),
        &b.name,
        &side(store, b),
        same,
        threshold,
    )
}

/// `thrum compare`.
pub fn compare(args: &CompareArgs) -> Result<ExitCode> {
    let req: CompareRequest = args.to_request()?;
    let store = match &req.db {
        Ok(p) if p.exists() => Some(Store::open_existing(p)),
        Ok(p) => Some(Err(format!(
            "results store {}: no such file (no run saved yet, or --db/$THRUM_DB names another)",
            p.display()
        ))),
        Err(e) => Some(Err(e.clone())),
    };
    let a = resolve(store.as_ref(), &req.a).context("A")?;
    let b = resolve(store.as_ref(), &req.b).context("B")?;
    let c = run_compare(store.as_ref(), &a, &b, req.threshold);
    if c.figures.is_empty() {
        bail!(
            "{} and {} have no headline figure in common",
            a.name,
            b.name
        );
    }
    if req.json {
        super::out::print(&format!("{}\n", serde_json::to_string_pretty(&c)?))?;
    } else {
        super::out::print(&table(&c, colour(std::io::stdout().is_terminal())))?;
    }
    Ok(if req.fail_on.is_some_and(|f| f.fails(&c)) {
        ExitCode::from(EXIT_REGRESSED)
    } else {
        ExitCode::SUCCESS
    })
}

/// `run --baseline`: the stored run, found before the run starts.
pub fn find_baseline(store: &StoreRequest, spec: &str) -> Result<Subject> {
    let st = store.path.clone().and_then(|p| Store::open_existing(&p));
    resolve(Some(&st), spec).context("--baseline")
}

/// After a run with `--baseline`: the comparison on stderr (stdout holds
/// the result); whether it should fail the run (`--fail-on regression`).
pub fn after_run(
    store: &StoreRequest,
    found: Subject,
    id: Option<String>,
    doc: Value,
    baseline: &Baseline,
) -> Result<bool> {
    let (command, test, target) = headline::identity(&doc);
    let new = Subject {
        name: id.unwrap_or_else(|| "this run".into()),
        setup: Setup {
            command,
            test,
            target,
            labels: store.labels.clone(),
        },
        doc,
    };
    let st = store.path.as_ref().ok().map(|p| Store::open_existing(p));
    let c = run_compare(st.as_ref(), &found, &new, baseline.threshold);
    eprint!("{}", table(&c, colour(std::io::stderr().is_terminal())));
    Ok(baseline.fail_on.is_some_and(|f| f.fails(&c)))
}

fn colour(terminal: bool) -> bool {
    terminal && std::env::var_os("NO_COLOR").is_none()
}

/// A figure's value in its unit, for the table.
fn value(unit: &str, v: f64) -> String {
    match unit {
        "bit/s" => crate::units::BitsPerSec(v).to_string(),
        "trans/s" => format!("{} trans/s", crate::units::fmt_si(v)),
        "ns" => crate::units::fmt_ns(v),
        "%" => format!("{} %", Fixed(v, 2)),
        u => format!("{} {u}", Fixed(v, 3)),
    }
}

/// The human table: one row a figure.
pub fn table(c: &Comparison, colour: bool) -> String {
    let mut rows = vec![[
        "figure".to_string(),
        "A".into(),
        "B".into(),
        "change".into(),
        "95% interval".into(),
        "verdict".into(),
        "noise from".into(),
    ]];
    for f in &c.figures {
        rows.push([
            f.name.to_string(),
            value(&f.unit, f.a),
            value(&f.unit, f.b),
            f.change_percent
                .map_or("-".into(), |x| format!("{:+} %", Fixed(x, 1))),
            f.interval_percent.map_or("-".into(), |[lo, hi]| {
                format!("{:+} … {:+} %", Fixed(lo, 1), Fixed(hi, 1))
            }),
            f.verdict.name().into(),
            f.noise.clone(),
        ]);
    }
    let widths: Vec<usize> = (0..7)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    // The names may quote a stored label or a path: escaped, as every
    // value from the store is where it is printed.
    let mut out = format!(
        "A: {}\nB: {}\n",
        crate::text::message(&c.a),
        crate::text::message(&c.b)
    );
    for (n, r) in rows.iter().enumerate() {
        let mut line = String::new();
        for (i, cell) in r.iter().enumerate() {
            let pad = widths[i] - cell.chars().count();
            let text = if i == 5 && n > 0 && colour {
                let code = match c.figures[n - 1].verdict {
                    Verdict::Improved => "32",
                    Verdict::Regressed => "31",
                    Verdict::Inconclusive => "33",
                    Verdict::NoChange => "0",
                };
                format!("\x1b[{code}m{cell}\x1b[0m")
            } else {
                cell.clone()
            };
            if i > 0 && i < 5 {
                line.push_str(&" ".repeat(pad));
                line.push_str(&text);
            } else {
                line.push_str(&text);
                if i < 6 {
                    line.push_str(&" ".repeat(pad));
                }
            }
            if i < 6 {
                line.push_str("  ");
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out.push_str(&format!(
        "a change under {} % is \"no change\"; intervals hold run-to-run noise (docs/history.md)\n",
        c.threshold_percent
    ));
    out
}
