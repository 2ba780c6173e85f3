//! tcp_crr and tcp_cc's server under the io_uring completion driver: an
//! accept always queued on the listener, each token and request received
//! into provided buffers, and the response sent with the close
//! hard-linked behind it (see the module above).

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd};
use std::time::Instant;

use socket2::{SockAddr, Socket};

use super::ConnectServer;
use crate::io::{Completion, Driver, Event};
use crate::workload::crr::{ConnectMode, TOKEN_LEN, ring};
use crate::workload::{FlowCtx, Progress, failed, sub_token, token};

/// The tag of a server's send that carries a whole response (its length in
/// the bits below), not a piece of a connection in the table.
const WHOLE_RESPONSE: u32 = 1 << 29;

impl ConnectServer {
    /// Under a completion driver: one outcome for this server flow. The
    /// listener has one accept queued at all times; every connection in the table has
    /// exactly one request on it (a receive, or its response's send) until
    /// it leaves the table, so a closed socket is held by no request.
    pub(super) fn on_ring(&mut self, ev: Event, ctx: &mut FlowCtx<'_>) -> io::Result<Progress> {
        match ev.done {
            Completion::None => {
                if self.sweep_at.is_some_and(|t| t <= Instant::now()) {
                    self.sweep_ring(ctx.driver)?;
                }
            }
            Completion::Accepted(res) => {
                if res >= 0 {
                    let (storage, len) = *self.peer_buf;
                    // SAFETY: a descriptor the accept just made, ours
                    // alone; the kernel wrote `len` bytes of its address.
                    let (sock, peer) = unsafe {
                        (
                            Socket::from_raw_fd(res),
                            SockAddr::new(storage, len).as_socket(),
                        )
                    };
                    if let Some(peer) = peer {
                        self.admit_ring(sock, peer, ctx)?;
                    }
                } else if res == -libc::ECANCELED {
                    return Ok(Progress::Idle);
                } else if res != -libc::ECONNABORTED {
                    return Err(failed(-res));
                }
                self.accept_ring(ctx.driver, ctx.slot)?;
            }
            Completion::Sent { tag, res } => self.sent_ring(tag as usize, res, ctx)?,
            Completion::Received { .. } | Completion::Eof | Completion::RecvFailed(_) => {
                let idx = (sub_token(ev.token) as usize).wrapping_sub(1);
                if idx < self.conns.len() {
                    self.received_ring(idx, ev.done, ctx)?;
                }
            }
            Completion::Connected(_) | Completion::Closed(_) => {}
        }
        Ok(self.sweep_at.map_or(Progress::Idle, Progress::At))
    }

    /// Queue the accept of the next connection. One at a time, so that the
    /// listener's exclusive wake-ups spread connections over the workers.
    pub(super) fn accept_ring(&mut self, driver: &mut dyn Driver, slot: usize) -> io::Result<()> {
        self.peer_buf.1 = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        let (addr, len) = (
            &mut self.peer_buf.0 as *mut _,
            &mut self.peer_buf.1 as *mut _,
        );
        // SAFETY: `peer_buf` is the flow's own heap allocation, dropped
        // only after the driver (which waits for every pending request).
        unsafe { ring(driver)?.accept(self.listener, token(slot, 0), addr, len) }
    }

    /// Take an accepted connection into the table and receive its token and request.
    fn admit_ring(
        &mut self,
        sock: Socket,
        peer: SocketAddr,
        ctx: &mut FlowCtx<'_>,
    ) -> io::Result<()> {
        let Some(idx) = self.admit(sock, peer) else {
            return Ok(());
        };
        self.accepted = self.accepted.wrapping_add(1);
        let c = self.conns[idx].as_ref().expect("admitted");
        if self.sweep_at.is_none() {
            self.sweep_at = Some(c.deadline);
        }
        ring(ctx.driver)?.recv_once(c.sock.as_raw_fd(), token(ctx.slot, idx as u32 + 1))
    }

    /// A receive on connection `idx` completed.
    fn received_ring(
        &mut self,
        idx: usize,
        done: Completion,
        ctx: &mut FlowCtx<'_>,
    ) -> io::Result<()> {
        let expect = self.expect();
        let Some(c) = self.conns[idx].as_mut() else {
            return Ok(());
        };
        if c.doomed {
            return self.close_ring(idx, ctx);
        }
        let fd = c.sock.as_raw_fd();
        let len = match done {
            Completion::Received { buf, len } => {
                if c.got < TOKEN_LEN {
                    let data = ring(ctx.driver)?.received(buf, len);
                    let k = data.len().min(TOKEN_LEN - c.got);
                    c.token[c.got..c.got + k].copy_from_slice(&data[..k]);
                }
                len as usize
            }
            Completion::RecvFailed(libc::ENOBUFS) => {
                return ring(ctx.driver)?.recv_once(fd, token(ctx.slot, idx as u32 + 1));
            }
            _ => return self.close_ring(idx, ctx),
        };
        c.got += len;
        if c.got >= TOKEN_LEN && c.token != self.session_token {
            self.refused += 1;
            return self.close_ring(idx, ctx);
        }
        if c.got < expect {
            return ring(ctx.driver)?.recv_once(fd, token(ctx.slot, idx as u32 + 1));
        }
        self.counters.add_received((expect - TOKEN_LEN) as u64);
        match self.mode {
            ConnectMode::Crr if self.response as usize <= self.buf.len() => {
                self.answer_ring(idx, ctx)
            }
            ConnectMode::Crr => {
                c.tx_left = self.response;
                self.send_ring(idx, ctx)
            }
            ConnectMode::Cc => {
                self.counters.add_transactions(1);
                self.close_ring(idx, ctx)
            }
        }
    }

    /// Queue the next piece of a response larger than the buffer. The close
    /// follows the last piece's completion, not linked behind its send: the
    /// table owns the socket until then, and a send cancelled when the
    /// driver is dropped must not leave a close behind that runs anyway.
    fn send_ring(&mut self, idx: usize, ctx: &mut FlowCtx<'_>) -> io::Result<()> {
        let Some(c) = self.conns[idx].as_ref() else {
            return Ok(());
        };
        let fd = c.sock.as_raw_fd();
        let n = (c.tx_left as usize).min(self.buf.len());
        // SAFETY: `buf` is allocated once and outlives the driver; what it
        // holds is no concern of the response's (the client counts bytes).
        unsafe {
            ring(ctx.driver)?.send_all(fd, token(ctx.slot, 0), idx as u32, self.buf.as_ptr(), n)
        }
    }

    /// A response that fits in one send: queue it with the close
    /// hard-linked behind it (one ring entry less per connection than
    /// closing once the send has completed), and let go of the connection
    /// now: the close owns the socket, and the send's completion, tagged
    /// [`WHOLE_RESPONSE`], needs no table entry.
    fn answer_ring(&mut self, idx: usize, ctx: &mut FlowCtx<'_>) -> io::Result<()> {
        let Some(c) = self.conns[idx].take() else {
            return Ok(());
        };
        self.free.push(idx);
        self.open -= 1;
        let fd = c.sock.into_raw_fd();
        let n = self.response as usize;
        let r = ring(ctx.driver)?;
        r.link_next(true);
        // SAFETY: `buf` is allocated once and outlives the driver; what it
        // holds is no concern of the response's (the client counts bytes).
        unsafe {
            r.send_all(
                fd,
                token(ctx.slot, 0),
                WHOLE_RESPONSE | n as u32,
                self.buf.as_ptr(),
                n,
            )?
        };
        r.close(fd, token(ctx.slot, 0))
    }

    /// The send of a piece of connection `idx`'s response completed.
    fn sent_ring(&mut self, idx: usize, res: i32, ctx: &mut FlowCtx<'_>) -> io::Result<()> {
        if idx & WHOLE_RESPONSE as usize != 0 {
            // A whole response, its close linked behind it.
            let n = idx & !(WHOLE_RESPONSE as usize);
            if res >= 0 && res as usize == n {
                self.counters.add_sent(n as u64);
                self.counters.add_transactions(1);
            }
            return Ok(());
        }
        let Some(c) = self.conns.get_mut(idx).and_then(Option::as_mut) else {
            return Ok(());
        };
        let n = (c.tx_left as usize).min(self.buf.len());
        if res < 0 || res as usize != n {
            return self.close_ring(idx, ctx);
        }
        c.tx_left -= n as u64;
        self.counters.add_sent(n as u64);
        if c.tx_left > 0 {
            return self.send_ring(idx, ctx);
        }
        // Answered: count it and close first.
        self.counters.add_transactions(1);
        self.close_ring(idx, ctx)
    }

    /// Take connection `idx` out of the table and close it with the ring
    /// (no request is on it any more).
    fn close_ring(&mut self, idx: usize, ctx: &mut FlowCtx<'_>) -> io::Result<()> {
        let Some(c) = self.conns[idx].take() else {
            return Ok(());
        };
        self.free.push(idx);
        self.open -= 1;
        ring(ctx.driver)?.close(c.sock.into_raw_fd(), token(ctx.slot, 0))
    }

    /// [`ConnectServer::sweep`] under a completion driver: an overdue
    /// connection's receive is cancelled, and the connection closed when
    /// that receive completes.
    fn sweep_ring(&mut self, driver: &mut dyn Driver) -> io::Result<()> {
        let now = Instant::now();
        let mut next: Option<Instant> = None;
        for c in self.conns.iter_mut().flatten() {
            if c.got >= TOKEN_LEN || c.doomed {
                continue;
            }
            if c.deadline <= now {
                self.refused += 1;
                c.doomed = true;
                ring(driver)?.cancel_fd(c.sock.as_raw_fd())?;
            } else {
                next = Some(next.map_or(c.deadline, |n| n.min(c.deadline)));
            }
        }
        self.sweep_at = next;
        Ok(())
    }
}
