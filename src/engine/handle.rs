//! The handle the control session holds on one engine's workers
//! ([`Engine`]): it starts one thread per [`WorkerSpec`] with the driver
//! [`choose_driver`] picks, steers them (phase, interval, stop), samples
//! their counters and per-interval latency, and at the end joins them into
//! what they leave behind ([`EngineOutcome`]), from which the session
//! reads the flows' TCP retransmits, call times and zero-copy counts.

use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::Ordering::{Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::place::{WorkerSpec, choose_driver};
use super::watchdog::{self, WatchSlot};
use super::worker::{Shared, WorkerOutcome, blocking_timeout, run_worker};
use crate::io::DriverKind;
use crate::plan::{DriverChoice, Phase};
use crate::stats::counters::{Counts, FlowCounters};
use crate::stats::latency::{IntervalTable, LatencyHistogram, LatencySummary};
use crate::workload::Flow;

/// A running set of workers.
pub struct Engine {
    shared: Arc<Shared>,
    counters: Arc<[FlowCounters]>,
    handles: Vec<JoinHandle<WorkerOutcome>>,
    drivers: Vec<&'static str>,
    watchdog: Option<JoinHandle<()>>,
    /// The flows' long-lived TCP sockets, for TCP_INFO at the ticks: the
    /// workers own the flows, but a socket stays open until the session
    /// closes the flows after `join`, so the control thread may read it.
    tcp_fds: Vec<std::os::fd::RawFd>,
}

/// What the workers leave behind.
pub struct EngineOutcome {
    pub latency: LatencyHistogram,
    /// Latency summary of each interval (by interval index) that recorded any.
    pub interval_latency: BTreeMap<u32, LatencySummary>,
    /// Open loop: time from each request's actual send to its response
    /// (`latency` then runs from the intended start), whole run and per interval.
    pub service_latency: LatencyHistogram,
    pub service_interval_latency: BTreeMap<u32, LatencySummary>,
    /// Each interval's latency histogram, when kept ([`Engine::keep_interval_histograms`]).
    pub interval_histograms: BTreeMap<u32, crate::stats::latency::SparseHistogram>,
    /// Each interval's latency of each flow that completed any, when the
    /// workers kept it ([`WorkerSpec::flow_latency`]): (flow, summary).
    pub flow_interval_latency: BTreeMap<u32, Vec<(u32, LatencySummary)>>,
    /// `--one-way`: each interval's two ways and fastest exchanges.
    pub interval_one_way: BTreeMap<u32, crate::stats::latency::OneWayInterval>,
    /// Open loop: how far behind its schedule the generator sent each request.
    pub generator_lag: LatencyHistogram,
    /// The flows, sockets still open: the session closes them once the peer has finished.
    pub flows: Vec<Box<dyn Flow>>,
    pub drivers: Vec<&'static str>,
    /// The NAPI busy polling an io_uring worker's ring read back
    /// (`--busy-poll`); None where no worker registered one.
    pub napi: Option<crate::io::napi::NapiSet>,
    pub error: Option<String>,
    /// Every counter slot after the workers stopped: the final totals.
    pub counts: Vec<Counts>,
}

impl Engine {
    /// Start one thread per worker spec. `counters` has one entry per counter
    /// slot the flows were built with.
    pub fn start(
        counters: Arc<[FlowCounters]>,
        workers: Vec<WorkerSpec>,
        initial: Phase,
        choice: DriverChoice,
        percentiles: &[f64],
        open_loop: bool,
    ) -> io::Result<Engine> {
        let shared = Arc::new(Shared {
            phase: AtomicU8::new(initial as u8),
            stop: AtomicBool::new(false),
            quota_done: AtomicU32::new(0),
            running: AtomicU32::new(workers.len() as u32),
            error: Mutex::new(None),
            watch: (0..workers.len()).map(|_| WatchSlot::default()).collect(),
            epoch: Arc::new(AtomicU32::new(0)),
            intervals: Arc::new(Mutex::new(IntervalTable::new(workers.len(), percentiles))),
            service_intervals: Arc::new(Mutex::new(IntervalTable::new(workers.len(), percentiles))),
            open_loop,
            napi: std::sync::OnceLock::new(),
        });
        if workers
            .iter()
            .any(|w| choose_driver(&w.flows, choice, w.spin, w.napi) == DriverKind::Blocking)
        {
            crate::io::blocking::install_wake_handler()?;
        }
        let tcp_fds = workers
            .iter()
            .flat_map(|w| w.flows.iter().filter_map(|f| f.tcp_socket()))
            .collect();
        let mut handles = Vec::with_capacity(workers.len());
        let mut drivers = Vec::with_capacity(workers.len());
        // The shortest blocking timeout of any blocking worker: the watchdog's clock.
        let mut watch_timeout = None;
        for (i, w) in workers.into_iter().enumerate() {
            let kind = choose_driver(&w.flows, choice, w.spin, w.napi);
            drivers.push(kind.name());
            if kind == DriverKind::Blocking {
                let t = blocking_timeout(&w.flows);
                watch_timeout = Some(watch_timeout.map_or(t, |x: std::time::Duration| x.min(t)));
            }
            let sh = shared.clone();
            // A probe's worker is named apart, for ps -L and perf.
            let role = if w.probe { "probe" } else { "worker" };
            let h = std::thread::Builder::new()
                .name(format!("thrum-{role}-{i}"))
                .spawn(move || {
                    let out = run_worker(&sh, w, kind, i);
                    sh.watch[i].leave();
                    sh.running.fetch_sub(1, Relaxed);
                    out
                })?;
            handles.push(h);
        }
        let watchdog = match watch_timeout {
            Some(t) => Some(watchdog::start(shared.clone(), t)?),
            None => None,
        };
        Ok(Engine {
            shared,
            counters,
            handles,
            drivers,
            watchdog,
            tcp_fds,
        })
    }

    /// Retransmissions so far over the flows' long-lived TCP sockets
    /// (`tcpi_total_retrans`), read from the caller's thread: one
    /// getsockopt per socket, none on the workers' data path. None when
    /// no flow keeps a TCP socket.
    pub fn tcp_retransmits(&self) -> Option<u64> {
        fds_retransmits(&self.tcp_fds)
    }

    /// TCP_INFO of every long-lived TCP socket, read from the caller's
    /// thread at a tick (one getsockopt each, none on the workers' data
    /// path), in the same order at every call; empty without TCP sockets.
    pub fn tcp_infos(&self) -> Vec<Option<crate::sensors::TcpInfo>> {
        fds_tcp_infos(&self.tcp_fds)
    }

    /// The driver each worker runs.
    pub fn drivers(&self) -> &[&'static str] {
        &self.drivers
    }

    /// Enter phase `p`. Release: a worker that sees it also sees the interval set before.
    pub fn set_phase(&self, p: Phase) {
        self.shared.phase.store(p as u8, Release);
    }

    /// Keep each interval's latency histogram for the outcome (call before
    /// the first interval ends).
    pub fn keep_interval_histograms(&self) {
        self.shared
            .intervals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .keep_histograms();
    }

    /// Interval `index`'s latency as far as the workers have handed it in:
    /// whether every worker has (the summary is then final), and the summary.
    pub fn interval_latency(&self, index: u32) -> (bool, Option<LatencySummary>) {
        let t = self
            .shared
            .intervals
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        (t.settled(index), t.summary_of(index))
    }

    /// Interval `index`'s one-way record (`--one-way`), once every worker
    /// has handed it in: whether they have, and the record if any.
    pub fn interval_one_way(
        &self,
        index: u32,
    ) -> (bool, Option<crate::stats::latency::OneWayInterval>) {
        let t = self
            .shared
            .intervals
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        (t.settled(index), t.one_way_of(index))
    }

    /// Start interval `index`: latencies recorded from now on belong to it.
    pub fn set_interval(&self, index: u32) {
        self.shared.epoch.store(index, Relaxed);
    }

    /// Counters of every slot, now.
    pub fn snapshot(&self) -> Vec<Counts> {
        self.counters.iter().map(|c| c.snapshot()).collect()
    }

    pub fn quota_done(&self) -> u32 {
        self.shared.quota_done.load(Relaxed)
    }

    /// Workers still running.
    pub fn running(&self) -> u32 {
        self.shared.running.load(Relaxed)
    }

    pub fn error(&self) -> Option<String> {
        self.shared
            .error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn stop(&self) {
        self.shared.stop.store(true, Relaxed);
    }

    /// Stop (if not yet), wait for every worker, and merge their histograms.
    pub fn join(self) -> EngineOutcome {
        self.stop();
        let mut latency = LatencyHistogram::new();
        let mut service_latency = LatencyHistogram::new();
        let mut generator_lag = LatencyHistogram::new();
        let mut flows = Vec::new();
        for h in self.handles {
            match h.join() {
                Ok(out) => {
                    latency.merge(&out.hist);
                    service_latency.merge(&out.service);
                    generator_lag.merge(&out.lag);
                    flows.extend(out.flows);
                }
                Err(_) => self.shared.fail("a worker thread panicked".into()),
            }
        }
        // It ends on its own once no worker runs.
        if let Some(w) = self.watchdog {
            let _ = w.join();
        }
        let error = self
            .shared
            .error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let (interval_latency, interval_histograms, flow_interval_latency, interval_one_way) = {
            let mut t = self
                .shared
                .intervals
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            (
                t.take_done(),
                t.take_kept(),
                t.take_flows(),
                t.take_one_way(),
            )
        };
        let service_interval_latency = self
            .shared
            .service_intervals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take_done();
        EngineOutcome {
            latency,
            interval_latency,
            interval_histograms,
            flow_interval_latency,
            interval_one_way,
            service_latency,
            service_interval_latency,
            generator_lag,
            flows,
            drivers: self.drivers,
            napi: self.shared.napi.get().copied(),
            error,
            counts: self.counters.iter().map(|c| c.snapshot()).collect(),
        }
    }
}

/// Retransmissions summed over the flows' long-lived TCP sockets
/// (TCP_INFO); None when there are none, as in UDP and connection-rate tests.
/// A long-lived TCP data socket of the engines' flows, still open, for
/// the options read back from it at the end; None where there is none (UDP,
/// the connection tests).
pub fn first_tcp_socket(outs: &[EngineOutcome]) -> Option<std::os::fd::RawFd> {
    outs.iter()
        .flat_map(|o| o.flows.iter())
        .find_map(|f| f.tcp_socket())
}

pub fn tcp_retransmits(flows: &[Box<dyn Flow>]) -> Option<u64> {
    let fds: Vec<_> = flows.iter().filter_map(|f| f.tcp_socket()).collect();
    fds_retransmits(&fds)
}

/// TCP_INFO of each long-lived TCP socket (`Engine::tcp_infos`), in one
/// fixed order for the engine's life, so readings at two ticks pair up by
/// index; None where one cannot be read.
fn fds_tcp_infos(fds: &[std::os::fd::RawFd]) -> Vec<Option<crate::sensors::TcpInfo>> {
    fds.iter()
        .map(|&fd| crate::sensors::TcpInfo::read(fd))
        .collect()
}

fn fds_retransmits(fds: &[std::os::fd::RawFd]) -> Option<u64> {
    (!fds.is_empty()).then(|| {
        fds.iter()
            .filter_map(|&fd| crate::sensors::tcp_total_retrans(fd))
            .map(u64::from)
            .sum()
    })
}

/// The bulk flows' send and receive call-time histograms, summed; None
/// when no flow keeps them.
pub fn call_times(flows: &[Box<dyn Flow>]) -> Option<crate::stats::calltime::SendRecvTimes> {
    flows
        .iter()
        .filter_map(|f| f.call_times())
        .fold(None, |acc, t| {
            let mut sum = acc.unwrap_or_default();
            sum += t;
            Some(sum)
        })
}

/// MSG_ZEROCOPY counts summed over the flows; None when no flow sent with it.
pub fn zerocopy_counts(flows: &[Box<dyn Flow>]) -> Option<crate::io::zerocopy::ZeroCopyCounts> {
    flows
        .iter()
        .filter_map(|f| f.zerocopy())
        .reduce(|mut a, b| {
            a += b;
            a
        })
}
