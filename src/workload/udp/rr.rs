//! udp_rr: a client keeping `burst + 1` transactions in flight (and, in
//! `rr_server`, a server that answers each request).
//!
//! Each response completes its own transaction: a request carries the low
//! bytes of its sequence number, and the server echoes them (how, and
//! where it falls back to oldest first: [`super::matching`]).
//!
//! A transaction whose response has not come within `--rr-timeout` is lost
//! and its slot reused at once: one lost datagram never stalls a flow
//! (netperf's UDP_RR waits for its test timer, neper's udp_rr for good).
//!
//! With `--rate` the client is open-loop, as tcp_rr's (see
//! [`crate::workload::open_loop`]): the schedule issues the requests, never
//! the responses nor the losses, at most `--max-inflight` at a time; a
//! request held back keeps its intended start. Response time runs from the
//! intended start, service time from the send, and `--rr-timeout` from the
//! send too (it is the network's loss, not the generator's): a response
//! not back in time is lost and frees its slot for the next owed request,
//! so a lost datagram never stalls the schedule.
//!
//! Under a completion driver (`--driver uring`) the udp_rr ends take each
//! datagram from a [`Completion::Received`] event and queue each send with
//! the driver, from a slab of one buffer per datagram that may be in flight,
//! each buffer untouched until its [`Completion::Sent`] returns it.

use std::collections::VecDeque;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use socket2::Socket;

use super::header::{self, seq_of};
use super::matching::{distinct, seq_bytes_for, seq_mask};
use super::refused;
use super::slab::SendSlab;
use crate::io::mmsg::{BATCH, MsgBatch};
use crate::io::socket::{recv, send, would_block};
use crate::io::{Completion, Driver, Event, RecvBuffers};
use crate::plan::Phase;
use crate::workload::one_way::{self, OneWay};
use crate::workload::open_loop::OpenLoop;
use crate::workload::{CounterRef, Flow, FlowCtx, OPS_PER_CALL, Progress, failed, start_on};

// The stamps follow the sequence number in the one layout both tests share.
const _: () = assert!(header::RR_SEQ == one_way::RR_SEQ);

struct Slot {
    seq: u64,
    sent: Instant,
    /// Open loop: the intended start (closed loop: unused).
    meant: Instant,
}

/// A multishot receive ends on a zero-length datagram (it reads as EOF);
/// thrum never sends one, so a peer that did is not a thrum peer.
pub(super) fn empty_datagram() -> io::Error {
    io::Error::other("a zero-length datagram ended the receive")
}

/// The first `k` bytes of a received datagram (its sequence number, if any).
pub(super) fn head_of(ctx: &mut FlowCtx<'_>, buf: u16, len: u32, k: usize) -> Option<u64> {
    ctx.driver
        .completions()
        .and_then(|c| seq_of(c.received(buf, len), k))
}

pub struct UdpRrClient {
    sock: Socket,
    counters: CounterRef,
    request: usize,
    response: usize,
    /// Requests and responses carry a sequence number (`seq_bytes` of it).
    seq_mode: bool,
    seq_bytes: usize,
    /// The sequence number's bits that travel.
    seq_mask: u64,
    /// Matched oldest first whatever the sizes (the plan's `rr_in_order`).
    in_order: bool,
    /// The sequence numbers written into the send batch's buffers.
    batch_seqs: [u64; BATCH],
    /// No number below this can share its travelling bytes with one in
    /// flight: the oldest in flight at the last look, plus what the bytes
    /// tell apart (the oldest only grows).
    seq_fresh_below: u64,
    /// In flight, seq mode, oldest first (completed by sequence number,
    /// found from the front: in order the first one looked at, after a
    /// loss the second, and of several sharing a short number the oldest).
    slots: VecDeque<Slot>,
    /// In flight, FIFO mode (send times, oldest first).
    fifo: VecDeque<Instant>,
    next_seq: u64,
    /// Requests due to go out.
    to_send: usize,
    timeout: Duration,
    next_expiry_check: Instant,
    tx: MsgBatch,
    rx: MsgBatch,
    single: bool,
    quota: Option<u64>,
    done_in_measure: u64,
    quota_reported: bool,
    in_flight: usize,
    /// Under a completion driver: its send buffers (the driver does the I/O).
    slab: Option<SendSlab>,
    /// Open loop: the generator, the intended starts of the requests owed
    /// and not yet sent (oldest first, `to_send` of them), and, FIFO mode,
    /// those of the requests in flight (beside `fifo`).
    open_loop: Option<OpenLoop>,
    owed: VecDeque<Instant>,
    fifo_meant: VecDeque<Instant>,
    /// `--one-way`: the stamps and their histograms (`crate::workload::one_way`).
    one_way: Option<Box<OneWay>>,
    /// The length of the last datagram a one-at-a-time receive took.
    single_len: usize,
}

impl UdpRrClient {
    pub fn new(
        sock: Socket,
        counters: CounterRef,
        request: u64,
        response: u64,
        burst: u32,
        timeout: Duration,
        quota: Option<u64>,
    ) -> UdpRrClient {
        let in_flight = burst as usize + 1;
        let first = quota.map_or(in_flight, |q| (q as usize).min(in_flight));
        let seq_bytes = seq_bytes_for(request, response, Some(in_flight as u64), false);
        UdpRrClient {
            sock,
            counters,
            request: request as usize,
            response: response as usize,
            seq_mode: seq_bytes > 0,
            seq_bytes,
            seq_mask: seq_mask(seq_bytes),
            in_order: false,
            batch_seqs: [0; BATCH],
            seq_fresh_below: distinct(seq_bytes),
            slots: VecDeque::with_capacity(in_flight),
            fifo: VecDeque::with_capacity(in_flight),
            next_seq: 0,
            to_send: first,
            timeout,
            next_expiry_check: Instant::now() + timeout,
            tx: MsgBatch::new(BATCH.min(in_flight), request as usize),
            // One byte more than a response, to notice an oversized one.
            rx: MsgBatch::new(BATCH.min(in_flight), response as usize + 1),
            single: in_flight == 1,
            quota,
            done_in_measure: 0,
            quota_reported: false,
            in_flight,
            slab: None,
            open_loop: None,
            owed: VecDeque::new(),
            fifo_meant: VecDeque::new(),
            one_way: None,
            single_len: 0,
        }
    }

    /// Stamp each request and record each response's way up and way down
    /// into `o` (which corrects the server's stamps by its offset).
    pub fn one_way(mut self, o: OneWay) -> UdpRrClient {
        self.one_way = Some(Box::new(o));
        self
    }

    /// Match responses to requests oldest first, whatever the sizes: the
    /// server does not echo short sequence numbers. Before [`Self::open_loop`].
    pub fn in_order(mut self) -> UdpRrClient {
        self.in_order = true;
        self.set_seq_bytes(seq_bytes_for(
            self.request as u64,
            self.response as u64,
            Some(self.in_flight as u64),
            true,
        ));
        self
    }

    fn set_seq_bytes(&mut self, k: usize) {
        self.seq_bytes = k;
        self.seq_mode = k > 0;
        self.seq_mask = seq_mask(k);
        self.seq_fresh_below = distinct(k);
    }

    /// Run open-loop on `open_loop`: nothing is in flight until its first
    /// transaction is due, and at most its `max_inflight` at a time.
    pub fn open_loop(mut self, open_loop: OpenLoop) -> UdpRrClient {
        let (request, response) = (self.request as u64, self.response as u64);
        self.set_seq_bytes(seq_bytes_for(request, response, None, self.in_order));
        let bound = open_loop.max_inflight() as usize;
        self.to_send = 0;
        self.in_flight = bound;
        // The queues start small and grow only if a stall fills them.
        let cap = bound.min(64);
        self.slots = VecDeque::with_capacity(cap);
        self.fifo = VecDeque::with_capacity(cap);
        self.owed = VecDeque::with_capacity(cap);
        self.fifo_meant = VecDeque::with_capacity(cap);
        self.tx = MsgBatch::new(BATCH.min(bound), self.request);
        self.rx = MsgBatch::new(BATCH.min(bound), self.response + 1);
        self.single = false;
        self.open_loop = Some(open_loop);
        self
    }

    /// Open loop: owe every transaction whose intended start has come, as
    /// far as the in-flight bound allows; the ones it holds back stay with
    /// the schedule (which does not move on without them). Records how late
    /// each was taken. Returns when the schedule next wants a request: None
    /// while the bound is full or the flow is done issuing.
    fn issue_due(&mut self, now: Instant, ctx: &mut FlowCtx<'_>) -> Option<Instant> {
        let phase = ctx.phase_now();
        loop {
            let g = self.open_loop.as_ref()?;
            if let Some(next) = g.wait(now) {
                return Some(next);
            }
            if self.outstanding() + self.to_send >= self.in_flight || !self.may_issue(phase) {
                return None;
            }
            let g = self.open_loop.as_mut()?;
            let due = g.take(now, phase, ctx.open.as_deref_mut(), &self.counters);
            self.owed.push_back(due);
            self.to_send += 1;
        }
    }

    fn outstanding(&self) -> usize {
        if self.seq_mode {
            self.slots.len()
        } else {
            self.fifo.len()
        }
    }

    fn may_issue(&self, phase: Phase) -> bool {
        phase < Phase::Drain
            && self.quota.is_none_or(|q| {
                let pending = (self.outstanding() + self.to_send) as u64;
                self.done_in_measure + pending < q
            })
    }

    fn oldest(&self) -> Option<Instant> {
        if self.seq_mode {
            self.slots.front().map(|s| s.sent)
        } else {
            self.fifo.front().copied()
        }
    }

    /// Hand due requests to the kernel. `fresh`: a clock reading taken just
    /// before, which stamps the first call instead of a new reading.
    fn flush<const OPEN: bool>(&mut self, fd: i32, mut fresh: Option<Instant>) -> io::Result<()> {
        while self.to_send > 0 {
            let n = self.to_send.min(self.tx.capacity());
            let t = fresh.take().unwrap_or_else(Instant::now);
            let res = if self.single {
                if self.seq_mode {
                    // Closed loop, one in flight: nothing else holds a number.
                    self.batch_seqs[0] = self.next_seq;
                    header::put_seq(self.tx.buf_mut(0), self.next_seq, self.seq_bytes);
                }
                if let Some(o) = &self.one_way {
                    o.stamp_request(self.tx.buf_mut(0), t);
                }
                send(fd, &self.tx.buf_mut(0)[..self.request]).map(|_| 1)
            } else {
                if self.seq_mode {
                    let mut s = self.next_seq;
                    let share = self.must_share(n);
                    for i in 0..n {
                        if !share {
                            s = self.free_seq(s);
                        }
                        self.batch_seqs[i] = s;
                        header::put_seq(self.tx.buf_mut(i), s, self.seq_bytes);
                        s += 1;
                    }
                }
                if let Some(o) = &self.one_way {
                    for i in 0..n {
                        o.stamp_request(self.tx.buf_mut(i), t);
                    }
                }
                self.tx.send(fd, n, self.request)
            };
            let k = match res {
                Ok(k) => k,
                Err(e) if would_block(&e) => return Ok(()),
                Err(e) => return Err(refused(&e)),
            };
            for i in 0..k {
                self.issued::<OPEN>(t, self.batch_seqs[i]);
            }
            self.to_send -= k;
            self.counters.add_datagrams_sent(k as u64);
            self.counters.add_sent((k * self.request) as u64);
            if k < n {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Declare transactions older than the timeout lost, and reuse their slots.
    fn expire<const OPEN: bool>(&mut self, now: Instant, phase: Phase) {
        if now < self.next_expiry_check {
            return;
        }
        let mut lost = 0;
        if self.seq_mode {
            let timeout = self.timeout;
            let before = self.slots.len();
            self.slots.retain(|s| now.duration_since(s.sent) < timeout);
            lost = before - self.slots.len();
        } else {
            while self
                .fifo
                .front()
                .is_some_and(|t| now.duration_since(*t) >= self.timeout)
            {
                self.fifo.pop_front();
                lost += 1;
            }
        }
        if lost > 0 {
            self.counters.add_lost(lost as u64);
            if OPEN && let Some(g) = &mut self.open_loop {
                // The expired were the oldest in flight: their intended starts go too.
                self.fifo_meant.drain(..self.fifo_meant.len().min(lost));
                g.completed(lost as u64, now, &self.counters);
            }
            // Closed loop: a lost transaction's slot goes to a new request.
            // Open loop: the schedule alone issues (a request sent here would
            // have no intended start and raise the offered rate with the loss).
            if !OPEN {
                for _ in 0..lost {
                    if self.may_issue(phase) {
                        self.to_send += 1;
                    }
                }
            }
        }
        // Check again when the oldest one left could expire (at most a quarter timeout late).
        self.next_expiry_check = self
            .oldest()
            .map_or(now + self.timeout, |o| o + self.timeout)
            .max(now + self.timeout / 4);
    }

    /// The response with sequence number `seq` (FIFO mode: None) arrived
    /// at `now`: Some(true) if it completed its transaction, Some(false) if
    /// it came after the timeout (lost), None if it matches nothing in flight
    /// (its transaction was already declared lost).
    // Out of line, as before the open loop came: inlined into the readiness
    // loop it cost the closed loop ~20 instructions per transaction more.
    #[inline(never)]
    fn take_response<const OPEN: bool>(
        &mut self,
        seq: Option<u64>,
        now: Instant,
        measuring: bool,
        ctx: &mut FlowCtx<'_>,
    ) -> Option<bool> {
        let (started, meant) = match seq {
            // A response to a transaction already declared lost matches nothing.
            Some(seq) => {
                let mask = self.seq_mask;
                let p = self.slots.iter().position(|s| s.seq & mask == seq)?;
                let s = self.slots.remove(p)?;
                (s.sent, s.meant)
            }
            None => {
                let sent = self.fifo.pop_front()?;
                let meant = if OPEN {
                    self.fifo_meant.pop_front().unwrap_or(sent)
                } else {
                    sent
                };
                (sent, meant)
            }
        };
        let latency = now.duration_since(started);
        if OPEN && let Some(g) = &mut self.open_loop {
            g.completed(1, now, &self.counters);
        }
        if latency >= self.timeout {
            // Too late: lost, even though it came before the next expiry scan.
            return Some(false);
        }
        if measuring {
            if OPEN {
                // Response time from the intended start; service time from the send.
                OpenLoop::record(ctx, meant, started, now);
            } else {
                ctx.hist.record(latency.as_nanos() as u64);
            }
        }
        Some(true)
    }

    /// Count `datagrams` received, of which `completed` completed their
    /// transactions and `late` came too late, and issue as many new requests.
    fn account<const OPEN: bool>(
        &mut self,
        datagrams: u64,
        completed: u64,
        late: u64,
        bytes: u64,
        measuring: bool,
        phase: Phase,
    ) {
        if late > 0 {
            self.counters.add_lost(late);
        }
        self.counters.add_datagrams_received(datagrams);
        self.counters.add_received(bytes);
        self.counters.add_transactions(completed);
        if measuring {
            self.done_in_measure += completed;
        }
        if OPEN {
            // The schedule, not the responses, issues the next requests.
            return;
        }
        for _ in 0..completed + late {
            if self.may_issue(phase) {
                self.to_send += 1;
            }
        }
    }

    /// Nothing in flight: done in the drain, parked once the quota is met.
    fn settle(&mut self, phase: Phase, ctx: &mut FlowCtx<'_>) -> Option<Progress> {
        if self.outstanding() > 0 || self.to_send > 0 {
            return None;
        }
        if phase == Phase::Drain {
            return Some(Progress::Done);
        }
        // Open loop, no quota: between two sends the schedule wakes it.
        let q = self.quota?;
        if self.done_in_measure < q {
            return None;
        }
        if !self.quota_reported {
            self.quota_reported = true;
            ctx.quota_done.fetch_add(1, Relaxed);
        }
        Some(Progress::Parked)
    }

    /// The completion driver's report: take it in, expire, send what is due.
    /// `OPEN`: the flow runs on a schedule (two copies, so that the closed
    /// loop's path has no open-loop test in it).
    fn on_completion<const OPEN: bool>(
        &mut self,
        ev: Event,
        ctx: &mut FlowCtx<'_>,
    ) -> io::Result<Progress> {
        let fd = self.sock.as_raw_fd();
        let phase = ctx.phase_now();
        match ev.done {
            Completion::Received { buf, len } => {
                let seq = if self.seq_mode {
                    head_of(ctx, buf, len, self.seq_bytes)
                } else {
                    None
                };
                let now = Instant::now();
                let measuring = phase == Phase::Measure;
                let outcome = if self.seq_mode && seq.is_none() {
                    None
                } else {
                    self.take_response::<OPEN>(seq, now, measuring, ctx)
                };
                if measuring
                    && outcome == Some(true)
                    && let Some(o) = self.one_way.as_deref_mut()
                    && let Some(c) = ctx.driver.completions()
                {
                    o.record(c.received(buf, len), now, ctx.hist);
                }
                let (done, late) = match outcome {
                    Some(true) => (1, 0),
                    Some(false) => (0, 1),
                    None => (0, 0),
                };
                self.account::<OPEN>(1, done, late, done * self.response as u64, measuring, phase);
                self.expire::<OPEN>(now, phase);
            }
            Completion::Sent { tag, res } => {
                if let Some(slab) = self.slab.as_mut() {
                    slab.free.push(tag);
                }
                if res == -libc::ECONNREFUSED {
                    return Err(refused(&failed(res)));
                }
                // A datagram the kernel would not queue (ENOBUFS) counts as
                // sent and is lost: its transaction expires.
                self.counters.add_datagrams_sent(1);
                self.counters.add_sent(self.request as u64);
            }
            Completion::RecvFailed(e) => return Err(refused(&failed(e))),
            Completion::Eof => return Err(empty_datagram()),
            // This flow queues no connection operations.
            Completion::None
            | Completion::Connected(_)
            | Completion::Accepted(_)
            | Completion::Closed(_) => self.expire::<OPEN>(Instant::now(), phase),
        }
        let next = if OPEN {
            self.issue_due(Instant::now(), ctx)
        } else {
            None
        };
        self.queue_requests::<OPEN>(fd, ctx)?;
        if let Some(p) = self.settle(phase, ctx) {
            return Ok(p);
        }
        Ok(self.wake_at(next))
    }

    /// Completion driver: queue every due request that has a free buffer.
    fn queue_requests<const OPEN: bool>(
        &mut self,
        fd: i32,
        ctx: &mut FlowCtx<'_>,
    ) -> io::Result<()> {
        let t = Instant::now();
        while self.to_send > 0 {
            let seq = if !self.seq_mode {
                0
            } else if self.must_share(1) {
                self.next_seq
            } else {
                self.free_seq(self.next_seq)
            };
            let k = self.seq_bytes;
            let Some(slab) = self.slab.as_mut() else {
                return Ok(());
            };
            let Some(tag) = slab.free.pop() else {
                break;
            };
            if k > 0 {
                header::put_seq(slab.buf_mut(tag), seq, k);
            }
            if let Some(o) = &self.one_way {
                o.stamp_request(slab.buf_mut(tag), t);
            }
            if let Err(e) = slab.send(ctx, fd, tag) {
                slab.free.push(tag);
                return Err(e);
            }
            self.issued::<OPEN>(t, seq);
            self.to_send -= 1;
        }
        Ok(())
    }

    /// Readiness: send what is due, expire, take the responses. `OPEN` as
    /// in [`Self::on_completion`].
    fn on_ready<const OPEN: bool>(
        &mut self,
        ev: Event,
        ctx: &mut FlowCtx<'_>,
    ) -> io::Result<Progress> {
        let fd = self.sock.as_raw_fd();
        let mut drained = false;
        // The clock reading taken when the last responses arrived: it stamps
        // the requests they made due and is the expiry check's "now", so a
        // ping-pong reads the clock once per transaction. It lives for one
        // pass of the loop; a later call reads the clock anew.
        let mut fresh = None;
        // Open loop: the schedule's next intended start.
        let mut next = None;
        for _ in 0..OPS_PER_CALL {
            let phase = ctx.phase_now();
            let now = fresh.take().unwrap_or_else(Instant::now);
            self.flush::<OPEN>(fd, Some(now))?;
            self.expire::<OPEN>(now, phase);
            if OPEN {
                // What the schedule says is due by now goes out.
                next = self.issue_due(now, ctx);
                self.flush::<OPEN>(fd, Some(now))?;
            }
            self.flush::<OPEN>(fd, None)?;
            if let Some(p) = self.settle(phase, ctx) {
                return Ok(p);
            }
            if drained && !ev.may_have_more {
                return Ok(self.wake_at(next));
            }
            let k = if self.single {
                match recv(fd, self.rx.buf_mut(0)) {
                    Ok(n) => {
                        if n < self.seq_bytes {
                            continue;
                        }
                        self.single_len = n;
                        1
                    }
                    Err(e) if would_block(&e) => return Ok(self.wake_at(next)),
                    Err(e) => return Err(refused(&e)),
                }
            } else {
                match self.rx.recv(fd) {
                    Ok(k) => k,
                    Err(e) if would_block(&e) => return Ok(self.wake_at(next)),
                    Err(e) => return Err(refused(&e)),
                }
            };
            drained = k < self.rx.capacity();
            let now = Instant::now();
            let measuring = phase == Phase::Measure;
            let mut completed = 0u64;
            let mut late = 0u64;
            let mut bytes = 0u64;
            for i in 0..k {
                let seq = if self.seq_mode {
                    let k = self.seq_bytes;
                    let d: &[u8] = if self.single {
                        &self.rx.buf_mut(0)[..k]
                    } else {
                        self.rx.received(i)
                    };
                    match seq_of(d, k) {
                        Some(s) => Some(s),
                        None => continue,
                    }
                } else {
                    None
                };
                match self.take_response::<OPEN>(seq, now, measuring, ctx) {
                    Some(true) => {
                        completed += 1;
                        bytes += self.response as u64;
                        if measuring && let Some(o) = self.one_way.as_deref_mut() {
                            let d: &[u8] = if self.single {
                                &self.rx.buf_mut(0)[..self.single_len]
                            } else {
                                self.rx.received(i)
                            };
                            o.record(d, now, ctx.hist);
                        }
                    }
                    Some(false) => late += 1,
                    None => {}
                }
            }
            self.account::<OPEN>(k as u64, completed, late, bytes, measuring, phase);
            fresh = Some(now);
        }
        Ok(Progress::More)
    }

    /// The next request, numbered `seq` (in order: unused), went to the
    /// kernel at `t`: it is in flight.
    #[inline]
    fn issued<const OPEN: bool>(&mut self, t: Instant, seq: u64) {
        // Open loop: the oldest owed request went (closed loop: none owed).
        let meant = if OPEN { self.owed.pop_front() } else { None };
        if self.seq_mode {
            self.slots.push_back(Slot {
                seq,
                sent: t,
                meant: meant.unwrap_or(t),
            });
            self.next_seq = seq + 1;
        } else {
            self.fifo.push_back(t);
            if let Some(m) = meant {
                self.fifo_meant.push_back(m);
            }
        }
    }

    /// The first sequence number from `s` on whose travelling bytes no
    /// transaction in flight holds: a lost one keeps its number until it
    /// expires, while a short number comes round every 256^k requests.
    /// Fewer are in flight than the number tells apart (the bounds see to
    /// it), so one of the next `slots.len() + 1` is free. The slots are
    /// looked at once every 256^k numbers or so, not at every send.
    #[inline]
    fn free_seq(&mut self, mut s: u64) -> u64 {
        if s < self.seq_fresh_below {
            return s;
        }
        let oldest = self.slots.front().map_or(s, |x| x.seq);
        self.seq_fresh_below = oldest.saturating_add(distinct(self.seq_bytes));
        let mask = self.seq_mask;
        while self.slots.iter().any(|x| (x.seq ^ s) & mask == 0) {
            s += 1;
        }
        s
    }

    /// Will `n` more requests make more in flight than the number tells
    /// apart? Open loop only (a closed loop's burst that wide is matched
    /// oldest first): a queue that long comes of a stall, and holding the
    /// schedule back for it would stretch the stall. Then the `n` go out
    /// numbered in turn, sharing numbers with some in flight, and a
    /// response takes the oldest of its number (the first from the front).
    #[inline]
    fn must_share(&mut self, n: usize) -> bool {
        let share = (self.slots.len() + n) as u64 > distinct(self.seq_bytes);
        if share {
            // The next request that may pick looks at the slots again.
            self.seq_fresh_below = 0;
        }
        share
    }

    /// When to wake: the expiry check while anything is in flight, and the
    /// schedule's next intended start (`next`, open loop), whichever first.
    fn wake_at(&self, next: Option<Instant>) -> Progress {
        let expiry = self.oldest().map(|_| self.next_expiry_check);
        match (expiry, next) {
            (Some(e), Some(n)) => Progress::At(e.min(n)),
            (Some(t), None) | (None, Some(t)) => Progress::At(t),
            (None, None) => Progress::Idle,
        }
    }
}

impl Flow for UdpRrClient {
    fn start(&mut self, driver: &mut dyn Driver, slot: usize) -> io::Result<()> {
        if start_on(driver, self.sock.as_raw_fd(), slot)? {
            self.slab = Some(SendSlab::new(self.in_flight, self.request)?);
        }
        if let Some(g) = &mut self.open_loop {
            g.begin(Instant::now());
        }
        Ok(())
    }

    fn recv_buffers(&self) -> Option<RecvBuffers> {
        Some(RecvBuffers {
            // One byte more than a response, as in readiness mode.
            size: self.response + 1,
            count: self.in_flight + 1,
        })
    }

    fn on_event(&mut self, ev: Event, ctx: &mut FlowCtx<'_>) -> io::Result<Progress> {
        match (self.slab.is_some(), self.open_loop.is_some()) {
            (true, false) => self.on_completion::<false>(ev, ctx),
            (true, true) => self.on_completion::<true>(ev, ctx),
            (false, false) => self.on_ready::<false>(ev, ctx),
            (false, true) => self.on_ready::<true>(ev, ctx),
        }
    }

    fn one_way(&self) -> Option<&OneWay> {
        self.one_way.as_deref()
    }

    /// A blocking receive would hold an open-loop flow past its schedule.
    fn blocking_ok(&self) -> bool {
        self.open_loop.is_none()
    }

    fn blocking_timeout(&self) -> Duration {
        // Wake up often enough to declare a lost transaction on time.
        (self.timeout / 2).min(crate::io::blocking::POLL_TIMEOUT)
    }
}

/// The flows over loopback (kept in their own file).
#[cfg(test)]
#[path = "rr_tests.rs"]
mod tests;
