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
//! The server answers each complete request with one response and counts it.
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
use std::time::Instant;

use socket2::Socket;

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
        }
    }

    fn may_issue(&self, phase: Phase) -> bool {
        phase < Phase::Drain
            && self
                .quota
                .is_none_or(|q| self.done_in_measure + self.outstanding < q)
    }

    /// Hand pending request bytes to the kernel. `fresh`: a clock reading
    /// taken just before (the arrival of the response that made these
    /// requests due), which stamps the first send instead of a new reading.
    fn flush(&mut self, fd: i32, mut fresh: Option<Instant>) -> io::Result<()> {
        while self.tx_pending > 0 {
            let n = (self.tx_pending as usize).min(self.send_buf.len());
            // Stamp before the call: the request is handed to the kernel when send begins.
            let t = fresh.take().unwrap_or_else(Instant::now);
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
            let t0 = self.sent_at.pop_front().unwrap_or(now);
            if measuring {
                ctx.hist.record(now.duration_since(t0).as_nanos() as u64);
            }
        }
        self.counters.add_transactions(completed);
        self.outstanding -= completed;
        if measuring {
            self.done_in_measure += completed;
        }
        for _ in 0..completed {
            if !self.may_issue(phase) {
                break;
            }
            self.outstanding += 1;
            self.tx_pending += self.request;
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
        // Quota done: nothing to do until the drain.
        Ok((!self.sent_fin).then_some(Progress::Parked))
    }

    /// The completion driver's report: take it in, queue the next send.
    fn on_completion(&mut self, ev: Event, ctx: &mut FlowCtx<'_>) -> io::Result<Progress> {
        let fd = self.sock.as_raw_fd();
        match ev.done {
            Completion::Received { len, .. } => {
                self.received(len as u64, ctx);
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
            Completion::None => {}
        }
        if !self.tx_busy && self.tx_pending > 0 {
            self.tx_started = Instant::now();
            queue_send(ctx, fd, 0, &self.send_buf, self.tx_pending as usize)?;
            self.tx_busy = true;
        }
        if !self.tx_busy
            && let Some(p) = self.settle(fd, ctx)?
        {
            return Ok(p);
        }
        Ok(Progress::Idle)
    }
}

impl Flow for RrClient {
    fn tcp_socket(&self) -> Option<std::os::fd::RawFd> {
        Some(std::os::fd::AsRawFd::as_raw_fd(&self.sock))
    }

    fn start(&mut self, driver: &mut dyn Driver, slot: usize) -> io::Result<()> {
        self.completion = start_on(driver, self.sock.as_raw_fd(), slot)?;
        Ok(())
    }

    fn recv_buffers(&self) -> Option<RecvBuffers> {
        Some(provided(self.response, self.in_flight))
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
        for _ in 0..OPS_PER_CALL {
            self.flush(fd, fresh.take())?;
            if let Some(p) = self.settle(fd, ctx)? {
                return Ok(p);
            }
            if drained && !ev.may_have_more {
                return Ok(Progress::Idle);
            }
            let n = match recv(fd, &mut self.recv_buf) {
                Ok(0) => {
                    if self.sent_fin && self.outstanding == 0 {
                        return Ok(Progress::Done);
                    }
                    return Err(early_eof("the server"));
                }
                Ok(n) => n as u64,
                Err(e) if would_block(&e) => return Ok(Progress::Idle),
                Err(e) => return Err(e),
            };
            drained = (n as usize) < self.recv_buf.len();
            fresh = self.received(n, ctx);
        }
        Ok(Progress::More)
    }

    fn blocking_ok(&self) -> bool {
        true
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
            Completion::Received { len, .. } => self.received(len as u64),
            Completion::Sent { res, .. } => {
                self.tx_busy = false;
                if res < 0 {
                    return Err(failed(res));
                }
                self.counters.add_sent(res as u64);
                self.tx_pending -= res as u64;
            }
            Completion::Eof => self.got_eof = true,
            Completion::RecvFailed(e) => return Err(failed(e)),
            Completion::None => {}
        }
        if !self.tx_busy && self.tx_pending > 0 {
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
                match send(fd, &self.send_buf[..n]) {
                    Ok(n) => {
                        self.counters.add_sent(n as u64);
                        self.tx_pending -= n as u64;
                    }
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
            self.received(n);
        }
        Ok(Progress::More)
    }

    fn blocking_ok(&self) -> bool {
        true
    }
}
