//! The load options, declared once: what flows a test runs and how they
//! send, as `thrum run` and `thrum curve` take them (`#[command(flatten)]`).
//!
//! [`FlowArgs`] is what both commands take (-F, -T, -r, and in
//! [`FlowOpts`] --arrivals, --max-inflight, --rr-timeout, --nodelay);
//! [`LoadArgs`] is all of `run`'s, those, -b and [`SocketArgs`] (sizes,
//! buffers, congestion control, rate, driver, close, pinning, …), which
//! `thrum sweep` takes too beside [`FlowOpts`]. Each fills its fields of a
//! [`TestPlan`].
//!
//! `--arrivals`, `--driver` and `--close` take the plan's own enums
//! ([`Arrivals`], [`DriverChoice`], [`CloseMode`]) through [`ValueEnum`],
//! implemented here so that `plan` stays free of clap: clap refuses an
//! unknown value naming the flag and the accepted values, and nothing is
//! parsed again afterwards.

use std::time::Duration;

use clap::builder::PossibleValue;
use clap::{Args, ValueEnum};

use super::{CpuList, cpu_list_arg, duration, ns, rate, size, size_pair};
use crate::plan::{Arrivals, CloseMode, DriverChoice, SocketOpts, TestPlan};

/// The flows and their transactions: the load options `run` and `curve`
/// share, with `run`'s help. `curve` says them in its own words and gives
/// `--rr-timeout` a default of 50ms where `run` has none (a mix waits
/// longer): see `cli::curve`.
#[derive(Debug, Args, Clone)]
pub struct FlowArgs {
    /// Number of flows (connections).
    #[arg(short = 'F', long, default_value_t = 1, value_name = "F")]
    #[arg(help_heading = super::heading::LOAD)]
    pub flows: u32,
    /// Worker threads on each end.
    ///
    /// Worker threads on each end; flows are spread evenly over them.
    #[arg(short = 'T', long, default_value_t = 1, value_name = "T")]
    #[arg(help_heading = super::heading::LOAD)]
    pub threads: u32,
    /// Request and response sizes in bytes (rr, crr).
    ///
    /// Request and response sizes in bytes, REQ[,RESP] (rr, crr).
    #[arg(short = 'r', long, default_value = "1,1", value_parser = size_pair, value_name = "REQ[,RESP]")]
    #[arg(help_heading = super::heading::SIZES)]
    pub rr_size: (u64, u64),
    #[command(flatten)]
    pub opts: FlowOpts,
}

/// How each flow sends: `--nodelay` and the open-loop schedule's options.
/// `run`, `curve` and `sweep` take them alike (sweep's flows, sizes and
/// bursts are lists, so it cannot take [`FlowArgs`] whole).
#[derive(Debug, Args, Clone)]
pub struct FlowOpts {
    /// Set TCP_NODELAY on data sockets, both ends.
    #[arg(long)]
    #[arg(help_heading = super::heading::SOCKETS)]
    pub nodelay: bool,
    /// With --rate: fixed or poisson arrivals.
    ///
    /// With --rate on a request/response test: `fixed` spacing, or `poisson`
    /// arrivals of the same mean rate.
    #[arg(
        long,
        value_enum,
        default_value = "fixed",
        value_name = "fixed|poisson"
    )]
    #[arg(help_heading = super::heading::OPEN_LOOP)]
    pub arrivals: Arrivals,
    /// With --rate: most transactions in flight per flow.
    ///
    /// With --rate on tcp_rr or udp_rr: the most transactions in flight per
    /// flow; when full, the schedule keeps running and the owed requests go
    /// out as slots free. tcp_crr and tcp_cc keep one connection per flow.
    #[arg(long, default_value_t = crate::plan::DEFAULT_MAX_INFLIGHT, value_name = "N")]
    #[arg(help_heading = super::heading::OPEN_LOOP)]
    pub max_inflight: u32,
    /// udp_rr: a transaction unanswered this long is lost.
    ///
    /// udp_rr: a transaction without a response after this is lost and its
    /// slot reused. Default: 50ms; 2s in a mix and with --one-way, whose
    /// probes must wait out a bloated queue to measure it.
    #[arg(long, value_parser = duration, value_name = "DURATION")]
    #[arg(help_heading = super::heading::OPEN_LOOP)]
    pub rr_timeout: Option<Duration>,
}

impl FlowArgs {
    /// Fill the plan's flows, sizes, schedule and `--nodelay`; a
    /// `--rr-timeout` given replaces the plan's.
    pub fn apply(&self, p: &mut TestPlan) {
        p.flows = self.flows;
        p.threads = self.threads;
        (p.request_bytes, p.response_bytes) = self.rr_size;
        self.opts.apply(p);
    }
}

impl FlowOpts {
    /// Fill the plan's schedule and `--nodelay`; a `--rr-timeout` given
    /// replaces the plan's.
    pub fn apply(&self, p: &mut TestPlan) {
        p.arrivals = self.arrivals;
        p.max_inflight = self.max_inflight;
        if let Some(t) = self.rr_timeout {
            p.rr_timeout_ns = ns(t);
        }
        p.nodelay = self.nodelay;
    }
}

/// All of `thrum run`'s load options: the [`FlowArgs`] `curve` shares, and
/// the rest, which `curve` does not take (its rates are its steps').
#[derive(Debug, Args, Clone)]
pub struct LoadArgs {
    #[command(flatten)]
    pub flow: FlowArgs,
    /// Extra transactions in flight per flow (netperf's burst).
    ///
    /// Extra transactions in flight per flow: N+1 outstanding (netperf's burst; tcp_rr, udp_rr).
    #[arg(short = 'b', long, default_value_t = 0, value_name = "N")]
    #[arg(help_heading = super::heading::LOAD)]
    pub burst: u32,
    /// tcp_rr: pause this long between a response and the next request.
    ///
    /// tcp_rr: pause this long between a response and the request it frees (neper's --delay; 1us to 10s). Latency runs from the send, so it leaves the pause out; the rate falls to at most one transaction per delay per slot in flight.
    #[arg(long, value_parser = duration, value_name = "DURATION")]
    #[arg(help_heading = super::heading::LOAD)]
    pub delay: Option<Duration>,
    #[command(flatten)]
    pub sock: SocketArgs,
}

/// The sizes, socket options, open-loop rate, driver and pinning of every
/// flow: the load options `thrum run` and `thrum sweep` both take (each
/// sweep cell gets them, and `--vary` overrides one per dimension). A
/// flag added here reaches both commands.
#[derive(Debug, Args, Clone)]
pub struct SocketArgs {
    /// Bytes per send call, or datagram or packet size.
    ///
    /// Bytes per send call (stream tests; default 128K), the datagram size of udp_stream (default 1472, at most 65507), or capacity's packet size (--packet-size; default the payload that fills the path MTU, up to a 9000-byte MTU's; 12 to 65507). K/M/G = 2^10.., k/m/g = 10^3..
    #[arg(short = 'm', long, visible_alias = "packet-size", value_parser = size, value_name = "SIZE")]
    #[arg(help_heading = super::heading::SIZES)]
    pub send_size: Option<u64>,
    /// Bytes per receive call (stream tests).
    #[arg(short = 'M', long, default_value = "128K", value_parser = size, value_name = "SIZE")]
    #[arg(help_heading = super::heading::SIZES)]
    pub recv_size: u64,
    /// Local socket buffers SO_SNDBUF[,SO_RCVBUF].
    ///
    /// Local socket buffers SO_SNDBUF[,SO_RCVBUF]; default: kernel autotuning.
    #[arg(short = 's', long, value_parser = size_pair, value_name = "SND[,RCV]")]
    #[arg(help_heading = super::heading::SOCKETS)]
    pub local_buffer: Option<(u64, u64)>,
    /// Server socket buffers SO_SNDBUF[,SO_RCVBUF].
    #[arg(short = 'S', long, value_parser = size_pair, value_name = "SND[,RCV]")]
    #[arg(help_heading = super::heading::SOCKETS)]
    pub remote_buffer: Option<(u64, u64)>,
    /// TCP congestion control, both ends (cubic, bbr, ...).
    #[arg(long, value_name = "ALGO")]
    #[arg(help_heading = super::heading::SOCKETS)]
    pub cc: Option<String>,
    /// TCP_MAXSEG, both ends.
    #[arg(long, value_name = "BYTES")]
    #[arg(help_heading = super::heading::SOCKETS)]
    pub mss: Option<u32>,
    /// SO_MAX_PACING_RATE per flow, in bits/s (100M = 10^8 bit/s).
    #[arg(long, value_parser = rate, value_name = "RATE")]
    #[arg(help_heading = super::heading::SOCKETS)]
    pub pacing_rate: Option<u64>,
    /// Open loop: bits/s (udp_stream) or transactions/s (rr, crr, cc).
    ///
    /// Open loop. udp_stream: send each flow's datagrams at RATE bits/s of
    /// payload (as iperf3 -b). tcp_rr, udp_rr, tcp_crr, tcp_cc: offer RATE
    /// transactions/s in all (10k = 10,000/s), spread over the flows, on a
    /// schedule the responses do not slow; latency then runs from each
    /// transaction's intended start (no coordinated omission); tcp_rr then
    /// sets TCP_NODELAY on both ends. Default: as fast as possible (closed
    /// loop).
    #[arg(long, value_parser = rate, value_name = "RATE")]
    #[arg(help_heading = super::heading::OPEN_LOOP)]
    pub rate: Option<u64>,
    /// Stream tests: time every send and receive call.
    ///
    /// tcp_stream, tcp_maerts, tcp_bidir: time every send and receive call
    /// on both ends into histograms (netperf's -v 2; shown with -v, always
    /// in JSON). Off by default: two clock reads per call.
    #[arg(long)]
    #[arg(help_heading = super::heading::LOAD)]
    pub call_times: bool,
    /// SO_BUSY_POLL on data sockets, both ends, in µs.
    ///
    /// SO_BUSY_POLL on data sockets, both ends: a receive spins this many µs on
    /// the device queue before sleeping (NICs with NAPI only; not loopback or
    /// veth). Read back on each end and reported; kernels that check it refuse
    /// a value above net.core.busy_read without CAP_NET_ADMIN, said as such.
    /// With --driver uring (or auto where it picks io_uring) each io_uring ring
    /// also registers NAPI busy polling for this long (Linux 6.9; the socket
    /// option acts in a blocking receive, the ring's in its wait), read back
    /// and reported; a kernel without it refuses the run.
    #[arg(long, value_name = "USEC")]
    #[arg(help_heading = super::heading::SOCKETS)]
    pub busy_poll: Option<u32>,
    /// SO_PREFER_BUSY_POLL on data sockets, both ends.
    ///
    /// SO_PREFER_BUSY_POLL on data sockets, both ends (Linux 5.11): while the
    /// application busy-polls, the device's interrupts stay deferred, so its
    /// queue is served by the polling receive (with --busy-poll, and the
    /// device's napi_defer_hard_irqs and gro_flush_timeout set). Read back on
    /// each end and reported; with --busy-poll on io_uring, the rings' NAPI
    /// busy polling prefers it too.
    #[arg(long)]
    #[arg(help_heading = super::heading::SOCKETS)]
    pub prefer_busy_poll: bool,
    /// tcp_rr, udp_rr: both ends' workers poll instead of sleeping.
    ///
    /// tcp_rr, udp_rr (closed loop, --driver auto or epoll): the workers of
    /// both ends never sleep in the kernel; each polls its sockets with
    /// non-blocking receives in a loop, so a transaction pays no scheduler
    /// wake-up. Each worker then takes a whole CPU on each end, which the
    /// CPU figures and service demand show. The server spins only as many
    /// workers as its --max-spin-threads (all sessions together) and
    /// --max-spin-threads-per-client allow.
    #[arg(long)]
    #[arg(help_heading = super::heading::LOAD)]
    pub spin: bool,
    /// Stream tests: send with MSG_ZEROCOPY.
    ///
    /// tcp_stream, tcp_maerts, tcp_bidir: send with MSG_ZEROCOPY (SO_ZEROCOPY)
    /// on the sending end(s), from a ring of 16 buffers of --send-size that
    /// are reused once the kernel reports their completion. udp_stream (Linux
    /// 5.0 or later; not with --gso): the client sends each datagram with
    /// MSG_ZEROCOPY from a ring of 8 batches of 32 datagrams, each batch
    /// rewritten only once all its datagrams completed. Over loopback and
    /// veth the kernel copies anyway on delivery, which makes sends slower, not
    /// faster; the result counts the sends, completions and copies.
    #[arg(long)]
    #[arg(help_heading = super::heading::SOCKETS)]
    pub zerocopy: bool,
    /// udp_stream: send with UDP_SEGMENT (GSO), receive with UDP_GRO.
    ///
    /// udp_stream, unpaced: the sender hands the kernel up to 64 datagrams
    /// per send (UDP_SEGMENT, GSO) and the receiver takes them coalesced
    /// (UDP_GRO), counting datagrams by the segment size. Never the default:
    /// it measures the kernel's GSO/GRO path, where datagrams are split and
    /// merged in bulk, not one datagram per packet through the stack.
    #[arg(long)]
    #[arg(help_heading = super::heading::SOCKETS)]
    pub gso: bool,
    /// I/O driver of the worker threads.
    ///
    /// I/O driver of the worker threads, both ends: auto (blocking for a
    /// thread with one flow; uring for a thread with 4 or more tcp_rr or
    /// udp_rr flows where the kernel has it; epoll otherwise), epoll, or uring (io_uring:
    /// multishot receive and queued sends for tcp_rr/udp_rr; connect, accept,
    /// receive, send and close as ring operations for tcp_crr/tcp_cc; multishot
    /// poll for the rest; falls back to epoll where unavailable).
    #[arg(long, value_enum, default_value = "auto", value_name = "DRIVER")]
    #[arg(help_heading = super::heading::LOAD)]
    pub driver: DriverChoice,
    /// tcp_crr, tcp_cc: how the client ends a connection.
    ///
    /// tcp_crr, tcp_cc: how the client ends a connection. fin: the server
    /// closes first once it has answered and the client closes on its FIN
    /// (graceful; TIME_WAIT on the server, as netperf's TCP_CRR). rst: the
    /// client aborts with SO_LINGER 0 (a reset) as soon as it has the
    /// response (crr) or the server's FIN (cc): no TIME_WAIT on either end,
    /// two packets fewer per connection (neper tcp_crr's default).
    #[arg(long, value_enum, default_value = "fin", value_name = "MODE")]
    #[arg(help_heading = super::heading::LOAD)]
    pub close: CloseMode,
    /// Pin local worker threads to these CPUs, round-robin (0,2-3).
    #[arg(long, value_parser = cpu_list_arg, value_name = "LIST")]
    #[arg(help_heading = super::heading::LOAD)]
    pub cpu_pin: Option<CpuList>,
    /// Pin the server's worker threads to these CPUs.
    #[arg(long, value_parser = cpu_list_arg, value_name = "LIST")]
    #[arg(help_heading = super::heading::LOAD)]
    pub remote_cpu_pin: Option<CpuList>,
    /// neper's socket options (`--mark`, `--tcp-tx-delay`).
    #[command(flatten)]
    pub sockets: super::SocketTuning,
}

impl LoadArgs {
    /// Fill the plan's load: the flows ([`FlowArgs::apply`]), then the
    /// sizes, socket options, rate, driver and pinning.
    pub fn apply(&self, p: &mut TestPlan) {
        self.flow.apply(p);
        p.burst = self.burst;
        p.delay_ns = self.delay.map_or(0, ns);
        self.sock.apply(p);
    }
}

impl SocketArgs {
    /// Fill the plan's sizes, socket options, rate, driver and pinning.
    pub fn apply(&self, p: &mut TestPlan) {
        if let Some(m) = self.send_size {
            p.send_bytes = m;
        }
        p.recv_bytes = self.recv_size;
        p.congestion = self.cc.clone();
        p.mss = self.mss;
        p.pacing_rate_bps = self.pacing_rate;
        // One flag, the test's own unit: payload bits/s for udp_stream,
        // transactions/s for the request/response tests.
        if p.test.traits().rate == crate::plan::Rate::Transactions {
            p.offered_per_s = self.rate;
        } else {
            p.rate_bps = self.rate;
        }
        p.call_times = self.call_times;
        p.busy_poll_us = self.busy_poll;
        p.prefer_busy_poll = self.prefer_busy_poll;
        p.spin = self.spin;
        p.zerocopy = self.zerocopy;
        p.gso = self.gso;
        p.driver = self.driver;
        p.close = self.close;
        let side = |buf: Option<(u64, u64)>, pin: &Option<CpuList>| SocketOpts {
            send_buffer_bytes: buf.map(|b| b.0),
            recv_buffer_bytes: buf.map(|b| b.1),
            cpu_pin: pin.as_ref().map(|c| c.0.clone()).unwrap_or_default(),
        };
        p.local = side(self.local_buffer, &self.cpu_pin);
        p.remote = side(self.remote_buffer, &self.remote_cpu_pin);
        self.sockets.apply(p);
    }
}

/// The names of `--arrivals`' values, as `Arrivals`' parser takes them.
pub fn arrivals_name(a: Arrivals) -> &'static str {
    match a {
        Arrivals::Fixed => "fixed",
        Arrivals::Poisson => "poisson",
    }
}

impl ValueEnum for Arrivals {
    fn value_variants<'a>() -> &'a [Self] {
        &[Arrivals::Fixed, Arrivals::Poisson]
    }
    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(arrivals_name(*self)))
    }
}

impl ValueEnum for DriverChoice {
    fn value_variants<'a>() -> &'a [Self] {
        &[DriverChoice::Auto, DriverChoice::Epoll, DriverChoice::Uring]
    }
    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(match self {
            DriverChoice::Auto => "auto",
            DriverChoice::Epoll => "epoll",
            DriverChoice::Uring => "uring",
        }))
    }
}

impl ValueEnum for CloseMode {
    fn value_variants<'a>() -> &'a [Self] {
        &[CloseMode::Fin, CloseMode::Rst]
    }
    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(match self {
            CloseMode::Fin => "fin",
            CloseMode::Rst => "rst",
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each value clap offers is the one the plan's own parser (the
    /// server's, and a mix's) reads as the same variant.
    fn same_names<T>()
    where
        T: ValueEnum + std::str::FromStr + PartialEq + std::fmt::Debug,
        <T as std::str::FromStr>::Err: std::fmt::Debug,
    {
        for v in T::value_variants() {
            let name = v.to_possible_value().unwrap().get_name().to_string();
            assert_eq!(&name.parse::<T>().unwrap(), v, "{name}");
        }
    }

    #[test]
    fn value_names_are_the_plans() {
        same_names::<Arrivals>();
        same_names::<DriverChoice>();
        same_names::<CloseMode>();
    }
}
