//! tcp_crr and tcp_cc: the server, under a readiness driver (blocking or
//! epoll); `uring` is the same server as io_uring operations. Each worker
//! accepts from the session's shared listener and keeps a table of the
//! connections still in progress (the module above says more).

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Instant;

use socket2::Socket;

use super::{ConnectMode, MAX_RECV_BUFFER, TOKEN_LEN, TOKEN_TIMEOUT};
use crate::io::blocking::POLL_TIMEOUT;
use crate::io::socket::{
    accept_interruptible, accept_nonblocking, recv, same_host, send, set_nonblocking, would_block,
};
use crate::io::{Driver, Event, RecvBuffers};
use crate::workload::{CounterRef, Flow, FlowCtx, KICK, OPS_PER_CALL, Progress, sub_token, token};

mod uring;

/// Provided buffers per server flow: connections whose request arrives in
/// one wake-up each hold one until the next.
const SERVER_RECV_BUFFERS: usize = 64;

struct Conn {
    sock: Socket,
    /// Bytes of token + request read so far.
    got: usize,
    token: [u8; TOKEN_LEN],
    tx_left: u64,
    /// When the token must be complete.
    deadline: Instant,
    /// Under a completion driver: overdue, its receive cancelled; it is
    /// closed when that receive completes.
    doomed: bool,
}

/// The server's score for reading a connection's request right after
/// accepting it: up one per read that found data, down two per read that
/// found none. At [`EAGER_ON`] and above it reads at once; below, it
/// registers the connection with the driver first and tries the early read
/// again every [`EAGER_PROBE`]th connection, to notice when it pays again.
const EAGER_MAX: u8 = 16;
const EAGER_ON: u8 = 8;
const EAGER_PROBE: u32 = 16;

/// Connections a server worker keeps in progress before it refuses more.
const MAX_CONNS_PER_WORKER: usize = 65_536;

pub struct ConnectServer {
    mode: ConnectMode,
    listener: RawFd,
    allowed_peer: IpAddr,
    /// `--local-hosts`: the client's other source addresses (the token
    /// still has to match).
    also_allowed: Vec<IpAddr>,
    session_token: [u8; TOKEN_LEN],
    request: u64,
    response: u64,
    counters: CounterRef,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    buf: Vec<u8>,
    /// Connections refused: wrong peer, wrong token, no token in time, or table full.
    refused: u64,
    /// The earliest token deadline of a connection still presenting it.
    sweep_at: Option<Instant>,
    /// Whether to read a request right after accepting (see [`EAGER_ON`]).
    eager: u8,
    accepted: u32,
    /// Connections in the table (an answered one leaves it at once).
    open: usize,
    /// The session has one flow, so this is the listener's only worker and
    /// may run the blocking driver.
    single: bool,
    /// Running the blocking driver (set in `start`): the listener blocks.
    blocking: bool,
    /// The blocking mode's poll set (listener first) and the table slot of
    /// each connection in it, kept to be reused.
    pollfds: Vec<libc::pollfd>,
    poll_slots: Vec<usize>,
    /// Under a completion driver (io_uring): accept, receive, send and
    /// close are ring operations (set in `start`).
    ring: bool,
    /// Where the ring's accept writes the peer's address and its length:
    /// on the heap, so that it stays put when the flow moves after `start`.
    peer_buf: Box<(libc::sockaddr_storage, libc::socklen_t)>,
}

impl ConnectServer {
    /// `listener` must stay open until the worker has stopped (the session owns it).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        mode: ConnectMode,
        listener: RawFd,
        allowed_peer: IpAddr,
        session_token: [u8; TOKEN_LEN],
        request: u64,
        response: u64,
        counters: CounterRef,
        single: bool,
    ) -> ConnectServer {
        ConnectServer {
            mode,
            listener,
            allowed_peer,
            also_allowed: Vec::new(),
            session_token,
            request,
            response,
            counters,
            conns: Vec::with_capacity(1024),
            free: Vec::with_capacity(1024),
            buf: vec![0u8; (request.max(response) as usize).clamp(64, 256 << 10)],
            refused: 0,
            sweep_at: None,
            eager: EAGER_ON,
            accepted: 0,
            open: 0,
            single,
            blocking: false,
            pollfds: Vec::new(),
            poll_slots: Vec::new(),
            ring: false,
            // SAFETY: all-zero bytes are a valid sockaddr_storage.
            peer_buf: Box::new((unsafe { std::mem::zeroed() }, 0)),
        }
    }

    /// `--local-hosts`: accept connections from these addresses too.
    pub fn also_from(mut self, hosts: &[IpAddr]) -> ConnectServer {
        self.also_allowed = hosts.to_vec();
        self
    }

    /// Take an accepted connection into the table; None when it is refused
    /// (wrong peer, table full).
    fn admit(&mut self, sock: Socket, peer: SocketAddr) -> Option<usize> {
        let ip = peer.ip();
        if !same_host(ip, self.allowed_peer) && !self.also_allowed.iter().any(|&a| same_host(ip, a))
        {
            self.refused += 1;
            return None;
        }
        let idx = match self.free.pop() {
            Some(i) => i,
            None if self.conns.len() < MAX_CONNS_PER_WORKER => {
                self.conns.push(None);
                self.conns.len() - 1
            }
            None => {
                self.refused += 1;
                return None;
            }
        };
        self.conns[idx] = Some(Conn {
            sock,
            got: 0,
            token: [0; TOKEN_LEN],
            tx_left: 0,
            deadline: Instant::now() + TOKEN_TIMEOUT,
            doomed: false,
        });
        self.open += 1;
        Some(idx)
    }

    /// The blocking driver: with no connection pending, block in `accept`
    /// (the watchdog's signal ends it so the worker sees its flags) and
    /// answer at once.
    fn on_blocking(&mut self) -> io::Result<Progress> {
        if self.open > 0 {
            return self.poll_pending();
        }
        self.accept_and_serve()?;
        Ok(Progress::Idle)
    }

    /// Blocking mode: accept one connection (or be interrupted) and answer
    /// it if its request is in.
    fn accept_and_serve(&mut self) -> io::Result<()> {
        match accept_interruptible(self.listener) {
            Ok((sock, peer)) => {
                if let Some(idx) = self.admit(sock, peer) {
                    self.serve(idx)?;
                }
                Ok(())
            }
            Err(e) if would_block(&e) || e.raw_os_error() == Some(libc::ECONNABORTED) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The blocking driver's slow path: some connection has yet to present
    /// its token or request. Wait for them and the listener together, so
    /// that a silent connection holds up no other, and close the overdue.
    fn poll_pending(&mut self) -> io::Result<Progress> {
        let now = Instant::now();
        let mut wait = POLL_TIMEOUT;
        self.pollfds.clear();
        self.poll_slots.clear();
        self.pollfds.push(libc::pollfd {
            fd: self.listener,
            events: libc::POLLIN,
            revents: 0,
        });
        for (idx, c) in self.conns.iter().enumerate() {
            let Some(c) = c else { continue };
            // Only a connection still owing its token has a deadline.
            if c.got < TOKEN_LEN {
                wait = wait.min(c.deadline.saturating_duration_since(now));
            }
            self.pollfds.push(libc::pollfd {
                fd: c.sock.as_raw_fd(),
                // A response larger than the socket buffer waits for room.
                events: if c.tx_left > 0 {
                    libc::POLLOUT
                } else {
                    libc::POLLIN
                },
                revents: 0,
            });
            self.poll_slots.push(idx);
        }
        let ms = wait.as_micros().div_ceil(1000) as i32;
        // SAFETY: pollfds is a valid array of its length for the call.
        let n = unsafe {
            libc::poll(
                self.pollfds.as_mut_ptr(),
                self.pollfds.len() as libc::nfds_t,
                ms,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if would_block(&e) {
                Ok(Progress::Idle)
            } else {
                Err(e)
            };
        }
        for k in 1..self.pollfds.len() {
            if self.pollfds[k].revents != 0 {
                self.serve(self.poll_slots[k - 1])?;
            }
        }
        if self.pollfds[0].revents != 0 {
            // Readable, and this worker is the listener's only one: the
            // accept does not block.
            self.accept_and_serve()?;
        }
        self.sweep();
        Ok(Progress::Idle)
    }

    /// Close the connections whose token is overdue; wake again for the next deadline.
    /// Runs only when a deadline has come (or on a kick), not per connection.
    fn sweep(&mut self) -> Progress {
        let now = Instant::now();
        let mut next: Option<Instant> = None;
        for idx in 0..self.conns.len() {
            let Some(c) = &self.conns[idx] else { continue };
            if c.got >= TOKEN_LEN {
                continue;
            }
            if c.deadline <= now {
                self.refused += 1;
                self.close(idx);
            } else {
                next = Some(next.map_or(c.deadline, |n| n.min(c.deadline)));
            }
        }
        self.sweep_at = next;
        next.map_or(Progress::Idle, Progress::At)
    }

    /// Accept the next connection, passing over refused ones up to the
    /// per-call budget.
    fn accept_some(&mut self, ctx: &mut FlowCtx<'_>) -> io::Result<Progress> {
        let mut wake = None;
        for _ in 0..OPS_PER_CALL * 4 {
            let (sock, peer) = match accept_nonblocking(self.listener) {
                Ok(x) => x,
                Err(e) if would_block(&e) => return Ok(wake.map_or(Progress::Idle, Progress::At)),
                Err(e) if e.raw_os_error() == Some(libc::ECONNABORTED) => continue,
                Err(e) => return Err(e),
            };
            let Some(idx) = self.admit(sock, peer) else {
                continue;
            };
            // Serve it at once when that tends to pay: the client sends its
            // token with the request as soon as its connect returns, so with
            // one flow it is usually here by now, and a connection answered
            // this way never meets epoll. With many flows the client is often
            // still busy with others, and the recv would find nothing.
            self.accepted = self.accepted.wrapping_add(1);
            if self.eager >= EAGER_ON || self.accepted % EAGER_PROBE == 0 {
                self.serve(idx)?;
                self.eager = match &self.conns[idx] {
                    Some(c) if c.got == 0 => self.eager.saturating_sub(2),
                    _ => (self.eager + 1).min(EAGER_MAX),
                };
            }
            if let Some(c) = &self.conns[idx] {
                // Not finished: watch it (an edge-triggered registration
                // reports data that came in the meantime).
                ctx.driver
                    .register(c.sock.as_raw_fd(), token(ctx.slot, idx as u32 + 1))?;
                // It has yet to present its token: a sweep is due by its deadline.
                if c.got < TOKEN_LEN && self.sweep_at.is_none() {
                    self.sweep_at = Some(c.deadline);
                    wake = Some(c.deadline);
                }
            }
            // One connection per wake-up: the listener is level-triggered, so
            // the driver reports it again while more are queued, in the same
            // wait as the other sockets; accepting until EAGAIN would cost a
            // failed accept4 per wake-up, nearly one per connection.
            break;
        }
        Ok(wake.map_or(Progress::Idle, Progress::At))
    }

    fn expect(&self) -> usize {
        TOKEN_LEN
            + match self.mode {
                ConnectMode::Crr => self.request as usize,
                ConnectMode::Cc => 0,
            }
    }

    fn close(&mut self, idx: usize) {
        self.conns[idx] = None;
        self.free.push(idx);
        self.open -= 1;
    }

    /// Advance one connection; returns when it waits or has closed.
    fn serve(&mut self, idx: usize) -> io::Result<()> {
        let expect = self.expect();
        loop {
            let Some(c) = self.conns[idx].as_mut() else {
                return Ok(());
            };
            let fd = c.sock.as_raw_fd();
            if c.got < expect {
                let want = (expect - c.got).min(self.buf.len());
                match recv(fd, &mut self.buf[..want]) {
                    Ok(0) => {
                        self.close(idx);
                        return Ok(());
                    }
                    Ok(n) => {
                        if c.got < TOKEN_LEN {
                            let k = n.min(TOKEN_LEN - c.got);
                            c.token[c.got..c.got + k].copy_from_slice(&self.buf[..k]);
                        }
                        c.got += n;
                        if c.got >= TOKEN_LEN && c.token != self.session_token {
                            self.refused += 1;
                            self.close(idx);
                            return Ok(());
                        }
                        if c.got == expect {
                            self.counters.add_received((expect - TOKEN_LEN) as u64);
                            if self.mode == ConnectMode::Crr {
                                c.tx_left = self.response;
                            }
                        }
                    }
                    Err(e) if would_block(&e) => return Ok(()),
                    Err(_) => {
                        self.close(idx);
                        return Ok(());
                    }
                }
                continue;
            }
            while c.tx_left > 0 {
                let n = (c.tx_left as usize).min(self.buf.len());
                match send(fd, &self.buf[..n]) {
                    Ok(n) => {
                        c.tx_left -= n as u64;
                        self.counters.add_sent(n as u64);
                    }
                    Err(e) if would_block(&e) => return Ok(()),
                    Err(_) => {
                        self.close(idx);
                        return Ok(());
                    }
                }
            }
            // Answered: count it and close first.
            self.counters.add_transactions(1);
            self.close(idx);
            return Ok(());
        }
    }
}

impl Flow for ConnectServer {
    fn closes_sockets(&self) -> bool {
        true
    }

    fn start(&mut self, driver: &mut dyn Driver, slot: usize) -> io::Result<()> {
        if driver.completions().is_some() {
            self.ring = true;
            return self.accept_ring(driver, slot);
        }
        if driver.waits_in_io() {
            // One flow, so one worker: this listener's only one.
            set_nonblocking(self.listener, false)?;
            self.blocking = true;
            return driver.register_blocking(self.listener, token(slot, 0));
        }
        driver.register_listener(self.listener, token(slot, 0))
    }

    fn on_event(&mut self, ev: Event, ctx: &mut FlowCtx<'_>) -> io::Result<Progress> {
        if self.blocking {
            return self.on_blocking();
        }
        if self.ring {
            return self.on_ring(ev, ctx);
        }
        match sub_token(ev.token) {
            // A kick: a token deadline came, the phase changed, or the last
            // accept batch used its budget. Sweep, then go on accepting.
            KICK => {
                // Kicks also come after every budget-limited accept batch:
                // sweep the table only when a deadline has come.
                let swept = match self.sweep_at {
                    Some(t) if t <= Instant::now() => self.sweep(),
                    _ => Progress::Idle,
                };
                match self.accept_some(ctx)? {
                    Progress::Idle => Ok(self.sweep_at.map_or(swept, Progress::At)),
                    p => Ok(p),
                }
            }
            0 => self.accept_some(ctx),
            sub => {
                let idx = sub as usize - 1;
                if idx < self.conns.len() {
                    self.serve(idx)?;
                }
                Ok(Progress::Idle)
            }
        }
    }

    fn refused(&self) -> u64 {
        self.refused
    }

    fn blocking_ok(&self) -> bool {
        self.single
    }

    fn recv_buffers(&self) -> Option<RecvBuffers> {
        Some(RecvBuffers {
            size: self.expect().clamp(64, MAX_RECV_BUFFER),
            count: SERVER_RECV_BUFFERS,
        })
    }
}
