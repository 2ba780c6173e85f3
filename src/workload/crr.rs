//! One connection per transaction: tcp_crr (connect, request, response, close)
//! and tcp_cc (connect, close).
//!
//! The client opens each connection non-blocking, presents the session token
//! (with the request, in one `send`), and times the whole cycle from `connect`
//! to the response's last byte (crr) or to the server's close (cc). The server
//! closes first, right after answering, and the client closes on reading EOF:
//! TIME_WAIT then lands on the server, which does not run out of ephemeral
//! ports the way a client opening thousands of connections per second would.
//!
//! On the server, each worker accepts from the session's shared listener and
//! keeps a small table of connections in progress.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use socket2::{SockAddr, Socket};

use super::{CounterRef, Flow, FlowCtx, KICK, OPS_PER_CALL, Phase, Progress, sub_token, token};
use crate::io::socket::{
    DataSocketOpts, accept_nonblocking, recv, same_host, send, tcp_socket, would_block,
};
use crate::io::{Driver, Event};

/// Bytes of the session token every data connection presents first.
pub const TOKEN_LEN: usize = 16;
/// A data connection that has not presented the whole token within this is closed.
pub const TOKEN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnectMode {
    /// Connect, request, response, close.
    Crr,
    /// Connect, close.
    Cc,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Closed,
    Connecting,
    Sending,
    Receiving,
    WaitEof,
}

pub struct ConnectClient {
    mode: ConnectMode,
    addr: SockAddr,
    peer: SocketAddr,
    bind: Option<SockAddr>,
    opts: DataSocketOpts,
    counters: CounterRef,
    /// Token followed by the request (crr) or the token alone (cc).
    hello: Vec<u8>,
    response: u64,
    recv_buf: Vec<u8>,
    sock: Option<Socket>,
    generation: u32,
    state: State,
    started: Instant,
    tx_off: usize,
    rx_got: u64,
    quota: Option<u64>,
    done_in_measure: u64,
    quota_reported: bool,
}

impl ConnectClient {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        mode: ConnectMode,
        peer: SocketAddr,
        bind: Option<IpAddr>,
        opts: DataSocketOpts,
        counters: CounterRef,
        session_token: [u8; TOKEN_LEN],
        request: u64,
        response: u64,
        quota: Option<u64>,
    ) -> ConnectClient {
        let mut hello = session_token.to_vec();
        if mode == ConnectMode::Crr {
            hello.resize(TOKEN_LEN + request as usize, 0);
        }
        ConnectClient {
            mode,
            addr: SockAddr::from(peer),
            peer,
            bind: bind.map(|ip| SockAddr::from(SocketAddr::new(ip, 0))),
            opts,
            counters,
            hello,
            response,
            recv_buf: vec![0u8; (response as usize).clamp(64, 256 << 10)],
            sock: None,
            generation: 0,
            state: State::Closed,
            started: Instant::now(),
            tx_off: 0,
            rx_got: 0,
            quota,
            done_in_measure: 0,
            quota_reported: false,
        }
    }

    fn open(&mut self, driver: &mut dyn Driver, slot: usize) -> io::Result<()> {
        let s = tcp_socket(&self.peer, true)?;
        self.opts.apply_before_connect(&s)?;
        if let Some(b) = &self.bind {
            s.bind(b)?;
        }
        self.started = Instant::now();
        match s.connect(&self.addr) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
            Err(e) if e.raw_os_error() == Some(libc::EADDRNOTAVAIL) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!(
                        "connecting to {}: no local port free ({e}); too many connections in TIME_WAIT?",
                        self.peer
                    ),
                ));
            }
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("connecting to {}: {e}", self.peer),
                ));
            }
        }
        self.generation = self.generation.wrapping_add(1) % KICK;
        driver.register(s.as_raw_fd(), token(slot, self.generation))?;
        self.sock = Some(s);
        self.state = State::Connecting;
        self.tx_off = 0;
        self.rx_got = 0;
        Ok(())
    }

    fn complete(&mut self, ctx: &mut FlowCtx<'_>) {
        self.counters.add_transactions(1);
        if ctx.phase_now() == Phase::Measure {
            ctx.hist.record(self.started.elapsed().as_nanos() as u64);
            self.done_in_measure += 1;
        }
    }

    fn may_open(&self, phase: Phase) -> bool {
        phase < Phase::Drain && self.quota.is_none_or(|q| self.done_in_measure < q)
    }
}

impl Flow for ConnectClient {
    fn start(&mut self, _driver: &mut dyn Driver, _slot: usize) -> io::Result<()> {
        // The first connection opens on the engine's start kick.
        Ok(())
    }

    fn on_event(&mut self, ev: Event, ctx: &mut FlowCtx<'_>) -> io::Result<Progress> {
        let sub = sub_token(ev.token);
        if sub != KICK && sub != self.generation {
            // A late event for a connection already closed.
            return Ok(Progress::Idle);
        }
        for _ in 0..OPS_PER_CALL {
            match self.state {
                State::Closed => {
                    let phase = ctx.phase_now();
                    if !self.may_open(phase) {
                        if phase == Phase::Drain {
                            return Ok(Progress::Done);
                        }
                        if !self.quota_reported {
                            self.quota_reported = true;
                            ctx.quota_done.fetch_add(1, Relaxed);
                        }
                        return Ok(Progress::Parked);
                    }
                    self.open(ctx.driver, ctx.slot)?;
                    return Ok(Progress::Idle);
                }
                State::Connecting => {
                    let s = self.sock.as_ref().expect("connecting socket");
                    if let Some(e) = s.take_error()? {
                        return Err(io::Error::new(
                            e.kind(),
                            format!("connecting to {}: {e}", self.peer),
                        ));
                    }
                    if !ev.writable && !ev.error {
                        return Ok(Progress::Idle);
                    }
                    self.opts.apply_connected(s)?;
                    self.state = State::Sending;
                }
                State::Sending => {
                    let fd = self.sock.as_ref().expect("socket").as_raw_fd();
                    match send(fd, &self.hello[self.tx_off..]) {
                        Ok(n) => self.tx_off += n,
                        Err(e) if would_block(&e) || e.raw_os_error() == Some(libc::ENOTCONN) => {
                            return Ok(Progress::Idle);
                        }
                        Err(e) => return Err(e),
                    }
                    if self.tx_off == self.hello.len() {
                        self.counters
                            .add_sent((self.hello.len() - TOKEN_LEN) as u64);
                        self.state = match self.mode {
                            ConnectMode::Crr => State::Receiving,
                            ConnectMode::Cc => State::WaitEof,
                        };
                    }
                }
                State::Receiving | State::WaitEof => {
                    let fd = self.sock.as_ref().expect("socket").as_raw_fd();
                    match recv(fd, &mut self.recv_buf) {
                        Ok(0) => {
                            if self.state == State::Receiving {
                                return Err(super::early_eof("the server"));
                            }
                            // Server closed first: the cycle is over.
                            self.sock = None;
                            self.state = State::Closed;
                            if self.mode == ConnectMode::Cc {
                                self.complete(ctx);
                            }
                        }
                        Ok(n) => {
                            if self.state == State::WaitEof {
                                return Err(io::Error::other(
                                    "the server sent more than the response",
                                ));
                            }
                            self.counters.add_received(n as u64);
                            self.rx_got += n as u64;
                            if self.rx_got >= self.response {
                                self.complete(ctx);
                                self.state = State::WaitEof;
                            }
                        }
                        Err(e) if would_block(&e) => return Ok(Progress::Idle),
                        Err(e) => return Err(e),
                    }
                }
            }
        }
        Ok(Progress::More)
    }

    fn blocking_ok(&self) -> bool {
        false
    }
}

struct Conn {
    sock: Socket,
    /// Bytes of token + request read so far.
    got: usize,
    token: [u8; TOKEN_LEN],
    tx_left: u64,
    /// When the token must be complete.
    deadline: Instant,
}

/// Connections a server worker keeps in progress before it refuses more.
const MAX_CONNS_PER_WORKER: usize = 65_536;

pub struct ConnectServer {
    mode: ConnectMode,
    listener: RawFd,
    allowed_peer: IpAddr,
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
    ) -> ConnectServer {
        ConnectServer {
            mode,
            listener,
            allowed_peer,
            session_token,
            request,
            response,
            counters,
            conns: Vec::with_capacity(1024),
            free: Vec::with_capacity(1024),
            buf: vec![0u8; (request.max(response) as usize).clamp(64, 256 << 10)],
            refused: 0,
            sweep_at: None,
        }
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

    /// Accept what the listener has, up to the per-call budget.
    fn accept_some(&mut self, ctx: &mut FlowCtx<'_>) -> io::Result<Progress> {
        let mut wake = None;
        for _ in 0..OPS_PER_CALL * 4 {
            let (sock, peer) = match accept_nonblocking(self.listener) {
                Ok(x) => x,
                Err(e) if would_block(&e) => return Ok(wake.map_or(Progress::Idle, Progress::At)),
                Err(e) if e.raw_os_error() == Some(libc::ECONNABORTED) => continue,
                Err(e) => return Err(e),
            };
            if !same_host(peer.ip(), self.allowed_peer) {
                self.refused += 1;
                continue;
            }
            let idx = match self.free.pop() {
                Some(i) => i,
                None if self.conns.len() < MAX_CONNS_PER_WORKER => {
                    self.conns.push(None);
                    self.conns.len() - 1
                }
                None => {
                    self.refused += 1;
                    continue;
                }
            };
            ctx.driver
                .register(sock.as_raw_fd(), token(ctx.slot, idx as u32 + 1))?;
            let deadline = Instant::now() + TOKEN_TIMEOUT;
            self.conns[idx] = Some(Conn {
                sock,
                got: 0,
                token: [0; TOKEN_LEN],
                tx_left: 0,
                deadline,
            });
            self.serve(idx)?;
            // Still presenting its token: make sure a sweep is due by its deadline.
            if self.conns[idx].as_ref().is_some_and(|c| c.got < TOKEN_LEN)
                && self.sweep_at.is_none()
            {
                self.sweep_at = Some(deadline);
                wake = Some(deadline);
            }
        }
        Ok(Progress::More)
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
    fn start(&mut self, driver: &mut dyn Driver, slot: usize) -> io::Result<()> {
        driver.register_listener(self.listener, token(slot, 0))
    }

    fn on_event(&mut self, ev: Event, ctx: &mut FlowCtx<'_>) -> io::Result<Progress> {
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
        false
    }
}
