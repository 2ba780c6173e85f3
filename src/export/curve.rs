//! The latency-vs-throughput curve (`thrum curve`) as text: the terminal
//! table and curve.csv, beside the sweep's (`sweep`). Its SVG is
//! `draw::curve`'s and its page `page::curve`'s; the record, the knee and
//! the saturation point are `crate::curve`'s.
//!
//! People count steps from 1, as the progress lines do while the curve
//! runs: the table and the knee and saturation lines say `step index + 1`.
//! The record (`steps[].index`, `knee.step`, `saturation.step`) and the
//! CSV's `step` column keep the index from 0, as the schema has it.

use std::fmt::Write;

use crate::curve::{Curve, Point, Step};
use crate::stats::latency::LatencySummary;
use crate::text::csv_field;
use crate::units::fmt_ns;

/// The terminal table of `thrum curve`, with the knee and the saturation point.
pub fn table(c: &Curve) -> String {
    let mut s = format!(
        "{} to {}: open-loop steps of {} s; response time from the intended start\n",
        c.test, c.server, c.spec.step_s
    );
    if let Some(c) = c.spec.closed_loop_per_s {
        let _ = writeln!(s, "closed-loop probe: {c:.0} trans/s");
    }
    let _ = writeln!(
        s,
        "{:>4} {:>11} {:>11} {:>10} {:>10} {:>10} {:>10} {:>10} {:>7} {:>7} {:>6} {:>8} {:>6} {:>8}",
        "step",
        "offered/s",
        "achieved/s",
        "p50",
        "p90",
        "p99",
        "p99.9",
        "max",
        "late",
        "lost",
        "cpu%",
        "us/tr",
        "rcpu%",
        "r us/tr"
    );
    for st in &c.steps {
        let mark = match (&c.knee, &c.saturation) {
            (Some(k), _) if k.step == st.index => " <- knee",
            (_, Some(p)) if p.step == st.index => " <- saturation",
            _ => "",
        };
        let _ = writeln!(
            s,
            "{:>4} {:>11.0} {:>11.0} {:>10} {:>10} {:>10} {:>10} {:>10} {:>7} {:>7} {:>6} {:>8} {:>6} {:>8}{mark}",
            st.index + 1,
            st.offered_per_s,
            st.achieved_per_s,
            opt_ns(lat(st, |l| l.p50)),
            opt_ns(lat(st, |l| l.p90)),
            opt_ns(lat(st, |l| l.p99)),
            opt_ns(lat(st, |l| l.p99_9)),
            opt_ns(lat(st, |l| l.max)),
            st.late,
            st.lost,
            opt_f(st.local.cpu_util_percent, 1),
            opt_f(st.local.service_demand_us_per_tran, 2),
            opt_f(st.remote.cpu_util_percent, 1),
            opt_f(st.remote.service_demand_us_per_tran, 2),
        );
        if let Some(e) = &st.error {
            let _ = writeln!(s, "     step {} failed: {e}", st.index + 1);
        }
    }
    let point = |name: &str, p: &Option<Point>, none: &str| match p {
        Some(p) => format!(
            "{name}: {:.0} trans/s (step {}): {}\n",
            p.achieved_per_s,
            p.step + 1,
            p.reason
        ),
        None => format!("{name}: none ({none})\n"),
    };
    s.push_str(&point(
        "knee",
        &c.knee,
        "no step below saturation met the SLO",
    ));
    s.push_str(&point(
        "saturation",
        &c.saturation,
        "every step kept up with its offered rate",
    ));
    if c.interrupted {
        let _ = writeln!(
            s,
            "interrupted after {} whole step(s); the step under way is not kept",
            c.steps.len()
        );
    }
    s
}

/// curve.csv: one row per step.
pub fn csv(c: &Curve) -> String {
    let mut s = String::from(
        "step,offered_per_s,achieved_per_s,p50_ns,p90_ns,p99_ns,p99_9_ns,max_ns,mean_ns,\
service_p50_ns,service_p99_ns,late,lost,generator_lag_p99_ns,local_cpu_util_percent,\
local_service_demand_us_per_tran,remote_cpu_util_percent,remote_service_demand_us_per_tran,knee,saturation,error\n",
    );
    let o = |v: Option<u64>| v.map_or(String::new(), |v| v.to_string());
    let of = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.4}"));
    for st in &c.steps {
        let sv = |f: fn(&LatencySummary) -> u64| st.service_latency_ns.as_ref().map(f);
        let _ = writeln!(
            s,
            "{},{:.3},{:.3},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            st.index,
            st.offered_per_s,
            st.achieved_per_s,
            o(lat(st, |l| l.p50)),
            o(lat(st, |l| l.p90)),
            o(lat(st, |l| l.p99)),
            o(lat(st, |l| l.p99_9)),
            o(lat(st, |l| l.max)),
            of(st.latency_ns.as_ref().map(|l| l.mean)),
            o(sv(|l| l.p50)),
            o(sv(|l| l.p99)),
            st.late,
            st.lost,
            o(st.generator_lag_p99_ns),
            of(st.local.cpu_util_percent),
            of(st.local.service_demand_us_per_tran),
            of(st.remote.cpu_util_percent),
            of(st.remote.service_demand_us_per_tran),
            c.knee.as_ref().is_some_and(|k| k.step == st.index),
            c.saturation.as_ref().is_some_and(|k| k.step == st.index),
            csv_field(st.error.as_deref().unwrap_or("")),
        );
    }
    s
}

fn lat(s: &Step, f: impl Fn(&LatencySummary) -> u64) -> Option<u64> {
    s.latency_ns.as_ref().map(f)
}

fn opt_ns(v: Option<u64>) -> String {
    v.map_or("n/a".into(), |v| fmt_ns(v as f64))
}

fn opt_f(v: Option<f64>, digits: usize) -> String {
    v.map_or("n/a".into(), |v| format!("{v:.digits$}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::curve::analyse;
    use crate::curve::fixtures::{curve, record};

    #[test]
    fn the_table_and_csv_mark_the_knee_and_the_saturation() {
        let mut v = curve();
        v.reverse();
        let mut c = record(v);
        analyse(&mut c);
        let t = table(&c);
        assert!(t.contains("<- knee") && t.contains("<- saturation"), "{t}");
        // Counted from 1, as the progress lines: the saturation point is
        // index 3, the fourth step.
        assert_eq!(c.saturation.as_ref().map(|p| p.step), Some(3));
        assert!(t.contains("(step 4)") && !t.contains("(step 0)"), "{t}");
        let first: Vec<&str> = t
            .lines()
            .skip(2)
            .take(5)
            .map(|l| l.split_whitespace().next().unwrap())
            .collect();
        assert_eq!(first, ["1", "2", "3", "4", "5"], "{t}");
        let csv = csv(&c);
        assert_eq!(csv.lines().count(), 6);
        assert!(csv.lines().nth(3).unwrap().contains(",true,false,"));
    }
}
