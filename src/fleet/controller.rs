//! The controller: one control connection to each agent, on a thread of
//! its own, and the main thread that holds the plan, the clock and the
//! barrier.
//!
//! In order: the target's clock and whether it asks for a key (a clock
//! exchange on a connection of the controller's own); on every agent at
//! once, the key, a clock exchange, the run's request and its ready; the
//! start instant, sent to each agent on its own clock; the agents'
//! intervals as they come, one row per interval once every running agent
//! has sent it; their results; the clocks again. An agent that fails
//! before the start stops the whole run (the others are released and send
//! nothing); one that fails after it is named and the others run on.
//!
//! Threads: one per agent and the main one, each agent's thread ending
//! with its connection; memory: each agent's intervals and result.

use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};

use super::barrier;
use super::merge::{self, AgentRecord, Gathered, Origin};
use crate::clock::{SyncState, monotonic_ns, unix_now_ns};
use crate::control::client::{Observer, Target, handshake};
use crate::control::clocks::{Burst, EXCHANGES, ping};
use crate::control::deadline::read_msg_within;
use crate::control::features;
use crate::control::proto::{
    AgentRun, AgentStart, ClientMsg, FrameError, MAX_FRAME, ServerMsg, write_msg,
};
use crate::plan::TestPlan;
use crate::result::{ClockOffset, Environment, FleetTiming, Interval, Provenances, TestResult};
use crate::stats::offset::{ClockMap, Estimate, estimate};

/// The most agents one run takes (`--from`): a thread and a connection each.
pub const MAX_AGENTS: usize = 1024;

/// How long an agent may take from its run's request to its ready: its
/// connection to the target and its flows' (this, plus 10 ms a flow).
pub const SETUP_TIMEOUT: Duration = Duration::from_secs(15);

/// How long an agent may send nothing during its run before it counts as
/// stalled: an interval, plus the longest its own session waits for the
/// target (a sample, 12 s on a path its datagrams fill; the drain and the
/// final report, 10 s) and 3 s more.
pub const STALL_SLACK: Duration = Duration::from_secs(15);

/// A run from many agents toward one target.
#[derive(Clone, Debug)]
pub struct Fleet {
    /// Each agent as given to `--from`, and where it resolved.
    pub agents: Vec<(String, SocketAddr)>,
    /// The target, with the fleet's key (the agents' and the target's).
    pub target: Target,
    /// The plan each agent runs.
    pub plan: TestPlan,
}

/// What an agent's thread tells the main one.
enum Event {
    /// Its clock before the run.
    Clock(usize, Burst, Option<Estimate>),
    /// Its flows are connected; the connection, for the main thread to
    /// cut when the agent must stop.
    Ready(usize, TcpStream),
    Sample(usize, u64, Box<Interval>),
    Final(usize, Option<u64>, Box<TestResult>),
    /// Its clock after the run.
    After(usize, Option<Estimate>),
    /// It failed; whether it had been told to start.
    Failed(usize, String),
}

/// The target's clock and its hello's facts.
struct TargetFacts {
    keyed: bool,
    start_timeout: Option<(u64, u64)>,
    software: String,
    burst: Burst,
}

/// A clock exchange with the target on a connection of its own.
fn target_clock(t: &Target) -> Result<TargetFacts> {
    let (mut ctrl, hello) = handshake(t, true, |hello, peer| {
        if !hello.features.iter().any(|f| f == features::CLOCK) {
            bail!(
                "{peer} ({}) does not take clock exchanges: an older thrum; the target of --from must be this version or later",
                crate::text::echo(&hello.software)
            );
        }
        Ok(())
    })?;
    let burst = ping(&mut ctrl, &t.label, EXCHANGES)?;
    Ok(TargetFacts {
        keyed: hello.nonce.is_some(),
        start_timeout: hello
            .limits
            .as_ref()
            .map(|l| (l.start_timeout_ns, l.start_timeout_per_flow_ns)),
        software: crate::text::echo(&hello.software),
        burst,
    })
}

/// One agent's side of the run, on its own thread (module doc).
fn drive_agent(
    i: usize,
    agent: Target,
    run: AgentRun,
    tx: &Sender<Event>,
    start: Receiver<u64>,
) -> Result<()> {
    let label = agent.label.clone();
    let (mut ctrl, _) = handshake(&agent, false, |hello, peer| {
        if hello.nonce.is_none() {
            bail!(
                "{peer} asks for no key, so it is not an agent (an agent runs with --agent and --psk-file)"
            );
        }
        if !hello.features.iter().any(|f| f == features::CLOCK) {
            bail!(
                "{peer} ({}) is an older thrum, without clock exchanges or agents",
                crate::text::echo(&hello.software)
            );
        }
        if let Some(need) = hello.lacks(&run.plan) {
            bail!(
                "{}: {peer} ({}) does not apply it; upgrade the agent or run without {}",
                need.flag,
                crate::text::echo(&hello.software),
                need.flag
            );
        }
        Ok(())
    })?;
    let burst = ping(&mut ctrl, &label, EXCHANGES)?;
    let est = estimate(&burst.exchanges);
    let _ = tx.send(Event::Clock(i, burst, est));
    let flows = run.plan.flows;
    let interval = Duration::from_nanos(run.plan.interval_ns);
    write_msg(&mut ctrl, &ClientMsg::from(run))?;
    let setup = SETUP_TIMEOUT + Duration::from_millis(10) * flows;
    match read(&mut ctrl, &label, setup)? {
        ServerMsg::AgentReady(_) => {}
        ServerMsg::AgentFinal(f) => bail!(
            "{}",
            f.result
                .summary
                .error
                .as_deref()
                .map(crate::text::message)
                .unwrap_or_else(|| "ended before it was ready".into())
        ),
        m => bail!("sent '{}' where 'agent_ready' was expected", m.kind()),
    }
    let _ = tx.send(Event::Ready(i, ctrl.try_clone()?));
    // The main thread drops the sender to call the run off.
    let at_ns = start
        .recv()
        .map_err(|_| anyhow!("called off before the start"))?;
    write_msg(&mut ctrl, &ClientMsg::from(AgentStart { at_ns }))?;
    let stall = interval + STALL_SLACK;
    loop {
        match read(&mut ctrl, &label, stall).map_err(|e| match e.downcast_ref::<Stalled>() {
            Some(_) => anyhow!(
                "stalled: sent nothing for {:.0} s mid-run",
                stall.as_secs_f64()
            ),
            None => e,
        })? {
            ServerMsg::AgentSample(s) => {
                let _ = tx.send(Event::Sample(i, s.t0_ns, s.interval));
            }
            ServerMsg::AgentFinal(f) => {
                let _ = tx.send(Event::Final(i, f.t0_ns, escaped(f.result)));
                break;
            }
            m => bail!("sent '{}' during its run", m.kind()),
        }
    }
    let after = ping(&mut ctrl, &label, EXCHANGES).ok();
    let _ = tx.send(Event::After(i, after.and_then(|b| estimate(&b.exchanges))));
    Ok(())
}

/// An agent's result with the control characters of every string in it
/// escaped: its warnings, errors and provenance are its word, and reach
/// the terminal and the CSV as the server's do.
fn escaped(r: Box<TestResult>) -> Box<TestResult> {
    let Ok(mut v) = serde_json::to_value(&r) else {
        return r;
    };
    crate::text::escape_json_strings(&mut v);
    serde_json::from_value(v).map(Box::new).unwrap_or(r)
}

/// Silence past the limit: the agent stalled (or never answered).
#[derive(Debug)]
struct Stalled;

impl std::fmt::Display for Stalled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("no answer in time")
    }
}

impl std::error::Error for Stalled {}

/// The agent's next message within `limit`; its error message, a closed
/// connection or silence is an error that says so.
fn read(ctrl: &mut TcpStream, label: &str, limit: Duration) -> Result<ServerMsg> {
    match read_msg_within::<ServerMsg>(ctrl, MAX_FRAME, limit) {
        Ok(ServerMsg::Error(e)) => bail!("refused: {}", crate::text::message(&e.message)),
        Ok(m) => Ok(m),
        Err(FrameError::Timeout) => Err(Stalled.into()),
        Err(FrameError::Closed) => bail!("closed the connection (did the agent at {label} stop?)"),
        Err(e) => Err(anyhow!(e)).context(format!("the agent at {label}")),
    }
}

/// One agent as the main thread follows it.
struct Follow {
    rec: AgentRecord,
    burst: Option<Burst>,
    ready: bool,
    /// The connection, to cut it when the run is called off.
    conn: Option<TcpStream>,
    start: Option<Sender<u64>>,
    /// Done: its result came, or it failed.
    done: bool,
    after: Option<Estimate>,
}

/// Run `fleet`, telling `observer` of each row as every running agent has
/// sent its interval. Never fails: an error lands in `summary.error`,
/// with what was measured.
pub fn run(fleet: &Fleet, observer: &mut dyn Observer) -> TestResult {
    let mut c = Controller::new(fleet);
    let facts = match target_clock(&fleet.target) {
        Ok(f) => f,
        Err(e) => {
            let e = format!("the target {}: {e:#}", fleet.target.label);
            return c.result(Origin::default(), Vec::new(), Some(e));
        }
    };
    let (rx, threads) = c.spawn_agents(facts.keyed);
    if let Err(e) = c.await_ready(&rx, &facts) {
        c.call_off();
        let clock = clocks(&c.follows, &facts, None, &fleet.target.label);
        return c.result(Origin::default(), clock, Some(e));
    }
    let origin = c.start();
    c.follow(&rx, &origin, observer);
    // The clocks after: the agents' (their threads ping as their results
    // come) and the target's.
    let target_after = target_clock(&fleet.target).ok();
    c.await_after(&rx);
    for h in threads {
        let _ = h.join();
    }
    c.timing.controller_max_rss_kb = process_max_rss_kb();
    let clock = clocks(
        &c.follows,
        &facts,
        target_after.as_ref(),
        &fleet.target.label,
    );
    let mut r = c.result(origin, clock, None);
    r.environment.server_software = Some(facts.software);
    r
}

/// The main thread's state: the agents as it follows them, and the timing.
struct Controller<'a> {
    fleet: &'a Fleet,
    began: Instant,
    environment: Environment,
    follows: Vec<Follow>,
    timing: FleetTiming,
}

impl<'a> Controller<'a> {
    fn new(fleet: &'a Fleet) -> Controller<'a> {
        Controller {
            fleet,
            began: Instant::now(),
            environment: Environment::gather(),
            follows: fleet
                .agents
                .iter()
                .map(|(host, _)| Follow {
                    rec: AgentRecord {
                        host: host.clone(),
                        clock: None,
                        t0_ns: None,
                        samples: Vec::new(),
                        result: None,
                        lost: None,
                    },
                    burst: None,
                    ready: false,
                    conn: None,
                    start: None,
                    done: false,
                    after: None,
                })
                .collect(),
            timing: FleetTiming::default(),
        }
    }

    /// A thread per agent ([`drive_agent`]); their events come on the
    /// receiver.
    fn spawn_agents(
        &mut self,
        target_keyed: bool,
    ) -> (Receiver<Event>, Vec<std::thread::JoinHandle<()>>) {
        let fleet = self.fleet;
        let (tx, rx) = mpsc::channel::<Event>();
        let mut threads = Vec::with_capacity(fleet.agents.len());
        for (i, (host, addr)) in fleet.agents.iter().enumerate() {
            let (start_tx, start_rx) = mpsc::channel();
            self.follows[i].start = Some(start_tx);
            let agent = Target {
                addr: *addr,
                label: host.clone(),
                bind: fleet.target.bind,
                embedded: false,
                psk: fleet.target.psk.clone(),
                wait: None,
            };
            let run = AgentRun {
                plan: Box::new(fleet.plan.clone()),
                target: fleet.target.addr,
                target_label: fleet.target.label.clone(),
                target_keyed,
            };
            let thread_tx = tx.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("thrum-agent-{i}"))
                .spawn(move || {
                    if let Err(e) = drive_agent(i, agent, run, &thread_tx, start_rx) {
                        let _ = thread_tx.send(Event::Failed(i, format!("{e:#}")));
                    }
                });
            match spawned {
                Ok(h) => threads.push(h),
                Err(e) => {
                    let _ = tx.send(Event::Failed(i, format!("no thread for it: {e}")));
                }
            }
        }
        (rx, threads)
    }

    /// Every agent's clock and ready, within the wait the target's start
    /// timeout leaves after the first; or why the run is called off.
    fn await_ready(&mut self, rx: &Receiver<Event>, facts: &TargetFacts) -> Result<(), String> {
        let flows = self.fleet.plan.flows;
        let wait = barrier::ready_wait(facts.start_timeout, flows);
        let setup_by =
            self.began + SETUP_TIMEOUT + Duration::from_millis(10) * flows + Duration::from_secs(5);
        let mut first_ready: Option<Instant> = None;
        let follows = &mut self.follows;
        while follows.iter().any(|f| !f.ready) {
            let by = first_ready.map_or(setup_by, |t| (t + wait).min(setup_by));
            match rx.recv_timeout(by.saturating_duration_since(Instant::now())) {
                Ok(Event::Clock(i, b, e)) => {
                    let Some(before) = e else {
                        return Err(format!(
                            "agent {}: its clock exchange gave no estimate; nothing was run",
                            follows[i].rec.host
                        ));
                    };
                    follows[i].rec.clock = Some(ClockMap {
                        before,
                        after: None,
                    });
                    follows[i].burst = Some(b);
                }
                Ok(Event::Ready(i, conn)) => {
                    follows[i].ready = true;
                    follows[i].conn = Some(conn);
                    first_ready.get_or_insert_with(Instant::now);
                }
                Ok(Event::Failed(i, e)) => {
                    let host = follows[i].rec.host.clone();
                    follows[i].rec.lost = Some(e.clone());
                    return Err(format!("agent {host}: {e}; nothing was run"));
                }
                Ok(_) => {}
                Err(_) => {
                    let late: Vec<&str> = follows
                        .iter()
                        .filter(|f| !f.ready)
                        .map(|f| f.rec.host.as_str())
                        .collect();
                    return Err(format!(
                        "agent(s) {} not ready within {:.1} s of the first (the target waits {:.1} s for a start); nothing was run",
                        late.join(", "),
                        wait.as_secs_f64(),
                        facts.start_timeout.map_or(5.0, |t| t.0 as f64 / 1e9)
                    ));
                }
            }
        }
        self.timing.setup_s = self.began.elapsed().as_secs_f64();
        Ok(())
    }

    /// Release every agent: its hold reads a closed connection, its session
    /// ends, and the target's sessions end unstarted.
    fn call_off(&mut self) {
        self.timing.setup_s = self.began.elapsed().as_secs_f64();
        for f in &mut self.follows {
            f.start = None;
            if let Some(c) = f.conn.take() {
                let _ = c.shutdown(std::net::Shutdown::Both);
            }
            if f.rec.lost.is_none() {
                f.rec.lost = Some("called off before the start".into());
            }
        }
    }

    /// The barrier: one instant on our clock, sent to each agent on its
    /// own; the run's origin.
    fn start(&mut self) -> Origin {
        let ready = Instant::now();
        let paths: Vec<u64> = self
            .follows
            .iter()
            .filter_map(|f| f.rec.clock.map(|c| c.before.min_path_ns))
            .collect();
        let margin = barrier::margin(&paths);
        let origin = Origin {
            mono_ns: monotonic_ns() + margin.as_nanos() as u64,
            unix_ns: unix_now_ns() + margin.as_nanos() as u64,
        };
        for f in &mut self.follows {
            if let (Some(c), Some(s)) = (f.rec.clock, f.start.take()) {
                let _ = s.send(barrier::on_agent(&c, origin.mono_ns));
            }
        }
        self.timing.barrier_s = margin.as_secs_f64() + ready.elapsed().as_secs_f64();
        self.timing.controller_threads = process_threads();
        origin
    }

    /// The run: each agent's intervals and result as they come, a row as
    /// every running agent has sent it, until every agent is done or the
    /// run's time (and a stall's twice) is up. Ctrl-C cuts every agent's
    /// connection: each stops when it cannot send its next interval.
    fn follow(&mut self, rx: &Receiver<Event>, origin: &Origin, observer: &mut dyn Observer) {
        let plan = &self.fleet.plan;
        let total = Duration::from_nanos(plan.warmup_ns + plan.duration_ns + plan.cooldown_ns);
        let run_by = Instant::now() + total + barrier::MIN_MARGIN + STALL_SLACK * 2;
        let follows = &mut self.follows;
        let mut next_row = 0u32;
        while follows.iter().any(|f| !f.done) {
            if crate::control::stop::requested() {
                for c in follows.iter().filter_map(|f| f.conn.as_ref()) {
                    let _ = c.shutdown(std::net::Shutdown::Both);
                }
            }
            let left = run_by.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left.min(Duration::from_millis(500))) {
                Ok(Event::Sample(i, t0, iv)) => {
                    let f = &mut follows[i];
                    f.rec.t0_ns.get_or_insert(t0);
                    f.rec.samples.push(*iv);
                }
                Ok(Event::Final(i, t0, r)) => {
                    let f = &mut follows[i];
                    f.rec.t0_ns = t0.or(f.rec.t0_ns);
                    f.rec.result = Some(*r);
                    f.done = true;
                }
                Ok(Event::Failed(i, e)) if !follows[i].done => {
                    follows[i].rec.lost = Some(e);
                    follows[i].done = true;
                }
                Ok(Event::After(i, e)) => follows[i].after = e,
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) if Instant::now() < run_by => {}
                Err(_) => {
                    for f in follows.iter_mut().filter(|f| !f.done) {
                        f.rec.lost = Some("sent no result by the run's end".into());
                        f.done = true;
                        if let Some(c) = &f.conn {
                            let _ = c.shutdown(std::net::Shutdown::Both);
                        }
                    }
                }
            }
            next_row = live_rows(follows, next_row, origin, observer);
        }
    }

    /// The agents' clocks after the run (5 s at most), then every
    /// connection closed.
    fn await_after(&mut self, rx: &Receiver<Event>) {
        let by = Instant::now() + Duration::from_secs(5);
        while self
            .follows
            .iter()
            .any(|f| f.rec.lost.is_none() && f.after.is_none())
        {
            match rx.recv_timeout(by.saturating_duration_since(Instant::now())) {
                Ok(Event::After(i, e)) => self.follows[i].after = e,
                Ok(_) => {}
                Err(_) => break,
            }
        }
        for f in &mut self.follows {
            if let Some(c) = f.rec.clock.as_mut() {
                c.after = f.after;
            }
            if let Some(c) = f.conn.take() {
                let _ = c.shutdown(std::net::Shutdown::Both);
            }
        }
    }

    /// What was gathered, as one result (`merge`).
    fn result(self, origin: Origin, clock: Vec<ClockOffset>, error: Option<String>) -> TestResult {
        let fleet = self.fleet;
        merge::merge(Gathered {
            plan: fleet.plan.clone(),
            target: fleet.target.label.clone(),
            target_address: fleet.target.addr.to_string(),
            origin,
            agents: self.follows.into_iter().map(|f| f.rec).collect(),
            clock,
            timing: self.timing,
            environment: self.environment,
            provenance: Provenances {
                local: Some(crate::sensors::Provenance::gather(None)),
                remote: None,
            },
            error,
        })
    }
}

/// Tell the observer of the rows from `next` on that every agent still
/// running has sent; returns the next row to wait for.
fn live_rows(
    follows: &[Follow],
    mut next: u32,
    origin: &Origin,
    observer: &mut dyn Observer,
) -> u32 {
    loop {
        let waiting = follows.iter().any(|f| {
            !f.done && f.rec.clock.is_some() && !f.rec.samples.iter().any(|iv| iv.index == next)
        });
        let parts: Vec<(&str, &ClockMap, u64, &Interval)> = follows
            .iter()
            .filter_map(|f| {
                let iv = f.rec.samples.iter().find(|iv| iv.index == next)?;
                Some((f.rec.host.as_str(), f.rec.clock.as_ref()?, f.rec.t0_ns?, iv))
            })
            .collect();
        if waiting || parts.is_empty() {
            return next;
        }
        observer.on_interval(&merge::row(next, &parts, origin));
        next += 1;
    }
}

/// Every clock's offset for the result: the agents', then the target's.
fn clocks(
    follows: &[Follow],
    target: &TargetFacts,
    target_after: Option<&TargetFacts>,
    target_label: &str,
) -> Vec<ClockOffset> {
    let mut out = Vec::new();
    for f in follows {
        if let (Some(c), Some(b)) = (f.rec.clock, &f.burst) {
            out.push(offset(
                &f.rec.host,
                "agent",
                c,
                b.realtime_offset_ns,
                b.sync,
            ));
        }
    }
    if let Some(before) = estimate(&target.burst.exchanges) {
        let c = ClockMap {
            before,
            after: target_after.and_then(|t| estimate(&t.burst.exchanges)),
        };
        out.push(offset(
            target_label,
            "target",
            c,
            target.burst.realtime_offset_ns,
            target.burst.sync,
        ));
    }
    out
}

fn offset(
    host: &str,
    role: &str,
    c: ClockMap,
    realtime_offset_ns: Option<i64>,
    sync: Option<SyncState>,
) -> ClockOffset {
    ClockOffset {
        host: host.to_string(),
        role: role.to_string(),
        method: "exchanges_monotonic".into(),
        offset_ns: c.before.offset_ns,
        error_ns: c.before.error_ns,
        offset_after_ns: c.after.map(|a| a.offset_ns),
        error_after_ns: c.after.map(|a| a.error_ns),
        drift_ppm: c.drift_ppm(),
        drift_error_ppm: c.drift_error_ppm(),
        min_rtt_ns: c.before.min_path_ns,
        exchanges: c.before.exchanges,
        kept: c.before.kept,
        realtime_offset_ns,
        sync,
    }
}

/// A field of /proc/self/status, as a number (its first word).
fn status_field(name: &str) -> Option<u64> {
    std::fs::read_to_string("/proc/self/status")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix(name))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn process_threads() -> u32 {
    status_field("Threads:").unwrap_or(0) as u32
}

fn process_max_rss_kb() -> u64 {
    status_field("VmHWM:").unwrap_or(0)
}

/// The controller against real servers in this process, on loopback: two
/// agents and a target sharing one key, a server without `--agent`, and a
/// controller with the wrong key.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::auth::Psk;
    use crate::control::client::Quiet;
    use crate::control::server::{EmbeddedServer, Server, ServerConfig};
    use crate::plan::TestKind;

    fn key(b: u8) -> Psk {
        Psk::from_bytes(vec![b; 32]).unwrap()
    }

    fn server(agent: bool, psk: Option<Psk>) -> EmbeddedServer {
        let mut cfg = ServerConfig::new(SocketAddr::from(([127, 0, 0, 1], 0)));
        cfg.log = false;
        cfg.agent = agent;
        cfg.psk = psk;
        Server::bind(cfg).unwrap().spawn().unwrap()
    }

    fn fleet(agents: &[&EmbeddedServer], target: &EmbeddedServer, psk: Psk) -> Fleet {
        let mut plan = TestPlan::new(TestKind::TcpRr);
        plan.warmup_ns = 200_000_000;
        plan.duration_ns = 1_000_000_000;
        plan.interval_ns = 500_000_000;
        Fleet {
            agents: agents
                .iter()
                .enumerate()
                .map(|(i, a)| (format!("agent{i}"), a.addr))
                .collect(),
            target: Target {
                addr: target.addr,
                label: "target".into(),
                bind: None,
                embedded: false,
                psk: Some(psk),
                wait: None,
            },
            plan,
        }
    }

    #[test]
    fn two_agents_run_in_step_toward_one_target() {
        let (a, b) = (server(true, Some(key(1))), server(true, Some(key(1))));
        let target = server(false, Some(key(1)));
        let r = run(&fleet(&[&a, &b], &target, key(1)), &mut Quiet);
        let s = &r.summary;
        assert_eq!(s.error, None, "{:?}", s.warnings);
        assert_eq!(s.clients.len(), 2);
        let sum: f64 = s
            .clients
            .iter()
            .map(|c| c.summary.transactions_per_s.unwrap())
            .sum();
        assert!((s.transactions_per_s.unwrap() - sum).abs() < 1e-6);
        assert!(s.fairness_jain.is_some());
        // One process, one clock: every offset within its bound of zero.
        assert_eq!(r.clock.len(), 3);
        for c in &r.clock {
            assert!(c.offset_ns.unsigned_abs() <= c.error_ns, "{c:?}");
            assert!(c.offset_after_ns.is_some(), "{c:?}");
        }
        assert!(r.intervals.iter().all(|iv| iv.clients.len() == 2));
        let f = s.fleet.as_ref().unwrap();
        assert_eq!((f.agents, f.completed), (2, 2));
    }

    /// A server without --agent refuses, naming the flag, and a key the
    /// agents do not hold is refused by the first: nothing runs.
    #[test]
    fn refused_agents_run_nothing() {
        let plain = server(false, Some(key(1)));
        let target = server(false, Some(key(1)));
        let r = run(&fleet(&[&plain], &target, key(1)), &mut Quiet);
        let e = r.summary.error.unwrap();
        assert!(
            e.contains("--agent") && e.contains("nothing was run"),
            "{e}"
        );
        assert!(r.intervals.is_empty());

        let agent = server(true, Some(key(1)));
        let other = server(false, Some(key(2)));
        let r = run(&fleet(&[&agent], &other, key(2)), &mut Quiet);
        let e = r.summary.error.unwrap();
        assert!(e.contains("wrong pre-shared key"), "{e}");
        assert!(r.intervals.is_empty());
    }
}
