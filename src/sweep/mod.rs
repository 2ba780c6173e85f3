//! `thrum sweep`: one test over every combination of list-valued options,
//! tabulated as classic netperf studies of latency versus throughput do
//! (rows burst, columns flows, transactions/s in each cell).
//!
//! With 1-byte TCP request/response, transactions/s is a packet rate only
//! while each request and each response is its own segment. When the
//! interface's packet counts over the window disagree with the transaction
//! count (TCP coalesced several requests into one segment), the cell is
//! not valid as a packet rate (those studies write it "n/a"; thrum's table
//! prints the rate and a note under the table gives the packets per
//! transaction measured). Each cell carries both ends' CPU
//! utilisation and service demand beside its rate, as those tables do.
//!
//! The grid is the product of its dimensions (`--vary NAME=LIST`; burst
//! and flows always, request/response sizes when `-r` is repeated): each
//! cell names its value of every dimension in `params`, and carries the
//! latency, both ends' CPU and, with `--iterations`, its confidence.
//!
//! Here is the record (`thrum.sweep.v1`) and the n/a rule; `spread` runs
//! one cell over several load generators, `nic` sets NIC settings as
//! dimensions and `journal` keeps the originals on disk until they are
//! back. The terminal tables and the long CSV are the text
//! exporters' (`export::sweep`, beside the curve's); the gathering is in
//! `cmd::sweep`.

pub mod journal;
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
}
