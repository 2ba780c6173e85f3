//! The result of one test: what every exporter writes. Data only: every
//! figure in it is computed by `analysis` from the run's record; what is
//! here are the types, their names in the JSON, and plain accessors.
//!
//! Names here are a contract (scripts parse the JSON); they are documented in
//! docs/json.md, and schema/thrum.result.v1.json is generated from these
//! types (`JsonSchema` beside `Serialize`, doc comments as descriptions;
//! `cargo xtask schema`, see `export::schema`).
//! Intervals never straddle phases, so the measurement window's figures are
//! exactly the sum of its intervals.

use serde::{Deserialize, Serialize};

use crate::plan::Phase;
use crate::plan::{TestKind, TestPlan};
use crate::sensors::{CpuUsage, Rusage};
use crate::stats::counters::Counts;
use crate::stats::latency::LatencySummary;
use crate::warning::{Warning, Warnings};

pub mod fleet;
pub mod one_way;
pub use fleet::{ClientInterval, ClientSummary, ClockOffset, FleetTiming};

pub const SCHEMA: &str = "thrum.result.v1";

/// A name the result holds as `&'static str`: spelled through this alias
/// because serde would otherwise borrow a `&str` field from the input
/// (and ask the input to live for `'static`).
type Name = &'static str;

/// A name the result holds as `&'static str` (its schema, a unit, a
/// part's direction), read back from a saved result (`thrum report`).
/// Every such name is one of a few short words, and a saved result is read
/// once per process, so the string is leaked rather than every exporter
/// taking a lifetime.
fn static_str<'de, D: serde::Deserializer<'de>>(d: D) -> Result<&'static str, D::Error> {
    Ok(String::deserialize(d)?.leak())
}

/// A field that is absent (None), null (Some(None)) or a value: serde
/// reads a null as absent unless told that a present field is Some.
fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// [`static_str`] for an optional name.
fn static_opt_str<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<&'static str>, D::Error> {
    Ok(Option::<String>::deserialize(d)?.map(|s| &*s.leak()))
}

#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TestResult {
    #[serde(deserialize_with = "static_str")]
    pub schema: Name,
    pub test: TestKind,
    pub spec: Spec,
    pub environment: Environment,
    /// Where each end ran: versions, kernel, CPU, interface, offloads, coalescing, sysctls.
    pub provenance: Provenances,
    pub intervals: Vec<Interval>,
    pub summary: Summary,
    /// Every run of the test: one, or several with --iterations.
    #[schemars(length(min = 1))]
    pub iterations: Vec<Iteration>,
    /// The confidence interval of the mean over the iterations, when asked for.
    pub confidence: Option<Confidence>,
    /// A run from many agents (`--from`): each agent's clock, and the
    /// target's, against the controller's (docs/fleet.md, "Clocks").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clock: Vec<ClockOffset>,
}

/// Both ends' provenance; the server's is null when its final report did not arrive.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Provenances {
    pub local: Option<crate::sensors::Provenance>,
    pub remote: Option<crate::sensors::Provenance>,
}

/// One run's figures, when the test is repeated.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Iteration {
    #[schemars(range(min = 1))]
    pub index: u32,
    /// The figure of merit (bits/s or transactions/s) and its unit.
    pub figure: f64,
    #[schemars(extend("enum" = ["bit/s", "trans/s"]))]
    #[serde(deserialize_with = "static_str")]
    pub unit: Name,
    pub duration_s: f64,
    pub local_cpu_util_percent: Option<f64>,
    pub remote_cpu_util_percent: Option<f64>,
    /// Each end's headline service demand in this run (µs per transaction,
    /// or per KB for streams): the summary's is their mean, so a reader can
    /// check it and see the spread.
    pub local_service_demand_us_per_tran: Option<f64>,
    pub local_service_demand_us_per_kb: Option<f64>,
    pub remote_service_demand_us_per_tran: Option<f64>,
    pub remote_service_demand_us_per_kb: Option<f64>,
    pub error: Option<String>,
}

impl Iteration {
    pub fn of(index: u32, r: &TestResult) -> Iteration {
        let (figure, unit) = r.headline();
        Iteration {
            index,
            figure,
            unit,
            duration_s: r.summary.duration_s,
            local_cpu_util_percent: r.summary.local.cpu_util_percent,
            remote_cpu_util_percent: r.summary.remote.cpu_util_percent,
            local_service_demand_us_per_tran: r.summary.local.service_demand_us_per_tran,
            local_service_demand_us_per_kb: r.summary.local.service_demand_us_per_kb,
            remote_service_demand_us_per_tran: r.summary.remote.service_demand_us_per_tran,
            remote_service_demand_us_per_kb: r.summary.remote.service_demand_us_per_kb,
            error: r.summary.error.clone(),
        }
    }
}

/// netperf's -i/-I: the interval of the mean of the figure of merit.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Confidence {
    /// 95 or 99 (percent).
    #[schemars(extend("enum" = [95, 99]))]
    pub level: u32,
    /// The whole interval as a percentage of the mean (5: the mean ± 2.5 %).
    #[schemars(range(max = 100), extend("exclusiveMinimum" = 0))]
    pub width_percent_requested: f64,
    /// The figure of merit's interval; null with one iteration.
    pub width_percent_achieved: Option<f64>,
    /// Every interval (figure, and CPU utilisation where measured) within the width.
    pub achieved: bool,
    #[schemars(range(min = 1))]
    pub iterations_min: u32,
    #[schemars(range(min = 1))]
    pub iterations_max: u32,
    #[schemars(range(min = 1))]
    pub iterations_run: u32,
    /// Mean, sample standard deviation and half-width of the figure of merit.
    pub mean: f64,
    pub stddev: Option<f64>,
    pub half_width: Option<f64>,
    pub local_cpu_width_percent_achieved: Option<f64>,
    pub remote_cpu_width_percent_achieved: Option<f64>,
}
/// The plan plus where it ran.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
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

/// Where the client ran. Open: more facts (NICs, sysctls, CPU) will be added.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Environment {
    pub thrum_version: String,
    pub command_line: Vec<String>,
    pub hostname: String,
    pub kernel: String,
    pub machine: String,
    pub cpu_model: String,
    #[schemars(range(min = 1))]
    pub cpus: usize,
    /// Server software as stated in its hello.
    pub server_software: Option<String>,
    /// Readiness driver of each worker thread, this end and the server's.
    pub local_drivers: Vec<String>,
    pub remote_drivers: Vec<String>,
    /// UDP tests: how datagrams move (batched sendmmsg/recvmmsg, or one per call).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp_io: Option<String>,
    /// This `thrum run`'s identity (netperf's UUID): a random RFC 4122
    /// version 4 UUID, or what `--uuid` gave; the same for every
    /// iteration of the run. Empty in results of older versions.
    #[serde(default)]
    pub uuid: String,
    /// `--brand TEXT` (netperf's `-B`: RESULT_BRAND), to tell results apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub brand: Option<String>,
}

impl Environment {
    /// This end's basics, from the same readings as its provenance.
    pub fn gather() -> Environment {
        let p = crate::sensors::Provenance::gather(None);
        let k = p.kernel.unwrap_or_default();
        Environment {
            thrum_version: p.thrum_version,
            command_line: std::env::args().collect(),
            hostname: p.hostname.unwrap_or_default(),
            kernel: format!("{} {}", k.sysname, k.release),
            machine: k.machine,
            cpu_model: p.cpu_model.unwrap_or_default(),
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            ..Environment::default()
        }
    }

    /// The drivers one end's workers ran (`local_drivers` or
    /// `remote_drivers`), each with how many workers ran it, in the order
    /// they first appear: `--driver auto` may give a worker of 4 flows
    /// io_uring and its neighbour of 3 epoll.
    pub fn driver_counts(drivers: &[String]) -> Vec<(&str, usize)> {
        let mut out: Vec<(&str, usize)> = Vec::new();
        for d in drivers {
            match out.iter_mut().find(|(name, _)| name == d) {
                Some((_, n)) => *n += 1,
                None => out.push((d, 1)),
            }
        }
        out
    }
}

/// One interim sample period, on both ends.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
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
    /// Latency of the transactions that completed in this interval (RR tests, measure phase).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ns: Option<LatencySummary>,
    /// Open loop (--rate): their service time, from the actual send.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_latency_ns: Option<LatencySummary>,
    /// `--one-way`: the way up and the way down in this interval (a live
    /// row corrected by the offset known so far; the result's by every
    /// estimate of the run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owd_ns: Option<one_way::IntervalOneWay>,
    /// A mix with bulk flows: Jain's index over this interval's per-flow
    /// goodputs of each direction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fairness: Option<Fairness>,
    /// A mix, `--json-stream` only: each part's figures in this interval
    /// (the final result has them in `summary.parts[].intervals`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<PartInterval>,
    /// The client interface's utilisation each way over this interval, from
    /// its counters read at the interval's two ticks (as the summary's over
    /// the window); null where the link speed is unknown.
    pub link_util_percent: LinkUtil,
    /// A phased mix: the segment of the measurement window the interval
    /// lies in (idle, loaded, drain, recovery); absent before and outside
    /// them and for a single test.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_phase: Option<LoadPhase>,
    /// tcp_stream, tcp_maerts, tcp_bidir (not in a mix): the sending
    /// sockets' TCP_INFO over this interval, as iperf3's Retr and Cwnd;
    /// absent for other tests and from older servers' ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_info: Option<IntervalTcpInfo>,
    /// The server host's CPU utilisation over this interval (%, 0–100 of
    /// all its CPUs), from /proc/stat ticks its samples carry; absent from
    /// older servers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub remote_cpu_util_percent: Option<f64>,
    /// Each flow's latency in this interval, by flow id (null where the
    /// flow completed no transaction), to 2 significant digits; kept only
    /// for `--samples` and `--export-csv` (their per-flow latency columns),
    /// absent otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flow_latency_ns: Vec<Option<LatencySummary>>,
    /// Each end's process resource usage over this interval, from
    /// getrusage at the interval's two ticks (the samples' usage columns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rusage: Option<IntervalRusage>,
    /// A run from many agents (`--from`): each agent's figures in this
    /// interval, on the controller's clock; `sum` is theirs added.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clients: Vec<ClientInterval>,
}

/// Which end's socket a TCP_INFO reading is from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TcpInfoEnd {
    Client,
    Server,
}

/// The sending sockets' TCP_INFO over one interval: the sockets that send
/// data (the client's in tcp_stream, the server's in tcp_maerts, both
/// ends' in tcp_bidir and `--both`), each read once at every tick on the
/// control thread. Retransmissions are summed over them; the congestion
/// window and the RTT are their mean (a flow's own are in `sockets`); the
/// rates are summed, as the session's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IntervalTcpInfo {
    /// Segments retransmitted in this interval (the growth of
    /// tcpi_total_retrans between the interval's two ticks), summed.
    pub retransmits: u64,
    /// Congestion window at the interval's end, bytes (snd_cwnd ×
    /// snd_mss, iperf3's Cwnd), the sockets' mean.
    pub cwnd: u64,
    /// Smoothed RTT and its mean deviation at the interval's end, µs, the
    /// sockets' mean.
    pub srtt_us: u64,
    pub rttvar_us: u64,
    /// The stack's pacing rate at the interval's end, bits/s, summed
    /// (null where a socket's is unlimited or unknown).
    pub pacing_rate_bps: Option<u64>,
    /// The latest delivery rate sample, bits/s, summed (Linux 4.9+).
    pub delivery_rate_bps: Option<u64>,
    /// Each sending socket's own figures, in one order for the run.
    pub sockets: Vec<SocketTcpInfo>,
}

/// One sending socket's TCP_INFO over an interval (units as in
/// [`IntervalTcpInfo`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SocketTcpInfo {
    pub end: TcpInfoEnd,
    pub retransmits: u64,
    pub cwnd: u64,
    pub srtt_us: u64,
    pub rttvar_us: u64,
    pub pacing_rate_bps: Option<u64>,
    pub delivery_rate_bps: Option<u64>,
}

/// Each end's process resource usage over one interval: CPU seconds,
/// faults and context switches are the change between the interval's two
/// ticks; `max_rss_kb` is the high-water mark at its end. The whole
/// process on each end, so a server serving other sessions counts them too.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IntervalRusage {
    pub local: crate::sensors::Rusage,
    /// Absent where the server's samples carried no usage (an older
    /// server) or one of the two did not arrive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<crate::sensors::Rusage>,
}

/// A phased mix's segments of its measurement window, in their order
/// (docs/latency-under-load.md): no load, bulk load, the bulk flows'
/// buffers draining, no load again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LoadPhase {
    Idle,
    Loaded,
    Drain,
    Recovery,
}

impl LoadPhase {
    /// The segments in their order, as the bounds of a record delimit them.
    pub const ORDER: [LoadPhase; 4] = [
        LoadPhase::Idle,
        LoadPhase::Loaded,
        LoadPhase::Drain,
        LoadPhase::Recovery,
    ];

    pub fn name(self) -> &'static str {
        match self {
            LoadPhase::Idle => "idle",
            LoadPhase::Loaded => "loaded",
            LoadPhase::Drain => "drain",
            LoadPhase::Recovery => "recovery",
        }
    }
}

impl Interval {
    /// The interval's figure of merit (bits/s or transactions/s), if it has one.
    pub fn headline(&self) -> Option<f64> {
        self.sum.throughput_bps.or(self.sum.transactions_per_s)
    }
}

/// The open-loop generator's lateness behind its schedule, ns.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GeneratorLag {
    pub p50: u64,
    pub p99: u64,
    pub max: u64,
}

/// How steady the figure of merit was over the measurement window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Stability {
    /// Coefficient of variation (standard deviation / mean) of the per-interval figure.
    pub cv: Option<f64>,
    /// Change of the mean of the last third of the intervals against the first third, in percent.
    pub trend_percent: Option<f64>,
    pub warnings: Vec<Warning>,
}

/// Counts of a window on both ends, and the rates they give.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Figures {
    pub local: Counts,
    pub remote: Counts,
    /// Receiver's goodput (stream tests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput_bps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput_bps_c2s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput_bps_s2c: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transactions_per_s: Option<f64>,
    /// udp_stream: the receiver's RFC 3550 interarrival jitter at the
    /// interval's end, ns, the mean over the flows that received in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter_ns: Option<u64>,
}

/// capacity: the estimate of each direction measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CapacityDirections {
    /// Client to server: the client sends the trains, the server times them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub c2s: Option<CapacityEstimate>,
    /// Server to client (`--reverse`, `--both`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s2c: Option<CapacityEstimate>,
}

/// capacity: one direction's estimate, as the summary's top-level fields
/// give it, and the trains it comes from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CapacityEstimate {
    /// The path's bottleneck capacity from the packet trains' dispersion
    /// (the mode of the gaps in the second half of the longest trains),
    /// bits/s of frames (payload + 42 bytes over IPv4, + 62 over IPv6).
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub capacity_bps: f64,
    /// The mode's extent, [low, high] bits/s: neighbouring histogram bins
    /// holding at least half the mode's count.
    pub capacity_interval_bps: [f64; 2],
    /// The probe's frames per second over the estimate.
    pub probe_load_fraction: f64,
    pub shaper: Option<crate::stats::dispersion::Shaper>,
    /// The gaps the estimate comes from, each log-spaced bin (3.7 % wide)
    /// as the rate range its gaps give.
    pub dispersion_histogram: Vec<crate::stats::dispersion::RateBin>,
    /// Trains whose first packet arrived, and those that lost or
    /// reordered one.
    pub trains: u64,
    /// Of those, trains that lost or reordered a packet.
    pub broken: u64,
    /// The trains' datagrams that arrived in the window, and those lost:
    /// missing from a train, in a train missing whole between two that
    /// arrived, or arriving after a later train (the receiver counts them
    /// from the trains' numbers, so losses in `broken` trains count too).
    pub datagrams_received: u64,
    /// The trains' datagrams that did not arrive (as above).
    pub datagrams_lost: u64,
    /// `datagrams_lost` over received plus lost, percent (null: none sent).
    pub loss_percent: Option<f64>,
    /// The rate the sender put its longest trains out at (its time per
    /// datagram in the kernel); null from a peer that does not say.
    pub sender_rate_bps: Option<f64>,
}

/// One end's share of the summary.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rusage: Option<Rusage>,
    /// Overall CPU utilisation of this end's host over the window, percent
    /// (0–100, where 100 is every CPU busy), from /proc/stat.
    #[schemars(range(min = 0, max = 100))]
    pub cpu_util_percent: Option<f64>,
    /// CPUs of this end's host.
    pub cpus: Option<usize>,
    /// /proc/stat over the window: per CPU, split by kind, the busiest CPU, steal.
    pub cpu: Option<CpuUsage>,
    /// This thrum process's rusage over the window only.
    pub rusage_window: Option<Rusage>,
    /// µs of CPU per transaction (RR, CRR, CC tests), from `service_demand_source`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_demand_us_per_tran: Option<f64>,
    /// µs of CPU per KB (1024 bytes) of the figure of merit (stream tests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_demand_us_per_kb: Option<f64>,
    /// Service demand from /proc/stat (host-wide busy time), in the unit above.
    pub service_demand_proc_stat: Option<f64>,
    /// Service demand from the thrum processes' own CPU time on this host.
    pub service_demand_rusage: Option<f64>,
    /// Which one the headline uses: `rusage` on a virtual machine, where
    /// tick-based /proc/stat is unreliable, `proc_stat` elsewhere.
    #[schemars(extend("enum" = ["proc_stat", "rusage", null]))]
    #[serde(deserialize_with = "static_opt_str")]
    pub service_demand_source: Option<Name>,
    /// The interface toward the peer, and its packets over the window.
    pub interface: Option<String>,
    pub tx_packets: Option<u64>,
    pub rx_packets: Option<u64>,
    pub tx_packets_per_s: Option<f64>,
    pub rx_packets_per_s: Option<f64>,
    /// The interface's link speed in bits/s; null where it has none (`lo`).
    pub link_speed_bps: Option<u64>,
    /// The interface's bytes each way over the window as a share of its
    /// link speed, percent; null where the speed or the counters are unknown.
    pub link_util_percent: LinkUtil,
    /// TCP retransmissions of this end's long-lived data connections (TCP_INFO).
    pub tcp_retransmits: Option<u64>,
    /// `--zerocopy` senders: MSG_ZEROCOPY sends, their completions and how
    /// many the kernel copied anyway, over the whole test.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zerocopy: Option<crate::io::zerocopy::ZeroCopyCounts>,
    /// SO_SNDBUF/SO_RCVBUF asked for and as the kernel set them (read back
    /// with getsockopt); absent where the end did not report them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket_buffers: Option<crate::io::socket::SocketBuffers>,
    /// `--busy-poll`, `--prefer-busy-poll`: SO_BUSY_POLL and
    /// SO_PREFER_BUSY_POLL as this end's kernel read them back from a data
    /// socket given them; absent when neither was asked for, or from a
    /// server that does not report them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_poll: Option<crate::io::busypoll::BusyPollSet>,
    /// `--driver uring` (or `auto` where it picked io_uring) with
    /// `--busy-poll`: the NAPI busy polling of this end's io_uring rings as
    /// the kernel read it back (`IORING_REGISTER_NAPI`, Linux 6.9); absent
    /// where no worker ran io_uring, or from a server that does not report it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uring_napi: Option<crate::io::napi::NapiSet>,
    /// `--mark`, `--tcp-tx-delay`: SO_MARK and TCP_TX_DELAY as this end's
    /// kernel read them back from one of its data sockets (a fresh socket
    /// given the same options where the end keeps none open: UDP and the
    /// connection tests); absent when neither was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket_options: Option<crate::plan::sockets::SocketMarks>,
    /// TCP tests: the congestion control this end's data sockets used,
    /// read back with getsockopt(TCP_CONGESTION) from one of them (a fresh
    /// socket given `--cc` where the end keeps none open: the connection
    /// tests); absent for UDP, and from a server that does not report it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion_control: Option<String>,
    /// Bulk tests: how long this end's send and receive calls that moved
    /// data took over the window (netperf's -v 2 histograms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_times: Option<crate::stats::calltime::SendRecvTimes>,
}

/// Link utilisation each way, percent of the link speed: the interface's
/// byte counters over the window (frames from the MAC header on, all of
/// the host's traffic on that interface, not only thrum's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LinkUtil {
    pub tx: Option<f64>,
    pub rx: Option<f64>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Summary {
    /// Length of the measurement window (client clock).
    pub duration_s: f64,
    /// Receiver's goodput in bits/s (stream tests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput_bps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput_bps_c2s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput_bps_s2c: Option<f64>,
    /// The sender's figure in bits/s (stream tests; sum of both senders for bidir).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput_bps_sent: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transactions_per_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transactions: Option<u64>,
    /// Response time: from the request's send (closed loop), or from its
    /// intended start (open loop, --rate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ns: Option<LatencySummary>,
    /// Open loop (--rate): the schedule's figures, their keys at this level
    /// of the JSON; absent in a closed-loop run.
    #[serde(flatten)]
    pub open_loop: Option<OpenLoop>,
    /// udp_rr and tcp_rr `--one-way`: the way up and the way down apart, with the
    /// clock offset's error bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owd_ns: Option<one_way::OneWaySummary>,
    /// The window's latency histogram, HdrHistogram V2 compressed, base64 (see docs/json.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histogram: Option<String>,
    /// Coefficient of variation of the per-interval figure of merit over the window.
    pub stability_cv: Option<f64>,
    /// Last third of the window against the first third, percent.
    pub trend_percent: Option<f64>,
    /// The client's interface toward the server, and its packets/s each way
    /// over the window (as `summary.local`).
    pub interface: Option<String>,
    pub tx_packets_per_s: Option<f64>,
    pub rx_packets_per_s: Option<f64>,
    /// The client interface's link speed and utilisation (as `summary.local`).
    pub link_speed_bps: Option<u64>,
    pub link_util_percent: LinkUtil,
    /// capacity: the path's bottleneck capacity from the packet trains'
    /// dispersion (the mode of their gaps), bits/s of frames.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub capacity_bps: Option<f64>,
    /// capacity: the mode's extent, `[low, high]` bits/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_interval_bps: Option<[f64; 2]>,
    /// capacity: the probe's average load on the link over the estimate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_load_fraction: Option<f64>,
    /// capacity: a token bucket recognised in the trains (null: none).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub shaper: Option<Option<crate::stats::dispersion::Shaper>>,
    /// capacity: the gaps the estimate comes from, as rates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispersion_histogram: Option<Vec<crate::stats::dispersion::RateBin>>,
    /// capacity: each direction measured, apart (`--reverse`, `--both`);
    /// a direction without an estimate is absent (a warning says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_by_direction: Option<CapacityDirections>,
    /// udp_stream: datagrams the client sent in its window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datagrams_sent: Option<u64>,
    /// udp_stream: distinct datagrams the server received in its window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datagrams_received: Option<u64>,
    /// udp_stream: datagrams lost in the window (gaps seen by the receiver,
    /// less those that came late); udp_rr: transactions timed out in the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reordered: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplicates: Option<u64>,
    /// udp_stream: the receiver's RFC 3550 interarrival jitter at the end
    /// of the measurement window (its last interval's), ns, as iperf3's
    /// UDP report gives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter_ns: Option<u64>,
    pub local: Side,
    pub remote: Side,
    /// Seconds from opening the first data socket to the server's `started`:
    /// every flow connected, presented and accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup_s: Option<f64>,
    /// `warnings` (sentences) and `diagnostics` (`{code, message}`).
    #[serde(flatten)]
    pub warnings: Warnings,
    /// Why the test failed; null on success.
    pub error: Option<String>,
    /// A mix (`--mix`, presets): each part's figures as it would have them
    /// alone; the fields above then hold only what the whole session shares.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<PartSummary>,
    /// A mix with latency probes and bulk flows: the probes' latency and the
    /// goodput each way in the idle, loaded and recovery phases (in a
    /// probe's entry of `parts`: that probe's latency alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases: Option<ProbePhases>,
    /// Loaded minus idle probe latency, ns (p50, p99); in a probe's entry
    /// of `parts`, that probe's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_under_load_ns: Option<LatencyUnderLoad>,
    /// Jain's fairness index over the bulk flows of each direction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fairness: Option<Fairness>,
    /// A phased mix with `--one-way`: which way the load's queue is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_direction: Option<one_way::QueueDirection>,
    /// A run from many agents (`--from`): each agent's own summary; the
    /// figures above are theirs added (latency: their histograms merged).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clients: Vec<ClientSummary>,
    /// A run from many agents: Jain's index over the agents' figures of
    /// merit, (Σx)² / (n·Σx²): 1 when all are equal, 1/n when one has all;
    /// absent when an agent did not complete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fairness_jain: Option<f64>,
    /// A run from many agents: its set-up, barrier and start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet: Option<FleetTiming>,
}

/// Open loop (`--rate`): what the schedule offered against what was done,
/// and the two other clocks (service time from the actual send, the
/// generator's lag behind its schedule). Flattened into the summary, so
/// the keys are the summary's own.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OpenLoop {
    /// Open loop (--rate): transactions/s offered by the schedule.
    pub offered_per_s: f64,
    /// Open loop: transactions/s completed in the window.
    pub achieved_per_s: f64,
    /// Open loop: requests sent more than one schedule gap after their intended start,
    /// in the window.
    pub late: u64,
    /// Open loop: service time, from each request's actual send.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_latency_ns: Option<LatencySummary>,
    /// Open loop: how far behind its schedule the generator sent requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator_lag_ns: Option<GeneratorLag>,
    /// Open loop: the mean number of transactions in the system (intended start
    /// passed, response not in) over the window, from the flows' own time
    /// integral; by Little's law ≈ achieved_per_s × mean response time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_in_flight: Option<f64>,
}

/// One part of a mix, with the single-test summary it would have alone.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PartSummary {
    pub name: String,
    pub test: TestKind,
    #[schemars(range(min = 1))]
    pub flows: u32,
    /// `up` (client to server), `down`, `both`, or `rr` for request/response.
    #[schemars(extend("enum" = ["up", "down", "both", "rr"]))]
    #[serde(deserialize_with = "static_str")]
    pub direction: Name,
    /// The TOS byte its data sockets carried, when marked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tos: Option<u8>,
    /// Goodput of each of its flows over the measurement window, bits/s
    /// (the receiver's count; stream parts).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flow_throughput_bps: Vec<f64>,
    /// TCP retransmissions of its long-lived connections, both ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_retransmits: Option<u64>,
    /// The single-test summary: a probe's over the measurement window, a
    /// bulk part of a phased mix's over the loaded phase it ran in (so its
    /// `throughput_bps` is its flows' goodputs summed).
    #[serde(flatten)]
    pub summary: Box<Summary>,
    /// The part's own intervals: its figures and latency, interval by interval.
    pub intervals: Vec<PartInterval>,
}

/// One interval of one part.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PartInterval {
    /// The part's name: in a stream record's `parts`, not in the part's
    /// own `intervals`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub index: u32,
    pub phase: Phase,
    pub start_s: f64,
    pub end_s: f64,
    pub sum: Figures,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ns: Option<LatencySummary>,
    /// Retransmissions of the part's TCP connections in this interval,
    /// both ends (the client's alone when the server's sample is missing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_retransmits: Option<u64>,
}

/// The three probe phases of a latency-under-load run.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProbePhases {
    pub idle: PhaseFigures,
    pub loaded: PhaseFigures,
    pub recovery: PhaseFigures,
    /// From the end of the loaded phase to the start of the recovery one,
    /// seconds: the bulk flows' senders emptying their socket buffers
    /// through the path after they stopped writing.
    pub drain_s: f64,
}

/// What the probes and the bulk flows did in one phase.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PhaseFigures {
    pub start_s: f64,
    pub end_s: f64,
    /// Every probe's response times in the phase, merged.
    pub probe_latency_ns: Option<LatencySummary>,
    /// The same merged histogram in full, HdrHistogram V2 compressed,
    /// base64 (as `summary.histogram`): the CDF the report draws, and any
    /// percentile later; absent from older results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_latency_histogram: Option<String>,
    pub throughput_up_bps: f64,
    pub throughput_down_bps: f64,
    /// `--one-way`: the probes' ways up and down in the phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_way_ns: Option<one_way::PhaseOneWay>,
}

/// Loaded minus idle, ns: what the load added to the probes' latency.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LatencyUnderLoad {
    pub p50: i64,
    pub p99: i64,
}

/// Jain's index, (Σx)² / (n·Σx²), over the per-flow goodputs of each
/// direction; null for a direction with no bulk flow.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Fairness {
    pub up: Option<f64>,
    pub down: Option<f64>,
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

/// Results for unit tests, each field at its empty default, so that a test
/// writes out only what it is about: a result of a test (or of a plan), an
/// interval. Used by the tests of `control`, `analysis` and the exporters.
#[cfg(test)]
pub(crate) mod fixtures {
    use super::*;

    /// A result of `test`'s new plan against a server called `mock`, with
    /// nothing measured: no interval, an empty summary, no iteration.
    pub(crate) fn result(test: TestKind) -> TestResult {
        result_of(TestPlan::new(test))
    }

    /// A result of `plan`, as [`result`].
    pub(crate) fn result_of(plan: TestPlan) -> TestResult {
        TestResult {
            schema: SCHEMA,
            test: plan.test,
            spec: Spec {
                plan,
                server: "mock".into(),
                server_address: None,
                embedded_server: false,
                bind: None,
            },
            environment: Environment::default(),
            provenance: Provenances::default(),
            intervals: Vec::new(),
            summary: Summary::default(),
            iterations: Vec::new(),
            confidence: None,
            clock: Vec::new(),
        }
    }

    /// Measure interval `index`, `len_s` seconds from `start_s` on the
    /// client's clock (ending as many seconds after 1_800_000_000 on the
    /// wall clock, as `analysis::record::fixtures` samples do), with no
    /// flow counted and every figure empty.
    pub(crate) fn interval(index: u32, start_s: f64, len_s: f64) -> Interval {
        Interval {
            index,
            phase: Phase::Measure,
            start_s,
            end_s: start_s + len_s,
            unix_end_s: 1_800_000_000.0 + start_s + len_s,
            local: Vec::new(),
            remote: Vec::new(),
            sum: Figures::default(),
            latency_ns: None,
            service_latency_ns: None,
            owd_ns: None,
            fairness: None,
            parts: Vec::new(),
            link_util_percent: LinkUtil::default(),
            load_phase: None,
            tcp_info: None,
            remote_cpu_util_percent: None,
            flow_latency_ns: Vec::new(),
            rusage: None,
            clients: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_counts_group_workers_in_first_seen_order() {
        let list = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            Environment::driver_counts(&list(&["uring", "epoll", "uring"])),
            vec![("uring", 2), ("epoll", 1)]
        );
        assert!(Environment::driver_counts(&[]).is_empty());
    }
}
