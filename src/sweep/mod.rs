//! `thrum sweep`: one test over every combination of list-valued options,
//! tabulated as classic netperf studies of latency versus throughput do
//! (rows burst, columns flows, transactions/s in each cell).
//!
//! With 1-byte TCP request/response, transactions/s is a packet rate only
//! while each request and each response is its own segment. When the
//! interface's packet counts over the window disagree with the transaction
//! count (TCP coalesced several requests into one segment), the cell is
//! "n/a", as those studies mark it, and a note under the table gives the
//! packets per transaction measured. Each cell carries both ends' CPU
//! utilisation and service demand beside its rate, as those tables do.
//!
//! The grid is the product of its dimensions (`--vary NAME=LIST`; burst
//! and flows always, request/response sizes when `-r` is repeated): each
//! cell names its value of every dimension in `params`, and carries the
//! latency, both ends' CPU and, with `--iterations`, its confidence. The
//! terminal shows 2-D tables of one dimension by another (one table per
//! value of the rest); the CSV is long, one row per cell and one column
//! per dimension.
//!
//! `spread` runs one cell over several load generators and `nic` sets NIC
//! settings as dimensions; the gathering is in `cmd::sweep`.

pub mod nic;
pub mod spread;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::analysis::sides::packets_off_percent;
use crate::plan::{TestKind, TestPlan};
use crate::result::{Summary, TestResult};

/// How far packets/s may stray from transactions/s before a cell is n/a.
pub const PACKET_TOLERANCE: f64 = 0.05;

/// The schema name of `thrum sweep --json`.
pub const SCHEMA: &str = "thrum.sweep.v1";

/// A cell's latency (transaction tests), ns.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CellLatency {
    pub p50: u64,
    pub p99: u64,
    pub mean: f64,
}

/// How sure a cell's figure is (`--iterations`/`--confidence`), as `run`'s
/// `confidence` says it in full.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CellConfidence {
    /// The figure's interval (and CPU's, where measured) is within the width asked for.
    pub achieved: bool,
    /// The figure of merit's interval in % of its mean; null with one iteration.
    pub width_percent: Option<f64>,
    /// Runs of the cell made.
    pub iterations: u32,
    /// 95 or 99.
    pub level: u32,
    /// The width asked for, % of the mean.
    pub width_percent_requested: f64,
}

/// One cell of the matrix.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Cell {
    pub request_bytes: u64,
    pub response_bytes: u64,
    pub burst: u32,
    pub flows: u32,
    pub transactions_per_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throughput_bps: Option<f64>,
    pub tx_packets_per_s: Option<f64>,
    pub rx_packets_per_s: Option<f64>,
    /// False when the packet counts show the transactions were not one packet each way.
    pub valid: bool,
    pub error: Option<String>,
    /// Packets per transaction each way (tx, rx) as the interface counted
    /// them (one each way is a transaction per packet); why a cell is n/a.
    #[serde(default)]
    pub packets_per_transaction: Option<(f64, f64)>,
    /// CPU utilisation (% of all CPUs) of each end over the window.
    #[serde(default)]
    pub local_cpu_util_percent: Option<f64>,
    #[serde(default)]
    pub remote_cpu_util_percent: Option<f64>,
    /// µs of CPU per transaction (per KB for stream tests), each end.
    #[serde(default)]
    pub local_service_demand: Option<f64>,
    #[serde(default)]
    pub remote_service_demand: Option<f64>,
    /// The cell's value of every dimension of the grid, by name (`burst`,
    /// `flows`, `cpu-pin`, ...): a number, or a name (`on`, `epoll`, `0:1`).
    #[serde(default)]
    pub params: BTreeMap<String, Value>,
    /// Transaction latency over the window (merged over the iterations).
    #[serde(default)]
    pub latency_ns: Option<CellLatency>,
    /// With `--iterations`/`--confidence`: how sure the figure is.
    #[serde(default)]
    pub confidence: Option<CellConfidence>,
    /// The cell Ctrl-C cut short: what it measured is not a whole window.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    /// NIC settings the cell ran with, read back from the device after
    /// setting them (`--vary coalesce-…`, `ring-…`), by dimension name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub nic: BTreeMap<String, u32>,
}

impl Cell {
    /// A cell from one run's (or one cell's iterations') result.
    pub fn of(plan: &TestPlan, r: &TestResult, params: BTreeMap<String, Value>) -> Cell {
        let s = &r.summary;
        // With --iterations the rate is the mean over the runs but the
        // packet counts are the last run's: judge packets per transaction
        // against that run's own rate.
        let mut own = s.clone();
        if let Some(it) = r.iterations.last()
            && s.transactions_per_s.is_some()
            && it.error.is_none()
        {
            own.transactions_per_s = Some(it.figure);
        }
        let sd = |side: &crate::result::Side| {
            side.service_demand_us_per_tran
                .or(side.service_demand_us_per_kb)
        };
        Cell {
            request_bytes: plan.request_bytes,
            response_bytes: plan.response_bytes,
            burst: plan.burst,
            flows: plan.flows,
            transactions_per_s: s.transactions_per_s,
            throughput_bps: s.throughput_bps,
            tx_packets_per_s: s.tx_packets_per_s,
            rx_packets_per_s: s.rx_packets_per_s,
            valid: packets_match(plan, &own),
            error: s.error.clone(),
            packets_per_transaction: packets_off_percent(&own)
                .map(|(tx, rx)| (1.0 + tx / 100.0, 1.0 + rx / 100.0)),
            local_cpu_util_percent: s.local.cpu_util_percent,
            remote_cpu_util_percent: s.remote.cpu_util_percent,
            local_service_demand: sd(&s.local),
            remote_service_demand: sd(&s.remote),
            params,
            latency_ns: s.latency_ns.as_ref().map(|l| CellLatency {
                p50: l.p50,
                p99: l.p99,
                mean: l.mean,
            }),
            confidence: r.confidence.as_ref().map(|c| CellConfidence {
                achieved: c.achieved,
                width_percent: c.width_percent_achieved,
                iterations: c.iterations_run,
                level: c.level,
                width_percent_requested: c.width_percent_requested,
            }),
            interrupted: false,
            nic: BTreeMap::new(),
        }
    }

    /// The cell's value of dimension `name`; a document written before
    /// `params` existed still has burst, flows and sizes.
    pub fn param(&self, name: &str) -> Option<Value> {
        if let Some(v) = self.params.get(name) {
            return Some(v.clone());
        }
        Some(match name {
            "burst" => Value::from(self.burst),
            "flows" => Value::from(self.flows),
            "request-size" => Value::from(self.request_bytes),
            "response-size" => Value::from(self.response_bytes),
            "rr-size" => Value::from(format!("{}:{}", self.request_bytes, self.response_bytes)),
            _ => return None,
        })
    }

    /// Why the cell is n/a, in the packets per transaction measured.
    pub fn why_na(&self) -> Option<String> {
        if self.valid || self.error.is_some() {
            return None;
        }
        Some(match self.packets_per_transaction {
            Some((tx, rx)) => format!(
                "{tx:.2} packets per transaction sent, {rx:.2} received (1 each way within {:.0} % makes the rate a packet rate): {}",
                100.0 * PACKET_TOLERANCE,
                if tx.min(rx) < 1.0 {
                    "TCP carried several messages per segment"
                } else {
                    "more packets than messages: acknowledgements on their own, or other traffic on the interface"
                }
            ),
            None => "packets and transactions parted".into(),
        })
    }
}

/// The n/a rule: for 1-byte TCP RR, each direction's packets/s must match
/// transactions/s within [`PACKET_TOLERANCE`] (on `lo`, where a packet is
/// counted leaving and arriving, twice transactions/s). Without packet
/// counts (not measured on this host) the cell stands unchecked.
pub fn packets_match(plan: &TestPlan, s: &Summary) -> bool {
    let one_byte_tcp_rr =
        plan.test == TestKind::TcpRr && plan.request_bytes == 1 && plan.response_bytes == 1;
    if !one_byte_tcp_rr {
        return true;
    }
    packets_off_percent(s).is_none_or(|(tx, rx)| {
        tx.abs() <= 100.0 * PACKET_TOLERANCE && rx.abs() <= 100.0 * PACKET_TOLERANCE
    })
}

/// One dimension of the grid as the document records it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Dim {
    pub name: String,
    pub values: Vec<Value>,
}

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

/// The whole sweep.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Sweep {
    pub schema: String,
    pub test: String,
    pub server: String,
    /// (request, response) bytes: one matrix each.
    pub rr_sizes: Vec<(u64, u64)>,
    pub bursts: Vec<u32>,
    pub flows: Vec<u32>,
    pub cells: Vec<Cell>,
    /// The grid's dimensions, outermost first (the last varies fastest);
    /// every cell's `params` names a value of each.
    #[serde(default)]
    pub dims: Vec<Dim>,
    /// The terminal table's rows and columns (`--rows`, `--cols`) and what
    /// each cell shows (`--cell`); absent: burst by flows, the figure of merit.
    #[serde(default)]
    pub rows: Option<String>,
    #[serde(default)]
    pub cols: Option<String>,
    #[serde(default)]
    pub cell_figures: Vec<String>,
    /// The load generators the flows were spread over (`--hosts`), when more than one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// Ctrl-C stopped the sweep: cells after the cut one did not run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
}

/// A value as a heading shows it.
fn label(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A CSV field: quoted where it must be.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.digits$}"))
}

impl Sweep {
    /// The grid's dimensions; a document written before `dims` existed
    /// had sizes (when several), bursts and flows.
    pub fn dims(&self) -> Vec<Dim> {
        if !self.dims.is_empty() {
            return self.dims.clone();
        }
        let mut d = Vec::new();
        if self.rr_sizes.len() > 1 {
            d.push(Dim {
                name: "rr-size".into(),
                values: self
                    .rr_sizes
                    .iter()
                    .map(|(a, b)| Value::from(format!("{a}:{b}")))
                    .collect(),
            });
        }
        d.push(Dim {
            name: "burst".into(),
            values: self.bursts.iter().map(|&b| Value::from(b)).collect(),
        });
        d.push(Dim {
            name: "flows".into(),
            values: self.flows.iter().map(|&f| Value::from(f)).collect(),
        });
        d
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
            // The rate stands beside the mark, as `thrum run` gives it: the
            // mark says it is not a packet rate.
            "tps" if !c.valid => format!("{} n/a", Self::rate(c)),
            "tps" => Self::rate(c),
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
    fn heading(&self, fig: &str) -> &'static str {
        let stream = self.cells.iter().any(|c| c.throughput_bps.is_some());
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
    pub fn view(&self) -> (String, String, Vec<String>) {
        let dims = self.dims();
        let name =
            |i: usize, fallback: &str| dims.get(i).map_or(fallback.to_string(), |d| d.name.clone());
        let has = |n: &str| dims.iter().any(|d| d.name == n);
        let rows = self.rows.clone().unwrap_or_else(|| {
            if has("burst") {
                "burst".into()
            } else {
                name(0, "burst")
            }
        });
        let cols = self.cols.clone().unwrap_or_else(|| {
            if has("flows") && rows != "flows" {
                "flows".into()
            } else {
                dims.iter()
                    .find(|d| d.name != rows)
                    .map_or("flows".into(), |d| d.name.clone())
            }
        });
        let figs = if self.cell_figures.is_empty() {
            vec!["tps".to_string()]
        } else {
            self.cell_figures.clone()
        };
        (rows, cols, figs)
    }

    /// The grid as text: one table of `rows` by `cols` per value of the
    /// other dimensions, each cell the figures asked for; notes under a
    /// table say why a cell is n/a, which did not reach its confidence and
    /// which Ctrl-C cut. Cells are found by their place in the grid (the
    /// last dimension varies fastest), so a value listed twice is two cells.
    pub fn table(&self) -> String {
        let (rows, cols, figs) = self.view();
        let dims = self.dims();
        let pos = |n: &str| dims.iter().position(|d| d.name == n);
        let (ri, ci) = (pos(&rows), pos(&cols));
        let len = |i: Option<usize>| i.map_or(1, |i| dims[i].values.len());
        let others: Vec<usize> = (0..dims.len())
            .filter(|&i| Some(i) != ri && Some(i) != ci)
            .collect();
        let what: Vec<&str> = figs.iter().map(|f| self.heading(f)).collect();
        let w = 14;
        let mut s = String::new();
        let radices: Vec<usize> = others.iter().map(|&i| dims[i].values.len()).collect();
        let cell_at = |at: &[usize]| {
            let mut k = 0;
            for (d, &v) in dims.iter().zip(at) {
                k = k * d.values.len() + v;
            }
            self.cells.get(k)
        };
        let value =
            |i: Option<usize>, k: usize| i.map_or(String::new(), |i| label(&dims[i].values[k]));
        for combo in indices(&radices) {
            // Where every dimension stands: the others fixed here, rows
            // and columns filled in below.
            let mut at = vec![0usize; dims.len()];
            for (&d, &v) in others.iter().zip(&combo) {
                at[d] = v;
            }
            let mut title = format!("{} to {}", self.test, self.server);
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
            s.push_str(&format!(
                "{title}: rows {rows}, columns {cols}; {}\n",
                what.join(", ")
            ));
            s.push_str(&format!("{rows:>10}"));
            for k in 0..len(ci) {
                let head = if cols == "flows" {
                    format!("{} flows", value(ci, k))
                } else {
                    format!("{cols} {}", value(ci, k))
                };
                s.push_str(&format!(" {head:>w$}"));
                for _ in 1..figs.len() {
                    s.push_str(&format!(" {:>w$}", ""));
                }
            }
            s.push('\n');
            if figs.len() > 1 {
                s.push_str(&format!("{:>10}", ""));
                for _ in 0..len(ci) {
                    for h in &what {
                        s.push_str(&format!(" {h:>w$}"));
                    }
                }
                s.push('\n');
            }
            let mut notes = Vec::new();
            for r in 0..len(ri) {
                s.push_str(&format!("{:>10}", value(ri, r)));
                for k in 0..len(ci) {
                    if let Some(i) = ri {
                        at[i] = r;
                    }
                    if let Some(i) = ci {
                        at[i] = k;
                    }
                    let c = cell_at(&at);
                    let here = format!("{rows} {}, {cols} {}", value(ri, r), value(ci, k));
                    for (i, fig) in figs.iter().enumerate() {
                        let mut shown = Self::figure(c, fig);
                        if i == 0 {
                            if let Some(note) = Self::note(c) {
                                notes.push(format!("{here}: {note}"));
                                shown = match c {
                                    Some(c) if c.interrupted => format!("cut [{}]", notes.len()),
                                    Some(c) if c.why_na().is_some() => {
                                        format!("{shown} [{}]", notes.len())
                                    }
                                    _ => format!("{shown}* [{}]", notes.len()),
                                };
                            }
                        }
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

    /// What a note under the table says of a cell: why it is n/a, that
    /// Ctrl-C cut it, or that it fell short of its confidence.
    fn note(c: Option<&Cell>) -> Option<String> {
        let c = c?;
        if let Some(why) = c.why_na() {
            return Some(format!("n/a: {why}"));
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
    /// transactions parted: n/a in the table), `error` (the run failed; no
    /// rate) or `cut` (Ctrl-C stopped it).
    pub fn csv(&self) -> String {
        let dims = self.dims();
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
        for c in &self.cells {
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
    use super::*;

    fn summary(tps: f64, tx: Option<f64>, rx: Option<f64>) -> Summary {
        Summary {
            transactions_per_s: Some(tps),
            tx_packets_per_s: tx,
            rx_packets_per_s: rx,
            ..Summary::default()
        }
    }

    #[test]
    fn coalesced_segments_make_a_cell_na() {
        let plan = TestPlan::new(TestKind::TcpRr);
        assert!(packets_match(
            &plan,
            &summary(1000.0, Some(1010.0), Some(990.0))
        ));
        // Burst: 4 requests per segment -> a quarter of the packets.
        assert!(!packets_match(
            &plan,
            &summary(4000.0, Some(1000.0), Some(1000.0))
        ));
        assert!(!packets_match(
            &plan,
            &summary(1000.0, Some(1000.0), Some(700.0))
        ));
        // Loopback counts each packet leaving and arriving.
        let mut lo = summary(1000.0, Some(2000.0), Some(2010.0));
        lo.interface = Some("lo".into());
        assert!(packets_match(&plan, &lo));
        lo.tx_packets_per_s = Some(1000.0);
        assert!(!packets_match(&plan, &lo));
        // Not measured: unchecked.
        assert!(packets_match(&plan, &summary(1000.0, None, None)));
        // Not 1-byte TCP RR: the rule does not apply.
        let mut big = plan.clone();
        big.request_bytes = 100;
        assert!(packets_match(
            &big,
            &summary(4000.0, Some(1000.0), Some(1000.0))
        ));
        let udp = TestPlan::new(TestKind::UdpRr);
        assert!(packets_match(
            &udp,
            &summary(4000.0, Some(1000.0), Some(1000.0))
        ));
    }

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
        let csv = s.csv();
        let rows: Vec<&str> = csv.lines().collect();
        assert!(rows[0].starts_with("burst,flows,request_bytes,"), "{csv}");
        assert!(rows[0].contains(",latency_p50_ns,latency_p99_ns,"), "{csv}");
        assert_eq!(rows.len(), 5, "{csv}");
        assert!(rows[3].starts_with("4,1,1,1,5000,,45000,90000,"), "{csv}");
        assert!(rows[3].contains(",0.25,0.25,false,"), "{csv}");
        let table = s.table();
        assert!(
            table
                .contains("         4   5000 n/a [1]          50/48        10.00/-           9000"),
            "{table}"
        );
        assert!(
            table.contains(
                "[1] burst 4, flows 1: n/a: 0.25 packets per transaction sent, 0.25 received"
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
        let t = s.table();
        assert!(t.contains("flows 1: rows cpu-pin, columns burst"), "{t}");
        assert!(t.contains("       0:0       100* [1]"), "{t}");
        assert!(
            t.contains("confidence not reached: after 3 iteration(s)"),
            "{t}"
        );
        assert!(t.contains("       0:1        cut [2]"), "{t}");
        let csv = s.csv();
        assert!(csv.starts_with("burst,flows,cpu-pin,"), "{csv}");
        assert!(csv.contains("\n0,1,0:1,"), "{csv}");
        assert!(csv.contains(",cut,false,12,3,interrupted\n"), "{csv}");
    }
}
