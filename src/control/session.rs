//! One server session, start to end: the handshake (hello, key, spec,
//! admission), the data setup, the start, the ticks answered with samples,
//! and the final report.
//!
//! Each step is a function of its own; a step that fails tells the client
//! why (an `error` message) before the session ends. The session is bound
//! in time by its spec ([`session_bound`]), whatever the client sends.

use std::net::{IpAddr, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow, bail};

use super::admission::{Reservation, Ticket};
use super::auth::{self, NONCE_LEN, Psk};
use super::data::{SessionFlows, accept_flows, bind_data_port, udp_flows};
use super::deadline::read_msg_within;
use super::limits::{SessionLimits, memory_estimate, session_threads};
use super::proto::{
    Accepted, Auth, AuthOk, ClientMsg, Error as ErrorMsg, Final, Finish, FrameError, Hello,
    Message, Rusage, Sample, ServerMsg, Spec, Start, Started, Tick, write_msg,
};
use super::server::{
    HELLO_TIMEOUT, PRE_SPEC_FRAME, SPEC_FRAME, START_TIMEOUT, ServerConfig, SessionState,
    after_spec_frame, session_bound,
};
use crate::engine::{Engine, place};
use crate::io::socket::{DataSocketOpts, listen, local_port, set_nonblocking, udp_bound};
use crate::plan::Phase;
use crate::plan::TestPlan;
use crate::sensors::Provenance;
use crate::sensors::window::Meter;
use crate::stats::counters::FlowCounters;
use crate::workload::CounterRef;
use crate::workload::crr::TOKEN_LEN;
use crate::workload::kinds::{Endpoint, Loss, TestDesc, Transport};

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
        &ServerMsg::from(ErrorMsg {
            message: message.clone(),
        }),
    );
    anyhow!(message)
}

/// Read the client's message of type `T` (a frame of at most `max` bytes)
/// within `limit`; anything else ends the session with an error message to
/// the client.
fn read_expect<T: Message<ClientMsg>>(
    ctrl: &mut TcpStream,
    max: usize,
    limit: Duration,
) -> Result<T> {
    let want = T::KIND;
    match read_msg_within::<ClientMsg>(ctrl, max, limit) {
        Ok(ClientMsg::Spec(_)) if want == Auth::KIND => Err(refuse(
            ctrl,
            "authentication required: this server needs a pre-shared key (--psk-file)".into(),
        )),
        Ok(m) => {
            T::take(m).map_err(|m| refuse(ctrl, format!("expected '{want}', got '{}'", m.kind())))
        }
        Err(FrameError::Timeout) => Err(refuse(
            ctrl,
            format!("timed out waiting for '{want}' ({limit:?})"),
        )),
        Err(FrameError::Closed) if want == Auth::KIND => Err(anyhow!(
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
    let Auth { answer } = read_expect(ctrl, PRE_SPEC_FRAME, HELLO_TIMEOUT)?;
    let answer = auth::from_hex::<{ auth::MAC_LEN }>(&answer).unwrap_or([0; auth::MAC_LEN]);
    if !psk.verify(nonce, &answer) {
        return Err(refuse(
            ctrl,
            "authentication failed: wrong pre-shared key (--psk-file)".into(),
        ));
    }
    write_msg(ctrl, &ServerMsg::from(AuthOk {}))?;
    Ok(())
}

/// One session, start to end.
pub(crate) fn session(
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
    let peer = peer.ip().to_canonical();
    ctrl.set_nodelay(true)?;
    ctrl.set_write_timeout(Some(Duration::from_secs(10)))?;

    let plan = handshake(&mut ctrl, config, state, ticket)?;
    let test = plan.test.desc();
    let frame = after_spec_frame(plan.flows);
    // Said in the final report, where the client lists the server's errors.
    let fd_warning = crate::io::fdlimit::ensure(plan.flows as u64).err();
    let opts = DataSocketOpts::from_plan(&plan, &plan.local);
    let local_ip = ctrl.local_addr()?.ip().to_canonical();
    let data = match open_data(&plan, config, local_ip, &opts) {
        Ok(d) => d,
        Err(e) => return Err(refuse(&mut ctrl, format!("{e:#}"))),
    };
    let token = accept_data(&mut ctrl, &data)?;

    // Long-lived TCP flows are accepted while the client connects them: it
    // sends `start` only once all are up, and the backlog holds 4096.
    let accepting = match &data.listener {
        Some(l) if test.transport == Transport::Tcp => {
            let (l, plan, opts) = (l.try_clone()?, plan.clone(), opts.clone());
            Some(
                std::thread::Builder::new()
                    .name("thrum-accept".into())
                    .spawn(move || accept_flows(&l, &plan, peer, &token, &opts))?,
            )
        }
        _ => None,
    };
    let start: Start = read_expect(&mut ctrl, frame, START_TIMEOUT)?;
    let (counters, flows, setup_refused) = match server_flows(
        test,
        &plan,
        data.udp,
        &start,
        peer,
        token,
        accepting,
        &data.listener,
    ) {
        Ok(x) => x,
        Err(e) => return Err(refuse(&mut ctrl, format!("{e:#}"))),
    };
    // Long-lived flows are all in: close the listener, so that later
    // connections are refused by the kernel instead of waiting in its backlog.
    let listener = data.listener.filter(|_| test.transport != Transport::Tcp);

    state.started = true;
    let workers = place(flows, plan.threads as usize, &plan.local.cpu_pin);
    let mut meter = Meter::new(peer);
    let provenance = Provenance::gather(meter.interface());
    let rusage0 = Rusage::process();
    let engine = Engine::start(counters, workers, Phase::Warmup, plan.driver, &[])?;
    let t0 = Instant::now();
    write_msg(
        &mut ctrl,
        &ServerMsg::from(Started {
            threads: plan.threads,
            drivers: engine.drivers().iter().map(|d| d.to_string()).collect(),
        }),
    )?;

    let client_sent = match answer_ticks(&mut ctrl, &engine, &mut meter, &plan, config, t0) {
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
    let deadline = Instant::now() + Duration::from_secs(2);
    while test.transport == Transport::Tcp && engine.running() > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    let out = engine.join();
    let mut counts = out.counts;
    if test.loss == Loss::Datagrams && client_sent.len() == counts.len() {
        // The exact loss: what the client sent that never arrived, including
        // losses at the tail that no later datagram revealed.
        for (c, sent) in counts.iter_mut().zip(&client_sent) {
            c.lost = sent.saturating_sub(c.datagrams_received);
        }
    }
    let mut errors: Vec<String> = fd_warning.into_iter().collect();
    errors.extend(out.error);
    write_msg(
        &mut ctrl,
        &ServerMsg::from(Final {
            counts,
            rusage: Rusage::process().since(&rusage0),
            errors,
            refused: setup_refused + out.flows.iter().map(|f| f.refused()).sum::<u64>(),
            window: meter.window().map(Box::new),
            provenance: Some(Box::new(provenance)),
            tcp_retransmits: crate::engine::tcp_retransmits(&out.flows),
            zerocopy: crate::engine::zerocopy_counts(&out.flows),
        }),
    )?;
    drop(out.flows);
    drop(listener);
    Ok(())
}

/// Hello both ways, the version check, the key, the spec checked against
/// the plan's own rules, this server's limits and its free memory and
/// threads: the plan to serve, as the server's end sees it.
fn handshake(
    ctrl: &mut TcpStream,
    config: &ServerConfig,
    state: &mut SessionState,
    ticket: &mut Ticket,
) -> Result<TestPlan> {
    let hello: Hello = read_expect(ctrl, PRE_SPEC_FRAME, HELLO_TIMEOUT)?;
    if let Some(m) = hello.mismatch("server", "the client") {
        return Err(refuse(ctrl, m));
    }
    let nonce = match &config.psk {
        Some(_) => Some(auth::nonce()?),
        None => None,
    };
    write_msg(
        ctrl,
        &ServerMsg::from(Hello {
            limits: Some(config.limits.stated()),
            nonce: nonce.as_ref().map(|n| auth::to_hex(n)),
            ..Hello::ours()
        }),
    )?;
    if let (Some(psk), Some(nonce)) = (&config.psk, &nonce) {
        authenticate(ctrl, psk, nonce)?;
    }

    let Spec { plan } = read_expect(ctrl, SPEC_FRAME, HELLO_TIMEOUT)?;
    state.test = Some(plan.test.name());
    if let Err(e) = plan.validate() {
        return Err(refuse(ctrl, format!("invalid spec: {e}")));
    }
    if let Err(e) = config.limits.check(&plan) {
        return Err(refuse(ctrl, format!("spec refused: {e}")));
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
        return Err(refuse(ctrl, e));
    }
    ticket.handshake_done();
    Ok(plan.for_server())
}

/// A session's data sockets before the flows: a TCP listener, or one
/// bound UDP socket per flow.
struct DataPorts {
    listener: Option<socket2::Socket>,
    udp: Vec<socket2::Socket>,
}

/// Open the session's data listener (TCP tests) or its UDP sockets, on
/// `--data-ports` when the server has a range.
fn open_data(
    plan: &TestPlan,
    config: &ServerConfig,
    local_ip: IpAddr,
    opts: &DataSocketOpts,
) -> Result<DataPorts> {
    let mut cursor = 0;
    if plan.test.desc().transport == Transport::Udp {
        let mut udp = Vec::with_capacity(plan.flows as usize);
        for f in 0..plan.flows {
            let what = format!("UDP socket {f}");
            udp.push(bind_data_port(
                local_ip,
                config.data_ports,
                &mut cursor,
                &what,
                |a| udp_bound(a, opts),
            )?);
        }
        return Ok(DataPorts {
            listener: None,
            udp,
        });
    }
    let listener = bind_data_port(
        local_ip,
        config.data_ports,
        &mut cursor,
        "a data listener",
        |a| listen(&a, opts, 4096),
    )?;
    Ok(DataPorts {
        listener: Some(listener),
        udp: Vec::new(),
    })
}

/// Tell the client where to connect, with a fresh random session token
/// (returned) that every data connection must present.
fn accept_data(ctrl: &mut TcpStream, data: &DataPorts) -> Result<[u8; TOKEN_LEN]> {
    let data_port = match &data.listener {
        Some(l) => local_port(l)?,
        None => 0,
    };
    let udp_ports = data
        .udp
        .iter()
        .map(local_port)
        .collect::<std::io::Result<Vec<u16>>>()?;
    let mut token = [0u8; TOKEN_LEN];
    getrandom::fill(&mut token).map_err(|e| anyhow!("no randomness for the session token: {e}"))?;
    let hex: String = token.iter().map(|b| format!("{b:02x}")).collect();
    write_msg(
        ctrl,
        &ServerMsg::from(Accepted {
            data_port,
            token: hex,
            udp_ports,
        }),
    )?;
    Ok(token)
}

/// The server's flows once the client has said `start`, as the test's row
/// builds them: UDP flows connected to the client's ports, one accepting
/// flow per worker for the connection tests, or the long-lived connections
/// the accepting thread took in.
#[allow(clippy::too_many_arguments)]
fn server_flows(
    test: &TestDesc,
    plan: &TestPlan,
    udp: Vec<socket2::Socket>,
    start: &Start,
    peer: IpAddr,
    token: [u8; TOKEN_LEN],
    accepting: Option<JoinHandle<Result<SessionFlows>>>,
    listener: &Option<socket2::Socket>,
) -> Result<SessionFlows> {
    match test.transport {
        Transport::Udp => udp_flows(udp, &start.udp_ports, plan, peer),
        Transport::TcpPerTransaction => {
            let listener = listener.as_ref().expect("tcp tests have a listener");
            set_nonblocking(listener.as_raw_fd(), true)?;
            let threads = plan.threads as usize;
            let counters: Arc<[FlowCounters]> =
                (0..threads).map(|_| FlowCounters::default()).collect();
            let flows = (0..threads)
                .map(|w| {
                    let at = Endpoint::Listener {
                        fd: listener.as_raw_fd(),
                        peer,
                        token,
                        single: plan.flows == 1,
                    };
                    test.server_flow(plan, w as u32, CounterRef::new(counters.clone(), w), at)
                })
                .collect::<std::io::Result<Vec<_>>>()?;
            Ok((counters, flows, 0))
        }
        Transport::Tcp => accepting
            .expect("long-lived tcp tests are being accepted")
            .join()
            .unwrap_or_else(|_| Err(anyhow!("the accepting thread panicked"))),
    }
}

/// Answer each tick with a sample of our counters after switching to its
/// phase, until the client's `finish` (whose per-flow datagram counts are
/// returned), within the session's bound.
fn answer_ticks(
    ctrl: &mut TcpStream,
    engine: &Engine,
    meter: &mut Meter,
    plan: &TestPlan,
    config: &ServerConfig,
    t0: Instant,
) -> Result<Vec<u64>> {
    let frame = after_spec_frame(plan.flows);
    // Ticks come at least once per interval; allow generous slack for the drain.
    let idle = Duration::from_nanos(plan.interval_ns) + Duration::from_secs(15);
    let bound = session_bound(plan, &config.limits);
    let end_by = t0.checked_add(bound);
    let mut phase_now = Phase::Warmup;
    loop {
        let left = end_by.map(|e| e.saturating_duration_since(Instant::now()));
        if left.is_some_and(|l| l.is_zero()) {
            return Err(refuse(ctrl, overran(plan, &config.limits, bound)));
        }
        let wait = left.map_or(idle, |l| l.min(idle));
        match read_msg_within::<ClientMsg>(ctrl, frame, wait) {
            Ok(ClientMsg::Tick(Tick { seq, phase })) => {
                engine.set_phase(phase);
                meter.on_tick(phase_now, phase);
                phase_now = phase;
                write_msg(
                    ctrl,
                    &ServerMsg::from(Sample {
                        seq,
                        elapsed_ns: t0.elapsed().as_nanos() as u64,
                        unix_ns: crate::clock::unix_now_ns(),
                        counts: engine.snapshot(),
                    }),
                )?;
            }
            Ok(ClientMsg::Finish(Finish { datagrams_sent })) => return Ok(datagrams_sent),
            Ok(m) => {
                return Err(refuse(
                    ctrl,
                    format!("unexpected '{}' during a test", m.kind()),
                ));
            }
            Err(FrameError::Timeout) if wait < idle => {
                return Err(refuse(ctrl, overran(plan, &config.limits, bound)));
            }
            Err(FrameError::Timeout) => bail!("client went silent for {idle:?}; session ended"),
            Err(FrameError::Closed) => bail!("client disconnected mid-test"),
            Err(e) => return Err(refuse(ctrl, e.to_string())),
        }
    }
}

/// The server's session over loopback, driven by a test client that speaks
/// the typed messages: a whole tcp_stream session to its final report, and
/// the refusals a step gives.
#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;
    use crate::control::proto::{encode, read_msg};
    use crate::control::server::EmbeddedServer;
    use crate::plan::TestKind;

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
        send(&mut c, Start { udp_ports: vec![] });
        assert!(matches!(reply(&mut c), ServerMsg::Started(_)));
        send(
            &mut c,
            Tick {
                seq: 0,
                phase: Phase::Measure,
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
        assert!(e.contains("speaks v1") && e.contains("speaks v99"), "{e}");
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
            },
        );
        let e = error_of(reply(&mut c));
        assert!(
            e.starts_with("invalid spec:") && e.contains("--burst"),
            "{e}"
        );
    }
}
