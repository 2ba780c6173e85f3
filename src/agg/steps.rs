//! What a step carries beside the aggregate rate: the latency of the
//! transactions that completed in its window, from the streams' merged
//! histograms, and the load generators' CPU and service demand over it.
//!
//! netperf's aggregate scripts ran every netperf with `-c -C` and
//! histograms, so a step had both ends' CPU and the latency of the load
//! it held. A step's latency here is one histogram: every running
//! stream's per-interval histograms whose interval lies in the step's
//! window (its middle inside), merged by adding, then read for p50, p99
//! and mean; averaging the streams' percentiles would not be a
//! percentile of anything. A load generator's CPU comes from the /proc/stat
//! ticks its server sends with every interim sample, turned into one
//! utilisation per interval (`Interval::remote_cpu_util_percent`) and
//! integrated over the window as the rates are (`series::window_stats`).
//! Several streams to one host see the same host: one of them is read.

use std::collections::BTreeMap;

use super::model::{HostCpu, Step, StreamSeries};
use super::series::{self, Sample};
use crate::result::TestResult;
use crate::stats::latency::{LatencyHistogram, LatencySummary, SparseHistogram};

/// What a stream's session left besides its samples, for its steps.
#[derive(Clone, Debug, Default)]
pub struct StreamExtra {
    pub index: u32,
    /// Its server's CPU utilisation per interval, as samples.
    pub cpu: Vec<Sample>,
    /// Its server's CPUs.
    pub cpus: Option<usize>,
    /// Each interval's latency histogram: (start, end) in unix seconds.
    pub histograms: Vec<(f64, f64, SparseHistogram)>,
}

impl StreamExtra {
    /// From a finished session and its kept interval histograms.
    pub fn of(index: u32, r: &TestResult, hist: &BTreeMap<u32, SparseHistogram>) -> StreamExtra {
        let span = |iv: &crate::result::Interval| {
            let len = iv.end_s - iv.start_s;
            (iv.unix_end_s - len, iv.unix_end_s, len)
        };
        let cpu = r
            .intervals
            .iter()
            .filter(|iv| iv.end_s > iv.start_s)
            .filter_map(|iv| {
                let (_, end, len) = span(iv);
                Some(Sample {
                    end,
                    interval_s: len,
                    value: iv.remote_cpu_util_percent?,
                })
            })
            .collect();
        let histograms = r
            .intervals
            .iter()
            .filter_map(|iv| {
                let h = hist.get(&iv.index)?;
                let (a, b, _) = span(iv);
                Some((a, b, h.clone()))
            })
            .collect();
        StreamExtra {
            index,
            cpu,
            cpus: r.summary.remote.cpus,
            histograms,
        }
    }
}

/// The streams running in `step`.
fn running<'a, T>(step: &Step, xs: &'a [T], index: impl Fn(&T) -> u32) -> Vec<&'a T> {
    let ids = step.first_stream..step.first_stream + step.streams;
    xs.iter().filter(|x| ids.contains(&index(x))).collect()
}

/// The step's latency: the running streams' interval histograms whose
/// middle lies in the window, merged. None for an incomplete step and
/// where no transaction completed in it.
pub fn step_latency(step: &Step, extras: &[StreamExtra]) -> Option<LatencySummary> {
    if !step.complete {
        return None;
    }
    let mut h = LatencyHistogram::new();
    for x in running(step, extras, |x| x.index) {
        for (a, b, s) in &x.histograms {
            let mid = (a + b) / 2.0;
            if mid >= step.start && mid <= step.end {
                h.merge_sparse(s);
            }
        }
    }
    h.summary()
}

/// Units per second for service demand: transactions, or KB for Mbit/s.
fn units_per_s(v: f64, unit: &str) -> f64 {
    match unit {
        "Mbit/s" => v * 1e6 / 8.0 / 1024.0,
        _ => v,
    }
}

/// The load generators' CPU over a complete step's window, per host (in
/// the order the streams name them), and all of them together: the
/// utilisation weighted by each host's CPUs, and the service demand of
/// their CPU time over the step's whole rate.
pub fn step_remote(
    step: &Step,
    streams: &[StreamSeries],
    extras: &[StreamExtra],
    unit: &str,
) -> (Vec<HostCpu>, Option<f64>, Option<f64>) {
    if !step.complete {
        return (Vec::new(), None, None);
    }
    let (a, b) = (step.start, step.end);
    let mut hosts: Vec<HostCpu> = Vec::new();
    let run = running(step, streams, |s| s.index);
    for s in &run {
        if hosts.iter().any(|h| h.host == s.server) {
            continue;
        }
        let mine: Vec<&&StreamSeries> = run.iter().filter(|t| t.server == s.server).collect();
        // One stream's view of the host whose CPU series covers the window.
        let seen = mine.iter().find_map(|t| {
            let x = extras.iter().find(|x| x.index == t.index)?;
            if !series::covers(&x.cpu, a, b, 0.05) {
                return None;
            }
            let w = series::window_stats(&[&x.cpu], a, b)?;
            // The integral over partial intervals can land a hair past 100.
            Some((w.average.clamp(0.0, 100.0), x.cpus))
        });
        let samples: Vec<&[Sample]> = mine.iter().map(|t| t.samples.as_slice()).collect();
        let rate = series::window_stats(&samples, a, b).map(|w| w.average);
        let util = seen.map(|s| s.0);
        let cpus = seen.and_then(|s| s.1);
        let service_demand = match (util, cpus, rate) {
            (Some(u), Some(n), Some(r)) if r > 0.0 => {
                Some(crate::sensors::service_demand(u, n, units_per_s(r, unit)))
            }
            _ => None,
        };
        hosts.push(HostCpu {
            host: s.server.clone(),
            streams: mine.len() as u32,
            cpu_util_percent: util,
            cpus,
            service_demand,
        });
    }
    // All hosts together, only when every one of them was read.
    let all: Option<Vec<(f64, usize)>> = hosts
        .iter()
        .map(|h| Some((h.cpu_util_percent?, h.cpus?)))
        .collect();
    let all = all.filter(|v| !v.is_empty());
    let cpus: usize = all.iter().flatten().map(|x| x.1).sum();
    let busy: f64 = all.iter().flatten().map(|(u, n)| u * *n as f64).sum();
    let util = all
        .as_ref()
        .filter(|_| cpus > 0)
        .map(|_| busy / cpus as f64);
    let sd = match (util, step.average) {
        (Some(_), Some(avg)) if avg > 0.0 => Some(busy * 1e4 / units_per_s(avg, unit)),
        _ => None,
    };
    (hosts, util, sd)
}

/// Fill each step of `steps` with its latency and the load generators' CPU.
pub fn fill(steps: &mut [Step], streams: &[StreamSeries], extras: &[StreamExtra], unit: &str) {
    for st in steps {
        st.latency_ns = step_latency(st, extras);
        let (hosts, util, sd) = step_remote(st, streams, extras, unit);
        st.remote_hosts = hosts;
        st.remote_cpu_util_percent = util;
        st.remote_service_demand = sd;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(streams: u32, window: (f64, f64)) -> Step {
        Step {
            index: 0,
            streams,
            first_stream: 0,
            started: window.0 - 1.0,
            start: window.0,
            end: window.1,
            average: Some(3000.0),
            minimum: None,
            maximum: None,
            complete: true,
            cpu_util_percent: None,
            service_demand: None,
            service_demand_source: None,
            latency_ns: None,
            remote_cpu_util_percent: None,
            remote_service_demand: None,
            remote_hosts: Vec::new(),
        }
    }

    fn sparse(values: &[u64]) -> SparseHistogram {
        let mut h = LatencyHistogram::new();
        values.iter().for_each(|&v| h.record(v));
        SparseHistogram::of(&h)
    }

    use crate::agg::model::fixtures::samples;

    /// Merged, not averaged: stream 0 has 900 fast transactions and
    /// stream 1 100 slow ones; the merged p50 is the fast value, where the
    /// mean of the two medians would lie between. Intervals outside the
    /// window are left out.
    #[test]
    fn latency_is_the_merged_histograms_percentile() {
        let fast = sparse(&[100_000; 900]);
        let slow = sparse(&[1_000_000; 100]);
        let huge = sparse(&[9_000_000_000; 5000]);
        let extras = [
            StreamExtra {
                index: 0,
                histograms: vec![(10.0, 10.5, fast), (20.0, 20.5, huge.clone())],
                ..Default::default()
            },
            StreamExtra {
                index: 1,
                histograms: vec![(11.0, 11.5, slow), (9.0, 9.5, huge)],
                ..Default::default()
            },
        ];
        let l = step_latency(&step(2, (10.0, 12.0)), &extras).unwrap();
        assert_eq!(l.count, 1000);
        assert!((l.p50 as f64 - 100_000.0).abs() < 100.0, "{}", l.p50);
        assert!((l.p99 as f64 - 1_000_000.0).abs() < 1000.0, "{}", l.p99);
        assert!((l.mean - 190_000.0).abs() < 500.0, "{}", l.mean);
        let mut cut = step(2, (10.0, 12.0));
        cut.complete = false;
        assert!(step_latency(&cut, &extras).is_none());
    }

    /// Two streams to one host count it once; the whole is weighted by CPUs
    /// and its service demand is all hosts' CPU time over the step's rate.
    #[test]
    fn load_generators_cpu_per_host_and_in_all() {
        let stream = |index: u32, server: &str, value: f64| StreamSeries {
            index,
            server: server.into(),
            started: Some(9.0),
            error: None,
            samples: samples(9.0, 13.0, value),
            summary: None,
        };
        let streams = [
            stream(0, "a", 1000.0),
            stream(1, "b", 1000.0),
            stream(2, "a", 1000.0),
        ];
        let extra = |index: u32, util: f64, cpus: usize| StreamExtra {
            index,
            cpu: samples(9.0, 13.0, util),
            cpus: Some(cpus),
            histograms: Vec::new(),
        };
        let extras = [extra(0, 50.0, 2), extra(1, 20.0, 4), extra(2, 50.0, 2)];
        let (hosts, util, sd) = step_remote(&step(3, (10.0, 12.0)), &streams, &extras, "Trans/s");
        assert_eq!(hosts.len(), 2);
        assert_eq!((hosts[0].host.as_str(), hosts[0].streams), ("a", 2));
        assert!((hosts[0].cpu_util_percent.unwrap() - 50.0).abs() < 1e-9);
        // Host a: 50 % of 2 CPUs = 1 CPU-s/s over 2000 Tr/s = 500 µs/Tr.
        assert!((hosts[0].service_demand.unwrap() - 500.0).abs() < 1e-6);
        // 1 + 0.8 busy CPUs of 6: 30 %; 1.8e6 µs/s over 3000/s = 600 µs/Tr.
        assert!((util.unwrap() - 30.0).abs() < 1e-9);
        assert!((sd.unwrap() - 600.0).abs() < 1e-6);
        // A server without CPU ticks: the host's figure and the whole are null.
        let old = [extra(0, 50.0, 2), StreamExtra::default(), extra(2, 50.0, 2)];
        let (hosts, util, _) = step_remote(&step(3, (10.0, 12.0)), &streams, &old, "Trans/s");
        assert!(hosts[1].cpu_util_percent.is_none() && util.is_none());
    }
}
