//! results.json of `thrum agg` and `thrum report` (schema `thrum.agg.v1`),
//! and the analysis that turns per-stream series and step windows into it.
//!
//! The analysis is the same whatever the source (a thrum ramp, a saved
//! results.json, netperf's demo-mode files): per-stream samples plus, per
//! step, the number of streams and the measurement window. Names are a
//! contract, documented in docs/agg.md and checked against
//! schema/thrum.agg.v1.json in the tests.

use serde::{Deserialize, Serialize};

use super::burst::BurstSearch;
use super::series::{self, Sample};

pub const SCHEMA: &str = "thrum.agg.v1";

/// The whole document.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AggResult {
    pub schema: String,
    /// `thrum agg`, or `netperf demo-mode logs` for a re-analysed netperf run.
    pub source: String,
    pub spec: AggSpec,
    /// Where and by what it ran (thrum version, command line, host, kernel, CPUs).
    #[serde(default)]
    #[schemars(with = "serde_json::Map<String, serde_json::Value>")]
    pub provenance: serde_json::Value,
    pub tests: Vec<TestAgg>,
}

/// What was asked for.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct AggSpec {
    pub hosts: Vec<String>,
    pub tests: Vec<String>,
    pub max_streams: u32,
    pub step_s: f64,
    pub interval_s: f64,
    /// `auto` or the burst given.
    pub burst: String,
    /// Seconds trimmed from each end of a step (1 s).
    pub trim_s: f64,
    /// `--title`: the charts' and the page's title (post_proc.py's `-t`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// `--annotation`: a line of text on every chart and under the page's
    /// title (post_proc.py's `-a`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotation: Option<String>,
}

/// One test's ramp.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TestAgg {
    pub name: String,
    /// Unit of every figure of this test (`Trans/s`, `Mbit/s`, or netperf's own).
    pub unit: String,
    /// Burst used (burst-mode tests).
    pub burst: Option<u32>,
    /// The automatic burst search, when it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst_search: Option<BurstSearch>,
    /// Start and end of the ramp, unix seconds.
    pub start: f64,
    pub end: f64,
    pub steps: Vec<Step>,
    /// Index into `steps` of the complete step with the highest average.
    pub peak_step: Option<usize>,
    /// The aggregate over each second from `start`, in `unit`.
    pub per_second: Vec<f64>,
    pub streams: Vec<StreamSeries>,
    #[serde(default)]
    pub warnings: Vec<String>,
}

/// One step of the ramp and its measurement window.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Step {
    pub index: usize,
    /// Streams running in this step: `first_stream .. first_stream + streams`
    /// (0 for a ramp; the sync test runs one stream per step, to each server in turn).
    pub streams: u32,
    /// 0 for a ramp; the sync test runs one stream per step, to each server in turn.
    #[serde(default)]
    pub first_stream: u32,
    /// When the step's first added stream was started, unix seconds.
    pub started: f64,
    /// The measurement window, unix seconds.
    pub start: f64,
    /// End of the measurement window, unix seconds.
    pub end: f64,
    /// Of the per-second aggregate over the window; null when not every
    /// stream of the step ran for the whole window.
    pub average: Option<f64>,
    pub minimum: Option<f64>,
    pub maximum: Option<f64>,
    pub complete: bool,
    /// CPU utilisation (%, 0–100 of all CPUs) of the host running `thrum
    /// agg` over the window, from /proc/stat; null for `thrum report` input
    /// and when the window held fewer than two readings.
    pub cpu_util_percent: Option<f64>,
    /// µs of CPU per transaction (Trans/s tests) or per KB (Mbit/s tests)
    /// at the step's average, from `service_demand_source`.
    pub service_demand: Option<f64>,
    /// `rusage` (this process's CPU time; on a virtual machine) or `proc_stat`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_demand_source: Option<String>,
    /// Transaction tests: the latency of the transactions that completed in
    /// the window, from every running stream's histograms merged (not an
    /// average of their percentiles); null for an incomplete step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ns: Option<crate::stats::latency::LatencySummary>,
    /// The load generators' CPU utilisation over the window (%, 0–100,
    /// weighted by each one's CPUs), from the /proc/stat ticks their servers
    /// send with each sample; null where one of them sent none.
    #[serde(default)]
    pub remote_cpu_util_percent: Option<f64>,
    /// The load generators' CPU µs per transaction or per KB at the step's
    /// average, all of them together (from /proc/stat).
    #[serde(default)]
    pub remote_service_demand: Option<f64>,
    /// Each load generator's CPU over the window.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remote_hosts: Vec<HostCpu>,
}

/// One load generator's CPU over a step's window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct HostCpu {
    /// The load generator as `--hosts` named it.
    pub host: String,
    /// Streams of the step that ran against it.
    pub streams: u32,
    /// Its CPU utilisation over the window (%, 0–100 of its CPUs), from
    /// /proc/stat; null where its server sent no CPU ticks (older servers).
    #[schemars(range(min = 0, max = 100))]
    pub cpu_util_percent: Option<f64>,
    /// Its CPUs.
    pub cpus: Option<usize>,
    /// µs of its CPU per transaction (Trans/s tests) or per KB (Mbit/s
    /// tests) of the streams it served in the step, from /proc/stat.
    pub service_demand: Option<f64>,
}

/// One stream: one flow on its own worker thread against one server.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StreamSeries {
    pub index: u32,
    pub server: String,
    /// When its traffic started, unix seconds (first sample's start).
    pub started: Option<f64>,
    pub error: Option<String>,
    pub samples: Vec<Sample>,
    /// The stream's own final figures over its whole session, as each
    /// netperf process's .out file ends with them; absent when the session
    /// measured nothing (or a netperf file ends without them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<StreamSummary>,
}

/// One stream's final result: its session's measurement window (from its
/// start to the end of the last step it ran in, not a step's window).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct StreamSummary {
    /// Length of its measurement window, seconds.
    pub duration_s: Option<f64>,
    /// Its rate over the window, in the test's unit.
    pub value: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throughput_bps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transactions_per_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transactions: Option<u64>,
    /// This end's (the load generator's client side's) bytes over the window.
    pub bytes_sent: Option<u64>,
    pub bytes_received: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_ns: Option<crate::stats::latency::LatencySummary>,
    /// Each end's CPU utilisation (% of all CPUs) and service demand (µs
    /// per transaction or per KB), as `thrum run` reports them.
    pub local_cpu_util_percent: Option<f64>,
    pub remote_cpu_util_percent: Option<f64>,
    pub local_service_demand: Option<f64>,
    pub remote_service_demand: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_tcp_retransmits: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote_tcp_retransmits: Option<u64>,
    /// netperf's own final `KEY=value` lines (omni output selectors), as
    /// its .out file gives them.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub netperf: std::collections::BTreeMap<String, String>,
}

/// A step as its source knows it: streams running, when the step began and its measurement window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepSpan {
    pub streams: u32,
    /// The running streams are `first_stream..first_stream + streams`.
    pub first_stream: u32,
    pub started: f64,
    pub window: (f64, f64),
}

/// Whether to require that each stream of a step covers the window (thrum's
/// own streams; netperf's files carry no start/stop of their own).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Coverage {
    Required { slack_s: f64 },
    Assumed,
}

/// The longest test a saved run or a netperf log may span, s: a day. The
/// per-second aggregate has one element per second of it (1.7 MB of JSON
/// and as much CSV at a day), so a crafted end 10^12 s after the start
/// would ask for terabytes; no aggregate run lasts a day.
pub const MAX_SPAN_S: f64 = 86_400.0;
/// The most interim samples a saved run may carry over all its streams:
/// every second of the aggregate sums over all of them.
pub const MAX_SAMPLES: usize = 2_000_000;

/// Refuse a test whose times no run produces, naming the field: a start
/// or end that is not a finite number, an end before the start or more
/// than [`MAX_SPAN_S`] after it, a step window or start outside that,
/// more than [`MAX_SAMPLES`] samples. Checked before anything is
/// allocated by the span (`thrum report` on a crafted file).
pub fn check_span(
    (start, end): (f64, f64),
    spans: &[StepSpan],
    samples: usize,
) -> Result<(), String> {
    let within = |t: f64| t.is_finite() && t >= start - MAX_SPAN_S && t <= start + MAX_SPAN_S;
    if !start.is_finite() {
        return Err(format!("start {start} is not a time"));
    }
    if !within(end) || end < start {
        return Err(format!(
            "end {end} is not within a day ({MAX_SPAN_S} s) after start {start}"
        ));
    }
    for (i, sp) in spans.iter().enumerate() {
        for (field, t) in [
            ("started", sp.started),
            ("start", sp.window.0),
            ("end", sp.window.1),
        ] {
            if !within(t) {
                return Err(format!(
                    "step {i}: {field} {t} is not within a day ({MAX_SPAN_S} s) of the test's start {start}"
                ));
            }
        }
    }
    if samples > MAX_SAMPLES {
        return Err(format!("{samples} interim samples (at most {MAX_SAMPLES})"));
    }
    Ok(())
}

/// Analyse one test: per-second aggregate, per-step stats, the peak step.
pub fn analyse(
    name: &str,
    unit: &str,
    (start, end): (f64, f64),
    spans: &[StepSpan],
    streams: Vec<StreamSeries>,
    coverage: Coverage,
) -> TestAgg {
    let all: Vec<&[Sample]> = streams.iter().map(|s| s.samples.as_slice()).collect();
    let mut warnings = Vec::new();
    let steps: Vec<Step> = spans
        .iter()
        .enumerate()
        .map(|(index, sp)| {
            let (a, b) = sp.window;
            let ids = sp.first_stream..sp.first_stream + sp.streams;
            let running: Vec<&StreamSeries> =
                streams.iter().filter(|s| ids.contains(&s.index)).collect();
            let complete = match coverage {
                Coverage::Assumed => true,
                Coverage::Required { slack_s } => {
                    let missing: Vec<u32> = running
                        .iter()
                        .filter(|s| !series::covers(&s.samples, a, b, slack_s))
                        .map(|s| s.index)
                        .collect();
                    if !missing.is_empty() || running.len() < sp.streams as usize {
                        warnings.push(format!(
                            "step {index}: stream(s) {missing:?} did not run for the whole window; its figures are left out"
                        ));
                    }
                    missing.is_empty() && running.len() == sp.streams as usize
                }
            };
            let stats = complete
                .then(|| series::window_stats(&all, a, b))
                .flatten();
            if complete && stats.is_none() {
                warnings.push(format!("step {index}: its measurement window is empty"));
            }
            Step {
                index,
                streams: sp.streams,
                first_stream: sp.first_stream,
                started: sp.started,
                start: a,
                end: b,
                average: stats.map(|w| w.average),
                minimum: stats.map(|w| w.minimum),
                maximum: stats.map(|w| w.maximum),
                complete: stats.is_some(),
                cpu_util_percent: None,
                service_demand: None,
                service_demand_source: None,
                latency_ns: None,
                remote_cpu_util_percent: None,
                remote_service_demand: None,
                remote_hosts: Vec::new(),
            }
        })
        .collect();
    // Why streams failed, from the record itself, so that a reanalysis
    // (thrum report) says it as the run did.
    for s in &streams {
        if let Some(e) = &s.error {
            warnings.push(format!("stream {} to {}: {e}", s.index, s.server));
        }
    }
    let peak_step = steps
        .iter()
        .filter_map(|s| s.average.map(|a| (s.index, a)))
        .max_by(|x, y| x.1.total_cmp(&y.1))
        .map(|(i, _)| i);
    TestAgg {
        name: name.to_string(),
        unit: unit.to_string(),
        burst: None,
        burst_search: None,
        start,
        end,
        per_second: series::per_second(&all, start, end),
        steps,
        peak_step,
        streams,
        warnings,
    }
}

/// The spans of a saved test's steps, as [`analyse`] takes them.
pub fn spans(t: &TestAgg) -> Vec<StepSpan> {
    t.steps
        .iter()
        .map(|s| StepSpan {
            streams: s.streams,
            first_stream: s.first_stream,
            started: s.started,
            window: (s.start, s.end),
        })
        .collect()
}

/// A saved aggregate run analysed again, as `thrum report` and `thrum
/// web` read one: each test's span checked first (a crafted or corrupt
/// document is refused, not analysed), then every test re-analysed from
/// its streams, its coverage required when thrum itself measured it.
pub fn reanalyse_saved(saved: AggResult) -> Result<AggResult, String> {
    for t in &saved.tests {
        let samples = t.streams.iter().map(|s| s.samples.len()).sum();
        check_span((t.start, t.end), &spans(t), samples)
            .map_err(|e| format!("test {}: {e}", crate::text::echo(&t.name)))?;
    }
    let coverage = if saved.source == "thrum agg" {
        Coverage::Required { slack_s: 0.05 }
    } else {
        Coverage::Assumed
    };
    let tests = saved.tests.iter().map(|t| reanalyse(t, coverage)).collect();
    Ok(AggResult { tests, ..saved })
}

/// Re-analyse a saved test from its own streams and windows.
pub fn reanalyse(t: &TestAgg, coverage: Coverage) -> TestAgg {
    let spans = spans(t);
    let mut out = analyse(
        &t.name,
        &t.unit,
        (t.start, t.end),
        &spans,
        t.streams.clone(),
        coverage,
    );
    out.burst = t.burst;
    out.burst_search = t.burst_search.clone();
    // CPU was measured while the test ran and is not in the samples: carry
    // each step's over. Service demand is CPU per unit at the step's
    // average, so it follows the average if the reanalysis moved it.
    for (new, old) in out.steps.iter_mut().zip(&t.steps) {
        new.cpu_util_percent = old.cpu_util_percent;
        // So are the latency histograms and the load generators' CPU,
        // kept only as the step's figures: carried over while the step's
        // window is the same and it is still complete.
        if new.complete && (new.start, new.end) == (old.start, old.end) {
            new.latency_ns = old.latency_ns.clone();
            new.remote_cpu_util_percent = old.remote_cpu_util_percent;
            new.remote_hosts = old.remote_hosts.clone();
            new.remote_service_demand = match (old.remote_service_demand, old.average, new.average)
            {
                (Some(sd), Some(a), Some(b)) if a > 0.0 && b > 0.0 => Some(sd * (a / b)),
                _ => None,
            };
        }
        new.service_demand_source = old.service_demand_source.clone();
        new.service_demand = match (old.service_demand, old.average, new.average) {
            // a / b first: exactly 1 when the average did not move, so the
            // figure comes back bit for bit.
            (Some(sd), Some(a), Some(b)) if a > 0.0 && b > 0.0 => Some(sd * (a / b)),
            _ => None,
        };
    }
    // Warnings the run made that the samples cannot remake (no CPU
    // readings) stay; the ones analyse makes are made again.
    for w in &t.warnings {
        if !out.warnings.contains(w) && !w.starts_with("step ") {
            out.warnings.push(w.clone());
        }
    }
    out
}

/// Whether a run of this test failed as `thrum agg` counts it: a stream
/// ended in an error, or no step was complete. `thrum report` exits the same.
pub fn failed(t: &TestAgg) -> bool {
    t.streams.iter().any(|s| s.error.is_some()) || t.peak_step.is_none()
}

/// The stdout summary in post_proc.py's words: the peak step, and with
/// `all_steps` every step. The test's warnings are the command's to say,
/// on stderr.
pub fn summary_text(t: &TestAgg, all_steps: bool) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let line = |s: &mut String, what: &str, of: &str, v: Option<f64>, st: &Step| {
        // Local wall-clock time, which a reader can match to other logs;
        // the unix seconds after it for scripts.
        let _ = writeln!(
            s,
            "{what} of {of} is {} {} from {} to {} (unix {:.3} to {:.3})",
            v.map_or("n/a".to_string(), |v| format!("{v:.3}")),
            t.unit,
            crate::units::fmt_local_time(st.start, true),
            crate::units::fmt_local_time(st.end, false),
            st.start,
            st.end
        );
    };
    let _ = writeln!(
        s,
        "{}: {} step(s), up to {} stream(s){}",
        t.name,
        t.steps.len(),
        t.steps.last().map_or(0, |x| x.streams),
        t.burst.map_or(String::new(), |b| format!(", burst {b}"))
    );
    match t.peak_step.map(|i| &t.steps[i]) {
        Some(p) => {
            line(&mut s, "Average", "peak interval", p.average, p);
            line(&mut s, "Minimum", "peak interval", p.minimum, p);
            line(&mut s, "Maximum", "peak interval", p.maximum, p);
        }
        None => s.push_str("No complete step: no peak interval\n"),
    }
    if all_steps {
        for st in &t.steps {
            let of = format!("interval {} ({} streams)", st.index, st.streams);
            line(&mut s, "Average", &of, st.average, st);
            line(&mut s, "Minimum", &of, st.minimum, st);
            line(&mut s, "Maximum", &of, st.maximum, st);
        }
    }
    s
}

/// Test fixtures shared by agg's modules: a stream's series sampled every
/// half second.
#[cfg(test)]
pub(crate) mod fixtures {
    use super::{Sample, StreamSeries};

    /// Half-second samples of `value` ending from `from + 0.5` to `to`.
    pub(crate) fn samples(from: f64, to: f64, value: f64) -> Vec<Sample> {
        let mut v = Vec::new();
        let mut t = from + 0.5;
        while t <= to + 1e-9 {
            v.push(Sample {
                end: t,
                interval_s: 0.5,
                value,
            });
            t += 0.5;
        }
        v
    }

    /// Stream `index` on `server`, started at `from`, sampled to `to`.
    pub(crate) fn stream(index: u32, server: &str, from: f64, to: f64, value: f64) -> StreamSeries {
        StreamSeries {
            index,
            server: server.into(),
            started: Some(from),
            error: None,
            samples: samples(from, to, value),
            summary: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(index: u32, from: f64, to: f64, value: f64) -> StreamSeries {
        fixtures::stream(index, "lg", from, to, value)
    }

    #[test]
    fn steps_peak_and_missing_streams() {
        // Stream 0 runs 0..10 at 100/s, stream 1 runs 5..10 at 50/s.
        let streams = vec![stream(0, 0.0, 10.0, 100.0), stream(1, 5.0, 10.0, 50.0)];
        let spans = [
            StepSpan {
                streams: 1,
                first_stream: 0,
                started: 0.0,
                window: (1.0, 4.0),
            },
            StepSpan {
                streams: 2,
                first_stream: 0,
                started: 5.0,
                window: (6.0, 9.0),
            },
        ];
        let t = analyse(
            "tps",
            "Trans/s",
            (0.0, 10.0),
            &spans,
            streams.clone(),
            Coverage::Required { slack_s: 0.01 },
        );
        assert_eq!(t.steps[0].average, Some(100.0));
        assert_eq!(t.steps[1].average, Some(150.0));
        assert_eq!(t.peak_step, Some(1));
        assert_eq!(t.per_second[7], 150.0);
        assert!(t.warnings.is_empty());
        // Stream 1 starting late leaves step 1 incomplete: no figures, no peak there.
        let late = vec![streams[0].clone(), stream(1, 7.0, 10.0, 50.0)];
        let t = analyse(
            "tps",
            "Trans/s",
            (0.0, 10.0),
            &spans,
            late,
            Coverage::Required { slack_s: 0.01 },
        );
        assert_eq!(t.steps[1].average, None);
        assert!(!t.steps[1].complete);
        assert_eq!(t.peak_step, Some(0));
        assert_eq!(t.warnings.len(), 1);
        let text = summary_text(&t, true);
        assert!(
            text.contains("Average of peak interval is 100.000 Trans/s from ")
                && text.contains(" (unix 1.000 to 4.000)"),
            "{text}"
        );
        assert!(text.contains("Average of interval 1 (2 streams) is n/a"));
    }

    /// What `thrum report` must not lose from a saved thrum run: each step's
    /// CPU and service demand (measured while it ran, not in the samples)
    /// and why streams failed; and a failed run is a failed report.
    #[test]
    fn reanalysis_keeps_cpu_and_stream_errors() {
        let spans = [StepSpan {
            streams: 2,
            first_stream: 0,
            started: 0.0,
            window: (1.0, 3.0),
        }];
        let mut broken = stream(1, 0.0, 1.5, 50.0);
        broken.error = Some("server 127.0.0.1:1 has not answered for 3s".into());
        let streams = vec![stream(0, 0.0, 4.0, 100.0), broken];
        let mut t = analyse(
            "tps",
            "Trans/s",
            (0.0, 4.0),
            &spans,
            streams,
            Coverage::Required { slack_s: 0.05 },
        );
        assert!(failed(&t));
        let why = "stream 1 to lg: server 127.0.0.1:1 has not answered for 3s";
        assert!(t.warnings.iter().any(|w| w == why), "{:?}", t.warnings);
        t.steps[0].cpu_util_percent = Some(77.9);
        t.steps[0].service_demand = Some(0.27);
        t.steps[0].service_demand_source = Some("rusage".into());
        t.warnings.push("no CPU readings (...)".into());
        let r = reanalyse(&t, Coverage::Required { slack_s: 0.05 });
        assert_eq!(r.steps[0].cpu_util_percent, Some(77.9));
        assert_eq!(r.steps[0].service_demand_source.as_deref(), Some("rusage"));
        assert_eq!(
            r.steps[0].service_demand,
            t.steps[0]
                .service_demand
                .filter(|_| r.steps[0].average.is_some())
        );
        assert_eq!(
            r.warnings.iter().filter(|w| *w == why).count(),
            1,
            "{:?}",
            r.warnings
        );
        assert!(r.warnings.iter().any(|w| w.starts_with("no CPU readings")));
        assert!(failed(&r));
    }
}
