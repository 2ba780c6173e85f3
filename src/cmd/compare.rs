//! `thrum compare A B` and `thrum run … --baseline RUN`: two sets of
//! results figure by figure, by [`crate::store::compare`]'s method, as a
//! table (verdicts coloured on a terminal) or `{"figures": [...]}`.
//!
//! A and B are stored runs (an id: one run; `label:KEY=VALUE`: every run
//! so labelled, of one test and target and of its newest run's settings)
//! or result files, found by [`crate::store::sets`] (as `thrum web`'s
//! compare page finds them; a file is read here, the page takes none).
//! Like is compared with like: results of another kind or test are
//! refused (exit 2), never compared figure by figure. The store also
//! gives the runs of each set's settings, from which a set of one or two
//! runs learns its run-to-run noise.

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow, bail};
use serde_json::Value;

use crate::cli::store::CompareRequest;
use crate::cli::{CompareArgs, StoreRequest};
use crate::store::compare::{self, Baseline, Comparison, Pool, Run, Set, Verdict};
use crate::store::sets::{self, Among, Found, Kind, Spec, like_with_like};
use crate::store::{Store, headline, settings};

/// The exit code of a regression under `--fail-on regression`.
pub const EXIT_REGRESSED: u8 = 3;

fn need<'a>(store: Option<&'a Result<Store, String>>, spec: &str) -> Result<&'a Store> {
    match store {
        Some(Ok(s)) => Ok(s),
        Some(Err(e)) => Err(anyhow!("{e}")),
        None => Err(anyhow!(
            "no results store to look '{}' up in",
            crate::text::echo(spec)
        )),
    }
}

/// A result file.
fn file(path: &str) -> Result<Found> {
    let doc = super::report::read_document(Path::new(path))?;
    let (command, test, target) = headline::identity(&doc);
    if command.is_empty() {
        bail!(
            "{path}: a {} document has no figures to compare (accepted: thrum.result.v1, thrum.ping.v1, thrum.curve.v1, thrum.agg.v1, thrum.sweep.v1)",
            crate::text::echo(doc["schema"].as_str().unwrap_or("schema-less"))
        );
    }
    Ok(Found {
        set: Set {
            name: path.to_string(),
            settings: settings::key(&doc),
            runs: vec![Run::new(path.to_string(), doc)],
        },
        kind: Kind {
            command,
            test,
            target,
        },
        notes: Vec::new(),
    })
}

/// Find a side named `spec` (`label:` among `among`), its notes said on
/// stderr.
fn resolve(
    store: Option<&Result<Store, String>>,
    spec: &Spec,
    raw: &str,
    among: &Among,
) -> Result<Found> {
    let place = |s: &Store| s.path().display().to_string();
    let found = match spec {
        Spec::Label(k, v) => {
            let s = need(store, raw)?;
            sets::by_label(s, k, v, among, &place(s))?
        }
        Spec::File(p) => file(p)?,
        Spec::Id(id) => {
            let s = need(store, raw).with_context(|| {
                format!(
                    "'{}' is no file, so it would be a stored run's id",
                    crate::text::echo(raw)
                )
            })?;
            sets::by_id(s, id, &place(s))?
        }
    };
    for n in &found.notes {
        eprintln!("note: {n}");
    }
    Ok(found)
}

/// thrum's own diagnostics that say the host, not the path, moved a run.
const DISTURBED: [&str; 3] = ["trend", "flow_stalled", "cpu_stolen"];

/// Say which runs of `set` carry a diagnostic of [`DISTURBED`]: with
/// three runs a disturbed one drags the set's centre by a third of its dip
/// (a 90 Mbit/s run among 95s), and widens the interval.
fn note_disturbed(set: &Set, side: &str) {
    for r in &set.runs {
        let codes: Vec<&str> = r.doc["summary"]["diagnostics"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|d| d["code"].as_str())
            .filter(|c| DISTURBED.contains(c))
            .collect();
        if !codes.is_empty() {
            eprintln!(
                "note: {side}: run {} says it was disturbed ({}); a set's centre moves with it (docs/history.md)",
                crate::text::echo(&r.id),
                codes.join(", ")
            );
        }
    }
}

/// The stored runs of each set's settings, to learn noise from.
fn pools(store: Option<&Result<Store, String>>, sides: &[&Found]) -> Vec<Pool> {
    let Some(Ok(st)) = store else {
        return Vec::new();
    };
    let (pools, warnings) = sets::pools(st, sides);
    for w in warnings {
        eprintln!("warning: {w}");
    }
    pools
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
    let spec = |raw: &str| Spec::parse(raw, true).map_err(anyhow::Error::msg);
    let (sa, sb) = (spec(&req.a)?, spec(&req.b)?);
    let given = Among {
        test: req.test.clone(),
        target: req.target.clone(),
        last: req.last,
    };
    let raw = [&req.a, &req.b];
    let (a, b) = sets::both(&sa, &sb, &given, |side, spec, among| {
        resolve(store.as_ref(), spec, raw[side], among).context(["A", "B"][side])
    })?;
    like_with_like(&a.kind, &b.kind, ["A", "B"]).map_err(anyhow::Error::msg)?;
    note_disturbed(&a.set, "A");
    note_disturbed(&b.set, "B");
    let pools = pools(store.as_ref(), &[&a, &b]);
    let c = compare::compare(&a.set, &b.set, &pools, req.threshold, req.gate.as_deref())
        .map_err(anyhow::Error::msg)?;
    if c.figures.is_empty() {
        bail!("{} and {} have no figure in common", a.set.name, b.set.name);
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

/// `run --baseline`'s stored runs, found before the run, and what the
/// run will be.
pub struct Pending {
    found: Found,
    this: Kind,
}

/// `run --baseline`: the stored runs, found before the run starts among
/// runs of this run's `test` against its `target` (a label's), and
/// refused when of another test; `--gate`'s names checked against them.
pub fn find_baseline(
    store: &StoreRequest,
    baseline: &Baseline,
    test: &str,
    target: &str,
) -> Result<Pending> {
    let st = store.path.clone().and_then(|p| Store::open_existing(&p));
    let spec = Spec::parse(&baseline.run, true).map_err(anyhow::Error::msg)?;
    let among = Among {
        test: Some(test.to_string()),
        target: Some(target.to_string()),
        last: baseline.last,
    };
    let found = resolve(Some(&st), &spec, &baseline.run, &among).context("--baseline")?;
    let this = Kind {
        command: "run".into(),
        test: test.to_string(),
        target: target.to_string(),
    };
    like_with_like(&found.kind, &this, ["--baseline", "this run"]).map_err(anyhow::Error::msg)?;
    compare::check_gate(&found.set, &found.set, baseline.gate.as_deref())
        .map_err(anyhow::Error::msg)?;
    Ok(Pending { found, this })
}

/// After a run with `--baseline`: the comparison on stderr (stdout holds
/// the result); whether it should fail the run (`--fail-on regression`).
pub fn after_run(
    store: &StoreRequest,
    pending: Pending,
    id: Option<String>,
    doc: Value,
    baseline: &Baseline,
) -> Result<bool> {
    let Pending { found, this } = pending;
    let name = id.unwrap_or_else(|| "this run".into());
    let new = Found {
        set: Set {
            name: name.clone(),
            settings: settings::key(&doc),
            runs: vec![Run::new(name, doc)],
        },
        kind: this,
        notes: Vec::new(),
    };
    let st = store.path.as_ref().ok().map(|p| Store::open_existing(p));
    note_disturbed(&found.set, "--baseline");
    note_disturbed(&new.set, "this run");
    let pools = pools(st.as_ref(), &[&found, &new]);
    let c = compare::compare(
        &found.set,
        &new.set,
        &pools,
        baseline.threshold,
        baseline.gate.as_deref(),
    )
    .map_err(anyhow::Error::msg)?;
    eprint!("{}", table(&c, colour(std::io::stderr().is_terminal())));
    Ok(baseline.fail_on.is_some_and(|f| f.fails(&c)))
}

/// A change in percent, signed, one decimal; past ±100,000 % (a 1,000-fold
/// ratio, as one degree of freedom can give) in powers of ten.
fn pct(x: f64) -> String {
    if x.abs() < 1e5 {
        format!("{x:+.1}")
    } else {
        format!("{x:+.1e}")
    }
}

fn colour(terminal: bool) -> bool {
    terminal && std::env::var_os("NO_COLOR").is_none()
}

/// The human table: one row a figure, the gated ones marked `*`.
pub fn table(c: &Comparison, colour: bool) -> String {
    let mut rows = vec![[
        "figure".to_string(),
        "A".into(),
        "B".into(),
        "change".into(),
        "interval".into(),
        "verdict".into(),
        "noise from".into(),
    ]];
    let value = crate::store::figures::format;
    for f in &c.figures {
        rows.push([
            format!("{}{}", if f.gated { "*" } else { " " }, f.name),
            value(&f.unit, f.a),
            value(&f.unit, f.b),
            f.change_percent
                .map_or("-".into(), |x| format!("{} %", pct(x))),
            match f.interval_percent {
                Some([lo, hi]) => {
                    let l = format!("{:.3}", f.level_percent);
                    let l = l.trim_end_matches('0').trim_end_matches('.');
                    format!("{} … {} % ({l}%)", pct(lo), pct(hi))
                }
                None => "-".into(),
            },
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
            let cell = crate::text::message(cell);
            let pad = widths[i].saturating_sub(cell.chars().count());
            let text = if i == 5 && n > 0 && colour {
                let code = match c.figures[n - 1].verdict {
                    Verdict::Improved => "32",
                    Verdict::Regressed => "31",
                    Verdict::Inconclusive => "33",
                    Verdict::NoChange | Verdict::NotJudged => "0",
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
        "* gated (--fail-on looks at these); a change under {} % is \"no change\"; each interval at its share of a 5 % false-alarm budget over the figures judged; CPU % is never judged on its own (docs/history.md)\n",
        c.threshold_percent
    ));
    out
}
