//! Request/response on a long-lived connection: tcp_rr.
//!
//! The client keeps `burst + 1` transactions in flight (netperf's meaning of
//! burst). Each request's send time goes into a FIFO when its last byte is
//! handed to the kernel; TCP keeps order, so the response that completes next
//! belongs to the oldest entry, and every in-flight transaction is timed on
//! its own. Several requests that are due together go out in one `send`, and
//! one `recv` may complete several responses: the clock is read once per
//! syscall, never per byte, and requests sent straight after the response
//! that made them due take that response's reading (in a ping-pong, one
//! reading per transaction: the latency then includes the few dozen ns of
//! user-space work between the two).
//!
//! With `--delay` (neper's) the loop stays closed but a completed
//! transaction frees its slot only after the pause: the request it would
//! have sent at once is held until then (a FIFO of release times, one per
//! slot, allocated with the flow), and the flow asks the engine to wake it
//! at the oldest. Its latency still runs from the send.
//!
//! With `--rate` the flow is open-loop: its [`OpenLoop`] generator decides
//! when each request is due, not the responses. Response time then runs
//! from the intended start (its FIFO beside the send times), service time
//! from the send, and a request that goes out late (the in-flight bound was
//! full, or the thread woke late) keeps its intended start.
//!
//! The server answers each complete request with one response and counts it.
//!
//! With `--one-way` each request carries its send time and each response
//! its request's arrival and its own departure, laid into the stream and
//! gathered from it by [`super::rr_stamps`].
//!
//! Under a completion driver (`--driver uring`) the same state machines take
//! their bytes from [`Completion::Received`] events instead of `recv`, and
//! hand their sends to the driver: one send per flow in flight at a time,
//! from the flow's own buffer, which therefore stays untouched until its
//! [`Completion::Sent`] comes back; a short send leaves the rest pending.

use std::collections::VecDeque;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use socket2::Socket;

use super::one_way::OneWay;
use super::open_loop::OpenLoop;
use super::rr_stamps::{ClientStamps, ServerStamps};
use super::{
    CounterRef, Flow, FlowCtx, OPS_PER_CALL, Progress, early_eof, failed, queue_send, start_on,
};
use crate::io::socket::{recv, send, shutdown_write, would_block};
use crate::io::{Completion, Driver, Event, RecvBuffers};
use crate::plan::Phase;

/// Upper bound on one flow's I/O buffers; larger messages take several calls.
const MAX_BUF: u64 = 256 << 10;
/// Receive buffers are at least this big, so that a short read (less than
/// the buffer) shows the queue was emptied even for 1-byte messages.
const MIN_RECV_BUF: u64 = 4096;

fn buf_len(msg: u64, in_flight: u64) -> usize {
    msg.saturating_mul(in_flight).clamp(1, MAX_BUF) as usize
}

fn recv_buf_len(msg: u64, in_flight: u64) -> usize {
    buf_len(msg, in_flight).max(MIN_RECV_BUF as usize)
}

/// Provided buffers for one flow under a completion driver. A completion
/// takes one buffer whatever it carries, so small buffers do (a short one
/// only splits a large arrival over several completions), and one per
/// message in flight, plus one, keeps the ring from running dry.
fn provided(msg: u64, in_flight: u64) -> RecvBuffers {
    RecvBuffers {
        size: buf_len(msg, in_flight).clamp(64, 16 << 10),
        count: in_flight as usize + 1,
    }
}

pub struct RrClient {
    sock: Socket,
    counters: CounterRef,
    request: u64,
    response: u64,
    /// Send times of requests handed to the kernel whose responses are due.
    sent_at: VecDeque<Instant>,
    /// Request bytes not yet handed to the kernel.
    tx_pending: u64,
    /// Bytes of the request being sent that are already out.
    tx_partial: u64,
    /// When the first byte of the partly sent request was handed to the kernel.
    partial_start: Instant,
    /// Bytes of the response being read that have arrived.
    rx_partial: u64,
    /// Transactions issued and not yet completed.
    outstanding: u64,
    quota: Option<u64>,
    done_in_measure: u64,
    quota_reported: bool,
    sent_fin: bool,
    send_buf: Vec<u8>,
    recv_buf: Vec<u8>,
    in_flight: u64,
    /// Under a completion driver: the driver does the I/O.
    completion: bool,
    /// A send is with the completion driver (and reads `send_buf`).
    tx_busy: bool,
    /// When that send was queued.
    tx_started: Instant,
    /// Open loop: the generator, and the intended starts of the
    /// transactions issued and not yet completed (oldest first, as `sent_at`).
    open_loop: Option<OpenLoop>,
    intended: VecDeque<Instant>,
    /// `--delay`: the pause between a response and the request it frees.
    delay: Option<Duration>,
    /// Under `--delay`: when each held request may go, oldest first.
    held: VecDeque<Instant>,
    /// `--one-way`: the stamps and their histograms.
    stamps: Option<Box<ClientStamps>>,
}

impl RrClient {
    pub fn new(
        sock: Socket,
        counters: CounterRef,
        request: u64,
        response: u64,
        burst: u32,
        quota: Option<u64>,
    ) -> RrClient {
        let in_flight = burst as u64 + 1;
        let first = quota.map_or(in_flight, |q| q.min(in_flight));
        RrClient {
            sock,
            counters,
            request,
            response,
            sent_at: VecDeque::with_capacity(in_flight as usize),
            tx_pending: first * request,
            tx_partial: 0,
            partial_start: Instant::now(),
            rx_partial: 0,
            outstanding: first,
            quota,
            done_in_measure: 0,
            quota_reported: false,
            sent_fin: false,
            send_buf: vec![0u8; buf_len(request, in_flight)],
            recv_buf: vec![0u8; recv_buf_len(response, in_flight)],
            in_flight,
            completion: false,
            tx_busy: false,
            tx_started: Instant::now(),
            open_loop: None,
            intended: VecDeque::new(),
            delay: None,
            held: VecDeque::new(),
            stamps: None,
        }
    }

    /// Stamp each request and record each response's way up and way down
    /// into `o` (which corrects the server's stamps by its offset).
    /// Before [`Self::open_loop`], which sizes the stamps anew.
    pub fn one_way(mut self, o: OneWay) -> RrClient {
        self.stamps = Some(Box::new(ClientStamps::new(o, self.in_flight)));
        self
    }

    /// Pause `delay` between each response and the request it frees
    /// (closed loop; a zero delay is none).
    pub fn with_delay(mut self, delay: Duration) -> RrClient {
        if !delay.is_zero() {
            self.delay = Some(delay);
            self.held = VecDeque::with_capacity(self.in_flight as usize);
        }
        self
    }

    /// `--delay`: issue each held request whose pause is over. Returns
    /// when the next one is due, None when none is held; past the
    /// measurement the held ones are dropped, as a closed loop issues
    /// nothing new then.
    fn release(&mut self, now: Instant, phase: Phase) -> Option<Instant> {
        if phase >= Phase::Drain {
            self.held.clear();
            return None;
        }
        while let Some(&at) = self.held.front() {
            if at > now {
                return Some(at);
            }
            self.held.pop_front();
            self.outstanding += 1;
            self.tx_pending += self.request;
        }
        None
    }

    /// Run open-loop on `open_loop`: nothing is in flight until its first
    /// transaction is due, and at most its `max_inflight` at a time.
    pub fn open_loop(mut self, open_loop: OpenLoop) -> RrClient {
        self.outstanding = 0;
        self.tx_pending = 0;
        let bound = open_loop.max_inflight();
        // Buffers for the in-flight bound, up to the usual cap; the FIFOs
        // start small and grow only if a stall fills them.
        self.send_buf = vec![0u8; buf_len(self.request, bound)];
        self.recv_buf = vec![0u8; recv_buf_len(self.response, bound)];
        self.intended = VecDeque::with_capacity(bound.min(64) as usize);
        self.sent_at = VecDeque::with_capacity(bound.min(64) as usize);
        self.in_flight = bound;
        self.open_loop = Some(open_loop);
        if let Some(s) = self.stamps.take() {
            self.stamps = Some(Box::new(ClientStamps::new(s.one_way, bound)));
        }
        self
    }

    /// Open loop: issue every transaction whose intended start has come, as
    /// far as the in-flight bound allows; the ones it holds back stay owed
    /// (the schedule does not move on without them). Records how late each
    /// went out. Returns when to wake next: the next intended start, or
    /// None while the bound is full or the flow is done issuing.
    fn issue_due(&mut self, now: Instant, ctx: &mut FlowCtx<'_>) -> Option<Instant> {
        let phase = ctx.phase_now();
        loop {
            let g = self.open_loop.as_ref()?;
            if let Some(next) = g.wait(now) {
                return Some(next);
            }
            if self.outstanding >= g.max_inflight() || !self.may_issue(phase) {
                return None;
            }
            let g = self.open_loop.as_mut()?;
            let due = g.take(now, phase, ctx.open.as_deref_mut(), &self.counters);
            self.intended.push_back(due);
            self.outstanding += 1;
            self.tx_pending += self.request;
        }
    }

    /// What to tell the engine when the socket has nothing more for now:
    /// open-loop flows wake at their next intended start.
    fn wait_for(&self, next: Option<Instant>) -> Progress {
        next.map_or(Progress::Idle, Progress::At)
    }

    fn may_issue(&self, phase: Phase) -> bool {
        let held = self.held.len() as u64;
        phase < Phase::Drain
            && self
                .quota
                .is_none_or(|q| self.done_in_measure + self.outstanding + held < q)
    }

    /// Hand pending request bytes to the kernel. `fresh`: a clock reading
    /// taken just before (the arrival of the response that made these
    /// requests due), which stamps the first send instead of a new reading.
    fn flush(&mut self, fd: i32, mut fresh: Option<Instant>) -> io::Result<()> {
        while self.tx_pending > 0 {
            let n = (self.tx_pending as usize).min(self.send_buf.len());
            // Stamp before the call: the request is handed to the kernel when send begins.
            let t = fresh.take().unwrap_or_else(Instant::now);
            if let Some(s) = &self.stamps {
                let at = self.tx_partial;
                s.lay(
                    &mut self.send_buf[..n],
                    at,
                    self.request,
                    self.partial_start,
                    t,
                );
            }
            match send(fd, &self.send_buf[..n]) {
                Ok(n) => self.sent(n as u64, t),
                Err(e) if would_block(&e) => break,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// `n` request bytes, handed to the kernel at `t`, went out.
    fn sent(&mut self, n: u64, t: Instant) {
        self.counters.add_sent(n);
        self.tx_pending -= n;
        let before = self.tx_partial;
        let done = (before + n) / self.request;
        self.tx_partial = (before + n) % self.request;
        for k in 0..done {
            // A request begun by an earlier send started then.
            let start = if k == 0 && before > 0 {
                self.partial_start
            } else {
                t
            };
            self.sent_at.push_back(start);
        }
        if self.tx_partial > 0 && (done > 0 || before == 0) {
            self.partial_start = t;
        }
    }

    /// `n` response bytes arrived: complete transactions and issue new ones.
    /// Returns the clock reading it took, if it completed any.
    fn received(&mut self, n: u64, ctx: &mut FlowCtx<'_>) -> Option<Instant> {
        self.counters.add_received(n);
        let total = self.rx_partial + n;
        let completed = (total / self.response).min(self.outstanding);
        self.rx_partial = total % self.response;
        if completed == 0 {
            return None;
        }
        let now = Instant::now();
        let phase = ctx.phase_now();
        let measuring = phase == Phase::Measure;
        for _ in 0..completed {
            if let Some(s) = self.stamps.as_deref_mut() {
                s.complete(now, measuring, ctx.hist);
            }
            let sent = self.sent_at.pop_front().unwrap_or(now);
            if self.open_loop.is_some() {
                // Response time from the intended start; service time from the send.
                let meant = self.intended.pop_front().unwrap_or(sent);
                if measuring {
                    OpenLoop::record(ctx, meant, sent, now);
                }
            } else if measuring {
                ctx.hist.record(now.duration_since(sent).as_nanos() as u64);
            }
        }
        if let Some(s) = self.stamps.as_deref_mut() {
            s.settle();
        }
        self.counters.add_transactions(completed);
        self.outstanding -= completed;
        if measuring {
            self.done_in_measure += completed;
        }
        if let Some(g) = &mut self.open_loop {
            g.completed(completed, now, &self.counters);
            // The schedule, not the responses, issues the next requests.
            return Some(now);
        }
        for _ in 0..completed {
            if !self.may_issue(phase) {
                break;
            }
            match self.delay {
                Some(d) => self.held.push_back(now + d),
                None => {
                    self.outstanding += 1;
                    self.tx_pending += self.request;
                }
            }
        }
        Some(now)
    }

    /// Nothing in flight: report a met quota, half-close in the drain.
    /// `Some(Parked)` when there is nothing to do until the next phase.
    fn settle(&mut self, fd: i32, ctx: &mut FlowCtx<'_>) -> io::Result<Option<Progress>> {
        if self.outstanding > 0 || self.tx_pending > 0 {
            return Ok(None);
        }
        if let Some(q) = self.quota
            && !self.quota_reported
            && self.done_in_measure >= q
        {
            self.quota_reported = true;
            ctx.quota_done.fetch_add(1, Relaxed);
        }
        if ctx.phase == Phase::Drain && !self.sent_fin {
            shutdown_write(fd)?;
            self.sent_fin = true;
        }
        if (self.open_loop.is_some() || !self.held.is_empty())
            && ctx.phase < Phase::Drain
            && !self.quota_reported
        {
            // Open loop between two sends, or a request held by --delay:
            // the schedule or the release wakes it.
            return Ok(None);
        }
        // Quota done: nothing to do until the drain.
        Ok((!self.sent_fin).then_some(Progress::Parked))
    }

    /// The completion driver's report: take it in, queue the next send.
    fn on_completion(&mut self, ev: Event, ctx: &mut FlowCtx<'_>) -> io::Result<Progress> {
        let fd = self.sock.as_raw_fd();
        let mut now = None;
        match ev.done {
            Completion::Received { buf, len } => {
                if let Some(s) = self.stamps.as_deref_mut()
                    && let Some(c) = ctx.driver.completions()
                {
                    s.scan(c.received(buf, len), self.rx_partial, self.response);
                }
                now = self.received(len as u64, ctx);
            }
            Completion::Sent { res, .. } => {
                self.tx_busy = false;
                if res < 0 {
                    return Err(failed(res));
                }
                self.sent(res as u64, self.tx_started);
            }
            Completion::Eof if self.sent_fin && self.outstanding == 0 => {
                return Ok(Progress::Done);
            }
            Completion::Eof => return Err(early_eof("the server")),
            Completion::RecvFailed(e) => return Err(failed(e)),
            // This flow queues no connection operations.
            Completion::None
            | Completion::Connected(_)
            | Completion::Accepted(_)
            | Completion::Closed(_) => {}
        }
        let next = match (&self.open_loop, self.delay) {
            (Some(_), _) => self.issue_due(now.unwrap_or_else(Instant::now), ctx),
            (None, Some(_)) => self.release(now.unwrap_or_else(Instant::now), ctx.phase_now()),
            (None, None) => None,
        };
        if !self.tx_busy && self.tx_pending > 0 {
            self.tx_started = Instant::now();
            if let Some(s) = &self.stamps {
                let n = (self.tx_pending as usize).min(self.send_buf.len());
                let (at, begun) = (self.tx_partial, self.partial_start);
                s.lay(
                    &mut self.send_buf[..n],
                    at,
                    self.request,
                    begun,
                    self.tx_started,
                );
            }
            queue_send(ctx, fd, 0, &self.send_buf, self.tx_pending as usize)?;
            self.tx_busy = true;
        }
        if !self.tx_busy
            && let Some(p) = self.settle(fd, ctx)?
        {
            return Ok(p);
        }
        Ok(self.wait_for(next))
    }
}

impl Flow for RrClient {
    fn tcp_socket(&self) -> Option<std::os::fd::RawFd> {
        Some(std::os::fd::AsRawFd::as_raw_fd(&self.sock))
    }

    fn start(&mut self, driver: &mut dyn Driver, slot: usize) -> io::Result<()> {
        self.completion = start_on(driver, self.sock.as_raw_fd(), slot)?;
        if let Some(g) = &mut self.open_loop {
            g.begin(Instant::now());
        }
        Ok(())
    }

    fn recv_buffers(&self) -> Option<RecvBuffers> {
        Some(provided(self.response, self.in_flight.min(1024)))
    }

    fn on_event(&mut self, ev: Event, ctx: &mut FlowCtx<'_>) -> io::Result<Progress> {
        if self.completion {
            return self.on_completion(ev, ctx);
        }
        let fd = self.sock.as_raw_fd();
        // A short read emptied the receive queue; under edge-triggered epoll the
        // next arrival wakes us, so a further recv would only return EAGAIN.
        let mut drained = false;
        // The clock reading of the last completion, which stamps the requests
        // it makes due: in a ping-pong, one reading per transaction, not two.
        // It lives for one pass of the loop; a later call reads the clock anew.
        let mut fresh = None;
        // Open loop: what the schedule says is due by now goes out first.
        let mut next = None;
        if self.open_loop.is_some() {
            let now = Instant::now();
            next = self.issue_due(now, ctx);
            fresh = Some(now);
        } else if self.delay.is_some() {
            let now = Instant::now();
            next = self.release(now, ctx.phase_now());
            fresh = Some(now);
        }
        for _ in 0..OPS_PER_CALL {
            self.flush(fd, fresh.take())?;
            if let Some(p) = self.settle(fd, ctx)? {
                return Ok(p);
            }
            if drained && !ev.may_have_more {
                return Ok(self.wait_for(next));
            }
            let n = match recv(fd, &mut self.recv_buf) {
                Ok(0) => {
                    if self.sent_fin && self.outstanding == 0 {
                        return Ok(Progress::Done);
                    }
                    return Err(early_eof("the server"));
                }
                Ok(n) => n as u64,
                Err(e) if would_block(&e) => return Ok(self.wait_for(next)),
                Err(e) => return Err(e),
            };
            drained = (n as usize) < self.recv_buf.len();
            if let Some(s) = self.stamps.as_deref_mut() {
                s.scan(&self.recv_buf[..n as usize], self.rx_partial, self.response);
            }
            fresh = self.received(n, ctx);
            if let Some(now) = fresh {
                if self.open_loop.is_some() {
                    next = self.issue_due(now, ctx);
                } else if self.delay.is_some() {
                    next = self.release(now, ctx.phase_now());
                }
            }
        }
        Ok(Progress::More)
    }

    fn one_way(&self) -> Option<&OneWay> {
        self.stamps.as_deref().map(|s| &s.one_way)
    }

    /// A blocking receive would hold an open-loop flow past its schedule,
    /// and a held request past its release.
    fn blocking_ok(&self) -> bool {
        self.open_loop.is_none() && self.delay.is_none()
    }
}

pub struct RrServer {
    sock: Socket,
    counters: CounterRef,
    request: u64,
    response: u64,
    rx_partial: u64,
    tx_pending: u64,
    got_eof: bool,
    send_buf: Vec<u8>,
    recv_buf: Vec<u8>,
    in_flight: u64,
    /// Under a completion driver: the driver does the I/O.
    completion: bool,
    /// A send is with the completion driver (and reads `send_buf`).
    tx_busy: bool,
    /// `--one-way`: the stamps of the responses owed.
    stamps: Option<Box<ServerStamps>>,
}

impl RrServer {
    pub fn new(
        sock: Socket,
        counters: CounterRef,
        request: u64,
        response: u64,
        burst: u32,
    ) -> RrServer {
        let in_flight = burst as u64 + 1;
        RrServer {
            sock,
            counters,
            request,
            response,
            rx_partial: 0,
            tx_pending: 0,
            got_eof: false,
            send_buf: vec![0u8; buf_len(response, in_flight)],
            recv_buf: vec![0u8; recv_buf_len(request, in_flight)],
            in_flight,
            completion: false,
            tx_busy: false,
            stamps: None,
        }
    }

    /// Stamp every response with its request's send time and arrival and
    /// its own departure.
    pub fn one_way(mut self) -> RrServer {
        self.stamps = Some(Box::new(ServerStamps::new(self.in_flight)));
        self
    }

    /// Lay the owed responses' stamps into the `n` bytes about to go out.
    fn stamp(&mut self, n: usize) {
        if let Some(s) = self.stamps.as_deref_mut() {
            let n = n.min(self.send_buf.len());
            s.lay(&mut self.send_buf[..n], self.response);
        }
    }

    /// `n` response bytes went out.
    fn sent(&mut self, n: u64) {
        self.counters.add_sent(n);
        self.tx_pending -= n;
        if let Some(s) = self.stamps.as_deref_mut() {
            s.sent(n, self.response);
        }
    }

    /// `n` request bytes arrived: answer every complete request.
    fn received(&mut self, n: u64) {
        self.counters.add_received(n);
        let total = self.rx_partial + n;
        let completed = total / self.request;
        self.rx_partial = total % self.request;
        if completed > 0 {
            self.counters.add_transactions(completed);
            self.tx_pending += completed * self.response;
        }
    }

    /// The completion driver's report: take it in, queue the next send,
    /// and once the client's EOF came and every response went, close.
    fn on_completion(&mut self, ev: Event, ctx: &mut FlowCtx<'_>) -> io::Result<Progress> {
        let fd = self.sock.as_raw_fd();
        match ev.done {
            Completion::Received { buf, len } => {
                if let Some(s) = self.stamps.as_deref_mut()
                    && let Some(c) = ctx.driver.completions()
                {
                    s.scan(c.received(buf, len), self.rx_partial, self.request);
                }
                self.received(len as u64);
            }
            Completion::Sent { res, .. } => {
                self.tx_busy = false;
                if res < 0 {
                    return Err(failed(res));
                }
                self.sent(res as u64);
            }
            Completion::Eof => self.got_eof = true,
            Completion::RecvFailed(e) => return Err(failed(e)),
            // This flow queues no connection operations.
            Completion::None
            | Completion::Connected(_)
            | Completion::Accepted(_)
            | Completion::Closed(_) => {}
        }
        if !self.tx_busy && self.tx_pending > 0 {
            self.stamp(self.tx_pending as usize);
            queue_send(ctx, fd, 0, &self.send_buf, self.tx_pending as usize)?;
            self.tx_busy = true;
        }
        if self.got_eof && !self.tx_busy {
            // Every request answered: close our side too.
            shutdown_write(fd)?;
            return Ok(Progress::Done);
        }
        Ok(Progress::Idle)
    }
}

impl Flow for RrServer {
    fn tcp_socket(&self) -> Option<std::os::fd::RawFd> {
        Some(std::os::fd::AsRawFd::as_raw_fd(&self.sock))
    }

    fn start(&mut self, driver: &mut dyn Driver, slot: usize) -> io::Result<()> {
        self.completion = start_on(driver, self.sock.as_raw_fd(), slot)?;
        Ok(())
    }

    fn recv_buffers(&self) -> Option<RecvBuffers> {
        Some(provided(self.request, self.in_flight))
    }

    fn on_event(&mut self, ev: Event, ctx: &mut FlowCtx<'_>) -> io::Result<Progress> {
        if self.completion {
            return self.on_completion(ev, ctx);
        }
        let fd = self.sock.as_raw_fd();
        let mut drained = false;
        for _ in 0..OPS_PER_CALL {
            while self.tx_pending > 0 {
                let n = (self.tx_pending as usize).min(self.send_buf.len());
                self.stamp(n);
                match send(fd, &self.send_buf[..n]) {
                    Ok(n) => self.sent(n as u64),
                    Err(e) if would_block(&e) => return Ok(Progress::Idle),
                    Err(e) => return Err(e),
                }
            }
            if self.got_eof {
                // Every request answered: close our side too.
                shutdown_write(fd)?;
                return Ok(Progress::Done);
            }
            if drained && !ev.may_have_more {
                return Ok(Progress::Idle);
            }
            let n = match recv(fd, &mut self.recv_buf) {
                Ok(0) => {
                    self.got_eof = true;
                    continue;
                }
                Ok(n) => n as u64,
                Err(e) if would_block(&e) => return Ok(Progress::Idle),
                Err(e) => return Err(e),
            };
            drained = (n as usize) < self.recv_buf.len();
            if let Some(s) = self.stamps.as_deref_mut() {
                s.scan(&self.recv_buf[..n as usize], self.rx_partial, self.request);
            }
            self.received(n);
        }
        Ok(Progress::More)
    }

    fn blocking_ok(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::net::Shutdown;

    use super::*;
    use crate::io::RecvBuffers;
    use crate::workload::harness::{Harness, Status, read_exactly, read_to_eof, tcp_pair};

    /// A client and a server flow over loopback, measured until `at_least`
    /// transactions, then drained: both ends count the same transactions
    /// and each other's bytes, the latencies are the measured transactions,
    /// and the drain completes at most the `burst + 1` then in flight.
    fn client_and_server(request: u64, response: u64, burst: u32, at_least: u64) {
        let (a, b) = tcp_pair();
        let b = socket2::Socket::from(b);
        b.set_nonblocking(true).unwrap();
        let mut h = Harness::new(2);
        let (cc, sc) = (h.counter(0), h.counter(1));
        h.add(RrClient::new(a, cc, request, response, burst, None));
        h.add(RrServer::new(b, sc, request, response, burst));
        h.run_until("measured transactions", |h| {
            h.counts(0).transactions >= at_least
        });
        let measured = h.counts(0).transactions;
        h.set_phase(Phase::Drain);
        h.run_until("both ends done", |h| {
            h.status(0) == &Status::Done && h.status(1) == &Status::Done
        });
        let (c, s) = (h.counts(0), h.counts(1));
        assert_eq!(c.transactions, s.transactions, "{c:?} {s:?}");
        assert!(
            c.transactions - measured <= burst as u64 + 1,
            "the drain completed {} more, with {} in flight",
            c.transactions - measured,
            burst + 1
        );
        assert_eq!(c.bytes_sent, c.transactions * request);
        assert_eq!(s.bytes_received, c.bytes_sent);
        assert_eq!(s.bytes_sent, s.transactions * response);
        assert_eq!(c.bytes_received, s.bytes_sent);
        assert_eq!(h.latencies(), measured);
    }

    #[test]
    fn a_ping_pong_counts_every_transaction_at_both_ends() {
        client_and_server(100, 300, 0, 200);
    }

    #[test]
    fn a_burst_counts_every_transaction_at_both_ends() {
        // Messages larger than the flows' buffers take several calls each.
        client_and_server(300 << 10, 70_000, 7, 40);
        client_and_server(1, 1, 15, 2000);
    }

    /// `--one-way` on one kernel (offset 0, exact), with a burst in flight,
    /// over epoll and io_uring (whose 64-byte provided buffers split every
    /// message), with messages from the least that carry the stamps to
    /// ones larger than the flows' buffers: every measured transaction
    /// records both ways, none below zero, and over the same transactions
    /// the two ways' means fit in the round trip's (each way is its part of
    /// the round trip less the server's turnaround).
    #[test]
    fn one_way_stamps_pair_with_their_transactions_in_the_stream() {
        for ring in [false, true] {
            for (request, response, burst) in [(16, 32, 7), (300 << 10, 70_000, 3), (100, 33, 0)] {
                let mut h = if ring {
                    if let Err(why) = crate::io::uring::probe() {
                        eprintln!("SKIPPED: io_uring unavailable: {why}");
                        continue;
                    }
                    let bufs = RecvBuffers {
                        size: 64,
                        count: 256,
                    };
                    let d =
                        crate::io::uring::Uring::new(Some(bufs), None).expect("io_uring driver");
                    Harness::with_driver(2, Box::new(d))
                } else {
                    Harness::new(2)
                };
                let (a, b) = tcp_pair();
                let b = socket2::Socket::from(b);
                b.set_nonblocking(true).unwrap();
                let (cc, sc) = (h.counter(0), h.counter(1));
                h.add(RrClient::new(a, cc, request, response, burst, None).one_way(OneWay::new(0)));
                h.add(RrServer::new(b, sc, request, response, burst).one_way());
                h.run_until("measured transactions", |h| h.counts(0).transactions >= 200);
                h.set_phase(Phase::Drain);
                h.run_until("both ends done", |h| {
                    h.status(0) == &Status::Done && h.status(1) == &Status::Done
                });
                let clamped = h.flow(0).one_way().unwrap().clamped;
                let case = format!("ring {ring}, -r {request},{response}, burst {burst}");
                let (lat, up, down) = h.one_way_summaries();
                let (lat, up, down) =
                    (lat.unwrap(), up.summary().unwrap(), down.summary().unwrap());
                assert_eq!(clamped, 0, "{case}");
                assert_eq!((up.count, down.count), (lat.count, lat.count), "{case}");
                assert!(
                    up.mean + down.mean <= lat.mean * 1.01,
                    "{case}: up {} + down {} > round trip {}",
                    up.mean,
                    down.mean,
                    lat.mean
                );
            }
        }
    }

    #[test]
    fn a_burst_keeps_burst_plus_one_in_flight() {
        let (sock, mut peer) = tcp_pair();
        let mut h = Harness::new(1);
        let c = h.counter(0);
        h.add(RrClient::new(sock, c, 100, 50, 3, None));
        h.settle();
        // burst 3: four requests out, and no more until a response comes.
        assert_eq!(h.counts(0).bytes_sent, 400);
        read_exactly(&mut peer, 400);
        peer.write_all(&[0; 50]).unwrap();
        h.run_until("the first response", |h| h.counts(0).transactions == 1);
        h.settle();
        assert_eq!(h.counts(0).bytes_sent, 500);
        // Half a response completes nothing.
        peer.write_all(&[0; 25]).unwrap();
        h.run_until("half a response", |h| h.counts(0).bytes_received == 75);
        h.settle();
        assert_eq!(h.counts(0).transactions, 1);
        assert_eq!(h.counts(0).bytes_sent, 500);
        // Its other half and two more: three done, three more issued.
        peer.write_all(&[0; 125]).unwrap();
        h.run_until("three responses", |h| h.counts(0).transactions == 4);
        h.settle();
        assert_eq!(h.counts(0).bytes_sent, 800);
        read_exactly(&mut peer, 400);
    }

    #[test]
    fn a_quota_below_the_burst_issues_only_the_quota() {
        let (sock, mut peer) = tcp_pair();
        let mut h = Harness::new(1);
        let c = h.counter(0);
        h.add(RrClient::new(sock, c, 10, 10, 7, Some(3)));
        h.settle();
        assert_eq!(h.counts(0).bytes_sent, 30);
        read_exactly(&mut peer, 30);
        peer.write_all(&[0; 30]).unwrap();
        h.run_until("the quota", |h| h.status(0) == &Status::Parked);
        assert_eq!(h.counts(0).transactions, 3);
        assert_eq!(h.counts(0).bytes_sent, 30);
        assert_eq!(h.quota_done(), 1);
    }

    #[test]
    fn the_drain_waits_for_the_responses_then_half_closes() {
        let (sock, mut peer) = tcp_pair();
        let mut h = Harness::new(1);
        let c = h.counter(0);
        h.add(RrClient::new(sock, c, 100, 50, 1, None));
        h.settle();
        read_exactly(&mut peer, 200);
        h.set_phase(Phase::Drain);
        h.settle();
        // Two still in flight: no new request, and no FIN before their answers.
        assert_eq!(h.counts(0).bytes_sent, 200);
        assert_eq!(h.status(0), &Status::Active);
        peer.set_nonblocking(true).unwrap();
        let mut one = [0u8; 1];
        let r = std::io::Read::read(&mut peer, &mut one);
        assert!(
            r.as_ref()
                .is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock),
            "{r:?}"
        );
        peer.set_nonblocking(false).unwrap();
        peer.write_all(&[0; 100]).unwrap();
        h.run_until("the last responses", |h| h.counts(0).transactions == 2);
        h.settle();
        // Then the client's FIN, and nothing before it.
        assert_eq!(read_to_eof(&mut peer), 0);
        // The client ends on the server's EOF.
        assert_eq!(h.status(0), &Status::Active);
        peer.shutdown(Shutdown::Write).unwrap();
        h.run_until("the client done", |h| h.status(0) != &Status::Active);
        assert_eq!(h.status(0), &Status::Done);
        assert_eq!(h.counts(0).bytes_sent, 200);
    }

    #[test]
    fn a_server_that_closes_before_the_drain_is_an_error() {
        let (sock, mut peer) = tcp_pair();
        let mut h = Harness::new(1);
        let c = h.counter(0);
        h.add(RrClient::new(sock, c, 100, 50, 0, None));
        h.settle();
        read_exactly(&mut peer, 100);
        peer.shutdown(Shutdown::Write).unwrap();
        h.run_until("the client's error", |h| h.status(0) != &Status::Active);
        match h.status(0) {
            Status::Failed(e) => assert!(e.contains("before the test ended"), "{e}"),
            s => panic!("{s:?}"),
        }
    }

    #[test]
    fn the_server_answers_every_whole_request_then_closes_on_eof() {
        let (sock, mut peer) = tcp_pair();
        let mut h = Harness::new(1);
        let c = h.counter(0);
        h.add(RrServer::new(sock, c, 100, 40, 0));
        // Three and a half requests, split inside the second and the third.
        peer.write_all(&[0; 150]).unwrap();
        h.run_until("a request and a half", |h| {
            h.counts(0).bytes_received == 150
        });
        peer.write_all(&[0; 150]).unwrap();
        h.run_until("three requests", |h| h.counts(0).bytes_received == 300);
        peer.write_all(&[0; 50]).unwrap();
        peer.shutdown(Shutdown::Write).unwrap();
        h.run_until("the server done", |h| h.status(0) != &Status::Active);
        assert_eq!(h.status(0), &Status::Done);
        let s = h.counts(0);
        assert_eq!(
            (s.transactions, s.bytes_received, s.bytes_sent),
            (3, 350, 120)
        );
        assert_eq!(read_to_eof(&mut peer), 120);
    }
}
