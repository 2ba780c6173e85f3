//! The test plan: what to run, checked and free of command-line types.
//!
//! `cli` turns flags into a [`TestPlan`]; the engine, the control protocol and
//! the exporters take only this. The plan travels to the server inside the
//! control protocol's spec message, so it is serde-serialisable and the server
//! validates it again with the same [`TestPlan::validate`]: a hostile client
//! gets the same range errors a user does.
//!
//! Which options apply to which test is asked of the test's facts
//! ([`kinds`]: `TestKind::traits()`), and each error's list of the tests an
//! option applies to is built from the same table.

use std::str::FromStr;

use serde::{Deserialize, Serialize};
use thiserror::Error;

pub mod kinds;
pub mod mix;
pub mod sockets;
mod validate_more;

pub use kinds::{Loss, Merit, Rate, TestKind, Traits, Transport, Ways};

/// Which I/O driver the worker threads use (`--driver`).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum DriverChoice {
    /// The blocking driver for a thread with one flow that allows it, epoll otherwise.
    #[default]
    Auto,
    Epoll,
    /// io_uring where the kernel allows it (a completion driver for tcp_rr and
    /// udp_rr, readiness for the rest), epoll otherwise.
    Uring,
}

impl FromStr for DriverChoice {
    type Err = PlanError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(DriverChoice::Auto),
            "epoll" => Ok(DriverChoice::Epoll),
            "uring" => Ok(DriverChoice::Uring),
            _ => Err(PlanError::UnknownDriver(s.to_string())),
        }
    }
}

/// How a tcp_crr/tcp_cc client ends each connection (`--close`).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum CloseMode {
    /// The server closes first after answering, the client closes on its
    /// FIN: a graceful close, TIME_WAIT on the server (netperf's TCP_CRR).
    #[default]
    Fin,
    /// The client aborts (SO_LINGER 0: a reset) once it has the response
    /// (crr) or the server's FIN (cc): no TIME_WAIT on either end (neper's
    /// tcp_crr default).
    Rst,
}

impl FromStr for CloseMode {
    type Err = PlanError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "fin" => Ok(CloseMode::Fin),
            "rst" => Ok(CloseMode::Rst),
            _ => Err(PlanError::Invalid(format!(
                "--close {s} is not a close mode (accepted: fin, rst)"
            ))),
        }
    }
}

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
    /// SO_MARK and TCP_TX_DELAY on both ends' data sockets (`--mark`,
    /// `--tcp-tx-delay`); absent from an older peer's plan: neither.
    #[serde(default, flatten)]
    pub sockets: sockets::SocketMarks,
    /// `--num-ports`, `--server-threads`, `--listen-backlog`,
    /// `--max-events`; absent from an older peer's plan: the defaults.
    #[serde(default, flatten)]
    pub spreading: sockets::Spreading,
}

/// Which way a test's payload goes (`--reverse`, `--both`): its row's
/// way, the other, or both at once on alternate flows.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// As the test's row says (capacity: the client sends the trains).
    #[default]
    Forward,
    /// The ends swap roles on every flow (capacity: the server sends).
    Reverse,
    /// Even flows forward, odd flows reversed, in one session.
    Both,
}

impl Direction {
    /// Does flow `flow` run the other way from its test's row?
    pub fn crosses(self, flow: u32) -> bool {
        match self {
            Direction::Forward => false,
            Direction::Reverse => true,
            Direction::Both => flow % 2 == 1,
        }
    }

    fn is_forward(&self) -> bool {
        *self == Direction::Forward
    }
}

/// What a tick does to a mix's bulk parts besides its phase: start them
/// (idle to loaded) or drain them (loaded to recovery).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LoadStep {
    Start,
    Stop,
}

/// The default `--max-inflight`: generous, so that a stall is charged to
/// every transaction that should have started in it.
pub const DEFAULT_MAX_INFLIGHT: u32 = 1024;

fn default_max_inflight() -> u32 {
    DEFAULT_MAX_INFLIGHT
}

/// How an open-loop schedule spaces a flow's transactions.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Arrivals {
    /// Evenly, one every flows/R seconds.
    #[default]
    Fixed,
    /// A Poisson process of the same mean rate (exponential gaps).
    Poisson,
}

impl FromStr for Arrivals {
    type Err = PlanError;
    fn from_str(s: &str) -> Result<Arrivals, PlanError> {
        match s {
            "fixed" => Ok(Arrivals::Fixed),
            "poisson" => Ok(Arrivals::Poisson),
            _ => Err(PlanError::Invalid(format!(
                "--arrivals {s} is not known (accepted: fixed, poisson)"
            ))),
        }
    }
}

/// The phases of a test (docs/design.md, "Phases, and the drain"). Only
/// `Measure` counts.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum Phase {
    Warmup = 0,
    Measure = 1,
    Cooldown = 2,
    /// Stop generating, half-close, read until EOF.
    Drain = 3,
}

impl Phase {
    pub fn from_u8(v: u8) -> Phase {
        match v {
            0 => Phase::Warmup,
            1 => Phase::Measure,
            2 => Phase::Cooldown,
            _ => Phase::Drain,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Phase::Warmup => "warmup",
            Phase::Measure => "measure",
            Phase::Cooldown => "cooldown",
            Phase::Drain => "drain",
        }
    }
}

/// The hard limits of a plan; the server states its own in its hello.
pub mod limits {
    pub const MAX_FLOWS: u32 = 100_000;
    pub const MAX_THREADS: u32 = 1024;
    /// The highest `--rate` for request/response tests, transactions/s in all.
    pub const MAX_OFFERED_PER_S: u64 = 100_000_000;
    /// The largest `--max-inflight`.
    pub const MAX_INFLIGHT: u32 = 1 << 16;
    pub const MAX_BURST: u32 = 4096;
    /// --busy-poll: a second of spinning per receive is already absurd.
    pub const MAX_BUSY_POLL_US: u32 = 1_000_000;
    pub const MAX_RR_BYTES: u64 = 64 << 20;
    pub const MAX_IO_BYTES: u64 = 64 << 20;
    pub const MAX_BUFFER_BYTES: u64 = 1 << 30;
    /// The largest UDP payload over IPv4 (65535 - 20 - 8).
    pub const MAX_DATAGRAM_BYTES: u64 = 65_507;
    pub const MIN_INTERVAL_NS: u64 = 10_000_000;
    pub const MAX_DURATION_NS: u64 = 24 * 3600 * 1_000_000_000;
    pub const MIN_DURATION_NS: u64 = 1_000_000;
    pub const MAX_PERCENTILES: usize = 32;
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

fn check(flag: &'static str, value: u64, min: u64, max: u64) -> Result<(), PlanError> {
    if value < min || value > max {
        return Err(PlanError::OutOfRange {
            flag,
            value,
            min,
            max,
        });
    }
    Ok(())
}

/// [`check`] of a duration, said in the units it is typed in.
fn check_ns(flag: &'static str, ns: u64, min: u64, max: u64) -> Result<(), PlanError> {
    check_in(flag, ns, min, max, crate::units::fmt_duration_ns)
}

/// [`check`] of a rate in bit/s, said in the units it is typed in.
fn check_bps(flag: &'static str, bps: u64, min: u64, max: u64) -> Result<(), PlanError> {
    check_in(flag, bps, min, max, crate::units::fmt_rate_bps)
}

fn check_in(
    flag: &'static str,
    value: u64,
    min: u64,
    max: u64,
    fmt: fn(u64) -> String,
) -> Result<(), PlanError> {
    if value < min || value > max {
        return Err(PlanError::OutOfRangeIn {
            flag,
            value: fmt(value),
            min: fmt(min),
            max: fmt(max),
        });
    }
    Ok(())
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
            sockets: sockets::SocketMarks::default(),
            spreading: sockets::Spreading::default(),
        }
    }

    /// Check every field against its range and the test it belongs to: a
    /// mix part by part (`plan::mix`), a single test step by step below, in
    /// the order the first error is reported. Which options apply to which
    /// tests is asked of the test's facts (`kinds::Traits`), and the
    /// message names the tests the same facts allow.
    pub fn validate(&self) -> Result<(), PlanError> {
        if !self.parts.is_empty() {
            return self.validate_parts();
        }
        self.validate_flows_and_window()?;
        self.validate_transactions()?;
        self.validate_bytes()?;
        self.validate_sizes()?;
        self.validate_direction()?;
        self.validate_test_flags()?;
        self.validate_open_loop()?;
        self.validate_call_times()?;
        self.validate_percentiles()?;
        self.validate_socket_options()
    }

    /// Flows, threads and the window's lengths.
    fn validate_flows_and_window(&self) -> Result<(), PlanError> {
        use limits::*;
        check("--flows", self.flows as u64, 1, MAX_FLOWS as u64)?;
        check("--threads", self.threads as u64, 1, MAX_THREADS as u64)?;
        if self.threads > self.flows {
            return Err(PlanError::Invalid(format!(
                "--threads {} is more than --flows {} (accepted: 1..=flows)",
                self.threads, self.flows
            )));
        }
        check_ns(
            "--duration",
            self.duration_ns,
            MIN_DURATION_NS,
            MAX_DURATION_NS,
        )?;
        check_ns("--warmup", self.warmup_ns, 0, MAX_DURATION_NS)?;
        check_ns("--cooldown", self.cooldown_ns, 0, MAX_DURATION_NS)?;
        check_ns(
            "--interval",
            self.interval_ns,
            MIN_INTERVAL_NS,
            MAX_DURATION_NS,
        )?;
        Ok(())
    }

    /// `--transactions`: a count-limited run.
    fn validate_transactions(&self) -> Result<(), PlanError> {
        let t = self.test;
        if let Some(n) = self.transactions {
            let counted = |x: &Traits| x.merit == Merit::Transactions;
            if !counted(t.traits()) {
                return Err(PlanError::NotApplicable {
                    flag: "--transactions",
                    applies: TestKind::named(counted),
                    test: t,
                });
            }
            check("--transactions", n, 1, u64::MAX / 2)?;
            // The count-limited window starts at the first transaction and ends
            // at the last: a warm-up would blur where the N are counted, and
            // after the quota the flows are idle, so a cool-down carries nothing.
            if self.warmup_ns > 0 || self.cooldown_ns > 0 {
                return Err(PlanError::Invalid(
                    "--warmup and --cooldown apply to time-limited runs; with --transactions the window starts at the first transaction (accepted: 0)".into(),
                ));
            }
            if n < self.flows as u64 {
                return Err(PlanError::Invalid(format!(
                    "--transactions {n} is fewer than --flows {} (accepted: at least one per flow)",
                    self.flows
                )));
            }
        }
        Ok(())
    }

    /// `--bytes`: a byte-limited bulk run.
    fn validate_bytes(&self) -> Result<(), PlanError> {
        let t = self.test;
        let Some(n) = self.bytes else {
            return Ok(());
        };
        // The bulk tests: TCP's, and udp_stream's numbered datagrams
        // (capacity's trains are a probe, not a load to count).
        let counted = |x: &Traits| {
            x.merit == Merit::Throughput
                && (x.transport == Transport::Tcp || x.kind == TestKind::UdpStream)
        };
        if !counted(t.traits()) {
            return Err(PlanError::NotApplicable {
                flag: "--bytes",
                applies: TestKind::named(counted),
                test: t,
            });
        }
        check("--bytes", n, 1, u64::MAX / 2)?;
        if self.transactions.is_some() {
            return Err(PlanError::Invalid(
                "--bytes and --transactions do not combine".into(),
            ));
        }
        if self.warmup_ns > 0 || self.cooldown_ns > 0 {
            return Err(PlanError::Invalid(
                "--warmup and --cooldown apply to time-limited runs; with --bytes the window starts at the first byte and ends when the last arrives (accepted: 0)".into(),
            ));
        }
        if self.zerocopy {
            return Err(PlanError::Invalid(
                "--bytes and --zerocopy do not combine: the zero-copy ring sends whole buffers"
                    .into(),
            ));
        }
        if n < self.flows as u64 {
            return Err(PlanError::Invalid(format!(
                "--bytes {n} is fewer than --flows {} (accepted: at least one byte per flow)",
                self.flows
            )));
        }
        Ok(())
    }

    /// A run that ends on a count (`--transactions`, `--bytes`) rather
    /// than after `--duration`.
    pub fn count_limited(&self) -> bool {
        self.transactions.is_some() || self.bytes.is_some()
    }

    /// Burst, message sizes, `--rate` in bit/s and the rr timeout.
    fn validate_sizes(&self) -> Result<(), PlanError> {
        use limits::*;
        let t = self.test;
        let f = t.traits();
        if self.burst > 0 && !f.burst {
            return Err(PlanError::NotApplicable {
                flag: "--burst",
                applies: TestKind::named(|x| x.burst),
                test: t,
            });
        }
        check("--burst", self.burst as u64, 0, MAX_BURST as u64)?;
        let max_rr = if f.rr_is_datagram() {
            MAX_DATAGRAM_BYTES
        } else {
            MAX_RR_BYTES
        };
        check("--rr-size (request)", self.request_bytes, 1, max_rr)?;
        check("--rr-size (response)", self.response_bytes, 1, max_rr)?;
        let max_send = if f.send_is_datagram() {
            MAX_DATAGRAM_BYTES
        } else {
            MAX_IO_BYTES
        };
        check(f.send_flag, self.send_bytes, f.min_send_bytes, max_send)?;
        if let Some(r) = self.rate_bps {
            if !f.rate.in_bits() {
                return Err(PlanError::NotApplicable {
                    flag: "--rate",
                    applies: format!(
                        "{} (tcp tests: --pacing-rate)",
                        TestKind::named(|x| x.rate.in_bits())
                    ),
                    test: t,
                });
            }
            check_bps("--rate", r, 8, 1_000_000_000_000)?;
        }
        check_ns(
            "--rr-timeout",
            self.rr_timeout_ns,
            1_000_000,
            60_000_000_000,
        )?;
        check("--recv-size", self.recv_bytes, 1, MAX_IO_BYTES)?;
        Ok(())
    }

    /// `--reverse` and `--both` (capacity).
    fn validate_direction(&self) -> Result<(), PlanError> {
        let t = self.test;
        if self.direction != Direction::Forward {
            let flag = match self.direction {
                Direction::Both => "--both",
                _ => "--reverse",
            };
            if !t.traits().reverse {
                return Err(PlanError::NotApplicable {
                    flag,
                    applies: format!(
                        "{} (tcp_maerts is tcp_stream reversed, tcp_bidir both ways)",
                        TestKind::named(|x| x.reverse)
                    ),
                    test: t,
                });
            }
            if self.direction == Direction::Both && self.flows % 2 != 0 {
                return Err(PlanError::Invalid(format!(
                    "--both runs alternate flows each way: --flows {} in all is odd (accepted: an even number)",
                    self.flows
                )));
            }
        }
        Ok(())
    }

    /// `--gso`, `--zerocopy` and `--close rst`, each for its tests.
    fn validate_test_flags(&self) -> Result<(), PlanError> {
        let t = self.test;
        let f = t.traits();
        if self.gso {
            if !f.gso {
                return Err(PlanError::NotApplicable {
                    flag: "--gso",
                    applies: TestKind::named(|x| x.gso),
                    test: t,
                });
            }
            if self.rate_bps.is_some() {
                return Err(PlanError::Invalid(
                    "--gso applies to unpaced udp_stream (accepted: without --rate)".into(),
                ));
            }
        }
        if self.zerocopy && !f.zerocopy {
            return Err(PlanError::NotApplicable {
                flag: "--zerocopy",
                applies: TestKind::named(|x| x.zerocopy),
                test: t,
            });
        }
        if self.zerocopy && self.gso {
            return Err(PlanError::Invalid(
                "--gso and --zerocopy do not combine: udp_stream's zero-copy ring holds 256 datagrams, and as UDP_SEGMENT messages of up to 64 KB it would pin 16 MB per flow (accepted: one of them)".into(),
            ));
        }
        if self.close == CloseMode::Rst && !f.close {
            return Err(PlanError::NotApplicable {
                flag: "--close rst",
                applies: TestKind::named(|x| x.close),
                test: t,
            });
        }
        sockets::validate(self)?;
        Ok(())
    }

    /// `--call-times` (the stream tests).
    fn validate_call_times(&self) -> Result<(), PlanError> {
        let t = self.test;
        if self.call_times && !t.traits().call_times {
            return Err(PlanError::NotApplicable {
                flag: "--call-times",
                applies: TestKind::named(|x| x.call_times),
                test: t,
            });
        }
        Ok(())
    }

    /// `--percentiles`: how many, and each in (0, 100].
    fn validate_percentiles(&self) -> Result<(), PlanError> {
        use limits::*;
        if self.percentiles.len() > MAX_PERCENTILES {
            return Err(PlanError::Invalid(format!(
                "--percentiles lists {} values (accepted: at most {MAX_PERCENTILES})",
                self.percentiles.len()
            )));
        }
        if let Some(p) = self
            .percentiles
            .iter()
            .find(|p| !(p.is_finite() && **p > 0.0 && **p <= 100.0))
        {
            return Err(PlanError::Invalid(format!(
                "--percentiles {p} is out of range (accepted: greater than 0 and at most 100)"
            )));
        }
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reverse_and_both_belong_to_capacity() {
        let mut p = TestPlan::new(TestKind::TcpStream);
        p.direction = Direction::Reverse;
        let e = p.validate().unwrap_err().to_string();
        assert!(e.contains("--reverse") && e.contains("capacity"), "{e}");
        let mut p = TestPlan::new(TestKind::Capacity);
        p.direction = Direction::Reverse;
        assert_eq!(p.validate(), Ok(()));
        p.direction = Direction::Both;
        p.flows = 3;
        let e = p.validate().unwrap_err().to_string();
        assert!(e.contains("--both") && e.contains("even"), "{e}");
        p.flows = 2;
        assert_eq!(p.validate(), Ok(()));
        // Forward is left out of the plan on the wire: older peers read it.
        let forward = serde_json::to_string(&TestPlan::new(TestKind::Capacity)).unwrap();
        assert!(!forward.contains("direction"), "{forward}");
        let both: TestPlan = serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
        assert_eq!(both.direction, Direction::Both);
    }

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
    fn limits_are_said_in_the_units_they_are_typed_in() {
        let mut p = TestPlan::new(TestKind::TcpRr);
        p.duration_ns = 500_000;
        let e = p.validate().unwrap_err().to_string();
        assert_eq!(e, "--duration 500us is out of range (accepted: 1ms..=24h)");
        let mut p = TestPlan::new(TestKind::UdpStream);
        p.rate_bps = Some(4);
        let e = p.validate().unwrap_err().to_string();
        assert_eq!(
            e,
            "--rate 4 bit/s is out of range (accepted: 8 bit/s..=1T bit/s)"
        );
    }

    #[test]
    fn rejects_zero_flows_and_burst_on_streams() {
        let mut p = TestPlan::new(TestKind::TcpStream);
        p.flows = 0;
        let e = p.validate().unwrap_err().to_string();
        assert!(e.contains("--flows 0") && e.contains("1..=100000"), "{e}");
        let mut p = TestPlan::new(TestKind::TcpStream);
        p.burst = 4;
        let e = p.validate().unwrap_err().to_string();
        assert!(e.contains("--burst") && e.contains("tcp_rr"), "{e}");
    }

    /// Each option's "applies only to" list, built from the tests' facts,
    /// says what it said when it was written out by hand (the open loop's
    /// now in `TestKind::ALL`'s order, as the others).
    #[test]
    fn applies_lists_name_the_tests_the_facts_allow() {
        let err = |t: TestKind, f: &dyn Fn(&mut TestPlan)| {
            let mut p = TestPlan::new(t);
            f(&mut p);
            p.validate().unwrap_err().to_string()
        };
        use TestKind::*;
        for (e, want) in [
            (
                err(TcpStream, &|p| p.burst = 1),
                "--burst applies only to tcp_rr and udp_rr, not to tcp_stream",
            ),
            (
                err(TcpStream, &|p| p.transactions = Some(10)),
                "--transactions applies only to tcp_rr, tcp_crr, tcp_cc and udp_rr, not to tcp_stream",
            ),
            (
                err(TcpRr, &|p| p.rate_bps = Some(1000)),
                "--rate applies only to udp_stream and capacity (tcp tests: --pacing-rate), not to tcp_rr",
            ),
            (
                err(UdpStream, &|p| p.offered_per_s = Some(10)),
                "--rate (transactions/s) applies only to tcp_rr, tcp_crr, tcp_cc and udp_rr, not to udp_stream",
            ),
            (
                err(TcpStream, &|p| p.direction = Direction::Reverse),
                "--reverse applies only to capacity (tcp_maerts is tcp_stream reversed, tcp_bidir both ways), not to tcp_stream",
            ),
            (
                err(UdpRr, &|p| p.gso = true),
                "--gso applies only to udp_stream, not to udp_rr",
            ),
            (
                err(UdpRr, &|p| p.zerocopy = true),
                "--zerocopy applies only to tcp_stream, tcp_maerts, tcp_bidir and udp_stream, not to udp_rr",
            ),
            (
                err(TcpRr, &|p| p.call_times = true),
                "--call-times applies only to tcp_stream, tcp_maerts and tcp_bidir, not to tcp_rr",
            ),
            (
                err(TcpRr, &|p| p.close = CloseMode::Rst),
                "--close rst applies only to tcp_crr and tcp_cc, not to tcp_rr",
            ),
            (
                err(TcpCc, &|p| {
                    p.offered_per_s = Some(10);
                    p.max_inflight = 4;
                }),
                "--max-inflight applies to tcp_rr and udp_rr; tcp_cc with --rate has one connection open per flow (more at once: -F)",
            ),
            (
                err(Capacity, &|p| p.send_bytes = 11),
                "--packet-size 11 is out of range (accepted: 12..=65507)",
            ),
            (
                err(UdpStream, &|p| p.send_bytes = 65_508),
                "--send-size 65508 is out of range (accepted: 1..=65507)",
            ),
            (
                err(UdpRr, &|p| p.request_bytes = 65_508),
                "--rr-size (request) 65508 is out of range (accepted: 1..=65507)",
            ),
        ] {
            assert_eq!(e, want);
        }
        // Sizes a test does not send are held to the wider limits.
        let mut p = TestPlan::new(UdpStream);
        p.request_bytes = 65_508;
        assert_eq!(p.validate(), Ok(()));
        let mut p = TestPlan::new(UdpRr);
        p.send_bytes = 65_508;
        assert_eq!(p.validate(), Ok(()));
        assert_eq!(TestPlan::new(Capacity).send_bytes, 1472);
        assert_eq!(TestPlan::new(TcpStream).send_bytes, 128 << 10);
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
    fn close_rst_is_for_connection_tests_and_fin_by_default() {
        for t in TestKind::ALL {
            let mut p = TestPlan::new(t);
            assert_eq!(p.close, CloseMode::Fin);
            p.close = CloseMode::Rst;
            let conn = matches!(t, TestKind::TcpCrr | TestKind::TcpCc);
            match p.validate() {
                Ok(()) => assert!(conn, "{t}"),
                Err(e) => {
                    assert!(!conn, "{t}: {e}");
                    assert!(e.to_string().contains("--close rst"), "{e}");
                    assert!(e.to_string().contains("tcp_crr and tcp_cc"), "{e}");
                }
            }
        }
        assert!(
            "syn"
                .parse::<CloseMode>()
                .unwrap_err()
                .to_string()
                .contains("accepted: fin, rst")
        );
        // A plan from a peer that predates the option: fin.
        let mut v = serde_json::to_value(TestPlan::new(TestKind::TcpCrr)).unwrap();
        assert_eq!(v["close"], "fin");
        v.as_object_mut().unwrap().remove("close");
        let p: TestPlan = serde_json::from_value(v).unwrap();
        assert_eq!(p.close, CloseMode::Fin);
    }

    #[test]
    fn zerocopy_is_for_bulk_tests_and_optional_on_the_wire() {
        for t in TestKind::ALL {
            let mut p = TestPlan::new(t);
            p.zerocopy = true;
            let bulk = matches!(
                t,
                TestKind::TcpStream
                    | TestKind::TcpMaerts
                    | TestKind::TcpBidir
                    | TestKind::UdpStream
            );
            match p.validate() {
                Ok(()) => assert!(bulk, "{t}"),
                Err(e) => {
                    assert!(!bulk, "{t}: {e}");
                    assert!(e.to_string().contains("--zerocopy"), "{e}");
                }
            }
        }
        let mut p = TestPlan::new(TestKind::UdpStream);
        p.zerocopy = true;
        p.gso = true;
        let e = p.validate().unwrap_err().to_string();
        assert!(e.contains("--gso and --zerocopy do not combine"), "{e}");
        // A plan from a peer that predates the options: off.
        let mut v = serde_json::to_value(TestPlan::new(TestKind::TcpStream)).unwrap();
        v.as_object_mut().unwrap().remove("zerocopy");
        v.as_object_mut().unwrap().remove("gso");
        let p: TestPlan = serde_json::from_value(v).unwrap();
        assert!(!p.zerocopy && !p.gso);
    }

    #[test]
    fn gso_is_for_unpaced_udp_stream() {
        let mut p = TestPlan::new(TestKind::UdpStream);
        p.gso = true;
        assert_eq!(p.validate(), Ok(()));
        p.rate_bps = Some(1_000_000);
        assert!(p.validate().unwrap_err().to_string().contains("--gso"));
        let mut p = TestPlan::new(TestKind::UdpRr);
        p.gso = true;
        let e = p.validate().unwrap_err().to_string();
        assert!(e.contains("--gso") && e.contains("udp_stream"), "{e}");
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

    /// `--bytes` (issue 32): TCP bulk tests only, split over the flows to
    /// a byte, and none of what a timed window needs.
    #[test]
    fn bytes_are_for_tcp_bulk_tests_and_split_to_a_byte() {
        let mut p = TestPlan::new(TestKind::TcpStream);
        p.bytes = Some(10);
        p.flows = 3;
        p.warmup_ns = 0;
        assert_eq!(p.validate(), Ok(()));
        assert!(p.count_limited());
        let q: Vec<u64> = (0..3).map(|f| p.flow_bytes(f).unwrap()).collect();
        assert_eq!(q, [4, 3, 3]);
        for t in [TestKind::TcpRr, TestKind::TcpCrr, TestKind::UdpRr] {
            p.test = t;
            let e = p.validate().unwrap_err().to_string();
            assert!(e.contains("--bytes applies only to tcp_stream"), "{e}");
        }
        p.test = TestKind::TcpMaerts;
        p.warmup_ns = 1;
        assert!(p.validate().unwrap_err().to_string().contains("--warmup"));
        p.warmup_ns = 0;
        p.bytes = Some(2);
        assert!(
            p.validate()
                .unwrap_err()
                .to_string()
                .contains("one byte per flow")
        );
    }
}
