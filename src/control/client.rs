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

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow, bail};

use super::auth::{self, NONCE_LEN, Psk};
use super::deadline::read_msg_within;
use super::proto::{FrameError, MAX_FRAME, Msg, PROTOCOL_VERSION, Rusage, read_msg, write_msg};
use super::repeat::Repeat;
use super::window::{Meter, WindowStats, on_hypervisor};
use crate::engine::{Engine, place};
use crate::io::connect::connect_many;
use crate::io::socket::{DataSocketOpts, connect, local_port, path_mtu, udp_connected};
use crate::io::zerocopy::ZeroCopyCounts;
use crate::plan::{TestKind, TestPlan};
use crate::result::{
    Environment, Figures, Interval, SCHEMA, Side, Spec, Stability, Summary, TestResult,
};
use crate::sensors::Provenance;
use crate::stats::counters::{Counts, FlowCounters};
use crate::stats::latency::{LatencyHistogram, LatencySummary};
use crate::text;
use crate::workload::crr::{ConnectClient, ConnectMode, TOKEN_LEN};
use crate::workload::rr::RrClient;
use crate::workload::stream::StreamFlow;
use crate::workload::udp::{UdpRrClient, UdpStreamSender};
use crate::workload::{CounterRef, Flow, Phase};

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

struct LocalSample {
    at: Duration,
    unix_s: f64,
    counts: Vec<Counts>,
    /// The phase of the interval that ends at this sample.
    phase: Phase,
}

struct RemoteSample {
    elapsed_ns: u64,
    counts: Vec<Counts>,
}

/// Everything gathered so far, whatever happens.
struct Gathered {
    local: Vec<LocalSample>,
    remote: Vec<Option<RemoteSample>>,
    latency: LatencyHistogram,
    interval_latency: BTreeMap<u32, LatencySummary>,
    local_total: Option<Counts>,
    remote_total: Option<Counts>,
    local_rusage: Option<Rusage>,
    remote_rusage: Option<Rusage>,
    env: Environment,
    server_address: Option<String>,
    warnings: Vec<String>,
    local_window: Option<WindowStats>,
    remote_window: Option<WindowStats>,
    local_provenance: Option<Provenance>,
    remote_provenance: Option<Provenance>,
    local_retransmits: Option<u64>,
    remote_retransmits: Option<u64>,
    local_zerocopy: Option<ZeroCopyCounts>,
    remote_zerocopy: Option<ZeroCopyCounts>,
    /// The server runs on this host as a separate process.
    server_on_this_host: bool,
    setup_s: Option<f64>,
}

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
    let mut g = Gathered {
        local: Vec::new(),
        remote: Vec::new(),
        latency: LatencyHistogram::new(),
        interval_latency: BTreeMap::new(),
        local_total: None,
        remote_total: None,
        local_rusage: None,
        remote_rusage: None,
        env: Environment::gather(),
        server_address: None,
        warnings: Vec::new(),
        local_window: None,
        remote_window: None,
        local_provenance: None,
        remote_provenance: None,
        local_retransmits: None,
        remote_retransmits: None,
        local_zerocopy: None,
        remote_zerocopy: None,
        server_on_this_host: false,
        setup_s: None,
    };
    let error = drive(target, plan, &mut g, observer)
        .err()
        .map(|e| format!("{e:#}"));
    assemble(target, plan, g, error)
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
fn interval(plan: &TestPlan, g: &Gathered, k: usize) -> Interval {
    let a = &g.local[k - 1];
    let b = &g.local[k];
    let local: Vec<Counts> = b
        .counts
        .iter()
        .zip(&a.counts)
        .map(|(x, y)| *x - *y)
        .collect();
    let (remote, remote_s) = match (
        g.remote.get(k - 1).and_then(|x| x.as_ref()),
        g.remote.get(k).and_then(|x| x.as_ref()),
    ) {
        (Some(ra), Some(rb)) => (
            rb.counts
                .iter()
                .zip(&ra.counts)
                .map(|(x, y)| *x - *y)
                .collect(),
            rb.elapsed_ns.saturating_sub(ra.elapsed_ns) as f64 / 1e9,
        ),
        _ => (Vec::new(), 0.0),
    };
    let local_s = (b.at - a.at).as_secs_f64();
    let sum = Figures::compute(
        plan.test,
        Counts::sum(&local),
        Counts::sum(&remote),
        local_s,
        remote_s,
    );
    Interval {
        index: (k - 1) as u32,
        phase: b.phase,
        start_s: a.at.as_secs_f64(),
        end_s: b.at.as_secs_f64(),
        unix_end_s: b.unix_s,
        local,
        remote,
        sum,
        latency_ns: g.interval_latency.get(&((k - 1) as u32)).cloned(),
    }
}

fn assemble(
    target: &Target,
    plan: &TestPlan,
    mut g: Gathered,
    error: Option<String>,
) -> TestResult {
    let intervals: Vec<Interval> = (1..g.local.len()).map(|k| interval(plan, &g, k)).collect();
    let measure: Vec<&Interval> = intervals
        .iter()
        .filter(|i| i.phase == Phase::Measure)
        .collect();
    // fold from +0.0: an empty f64 sum is -0.0.
    let local_s: f64 = measure.iter().fold(0.0, |a, i| a + (i.end_s - i.start_s));
    let local_w = Counts::sum(measure.iter().map(|i| &i.sum.local));
    let remote_w = Counts::sum(measure.iter().map(|i| &i.sum.remote));
    // The server's window on its own clock, when all its samples arrived.
    let remote_complete = measure.iter().all(|i| !i.remote.is_empty());
    let remote_s: f64 = if remote_complete {
        let idx: Vec<usize> = measure.iter().map(|i| i.index as usize).collect();
        idx.iter()
            .map(|&k| {
                let a = g.remote[k].as_ref().map_or(0, |r| r.elapsed_ns);
                let b = g.remote[k + 1].as_ref().map_or(0, |r| r.elapsed_ns);
                b.saturating_sub(a) as f64 / 1e9
            })
            .fold(0.0, |a, x| a + x)
    } else {
        0.0
    };
    let mut warnings = std::mem::take(&mut g.warnings);
    if !measure.is_empty() && !remote_complete && error.is_none() {
        warnings
            .push("some server samples did not arrive; server-side figures are incomplete".into());
    }
    // A window of zero length (e.g. the server's samples never came) has no rate.
    let bps = |bytes: u64, secs: f64| (secs > 0.0).then(|| bytes as f64 * 8.0 / secs);
    let fig = Figures::compute(plan.test, local_w, remote_w, local_s, remote_s);
    if let (Some(rate), Some(sent)) = (plan.rate_bps, bps(local_w.bytes_sent, local_s)) {
        let wanted = rate as f64 * plan.flows as f64;
        if sent < 0.95 * wanted && error.is_none() {
            warnings.push(format!(
                "--rate asked for {} in all, the senders reached {} ({:.0} %)",
                crate::units::BitsPerSec(wanted),
                crate::units::BitsPerSec(sent),
                100.0 * sent / wanted
            ));
        }
    }
    let latency = g.latency.summary_with(&plan.percentiles);
    let is_stream = plan.test.is_stream();
    let stability = Stability::of(plan.test, &measure, plan.transactions.is_some());
    if error.is_none() {
        warnings.extend(stability.warnings);
    }
    let sent_bps = match plan.test {
        TestKind::TcpStream | TestKind::UdpStream => bps(local_w.bytes_sent, local_s),
        TestKind::TcpMaerts => bps(remote_w.bytes_sent, remote_s),
        TestKind::TcpBidir => bps(local_w.bytes_sent, local_s)
            .zip(bps(remote_w.bytes_sent, remote_s))
            .map(|(a, b)| a + b),
        _ => None,
    };
    let mut summary = Summary {
        duration_s: local_s,
        throughput_bps: fig.throughput_bps,
        throughput_bps_c2s: fig.throughput_bps_c2s,
        throughput_bps_s2c: fig.throughput_bps_s2c,
        throughput_bps_sent: if measure.is_empty() { None } else { sent_bps },
        transactions_per_s: fig.transactions_per_s,
        transactions: (!is_stream).then_some(local_w.transactions),
        histogram: (!is_stream && latency.is_some()).then(|| g.latency.to_base64()),
        latency_ns: if is_stream { None } else { latency },
        stability_cv: stability.cv,
        trend_percent: stability.trend_percent,
        interface: None,
        tx_packets_per_s: None,
        rx_packets_per_s: None,
        datagrams_sent: (plan.test == TestKind::UdpStream).then_some(local_w.datagrams_sent),
        datagrams_received: (plan.test == TestKind::UdpStream)
            .then_some(remote_w.datagrams_received),
        lost: match plan.test {
            TestKind::UdpStream => Some(remote_w.lost.saturating_sub(remote_w.reordered)),
            TestKind::UdpRr => Some(local_w.lost),
            _ => None,
        },
        reordered: (plan.test == TestKind::UdpStream).then_some(remote_w.reordered),
        duplicates: (plan.test == TestKind::UdpStream).then_some(remote_w.duplicates),
        local: Side::new(
            local_w,
            local_s,
            g.local_total.unwrap_or_default(),
            g.local_rusage,
        ),
        remote: Side::new(
            remote_w,
            remote_s,
            g.remote_total.unwrap_or_default(),
            g.remote_rusage,
        ),
        setup_s: g.setup_s,
        warnings,
        error,
    };
    apply_windows(plan, target.embedded, &fig, &g, &mut summary);
    TestResult {
        schema: SCHEMA,
        test: plan.test,
        spec: Spec {
            plan: plan.clone(),
            server: if target.embedded {
                "embedded".into()
            } else {
                target.label.clone()
            },
            server_address: g.server_address,
            embedded_server: target.embedded,
            bind: target.bind.map(|b| b.to_string()),
        },
        environment: g.env,
        provenance: crate::result::Provenances {
            local: g.local_provenance,
            remote: g.remote_provenance,
        },
        intervals,
        summary,
        iterations: Vec::new(),
        confidence: None,
    }
}

/// CPU, service demand, packet counters and retransmissions of both ends
/// from their window readings, and the warnings they call for.
fn apply_windows(
    plan: &TestPlan,
    target_embedded: bool,
    fig: &Figures,
    g: &Gathered,
    s: &mut Summary,
) {
    let per_kb = plan.test.is_stream();
    let units_per_s = if per_kb {
        fig.throughput_bps.unwrap_or(0.0) / 8.0
    } else {
        fig.transactions_per_s.unwrap_or(0.0)
    };
    let cpu_s =
        |w: &Option<WindowStats>| w.as_ref().and_then(|w| w.rusage).map_or(0.0, |r| r.cpu_s());
    let hypervisor = on_hypervisor();
    let embedded = target_embedded;
    let mut warnings = Vec::new();
    for (end, side, window, other) in [
        ("local", &mut s.local, &g.local_window, &g.remote_window),
        ("remote", &mut s.remote, &g.remote_window, &g.local_window),
    ] {
        if let Some(w) = window {
            side.apply_window(
                &crate::result::CpuBasis {
                    end,
                    window: w,
                    units_per_s,
                    per_kb,
                    other_thrum_cpu_s: if g.server_on_this_host {
                        cpu_s(other)
                    } else {
                        0.0
                    },
                    hypervisor,
                    warn: end == "local" || !(g.server_on_this_host || embedded),
                },
                &mut warnings,
            );
        }
    }
    s.local.tcp_retransmits = g.local_retransmits;
    s.remote.tcp_retransmits = g.remote_retransmits;
    s.local.zerocopy = g.local_zerocopy;
    s.remote.zerocopy = g.remote_zerocopy;
    if plan.zerocopy {
        warnings.extend(zerocopy_warnings(plan, g));
    }
    s.interface = s.local.interface.clone();
    s.tx_packets_per_s = s.local.tx_packets_per_s;
    s.rx_packets_per_s = s.local.rx_packets_per_s;
    if s.error.is_none() {
        if let Some(w) = packets_warning(plan, s, g) {
            warnings.push(w);
        }
        s.warnings.extend(warnings);
    }
}

/// Copied sends above this share of completions (percent) get a warning.
const ZEROCOPY_COPIED_WARN_PERCENT: f64 = 50.0;

/// `--zerocopy`: say when the kernel copied most sends anyway, and when a
/// sending server did not report any (an older thrum ignores the option).
fn zerocopy_warnings(plan: &TestPlan, g: &Gathered) -> Vec<String> {
    let mut w = Vec::new();
    let server_sends = matches!(plan.test, TestKind::TcpMaerts | TestKind::TcpBidir);
    if server_sends && g.remote_zerocopy.is_none() {
        w.push("--zerocopy: the server reported no zero-copy sends (a thrum server older than the option sends with copies)".to_string());
    }
    for (end, zc) in [("local", &g.local_zerocopy), ("remote", &g.remote_zerocopy)] {
        if let Some(zc) = zc {
            let pct = zc.copied_percent();
            if pct > ZEROCOPY_COPIED_WARN_PERCENT {
                w.push(format!(
                    "--zerocopy: the kernel copied {pct:.0} % of {end} sends ({} of {} completed; loopback/veth deliver through a copy)",
                    zc.copied, zc.completions
                ));
            }
        }
    }
    w
}

/// Largest header overhead of one segment (IPv6 + TCP with timestamps).
const SEGMENT_HEADERS: u64 = 40 + 32;

/// RR tests whose requests and responses each fit one segment should move
/// one packet per message each way (two on loopback, where each packet is
/// counted leaving and arriving); when packets/s and transactions/s part by
/// more than 2 %, segments carried several messages (TCP coalescing, --burst)
/// or were retransmitted.
fn packets_warning(plan: &TestPlan, s: &Summary, g: &Gathered) -> Option<String> {
    if !plan.test.is_rr() {
        return None;
    }
    let mtu = g
        .local_provenance
        .as_ref()
        .and_then(|p| p.interface.as_ref())
        .and_then(|i| i.mtu)
        .unwrap_or(1500) as u64;
    if plan.request_bytes.max(plan.response_bytes) + SEGMENT_HEADERS > mtu {
        return None;
    }
    let (dt, dr) = s.packets_off_percent()?;
    let iface = s.interface.as_deref().unwrap_or("?");
    (dt.abs() > PACKETS_WARN_PERCENT || dr.abs() > PACKETS_WARN_PERCENT).then(|| {
        let fewer = dt < -PACKETS_WARN_PERCENT || dr < -PACKETS_WARN_PERCENT;
        let more = dt > PACKETS_WARN_PERCENT || dr > PACKETS_WARN_PERCENT;
        let burst = if plan.burst > 0 { ", --burst" } else { "" };
        let why = match (fewer, more) {
            (true, false) => format!(
                "segments carried several requests or responses (TCP coalescing{burst})"
            ),
            (false, _) => "packets that carried no message moved too (pure ACKs when a delayed ACK fired before the reply, retransmissions)".to_string(),
            (true, true) => format!(
                "segments carried several messages one way (TCP coalescing{burst}) and packets without one moved the other (pure ACKs, retransmissions)"
            ),
        };
        format!(
            "packets/s on {iface} ({:.0} tx, {:.0} rx{}) differ from transactions/s ({:.0}) by {dt:+.1} % / {dr:+.1} %: {why}, so per-transaction figures are not per-packet ones (other traffic on {iface} counts too)",
            s.tx_packets_per_s.unwrap_or(0.0),
            s.rx_packets_per_s.unwrap_or(0.0),
            if iface == "lo" { ", two per transaction on loopback" } else { "" },
            s.transactions_per_s.unwrap_or(0.0),
        )
    })
}

/// RR packets/s that part from transactions/s by more than this get a warning.
const PACKETS_WARN_PERCENT: f64 = 2.0;

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
