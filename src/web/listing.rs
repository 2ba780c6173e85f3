//! What the pages say of runs alike: the table of runs (the overview's
//! newest, a history's list), the column of the grid a run falls in, and
//! the link to a setup's history.

use std::fmt::Write;

use super::layout::{self, labels};
use super::query;
use super::status;
use crate::export::draw::smoke::Quantity;
use crate::store::{Labels, Row};
use crate::text::escape_markup as esc;

/// The newest runs a page reads to know the store's setups, tests and
/// targets: enough for every setup's normal in all but a store of very
/// many setups, and a bounded read however large the store grows.
pub const READ_RUNS: u32 = 20_000;

/// The column a run of `command` and `test` is in: its test, with the
/// command when that is not `run` or `ping` (`agg tps`, `curve tcp_rr`).
pub fn column(command: &str, test: &str) -> String {
    if command == "run" || command == "ping" {
        test.to_string()
    } else {
        format!("{command} {test}")
    }
}

/// The history page of a setup.
pub fn history_link(test: &str, target: &str, labels: &Labels) -> String {
    let mut pairs = vec![("test", test), ("target", target)];
    let l: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    pairs.extend(l.iter().map(|x| ("label", x.as_str())));
    format!("/history{}", query::query(&pairs))
}

/// A table of `rows`, newest first; with `pick`, a column of A and B
/// choices for the compare form around it.
pub fn runs_table(o: &mut String, rows: &[Row], pick: bool) {
    o.push_str("<table class=\"runs\"><thead><tr>");
    if pick {
        o.push_str("<th>A</th><th>B</th>");
    }
    o.push_str("<th class=\"l\">time</th><th class=\"l\">run</th><th class=\"l\">test</th><th class=\"l\">target</th><th class=\"l\">labels</th><th>figure</th><th>p50</th><th>p99</th><th>loss</th><th class=\"l\">name</th></tr></thead><tbody>\n");
    for (i, r) in rows.iter().enumerate() {
        let h = &r.headline;
        let _ = write!(o, "<tr{}>", if r.ok { "" } else { " class=\"failed\"" });
        if pick {
            let id = esc(&r.id);
            let _ = write!(
                o,
                "<td><input type=\"radio\" name=\"a\" value=\"{id}\"{}></td><td><input type=\"radio\" name=\"b\" value=\"{id}\"{}></td>",
                if i == 1 { " checked" } else { "" },
                if i == 0 { " checked" } else { "" }
            );
        }
        let figure = if !r.ok {
            "failed".to_string()
        } else {
            h.throughput_bps
                .map(|v| status::show(v, Quantity::BitsPerSec))
                .or_else(|| {
                    h.transactions_per_s
                        .map(|v| status::show(v, Quantity::TransPerSec))
                })
                .unwrap_or_else(|| "—".into())
        };
        let ns = |v: Option<f64>| v.map_or("—".into(), crate::units::fmt_ns);
        let _ = writeln!(
            o,
            "<td class=\"l\">{}</td><td class=\"l\"><a href=\"/runs/{}\"><code>{}</code></a></td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"lab\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l\">{}</td></tr>",
            layout::time(r.time_unix_s),
            query::encode(&r.id),
            esc(&r.id),
            esc(&column(&r.command, &r.test)),
            esc(&r.target),
            labels(&r.labels),
            figure,
            ns(h.latency_p50_ns),
            ns(h.latency_p99_ns),
            h.loss_percent.map_or("—".into(), |l| format!("{l:.2} %")),
            esc(&crate::text::escape(r.name.as_deref().unwrap_or(""), 80))
        );
    }
    o.push_str("</tbody></table>\n");
}
