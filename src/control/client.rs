//! The client end of a session: drives one test against one server.
//!
//! The client owns the clock. At every interval boundary and phase change it
//! snapshots its own counters, switches its workers' phase and sends a tick;
//! the server does the same on receipt and answers with a sample. Intervals
//! therefore line up on both ends to within one control-message delay, and
//! none straddles a phase. At the end both ends drain (stop generating,
//! half-close, read to EOF), so the final totals of the two ends agree.
//!
//! [`run`] always returns a [`TestResult`]: on failure it carries the error
//! and every sample gathered so far.

use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow, bail};

use super::analysis::{Gathered, LocalSample, RemoteSample, assemble, interval};
use super::auth::{self, NONCE_LEN, Psk};
use super::deadline::read_msg_within;
use super::proto::{FrameError, MAX_FRAME, Msg, PROTOCOL_VERSION, Rusage, read_msg, write_msg};
use super::repeat::Repeat;
use crate::engine::{Engine, place};
use crate::io::connect::connect_many;
use crate::io::socket::{DataSocketOpts, connect, local_port, path_mtu, udp_connected};
use crate::plan::Phase;
use crate::plan::{TestKind, TestPlan};
use crate::result::{Environment, Interval, TestResult};
use crate::sensors::Provenance;
use crate::sensors::window::{Meter, on_hypervisor};
use crate::stats::counters::{Counts, FlowCounters};
use crate::text;
use crate::workload::crr::{ConnectClient, ConnectMode, TOKEN_LEN};
use crate::workload::rr::RrClient;
use crate::workload::stream::StreamFlow;
use crate::workload::udp::{UdpRrClient, UdpStreamSender};
use crate::workload::{CounterRef, Flow};

/// How long connecting to a server may take before it counts as unreachable.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long the ends may take to drain after the last phase.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);
/// How long UDP datagrams in flight get to land before the server stops counting.
pub const UDP_SETTLE: Duration = Duration::from_millis(100);
/// How long the server may take to answer a control message.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the server may take to answer a tick with its sample. The server
/// answers at once, so silence this long means the path or the server is
/// gone (a deleted link, a dead host): the test ends with an error, within
/// one interval plus this of the fault, instead of waiting on TCP's
/// retransmission timers for minutes.
pub const SAMPLE_TIMEOUT: Duration = Duration::from_secs(3);

/// Where the server is.
#[derive(Clone, Debug)]
pub struct Target {
    pub addr: SocketAddr,
    /// As the user wrote it, for messages and the result.
    pub label: String,
    pub bind: Option<IpAddr>,
    pub embedded: bool,
    /// Prove this key to the server (`--psk-file`); the server must ask for it.
    pub psk: Option<Psk>,
}

/// Told about each interval as it completes, that is when the server's sample
/// for its end has arrived (progress lines, streaming output). An interval
/// whose server sample never arrives is only in the final result.
pub trait Observer {
    fn on_interval(&mut self, _iv: &Interval) {}
}

/// An observer that ignores everything.
pub struct Quiet;
impl Observer for Quiet {}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The longest a test can take by its plan: warm-up, measurement (for a
/// count-limited run, an hour), cool-down and a minute for the rest.
fn plan_wall_s(plan: &TestPlan) -> f64 {
    let measure = if plan.transactions.is_some() {
        3600e9
    } else {
        plan.duration_ns as f64
    };
    (plan.warmup_ns as f64 + measure + plan.cooldown_ns as f64) / 1e9 + 60.0
}

/// Run one test. Never fails: errors land in `summary.error`.
pub fn run(target: &Target, plan: &TestPlan, observer: &mut dyn Observer) -> TestResult {
    let mut r = run_once(target, plan, observer);
    r.iterations = vec![crate::result::Iteration::of(1, &r)];
    r
}

fn run_once(target: &Target, plan: &TestPlan, observer: &mut dyn Observer) -> TestResult {
    let mut g = Gathered::new(
        Environment::gather(),
        if target.embedded {
            "embedded".into()
        } else {
            target.label.clone()
        },
        target.embedded,
        target.bind.map(|b| b.to_string()),
        on_hypervisor(),
    );
    let error = drive(target, plan, &mut g, observer)
        .err()
        .map(|e| format!("{e:#}"));
    assemble(plan, g, error)
}

fn expect_reply(ctrl: &mut TcpStream, want: &'static str, server: &str) -> Result<Msg> {
    // The whole reply within the timeout: a server trickling bytes cannot hold us.
    match read_msg_within(ctrl, MAX_FRAME, REPLY_TIMEOUT) {
        Ok(Msg::Error { message }) => bail!("server {server} refused: {}", text::message(&message)),
        Ok(m) if m.kind() == want => Ok(m),
        Ok(m) => bail!(
            "server {server} sent '{}' where '{want}' was expected",
            m.kind()
        ),
        Err(FrameError::Timeout) => {
            bail!("server {server} did not answer within {REPLY_TIMEOUT:?} (waiting for '{want}')")
        }
        Err(e) => Err(anyhow!(e)).with_context(|| format!("waiting for '{want}' from {server}")),
    }
}

fn parse_token(hex: &str) -> Result<[u8; TOKEN_LEN]> {
    let mut t = [0u8; TOKEN_LEN];
    if hex.len() != TOKEN_LEN * 2 {
        bail!("server sent a session token of the wrong length");
    }
    for (i, b) in t.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16)
            .context("server sent a malformed session token")?;
    }
    Ok(t)
}

fn connect_control(target: &Target) -> Result<TcpStream> {
    let opts = DataSocketOpts::default();
    let s = connect(&target.addr, target.bind, &opts, CONNECT_TIMEOUT).with_context(|| {
        format!(
            "cannot reach the thrum server at {} (is `thrum server` running there?)",
            target.label
        )
    })?;
    let s: TcpStream = s.into();
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(REPLY_TIMEOUT))?;
    s.set_write_timeout(Some(REPLY_TIMEOUT))?;
    Ok(s)
}

/// Answer the server's challenge, or refuse a server that does not ask for
/// the key we hold (it could be anyone's server).
fn authenticate(ctrl: &mut TcpStream, target: &Target, nonce: Option<&str>) -> Result<()> {
    let label = target.label.as_str();
    match (&target.psk, nonce) {
        (None, None) => Ok(()),
        (None, Some(_)) => bail!(
            "authentication failed: the server at {label} requires a pre-shared key (--psk-file)"
        ),
        (Some(_), None) => bail!(
            "authentication failed: --psk-file was given but the server at {label} does not ask for a key; not running unauthenticated"
        ),
        (Some(psk), Some(nonce)) => {
            let nonce = auth::from_hex::<NONCE_LEN>(nonce)
                .with_context(|| format!("the server at {label} sent a malformed nonce"))?;
            write_msg(
                ctrl,
                &Msg::Auth {
                    answer: auth::to_hex(&psk.answer(&nonce)),
                },
            )?;
            // The server's refusal names the cause ("authentication failed: wrong ...").
            expect_reply(ctrl, "auth_ok", label).map(|_| ())
        }
    }
}

fn drive(
    target: &Target,
    plan: &TestPlan,
    g: &mut Gathered,
    observer: &mut dyn Observer,
) -> Result<()> {
    plan.validate()?;
    let label = target.label.as_str();
    let mut ctrl = connect_control(target)?;
    let server_ip = ctrl.peer_addr()?.ip();
    g.server_address = Some(ctrl.peer_addr()?.to_string());
    g.server_on_this_host =
        !target.embedded && crate::io::socket::same_host(ctrl.local_addr()?.ip(), server_ip);
    let meter = Meter::new(server_ip);
    g.local_provenance = Some(Provenance::gather(meter.interface()));

    write_msg(
        &mut ctrl,
        &Msg::Hello {
            protocol: PROTOCOL_VERSION,
            software: format!("thrum {}", env!("CARGO_PKG_VERSION")),
            limits: None,
            nonce: None,
        },
    )?;
    let Msg::Hello {
        protocol,
        software,
        nonce,
        ..
    } = expect_reply(&mut ctrl, "hello", label)?
    else {
        unreachable!()
    };
    if protocol != PROTOCOL_VERSION {
        bail!(
            "protocol version mismatch: this client speaks v{PROTOCOL_VERSION}, the server at {label} ({}) speaks v{protocol}",
            text::echo(&software)
        );
    }
    authenticate(&mut ctrl, target, nonce.as_deref())?;
    g.env.server_software = Some(text::echo(&software));
    g.env.udp_io = udp_io(plan);

    write_msg(
        &mut ctrl,
        &Msg::Spec {
            plan: Box::new(plan.clone()),
        },
    )?;
    let Msg::Accepted {
        data_port,
        token,
        udp_ports,
    } = expect_reply(&mut ctrl, "accepted", label)?
    else {
        unreachable!()
    };
    let token = parse_token(&token)?;
    let data_addr = SocketAddr::new(server_ip, data_port);

    let opts = DataSocketOpts::from_plan(plan, &plan.local);
    let flows_n = plan.flows as usize;
    // One socket per flow here, and as many again in this process when the
    // server is embedded.
    let per_flow = if target.embedded { 2 } else { 1 };
    if let Err(w) = crate::io::fdlimit::ensure(flows_n as u64 * per_flow) {
        g.warnings.push(w);
    }
    let setup_t0 = Instant::now();
    // Long-lived TCP flows connect all at once, each presenting the token
    // and its flow id as soon as it is up.
    let mut tcp_socks = if plan.test.is_udp() || plan.test.is_connect() {
        Vec::new()
    } else {
        let greeting = |f: usize| {
            let mut hello = Vec::with_capacity(TOKEN_LEN + 4);
            hello.extend_from_slice(&token);
            hello.extend_from_slice(&(f as u32).to_be_bytes());
            hello
        };
        connect_many(
            &data_addr,
            target.bind,
            &opts,
            flows_n,
            greeting,
            CONNECT_TIMEOUT.max(Duration::from_millis(flows_n as u64)),
        )
        .context("opening data connections")?
    }
    .into_iter();
    let counters: Arc<[FlowCounters]> = (0..flows_n).map(|_| FlowCounters::default()).collect();
    let mut flows: Vec<Box<dyn Flow>> = Vec::with_capacity(flows_n);
    let mut my_udp_ports = Vec::new();
    for f in 0..plan.flows {
        let ctr = CounterRef::new(counters.clone(), f as usize);
        let flow: Box<dyn Flow> = match plan.test {
            TestKind::UdpStream | TestKind::UdpRr => {
                let port = *udp_ports
                    .get(f as usize)
                    .context("the server sent fewer UDP ports than flows")?;
                // An IPv4 server reached as ::ffff:a.b.c.d gets an IPv4
                // socket: see the server's session() on mapped addresses.
                let peer = SocketAddr::new(server_ip.to_canonical(), port);
                let bind = target.bind.map(|b| b.to_canonical());
                let sock = udp_connected(&peer, bind, &opts)
                    .with_context(|| format!("opening UDP socket {f} to {peer}"))?;
                my_udp_ports.push(local_port(&sock)?);
                if f == 0 {
                    check_mtu(plan, &sock, peer.is_ipv6(), g);
                }
                if plan.test == TestKind::UdpStream {
                    let s =
                        UdpStreamSender::new(sock, ctr, f, plan.send_bytes as usize, plan.rate_bps);
                    Box::new(if plan.gso { s.with_gso()? } else { s })
                } else {
                    Box::new(UdpRrClient::new(
                        sock,
                        ctr,
                        plan.request_bytes,
                        plan.response_bytes,
                        plan.burst,
                        Duration::from_nanos(plan.rr_timeout_ns),
                        plan.flow_quota(f),
                    ))
                }
            }
            TestKind::TcpCrr | TestKind::TcpCc => {
                let mode = if plan.test == TestKind::TcpCrr {
                    ConnectMode::Crr
                } else {
                    ConnectMode::Cc
                };
                Box::new(ConnectClient::new(
                    mode,
                    data_addr,
                    target.bind,
                    opts.clone(),
                    ctr,
                    token,
                    plan.request_bytes,
                    plan.response_bytes,
                    plan.flow_quota(f),
                    plan.close,
                ))
            }
            _ => {
                let sock = tcp_socks.next().expect("one connection per flow");
                let (sends, receives) = match plan.test {
                    TestKind::TcpStream => (true, false),
                    TestKind::TcpMaerts => (false, true),
                    _ => (true, true),
                };
                if plan.test == TestKind::TcpRr {
                    Box::new(RrClient::new(
                        sock,
                        ctr,
                        plan.request_bytes,
                        plan.response_bytes,
                        plan.burst,
                        plan.flow_quota(f),
                    ))
                } else {
                    let f = StreamFlow::new(
                        sock,
                        ctr,
                        sends,
                        receives,
                        plan.send_bytes as usize,
                        plan.recv_bytes as usize,
                        true,
                    );
                    Box::new(if plan.zerocopy { f.with_zerocopy()? } else { f })
                }
            }
        };
        flows.push(flow);
    }

    write_msg(
        &mut ctrl,
        &Msg::Start {
            udp_ports: my_udp_ports,
        },
    )?;
    let Msg::Started { drivers, .. } = expect_reply(&mut ctrl, "started", label)? else {
        unreachable!()
    };
    g.setup_s = Some(setup_t0.elapsed().as_secs_f64());
    g.env.remote_drivers = drivers.iter().map(|d| text::echo(d)).collect();

    let workers = place(flows, plan.threads as usize, &plan.local.cpu_pin);

    let phases = schedule(plan);
    let rusage0 = Rusage::read().unwrap_or_default();
    // The clock starts with the workers, and the first sample is their zero
    // counts at t0: nothing they do before the session's first tick escapes
    // the window (it matters when the test starts in the measure phase).
    let t0 = Instant::now();
    let engine = Engine::start(
        counters,
        workers,
        phases[0].0,
        plan.driver,
        &plan.percentiles,
    )
    .context("starting worker threads")?;
    g.warnings.extend(crate::engine::uring_fallback(plan));
    g.env.local_drivers = engine_drivers(&engine);

    // Samples arrive on their own thread so the clock never waits on the network.
    let (tx, rx) = mpsc::channel();
    let mut reader = ctrl.try_clone()?;
    reader.set_read_timeout(None)?;
    std::thread::Builder::new()
        .name("thrum-control-reader".into())
        .spawn(move || {
            loop {
                let m = read_msg(&mut reader);
                let end = m.is_err() || matches!(m, Ok(Msg::Final { .. }) | Ok(Msg::Error { .. }));
                if tx.send(m).is_err() || end {
                    break;
                }
            }
        })?;

    let mut run = Running {
        meter,
        engine: Some(engine),
        ctrl,
        rx,
        t0,
        seq: 0,
        final_msg: None,
        label: label.to_string(),
        answered: 0,
    };
    let outcome = run.timeline(plan, &phases, g, observer);
    g.local_window = run.meter.window();

    // Stop our workers whatever happened, then collect what they leave.
    let out = run.engine.take().expect("engine").join();
    g.latency = out.latency;
    g.interval_latency = out.interval_latency;
    g.local_retransmits = crate::engine::tcp_retransmits(&out.flows);
    g.local_zerocopy = crate::engine::zerocopy_counts(&out.flows);
    g.local_rusage = Some(Rusage::read().unwrap_or_default().since(&rusage0));
    outcome?;
    if let Some(e) = out.error {
        bail!(e);
    }
    // Our flows have drained: tell the server, and read its final report.
    let mut datagrams_sent = Vec::new();
    if plan.test.is_udp() {
        // Datagrams still queued on the path reach the server before it stops counting.
        std::thread::sleep(UDP_SETTLE);
        if plan.test == TestKind::UdpStream {
            datagrams_sent = out.counts.iter().map(|c| c.datagrams_sent).collect();
        }
    }
    write_msg(&mut run.ctrl, &Msg::Finish { datagrams_sent })?;
    let fin = run.wait_final(g, plan, observer)?;
    if let Msg::Final {
        counts,
        rusage,
        errors,
        refused,
        window,
        provenance,
        tcp_retransmits,
        zerocopy,
    } = fin
    {
        g.remote_total = Some(Counts::sum(&counts));
        // A server's figures are its word: one no machine can produce
        // (a resident set of exabytes, more CPU time than the test had)
        // is left out and said, not printed as a measurement.
        let bound = Rusage::bound_for(plan_wall_s(plan));
        match rusage.implausible(&bound) {
            None => g.remote_rusage = Some(rusage),
            Some(why) => g
                .warnings
                .push(format!("server reported {why}; its usage is left out")),
        }
        g.remote_window = window
            .map(|w| *w)
            .filter(|w| w.rusage.and_then(|r| r.implausible(&bound)).is_none());
        g.remote_provenance = provenance.map(|p| *p);
        g.remote_retransmits = tcp_retransmits;
        g.remote_zerocopy = zerocopy;
        for e in errors {
            g.warnings.push(format!("server: {}", text::message(&e)));
        }
        if refused > 0 {
            g.warnings.push(format!(
                "server refused {refused} data connection(s) or datagram(s) (another address, a wrong or missing token, or sent before the test)"
            ));
        }
    }
    drop(out.flows);
    Ok(())
}

/// The datagram I/O path a UDP test runs, for the result.
fn udp_io(plan: &TestPlan) -> Option<String> {
    let batch = crate::io::mmsg::BATCH;
    match plan.test {
        TestKind::UdpStream if plan.gso => Some(format!(
            "--gso: sendmmsg of up to {batch} messages of up to {} datagrams each (UDP_SEGMENT), recvmmsg with UDP_GRO, datagrams counted by segment size",
            crate::workload::udp::gso_segments(plan.send_bytes as usize)
        )),
        TestKind::UdpStream => Some(format!(
            "sendmmsg/recvmmsg, up to {batch} datagrams per call; a receiver alone on its thread naps between batches while datagrams stream in (wake-up coalescing)"
        )),
        TestKind::UdpRr if plan.burst == 0 => {
            Some("send/recv, one datagram per call (one transaction in flight)".into())
        }
        TestKind::UdpRr => Some(format!(
            "sendmmsg/recvmmsg, up to {} datagrams per call",
            batch.min(plan.burst as usize + 1)
        )),
        _ => None,
    }
}

/// Warn when datagrams will not fit the path MTU (they are fragmented, and one
/// lost fragment loses the datagram).
fn check_mtu(plan: &TestPlan, sock: &socket2::Socket, ipv6: bool, g: &mut Gathered) {
    let largest = match plan.test {
        TestKind::UdpStream => plan.send_bytes,
        _ => plan.request_bytes.max(plan.response_bytes),
    };
    let headers = if ipv6 { 48 } else { 28 };
    if let Some(mtu) = path_mtu(sock, ipv6)
        && largest + headers > mtu as u64
    {
        g.warnings.push(format!(
            "datagrams of {largest} bytes exceed the path MTU of {mtu} bytes ({} bytes of payload fit): they are sent as IP fragments",
            mtu as u64 - headers
        ));
    }
}

fn engine_drivers(e: &Engine) -> Vec<String> {
    e.drivers().iter().map(|d| d.to_string()).collect()
}

/// The phases in order, with their lengths (None: until the transaction quota is met).
fn schedule(plan: &TestPlan) -> Vec<(Phase, Option<Duration>)> {
    let mut v = Vec::new();
    if plan.warmup_ns > 0 {
        v.push((Phase::Warmup, Some(Duration::from_nanos(plan.warmup_ns))));
    }
    let measure = if plan.transactions.is_some() {
        None
    } else {
        Some(Duration::from_nanos(plan.duration_ns))
    };
    v.push((Phase::Measure, measure));
    if plan.cooldown_ns > 0 {
        v.push((
            Phase::Cooldown,
            Some(Duration::from_nanos(plan.cooldown_ns)),
        ));
    }
    v
}

struct Running {
    meter: Meter,
    /// Taken out (and joined) once the timeline is over.
    engine: Option<Engine>,
    ctrl: TcpStream,
    rx: mpsc::Receiver<Result<Msg, FrameError>>,
    t0: Instant,
    seq: u32,
    final_msg: Option<Msg>,
    label: String,
    /// Ticks before this one have their server sample.
    answered: usize,
}

impl Running {
    /// Sample our counters, enter `next`, and ask the server to do the same.
    fn engine(&self) -> &Engine {
        self.engine
            .as_ref()
            .expect("engine runs until the timeline ends")
    }

    fn tick(
        &mut self,
        ending: Phase,
        next: Phase,
        g: &mut Gathered,
        plan: &TestPlan,
        observer: &mut dyn Observer,
    ) -> Result<()> {
        self.meter.on_tick(ending, next);
        // Interval first: a worker that sees the new phase sees the new interval too.
        self.engine().set_interval(self.seq);
        self.engine().set_phase(next);
        let (at, counts) = if self.seq == 0 {
            let zero = vec![Counts::default(); self.engine().snapshot().len()];
            (Duration::ZERO, zero)
        } else {
            (self.t0.elapsed(), self.engine().snapshot())
        };
        let seq = self.seq;
        self.seq += 1;
        g.local.push(LocalSample {
            at,
            unix_s: unix_now(),
            counts,
            phase: ending,
        });
        g.remote.push(None);
        write_msg(&mut self.ctrl, &Msg::Tick { seq, phase: next })
            .with_context(|| format!("sending a tick to {}", self.label))?;
        if seq > 0 {
            self.pump(g, plan, observer, Duration::ZERO)?;
        }
        Ok(())
    }

    /// Fail when the server has left a tick unanswered for [`SAMPLE_TIMEOUT`].
    fn check_samples(&mut self, g: &Gathered) -> Result<()> {
        while self.answered < g.remote.len() && g.remote[self.answered].is_some() {
            self.answered += 1;
        }
        if let Some(sent) = g.local.get(self.answered).map(|l| l.at)
            && self.answered < g.remote.len()
            && self.t0.elapsed().saturating_sub(sent) > SAMPLE_TIMEOUT
        {
            bail!(
                "the server at {} has not answered for {SAMPLE_TIMEOUT:?}: the control path or the server is gone",
                self.label
            );
        }
        Ok(())
    }

    /// Handle control messages for up to `wait`; fail on a server error or a lost connection.
    fn pump(
        &mut self,
        g: &mut Gathered,
        plan: &TestPlan,
        observer: &mut dyn Observer,
        wait: Duration,
    ) -> Result<()> {
        let mut wait = wait;
        loop {
            let m = if wait.is_zero() {
                match self.rx.try_recv() {
                    Ok(m) => m,
                    Err(mpsc::TryRecvError::Empty) => return Ok(()),
                    Err(mpsc::TryRecvError::Disconnected) => {
                        bail!("the control connection to {} is gone", self.label)
                    }
                }
            } else {
                match self.rx.recv_timeout(wait) {
                    Ok(m) => m,
                    Err(mpsc::RecvTimeoutError::Timeout) => return Ok(()),
                    Err(mpsc::RecvTimeoutError::Disconnected) => {
                        bail!("the control connection to {} is gone", self.label)
                    }
                }
            };
            wait = Duration::ZERO;
            match m {
                Ok(Msg::Sample {
                    seq,
                    elapsed_ns,
                    counts,
                    ..
                }) => {
                    if let Some(slot) = g.remote.get_mut(seq as usize) {
                        *slot = Some(RemoteSample { elapsed_ns, counts });
                        // Both ends' counts of this interval are in: report it.
                        if seq > 0 && g.remote[seq as usize - 1].is_some() {
                            observer.on_interval(&interval(plan, g, seq as usize));
                        }
                    }
                }
                Ok(m @ Msg::Final { .. }) => {
                    self.final_msg = Some(m);
                    return Ok(());
                }
                Ok(Msg::Error { message }) => {
                    bail!(
                        "server {} reported: {}",
                        self.label,
                        text::message(&message)
                    )
                }
                Ok(m) => bail!(
                    "server {} sent an unexpected '{}' message",
                    self.label,
                    m.kind()
                ),
                Err(FrameError::Closed) => bail!(
                    "the server at {} closed the control connection mid-test (did it stop or crash?)",
                    self.label
                ),
                Err(e) => {
                    return Err(anyhow!(e))
                        .context(format!("control connection to {}", self.label));
                }
            }
        }
    }

    fn check_engine(&self) -> Result<()> {
        if let Some(e) = self.engine().error() {
            bail!("data path: {e}");
        }
        Ok(())
    }

    fn timeline(
        &mut self,
        plan: &TestPlan,
        phases: &[(Phase, Option<Duration>)],
        g: &mut Gathered,
        observer: &mut dyn Observer,
    ) -> Result<()> {
        let interval = Duration::from_nanos(plan.interval_ns);
        // A finer step while count-limited, to end the window close to the last transaction.
        let check = if plan.transactions.is_some() {
            Duration::from_millis(1)
        } else {
            Duration::from_millis(20)
        };
        self.tick(phases[0].0, phases[0].0, g, plan, observer)?;
        for (k, &(phase, len)) in phases.iter().enumerate() {
            let next_phase = phases.get(k + 1).map_or(Phase::Drain, |p| p.0);
            let start = self.t0.elapsed();
            let end = len.map(|l| start + l);
            let mut next_tick = start + interval;
            loop {
                let now = self.t0.elapsed();
                let quota_met =
                    len.is_none() && self.engine().quota_done() as u64 >= plan.flows as u64;
                if quota_met || end.is_some_and(|e| now >= e) {
                    self.tick(phase, next_phase, g, plan, observer)?;
                    break;
                }
                if now >= next_tick {
                    self.tick(phase, phase, g, plan, observer)?;
                    next_tick += interval;
                    continue;
                }
                let mut until = next_tick.min(end.unwrap_or(next_tick)) - now;
                until = until.min(check);
                self.pump(g, plan, observer, until)?;
                self.check_engine()?;
                self.check_samples(g)?;
            }
        }
        // Drain: wait for our flows to half-close and read the server's EOF.
        let deadline = Instant::now() + DRAIN_TIMEOUT;
        while self.engine().running() > 0 {
            if Instant::now() >= deadline {
                g.warnings.push(format!(
                    "{} worker(s) had not drained after {DRAIN_TIMEOUT:?}; final totals may not match between the ends",
                    self.engine().running()
                ));
                break;
            }
            self.pump(g, plan, observer, Duration::from_millis(2))?;
            self.check_engine()?;
            self.check_samples(g)?;
        }
        // Our totals after the drain.
        g.local_total = Some(Counts::sum(&self.engine().snapshot()));
        Ok(())
    }

    fn wait_final(
        &mut self,
        g: &mut Gathered,
        plan: &TestPlan,
        observer: &mut dyn Observer,
    ) -> Result<Msg> {
        let deadline = Instant::now() + REPLY_TIMEOUT;
        while self.final_msg.is_none() {
            let now = Instant::now();
            if now >= deadline {
                bail!(
                    "server {} sent no final report within {REPLY_TIMEOUT:?}",
                    self.label
                );
            }
            self.pump(g, plan, observer, deadline - now)?;
        }
        Ok(self.final_msg.take().expect("final message"))
    }
}

impl Drop for Running {
    /// Wake the control reader thread, whatever state the connection is in.
    fn drop(&mut self) {
        let _ = self.ctrl.shutdown(std::net::Shutdown::Both);
    }
}

/// Interval `k` (between samples k-1 and k).
/// Run the whole test again and again as [`super::repeat::repeat`] decides
/// (netperf's -i/-I), each run a fresh session with the server.
pub fn run_repeated(
    target: &Target,
    plan: &TestPlan,
    rep: Repeat,
    observer: &mut dyn Observer,
    on_iteration: &mut dyn FnMut(&crate::result::Iteration),
) -> TestResult {
    super::repeat::repeat(
        plan,
        rep,
        &mut || run_once(target, plan, observer),
        on_iteration,
    )
}
