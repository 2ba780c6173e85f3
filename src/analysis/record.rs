//! The raw record of one run: what the client gathered from both ends
//! (samples, totals, histograms, window readings), before any figure is
//! taken from it. `control::timeline` fills it while the test runs; the
//! rest of `analysis` reads it and never touches a socket.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::io::socket::SocketBuffers;
use crate::io::zerocopy::ZeroCopyCounts;
use crate::plan::Phase;
use crate::result::Environment;
use crate::sensors::window::WindowStats;
use crate::sensors::{Provenance, Rusage};
use crate::stats::calltime::SendRecvTimes;
use crate::stats::counters::Counts;
use crate::stats::latency::{LatencyHistogram, LatencySummary};
use crate::warning::Warning;

pub(crate) struct LocalSample {
    pub(crate) at: Duration,
    pub(crate) unix_s: f64,
    pub(crate) counts: Vec<Counts>,
    /// The phase of the interval that ends at this sample.
    pub(crate) phase: Phase,
    /// A mix: each part's TCP retransmissions so far (empty otherwise).
    pub(crate) retransmits: Vec<Option<u64>>,
    /// A TCP stream test: TCP_INFO of each data socket (empty otherwise).
    pub(crate) tcp_info: Vec<Option<crate::sensors::TcpInfo>>,
    /// The client interface's counters, read beside `counts` on the
    /// control thread (None where they cannot be read).
    pub(crate) if_counters: Option<crate::sensors::IfCounters>,
    /// This process's resource usage so far, read at the tick (the
    /// samples' per-interval usage columns).
    pub(crate) rusage: Option<Rusage>,
}

pub(crate) struct RemoteSample {
    pub(crate) elapsed_ns: u64,
    pub(crate) counts: Vec<Counts>,
    /// A mix: each part's TCP retransmissions so far, the server's end.
    pub(crate) retransmits: Vec<Option<u64>>,
    /// A TCP stream test: TCP_INFO of each of the server's data sockets.
    pub(crate) tcp_info: Vec<Option<crate::sensors::TcpInfo>>,
    /// The server host's CPU ticks at this sample (newer servers).
    pub(crate) cpu: Option<crate::sensors::cpu::CpuTotals>,
    /// The server process's resource usage so far (None from an older server).
    pub(crate) rusage: Option<Rusage>,
}

/// What one part of a mix leaves on the client: its own histograms and
/// retransmissions (the counters are the part's slice of the samples).
#[derive(Clone, Default)]
pub(crate) struct PartRecord {
    pub(crate) latency: LatencyHistogram,
    pub(crate) interval_latency: BTreeMap<u32, LatencySummary>,
    pub(crate) service_latency: LatencyHistogram,
    pub(crate) service_interval_latency: BTreeMap<u32, LatencySummary>,
    pub(crate) generator_lag: LatencyHistogram,
    pub(crate) local_retransmits: Option<u64>,
    pub(crate) remote_retransmits: Option<u64>,
    /// Probes: each interval's histogram, for the phases.
    pub(crate) interval_histograms: BTreeMap<u32, crate::stats::latency::SparseHistogram>,
    /// `--one-way`, a part whose test carries the stamps: its ways up and
    /// down (per interval too, for a phased mix's probe) and the clock.
    pub(crate) one_way: Option<super::one_way::OneWayRecord>,
}

impl PartRecord {
    pub(crate) fn of(out: &crate::engine::EngineOutcome) -> PartRecord {
        PartRecord {
            latency: out.latency.clone(),
            interval_latency: out.interval_latency.clone(),
            service_latency: out.service_latency.clone(),
            service_interval_latency: out.service_interval_latency.clone(),
            generator_lag: out.generator_lag.clone(),
            local_retransmits: crate::engine::tcp_retransmits(&out.flows),
            remote_retransmits: None,
            interval_histograms: out.interval_histograms.clone(),
            one_way: None,
        }
    }
}

/// Everything gathered so far, whatever happens: the raw record of one run.
pub(crate) struct Gathered {
    pub(crate) local: Vec<LocalSample>,
    pub(crate) remote: Vec<Option<RemoteSample>>,
    pub(crate) latency: LatencyHistogram,
    pub(crate) interval_latency: BTreeMap<u32, LatencySummary>,
    /// Each interval's latency of each flow (`plan.flow_latency`): (flow, summary).
    pub(crate) flow_interval_latency: BTreeMap<u32, Vec<(u32, LatencySummary)>>,
    /// Open loop: service time, whole run and per interval, and the
    /// generator's lag behind its schedule.
    pub(crate) service_latency: LatencyHistogram,
    pub(crate) service_interval_latency: BTreeMap<u32, LatencySummary>,
    pub(crate) generator_lag: LatencyHistogram,
    pub(crate) local_total: Option<Counts>,
    pub(crate) remote_total: Option<Counts>,
    /// Each flow's totals after the drain, both ends: a mix's parts take
    /// their slices.
    pub(crate) local_final: Vec<Counts>,
    pub(crate) remote_final: Vec<Counts>,
    /// Each part's own record, in the plan's order (one for a single test).
    pub(crate) parts: Vec<PartRecord>,
    /// A phased mix: the ticks (local sample indices) that begin the idle
    /// and loaded phases, end the loaded one, begin the recovery phase (once
    /// the bulk flows have drained) and end it.
    pub(crate) load_bounds: Vec<u32>,
    pub(crate) local_rusage: Option<Rusage>,
    pub(crate) remote_rusage: Option<Rusage>,
    pub(crate) env: Environment,
    pub(crate) server_address: Option<String>,
    pub(crate) warnings: Vec<Warning>,
    pub(crate) local_window: Option<WindowStats>,
    /// The client interface's link speed, for each interval's utilisation.
    pub(crate) link_speed_bps: Option<u64>,
    pub(crate) remote_window: Option<WindowStats>,
    pub(crate) local_provenance: Option<Provenance>,
    pub(crate) remote_provenance: Option<Provenance>,
    pub(crate) local_retransmits: Option<u64>,
    pub(crate) remote_retransmits: Option<u64>,
    pub(crate) local_zerocopy: Option<ZeroCopyCounts>,
    pub(crate) remote_zerocopy: Option<ZeroCopyCounts>,
    /// Bulk flows' send and receive call times (`engine::call_times`).
    pub(crate) local_call_times: Option<SendRecvTimes>,
    pub(crate) remote_call_times: Option<SendRecvTimes>,
    /// Socket buffers as set (`SocketBuffers::as_set`); the server's from
    /// its final message.
    pub(crate) local_socket_buffers: Option<SocketBuffers>,
    pub(crate) remote_socket_buffers: Option<SocketBuffers>,
    /// `--busy-poll`, `--prefer-busy-poll` as each end's kernel read them back.
    pub(crate) local_busy_poll: Option<crate::io::busypoll::BusyPollSet>,
    pub(crate) remote_busy_poll: Option<crate::io::busypoll::BusyPollSet>,
    pub(crate) local_uring_napi: Option<crate::io::napi::NapiSet>,
    pub(crate) remote_uring_napi: Option<crate::io::napi::NapiSet>,
    /// `--mark`, `--tcp-tx-delay` as each end's kernel read them back.
    pub(crate) local_socket_options: Option<crate::plan::sockets::SocketMarks>,
    pub(crate) remote_socket_options: Option<crate::plan::sockets::SocketMarks>,
    /// TCP_CONGESTION of each end's data sockets, as read back.
    pub(crate) local_congestion_control: Option<String>,
    pub(crate) remote_congestion_control: Option<String>,
    /// capacity: the packet-train gaps the server recorded (client to
    /// server; they come in its final report) ...
    pub(crate) train_gaps: Option<crate::stats::dispersion::TrainGaps>,
    /// ... and those the client's own receivers recorded (`--reverse`,
    /// `--both`: server to client).
    pub(crate) local_train_gaps: Option<crate::stats::dispersion::TrainGaps>,
    /// The server runs on this host as a separate process.
    pub(crate) server_on_this_host: bool,
    pub(crate) setup_s: Option<f64>,
    /// The server as the user named it (`host:port`), or `embedded`.
    pub(crate) server_label: String,
    pub(crate) embedded: bool,
    /// The local address data sockets were bound to (`--bind`).
    pub(crate) bind: Option<String>,
    /// This host is a virtual machine: CPU readings are judged by rusage.
    pub(crate) hypervisor: bool,
    /// udp_rr and tcp_rr `--one-way`: the flows' histograms and the server's clock.
    pub(crate) one_way: Option<super::one_way::OneWayRecord>,
}

impl Gathered {
    /// An empty record for a run against `server_label`.
    pub(crate) fn new(
        env: Environment,
        server_label: String,
        embedded: bool,
        bind: Option<String>,
        hypervisor: bool,
    ) -> Gathered {
        Gathered {
            local: Vec::new(),
            remote: Vec::new(),
            latency: LatencyHistogram::new(),
            interval_latency: BTreeMap::new(),
            flow_interval_latency: BTreeMap::new(),
            service_latency: LatencyHistogram::new(),
            service_interval_latency: BTreeMap::new(),
            generator_lag: LatencyHistogram::new(),
            local_total: None,
            remote_total: None,
            local_final: Vec::new(),
            remote_final: Vec::new(),
            parts: Vec::new(),
            load_bounds: Vec::new(),
            local_rusage: None,
            remote_rusage: None,
            env,
            server_address: None,
            warnings: Vec::new(),
            local_window: None,
            link_speed_bps: None,
            remote_window: None,
            local_provenance: None,
            remote_provenance: None,
            local_retransmits: None,
            remote_retransmits: None,
            local_zerocopy: None,
            remote_zerocopy: None,
            local_call_times: None,
            remote_call_times: None,
            local_socket_buffers: None,
            remote_socket_buffers: None,
            local_busy_poll: None,
            remote_busy_poll: None,
            local_uring_napi: None,
            remote_uring_napi: None,
            local_socket_options: None,
            remote_socket_options: None,
            local_congestion_control: None,
            remote_congestion_control: None,
            train_gaps: None,
            local_train_gaps: None,
            server_on_this_host: false,
            setup_s: None,
            server_label,
            embedded,
            bind,
            hypervisor,
            one_way: None,
        }
    }
}

/// Constructed records for the unit tests of the analysis.
#[cfg(test)]
pub(crate) mod fixtures {
    use super::*;

    pub(crate) fn counts(bytes_sent: u64, bytes_received: u64, transactions: u64) -> Counts {
        Counts {
            bytes_sent,
            bytes_received,
            transactions,
            ..Counts::default()
        }
    }

    /// A record of a 1 s warm-up and 2 s measurement: one flow, samples
    /// every second on both ends; `client(k)` and `server(k)` are the
    /// cumulative counts at sample k, `None` a server sample that never came.
    pub(crate) fn record(
        client: impl Fn(u64) -> Counts,
        server: impl Fn(u64) -> Option<Counts>,
    ) -> Gathered {
        let mut g = Gathered::new(
            Environment::default(),
            "lg:12880".into(),
            false,
            None,
            false,
        );
        let phases = [Phase::Warmup, Phase::Warmup, Phase::Measure, Phase::Measure];
        for (k, phase) in phases.into_iter().enumerate() {
            g.local.push(LocalSample {
                at: Duration::from_secs(k as u64),
                unix_s: 1_800_000_000.0 + k as f64,
                counts: vec![client(k as u64)],
                phase,
                retransmits: Vec::new(),
                tcp_info: Vec::new(),
                if_counters: None,
                rusage: None,
            });
            g.remote.push(server(k as u64).map(|c| RemoteSample {
                elapsed_ns: k as u64 * 1_000_000_000,
                counts: vec![c],
                retransmits: Vec::new(),
                tcp_info: Vec::new(),
                cpu: None,
                rusage: None,
            }));
        }
        g
    }
}
