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

use serde::{Deserialize, Serialize};

use crate::analysis::sides::packets_off_percent;
use crate::plan::{TestKind, TestPlan};
use crate::result::Summary;

/// How far packets/s may stray from transactions/s before a cell is n/a.
pub const PACKET_TOLERANCE: f64 = 0.05;

/// One cell of the matrix.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
}

impl Cell {
    /// A cell from one run's summary.
    pub fn of(plan: &TestPlan, s: &Summary) -> Cell {
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
            valid: packets_match(plan, s),
            error: s.error.clone(),
            packets_per_transaction: packets_off_percent(s)
                .map(|(tx, rx)| (1.0 + tx / 100.0, 1.0 + rx / 100.0)),
            local_cpu_util_percent: s.local.cpu_util_percent,
            remote_cpu_util_percent: s.remote.cpu_util_percent,
            local_service_demand: sd(&s.local),
            remote_service_demand: sd(&s.remote),
        }
    }

    /// Why the cell is n/a, in the packets per transaction measured.
    pub fn why_na(&self) -> Option<String> {
        if self.valid || self.error.is_some() {
            return None;
        }
        Some(match self.packets_per_transaction {
            Some((tx, rx)) => format!(
                "{tx:.2} packets per transaction sent, {rx:.2} received (1 each way within {:.0} % makes the rate a packet rate): TCP carried several messages per segment",
                100.0 * PACKET_TOLERANCE
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

/// The whole sweep.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Sweep {
    pub schema: String,
    pub test: String,
    pub server: String,
    /// (request, response) bytes: one matrix each.
    pub rr_sizes: Vec<(u64, u64)>,
    pub bursts: Vec<u32>,
    pub flows: Vec<u32>,
    pub cells: Vec<Cell>,
}

impl Sweep {
    fn cell(&self, rr: (u64, u64), b: u32, f: u32) -> Option<&Cell> {
        self.cells
            .iter()
            .find(|c| (c.request_bytes, c.response_bytes) == rr && c.burst == b && c.flows == f)
    }

    fn show(c: Option<&Cell>) -> String {
        match c {
            Some(c) if c.error.is_some() => "error".into(),
            Some(c) if !c.valid => "n/a".into(),
            Some(c) => Self::rate(c),
            None => "-".into(),
        }
    }

    /// A cell's measured rate: transactions/s, or Mbit/s with an M.
    fn rate(c: &Cell) -> String {
        match (c.transactions_per_s, c.throughput_bps) {
            (Some(t), _) => format!("{t:.0}"),
            (None, Some(b)) => format!("{:.2}M", b / 1e6),
            _ => "-".into(),
        }
    }

    /// Both ends' CPU utilisation and service demand of a cell, `l/r`.
    fn cpu(c: Option<&Cell>) -> (String, String) {
        let pair = |a: Option<f64>, b: Option<f64>, digits: usize| match (a, b) {
            (None, None) => "-".to_string(),
            _ => {
                let f = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.digits$}"));
                format!("{}/{}", f(a), f(b))
            }
        };
        match c {
            Some(c) if c.error.is_none() => (
                pair(c.local_cpu_util_percent, c.remote_cpu_util_percent, 0),
                pair(c.local_service_demand, c.remote_service_demand, 2),
            ),
            _ => ("-".into(), "-".into()),
        }
    }

    /// The matrices as text tables, one per request/response size: each
    /// flows column holds the rate, then CPU % and service demand of the
    /// local/remote ends; notes under the table say why a cell is n/a.
    pub fn table(&self) -> String {
        let sd_unit = if self.cells.iter().any(|c| c.throughput_bps.is_some()) {
            "us/KB"
        } else {
            "us/Tr"
        };
        let mut s = String::new();
        for &rr in &self.rr_sizes {
            s.push_str(&format!(
                "{} to {}, request {} B, response {} B: rows burst, columns flows, transactions/s; CPU % and service demand ({sd_unit}) local/remote\n",
                self.test, self.server, rr.0, rr.1
            ));
            s.push_str(&format!("{:>8}", "burst"));
            for f in &self.flows {
                s.push_str(&format!(
                    " {:>12} {:>9} {:>11}",
                    format!("{f} flows"),
                    "CPU %",
                    "SD"
                ));
            }
            s.push('\n');
            let mut notes = Vec::new();
            for b in &self.bursts {
                s.push_str(&format!("{b:>8}"));
                for f in &self.flows {
                    let c = self.cell(rr, *b, *f);
                    let mut shown = Self::show(c);
                    if let Some(why) = c.and_then(Cell::why_na) {
                        notes.push(format!("burst {b}, {f} flows: n/a: {why}"));
                        shown = format!("n/a [{}]", notes.len());
                    }
                    let (cpu, sd) = Self::cpu(c);
                    s.push_str(&format!(" {shown:>12} {cpu:>9} {sd:>11}"));
                }
                s.push('\n');
            }
            for (i, n) in notes.iter().enumerate() {
                s.push_str(&format!("  [{}] {n}\n", i + 1));
            }
        }
        s
    }

    /// The matrices as CSV: a header of flows, one row per size and burst.
    /// Each flows column holds the measured rate whether or not the cell
    /// passed the packet rule, and the `_valid` column after it says which:
    /// `true`, `false` (packets and transactions parted: n/a in the table)
    /// or `error` (the run failed; no rate).
    pub fn csv(&self) -> String {
        let mut s = String::from("request_bytes,response_bytes,burst");
        for f in &self.flows {
            s.push_str(&format!(",flows_{f},flows_{f}_valid"));
        }
        s.push('\n');
        for &rr in &self.rr_sizes {
            for b in &self.bursts {
                s.push_str(&format!("{},{},{b}", rr.0, rr.1));
                for f in &self.flows {
                    let (rate, valid) = match self.cell(rr, *b, *f) {
                        Some(c) if c.error.is_some() => (String::new(), "error".to_string()),
                        Some(c) => (Self::rate(c), c.valid.to_string()),
                        None => (String::new(), String::new()),
                    };
                    s.push_str(&format!(",{rate},{valid}"));
                }
                s.push('\n');
            }
        }
        s
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
        };
        assert_eq!(
            s.csv(),
            "request_bytes,response_bytes,burst,flows_1,flows_1_valid,flows_2,flows_2_valid\n\
             1,1,0,1000,true,2000,true\n1,1,4,5000,false,9000,true\n"
        );
        let table = s.table();
        assert!(
            table.contains("       4      n/a [1]     50/48     10.00/-         9000"),
            "{table}"
        );
        assert!(
            table.contains(
                "[1] burst 4, 1 flows: n/a: 0.25 packets per transaction sent, 0.25 received"
            ),
            "{table}"
        );
    }
}
