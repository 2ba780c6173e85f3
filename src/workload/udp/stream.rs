//! udp_stream: a sender, optionally paced open-loop (`--rate`) or batched by
//! UDP_SEGMENT (`--gso`), and a receiver that accounts for every datagram.
//!
//! udp_stream: each datagram of 12 bytes or more carries the flow id and a
//! sequence number; the receiver counts distinct datagrams, gaps (lost),
//! late arrivals (reordered) and repeats (duplicates) over a 4096-wide window.
//! The sender may pace itself open-loop (`--rate`). At the end the client
//! reports what each flow sent, and the server's final loss is the exact
//! sent - received, so tail losses that no later datagram revealed count too.
//! With `--zerocopy` the sender sends from a ring of batches
//! (`super::zerocopy`) rather than rewriting one.

use std::io;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use socket2::Socket;

use super::header::{self, STAMPED_HEADER, STREAM_HEADER};
use super::jitter::{self, Jitter};
use super::refused;
use super::zerocopy::{UdpZcSend, UdpZeroCopy};
use crate::io::mmsg::{BATCH, MsgBatch};
use crate::io::socket::would_block;
use crate::io::{Driver, Event};
use crate::plan::Phase;
use crate::workload::{CounterRef, Flow, FlowCtx, OPS_PER_CALL, Progress, token};

/// Sequence numbers remembered behind the newest, to tell late from repeated.
const WINDOW: u64 = 4096;

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
    /// `--bytes`: payload still to send; the last datagram carries what
    /// is left of it, and after it the flow idles until the drain.
    to_send: Option<u64>,
    /// `--zerocopy`: datagrams go out from this ring instead of `batch`.
    zerocopy: Option<Box<UdpZeroCopy>>,
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
            to_send: None,
            zerocopy: None,
        }
    }

    /// `--bytes`: send exactly `quota` bytes of payload, then stop.
    pub fn with_byte_limit(mut self, quota: Option<u64>) -> UdpStreamSender {
        self.to_send = quota;
        self
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

    /// `--zerocopy`: send with MSG_ZEROCOPY from a ring of batches
    /// ([`super::zerocopy`]); not with `--gso` (the plan refuses it).
    pub fn with_zerocopy(mut self) -> io::Result<UdpStreamSender> {
        let z = UdpZeroCopy::new(self.sock.as_raw_fd(), self.size)?;
        self.zerocopy = Some(Box::new(z));
        self.batch = MsgBatch::new(0, self.size);
        Ok(self)
    }
}

impl Flow for UdpStreamSender {
    fn start(&mut self, driver: &mut dyn Driver, slot: usize) -> io::Result<()> {
        driver.register(self.sock.as_raw_fd(), token(slot, 0))
    }

    fn on_event(&mut self, ev: Event, ctx: &mut FlowCtx<'_>) -> io::Result<Progress> {
        let fd = self.sock.as_raw_fd();
        if ctx.phase_now() == Phase::Drain {
            if let Some(z) = self.zerocopy.as_deref_mut() {
                z.settle(fd)?;
            }
            return Ok(Progress::Done);
        }
        let blocking = ctx.driver.waits_in_io();
        for _ in 0..OPS_PER_CALL {
            let mut n = BATCH;
            // --bytes: whole datagrams while they fit, then one of the rest.
            let mut len = self.segments * self.size;
            match self.to_send {
                Some(0) => return Ok(Progress::Parked),
                Some(left) if left < self.size as u64 => {
                    n = 1;
                    len = left as usize;
                }
                Some(left) => n = n.min((left / self.size as u64) as usize),
                None => {}
            }
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
            // Zero-copy: the next batch of the ring, once its last sends completed.
            let batch = match self.zerocopy.as_deref_mut() {
                Some(z) => {
                    if !z.ready(fd, ev.error, blocking).map_err(|e| refused(&e))? {
                        // Blocking: poll() timed out, let the driver look;
                        // epoll: EPOLLERR comes with the next completion.
                        return Ok(if blocking {
                            Progress::More
                        } else {
                            Progress::Idle
                        });
                    }
                    z.batch_mut()
                }
                None => &mut self.batch,
            };
            if self.size >= STREAM_HEADER {
                // One clock read per batch: its datagrams leave back to back.
                let now = jitter::mono_ns();
                for i in 0..n {
                    let b = batch.buf_mut(i);
                    for (j, d) in b.chunks_exact_mut(self.size).enumerate() {
                        let seq = self.seq + (i * self.segments + j) as u64;
                        header::put_stream(d, self.flow_id, seq);
                        if self.size >= STAMPED_HEADER {
                            header::put_stamp(d, now);
                        }
                    }
                }
            }
            let sent = match self.zerocopy.as_deref_mut() {
                Some(z) => match z.send(fd, n, len) {
                    Ok(UdpZcSend::Sent(k)) => Ok(k),
                    Ok(UdpZcSend::Starved) => continue,
                    Err(e) => Err(e),
                },
                None => self.batch.send(fd, n, len),
            };
            match sent {
                Ok(k) => {
                    // A short last datagram (`--bytes`) is one of `len`.
                    let bytes = (k * len) as u64;
                    let k = (k * self.segments) as u64;
                    self.seq += k;
                    self.paced_bytes += bytes as f64;
                    self.counters.add_datagrams_sent(k);
                    self.counters.add_sent(bytes);
                    if let Some(left) = &mut self.to_send {
                        *left -= bytes;
                        if *left == 0 {
                            // All sent: the run ends when every flow is.
                            ctx.quota_done
                                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            return Ok(Progress::Parked);
                        }
                    }
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

    fn zerocopy(&self) -> Option<crate::io::zerocopy::ZeroCopyCounts> {
        self.zerocopy.as_ref().map(|z| z.counts())
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
    /// RFC 3550 jitter from the kernel's receive timestamps (`jitter`).
    jitter: Jitter,
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
    /// Count one datagram of flow `flow_id` that arrived at `arrived`
    /// (CLOCK_REALTIME ns), and its transit into the flow's `jitter`.
    fn datagram(
        &mut self,
        d: &[u8],
        flow_id: u32,
        tracker: &mut SeqTracker,
        arrived: u64,
        jitter: &mut Jitter,
    ) {
        if let Some((flow, seq)) = header::stream_of(d) {
            if flow != flow_id {
                return;
            }
            if let Some(sent) = header::stamp_of(d) {
                jitter.arrive(sent, arrived);
            }
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
            jitter: Jitter::default(),
        }
        .with_timestamps()
    }

    /// Ask for the kernel's receive timestamps, the arrivals of `jitter`
    /// (best effort: without them the batch's read time stands in).
    fn with_timestamps(mut self) -> UdpStreamReceiver {
        if crate::io::tstamp::enable(self.sock.as_raw_fd()).is_ok() {
            self.batch = MsgBatch::with_control(BATCH, self.batch.size());
        }
        self
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
            // Read only if some datagram came without a kernel stamp.
            let mut read_now = None;
            for i in 0..k {
                let d = self.batch.received(i);
                let arrived = self
                    .batch
                    .timestamp(i)
                    .unwrap_or_else(|| *read_now.get_or_insert_with(jitter::real_ns));
                match self.batch.gro_segment(i) {
                    // Coalesced by UDP_GRO: datagrams of `seg` bytes back to back.
                    Some(seg) => {
                        for one in d.chunks(seg) {
                            t.datagram(
                                one,
                                self.flow_id,
                                &mut self.tracker,
                                arrived,
                                &mut self.jitter,
                            );
                        }
                    }
                    None => t.datagram(
                        d,
                        self.flow_id,
                        &mut self.tracker,
                        arrived,
                        &mut self.jitter,
                    ),
                }
            }
            self.counters.set_jitter(self.jitter.ns());
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
