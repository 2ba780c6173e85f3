//! report.html: one self-contained page (no scripts, no external files)
//! with every test's chart inlined as SVG and its table of steps; for
//! `thrum curve`, the curve's chart and its table of open-loop steps; for a
//! saved single test (`thrum report` of `run --json`), its summary, chart
//! and intervals.

use std::fmt::Write;

use crate::agg::model::{AggResult, TestAgg};
use crate::curve::Curve;
use crate::units::fmt_ns;

/// Escape text for HTML content and attributes.
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// An SVG document without its XML declaration, for inlining.
pub(crate) fn inline(svg: &str) -> &str {
    match svg.find("<svg") {
        Some(i) => &svg[i..],
        None => svg,
    }
}

fn opt(v: Option<f64>) -> String {
    v.map_or("n/a".into(), |v| format!("{v:.1}"))
}

/// Nanoseconds as microseconds, or `-`.
fn us(ns: Option<f64>) -> String {
    ns.map_or("-".into(), |v| format!("{:.1}", v / 1e3))
}

fn test_section(o: &mut String, t: &TestAgg, svg: &str) {
    let _ = write!(o, "<section><h2>{}</h2>\n<p>", escape(&t.name));
    match t.peak_step.map(|i| &t.steps[i]) {
        Some(p) => {
            let _ = write!(
                o,
                "Peak: step {} with {} stream(s), average {} {}",
                p.index,
                p.streams,
                opt(p.average),
                escape(&t.unit)
            );
        }
        None => o.push_str("No complete step."),
    }
    if let Some(b) = t.burst {
        let _ = write!(o, "; burst {b}");
    }
    o.push_str("</p>\n");
    o.push_str(inline(svg));
    let _ = write!(
        o,
        "\n<table><thead><tr><th>step</th><th>streams</th><th>window from (s)</th><th>to (s)</th>\
<th>average ({u})</th><th>minimum ({u})</th><th>maximum ({u})</th>\
<th>latency p50 (µs)</th><th>p99 (µs)</th><th>mean (µs)</th>\
<th>SUT CPU (%)</th><th>SUT service demand</th><th>load generators' CPU (%)</th><th>their service demand</th></tr></thead><tbody>\n",
        u = escape(&t.unit)
    );
    for s in &t.steps {
        let peak = if Some(s.index) == t.peak_step {
            " class=\"peak\""
        } else {
            ""
        };
        let _ = writeln!(
            o,
            "<tr{peak}><td>{}</td><td>{}</td><td>{:.2}</td><td>{:.2}</td><td>{}</td><td>{}</td><td>{}</td>\
<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            s.index,
            s.streams,
            s.start - t.start,
            s.end - t.start,
            opt(s.average),
            opt(s.minimum),
            opt(s.maximum),
            us(s.latency_ns.as_ref().map(|l| l.p50 as f64)),
            us(s.latency_ns.as_ref().map(|l| l.p99 as f64)),
            us(s.latency_ns.as_ref().map(|l| l.mean)),
            opt(s.cpu_util_percent),
            opt(s.service_demand),
            opt(s.remote_cpu_util_percent),
            opt(s.remote_service_demand),
        );
    }
    o.push_str("</tbody></table>\n");
    // Each load generator's CPU per step, where a step had several.
    if t.steps.iter().any(|s| s.remote_hosts.len() > 1) {
        o.push_str("<table class=\"hosts\"><thead><tr><th>step</th><th>load generator</th><th>streams</th><th>CPU (%)</th><th>CPUs</th><th>service demand</th></tr></thead><tbody>\n");
        for s in &t.steps {
            for h in &s.remote_hosts {
                let _ = writeln!(
                    o,
                    "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    s.index,
                    escape(&h.host),
                    h.streams,
                    opt(h.cpu_util_percent),
                    h.cpus.map_or("-".into(), |n| n.to_string()),
                    opt(h.service_demand)
                );
            }
        }
        o.push_str("</tbody></table>\n");
    }
    if let Some(bs) = &t.burst_search {
        o.push_str("<p>Burst search (transactions/s of one flow): ");
        let tried: Vec<String> = bs
            .tried
            .iter()
            .map(|(b, v)| format!("{b}: {v:.0}"))
            .collect();
        let _ = writeln!(o, "{}; chose {}.</p>", tried.join(", "), bs.burst);
    }
    // Failed streams are among the warnings (agg::run puts them there).
    if !t.warnings.is_empty() {
        o.push_str("<ul class=\"warnings\">");
        for w in &t.warnings {
            let _ = write!(o, "<li>{}</li>", escape(w));
        }
        o.push_str("</ul>\n");
    }
    o.push_str("</section>\n");
}

/// The page's head, its style and its heading.
pub(crate) fn head(title: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title>\n<style>\
body{{font-family:sans-serif;margin:2em;color:#222;background:#fff}}\
table{{border-collapse:collapse;margin:1em 0}}td,th{{border:1px solid #999;padding:.3em .6em;text-align:right}}\
tr.peak{{background:#e6f4e6}}tr.saturated{{background:#fbe4e4}}table.provenance th,table.provenance td{{text-align:left}}.warnings{{color:#a00}}svg{{max-width:100%;height:auto}}\
</style></head><body>\n<h1>{title}</h1>\n"
    )
}

/// The page of a latency-vs-throughput curve, given its chart.
pub fn curve_report(c: &Curve, svg: &str) -> String {
    let mut o = head("thrum curve report");
    let _ = writeln!(
        o,
        "<p>{} to {}: {} flow(s), request {} B, response {} B, {} arrivals, open-loop steps of {} s (warm-up {} s). \
Response time runs from each transaction's intended start.{}</p>",
        escape(&c.test),
        escape(&c.server),
        c.spec.flows,
        c.spec.request_bytes,
        c.spec.response_bytes,
        escape(&c.spec.arrivals),
        c.spec.step_s,
        c.spec.warmup_s,
        c.spec.closed_loop_per_s.map_or(String::new(), |r| format!(
            " Closed-loop probe: {r:.0} transactions/s."
        ))
    );
    o.push_str("<ul>");
    for (name, p) in [("Knee", &c.knee), ("Saturation", &c.saturation)] {
        let _ = match p {
            Some(p) => write!(
                o,
                "<li>{name}: {:.0} transactions/s (step {}): {}</li>",
                p.achieved_per_s,
                p.step + 1,
                escape(&p.reason)
            ),
            None => write!(o, "<li>{name}: none</li>"),
        };
    }
    if let Some(slo) = &c.spec.slo {
        let _ = write!(o, "<li>SLO: {}</li>", escape(&slo.to_string()));
    }
    o.push_str("</ul>\n");
    o.push_str(inline(svg));
    o.push_str(
        "\n<table><thead><tr><th>step</th><th>offered (/s)</th><th>achieved (/s)</th><th>p50</th><th>p90</th>\
<th>p99</th><th>p99.9</th><th>max</th><th>late</th><th>lost</th><th>client CPU (%)</th><th>client µs/tran</th>\
<th>server CPU (%)</th><th>server µs/tran</th></tr></thead><tbody>\n",
    );
    let ns = |v: Option<u64>| v.map_or("n/a".into(), |v| fmt_ns(v as f64));
    for s in &c.steps {
        let class = if c.knee.as_ref().is_some_and(|k| k.step == s.index) {
            " class=\"peak\""
        } else if c.saturation.as_ref().is_some_and(|k| k.step <= s.index) {
            " class=\"saturated\""
        } else {
            ""
        };
        let l = s.latency_ns.as_ref();
        let _ = writeln!(
            o,
            "<tr{class}><td>{}</td><td>{:.0}</td><td>{:.0}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            // Counted from 1, as the terminal's lines and table.
            s.index + 1,
            s.offered_per_s,
            s.achieved_per_s,
            ns(l.map(|l| l.p50)),
            ns(l.map(|l| l.p90)),
            ns(l.map(|l| l.p99)),
            ns(l.map(|l| l.p99_9)),
            ns(l.map(|l| l.max)),
            s.late,
            s.lost,
            opt(s.local.cpu_util_percent),
            opt2(s.local.service_demand_us_per_tran),
            opt(s.remote.cpu_util_percent),
            opt2(s.remote.service_demand_us_per_tran),
        );
    }
    o.push_str("</tbody></table>\n");
    let failed: Vec<String> = c
        .steps
        .iter()
        .filter_map(|s| s.error.as_ref().map(|e| format!("step {}: {e}", s.index)))
        .collect();
    if !failed.is_empty() {
        o.push_str("<ul class=\"warnings\">");
        for w in &failed {
            let _ = write!(o, "<li>{}</li>", escape(w));
        }
        o.push_str("</ul>\n");
    }
    o.push_str("</body></html>\n");
    o
}

fn opt2(v: Option<f64>) -> String {
    v.map_or("n/a".into(), |v| format!("{v:.2}"))
}

/// Where and by what the figures were made, as results.json holds it: a
/// page printed or mailed alone must still say which version, command,
/// kernel, date and hosts it describes.
fn provenance(o: &mut String, r: &AggResult) {
    o.push_str("<table class=\"provenance\"><tbody>\n");
    let row = |o: &mut String, k: &str, v: &str| {
        let _ = writeln!(o, "<tr><th>{}</th><td>{}</td></tr>", escape(k), escape(v));
    };
    if let Some(start) = r.tests.iter().map(|t| t.start).reduce(f64::min) {
        row(o, "date", &crate::units::fmt_local_time(start, true));
    }
    row(o, "hosts", &r.spec.hosts.join(", "));
    if let Some(map) = r.provenance.as_object() {
        for (k, v) in map {
            if let Some(text) = provenance_text(v) {
                row(o, &k.replace('_', " "), &text);
            }
        }
    }
    o.push_str("</tbody></table>\n");
}

/// One provenance value as a cell; None for what says nothing (null, an
/// empty list or string: a driver list that no end reported left empty
/// "local drivers" rows on an overloaded host's page, issue 29).
fn provenance_text(v: &serde_json::Value) -> Option<String> {
    let text = match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(a) => a
            .iter()
            .map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_string))
            .collect::<Vec<_>>()
            .join(" "),
        serde_json::Value::Null => return None,
        other => other.to_string(),
    };
    (!text.trim().is_empty()).then_some(text)
}

/// The page, given each test's overall chart (same order as `r.tests`).
pub fn report(r: &AggResult, svgs: &[String]) -> String {
    let title = r.spec.title.as_deref().map_or_else(
        || "thrum agg report".to_string(),
        |t| format!("{} (thrum agg report)", escape(t)),
    );
    let mut o = head(&title);
    if let Some(a) = &r.spec.annotation {
        let _ = writeln!(o, "<p class=\"annotation\">{}</p>", escape(a));
    }
    let _ = writeln!(
        o,
        "<p>Source: {}. Hosts: {}. Step {} s, interval {} s, trimmed {} s at each end of a step.</p>",
        escape(&r.source),
        escape(&r.spec.hosts.join(", ")),
        r.spec.step_s,
        r.spec.interval_s,
        r.spec.trim_s
    );
    provenance(&mut o, r);
    for (t, svg) in r.tests.iter().zip(svgs) {
        test_section(&mut o, t, svg);
    }
    o.push_str("</body></html>\n");
    o
}

/// The page of one test that is not a mix (`thrum report` of a saved `run
/// --json`): the summary as the terminal shows it, the chart when the test
/// has one (capacity's histogram), every interval's figure of merit and
/// latency, and the warnings. A mix has its own page, `lul::html`.
pub fn result_report(r: &crate::result::TestResult, chart: Option<&str>) -> String {
    use crate::export::human::Human;
    let title = format!("thrum {} to {}", r.test.name(), escape(&r.spec.server));
    let mut o = head(&title);
    let human = crate::export::render(&Human::default(), r);
    let _ = writeln!(o, "<pre>{}</pre>", escape(&String::from_utf8_lossy(&human)));
    if let Some(svg) = chart {
        o.push_str(inline(svg));
        o.push('\n');
    }
    let (_, unit) = r.headline();
    let _ = writeln!(
        o,
        "<h2>Intervals</h2>\n<table class=\"intervals\">\n<tr><th>interval</th><th>phase</th><th>from (s)</th><th>to (s)</th><th>{unit}</th><th>p50</th><th>p99</th></tr>"
    );
    for iv in &r.intervals {
        let lat = |f: fn(&crate::stats::latency::LatencySummary) -> u64| {
            iv.latency_ns
                .as_ref()
                .map_or("-".into(), |l| fmt_ns(f(l) as f64))
        };
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{:.2}</td><td>{:.2}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            iv.index,
            iv.phase.name(),
            iv.start_s,
            iv.end_s,
            opt(iv.headline()),
            lat(|l| l.p50),
            lat(|l| l.p99)
        );
    }
    o.push_str("</table>\n");
    if !r.summary.warnings.0.is_empty() {
        o.push_str("<h2>Warnings</h2>\n<ul class=\"warnings\">\n");
        for w in &r.summary.warnings.0 {
            let _ = writeln!(o, "<li>{}</li>", escape(&w.message));
        }
        o.push_str("</ul>\n");
    }
    o.push_str("</body></html>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup() {
        assert_eq!(escape("<a & \"b\">"), "&lt;a &amp; &quot;b&quot;&gt;");
        assert_eq!(inline("<?xml version=\"1.0\"?>\n<svg/>"), "<svg/>");
    }

    #[test]
    fn provenance_rows_that_say_nothing_are_left_out() {
        use serde_json::json;
        assert_eq!(provenance_text(&json!([])), None);
        assert_eq!(provenance_text(&json!("")), None);
        assert_eq!(provenance_text(&json!(null)), None);
        assert_eq!(
            provenance_text(&json!(["epoll", "uring"])).as_deref(),
            Some("epoll uring")
        );
        assert_eq!(provenance_text(&json!(4)).as_deref(), Some("4"));
    }
}
