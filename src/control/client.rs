//! The client end of a session: the conversation with one server.
//!
//! A [`Session`] owns the plan, the observer and the raw record it gathers
//! ([`Gathered`]): it says hello, proves the key, sends the spec, opens the
//! data flows that the test's row in `workload::kinds` describes, starts the
//! workers, runs the timeline (`timeline`), and reads the server's final
//! report. Turning the record into a result is `analysis`; repeating the
//! whole run for a confidence interval is `repeat`.
//!
//! [`run`] always returns a [`TestResult`]: on failure it carries the error
//! and every sample gathered so far.

use std::net::{IpAddr, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};

use super::auth::{self, NONCE_LEN, Psk};
use super::dial::{Dial, Flows};
use super::proto::{
    Accepted, Auth, AuthOk, ClientMsg, Final, Finish, Hello, PartPorts, Rusage, Spec, Start,
    Started, write_msg,
};
use super::repeat::Repeat;
use super::timeline::{REPLY_TIMEOUT, Running, schedule, spawn_reader, take_engines};
use crate::analysis::{Gathered, assemble, assemble_mix};
use crate::engine::{Engines, Side, WorkerOpts, place};
use crate::io::connect::{connect_retrying, time_wait_note};
use crate::io::socket::DataSocketOpts;
use crate::io::spread::AddrRun;
use crate::plan::{TestPlan, Transport};
use crate::result::{Environment, TestResult};
use crate::sensors::Provenance;
use crate::sensors::window::{Meter, on_hypervisor};
use crate::stats::counters::Counts;
use crate::text;
use crate::warning::{Code, Warning};
use crate::workload::crr::TOKEN_LEN;

pub use super::dial::CONNECT_TIMEOUT;
pub use super::reply::expect;
pub use super::timeline::{DRAIN_TIMEOUT, Observer, Quiet, SAMPLE_TIMEOUT};

/// How long UDP datagrams in flight get to land before the server stops counting.
pub const UDP_SETTLE: Duration = Duration::from_millis(100);

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
    /// `--wait-server`: how long to keep trying a server that refuses the
    /// control connection (not started yet); None: fail at once.
    pub wait: Option<std::time::Duration>,
}

/// The longest a test can take by its plan: warm-up, measurement (for a
/// count-limited run, an hour), cool-down and a minute for the rest.
fn plan_wall_s(plan: &TestPlan) -> f64 {
    let measure = if plan.count_limited() {
        3600e9
    } else {
        plan.duration_ns as f64
    };
    (plan.warmup_ns as f64 + measure + plan.cooldown_ns as f64) / 1e9 + 60.0
}

/// Run one test. Never fails: errors land in `summary.error`.
pub fn run(target: &Target, plan: &TestPlan, observer: &mut dyn Observer) -> TestResult {
    let mut r = Session::new(target, plan, observer).run();
    r.iterations = vec![crate::result::Iteration::of(1, &r)];
    r
}

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
        &mut || Session::new(target, plan, &mut *observer).run(),
        on_iteration,
    )
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

/// Connect, and with `--wait-server` connect again every 200 ms while the
/// server refuses (a client started before its server), until the wait is
/// over or a stop is asked for. A refused connection never reaches a
/// server, so one started with `--once` is not used up by the waiting.
fn connect_waiting(target: &Target, opts: &DataSocketOpts) -> std::io::Result<socket2::Socket> {
    let deadline = target.wait.map(|w| std::time::Instant::now() + w);
    loop {
        match connect_retrying(&target.addr, target.bind, opts, CONNECT_TIMEOUT) {
            Err(e)
                if e.kind() == std::io::ErrorKind::ConnectionRefused
                    && deadline.is_some_and(|d| std::time::Instant::now() < d)
                    && !super::stop::requested() =>
            {
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            r => return r,
        }
    }
}

fn connect_control(target: &Target) -> Result<TcpStream> {
    let opts = DataSocketOpts::default();
    let s = connect_waiting(target, &opts).map_err(|e| {
        // A handshake unanswered while the TIME_WAIT table is full is most
        // likely a port pair clashing with one of its entries, not a
        // missing server (io::connect's module doc).
        let note = matches!(
            e.kind(),
            std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
        )
        .then(time_wait_note)
        .flatten();
        let why = match note {
            Some(note) => format!("cannot reach the thrum server at {}: {note}", target.label),
            None => match target.wait {
                Some(w) => format!(
                    "cannot reach the thrum server at {} within --wait-server {} (is `thrum server` running there?)",
                    target.label,
                    crate::units::fmt_duration_ns(w.as_nanos() as u64)
                ),
                None => format!(
                    "cannot reach the thrum server at {} (is `thrum server` running there?)",
                    target.label
                ),
            },
        };
        anyhow!(e).context(why)
    })?;
    let s: TcpStream = s.into();
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(REPLY_TIMEOUT))?;
    s.set_write_timeout(Some(REPLY_TIMEOUT))?;
    Ok(s)
}

/// Answer the server's challenge, or refuse a server that does not ask for
/// the key we hold (it could be anyone's server) unless `key_if_asked`.
fn authenticate(
    ctrl: &mut TcpStream,
    target: &Target,
    nonce: Option<&str>,
    key_if_asked: bool,
) -> Result<()> {
    let label = target.label.as_str();
    match (&target.psk, nonce) {
        (None, None) => Ok(()),
        (Some(_), None) if key_if_asked => Ok(()),
        (None, Some(_)) => bail!(
            "authentication failed: the server at {label} requires a pre-shared key (--psk-file)"
        ),
        (Some(_), None) => bail!(
            "authentication failed: --psk-file was given but the server at {label} does not ask for a key; not running unauthenticated"
        ),
        (Some(psk), Some(nonce)) => {
            let nonce = auth::from_hex::<NONCE_LEN>(nonce)
                .with_context(|| format!("the server at {label} sent a malformed nonce"))?;
            let answer = auth::to_hex(&psk.answer(&nonce));
            write_msg(ctrl, &ClientMsg::from(Auth { answer }))?;
            // The server's refusal names the cause ("authentication failed: wrong ...").
            expect::<AuthOk>(ctrl, label).map(|_| ())
        }
    }
}

/// Connect to `target`, say hello, check its version and (`check`, given
/// its hello and how to name it) what else the caller needs of it, and
/// prove the key: a control connection ready for a request (a spec, a
/// clock exchange, an agent's run), with the server's hello. With
/// `key_if_asked`, a server that asks for no key is served without it
/// (its hello has no nonce); else it is refused.
pub fn handshake(
    target: &Target,
    key_if_asked: bool,
    check: impl FnOnce(&Hello, &str) -> Result<()>,
) -> Result<(TcpStream, Hello)> {
    let mut ctrl = connect_control(target)?;
    write_msg(&mut ctrl, &ClientMsg::from(Hello::ours()))?;
    let hello = expect::<Hello>(&mut ctrl, &target.label)?;
    let peer = format!("the server at {}", target.label);
    if let Some(m) = hello.mismatch("client", &peer) {
        bail!(m);
    }
    check(&hello, &peer)?;
    authenticate(&mut ctrl, target, hello.nonce.as_deref(), key_if_asked)?;
    Ok((ctrl, hello))
}

/// One test against one server, from the first hello to the final report.
pub struct Session<'a> {
    target: &'a Target,
    plan: &'a TestPlan,
    observer: &'a mut dyn Observer,
    g: Gathered,
}

impl<'a> Session<'a> {
    pub fn new(
        target: &'a Target,
        plan: &'a TestPlan,
        observer: &'a mut dyn Observer,
    ) -> Session<'a> {
        let g = Gathered::new(
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
        Session {
            target,
            plan,
            observer,
            g,
        }
    }

    /// Run the session and analyse what it gathered, whatever happened.
    pub fn run(mut self) -> TestResult {
        let error = self.drive().err().map(|e| format!("{e:#}"));
        if self.observer.wants_interval_histograms()
            && let Some(p) = self.g.parts.first()
        {
            self.observer.on_interval_histograms(&p.interval_histograms);
        }
        if self.plan.parts.is_empty() {
            assemble(self.plan, self.g, error)
        } else {
            assemble_mix(self.plan, self.g, error)
        }
    }

    fn label(&self) -> &'a str {
        self.target.label.as_str()
    }

    /// Hello both ways, the version check, the features the plan needs,
    /// the key: the control connection ready for the spec, and the
    /// server's hello.
    fn open(&mut self) -> Result<(TcpStream, Hello)> {
        let (ctrl, hello) = handshake(self.target, false, |hello, peer| {
            match hello.lacks(self.plan) {
                Some(need) => {
                    let flag = need.flag;
                    bail!(
                        "{flag}: {peer} ({}) does not apply it (an older thrum, whose hello does not name the feature {}); upgrade the server or run without {flag}",
                        text::echo(&hello.software),
                        need.feature
                    )
                }
                None => Ok(()),
            }
        })?;
        let server_ip = ctrl.peer_addr()?.ip();
        self.g.server_address = Some(ctrl.peer_addr()?.to_string());
        self.g.server_on_this_host = !self.target.embedded
            && crate::io::socket::same_host(ctrl.local_addr()?.ip(), server_ip);
        self.g.env.server_software = Some(text::echo(&hello.software));
        Ok((ctrl, hello))
    }

    /// Fit each part's plan to what the server does on the data path
    /// (`features::BEHAVIOURS`), saying where a figure may suffer: a
    /// udp_rr client matches responses oldest first against a server that
    /// echoes no short sequence number. Not refused, even for a probe: an
    /// older server still measures throughput, and latency without loss,
    /// right, and the warning names the way out.
    fn fit_parts(&mut self, parts: &mut [TestPlan], hello: &Hello) {
        let echoes = hello.names(super::features::RR_SHORT_SEQ);
        for (i, p) in parts.iter_mut().enumerate() {
            // Full 8-byte numbers every server echoes: the flag leaves them be.
            p.rr_in_order = !echoes;
            let Some(note) = crate::workload::udp::matching_note(p, echoes) else {
                continue;
            };
            let part = match self.plan.parts.get(i) {
                Some(q) => format!("--mix part '{}': ", q.name),
                None => String::new(),
            };
            self.g.warnings.push(Warning::new(
                Code::RrMatchedInOrder,
                format!("{part}{note}"),
            ));
        }
    }

    fn drive(&mut self) -> Result<()> {
        let plan = self.plan;
        plan.validate()?;
        let label = self.label();
        let (mut ctrl, hello) = self.open()?;
        let server_ip = ctrl.peer_addr()?.ip();
        let meter = Meter::new(server_ip);
        self.g.link_speed_bps = meter.link_speed_bps();
        self.g.local_provenance = Some(Provenance::gather(meter.interface()));
        let mut parts = plan.part_plans();
        self.fit_parts(&mut parts, &hello);
        // --one-way: the flows correct their stamps by the offset before the run.
        let clock_before = if plan.one_way {
            let c = super::one_way::before(&mut ctrl, label, &hello, plan.one_way_exchanges_only)?;
            for p in &mut parts {
                p.one_way_offset_ns = c.0.offset_ns;
            }
            // A single test's record now, for the live rows' correction.
            if plan.parts.is_empty() {
                self.g.one_way = Some(super::one_way::record(c, plan.interval_ns));
            }
            Some(c)
        } else {
            None
        };
        self.g.env.udp_io = parts.iter().find_map(|p| (p.test.desc().udp_io)(p));

        let (setup_t0, opened) = self.set_up(&mut ctrl, server_ip, &parts)?;
        let started = expect::<Started>(&mut ctrl, label)?;
        self.g.setup_s = Some(setup_t0.elapsed().as_secs_f64());
        self.g.env.remote_drivers = started.drivers.iter().map(|d| text::echo(d)).collect();

        let blocks = opened
            .into_iter()
            .zip(&parts)
            .enumerate()
            .map(|(i, (f, p))| {
                let workers = place(f.flows, &WorkerOpts::from_plan(plan, Side::Client, i, p));
                (f.counters, workers, p.offered_per_s.is_some())
            })
            .collect();
        let phases = schedule(plan);
        let rusage0 = Rusage::process();
        // The clock starts with the workers, and the first sample is their zero
        // counts at t0: nothing they do before the session's first tick escapes
        // the window (it matters when the test starts in the measure phase).
        let t0 = Instant::now();
        self.observer.on_started(t0);
        let engine = Engines::start(
            blocks,
            &plan.held_parts(),
            phases[0].0,
            plan.driver,
            &plan.percentiles,
        )
        .context("starting worker threads")?;
        if self.observer.wants_interval_histograms() {
            engine.keep_interval_histograms(0);
        }
        for (i, p) in plan.parts.iter().enumerate() {
            if p.is_probe() {
                engine.keep_interval_histograms(i);
            }
        }
        if let Some(w) = crate::engine::uring_fallback(plan) {
            self.g.warnings.push(Warning::new(Code::UringFallback, w));
        }
        if let Some(w) = crate::engine::pacing_resolution(
            parts.iter().any(|p| p.offered_per_s.is_some()),
            &engine.drivers(),
            crate::io::epoll::pwait2_available(),
        ) {
            self.g
                .warnings
                .push(Warning::new(Code::TimerMilliseconds, w));
        }
        self.g.env.local_drivers = engine.drivers().iter().map(|d| d.to_string()).collect();

        let rx = spawn_reader(&ctrl)?;
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
            pending: Default::default(),
            owd_windows: Vec::new(),
        };
        let outcome = run.timeline(plan, &phases, &mut self.g, &mut *self.observer);
        self.g.local_window = run.meter.window();

        // Stop our workers whatever happened, then collect what they leave.
        let outs = run.engine.take().expect("engine").join();
        self.g.local_rusage = Some(Rusage::process().since(&rusage0));
        let (datagrams_sent, error) =
            take_engines(&mut self.g, &outs, &parts, !plan.parts.is_empty());
        outcome?;
        if let Some(e) = error {
            bail!(e);
        }
        // Our flows have drained: tell the server, and read its final report.
        if parts
            .iter()
            .any(|p| p.test.traits().transport == Transport::Udp)
        {
            // Datagrams still queued on the path reach the server before it stops counting.
            std::thread::sleep(UDP_SETTLE);
        }
        write_msg(&mut run.ctrl, &ClientMsg::from(Finish { datagrams_sent }))?;
        let fin = run.wait_final(&mut self.g, plan, &mut *self.observer)?;
        self.take_final(fin);
        if let Some(before) = clock_before {
            let conn = handshake(self.target, false, |_, _| Ok(()));
            let after = super::one_way::after(conn, self.label(), plan.one_way_exchanges_only);
            if let Some(r) = self.g.one_way.as_mut() {
                super::one_way::finish(r, &outs, after);
            } else {
                // A mix: each part that carried the stamps its own, on
                // the one clock measured for the session.
                for ((out, p), rec) in outs.iter().zip(&parts).zip(&mut self.g.parts) {
                    if p.one_way {
                        let mut r = super::one_way::record(before, plan.interval_ns);
                        super::one_way::finish(&mut r, std::slice::from_ref(out), after);
                        rec.one_way = Some(r);
                    }
                }
            }
        }
        drop(outs);
        Ok(())
    }

    /// The spec, the server's ports and token, every part's flows opened,
    /// and `start` sent: the session's set-up, timed from `accepted`.
    fn set_up(
        &mut self,
        ctrl: &mut TcpStream,
        server_ip: IpAddr,
        parts: &[TestPlan],
    ) -> Result<(Instant, Vec<Flows>)> {
        let (plan, label) = (self.plan, self.label());
        write_msg(
            ctrl,
            &ClientMsg::from(Spec {
                plan: Box::new(plan.clone()),
                flows_per_listener: match plan.spreading.num_ports {
                    // --num-ports N: N listeners, the flows round them.
                    Some(n) => plan
                        .flows
                        .div_ceil(n)
                        .min(crate::io::spread::flows_per_listener()),
                    None => crate::io::spread::flows_per_listener(),
                },
            }),
        )?;
        let accepted = expect::<Accepted>(ctrl, label)?;
        let setup_t0 = Instant::now();
        let token = parse_token(&accepted.token)?;
        let ports = if plan.parts.is_empty() {
            vec![PartPorts {
                data_port: accepted.data_port,
                udp_ports: accepted.udp_ports.clone(),
                more_data_ports: accepted.more_data_ports.clone(),
                udp_addrs: accepted.udp_addrs.clone(),
            }]
        } else {
            accepted.parts.clone()
        };
        if ports.len() != parts.len() {
            bail!(
                "server {label} named ports for {} parts of {}",
                ports.len(),
                parts.len()
            );
        }
        let mut opened = Vec::with_capacity(parts.len());
        for (part, at) in parts.iter().zip(&ports) {
            let dial = Dial {
                bind: self.target.bind,
                server_ip,
                control_ip: ctrl.local_addr()?.ip(),
                token,
                // One socket per flow here, and as many again in this
                // process when the server is embedded.
                fds_needed: self.plan.flows as u64 * if self.target.embedded { 2 } else { 1 },
            };
            // Busy polling as this end's kernel takes it, refused by name
            // before any data socket is opened.
            self.g.local_busy_poll = crate::io::busypoll::as_set(
                part.busy_poll_us,
                part.prefer_busy_poll,
                part.test.is_udp(),
                server_ip.is_ipv6(),
            )?;
            if let Some(e) = crate::engine::uring_napi_refusal(part) {
                bail!(e);
            }
            let (flows, buffers) = dial.open_flows(part, at, &mut self.g.warnings)?;
            // What the kernel gives our data sockets of the buffers asked
            // for (the server's come in its final report).
            self.g.local_socket_buffers = buffers;
            opened.push(flows);
        }
        let mut udp_ports: Vec<Vec<u16>> = opened
            .iter_mut()
            .map(|f| std::mem::take(&mut f.udp_ports))
            .collect();
        let mut udp_addrs: Vec<Vec<AddrRun>> = opened
            .iter_mut()
            .map(|f| std::mem::take(&mut f.udp_addrs))
            .collect();
        let start = if plan.parts.is_empty() {
            Start {
                udp_ports: udp_ports.pop().unwrap_or_default(),
                parts_udp_ports: Vec::new(),
                udp_addrs: udp_addrs.pop().unwrap_or_default(),
                parts_udp_addrs: Vec::new(),
            }
        } else {
            Start {
                udp_ports: Vec::new(),
                parts_udp_ports: udp_ports,
                udp_addrs: Vec::new(),
                parts_udp_addrs: if udp_addrs.iter().all(Vec::is_empty) {
                    Vec::new()
                } else {
                    udp_addrs
                },
            }
        };
        // An agent holds here for its controller's start instant; the
        // round trip is what `start` and `started` take after it.
        let rtt = crate::sensors::tcp_info::TcpInfo::read(ctrl.as_raw_fd())
            .map(|i| Duration::from_micros(u64::from(i.min_rtt_us.unwrap_or(i.rtt_us))));
        let held = Instant::now();
        self.observer.hold_start(rtt)?;
        write_msg(ctrl, &ClientMsg::from(start))?;
        // The set-up is the session's own: the hold is not in it.
        Ok((setup_t0 + held.elapsed(), opened))
    }

    /// Keep what the server reported at the end: its totals, usage, window
    /// readings and errors. A server's figures are its word: one no machine
    /// can produce (a resident set of exabytes, more CPU time than the test
    /// had) is left out and said, not printed as a measurement.
    fn take_final(&mut self, fin: Final) {
        let g = &mut self.g;
        g.remote_total = Some(Counts::sum(&fin.counts));
        g.remote_final = fin.counts;
        for (p, r) in g.parts.iter_mut().zip(fin.part_retransmits) {
            p.remote_retransmits = r;
        }
        let bound = Rusage::bound_for(plan_wall_s(self.plan));
        match fin.rusage.implausible(&bound) {
            None => g.remote_rusage = Some(fin.rusage),
            Some(why) => g.warnings.push(Warning::new(
                Code::ServerUsageImplausible,
                format!("server reported {why}; its usage is left out"),
            )),
        }
        g.remote_window = fin
            .window
            .map(|w| *w)
            .filter(|w| w.rusage.and_then(|r| r.implausible(&bound)).is_none());
        g.remote_provenance = fin.provenance.map(|p| escaped(*p));
        g.remote_retransmits = fin.tcp_retransmits;
        g.remote_zerocopy = fin.zerocopy;
        g.remote_socket_buffers = fin.socket_buffers;
        g.remote_busy_poll = fin.busy_poll;
        g.remote_uring_napi = fin.uring_napi;
        g.remote_socket_options = fin.socket_options;
        // A name as the kernel keeps one, or nothing: it reaches the
        // result's text as the server wrote it.
        g.remote_congestion_control = fin
            .congestion_control
            .filter(|c| crate::plan::limits::is_congestion_name(c));
        g.remote_call_times = fin.call_times.map(|t| *t);
        g.train_gaps = fin.train_gaps.filter(|t| match t.implausible() {
            None => true,
            Some(why) => {
                g.warnings.push(Warning::new(
                    Code::ServerFigureImplausible,
                    format!("server reported {why}; its capacity figures are left out"),
                ));
                false
            }
        });
        for e in fin.errors {
            g.warnings.push(Warning::new(
                Code::ServerError,
                format!("server: {}", text::message(&e)),
            ));
        }
        if fin.refused > crate::stats::dispersion::MAX_COUNT {
            g.warnings.push(Warning::new(
                Code::ServerFigureImplausible,
                format!(
                    "server reported final.refused {} (at most 2^48); left out",
                    fin.refused
                ),
            ));
        } else if fin.refused > 0 {
            g.warnings.push(Warning::new(Code::ServerRefused, format!(
                "server refused {} data connection(s) or datagram(s) (another address, a wrong or missing token, or sent before the test)",
                fin.refused
            )));
        }
    }
}

/// A server's provenance with the control characters of every string in
/// it escaped, as its software and driver names are: its kernel's name
/// and release reach `--keyval` and CSV as they are, where a newline
/// would forge a `KEY=value` line or a row.
fn escaped(p: Provenance) -> Provenance {
    let Ok(mut v) = serde_json::to_value(&p) else {
        return Provenance::default();
    };
    text::escape_json_strings(&mut v);
    serde_json::from_value(v).unwrap_or_default()
}

/// The client's session against a real embedded server, and against a fake
/// server on loopback that answers out of turn (kept in their own file).
#[cfg(test)]
#[path = "client_tests.rs"]
mod tests;
