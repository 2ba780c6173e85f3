//! The result of one test: what every exporter writes.
//!
//! Names here are a contract (scripts parse the JSON); they are documented in
//! docs/json.md, and schema/thrum.result.v1.json is generated from these
//! types (`JsonSchema` beside `Serialize`, doc comments as descriptions;
//! `cargo xtask schema`, see `export::schema`).
//! Intervals never straddle phases, so the measurement window's figures are
//! exactly the sum of its intervals.

use serde::Serialize;

use crate::plan::Phase;
use crate::plan::{TestKind, TestPlan};
use crate::sensors::window::WindowStats;
use crate::sensors::{CpuUsage, Rusage};
use crate::stats::counters::Counts;
use crate::stats::latency::LatencySummary;
use crate::warning::{Code, Warning, Warnings};
use crate::workload::kinds::Merit;

pub const SCHEMA: &str = "thrum.result.v1";

#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct TestResult {
    pub schema: &'static str,
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
}

/// Both ends' provenance; the server's is null when its final report did not arrive.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct Provenances {
    pub local: Option<crate::sensors::Provenance>,
    pub remote: Option<crate::sensors::Provenance>,
}

/// One run's figures, when the test is repeated.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Iteration {
    #[schemars(range(min = 1))]
    pub index: u32,
    /// The figure of merit (bits/s or transactions/s) and its unit.
    pub figure: f64,
    #[schemars(extend("enum" = ["bit/s", "trans/s"]))]
    pub unit: &'static str,
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
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
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
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
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
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub udp_io: Option<String>,
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
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_ns: Option<LatencySummary>,
    /// Open loop (--rate): their service time, from the actual send.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_latency_ns: Option<LatencySummary>,
    /// A mix with bulk flows: Jain's index over this interval's per-flow
    /// goodputs of each direction.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fairness: Option<Fairness>,
    /// A mix, `--json-stream` only: each part's figures in this interval
    /// (the final result has them in `summary.parts[].intervals`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<PartInterval>,
    /// The client interface's utilisation each way over this interval, from
    /// its counters read at the interval's two ticks (as the summary's over
    /// the window); null where the link speed is unknown.
    pub link_util_percent: LinkUtil,
}

impl Interval {
    /// The interval's figure of merit (bits/s or transactions/s), if it has one.
    pub fn headline(&self) -> Option<f64> {
        self.sum.throughput_bps.or(self.sum.transactions_per_s)
    }
}

/// The open-loop generator's lateness behind its schedule, ns.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct GeneratorLag {
    pub p50: u64,
    pub p99: u64,
    pub max: u64,
}

/// How steady the figure of merit was over the measurement window.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Stability {
    /// Coefficient of variation (standard deviation / mean) of the per-interval figure.
    pub cv: Option<f64>,
    /// Change of the mean of the last third of the intervals against the first third, in percent.
    pub trend_percent: Option<f64>,
    pub warnings: Vec<Warning>,
}

/// A trend beyond this (in percent, either way) gets a warning.
pub const TREND_WARN_PERCENT: f64 = 10.0;

impl Stability {
    /// Judge the measure-phase intervals. Intervals whose figure needs the
    /// server's sample and lack it are left out.
    pub fn of(plan: &TestPlan, measure: &[&Interval], quota_limited: bool) -> Stability {
        // A figure of bytes the client sends is counted by the server.
        let d = plan.test.desc();
        let needs_remote = d.merit == Merit::Throughput && d.ways(plan).client_sends;
        let xs: Vec<f64> = measure
            .iter()
            .filter(|i| !needs_remote || !i.remote.is_empty())
            .filter_map(|i| i.headline())
            .collect();
        let mut st = Stability::default();
        let n = xs.len();
        if n >= 2 {
            let mean = xs.iter().sum::<f64>() / n as f64;
            let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
            st.cv = (mean > 0.0).then(|| var.sqrt() / mean);
        }
        if n >= 3 {
            let third = n / 3;
            let avg = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
            let (first, last) = (avg(&xs[..third]), avg(&xs[n - third..]));
            if first > 0.0 {
                let t = 100.0 * (last - first) / first;
                st.trend_percent = Some(t);
                if t.abs() > TREND_WARN_PERCENT {
                    st.warnings.push(Warning::new(Code::Trend, format!(
                        "the figure trends {t:+.1} % from the first third of the window to the last: the system did not reach a steady state (longer --warmup or --duration?)"
                    )));
                }
            }
        }
        // A flow that stops moving while the others go on (neper's
        // correlation coefficient stays near 1 when that happens; this does
        // not). Count-limited runs are left out: flows that met their quota idle.
        if !quota_limited {
            let moved = |i: &Interval, f: usize| {
                i.local
                    .get(f)
                    .is_some_and(|c| c.bytes_sent + c.bytes_received + c.transactions > 0)
            };
            let flows = measure.iter().map(|i| i.local.len()).max().unwrap_or(0);
            for f in 0..flows {
                let stalled: Vec<u32> = measure
                    .iter()
                    .filter(|i| !moved(i, f) && (0..flows).any(|g| g != f && moved(i, g)))
                    .map(|i| i.index)
                    .collect();
                if let (Some(a), Some(b)) = (stalled.first(), stalled.last()) {
                    st.warnings.push(Warning::new(Code::FlowStalled, format!(
                        "flow {f} moved nothing in {} of {} measure intervals while other flows did (intervals {a}..={b})",
                        stalled.len(),
                        measure.len()
                    )));
                }
            }
        }
        st
    }
}

/// Counts of a window on both ends, and the rates they give.
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
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
        plan: &TestPlan,
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
        // Bytes count where they are received: the server's receive counts
        // carry the client's sending direction, ours the server's.
        let d = plan.test.desc();
        let w = d.ways(plan);
        match d.merit {
            Merit::Throughput => {
                let c2s = w
                    .client_sends
                    .then(|| rate(remote.bytes_received * 8, remote_s));
                let s2c = w
                    .client_receives
                    .then(|| rate(local.bytes_received * 8, local_s));
                if w.client_sends && w.client_receives {
                    f.throughput_bps_c2s = c2s;
                    f.throughput_bps_s2c = s2c;
                }
                f.throughput_bps = Some(c2s.unwrap_or(0.0) + s2c.unwrap_or(0.0));
            }
            Merit::Transactions => f.transactions_per_s = Some(rate(local.transactions, local_s)),
        }
        f
    }
}

/// capacity: the estimate of each direction measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct CapacityDirections {
    /// Client to server: the client sends the trains, the server times them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub c2s: Option<CapacityEstimate>,
    /// Server to client (`--reverse`, `--both`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub s2c: Option<CapacityEstimate>,
}

/// capacity: one direction's estimate, as the summary's top-level fields
/// give it, and the trains it comes from.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
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
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_demand_us_per_tran: Option<f64>,
    /// µs of CPU per KB (1024 bytes) of the figure of merit (stream tests).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_demand_us_per_kb: Option<f64>,
    /// Service demand from /proc/stat (host-wide busy time), in the unit above.
    pub service_demand_proc_stat: Option<f64>,
    /// Service demand from the thrum processes' own CPU time on this host.
    pub service_demand_rusage: Option<f64>,
    /// Which one the headline uses: `rusage` on a virtual machine, where
    /// tick-based /proc/stat is unreliable, `proc_stat` elsewhere.
    #[schemars(extend("enum" = ["proc_stat", "rusage", null]))]
    pub service_demand_source: Option<&'static str>,
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zerocopy: Option<crate::io::zerocopy::ZeroCopyCounts>,
    /// SO_SNDBUF/SO_RCVBUF asked for and as the kernel set them (read back
    /// with getsockopt); absent where the end did not report them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub socket_buffers: Option<crate::io::socket::SocketBuffers>,
    /// Bulk tests: how long this end's send and receive calls that moved
    /// data took over the window (netperf's -v 2 histograms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_times: Option<crate::stats::calltime::SendRecvTimes>,
}

/// Link utilisation each way, percent of the link speed: the interface's
/// byte counters over the window (frames from the MAC header on, all of
/// the host's traffic on that interface, not only thrum's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct LinkUtil {
    pub tx: Option<f64>,
    pub rx: Option<f64>,
}

/// Service demands from the two sources that differ by more than this
/// (percent of the smaller) get a warning.
pub const DEMAND_DISAGREE_PERCENT: f64 = 15.0;
/// CPU busy beyond thrum's own, as a share of the machine, that gets a warning.
pub const OTHER_BUSY_PERCENT: f64 = 10.0;
/// Steal time, percent of the window, that gets a warning.
pub const STEAL_WARN_PERCENT: f64 = 5.0;

/// The service demand to headline and its source: process CPU time on a
/// virtual machine, where tick-based /proc/stat misreads; /proc/stat
/// elsewhere (netperf's); whichever exists when only one does.
pub fn headline_demand(
    proc_stat: Option<f64>,
    rusage: Option<f64>,
    hypervisor: bool,
) -> (Option<f64>, Option<&'static str>) {
    match (proc_stat, rusage) {
        (Some(_), Some(r)) if hypervisor => (Some(r), Some("rusage")),
        (Some(p), _) => (Some(p), Some("proc_stat")),
        (None, Some(r)) => (Some(r), Some("rusage")),
        (None, None) => (None, None),
    }
}

/// What a side's CPU figures are computed from.
pub struct CpuBasis<'a> {
    /// "local" or "remote", for warnings.
    pub end: &'static str,
    pub window: &'a WindowStats,
    /// The figure of merit: transactions/s, or bytes/s for streams.
    pub units_per_s: f64,
    pub per_kb: bool,
    /// CPU seconds of the other thrum process in the window when it runs
    /// on this host as a separate process (a server on loopback), else 0.
    pub other_thrum_cpu_s: f64,
    pub hypervisor: bool,
    /// Add warnings (false for the second end on one host: the same machine twice).
    pub warn: bool,
}

impl Side {
    /// Fill the CPU, service demand and packet fields from the window's readings.
    pub fn apply_window(&mut self, b: &CpuBasis, all_warnings: &mut Vec<Warning>) {
        let mut ignored = Vec::new();
        let warnings = if b.warn { all_warnings } else { &mut ignored };
        let w = b.window;
        self.rusage_window = w.rusage;
        self.interface = w.interface.clone();
        if let Some(p) = w.packets {
            self.tx_packets = Some(p.tx_packets);
            self.rx_packets = Some(p.rx_packets);
            if w.elapsed_s > 0.0 {
                self.tx_packets_per_s = Some(p.tx_packets as f64 / w.elapsed_s);
                self.rx_packets_per_s = Some(p.rx_packets as f64 / w.elapsed_s);
            }
        }
        self.link_speed_bps = w.link_speed_bps;
        if let (Some(p), Some(speed)) = (w.packets, w.link_speed_bps) {
            let util = |b| crate::sensors::link_util_percent(b, w.elapsed_s, speed);
            self.link_util_percent = LinkUtil {
                tx: util(p.tx_bytes),
                rx: util(p.rx_bytes),
            };
        }
        let units = if b.per_kb {
            b.units_per_s / 1024.0
        } else {
            b.units_per_s
        };
        let unit = if b.per_kb { "µs/KB" } else { "µs/Tr" };
        let cpu = w.cpu.as_ref().filter(|c| c.ticks > 0 && c.cpus > 0);
        if let Some(c) = cpu {
            self.cpu = Some(c.clone());
            self.cpu_util_percent = Some(c.overall.util_percent);
            self.cpus = Some(c.cpus);
            if c.overall.steal_percent > STEAL_WARN_PERCENT {
                warnings.push(Warning::new(Code::CpuStolen, format!(
                    "{} host: the hypervisor stole {:.1} % of CPU time in the window; CPU figures and rates suffer",
                    b.end, c.overall.steal_percent
                )));
            }
        }
        let (proc_stat, rusage) = if units > 0.0 && w.elapsed_s > 0.0 {
            (
                cpu.map(|c| crate::sensors::service_demand(c.overall.util_percent, c.cpus, units)),
                w.rusage.map(|r| {
                    crate::sensors::service_demand_from_cpu_s(
                        r.cpu_s() + b.other_thrum_cpu_s,
                        units * w.elapsed_s,
                    )
                }),
            )
        } else {
            (None, None)
        };
        self.service_demand_proc_stat = proc_stat;
        self.service_demand_rusage = rusage;
        let (headline, source) = headline_demand(proc_stat, rusage, b.hypervisor);
        self.service_demand_source = source;
        if b.per_kb {
            self.service_demand_us_per_kb = headline;
        } else {
            self.service_demand_us_per_tran = headline;
        }
        if let (Some(p), Some(r)) = (proc_stat, rusage) {
            let lo = p.min(r);
            if lo > 0.0 && 100.0 * (p - r).abs() / lo > DEMAND_DISAGREE_PERCENT {
                warnings.push(Warning::new(Code::ServiceDemandDisagrees, format!(
                    "{} service demand: /proc/stat gives {p:.3} {unit}, thrum's own CPU time {r:.3} {unit}, {:.0} % apart; the headline uses {}{}",
                    b.end,
                    100.0 * (p - r).abs() / lo,
                    source.unwrap_or("-"),
                    if b.hypervisor {
                        " (virtual machine: tick-based /proc/stat is unreliable)"
                    } else {
                        ""
                    }
                )));
            }
        }
        // Busy time that thrum did not spend: other processes skew service demand.
        if let (Some(c), Some(r)) = (cpu, w.rusage) {
            let machine_s = c.cpus as f64 * w.elapsed_s;
            let busy_s = c.overall.util_percent / 100.0 * machine_s;
            let other_s = busy_s - r.cpu_s() - b.other_thrum_cpu_s;
            if machine_s > 0.0 && 100.0 * other_s / machine_s > OTHER_BUSY_PERCENT {
                warnings.push(Warning::new(Code::CpuBusyElsewhere, format!(
                    "{} host: CPUs were busy beyond thrum's own use in the window ({:.2} CPU-s of {:.2}, {:.0} % of the machine): other processes or interrupt work skew service demand",
                    b.end,
                    other_s,
                    machine_s,
                    100.0 * other_s / machine_s
                )));
            }
        }
    }
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
            ..Side::default()
        }
    }
}

#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
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
    /// Response time: from the request's send (closed loop), or from its
    /// intended start (open loop, --rate).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_ns: Option<LatencySummary>,
    /// Open loop (--rate): transactions/s offered by the schedule.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offered_per_s: Option<f64>,
    /// Open loop: transactions/s completed in the window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub achieved_per_s: Option<f64>,
    /// Open loop: requests sent more than one schedule gap after their
    /// intended start, in the window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub late: Option<u64>,
    /// Open loop: service time, from each request's actual send.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_latency_ns: Option<LatencySummary>,
    /// Open loop: how far behind its schedule the generator sent requests.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generator_lag_ns: Option<GeneratorLag>,
    /// Open loop: the mean number of transactions in the system (intended
    /// start passed, response not in) over the window, from the flows' own
    /// time integral; by Little's law ≈ achieved_per_s × mean response time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_in_flight: Option<f64>,
    /// The window's latency histogram, HdrHistogram V2 compressed, base64 (see docs/json.md).
    #[serde(skip_serializing_if = "Option::is_none")]
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
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub capacity_bps: Option<f64>,
    /// capacity: the mode's extent, `[low, high]` bits/s.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity_interval_bps: Option<[f64; 2]>,
    /// capacity: the probe's average load on the link over the estimate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe_load_fraction: Option<f64>,
    /// capacity: a token bucket recognised in the trains (null: none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shaper: Option<Option<crate::stats::dispersion::Shaper>>,
    /// capacity: the gaps the estimate comes from, as rates.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dispersion_histogram: Option<Vec<crate::stats::dispersion::RateBin>>,
    /// capacity: each direction measured, apart (`--reverse`, `--both`);
    /// a direction without an estimate is absent (a warning says why).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity_by_direction: Option<CapacityDirections>,
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
    /// `warnings` (sentences) and `diagnostics` (`{code, message}`).
    #[serde(flatten)]
    pub warnings: Warnings,
    /// Why the test failed; null on success.
    pub error: Option<String>,
    /// A mix (`--mix`, presets): each part's figures as it would have them
    /// alone; the fields above then hold only what the whole session shares.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<PartSummary>,
    /// A mix with latency probes and bulk flows: the probes' latency and the
    /// goodput each way in the idle, loaded and recovery phases.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phases: Option<ProbePhases>,
    /// Loaded minus idle probe latency, ns (p50, p99).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_under_load_ns: Option<LatencyUnderLoad>,
    /// Jain's fairness index over the bulk flows of each direction.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fairness: Option<Fairness>,
}

/// One part of a mix, with the single-test summary it would have alone.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct PartSummary {
    pub name: String,
    pub test: TestKind,
    #[schemars(range(min = 1))]
    pub flows: u32,
    /// `up` (client to server), `down`, `both`, or `rr` for request/response.
    #[schemars(extend("enum" = ["up", "down", "both", "rr"]))]
    pub direction: &'static str,
    /// The TOS byte its data sockets carried, when marked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tos: Option<u8>,
    /// Goodput of each of its flows over the measurement window, bits/s
    /// (the receiver's count; stream parts).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub flow_throughput_bps: Vec<f64>,
    /// TCP retransmissions of its long-lived connections, both ends.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_retransmits: Option<u64>,
    #[serde(flatten)]
    pub summary: Box<Summary>,
    /// The part's own intervals: its figures and latency, interval by interval.
    pub intervals: Vec<PartInterval>,
}

/// One interval of one part.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct PartInterval {
    /// The part's name: in a stream record's `parts`, not in the part's
    /// own `intervals`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub index: u32,
    pub phase: Phase,
    pub start_s: f64,
    pub end_s: f64,
    pub sum: Figures,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_ns: Option<LatencySummary>,
    /// Retransmissions of the part's TCP connections in this interval,
    /// both ends (the client's alone when the server's sample is missing).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_retransmits: Option<u64>,
}

/// The three probe phases of a latency-under-load run.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
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
#[derive(Clone, Debug, Default, Serialize, schemars::JsonSchema)]
pub struct PhaseFigures {
    pub start_s: f64,
    pub end_s: f64,
    /// Every probe's response times in the phase, merged.
    pub probe_latency_ns: Option<LatencySummary>,
    pub throughput_up_bps: f64,
    pub throughput_down_bps: f64,
}

/// Loaded minus idle, ns: what the load added to the probes' latency.
#[derive(Clone, Copy, Debug, Serialize, schemars::JsonSchema)]
pub struct LatencyUnderLoad {
    pub p50: i64,
    pub p99: i64,
}

/// Jain's index, (Σx)² / (n·Σx²), over the per-flow goodputs of each
/// direction; null for a direction with no bulk flow.
#[derive(Clone, Copy, Debug, Serialize, schemars::JsonSchema)]
pub struct Fairness {
    pub up: Option<f64>,
    pub down: Option<f64>,
}

/// Jain's fairness index of `x`: 1 when all are equal, 1/n when one has all.
pub fn jain(x: &[f64]) -> Option<f64> {
    let sum: f64 = x.iter().sum();
    let sq: f64 = x.iter().map(|v| v * v).sum();
    (!x.is_empty() && sq > 0.0).then(|| sum * sum / (x.len() as f64 * sq))
}

impl Summary {
    /// How far the client's packets/s each way (tx, rx) part from
    /// transactions/s, in percent, counting one packet per message each way
    /// (two on `lo`, where a packet is counted leaving and arriving). None
    /// without packet counts or transactions.
    pub fn packets_off_percent(&self) -> Option<(f64, f64)> {
        let tps = self.transactions_per_s.filter(|t| *t > 0.0)?;
        let (tx, rx) = (self.tx_packets_per_s?, self.rx_packets_per_s?);
        let per = if self.interface.as_deref() == Some("lo") {
            2.0
        } else {
            1.0
        };
        let off = |pps: f64| 100.0 * (pps / per - tps) / tps;
        Some((off(tx), off(rx)))
    }
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

    /// Measure intervals of tcp_rr with per-flow transaction counts.
    fn intervals(per_flow: &[&[u64]]) -> Vec<Interval> {
        per_flow
            .iter()
            .enumerate()
            .map(|(k, flows)| {
                let local: Vec<Counts> = flows
                    .iter()
                    .map(|&t| Counts {
                        transactions: t,
                        bytes_sent: t,
                        bytes_received: t,
                        ..Counts::default()
                    })
                    .collect();
                let sum = Figures::compute(
                    &TestPlan::new(TestKind::TcpRr),
                    Counts::sum(&local),
                    Counts::default(),
                    1.0,
                    1.0,
                );
                Interval {
                    index: k as u32,
                    phase: Phase::Measure,
                    start_s: k as f64,
                    end_s: k as f64 + 1.0,
                    unix_end_s: 0.0,
                    local,
                    remote: Vec::new(),
                    sum,
                    latency_ns: None,
                    service_latency_ns: None,
                    fairness: None,
                    parts: Vec::new(),
                    link_util_percent: Default::default(),
                }
            })
            .collect()
    }

    fn judge(per_flow: &[&[u64]]) -> Stability {
        let ivs = intervals(per_flow);
        let refs: Vec<&Interval> = ivs.iter().collect();
        Stability::of(&TestPlan::new(TestKind::TcpRr), &refs, false)
    }

    #[test]
    fn steady_figures_are_stable() {
        let st = judge(&[
            &[100, 100],
            &[101, 99],
            &[100, 100],
            &[99, 101],
            &[100, 100],
            &[100, 100],
        ]);
        assert!(st.cv.unwrap() < 0.01);
        assert!(st.trend_percent.unwrap().abs() < 1.0);
        assert!(st.warnings.is_empty(), "{:?}", st.warnings);
    }

    #[test]
    fn a_flow_that_stops_halfway_is_named() {
        // Flow 1 stops after three intervals. The correlation of the
        // cumulative total against time (neper's correlation_coefficient)
        // still reads 0.98 here.
        let st = judge(&[
            &[100, 100],
            &[100, 100],
            &[100, 100],
            &[100, 0],
            &[100, 0],
            &[100, 0],
        ]);
        assert!(
            st.warnings.iter().any(|w| w.code == Code::FlowStalled
                && w.message.contains("flow 1 moved nothing in 3 of 6")),
            "{:?}",
            st.warnings
        );
        assert!((st.trend_percent.unwrap() + 50.0).abs() < 1e-9);
        assert!(
            st.warnings
                .iter()
                .any(|w| w.code == Code::Trend && w.message.contains("trends -50.0 %"))
        );
        assert!(st.cv.unwrap() > 0.2);
    }

    #[test]
    fn a_rising_figure_trends() {
        let st = judge(&[&[100], &[100], &[110], &[120], &[130], &[130]]);
        assert!((st.trend_percent.unwrap() - 30.0).abs() < 1e-9);
        assert_eq!(st.warnings.len(), 1);
    }

    #[test]
    fn quota_limited_runs_do_not_flag_idle_flows() {
        let ivs = intervals(&[&[100, 100], &[100, 0]]);
        let refs: Vec<&Interval> = ivs.iter().collect();
        assert!(
            Stability::of(&TestPlan::new(TestKind::TcpRr), &refs, true)
                .warnings
                .is_empty()
        );
        assert!(judge(&[&[100]]).cv.is_none());
    }
}
