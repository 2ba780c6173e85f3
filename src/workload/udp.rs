//! UDP tests: udp_stream and udp_rr, which count every datagram and never stall.
//!
//! udp_stream: each datagram of 12 bytes or more carries the flow id and a
//! sequence number; the receiver counts distinct datagrams, gaps (lost),
//! late arrivals (reordered) and repeats (duplicates) over a 4096-wide window.
//! The sender may pace itself open-loop (`--rate`). At the end the client
//! reports what each flow sent, and the server's final loss is the exact
//! sent - received, so tail losses that no later datagram revealed count too.
//!
//! udp_rr: `burst + 1` transactions in flight per flow. Requests and
//! responses of 8 bytes or more carry a sequence number, so each response
//! completes its own transaction; smaller ones complete the oldest (FIFO).
//! A transaction whose response has not come within `--rr-timeout` is lost
//! and its slot reused at once: one lost datagram never stalls a flow
//! (netperf's UDP_RR waits for its test timer, neper's udp_rr for good).
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

use super::{
    CounterRef, Flow, FlowCtx, OPS_PER_CALL, Phase, Progress, failed, queue_send, start_on, token,
};
use crate::io::mmsg::{BATCH, MsgBatch};
use crate::io::socket::{recv, send, would_block};
use crate::io::{Completion, Driver, Event, RecvBuffers};

/// Bytes of the udp_stream header: flow id (u32) and sequence number (u64), big-endian.
pub const STREAM_HEADER: usize = 12;
/// Bytes of the udp_rr sequence number carried by requests and responses.
pub const RR_SEQ: usize = 8;
/// Sequence numbers remembered behind the newest, to tell late from repeated.
const WINDOW: u64 = 4096;

/// A connected socket whose peer vanished answers with ECONNREFUSED (ICMP port unreachable).
fn refused(e: &io::Error) -> io::Error {
    if e.raw_os_error() == Some(libc::ECONNREFUSED) {
        io::Error::new(
            e.kind(),
            "the peer's UDP port is closed (ICMP port unreachable)",
        )
    } else {
        io::Error::new(e.kind(), e.to_string())
    }
}

pub struct UdpStreamSender {
    sock: Socket,
    counters: CounterRef,
    flow_id: u32,
    size: usize,
    seq: u64,
    batch: MsgBatch,
    /// Datagrams per message: 1, or with `--gso` as many as one UDP_SEGMENT send carries.
    segments: usize,
    /// Open-loop pacing in bytes of payload per second.
    rate: Option<f64>,
    started: Option<Instant>,
    paced_bytes: f64,
}

/// The most datagrams one UDP_SEGMENT send may carry (UDP_MAX_SEGMENTS).
const GSO_MAX_SEGMENTS: usize = 64;
/// The most payload one UDP_SEGMENT send may carry (one IPv4 datagram's).
const GSO_MAX_BYTES: usize = 65_507;

/// Datagrams of `size` bytes that one `--gso` send carries.
pub fn gso_segments(size: usize) -> usize {
    (GSO_MAX_BYTES / size.max(1)).clamp(1, GSO_MAX_SEGMENTS)
}

impl UdpStreamSender {
    pub fn new(
        sock: Socket,
        counters: CounterRef,
        flow_id: u32,
        size: usize,
        rate_bps: Option<u64>,
    ) -> UdpStreamSender {
        UdpStreamSender {
            sock,
            counters,
            flow_id,
            size,
            seq: 0,
            batch: MsgBatch::new(BATCH, size),
            segments: 1,
            rate: rate_bps.map(|r| r as f64 / 8.0),
            started: None,
            paced_bytes: 0.0,
        }
    }
}

impl UdpStreamSender {
    /// `--gso`: hand the kernel as many datagrams per message as UDP_SEGMENT
    /// allows, each with its own header, split by the kernel.
    pub fn with_gso(mut self) -> io::Result<UdpStreamSender> {
        crate::io::mmsg::enable_gso(self.sock.as_raw_fd(), self.size)?;
        self.segments = gso_segments(self.size);
        self.batch = MsgBatch::new(BATCH, self.segments * self.size);
        Ok(self)
    }
}

impl Flow for UdpStreamSender {
    fn start(&mut self, driver: &mut dyn Driver, slot: usize) -> io::Result<()> {
        driver.register(self.sock.as_raw_fd(), token(slot, 0))
    }

    fn on_event(&mut self, _ev: Event, ctx: &mut FlowCtx<'_>) -> io::Result<Progress> {
        if ctx.phase_now() == Phase::Drain {
            return Ok(Progress::Done);
        }
        let fd = self.sock.as_raw_fd();
        for _ in 0..OPS_PER_CALL {
            let mut n = BATCH;
            if let Some(rate) = self.rate {
                let start = *self.started.get_or_insert_with(Instant::now);
                let due = rate * start.elapsed().as_secs_f64() - self.paced_bytes;
                let allowed = (due / (self.size * self.segments) as f64).floor();
                if allowed < 1.0 {
                    let wait = (self.size as f64 - due) / rate;
                    return Ok(Progress::At(
                        Instant::now() + Duration::from_secs_f64(wait.max(0.0)),
                    ));
                }
                n = n.min(allowed as usize);
            }
            if self.size >= STREAM_HEADER {
                for i in 0..n {
                    let b = self.batch.buf_mut(i);
                    for (j, d) in b.chunks_exact_mut(self.size).enumerate() {
                        let seq = self.seq + (i * self.segments + j) as u64;
                        d[..4].copy_from_slice(&self.flow_id.to_be_bytes());
                        d[4..12].copy_from_slice(&seq.to_be_bytes());
                    }
                }
            }
            match self.batch.send(fd, n, self.segments * self.size) {
                Ok(k) => {
                    let k = (k * self.segments) as u64;
                    self.seq += k;
                    self.paced_bytes += (k as usize * self.size) as f64;
                    self.counters.add_datagrams_sent(k);
                    self.counters.add_sent(k * self.size as u64);
                }
                Err(e) if would_block(&e) => return Ok(Progress::Idle),
                Err(e)
                    if self.segments > 1
                        && matches!(e.raw_os_error(), Some(libc::EINVAL | libc::EMSGSIZE)) =>
                {
                    return Err(io::Error::new(
                        e.kind(),
                        format!(
                            "--gso: the kernel refused a UDP_SEGMENT send of {} datagrams of {} bytes (each must fit the path MTU): {e}",
                            self.segments, self.size
                        ),
                    ));
                }
                Err(e) => return Err(refused(&e)),
            }
        }
        Ok(Progress::More)
    }

    fn blocking_ok(&self) -> bool {
        // A paced sender waits on time, not on the socket.
        self.rate.is_none()
    }
}

/// Sequence accounting of one udp_stream receiver.
#[derive(Debug, Default)]
pub struct SeqTracker {
    next: u64,
    seen: Vec<u64>,
}

/// What one arriving sequence number was.
#[derive(Debug, PartialEq, Eq)]
pub enum Arrival {
    /// In order or ahead; `gap` datagrams before it are missing (so far).
    New {
        gap: u64,
    },
    /// Behind a later one, not seen before.
    Late,
    Duplicate,
}

impl SeqTracker {
    pub fn new() -> SeqTracker {
        SeqTracker {
            next: 0,
            seen: vec![0; (WINDOW / 64) as usize],
        }
    }

    fn bit(&mut self, seq: u64) -> (&mut u64, u64) {
        let i = (seq % WINDOW) as usize;
        (&mut self.seen[i / 64], 1 << (i % 64))
    }

    pub fn arrive(&mut self, seq: u64) -> Arrival {
        if seq >= self.next {
            let gap = seq - self.next;
            // Forget the window slots the gap skips over: those datagrams were not seen.
            if gap >= WINDOW {
                self.seen.iter_mut().for_each(|w| *w = 0);
            } else {
                for s in self.next..seq {
                    let (w, m) = self.bit(s);
                    *w &= !m;
                }
            }
            let (w, m) = self.bit(seq);
            *w |= m;
            self.next = seq + 1;
            return Arrival::New { gap };
        }
        if self.next - seq > WINDOW {
            // Too old to remember: count it as late, the likelier case.
            return Arrival::Late;
        }
        let (w, m) = self.bit(seq);
        if *w & m != 0 {
            Arrival::Duplicate
        } else {
            *w |= m;
            Arrival::Late
        }
    }
}

/// Wake-up coalescing of a udp_stream receiver that has its thread to
/// itself (the blocking driver).
///
/// A receiver blocked in `recvmmsg` is woken by the sender for every few
/// datagrams, and over loopback or veth the sender's CPU pays for each
/// wake-up: the datagram is delivered inside its send call, softirq
/// included, and waking the receiver on the other CPU takes an IPI (on a
/// virtual machine, an exit). With an unpaced sender that CPU is the
/// bottleneck, so a receiver that sleeps whenever its queue is empty slows
/// the sender down (docs/performance.md). Like interrupt moderation, the
/// receiver therefore naps after a batch that found at least 2 datagrams
/// waiting but fewer than its target, for the time the target takes to
/// arrive at the rate just seen. The target is a quarter of what the receive
/// queue holds (SO_RCVBUF over a generous estimate of each datagram's
/// memory), at most a batch; a nap is at most [`MAX_NAP`]. The other three
/// quarters are headroom for a receiver whose CPU is taken when its nap
/// ends: with half, a paced sender's bursts overflowed the queue several
/// times as often as without naps on this loaded machine. A batch of one
/// datagram (a slow sender) blocks in `recvmmsg` as before, so a quiet flow
/// costs no timer wake-ups.
#[derive(Debug)]
pub struct Coalesce {
    /// Datagrams to let accumulate per nap (at most a batch, at most a quarter of the queue).
    target: u64,
    last: Option<Instant>,
}

/// The longest nap between batches.
pub const MAX_NAP: Duration = Duration::from_micros(200);
/// Naps shorter than this are not worth a timer.
const MIN_NAP: Duration = Duration::from_micros(5);

impl Coalesce {
    /// `rcvbuf`: the socket's SO_RCVBUF as the kernel reports it (the
    /// accounting limit); `size`: the datagram size. None when the queue
    /// holds too few datagrams of this size to nap safely.
    pub fn new(rcvbuf: usize, size: usize) -> Option<Coalesce> {
        // Each queued datagram costs its skb truesize: payload and headers
        // rounded up to a slab, plus the sk_buff. Twice (payload + 540) is
        // above it for every size (a 1472-byte datagram is charged about
        // 2.3 KB on loopback; this counts 4 KB).
        let per_datagram = 2 * (size as u64 + 540);
        let target = (rcvbuf as u64 / per_datagram / 4).min(BATCH as u64);
        (target >= 4).then_some(Coalesce { target, last: None })
    }

    /// A batch of `k` datagrams arrived, read at `now`: how long to nap.
    pub fn after_batch(&mut self, k: usize, now: Instant) -> Option<Duration> {
        let since = now - self.last.replace(now)?;
        // target <= BATCH, so a full batch never naps.
        if k < 2 || k as u64 >= self.target {
            return None;
        }
        // k arrived over `since`: the target takes since * target / k.
        let nap = since.mul_f64(self.target as f64 / k as f64).min(MAX_NAP);
        (nap >= MIN_NAP).then_some(nap)
    }
}

pub struct UdpStreamReceiver {
    sock: Socket,
    counters: CounterRef,
    flow_id: u32,
    batch: MsgBatch,
    tracker: SeqTracker,
    coalesce: Option<Coalesce>,
}

/// What one batch of received datagrams came to.
#[derive(Default)]
struct Tally {
    fresh: u64,
    bytes: u64,
    lost: u64,
    late: u64,
    dups: u64,
}

impl Tally {
    /// Count one datagram of flow `flow_id`.
    fn datagram(&mut self, d: &[u8], flow_id: u32, tracker: &mut SeqTracker) {
        if d.len() >= STREAM_HEADER {
            let flow = u32::from_be_bytes(d[..4].try_into().expect("4 bytes"));
            if flow != flow_id {
                return;
            }
            let seq = u64::from_be_bytes(d[4..12].try_into().expect("8 bytes"));
            match tracker.arrive(seq) {
                Arrival::New { gap } => self.lost += gap,
                Arrival::Late => self.late += 1,
                Arrival::Duplicate => {
                    self.dups += 1;
                    return;
                }
            }
        }
        self.fresh += 1;
        self.bytes += d.len() as u64;
    }
}

impl UdpStreamReceiver {
    pub fn new(sock: Socket, counters: CounterRef, flow_id: u32, size: usize) -> UdpStreamReceiver {
        let coalesce = sock
            .recv_buffer_size()
            .ok()
            .and_then(|rcvbuf| Coalesce::new(rcvbuf, size.max(1)));
        UdpStreamReceiver {
            sock,
            counters,
            flow_id,
            batch: MsgBatch::new(BATCH, size.max(1)),
            tracker: SeqTracker::new(),
            coalesce,
        }
    }
}

/// Timer slack of a napping receiver's thread: the default 50 µs would
/// stretch a nap of tens of µs severalfold.
const NAP_TIMER_SLACK_NS: libc::c_ulong = 1_000;

impl UdpStreamReceiver {
    /// `--gso`: take datagrams coalesced (UDP_GRO) and count them by the
    /// segment size the kernel attaches.
    pub fn with_gro(mut self) -> io::Result<UdpStreamReceiver> {
        crate::io::mmsg::enable_gro(self.sock.as_raw_fd())?;
        self.batch = MsgBatch::with_control(BATCH, 65_535);
        // The naps are sized for single datagrams.
        self.coalesce = None;
        Ok(self)
    }
}

impl Flow for UdpStreamReceiver {
    fn start(&mut self, driver: &mut dyn Driver, slot: usize) -> io::Result<()> {
        if !driver.waits_in_io() {
            // Under epoll other flows share the thread: a nap would stall them.
            self.coalesce = None;
        }
        if self.coalesce.is_some() {
            // SAFETY: plain prctl on the calling (worker) thread.
            unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, NAP_TIMER_SLACK_NS) };
        }
        driver.register(self.sock.as_raw_fd(), token(slot, 0))
    }

    fn on_event(&mut self, ev: Event, _ctx: &mut FlowCtx<'_>) -> io::Result<Progress> {
        let fd = self.sock.as_raw_fd();
        for _ in 0..OPS_PER_CALL {
            let k = match self.batch.recv(fd) {
                Ok(k) => k,
                Err(e) if would_block(&e) => return Ok(Progress::Idle),
                Err(e) => return Err(refused(&e)),
            };
            let mut t = Tally::default();
            for i in 0..k {
                let d = self.batch.received(i);
                match self.batch.gro_segment(i) {
                    // Coalesced by UDP_GRO: datagrams of `seg` bytes back to back.
                    Some(seg) => {
                        for one in d.chunks(seg) {
                            t.datagram(one, self.flow_id, &mut self.tracker);
                        }
                    }
                    None => t.datagram(d, self.flow_id, &mut self.tracker),
                }
            }
            let Tally {
                fresh,
                bytes,
                lost,
                late,
                dups,
            } = t;
            self.counters.add_datagrams_received(fresh);
            self.counters.add_received(bytes);
            if lost > 0 {
                self.counters.add_lost(lost);
            }
            if late > 0 {
                self.counters.add_reordered(late);
            }
            if dups > 0 {
                self.counters.add_duplicates(dups);
            }
            if let Some(c) = &mut self.coalesce
                && let Some(nap) = c.after_batch(k, Instant::now())
            {
                std::thread::sleep(nap);
                continue;
            }
            if k < self.batch.capacity() && !ev.may_have_more {
                return Ok(Progress::Idle);
            }
        }
        Ok(Progress::More)
    }

    fn blocking_ok(&self) -> bool {
        true
    }
}

struct Slot {
    seq: u64,
    sent: Instant,
}

/// Send buffers for a completion driver: one per datagram that may be in
/// flight, each lent to the driver from its send until its completion.
struct SendSlab {
    size: usize,
    bufs: Box<[u8]>,
    /// Indices (the sends' tags) of the buffers not lent out.
    free: Vec<u32>,
}

impl SendSlab {
    fn new(count: usize, size: usize) -> SendSlab {
        SendSlab {
            size,
            bufs: vec![0u8; count * size.max(1)].into_boxed_slice(),
            free: (0..count as u32).rev().collect(),
        }
    }

    fn buf_mut(&mut self, tag: u32) -> &mut [u8] {
        &mut self.bufs[tag as usize * self.size.max(1)..][..self.size]
    }

    /// Queue a send of buffer `tag`, whose contents are ready.
    fn send(&self, ctx: &mut FlowCtx<'_>, fd: i32, tag: u32) -> io::Result<()> {
        let buf = &self.bufs[tag as usize * self.size.max(1)..][..self.size];
        queue_send(ctx, fd, tag, buf, self.size)
    }
}

/// The sequence number a datagram carries, under the seq rule.
fn seq_of(d: &[u8]) -> Option<u64> {
    d.get(..RR_SEQ)
        .map(|s| u64::from_be_bytes(s.try_into().expect("8 bytes")))
}

/// A multishot receive ends on a zero-length datagram (it reads as EOF);
/// thrum never sends one, so a peer that did is not a thrum peer.
fn empty_datagram() -> io::Error {
    io::Error::other("a zero-length datagram ended the receive")
}

/// The first bytes of a received datagram (its sequence number, if any).
fn head_of(ctx: &mut FlowCtx<'_>, buf: u16, len: u32) -> Option<u64> {
    ctx.driver
        .completions()
        .and_then(|c| seq_of(c.received(buf, len)))
}

pub struct UdpRrClient {
    sock: Socket,
    counters: CounterRef,
    request: usize,
    response: usize,
    /// Requests and responses carry a sequence number.
    seq_mode: bool,
    /// In flight, seq mode (unordered: completed by sequence number).
    slots: Vec<Slot>,
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
        let seq_mode = request as usize >= RR_SEQ && response as usize >= RR_SEQ;
        UdpRrClient {
            sock,
            counters,
            request: request as usize,
            response: response as usize,
            seq_mode,
            slots: Vec::with_capacity(in_flight),
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
            self.slots.iter().map(|s| s.sent).min()
        } else {
            self.fifo.front().copied()
        }
    }

    /// Hand due requests to the kernel.
    /// Hand due requests to the kernel. `fresh`: a clock reading taken just
    /// before, which stamps the first call instead of a new reading.
    fn flush(&mut self, fd: i32, mut fresh: Option<Instant>) -> io::Result<()> {
        while self.to_send > 0 {
            let n = self.to_send.min(self.tx.capacity());
            let t = fresh.take().unwrap_or_else(Instant::now);
            let res = if self.single {
                if self.seq_mode {
                    self.tx.buf_mut(0)[..RR_SEQ].copy_from_slice(&self.next_seq.to_be_bytes());
                }
                send(fd, &self.tx.buf_mut(0)[..self.request]).map(|_| 1)
            } else {
                if self.seq_mode {
                    for i in 0..n {
                        let s = self.next_seq + i as u64;
                        self.tx.buf_mut(i)[..RR_SEQ].copy_from_slice(&s.to_be_bytes());
                    }
                }
                self.tx.send(fd, n, self.request)
            };
            let k = match res {
                Ok(k) => k,
                Err(e) if would_block(&e) => return Ok(()),
                Err(e) => return Err(refused(&e)),
            };
            for _ in 0..k {
                self.issued(t);
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
    fn expire(&mut self, now: Instant, phase: Phase) {
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
            for _ in 0..lost {
                if self.may_issue(phase) {
                    self.to_send += 1;
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
    fn take_response(
        &mut self,
        seq: Option<u64>,
        now: Instant,
        measuring: bool,
        ctx: &mut FlowCtx<'_>,
    ) -> Option<bool> {
        let started = match seq {
            // A response to a transaction already declared lost matches nothing.
            Some(seq) => {
                let p = self.slots.iter().position(|s| s.seq == seq)?;
                self.slots.swap_remove(p).sent
            }
            None => self.fifo.pop_front()?,
        };
        let latency = now.duration_since(started);
        if latency >= self.timeout {
            // Too late: lost, even though it came before the next expiry scan.
            return Some(false);
        }
        if measuring {
            ctx.hist.record(latency.as_nanos() as u64);
        }
        Some(true)
    }

    /// Count `datagrams` received, of which `completed` completed their
    /// transactions and `late` came too late, and issue as many new requests.
    fn account(
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
    fn on_completion(&mut self, ev: Event, ctx: &mut FlowCtx<'_>) -> io::Result<Progress> {
        let fd = self.sock.as_raw_fd();
        let phase = ctx.phase_now();
        match ev.done {
            Completion::Received { buf, len } => {
                let seq = if self.seq_mode {
                    head_of(ctx, buf, len)
                } else {
                    None
                };
                let now = Instant::now();
                let measuring = phase == Phase::Measure;
                let outcome = if self.seq_mode && seq.is_none() {
                    None
                } else {
                    self.take_response(seq, now, measuring, ctx)
                };
                let (done, late) = match outcome {
                    Some(true) => (1, 0),
                    Some(false) => (0, 1),
                    None => (0, 0),
                };
                self.account(1, done, late, done * self.response as u64, measuring, phase);
                self.expire(now, phase);
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
            Completion::None => self.expire(Instant::now(), phase),
        }
        self.queue_requests(fd, ctx)?;
        if let Some(p) = self.settle(phase, ctx) {
            return Ok(p);
        }
        Ok(self.wake_at())
    }

    /// Completion driver: queue every due request that has a free buffer.
    fn queue_requests(&mut self, fd: i32, ctx: &mut FlowCtx<'_>) -> io::Result<()> {
        let t = Instant::now();
        while self.to_send > 0 {
            let seq = self.next_seq;
            let Some(slab) = self.slab.as_mut() else {
                return Ok(());
            };
            let Some(tag) = slab.free.pop() else {
                break;
            };
            if self.seq_mode {
                slab.buf_mut(tag)[..RR_SEQ].copy_from_slice(&seq.to_be_bytes());
            }
            if let Err(e) = slab.send(ctx, fd, tag) {
                slab.free.push(tag);
                return Err(e);
            }
            self.issued(t);
            self.to_send -= 1;
        }
        Ok(())
    }

    /// The next request went to the kernel at `t`: it is in flight.
    fn issued(&mut self, t: Instant) {
        if self.seq_mode {
            self.slots.push(Slot {
                seq: self.next_seq,
                sent: t,
            });
        } else {
            self.fifo.push_back(t);
        }
        self.next_seq += 1;
    }

    fn wake_at(&self) -> Progress {
        match self.oldest() {
            Some(_) => Progress::At(self.next_expiry_check),
            None => Progress::Idle,
        }
    }
}

impl Flow for UdpRrClient {
    fn start(&mut self, driver: &mut dyn Driver, slot: usize) -> io::Result<()> {
        if start_on(driver, self.sock.as_raw_fd(), slot)? {
            self.slab = Some(SendSlab::new(self.in_flight, self.request));
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
        if self.slab.is_some() {
            return self.on_completion(ev, ctx);
        }
        let fd = self.sock.as_raw_fd();
        let mut drained = false;
        // The clock reading taken when the last responses arrived: it stamps
        // the requests they made due and is the expiry check's "now", so a
        // ping-pong reads the clock once per transaction. It lives for one
        // pass of the loop; a later call reads the clock anew.
        let mut fresh = None;
        for _ in 0..OPS_PER_CALL {
            let phase = ctx.phase_now();
            let now = fresh.take().unwrap_or_else(Instant::now);
            self.flush(fd, Some(now))?;
            self.expire(now, phase);
            self.flush(fd, None)?;
            if let Some(p) = self.settle(phase, ctx) {
                return Ok(p);
            }
            if drained && !ev.may_have_more {
                return Ok(self.wake_at());
            }
            let k = if self.single {
                match recv(fd, self.rx.buf_mut(0)) {
                    Ok(n) => {
                        if n < RR_SEQ && self.seq_mode {
                            continue;
                        }
                        1
                    }
                    Err(e) if would_block(&e) => return Ok(self.wake_at()),
                    Err(e) => return Err(refused(&e)),
                }
            } else {
                match self.rx.recv(fd) {
                    Ok(k) => k,
                    Err(e) if would_block(&e) => return Ok(self.wake_at()),
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
                    let d: &[u8] = if self.single {
                        &self.rx.buf_mut(0)[..RR_SEQ]
                    } else {
                        self.rx.received(i)
                    };
                    match seq_of(d) {
                        Some(s) => Some(s),
                        None => continue,
                    }
                } else {
                    None
                };
                match self.take_response(seq, now, measuring, ctx) {
                    Some(true) => {
                        completed += 1;
                        bytes += self.response as u64;
                    }
                    Some(false) => late += 1,
                    None => {}
                }
            }
            self.account(k as u64, completed, late, bytes, measuring, phase);
            fresh = Some(now);
        }
        Ok(Progress::More)
    }

    fn blocking_ok(&self) -> bool {
        true
    }

    fn blocking_timeout(&self) -> Duration {
        // Wake up often enough to declare a lost transaction on time.
        (self.timeout / 2).min(crate::io::blocking::POLL_TIMEOUT)
    }
}

pub struct UdpRrServer {
    sock: Socket,
    counters: CounterRef,
    response: usize,
    seq_mode: bool,
    single: bool,
    rx: MsgBatch,
    tx: MsgBatch,
    in_flight: usize,
    /// Bytes a request buffer holds (one more than a request).
    rx_size: usize,
    /// Under a completion driver: its send buffers (the driver does the I/O).
    slab: Option<SendSlab>,
}

impl UdpRrServer {
    pub fn new(
        sock: Socket,
        counters: CounterRef,
        request: u64,
        response: u64,
        burst: u32,
    ) -> UdpRrServer {
        let batch = BATCH.min(burst as usize + 1);
        UdpRrServer {
            sock,
            counters,
            response: response as usize,
            seq_mode: request as usize >= RR_SEQ && response as usize >= RR_SEQ,
            single: burst == 0,
            rx: MsgBatch::new(batch, request as usize + 1),
            tx: MsgBatch::new(batch, response as usize),
            in_flight: burst as usize + 1,
            rx_size: request as usize + 1,
            slab: None,
        }
    }

    /// The completion driver's report: answer a request, count a response.
    fn on_completion(&mut self, ev: Event, ctx: &mut FlowCtx<'_>) -> io::Result<Progress> {
        let fd = self.sock.as_raw_fd();
        let Some(slab) = self.slab.as_mut() else {
            return Ok(Progress::Idle);
        };
        match ev.done {
            Completion::Received { buf, len } => {
                self.counters.add_datagrams_received(1);
                self.counters.add_received(len as u64);
                let seq = if self.seq_mode {
                    head_of(ctx, buf, len)
                } else {
                    None
                };
                // No free buffer: every one is with a send the socket had no
                // room for yet. The response is a datagram lost here.
                if let Some(tag) = slab.free.pop() {
                    if let Some(s) = seq {
                        slab.buf_mut(tag)[..RR_SEQ].copy_from_slice(&s.to_be_bytes());
                    }
                    if let Err(e) = slab.send(ctx, fd, tag) {
                        slab.free.push(tag);
                        return Err(e);
                    }
                }
            }
            Completion::Sent { tag, res } => {
                slab.free.push(tag);
                if res == -libc::ECONNREFUSED {
                    return Err(refused(&failed(res)));
                }
                if res >= 0 {
                    self.counters.add_transactions(1);
                    self.counters.add_datagrams_sent(1);
                    self.counters.add_sent(res as u64);
                }
            }
            Completion::RecvFailed(e) => return Err(refused(&failed(e))),
            Completion::Eof => return Err(empty_datagram()),
            Completion::None => {}
        }
        Ok(Progress::Idle)
    }
}

impl Flow for UdpRrServer {
    fn start(&mut self, driver: &mut dyn Driver, slot: usize) -> io::Result<()> {
        if start_on(driver, self.sock.as_raw_fd(), slot)? {
            // Responses go out as soon as requests come: a buffer stays lent
            // only while the socket has no room, so twice the window will do.
            self.slab = Some(SendSlab::new(2 * self.in_flight + 2, self.response));
        }
        Ok(())
    }

    fn recv_buffers(&self) -> Option<RecvBuffers> {
        Some(RecvBuffers {
            size: self.rx_size,
            count: self.in_flight + 1,
        })
    }

    fn on_event(&mut self, ev: Event, ctx: &mut FlowCtx<'_>) -> io::Result<Progress> {
        if self.slab.is_some() {
            return self.on_completion(ev, ctx);
        }
        let fd = self.sock.as_raw_fd();
        for _ in 0..OPS_PER_CALL {
            let (k, got) = if self.single {
                match recv(fd, self.rx.buf_mut(0)) {
                    Ok(n) => {
                        if self.seq_mode && n >= RR_SEQ {
                            let mut s = [0u8; RR_SEQ];
                            s.copy_from_slice(&self.rx.buf_mut(0)[..RR_SEQ]);
                            self.tx.buf_mut(0)[..RR_SEQ].copy_from_slice(&s);
                        }
                        (1, n as u64)
                    }
                    Err(e) if would_block(&e) => return Ok(Progress::Idle),
                    Err(e) => return Err(refused(&e)),
                }
            } else {
                let k = match self.rx.recv(fd) {
                    Ok(k) => k,
                    Err(e) if would_block(&e) => return Ok(Progress::Idle),
                    Err(e) => return Err(refused(&e)),
                };
                let mut got = 0u64;
                for i in 0..k {
                    let mut s = [0u8; RR_SEQ];
                    let d = self.rx.received(i);
                    got += d.len() as u64;
                    if self.seq_mode && d.len() >= RR_SEQ {
                        s.copy_from_slice(&d[..RR_SEQ]);
                        self.tx.buf_mut(i)[..RR_SEQ].copy_from_slice(&s);
                    }
                }
                (k, got)
            };
            self.counters.add_datagrams_received(k as u64);
            self.counters.add_received(got);
            let sent = if self.single {
                match send(fd, &self.tx.buf_mut(0)[..self.response]) {
                    Ok(_) => 1,
                    Err(e) if would_block(&e) => 0,
                    Err(e) => return Err(refused(&e)),
                }
            } else {
                match self.tx.send(fd, k, self.response) {
                    Ok(n) => n,
                    Err(e) if would_block(&e) => 0,
                    Err(e) => return Err(refused(&e)),
                }
            };
            // A response the socket buffer had no room for is a datagram lost here.
            self.counters.add_transactions(sent as u64);
            self.counters.add_datagrams_sent(sent as u64);
            self.counters.add_sent((sent * self.response) as u64);
            if k < self.rx.capacity() && !ev.may_have_more {
                return Ok(Progress::Idle);
            }
        }
        Ok(Progress::More)
    }

    fn blocking_ok(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coalescing_naps_only_while_datagrams_stream_in() {
        // 1472-byte datagrams in the default 212,992-byte queue: 13 per nap.
        let mut c = Coalesce::new(212_992, 1472).expect("room to nap");
        assert_eq!(c.target, 13);
        let t0 = Instant::now();
        let us = |n| t0 + Duration::from_micros(n);
        // The first batch has no rate to go by.
        assert_eq!(c.after_batch(5, us(0)), None);
        // 5 datagrams in 20 µs: the next 13 take 52 µs.
        assert_eq!(c.after_batch(5, us(20)), Some(Duration::from_micros(52)));
        // One datagram (a slow sender), a full batch, or the target reached: no nap.
        assert_eq!(c.after_batch(1, us(100)), None);
        assert_eq!(c.after_batch(BATCH, us(110)), None);
        assert_eq!(c.after_batch(13, us(120)), None);
        // A slow trickle: never more than MAX_NAP.
        assert_eq!(c.after_batch(2, us(10_120)), Some(MAX_NAP));
        // Large datagrams: the queue holds too few to nap safely.
        assert!(Coalesce::new(212_992, 65_507).is_none());
    }

    #[test]
    fn sequence_accounting() {
        let mut t = SeqTracker::new();
        assert_eq!(t.arrive(0), Arrival::New { gap: 0 });
        assert_eq!(t.arrive(1), Arrival::New { gap: 0 });
        assert_eq!(t.arrive(4), Arrival::New { gap: 2 });
        assert_eq!(t.arrive(2), Arrival::Late);
        assert_eq!(t.arrive(2), Arrival::Duplicate);
        assert_eq!(t.arrive(4), Arrival::Duplicate);
        assert_eq!(t.arrive(3), Arrival::Late);
        assert_eq!(t.arrive(10_000), Arrival::New { gap: 10_000 - 5 });
        assert_eq!(t.arrive(9_000), Arrival::Late);
        assert_eq!(t.arrive(9_000), Arrival::Duplicate);
        // Beyond the window: cannot tell, taken as late.
        assert_eq!(t.arrive(100), Arrival::Late);
    }

    #[test]
    fn a_window_that_wrapped_forgets_skipped_slots() {
        let mut t = SeqTracker::new();
        t.arrive(5);
        // 5 + WINDOW lands on the same bit; the skip must have cleared it.
        assert_eq!(t.arrive(5 + WINDOW - 1), Arrival::New { gap: WINDOW - 2 });
        assert_eq!(t.arrive(5 + WINDOW + 1), Arrival::New { gap: 1 });
        assert_eq!(t.arrive(5 + WINDOW), Arrival::Late);
    }
}
