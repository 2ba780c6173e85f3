//! The agent's end of a fleet run: a server started with `--agent` runs a
//! test as a client toward another thrum server, on behalf of a controller
//! that proved its key (`fleet`, above, is the controller).
//!
//! An agent sends traffic for someone else, so it is an amplifier by
//! nature; what bounds it (docs/fleet.md, "Who may make an agent send"):
//! it takes the request only from a connection that answered its key's
//! challenge (`session::handshake`), only with `--agent` (a server without
//! it refuses, naming the flag), and only within its own limits, the
//! server's: the run's plan is checked as a spec would be (flows, threads,
//! duration, memory, marks, TOS, transmit delay) and reserves its memory,
//! threads and (with `--spin`) spinning workers beside the server's
//! sessions. Its traffic goes only to a
//! thrum server: the client's session sends nothing but its hello until
//! the target has answered with a thrum hello (and proved nothing less
//! than a normal client would ask), so a port that is not thrum's gets a
//! connection and one hello frame.
//!
//! The run is the ordinary client session (`client::Session`), with an
//! observer ([`Agent`]) that holds it between its flows' set-up and its
//! start until the controller's start instant, sends each interval to the
//! controller as it completes, and stops the run when the controller is
//! gone. Before the start and after the run it answers clock pings.

use std::net::TcpStream;
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow, bail};

use super::admission::{Reservation, Ticket};
use super::client::{Observer, Session, Target};
use super::clocks::{MAX_PINGS, pong};
use super::limits::{memory_estimate, session_threads};
use super::proto::{
    AgentFinal, AgentReady, AgentRun, AgentSample, AgentStart, ClientMsg, FrameError, MAX_FRAME,
    ServerMsg, write_msg,
};
use super::session::{ServerConfig, SessionState, read_any, refuse};
use crate::clock::{monotonic_ns, monotonic_ns_at};
use crate::result::{Interval, TestResult};

/// What a server without `--agent` answers an agent's request.
pub const NOT_AN_AGENT: &str = "this server does not run tests for others: start it with --agent (thrum server --agent --psk-file FILE) to let a controller holding its key use it as an agent";

/// How long an agent holds its connected flows for the controller's
/// message (a ping, the start); the target waits less for `start` (its
/// start timeout) and ends the session first.
pub const HOLD_TIMEOUT: Duration = Duration::from_secs(30);

/// How far ahead a start instant may be.
pub const MAX_START_AHEAD: Duration = Duration::from_secs(10);

/// How long the agent waits for each clock ping after its run, before it
/// ends the session.
pub const AFTER_TIMEOUT: Duration = Duration::from_secs(5);

/// The largest final result sent whole; a larger one loses its per-flow
/// interval counts (the controller sums clients, not flows).
const FINAL_WHOLE_BYTES: usize = MAX_FRAME / 2;

/// Serve an agent's request on `ctrl`, whose peer proved the key.
pub(crate) fn serve(
    mut ctrl: TcpStream,
    config: &ServerConfig,
    state: &mut SessionState,
    ticket: &mut Ticket,
    run: AgentRun,
) -> Result<()> {
    let AgentRun {
        plan,
        target,
        target_label,
        target_keyed,
    } = run;
    state.test = Some(plan.test.name());
    if !config.agent {
        return Err(refuse(&mut ctrl, NOT_AN_AGENT.into()));
    }
    let Some(psk) = &config.psk else {
        return Err(refuse(
            &mut ctrl,
            "an agent acts only for a controller that holds its key: --agent needs --psk-file"
                .into(),
        ));
    };
    if let Err(e) = plan.validate() {
        return Err(refuse(&mut ctrl, format!("invalid agent run: {e}")));
    }
    // The agent runs the client's end: with --spin its own workers
    // (--threads) spin here, each a CPU of this server's budget.
    let spinning = if plan.spin {
        u64::from(plan.threads)
    } else {
        0
    };
    if let Err(e) = config.limits.check(&plan).and_then(|()| {
        config
            .limits
            .check_spin(spinning, "client worker threads (--threads)")
    }) {
        return Err(refuse(
            &mut ctrl,
            format!("agent run refused: {}", e.replace("server", "agent")),
        ));
    }
    let want = Reservation {
        bytes: memory_estimate(&plan),
        threads: session_threads(&plan),
        ports: 0,
        spin: spinning,
    };
    let l = &config.limits;
    if let Err(e) = ticket.reserve(want, l.totals(), l.client_share()) {
        return Err(refuse(&mut ctrl, e));
    }
    let target = Target {
        addr: target,
        label: crate::text::echo(&target_label),
        bind: None,
        embedded: false,
        psk: target_keyed.then(|| psk.clone()),
        // The controller started every agent at one instant: a target
        // that refuses is a failure to report, not one to wait out.
        wait: None,
    };
    state.started = true;
    // Writes to a controller that stopped reading must not hold the run:
    // a second, then the run stops as if it were gone.
    ctrl.set_write_timeout(Some(Duration::from_secs(2)))?;
    let mut agent = Agent {
        ctrl: ctrl.try_clone()?,
        t0_ns: None,
        gone: false,
    };
    let result = Session::new(&target, &plan, &mut agent).run();
    let (t0_ns, gone) = (agent.t0_ns, agent.gone);
    if gone {
        bail!("the controller went away mid-run; the run stopped");
    }
    let error = result.summary.error.clone();
    let result = Box::new(whole_or_slim(result));
    ctrl.set_write_timeout(Some(Duration::from_secs(10)))?;
    write_msg(&mut ctrl, &ServerMsg::from(AgentFinal { t0_ns, result }))?;
    answer_after(&mut ctrl)?;
    match error {
        Some(e) => Err(anyhow!("the agent's run toward {target_label}: {e}")),
        None => Ok(()),
    }
}

/// The controller's clock pings after the run, until it closes.
fn answer_after(ctrl: &mut TcpStream) -> Result<()> {
    for _ in 0..MAX_PINGS {
        let m = match super::deadline::read_msg_within::<ClientMsg>(ctrl, 4096, AFTER_TIMEOUT) {
            Err(FrameError::Closed) => return Ok(()),
            Err(e) => return Err(anyhow!(e).context("after the run")),
            Ok(m) => m,
        };
        let rx_ns = monotonic_ns();
        match m {
            ClientMsg::ClockPing(p) => pong(ctrl, p.seq, rx_ns)?,
            m => {
                return Err(refuse(
                    ctrl,
                    format!("expected 'clock_ping' after the run, got '{}'", m.kind()),
                ));
            }
        }
    }
    Ok(())
}

/// The result as sent to the controller: whole, or without its per-flow
/// interval counts when whole it would pass [`FINAL_WHOLE_BYTES`].
fn whole_or_slim(mut r: TestResult) -> TestResult {
    let size = serde_json::to_vec(&r).map_or(usize::MAX, |v| v.len());
    if size > FINAL_WHOLE_BYTES {
        for iv in &mut r.intervals {
            slim(iv);
        }
    }
    r
}

/// An interval without its per-flow figures, for the wire.
fn slim(iv: &mut Interval) {
    iv.local = Vec::new();
    iv.remote = Vec::new();
    iv.flow_latency_ns = Vec::new();
    if let Some(t) = &mut iv.tcp_info {
        t.sockets = Vec::new();
    }
}

/// The agent's observer of its run: the hold before the start, the
/// intervals to the controller, the stop when the controller is gone.
struct Agent {
    ctrl: TcpStream,
    /// CLOCK_MONOTONIC when the workers started, ns.
    t0_ns: Option<u64>,
    /// A write to the controller failed: it is gone, and the run stops.
    gone: bool,
}

impl Observer for Agent {
    fn hold_start(&mut self, target_rtt: Option<Duration>) -> Result<()> {
        write_msg(&mut self.ctrl, &ServerMsg::from(AgentReady {}))?;
        let mut pings = 0;
        let at_ns = loop {
            let m = read_any(&mut self.ctrl, 4096, HOLD_TIMEOUT, "agent_start")
                .map_err(|e| e.context("waiting for the controller's start"))?;
            let rx_ns = monotonic_ns();
            match m {
                ClientMsg::ClockPing(p) if pings < MAX_PINGS => {
                    pings += 1;
                    pong(&mut self.ctrl, p.seq, rx_ns)?;
                }
                ClientMsg::AgentStart(AgentStart { at_ns }) => break at_ns,
                m => {
                    return Err(refuse(
                        &mut self.ctrl,
                        format!("expected 'agent_start', got '{}'", m.kind()),
                    ));
                }
            }
        };
        let now = monotonic_ns();
        if at_ns > now + MAX_START_AHEAD.as_nanos() as u64 {
            return Err(refuse(
                &mut self.ctrl,
                format!(
                    "the start instant is {:.1} s away (accepted: up to {} s)",
                    (at_ns - now) as f64 / 1e9,
                    MAX_START_AHEAD.as_secs()
                ),
            ));
        }
        // `start` and `started` cross the path before the workers start:
        // send a round trip early, so that they start at the instant.
        let rtt = target_rtt.map_or(0, |d| d.as_nanos() as u64);
        wait_until(at_ns.saturating_sub(rtt));
        Ok(())
    }

    fn on_started(&mut self, t0: Instant) {
        self.t0_ns = Some(monotonic_ns_at(t0));
    }

    fn on_interval(&mut self, iv: &Interval) {
        if self.gone {
            return;
        }
        let mut interval = Box::new(iv.clone());
        slim(&mut interval);
        let sample = AgentSample {
            t0_ns: self.t0_ns.unwrap_or(0),
            interval,
        };
        if write_msg(&mut self.ctrl, &ServerMsg::from(sample)).is_err() {
            self.gone = true;
        }
    }

    fn stop_requested(&self) -> bool {
        self.gone
    }
}

/// Sleep until CLOCK_MONOTONIC reads `ns`, the last millisecond in short
/// sleeps (a long sleep overshoots by the timer's slack).
fn wait_until(ns: u64) {
    loop {
        let now = monotonic_ns();
        if now >= ns {
            return;
        }
        let left = Duration::from_nanos(ns - now);
        std::thread::sleep(if left > Duration::from_millis(2) {
            left - Duration::from_millis(1)
        } else {
            Duration::from_micros(50).min(left)
        });
    }
}
