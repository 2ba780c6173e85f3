//! `thrum sweep`: one test over every combination of list-valued options,
//! tabulated as classic netperf studies of latency versus throughput do
//! (rows burst, columns flows, transactions/s in each cell).
//!
//! With 1-byte TCP request/response, transactions/s is a packet rate only
//! while each request and each response is its own segment. When the
//! interface's packet counts over the window disagree with the transaction
//! count (TCP coalesced several requests into one segment), the cell is
//! "n/a", as those studies mark it.

use serde::{Deserialize, Serialize};

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
    s.packets_off_percent().is_none_or(|(tx, rx)| {
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

    /// The matrices as text tables, one per request/response size.
    pub fn table(&self) -> String {
        let mut s = String::new();
        for &rr in &self.rr_sizes {
            s.push_str(&format!(
                "{} to {}, request {} B, response {} B: rows burst, columns flows, transactions/s\n",
                self.test, self.server, rr.0, rr.1
            ));
            s.push_str(&format!("{:>8}", "burst"));
            for f in &self.flows {
                s.push_str(&format!(" {:>12}", format!("{f} flows")));
            }
            s.push('\n');
            for b in &self.bursts {
                s.push_str(&format!("{b:>8}"));
                for f in &self.flows {
                    s.push_str(&format!(" {:>12}", Self::show(self.cell(rr, *b, *f))));
                }
                s.push('\n');
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
        assert!(s.table().contains("       4          n/a         9000"));
    }
}
