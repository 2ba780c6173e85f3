//! tcp_crr and tcp_cc's client under the io_uring completion driver: each
//! connection's connect, request and the receive of its answer go to the
//! ring as one linked chain, and its close behind the server's FIN (see
//! the module above).

use std::io;
use std::os::fd::{AsRawFd, IntoRawFd};
use std::time::Instant;

use super::{ConnectClient, GENERATIONS, State};
use crate::io::socket::tcp_socket;
use crate::io::{Completion, Event};
use crate::workload::crr::{ConnectMode, TOKEN_LEN, ring};
use crate::workload::{FlowCtx, OPS_PER_CALL, Progress, early_eof, failed, sub_token, token};

impl ConnectClient {
    /// Under a completion driver: open the next connection and queue its
    /// connect, its request and the receive of its answer as one linked
    /// chain (tcp_cc: the receive of the server's FIN and the close too),
    /// which goes to the kernel with the worker's next wait.
    fn open_ring(&mut self, ctx: &mut FlowCtx<'_>) -> io::Result<()> {
        // Blocking: the ring's requests wait for the socket themselves.
        let s = tcp_socket(&self.peer, false)?;
        self.opts.apply_before_connect(&s)?;
        // The options of a connected socket go on before connect here: the
        // request leaves in the same submission as the connect.
        self.opts.apply_connected(&s)?;
        if self.rst {
            s.set_linger(Some(std::time::Duration::ZERO))
                .map_err(|e| io::Error::new(e.kind(), format!("SO_LINGER 0 (--close rst): {e}")))?;
        }
        if let Some(b) = &self.bind {
            s.bind(b)?;
        }
        self.generation = (self.generation + 1) % GENERATIONS;
        let tok = token(ctx.slot, self.generation);
        let fd = s.as_raw_fd();
        self.ring_fd = fd;
        let c = ring(ctx.driver)?;
        self.started = Instant::now();
        c.link_next(false);
        // SAFETY: `addr` is the flow's own field, and flows outlive their
        // driver's submissions (the driver is dropped first).
        unsafe { c.connect(fd, tok, self.addr.as_ptr().cast(), self.addr.len())? };
        c.link_next(false);
        // SAFETY: `hello` is allocated once and never written after `new`;
        // the driver waits for every pending send before it is dropped.
        unsafe {
            c.send_all(
                fd,
                tok,
                self.generation,
                self.hello.as_ptr(),
                self.hello.len(),
            )?
        };
        if self.mode == ConnectMode::Cc {
            // The receive waits for the server's FIN; the close follows it
            // whatever the receive's outcome.
            c.link_next(true);
        }
        c.recv_once(fd, tok)?;
        self.state = match self.mode {
            ConnectMode::Crr => {
                self.sock = Some(s);
                State::Receiving
            }
            ConnectMode::Cc => {
                // The socket is the close's from now on: a flow that holds
                // none cannot close it twice. (Should the connect or the
                // request fail, the close is cancelled with the rest of the
                // chain, and `chain_failed` closes the descriptor.)
                c.close(s.into_raw_fd(), tok)?;
                State::WaitEof
            }
        };
        self.rx_got = 0;
        Ok(())
    }

    /// Under a completion driver: give the connection to a ring close,
    /// after the server's FIN unless `--close rst` aborts it now. The next
    /// connection may open at once; the close finishes on its own.
    fn close_ring(&mut self, ctx: &mut FlowCtx<'_>, after_fin: bool) -> io::Result<()> {
        self.state = State::Closed;
        let Some(s) = self.sock.take() else {
            return Ok(());
        };
        let fd = s.into_raw_fd();
        let tok = token(ctx.slot, self.generation);
        let c = ring(ctx.driver)?;
        if after_fin {
            // The receive of the FIN, the close linked behind it (hard: a
            // receive cancelled at the end still closes the socket).
            // `link_next` marks the entry pushed next, so it comes first.
            c.link_next(true);
            c.recv_once(fd, tok)?;
        }
        c.close(fd, tok)
    }

    /// Under a completion driver: one outcome of the open connection's
    /// chain. Later ones of a connection already given up are not passed here.
    fn on_ring_done(&mut self, done: Completion, ctx: &mut FlowCtx<'_>) -> io::Result<()> {
        match done {
            Completion::Connected(res) if res < 0 => {
                let e = self.connect_error(res);
                Err(self.chain_failed(e))
            }
            // Cancelled: the connect before it failed and says why.
            Completion::Sent { res, .. } if res == -libc::ECANCELED => Ok(()),
            Completion::Sent { res, .. } if res < 0 => {
                let e = self.connect_error(res);
                Err(self.chain_failed(e))
            }
            Completion::Sent { res, .. } if res as usize == self.hello.len() => {
                self.counters
                    .add_sent((self.hello.len() - TOKEN_LEN) as u64);
                Ok(())
            }
            // A short send fails the chain as an error does (the receive
            // behind it is cancelled), so the flow must not wait for it.
            Completion::Sent { res, .. } => {
                let e = io::Error::other(format!(
                    "sending the request to {}: {res} of {} bytes went",
                    self.peer,
                    self.hello.len()
                ));
                Err(self.chain_failed(e))
            }
            Completion::Received { len, .. } => {
                if self.state == State::WaitEof {
                    return Err(io::Error::other("the server sent more than the response"));
                }
                self.counters.add_received(len as u64);
                self.rx_got += len as u64;
                if self.rx_got < self.response {
                    return ring(ctx.driver)?
                        .recv_once(self.ring_fd, token(ctx.slot, self.generation));
                }
                self.complete(ctx);
                // Read on for the server's FIN (it closes right after
                // answering), or abort now with `--close rst`.
                self.close_ring(ctx, !self.rst)
            }
            Completion::Eof if self.state == State::Receiving => Err(early_eof("the server")),
            Completion::Eof => {
                // tcp_cc: the server closed first; the close is linked behind.
                self.state = State::Closed;
                self.complete(ctx);
                Ok(())
            }
            Completion::RecvFailed(libc::ENOBUFS) => {
                ring(ctx.driver)?.recv_once(self.ring_fd, token(ctx.slot, self.generation))
            }
            // Cancelled: a request before it in the chain failed and says why.
            Completion::RecvFailed(libc::ECANCELED) => Ok(()),
            Completion::RecvFailed(e) => Err(failed(e)),
            _ => Ok(()),
        }
    }

    /// The connect or the request of the open chain failed with `e`: the
    /// kernel cancels the rest of the chain, a tcp_cc chain's close too, so
    /// that connection's descriptor, which the flow gave to the close, is
    /// still open and closed here (tcp_crr's is the flow's own socket).
    fn chain_failed(&mut self, e: io::Error) -> io::Error {
        if self.mode == ConnectMode::Cc && self.state == State::WaitEof {
            // SAFETY: the descriptor came from `into_raw_fd` in `open_ring`
            // and no one else closes it: its ring close was cancelled.
            unsafe { libc::close(self.ring_fd) };
            self.state = State::Closed;
        }
        e
    }

    fn connect_error(&self, res: i32) -> io::Error {
        let e = io::Error::from_raw_os_error(-res);
        if -res == libc::EADDRNOTAVAIL {
            return io::Error::new(
                e.kind(),
                format!(
                    "connecting to {}: no local port free ({e}); too many connections in TIME_WAIT?",
                    self.peer
                ),
            );
        }
        io::Error::new(e.kind(), format!("connecting to {}: {e}", self.peer))
    }

    /// Under a completion driver: take the outcome the event carries, then
    /// open connections while the schedule, the phase and the quota allow.
    pub(super) fn on_ring(&mut self, ev: Event, ctx: &mut FlowCtx<'_>) -> io::Result<Progress> {
        let current = match ev.done {
            Completion::None => false,
            Completion::Sent { tag, .. } => tag == self.generation,
            _ => sub_token(ev.token) == self.generation,
        };
        if current && self.state != State::Closed {
            self.on_ring_done(ev.done, ctx)?;
        }
        for _ in 0..OPS_PER_CALL {
            if self.state != State::Closed {
                return Ok(Progress::Idle);
            }
            if let Some(p) = self.next_connection(ctx) {
                return Ok(p);
            }
            self.open_ring(ctx)?;
        }
        Ok(Progress::More)
    }
}
