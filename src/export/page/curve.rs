//! The page of a latency-vs-throughput curve (`thrum curve`, `thrum
//! report` of its results.json): the run, the knee and the saturation
//! point, the chart and the table of open-loop steps.

use std::fmt::Write;

use super::{head, inline, opt};
use crate::curve::Curve;
use crate::text::escape_markup as escape;
use crate::units::fmt_ns;

/// The page of a latency-vs-throughput curve, given its chart.
pub fn report(c: &Curve, svg: &str) -> String {
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
