//! `thrum sweep`'s grid as text: the terminal tables (2-D tables of one
//! dimension by another, one table per value of the rest, each cell the
//! figures `--cell` asks for, notes under a table saying whose rate is not
//! a packet rate, which fell short of its confidence and which Ctrl-C
//! cut) and the long
//! CSV (one row per cell, one column per dimension, then the figures). The
//! record is `crate::sweep`'s; the curve's table and CSV are beside this
//! file (`curve`).

use serde_json::Value;

use crate::sweep::{Cell, CellLatency, Sweep};
use crate::text::csv_field;

/// The note's words for a cell whose transactions/s is not a packet rate
/// (the packets per transaction measured follow them).
pub const NOT_A_PACKET_RATE: &str = "transactions/s, not a packet rate";

/// What a table cell can show (`--cell`).
pub const FIGURES: &[(&str, &str)] = &[
    (
        "tps",
        "the figure of merit: transactions/s (Mbit/s with an M for stream tests)",
    ),
    ("p50", "median latency, µs"),
    ("p99", "99th percentile latency, µs"),
    ("mean", "mean latency, µs"),
    ("cpu", "CPU utilisation %, local/remote"),
    ("lcpu", "local CPU utilisation %"),
    ("rcpu", "remote CPU utilisation %"),
    ("sd", "service demand (µs/Tr or µs/KB), local/remote"),
    ("lsd", "local service demand"),
    ("rsd", "remote service demand"),
    ("ppt", "packets per transaction, sent/received"),
    ("ci", "confidence interval's width, % of the mean"),
];

/// A value as a heading shows it.
fn label(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.digits$}"))
}

/// A cell's measured rate: transactions/s, or Mbit/s with an M.
fn rate(c: &Cell) -> String {
    match (c.transactions_per_s, c.throughput_bps) {
        (Some(t), _) => format!("{t:.0}"),
        (None, Some(b)) => format!("{:.2}M", b / 1e6),
        _ => "-".into(),
    }
}

/// One figure of a cell as the table shows it.
fn figure(c: Option<&Cell>, fig: &str) -> String {
    let Some(c) = c else {
        return "-".into();
    };
    if c.interrupted {
        return if fig == "tps" {
            "cut".into()
        } else {
            "-".into()
        };
    }
    if c.error.is_some() {
        return if fig == "tps" {
            "error".into()
        } else {
            "-".into()
        };
    }
    let us = |f: fn(&CellLatency) -> f64| {
        c.latency_ns
            .as_ref()
            .map_or("-".into(), |l| format!("{:.1}", f(l) / 1e3))
    };
    let pair = |a: Option<f64>, b: Option<f64>, digits: usize| match (a, b) {
        (None, None) => "-".to_string(),
        _ => format!("{}/{}", opt(a, digits), opt(b, digits)),
    };
    match fig {
        // A rate that is not a packet rate is still the transactions/s
        // measured: printed plainly (a mark beside it read as "no
        // figure"), and its note says why it is no packet rate.
        "tps" => rate(c),
        "p50" => us(|l| l.p50 as f64),
        "p99" => us(|l| l.p99 as f64),
        "mean" => us(|l| l.mean),
        "cpu" => pair(c.local_cpu_util_percent, c.remote_cpu_util_percent, 0),
        "lcpu" => opt(c.local_cpu_util_percent, 1),
        "rcpu" => opt(c.remote_cpu_util_percent, 1),
        "sd" => pair(c.local_service_demand, c.remote_service_demand, 2),
        "lsd" => opt(c.local_service_demand, 2),
        "rsd" => opt(c.remote_service_demand, 2),
        "ppt" => c
            .packets_per_transaction
            .map_or("-".into(), |(t, r)| format!("{t:.2}/{r:.2}")),
        "ci" => c
            .confidence
            .as_ref()
            .map_or("-".into(), |k| opt(k.width_percent, 1)),
        _ => "?".into(),
    }
}

/// A figure's column heading.
fn heading(sw: &Sweep, fig: &str) -> &'static str {
    let stream = sw.cells.iter().any(|c| c.throughput_bps.is_some());
    match fig {
        "tps" if stream => "Mbit/s",
        "tps" => "trans/s",
        "p50" => "p50 us",
        "p99" => "p99 us",
        "mean" => "mean us",
        "cpu" => "CPU % l/r",
        "lcpu" => "l CPU %",
        "rcpu" => "r CPU %",
        "sd" if stream => "SD us/KB l/r",
        "sd" => "SD us/Tr l/r",
        "lsd" => "l SD",
        "rsd" => "r SD",
        "ppt" => "pkt/tr",
        "ci" => "CI %",
        _ => "?",
    }
}

/// The tables' rows, columns and figures: as asked, else burst by
/// flows (or the first two dimensions) and the figure of merit.
pub fn view(sw: &Sweep) -> (String, String, Vec<String>) {
    let dims = sw.dims();
    let name =
        |i: usize, fallback: &str| dims.get(i).map_or(fallback.to_string(), |d| d.name.clone());
    let has = |n: &str| dims.iter().any(|d| d.name == n);
    let rows = sw.rows.clone().unwrap_or_else(|| {
        if has("burst") {
            "burst".into()
        } else {
            name(0, "burst")
        }
    });
    let cols = sw.cols.clone().unwrap_or_else(|| {
        if has("flows") && rows != "flows" {
            "flows".into()
        } else {
            dims.iter()
                .find(|d| d.name != rows)
                .map_or("flows".into(), |d| d.name.clone())
        }
    });
    let figs = if sw.cell_figures.is_empty() {
        vec!["tps".to_string()]
    } else {
        sw.cell_figures.clone()
    };
    (rows, cols, figs)
}

/// One 2-D table of the grid: the other dimensions fixed at one value
/// each, the `rows` dimension down and the `cols` one across.
pub struct Table<'a> {
    /// The test, the server and where the other dimensions stand
    /// (`tcp_rr to lg, request 1 B, response 1 B, cpu-pin 0:0`).
    pub title: String,
    /// The dimensions down and across, by name.
    pub rows: String,
    pub cols: String,
    /// Their values, as the headings show them.
    pub row_values: Vec<String>,
    pub col_values: Vec<String>,
    /// The cells, `[row][column]`; none where the grid has no such cell.
    pub cells: Vec<Vec<Option<&'a Cell>>>,
}

impl Table<'_> {
    /// Column `k`'s heading: `2 flows`, or the dimension and its value.
    pub fn col_heading(&self, k: usize) -> String {
        if self.cols == "flows" {
            format!("{} flows", self.col_values[k])
        } else {
            format!("{} {}", self.cols, self.col_values[k])
        }
    }

    /// Where cell `(r, k)` stands, as its note names it.
    pub fn place(&self, r: usize, k: usize) -> String {
        format!(
            "{} {}, {} {}",
            self.rows, self.row_values[r], self.cols, self.col_values[k]
        )
    }
}

/// The grid's 2-D tables: `rows` by `cols` (as [`view`] picks them), one
/// per value of the other dimensions. Cells are found by their place in
/// the grid (the last dimension varies fastest), so a value listed twice
/// is two cells.
pub fn tables(sw: &Sweep) -> Vec<Table<'_>> {
    let (rows, cols, _) = view(sw);
    let dims = sw.dims();
    let pos = |n: &str| dims.iter().position(|d| d.name == n);
    let (ri, ci) = (pos(&rows), pos(&cols));
    let len = |i: Option<usize>| i.map_or(1, |i| dims[i].values.len());
    let others: Vec<usize> = (0..dims.len())
        .filter(|&i| Some(i) != ri && Some(i) != ci)
        .collect();
    let radices: Vec<usize> = others.iter().map(|&i| dims[i].values.len()).collect();
    let cell_at = |at: &[usize]| {
        let mut k = 0;
        for (d, &v) in dims.iter().zip(at) {
            k = k * d.values.len() + v;
        }
        sw.cells.get(k)
    };
    let values = |i: Option<usize>| -> Vec<String> {
        i.map_or(vec![String::new()], |i| {
            dims[i].values.iter().map(label).collect()
        })
    };
    let mut out = Vec::new();
    for combo in indices(&radices) {
        // Where every dimension stands: the others fixed here, rows
        // and columns filled in below.
        let mut at = vec![0usize; dims.len()];
        for (&d, &v) in others.iter().zip(&combo) {
            at[d] = v;
        }
        let mut title = format!("{} to {}", sw.test, sw.server);
        if let Some(c) = cell_at(&at) {
            title.push_str(&format!(
                ", request {} B, response {} B",
                c.request_bytes, c.response_bytes
            ));
        }
        for &d in &others {
            title.push_str(&format!(
                ", {} {}",
                dims[d].name,
                label(&dims[d].values[at[d]])
            ));
        }
        let cells = (0..len(ri))
            .map(|r| {
                (0..len(ci))
                    .map(|k| {
                        if let Some(i) = ri {
                            at[i] = r;
                        }
                        if let Some(i) = ci {
                            at[i] = k;
                        }
                        cell_at(&at)
                    })
                    .collect()
            })
            .collect();
        out.push(Table {
            title,
            rows: rows.clone(),
            cols: cols.clone(),
            row_values: values(ri),
            col_values: values(ci),
            cells,
        });
    }
    out
}

/// A cell's figures as a table shows them, the first with the number of
/// its note (which goes to `notes`, `here` naming the cell) where it has
/// one: `5000 [1]` (not a packet rate), `100* [2]` (short of its
/// confidence), `cut [3]`.
pub fn cell_texts(
    c: Option<&Cell>,
    figs: &[String],
    here: &str,
    notes: &mut Vec<String>,
) -> Vec<String> {
    figs.iter()
        .enumerate()
        .map(|(i, fig)| {
            let shown = figure(c, fig);
            let Some(n) = (i == 0).then(|| note(c)).flatten() else {
                return shown;
            };
            notes.push(format!("{here}: {n}"));
            match c {
                Some(c) if c.interrupted => format!("cut [{}]", notes.len()),
                Some(c) if c.why_na().is_some() => format!("{shown} [{}]", notes.len()),
                _ => format!("{shown}* [{}]", notes.len()),
            }
        })
        .collect()
}

/// The figures' column headings (`trans/s`, `p50 us`, ...).
pub fn headings(sw: &Sweep, figs: &[String]) -> Vec<&'static str> {
    figs.iter().map(|f| heading(sw, f)).collect()
}

/// The grid as text: one table of `rows` by `cols` per value of the
/// other dimensions ([`tables`]), each cell the figures asked for; notes
/// under a table say whose rate is not a packet rate, which did not reach
/// its confidence and which Ctrl-C cut.
pub fn table(sw: &Sweep) -> String {
    let (rows, cols, figs) = view(sw);
    let what = headings(sw, &figs);
    let w = 14;
    let mut s = String::new();
    for t in tables(sw) {
        s.push_str(&format!(
            "{}: rows {rows}, columns {cols}; {}\n",
            t.title,
            what.join(", ")
        ));
        s.push_str(&format!("{rows:>10}"));
        for k in 0..t.col_values.len() {
            s.push_str(&format!(" {:>w$}", t.col_heading(k)));
            for _ in 1..figs.len() {
                s.push_str(&format!(" {:>w$}", ""));
            }
        }
        s.push('\n');
        if figs.len() > 1 {
            s.push_str(&format!("{:>10}", ""));
            for _ in 0..t.col_values.len() {
                for h in &what {
                    s.push_str(&format!(" {h:>w$}"));
                }
            }
            s.push('\n');
        }
        let mut notes = Vec::new();
        for (r, row) in t.cells.iter().enumerate() {
            s.push_str(&format!("{:>10}", t.row_values[r]));
            for (k, c) in row.iter().enumerate() {
                for shown in cell_texts(*c, &figs, &t.place(r, k), &mut notes) {
                    s.push_str(&format!(" {shown:>w$}"));
                }
            }
            s.push('\n');
        }
        for (i, n) in notes.iter().enumerate() {
            s.push_str(&format!("  [{}] {n}\n", i + 1));
        }
    }
    s.lines().map(|l| format!("{}\n", l.trim_end())).collect()
}

/// What a note under the table says of a cell: why its rate is not a
/// packet rate, that Ctrl-C cut it, or that it fell short of its
/// confidence.
fn note(c: Option<&Cell>) -> Option<String> {
    let c = c?;
    if let Some(why) = c.why_na() {
        return Some(format!("{NOT_A_PACKET_RATE}: {why}"));
    }
    if c.interrupted {
        return Some(
            "cut: Ctrl-C stopped the sweep while this cell ran; its figures are not a whole window"
                .into(),
        );
    }
    let k = c.confidence.as_ref().filter(|k| !k.achieved)?;
    c.error.is_none().then(|| {
        format!(
            "confidence not reached: after {} iteration(s) the {} % interval is {} wide, {} % was asked for",
            k.iterations,
            k.level,
            k.width_percent
                .map_or("undefined".into(), |w| format!("{w:.1} %")),
            k.width_percent_requested
        )
    })
}

/// The grid as long CSV: one row per cell, one column per dimension,
/// then the figures. `valid` is `true`, `false` (packets and
/// transactions parted: a note in the table), `error` (the run failed; no
/// rate) or `cut` (Ctrl-C stopped it).
pub fn csv(sw: &Sweep) -> String {
    let dims = sw.dims();
    let mut s = String::new();
    let mut head: Vec<String> = dims.iter().map(|d| csv_field(&d.name)).collect();
    head.extend(
        [
            "request_bytes",
            "response_bytes",
            "transactions_per_s",
            "throughput_bps",
            "latency_p50_ns",
            "latency_p99_ns",
            "latency_mean_ns",
            "local_cpu_util_percent",
            "remote_cpu_util_percent",
            "local_service_demand",
            "remote_service_demand",
            "tx_packets_per_transaction",
            "rx_packets_per_transaction",
            "valid",
            "confidence_achieved",
            "confidence_width_percent",
            "iterations",
            "error",
        ]
        .map(String::from),
    );
    s.push_str(&head.join(","));
    s.push('\n');
    let f = |v: Option<f64>| v.map_or(String::new(), |v| v.to_string());
    for c in &sw.cells {
        let mut row: Vec<String> = dims
            .iter()
            .map(|d| csv_field(&c.param(&d.name).map_or(String::new(), |v| label(&v))))
            .collect();
        let valid = if c.interrupted {
            "cut".to_string()
        } else if c.error.is_some() {
            "error".to_string()
        } else {
            c.valid.to_string()
        };
        let l = c.latency_ns.as_ref();
        let k = c.confidence.as_ref();
        row.extend([
            c.request_bytes.to_string(),
            c.response_bytes.to_string(),
            f(c.transactions_per_s),
            f(c.throughput_bps),
            l.map_or(String::new(), |l| l.p50.to_string()),
            l.map_or(String::new(), |l| l.p99.to_string()),
            f(l.map(|l| l.mean)),
            f(c.local_cpu_util_percent),
            f(c.remote_cpu_util_percent),
            f(c.local_service_demand),
            f(c.remote_service_demand),
            f(c.packets_per_transaction.map(|p| p.0)),
            f(c.packets_per_transaction.map(|p| p.1)),
            valid,
            k.map_or(String::new(), |k| k.achieved.to_string()),
            f(k.and_then(|k| k.width_percent)),
            k.map_or(String::new(), |k| k.iterations.to_string()),
            csv_field(c.error.as_deref().unwrap_or("")),
        ]);
        s.push_str(&row.join(","));
        s.push('\n');
    }
    s
}

/// Every combination of indices below `radices`, the last varying fastest
/// (one empty combination for none).
fn indices(radices: &[usize]) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = vec![Vec::new()];
    for &n in radices {
        out = out
            .into_iter()
            .flat_map(|c| {
                (0..n).map(move |v| {
                    let mut c = c.clone();
                    c.push(v);
                    c
                })
            })
            .collect();
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::sweep::{CellConfidence, Dim, SCHEMA};

    #[test]
    fn matrix_text_and_csv() {
        let cell = |burst, flows, t: Option<f64>, valid| Cell {
            request_bytes: 1,
            response_bytes: 1,
            burst,
            flows,
            transactions_per_s: t,
            throughput_bps: None,
            tx_packets_per_s: None,
            rx_packets_per_s: None,
            valid,
            error: None,
            packets_per_transaction: (!valid).then_some((0.25, 0.25)),
            local_cpu_util_percent: Some(50.0),
            remote_cpu_util_percent: Some(48.0),
            local_service_demand: Some(10.0),
            remote_service_demand: None,
            params: BTreeMap::new(),
            latency_ns: Some(CellLatency {
                p50: 45_000,
                p99: 90_000,
                mean: 50_000.0,
            }),
            confidence: None,
            interrupted: false,
            nic: BTreeMap::new(),
        };
        let s = Sweep {
            schema: "thrum.sweep.v1".into(),
            test: "tcp_rr".into(),
            server: "lg".into(),
            rr_sizes: vec![(1, 1)],
            bursts: vec![0, 4],
            flows: vec![1, 2],
            cells: vec![
                cell(0, 1, Some(1000.4), true),
                cell(0, 2, Some(2000.0), true),
                cell(4, 1, Some(5000.0), false),
                cell(4, 2, Some(9000.0), true),
            ],
            dims: Vec::new(),
            rows: None,
            cols: None,
            cell_figures: vec!["tps".into(), "cpu".into(), "sd".into()],
            hosts: Vec::new(),
            interrupted: false,
        };
        let csv = csv(&s);
        let rows: Vec<&str> = csv.lines().collect();
        assert!(rows[0].starts_with("burst,flows,request_bytes,"), "{csv}");
        assert!(rows[0].contains(",latency_p50_ns,latency_p99_ns,"), "{csv}");
        assert_eq!(rows.len(), 5, "{csv}");
        assert!(rows[3].starts_with("4,1,1,1,5000,,45000,90000,"), "{csv}");
        assert!(rows[3].contains(",0.25,0.25,false,"), "{csv}");
        let table = table(&s);
        assert!(
            table
                .contains("         4       5000 [1]          50/48        10.00/-           9000"),
            "{table}"
        );
        assert!(
            table.contains(
                "[1] burst 4, flows 1: transactions/s, not a packet rate: 0.25 packets per transaction sent, 0.25 received"
            ),
            "{table}"
        );
    }

    /// A cell short of its confidence carries a star and a note; the cell
    /// Ctrl-C cut shows "cut"; --rows/--cols pick any dimensions.
    #[test]
    fn marks_and_any_dimensions() {
        let mut c = Cell {
            request_bytes: 1,
            response_bytes: 1,
            burst: 0,
            flows: 1,
            transactions_per_s: Some(100.0),
            throughput_bps: None,
            tx_packets_per_s: None,
            rx_packets_per_s: None,
            valid: true,
            error: None,
            packets_per_transaction: None,
            local_cpu_util_percent: None,
            remote_cpu_util_percent: None,
            local_service_demand: None,
            remote_service_demand: None,
            params: BTreeMap::new(),
            latency_ns: None,
            confidence: Some(CellConfidence {
                achieved: false,
                width_percent: Some(12.0),
                iterations: 3,
                level: 99,
                width_percent_requested: 5.0,
            }),
            interrupted: false,
            nic: BTreeMap::new(),
        };
        let pin = |v: &str| {
            BTreeMap::from([
                ("burst".to_string(), Value::from(0)),
                ("flows".to_string(), Value::from(1)),
                ("cpu-pin".to_string(), Value::from(v)),
            ])
        };
        c.params = pin("0:0");
        let mut cut = c.clone();
        cut.params = pin("0:1");
        cut.interrupted = true;
        cut.error = Some("interrupted".into());
        let s = Sweep {
            schema: SCHEMA.into(),
            test: "tcp_rr".into(),
            server: "lg".into(),
            rr_sizes: vec![(1, 1)],
            bursts: vec![0],
            flows: vec![1],
            cells: vec![c, cut],
            dims: vec![
                Dim {
                    name: "burst".into(),
                    values: vec![Value::from(0)],
                },
                Dim {
                    name: "flows".into(),
                    values: vec![Value::from(1)],
                },
                Dim {
                    name: "cpu-pin".into(),
                    values: vec![Value::from("0:0"), Value::from("0:1")],
                },
            ],
            rows: Some("cpu-pin".into()),
            cols: Some("burst".into()),
            cell_figures: Vec::new(),
            hosts: Vec::new(),
            interrupted: true,
        };
        let t = table(&s);
        assert!(t.contains("flows 1: rows cpu-pin, columns burst"), "{t}");
        assert!(t.contains("       0:0       100* [1]"), "{t}");
        assert!(
            t.contains("confidence not reached: after 3 iteration(s)"),
            "{t}"
        );
        assert!(t.contains("       0:1        cut [2]"), "{t}");
        let csv = csv(&s);
        assert!(csv.starts_with("burst,flows,cpu-pin,"), "{csv}");
        assert!(csv.contains("\n0,1,0:1,"), "{csv}");
        assert!(csv.contains(",cut,false,12,3,interrupted\n"), "{csv}");
    }
}
