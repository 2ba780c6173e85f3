//! netperf's -i/-I: repeat a whole test until the confidence interval of
//! its mean is as narrow as asked, then report the means.
//!
//! The loop takes the run as a closure, so the scheduler is tested without
//! a network (hyperfine's scheduler and its mock executor are the model);
//! `client::run_repeated` hands it a real session each time.

use crate::plan::TestPlan;
use crate::result::{Confidence, Iteration, Summary, TestResult};
use crate::stats::confidence::{Rule, mean_interval};
use crate::stats::latency::LatencyHistogram;
use crate::warning::{Code, Warning};

/// netperf's -i/-I: how often to repeat a test and when to stop.
#[derive(Clone, Copy, Debug)]
pub struct Repeat {
    pub min: u32,
    pub max: u32,
    /// 95 or 99.
    pub level: u32,
    /// The whole interval in percent of the mean.
    pub width_percent: f64,
}

/// Run the test (`run_once`: one whole session, or a stand-in in tests)
/// again and again until the confidence interval of the mean figure of
/// merit (and of CPU utilisation) is within the width, or `max` runs. The
/// result is the last run's, with `iterations` and `confidence` filled, the
/// summary's figures of merit, CPU utilisation and service demand replaced
/// by their mean over the successful runs, and the latency merged over
/// every run (docs/json.md).
pub fn repeat(
    plan: &TestPlan,
    rep: Repeat,
    run_once: &mut dyn FnMut() -> TestResult,
    on_iteration: &mut dyn FnMut(&Iteration),
) -> TestResult {
    let rule = Rule {
        min: rep.min,
        max: rep.max,
        level: rep.level as f64 / 100.0,
        width_percent: rep.width_percent,
    };
    let mut iterations: Vec<Iteration> = Vec::new();
    let mut summaries: Vec<Summary> = Vec::new();
    let mut latency = LatencyHistogram::new();
    let mut last;
    loop {
        let r = run_once();
        let it = Iteration::of(iterations.len() as u32 + 1, &r);
        on_iteration(&it);
        iterations.push(it);
        if let Some(h) = r
            .summary
            .histogram
            .as_deref()
            .and_then(|h| LatencyHistogram::from_base64(h).ok())
        {
            latency.merge(&h);
        }
        let failed = r.summary.error.is_some();
        if !failed {
            summaries.push(r.summary.clone());
        }
        last = r;
        if failed || rule.done(&slices(&series(&iterations))) {
            break;
        }
    }
    let figs: Vec<f64> = iterations
        .iter()
        .filter(|i| i.error.is_none())
        .map(|i| i.figure)
        .collect();
    let level = rule.level;
    let width = |xs: Option<Vec<f64>>| {
        xs.and_then(|v| mean_interval(&v, level))
            .map(|m| m.width_percent)
    };
    let fig_ci = mean_interval(&figs, level);
    let all = |f: fn(&Iteration) -> Option<f64>| -> Option<Vec<f64>> {
        iterations.iter().map(f).collect()
    };
    let achieved = rule.achieved(&slices(&series(&iterations))) && last.summary.error.is_none();
    let conf = Confidence {
        level: rep.level,
        width_percent_requested: rep.width_percent,
        width_percent_achieved: fig_ci.map(|m| m.width_percent),
        achieved,
        iterations_min: rep.min,
        iterations_max: rep.max,
        iterations_run: iterations.len() as u32,
        mean: mean(&figs).unwrap_or(0.0),
        stddev: fig_ci.map(|m| m.stddev),
        half_width: fig_ci.map(|m| m.half_width),
        local_cpu_width_percent_achieved: width(all(|i| i.local_cpu_util_percent)),
        remote_cpu_width_percent_achieved: width(all(|i| i.remote_cpu_util_percent)),
    };
    if !achieved && last.summary.error.is_none() {
        last.summary.warnings.insert(
            0,
            Warning::new(Code::ConfidenceNotReached, format!(
                "CONFIDENCE NOT ACHIEVED: after {} iteration(s) the {} % interval of the mean is {} wide, {} % was asked for; the figures are less certain than requested",
                iterations.len(),
                rep.level,
                conf.width_percent_achieved
                    .map_or("undefined".to_string(), |w| format!("{w:.2} %")),
                rep.width_percent
            )),
        );
    }
    // The figures of merit become means over the successful runs.
    let avg = |f: fn(&Summary) -> Option<f64>| -> Option<f64> {
        let v: Option<Vec<f64>> = summaries.iter().map(f).collect();
        v.and_then(|v| mean(&v))
    };
    if last.summary.error.is_none() {
        let s = &mut last.summary;
        s.throughput_bps = avg(|s| s.throughput_bps);
        s.throughput_bps_c2s = avg(|s| s.throughput_bps_c2s);
        s.throughput_bps_s2c = avg(|s| s.throughput_bps_s2c);
        s.throughput_bps_sent = avg(|s| s.throughput_bps_sent);
        s.transactions_per_s = avg(|s| s.transactions_per_s);
        s.local.cpu_util_percent = avg(|s| s.local.cpu_util_percent);
        s.remote.cpu_util_percent = avg(|s| s.remote.cpu_util_percent);
        // Service demand as netperf reports it with -i: the mean over the
        // runs, like the rate and CPU it is made of, not the last run's.
        s.local.service_demand_us_per_tran = avg(|s| s.local.service_demand_us_per_tran);
        s.local.service_demand_us_per_kb = avg(|s| s.local.service_demand_us_per_kb);
        s.local.service_demand_proc_stat = avg(|s| s.local.service_demand_proc_stat);
        s.local.service_demand_rusage = avg(|s| s.local.service_demand_rusage);
        s.remote.service_demand_us_per_tran = avg(|s| s.remote.service_demand_us_per_tran);
        s.remote.service_demand_us_per_kb = avg(|s| s.remote.service_demand_us_per_kb);
        s.remote.service_demand_proc_stat = avg(|s| s.remote.service_demand_proc_stat);
        s.remote.service_demand_rusage = avg(|s| s.remote.service_demand_rusage);
        if latency.count() > 0 {
            s.latency_ns = latency.summary_with(&plan.percentiles);
            s.histogram = Some(latency.to_base64());
        }
    }
    last.iterations = iterations;
    last.confidence = Some(conf);
    last
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// The series the stopping rule judges: the figure, and CPU utilisation
/// where every run measured it.
fn series(its: &[Iteration]) -> Vec<Vec<f64>> {
    let mut v = vec![
        its.iter()
            .filter(|i| i.error.is_none())
            .map(|i| i.figure)
            .collect::<Vec<f64>>(),
    ];
    for f in [
        |i: &Iteration| i.local_cpu_util_percent,
        |i: &Iteration| i.remote_cpu_util_percent,
    ] {
        if let Some(x) = its.iter().map(f).collect::<Option<Vec<f64>>>() {
            v.push(x);
        }
    }
    v
}

fn slices(v: &[Vec<f64>]) -> Vec<&[f64]> {
    v.iter().map(|x| x.as_slice()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::TestKind;

    /// A finished tcp_rr run with these figures, as a session would return it.
    fn run(tps: f64, cpu: f64, demand: f64) -> TestResult {
        let mut r = crate::result::fixtures::result(TestKind::TcpRr);
        let s = &mut r.summary;
        s.transactions_per_s = Some(tps);
        s.local.cpu_util_percent = Some(cpu);
        s.local.service_demand_us_per_tran = Some(demand);
        s.remote.service_demand_us_per_tran = Some(2.0 * demand);
        r
    }

    fn rule(min: u32, max: u32, width_percent: f64) -> Repeat {
        Repeat {
            min,
            max,
            level: 95,
            width_percent,
        }
    }

    /// Runs from a list, counting how many were asked for.
    fn executor(
        runs: Vec<TestResult>,
    ) -> (
        impl FnMut() -> TestResult,
        std::rc::Rc<std::cell::Cell<usize>>,
    ) {
        let asked = std::rc::Rc::new(std::cell::Cell::new(0));
        let counter = asked.clone();
        let mut runs = runs.into_iter();
        (
            move || {
                counter.set(counter.get() + 1);
                runs.next().expect("no more runs than the rule allows")
            },
            asked,
        )
    }

    /// With -i the service demand is the mean over the runs, as netperf's
    /// is (it was once the last run's, while the rate and CPU were means).
    #[test]
    fn service_demand_is_the_mean_over_the_runs() {
        let (mut exec, asked) = executor(vec![
            run(1000.0, 10.0, 4.0),
            run(1000.0, 10.0, 6.0),
            run(1000.0, 10.0, 8.0),
        ]);
        let plan = TestPlan::new(TestKind::TcpRr);
        let r = repeat(&plan, rule(3, 3, 100.0), &mut exec, &mut |_| {});
        assert_eq!(asked.get(), 3);
        assert_eq!(r.summary.local.service_demand_us_per_tran, Some(6.0));
        assert_eq!(r.summary.remote.service_demand_us_per_tran, Some(12.0));
        assert_eq!(r.iterations.len(), 3);
        // Each iteration keeps its own, the figures the mean is made of.
        let each: Vec<_> = r
            .iterations
            .iter()
            .map(|i| i.local_service_demand_us_per_tran)
            .collect();
        assert_eq!(each, [Some(4.0), Some(6.0), Some(8.0)]);
    }

    /// Identical runs meet any width at the minimum; wildly different ones
    /// run to the maximum and say the confidence was not achieved.
    #[test]
    fn stops_at_the_width_or_the_maximum() {
        let same: Vec<_> = (0..10).map(|_| run(1000.0, 10.0, 5.0)).collect();
        let (mut exec, asked) = executor(same);
        let plan = TestPlan::new(TestKind::TcpRr);
        let r = repeat(&plan, rule(3, 10, 1.0), &mut exec, &mut |_| {});
        assert_eq!(asked.get(), 3);
        assert!(r.confidence.as_ref().unwrap().achieved);

        let wild: Vec<_> = (0..5)
            .map(|i| run(if i % 2 == 0 { 100.0 } else { 5000.0 }, 10.0, 5.0))
            .collect();
        let (mut exec, asked) = executor(wild);
        let r = repeat(&plan, rule(3, 5, 1.0), &mut exec, &mut |_| {});
        assert_eq!(asked.get(), 5);
        let c = r.confidence.as_ref().unwrap();
        assert!(!c.achieved);
        assert_eq!(c.iterations_run, 5);
        assert_eq!(
            r.summary.transactions_per_s,
            Some((3.0 * 100.0 + 2.0 * 5000.0) / 5.0)
        );
        assert_eq!(r.summary.warnings[0].code, Code::ConfidenceNotReached);
        assert!(
            r.summary.warnings[0]
                .message
                .starts_with("CONFIDENCE NOT ACHIEVED")
        );
    }

    /// A failed run ends the loop; its error is the result's.
    #[test]
    fn a_failed_run_stops_the_loop() {
        let mut bad = run(0.0, 0.0, 0.0);
        bad.summary.error = Some("server gone".into());
        let (mut exec, asked) = executor(vec![run(1000.0, 10.0, 5.0), bad]);
        let plan = TestPlan::new(TestKind::TcpRr);
        let r = repeat(&plan, rule(3, 10, 1.0), &mut exec, &mut |_| {});
        assert_eq!(asked.get(), 2);
        assert_eq!(r.summary.error.as_deref(), Some("server gone"));
    }
}
