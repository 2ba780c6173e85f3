//! The compare page (`/compare?a=…&b=…`) and its data (`/api/compare`,
//! the document `thrum compare --json` prints): two sets of stored runs,
//! each a run's id or `label:KEY=VALUE` (every run so labelled, of one
//! test and target and of the newest one's settings), found by the same
//! lookup `thrum compare` uses ([`crate::store::sets`]: `test`, `target`
//! and `last` are its `--test`, `--target` and `--last`), like compared
//! with like, figure by figure by the store's method
//! ([`crate::store::compare`]): the verdicts, and a bar per figure that
//! shows the change's interval against the threshold.

use std::fmt::Write;

use super::Problem;
use super::query::{self, Target};
use crate::export::draw::verdict;
use crate::store::Store;
use crate::store::compare::{self, Comparison};
use crate::store::sets::{self, Among, Found, Missing, Spec};
use crate::text::escape_markup as esc;

/// How the page names the store in a message: its path is the server's
/// business, not the reader's.
const PLACE: &str = "the store";

/// Find side `which` named `spec` (`raw` as given) among `among`.
fn resolve(
    store: &Store,
    which: &str,
    raw: &str,
    spec: &Spec,
    among: &Among,
) -> Result<Found, Problem> {
    let found = match spec {
        Spec::Label(k, v) => sets::by_label(store, k, v, among, PLACE),
        // The page names no files: `Spec::parse` was told so.
        Spec::Id(id) | Spec::File(id) => {
            if !super::run::plausible_id(id) {
                return Err(Problem::bad(format!(
                    "{which}: '{}' is neither a run's id (4 to 64 letters, digits and -) nor label:KEY=VALUE",
                    crate::text::echo(raw)
                )));
            }
            sets::by_id(store, id, PLACE)
        }
    };
    found.map_err(|e| match e {
        Missing::NotFound(m) => Problem::missing(format!("{which}: {m}")),
        Missing::Store(m) => Problem::store(m),
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

/// `last`: the newest N runs of a label, as `--last`.
fn last(t: &Target) -> Result<Option<u32>, Problem> {
    t.given("last")
        .map(|s| {
            s.parse::<u32>().ok().filter(|n| *n >= 1).ok_or_else(|| {
                Problem::bad(format!(
                    "last: '{}' is not a count of runs (accepted: 1 to {})",
                    crate::text::echo(s),
                    u32::MAX
                ))
            })
        })
        .transpose()
}

/// A comparison made: both sides, what a reader should know of how they
/// were found, and the comparison.
struct Made {
    a: Found,
    b: Found,
    notes: Vec<String>,
    c: Comparison,
}

/// Both sides and their comparison.
fn run(store: &Store, t: &Target) -> Result<Made, Problem> {
    let need = |k: &str| {
        t.given(k).ok_or_else(|| {
            Problem::bad(format!(
                "{k}: missing (a run's id, or label:KEY=VALUE for every run so labelled)"
            ))
        })
    };
    let raw = [need("a")?, need("b")?];
    let threshold = threshold(t)?;
    let spec = |k: usize| {
        Spec::parse(raw[k], false).map_err(|e| Problem::bad(format!("{}: {e}", ["a", "b"][k])))
    };
    let (sa, sb) = (spec(0)?, spec(1)?);
    let given = Among {
        test: t.given("test").map(str::to_string),
        target: t.given("target").map(str::to_string),
        last: last(t)?,
    };
    let (a, b) = sets::both(&sa, &sb, &given, |side, spec, among| {
        resolve(store, ["a", "b"][side], raw[side], spec, among)
    })?;
    sets::like_with_like(&a.kind, &b.kind, ["A", "B"]).map_err(Problem::bad)?;
    let (pools, warnings) = sets::pools(store, &[&a, &b]);
    let c = compare::compare(&a.set, &b.set, &pools, threshold, None).map_err(Problem::bad)?;
    let mut notes: Vec<String> = a.notes.iter().chain(&b.notes).cloned().collect();
    notes.extend(warnings);
    Ok(Made { a, b, notes, c })
}

/// `/api/compare`: the document `thrum compare --json` prints.
pub fn data(store: &Store, t: &Target) -> Result<Comparison, Problem> {
    run(store, t).map(|m| m.c)
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

/// One side's row of the head table: its runs, each a link, and what
/// they are.
fn side(o: &mut String, which: &str, f: &Found) {
    let _ = write!(o, "<tr><th>{which}</th><td>");
    for (i, r) in f.set.runs.iter().enumerate() {
        let _ = write!(
            o,
            "{}<a href=\"/runs/{}\">{}</a>",
            if i > 0 { " " } else { "" },
            query::encode(&r.id),
            esc(&r.id)
        );
    }
    let _ = write!(
        o,
        " · {} run(s), {}</td></tr>",
        f.set.runs.len(),
        esc(&f.kind.said())
    );
}

/// The page: the form, and with A and B the table.
pub fn page(store: &Store, t: &Target) -> Result<String, Problem> {
    let mut o = String::from("<h1>Compare</h1>");
    form(&mut o, t);
    if t.given("a").is_none() && t.given("b").is_none() {
        o.push_str("<p class=\"muted\">Two sets of stored runs, figure by figure, as <code>thrum compare</code> does: \
the change from A's centre to B's, its interval with the run-to-run noise (a set's own runs, or the stored runs of its settings), \
and a verdict, the false alarms held to 5 % over the figures. A run's id is a set of one; <code>label:KEY=VALUE</code> is every \
run so labelled, of one test and target and of the newest one's settings (<code>test</code>, <code>target</code> and \
<code>last</code> in the address choose, as <code>--test</code>, <code>--target</code> and <code>--last</code> do). \
Pick two runs or two labels on a history page.</p>");
        return Ok(o);
    }
    let Made { a, b, notes, c } = run(store, t)?;
    o.push_str("<table class=\"kv\">");
    side(&mut o, "A", &a);
    side(&mut o, "B", &b);
    o.push_str("</table>");
    for n in &notes {
        let _ = write!(o, "<p class=\"notice\">{}</p>", esc(n));
    }
    if c.figures.is_empty() {
        o.push_str("<p class=\"error\">A and B have no figure in common.</p>");
        return Ok(o);
    }
    let scale = c
        .figures
        .iter()
        .filter_map(|f| f.interval_percent)
        .map(|[lo, hi]| lo.abs().max(hi.abs()))
        .fold(c.threshold_percent * 2.0, f64::max);
    o.push_str("<table class=\"compare\"><thead><tr><th class=\"l\">figure</th><th>A</th><th>B</th><th>change</th><th>interval</th><th class=\"l\">change and its interval</th><th class=\"l\">verdict</th><th class=\"l\">noise from</th></tr></thead><tbody>\n");
    let value = crate::store::figures::format;
    for f in &c.figures {
        let v = f.verdict.name();
        let level = super::status::level(f.level_percent);
        let _ = writeln!(
            o,
            "<tr><td class=\"l\">{}{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l\">{}</td><td class=\"verdict v-{}\">{v}</td><td class=\"l\">{}</td></tr>",
            if f.gated { "* " } else { "" },
            esc(super::status::figure_name(&f.name)),
            esc(&value(&f.unit, f.a)),
            esc(&value(&f.unit, f.b)),
            f.change_percent
                .map_or("—".into(), |x| format!("{x:+.1} %")),
            f.interval_percent.map_or("—".into(), |[lo, hi]| format!(
                "{lo:+.1} … {hi:+.1} % ({level})"
            )),
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
        "</tbody></table><p class=\"muted\">* gated (what <code>--fail-on regression</code> looks at). A change under {} % is \"no change\", however certain; \
each interval is at its share of a 5 % false-alarm budget over the figures judged, and holds the run-to-run noise; CPU % is shown, never judged \
(docs/history.md). The shaded band is ± the threshold; green is the better side of zero.</p>",
        c.threshold_percent
    );
    Ok(o)
}
