//! Bulk transfer: tcp_stream, tcp_maerts and tcp_bidir on either end.
//!
//! One flow sends, receives, or both (bidir) on one connection. The receiver's
//! byte count is the figure of merit (goodput). In the drain phase the flow
//! stops sending, half-closes, and reads until EOF, so the receiver ends up
//! with every byte the sender handed to the kernel.
//!
//! With `--zerocopy` the sender sends with MSG_ZEROCOPY from a ring of
//! buffers ([`crate::io::zerocopy`]) and reaps completions when the socket
//! reports an error (EPOLLERR) or the ring is full; before it reports done it
//! waits (briefly) for the last completions, so the counts add up.
//!
//! With `--bytes` (a byte-limited run) the sender sends its share and no
//! more, half-closes at once and reads on to the receiver's EOF; the
//! receiver half-closes as soon as it has read the sender's EOF, whatever
//! the phase. The receiver's FIN so tells the sender that every byte
//! arrived, and the client's flow then counts its quota done, which ends
//! the measurement window (`control::timeline`).
//!
//! With `--call-times` each send and receive that moves data in the
//! measurement phase is timed into the flow's call-time histograms
//! (netperf's -v 2): two vDSO clock reads per call, so only when asked.

use std::io;
use std::os::fd::AsRawFd;
use std::time::Instant;

use socket2::Socket;

use super::{CounterRef, Flow, FlowCtx, OPS_PER_CALL, Progress, early_eof, token};
use crate::io::pagebuf::PageBuf;
use crate::io::socket::{recv, send, shutdown_write, would_block};
use crate::io::zerocopy::{
    ZcSend, ZeroCopyCounts, ZeroCopySender, socket_error, wait_for_completion,
};
use crate::io::{Driver, Event};
use crate::stats::calltime::SendRecvTimes;

/// How long a finished sender waits for its last MSG_ZEROCOPY completions.
const ZEROCOPY_SETTLE: std::time::Duration = std::time::Duration::from_secs(1);

pub struct StreamFlow {
    sock: Socket,
    counters: CounterRef,
    sends: bool,
    receives: bool,
    send_buf: PageBuf,
    recv_buf: PageBuf,
    sent_fin: bool,
    got_eof: bool,
    /// The client treats a peer's EOF before the drain as a failure.
    eof_before_drain_is_error: bool,
    /// `--zerocopy`: sends come from this ring instead of `send_buf`.
    zerocopy: Option<Box<ZeroCopySender>>,
    /// How long each send and receive that moved data took, over the
    /// measurement phase (netperf's -v 2 histograms).
    times: Option<Box<SendRecvTimes>>,
    /// `--bytes`: a byte-limited run; the FINs end the flow, not the drain.
    byte_limited: bool,
    /// `--bytes`: what this end still has to send.
    to_send: Option<u64>,
    quota_reported: bool,
}

impl StreamFlow {
    pub fn new(
        sock: Socket,
        counters: CounterRef,
        sends: bool,
        receives: bool,
        send_bytes: usize,
        recv_bytes: usize,
        eof_before_drain_is_error: bool,
    ) -> StreamFlow {
        StreamFlow {
            sock,
            counters,
            sends,
            receives,
            send_buf: PageBuf::new(if sends { send_bytes } else { 0 }),
            // Even a pure sender reads, to see the peer's EOF in the drain.
            recv_buf: PageBuf::new(if receives { recv_bytes } else { 4096 }),
            sent_fin: false,
            got_eof: false,
            eof_before_drain_is_error,
            zerocopy: None,
            times: None,
            byte_limited: false,
            to_send: None,
            quota_reported: false,
        }
    }

    /// A byte-limited run (`--bytes`): this end sends `quota` bytes (a
    /// receiver: None) and the flow ends when both FINs have crossed.
    pub fn with_byte_limit(mut self, quota: Option<u64>) -> StreamFlow {
        self.byte_limited = true;
        self.to_send = if self.sends { quota } else { None };
        self
    }

    /// Send with MSG_ZEROCOPY (a sending flow only): sets SO_ZEROCOPY and
    /// replaces the send buffer by a ring of them.
    /// Time each send and receive call (`--call-times`).
    pub fn with_call_times(mut self) -> StreamFlow {
        self.times = Some(Box::default());
        self
    }

    pub fn with_zerocopy(mut self) -> io::Result<StreamFlow> {
        if self.sends {
            crate::io::zerocopy::enable(self.sock.as_raw_fd())?;
            self.zerocopy = Some(Box::new(ZeroCopySender::new(self.send_buf.len())));
            self.send_buf = PageBuf::new(0);
        }
        Ok(self)
    }
}

/// Up to [`OPS_PER_CALL`] zero-copy sends; true when the budget ran out
/// with work left. Completions are reaped when the driver reported an
/// error (POLLERR: the error queue has something) or the ring is full;
/// under the blocking driver a full ring sleeps in poll() until one comes.
fn send_zerocopy(
    zc: &mut ZeroCopySender,
    fd: std::os::fd::RawFd,
    counters: &CounterRef,
    error_reported: bool,
    blocking: bool,
) -> io::Result<bool> {
    if error_reported {
        zc.reap(fd)?;
    }
    for _ in 0..OPS_PER_CALL {
        match zc.send(fd) {
            Ok(ZcSend::Sent(n)) => counters.add_sent(n as u64),
            Ok(ZcSend::RingFull) => {
                if zc.reap(fd)? > 0 {
                    continue;
                }
                if !blocking {
                    // EPOLLERR wakes the flow when a completion is queued.
                    return Ok(false);
                }
                let events = wait_for_completion(fd, crate::io::blocking::POLL_TIMEOUT)?;
                if zc.reap(fd)? == 0 {
                    // POLLERR without a completion is a socket error, and
                    // POLLHUP a closed connection; both would make the next
                    // wait return at once, so they end the flow here.
                    if events & libc::POLLERR != 0
                        && let Some(e) = socket_error(fd)?
                    {
                        return Err(e);
                    }
                    if events & libc::POLLHUP != 0 {
                        return Err(io::Error::new(
                            io::ErrorKind::BrokenPipe,
                            "the connection closed with zero-copy sends in flight",
                        ));
                    }
                    // A timeout or the watchdog: let the caller look.
                    return Ok(false);
                }
            }
            Err(e) if would_block(&e) => return Ok(false),
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

impl Flow for StreamFlow {
    fn tcp_socket(&self) -> Option<std::os::fd::RawFd> {
        Some(std::os::fd::AsRawFd::as_raw_fd(&self.sock))
    }

    fn start(&mut self, driver: &mut dyn Driver, slot: usize) -> io::Result<()> {
        driver.register(self.sock.as_raw_fd(), token(slot, 0))
    }

    fn on_event(&mut self, ev: Event, ctx: &mut FlowCtx<'_>) -> io::Result<Progress> {
        let fd = self.sock.as_raw_fd();
        let draining = ctx.phase == crate::plan::Phase::Drain;
        // Calls are timed in the measurement phase only, as latencies are.
        let timed = self.times.is_some() && ctx.phase == crate::plan::Phase::Measure;
        let mut more = false;

        // A sender half-closes first in the drain, so a blocking read below
        // cannot delay the peer's EOF. A pure receiver half-closes only once
        // it has read the sender's EOF (below): its FIN then tells the
        // sender that every byte arrived, which a mix's recovery phase
        // waits for (the sender's socket buffer may hold seconds of data on
        // a slow path). Neither end waits for the other's FIN before
        // sending its own data and FIN, so the order cannot deadlock.
        if (draining || self.to_send == Some(0)) && !self.sent_fin && self.sends {
            shutdown_write(fd)?;
            self.sent_fin = true;
        }

        // A pure sender reads only in the drain, to see the peer's EOF; before
        // that a vanished peer shows up as a send error.
        if !self.got_eof && (self.receives || draining || self.sent_fin) {
            let mut ops = 0;
            loop {
                if ops == OPS_PER_CALL {
                    more = true;
                    break;
                }
                ops += 1;
                let t = timed.then(Instant::now);
                match recv(fd, &mut self.recv_buf) {
                    Ok(0) => {
                        self.got_eof = true;
                        if self.eof_before_drain_is_error
                            && !self.byte_limited
                            && !ctx.draining_now()
                        {
                            return Err(early_eof("the peer"));
                        }
                        break;
                    }
                    Ok(n) => {
                        self.counters.add_received(n as u64);
                        if let (Some(t), Some(times)) = (t, &mut self.times) {
                            times.recv.record(t.elapsed().as_nanos() as u64);
                        }
                        // A short read emptied the queue: under an
                        // edge-triggered driver the next arrival brings a
                        // new edge, so the read that would only say EAGAIN
                        // is skipped (one syscall per wake-up, not two).
                        if n < self.recv_buf.len() && !ev.may_have_more {
                            break;
                        }
                    }
                    Err(e) if would_block(&e) => break,
                    Err(e) => return Err(e),
                }
                // A pure sender reads only to notice EOF; one read per wake-up is enough.
                if !self.receives {
                    break;
                }
            }
        }

        // A pure receiver's FIN after the sender's; with --bytes also
        // before the drain (it says the last byte arrived). A bidir flow
        // with --bytes sends its FIN when its own share is out, above.
        if (draining || (self.byte_limited && !self.sends)) && !self.sent_fin && self.got_eof {
            shutdown_write(fd)?;
            self.sent_fin = true;
        }

        if !self.sent_fin && self.sends {
            if let Some(zc) = self.zerocopy.as_deref_mut() {
                let blocking = ctx.driver.waits_in_io();
                more |= send_zerocopy(zc, fd, &self.counters, ev.error, blocking)?;
            } else {
                let mut ops = 0;
                loop {
                    if ops == OPS_PER_CALL {
                        more = true;
                        break;
                    }
                    ops += 1;
                    let t = timed.then(Instant::now);
                    let len = match self.to_send {
                        Some(0) => {
                            // The share is out: the FIN goes at the next wake-up.
                            more = true;
                            break;
                        }
                        Some(left) => left.min(self.send_buf.len() as u64) as usize,
                        None => self.send_buf.len(),
                    };
                    match send(fd, &self.send_buf[..len]) {
                        Ok(n) => {
                            if let Some(left) = &mut self.to_send {
                                *left -= n as u64;
                            }
                            self.counters.add_sent(n as u64);
                            if let (Some(t), Some(times)) = (t, &mut self.times) {
                                times.send.record(t.elapsed().as_nanos() as u64);
                            }
                            // A short send filled the socket buffer, and the
                            // kernel marked it (SOCK_NOSPACE) to wake the
                            // writer when room comes: the next send would
                            // only say EAGAIN. Same condition as the read's.
                            if n < len && !ev.may_have_more {
                                break;
                            }
                        }
                        Err(e) if would_block(&e) => break,
                        Err(e) => return Err(e),
                    }
                }
            }
        }

        let done = self.sent_fin && self.got_eof;
        if done && let Some(zc) = self.zerocopy.as_deref_mut() {
            zc.settle(fd, ZEROCOPY_SETTLE)?;
        }
        // Both FINs crossed: every byte this flow carries has arrived.
        if done && self.byte_limited && !self.quota_reported {
            self.quota_reported = true;
            ctx.quota_done
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(if done {
            Progress::Done
        } else if more {
            Progress::More
        } else {
            Progress::Idle
        })
    }

    fn call_times(&self) -> Option<&SendRecvTimes> {
        self.times.as_deref()
    }

    fn zerocopy(&self) -> Option<ZeroCopyCounts> {
        self.zerocopy.as_ref().map(|z| z.counts())
    }

    fn blocking_ok(&self) -> bool {
        // One direction only: a blocked send must not starve the receive side.
        self.sends != self.receives
    }
}
