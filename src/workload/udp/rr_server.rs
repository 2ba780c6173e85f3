//! udp_rr's server: it answers each request with a response whose front
//! echoes the request's sequence number, as much of it as both sizes have
//! (how the client uses it: [`super::matching`]), batched with
//! `recvmmsg`/`sendmmsg`, or one at a time with one request in flight, or
//! through a completion driver's slab of send buffers.

use std::io;
use std::os::fd::AsRawFd;

use socket2::Socket;

use super::header::{self, rr_seq_bytes, seq_of};
use super::refused;
use super::rr::{empty_datagram, head_of};
use super::slab::SendSlab;
use crate::clock::monotonic_ns;
use crate::io::mmsg::{BATCH, MsgBatch};
use crate::io::socket::{recv, send, would_block};
use crate::io::{Completion, Driver, Event, RecvBuffers};
use crate::workload::one_way::{stamp_arrival, stamp_departure};
use crate::workload::{CounterRef, Flow, FlowCtx, OPS_PER_CALL, Progress, failed, start_on};

pub struct UdpRrServer {
    sock: Socket,
    counters: CounterRef,
    response: usize,
    /// Bytes of a request's front echoed at its response's: its sequence
    /// number, as much of it as both sizes have (hello feature
    /// `rr_short_seq`: an older server echoed 8 bytes or none).
    echo: usize,
    single: bool,
    rx: MsgBatch,
    tx: MsgBatch,
    in_flight: usize,
    /// Bytes a request buffer holds (one more than a request).
    rx_size: usize,
    /// Under a completion driver: its send buffers (the driver does the I/O).
    slab: Option<SendSlab>,
    /// `--one-way`: stamp each response with the request's arrival and
    /// its own departure (`crate::workload::one_way`).
    stamps: bool,
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
            echo: rr_seq_bytes(request, response),
            single: burst == 0,
            rx: MsgBatch::new(batch, request as usize + 1),
            tx: MsgBatch::new(batch, response as usize),
            in_flight: burst as usize + 1,
            rx_size: request as usize + 1,
            slab: None,
            stamps: false,
        }
    }

    /// Stamp every response with the request's arrival and its departure.
    pub fn one_way(mut self) -> UdpRrServer {
        self.stamps = true;
        self
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
                let seq = head_of(ctx, buf, len, self.echo);
                let t2 = if self.stamps { monotonic_ns() } else { 0 };
                // No free buffer: every one is with a send the socket had no
                // room for yet. The response is a datagram lost here.
                if let Some(tag) = slab.free.pop() {
                    if let Some(s) = seq {
                        header::put_seq(slab.buf_mut(tag), s, self.echo);
                    }
                    if self.stamps
                        && let Some(c) = ctx.driver.completions()
                    {
                        let d = slab.buf_mut(tag);
                        stamp_arrival(d, c.received(buf, len), t2);
                        stamp_departure(d, monotonic_ns());
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
            // This flow queues no connection operations.
            Completion::None
            | Completion::Connected(_)
            | Completion::Accepted(_)
            | Completion::Closed(_) => {}
        }
        Ok(Progress::Idle)
    }
}

impl Flow for UdpRrServer {
    fn start(&mut self, driver: &mut dyn Driver, slot: usize) -> io::Result<()> {
        if start_on(driver, self.sock.as_raw_fd(), slot)? {
            // Responses go out as soon as requests come: a buffer stays lent
            // only while the socket has no room, so twice the window will do.
            self.slab = Some(SendSlab::new(2 * self.in_flight + 2, self.response)?);
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
                        let k = self.echo;
                        if let Some(s) = seq_of(&self.rx.buf_mut(0)[..n], k) {
                            header::put_seq(self.tx.buf_mut(0), s, k);
                        }
                        if self.stamps {
                            let t2 = monotonic_ns();
                            stamp_arrival(self.tx.buf_mut(0), &self.rx.buf_mut(0)[..n], t2);
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
                let t2 = if self.stamps { monotonic_ns() } else { 0 };
                for i in 0..k {
                    let d = self.rx.received(i);
                    got += d.len() as u64;
                    if let Some(s) = seq_of(d, self.echo) {
                        header::put_seq(self.tx.buf_mut(i), s, self.echo);
                    }
                    if self.stamps {
                        stamp_arrival(self.tx.buf_mut(i), self.rx.received(i), t2);
                    }
                }
                (k, got)
            };
            self.counters.add_datagrams_received(k as u64);
            self.counters.add_received(got);
            if self.stamps {
                let t3 = monotonic_ns();
                for i in 0..k {
                    stamp_departure(self.tx.buf_mut(i), t3);
                }
            }
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
