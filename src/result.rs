//! The result of one test: what every exporter writes.
//!
//! Names here are a contract (scripts parse the JSON); they are documented in
//! docs/json.md and checked against schema/thrum.result.v1.json in the tests.
//! Intervals never straddle phases, so the measurement window's figures are
//! exactly the sum of its intervals.

use serde::Serialize;

use crate::control::proto::Rusage;
use crate::plan::{TestKind, TestPlan};
use crate::stats::counters::Counts;
use crate::stats::latency::LatencySummary;
use crate::workload::Phase;

pub const SCHEMA: &str = "thrum.result.v1";

#[derive(Clone, Debug, Serialize)]
pub struct TestResult {
    pub schema: &'static str,
    pub test: TestKind,
    pub spec: Spec,
    pub environment: Environment,
    pub intervals: Vec<Interval>,
    pub summary: Summary,
}

/// The plan plus where it ran.
#[derive(Clone, Debug, Serialize)]
pub struct Spec {
    #[serde(flatten)]
    pub plan: TestPlan,
    /// The server as given (`host:port`), or `embedded`.
    pub server: String,
    /// The address the control connection reached.
    pub server_address: Option<String>,
    pub embedded_server: bool,
    pub bind: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Environment {
    pub thrum_version: String,
    pub command_line: Vec<String>,
    pub hostname: String,
    pub kernel: String,
    pub machine: String,
    pub cpu_model: String,
    pub cpus: usize,
    /// Server software as stated in its hello.
    pub server_software: Option<String>,
    /// Readiness driver of each worker thread, this end and the server's.
    pub local_drivers: Vec<String>,
    pub remote_drivers: Vec<String>,
    /// UDP tests: how datagrams move (batched sendmmsg/recvmmsg, or one per call).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub udp_io: Option<String>,
}

impl Environment {
    pub fn gather() -> Environment {
        let (kernel, machine, hostname) = uname();
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_default();
        Environment {
            thrum_version: env!("CARGO_PKG_VERSION").to_string(),
            command_line: std::env::args().collect(),
            hostname,
            kernel,
            machine,
            cpu_model,
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            ..Environment::default()
        }
    }
}

fn uname() -> (String, String, String) {
    // SAFETY: uname fills the struct; fields are NUL-terminated.
    unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) != 0 {
            return Default::default();
        }
        let s = |f: &[libc::c_char]| {
            std::ffi::CStr::from_ptr(f.as_ptr())
                .to_string_lossy()
                .into_owned()
        };
        (
            format!("{} {}", s(&u.sysname), s(&u.release)),
            s(&u.machine),
            s(&u.nodename),
        )
    }
}

/// One interim sample period, on both ends.
#[derive(Clone, Debug, Serialize)]
pub struct Interval {
    pub index: u32,
    pub phase: Phase,
    /// Seconds since the client started its workers.
    pub start_s: f64,
    pub end_s: f64,
    /// CLOCK_REALTIME at the end of the interval, seconds since the epoch.
    pub unix_end_s: f64,
    /// Per flow, counted by this end.
    pub local: Vec<Counts>,
    /// Per flow as counted by the server (per server worker thread for tcp_crr and tcp_cc);
    /// empty when the server's sample did not arrive.
    pub remote: Vec<Counts>,
    pub sum: Figures,
}

/// Counts of a window on both ends, and the rates they give.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Figures {
    pub local: Counts,
    pub remote: Counts,
    /// Receiver's goodput (stream tests).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throughput_bps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throughput_bps_c2s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throughput_bps_s2c: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transactions_per_s: Option<f64>,
}

impl Figures {
    /// Rates of a window of `local_s` seconds on this end and `remote_s` on the server.
    pub fn compute(
        test: TestKind,
        local: Counts,
        remote: Counts,
        local_s: f64,
        remote_s: f64,
    ) -> Figures {
        let rate = |v: u64, s: f64| if s > 0.0 { v as f64 / s } else { 0.0 };
        let mut f = Figures {
            local,
            remote,
            ..Figures::default()
        };
        match test {
            TestKind::TcpStream => {
                f.throughput_bps = Some(rate(remote.bytes_received * 8, remote_s))
            }
            TestKind::TcpMaerts => f.throughput_bps = Some(rate(local.bytes_received * 8, local_s)),
            TestKind::UdpStream => {
                f.throughput_bps = Some(rate(remote.bytes_received * 8, remote_s))
            }
            TestKind::TcpBidir => {
                let c2s = rate(remote.bytes_received * 8, remote_s);
                let s2c = rate(local.bytes_received * 8, local_s);
                f.throughput_bps_c2s = Some(c2s);
                f.throughput_bps_s2c = Some(s2c);
                f.throughput_bps = Some(c2s + s2c);
            }
            TestKind::TcpRr | TestKind::TcpCrr | TestKind::TcpCc | TestKind::UdpRr => {
                f.transactions_per_s = Some(rate(local.transactions, local_s))
            }
        }
        f
    }
}

/// One end's share of the summary.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Side {
    /// Counts in the measurement window.
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub transactions: u64,
    /// Length of the measurement window on this end's clock.
    pub window_s: f64,
    pub send_bps: f64,
    pub recv_bps: f64,
    pub transactions_per_s: f64,
    /// UDP: datagrams (packets) per second each way, from this end's counts.
    pub datagrams_sent: u64,
    pub datagrams_received: u64,
    pub datagrams_sent_per_s: f64,
    pub datagrams_received_per_s: f64,
    /// Counts over the whole test, warm-up to drain: one end's `bytes_sent`
    /// equals the other's `bytes_received` after a clean drain.
    pub total: Counts,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rusage: Option<Rusage>,
}

impl Side {
    pub fn new(window: Counts, window_s: f64, total: Counts, rusage: Option<Rusage>) -> Side {
        let rate = |v: f64| if window_s > 0.0 { v / window_s } else { 0.0 };
        Side {
            bytes_sent: window.bytes_sent,
            bytes_received: window.bytes_received,
            transactions: window.transactions,
            window_s,
            send_bps: rate(window.bytes_sent as f64 * 8.0),
            recv_bps: rate(window.bytes_received as f64 * 8.0),
            transactions_per_s: rate(window.transactions as f64),
            datagrams_sent: window.datagrams_sent,
            datagrams_received: window.datagrams_received,
            datagrams_sent_per_s: rate(window.datagrams_sent as f64),
            datagrams_received_per_s: rate(window.datagrams_received as f64),
            total,
            rusage,
        }
    }
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    /// Length of the measurement window (client clock).
    pub duration_s: f64,
    /// Receiver's goodput in bits/s (stream tests).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throughput_bps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throughput_bps_c2s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throughput_bps_s2c: Option<f64>,
    /// The sender's figure in bits/s (stream tests; sum of both senders for bidir).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throughput_bps_sent: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transactions_per_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transactions: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_ns: Option<LatencySummary>,
    /// udp_stream: datagrams the client sent in its window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub datagrams_sent: Option<u64>,
    /// udp_stream: distinct datagrams the server received in its window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub datagrams_received: Option<u64>,
    /// udp_stream: datagrams lost in the window (gaps seen by the receiver,
    /// less those that came late); udp_rr: transactions timed out in the window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reordered: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duplicates: Option<u64>,
    pub local: Side,
    pub remote: Side,
    /// Seconds from opening the first data socket to the server's `started`:
    /// every flow connected, presented and accepted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub setup_s: Option<f64>,
    pub warnings: Vec<String>,
    /// Why the test failed; null on success.
    pub error: Option<String>,
}

impl TestResult {
    pub fn ok(&self) -> bool {
        self.summary.error.is_none()
    }

    /// The figure of merit and its unit, for tables.
    pub fn headline(&self) -> (f64, &'static str) {
        let s = &self.summary;
        if let Some(t) = s.throughput_bps {
            (t, "bit/s")
        } else {
            (s.transactions_per_s.unwrap_or(0.0), "trans/s")
        }
    }
}
