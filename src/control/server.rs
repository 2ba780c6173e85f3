//! The server end: `thrum server`, and the embedded server of `thrum run`.
//!
//! Each control connection is a session on its own thread with its own data
//! listener, token and workers; one failing session ends only itself. The
//! server takes every parameter from the client's spec (validated again
//! here), accepts data connections only from the control peer's address and
//! only with the session token, and never touches files on a client's behalf.
//! A session's own steps are `session`; its data setup is `data`; an
//! agent's run (`--agent`), which a session hands back, is `agent`.

use std::io;
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};

use super::admission::{Admission, Reservation};
use super::log::{Outcome, SessionLine, server_event};
use super::proto::{Error as ErrorMsg, ServerMsg, write_msg};
use super::session::session;
use crate::io::socket::{DataSocketOpts, listen};
use crate::plan::limits;

/// Default control port (netperf uses 12865, neper 12866, iperf3 5201).
pub const DEFAULT_PORT: u16 = 12880;
pub use super::data::{ACCEPT_TIMEOUT, TOKEN_TIMEOUT};
use super::session::SessionState;
pub use super::session::{
    DRAIN_ALLOWANCE, HELLO_TIMEOUT, PRE_SPEC_FRAME, SPEC_FRAME, SPEC_TIMEOUT, START_TIMEOUT,
    ServerConfig, after_spec_frame, session_bound,
};

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
            admission: Admission::new(
                config.limits.max_sessions,
                config.limits.max_sessions_per_client,
                Reservation::this_process(),
            ),
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
            let mut ticket = match self.admission.admit(peer.ip(), Some(&stream)) {
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
                        match session(stream, peer, &config, &mut state, &mut ticket)? {
                            Some((ctrl, run)) => {
                                super::agent::serve(ctrl, &config, &mut state, &mut ticket, run)
                            }
                            None => Ok(()),
                        }
                    }))
                    .unwrap_or_else(|_| Err(anyhow!("internal error (panic) in this session")));
                    let (how, err) = match &outcome {
                        Ok(()) => (Outcome::Ok, None),
                        Err(e) => (
                            if state.started {
                                Outcome::Failed
                            } else if state.busy {
                                Outcome::Busy
                            } else {
                                Outcome::Refused
                            },
                            Some(format!("{e:#}")),
                        ),
                    };
                    // A connect-and-close (a TCP probe) is not a session.
                    if state.unheard {
                        return;
                    }
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
        // The machine's own details, to the process that runs on it.
        cfg.provenance_to_all = true;
        // No operator to protect: the user's own process, on loopback. Only
        // what the plan itself allows applies.
        cfg.limits.max_flows = limits::MAX_FLOWS;
        cfg.limits.max_duration_ns = u64::MAX;
        cfg.limits.max_session_memory_bytes = u64::MAX;
        cfg.limits.max_memory_bytes = u64::MAX;
        cfg.limits.max_threads = u64::MAX;
        cfg.limits.max_ports = u64::MAX;
        cfg.limits.max_ports_per_client = u64::MAX;
        cfg.limits.allow_tos_any = true;
        cfg.limits.allowed_marks = super::limits::AllowedMarks::Any;
        cfg.limits.max_tx_delay_us = crate::plan::sockets::MAX_TCP_TX_DELAY_US;
        cfg.limits.max_spin_threads = u32::MAX;
        cfg.limits.max_spin_threads_per_client = u32::MAX;
        cfg.limits.max_sessions_per_client = u32::MAX;
        // A run of 100,000 flows on a loaded machine may take longer than
        // a fleet's server allows to connect them.
        cfg.limits.start_timeout = Duration::from_secs(30);
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

/// The server's session over loopback, driven by a test client that speaks
/// the typed messages: a whole tcp_stream session to its final report, and
/// the refusals a step gives.
#[cfg(test)]
mod tests {
    use std::io::Write;

    use std::net::TcpStream;
    use std::time::Duration;

    use super::EmbeddedServer;
    use crate::control::proto::{
        ClientMsg, Finish, Hello, Sample, ServerMsg, Spec, Start, Tick, encode, read_msg,
    };
    use crate::plan::{Phase, TestKind, TestPlan};
    use crate::workload::crr::TOKEN_LEN;

    fn connect(server: &EmbeddedServer) -> TcpStream {
        let s = TcpStream::connect(server.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s
    }

    fn send(s: &mut TcpStream, m: impl Into<ClientMsg>) {
        s.write_all(&encode(&m.into())).unwrap();
    }

    fn reply(s: &mut TcpStream) -> ServerMsg {
        read_msg::<ServerMsg>(s).unwrap()
    }

    fn error_of(m: ServerMsg) -> String {
        match m {
            ServerMsg::Error(e) => e.message,
            other => panic!("expected an error, got '{}'", other.kind()),
        }
    }

    /// A TCP probe (connect, then close: Kubernetes' `tcpSocket`) is told
    /// apart from a client that sent a byte, so only the probe goes
    /// unlogged; a peer that sends nothing is refused at the hello's limit.
    #[test]
    fn a_connect_and_close_is_unheard_and_a_sent_byte_is_not() {
        use crate::control::session::closed_unheard;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let at = l.local_addr().unwrap();
        drop(TcpStream::connect(at).unwrap());
        let (mut probe, _) = l.accept().unwrap();
        assert!(closed_unheard(&mut probe, Duration::from_secs(5)).unwrap());

        let mut c = TcpStream::connect(at).unwrap();
        c.write_all(&[0]).unwrap();
        drop(c);
        let (mut spoke, _) = l.accept().unwrap();
        assert!(!closed_unheard(&mut spoke, Duration::from_secs(5)).unwrap());

        let _silent = TcpStream::connect(at).unwrap();
        let (mut silent, _) = l.accept().unwrap();
        let e = closed_unheard(&mut silent, Duration::from_millis(50)).unwrap_err();
        assert!(
            e.to_string().contains("timed out waiting for 'hello'"),
            "{e}"
        );
    }

    #[test]
    fn a_tcp_stream_session_runs_to_its_final_report() {
        let server = EmbeddedServer::start().unwrap();
        let mut c = connect(&server);
        send(&mut c, Hello::ours());
        let ServerMsg::Hello(h) = reply(&mut c) else {
            panic!("no hello")
        };
        assert!(h.limits.is_some() && h.nonce.is_none());
        let mut plan = TestPlan::new(TestKind::TcpStream);
        plan.warmup_ns = 0;
        plan.duration_ns = 1_000_000_000;
        send(
            &mut c,
            Spec {
                plan: Box::new(plan),
                flows_per_listener: 0,
            },
        );
        let ServerMsg::Accepted(acc) = reply(&mut c) else {
            panic!("not accepted")
        };
        // The one data connection presents the token and flow id 0.
        let mut data = TcpStream::connect((server.addr.ip(), acc.data_port)).unwrap();
        let mut hello = (0..TOKEN_LEN)
            .map(|i| u8::from_str_radix(&acc.token[2 * i..2 * i + 2], 16).unwrap())
            .collect::<Vec<u8>>();
        hello.extend_from_slice(&0u32.to_be_bytes());
        data.write_all(&hello).unwrap();
        send(
            &mut c,
            Start {
                udp_ports: vec![],
                parts_udp_ports: vec![],
                udp_addrs: vec![],
                parts_udp_addrs: vec![],
            },
        );
        assert!(matches!(reply(&mut c), ServerMsg::Started(_)));
        send(
            &mut c,
            Tick {
                seq: 0,
                phase: Phase::Measure,
                load: None,
                due_ns: None,
            },
        );
        assert!(matches!(
            reply(&mut c),
            ServerMsg::Sample(Sample { seq: 0, .. })
        ));
        data.write_all(&[7u8; 100_000]).unwrap();
        // Our half-close is the drain the server waits for.
        data.shutdown(std::net::Shutdown::Write).unwrap();
        send(
            &mut c,
            Tick {
                seq: 1,
                phase: Phase::Drain,
                load: None,
                due_ns: None,
            },
        );
        assert!(matches!(
            reply(&mut c),
            ServerMsg::Sample(Sample { seq: 1, .. })
        ));
        send(
            &mut c,
            Finish {
                datagrams_sent: vec![],
            },
        );
        let ServerMsg::Final(f) = reply(&mut c) else {
            panic!("no final report")
        };
        let total: u64 = f.counts.iter().map(|c| c.bytes_received).sum();
        assert_eq!(total, 100_000, "the server counted every byte sent");
        assert_eq!(f.refused, 0);
        assert!(f.errors.is_empty(), "{:?}", f.errors);
    }

    #[test]
    fn a_message_out_of_turn_is_refused_by_name() {
        let server = EmbeddedServer::start().unwrap();
        let mut c = connect(&server);
        send(&mut c, Hello::ours());
        assert!(matches!(reply(&mut c), ServerMsg::Hello(_)));
        send(
            &mut c,
            Tick {
                seq: 0,
                phase: Phase::Measure,
                load: None,
                due_ns: None,
            },
        );
        assert_eq!(error_of(reply(&mut c)), "expected 'spec', got 'tick'");
    }

    #[test]
    fn another_protocol_version_is_refused_naming_both() {
        let server = EmbeddedServer::start().unwrap();
        let mut c = connect(&server);
        send(
            &mut c,
            Hello {
                protocol: 99,
                ..Hello::ours()
            },
        );
        let e = error_of(reply(&mut c));
        assert!(e.contains("speaks v2") && e.contains("speaks v99"), "{e}");
    }

    #[test]
    fn a_spec_outside_the_plan_rules_is_refused() {
        let server = EmbeddedServer::start().unwrap();
        let mut c = connect(&server);
        send(&mut c, Hello::ours());
        assert!(matches!(reply(&mut c), ServerMsg::Hello(_)));
        let mut plan = TestPlan::new(TestKind::TcpStream);
        plan.burst = 4;
        send(
            &mut c,
            Spec {
                plan: Box::new(plan),
                flows_per_listener: 0,
            },
        );
        let e = error_of(reply(&mut c));
        assert!(
            e.starts_with("invalid spec:") && e.contains("--burst"),
            "{e}"
        );
    }
}
