//! The overview (`/`, `/api/overview`): perfSONAR's MaDDash grid over the
//! store. Targets down, tests across (a monitor's probe is a test against
//! a target like any other, told apart by its `probe=NAME` label); in each
//! cell one box per setup (the runs of one command, test, target and set
//! of labels: what `thrum compare` learns run-to-run noise from), showing
//! its newest headline figure, coloured by where it stands against its
//! own normal ([`super::status`]), with a sparkline of its recent runs.
//! A box opens the setup's history; the newest run's id opens that run.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::Serialize;

use super::layout::{self, badge, labels};
use super::listing;
use super::status::{self, Judged, Status};
use crate::export::draw::smoke::sparkline;
use crate::store::{Filter, Labels, Row, Store};
use crate::text::escape_markup as esc;

/// The runs a sparkline shows.
pub const SPARK_RUNS: usize = 30;
/// The setups a cell shows before it says how many more there are.
pub const CELL_SETUPS: usize = 6;
/// The newest runs listed under the grid.
pub const RECENT_RUNS: usize = 15;

/// One setup as the grid shows it (and `/api/overview` gives it).
#[derive(Clone, Debug, Serialize)]
pub struct Cell {
    pub command: String,
    pub test: String,
    pub target: String,
    pub labels: Labels,
    #[serde(flatten)]
    pub judged: Judged,
    /// The newest run's id, time and whether it ended without an error.
    pub newest_id: String,
    pub newest_time: String,
    pub newest_ok: bool,
    /// The headline figure's name and the newest value, shown.
    pub figure: Option<String>,
    pub value: Option<f64>,
    pub shown: String,
    /// The headline figure of the recent runs, oldest first.
    pub recent: Vec<f64>,
    /// Runs of the setup read.
    pub runs: usize,
    #[serde(skip)]
    newest_unix_s: f64,
}

/// Every setup of `rows` (newest first), judged at `now`.
pub fn cells(rows: &[Row], now: f64) -> Vec<Cell> {
    let mut setups: BTreeMap<(&str, &str, &str, &Labels), Vec<&Row>> = BTreeMap::new();
    for r in rows {
        setups
            .entry((&r.target, &r.command, &r.test, &r.labels))
            .or_default()
            .push(r);
    }
    setups
        .into_iter()
        .map(|((target, command, test, labels), runs)| {
            let newest = runs[0];
            let head = status::headline(&newest.headline);
            let name = head.map(|h| h.0);
            let recent: Vec<f64> = runs
                .iter()
                .take(SPARK_RUNS)
                .rev()
                .filter(|r| r.ok)
                .filter_map(|r| {
                    let h = status::headline(&r.headline)?;
                    (Some(h.0) == name).then_some(h.1)
                })
                .collect();
            Cell {
                command: command.to_string(),
                test: test.to_string(),
                target: target.to_string(),
                labels: labels.clone(),
                judged: status::judge(&runs, now),
                newest_id: newest.id.clone(),
                newest_time: newest.time.clone(),
                newest_ok: newest.ok,
                figure: name.map(str::to_string),
                value: head.map(|h| h.1),
                shown: match head {
                    _ if !newest.ok => "failed".into(),
                    Some((_, v, q)) => status::show(v, q),
                    None => "—".into(),
                },
                recent,
                runs: runs.len(),
                newest_unix_s: newest.time_unix_s,
            }
        })
        .collect()
}

/// The error a result document ended with: its summary's, or its first
/// test's or cell's.
fn error_of(doc: &serde_json::Value) -> Option<&str> {
    fn first(list: &serde_json::Value) -> Option<&str> {
        list.as_array()?.iter().find_map(|x| x["error"].as_str())
    }
    doc["summary"]["error"]
        .as_str()
        .or_else(|| first(&doc["tests"]))
        .or_else(|| first(&doc["cells"]))
}

/// Every setup of the newest runs, a failing one's reason read from its
/// newest run (one document each).
fn judged(store: &Store, now: f64) -> Result<(Vec<Row>, Vec<Cell>), String> {
    let rows = store.list(&Filter {
        last: Some(listing::READ_RUNS),
        ..Filter::default()
    })?;
    let mut all = cells(&rows, now);
    for c in all
        .iter_mut()
        .filter(|c| c.judged.status == Status::Failing)
    {
        if let Some((_, doc)) = store.get(&c.newest_id)?
            && let Some(e) = error_of(&doc)
        {
            c.judged.why = format!(
                "the newest run ended with an error: {}",
                crate::text::message(e)
            );
        }
    }
    Ok((rows, all))
}

/// The data of the page, for `/api/overview`.
pub fn data(store: &Store, now: f64) -> Result<Vec<Cell>, String> {
    judged(store, now).map(|(_, c)| c)
}

/// The page.
pub fn page(store: &Store, now: f64) -> Result<(String, usize), String> {
    let (rows, all) = judged(store, now)?;
    let mut o = String::new();
    if rows.is_empty() {
        o.push_str("<h1>Overview</h1><p class=\"notice\">The store holds no run yet. \
Runs saved by <code>thrum run</code>, <code>thrum ping</code> or a <code>thrum monitor</code> writing to this store appear here as they arrive.</p>");
        return Ok((o, 0));
    }
    let targets: Vec<&str> = {
        let mut t: Vec<&str> = all.iter().map(|c| c.target.as_str()).collect();
        t.dedup();
        t
    };
    let mut columns: Vec<String> = all
        .iter()
        .map(|c| listing::column(&c.command, &c.test))
        .collect();
    columns.sort();
    columns.dedup();
    let setups = all.len();
    let _ = write!(
        o,
        "<h1>Overview</h1><p class=\"sub\">{} runs of {setups} setup(s) ({} target(s) × {} test(s)); the newest {}. \
Each box is one setup (a command, test, target and set of labels), its newest figure coloured against its own normal: \
the run-to-run noise <code>thrum compare</code> learns from the runs before it.</p>",
        rows.len(),
        targets.len(),
        columns.len(),
        layout::time(rows[0].time_unix_s)
    );
    o.push_str("<div class=\"legend\">");
    for s in Status::ALL {
        let _ = write!(
            o,
            "<span>{}{}</span>",
            badge(s.name(), s.name()),
            esc(s.meaning())
        );
    }
    o.push_str("</div>\n<div class=\"gridwrap\"><table class=\"grid\"><thead><tr><th></th>");
    for c in &columns {
        let _ = write!(o, "<th class=\"col\">{}</th>", esc(c));
    }
    o.push_str("</tr></thead><tbody>\n");
    for t in &targets {
        let _ = write!(o, "<tr><th class=\"row\">{}</th>", esc(t));
        for col in &columns {
            let mut here: Vec<&Cell> = all
                .iter()
                .filter(|c| c.target == *t)
                .filter(|c| listing::column(&c.command, &c.test) == *col)
                .collect();
            if here.is_empty() {
                o.push_str("<td class=\"empty\"></td>");
                continue;
            }
            // The worst first, then the newest.
            here.sort_by(|a, b| {
                b.judged
                    .status
                    .cmp(&a.judged.status)
                    .then(b.newest_unix_s.total_cmp(&a.newest_unix_s))
            });
            o.push_str("<td class=\"cell\">");
            for c in here.iter().take(CELL_SETUPS) {
                cell(&mut o, c, now);
            }
            if here.len() > CELL_SETUPS {
                let _ = write!(
                    o,
                    "<a class=\"muted\" href=\"{}\">+{} more setups</a>",
                    esc(&listing::history_link(&here[0].test, t, &Labels::new())),
                    here.len() - CELL_SETUPS
                );
            }
            o.push_str("</td>");
        }
        o.push_str("</tr>\n");
    }
    o.push_str("</tbody></table></div>\n<h2>Newest runs</h2>\n");
    listing::runs_table(&mut o, &rows[..rows.len().min(RECENT_RUNS)], false);
    Ok((o, rows.len()))
}

/// One setup's box.
fn cell(o: &mut String, c: &Cell, now: f64) {
    let s = c.judged.status;
    let lab = if c.labels.is_empty() {
        "no labels".to_string()
    } else {
        labels(&c.labels)
    };
    let why = if s == Status::Failing {
        format!("<div class=\"lab\">{}</div>", esc(&c.judged.why))
    } else {
        String::new()
    };
    let runs = match c.runs {
        1 => "1 run".to_string(),
        n => format!("{n} runs"),
    };
    let _ = write!(
        o,
        "<a class=\"setup st-{}\" href=\"{}\" title=\"{}\"><div class=\"meta\"><span>{}</span><span>{}</span></div>\
<div class=\"fig\">{}</div><div class=\"lab\">{lab}</div>{why}{}<div class=\"meta\">\
<span title=\"{}\">{} ago</span><span>{runs}</span></div></a>",
        s.name(),
        esc(&listing::history_link(&c.test, &c.target, &c.labels)),
        esc(&c.judged.why),
        esc(super::status::figure_name(
            c.figure.as_deref().unwrap_or("")
        )),
        s.name(),
        esc(&c.shown),
        sparkline(&c.recent, s.colour()),
        crate::clock::rfc3339(c.newest_unix_s),
        super::status::span((now - c.newest_unix_s).max(0.0)),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, t: f64, label: &str, tps: f64) -> Row {
        let mut r = super::status::tests::tcp_rr_row(id, t, tps, true);
        r.labels.insert("case".into(), label.into());
        r
    }

    #[test]
    fn setups_are_told_apart_by_their_labels() {
        let rows = [
            row("6", 60.0, "b", 30_000.0),
            row("5", 50.0, "a", 50_000.0),
            row("4", 40.0, "b", 30_100.0),
            row("3", 30.0, "a", 50_100.0),
            row("2", 20.0, "b", 29_900.0),
            row("1", 10.0, "a", 49_900.0),
        ];
        let c = cells(&rows, 70.0);
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].labels["case"], "a");
        assert_eq!(c[0].newest_id, "5");
        assert_eq!(c[0].recent, [49_900.0, 50_100.0, 50_000.0]);
        assert_eq!(c[0].judged.status, Status::Normal);
        assert_eq!(c[1].shown, "30 k trans/s");
        let link = listing::history_link("tcp_rr", "embedded", &c[0].labels);
        assert_eq!(link, "/history?test=tcp_rr&target=embedded&label=case%3Da");
    }
}
