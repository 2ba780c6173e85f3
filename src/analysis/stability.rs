//! How steady the figure of merit was over the measurement window: the
//! coefficient of variation of the per-interval figure, its trend from the
//! first third to the last, and flows that stalled while others moved.

use crate::plan::Merit;
use crate::plan::TestPlan;
use crate::result::{Interval, Stability};
use crate::warning::{Code, Warning};

/// A trend beyond this (in percent, either way) gets a warning.
pub const TREND_WARN_PERCENT: f64 = 10.0;

/// Judge the measure-phase intervals. Intervals whose figure needs the
/// server's sample and lack it are left out.
pub fn of(plan: &TestPlan, measure: &[&Interval], quota_limited: bool) -> Stability {
    // A figure of bytes the client sends is counted by the server.
    let d = plan.test.traits();
    let needs_remote = d.merit == Merit::Throughput && d.ways(plan).client_sends;
    let xs: Vec<f64> = measure
        .iter()
        .filter(|i| !needs_remote || !i.remote.is_empty())
        .filter_map(|i| i.headline())
        .collect();
    let mut st = Stability::default();
    let n = xs.len();
    if n >= 2 {
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        st.cv = (mean > 0.0).then(|| var.sqrt() / mean);
    }
    if n >= 3 {
        let third = n / 3;
        let avg = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let (first, last) = (avg(&xs[..third]), avg(&xs[n - third..]));
        if first > 0.0 {
            let t = 100.0 * (last - first) / first;
            st.trend_percent = Some(t);
            if t.abs() > TREND_WARN_PERCENT {
                st.warnings.push(Warning::new(Code::Trend, format!(
                    "the figure trends {t:+.1} % from the first third of the window to the last: the system did not reach a steady state (longer --warmup or --duration?)"
                )));
            }
        }
    }
    // A flow that stops moving while the others go on (neper's
    // correlation coefficient stays near 1 when that happens; this does
    // not). Count-limited runs are left out: flows that met their quota idle.
    if !quota_limited {
        let moved = |i: &Interval, f: usize| {
            i.local
                .get(f)
                .is_some_and(|c| c.bytes_sent + c.bytes_received + c.transactions > 0)
        };
        let flows = measure.iter().map(|i| i.local.len()).max().unwrap_or(0);
        for f in 0..flows {
            let stalled: Vec<u32> = measure
                .iter()
                .filter(|i| !moved(i, f) && (0..flows).any(|g| g != f && moved(i, g)))
                .map(|i| i.index)
                .collect();
            if let (Some(a), Some(b)) = (stalled.first(), stalled.last()) {
                st.warnings.push(Warning::new(Code::FlowStalled, format!(
                    "flow {f} moved nothing in {} of {} measure intervals while other flows did (intervals {a}..={b})",
                    stalled.len(),
                    measure.len()
                )));
            }
        }
    }
    st
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::intervals::figures;
    use crate::plan::TestKind;
    use crate::stats::counters::Counts;

    /// Measure intervals of tcp_rr with per-flow transaction counts.
    fn intervals(per_flow: &[&[u64]]) -> Vec<Interval> {
        per_flow
            .iter()
            .enumerate()
            .map(|(k, flows)| {
                let local: Vec<Counts> = flows
                    .iter()
                    .map(|&t| Counts {
                        transactions: t,
                        bytes_sent: t,
                        bytes_received: t,
                        ..Counts::default()
                    })
                    .collect();
                let sum = figures(
                    &TestPlan::new(TestKind::TcpRr),
                    Counts::sum(&local),
                    Counts::default(),
                    1.0,
                    1.0,
                );
                Interval {
                    local,
                    sum,
                    ..crate::result::fixtures::interval(k as u32, k as f64, 1.0)
                }
            })
            .collect()
    }

    fn judge(per_flow: &[&[u64]]) -> Stability {
        let ivs = intervals(per_flow);
        let refs: Vec<&Interval> = ivs.iter().collect();
        of(&TestPlan::new(TestKind::TcpRr), &refs, false)
    }

    #[test]
    fn steady_figures_are_stable() {
        let st = judge(&[
            &[100, 100],
            &[101, 99],
            &[100, 100],
            &[99, 101],
            &[100, 100],
            &[100, 100],
        ]);
        assert!(st.cv.unwrap() < 0.01);
        assert!(st.trend_percent.unwrap().abs() < 1.0);
        assert!(st.warnings.is_empty(), "{:?}", st.warnings);
    }

    #[test]
    fn a_flow_that_stops_halfway_is_named() {
        // Flow 1 stops after three intervals. The correlation of the
        // cumulative total against time (neper's correlation_coefficient)
        // still reads 0.98 here.
        let st = judge(&[
            &[100, 100],
            &[100, 100],
            &[100, 100],
            &[100, 0],
            &[100, 0],
            &[100, 0],
        ]);
        assert!(
            st.warnings.iter().any(|w| w.code == Code::FlowStalled
                && w.message.contains("flow 1 moved nothing in 3 of 6")),
            "{:?}",
            st.warnings
        );
        assert!((st.trend_percent.unwrap() + 50.0).abs() < 1e-9);
        assert!(
            st.warnings
                .iter()
                .any(|w| w.code == Code::Trend && w.message.contains("trends -50.0 %"))
        );
        assert!(st.cv.unwrap() > 0.2);
    }

    #[test]
    fn a_rising_figure_trends() {
        let st = judge(&[&[100], &[100], &[110], &[120], &[130], &[130]]);
        assert!((st.trend_percent.unwrap() - 30.0).abs() < 1e-9);
        assert_eq!(st.warnings.len(), 1);
    }

    #[test]
    fn quota_limited_runs_do_not_flag_idle_flows() {
        let ivs = intervals(&[&[100, 100], &[100, 0]]);
        let refs: Vec<&Interval> = ivs.iter().collect();
        assert!(
            of(&TestPlan::new(TestKind::TcpRr), &refs, true)
                .warnings
                .is_empty()
        );
        assert!(judge(&[&[100]]).cv.is_none());
    }
}
