//! tcp_crr and tcp_cc: the client, one connection per transaction, under
//! a readiness driver (blocking or epoll); `uring` is the same client as
//! io_uring operations. The module above says what the exchange is.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use socket2::{SockAddr, Socket};

use super::{ConnectMode, MAX_RECV_BUFFER, TOKEN_LEN};
use crate::io::socket::{DataSocketOpts, poll_one, recv, send, tcp_socket, would_block};
use crate::io::{Driver, Event, RecvBuffers};
use crate::plan::{CloseMode, Phase};
use crate::workload::open_loop::OpenLoop;
use crate::workload::{
    CounterRef, Flow, FlowCtx, KICK, OPS_PER_CALL, Progress, early_eof, sub_token, token,
};

mod uring;

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
    /// Open loop: the generator, and the intended start of the transaction
    /// on the open connection.
    open_loop: Option<OpenLoop>,
    meant: Instant,
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
            open_loop: None,
            meant: Instant::now(),
            ring: false,
            ring_fd: -1,
        }
    }

    /// Run open-loop on `open_loop`: a connection per scheduled
    /// transaction, one open at a time.
    pub fn open_loop(mut self, open_loop: OpenLoop) -> ConnectClient {
        self.open_loop = Some(open_loop);
        self
    }

    /// Open loop: the next transaction's intended start if it has not come
    /// yet (wait for it); else take it, recording how late it is taken.
    fn due(&mut self, ctx: &mut FlowCtx<'_>) -> Option<Instant> {
        let g = self.open_loop.as_mut()?;
        let now = Instant::now();
        if let Some(next) = g.wait(now) {
            return Some(next);
        }
        self.meant = g.take(
            now,
            ctx.phase_now(),
            ctx.open.as_deref_mut(),
            &self.counters,
        );
        None
    }

    /// No connection is open: may the next one open now? None: open it
    /// (open loop, its transaction is taken from the schedule). Else what
    /// to tell the engine: done in the drain, parked once the quota is met
    /// (reported once), or the next intended start to wait for. Both
    /// drivers' state machines take this step.
    fn next_connection(&mut self, ctx: &mut FlowCtx<'_>) -> Option<Progress> {
        let phase = ctx.phase_now();
        if !self.may_open(phase) {
            if phase == Phase::Drain {
                return Some(Progress::Done);
            }
            if !self.quota_reported {
                self.quota_reported = true;
                ctx.quota_done.fetch_add(1, Relaxed);
            }
            return Some(Progress::Parked);
        }
        self.due(ctx).map(Progress::At)
    }

    fn may_open(&self, phase: Phase) -> bool {
        phase < Phase::Drain && self.quota.is_none_or(|q| self.done_in_measure < q)
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

    /// The transaction on the open connection is over (its response, or
    /// tcp_cc's FIN, came): count it, and time it if it was measured.
    fn complete(&mut self, ctx: &mut FlowCtx<'_>) {
        self.counters.add_transactions(1);
        let measuring = ctx.phase_now() == Phase::Measure;
        if let Some(g) = &mut self.open_loop {
            // One clock reading ends it in the system and times it.
            let now = Instant::now();
            g.completed(1, now, &self.counters);
            if measuring {
                // Response time from the intended start; service time from connect.
                OpenLoop::record(ctx, self.meant, self.started, now);
                self.done_in_measure += 1;
            }
        } else if measuring {
            let now = Instant::now();
            ctx.hist
                .record(now.duration_since(self.started).as_nanos() as u64);
            self.done_in_measure += 1;
        }
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
        if let Some(g) = &mut self.open_loop {
            g.begin(Instant::now());
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
            return Ok(match (&self.open_loop, self.state) {
                (Some(g), State::Closed) => Progress::At(g.next()),
                _ => Progress::Idle,
            });
        }
        for _ in 0..OPS_PER_CALL {
            match self.state {
                State::Closed => {
                    if let Some(p) = self.next_connection(ctx) {
                        return Ok(p);
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
                                return Err(early_eof("the server"));
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
        self.open_loop.is_none()
    }

    fn recv_buffers(&self) -> Option<RecvBuffers> {
        Some(RecvBuffers {
            size: (self.response as usize).clamp(64, MAX_RECV_BUFFER),
            count: CLIENT_RECV_BUFFERS,
        })
    }
}
