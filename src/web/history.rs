//! The history page (`/history?test=…&target=…&label=K=V&since=7d`) and
//! its data (`/api/history`, the rows `thrum history --json` prints for
//! the same filter): SmokePing's charts of the runs over time, one series
//! per setup (target and labels), a time range to choose, a form that
//! picks two runs or two labels for `/compare`, and the runs listed.
//!
//! Two charts: the figure of merit (throughput or transactions/s), its
//! smoke the spread of each run's measured intervals; and latency, its
//! line each run's median and its smoke the run's own distribution (p5 to
//! p95, p10 to p90, p25 to p75, from the histogram it stored), each point
//! coloured by the run's loss where it counts loss. A point opens its run.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde_json::Value;

use super::listing;
use super::query::{self, Target};
use super::status;
use crate::export::draw::smoke::{self, Chart, Point, Quantity, Series, XAxis};
use crate::stats::latency::LatencyHistogram;
use crate::store::{Filter, Labels, Row, Store};
use crate::text::escape_markup as esc;

/// The most runs a history page reads and draws (the newest).
pub const MAX_RUNS: u32 = 500;
/// The newest runs whose whole document is read for their smoke.
pub const SMOKE_RUNS: usize = 300;
/// The runs the table lists.
pub const TABLE_RUNS: usize = 200;
/// The time ranges offered, as `since` takes them.
pub const RANGES: [&str; 6] = ["1h", "6h", "24h", "7d", "30d", "all"];

/// An age as `since` takes it (`90m`, `6h`, `7d`, `all`): Unix seconds
/// of its start before `now`, None for all.
pub fn since(s: &str, now: f64) -> Result<Option<f64>, String> {
    let t = s.trim();
    if t.is_empty() || t == "all" {
        return Ok(None);
    }
    let secs = match t.strip_suffix('d').map(str::parse::<f64>) {
        Some(Ok(d)) if d.is_finite() && d >= 0.0 => d * 86_400.0,
        Some(_) => return Err(bad_since(s)),
        None => crate::units::parse_duration(t)
            .map_err(|_| bad_since(s))?
            .as_secs_f64(),
    };
    Ok(Some(now - secs))
}

fn bad_since(s: &str) -> String {
    format!(
        "since: '{}' is not an age (accepted: all, or a number and a unit: 90m, 6h, 7d)",
        crate::text::echo(s)
    )
}

/// The store's filter for the page's parameters.
pub fn filter(t: &Target, now: f64) -> Result<Filter, String> {
    let mut labels = Labels::new();
    for l in t.all("label").into_iter().filter(|l| !l.is_empty()) {
        let (k, v) = crate::store::parse_label(l).map_err(|e| format!("label: {e}"))?;
        labels.insert(k, v);
    }
    Ok(Filter {
        test: t.given("test").map(str::to_string),
        target: t.given("target").map(str::to_string),
        labels,
        since_unix_s: since(t.get("since").unwrap_or("all"), now)?,
        until_unix_s: None,
        last: Some(MAX_RUNS),
        ok_only: false,
    })
}

/// `/api/history`: the rows, as `thrum history --json` prints them.
pub fn data(store: &Store, t: &Target, now: f64) -> Result<Vec<Row>, String> {
    store.list(&filter(t, now)?)
}

/// Spread of a run's measured intervals' figure: (min, max).
fn interval_spread(doc: &Value) -> Option<(f64, f64)> {
    let v: Vec<f64> = doc["intervals"]
        .as_array()?
        .iter()
        .filter(|i| i["phase"] == "measure")
        .filter_map(|i| {
            let s = &i["sum"];
            s["throughput_bps"]
                .as_f64()
                .or_else(|| s["transactions_per_s"].as_f64())
        })
        .collect();
    if v.len() < 2 {
        return None;
    }
    Some(
        v.iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
                (a.min(x), b.max(x))
            }),
    )
}

/// A run's latency smoke from its histogram, the widest first; without
/// one, the median to its p99 from the headline.
fn latency_smoke(doc: Option<&Value>, r: &Row) -> Vec<(f64, f64)> {
    if let Some(h) = doc
        .and_then(|d| d["summary"]["histogram"].as_str())
        .and_then(|b| LatencyHistogram::from_base64(b).ok())
        .filter(|h| h.count() > 0)
    {
        let q = |p: f64| h.quantile(p) as f64;
        return vec![(q(0.05), q(0.95)), (q(0.10), q(0.90)), (q(0.25), q(0.75))];
    }
    match (r.headline.latency_p50_ns, r.headline.latency_p99_ns) {
        (Some(a), Some(b)) => vec![(a, b)],
        _ => Vec::new(),
    }
}

/// A series' name: its labels, with the target and command when the
/// filter leaves them open.
fn series_name(r: &Row, f: &Filter) -> String {
    let mut parts = Vec::new();
    if f.target.is_none() {
        parts.push(r.target.clone());
    }
    if r.command != "run" && r.command != "ping" {
        parts.push(r.command.clone());
    }
    if f.test.is_none() {
        parts.push(r.test.clone());
    }
    let l: Vec<String> = r.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    parts.push(if l.is_empty() {
        "no labels".into()
    } else {
        l.join(",")
    });
    parts.join(" · ")
}

/// The page's two charts from `rows` (newest first).
fn charts(store: &Store, rows: &[Row], f: &Filter) -> Result<Vec<String>, String> {
    let mut docs: BTreeMap<&str, Value> = BTreeMap::new();
    for r in rows.iter().take(SMOKE_RUNS) {
        if let Some((_, d)) = store.get(&r.id)? {
            docs.insert(&r.id, d);
        }
    }
    let bits = rows.iter().any(|r| r.headline.throughput_bps.is_some());
    let mut rate: BTreeMap<String, Series> = BTreeMap::new();
    let mut latency: BTreeMap<String, Series> = BTreeMap::new();
    for r in rows.iter().rev() {
        let name = series_name(r, f);
        let href = Some(format!("/runs/{}", query::encode(&r.id)));
        let when = crate::units::fmt_local_time(r.time_unix_s, true);
        if !r.ok {
            for m in [&mut rate, &mut latency] {
                let s = m.entry(name.clone()).or_default();
                s.name = name.clone();
                s.failed.push(r.time_unix_s);
            }
            continue;
        }
        let doc = docs.get(r.id.as_str());
        let figure = if bits {
            r.headline.throughput_bps
        } else {
            r.headline.transactions_per_s
        };
        let q = if bits {
            Quantity::BitsPerSec
        } else {
            Quantity::TransPerSec
        };
        if let Some(v) = figure {
            let s = rate.entry(name.clone()).or_default();
            s.name = name.clone();
            s.points.push(Point {
                x: r.time_unix_s,
                y: v,
                bands: doc.and_then(interval_spread).into_iter().collect(),
                loss_percent: r.headline.loss_percent,
                href: href.clone(),
                title: format!("{} · {when} · {}", r.id, status::show(v, q)),
            });
        }
        if let Some(p50) = r.headline.latency_p50_ns {
            let s = latency.entry(name.clone()).or_default();
            s.name = name.clone();
            let loss = r
                .headline
                .loss_percent
                .map_or(String::new(), |l| format!(" · {l:.2} % lost"));
            s.points.push(Point {
                x: r.time_unix_s,
                y: p50,
                bands: latency_smoke(doc, r),
                loss_percent: r.headline.loss_percent,
                href,
                title: format!(
                    "{} · {when} · p50 {}{}{loss}",
                    r.id,
                    crate::units::fmt_ns(p50),
                    r.headline.latency_p99_ns.map_or(String::new(), |p| format!(
                        ", p99 {}",
                        crate::units::fmt_ns(p)
                    ))
                ),
            });
        }
    }
    let mut out = Vec::new();
    let keep = |m: BTreeMap<String, Series>| -> Vec<Series> {
        m.into_values()
            .filter(|s| !s.points.is_empty() || !s.failed.is_empty())
            .collect()
    };
    let rate = keep(rate);
    if !rate.is_empty() {
        out.push(smoke::svg(&Chart {
            what: if bits { "throughput" } else { "transactions/s" },
            quantity: if bits {
                Quantity::BitsPerSec
            } else {
                Quantity::TransPerSec
            },
            x: XAxis::Time,
            series: &rate,
            smoke: "each run's measured intervals, lowest to highest",
            x_range: None,
            shaded: &[],
        }));
    }
    let latency = keep(latency);
    if !latency.is_empty() {
        let bands = |n: usize| {
            latency
                .iter()
                .flat_map(|s| &s.points)
                .any(|p| p.bands.len() == n)
        };
        // Beside other series a series draws its middle band only.
        let smoke = match (bands(3), bands(1), latency.len() > 1) {
            (true, true, false) => {
                "each run's p5–p95, p10–p90, p25–p75 (p50–p99 where it kept no histogram)"
            }
            (true, true, true) => "each run's p10–p90 (p50–p99 where it kept no histogram)",
            (false, true, _) => "each run's p50–p99",
            (_, _, true) => "each run's p10–p90",
            _ => "each run's p5–p95, p10–p90, p25–p75",
        };
        out.push(smoke::svg(&Chart {
            what: "latency",
            quantity: Quantity::Latency,
            x: XAxis::Time,
            series: &latency,
            smoke,
            x_range: None,
            shaded: &[],
        }));
    }
    Ok(out)
}

/// The page's parameters as a query, `since` replaced by `range`.
fn with_range(t: &Target, range: &str) -> String {
    let mut pairs: Vec<(&str, &str)> = t
        .params
        .iter()
        .filter(|(k, _)| k != "since" && k != "token")
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    pairs.push(("since", range));
    format!("/history{}", query::query(&pairs))
}

/// The filter form: a test, a target, labels, the range.
fn filter_form(o: &mut String, t: &Target, tests: &[String], targets: &[String]) {
    o.push_str("<form class=\"pick\" method=\"get\" action=\"/history\">");
    let select = |o: &mut String, name: &str, what: &str, options: &[String]| {
        let now = t.get(name).unwrap_or("");
        let _ = write!(
            o,
            "<label>{what}<select name=\"{name}\"><option value=\"\">any</option>"
        );
        for v in options {
            let _ = write!(
                o,
                "<option value=\"{0}\"{1}>{0}</option>",
                esc(v),
                if v == now { " selected" } else { "" }
            );
        }
        o.push_str("</select></label>");
    };
    select(o, "test", "test", tests);
    select(o, "target", "target", targets);
    let given: Vec<&str> = t.all("label");
    let _ = write!(
        o,
        "<label>label (KEY=VALUE)<input name=\"label\" value=\"{}\" placeholder=\"case=a\"></label>",
        esc(given.first().copied().unwrap_or(""))
    );
    for extra in given.iter().skip(1) {
        let _ = write!(
            o,
            "<input type=\"hidden\" name=\"label\" value=\"{}\">",
            esc(extra)
        );
    }
    let _ = write!(
        o,
        "<input type=\"hidden\" name=\"since\" value=\"{}\"><button type=\"submit\">Show</button></form>",
        esc(t.get("since").unwrap_or("all"))
    );
}

/// The page.
pub fn page(store: &Store, t: &Target, now: f64) -> Result<String, String> {
    let f = filter(t, now)?;
    let every = store.list(&Filter {
        last: Some(super::listing::READ_RUNS),
        ..Filter::default()
    })?;
    let distinct = |get: fn(&Row) -> &str| {
        let mut v: Vec<String> = every.iter().map(|r| get(r).to_string()).collect();
        v.sort();
        v.dedup();
        v
    };
    let tests = distinct(|r| &r.test);
    let targets = distinct(|r| &r.target);
    let rows = store.list(&f)?;
    let mut o = String::new();
    let what: Vec<String> = [
        f.test.clone(),
        f.target.as_ref().map(|t| format!("to {t}")),
        (!f.labels.is_empty()).then(|| {
            let l: Vec<String> = f.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            l.join(", ")
        }),
    ]
    .into_iter()
    .flatten()
    .collect();
    let _ = write!(
        o,
        "<h1>History{}</h1>",
        if what.is_empty() {
            String::new()
        } else {
            format!(": {}", esc(&what.join(" ")))
        }
    );
    filter_form(&mut o, t, &tests, &targets);
    let range = t.get("since").unwrap_or("all");
    o.push_str("<p class=\"ranges\">");
    for r in RANGES {
        let _ = write!(
            o,
            "<a href=\"{}\"{}>{r}</a>",
            esc(&with_range(t, r)),
            if r == range { " class=\"here\"" } else { "" }
        );
    }
    let _ = write!(
        o,
        " <span class=\"muted\">{} runs{}</span></p>",
        rows.len(),
        if rows.len() as u32 == MAX_RUNS {
            " (the newest; narrow the range for older ones)"
        } else {
            ""
        }
    );
    if rows.is_empty() {
        o.push_str("<p class=\"notice\">No stored run matches.</p>");
        return Ok(o);
    }
    for svg in charts(store, &rows, &f)? {
        o.push_str(&svg);
    }
    compare_form(&mut o, &rows);
    o.push_str("<h2>Runs</h2><form method=\"get\" action=\"/compare\">");
    listing::runs_table(&mut o, &rows[..rows.len().min(TABLE_RUNS)], true);
    o.push_str("<button type=\"submit\">Compare A and B</button></form>");
    Ok(o)
}

/// The form that picks two labels (or the newest runs) to compare.
fn compare_form(o: &mut String, rows: &[Row]) {
    let mut pairs: Vec<String> = rows
        .iter()
        .flat_map(|r| r.labels.iter().map(|(k, v)| format!("label:{k}={v}")))
        .collect();
    pairs.sort();
    pairs.dedup();
    o.push_str("<h2>Compare</h2><form class=\"pick\" method=\"get\" action=\"/compare\">");
    let labelled = pairs.len() >= 2;
    for (name, pick) in [("a", 0usize), ("b", 1usize)] {
        let _ = write!(o, "<label>{}<select name=\"{name}\">", name.to_uppercase());
        for (i, p) in pairs.iter().enumerate() {
            let _ = write!(
                o,
                "<option value=\"{0}\"{1}>{0}</option>",
                esc(p),
                if labelled && i == pick {
                    " selected"
                } else {
                    ""
                }
            );
        }
        // Without two labels: the run before the newest against the newest.
        let chosen = if labelled {
            None
        } else if name == "a" {
            rows.get(1).or(rows.first())
        } else {
            rows.first()
        };
        for r in rows.iter().take(50) {
            let _ = write!(
                o,
                "<option value=\"{}\"{}>run {} · {}</option>",
                esc(&r.id),
                if chosen.is_some_and(|c| c.id == r.id) {
                    " selected"
                } else {
                    ""
                },
                esc(&r.id),
                esc(&crate::units::fmt_local_time(r.time_unix_s, true))
            );
        }
        o.push_str("</select></label>");
    }
    o.push_str("<button type=\"submit\">Compare</button></form><p class=\"muted\">Or pick A and B among the runs below.</p>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages() {
        assert_eq!(since("all", 100.0).unwrap(), None);
        assert_eq!(since("1h", 10_000.0).unwrap(), Some(6_400.0));
        assert_eq!(since("7d", 1e6).unwrap(), Some(1e6 - 7.0 * 86_400.0));
        let e = since("yesterday", 0.0).unwrap_err();
        assert!(e.contains("since") && e.contains("7d"), "{e}");
        assert!(since("-1d", 0.0).is_err());
    }

    #[test]
    fn a_run_spread_is_its_measured_intervals() {
        let doc = serde_json::json!({"intervals": [
            {"phase": "warmup", "sum": {"transactions_per_s": 1.0}},
            {"phase": "measure", "sum": {"transactions_per_s": 10.0}},
            {"phase": "measure", "sum": {"transactions_per_s": 12.0}},
            {"phase": "measure", "sum": {"transactions_per_s": 11.0}}]});
        assert_eq!(interval_spread(&doc), Some((10.0, 12.0)));
        assert_eq!(interval_spread(&Value::Null), None);
    }
}
