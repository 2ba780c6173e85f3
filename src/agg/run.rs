//! Running the ramp of one test against the load generators.
//!
//! Each stream is its own control session (one flow on one worker thread, as
//! one netperf process is) started when its step begins and told to run
//! until the end of the ramp, with interim samples every `--interval`. The
//! sessions share no clock but CLOCK_REALTIME, which every sample carries, so
//! the aggregate is computed afterwards from timestamps (see
//! [`super::series`]) over each step's trimmed window. Phases do the rest:
//! a stream whose session failed or started late does not cover its step's
//! window, and that step's figures are left out rather than added up short.

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::burst::{self, BurstSearch};
use super::kinds::AggTest;
use super::model::{self, Coverage, StepSpan, StreamSeries, StreamSummary, TestAgg};
use super::progress::RampProgress;
use super::ramp;
use super::series::{self, Sample};
use super::steps::StreamExtra;
use crate::clock::unix_now;
use crate::control::client::{self, Observer, Target};
use crate::plan::TestPlan;
use crate::result::{Interval, TestResult};
use crate::stats::latency::SparseHistogram;

/// How a ramp runs.
#[derive(Clone, Debug)]
pub struct RampConfig {
    pub targets: Vec<Target>,
    pub max_streams: u32,
    pub step: Duration,
    pub interval: Duration,
    /// Trimmed from each end of a step's window (1 s).
    pub trim: Duration,
}

/// An interim figure of one stream, for the progress bar.
struct Update {
    stream: u32,
    value: f64,
}

struct Forward {
    stream: u32,
    test: AggTest,
    plan: TestPlan,
    tx: mpsc::Sender<Update>,
    /// Each interval's latency histogram (transaction tests), for the steps.
    histograms: BTreeMap<u32, SparseHistogram>,
}

impl Observer for Forward {
    fn wants_interval_histograms(&self) -> bool {
        self.test.transactions()
    }

    fn on_interval_histograms(&mut self, h: &BTreeMap<u32, SparseHistogram>) {
        self.histograms = h.clone();
    }

    fn on_interval(&mut self, iv: &Interval) {
        let _ = self.tx.send(Update {
            stream: self.stream,
            value: self.test.value(&self.plan, iv),
        });
    }
}

/// The samples of one finished session.
pub fn stream_series(
    index: u32,
    server: &str,
    test: AggTest,
    plan: &TestPlan,
    r: &TestResult,
) -> StreamSeries {
    let samples = merge_short(
        r.intervals
            .iter()
            .filter(|iv| iv.end_s > iv.start_s)
            .map(|iv| Sample {
                end: iv.unix_end_s,
                interval_s: iv.end_s - iv.start_s,
                value: test.value(plan, iv),
            }),
        Duration::from_nanos(plan.interval_ns).as_secs_f64() / 4.0,
    );
    let s = &r.summary;
    let sd = |side: &crate::result::Side| {
        side.service_demand_us_per_tran
            .or(side.service_demand_us_per_kb)
    };
    // A session that failed before its window measured nothing of its own.
    let summary = (s.duration_s > 0.0).then(|| StreamSummary {
        duration_s: Some(s.duration_s),
        value: Some(test.value_of(plan, s.transactions_per_s, s.throughput_bps)),
        throughput_bps: s.throughput_bps,
        transactions_per_s: s.transactions_per_s,
        transactions: s.transactions,
        bytes_sent: Some(s.local.bytes_sent),
        bytes_received: Some(s.local.bytes_received),
        latency_ns: s.latency_ns.clone(),
        local_cpu_util_percent: s.local.cpu_util_percent,
        remote_cpu_util_percent: s.remote.cpu_util_percent,
        local_service_demand: sd(&s.local),
        remote_service_demand: sd(&s.remote),
        local_tcp_retransmits: s.local.tcp_retransmits,
        remote_tcp_retransmits: s.remote.tcp_retransmits,
        netperf: Default::default(),
    });
    StreamSeries {
        index,
        server: server.to_string(),
        started: samples.first().map(Sample::start),
        error: r.summary.error.clone(),
        samples,
        summary,
    }
}

/// Samples shorter than `min_s` (a tick right after a stall, microseconds
/// long) merged into the one before (or, first, the one after): the same
/// units over the joint length, so the integral is unchanged and no
/// stream's CSV holds a rate measured over 13 µs.
fn merge_short(samples: impl Iterator<Item = Sample>, min_s: f64) -> Vec<Sample> {
    let mut out: Vec<Sample> = Vec::new();
    let join = |a: Sample, b: Sample| {
        let len = a.interval_s + b.interval_s;
        Sample {
            end: a.end.max(b.end),
            interval_s: len,
            value: (a.value * a.interval_s + b.value * b.interval_s) / len,
        }
    };
    let mut carry: Option<Sample> = None;
    for x in samples {
        let x = match carry.take() {
            Some(c) => join(c, x),
            None => x,
        };
        if x.interval_s >= min_s {
            out.push(x);
        } else if let Some(last) = out.pop() {
            out.push(join(last, x));
        } else {
            carry = Some(x);
        }
    }
    out.extend(carry);
    out
}

/// The stable code that starts the warning of [`stalls`], for scripts and
/// tests to match rather than the sentence.
pub const SAMPLER_STALLED: &str = "sampler_stalled";

/// One warning when any stream's sampling stalled: an interim sample over
/// twice the interval long (the client's ticks came late: an overloaded
/// host), with how many streams and the worst.
fn stalls(streams: &[StreamSeries], interval: Duration) -> Option<String> {
    let limit = 2.0 * interval.as_secs_f64();
    let worst = |s: &StreamSeries| s.samples.iter().map(|x| x.interval_s).fold(0.0, f64::max);
    let stalled: Vec<(&StreamSeries, f64)> = streams
        .iter()
        .map(|s| (s, worst(s)))
        .filter(|&(_, w)| w > limit)
        .collect();
    let (s, w) = stalled.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1))?;
    Some(format!(
        "{SAMPLER_STALLED}: sampling stalled in {} of {} streams; the longest interim sample spans {w:.2} s where the interval is {:.2} s (stream {} to {}): the host was too busy to sample on time, and those streams' interim figures are averages over the stall",
        stalled.len(),
        streams.len(),
        interval.as_secs_f64(),
        s.index,
        s.server,
    ))
}

/// Run the whole ramp of `test`; never fails: a failed stream is recorded in its series.
pub fn run_ramp(
    test: AggTest,
    burst: u32,
    cfg: &RampConfig,
    progress: &mut RampProgress,
) -> TestAgg {
    let plan = match test {
        AggTest::Sync => ramp::serial(cfg.targets.len()),
        _ => ramp::doubling(cfg.max_streams),
    };
    let n = plan.len();
    let step_s = cfg.step.as_secs_f64();
    let t0 = Instant::now();
    let u0 = unix_now();
    let ramp_end = t0 + cfg.step * n as u32;
    let (tx, rx) = mpsc::channel::<Update>();
    let mut handles = Vec::new();
    let sampler = super::cpu::Sampler::start().ok();
    progress.begin(test.name(), test.unit(), n, cfg.step);
    // Steps begun; a stop request (Ctrl-C) begins no more, and the ramp
    // keeps the steps its streams completed.
    let mut begun = 0;
    for (i, st) in plan.iter().enumerate() {
        let at = t0 + cfg.step * i as u32;
        pump(&rx, progress, at);
        if crate::control::stop::requested() {
            break;
        }
        begun = i + 1;
        progress.step(i, st.running.len() as u32);
        for k in st.added.clone() {
            let target = cfg.targets[ramp::server_of(k, cfg.targets.len())].clone();
            // Until the end of the last step the stream runs in.
            let until = t0 + cfg.step * (ramp::last_step(&plan, k) + 1) as u32;
            let left = until.saturating_duration_since(Instant::now());
            let plan = test.plan(
                burst,
                left.as_nanos().max(1_000_000) as u64,
                cfg.interval.as_nanos() as u64,
            );
            let mut fwd = Forward {
                stream: k,
                test,
                plan: plan.clone(),
                tx: tx.clone(),
                histograms: BTreeMap::new(),
            };
            let h = std::thread::Builder::new()
                .name(format!("agg-stream-{k}"))
                .spawn(move || {
                    let r = client::run(&target, &plan, &mut fwd);
                    let extra = StreamExtra::of(k, &r, &fwd.histograms);
                    (target.label, plan, r, extra)
                })
                .expect("spawning a stream thread");
            handles.push((k, h));
        }
    }
    drop(tx);
    // When the stop request came, if it did: the first sighting here.
    let stopped = crate::control::stop::requested().then(Instant::now);
    pump(&rx, progress, ramp_end + Duration::from_secs(3600));
    progress.end();
    let readings = sampler.map(|s| s.finish()).unwrap_or_default();
    let (streams, extras): (Vec<StreamSeries>, Vec<StreamExtra>) = handles
        .into_iter()
        .map(|(k, h)| match h.join() {
            Ok((label, plan, r, extra)) => (stream_series(k, &label, test, &plan, &r), extra),
            Err(_) => (
                StreamSeries {
                    index: k,
                    server: String::new(),
                    started: None,
                    error: Some("stream thread panicked".into()),
                    samples: Vec::new(),
                    summary: None,
                },
                StreamExtra {
                    index: k,
                    ..Default::default()
                },
            ),
        })
        .unzip();
    // A stop request (Ctrl-C) also ends the running streams at once
    // (`client` drains on it): the step they were in is cut short, so only
    // the steps that ended before the request are kept.
    let kept = if crate::control::stop::requested() {
        let whole = (stopped.unwrap_or_else(Instant::now) - t0).as_secs_f64() / step_s;
        (whole.floor() as usize).min(begun)
    } else {
        begun
    };
    let stalled = stalls(&streams, cfg.interval);
    let spans = spans(&plan[..kept], &streams, u0, step_s, cfg.trim.as_secs_f64());
    let ramp_end_unix = u0 + step_s * kept as f64;
    let mut t = model::analyse(
        test.name(),
        test.unit(),
        (u0, ramp_end_unix),
        &spans,
        streams,
        Coverage::Required { slack_s: 0.05 },
    );
    super::steps::fill(&mut t.steps, &t.streams, &extras, test.unit());
    let hypervisor = crate::sensors::window::on_hypervisor();
    for step in &mut t.steps {
        if let Some(c) = super::cpu::step_cpu(
            &readings,
            (step.start, step.end),
            step.average,
            test.unit(),
            hypervisor,
        ) {
            step.cpu_util_percent = Some(c.util_percent);
            step.service_demand = c.service_demand;
            step.service_demand_source = c.source.map(str::to_string);
        }
    }
    t.warnings.extend(stalled);
    if readings.is_empty() {
        t.warnings.push(
            "no CPU readings (/proc/stat or getrusage unavailable): per-step CPU is null".into(),
        );
    }
    if kept < n {
        t.warnings.push(format!(
            "{}: stopped after {kept} of {n} step(s); the steps its streams completed are kept",
            crate::control::stop::INTERRUPTED
        ));
    }
    if test.uses_burst() {
        t.burst = Some(burst);
    }
    t
}

/// The burst search against one server: 1-byte udp_rr (the tps test) on one
/// flow, each probe running `probe` after a warm-up of a quarter of that.
pub fn find_burst(target: &Target, probe: Duration, min_gain: f64) -> anyhow::Result<BurstSearch> {
    burst::search(min_gain, |b| {
        let mut plan = AggTest::Tps.plan(b, probe.as_nanos() as u64, probe.as_nanos() as u64);
        plan.warmup_ns = (probe / 4).as_nanos() as u64;
        let r = client::run(target, &plan, &mut client::Quiet);
        match (&r.summary.error, r.summary.transactions_per_s) {
            (None, Some(v)) => Ok(v),
            (Some(e), _) => Err(anyhow::anyhow!("burst {b} against {}: {e}", target.label)),
            (None, None) => Err(anyhow::anyhow!("burst {b}: no transactions/s measured")),
        }
    })
}

/// Step windows: from `trim_s` after the step's last stream started to `trim_s` before the next step.
pub fn spans(
    plan: &[ramp::StepPlan],
    streams: &[StreamSeries],
    u0: f64,
    step_s: f64,
    trim_s: f64,
) -> Vec<StepSpan> {
    plan.iter()
        .enumerate()
        .map(|(i, st)| {
            let started = u0 + step_s * i as f64;
            let next = started + step_s;
            let last_start = st
                .added
                .clone()
                .filter_map(|k| streams.get(k as usize).and_then(|s| s.started))
                .fold(started, f64::max);
            let window = series::trim(last_start, next, trim_s)
                .unwrap_or((last_start + trim_s, last_start + trim_s));
            StepSpan {
                streams: st.running.len() as u32,
                first_stream: st.running.start,
                started,
                window,
            }
        })
        .collect()
}

/// Forward interim figures to the progress bar until `until`, until every
/// stream has ended, or until a stop is asked for (looked at every 100 ms).
/// (The stream threads send at most one figure per interval: no busy loop.)
fn pump(rx: &mpsc::Receiver<Update>, progress: &mut RampProgress, until: Instant) {
    const LOOK: Duration = Duration::from_millis(100);
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() || crate::control::stop::requested() {
            return;
        }
        match rx.recv_timeout(left.min(LOOK)) {
            Ok(u) => progress.update(u.stream, u.value),
            Err(mpsc::RecvTimeoutError::Timeout) => progress.tick(),
            // Only once the ramp's sender is dropped and every stream ended.
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn short_samples_merge_into_a_neighbour_keeping_the_units() {
        let x = |end: f64, interval_s: f64, value: f64| super::Sample {
            end,
            interval_s,
            value,
        };
        // 2.65 s stalled, then a 13 µs tick, then on time.
        let v = vec![
            x(10.5, 0.5, 100.0),
            x(13.15, 2.65, 100.0),
            x(13.150013, 0.000013, 0.0),
            x(13.5, 0.349987, 100.0),
        ];
        let m = super::merge_short(v.clone().into_iter(), 0.125);
        assert_eq!(m.len(), 3);
        assert!(m.iter().all(|s| s.interval_s >= 0.125));
        let units = |v: &[super::Sample]| v.iter().map(|s| s.value * s.interval_s).sum::<f64>();
        assert!((units(&m) - units(&v)).abs() < 1e-9);
        assert_eq!(m[1].end, 13.150013);
        // A short first sample joins the next.
        let m = super::merge_short(vec![x(1.0, 0.01, 5.0), x(1.5, 0.5, 5.0)].into_iter(), 0.125);
        assert_eq!(m.len(), 1);
        assert!((m[0].interval_s - 0.51).abs() < 1e-12);
    }

    #[test]
    fn a_stalled_stream_is_named() {
        let stream = |samples| super::StreamSeries {
            index: 3,
            server: "lg".into(),
            started: None,
            error: None,
            samples,
            summary: None,
        };
        let s = |interval_s| super::Sample {
            end: 1.0,
            interval_s,
            value: 1.0,
        };
        let half = std::time::Duration::from_millis(500);
        assert_eq!(super::stalls(&[stream(vec![s(0.5), s(0.9)])], half), None);
        let w = super::stalls(
            &[stream(vec![s(0.5), s(0.9)]), stream(vec![s(0.5), s(2.65)])],
            half,
        )
        .unwrap();
        assert!(
            w.starts_with("sampler_stalled: ")
                && w.contains("in 1 of 2 streams")
                && w.contains("2.65 s")
                && w.contains("stream 3 to lg"),
            "{w}"
        );
    }

    use super::*;

    #[test]
    fn windows_start_after_the_last_stream_of_the_step() {
        let mk = |index: u32, started: f64| StreamSeries {
            index,
            server: String::new(),
            started: Some(started),
            error: None,
            samples: Vec::new(),
            summary: None,
        };
        // Steps of 10 s from 1000: streams 1 and 2 start late in steps 1 and 2.
        let streams = [mk(0, 1000.1), mk(1, 1010.3), mk(2, 1020.2), mk(3, 1020.7)];
        let s = spans(&ramp::doubling(4), &streams, 1000.0, 10.0, 1.0);
        assert_eq!(s[0].window, (1001.1, 1009.0));
        assert_eq!(s[1].window, (1011.3, 1019.0));
        assert_eq!(s[2].window, (1021.7, 1029.0));
        assert_eq!(s[2].streams, 4);
        assert_eq!(s[1].started, 1010.0);
        // Serial: step 2 runs stream 2 alone, from 1020.2.
        let s = spans(&ramp::serial(3), &streams, 1000.0, 10.0, 1.0);
        assert_eq!((s[2].streams, s[2].first_stream), (1, 2));
        assert_eq!(s[2].window, (1021.2, 1029.0));
    }
}
