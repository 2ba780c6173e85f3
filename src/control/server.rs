//! The server end: `thrum server`, and the embedded server of `thrum run`.
//!
//! Each control connection is a session on its own thread with its own data
//! listener, token and workers; one failing session ends only itself. The
//! server takes every parameter from the client's spec (validated again
//! here), accepts data connections only from the control peer's address and
//! only with the session token, and never touches files on a client's behalf.

use std::io::{self, Read};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow, bail};
use subtle::ConstantTimeEq;

use super::admission::{Admission, Reservation, Ticket};
use super::auth::{self, NONCE_LEN, Psk};
use super::deadline::read_msg_within;
use super::limits::{SessionLimits, memory_estimate, session_threads};
use super::log::{LogFormat, Outcome, SessionLine, server_event};
use super::proto::{FrameError, Msg, PROTOCOL_VERSION, Rusage, write_msg};
use crate::engine::{Engine, place};
use crate::io::socket::{
    DataSocketOpts, listen, local_port, same_host, set_nonblocking, udp_bound,
};
use crate::plan::Phase;
use crate::plan::{TestKind, TestPlan, limits};
use crate::sensors::Provenance;
use crate::sensors::window::Meter;
use crate::stats::counters::FlowCounters;
use crate::workload::crr::{ConnectMode, ConnectServer, TOKEN_LEN};
use crate::workload::rr::RrServer;
use crate::workload::stream::StreamFlow;
use crate::workload::udp::{UdpRrServer, UdpStreamReceiver};
use crate::workload::{CounterRef, Flow};

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

    fn emit(&self, line: SessionLine<'_>) {
        if self.log {
            line.emit(self.log_format);
        }
    }
}

/// What a session got to, for its log line.
#[derive(Default)]
struct SessionState {
    test: Option<&'static str>,
    started: bool,
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
                        &Msg::Error {
                            message: message.clone(),
                        },
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

fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Why a session was ended at its bound, naming the limit.
fn overran(plan: &TestPlan, limits: &SessionLimits, bound: Duration) -> String {
    let allowance = bound.as_secs_f64() - super::limits::total_duration_ns(plan) as f64 / 1e9;
    if plan.transactions.is_some() {
        format!(
            "session ended after {:.1} s: a count-limited (-n) run may last this server's --max-duration of {} s plus {allowance:.1} s for the drain",
            bound.as_secs_f64(),
            limits.max_duration_ns as f64 / 1e9
        )
    } else {
        format!(
            "session ended after {:.1} s: its spec states {} s (warm-up + duration + cool-down), and a session may outlast that by {allowance:.1} s for the drain (--max-duration bounds the stated length)",
            bound.as_secs_f64(),
            super::limits::total_duration_ns(plan) as f64 / 1e9
        )
    }
}

fn refuse(ctrl: &mut TcpStream, message: String) -> anyhow::Error {
    let _ = write_msg(
        ctrl,
        &Msg::Error {
            message: message.clone(),
        },
    );
    anyhow!(message)
}

/// Read the message `want` (of at most `max` bytes) within `limit`; anything
/// else ends the session with an error message to the client.
fn read_expect(
    ctrl: &mut TcpStream,
    want: &'static str,
    max: usize,
    limit: Duration,
) -> Result<Msg> {
    match read_msg_within(ctrl, max, limit) {
        Ok(m) if m.kind() == want => Ok(m),
        Ok(Msg::Spec { .. }) if want == "auth" => Err(refuse(
            ctrl,
            "authentication required: this server needs a pre-shared key (--psk-file)".into(),
        )),
        Ok(m) => Err(refuse(
            ctrl,
            format!("expected '{want}', got '{}'", m.kind()),
        )),
        Err(FrameError::Timeout) => Err(refuse(
            ctrl,
            format!("timed out waiting for '{want}' ({limit:?})"),
        )),
        Err(FrameError::Closed) if want == "auth" => Err(anyhow!(
            "authentication failed: the client closed the connection without answering the challenge (no --psk-file?)"
        )),
        Err(e @ FrameError::Malformed(_)) | Err(e @ FrameError::TooLarge(..)) => {
            Err(refuse(ctrl, e.to_string()))
        }
        Err(e) => Err(anyhow!(e)),
    }
}

/// The challenge-response, when the server has a key.
fn authenticate(ctrl: &mut TcpStream, psk: &Psk, nonce: &[u8; NONCE_LEN]) -> Result<()> {
    let Msg::Auth { answer } = read_expect(ctrl, "auth", PRE_SPEC_FRAME, HELLO_TIMEOUT)? else {
        unreachable!()
    };
    let answer = auth::from_hex::<{ auth::MAC_LEN }>(&answer).unwrap_or([0; auth::MAC_LEN]);
    if !psk.verify(nonce, &answer) {
        return Err(refuse(
            ctrl,
            "authentication failed: wrong pre-shared key (--psk-file)".into(),
        ));
    }
    write_msg(ctrl, &Msg::AuthOk)?;
    Ok(())
}

/// One session, start to end.
fn session(
    mut ctrl: TcpStream,
    peer: SocketAddr,
    config: &ServerConfig,
    state: &mut SessionState,
    ticket: &mut Ticket,
) -> Result<()> {
    // An IPv4 client of a dual-stack server shows as ::ffff:a.b.c.d. Its data
    // sockets are opened as IPv4 ones: a UDP socket of the IPv6 family sends
    // to a mapped address through udpv6_sendmsg, which hands udp_sendmsg an
    // explicit destination, so every datagram pays a route lookup instead of
    // the connected socket's cached route.
    let peer = SocketAddr::new(peer.ip().to_canonical(), peer.port());
    ctrl.set_nodelay(true)?;
    ctrl.set_write_timeout(Some(Duration::from_secs(10)))?;

    let Msg::Hello {
        protocol, software, ..
    } = read_expect(&mut ctrl, "hello", PRE_SPEC_FRAME, HELLO_TIMEOUT)?
    else {
        unreachable!()
    };
    if protocol != PROTOCOL_VERSION {
        return Err(refuse(
            &mut ctrl,
            format!(
                "protocol version mismatch: the server speaks v{PROTOCOL_VERSION}, the client ({}) speaks v{protocol}",
                crate::text::echo(&software)
            ),
        ));
    }
    let nonce = match &config.psk {
        Some(_) => Some(auth::nonce()?),
        None => None,
    };
    write_msg(
        &mut ctrl,
        &Msg::Hello {
            protocol: PROTOCOL_VERSION,
            software: format!("thrum {}", env!("CARGO_PKG_VERSION")),
            limits: Some(config.limits.stated()),
            nonce: nonce.as_ref().map(|n| auth::to_hex(n)),
        },
    )?;
    if let (Some(psk), Some(nonce)) = (&config.psk, &nonce) {
        authenticate(&mut ctrl, psk, nonce)?;
    }

    let Msg::Spec { plan } = read_expect(&mut ctrl, "spec", SPEC_FRAME, HELLO_TIMEOUT)? else {
        unreachable!()
    };
    state.test = Some(plan.test.name());
    if let Err(e) = plan.validate() {
        return Err(refuse(&mut ctrl, format!("invalid spec: {e}")));
    }
    if let Err(e) = config.limits.check(&plan) {
        return Err(refuse(&mut ctrl, format!("spec refused: {e}")));
    }
    let want = Reservation {
        bytes: memory_estimate(&plan),
        threads: session_threads(&plan),
    };
    let max = Reservation {
        bytes: config.limits.max_memory_bytes,
        threads: config.limits.max_threads,
    };
    if let Err(e) = ticket.reserve(want, max) {
        return Err(refuse(&mut ctrl, e));
    }
    ticket.handshake_done();
    let plan = plan.for_server();
    let frame = after_spec_frame(plan.flows);
    // Said in the final report, where the client lists the server's errors.
    let fd_warning = crate::io::fdlimit::ensure(plan.flows as u64).err();
    let opts = DataSocketOpts::from_plan(&plan, &plan.local);
    let local_ip = ctrl.local_addr()?.ip().to_canonical();
    // TCP tests get a data listener; UDP tests one socket per flow.
    let mut udp_socks = Vec::new();
    let mut cursor = 0;
    let mut listener = if plan.test.is_udp() {
        for f in 0..plan.flows {
            let what = format!("UDP socket {f}");
            match bind_data_port(local_ip, config.data_ports, &mut cursor, &what, |a| {
                udp_bound(a, &opts)
            }) {
                Ok(s) => udp_socks.push(s),
                Err(e) => return Err(refuse(&mut ctrl, format!("{e:#}"))),
            }
        }
        None
    } else {
        let bind = |a| listen(&a, &opts, 4096);
        match bind_data_port(
            local_ip,
            config.data_ports,
            &mut cursor,
            "a data listener",
            bind,
        ) {
            Ok(l) => Some(l),
            Err(e) => return Err(refuse(&mut ctrl, format!("{e:#}"))),
        }
    };
    let data_port = match &listener {
        Some(l) => local_port(l)?,
        None => 0,
    };
    let udp_ports = udp_socks
        .iter()
        .map(local_port)
        .collect::<io::Result<Vec<u16>>>()?;
    let mut token = [0u8; TOKEN_LEN];
    getrandom::fill(&mut token).map_err(|e| anyhow!("no randomness for the session token: {e}"))?;
    let hex: String = token.iter().map(|b| format!("{b:02x}")).collect();
    write_msg(
        &mut ctrl,
        &Msg::Accepted {
            data_port,
            token: hex,
            udp_ports,
        },
    )?;

    // Long-lived TCP flows are accepted while the client connects them: it
    // sends `start` only once all are up, and the backlog holds 4096.
    let mut accepting = match &listener {
        Some(l) if !plan.test.is_connect() => {
            let (l, plan, opts, peer) = (l.try_clone()?, plan.clone(), opts.clone(), peer.ip());
            Some(
                std::thread::Builder::new()
                    .name("thrum-accept".into())
                    .spawn(move || accept_flows(&l, &plan, peer, &token, &opts))?,
            )
        }
        _ => None,
    };
    let Msg::Start {
        udp_ports: client_ports,
    } = read_expect(&mut ctrl, "start", frame, START_TIMEOUT)?
    else {
        unreachable!()
    };

    let threads = plan.threads as usize;
    let (counters, flows, setup_refused): SessionFlows = if plan.test.is_udp() {
        match udp_flows(udp_socks, &client_ports, &plan, peer.ip()) {
            Ok(x) => x,
            Err(e) => return Err(refuse(&mut ctrl, format!("{e:#}"))),
        }
    } else if plan.test.is_connect() {
        let listener = listener.as_ref().expect("tcp tests have a listener");
        set_nonblocking(listener.as_raw_fd(), true)?;
        let counters: Arc<[FlowCounters]> = (0..threads).map(|_| FlowCounters::default()).collect();
        let mode = if plan.test == TestKind::TcpCrr {
            ConnectMode::Crr
        } else {
            ConnectMode::Cc
        };
        let flows = (0..threads)
            .map(|w| {
                Box::new(ConnectServer::new(
                    mode,
                    listener.as_raw_fd(),
                    peer.ip(),
                    token,
                    plan.request_bytes,
                    plan.response_bytes,
                    CounterRef::new(counters.clone(), w),
                    plan.flows == 1,
                )) as Box<dyn Flow>
            })
            .collect();
        (counters, flows, 0)
    } else {
        let accepted = accepting
            .take()
            .expect("long-lived tcp tests are being accepted")
            .join()
            .unwrap_or_else(|_| Err(anyhow!("the accepting thread panicked")));
        // Every flow is in: close the listener, so that later connections
        // are refused by the kernel instead of waiting in its backlog.
        listener = None;
        match accepted {
            Ok(x) => x,
            Err(e) => return Err(refuse(&mut ctrl, format!("{e:#}"))),
        }
    };

    state.started = true;
    let workers = place(flows, threads, &plan.local.cpu_pin);
    let mut meter = Meter::new(peer.ip());
    let provenance = Provenance::gather(meter.interface());
    let rusage0 = Rusage::read().unwrap_or_default();
    let engine = Engine::start(counters, workers, Phase::Warmup, plan.driver, &[])?;
    let t0 = Instant::now();
    write_msg(
        &mut ctrl,
        &Msg::Started {
            threads: plan.threads,
            drivers: engine.drivers().iter().map(|d| d.to_string()).collect(),
        },
    )?;

    // Ticks come at least once per interval; allow generous slack for the drain.
    let idle = Duration::from_nanos(plan.interval_ns) + Duration::from_secs(15);
    let bound = session_bound(&plan, &config.limits);
    let end_by = t0.checked_add(bound);
    let mut phase_now = Phase::Warmup;
    let result = (|| -> Result<Vec<u64>> {
        loop {
            let left = end_by.map(|e| e.saturating_duration_since(Instant::now()));
            if left.is_some_and(|l| l.is_zero()) {
                return Err(refuse(&mut ctrl, overran(&plan, &config.limits, bound)));
            }
            let wait = left.map_or(idle, |l| l.min(idle));
            match read_msg_within(&ctrl, frame, wait) {
                Ok(Msg::Tick { seq, phase }) => {
                    engine.set_phase(phase);
                    meter.on_tick(phase_now, phase);
                    phase_now = phase;
                    write_msg(
                        &mut ctrl,
                        &Msg::Sample {
                            seq,
                            elapsed_ns: t0.elapsed().as_nanos() as u64,
                            unix_ns: unix_ns(),
                            counts: engine.snapshot(),
                        },
                    )?;
                }
                Ok(Msg::Finish { datagrams_sent }) => return Ok(datagrams_sent),
                Ok(m) => {
                    return Err(refuse(
                        &mut ctrl,
                        format!("unexpected '{}' during a test", m.kind()),
                    ));
                }
                Err(FrameError::Timeout) if wait < idle => {
                    return Err(refuse(&mut ctrl, overran(&plan, &config.limits, bound)));
                }
                Err(FrameError::Timeout) => bail!("client went silent for {idle:?}; session ended"),
                Err(FrameError::Closed) => bail!("client disconnected mid-test"),
                Err(e) => return Err(refuse(&mut ctrl, e.to_string())),
            }
        }
    })();
    let client_sent = match result {
        Ok(sent) => sent,
        Err(e) => {
            let out = engine.join();
            drop(out.flows);
            return Err(e);
        }
    };
    // The client has drained; our long-lived TCP flows finish on its EOF.
    // UDP and connection-test flows have no EOF to wait for: they stop now.
    engine.set_phase(Phase::Drain);
    let waits_for_eof = !plan.test.is_connect() && !plan.test.is_udp();
    let deadline = Instant::now() + Duration::from_secs(2);
    while waits_for_eof && engine.running() > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    let out = engine.join();
    let mut counts = out.counts;
    if plan.test == TestKind::UdpStream && client_sent.len() == counts.len() {
        // The exact loss: what the client sent that never arrived, including
        // losses at the tail that no later datagram revealed.
        for (c, sent) in counts.iter_mut().zip(&client_sent) {
            c.lost = sent.saturating_sub(c.datagrams_received);
        }
    }
    let refused = setup_refused + out.flows.iter().map(|f| f.refused()).sum::<u64>();
    let tcp_retransmits = crate::engine::tcp_retransmits(&out.flows);
    let zerocopy = crate::engine::zerocopy_counts(&out.flows);
    let mut errors: Vec<String> = fd_warning.into_iter().collect();
    if let Some(e) = out.error {
        errors.push(e);
    }
    write_msg(
        &mut ctrl,
        &Msg::Final {
            counts,
            rusage: Rusage::read().unwrap_or_default().since(&rusage0),
            errors,
            refused,
            window: meter.window().map(Box::new),
            provenance: Some(Box::new(provenance)),
            tcp_retransmits,
            zerocopy,
        },
    )?;
    drop(out.flows);
    drop(listener);
    Ok(())
}

/// Connect each flow's UDP socket to the client's socket for that flow, on
/// the control peer's address only, and build the server's UDP flows.
fn udp_flows(
    socks: Vec<socket2::Socket>,
    client_ports: &[u16],
    plan: &TestPlan,
    peer: IpAddr,
) -> Result<SessionFlows> {
    if client_ports.len() != socks.len() {
        bail!(
            "the client named {} UDP ports for {} flows",
            client_ports.len(),
            socks.len()
        );
    }
    let counters: Arc<[FlowCounters]> = (0..socks.len()).map(|_| FlowCounters::default()).collect();
    let mut flows: Vec<Box<dyn Flow>> = Vec::with_capacity(socks.len());
    let mut refused = 0;
    for (f, (sock, &port)) in socks.into_iter().zip(client_ports).enumerate() {
        if port == 0 {
            bail!("the client named UDP port 0 for flow {f}");
        }
        sock.connect(&SocketAddr::new(peer, port).into())
            .with_context(|| format!("connecting UDP flow {f} to the client"))?;
        // connect() filters what arrives from now on; what anyone sent to
        // the port since it was bound at `accepted` is still queued.
        refused += drain_queued(&sock);
        let ctr = CounterRef::new(counters.clone(), f);
        flows.push(if plan.test == TestKind::UdpStream {
            let r = UdpStreamReceiver::new(sock, ctr, f as u32, plan.send_bytes as usize);
            Box::new(if plan.gso { r.with_gro()? } else { r })
        } else {
            Box::new(UdpRrServer::new(
                sock,
                ctr,
                plan.request_bytes,
                plan.response_bytes,
                plan.burst,
            ))
        });
    }
    Ok((counters, flows, refused))
}

/// Discard every datagram queued on `sock`; how many there were.
fn drain_queued(sock: &socket2::Socket) -> u64 {
    let mut n = 0;
    let mut byte = 0u8;
    loop {
        // SAFETY: a one-byte buffer we own; MSG_TRUNC discards the rest of
        // the datagram.
        let r = unsafe {
            libc::recv(
                sock.as_raw_fd(),
                (&raw mut byte).cast(),
                1,
                libc::MSG_DONTWAIT | libc::MSG_TRUNC,
            )
        };
        if r < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return n;
        }
        n += 1;
    }
}

/// A session's counter block, the flows that count into it, and how many
/// connections or datagrams were refused while setting them up (a foreign
/// address, a wrong or missing token, datagrams queued before `start`).
type SessionFlows = (Arc<[FlowCounters]>, Vec<Box<dyn Flow>>, u64);

/// Bind with `bind` on an ephemeral port, or, with --data-ports, on the first
/// free port of the range at or after `*cursor` (which then moves past it).
fn bind_data_port<T>(
    ip: IpAddr,
    range: Option<(u16, u16)>,
    cursor: &mut u16,
    what: &str,
    bind: impl Fn(SocketAddr) -> io::Result<T>,
) -> Result<T> {
    let Some((lo, hi)) = range else {
        return bind(SocketAddr::new(ip, 0)).with_context(|| format!("opening {what}"));
    };
    for port in (*cursor).max(lo)..=hi {
        if let Ok(s) = bind(SocketAddr::new(ip, port)) {
            *cursor = port.saturating_add(1);
            return Ok(s);
        }
    }
    bail!("no free port left for {what} in --data-ports {lo}-{hi}")
}

/// A data connection that has yet to present its token and flow id.
struct Pending {
    sock: socket2::Socket,
    hello: [u8; TOKEN_LEN + 4],
    got: usize,
    deadline: Instant,
    /// It has sent its token and id, or closed, or failed.
    done: bool,
}

/// Accept the session's long-lived data connections; each presents the
/// token and its flow id within [`TOKEN_TIMEOUT`] of its own accept. Tokens
/// are read from every pending connection at once (one poll over the
/// listener and all of them), so silent connections cost the real flows no
/// time. Every connection dropped (a foreign address, a wrong or missing
/// token, a bad or repeated flow id, still silent when the last flow is in)
/// is counted as refused.
fn accept_flows(
    listener: &socket2::Socket,
    plan: &TestPlan,
    peer: IpAddr,
    token: &[u8; TOKEN_LEN],
    opts: &DataSocketOpts,
) -> Result<SessionFlows> {
    let n = plan.flows as usize;
    let counters: Arc<[FlowCounters]> = (0..n).map(|_| FlowCounters::default()).collect();
    let mut slots: Vec<Option<Box<dyn Flow>>> = (0..n).map(|_| None).collect();
    let mut have = 0;
    let mut refused = 0u64;
    // Connections still owing their token, bounded so that a flood costs
    // at most this many descriptors; more are refused at once.
    let max_pending = n.max(64) * 2;
    let mut pending: Vec<Pending> = Vec::new();
    let mut pfds: Vec<libc::pollfd> = Vec::new();
    // 10,000 flows take a while to connect even in parallel: 1 ms per flow more.
    let limit = ACCEPT_TIMEOUT + Duration::from_millis(n as u64);
    let deadline = Instant::now() + limit;
    set_nonblocking(listener.as_raw_fd(), true)?;
    while have < n {
        let now = Instant::now();
        if now >= deadline {
            bail!("only {have} of {n} data connections arrived within {limit:?}");
        }
        let before = pending.len();
        pending.retain(|p| p.deadline > now);
        refused += (before - pending.len()) as u64;
        let next = pending
            .iter()
            .map(|p| p.deadline)
            .fold(deadline, Instant::min);
        let wait_ms = next.saturating_duration_since(now).as_millis().clamp(1, 50) as i32;
        pfds.clear();
        pfds.push(libc::pollfd {
            fd: listener.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        });
        pfds.extend(pending.iter().map(|p| libc::pollfd {
            fd: p.sock.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }));
        // SAFETY: `pfds` is a valid array of pollfds of that length.
        unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, wait_ms) };
        // Read from those that are ready; one that has said all it will
        // (its token and id, EOF or an error) is done.
        for (p, pfd) in pending.iter_mut().zip(&pfds[1..]) {
            if pfd.revents == 0 {
                continue;
            }
            match (&p.sock).read(&mut p.hello[p.got..]) {
                Ok(0) => p.done = true,
                Ok(got) => {
                    p.got += got;
                    p.done = p.got == p.hello.len();
                }
                Err(e)
                    if e.kind() == io::ErrorKind::WouldBlock
                        || e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => p.done = true,
            }
        }
        let mut i = 0;
        while i < pending.len() {
            if !pending[i].done {
                i += 1;
                continue;
            }
            let p = pending.swap_remove(i);
            let id = u32::from_be_bytes(p.hello[TOKEN_LEN..].try_into().expect("4 bytes")) as usize;
            if p.got < p.hello.len()
                || !bool::from(p.hello[..TOKEN_LEN].ct_eq(token))
                || id >= n
                || slots[id].is_some()
            {
                refused += 1;
                continue;
            }
            slots[id] = Some(data_flow(
                p.sock,
                plan,
                opts,
                CounterRef::new(counters.clone(), id),
            )?);
            have += 1;
        }
        // Then take every connection waiting in the backlog.
        loop {
            let (sock, addr) = match listener.accept() {
                Ok(x) => x,
                Err(e)
                    if e.kind() == io::ErrorKind::WouldBlock
                        || e.kind() == io::ErrorKind::Interrupted =>
                {
                    break;
                }
                Err(e) => return Err(e).context("accepting data connections"),
            };
            let from = addr.as_socket().map(|a| a.ip());
            if !from.is_some_and(|ip| same_host(ip, peer)) || pending.len() >= max_pending {
                refused += 1;
                continue;
            }
            sock.set_nonblocking(true)?;
            pending.push(Pending {
                sock,
                hello: [0; TOKEN_LEN + 4],
                got: 0,
                deadline: Instant::now() + TOKEN_TIMEOUT,
                done: false,
            });
        }
    }
    // Every flow is in: what has not presented its token by now never will
    // be used.
    refused += pending.len() as u64;
    Ok((
        counters,
        slots
            .into_iter()
            .map(|s| s.expect("every slot filled"))
            .collect(),
        refused,
    ))
}

/// The server's flow on an accepted long-lived data connection.
fn data_flow(
    sock: socket2::Socket,
    plan: &TestPlan,
    opts: &DataSocketOpts,
    ctr: CounterRef,
) -> Result<Box<dyn Flow>> {
    opts.apply_connected(&sock)?;
    sock.set_nonblocking(true)?;
    Ok(match plan.test {
        TestKind::TcpRr => Box::new(RrServer::new(
            sock,
            ctr,
            plan.request_bytes,
            plan.response_bytes,
            plan.burst,
        )),
        _ => {
            let (sends, receives) = match plan.test {
                TestKind::TcpStream => (false, true),
                TestKind::TcpMaerts => (true, false),
                _ => (true, true),
            };
            let f = StreamFlow::new(
                sock,
                ctr,
                sends,
                receives,
                if sends { plan.send_bytes as usize } else { 0 },
                if receives {
                    plan.recv_bytes as usize
                } else {
                    0
                },
                false,
            );
            Box::new(if plan.zerocopy { f.with_zerocopy()? } else { f })
        }
    })
}
