//! `thrum compare A B` and `thrum run … --baseline RUN`: two sets of
//! results figure by figure, by [`crate::store::compare`]'s method, as a
//! table (verdicts coloured on a terminal) or `{"figures": [...]}`.
//!
//! A and B are stored runs (an id: one run; `label:KEY=VALUE`: every run
//! so labelled, of one test and target and of its newest run's settings)
//! or result files. Like is compared with like: results of another kind
//! or test are refused (exit 2), never compared figure by figure. The
//! store also gives the runs of each set's settings, from which a set of
//! one or two runs learns its run-to-run noise.

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow, bail};
use serde_json::Value;

use crate::cli::store::CompareRequest;
use crate::cli::{CompareArgs, StoreRequest};
use crate::store::compare::{self, Baseline, Comparison, Pool, Run, Set, Verdict};
use crate::store::{Store, headline, settings};

/// The exit code of a regression under `--fail-on regression`.
pub const EXIT_REGRESSED: u8 = 3;

/// What a set's runs are: the command that made them, the test and the
/// target (as the store files them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kind {
    pub command: String,
    pub test: String,
    pub target: String,
}

impl Kind {
    /// `a run of tcp_stream against 10.0.0.2`.
    fn said(&self) -> String {
        format!(
            "a {} of {} against {}",
            if self.command == "run" {
                "run"
            } else {
                &self.command
            },
            crate::text::echo(&self.test),
            crate::text::echo(&self.target)
        )
    }
}

/// A side, found: its runs and what they are.
pub struct Found {
    pub set: Set,
    pub kind: Kind,
}

/// How a side is named.
enum Spec {
    Id(String),
    Label(String, String),
    File(String),
}

fn parse(spec: &str) -> Result<Spec> {
    if let Some(l) = spec.strip_prefix("label:") {
        let (k, v) = crate::store::parse_label(l)
            .map_err(|e| anyhow!("{}: {e}", crate::text::echo(spec)))?;
        return Ok(Spec::Label(k, v));
    }
    if Path::new(spec).exists() {
        return Ok(Spec::File(spec.to_string()));
    }
    Ok(Spec::Id(spec.to_string()))
}

/// What `label:` looks for: the test and target (None: any), the newest N.
#[derive(Clone, Debug, Default)]
struct Among {
    test: Option<String>,
    target: Option<String>,
    last: Option<u32>,
}

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

/// One stored run by id (or a unique start of one).
fn by_id(store: &Store, id: &str) -> Result<Found> {
    let (row, doc) = store.get(id).map_err(anyhow::Error::msg)?.ok_or_else(|| {
        anyhow!(
            "no run '{}' in {}",
            crate::text::echo(id),
            store.path().display()
        )
    })?;
    Ok(Found {
        set: Set {
            name: row.id.clone(),
            settings: row.settings.clone(),
            runs: vec![Run::new(row.id.clone(), doc)],
        },
        kind: Kind {
            command: row.command,
            test: row.test,
            target: row.target,
        },
    })
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
    })
}

/// Every error-free run labelled `k=v` of `among`'s test and target
/// (where given; else those of the newest run so labelled), of the newest
/// one's settings (a set of unlike settings would measure their
/// difference as noise; the others are left out, and said to be).
fn by_label(store: &Store, k: &str, v: &str, among: &Among) -> Result<Found> {
    let pair = format!("{}={}", crate::text::echo(k), crate::text::echo(v));
    let any = store
        .labelled(k, v, None, None, None)
        .map_err(anyhow::Error::msg)?;
    let Some(newest) = any.first() else {
        bail!(
            "no stored run is labelled {pair} (in {}; runs that failed are left out)",
            store.path().display()
        );
    };
    let test = among.test.clone().unwrap_or_else(|| newest.test.clone());
    let target = among
        .target
        .clone()
        .unwrap_or_else(|| newest.target.clone());
    let rows: Vec<_> = any
        .iter()
        .filter(|r| r.test == test && r.target == target)
        .collect();
    let Some(first) = rows.first() else {
        let mut kinds: Vec<String> = Vec::new();
        for r in &any {
            let k = format!(
                "{} against {}",
                crate::text::echo(&r.test),
                crate::text::echo(&r.target)
            );
            if !kinds.contains(&k) {
                kinds.push(k);
            }
        }
        bail!(
            "label:{pair}: no run so labelled is of {} against {} (so labelled: {}); compare compares results of one kind and test (--test and --target choose among them)",
            crate::text::echo(&test),
            crate::text::echo(&target),
            kinds.join(", ")
        );
    };
    let settings = first.settings.clone();
    let mut same: Vec<_> = rows.iter().filter(|r| r.settings == settings).collect();
    let others = rows.len() - same.len();
    if let Some(n) = among.last {
        same.truncate(n as usize);
    }
    if others > 0 {
        eprintln!(
            "note: label:{pair}: {others} run(s) with other settings than the newest's left out (compare one by its id)"
        );
    }
    let mut runs = Vec::with_capacity(same.len());
    for r in &same {
        let (_, doc) = store
            .get(&r.id)
            .map_err(anyhow::Error::msg)?
            .ok_or_else(|| anyhow!("run {} vanished from the store", r.id))?;
        runs.push(Run::new(r.id.clone(), doc));
    }
    let ids: Vec<&str> = runs.iter().map(|r| r.id.as_str()).collect();
    Ok(Found {
        set: Set {
            // Raw: the table escapes what it prints, the JSON carries it whole.
            name: format!("{} ({k}={v})", ids.join(" ")),
            settings,
            runs,
        },
        kind: Kind {
            command: first.command.clone(),
            test,
            target,
        },
    })
}

/// Find a side named `spec` (`label:` among `among`).
fn resolve(
    store: Option<&Result<Store, String>>,
    spec: &Spec,
    raw: &str,
    among: &Among,
) -> Result<Found> {
    match spec {
        Spec::Label(k, v) => by_label(need(store, raw)?, k, v, among),
        Spec::File(p) => file(p),
        Spec::Id(id) => {
            let s = need(store, raw).with_context(|| {
                format!(
                    "'{}' is no file, so it would be a stored run's id",
                    crate::text::echo(raw)
                )
            })?;
            by_id(s, id)
        }
    }
}

/// Results of one kind and test, or the refusal.
fn like_with_like(a: &Kind, b: &Kind, what: [&str; 2]) -> Result<()> {
    if a.command != b.command || a.test != b.test {
        bail!(
            "{} is {} and {} {}: compare compares results of one kind and test only (their figures measure different things)",
            what[0],
            a.said(),
            what[1],
            b.said()
        );
    }
    Ok(())
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
    let mut out: Vec<Pool> = Vec::new();
    for f in sides {
        if out.iter().any(|p| p.settings == f.set.settings) {
            continue;
        }
        let k = &f.kind;
        match st.pool(
            &k.command,
            &k.test,
            &k.target,
            &f.set.settings,
            compare::LEARN_FROM,
        ) {
            Ok(p) => out.push(p),
            Err(e) => eprintln!("warning: {e}: noise not learned from stored runs"),
        }
    }
    out
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
    let (sa, sb) = (parse(&req.a)?, parse(&req.b)?);
    let given = Among {
        test: req.test.clone(),
        target: req.target.clone(),
        last: req.last,
    };
    // A label resolves among the other side's test and target (an id's,
    // a file's, or the other label's newest run's), unless told.
    let (a, b) = if matches!(sa, Spec::Label(..)) {
        let b = resolve(store.as_ref(), &sb, &req.b, &given).context("B")?;
        let among = Among {
            test: given.test.clone().or_else(|| Some(b.kind.test.clone())),
            target: given.target.clone().or_else(|| Some(b.kind.target.clone())),
            last: given.last,
        };
        (
            resolve(store.as_ref(), &sa, &req.a, &among).context("A")?,
            b,
        )
    } else {
        let a = resolve(store.as_ref(), &sa, &req.a, &given).context("A")?;
        let among = Among {
            test: given.test.clone().or_else(|| Some(a.kind.test.clone())),
            target: given.target.clone().or_else(|| Some(a.kind.target.clone())),
            last: given.last,
        };
        let b = resolve(store.as_ref(), &sb, &req.b, &among).context("B")?;
        (a, b)
    };
    like_with_like(&a.kind, &b.kind, ["A", "B"])?;
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
    let spec = parse(&baseline.run)?;
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
    like_with_like(&found.kind, &this, ["--baseline", "this run"])?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(command: &str, test: &str) -> Kind {
        Kind {
            command: command.into(),
            test: test.into(),
            target: "embedded".into(),
        }
    }

    #[test]
    fn another_kind_or_test_is_refused_naming_both() {
        assert!(like_with_like(&kind("run", "tcp_rr"), &kind("run", "tcp_rr"), ["A", "B"]).is_ok());
        let e = like_with_like(
            &kind("run", "tcp_rr"),
            &kind("run", "tcp_stream"),
            ["A", "B"],
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("A is a run of tcp_rr against embedded")
                && e.contains("B a run of tcp_stream")
                && e.contains("one kind and test"),
            "{e}"
        );
        assert!(
            like_with_like(&kind("curve", "udp_rr"), &kind("run", "udp_rr"), ["A", "B"]).is_err()
        );
    }
}
