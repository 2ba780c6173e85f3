//! The flow state machines, one file per test type.
//!
//! A flow owns its socket(s) and buffers (allocated once, when the flow is
//! built) and moves data when its driver reports readiness. It counts into
//! its own [`FlowCounters`] and records latencies into its worker's histogram
//! only during the measurement phase. Every flow drains the same way at the
//! end: stop generating, half-close, read until the peer's EOF. So the bytes
//! and transactions one end sent equal what the other end received, exactly.

pub mod capacity;
pub mod crr;
#[cfg(test)]
pub(crate) mod harness;
pub mod kinds;
pub mod one_way;
pub mod open_loop;
pub mod rr;
mod rr_stamps;
pub mod schedule;
pub mod stream;
pub mod udp;

use std::io;
use std::ops::Deref;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU32};

use crate::io::{Driver, Event};
use crate::plan::Phase;
use crate::stats::counters::FlowCounters;
use crate::stats::latency::{LatencyRecorder, OpenLoopRecorder};

/// How many data syscalls a flow may make per wake-up before yielding, so one
/// busy flow neither starves the others on its thread nor hides a phase change.
pub const OPS_PER_CALL: usize = 16;

/// Token bits: the high 32 name the flow on its worker, the low 32 are the flow's own.
pub fn token(flow_slot: usize, sub: u32) -> u64 {
    ((flow_slot as u64) << 32) | sub as u64
}

/// The low token bits of a wake-up the engine made up (see [`crate::io::Event::kick`]).
pub const KICK: u32 = u32::MAX;

/// The flow's own part of a token.
pub fn sub_token(token: u64) -> u32 {
    token as u32
}

/// What a flow reports after handling a wake-up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// Waiting for the next readiness edge.
    Idle,
    /// Used its budget with work left: call again without waiting.
    More,
    /// Nothing to do until the next phase change (a count-limited flow that met its quota).
    Parked,
    /// Waiting for readiness, and for this moment at the latest (pacing, timeouts).
    At(std::time::Instant),
    /// Finished (drained, or quota done and drained); never call again.
    Done,
}

/// What a flow may touch besides its own state.
pub struct FlowCtx<'a> {
    pub phase: Phase,
    pub hist: &'a mut LatencyRecorder,
    /// Open-loop flows: service time and the generator's lag (None unless
    /// the engine runs open-loop flows).
    pub open: Option<&'a mut OpenLoopRecorder>,
    pub driver: &'a mut dyn Driver,
    /// Flows that finished their transaction quota (count-limited runs).
    pub quota_done: &'a AtomicU32,
    /// This flow's slot on its worker (for tokens of sockets it opens later).
    pub slot: usize,
    /// The live phase; `phase` is the one read at the top of this wake-up.
    pub live_phase: &'a AtomicU8,
}

impl FlowCtx<'_> {
    /// The phase as of now. A relaxed load of a byte that changes a few times
    /// per test: a plain load on x86, cheap enough per completed batch, so
    /// histogram membership and quotas follow the same boundaries as the
    /// session's counter snapshots (the session switches the phase first, then
    /// snapshots, then tells the peer).
    #[inline]
    pub fn phase_now(&self) -> Phase {
        // Acquire: pairs with the session's release, so a flow that sees the
        // new phase also records its latencies into the new interval.
        Phase::from_u8(self.live_phase.load(std::sync::atomic::Ordering::Acquire))
    }

    /// Has the drain begun, as of now? A peer's EOF that follows our drain is
    /// never taken for an early close.
    pub fn draining_now(&self) -> bool {
        self.phase == Phase::Drain || self.phase_now() == Phase::Drain
    }
}

/// One flow's state machine.
pub trait Flow: Send {
    /// Register the flow's sockets; called once on the worker thread.
    fn start(&mut self, driver: &mut dyn Driver, slot: usize) -> io::Result<()>;
    /// Handle readiness (or a kick: a phase change, or leftover budget).
    fn on_event(&mut self, ev: Event, ctx: &mut FlowCtx<'_>) -> io::Result<Progress>;
    /// Can this flow run alone under the blocking driver?
    fn blocking_ok(&self) -> bool;
    /// How long a blocking call may wait under the blocking driver.
    fn blocking_timeout(&self) -> std::time::Duration {
        crate::io::blocking::POLL_TIMEOUT
    }
    /// Does this flow close sockets while it runs (one connection per transaction)?
    fn closes_sockets(&self) -> bool {
        false
    }
    /// Connections this flow turned away (wrong peer or token); servers only.
    fn refused(&self) -> u64 {
        0
    }
    /// How long its send and receive calls took (bulk flows only).
    fn call_times(&self) -> Option<&crate::stats::calltime::SendRecvTimes> {
        None
    }
    /// capacity receivers: the gaps of the packet trains they received.
    fn train_gaps(&self) -> Option<crate::stats::dispersion::TrainGaps> {
        None
    }
    /// MSG_ZEROCOPY sends and completions (`--zerocopy` senders only).
    fn zerocopy(&self) -> Option<crate::io::zerocopy::ZeroCopyCounts> {
        None
    }
    /// Can this flow take its data from a completion driver
    /// ([`crate::io::Completions`]), and into what buffers? `count` is this
    /// flow's share of the worker's ring. None: it does its own I/O.
    fn recv_buffers(&self) -> Option<crate::io::RecvBuffers> {
        None
    }
    /// The long-lived TCP socket, for TCP_INFO at the end (retransmissions).
    fn tcp_socket(&self) -> Option<std::os::fd::RawFd> {
        None
    }
    /// Request/response clients with `--one-way`: the ways up and down
    /// they recorded.
    fn one_way(&self) -> Option<&one_way::OneWay> {
        None
    }
}

/// A flow's handle on its counters inside the engine's shared block.
#[derive(Clone)]
pub struct CounterRef {
    block: Arc<[FlowCounters]>,
    idx: usize,
}

impl CounterRef {
    pub fn new(block: Arc<[FlowCounters]>, idx: usize) -> CounterRef {
        assert!(idx < block.len());
        CounterRef { block, idx }
    }
}

impl Deref for CounterRef {
    type Target = FlowCounters;
    #[inline]
    fn deref(&self) -> &FlowCounters {
        &self.block[self.idx]
    }
}

/// Start a flow's one socket on its driver: a multishot receive under a
/// completion driver (true: the flow then leaves its I/O to the driver),
/// readiness otherwise (false).
pub(crate) fn start_on(driver: &mut dyn Driver, fd: RawFd, slot: usize) -> io::Result<bool> {
    match driver.completions() {
        Some(c) => c.recv_multishot(fd, token(slot, 0)).map(|_| true),
        None => driver.register(fd, token(slot, 0)).map(|_| false),
    }
}

/// Queue the first `len` bytes of `buf` as a send tagged `tag` with the
/// completion driver. `buf` must be a buffer of the flow's that it neither
/// writes nor frees until the send's [`crate::io::Completion::Sent`]:
/// flows allocate such buffers once and are dropped only after their
/// driver, which waits for every pending request when it is dropped.
pub(crate) fn queue_send(
    ctx: &mut FlowCtx<'_>,
    fd: RawFd,
    tag: u32,
    buf: &[u8],
    len: usize,
) -> io::Result<()> {
    let c = ctx
        .driver
        .completions()
        .ok_or_else(|| io::Error::other("the completion driver went away"))?;
    // SAFETY: see above; the flows that call this keep that promise.
    unsafe {
        c.send(
            fd,
            token(ctx.slot, 0),
            tag,
            buf.as_ptr(),
            len.min(buf.len()),
        )
    }
}

/// The errno of a failed completion as an error.
pub(crate) fn failed(res: i32) -> io::Error {
    io::Error::from_raw_os_error(res.abs())
}

/// A peer that vanished before the drain began is an error on the client;
/// the server instead learns of it through the control connection.
pub fn early_eof(who: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!("{who} closed the data connection before the test ended"),
    )
}
