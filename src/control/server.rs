//! The server end: `thrum server`, and the embedded server of `thrum run`.
//!
//! Each control connection is a session on its own thread with its own data
//! listener, token and workers; one failing session ends only itself. The
//! server takes every parameter from the client's spec (validated again
//! here), accepts data connections only from the control peer's address and
//! only with the session token, and never touches files on a client's behalf.
//! A session's own steps are `session`; its data setup is `data`.

use std::io;
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};

use super::admission::{Admission, Reservation};
use super::auth::Psk;
use super::limits::SessionLimits;
use super::log::{LogFormat, Outcome, SessionLine, server_event};
use super::proto::{Error as ErrorMsg, ServerMsg, write_msg};
use super::session::session;
use crate::io::socket::{DataSocketOpts, listen};
use crate::plan::{TestPlan, limits};

/// Default control port (netperf uses 12865, neper 12866, iperf3 5201).
pub const DEFAULT_PORT: u16 = 12880;
/// A client must say hello within this.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
/// A data connection must present its token within this.
pub const TOKEN_TIMEOUT: Duration = crate::workload::crr::TOKEN_TIMEOUT;
/// All data connections of a session must arrive within this (plus 1 ms per
/// flow) after `accepted`.
pub const ACCEPT_TIMEOUT: Duration = Duration::from_secs(5);
/// The client must send `start` within this after `accepted`.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Frames a client may send before its spec is accepted (hello, auth):
/// small, so that a connection that has proved nothing costs little memory.
pub const PRE_SPEC_FRAME: usize = 64 << 10;
/// The spec frame (a plan is well under a kilobyte).
pub const SPEC_FRAME: usize = 1 << 20;
/// How long a session may run past the length its spec states: the last
/// interval's tick, the client's drain (`client::DRAIN_TIMEOUT`, 5 s), the
/// final report, and slack for a loaded machine. The same slack as the
/// control idle timeout.
pub const DRAIN_ALLOWANCE: Duration = Duration::from_secs(15);

/// The largest control frame a session needs after its spec: `start` names
/// one UDP port per flow and `finish` one datagram count per flow (at most
/// 20 digits and a comma each); ticks are tiny. Anything larger is refused
/// before it is allocated.
pub fn after_spec_frame(flows: u32) -> usize {
    4096 + 24 * flows as usize
}

/// When a running session must end whatever its client sends: its stated
/// length (warm-up + duration + cool-down; for a count-limited `-n` run, the
/// server's `--max-duration`), one interval, and [`DRAIN_ALLOWANCE`].
pub fn session_bound(plan: &TestPlan, limits: &SessionLimits) -> Duration {
    let stated = if plan.transactions.is_some() {
        limits.max_duration_ns
    } else {
        super::limits::total_duration_ns(plan)
    };
    Duration::from_nanos(stated)
        .saturating_add(Duration::from_nanos(plan.interval_ns))
        .saturating_add(DRAIN_ALLOWANCE)
}

#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    /// Data listeners bind a port from this range (inclusive) instead of an ephemeral one.
    pub data_ports: Option<(u16, u16)>,
    /// Serve one test, then exit.
    pub once: bool,
    pub limits: SessionLimits,
    /// Clients must prove this key (HMAC challenge-response) when set.
    pub psk: Option<Psk>,
    /// Log one line per session to stderr.
    pub log: bool,
    pub log_format: LogFormat,
}

impl ServerConfig {
    pub fn new(listen: SocketAddr) -> ServerConfig {
        ServerConfig {
            listen,
            data_ports: None,
            once: false,
            limits: SessionLimits::default(),
            psk: None,
            log: true,
            log_format: LogFormat::Text,
        }
    }

    pub(crate) fn emit(&self, line: SessionLine<'_>) {
        if self.log {
            line.emit(self.log_format);
        }
    }
}

/// What a session got to, for its log line.
#[derive(Default)]
pub(crate) struct SessionState {
    pub(crate) test: Option<&'static str>,
    pub(crate) started: bool,
}

/// A bound server, not yet serving.
pub struct Server {
    listener: TcpListener,
    config: Arc<ServerConfig>,
    shutdown: Arc<AtomicBool>,
    hangup: Arc<AtomicBool>,
    admission: Arc<Admission>,
}

impl Server {
    pub fn bind(mut config: ServerConfig) -> Result<Server> {
        let opts = DataSocketOpts::default();
        let sock = match listen(&config.listen, &opts, 128) {
            // `::` is the default; on a host without IPv6 fall back to IPv4's any-address.
            Err(e)
                if config.listen.ip() == IpAddr::from([0u16; 8])
                    && e.raw_os_error() == Some(libc::EAFNOSUPPORT) =>
            {
                config.listen = SocketAddr::new(IpAddr::from([0u8; 4]), config.listen.port());
                listen(&config.listen, &opts, 128)
            }
            r => r,
        }
        .with_context(|| format!("cannot listen on {} (--listen/--port)", config.listen))?;
        let listener: TcpListener = sock.into();
        listener.set_nonblocking(true)?;
        Ok(Server {
            listener,
            admission: Admission::new(config.limits.max_sessions, Reservation::this_process()),
            config: Arc::new(config),
            shutdown: Arc::new(AtomicBool::new(false)),
            hangup: Arc::new(AtomicBool::new(false)),
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Set this to make [`Server::serve`] return (signal handlers use it).
    pub fn shutdown_flag(&self) -> Arc<AtomicBool> {
        self.shutdown.clone()
    }

    /// Set this when SIGHUP arrives: the server logs it and keeps serving.
    pub fn hangup_flag(&self) -> Arc<AtomicBool> {
        self.hangup.clone()
    }

    /// Serve until the shutdown flag is set (or after one session with `once`).
    pub fn serve(self) -> Result<()> {
        let mut sessions: Vec<JoinHandle<()>> = Vec::new();
        let fd = self.listener.as_raw_fd();
        while !self.shutdown.load(Relaxed) {
            if self.config.once && !sessions.is_empty() {
                // Serve that one session to the end, then exit.
                break;
            }
            sessions.retain(|h| !h.is_finished());
            if self.hangup.swap(false, Relaxed) && self.config.log {
                server_event(
                    self.config.log_format,
                    "SIGHUP received and ignored: the server keeps serving (the key file is read at start-up; restart to change it)",
                );
            }
            let mut pfd = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut pfd, 1, 200) };
            let (stream, peer) = match self.listener.accept() {
                Ok(x) => x,
                Err(e)
                    if e.kind() == io::ErrorKind::WouldBlock
                        || e.kind() == io::ErrorKind::Interrupted =>
                {
                    continue;
                }
                Err(e) => {
                    if self.config.log {
                        server_event(self.config.log_format, &format!("accept: {e}"));
                    }
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
            };
            let _ = stream.set_nonblocking(false);
            let mut ticket = match self.admission.admit(peer.ip()) {
                Ok(t) => t,
                Err(message) => {
                    let mut s = stream;
                    // Never let a full send buffer hold up the accept loop.
                    let _ = s.set_write_timeout(Some(Duration::from_millis(100)));
                    let _ = write_msg(
                        &mut s,
                        &ServerMsg::from(ErrorMsg {
                            message: message.clone(),
                        }),
                    );
                    self.config.emit(SessionLine::new(
                        peer,
                        None,
                        Outcome::Busy,
                        Some(&message),
                        Duration::ZERO,
                    ));
                    continue;
                }
            };
            let config = self.config.clone();
            let h = std::thread::Builder::new()
                .name(format!("thrum-session-{peer}"))
                .spawn(move || {
                    let began = Instant::now();
                    let mut state = SessionState::default();
                    // A panic is this session's alone: log it as its failure.
                    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        session(stream, peer, &config, &mut state, &mut ticket)
                    }))
                    .unwrap_or_else(|_| Err(anyhow!("internal error (panic) in this session")));
                    let (how, err) = match &outcome {
                        Ok(()) => (Outcome::Ok, None),
                        Err(e) => (
                            if state.started {
                                Outcome::Failed
                            } else {
                                Outcome::Refused
                            },
                            Some(format!("{e:#}")),
                        ),
                    };
                    config.emit(SessionLine::new(
                        peer,
                        state.test,
                        how,
                        err.as_deref(),
                        began.elapsed(),
                    ));
                })?;
            sessions.push(h);
        }
        for h in sessions {
            let _ = h.join();
        }
        Ok(())
    }

    /// Serve on a background thread (the embedded server of `thrum run`).
    pub fn spawn(self) -> Result<EmbeddedServer> {
        let addr = self.local_addr()?;
        let shutdown = self.shutdown.clone();
        let handle = std::thread::Builder::new()
            .name("thrum-embedded-server".into())
            .spawn(move || self.serve())?;
        Ok(EmbeddedServer {
            addr,
            shutdown,
            handle: Some(handle),
        })
    }
}

/// A server running inside this process; stops when dropped.
pub struct EmbeddedServer {
    pub addr: SocketAddr,
    shutdown: Arc<AtomicBool>,
    handle: Option<JoinHandle<Result<()>>>,
}

impl EmbeddedServer {
    /// Start a quiet server on loopback, on an ephemeral port.
    pub fn start() -> Result<EmbeddedServer> {
        let mut cfg = ServerConfig::new(SocketAddr::from(([127, 0, 0, 1], 0)));
        cfg.log = false;
        // No operator to protect: the user's own process, on loopback. Only
        // what the plan itself allows applies.
        cfg.limits.max_flows = limits::MAX_FLOWS;
        cfg.limits.max_duration_ns = u64::MAX;
        cfg.limits.max_session_memory_bytes = u64::MAX;
        cfg.limits.max_memory_bytes = u64::MAX;
        cfg.limits.max_threads = u64::MAX;
        Server::bind(cfg)?.spawn()
    }
}

impl Drop for EmbeddedServer {
    fn drop(&mut self) {
        self.shutdown.store(true, Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
