//! The compare page (`/compare?a=…&b=…`) and its data (`/api/compare`,
//! the document `thrum compare --json` prints): two stored results, each
//! a run's id or `label:KEY=VALUE` (the newest run so labelled, as
//! `thrum compare` takes it), compared figure by figure by the store's
//! method ([`crate::store::compare`]), run-to-run noise learned from each
//! one's setup, with the verdicts and a bar per figure that shows the
//! change's interval against the threshold.

use std::fmt::Write;

use serde_json::Value;

use super::Problem;
use super::query::{self, Target};
use crate::export::draw::verdict;
use crate::store::compare::{self, Comparison, Side};
use crate::store::{Headline, Setup, Store};
use crate::text::escape_markup as esc;

/// One side found: its name as given, its setup and document.
struct Found {
    name: String,
    id: String,
    setup: Setup,
    doc: Value,
}

/// Find `spec` in the store: an id (or a unique start of one) or
/// `label:KEY=VALUE`, the newest run so labelled.
fn resolve(store: &Store, which: &str, spec: &str) -> Result<Found, Problem> {
    let (id, name) = match spec.strip_prefix("label:") {
        Some(l) => {
            let (k, v) =
                crate::store::parse_label(l).map_err(|e| Problem::bad(format!("{which}: {e}")))?;
            let id = store
                .latest_with_label(&k, &v)
                .map_err(Problem::store)?
                .ok_or_else(|| {
                    Problem::missing(format!(
                        "{which}: no stored run is labelled {}",
                        crate::text::echo(&format!("{k}={v}"))
                    ))
                })?;
            let name = format!("{id} ({k}={v})");
            (id, name)
        }
        None => {
            if !super::run::plausible_id(spec) {
                return Err(Problem::bad(format!(
                    "{which}: '{}' is neither a run's id (4 to 64 letters, digits and -) nor label:KEY=VALUE",
                    crate::text::echo(spec)
                )));
            }
            (spec.to_string(), spec.to_string())
        }
    };
    let (row, doc) = store.get(&id).map_err(Problem::bad)?.ok_or_else(|| {
        Problem::missing(format!(
            "{which}: no run '{}' in the store",
            crate::text::echo(&id)
        ))
    })?;
    Ok(Found {
        name,
        id: row.id,
        setup: Setup {
            command: row.command,
            test: row.test,
            target: row.target,
            labels: row.labels,
        },
        doc,
    })
}

fn side(store: &Store, f: &Found) -> Result<Side, Problem> {
    Ok(Side {
        headline: Headline::of(&f.doc),
        doc: f.doc.clone(),
        setup_runs: store
            .setup_runs(&f.setup, compare::LEARN_FROM)
            .map_err(Problem::store)?,
    })
}

/// The threshold asked for, percent.
fn threshold(t: &Target) -> Result<f64, Problem> {
    match t.given("threshold") {
        None => Ok(compare::DEFAULT_THRESHOLD),
        Some(s) => s
            .trim_end_matches('%')
            .parse::<f64>()
            .ok()
            .filter(|v| (0.0..=100.0).contains(v))
            .ok_or_else(|| {
                Problem::bad(format!(
                    "threshold: '{}' is not a percentage (accepted: 0 to 100)",
                    crate::text::echo(s)
                ))
            }),
    }
}

/// Both sides and their comparison.
fn run(store: &Store, t: &Target) -> Result<(Found, Found, Comparison), Problem> {
    let need = |k: &str| {
        t.given(k).ok_or_else(|| {
            Problem::bad(format!(
                "{k}: missing (a run's id, or label:KEY=VALUE for the newest run so labelled)"
            ))
        })
    };
    let (a, b) = (need("a")?, need("b")?);
    let threshold = threshold(t)?;
    let fa = resolve(store, "a", a)?;
    let fb = resolve(store, "b", b)?;
    let same = fa.setup == fb.setup;
    let c = compare::compare(
        &fa.name,
        &side(store, &fa)?,
        &fb.name,
        &side(store, &fb)?,
        same,
        threshold,
    );
    Ok((fa, fb, c))
}

/// `/api/compare`: the document `thrum compare --json` prints.
pub fn data(store: &Store, t: &Target) -> Result<Comparison, Problem> {
    run(store, t).map(|(_, _, c)| c)
}

/// A figure's value in its unit.
fn value(unit: &str, v: f64) -> String {
    match unit {
        "bit/s" => crate::units::BitsPerSec(v).to_string(),
        "trans/s" => format!("{} trans/s", crate::units::fmt_si(v)),
        "ns" => crate::units::fmt_ns(v),
        "%" => format!("{v:.2} %"),
        u => format!("{v:.3} {}", esc(u)),
    }
}

/// The form that asks for A and B.
fn form(o: &mut String, t: &Target) {
    let _ = write!(
        o,
        "<form class=\"pick\" method=\"get\" action=\"/compare\">\
<label>A (old)<input name=\"a\" value=\"{}\" placeholder=\"run id or label:case=a\" size=\"28\"></label>\
<label>B (new)<input name=\"b\" value=\"{}\" placeholder=\"run id or label:case=b\" size=\"28\"></label>\
<label>threshold (%)<input name=\"threshold\" value=\"{}\" size=\"5\"></label>\
<button type=\"submit\">Compare</button></form>",
        esc(t.get("a").unwrap_or("")),
        esc(t.get("b").unwrap_or("")),
        esc(t.get("threshold").unwrap_or("2"))
    );
}

/// The page: the form, and with A and B the table.
pub fn page(store: &Store, t: &Target) -> Result<String, Problem> {
    let mut o = String::from("<h1>Compare</h1>");
    form(&mut o, t);
    if t.given("a").is_none() && t.given("b").is_none() {
        o.push_str("<p class=\"muted\">Two stored results, figure by figure: the change from A to B, its 95 % interval with \
the run-to-run noise learned from each one's setup (the runs of the same command, test, target and labels), and a verdict. \
<code>label:KEY=VALUE</code> names the newest run so labelled. Pick two runs or two labels on a history page.</p>");
        return Ok(o);
    }
    let (fa, fb, c) = run(store, t)?;
    let _ = write!(
        o,
        "<table class=\"kv\"><tr><th>A</th><td><a href=\"/runs/{}\">{}</a> · {} to {}</td></tr>\
<tr><th>B</th><td><a href=\"/runs/{}\">{}</a> · {} to {}</td></tr></table>",
        query::encode(&fa.id),
        esc(&fa.name),
        esc(&fa.setup.test),
        esc(&fa.setup.target),
        query::encode(&fb.id),
        esc(&fb.name),
        esc(&fb.setup.test),
        esc(&fb.setup.target)
    );
    if fa.setup.test != fb.setup.test || fa.setup.command != fb.setup.command {
        let _ = write!(
            o,
            "<p class=\"notice\">A is {} {} and B is {} {}: the figures they share are compared, but they measure different things.</p>",
            esc(&fa.setup.command),
            esc(&fa.setup.test),
            esc(&fb.setup.command),
            esc(&fb.setup.test)
        );
    }
    if c.figures.is_empty() {
        o.push_str("<p class=\"error\">A and B have no headline figure in common.</p>");
        return Ok(o);
    }
    let scale = c
        .figures
        .iter()
        .filter_map(|f| f.interval_percent)
        .map(|[lo, hi]| lo.abs().max(hi.abs()))
        .fold(c.threshold_percent * 2.0, f64::max);
    o.push_str("<table class=\"compare\"><thead><tr><th class=\"l\">figure</th><th>A</th><th>B</th><th>change</th><th>95 % interval</th><th class=\"l\">change and its interval</th><th class=\"l\">verdict</th><th class=\"l\">noise from</th></tr></thead><tbody>\n");
    for f in &c.figures {
        let v = f.verdict.name();
        let _ = writeln!(
            o,
            "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l\">{}</td><td class=\"verdict v-{}\">{v}</td><td class=\"l\">{}</td></tr>",
            esc(super::status::figure_name(f.name)),
            value(&f.unit, f.a),
            value(&f.unit, f.b),
            f.change_percent
                .map_or("—".into(), |x| format!("{x:+.1} %")),
            f.interval_percent
                .map_or("—".into(), |[lo, hi]| format!("{lo:+.1} … {hi:+.1} %")),
            verdict::bar(
                f.change_percent,
                f.interval_percent,
                c.threshold_percent,
                scale,
                f.higher_is_better
            ),
            v.replace(' ', "-"),
            esc(&f.noise)
        );
    }
    let _ = write!(
        o,
        "</tbody></table><p class=\"muted\">A change under {} % is \"no change\", however certain; intervals hold the run-to-run noise \
(docs/history.md). The shaded band is ± the threshold; green is the better side of zero.</p>",
        c.threshold_percent
    );
    Ok(o)
}
