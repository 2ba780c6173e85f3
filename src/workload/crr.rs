//! One connection per transaction: tcp_crr (connect, request, response, close)
//! and tcp_cc (connect, close).
//!
//! The client opens each connection (blocking when the worker runs the
//! blocking driver, one flow; non-blocking otherwise), presents the session
//! token (with the request, in one `send`), and times the whole cycle from
//! `connect` to the response's last byte (crr) or to the server's close (cc). The server
//! closes first, right after answering, and the client closes on reading EOF:
//! TIME_WAIT then lands on the server, which does not run out of ephemeral
//! ports the way a client opening thousands of connections per second would.
//! With `--close rst` the client instead aborts (SO_LINGER 0) as soon as it
//! has the response (crr) or the server's FIN (cc): its reset also ends the
//! server's half-closed socket, so no TIME_WAIT is left anywhere.
//!
//! With `--rate` the client is open-loop (see [`crate::workload::schedule`]):
//! each scheduled transaction is a new connection, opened when its intended
//! start comes, and its response time (`latency_ns`) runs from that intended
//! start to the response's last byte (crr) or the server's close (cc); the
//! service time runs from `connect`. A flow has one connection open at a
//! time, as wrk2 has one request per connection: transactions that come due
//! while it is busy stay owed and go out back to back as soon as it is
//! free, still timed from their intended starts, so a stalled server is
//! charged for every one (more flows, `-F`, give more connections at once).
//!
//! On the server, each worker accepts from the session's shared listener,
//! one connection per wake-up, answers at once when the request is already
//! in, and keeps a small table of the connections still in progress. A
//! session of one flow has one server worker, which runs the blocking driver
//! like the client: it blocks in `accept` (netserver's calls: accept, recv,
//! send, close) and polls only while some connection has yet to present its
//! request.
//!
//! Under the io_uring completion driver (`--driver uring`) both ends make
//! the same exchanges as ring operations ([`crate::io::Completions`]): the
//! client queues connect, request and the response's receive as one linked
//! chain (tcp_cc: the FIN's receive and the close too) and, once answered,
//! a receive of the server's FIN with the close hard-linked behind it (or,
//! with `--close rst`, the close alone), then opens the next connection at
//! once; the server keeps an accept queued on the listener, receives each
//! token and request into provided buffers, and sends the response with
//! the close hard-linked behind it (a response larger than the server's
//! buffer goes in pieces, and the close follows the last one's completion).
//! No request is ever left on a socket that is closed: an overdue token's
//! receive is cancelled first.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, RawFd};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use socket2::{SockAddr, Socket};

use super::schedule::{InSystem, Schedule};
use super::{
    CounterRef, Flow, FlowCtx, KICK, OPS_PER_CALL, Progress, early_eof, failed, sub_token, token,
};
use crate::io::blocking::POLL_TIMEOUT;
use crate::io::socket::{
    DataSocketOpts, accept_interruptible, accept_nonblocking, poll_one, recv, same_host, send,
    set_nonblocking, tcp_socket, would_block,
};
use crate::io::{Completion, Completions, Driver, Event, RecvBuffers};
use crate::plan::CloseMode;
use crate::plan::Phase;

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
    /// The worker runs the blocking driver: connect, send and receive block
    /// and need no readiness wait (set in `start`).
    blocking: bool,
    /// `--close rst`: SO_LINGER 0, close without waiting for the server's FIN.
    rst: bool,
    /// Open loop: the schedule, and the intended start of the transaction
    /// on the open connection.
    schedule: Option<Schedule>,
    meant: Instant,
    in_system: InSystem,
    /// Under a completion driver (io_uring): connect, request, response
    /// and close are ring operations (set in `start`).
    ring: bool,
    /// The open connection's descriptor under a completion driver (tcp_cc:
    /// already given to the close queued behind its receive).
    ring_fd: RawFd,
}

/// Generations of a client's connections wrap here: under a completion
/// driver the generation is also a send's tag, which must stay below 2^30.
const GENERATIONS: u32 = 1 << 30;

/// Provided buffers per client flow under a completion driver: one for the
/// response and one for the previous connection's FIN, with room to spare.
const CLIENT_RECV_BUFFERS: usize = 4;
/// Provided buffers per server flow: connections whose request arrives in
/// one wake-up each hold one until the next.
const SERVER_RECV_BUFFERS: usize = 64;
/// The largest provided buffer a connection test asks for; larger messages
/// take several receives.
const MAX_RECV_BUFFER: usize = 64 << 10;

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
        close: CloseMode,
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
            blocking: false,
            rst: close == CloseMode::Rst,
            schedule: None,
            meant: Instant::now(),
            in_system: InSystem::new(),
            ring: false,
            ring_fd: -1,
        }
    }

    /// Run open-loop on `schedule`: a connection per scheduled transaction,
    /// one open at a time.
    pub fn open_loop(mut self, schedule: Schedule) -> ConnectClient {
        self.schedule = Some(schedule);
        self
    }

    /// Open loop: the next transaction's intended start if it has not come
    /// yet (wait for it); else take it, recording how late it is taken.
    fn due(&mut self, ctx: &mut FlowCtx<'_>) -> Option<Instant> {
        let s = self.schedule.as_mut()?;
        let now = Instant::now();
        if s.next() > now {
            return Some(s.next());
        }
        let due = s.take();
        let lag = now.duration_since(due);
        if ctx.phase_now() == Phase::Measure {
            if let Some(o) = ctx.open.as_deref_mut() {
                o.lag.record(lag.as_nanos() as u64);
            }
        }
        if lag > s.gap() {
            self.counters.add_late(1);
        }
        self.in_system.arrive(due, now, &self.counters);
        self.meant = due;
        None
    }

    /// Open the next connection. Non-blocking, the connect is left in
    /// progress and the request is tried at once: on loopback the handshake
    /// has usually completed by the time `connect` returns (the SYN-ACK is
    /// processed as the call releases the socket), so waiting for the
    /// writable edge first would cost an `epoll_wait` per connection.
    /// Blocking, `connect` returns with the connection made (or interrupted
    /// by the watchdog, when it is finished in state Connecting).
    fn open(&mut self, driver: &mut dyn Driver, slot: usize) -> io::Result<()> {
        let s = tcp_socket(&self.peer, !self.blocking)?;
        self.opts.apply_before_connect(&s)?;
        if self.rst {
            s.set_linger(Some(std::time::Duration::ZERO))
                .map_err(|e| io::Error::new(e.kind(), format!("SO_LINGER 0 (--close rst): {e}")))?;
        }
        if let Some(b) = &self.bind {
            s.bind(b)?;
        }
        self.started = Instant::now();
        let mut state = State::Sending;
        match s.connect(&self.addr) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
            Err(e) if self.blocking && e.raw_os_error() == Some(libc::EINTR) => {
                state = State::Connecting;
            }
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
        self.generation = (self.generation + 1) % GENERATIONS;
        if self.blocking {
            driver.register_blocking(s.as_raw_fd(), token(slot, self.generation))?;
        } else {
            driver.register(s.as_raw_fd(), token(slot, self.generation))?;
        }
        if state == State::Sending {
            self.opts.apply_connected(&s)?;
        }
        self.sock = Some(s);
        self.state = state;
        self.tx_off = 0;
        self.rx_got = 0;
        Ok(())
    }

    /// Close the connection (the server has closed first, or `--close rst`).
    fn close(&mut self, driver: &mut dyn Driver) -> io::Result<()> {
        if let Some(s) = self.sock.take()
            && self.blocking
        {
            // Epoll forgets a closed socket by itself; the blocking driver
            // holds one socket and must let go of it before the next.
            driver.deregister(s.as_raw_fd())?;
        }
        self.state = State::Closed;
        Ok(())
    }

    /// Blocking mode, a connect the watchdog interrupted: wait for it to
    /// finish. False when interrupted again (the worker looks at its flags).
    fn await_connect(&self) -> io::Result<bool> {
        let fd = self.sock.as_ref().expect("connecting socket").as_raw_fd();
        Ok(poll_one(fd, libc::POLLOUT, -1)? != 0)
    }

    fn complete(&mut self, ctx: &mut FlowCtx<'_>) {
        self.counters.add_transactions(1);
        if self.schedule.is_some() {
            self.in_system.depart(1, Instant::now(), &self.counters);
        }
        if ctx.phase_now() == Phase::Measure {
            let now = Instant::now();
            let service = now.duration_since(self.started).as_nanos() as u64;
            if self.schedule.is_some() {
                // Response time from the intended start; service time from connect.
                ctx.hist
                    .record(now.duration_since(self.meant).as_nanos() as u64);
                if let Some(o) = ctx.open.as_deref_mut() {
                    o.service.record(service);
                }
            } else {
                ctx.hist.record(service);
            }
            self.done_in_measure += 1;
        }
    }

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
    fn on_ring(&mut self, ev: Event, ctx: &mut FlowCtx<'_>) -> io::Result<Progress> {
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
            if let Some(next) = self.due(ctx) {
                return Ok(Progress::At(next));
            }
            self.open_ring(ctx)?;
        }
        Ok(Progress::More)
    }

    fn may_open(&self, phase: Phase) -> bool {
        phase < Phase::Drain && self.quota.is_none_or(|q| self.done_in_measure < q)
    }
}

impl Flow for ConnectClient {
    fn closes_sockets(&self) -> bool {
        true
    }

    fn start(&mut self, driver: &mut dyn Driver, _slot: usize) -> io::Result<()> {
        // The first connection opens on the engine's start kick.
        self.blocking = driver.waits_in_io();
        self.ring = driver.completions().is_some();
        if let Some(s) = &mut self.schedule {
            s.begin(Instant::now());
        }
        Ok(())
    }

    fn on_event(&mut self, ev: Event, ctx: &mut FlowCtx<'_>) -> io::Result<Progress> {
        if self.ring {
            return self.on_ring(ev, ctx);
        }
        let sub = sub_token(ev.token);
        if sub != KICK && sub != self.generation {
            // A late event for a connection already closed. Open loop, it
            // must not cancel the wake-up for the next intended start.
            return Ok(match (&self.schedule, self.state) {
                (Some(s), State::Closed) => Progress::At(s.next()),
                _ => Progress::Idle,
            });
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
                    if let Some(next) = self.due(ctx) {
                        return Ok(Progress::At(next));
                    }
                    self.open(ctx.driver, ctx.slot)?;
                }
                State::Connecting => {
                    if self.blocking && !self.await_connect()? {
                        return Ok(Progress::Idle);
                    }
                    let s = self.sock.as_ref().expect("connecting socket");
                    // Writable without an error is a completed connect: no
                    // SO_ERROR to fetch (one syscall per connection less).
                    if (ev.error || self.blocking)
                        && let Some(e) = s.take_error()?
                    {
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
                        // Still connecting (tried right after connect):
                        // the writable edge brings us back.
                        Err(e) if would_block(&e) || e.raw_os_error() == Some(libc::ENOTCONN) => {
                            return Ok(Progress::Idle);
                        }
                        Err(e) if self.tx_off == 0 => {
                            return Err(io::Error::new(
                                e.kind(),
                                format!("connecting to {}: {e}", self.peer),
                            ));
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
                        // The answer cannot be there yet: wait for its edge
                        // instead of a recv that would return EAGAIN
                        // (blocking, the recv is the wait).
                        if !self.blocking {
                            return Ok(Progress::Idle);
                        }
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
                            self.close(ctx.driver)?;
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
                                if self.rst {
                                    // Abort now: the reset ends the server's
                                    // socket too, FIN or no FIN yet.
                                    self.close(ctx.driver)?;
                                } else {
                                    // Read on: the server closes right after
                                    // answering, so its FIN is nearly always here.
                                    self.state = State::WaitEof;
                                }
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

    /// A blocking connect or receive would hold an open-loop flow past its schedule.
    fn blocking_ok(&self) -> bool {
        self.schedule.is_none()
    }

    fn recv_buffers(&self) -> Option<RecvBuffers> {
        Some(RecvBuffers {
            size: (self.response as usize).clamp(64, MAX_RECV_BUFFER),
            count: CLIENT_RECV_BUFFERS,
        })
    }
}

/// The completion side of a driver that was one when the flow started.
fn ring(driver: &mut dyn Driver) -> io::Result<&mut dyn Completions> {
    driver
        .completions()
        .ok_or_else(|| io::Error::other("the completion driver went away"))
}

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

/// The tag of a server's send that carries a whole response (its length in
/// the bits below), not a piece of a connection in the table.
const WHOLE_RESPONSE: u32 = 1 << 29;

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

    /// Take an accepted connection into the table; None when it is refused
    /// (wrong peer, table full).
    fn admit(&mut self, sock: Socket, peer: SocketAddr) -> Option<usize> {
        if !same_host(peer.ip(), self.allowed_peer) {
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

    /// Under a completion driver: one outcome for this server flow. The
    /// listener has one accept queued at all times; every connection in the table has
    /// exactly one request on it (a receive, or its response's send) until
    /// it leaves the table, so a closed socket is held by no request.
    fn on_ring(&mut self, ev: Event, ctx: &mut FlowCtx<'_>) -> io::Result<Progress> {
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
    fn accept_ring(&mut self, driver: &mut dyn Driver, slot: usize) -> io::Result<()> {
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

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;
    use crate::io::socket::listen;
    use crate::workload::harness::{Harness, Status};

    const TOKEN: [u8; TOKEN_LEN] = [7; TOKEN_LEN];

    /// A server's listener on loopback, non-blocking as the session leaves it.
    fn listener() -> (Socket, SocketAddr) {
        let any = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let l = listen(&any, &DataSocketOpts::default(), 128).unwrap();
        set_nonblocking(l.as_raw_fd(), true).unwrap();
        let addr = l.local_addr().unwrap().as_socket().unwrap();
        (l, addr)
    }

    /// A bench for `flows` flows on epoll, or (`ring`) on the io_uring
    /// completion driver; None (said on stderr) where io_uring is unavailable.
    fn bench(flows: usize, ring: bool) -> Option<Harness> {
        if !ring {
            return Some(Harness::new(flows));
        }
        if let Err(why) = crate::io::uring::probe() {
            eprintln!("SKIPPED: io_uring unavailable: {why}");
            return None;
        }
        let bufs = RecvBuffers {
            size: MAX_RECV_BUFFER,
            count: 128,
        };
        let driver = crate::io::uring::Uring::new(Some(bufs)).expect("io_uring driver");
        Some(Harness::with_driver(flows, Box::new(driver)))
    }

    /// A bench with a server flow (slot 1, counters 1) on `listener` and a
    /// client flow (slot 0, counters 0) presenting `token`.
    #[allow(clippy::too_many_arguments)]
    fn pair(
        mode: ConnectMode,
        close: CloseMode,
        token: [u8; TOKEN_LEN],
        quota: Option<u64>,
        (request, response): (u64, u64),
        l: &(Socket, SocketAddr),
        ring: bool,
    ) -> Option<Harness> {
        let mut h = bench(2, ring)?;
        let (cc, sc) = (h.counter(0), h.counter(1));
        let client = ConnectClient::new(
            mode,
            l.1,
            None,
            DataSocketOpts::default(),
            cc,
            token,
            request,
            response,
            quota,
            close,
        );
        let server = ConnectServer::new(
            mode,
            l.0.as_raw_fd(),
            Ipv4Addr::LOCALHOST.into(),
            TOKEN,
            request,
            response,
            sc,
            false,
        );
        h.add(client);
        h.add(server);
        Some(h)
    }

    /// Measured until `at_least` transactions, then drained: both ends count
    /// the same transactions and each other's bytes, the server refused
    /// nothing, and only measured cycles were timed.
    fn cycles(mode: ConnectMode, close: CloseMode, (request, response): (u64, u64), ring: bool) {
        let l = listener();
        let Some(mut h) = pair(mode, close, TOKEN, None, (request, response), &l, ring) else {
            return;
        };
        h.run_until("measured cycles", |h| h.counts(0).transactions >= 30);
        let measured = h.counts(0).transactions;
        h.set_phase(Phase::Drain);
        h.run_until("the client done", |h| h.status(0) != &Status::Active);
        assert_eq!(h.status(0), &Status::Done);
        // The server answered before the client completed: nothing left.
        h.settle();
        let (c, s) = (h.counts(0), h.counts(1));
        assert_eq!(c.transactions, s.transactions, "{c:?} {s:?}");
        // One connection at a time: the drain finishes at most the one open.
        assert!(c.transactions - measured <= 1, "{c:?}, {measured} measured");
        let (req, resp) = match mode {
            ConnectMode::Crr => (request, response),
            ConnectMode::Cc => (0, 0),
        };
        // The token is not payload.
        assert_eq!(c.bytes_sent, c.transactions * req);
        assert_eq!(s.bytes_received, c.bytes_sent);
        assert_eq!(s.bytes_sent, s.transactions * resp);
        assert_eq!(c.bytes_received, s.bytes_sent);
        assert_eq!(h.flow(1).refused(), 0);
        assert_eq!(h.latencies(), measured);
    }

    #[test]
    fn crr_cycles_count_at_both_ends() {
        for ring in [false, true] {
            cycles(ConnectMode::Crr, CloseMode::Fin, (100, 2000), ring);
            // Larger than the flows' buffers: several calls per message.
            cycles(
                ConnectMode::Crr,
                CloseMode::Fin,
                (300 << 10, 300 << 10),
                ring,
            );
        }
    }

    #[test]
    fn crr_cycles_ending_in_a_reset_count_at_both_ends() {
        for ring in [false, true] {
            cycles(ConnectMode::Crr, CloseMode::Rst, (64, 64), ring);
        }
    }

    #[test]
    fn cc_cycles_count_at_both_ends() {
        for ring in [false, true] {
            cycles(ConnectMode::Cc, CloseMode::Fin, (1, 1), ring);
            cycles(ConnectMode::Cc, CloseMode::Rst, (1, 1), ring);
        }
    }

    #[test]
    fn a_quota_parks_the_client_after_that_many_cycles() {
        for ring in [false, true] {
            quota_parks(ring);
        }
    }

    fn quota_parks(ring: bool) {
        let l = listener();
        let Some(mut h) = pair(
            ConnectMode::Crr,
            CloseMode::Fin,
            TOKEN,
            Some(5),
            (10, 10),
            &l,
            ring,
        ) else {
            return;
        };
        h.run_until("the quota", |h| h.status(0) != &Status::Active);
        assert_eq!(h.status(0), &Status::Parked);
        assert_eq!(h.counts(0).transactions, 5);
        assert_eq!(h.quota_done(), 1);
        h.set_phase(Phase::Drain);
        h.run_until("the client done", |h| h.status(0) != &Status::Active);
        assert_eq!(h.status(0), &Status::Done);
        assert_eq!(h.counts(0).transactions, 5);
    }

    /// Open loop: one connection per scheduled transaction, never ahead of
    /// the schedule (100 at 1,000/s take at least 99 ms whatever the
    /// machine's load), each timed from its intended start and from its
    /// connect, the generator's lag recorded for each.
    #[test]
    fn open_loop_cycles_follow_the_schedule() {
        for ring in [false, true] {
            open_loop_cycles(ring);
        }
    }

    fn open_loop_cycles(ring: bool) {
        let l = listener();
        let mut p = crate::plan::TestPlan::new(crate::plan::TestKind::TcpCrr);
        p.offered_per_s = Some(1000);
        let Some(mut h) = bench(2, ring) else {
            return;
        };
        let (cc, sc) = (h.counter(0), h.counter(1));
        let client = ConnectClient::new(
            ConnectMode::Crr,
            l.1,
            None,
            DataSocketOpts::default(),
            cc,
            TOKEN,
            10,
            20,
            None,
            CloseMode::Fin,
        );
        h.add(client.open_loop(Schedule::of(&p, 0).unwrap()));
        h.add(ConnectServer::new(
            ConnectMode::Crr,
            l.0.as_raw_fd(),
            Ipv4Addr::LOCALHOST.into(),
            TOKEN,
            10,
            20,
            sc,
            false,
        ));
        let t0 = Instant::now();
        h.run_until("100 cycles", |h| h.counts(0).transactions >= 100);
        let took = t0.elapsed();
        assert!(took >= std::time::Duration::from_millis(99), "{took:?}");
        let n = h.counts(0).transactions;
        assert!(h.open.lag.count() >= n);
        let open = std::mem::replace(&mut h.open, Harness::new(0).open);
        assert_eq!(open.service.finish().count(), n);
        assert_eq!(h.latencies(), n);
    }

    #[test]
    fn a_wrong_token_is_refused() {
        for ring in [false, true] {
            wrong_token(ring);
        }
    }

    fn wrong_token(ring: bool) {
        let l = listener();
        let Some(mut h) = pair(
            ConnectMode::Crr,
            CloseMode::Fin,
            [8; TOKEN_LEN],
            None,
            (100, 100),
            &l,
            ring,
        ) else {
            return;
        };
        h.run_until("the client's error", |h| h.status(0) != &Status::Active);
        assert!(
            matches!(h.status(0), Status::Failed(_)),
            "{:?}",
            h.status(0)
        );
        h.settle();
        assert_eq!(h.flow(1).refused(), 1);
        let s = h.counts(1);
        assert_eq!((s.transactions, s.bytes_received, s.bytes_sent), (0, 0, 0));
    }

    /// tcp_cc under io_uring gives each connection's descriptor to the ring
    /// close at the end of its chain. When the connect fails, the kernel
    /// cancels that close with the rest of the chain, so the flow closes the
    /// descriptor itself: after the refused connect no socket of this
    /// process is left on the flow's own bind address.
    #[test]
    fn a_refused_tcp_cc_connect_on_uring_leaves_no_socket_open() {
        let bind: IpAddr = Ipv4Addr::new(127, 77, 3, 9).into();
        // A port nothing listens on: a listener's, closed again.
        let refused = listener().1;
        let Some(mut h) = bench(1, true) else {
            return;
        };
        let client = ConnectClient::new(
            ConnectMode::Cc,
            refused,
            Some(bind),
            DataSocketOpts::default(),
            h.counter(0),
            TOKEN,
            1,
            1,
            None,
            CloseMode::Fin,
        );
        h.add(client);
        h.run_until("the refused connect", |h| h.status(0) != &Status::Active);
        assert!(
            matches!(h.status(0), Status::Failed(e) if e.contains("refused")),
            "{:?}",
            h.status(0)
        );
        h.settle();
        let on_bind = std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<RawFd>().ok())
            .filter(|&fd| {
                // SAFETY: getsockname writes at most `len` bytes into `ss`;
                // a descriptor closed meanwhile just fails.
                let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
                let mut len = std::mem::size_of_val(&ss) as libc::socklen_t;
                let rc = unsafe { libc::getsockname(fd, (&raw mut ss).cast(), &mut len) };
                rc == 0 && ss.ss_family == libc::AF_INET as libc::sa_family_t && {
                    // SAFETY: an AF_INET address fills a sockaddr_in.
                    let sin: &libc::sockaddr_in = unsafe { &*(&raw const ss).cast() };
                    sin.sin_addr.s_addr == u32::from(Ipv4Addr::new(127, 77, 3, 9)).to_be()
                }
            })
            .count();
        assert_eq!(on_bind, 0, "sockets left open on {bind}");
    }

    /// A connection that never presents its whole token is closed after
    /// [`TOKEN_TIMEOUT`] on either driver (under io_uring its pending
    /// receive is cancelled first, so the close lets the socket go), and a
    /// well-behaved client is served all the while.
    #[test]
    fn a_silent_connection_is_closed_after_the_token_timeout() {
        for ring in [false, true] {
            silent_connection(ring);
        }
    }

    fn silent_connection(ring: bool) {
        use std::io::{Read, Write};
        let l = listener();
        let Some(mut h) = pair(
            ConnectMode::Crr,
            CloseMode::Fin,
            TOKEN,
            None,
            (10, 10),
            &l,
            ring,
        ) else {
            return;
        };
        let mut silent = std::net::TcpStream::connect(l.1).unwrap();
        let mut half = std::net::TcpStream::connect(l.1).unwrap();
        half.write_all(&TOKEN[..TOKEN_LEN / 2]).unwrap();
        let t0 = Instant::now();
        h.run_until("both refused", |h| h.flow(1).refused() == 2);
        assert!(t0.elapsed() >= TOKEN_TIMEOUT / 2, "{:?}", t0.elapsed());
        // The client kept going meanwhile, and goes on.
        let served = h.counts(0).transactions;
        assert!(served > 0);
        h.run_until("more cycles", |h| h.counts(0).transactions > served);
        // The closes (after the cancelled receives) reach the kernel.
        h.settle();
        for s in [&mut silent, &mut half] {
            s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
                .unwrap();
            let mut b = [0u8; 8];
            assert_eq!(s.read(&mut b).unwrap(), 0, "closed by the server");
        }
    }
}
