//! The timeline of a running test, on the client: ticks at every interval
//! boundary and phase change, the server's samples as they come, and the
//! drain at the end.
//!
//! The client owns the clock. At every tick it snapshots its own counters,
//! switches its workers' phase and sends a `tick` that says when it was
//! due; the server answers with a `sample` of its counters at that moment
//! on its clock (`control::ticks`). Intervals therefore line up on both
//! ends however late a tick arrives, and none straddles a phase. Samples
//! arrive on a reader thread, so the clock never waits on the network; a
//! server that leaves a tick unanswered for [`sample_timeout`] ends the
//! test.

use std::net::TcpStream;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};

use super::proto::{ClientMsg, Final, FrameError, ServerMsg, Tick, write_msg};
use crate::analysis::{Gathered, LocalSample, RemoteSample, interval};
use crate::engine::Engines;
use crate::plan::TestPlan;
use crate::plan::{LoadStep, Loss, Phase};
use crate::result::Interval;
use crate::sensors::window::Meter;
use crate::stats::counters::Counts;
use crate::text;
use crate::warning::{Code, Warning};

/// How long the ends may take to drain after the last phase.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the server may take to answer a control message.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the server may take to answer a tick with its sample. The server
/// answers at once, so silence this long means the path or the server is
/// gone (a deleted link, a dead host): the test ends with an error, within
/// one interval plus this of the fault, instead of waiting on TCP's
/// retransmission timers for minutes.
pub const SAMPLE_TIMEOUT: Duration = Duration::from_secs(3);
/// [`SAMPLE_TIMEOUT`] for a test whose data can fill the control
/// connection's path without backing off (UDP sent at a set rate): the
/// tick's segments are dropped with the data, and TCP retransmits them
/// after 0.2, 0.4, 0.8, 1.6, 3.2 and 6.4 s. At a third of the packets
/// dropped, six losses in a row (12.6 s) befall one tick in a thousand;
/// three seconds aborted 2 runs of 7 of udp_stream at 150 Mbit/s into a
/// 100 Mbit/s tbf on the client's own link.
pub const CONGESTED_SAMPLE_TIMEOUT: Duration = Duration::from_secs(12);

/// How long the client waits for a sample, and why it may be slow: a test
/// whose data is not congestion-controlled may fill the path the control
/// connection shares.
pub fn sample_timeout(plan: &TestPlan) -> (Duration, Option<&'static str>) {
    let unpaced = |t: crate::plan::TestKind| t.traits().loss == Loss::Datagrams;
    if unpaced(plan.test) || plan.parts.iter().any(|p| unpaced(p.test)) {
        (
            CONGESTED_SAMPLE_TIMEOUT,
            Some(
                "the control connection shares the data path, which this test's datagrams may fill",
            ),
        )
    } else {
        (SAMPLE_TIMEOUT, None)
    }
}

/// Told about each interval as it completes, that is when the server's sample
/// for its end has arrived (progress lines, streaming output). An interval
/// whose server sample never arrives is only in the final result.
pub trait Observer {
    fn on_interval(&mut self, _iv: &Interval) {}
    /// Whether to keep each interval's latency histogram for
    /// [`Observer::on_interval_histograms`] (`thrum agg` merges them over
    /// its steps' windows); off by default.
    fn wants_interval_histograms(&self) -> bool {
        false
    }
    /// When the session ends, if asked for: each interval's latency
    /// histogram (of a mix, its first part's) by [`Interval::index`].
    fn on_interval_histograms(
        &mut self,
        _h: &std::collections::BTreeMap<u32, crate::stats::latency::SparseHistogram>,
    ) {
    }
    /// Every flow is connected and `start` is about to go to the server:
    /// an agent holds here until its controller's start instant
    /// (`control::agent`). `target_rtt` is the control connection's
    /// smallest round trip (TCP_INFO), what `start` and `started` take
    /// before the workers start. An error ends the session before it sends.
    fn hold_start(&mut self, _target_rtt: Option<Duration>) -> Result<()> {
        Ok(())
    }
    /// The client's workers start at `t0`, the zero of the intervals.
    fn on_started(&mut self, _t0: Instant) {}
    /// Whether the session should end early, as on Ctrl-C (an agent whose
    /// controller is gone): asked on every turn of the timeline.
    fn stop_requested(&self) -> bool {
        false
    }
}

/// An observer that ignores everything.
pub struct Quiet;
impl Observer for Quiet {}

/// The phases in order, with their lengths (None: until the transaction quota is met).
pub fn schedule(plan: &TestPlan) -> Vec<(Phase, Option<Duration>)> {
    let mut v = Vec::new();
    if plan.warmup_ns > 0 {
        v.push((Phase::Warmup, Some(Duration::from_nanos(plan.warmup_ns))));
    }
    let measure = if plan.count_limited() {
        None
    } else {
        Some(Duration::from_nanos(plan.duration_ns))
    };
    v.push((Phase::Measure, measure));
    if plan.load_phases() {
        // Idle, loaded, recovery: three segments of the measurement window.
        let measure = v.pop().expect("the measure phase");
        v.push((Phase::Measure, Some(Duration::from_nanos(plan.idle_ns))));
        v.push(measure);
        v.push((Phase::Measure, Some(Duration::from_nanos(plan.recovery_ns))));
    }
    if plan.cooldown_ns > 0 {
        v.push((
            Phase::Cooldown,
            Some(Duration::from_nanos(plan.cooldown_ns)),
        ));
    }
    v
}

/// Read the server's messages on their own thread until its final report,
/// its error or the end of the connection.
pub fn spawn_reader(ctrl: &TcpStream) -> Result<mpsc::Receiver<Result<ServerMsg, FrameError>>> {
    let (tx, rx) = mpsc::channel();
    let mut reader = ctrl.try_clone()?;
    reader.set_read_timeout(None)?;
    std::thread::Builder::new()
        .name("thrum-control-reader".into())
        .spawn(move || {
            loop {
                let m = super::proto::read_msg::<ServerMsg>(&mut reader);
                let end = matches!(
                    m,
                    Err(_) | Ok(ServerMsg::Final(_)) | Ok(ServerMsg::Error(_))
                );
                if tx.send(m).is_err() || end {
                    break;
                }
            }
        })?;
    Ok(rx)
}

/// A test between `start` and the server's final report.
pub(crate) struct Running {
    pub meter: Meter,
    /// Taken out (and joined) once the timeline is over.
    pub engine: Option<Engines>,
    pub ctrl: TcpStream,
    pub rx: mpsc::Receiver<Result<ServerMsg, FrameError>>,
    pub t0: Instant,
    pub seq: u32,
    pub final_msg: Option<Final>,
    pub label: String,
    /// Ticks before this one have their server sample.
    pub answered: usize,
    /// A mix: intervals with both samples in, waiting for their probes'
    /// latency before the observer hears of them (local sample indices,
    /// in order).
    pub pending: std::collections::VecDeque<usize>,
    /// `--one-way`: the intervals' own estimates of the server's clock so
    /// far, which correct the live rows (`analysis::one_way`).
    pub owd_windows: Vec<(u32, crate::stats::offset::Estimate)>,
}

impl Running {
    fn engine(&self) -> &Engines {
        self.engine
            .as_ref()
            .expect("engine runs until the timeline ends")
    }

    fn engine_mut(&mut self) -> &mut Engines {
        self.engine
            .as_mut()
            .expect("engine runs until the timeline ends")
    }

    /// Sample our counters, enter `next` (starting or draining a mix's
    /// bulk parts with `load`), and ask the server to do the same.
    #[allow(clippy::too_many_arguments)]
    fn tick(
        &mut self,
        ending: Phase,
        next: Phase,
        load: Option<LoadStep>,
        g: &mut Gathered,
        plan: &TestPlan,
        observer: &mut dyn Observer,
    ) -> Result<()> {
        self.meter.on_tick(ending, next);
        // Interval first: a worker that sees the new phase sees the new interval too.
        self.engine().set_interval(self.seq);
        if let Some(step) = load {
            // Our bulk flows drain (half-close) before the tick goes out, so
            // the server sees their EOF only after ours; the server's FIN
            // then reaches flows already draining, which is no early close.
            let seq = self.seq;
            self.engine_mut()
                .step(step, next, seq)
                .context("starting the bulk parts")?;
        }
        self.engine().set_phase(next);
        // When this tick is due, for the server to sample at the same
        // moment on its clock (the tick itself may arrive seconds late).
        let due = self.t0.elapsed();
        let (at, counts) = if self.seq == 0 {
            let zero = vec![Counts::default(); self.engine().snapshot().len()];
            (Duration::ZERO, zero)
        } else {
            (due, self.engine().snapshot())
        };
        // A mix: each part's retransmissions at the tick, read here on the
        // control thread (TCP_INFO), so the workers' data path has no
        // extra syscall.
        let retransmits = if plan.parts.is_empty() {
            Vec::new()
        } else {
            self.engine().tcp_retransmits()
        };
        let tcp_info = if crate::analysis::tcp_info::per_tick(plan) {
            self.engine().tcp_infos()
        } else {
            Vec::new()
        };
        let seq = self.seq;
        self.seq += 1;
        g.local.push(LocalSample {
            at,
            unix_s: crate::clock::unix_now(),
            counts,
            phase: ending,
            retransmits,
            tcp_info,
            if_counters: self.meter.counters(),
            rusage: Some(crate::sensors::Rusage::process()),
        });
        g.remote.push(None);
        write_msg(
            &mut self.ctrl,
            &ClientMsg::from(Tick {
                seq,
                phase: next,
                load,
                due_ns: Some(due.as_nanos() as u64),
            }),
        )
        .with_context(|| format!("sending a tick to {}", self.label))?;
        if seq > 0 {
            self.pump(g, plan, observer, Duration::ZERO)?;
        }
        Ok(())
    }

    /// Fail when the server has left a tick unanswered for
    /// [`sample_timeout`] (3 s, or 12 s for a test that may fill the path).
    fn check_samples(&mut self, g: &Gathered, plan: &TestPlan) -> Result<()> {
        let (timeout, why) = sample_timeout(plan);
        while self.answered < g.remote.len() && g.remote[self.answered].is_some() {
            self.answered += 1;
        }
        if let Some(sent) = g.local.get(self.answered).map(|l| l.at)
            && self.answered < g.remote.len()
            && self.t0.elapsed().saturating_sub(sent) > timeout
        {
            match why {
                Some(why) => bail!(
                    "the server at {} has not answered for {timeout:?}; {why}, but not for this long: the control path or the server is gone",
                    self.label
                ),
                None => bail!(
                    "the server at {} has not answered for {timeout:?}: the control path or the server is gone",
                    self.label
                ),
            }
        }
        Ok(())
    }

    /// Handle control messages for up to `wait`; fail on a server error or
    /// a lost connection. Then tell the observer of the intervals ready.
    fn pump(
        &mut self,
        g: &mut Gathered,
        plan: &TestPlan,
        observer: &mut dyn Observer,
        wait: Duration,
    ) -> Result<()> {
        let r = self.pump_messages(g, wait);
        self.flush(g, plan, observer, false);
        r
    }

    /// Tell the observer of the completed intervals, in order. A mix's
    /// interval waits until each part's workers have handed in its latency
    /// (a probe's worker does so with its first response after the tick),
    /// so that a stream record carries the probes' latency; it waits at
    /// most two more ticks (`force`: not at all). Once the engines are
    /// joined, the parts' records have every interval's latency.
    pub(crate) fn flush(
        &mut self,
        g: &Gathered,
        plan: &TestPlan,
        observer: &mut dyn Observer,
        force: bool,
    ) {
        while let Some(&k) = self.pending.front() {
            let mut iv = interval(plan, g, k);
            let late = force || g.local.len() > k + 2;
            for (i, (p, part)) in iv.parts.iter_mut().zip(&plan.parts).enumerate() {
                if part.test.is_stream() {
                    continue;
                }
                let (settled, latency) = match &self.engine {
                    Some(e) => e.interval_latency(i, iv.index),
                    None => (
                        true,
                        g.parts
                            .get(i)
                            .and_then(|r| r.interval_latency.get(&iv.index).cloned()),
                    ),
                };
                if !settled && !late {
                    return;
                }
                p.latency_ns = latency;
            }
            if let (Some(r), Some(e)) = (&g.one_way, &self.engine) {
                let (settled, got) = e.interval_one_way(0, iv.index);
                if !settled && !late {
                    return;
                }
                if let Some(got) = got {
                    if let Some(w) = crate::analysis::one_way::window(&got) {
                        self.owd_windows.push((iv.index, w));
                    }
                    iv.owd_ns = r.live(&self.owd_windows).interval(&got);
                }
            }
            self.pending.pop_front();
            observer.on_interval(&iv);
        }
    }

    fn pump_messages(&mut self, g: &mut Gathered, wait: Duration) -> Result<()> {
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
                Ok(ServerMsg::Sample(super::proto::Sample {
                    seq,
                    elapsed_ns,
                    counts,
                    part_retransmits,
                    tcp_info,
                    cpu,
                    rusage,
                    ..
                })) => {
                    if let Some(slot) = g.remote.get_mut(seq as usize) {
                        *slot = Some(RemoteSample {
                            elapsed_ns,
                            counts,
                            retransmits: part_retransmits,
                            tcp_info,
                            cpu,
                            rusage,
                        });
                        // Both ends' counts of this interval are in: report it.
                        if seq > 0 && g.remote[seq as usize - 1].is_some() {
                            self.pending.push_back(seq as usize);
                        }
                    }
                }
                Ok(ServerMsg::Final(f)) => {
                    self.final_msg = Some(f);
                    return Ok(());
                }
                Ok(ServerMsg::Error(e)) => {
                    bail!(
                        "server {} reported: {}",
                        self.label,
                        text::message(&e.message)
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

    pub(crate) fn timeline(
        &mut self,
        plan: &TestPlan,
        phases: &[(Phase, Option<Duration>)],
        g: &mut Gathered,
        observer: &mut dyn Observer,
    ) -> Result<()> {
        let interval = Duration::from_nanos(plan.interval_ns);
        // A finer step while count-limited, to end the window close to the last transaction.
        let check = if plan.count_limited() {
            Duration::from_millis(1)
        } else {
            Duration::from_millis(20)
        };
        // A phased mix: the measurement window is three segments (idle,
        // loaded, recovery); the ticks that enter them and the one that
        // leaves the last are the phases' bounds.
        let first_measure = phases.iter().position(|p| p.0 == Phase::Measure);
        let phased = plan.load_phases();
        let segment = |k: usize| match first_measure {
            Some(m) if phased && k >= m && k < m + 3 => Some(k - m),
            _ => None,
        };
        let load_at = |k: usize| match segment(k) {
            Some(1) => Some(LoadStep::Start),
            Some(2) => Some(LoadStep::Stop),
            _ => None,
        };
        if segment(0).is_some() {
            g.load_bounds.push(self.seq);
        }
        self.tick(phases[0].0, phases[0].0, None, g, plan, observer)?;
        'phases: for (k, &(phase, len)) in phases.iter().enumerate() {
            let next_phase = phases.get(k + 1).map_or(Phase::Drain, |p| p.0);
            let start = self.t0.elapsed();
            let end = len.map(|l| start + l);
            let mut next_tick = start + interval;
            loop {
                let now = self.t0.elapsed();
                // Ctrl-C or SIGTERM (`control::stop`): end the interval
                // here and drain, so what was measured is kept.
                if super::stop::requested() || observer.stop_requested() {
                    self.tick(phase, Phase::Drain, None, g, plan, observer)?;
                    break 'phases;
                }
                let quota_met =
                    len.is_none() && self.engine().quota_done() as u64 >= plan.flows as u64;
                if quota_met || end.is_some_and(|e| now >= e) {
                    if segment(k).is_some() || segment(k + 1).is_some() {
                        g.load_bounds.push(self.seq);
                    }
                    self.tick(phase, next_phase, load_at(k + 1), g, plan, observer)?;
                    if load_at(k + 1) == Some(LoadStep::Stop) {
                        self.drain_load(g, plan, observer)?;
                    }
                    break;
                }
                if now >= next_tick {
                    self.tick(phase, phase, None, g, plan, observer)?;
                    next_tick += interval;
                    continue;
                }
                let mut until = next_tick.min(end.unwrap_or(next_tick)) - now;
                until = until.min(check);
                self.pump(g, plan, observer, until)?;
                self.check_engine()?;
                self.check_samples(g, plan)?;
            }
        }
        // Drain: wait for our flows to half-close and read the server's EOF.
        let deadline = Instant::now() + DRAIN_TIMEOUT;
        while self.engine().running() > 0 {
            if Instant::now() >= deadline {
                g.warnings.push(Warning::new(Code::DrainTimeout, format!(
                    "{} worker(s) had not drained after {DRAIN_TIMEOUT:?}; final totals may not match between the ends",
                    self.engine().running()
                )));
                break;
            }
            self.pump(g, plan, observer, Duration::from_millis(2))?;
            self.check_engine()?;
            self.check_samples(g, plan)?;
        }
        // Our totals after the drain, per flow for the parts of a mix.
        g.local_final = self.engine().snapshot();
        g.local_total = Some(Counts::sum(&g.local_final));
        Ok(())
    }

    /// Between the loaded and the recovery phase: the bulk parts have
    /// half-closed, and what their senders' socket buffers still held
    /// crosses the path (at a 50 Mbit/s bottleneck, several MB take
    /// seconds). The recovery phase starts when every bulk flow has read
    /// its peer's EOF, so that its probes see the queue empty as the
    /// phase promises; the stretch in between is its own bound (ticks as
    /// usual), given as `phases.drain_s`. After [`DRAIN_TIMEOUT`] the
    /// recovery starts anyway, with a warning.
    fn drain_load(
        &mut self,
        g: &mut Gathered,
        plan: &TestPlan,
        observer: &mut dyn Observer,
    ) -> Result<()> {
        let interval = Duration::from_nanos(plan.interval_ns);
        let start = self.t0.elapsed();
        let deadline = start + DRAIN_TIMEOUT;
        let mut next_tick = start + interval;
        while self.engine().load_running() > 0
            && !super::stop::requested()
            && !observer.stop_requested()
        {
            let now = self.t0.elapsed();
            if now >= deadline {
                g.warnings.push(Warning::new(Code::DrainTimeout, format!(
                    "the bulk parts had not drained after {DRAIN_TIMEOUT:?}; the recovery phase starts with {} worker(s) still sending",
                    self.engine().load_running()
                )));
                break;
            }
            if now >= next_tick {
                self.tick(Phase::Measure, Phase::Measure, None, g, plan, observer)?;
                next_tick += interval;
                continue;
            }
            let until = (next_tick.min(deadline) - now).min(Duration::from_millis(2));
            self.pump(g, plan, observer, until)?;
            self.check_engine()?;
            self.check_samples(g, plan)?;
        }
        g.load_bounds.push(self.seq);
        self.tick(Phase::Measure, Phase::Measure, None, g, plan, observer)
    }

    pub(crate) fn wait_final(
        &mut self,
        g: &mut Gathered,
        plan: &TestPlan,
        observer: &mut dyn Observer,
    ) -> Result<Final> {
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
        self.flush(g, plan, observer, true);
        Ok(self.final_msg.take().expect("final message"))
    }
}

impl Drop for Running {
    /// Wake the control reader thread, whatever state the connection is in.
    fn drop(&mut self) {
        let _ = self.ctrl.shutdown(std::net::Shutdown::Both);
    }
}

/// Take what the engines left (one per part of a mix, else one) into the
/// record: latencies merged, the parts' records, retransmissions, zero-copy
/// and call-time counts. Returns the datagram counts `finish` must carry
/// (udp_stream's per flow; a mix names every flow's, zero where a part
/// counts none, so the server finds each part's slice) and the first error
/// a worker reported.
pub(crate) fn take_engines(
    g: &mut Gathered,
    outs: &[crate::engine::EngineOutcome],
    parts: &[TestPlan],
    mix: bool,
) -> (Vec<u64>, Option<String>) {
    let mut datagrams_sent = Vec::new();
    let mut error = None;
    for (out, part) in outs.iter().zip(parts) {
        g.latency.merge(&out.latency);
        g.service_latency.merge(&out.service_latency);
        g.generator_lag.merge(&out.generator_lag);
        error = error.or(out.error.clone());
        if part.test.traits().loss == Loss::Datagrams {
            datagrams_sent.extend(out.counts.iter().map(|c| c.datagrams_sent));
        } else if mix {
            datagrams_sent.extend(out.counts.iter().map(|_| 0));
        }
    }
    if let [out] = outs {
        g.interval_latency = out.interval_latency.clone();
        g.flow_interval_latency = out.flow_interval_latency.clone();
        g.service_interval_latency = out.service_interval_latency.clone();
    }
    g.local_retransmits = outs
        .iter()
        .filter_map(|o| crate::engine::tcp_retransmits(&o.flows))
        .reduce(|a, b| a + b);
    g.local_zerocopy = outs
        .iter()
        .find_map(|o| crate::engine::zerocopy_counts(&o.flows));
    g.local_uring_napi = outs.iter().find_map(|o| o.napi);
    if let Some(first) = parts.first() {
        g.local_socket_options = crate::io::sockmark::read_back_or_probe(
            crate::engine::first_tcp_socket(outs),
            &first.sockets,
            first.test.is_udp(),
        );
        g.local_congestion_control = crate::io::congestion::of_or_probe(
            crate::engine::first_tcp_socket(outs),
            first.congestion.as_deref(),
            first.test.is_udp(),
        );
    }
    g.local_call_times = outs
        .iter()
        .find_map(|o| crate::engine::call_times(&o.flows));
    g.local_train_gaps = crate::stats::dispersion::TrainGaps::merged(
        outs.iter()
            .flat_map(|o| o.flows.iter().filter_map(|f| f.train_gaps())),
    );
    g.parts = outs.iter().map(crate::analysis::PartRecord::of).collect();
    (datagrams_sent, error)
}
