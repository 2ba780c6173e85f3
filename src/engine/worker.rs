//! One worker thread: the per-transaction hot path. A worker pins itself,
//! creates its driver, starts its flows and then turns one loop until its
//! flows are done or the session stops it: read the phase, wait for
//! readiness (or a flow's moment: pacing, timeouts), and hand each event to
//! its flow. Nothing in the loop takes a lock or allocates; a phase change
//! kicks every flow once, so a flow blocked on one direction still learns
//! that it must drain. What the session and the workers share is
//! [`Shared`]; the handle that starts them is [`super::Engine`].

use std::sync::atomic::Ordering::{Acquire, Relaxed};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::place::WorkerSpec;
use super::sched;
use super::watchdog::{WatchSlot, Watched};
use crate::io::{DriverKind, Event};
use crate::plan::Phase;
use crate::stats::latency::{IntervalTable, LatencyHistogram, LatencyRecorder, OpenLoopRecorder};
use crate::workload::{Flow, FlowCtx, KICK, Progress, token};

/// The longest a worker waits with nothing ready and no flow's moment
/// due: its checks of the phase and the stop flag run this often.
const IDLE_WAIT: std::time::Duration = std::time::Duration::from_millis(100);

/// What the session's handle ([`super::Engine`]) and its workers share:
/// the atomics it steers them by, the interval tables they hand their
/// histograms to, and the first error. Read by every worker on every turn
/// of its loop, written by the session at phase changes and ticks.
pub(super) struct Shared {
    pub(super) phase: AtomicU8,
    pub(super) stop: AtomicBool,
    pub(super) quota_done: AtomicU32,
    pub(super) running: AtomicU32,
    pub(super) error: Mutex<Option<String>>,
    /// One per worker, for the watchdog of blocking workers.
    pub(super) watch: Vec<WatchSlot>,
    /// The interval the session is in (its tick count).
    pub(super) epoch: Arc<AtomicU32>,
    pub(super) intervals: Arc<Mutex<IntervalTable>>,
    /// Open loop: service time per interval.
    pub(super) service_intervals: Arc<Mutex<IntervalTable>>,
    /// The flows are open-loop: workers keep service-time and lag histograms.
    pub(super) open_loop: bool,
    /// The NAPI busy polling the first io_uring worker's ring read back;
    /// every ring registers the same setting.
    pub(super) napi: std::sync::OnceLock<crate::io::napi::NapiSet>,
}

impl Shared {
    /// Keep the first error a worker or the session reports.
    pub(super) fn fail(&self, msg: String) {
        let mut e = self.error.lock().unwrap_or_else(|p| p.into_inner());
        if e.is_none() {
            *e = Some(msg);
        }
    }
}

impl Watched for Shared {
    fn slots(&self) -> &[WatchSlot] {
        &self.watch
    }

    fn running(&self) -> bool {
        self.running.load(Relaxed) > 0
    }

    fn stopping(&self) -> bool {
        self.stop.load(Relaxed)
    }
}

/// What a worker hands back when it ends: its histograms and its flows.
pub(super) struct WorkerOutcome {
    pub(super) hist: LatencyHistogram,
    pub(super) service: LatencyHistogram,
    pub(super) lag: LatencyHistogram,
    pub(super) flows: Vec<Box<dyn Flow>>,
}

/// Per-flow bookkeeping of the worker loop.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Status {
    Active,
    Parked,
    Done,
}

/// How long one blocking call of these flows may wait.
pub(super) fn blocking_timeout(flows: &[Box<dyn Flow>]) -> std::time::Duration {
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

/// Run one worker thread's flows until they are done or the engine stops,
/// recording their latency into the shared interval tables.
pub(super) fn run_worker(
    shared: &Shared,
    spec: WorkerSpec,
    kind: DriverKind,
    me: usize,
) -> WorkerOutcome {
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
        napi,
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
        kind.create(blocking_timeout(&flows), recv_buffers(&flows, kind), napi)
    };
    let mut driver = match created {
        Ok(d) => d,
        Err(e) => {
            fail(format!("creating the {} driver: {e}", kind.name()));
            return flows;
        }
    };
    if let Some(set) = driver.napi() {
        let _ = shared.napi.set(set);
    }
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
