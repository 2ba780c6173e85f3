//! The test plan: what to run, checked and free of command-line types.
//!
//! `cli` turns flags into a [`TestPlan`]; the engine, the control protocol and
//! the exporters take only this. The plan travels to the server inside the
//! control protocol's spec message, so it is serde-serialisable and the server
//! validates it again with the same [`TestPlan::validate`]: a hostile client
//! gets the same range errors a user does.
//!
//! This file holds the plan itself, its defaults and what is read from it,
//! and [`PlanError`], which parsing a test's name or a choice and validating
//! a plan all return. Beside it: the tests' facts (`kinds`), the words its
//! options take (`choices`), the phases both ends step through (`phase`),
//! the hard limits (`limits`), the checks (`validate`), the mix (`mix`) and
//! the per-socket options (`sockets`). The types callers name most are
//! re-exported here.

use serde::{Deserialize, Serialize};
use thiserror::Error;

pub mod choices;
pub mod kinds;
pub mod limits;
pub mod mix;
pub mod phase;
pub mod sockets;
mod validate;

pub use choices::{Arrivals, CloseMode, Direction, DriverChoice};
pub use kinds::{Loss, Merit, Rate, TestKind, Traits, Transport, Ways};
pub use phase::{LoadStep, Phase};

/// Socket options applied to one end's data sockets.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SocketOpts {
    /// SO_SNDBUF in bytes; None keeps the kernel's autotuning.
    pub send_buffer_bytes: Option<u64>,
    /// SO_RCVBUF in bytes; None keeps the kernel's autotuning.
    pub recv_buffer_bytes: Option<u64>,
    /// CPUs the worker threads are pinned to, round-robin; empty = unpinned.
    pub cpu_pin: Vec<usize>,
}

/// Everything a test needs, on both ends.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TestPlan {
    pub test: TestKind,
    /// Number of flows (connections, or connection loops for crr/cc).
    #[schemars(range(min = 1))]
    pub flows: u32,
    /// Worker threads on each end (never more than `flows`).
    #[schemars(range(min = 1))]
    pub threads: u32,
    /// Measurement window when time-limited.
    pub duration_ns: u64,
    /// Stop the measurement after this many transactions (rr tests) instead of a duration.
    #[schemars(range(min = 1))]
    pub transactions: Option<u64>,
    /// `--bytes`: a byte-limited bulk run (tcp_stream, tcp_maerts,
    /// tcp_bidir, udp_stream; iperf3's -n): the sender(s) send exactly this
    /// many bytes in all (per direction for tcp_bidir), split over the
    /// flows as [`TestPlan::flow_bytes`] says, and the window ends when
    /// every flow's bytes have arrived (udp_stream: have been sent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub bytes: Option<u64>,
    pub warmup_ns: u64,
    pub cooldown_ns: u64,
    /// Interim sample period.
    pub interval_ns: u64,
    /// Request size (rr, crr).
    pub request_bytes: u64,
    /// Response size (rr, crr).
    pub response_bytes: u64,
    /// Extra transactions in flight per flow (netperf's burst: burst+1 in flight).
    pub burst: u32,
    /// A pause between a response and the request it frees (neper's
    /// `--delay`), ns; 0: none. The client's alone: the server answers as
    /// requests come.
    #[serde(default, skip_serializing_if = "crate::plan::is_zero")]
    pub delay_ns: u64,
    /// Bytes per send call (stream tests).
    pub send_bytes: u64,
    /// Bytes per receive call (stream tests).
    pub recv_bytes: u64,
    pub nodelay: bool,
    /// TCP_CONGESTION name, both ends.
    pub congestion: Option<String>,
    /// TCP_MAXSEG, both ends.
    pub mss: Option<u32>,
    /// SO_MAX_PACING_RATE on sending sockets, bits/s.
    pub pacing_rate_bps: Option<u64>,
    /// udp_stream: open-loop send rate per flow, bits/s of datagram payload; None: as fast as possible.
    pub rate_bps: Option<u64>,
    /// udp_rr: a transaction whose response has not arrived after this is lost, and its slot reused.
    pub rr_timeout_ns: u64,
    /// SO_BUSY_POLL on data sockets, both ends, µs.
    #[serde(default)]
    pub busy_poll_us: Option<u32>,
    /// SO_PREFER_BUSY_POLL on data sockets, both ends (`--prefer-busy-poll`):
    /// the device's interrupts stay off while the application busy-polls;
    /// absent from an older peer's plan: off.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prefer_busy_poll: bool,
    /// Both ends' workers poll their sockets with non-blocking receives in
    /// a loop instead of sleeping until data arrives (`--spin`): each
    /// worker takes a whole CPU. Absent from an older peer's plan: off.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub spin: bool,
    /// MSG_ZEROCOPY sends on the sending end(s) of tcp_stream, tcp_maerts
    /// and tcp_bidir; absent from an older peer's plan: off.
    #[serde(default)]
    pub zerocopy: bool,
    /// udp_stream: UDP_SEGMENT (GSO) on the sender, UDP_GRO on the receiver;
    /// absent from an older peer's plan: off.
    #[serde(default)]
    pub gso: bool,
    /// Readiness driver on both ends; absent from an older peer's plan: auto.
    #[serde(default)]
    pub driver: DriverChoice,
    /// tcp_crr/tcp_cc: how the client ends each connection; absent from an
    /// older peer's plan: fin.
    #[serde(default)]
    pub close: CloseMode,
    pub local: SocketOpts,
    pub remote: SocketOpts,
    /// Latency percentiles to report besides the fixed p50/p90/p99/p99.9 (0 < p <= 100).
    #[serde(default)]
    pub percentiles: Vec<f64>,
    /// Open loop (tcp_rr, udp_rr, tcp_crr, tcp_cc): transactions per second
    /// offered in all, spread evenly over the flows, whatever the responses
    /// do; None: closed loop. The schedule is the client's alone, so a
    /// server that ignores the field serves it unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offered_per_s: Option<u64>,
    /// Open loop: how the schedule spaces a flow's transactions.
    #[serde(default)]
    pub arrivals: Arrivals,
    /// Open loop: the most transactions in flight per flow. When it is
    /// full the schedule keeps running; the requests it owes go out as
    /// slots free, their response time still counted from their intended
    /// start.
    #[serde(default = "default_max_inflight")]
    pub max_inflight: u32,
    /// Bulk tests: time each send and receive call into histograms on both
    /// ends (netperf's `-v 2`); off, the calls go untimed (two clock reads
    /// per call saved). Absent from an older peer's plan: off.
    #[serde(default)]
    pub call_times: bool,
    /// IP_TOS / IPV6_TCLASS byte on the data sockets (`--tos`); None: the
    /// kernel's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tos: Option<u8>,
    /// A mix (`--mix`, presets): the parts, whose flows add up to `flows`
    /// in this order; empty for a single test.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<mix::PartPlan>,
    /// A mix with probes and bulk parts: probes alone at the start of the
    /// measurement window (`--idle`), before the bulk parts start.
    #[serde(default)]
    pub idle_ns: u64,
    /// ... and at its end (`--recovery`), after the bulk parts have drained.
    #[serde(default)]
    pub recovery_ns: u64,
    /// capacity: which way the trains go (`--reverse`, `--both`); absent
    /// from an older peer's plan, and when forward: the row's way.
    #[serde(default, skip_serializing_if = "Direction::is_forward")]
    pub direction: Direction,
    /// The client keeps each flow's latency per interval (`--samples`,
    /// `--export-csv`: the CSV's latency columns per flow), a coarse
    /// histogram per flow; the server ignores it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub flow_latency: bool,
    /// udp_rr's client matches responses to requests oldest first: the
    /// session sets it against a server that echoes no short sequence
    /// number (`workload::udp::matching_note`). Never sent.
    #[serde(skip)]
    pub rr_in_order: bool,
    /// udp_rr: requests carry their send time and responses the server's
    /// arrival and departure times (`--one-way`); absent from an older
    /// peer's plan: no stamps.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub one_way: bool,
    /// `--one-way`: the server's clock less ours, ns, measured before the
    /// flows start, which the client's flows correct its stamps by. Never sent.
    #[serde(skip)]
    pub one_way_offset_ns: i64,
    /// `--one-way --clock-method exchanges` (a diagnostic): the offset by
    /// clock exchanges even where both ends read one kernel's clock.
    /// Never sent.
    #[serde(skip)]
    pub one_way_exchanges_only: bool,
    /// SO_MARK and TCP_TX_DELAY on both ends' data sockets (`--mark`,
    /// `--tcp-tx-delay`); absent from an older peer's plan: neither.
    #[serde(default, flatten)]
    pub sockets: sockets::SocketMarks,
    /// `--num-ports`, `--server-threads`, `--listen-backlog`,
    /// `--max-events`; absent from an older peer's plan: the defaults.
    #[serde(default, flatten)]
    pub spreading: sockets::Spreading,
}

/// The default `--max-inflight`: generous, so that a stall is charged to
/// every transaction that should have started in it.
pub const DEFAULT_MAX_INFLIGHT: u32 = 1024;

fn default_max_inflight() -> u32 {
    DEFAULT_MAX_INFLIGHT
}

/// A plan that cannot run; every message names the flag and the accepted range.
#[derive(Debug, Error, PartialEq)]
pub enum PlanError {
    #[error(
        "unknown test '{0}' (accepted: {names}, or netperf's upper-case names as TCP_RR)",
        names = TestKind::ALL.map(TestKind::name).join(", ")
    )]
    UnknownTest(String),
    #[error("unknown --driver '{0}' (accepted: auto, epoll, uring)")]
    UnknownDriver(String),
    #[error("{flag} {value} is out of range (accepted: {min}..={max})")]
    OutOfRange {
        flag: &'static str,
        value: u64,
        min: u64,
        max: u64,
    },
    /// A limit in the units the flag is typed in (durations, rates).
    #[error("{flag} {value} is out of range (accepted: {min}..={max})")]
    OutOfRangeIn {
        flag: &'static str,
        value: String,
        min: String,
        max: String,
    },
    /// `applies` names the tests the flag applies to, from their facts
    /// ([`TestKind::named`]).
    #[error("{flag} applies only to {applies}, not to {test}")]
    NotApplicable {
        flag: &'static str,
        applies: String,
        test: TestKind,
    },
    #[error("{0}")]
    Invalid(String),
}

impl TestPlan {
    /// An open-loop tcp_rr (`--rate`, or a mix part's `rate=`) runs with
    /// TCP_NODELAY on both ends whatever `--nodelay` says. Open loop puts a
    /// second request in flight whenever a response is late; then Nagle
    /// holds the server's next response until the client's next request
    /// acks the last one, and the pair stays locked to the schedule: every
    /// service time becomes one schedule gap (measured on loopback at
    /// 1,000/s: p50 1.0 ms with Nagle, 9 us without).
    pub fn open_loop_tcp_rr(&self) -> bool {
        let t = self.test.traits();
        self.offered_per_s.is_some()
            && t.transport == Transport::Tcp
            && t.merit == Merit::Transactions
    }

    /// A plan with the defaults of `thrum run TEST`.
    pub fn new(test: TestKind) -> TestPlan {
        TestPlan {
            test,
            flows: 1,
            threads: 1,
            duration_ns: 10_000_000_000,
            transactions: None,
            bytes: None,
            warmup_ns: 1_000_000_000,
            cooldown_ns: 0,
            interval_ns: 1_000_000_000,
            request_bytes: 1,
            response_bytes: 1,
            burst: 0,
            delay_ns: 0,
            // A datagram per send (udp_stream, capacity): the largest
            // payload of one 1500-byte IPv4 packet.
            send_bytes: if test.traits().send_is_datagram() {
                1472
            } else {
                128 << 10
            },
            recv_bytes: 128 << 10,
            nodelay: false,
            congestion: None,
            mss: None,
            pacing_rate_bps: None,
            rate_bps: None,
            rr_timeout_ns: 50_000_000,
            offered_per_s: None,
            arrivals: Arrivals::Fixed,
            max_inflight: DEFAULT_MAX_INFLIGHT,
            call_times: false,
            driver: DriverChoice::Auto,
            close: CloseMode::Fin,
            busy_poll_us: None,
            prefer_busy_poll: false,
            spin: false,
            zerocopy: false,
            gso: false,
            local: SocketOpts::default(),
            remote: SocketOpts::default(),
            percentiles: Vec::new(),
            tos: None,
            parts: Vec::new(),
            idle_ns: 0,
            recovery_ns: 0,
            direction: Direction::Forward,
            flow_latency: false,
            rr_in_order: false,
            one_way: false,
            one_way_offset_ns: 0,
            one_way_exchanges_only: false,
            sockets: sockets::SocketMarks::default(),
            spreading: sockets::Spreading::default(),
        }
    }

    /// A run that ends on a count (`--transactions`, `--bytes`) rather
    /// than after `--duration`.
    pub fn count_limited(&self) -> bool {
        self.transactions.is_some() || self.bytes.is_some()
    }

    /// The plan as the server sees it: local and remote swapped.
    pub fn for_server(&self) -> TestPlan {
        let mut p = self.clone();
        std::mem::swap(&mut p.local, &mut p.remote);
        if let Some(t) = self.spreading.server_threads {
            p.threads = t;
            p.spreading.server_threads = None;
        }
        p
    }

    /// Bytes flow `flow`'s sender sends in a byte-limited run: the total
    /// split evenly, the first `bytes % flows` flows one byte more.
    pub fn flow_bytes(&self, flow: u32) -> Option<u64> {
        self.bytes.map(|n| {
            let f = self.flows as u64;
            n / f + u64::from((flow as u64) < n % f)
        })
    }

    /// The most worker threads either end runs (`--server-threads` may
    /// give the server more than the client), for the server's limits.
    pub fn most_threads(&self) -> u32 {
        self.threads.max(self.spreading.server_threads.unwrap_or(0))
    }

    /// Transactions each flow must complete when count-limited: the total split evenly.
    pub fn flow_quota(&self, flow: u32) -> Option<u64> {
        self.transactions.map(|n| {
            let f = self.flows as u64;
            n / f + u64::from((flow as u64) < n % f)
        })
    }
}

/// serde's test for a field absent when zero (`delay_ns`).
pub(crate) fn is_zero(v: &u64) -> bool {
    *v == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_netperf_aliases() {
        assert_eq!("tcp_rr".parse::<TestKind>(), Ok(TestKind::TcpRr));
        assert_eq!("TCP_RR".parse::<TestKind>(), Ok(TestKind::TcpRr));
        assert_eq!("TCP_MAERTS".parse::<TestKind>(), Ok(TestKind::TcpMaerts));
        let e = "tcp_foo".parse::<TestKind>().unwrap_err().to_string();
        for t in TestKind::ALL {
            assert!(e.contains(t.name()), "{e} lacks {t}");
        }
    }

    #[test]
    fn quota_splits_exactly() {
        let mut p = TestPlan::new(TestKind::TcpRr);
        p.flows = 3;
        p.threads = 1;
        p.transactions = Some(10);
        let q: Vec<u64> = (0..3).map(|f| p.flow_quota(f).unwrap()).collect();
        assert_eq!(q, vec![4, 3, 3]);
        assert_eq!(q.iter().sum::<u64>(), 10);
    }

    #[test]
    fn server_view_swaps_ends() {
        let mut p = TestPlan::new(TestKind::TcpRr);
        p.local.cpu_pin = vec![0];
        p.remote.cpu_pin = vec![1];
        let s = p.for_server();
        assert_eq!(s.local.cpu_pin, vec![1]);
        assert_eq!(s.remote.cpu_pin, vec![0]);
    }
}
