//! A run's page (`/runs/ID`) and its document (`/api/runs/ID`, what
//! `thrum show ID --json` prints): the run's own report, drawn by the
//! exporters that drew it when it ran (a mix's page with its charts, a
//! single test's page, the aggregate's, the curve's, the sweep's tables
//! with their heat maps), the per-interval charts of a single test, its
//! provenance, and the command that runs it again.

use std::fmt::Write;

use serde_json::Value;

use super::Problem;
use super::layout::{self, badge, labels};
use super::query;
use crate::export::draw::smoke::{self, Chart, Point, Quantity, Series, XAxis};
use crate::export::page;
use crate::result::TestResult;
use crate::store::{Filter, Row, Store};
use crate::text::escape_markup as esc;

/// Whether `s` may be a run's id: 4 to 64 letters, digits and `-` (thrum
/// writes 8 hex digits). Nothing else reaches the store's lookup, whose
/// prefix match would read `%` and `_` as wildcards.
pub fn plausible_id(s: &str) -> bool {
    (4..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

fn find(store: &Store, id: &str) -> Result<(Row, Value), Problem> {
    if !plausible_id(id) {
        return Err(Problem::missing("no such run".into()));
    }
    store
        .get(id)
        .map_err(Problem::bad)?
        .ok_or_else(|| Problem::missing(format!("no run '{}' in the store", crate::text::echo(id))))
}

/// `/api/runs/ID`: the stored document.
pub fn data(store: &Store, id: &str) -> Result<Value, Problem> {
    find(store, id).map(|(_, doc)| doc)
}

/// What the exporter's page holds inside its body (the page's own frame
/// and style are this page's).
fn body_of(html: &str) -> &str {
    let start = html.find("<body>").map_or(0, |i| i + "<body>".len());
    let end = html.rfind("</body>").unwrap_or(html.len());
    &html[start..end.max(start)]
}

/// The command that runs it again: the client's command line as it ran.
fn command(doc: &Value) -> Option<String> {
    if let Some(args) = doc["environment"]["command_line"].as_array() {
        // The program by its name: the path it had on the machine that ran
        // it says nothing of where thrum is on the reader's.
        let args: Vec<std::ffi::OsString> = args
            .iter()
            .filter_map(|a| a.as_str())
            .enumerate()
            .map(|(i, a)| match i {
                0 => a.rsplit('/').next().unwrap_or(a).into(),
                _ => a.into(),
            })
            .collect();
        if !args.is_empty() {
            return Some(crate::sensors::provenance::command_line(args));
        }
    }
    [
        &doc["provenance"]["local"]["command_line"],
        &doc["provenance"]["command_line"],
    ]
    .into_iter()
    .find_map(|v| v.as_str().filter(|s| !s.is_empty()).map(str::to_string))
}

/// `v` flattened into rows of `key.key: value`, at most `depth` deep.
fn flatten(prefix: &str, v: &Value, depth: u32, out: &mut Vec<(String, String)>) {
    let key = |k: &str| {
        if prefix.is_empty() {
            k.to_string()
        } else {
            format!("{prefix}.{k}")
        }
    };
    match v {
        Value::Object(m) if depth > 0 => {
            for (k, x) in m {
                flatten(&key(k), x, depth - 1, out);
            }
        }
        Value::Null => {}
        Value::String(s) if s.is_empty() => {}
        Value::String(s) => out.push((prefix.to_string(), s.clone())),
        Value::Array(a) if a.is_empty() => {}
        Value::Array(a) if a.iter().all(|x| !x.is_object() && !x.is_array()) => out.push((
            prefix.to_string(),
            a.iter()
                .map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_string))
                .collect::<Vec<_>>()
                .join(" "),
        )),
        other => out.push((prefix.to_string(), other.to_string())),
    }
}

/// The provenance and environment as a table.
fn provenance(o: &mut String, doc: &Value) {
    let mut rows = Vec::new();
    flatten("environment", &doc["environment"], 2, &mut rows);
    flatten("", &doc["provenance"], 3, &mut rows);
    rows.retain(|(k, _)| !k.ends_with("command_line"));
    if rows.is_empty() {
        return;
    }
    o.push_str("<h2>Provenance</h2><table class=\"kv provenance\">");
    for (k, v) in rows {
        let _ = write!(
            o,
            "<tr><th>{}</th><td>{}</td></tr>",
            esc(&k),
            esc(&crate::text::escape(&v, 400))
        );
    }
    o.push_str("</table>\n");
}

/// A single test's intervals drawn: its figure of merit, and its latency
/// (each interval's median, smoke from its least to its p90 and p99).
fn interval_charts(r: &TestResult) -> Vec<String> {
    let (_, unit) = r.headline();
    let q = if unit == "bit/s" {
        Quantity::BitsPerSec
    } else {
        Quantity::TransPerSec
    };
    let mut figure = Series {
        name: format!(
            "each interval's {}",
            if q == Quantity::BitsPerSec {
                "throughput"
            } else {
                "transactions/s"
            }
        ),
        ..Series::default()
    };
    let mut latency = Series {
        name: "each interval's median".into(),
        ..Series::default()
    };
    for iv in &r.intervals {
        let x = (iv.start_s + iv.end_s) / 2.0;
        let what = format!("interval {} ({})", iv.index, iv.phase.name());
        if let Some(v) = iv.headline() {
            figure.points.push(Point {
                x,
                y: v,
                title: format!("{what}: {}", super::status::show(v, q)),
                ..Point::default()
            });
        }
        if let Some(l) = &iv.latency_ns {
            latency.points.push(Point {
                x,
                y: l.p50 as f64,
                bands: vec![(l.min as f64, l.p99 as f64), (l.min as f64, l.p90 as f64)],
                title: format!(
                    "{what}: p50 {}, p90 {}, p99 {}",
                    crate::units::fmt_ns(l.p50 as f64),
                    crate::units::fmt_ns(l.p90 as f64),
                    crate::units::fmt_ns(l.p99 as f64)
                ),
                ..Point::default()
            });
        }
    }
    // The phases outside the measurement, shaded: their intervals count
    // in no figure.
    let mut shaded: Vec<(f64, f64, &str)> = Vec::new();
    for iv in r
        .intervals
        .iter()
        .filter(|iv| iv.phase != crate::plan::Phase::Measure)
    {
        match shaded.last_mut() {
            Some(last) if last.2 == iv.phase.name() && (last.1 - iv.start_s).abs() < 1e-6 => {
                last.1 = iv.end_s;
            }
            _ => shaded.push((iv.start_s, iv.end_s, iv.phase.name())),
        }
    }
    let x_range = r
        .intervals
        .last()
        .map(|l| (r.intervals[0].start_s.min(0.0), l.end_s));
    let mut out = Vec::new();
    if !figure.points.is_empty() {
        out.push(smoke::svg(&Chart {
            what: if q == Quantity::BitsPerSec {
                "throughput"
            } else {
                "transactions/s"
            },
            quantity: q,
            x: XAxis::Seconds,
            series: &[figure],
            smoke: "",
            x_range,
            shaded: &shaded,
        }));
    }
    if !latency.points.is_empty() {
        out.push(smoke::svg(&Chart {
            what: "latency",
            quantity: Quantity::Latency,
            x: XAxis::Seconds,
            series: &[latency],
            smoke: "each interval's least to p99, least to p90",
            x_range,
            shaded: &shaded,
        }));
    }
    out
}

/// A stored `thrum ping` as a table of its sizes.
fn ping(o: &mut String, doc: &Value) {
    o.push_str("<table><thead><tr><th>size</th><th>sent</th><th>lost</th><th>min</th><th>p50</th><th>p99</th><th>max</th></tr></thead><tbody>");
    let ns = |v: &Value| v.as_f64().map_or("—".into(), crate::units::fmt_ns);
    for s in doc["summary"]["sizes"].as_array().into_iter().flatten() {
        let rtt = &s["rtt_ns"];
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&s["size"].to_string()),
            esc(&s["sent"].to_string()),
            s["loss_percent"]
                .as_f64()
                .map_or("—".into(), |l| format!("{l:.2} %")),
            ns(&rtt["min"]),
            ns(&rtt["p50"]),
            ns(&rtt["p99"]),
            ns(&rtt["max"])
        );
    }
    o.push_str("</tbody></table>");
}

/// A stored aggregate run, analysed again as `thrum report` does.
fn agg(doc: Value) -> Result<String, String> {
    use crate::agg::model::{self, AggResult};
    let saved: AggResult = serde_json::from_value(doc).map_err(|e| e.to_string())?;
    let r = model::reanalyse_saved(saved)?;
    let labels = crate::export::draw::agg::Labels::of(&r.spec);
    let svgs: Vec<String> = r
        .tests
        .iter()
        .map(|t| crate::export::draw::agg::overall_svg(t, labels))
        .collect();
    Ok(page::agg::report(&r, &svgs))
}

/// The report of `doc`, by its schema, as markup; an error says why it
/// could not be drawn.
fn report(doc: &Value, o: &mut String) -> Result<(), String> {
    let schema = doc["schema"].as_str().unwrap_or_default();
    let html = match schema {
        crate::result::SCHEMA => {
            let r: TestResult = serde_json::from_value(doc.clone()).map_err(|e| e.to_string())?;
            if !r.spec.plan.parts.is_empty() {
                page::mix::report(&r)
            } else {
                let charts = interval_charts(&r);
                if !charts.is_empty() {
                    o.push_str("<h2>Intervals drawn</h2>");
                    for c in charts {
                        o.push_str(&c);
                    }
                }
                use crate::plan::kinds::Chart as Own;
                let own = r.test.traits().chart.map(|c| match c {
                    Own::Dispersion => crate::export::draw::capacity::svg(&r),
                });
                page::result::report(&r, own.as_deref())
            }
        }
        crate::agg::model::SCHEMA => agg(doc.clone())?,
        crate::curve::SCHEMA => {
            let mut c: crate::curve::Curve =
                serde_json::from_value(doc.clone()).map_err(|e| e.to_string())?;
            crate::curve::analyse(&mut c);
            page::curve::report(&c, &crate::export::draw::curve::svg(&c))
        }
        "thrum.sweep.v1" => {
            let sw: crate::sweep::Sweep =
                serde_json::from_value(doc.clone()).map_err(|e| e.to_string())?;
            page::sweep::report(&sw)
        }
        crate::fleet::mesh::SCHEMA => {
            let m: crate::fleet::mesh::Mesh =
                serde_json::from_value(doc.clone()).map_err(|e| e.to_string())?;
            format!(
                "<body>{}<pre>{}</pre></body>",
                crate::export::draw::mesh::svg(&m),
                esc(&crate::export::mesh::table(&m))
            )
        }
        "thrum.ping.v1" => {
            let mut p = String::from("<body>");
            ping(&mut p, doc);
            p.push_str("</body>");
            p
        }
        other => {
            return Err(format!(
                "no page for a document of schema '{}'",
                crate::text::echo(other)
            ));
        }
    };
    let _ = write!(
        o,
        "<h2>Report</h2><div class=\"report\">{}</div>",
        body_of(&html)
    );
    Ok(())
}

/// The run of the same setup saved just before `row`, if any.
fn before(store: &Store, row: &Row) -> Result<Option<Row>, Problem> {
    let runs = store
        .list(&Filter {
            test: Some(row.test.clone()),
            target: Some(row.target.clone()),
            labels: row.labels.clone(),
            until_unix_s: Some(row.time_unix_s),
            last: Some(10),
            ..Filter::default()
        })
        .map_err(Problem::store)?;
    Ok(runs
        .into_iter()
        .find(|r| r.id != row.id && r.command == row.command && r.labels == row.labels))
}

/// The page.
pub fn page(store: &Store, id: &str) -> Result<(String, String), Problem> {
    let (row, doc) = find(store, id)?;
    let mut o = String::new();
    let title = format!("run {}", row.id);
    let _ = write!(
        o,
        "<h1>Run <code>{}</code>: {}{} to {} {}</h1>",
        esc(&row.id),
        if row.command == "run" || row.command == "ping" {
            String::new()
        } else {
            format!("{} ", esc(&row.command))
        },
        esc(&row.test),
        esc(&row.target),
        if row.ok {
            badge("normal", "ok")
        } else {
            badge("failing", "failed")
        }
    );
    let _ = write!(
        o,
        "<table class=\"kv\"><tr><th>saved</th><td>{}</td></tr><tr><th>labels</th><td>{}</td></tr>",
        layout::time(row.time_unix_s),
        labels(&row.labels)
    );
    if let Some(n) = &row.name {
        let _ = write!(o, "<tr><th>name</th><td>{}</td></tr>", esc(n));
    }
    let history = super::listing::history_link(&row.test, &row.target, &row.labels);
    let _ = write!(
        o,
        "<tr><th>see also</th><td><a href=\"{}\">the history of its setup</a>",
        esc(&history)
    );
    if let Some(b) = before(store, &row)? {
        let _ = write!(
            o,
            " · <a href=\"/compare{}\">compared with the run before it ({})</a>",
            esc(&query::query(&[("a", &b.id), ("b", &row.id)])),
            esc(&b.id)
        );
    }
    let _ = write!(
        o,
        " · <a href=\"/api/runs/{}\">its document (JSON)</a></td></tr></table>",
        query::encode(&row.id)
    );
    if let Some(cmd) = command(&doc) {
        let _ = write!(
            o,
            "<h2>Run it again</h2><pre class=\"cmd\"><code>{}</code></pre>",
            esc(&crate::text::message(&cmd))
        );
    }
    if let Err(e) = report(&doc, &mut o) {
        let _ = write!(
            o,
            "<p class=\"error\">This run's document cannot be drawn: {}. <a href=\"/api/runs/{}\">Its JSON</a> holds every figure.</p>",
            esc(&crate::text::message(&e)),
            query::encode(&row.id)
        );
    }
    provenance(&mut o, &doc);
    Ok((title, o))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_bodies() {
        assert!(plausible_id("0aa1ef4c"));
        assert!(plausible_id("0aa1"));
        assert!(!plausible_id("0aa"));
        assert!(!plausible_id("0a%_"));
        assert!(!plausible_id("../x"));
        assert_eq!(
            body_of("<html><body>\n<h1>x</h1></body></html>"),
            "\n<h1>x</h1>"
        );
        assert_eq!(body_of("plain"), "plain");
    }

    #[test]
    fn the_command_again_and_provenance_rows() {
        let doc = serde_json::json!({
            "environment": {"command_line": ["/usr/local/bin/thrum", "run", "tcp_rr", "--label", "case=a b"], "hostname": "h"},
            "provenance": {"local": {"command_line": "x", "kernel": {"release": "6.1"}}}
        });
        assert_eq!(
            command(&doc).unwrap(),
            "thrum run tcp_rr --label 'case=a b'"
        );
        let mut rows = Vec::new();
        flatten("", &doc["provenance"], 3, &mut rows);
        assert!(rows.contains(&("local.kernel.release".into(), "6.1".into())));
    }
}
