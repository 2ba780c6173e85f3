//! The agents' runs as one result: a pure function of what the controller
//! gathered ([`Gathered`]), unit-tested on constructed records.
//!
//! Every agent ran the same plan, so its intervals share their indices
//! and phases with the others'; each is moved onto the controller's clock
//! with the agent's offset (`stats::offset::ClockMap`), and row `k` holds
//! every agent's interval `k` and their sum, over the span all of them
//! cover. The summary's figures are the agents' own figures added (each
//! over its measurement window, which lies where every agent ran: the
//! warm-up covers the start skew, and a skew too large for that is said),
//! the latency is their histograms merged, and `fairness_jain` is Jain's
//! index over their figures of merit. An agent that died, stalled or
//! failed is named in the error, kept in `clients` with what it sent, and
//! left out of the sum.

use crate::analysis::goodput::jain;
use crate::plan::{Phase, TestPlan};
use crate::result::{
    ClientInterval, ClientSummary, ClockOffset, Environment, Figures, FleetTiming, GeneratorLag,
    Interval, Iteration, OpenLoop, Provenances, Side, Spec, Summary, TestResult,
};
use crate::sensors::Rusage;
use crate::stats::counters::Counts;
use crate::stats::latency::LatencyHistogram;
use crate::stats::offset::ClockMap;
use crate::warning::{Code, Warning, Warnings};

/// What the controller gathered of one agent.
#[derive(Clone, Debug)]
pub struct AgentRecord {
    /// As given to `--from`.
    pub host: String,
    /// Its clock against the controller's; None when no exchange worked
    /// (then it never started).
    pub clock: Option<ClockMap>,
    /// When its workers started, on its clock (ns).
    pub t0_ns: Option<u64>,
    /// Its intervals as they came during the run (per-flow counts left out).
    pub samples: Vec<Interval>,
    /// Its whole result, when it sent one.
    pub result: Option<TestResult>,
    /// Why the controller lost it (died, stalled, refused), if it did.
    pub lost: Option<String>,
}

impl AgentRecord {
    /// The agent's run ended as planned: a result with no error.
    fn completed(&self) -> bool {
        self.lost.is_none()
            && self
                .result
                .as_ref()
                .is_some_and(|r| r.summary.error.is_none())
    }

    /// Its intervals: the final result's, else those that came live.
    fn intervals(&self) -> &[Interval] {
        match &self.result {
            Some(r) if !r.intervals.is_empty() => &r.intervals,
            _ => &self.samples,
        }
    }

    /// Why it did not complete, for the error.
    fn failure(&self) -> Option<String> {
        if let Some(l) = &self.lost {
            return Some(l.clone());
        }
        match &self.result {
            Some(r) => r.summary.error.clone(),
            None => Some("sent no result".into()),
        }
    }
}

/// Where the run's clock starts, on the controller's CLOCK_MONOTONIC and
/// CLOCK_REALTIME (ns): the start instant it chose.
#[derive(Clone, Copy, Debug, Default)]
pub struct Origin {
    pub mono_ns: u64,
    pub unix_ns: u64,
}

impl Origin {
    /// A reading `ns` on `agent`'s clock as seconds after the origin.
    fn seconds(&self, clock: &ClockMap, ns: u64) -> f64 {
        (clock.to_ours(ns) as f64 - self.mono_ns as f64) / 1e9
    }
}

/// Row `k`: the agents' intervals `k` (each with its host, clock and
/// workers' start), moved onto the controller's clock and added. The
/// row's span is the part every agent's interval covers (their whole
/// span when they do not overlap).
pub fn row(k: u32, parts: &[(&str, &ClockMap, u64, &Interval)], origin: &Origin) -> Interval {
    let spans: Vec<(f64, f64)> = parts
        .iter()
        .map(|(_, c, t0, iv)| {
            let at = |s: f64| origin.seconds(c, t0 + (s * 1e9) as u64);
            (at(iv.start_s), at(iv.end_s))
        })
        .collect();
    let (lo, hi) = spans
        .iter()
        .fold((f64::MIN, f64::MAX), |(a, b), &(s, e)| (a.max(s), b.min(e)));
    let (start_s, end_s) = if hi > lo {
        (lo, hi)
    } else {
        spans
            .iter()
            .fold((f64::MAX, f64::MIN), |(a, b), &(s, e)| (a.min(s), b.max(e)))
    };
    let ivs: Vec<&Interval> = parts.iter().map(|p| p.3).collect();
    let every = |f: fn(&Interval) -> &Vec<Counts>| -> Vec<Counts> {
        if ivs.iter().all(|iv| !f(iv).is_empty()) {
            ivs.iter().flat_map(|iv| f(iv).iter().copied()).collect()
        } else {
            Vec::new()
        }
    };
    let cpus: Vec<f64> = ivs
        .iter()
        .filter_map(|iv| iv.remote_cpu_util_percent)
        .collect();
    let first = ivs.first().copied();
    Interval {
        index: k,
        phase: first.map_or(Phase::Measure, |iv| iv.phase),
        start_s,
        end_s,
        unix_end_s: (origin.unix_ns as f64 / 1e9) + end_s,
        local: every(|iv| &iv.local),
        remote: every(|iv| &iv.remote),
        sum: add_figures(ivs.iter().map(|iv| &iv.sum)),
        latency_ns: None,
        service_latency_ns: None,
        owd_ns: None,
        fairness: None,
        parts: Vec::new(),
        link_util_percent: Default::default(),
        load_phase: None,
        tcp_info: None,
        remote_cpu_util_percent: mean(&cpus),
        flow_latency_ns: Vec::new(),
        rusage: None,
        clients: parts
            .iter()
            .zip(&spans)
            .map(|((host, _, _, iv), &(s, e))| ClientInterval {
                host: host.to_string(),
                start_s: s,
                end_s: e,
                sum: iv.sum.clone(),
                latency_ns: iv.latency_ns.clone(),
            })
            .collect(),
    }
}

fn mean(x: &[f64]) -> Option<f64> {
    (!x.is_empty()).then(|| x.iter().sum::<f64>() / x.len() as f64)
}

/// The sum of an option each holds, None when none holds one.
fn add<'a, T: 'a>(
    items: impl Iterator<Item = &'a T> + Clone,
    f: impl Fn(&T) -> Option<f64>,
) -> Option<f64> {
    items
        .filter_map(f)
        .fold(None, |acc, v| Some(acc.unwrap_or(0.0) + v))
}

/// Figures added: counts and rates summed, jitter the mean.
fn add_figures<'a>(fs: impl Iterator<Item = &'a Figures> + Clone) -> Figures {
    let jitters: Vec<f64> = fs
        .clone()
        .filter_map(|f| f.jitter_ns.map(|j| j as f64))
        .collect();
    Figures {
        local: Counts::sum(fs.clone().map(|f| &f.local)),
        remote: Counts::sum(fs.clone().map(|f| &f.remote)),
        throughput_bps: add(fs.clone(), |f| f.throughput_bps),
        throughput_bps_c2s: add(fs.clone(), |f| f.throughput_bps_c2s),
        throughput_bps_s2c: add(fs.clone(), |f| f.throughput_bps_s2c),
        transactions_per_s: add(fs, |f| f.transactions_per_s),
        jitter_ns: mean(&jitters).map(|j| j as u64),
    }
}

/// Process usages added: the agents' processes summed (the high-water
/// mark the largest), or, for `one_process` read by every session (the
/// target's), the largest reading of each.
fn add_rusage(rs: &[&Rusage], one_process: bool) -> Option<Rusage> {
    let first = **rs.first()?;
    Some(rs[1..].iter().fold(first, |a, b| {
        let add = |x: u64, y: u64| if one_process { x.max(y) } else { x + y };
        let addf = |x: f64, y: f64| if one_process { x.max(y) } else { x + y };
        Rusage {
            user_s: addf(a.user_s, b.user_s),
            system_s: addf(a.system_s, b.system_s),
            max_rss_kb: a.max_rss_kb.max(b.max_rss_kb),
            voluntary_switches: add(a.voluntary_switches, b.voluntary_switches),
            involuntary_switches: add(a.involuntary_switches, b.involuntary_switches),
            minor_faults: add(a.minor_faults, b.minor_faults),
            major_faults: add(a.major_faults, b.major_faults),
        }
    }))
}

/// One end's sides added over `window_s`: counts and rates summed, CPU
/// utilisation the hosts' mean, process usage as [`add_rusage`] (the
/// agents' ends are several hosts; the target's, `one_process` read by
/// every session).
fn add_sides(sides: &[&Side], window_s: f64, one_process: bool) -> Side {
    let sum = |f: fn(&Side) -> u64| sides.iter().map(|s| f(s)).sum::<u64>();
    let rate = |f: fn(&Side) -> f64| sides.iter().map(|s| f(s)).sum::<f64>();
    let cpu: Vec<f64> = sides.iter().filter_map(|s| s.cpu_util_percent).collect();
    Side {
        bytes_sent: sum(|s| s.bytes_sent),
        bytes_received: sum(|s| s.bytes_received),
        transactions: sum(|s| s.transactions),
        window_s,
        send_bps: rate(|s| s.send_bps),
        recv_bps: rate(|s| s.recv_bps),
        transactions_per_s: rate(|s| s.transactions_per_s),
        datagrams_sent: sum(|s| s.datagrams_sent),
        datagrams_received: sum(|s| s.datagrams_received),
        datagrams_sent_per_s: rate(|s| s.datagrams_sent_per_s),
        datagrams_received_per_s: rate(|s| s.datagrams_received_per_s),
        total: Counts::sum(sides.iter().map(|s| &s.total)),
        cpu_util_percent: mean(&cpu),
        rusage: add_rusage(
            &sides
                .iter()
                .filter_map(|s| s.rusage.as_ref())
                .collect::<Vec<_>>(),
            one_process,
        ),
        tcp_retransmits: sides
            .iter()
            .filter_map(|s| s.tcp_retransmits)
            .reduce(|a, b| a + b),
        ..Side::default()
    }
}

/// The agents' summaries added into the run's (module doc).
fn add_summaries(plan: &TestPlan, all: &[&Summary], window_s: f64) -> Summary {
    let s = all.iter().copied();
    let count = |f: fn(&Summary) -> Option<u64>| -> Option<u64> {
        all.iter().filter_map(|x| f(x)).reduce(|a, b| a + b)
    };
    let mut hist = LatencyHistogram::new();
    for h in all.iter().filter_map(|x| x.histogram.as_deref()) {
        if let Ok(h) = LatencyHistogram::from_base64(h) {
            hist.merge(&h);
        }
    }
    let open: Vec<&OpenLoop> = all.iter().filter_map(|x| x.open_loop.as_ref()).collect();
    let jitters: Vec<f64> = all
        .iter()
        .filter_map(|x| x.jitter_ns.map(|j| j as f64))
        .collect();
    Summary {
        duration_s: window_s,
        throughput_bps: add(s.clone(), |x| x.throughput_bps),
        throughput_bps_c2s: add(s.clone(), |x| x.throughput_bps_c2s),
        throughput_bps_s2c: add(s.clone(), |x| x.throughput_bps_s2c),
        throughput_bps_sent: add(s.clone(), |x| x.throughput_bps_sent),
        transactions_per_s: add(s.clone(), |x| x.transactions_per_s),
        transactions: count(|x| x.transactions),
        latency_ns: (hist.count() > 0)
            .then(|| hist.summary_with(&plan.percentiles))
            .flatten(),
        histogram: (hist.count() > 0).then(|| hist.to_base64()),
        open_loop: (!open.is_empty()).then(|| OpenLoop {
            offered_per_s: open.iter().map(|o| o.offered_per_s).sum(),
            achieved_per_s: open.iter().map(|o| o.achieved_per_s).sum(),
            late: open.iter().map(|o| o.late).sum(),
            // Service time has no histogram in a summary to merge: each
            // agent's is in its own summary. The lag's worst is a bound.
            service_latency_ns: None,
            generator_lag_ns: open
                .iter()
                .filter_map(|o| o.generator_lag_ns)
                .reduce(|a, b| GeneratorLag {
                    p50: a.p50.max(b.p50),
                    p99: a.p99.max(b.p99),
                    max: a.max.max(b.max),
                }),
            mean_in_flight: open
                .iter()
                .filter_map(|o| o.mean_in_flight)
                .reduce(|a, b| a + b),
        }),
        datagrams_sent: count(|x| x.datagrams_sent),
        datagrams_received: count(|x| x.datagrams_received),
        lost: count(|x| x.lost),
        reordered: count(|x| x.reordered),
        duplicates: count(|x| x.duplicates),
        jitter_ns: mean(&jitters).map(|j| j as u64),
        local: add_sides(
            &all.iter().map(|x| &x.local).collect::<Vec<_>>(),
            window_s,
            false,
        ),
        remote: add_sides(
            &all.iter().map(|x| &x.remote).collect::<Vec<_>>(),
            window_s,
            true,
        ),
        setup_s: all.iter().filter_map(|x| x.setup_s).reduce(f64::max),
        ..Summary::default()
    }
}

/// Everything the controller gathered, for [`merge`].
pub struct Gathered {
    pub plan: TestPlan,
    /// The target as given (`-H`), and the address it resolved to.
    pub target: String,
    pub target_address: String,
    pub origin: Origin,
    pub agents: Vec<AgentRecord>,
    pub clock: Vec<ClockOffset>,
    pub timing: FleetTiming,
    /// Where the controller ran.
    pub environment: Environment,
    pub provenance: Provenances,
    /// Why the run failed as a whole (an agent not ready: nothing ran).
    pub error: Option<String>,
}

/// The agents' runs as one result (module doc).
pub fn merge(g: Gathered) -> TestResult {
    let plan = &g.plan;
    let origin = g.origin;
    // Rows: every index some agent has, with the agents that have it.
    let last = g
        .agents
        .iter()
        .filter_map(|a| a.intervals().last().map(|iv| iv.index))
        .max();
    let mut intervals = Vec::new();
    for k in 0..last.map_or(0, |l| l + 1) {
        let parts: Vec<(&str, &ClockMap, u64, &Interval)> = g
            .agents
            .iter()
            .filter_map(|a| {
                let iv = a.intervals().iter().find(|iv| iv.index == k)?;
                Some((a.host.as_str(), a.clock.as_ref()?, a.t0_ns?, iv))
            })
            .collect();
        if !parts.is_empty() {
            intervals.push(row(k, &parts, &origin));
        }
    }
    let done: Vec<&AgentRecord> = g.agents.iter().filter(|a| a.completed()).collect();
    // The span every completed agent measured, on the controller's clock.
    let windows: Vec<(f64, f64)> = done
        .iter()
        .filter_map(|a| {
            let (c, t0) = (a.clock.as_ref()?, a.t0_ns?);
            let m: Vec<&Interval> = a
                .intervals()
                .iter()
                .filter(|iv| iv.phase == Phase::Measure)
                .collect();
            let at = |s: f64| origin.seconds(c, t0 + (s * 1e9) as u64);
            Some((at(m.first()?.start_s), at(m.last()?.end_s)))
        })
        .collect();
    let lo = windows.iter().map(|w| w.0).fold(f64::MIN, f64::max);
    let hi = windows.iter().map(|w| w.1).fold(f64::MAX, f64::min);
    let window_s = if windows.is_empty() {
        0.0
    } else {
        (hi - lo).max(0.0)
    };
    let summaries: Vec<&Summary> = done
        .iter()
        .filter_map(|a| a.result.as_ref().map(|r| &r.summary))
        .collect();
    let mut summary = add_summaries(plan, &summaries, window_s);
    let measure: Vec<&Interval> = intervals
        .iter()
        .filter(|iv| iv.phase == Phase::Measure)
        .collect();
    let st = crate::analysis::stability::of(plan, &measure, false);
    summary.stability_cv = st.cv;
    summary.trend_percent = st.trend_percent;
    let mut warnings: Vec<Warning> = st.warnings;
    let figure = |s: &Summary| s.throughput_bps.or(s.transactions_per_s);
    let figures: Vec<f64> = summaries.iter().filter_map(|s| figure(s)).collect();
    // Fairness among all the agents asked for: with one lost, none.
    summary.fairness_jain = (figures.len() == g.agents.len() && !figures.is_empty())
        .then(|| jain(&figures))
        .flatten();
    let mut clients = Vec::with_capacity(g.agents.len());
    let mut failed = Vec::new();
    for a in &g.agents {
        let start_s = match (a.clock.as_ref(), a.t0_ns) {
            (Some(c), Some(t0)) => Some(origin.seconds(c, t0)),
            _ => None,
        };
        let mut s = match &a.result {
            Some(r) => r.summary.clone(),
            None => from_samples(&a.samples),
        };
        for w in s.warnings.iter() {
            warnings.push(Warning::new(
                w.code,
                format!("agent {}: {}", a.host, w.message),
            ));
        }
        if let Some(why) = a.failure() {
            s.error = Some(why.clone());
            failed.push(format!("{}: {why}", a.host));
        }
        clients.push(ClientSummary {
            host: a.host.clone(),
            start_s,
            summary: Box::new(s),
        });
    }
    let mut timing = g.timing;
    let starts: Vec<f64> = clients.iter().filter_map(|c| c.start_s).collect();
    if !starts.is_empty() {
        let first = starts.iter().copied().fold(f64::MAX, f64::min);
        let latest = starts.iter().copied().fold(f64::MIN, f64::max);
        timing.start_skew_s = Some(latest - first);
        timing.start_late_s = Some(latest);
        if plan.duration_ns > 0 && (latest - first) * 1e9 > 0.01 * plan.duration_ns as f64 {
            warnings.push(Warning::new(
                Code::StartSkew,
                format!(
                    "the agents started {:.1} ms apart, over 1 % of the measurement window: each agent's window has that long in which another did not send yet or any more (a --cooldown that long covers the end)",
                    (latest - first) * 1e3
                ),
            ));
        }
    }
    timing.agents = g.agents.len() as u32;
    timing.completed = done.len() as u32;
    if !failed.is_empty() && g.error.is_none() {
        warnings.push(Warning::new(
            Code::AgentFailed,
            format!(
                "{} of {} agents did not complete; the figures are the other {}'s",
                failed.len(),
                g.agents.len(),
                done.len()
            ),
        ));
    }
    summary.error = g.error.or_else(|| {
        (!failed.is_empty()).then(|| {
            format!(
                "agent {} (the others' figures are kept)",
                failed.join("; agent ")
            )
        })
    });
    summary.warnings = Warnings(warnings);
    summary.clients = clients;
    summary.fleet = Some(timing);
    let provenance = g.provenance;
    let mut r = TestResult {
        schema: crate::result::SCHEMA,
        test: plan.test,
        spec: Spec {
            plan: plan.clone(),
            server: g.target,
            server_address: Some(g.target_address),
            embedded_server: false,
            bind: None,
        },
        environment: g.environment,
        provenance,
        intervals,
        summary,
        iterations: Vec::new(),
        confidence: None,
        clock: g.clock,
    };
    r.iterations = vec![Iteration::of(1, &r)];
    r
}

/// An agent lost before its result: its figure of merit over the
/// measurement intervals it sent, and their length.
fn from_samples(samples: &[Interval]) -> Summary {
    let m: Vec<&Interval> = samples
        .iter()
        .filter(|iv| iv.phase == Phase::Measure)
        .collect();
    let len: f64 = m.iter().map(|iv| iv.end_s - iv.start_s).sum();
    let over = |f: fn(&Interval) -> Option<f64>| -> Option<f64> {
        let w: Option<f64> = m
            .iter()
            .map(|iv| Some(f(iv)? * (iv.end_s - iv.start_s)))
            .sum();
        w.filter(|_| len > 0.0).map(|w| w / len)
    };
    Summary {
        duration_s: len,
        throughput_bps: over(|iv| iv.sum.throughput_bps),
        transactions_per_s: over(|iv| iv.sum.transactions_per_s),
        ..Summary::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::TestKind;
    use crate::result::fixtures::{interval, result};
    use crate::stats::offset::Estimate;

    const MBIT: f64 = 1e6;

    fn clock(offset_ns: i64) -> ClockMap {
        ClockMap {
            before: Estimate {
                offset_ns,
                error_ns: 40_000,
                at_ns: 1_000_000_000,
                min_path_ns: 60_000,
                kept: 8,
                exchanges: 24,
            },
            after: None,
        }
    }

    /// A tcp_stream interval of `mbit` Mbit/s.
    fn iv(k: u32, phase: Phase, mbit: f64) -> Interval {
        let mut iv = interval(k, k as f64, 1.0);
        iv.phase = phase;
        iv.sum.throughput_bps = Some(mbit * MBIT);
        iv
    }

    /// An agent whose workers started `late_ns` after the origin (on the
    /// controller's clock), its clock `offset_ns` from the controller's,
    /// that sent `mbit` in each of one warm-up and three measure intervals.
    fn agent(host: &str, offset_ns: i64, late_ns: u64, mbit: f64) -> AgentRecord {
        let ivs: Vec<Interval> = (0..4)
            .map(|k| {
                iv(
                    k,
                    if k == 0 {
                        Phase::Warmup
                    } else {
                        Phase::Measure
                    },
                    mbit,
                )
            })
            .collect();
        let mut r = result(TestKind::TcpStream);
        r.summary.throughput_bps = Some(mbit * MBIT);
        r.summary.duration_s = 3.0;
        let mut h = LatencyHistogram::new();
        h.record((mbit * 1000.0) as u64);
        r.summary.histogram = Some(h.to_base64());
        r.intervals = ivs.clone();
        AgentRecord {
            host: host.into(),
            clock: Some(clock(offset_ns)),
            t0_ns: Some((ORIGIN as i64 + late_ns as i64 + offset_ns) as u64),
            samples: ivs,
            result: Some(r),
            lost: None,
        }
    }

    const ORIGIN: u64 = 2_000_000_000;

    fn gathered(agents: Vec<AgentRecord>) -> Gathered {
        Gathered {
            plan: TestPlan::new(TestKind::TcpStream),
            target: "t".into(),
            target_address: "10.0.0.1:12880".into(),
            origin: Origin {
                mono_ns: ORIGIN,
                unix_ns: 1_800_000_000_000_000_000,
            },
            agents,
            clock: Vec::new(),
            timing: FleetTiming::default(),
            environment: Environment::default(),
            provenance: Provenances::default(),
            error: None,
        }
    }

    /// Three agents, one 5 s ahead: the sum is theirs, each row holds the
    /// three and their sum on the controller's clock, the starts are the
    /// workers' starts less each offset, and Jain's index is over the
    /// three figures.
    #[test]
    fn three_agents_add_up_on_one_clock() {
        let r = merge(gathered(vec![
            agent("a1", 0, 1_000_000, 30.0),
            agent("a2", 5_000_000_000, 2_000_000, 30.0),
            agent("a3", -7_000, 1_500_000, 20.0),
        ]));
        let s = &r.summary;
        assert_eq!(s.error, None);
        assert!((s.throughput_bps.unwrap() - 80.0 * MBIT).abs() < 1.0);
        let jain = s.fairness_jain.unwrap();
        // (80)² / (3 · (900 + 900 + 400)) = 6400 / 6600.
        assert!((jain - 6400.0 / 6600.0).abs() < 1e-12, "{jain}");
        let starts: Vec<f64> = s.clients.iter().map(|c| c.start_s.unwrap()).collect();
        assert_eq!(starts, [0.001, 0.002, 0.0015]);
        let f = s.fleet.as_ref().unwrap();
        assert!((f.start_skew_s.unwrap() - 0.001).abs() < 1e-12);
        assert_eq!((f.agents, f.completed), (3, 3));
        assert_eq!(r.intervals.len(), 4);
        let row = &r.intervals[2];
        assert_eq!(row.clients.len(), 3);
        assert!((row.sum.throughput_bps.unwrap() - 80.0 * MBIT).abs() < 1.0);
        // Where all three were in their interval 2: from the latest start
        // to the earliest end.
        assert!((row.start_s - 2.002).abs() < 1e-9, "{}", row.start_s);
        assert!((row.end_s - 3.001).abs() < 1e-9, "{}", row.end_s);
        // The window every agent measured: intervals 1..=3 of each.
        assert!(
            (s.duration_s - (4.001 - 1.002)).abs() < 1e-9,
            "{}",
            s.duration_s
        );
        // The histograms merged: one latency from each agent.
        assert_eq!(s.latency_ns.as_ref().unwrap().count, 3);
        assert_eq!(r.iterations.len(), 1);
    }

    /// An agent lost mid-run: named in the error, kept in `clients` with
    /// the mean of what it sent, out of the sum and of Jain's index; its
    /// rows carry the others only where it sent nothing.
    #[test]
    fn a_lost_agent_is_named_and_the_others_kept() {
        let mut dead = agent("a2", 0, 1_000_000, 40.0);
        dead.result = None;
        dead.samples.truncate(2);
        dead.lost = Some("closed the connection".into());
        let r = merge(gathered(vec![agent("a1", 0, 1_000_000, 30.0), dead]));
        let s = &r.summary;
        let e = s.error.as_deref().unwrap();
        assert!(e.contains("a2: closed the connection"), "{e}");
        assert!((s.throughput_bps.unwrap() - 30.0 * MBIT).abs() < 1.0);
        assert_eq!(s.fairness_jain, None);
        assert!(s.warnings.has(Code::AgentFailed));
        let lost = &s.clients[1];
        assert_eq!(lost.summary.duration_s, 1.0);
        assert_eq!(lost.summary.throughput_bps, Some(40.0 * MBIT));
        assert_eq!(r.intervals[1].clients.len(), 2);
        assert_eq!(r.intervals[3].clients.len(), 1);
        assert_eq!(s.fleet.as_ref().unwrap().completed, 1);
    }

    /// Agents that started further apart than 1 % of the window are said
    /// to have (each window then has a stretch where another was silent).
    #[test]
    fn a_wide_start_skew_is_said() {
        let r = merge(gathered(vec![
            agent("a1", 0, 0, 10.0),
            agent("a2", 0, 150_000_000, 10.0),
        ]));
        assert!(r.summary.warnings.has(Code::StartSkew));
        let r = merge(gathered(vec![
            agent("a1", 0, 0, 10.0),
            agent("a2", 0, 5_000_000, 10.0),
        ]));
        assert!(!r.summary.warnings.has(Code::StartSkew));
    }

    /// Nothing ran (an agent not ready): the error, no rows, every agent
    /// listed without a start.
    #[test]
    fn a_run_called_off_has_its_error_and_no_rows() {
        let mut a = agent("a1", 0, 0, 10.0);
        (a.result, a.t0_ns, a.samples) = (None, None, Vec::new());
        let mut g = gathered(vec![a]);
        g.error = Some("agent a2: refused; nothing was run".into());
        let r = merge(g);
        assert!(r.intervals.is_empty());
        assert_eq!(
            r.summary.error.as_deref(),
            Some("agent a2: refused; nothing was run")
        );
        assert_eq!(r.summary.clients[0].start_s, None);
    }
}
