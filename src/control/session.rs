//! One server session, start to end: the handshake (hello, key, spec,
//! admission), the data setup, the start, the ticks answered with samples,
//! and the final report.
//!
//! Each step is a function of its own; a step that fails tells the client
//! why (an `error` message) before the session ends. The session is bound
//! in time by its spec ([`session_bound`]), whatever the client sends.

use std::io;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow, bail};

use super::admission::{Reservation, Ticket};
use super::auth::{self, NONCE_LEN, Psk};
pub use super::config::ServerConfig;
use super::data::{ClientUdp, SessionFlows, accept_flows, bind_data_port, bind_port, udp_flows};
use super::deadline::read_msg_within;
pub use super::limits::{DRAIN_ALLOWANCE, session_bound};
use super::limits::{data_ports, memory_estimate, overran, server_spinning, session_threads};
use super::proto::{
    Accepted, AgentRun, Auth, AuthOk, ClientMsg, Error as ErrorMsg, Finish, FrameError, Hello,
    Message, PartPorts, Rusage, Sample, ServerMsg, Spec, Start, Started, Tick, write_msg,
};
use super::report::Report;
use super::ticks::{TickClock, TickRate};
use crate::engine::{Engines, Side, WorkerOpts, place};
use crate::io::socket::{DataSocketOpts, listen, local_port, set_nonblocking, udp_bound};
use crate::io::spread::{
    AddrRun, MAX_LISTENERS, Walk, listeners_for, may_walk, out_of_ports, runs,
};
use crate::plan::{Phase, TestPlan, Transport};
use crate::sensors::Provenance;
use crate::sensors::window::Meter;
use crate::stats::counters::FlowCounters;
use crate::workload::CounterRef;
use crate::workload::crr::TOKEN_LEN;
use crate::workload::kinds::{Endpoint, TestDesc};

/// A connection that has proved nothing yet must send each message
/// within this: its hello (and the hello's first byte before it), its
/// answer to the challenge, and on a server without a key its spec. A
/// client sends its hello as it connects and each answer a round trip
/// after the server's message, so two seconds leave a path of several
/// hundred milliseconds' round trip room for a retransmission, while an
/// unproved connection holds its place in the pool ([`super::admission`])
/// for little longer than that.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(2);
/// A client that proved the key must send its spec within this.
pub const SPEC_TIMEOUT: Duration = Duration::from_secs(5);
/// The client must send `start` within this after `accepted` (plus a share
/// per flow: [`SessionLimits::start_timeout_for`]).
pub use super::limits::START_TIMEOUT;
/// Frames a client may send before its spec is accepted (hello, auth):
/// small, so that a connection that has proved nothing costs little memory.
pub const PRE_SPEC_FRAME: usize = 64 << 10;
/// The spec frame (a plan is well under a kilobyte).
pub const SPEC_FRAME: usize = 1 << 20;

/// The largest control frame a session needs after its spec: `start` names
/// one UDP port per flow and `finish` one datagram count per flow (at most
/// 20 digits and a comma each); ticks are tiny. Anything larger is refused
/// before it is allocated.
pub fn after_spec_frame(flows: u32) -> usize {
    4096 + 24 * flows as usize
}

/// What a session got to, for its log line.
#[derive(Default)]
pub(crate) struct SessionState {
    pub(crate) test: Option<&'static str>,
    pub(crate) started: bool,
    /// Not served for want of room: no session slot free, or evicted from
    /// the pool of unproved connections.
    pub(crate) busy: bool,
    /// The peer closed before sending a byte: a TCP probe (Kubernetes'
    /// `tcpSocket`, a load balancer's health check), not a session, so no
    /// log line.
    pub(crate) unheard: bool,
}

/// Whether the peer closed the connection before its first byte: waits up
/// to `limit` for a byte or the close, without taking the byte. A timeout
/// is refused as the hello's own read would be.
pub(super) fn closed_unheard(ctrl: &mut TcpStream, limit: Duration) -> Result<bool> {
    ctrl.set_read_timeout(Some(limit))?;
    match ctrl.peek(&mut [0u8; 1]) {
        Ok(n) => Ok(n == 0),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) =>
        {
            Err(refuse(
                ctrl,
                format!("timed out waiting for 'hello' ({limit:?})"),
            ))
        }
        // A reset before the hello is a probe's close as well.
        Err(e) if e.kind() == io::ErrorKind::ConnectionReset => Ok(true),
        Err(e) => Err(e.into()),
    }
}

pub(super) fn refuse(ctrl: &mut TcpStream, message: String) -> anyhow::Error {
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
    match read_any(ctrl, max, limit, want)? {
        ClientMsg::Spec(_) if want == Auth::KIND => Err(refuse(
            ctrl,
            "authentication required: this server needs a pre-shared key (--psk-file)".into(),
        )),
        m => T::take(m).map_err(|m| refuse(ctrl, format!("expected '{want}', got '{}'", m.kind()))),
    }
}

/// Read any message of the client's within `limit` (`want`: what is
/// awaited, for the errors), with [`read_expect`]'s refusals.
pub(super) fn read_any(
    ctrl: &mut TcpStream,
    max: usize,
    limit: Duration,
    want: &str,
) -> Result<ClientMsg> {
    read_msg_within::<ClientMsg>(ctrl, max, limit).map_err(|e| read_failed(ctrl, e, limit, want))
}

/// A failed read of `want` as the session ends on it: refused with the
/// cause when the client may still read it.
fn read_failed(ctrl: &mut TcpStream, e: FrameError, limit: Duration, want: &str) -> anyhow::Error {
    match e {
        FrameError::Timeout => refuse(ctrl, format!("timed out waiting for '{want}' ({limit:?})")),
        FrameError::Closed if want == Auth::KIND => anyhow!(
            "authentication failed: the client closed the connection without answering the challenge (no --psk-file?)"
        ),
        e @ FrameError::Malformed(_) | e @ FrameError::TooLarge(..) => refuse(ctrl, e.to_string()),
        e => anyhow!(e),
    }
}

/// What a client asked for where its spec may come.
pub(crate) enum Asked {
    /// A test: the plan as the server's end sees it, and the flows per
    /// data listener.
    Test(Box<TestPlan>, u32),
    /// An agent's run, for `super::agent` to serve (or refuse).
    Agent(AgentRun),
    /// Clock exchanges only, and then the connection closed.
    Clock,
}

/// Answer clock pings until the spec or an agent request comes (or the
/// client closes after at least one ping): at most
/// [`clocks::MAX_PINGS`](super::clocks::MAX_PINGS), each within `limit`.
fn read_request(ctrl: &mut TcpStream, limit: Duration) -> Result<Option<ClientMsg>> {
    let mut pings = 0;
    loop {
        let m = match read_msg_within::<ClientMsg>(ctrl, SPEC_FRAME, limit) {
            Err(FrameError::Closed) if pings > 0 => return Ok(None),
            Err(e) => return Err(read_failed(ctrl, e, limit, Spec::KIND)),
            Ok(m) => m,
        };
        let rx_ns = crate::clock::monotonic_ns();
        match m {
            ClientMsg::ClockPing(p) if pings < super::clocks::MAX_PINGS => {
                pings += 1;
                super::clocks::pong(ctrl, p.seq, rx_ns)?;
            }
            ClientMsg::ClockPing(_) => {
                return Err(refuse(
                    ctrl,
                    format!(
                        "more than {} clock pings on one connection",
                        super::clocks::MAX_PINGS
                    ),
                ));
            }
            m => return Ok(Some(m)),
        }
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

/// One session, start to end. Over 120 lines on purpose: it is the order
/// of the steps (each a function: `handshake`, `open_data`, `accept_data`,
/// `server_flows`, `answer_ticks`, `Report::final_of`) and the refusal or
/// clean-up each early return owes, which read best in one place. An
/// agent's run is handed back with its connection, for the server to
/// serve (`agent::serve`).
pub(crate) fn session(
    mut ctrl: TcpStream,
    peer: SocketAddr,
    config: &ServerConfig,
    state: &mut SessionState,
    ticket: &mut Ticket,
) -> Result<Option<(TcpStream, AgentRun)>> {
    // An IPv4 client of a dual-stack server shows as ::ffff:a.b.c.d. Its data
    // sockets are opened as IPv4 ones: a UDP socket of the IPv6 family sends
    // to a mapped address through udpv6_sendmsg, which hands udp_sendmsg an
    // explicit destination, so every datagram pays a route lookup instead of
    // the connected socket's cached route.
    let peer = peer.ip().to_canonical();
    ctrl.set_nodelay(true)?;
    ctrl.set_write_timeout(Some(Duration::from_secs(10)))?;

    let (plan, per_listener) = match handshake(&mut ctrl, config, state, ticket)? {
        Asked::Test(plan, per_listener) => (*plan, per_listener),
        Asked::Agent(run) => return Ok(Some((ctrl, run))),
        Asked::Clock => return Ok(None),
    };
    let mix = !plan.parts.is_empty();
    let parts = plan.part_plans();
    let frame = after_spec_frame(plan.flows);
    // Said in the final report, where the client lists the server's errors.
    let fd_warning = crate::io::fdlimit::ensure(plan.flows as u64).err();
    // Every flow holds a socket here: past the limit the session cannot
    // run, and is refused before it opens the first.
    if let Some(w) = &fd_warning
        && !crate::io::fdlimit::fits(plan.flows as u64)
    {
        return Err(refuse(
            &mut ctrl,
            format!("spec refused: --flows {}: {w} on the server", plan.flows),
        ));
    }
    let local_ip = ctrl.local_addr()?.ip().to_canonical();
    // Each part of a mix has its own data sockets (a listener, or UDP
    // sockets), built exactly as its test alone would have them.
    let mut datas = Vec::with_capacity(parts.len());
    for p in &parts {
        let opts = DataSocketOpts::from_plan(p, &p.local);
        match open_data(p, config, local_ip, peer, per_listener, &opts) {
            Ok(d) => datas.push((d, opts)),
            Err(e) => return Err(refuse(&mut ctrl, format!("{e:#}"))),
        }
    }
    let token = accept_data(&mut ctrl, &datas, local_ip, mix)?;

    // Long-lived TCP flows are accepted while the client connects them: it
    // sends `start` only once all are up, and the backlog holds 4096.
    let mut accepting = Vec::with_capacity(parts.len());
    for (p, (data, opts)) in parts.iter().zip(&datas) {
        accepting.push(if p.test.traits().transport == Transport::Tcp {
            let ls = data
                .listeners
                .iter()
                .map(|l| l.try_clone())
                .collect::<std::io::Result<Vec<_>>>()?;
            let (p, opts) = (p.clone(), opts.clone());
            Some(
                std::thread::Builder::new()
                    .name("thrum-accept".into())
                    .spawn(move || accept_flows(&ls, &p, peer, &token, &opts))?,
            )
        } else {
            None
        });
    }
    // Until `start` the session holds its data ports and proves nothing:
    // a short deadline, so that a client cannot hold them by repeating.
    let start_by = config.limits.start_timeout_for(plan.flows);
    let start: Start = read_expect(&mut ctrl, frame, start_by)?;
    if mix
        && (start.parts_udp_ports.len() != parts.len()
            || !(start.parts_udp_addrs.is_empty() || start.parts_udp_addrs.len() == parts.len()))
    {
        let m = format!(
            "the client named UDP ports for {} parts of {}",
            start.parts_udp_ports.len(),
            parts.len()
        );
        return Err(refuse(&mut ctrl, m));
    }
    let mut blocks = Vec::with_capacity(parts.len());
    let mut setup_refused = 0;
    let mut listeners = Vec::new();
    for (i, ((p, (data, _)), acc)) in parts.iter().zip(datas).zip(accepting).enumerate() {
        let test = p.test.desc();
        let transport = p.test.traits().transport;
        let (ports, addrs) = if mix {
            (
                &start.parts_udp_ports[i],
                start.parts_udp_addrs.get(i).map_or(&[][..], |a| &a[..]),
            )
        } else {
            (&start.udp_ports, &start.udp_addrs[..])
        };
        let client = ClientUdp { ports, addrs };
        let (counters, flows, refused) =
            match server_flows(test, p, data.udp, client, peer, token, acc, &data.listeners) {
                Ok(x) => x,
                Err(e) => return Err(refuse(&mut ctrl, format!("{e:#}"))),
            };
        setup_refused += refused;
        // The server keeps no schedule: its engines are never open loop. A
        // probe's replies must not wait behind its bulk parts' sends
        // either: its workers ask for a short slice (engine::sched).
        let workers = place(flows, &WorkerOpts::from_plan(&plan, Side::Server, i, p));
        blocks.push((counters, workers, false));
        // Long-lived flows are all in: close the listener, so that later
        // connections are refused by the kernel instead of waiting in its backlog.
        if transport != Transport::Tcp {
            listeners.extend(data.listeners);
        }
    }

    state.started = true;
    let mut meter = Meter::new(peer);
    // Only a client that proved the key learns more than the version
    // (docs/server.md, "Provenance"): without --psk-file anyone can ask.
    let provenance = if config.psk.is_some() || config.provenance_to_all {
        Provenance::gather(meter.interface())
    } else {
        Provenance::version_only()
    };
    let rusage0 = Rusage::process();
    let block_lens: Vec<usize> = blocks.iter().map(|b| b.0.len()).collect();
    let mut engine = Engines::start(blocks, &plan.held_parts(), Phase::Warmup, plan.driver, &[])?;
    let t0 = Instant::now();
    write_msg(
        &mut ctrl,
        &ServerMsg::from(Started {
            threads: parts.iter().map(|p| p.threads).sum(),
            drivers: engine.drivers().iter().map(|d| d.to_string()).collect(),
        }),
    )?;

    let sampled = answer_ticks(
        &mut ctrl,
        &mut engine,
        &mut meter,
        &plan,
        &block_lens,
        config,
        t0,
    );
    let client_sent = match sampled {
        Ok(sent) => sent,
        Err(e) => {
            drop(engine.join());
            return Err(e);
        }
    };
    // The client has drained; our long-lived TCP flows finish on its EOF.
    // UDP and connection-test flows have no EOF to wait for: they stop now.
    engine.set_phase(Phase::Drain);
    let deadline = Instant::now() + Duration::from_secs(2);
    let tcp_running = || {
        parts
            .iter()
            .enumerate()
            .filter(|(_, p)| p.test.traits().transport == Transport::Tcp)
            .map(|(i, _)| engine.running_of(i))
            .sum::<u32>()
    };
    while tcp_running() > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    let outs = engine.join();
    let report = Report {
        plan: &plan,
        parts: &parts,
        client_sent: &client_sent,
        refused: setup_refused,
        fd_warning,
        ipv6: local_ip.is_ipv6(),
    };
    write_msg(
        &mut ctrl,
        &ServerMsg::from(report.final_of(
            &outs,
            Rusage::process().since(&rusage0),
            meter.window(),
            provenance,
        )),
    )?;
    drop(outs);
    drop(listeners);
    Ok(None)
}

/// Hello both ways, the version check, the key, the spec checked against
/// the plan's own rules, this server's limits and its free memory and
/// threads: the plan to serve, as the server's end sees it. The
/// connection proves itself with the key, or on a server without one with
/// a spec that passes every check, and only then takes a session slot.
fn handshake(
    ctrl: &mut TcpStream,
    config: &ServerConfig,
    state: &mut SessionState,
    ticket: &mut Ticket,
) -> Result<Asked> {
    if let Err(e) = greet(ctrl, config, state) {
        return Err(or_evicted(ctrl, ticket, state, e));
    }
    let keyed = config.psk.is_some();
    if keyed {
        prove(ctrl, ticket, state)?;
    }
    let limit = if keyed { SPEC_TIMEOUT } else { HELLO_TIMEOUT };
    let asked = match read_request(ctrl, limit) {
        Ok(Some(m)) => m,
        Ok(None) => {
            state.test = Some("clock");
            return Ok(Asked::Clock);
        }
        Err(e) => return Err(or_evicted(ctrl, ticket, state, e)),
    };
    let Spec {
        plan,
        flows_per_listener,
    } = match asked {
        ClientMsg::Spec(s) => s,
        // Only a client that proved the key may ask: without one, it is
        // refused as any other message out of turn.
        // `agent::serve` refuses it unless the key was proved and the
        // server is an agent.
        ClientMsg::AgentRun(run) => return Ok(Asked::Agent(run)),
        m => {
            return Err(refuse(ctrl, format!("expected 'spec', got '{}'", m.kind())));
        }
    };
    state.test = Some(plan.test.name());
    if let Err(e) = plan.validate() {
        return Err(refuse(ctrl, format!("invalid spec: {e}")));
    }
    if let Err(e) = config.limits.check(&plan).and_then(|()| {
        let whose = "server worker threads (--threads, or --server-threads)";
        config.limits.check_spin(server_spinning(&plan), whose)
    }) {
        return Err(refuse(ctrl, format!("spec refused: {e}")));
    }
    if let Some(e) = too_many_listeners(&plan, flows_per_listener) {
        return Err(refuse(ctrl, format!("spec refused: {e}")));
    }
    if let Err(e) = config.limits.check_ports(&plan, flows_per_listener) {
        return Err(refuse(ctrl, format!("spec refused: {e}")));
    }
    if !keyed {
        prove(ctrl, ticket, state)?;
    }
    // Everything the spec makes the server allocate or bind is reserved
    // here, before the first socket or buffer.
    let want = Reservation {
        bytes: memory_estimate(&plan),
        threads: session_threads(&plan),
        ports: data_ports(&plan, flows_per_listener),
        spin: server_spinning(&plan),
    };
    let l = &config.limits;
    if let Err(e) = ticket.reserve(want, l.totals(), l.client_share()) {
        return Err(refuse(ctrl, e));
    }
    Ok(Asked::Test(Box::new(plan.for_server()), flows_per_listener))
}

/// Hello both ways, the version check and, on a server with a key, the
/// challenge answered: everything an unproved connection says.
fn greet(ctrl: &mut TcpStream, config: &ServerConfig, state: &mut SessionState) -> Result<()> {
    if closed_unheard(ctrl, HELLO_TIMEOUT)? {
        state.unheard = true;
        bail!("closed before its first byte");
    }
    let hello: Hello = read_expect(ctrl, PRE_SPEC_FRAME, HELLO_TIMEOUT)?;
    if let Some(m) = hello.mismatch("server", "the client") {
        return Err(refuse(ctrl, m));
    }
    let nonce = match &config.psk {
        Some(_) => Some(auth::nonce()?),
        None => None,
    };
    let mut ours = Hello {
        limits: Some(config.limits.stated()),
        nonce: nonce.as_ref().map(|n| auth::to_hex(n)),
        ..Hello::ours()
    };
    if config.agent {
        ours.features.push(super::features::AGENT.into());
    }
    write_msg(ctrl, &ServerMsg::from(ours))?;
    if let (Some(psk), Some(nonce)) = (&config.psk, &nonce) {
        authenticate(ctrl, psk, nonce)?;
    }
    Ok(())
}

/// The connection proved itself: its session slot, or the refusal.
fn prove(ctrl: &mut TcpStream, ticket: &mut Ticket, state: &mut SessionState) -> Result<()> {
    ticket.proved().map_err(|m| {
        state.busy = true;
        refuse(ctrl, m)
    })
}

/// `e`, unless the pool of unproved connections evicted this one (which
/// is why its read ended): then the refusal that says so.
fn or_evicted(
    ctrl: &mut TcpStream,
    ticket: &Ticket,
    state: &mut SessionState,
    e: anyhow::Error,
) -> anyhow::Error {
    match ticket.evicted() {
        Some(m) => {
            // Its peer may not read: the refusal must not hold the thread.
            let _ = ctrl.set_write_timeout(Some(Duration::from_millis(100)));
            state.unheard = false;
            state.busy = true;
            refuse(ctrl, m)
        }
        None => e,
    }
}

/// A session's data sockets before the flows: its TCP listeners, or one
/// bound UDP socket per flow.
struct DataPorts {
    listeners: Vec<socket2::Socket>,
    udp: Vec<socket2::Socket>,
}

/// A spec asking for more data listeners than a server opens.
fn too_many_listeners(plan: &TestPlan, per: u32) -> Option<String> {
    plan.part_plans()
        .iter()
        .filter(|p| p.test.traits().transport == Transport::Tcp)
        .map(|p| (p.flows, listeners_for(p.flows, per)))
        .find(|&(_, k)| k > MAX_LISTENERS)
        .map(|(flows, k)| {
            format!(
                "flows_per_listener {per} asks for {k} data listeners for {flows} flows (accepted: up to {MAX_LISTENERS}, so at least {} flows per listener)",
                flows.div_ceil(MAX_LISTENERS)
            )
        })
}

/// Open the session's data listeners (long-lived TCP tests: one per
/// `per_listener` flows; other TCP tests: one) or its UDP sockets, on
/// `--data-ports` when the server has a range. UDP sockets that find no
/// port left on the address the client reached go on to the next loopback
/// addresses, when that is loopback ([`crate::io::spread`]).
fn open_data(
    plan: &TestPlan,
    config: &ServerConfig,
    local_ip: IpAddr,
    peer: IpAddr,
    per_listener: u32,
    opts: &DataSocketOpts,
) -> Result<DataPorts> {
    crate::engine::uring_napi_refusal(plan).map_or(Ok(()), |e| Err(anyhow!(e)))?;
    let mut cursor = 0;
    let transport = plan.test.traits().transport;
    if transport == Transport::Udp {
        let mut udp = Vec::with_capacity(plan.flows as usize);
        // --data-ports names the ports a firewall lets through: running
        // out of them is the operator's error, said, not walked past.
        let mut walk = Walk::new(
            local_ip,
            config.data_ports.is_none() && may_walk(local_ip, peer),
        );
        let mut at = local_ip;
        for f in 0..plan.flows {
            let sock = walk
                .open(|ip| {
                    if ip != at {
                        (at, cursor) = (ip, 0);
                    }
                    bind_port(ip, config.data_ports, &mut cursor, |a| udp_bound(a, opts))
                })
                .map_err(|e| match config.data_ports {
                    Some((lo, hi)) if e.raw_os_error() == Some(libc::EADDRINUSE) => {
                        anyhow!("no free port left for UDP socket {f} in --data-ports {lo}-{hi}")
                    }
                    _ if out_of_ports(&e) => anyhow!(
                        "opening UDP socket {f} on {}: {e} (each UDP flow has a port of its own, from the ephemeral range; {} flows)",
                        walk.current(),
                        plan.flows
                    ),
                    _ => anyhow!("opening UDP socket {f} on {}: {e}", walk.current()),
                })?;
            udp.push(sock);
        }
        return Ok(DataPorts {
            listeners: Vec::new(),
            udp,
        });
    }
    let k = if transport == Transport::Tcp {
        listeners_for(plan.flows, per_listener)
    } else {
        1
    };
    let mut listeners = Vec::with_capacity(k as usize);
    for _ in 0..k {
        listeners.push(bind_data_port(
            local_ip,
            config.data_ports,
            &mut cursor,
            "a data listener",
            |a| {
                let backlog = plan.spreading.listen_backlog.map_or(4096, |b| b as i32);
                listen(&a, opts, backlog)
            },
        )?);
    }
    Ok(DataPorts {
        listeners,
        udp: Vec::new(),
    })
}

/// Tell the client where to connect, with a fresh random session token
/// (returned) that every data connection must present.
fn accept_data(
    ctrl: &mut TcpStream,
    datas: &[(DataPorts, DataSocketOpts)],
    local_ip: IpAddr,
    mix: bool,
) -> Result<[u8; TOKEN_LEN]> {
    let mut parts = Vec::with_capacity(datas.len());
    for (data, _) in datas {
        parts.push(PartPorts {
            data_port: match data.listeners.first() {
                Some(l) => local_port(l)?,
                None => 0,
            },
            more_data_ports: data.listeners[data.listeners.len().min(1)..]
                .iter()
                .map(local_port)
                .collect::<std::io::Result<Vec<u16>>>()?,
            udp_addrs: udp_addrs(&data.udp, local_ip)?,
            udp_ports: data
                .udp
                .iter()
                .map(local_port)
                .collect::<std::io::Result<Vec<u16>>>()?,
        });
    }
    let mut token = [0u8; TOKEN_LEN];
    getrandom::fill(&mut token).map_err(|e| anyhow!("no randomness for the session token: {e}"))?;
    let hex: String = token.iter().map(|b| format!("{b:02x}")).collect();
    let accepted = if mix {
        Accepted {
            data_port: 0,
            token: hex,
            udp_ports: Vec::new(),
            more_data_ports: Vec::new(),
            udp_addrs: Vec::new(),
            parts,
        }
    } else {
        let one = parts.pop().unwrap_or_default();
        Accepted {
            data_port: one.data_port,
            token: hex,
            udp_ports: one.udp_ports,
            more_data_ports: one.more_data_ports,
            udp_addrs: one.udp_addrs,
            parts: Vec::new(),
        }
    };
    write_msg(ctrl, &ServerMsg::from(accepted))?;
    Ok(token)
}

/// Where UDP sockets are bound, as runs; none when all are on `control`.
fn udp_addrs(socks: &[socket2::Socket], control: IpAddr) -> Result<Vec<AddrRun>> {
    let mut addrs = Vec::with_capacity(socks.len());
    for s in socks {
        let a = s
            .local_addr()?
            .as_socket()
            .ok_or_else(|| anyhow!("a UDP socket with a non-IP address"))?;
        addrs.push(a.ip().to_canonical());
    }
    let r = runs(addrs);
    Ok(if r.iter().all(|r| r.addr == control) {
        Vec::new()
    } else {
        r
    })
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
    client: ClientUdp<'_>,
    peer: IpAddr,
    token: [u8; TOKEN_LEN],
    accepting: Option<JoinHandle<Result<SessionFlows>>>,
    listeners: &[socket2::Socket],
) -> Result<SessionFlows> {
    match test.kind.traits().transport {
        Transport::Udp => udp_flows(udp, client, plan, peer),
        Transport::TcpPerTransaction => {
            let listener = listeners.first().expect("tcp tests have a listener");
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
/// returned), within the session's bound. The counters are those of the
/// moment the tick was due on our clock, not of its arrival (the control
/// connection shares a path the test may fill), except for flows that
/// stopped sending by then ([`TickClock::sample`]); `block_lens`: each
/// part's counters.
fn answer_ticks(
    ctrl: &mut TcpStream,
    engine: &mut Engines,
    meter: &mut Meter,
    plan: &TestPlan,
    block_lens: &[usize],
    config: &ServerConfig,
    t0: Instant,
) -> Result<Vec<u64>> {
    let r = answer_ticks_from(ctrl, engine, meter, plan, block_lens, config, t0);
    if r.is_err() {
        // Wake the reader thread, which holds the connection open.
        let _ = ctrl.shutdown(std::net::Shutdown::Read);
    }
    r
}

fn answer_ticks_from(
    ctrl: &mut TcpStream,
    engine: &mut Engines,
    meter: &mut Meter,
    plan: &TestPlan,
    block_lens: &[usize],
    config: &ServerConfig,
    t0: Instant,
) -> Result<Vec<u64>> {
    let frame = after_spec_frame(plan.flows);
    // Ticks come at least once per interval; allow generous slack for the drain.
    let interval = Duration::from_nanos(plan.interval_ns);
    let idle = interval + Duration::from_secs(15);
    let bound = session_bound(plan, &config.limits);
    let end_by = t0.checked_add(bound);
    let rx = super::ticks::spawn_reader(ctrl, frame, idle)?;
    // The client starts its clock on our `started`: half a round trip
    // after our engines started (the kernel's RTT from the handshake,
    // before any data could fill the path).
    let half_rtt = crate::sensors::tcp_info::TcpInfo::read(ctrl.as_raw_fd())
        .map_or(Duration::ZERO, |i| {
            Duration::from_micros(u64::from(i.min_rtt_us.unwrap_or(i.rtt_us)) / 2)
        });
    let mut clock =
        TickClock::new(interval, t0 + half_rtt).with_load(block_lens, &plan.held_parts());
    let mut next_record = Instant::now();
    let mut rate = TickRate::new(interval, next_record);
    let mut phase_now = Phase::Warmup;
    loop {
        let now = Instant::now();
        if end_by.is_some_and(|e| now >= e) {
            return Err(refuse(ctrl, overran(plan, &config.limits, bound)));
        }
        if now >= next_record {
            clock.record(now, engine.snapshot());
            next_record = now + clock.step();
        }
        let mut wait = next_record.saturating_duration_since(now);
        if let Some(e) = end_by {
            wait = wait.min(e.saturating_duration_since(now));
        }
        let m = match rx.recv_timeout(wait) {
            Ok(m) => m,
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            Err(mpsc::RecvTimeoutError::Disconnected) => bail!("client disconnected mid-test"),
        };
        match m {
            Ok(ClientMsg::Tick(tick)) => {
                if !rate.take(Instant::now()) {
                    return Err(refuse(ctrl, rate.refusal()));
                }
                // The counters now, before the tick changes anything: the
                // tick that starts a mix's bulk parts ends the idle phase,
                // and its counts are taken before our bulk receivers wake.
                // (The client's senders started before the tick went out,
                // and what they sent waits in our socket buffers; read
                // after the tick, it belongs to the loaded phase.)
                let now = Instant::now();
                let (due, mut counts) = clock.sample(now, engine.snapshot(), &tick);
                let Tick {
                    seq, phase, load, ..
                } = tick;
                // The first tick's sample is the engine's start, as the
                // client's is: with no warm-up its flows send as soon as
                // they start, before this tick, and what we counted of
                // them belongs to the first phase, not before it.
                if seq == 0 {
                    counts.fill(Default::default());
                }
                if let Some(step) = load {
                    engine.step(step, phase, seq)?;
                }
                engine.set_phase(phase);
                meter.on_tick(phase_now, phase);
                phase_now = phase;
                write_msg(
                    ctrl,
                    &ServerMsg::from(Sample {
                        seq,
                        elapsed_ns: due.saturating_duration_since(t0).as_nanos() as u64,
                        unix_ns: crate::clock::unix_now_ns()
                            .saturating_sub(now.duration_since(due).as_nanos() as u64),
                        counts,
                        part_retransmits: if plan.parts.is_empty() {
                            Vec::new()
                        } else {
                            engine.tcp_retransmits()
                        },
                        tcp_info: if crate::analysis::tcp_info::per_tick(plan) {
                            engine.tcp_infos()
                        } else {
                            Vec::new()
                        },
                        cpu: crate::sensors::cpu::CpuTotals::read(),
                        rusage: Some(Rusage::process()),
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
            Err(FrameError::Timeout) => bail!("client went silent for {idle:?}; session ended"),
            Err(FrameError::Closed) => bail!("client disconnected mid-test"),
            Err(e) => return Err(refuse(ctrl, e.to_string())),
        }
    }
}
