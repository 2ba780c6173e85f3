//! The engine: worker threads that run flows, and the handle the control
//! session uses to steer and sample them.
//!
//! Each worker owns its flows, its driver and its latency histogram; nothing
//! on the data path takes a lock or allocates. The session thread steers the
//! workers through three atomics (phase, stop, and the count of flows that met
//! their quota) and samples the per-flow counters at interval boundaries. A
//! phase change wakes every flow once (a kick), so a flow blocked on one
//! direction still learns that it must drain.
//!
//! Latency is recorded per interval: the session bumps an epoch (the interval
//! index) at every tick, and a worker that sees a new epoch hands its
//! interval histogram to a shared table (one short lock per worker per
//! interval, never per transaction), merges it into its window total and
//! starts afresh. An interval's percentiles are computed once every worker
//! has handed in its part, and its histogram is dropped, so memory does not
//! grow with the length of the test. A worker blocked in a receive notices
//! the epoch up to one receive timeout late; the latencies of that moment
//! land in the interval before.
//!
//! Placement: [`place`] spreads one part's flows over that part's workers;
//! a mix gives every part an engine of its own ([`parts`]), so a latency
//! probe never shares a worker with a bulk flow, and its workers ask for a
//! short scheduler slice ([`sched`]) so that they do not wait behind the
//! bulk workers for a CPU either.

use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use crate::io::{DriverKind, Event};
use crate::plan::{DriverChoice, Phase, TestPlan};
use crate::stats::counters::{Counts, FlowCounters};
use crate::stats::latency::{
    IntervalTable, LatencyHistogram, LatencyRecorder, LatencySummary, OpenLoopRecorder,
};
use crate::workload::{Flow, FlowCtx, KICK, Progress, token};

pub mod parts;
pub mod sched;
mod watchdog;
pub use parts::Engines;
use watchdog::WatchSlot;

/// The longest a worker waits with nothing ready and no flow's moment
/// due: its checks of the phase and the stop flag run this often.
const IDLE_WAIT: std::time::Duration = std::time::Duration::from_millis(100);

/// Open loop: how long before a flow's next intended start the worker stops
/// sleeping and polls its driver without blocking instead. A timed sleep
/// ends a wake-up latency after its deadline (tens of µs on a busy VM, with
/// 1 µs timer slack); sleeping to `deadline - PACER_SPIN` and polling the
/// rest sends on time whenever the wake-up latency is below it. Only the
/// last stretch before a deadline spins, so an idle flow at a low rate
/// costs its CPU `PACER_SPIN` per transaction (3 % of one CPU at 1,000/s
/// for 30 µs); polling the driver, not just the clock, keeps responses that
/// arrive meanwhile from waiting for the deadline. Chosen by measurement:
/// docs/open-loop.md, "Pacing".
const PACER_SPIN: std::time::Duration = std::time::Duration::from_micros(30);

/// The longest spin before a deadline, for a worker whose schedule leaves
/// long gaps ([`pacer_spin`]).
const MAX_PACER_SPIN: std::time::Duration = std::time::Duration::from_micros(500);

/// The share of the gap between a worker's intended starts that it may
/// spin before each one: 1/20, at most 5 % of its CPU.
const SPIN_SHARE_OF_GAP: u32 = 20;

/// How long before each intended start a worker offering `per_s`
/// transactions/s (its flows' share of the rate) stops sleeping and polls:
/// a twentieth of its gap, from [`PACER_SPIN`] up to [`MAX_PACER_SPIN`].
/// The longer the gap, the longer a CPU has been idle before the deadline,
/// and waking an idle vCPU costs more than waking a busy one: on the 2-vCPU
/// test VM a thread asleep 100 ms woke 190 µs (p50) after its timer, one
/// asleep 10 ms about 27 µs, so a probe at 10/s with a 30 µs spin went out
/// ~100 µs late at the median (issue 29 item 4; docs/open-loop.md,
/// "Pacing"). 500 µs covers the idle wake-up with room to spare and costs
/// 0.5 % of a CPU at 10/s; at 1,667/s and more per worker the spin is the
/// 30 µs it was.
pub fn pacer_spin(per_s: f64) -> std::time::Duration {
    if per_s.is_nan() || per_s <= 0.0 {
        return PACER_SPIN;
    }
    let gap = std::time::Duration::from_secs_f64((1.0 / per_s).min(3600.0));
    (gap / SPIN_SHARE_OF_GAP).clamp(PACER_SPIN, MAX_PACER_SPIN)
}

/// What one worker thread runs.
pub struct WorkerSpec {
    pub flows: Vec<Box<dyn Flow>>,
    /// Global ids of `flows`, for error messages.
    pub flow_ids: Vec<u32>,
    pub cpu: Option<usize>,
    /// Open loop: how long before each intended start the worker stops
    /// sleeping and polls ([`pacer_spin`]; [`place`] gives [`PACER_SPIN`]).
    pub pacer_spin: std::time::Duration,
    /// A latency probe's worker: it asks the scheduler for a short slice
    /// ([`sched::PROBE_SLICE`]), so that it is not kept waiting behind
    /// the bulk workers sharing its CPU.
    pub probe: bool,
    /// Keep each flow's latency per interval too (`--samples`): a coarse
    /// histogram per flow, handed in at the ticks with the worker's own.
    pub flow_latency: bool,
    /// `--max-events`: an epoll worker's most events per wait (None: 256).
    pub max_events: Option<u32>,
    /// `--epoll-trigger level`: an epoll worker registers its sockets
    /// level-triggered.
    pub epoll_level: bool,
}

struct Shared {
    phase: AtomicU8,
    stop: AtomicBool,
    quota_done: AtomicU32,
    running: AtomicU32,
    error: Mutex<Option<String>>,
    /// One per worker, for the watchdog of blocking workers.
    watch: Vec<WatchSlot>,
    /// The interval the session is in (its tick count).
    epoch: Arc<AtomicU32>,
    intervals: Arc<Mutex<IntervalTable>>,
    /// Open loop: service time per interval.
    service_intervals: Arc<Mutex<IntervalTable>>,
    /// The flows are open-loop: workers keep service-time and lag histograms.
    open_loop: bool,
}

impl Shared {
    fn fail(&self, msg: String) {
        let mut e = self.error.lock().unwrap_or_else(|p| p.into_inner());
        if e.is_none() {
            *e = Some(msg);
        }
    }
}

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

struct WorkerOutcome {
    hist: LatencyHistogram,
    service: LatencyHistogram,
    lag: LatencyHistogram,
    flows: Vec<Box<dyn Flow>>,
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
    /// Open loop: how far behind its schedule the generator sent each request.
    pub generator_lag: LatencyHistogram,
    /// The flows, sockets still open: the session closes them once the peer has finished.
    pub flows: Vec<Box<dyn Flow>>,
    pub drivers: Vec<&'static str>,
    pub error: Option<String>,
    /// Every counter slot after the workers stopped: the final totals.
    pub counts: Vec<Counts>,
}

/// Spread one part's flows over `threads` workers: flow i runs on worker
/// i mod T, and worker w is pinned to `cpus[w mod len]` when a CPU list is
/// given. The workers run this part's flows only (each part of a mix has
/// an engine of its own), so a `probe` part's workers carry no bulk flow;
/// they also ask for a short scheduler slice ([`sched`]).
pub fn place(
    flows: Vec<Box<dyn Flow>>,
    threads: usize,
    cpus: &[usize],
    probe: bool,
) -> Vec<WorkerSpec> {
    let mut workers: Vec<WorkerSpec> = (0..threads)
        .map(|w| WorkerSpec {
            flows: Vec::new(),
            flow_ids: Vec::new(),
            cpu: (!cpus.is_empty()).then(|| cpus[w % cpus.len()]),
            pacer_spin: PACER_SPIN,
            probe,
            flow_latency: false,
            max_events: None,
            epoll_level: false,
        })
        .collect();
    for (i, f) in flows.into_iter().enumerate() {
        workers[i % threads].flows.push(f);
        workers[i % threads].flow_ids.push(i as u32);
    }
    workers
}

/// From this many flows on one worker, `auto` gives a worker of
/// request/response flows (those that take their data from the completion
/// path, [`Flow::recv_buffers`]) to io_uring: one multishot receive per
/// socket and queued sends replace a readiness wait plus a recv and a send
/// per transaction, which pays once several flows share a wake-up.
/// Measured on loopback (BENCHMARKS.md, "--driver auto"; medians of 3):
/// at 1 flow per worker epoll is ahead (tcp_rr 334k vs 288k/s), at 4 uring
/// is (tcp_rr 391k vs 324k, udp_rr 565k vs 420k), at 8 more so (527k vs
/// 383k, 611k vs 457k); 2 per worker was mixed.
pub const AUTO_URING_FLOWS: usize = 4;

/// The driver a worker runs. `auto`: the blocking driver for a worker with
/// one flow that allows it; io_uring for a worker of at least
/// [`AUTO_URING_FLOWS`] request/response flows where the kernel allows it
/// (not for connection tests, tcp_crr and tcp_cc: see docs/performance.md);
/// epoll otherwise. `uring`: io_uring for every test where the kernel
/// allows it (connection tests with their connects, accepts and closes as
/// ring operations, see [`crate::io::uring`]), and epoll otherwise.
pub fn choose_driver(flows: &[Box<dyn Flow>], choice: DriverChoice) -> DriverKind {
    match choice {
        DriverChoice::Auto if flows.len() == 1 && flows[0].blocking_ok() => DriverKind::Blocking,
        DriverChoice::Auto
            if flows.len() >= AUTO_URING_FLOWS
                && flows
                    .iter()
                    .all(|f| f.recv_buffers().is_some() && !f.closes_sockets())
                && crate::io::uring::probe().is_ok() =>
        {
            DriverKind::Uring
        }
        DriverChoice::Uring if crate::io::uring::probe().is_ok() => DriverKind::Uring,
        _ => DriverKind::Epoll,
    }
}

/// Why `--driver uring` runs epoll for this test here, if it does.
pub fn uring_fallback(plan: &TestPlan) -> Option<String> {
    if plan.driver != DriverChoice::Uring {
        return None;
    }
    crate::io::uring::probe()
        .err()
        .map(|why| format!("--driver uring: io_uring is unavailable ({why}); workers ran epoll"))
}

/// The warning for an open-loop run whose epoll workers could not wait to
/// the microsecond: without epoll_pwait2 (Linux 5.11) their waits round up
/// to whole milliseconds, so the requests due within one go out together,
/// the 1 ms bursts a schedule must not make. `open_loop`: some part runs on
/// a schedule; `drivers`: what the workers ran; `pwait2`: the kernel's
/// answer (`io::epoll::pwait2_available`).
pub fn pacing_resolution(open_loop: bool, drivers: &[&str], pwait2: bool) -> Option<String> {
    (open_loop && !pwait2 && drivers.contains(&DriverKind::Epoll.name())).then(|| {
        "--rate: this kernel has no epoll_pwait2 (Linux 5.11), so the epoll workers waited in whole milliseconds: requests due within one went out together, up to 1 ms late (generator_lag_ns shows it); --driver uring waits to the microsecond where io_uring is available".to_string()
    })
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
        });
        if workers
            .iter()
            .any(|w| choose_driver(&w.flows, choice) == DriverKind::Blocking)
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
            let kind = choose_driver(&w.flows, choice);
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
        let (interval_latency, interval_histograms, flow_interval_latency) = {
            let mut t = self
                .shared
                .intervals
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            (t.take_done(), t.take_kept(), t.take_flows())
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
            service_latency,
            service_interval_latency,
            generator_lag,
            flows,
            drivers: self.drivers,
            error,
            counts: self.counters.iter().map(|c| c.snapshot()).collect(),
        }
    }
}

/// Retransmissions summed over the flows' long-lived TCP sockets
/// (TCP_INFO); None when there are none, as in UDP and connection-rate tests.
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

/// Per-flow bookkeeping of the worker loop.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Status {
    Active,
    Parked,
    Done,
}

/// How long one blocking call of these flows may wait.
fn blocking_timeout(flows: &[Box<dyn Flow>]) -> std::time::Duration {
    flows
        .iter()
        .map(|f| f.blocking_timeout())
        .min()
        .unwrap_or(crate::io::blocking::POLL_TIMEOUT)
}

/// The provided buffers of a completion driver for these flows: io_uring,
/// and every flow able to take its data from it; None otherwise.
fn recv_buffers(flows: &[Box<dyn Flow>], kind: DriverKind) -> Option<crate::io::RecvBuffers> {
    if kind != DriverKind::Uring || flows.is_empty() {
        return None;
    }
    let mut all = crate::io::RecvBuffers { size: 1, count: 0 };
    for f in flows {
        let b = f.recv_buffers()?;
        all.size = all.size.max(b.size);
        all.count += b.count;
    }
    // A power of two, as the kernel wants, and at most what it takes.
    all.count = all.count.next_power_of_two().clamp(16, 32768);
    Some(all)
}

fn run_worker(shared: &Shared, spec: WorkerSpec, kind: DriverKind, me: usize) -> WorkerOutcome {
    let mut lat = LatencyRecorder::new(shared.epoch.clone(), shared.intervals.clone());
    if spec.flow_latency {
        lat.keep_per_flow(&spec.flow_ids);
    }
    // Only open-loop flows record service time and lag: the histograms
    // of the rest would be memory for nothing (half a MiB each).
    let mut open = shared.open_loop.then(|| OpenLoopRecorder {
        service: LatencyRecorder::new(shared.epoch.clone(), shared.service_intervals.clone()),
        lag: LatencyHistogram::new(),
    });
    let flows = worker_loop(shared, spec, kind, me, &mut lat, open.as_mut());
    let (service, lag) = match open {
        Some(o) => (o.service.finish(), o.lag),
        None => (LatencyHistogram::new(), LatencyHistogram::new()),
    };
    WorkerOutcome {
        hist: lat.finish(),
        service,
        lag,
        flows,
    }
}

fn worker_loop(
    shared: &Shared,
    spec: WorkerSpec,
    kind: DriverKind,
    me: usize,
    lat: &mut LatencyRecorder,
    mut open: Option<&mut OpenLoopRecorder>,
) -> Vec<Box<dyn Flow>> {
    let WorkerSpec {
        mut flows,
        flow_ids,
        cpu,
        probe,
        pacer_spin,
        max_events: spec_max_events,
        epoll_level,
        ..
    } = spec;
    let fail = |what: String| shared.fail(what);
    if let Some(c) = cpu
        && let Err(e) = crate::io::socket::pin_current_thread(c)
    {
        fail(format!("worker: {e}"));
        return flows;
    }
    // Timed wake-ups to the microsecond: the default timer slack (50 µs)
    // would make an open-loop schedule's every send that late. Only a
    // request of this thread's; refused, the thread keeps the default.
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1_000 as libc::c_ulong) };
    // A probe preempts the bulk workers when it wakes (Linux 6.12 on);
    // refused, it runs as before and its generator lag shows the cost.
    if probe {
        let _ = sched::set_slice(sched::PROBE_SLICE);
    }
    let created = if kind == DriverKind::Epoll && (spec_max_events.is_some() || epoll_level) {
        crate::io::epoll::Epoll::with_options(
            spec_max_events.map_or(256, |n| n as usize),
            !epoll_level,
        )
        .map(|e| Box::new(e) as Box<dyn crate::io::Driver>)
    } else {
        kind.create(blocking_timeout(&flows), recv_buffers(&flows, kind))
    };
    let mut driver = match created {
        Ok(d) => d,
        Err(e) => {
            fail(format!("creating the {} driver: {e}", kind.name()));
            return flows;
        }
    };
    let n = flows.len();
    for (i, f) in flows.iter_mut().enumerate() {
        if let Err(e) = f.start(driver.as_mut(), i) {
            fail(format!("flow {}: {e}", flow_ids[i]));
            return flows;
        }
    }

    // One long-lived socket and nothing else: a private descriptor table
    // spares each send and receive the file reference a shared table costs
    // (io::socket::private_fd_table). Not for flows that open sockets as
    // they go, whose descriptors must stay visible to the process. Only an
    // optimisation: where it is refused, the worker runs as before.
    if let Some(fd) = driver.sole_socket()
        && !flows.iter().any(|f| f.closes_sockets())
    {
        let _ = crate::io::socket::private_fd_table(fd);
    }

    let mut status = vec![Status::Active; n];
    let mut queued = vec![true; n];
    let mut ready: Vec<usize> = (0..n).collect();
    let mut again: Vec<usize> = Vec::with_capacity(n);
    let mut events = Vec::with_capacity(256);
    let mut remaining = n;
    let mut parked = 0usize;
    // Flows waiting for a moment (pacing, timeouts): kicked when it comes.
    let mut wake: Vec<Option<Instant>> = vec![None; n];
    let mut next_wake: Option<Instant> = None;
    let mut last_phase = Phase::from_u8(shared.phase.load(Relaxed));
    let watch = &shared.watch[me];
    if kind == DriverKind::Blocking {
        watch.enter();
    }
    let mut loops = 0u64;
    // Only an open-loop schedule spins before its deadlines; paced streams
    // and timeouts sleep to the moment.
    let spin = if shared.open_loop {
        pacer_spin
    } else {
        std::time::Duration::ZERO
    };

    while remaining > 0 && !shared.stop.load(Relaxed) {
        loops += 1;
        watch.tick(loops);
        let phase = Phase::from_u8(shared.phase.load(Acquire));
        if phase != last_phase {
            last_phase = phase;
            parked = 0;
            for i in 0..n {
                if status[i] == Status::Parked {
                    status[i] = Status::Active;
                }
                if status[i] == Status::Active && !queued[i] {
                    queued[i] = true;
                    ready.push(i);
                }
            }
        }
        if ready.is_empty() && parked == remaining {
            // Everything waits for the next phase: do not spin on a blocking driver.
            std::thread::sleep(std::time::Duration::from_millis(1));
            continue;
        }
        events.clear();
        let mut timeout = if ready.is_empty() {
            IDLE_WAIT
        } else {
            std::time::Duration::ZERO
        };
        if let Some(w) = next_wake {
            let now = Instant::now();
            if w <= now {
                next_wake = None;
                for i in 0..n {
                    if wake[i].is_some_and(|t| t <= now) {
                        wake[i] = None;
                        if status[i] == Status::Active && !queued[i] {
                            queued[i] = true;
                            ready.push(i);
                        }
                    } else if let Some(t) = wake[i] {
                        next_wake = Some(next_wake.map_or(t, |x: Instant| x.min(t)));
                    }
                }
                timeout = std::time::Duration::ZERO;
            } else {
                // To the moment (the driver keeps sub-millisecond
                // timeouts), less the stretch polled before it.
                timeout = timeout.min((w - now).saturating_sub(spin));
            }
        }
        if let Err(e) = driver.wait(&mut events, timeout) {
            fail(format!("waiting for readiness ({}): {e}", driver.name()));
            break;
        }
        std::mem::swap(&mut ready, &mut again);
        let mut ctx = FlowCtx {
            phase,
            hist: &mut *lat,
            open: open.as_deref_mut(),
            driver: driver.as_mut(),
            quota_done: &shared.quota_done,
            slot: 0,
            live_phase: &shared.phase,
        };
        let kicks = again.iter().map(|&i| Event::kick(token(i, KICK)));
        for ev in events.iter().copied().chain(kicks) {
            let i = (ev.token >> 32) as usize;
            if i >= n || status[i] != Status::Active {
                continue;
            }
            if crate::workload::sub_token(ev.token) == KICK {
                queued[i] = false;
            }
            ctx.slot = i;
            ctx.hist.slot = i;
            match flows[i].on_event(ev, &mut ctx) {
                Ok(Progress::Idle) => {}
                Ok(Progress::More) => {
                    if !queued[i] {
                        queued[i] = true;
                        ready.push(i);
                    }
                }
                Ok(Progress::Parked) => {
                    status[i] = Status::Parked;
                    parked += 1;
                }
                Ok(Progress::At(t)) => {
                    wake[i] = Some(t);
                    next_wake = Some(next_wake.map_or(t, |x| x.min(t)));
                }
                Ok(Progress::Done) => {
                    status[i] = Status::Done;
                    remaining -= 1;
                }
                Err(e) => {
                    fail(format!("flow {}: {e}", flow_ids[i]));
                    status[i] = Status::Done;
                    remaining -= 1;
                }
            }
        }
        again.clear();
    }
    flows
}

#[cfg(test)]
mod tests {
    use super::{choose_driver, pacing_resolution, place};
    use crate::io::DriverKind;
    use crate::plan::{CloseMode, DriverChoice};
    use crate::workload::Flow;
    use crate::workload::crr::{ConnectClient, ConnectMode, TOKEN_LEN};

    /// `auto` keeps tcp_crr and tcp_cc off io_uring at any number of flows
    /// per worker (docs/performance.md: it was not ahead), where `uring`
    /// runs them on it wherever the kernel allows.
    #[test]
    fn auto_keeps_connection_tests_off_io_uring() {
        let block: std::sync::Arc<[crate::stats::counters::FlowCounters]> =
            (0..8).map(|_| Default::default()).collect();
        for mode in [ConnectMode::Crr, ConnectMode::Cc] {
            let flows: Vec<Box<dyn Flow>> = (0..8)
                .map(|i| {
                    Box::new(ConnectClient::new(
                        mode,
                        "127.0.0.1:9".parse().unwrap(),
                        None,
                        Default::default(),
                        crate::workload::CounterRef::new(block.clone(), i),
                        [0; TOKEN_LEN],
                        1,
                        1,
                        None,
                        CloseMode::Fin,
                    )) as Box<dyn Flow>
                })
                .collect();
            assert_eq!(choose_driver(&flows, DriverChoice::Auto), DriverKind::Epoll);
            let uring = if crate::io::uring::probe().is_ok() {
                DriverKind::Uring
            } else {
                DriverKind::Epoll
            };
            assert_eq!(choose_driver(&flows, DriverChoice::Uring), uring);
        }
    }

    /// A part's workers carry that part's flows only, and a probe part's
    /// are marked so: they never share a thread with a bulk flow.
    #[test]
    fn a_probe_part_gets_workers_of_its_own() {
        let block: std::sync::Arc<[crate::stats::counters::FlowCounters]> =
            (0..3).map(|_| Default::default()).collect();
        let flows = |n: usize| -> Vec<Box<dyn Flow>> {
            (0..n)
                .map(|i| {
                    Box::new(ConnectClient::new(
                        ConnectMode::Crr,
                        "127.0.0.1:9".parse().unwrap(),
                        None,
                        Default::default(),
                        crate::workload::CounterRef::new(block.clone(), i),
                        [0; TOKEN_LEN],
                        1,
                        1,
                        None,
                        CloseMode::Fin,
                    )) as Box<dyn Flow>
                })
                .collect()
        };
        let bulk = place(flows(3), 2, &[], false);
        let probe = place(flows(1), 1, &[], true);
        assert!(bulk.iter().all(|w| !w.probe));
        assert_eq!(bulk.iter().map(|w| w.flows.len()).sum::<usize>(), 3);
        assert_eq!(probe.len(), 1);
        assert!(probe[0].probe && probe[0].flows.len() == 1);
    }

    /// The spin before a deadline is a twentieth of the worker's gap,
    /// never under the 30 µs it always had nor over 500 µs: a probe at
    /// 10/s spins 500 µs (0.5 % of a CPU), a worker at 1,000/s 50 µs, one
    /// at 100,000/s (or a rate nobody could mean) 30 µs.
    #[test]
    fn the_spin_before_a_deadline_grows_with_the_gap_within_its_bounds() {
        use super::{MAX_PACER_SPIN, PACER_SPIN, pacer_spin};
        use std::time::Duration;
        assert_eq!(pacer_spin(10.0), MAX_PACER_SPIN);
        assert_eq!(pacer_spin(0.001), MAX_PACER_SPIN);
        assert_eq!(pacer_spin(1_000.0), Duration::from_micros(50));
        assert_eq!(pacer_spin(100_000.0), PACER_SPIN);
        assert_eq!(pacer_spin(0.0), PACER_SPIN);
        assert_eq!(pacer_spin(f64::NAN), PACER_SPIN);
        for r in [1.0, 37.0, 2_500.0, 1e9] {
            let s = pacer_spin(r);
            assert!(s >= PACER_SPIN && s <= MAX_PACER_SPIN, "{r}: {s:?}");
            assert!(s.as_secs_f64() * r <= 0.05 || s == PACER_SPIN, "{r}: {s:?}");
        }
    }

    /// Only an open-loop run on epoll without epoll_pwait2 is warned: a
    /// closed loop has no deadlines, io_uring waits to its timespec.
    #[test]
    fn millisecond_waits_are_warned_only_where_they_pace_a_schedule() {
        let w = pacing_resolution(true, &["epoll", "epoll"], false).expect("warned");
        assert!(w.contains("--rate") && w.contains("epoll_pwait2"), "{w}");
        assert_eq!(pacing_resolution(true, &["epoll"], true), None);
        assert_eq!(pacing_resolution(false, &["epoll"], false), None);
        assert_eq!(pacing_resolution(true, &["uring"], false), None);
    }
}
