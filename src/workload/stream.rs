//! Bulk transfer: tcp_stream, tcp_maerts and tcp_bidir on either end.
//!
//! One flow sends, receives, or both (bidir) on one connection. The receiver's
//! byte count is the figure of merit (goodput). In the drain phase the flow
//! stops sending, half-closes, and reads until EOF, so the receiver ends up
//! with every byte the sender handed to the kernel.

use std::io;
use std::os::fd::AsRawFd;

use socket2::Socket;

use super::{CounterRef, Flow, FlowCtx, OPS_PER_CALL, Progress, early_eof, token};
use crate::io::socket::{recv, send, shutdown_write, would_block};
use crate::io::{Driver, Event};

pub struct StreamFlow {
    sock: Socket,
    counters: CounterRef,
    sends: bool,
    receives: bool,
    send_buf: Vec<u8>,
    recv_buf: Vec<u8>,
    sent_fin: bool,
    got_eof: bool,
    /// The client treats a peer's EOF before the drain as a failure.
    eof_before_drain_is_error: bool,
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
            send_buf: if sends {
                vec![0u8; send_bytes]
            } else {
                Vec::new()
            },
            // Even a pure sender reads, to see the peer's EOF in the drain.
            recv_buf: vec![0u8; if receives { recv_bytes } else { 4096 }],
            sent_fin: false,
            got_eof: false,
            eof_before_drain_is_error,
        }
    }
}

impl Flow for StreamFlow {
    fn tcp_socket(&self) -> Option<std::os::fd::RawFd> {
        Some(std::os::fd::AsRawFd::as_raw_fd(&self.sock))
    }

    fn start(&mut self, driver: &mut dyn Driver, slot: usize) -> io::Result<()> {
        driver.register(self.sock.as_raw_fd(), token(slot, 0))
    }

    fn on_event(&mut self, _ev: Event, ctx: &mut FlowCtx<'_>) -> io::Result<Progress> {
        let fd = self.sock.as_raw_fd();
        let draining = ctx.phase == crate::workload::Phase::Drain;
        let mut more = false;

        // Half-close first in the drain, so a blocking read below cannot delay the peer's EOF.
        if draining && !self.sent_fin {
            shutdown_write(fd)?;
            self.sent_fin = true;
        }

        // A pure sender reads only in the drain, to see the peer's EOF; before
        // that a vanished peer shows up as a send error.
        if !self.got_eof && (self.receives || draining) {
            let mut ops = 0;
            loop {
                if ops == OPS_PER_CALL {
                    more = true;
                    break;
                }
                ops += 1;
                match recv(fd, &mut self.recv_buf) {
                    Ok(0) => {
                        self.got_eof = true;
                        if self.eof_before_drain_is_error && !ctx.draining_now() {
                            return Err(early_eof("the peer"));
                        }
                        break;
                    }
                    Ok(n) => self.counters.add_received(n as u64),
                    Err(e) if would_block(&e) => break,
                    Err(e) => return Err(e),
                }
                // A pure sender reads only to notice EOF; one read per wake-up is enough.
                if !self.receives {
                    break;
                }
            }
        }

        if !self.sent_fin && self.sends {
            {
                let mut ops = 0;
                loop {
                    if ops == OPS_PER_CALL {
                        more = true;
                        break;
                    }
                    ops += 1;
                    match send(fd, &self.send_buf) {
                        Ok(n) => self.counters.add_sent(n as u64),
                        Err(e) if would_block(&e) => break,
                        Err(e) => return Err(e),
                    }
                }
            }
        }

        Ok(if self.sent_fin && self.got_eof {
            Progress::Done
        } else if more {
            Progress::More
        } else {
            Progress::Idle
        })
    }

    fn blocking_ok(&self) -> bool {
        // One direction only: a blocked send must not starve the receive side.
        self.sends != self.receives
    }
}
