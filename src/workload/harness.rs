//! A test bench for the flow state machines: the engine's worker loop cut
//! down to one thread and one driver (epoll unless a test names another),
//! so that a unit test can run a client and a server flow (or one flow
//! against a raw socket it drives by hand) over loopback and look at their
//! counters, without the engine's threads, phases by the clock or the
//! control protocol.
//!
//! It keeps the engine's rules for when a flow is called: on its readiness
//! events, on a kick at start and at each phase change, again at once after
//! `More`, at the moment an `At` names, and never after `Done`, `Parked`
//! (until the phase changes) or an error.

use std::sync::atomic::{AtomicU8, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{CounterRef, Flow, FlowCtx, KICK, Progress, token};
use crate::io::epoll::Epoll;
use crate::io::{Driver, Event};
use crate::plan::Phase;
use crate::stats::counters::{Counts, FlowCounters};
use crate::stats::latency::{IntervalTable, LatencyRecorder, OpenLoopRecorder};

/// How long [`Harness::run_until`] waits for its condition before it fails
/// the test instead of hanging it. Loopback work of milliseconds; the
/// margin is for a machine busy with other builds.
const GUARD: Duration = Duration::from_secs(60);

/// Where a flow stands.
#[derive(Debug, PartialEq, Eq)]
pub enum Status {
    Active,
    Parked,
    Done,
    Failed(String),
}

pub struct Harness {
    driver: Box<dyn Driver>,
    flows: Vec<Box<dyn Flow>>,
    status: Vec<Status>,
    counters: Arc<[FlowCounters]>,
    phase: AtomicU8,
    quota_done: AtomicU32,
    lat: LatencyRecorder,
    /// Where `lat` hands in its intervals (`--one-way`'s among them).
    table: Arc<Mutex<IntervalTable>>,
    pub open: OpenLoopRecorder,
    /// Flows to kick in the next round.
    ready: Vec<usize>,
    wake: Vec<Option<Instant>>,
}

impl Harness {
    /// A bench with counters for `flows` flows, in the measure phase.
    pub fn new(flows: usize) -> Harness {
        Harness::with_driver(flows, Box::new(Epoll::new().expect("epoll")))
    }

    /// [`Harness::new`] on another driver (io_uring, to run the completion path).
    pub fn with_driver(flows: usize, driver: Box<dyn Driver>) -> Harness {
        let counters: Arc<[FlowCounters]> = (0..flows).map(|_| FlowCounters::default()).collect();
        let table = Arc::new(Mutex::new(IntervalTable::new(1, &[])));
        Harness {
            driver,
            flows: Vec::new(),
            status: Vec::new(),
            counters,
            phase: AtomicU8::new(Phase::Measure as u8),
            quota_done: AtomicU32::new(0),
            lat: LatencyRecorder::new(Arc::new(AtomicU32::new(0)), table.clone()),
            table,
            open: OpenLoopRecorder {
                service: LatencyRecorder::new(
                    Arc::new(AtomicU32::new(0)),
                    Arc::new(Mutex::new(IntervalTable::new(1, &[]))),
                ),
                lag: crate::stats::latency::LatencyHistogram::new(),
            },
            ready: Vec::new(),
            wake: Vec::new(),
        }
    }

    /// The counters of the `i`th flow added.
    pub fn counter(&self, i: usize) -> CounterRef {
        CounterRef::new(self.counters.clone(), i)
    }

    pub fn counts(&self, i: usize) -> Counts {
        self.counters[i].snapshot()
    }

    /// Start a flow on the driver; it is kicked in the next round.
    pub fn add(&mut self, mut flow: impl Flow + 'static) -> usize {
        let slot = self.flows.len();
        flow.start(self.driver.as_mut(), slot).expect("flow start");
        self.flows.push(Box::new(flow));
        self.status.push(Status::Active);
        self.wake.push(None);
        self.ready.push(slot);
        slot
    }

    pub fn flow(&self, i: usize) -> &dyn Flow {
        self.flows[i].as_ref()
    }

    pub fn status(&self, i: usize) -> &Status {
        &self.status[i]
    }

    /// Flows that reported a met quota.
    pub fn quota_done(&self) -> u32 {
        self.quota_done.load(Ordering::Relaxed)
    }

    /// Switch the phase and kick every flow not done, as the engine does.
    pub fn set_phase(&mut self, p: Phase) {
        self.phase.store(p as u8, Ordering::Release);
        for i in 0..self.flows.len() {
            if self.status[i] == Status::Parked {
                self.status[i] = Status::Active;
            }
            if self.status[i] == Status::Active && !self.ready.contains(&i) {
                self.ready.push(i);
            }
        }
    }

    /// Kick flow `i` in the next round (a test that wrote to its peer by hand).
    pub fn kick(&mut self, i: usize) {
        if !self.ready.contains(&i) {
            self.ready.push(i);
        }
    }

    /// One round: wait for readiness (not at all when a flow is due), then
    /// call every flow with an event or a kick.
    pub fn round(&mut self) {
        let now = Instant::now();
        for i in 0..self.flows.len() {
            if self.wake[i].is_some_and(|t| t <= now) {
                self.wake[i] = None;
                self.kick(i);
            }
        }
        let timeout = if self.ready.is_empty() {
            Duration::from_millis(10)
        } else {
            Duration::ZERO
        };
        let mut events = Vec::new();
        self.driver.wait(&mut events, timeout).expect("driver wait");
        let kicks: Vec<Event> = std::mem::take(&mut self.ready)
            .into_iter()
            .map(|i| Event::kick(token(i, KICK)))
            .collect();
        let phase = Phase::from_u8(self.phase.load(Ordering::Acquire));
        for ev in events.into_iter().chain(kicks) {
            let i = (ev.token >> 32) as usize;
            if self.status[i] != Status::Active {
                continue;
            }
            let mut ctx = FlowCtx {
                phase,
                hist: &mut self.lat,
                open: Some(&mut self.open),
                driver: self.driver.as_mut(),
                quota_done: &self.quota_done,
                slot: i,
                live_phase: &self.phase,
            };
            match self.flows[i].on_event(ev, &mut ctx) {
                Ok(Progress::Idle) => {}
                Ok(Progress::More) => {
                    if !self.ready.contains(&i) {
                        self.ready.push(i);
                    }
                }
                Ok(Progress::Parked) => self.status[i] = Status::Parked,
                Ok(Progress::At(t)) => self.wake[i] = Some(t),
                Ok(Progress::Done) => self.status[i] = Status::Done,
                Err(e) => self.status[i] = Status::Failed(e.to_string()),
            }
        }
    }

    /// Run rounds until `done` holds; fail the test, naming `what`, if it
    /// has not held after a minute.
    pub fn run_until(&mut self, what: &str, mut done: impl FnMut(&Harness) -> bool) {
        let t0 = Instant::now();
        while !done(self) {
            assert!(
                t0.elapsed() < GUARD,
                "{what}: not reached; flows {:?}, counts {:?}",
                self.status,
                (0..self.flows.len())
                    .map(|i| self.counts(i))
                    .collect::<Vec<_>>()
            );
            self.round();
        }
    }

    /// Run rounds until no flow has anything left to do at once: every
    /// kick taken and no readiness pending.
    pub fn settle(&mut self) {
        for _ in 0..3 {
            self.round();
        }
        let t0 = Instant::now();
        while !self.ready.is_empty() {
            assert!(
                t0.elapsed() < GUARD,
                "flows never settled: {:?}",
                self.status
            );
            self.round();
        }
    }

    /// Latencies recorded so far (every flow shares one recorder).
    pub fn latencies(self) -> u64 {
        self.lat.finish().count()
    }

    /// Their summary (None: none recorded), and `--one-way`'s two ways over every interval.
    pub fn one_way_summaries(
        self,
    ) -> (
        Option<crate::stats::latency::LatencySummary>,
        crate::stats::latency::LatencyHistogram,
        crate::stats::latency::LatencyHistogram,
    ) {
        let lat = self.lat.finish().summary();
        let (mut up, mut down) = Default::default();
        let ivs = self.table.lock().unwrap().take_one_way();
        for iv in ivs.values() {
            crate::stats::latency::LatencyHistogram::merge_sparse(&mut up, &iv.up);
            crate::stats::latency::LatencyHistogram::merge_sparse(&mut down, &iv.down);
        }
        (lat, up, down)
    }
}

/// A connected loopback TCP pair: (non-blocking, for a flow; blocking with
/// a read timeout, for a test to drive by hand). Nagle is off at both ends,
/// as thrum's data sockets have it.
pub fn tcp_pair() -> (socket2::Socket, std::net::TcpStream) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let ours = std::net::TcpStream::connect(l.local_addr().unwrap()).expect("connect");
    let (theirs, _) = l.accept().expect("accept");
    ours.set_nodelay(true).unwrap();
    ours.set_nonblocking(true).unwrap();
    theirs.set_nodelay(true).unwrap();
    theirs
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    (socket2::Socket::from(ours), theirs)
}

/// Read exactly `n` bytes from a blocking socket.
pub fn read_exactly(s: &mut std::net::TcpStream, n: usize) {
    let mut buf = vec![0u8; n];
    std::io::Read::read_exact(s, &mut buf).expect("read");
}

/// Read until EOF; the bytes that came before it.
pub fn read_to_eof(s: &mut std::net::TcpStream) -> usize {
    let mut v = Vec::new();
    std::io::Read::read_to_end(s, &mut v).expect("read to EOF");
    v.len()
}
