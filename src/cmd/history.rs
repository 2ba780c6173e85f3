//! `thrum history`: the stored runs, newest first, as a table, JSON or
//! CSV, or one figure over time as SVG (`--chart`), or the whole store
//! copied into a new file (`--backup`); and `thrum show ID`, a stored run
//! printed again by `thrum report`'s code.
//!
//! A store may have been written by an older thrum or by hand, so nothing
//! read from it is trusted to be short or printable: every cell of the
//! table and of `show`'s heading is escaped and cut ([`cell`]), and the
//! table pads by counting rather than through `format!`'s width, which
//! panics past 65,535.

use std::process::ExitCode;

use anyhow::{Context, Result, bail};

use crate::cli::store::HistoryRequest;
use crate::cli::{HistoryArgs, ShowArgs};
use crate::export::draw::history::Point;
use crate::stats::latency::LatencyHistogram;
use crate::store::headline::ChartField;
use crate::store::{Row, Store};
use crate::units::Fixed;

/// `thrum history`.
pub fn history(args: &HistoryArgs) -> Result<ExitCode> {
    let req: HistoryRequest = args.to_request()?;
    let store = Store::open_existing(&req.db).map_err(anyhow::Error::msg)?;
    if let Some(to) = &req.backup {
        store.backup(to).map_err(anyhow::Error::msg)?;
        eprintln!("{} copied into {}", req.db.display(), to.display());
        return Ok(ExitCode::SUCCESS);
    }
    let rows = store.list(&req.filter).map_err(anyhow::Error::msg)?;
    // Which store was read: the default one may not be the one meant.
    eprintln!(
        "{} run{} from {}{}",
        rows.len(),
        if rows.len() == 1 { "" } else { "s" },
        req.db.display(),
        match (
            req.named,
            std::env::var_os("THRUM_DB").is_some_and(|v| !v.is_empty())
        ) {
            (true, _) => "",
            (false, true) => " ($THRUM_DB)",
            (false, false) => " (the default store)",
        }
    );
    if let Some((field, out)) = &req.chart {
        return chart(&store, &rows, field, out);
    }
    if req.json {
        super::out::print(&format!("{}\n", serde_json::to_string_pretty(&rows)?))?;
    } else if req.csv {
        super::out::print(&csv(&rows))?;
    } else {
        super::out::print(&table(&rows))?;
    }
    Ok(ExitCode::SUCCESS)
}

const CSV_HEAD: &str = "id,time,time_unix_s,command,test,target,name,labels,ok,throughput_bps,transactions_per_s,latency_p50_ns,latency_p99_ns,loss_percent,local_cpu_percent,remote_cpu_percent,local_service_demand,remote_service_demand,service_demand_unit,settings,figures\n";

/// Every figure of a row as `name=value` joined by `;` (a figure's name
/// may hold `,`: a sweep cell's parameters), for the CSV.
fn figures_text(r: &Row) -> String {
    r.figures
        .iter()
        .map(|(k, f)| format!("{k}={}", f.value))
        .collect::<Vec<_>>()
        .join(";")
}

fn labels_text(r: &Row) -> String {
    r.labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The most characters of one stored value (a label's key or value, a
/// name, a target) a table cell or heading shows; the rest is said as
/// `…(+N chars)`. `--json` and `--csv` carry values whole.
const CELL_CHARS: usize = crate::text::ECHO_CHARS;

/// A stored value as a table shows it: control characters escaped, cut to
/// [`CELL_CHARS`].
fn cell(s: &str) -> String {
    crate::text::escape(s, CELL_CHARS)
}

/// The labels as a table shows them: `k=v,k=v`, each key and value a [`cell`].
fn labels_cell(r: &Row) -> String {
    r.labels
        .iter()
        .map(|(k, v)| format!("{}={}", cell(k), cell(v)))
        .collect::<Vec<_>>()
        .join(",")
}

fn csv(rows: &[Row]) -> String {
    let f = |v: Option<f64>| v.map_or(String::new(), |x| x.to_string());
    let q = crate::text::csv_field;
    let mut s = String::from(CSV_HEAD);
    for r in rows {
        let h = &r.headline;
        s.push_str(&format!(
            "{},{},{:.3},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
            r.id,
            r.time,
            r.time_unix_s,
            q(&r.command),
            q(&r.test),
            q(&r.target),
            q(r.name.as_deref().unwrap_or_default()),
            q(&labels_text(r)),
            r.ok,
            f(h.throughput_bps),
            f(h.transactions_per_s),
            f(h.latency_p50_ns),
            f(h.latency_p99_ns),
            f(h.loss_percent),
            f(h.local_cpu_percent),
            f(h.remote_cpu_percent),
            f(h.local_service_demand),
            f(h.remote_service_demand),
            q(h.service_demand_unit.as_deref().unwrap_or_default()),
            q(&r.settings),
            q(&figures_text(r)),
        ));
    }
    s
}

/// The figure a row is known by in the table: throughput, else
/// transactions/s, else latency, else loss; for the kinds with none of
/// those (a mix, curve, agg, sweep), their headline figures.
fn figure(r: &Row) -> String {
    let h = &r.headline;
    let columns = [
        h.throughput_bps,
        h.transactions_per_s,
        h.latency_p50_ns,
        h.loss_percent,
    ];
    if columns.iter().all(Option::is_none) || r.command != "run" && r.command != "ping" {
        let head: Vec<String> = r
            .figures
            .iter()
            .filter(|(_, f)| f.role == crate::store::figures::Role::Headline)
            .map(|(k, f)| {
                format!(
                    "{} {}",
                    cell(k),
                    crate::store::figures::format(&f.unit, f.value)
                )
            })
            .collect();
        return match head.len() {
            0 => "-".into(),
            1..=3 => head.join(", "),
            n => format!("{}, … ({} more)", head[..3].join(", "), n - 3),
        };
    }
    if let Some(t) = h.throughput_bps {
        return crate::units::BitsPerSec(t).to_string();
    }
    if let Some(t) = h.transactions_per_s {
        let lat = h
            .latency_p50_ns
            .map(|p| format!(", p50 {}", crate::units::fmt_ns(p)))
            .unwrap_or_default();
        return format!("{} trans/s{lat}", crate::units::fmt_si(t));
    }
    match (h.latency_p50_ns, h.loss_percent) {
        (Some(p), l) => format!(
            "p50 {}{}",
            crate::units::fmt_ns(p),
            l.map(|l| format!(", {} % lost", Fixed(l, 1)))
                .unwrap_or_default()
        ),
        (None, Some(l)) => format!("{} % lost", Fixed(l, 1)),
        (None, None) => "-".into(),
    }
}

fn table(rows: &[Row]) -> String {
    if rows.is_empty() {
        return "no stored run matches\n".into();
    }
    let mut cells = vec![[
        "id".to_string(),
        "time".into(),
        "test".into(),
        "target".into(),
        "figure".into(),
        "labels".into(),
        "name".into(),
    ]];
    for r in rows {
        let time = crate::units::fmt_local_time(r.time_unix_s, true);
        cells.push([
            cell(&r.id),
            time.split('.').next().unwrap_or_default().to_string(),
            if r.command == "run" || r.command == "ping" {
                cell(&r.test)
            } else {
                format!("{} {}", cell(&r.command), cell(&r.test))
            },
            cell(&r.target),
            if r.ok { figure(r) } else { "failed".into() },
            labels_cell(r),
            cell(r.name.as_deref().unwrap_or_default()),
        ]);
    }
    let w: Vec<usize> = (0..7)
        .map(|i| {
            cells
                .iter()
                .map(|c| c[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut s = String::new();
    for c in cells {
        let mut line = String::new();
        for (i, x) in c.iter().enumerate() {
            line.push_str(x);
            line.extend(std::iter::repeat_n(' ', w[i] - x.chars().count()));
            line.push_str("  ");
        }
        s.push_str(line.trim_end());
        s.push('\n');
    }
    s
}

/// `--chart FIELD --out F.svg`: the runs listed, oldest first.
fn chart(
    store: &Store,
    rows: &[Row],
    field: &ChartField,
    out: &std::path::Path,
) -> Result<ExitCode> {
    // A figure's unit from the newest run that has it.
    let unit_of = |name: &str| {
        rows.iter()
            .find_map(|r| r.figures.get(name).map(|f| f.unit.clone()))
            .unwrap_or_default()
    };
    let (what, unit) = match field {
        ChartField::Throughput => ("throughput".to_string(), "bit/s".to_string()),
        ChartField::TransactionsPerS => ("transactions/s".into(), "trans/s".into()),
        ChartField::Latency => ("latency".into(), "ns".into()),
        ChartField::Loss => ("loss".into(), "%".into()),
        ChartField::LocalCpu => ("local CPU".into(), "%".into()),
        ChartField::RemoteCpu => ("remote CPU".into(), "%".into()),
        ChartField::Figure(n) => (n.clone(), unit_of(n)),
    };
    let mut points = Vec::new();
    for r in rows.iter().rev().filter(|r| r.ok) {
        let h = &r.headline;
        let v = match field {
            ChartField::Throughput => h.throughput_bps,
            ChartField::TransactionsPerS => h.transactions_per_s,
            ChartField::Latency => h.latency_p50_ns,
            ChartField::Loss => h.loss_percent,
            ChartField::LocalCpu => h.local_cpu_percent,
            ChartField::RemoteCpu => h.remote_cpu_percent,
            ChartField::Figure(n) => r.figures.get(n).map(|f| f.value),
        };
        let Some(value) = v else { continue };
        let mut p = Point {
            time: r.time_unix_s,
            value,
            series: labels_cell(r),
            ..Point::default()
        };
        if *field == ChartField::Latency {
            p.p99 = h.latency_p99_ns;
            // p10 and p90 from the run's histogram, where it has one.
            if let Some((_, doc)) = store.get(&r.id).map_err(anyhow::Error::msg)?
                && let Some(b64) = doc["summary"]["histogram"].as_str()
                && let Ok(hist) = LatencyHistogram::from_base64(b64)
            {
                p.band = Some((hist.quantile(0.10) as f64, hist.quantile(0.90) as f64));
            }
        }
        points.push(p);
    }
    if points.is_empty() {
        let mut names: Vec<&str> = rows
            .iter()
            .flat_map(|r| r.figures.keys().map(String::as_str))
            .collect();
        names.sort_unstable();
        names.dedup();
        names.truncate(40);
        bail!(
            "--chart {}: no stored run of those listed has it (accepted: throughput, transactions_per_s, latency, loss, local_cpu, remote_cpu{}{})",
            crate::text::echo(&what),
            if names.is_empty() {
                ""
            } else {
                ", or one of the listed runs' figures: "
            },
            crate::text::echo(&names.join(", "))
        );
    }
    let svg = crate::export::draw::history::svg(&what, &unit, &points);
    crate::export::write_atomic(out, svg.as_bytes())
        .with_context(|| format!("writing --out {}", out.display()))?;
    eprintln!("{} runs drawn in {}", points.len(), out.display());
    Ok(ExitCode::SUCCESS)
}

/// `thrum show ID`.
pub fn show(args: &ShowArgs) -> Result<ExitCode> {
    let req = args.to_request()?;
    let store = Store::open_existing(&req.db).map_err(anyhow::Error::msg)?;
    let Some((row, doc)) = store.get(&req.id).map_err(anyhow::Error::msg)? else {
        bail!(
            "no run '{}' in {} (thrum history lists them)",
            crate::text::echo(&req.id),
            req.db.display()
        );
    };
    if !req.output.json {
        let labels = labels_cell(&row);
        eprintln!(
            "run {} of {}: thrum {} {} against {}{}",
            cell(&row.id),
            crate::units::fmt_local_time(row.time_unix_s, true),
            cell(&row.command),
            cell(&row.test),
            cell(&row.target),
            if labels.is_empty() {
                String::new()
            } else {
                format!(" ({labels})")
            }
        );
    }
    super::report::report_document(doc, &req.output)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Headline, Labels};

    fn row(name: &str, label: &str) -> Row {
        let mut labels = Labels::new();
        labels.insert("k".into(), label.into());
        Row {
            id: "0aa1ef4c".into(),
            time: "2026-11-27T19:24:46Z".into(),
            time_unix_s: 1_795_807_486.0,
            command: "run".into(),
            test: "tcp_rr".into(),
            target: "embedded".into(),
            name: Some(name.into()),
            labels,
            schema: "thrum.result.v1".into(),
            ok: true,
            headline: Headline {
                transactions_per_s: Some(36_300.0),
                ..Headline::default()
            },
            settings: "0123456789abcdef".into(),
            figures: Default::default(),
        }
    }

    #[test]
    fn any_stored_value_lists_on_one_line_each_without_an_escape() {
        // Past 65,535 characters, `format!`'s width panicked.
        let rows = [
            row("plain", &"x".repeat(120_000)),
            row("n\u{1b}[32mGREEN\nforged  row", "v\u{1b}[31mRED\r\u{9b}"),
        ];
        let t = table(&rows);
        assert_eq!(t.lines().count(), 3, "{t}");
        assert!(!t.chars().any(|c| c.is_control() && c != '\n'), "{t:?}");
        assert!(t.contains("…(+119936 chars)"), "{t}");
        assert!(t.contains("n\\u{1b}[32mGREEN\\nforged  row"), "{t}");
        assert!(t.lines().all(|l| l.chars().count() < 400), "{t}");
        // CSV keeps values whole, escaped.
        let c = csv(&rows);
        assert!(c.contains(&"x".repeat(120_000)));
        assert!(!c.chars().any(|c| c.is_control() && c != '\n'));
        assert_eq!(c.lines().count(), 3);
    }
}
