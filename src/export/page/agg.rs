//! The aggregate's report.html (`thrum agg`, `thrum report` of a
//! results.json): where and by what the figures were made, then every
//! test's chart inlined and its table of steps.

use std::fmt::Write;

use super::{head, inline, opt};
use crate::agg::model::{AggResult, TestAgg};
use crate::text::escape_markup as escape;

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
/// "local drivers" rows on an overloaded host's page).
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

#[cfg(test)]
mod tests {
    use super::*;

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
