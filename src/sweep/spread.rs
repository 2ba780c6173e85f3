//! One sweep cell over several load generators (`thrum sweep --hosts`):
//! the cell's flows spread round-robin over the servers as `agg` spreads
//! its streams, one session per server at once, and their results merged
//! into the cell's one result: rates summed, latency histograms merged,
//! the server's CPU per transaction summed over the servers. Packet counts
//! are left out (an interface's counters are not the cell's), so the
//! packet rule does not judge such a cell.
//!
//! The split and the merge are pure functions (tested on recorded
//! inputs); [`run`] is the only part that talks to the network.

use crate::control::client::{self, Quiet, Target};
use crate::plan::TestPlan;
use crate::result::{Summary, TestResult};
use crate::stats::latency::LatencyHistogram;

/// The cell's plan for each of `n` servers: flow `k` goes to server
/// `k mod n`; a server that gets no flow gets no plan (None). An open-loop
/// rate is shared in proportion to the flows.
pub fn split(plan: &TestPlan, n: usize) -> Vec<Option<TestPlan>> {
    let flows = plan.flows as usize;
    (0..n)
        .map(|i| {
            let f = flows / n + usize::from(i < flows % n);
            (f > 0).then(|| {
                let mut p = plan.clone();
                p.flows = f as u32;
                p.threads = plan.threads.min(f as u32).max(1);
                p.offered_per_s = plan
                    .offered_per_s
                    .map(|r| (r * f as u64 / flows as u64).max(1));
                p
            })
        })
        .collect()
}

/// The servers' results as one: the first's, with the figures of merit
/// summed, latency merged from the histograms, this end's service demand
/// over all the transactions (its CPU is one reading of the whole host,
/// the same in every session), the servers' service demand summed per
/// transaction, their CPU utilisation averaged, and the first error.
pub fn merge(plan: &TestPlan, summaries: Vec<Summary>) -> Summary {
    let mut it = summaries.into_iter();
    let mut out = it.next().unwrap_or_default();
    let rest: Vec<Summary> = it.collect();
    if rest.is_empty() {
        return out;
    }
    let all: Vec<&Summary> = std::iter::once(&out).chain(rest.iter()).collect();
    let sum = |f: fn(&Summary) -> Option<f64>| -> Option<f64> {
        all.iter().map(|s| f(s)).sum::<Option<f64>>()
    };
    let tps = sum(|s| s.transactions_per_s);
    let bps = sum(|s| s.throughput_bps);
    // Work per unit (transaction, or KB) of a session, summed over sessions
    // and divided by all the units: CPU time per unit over the whole cell.
    let units = |s: &Summary| s.transactions_per_s.or(s.throughput_bps);
    let total = tps.or(bps);
    let per_unit = |sd: fn(&Summary) -> Option<f64>, only_first: bool| -> Option<f64> {
        let total = total.filter(|t| *t > 0.0)?;
        let take = if only_first { 1 } else { all.len() };
        let work: Option<f64> = all[..take].iter().map(|s| Some(sd(s)? * units(s)?)).sum();
        Some(work? / total)
    };
    let l_tran = per_unit(|s| s.local.service_demand_us_per_tran, true);
    let l_kb = per_unit(|s| s.local.service_demand_us_per_kb, true);
    let r_tran = per_unit(|s| s.remote.service_demand_us_per_tran, false);
    let r_kb = per_unit(|s| s.remote.service_demand_us_per_kb, false);
    let remote_cpu = sum(|s| s.remote.cpu_util_percent).map(|c| c / all.len() as f64);
    let mut hist = LatencyHistogram::new();
    for s in &all {
        if let Some(h) = s
            .histogram
            .as_deref()
            .and_then(|h| LatencyHistogram::from_base64(h).ok())
        {
            hist.merge(&h);
        }
    }
    let error = all.iter().find_map(|s| s.error.clone());
    let s = &mut out;
    s.transactions_per_s = tps;
    s.throughput_bps = bps;
    s.local.service_demand_us_per_tran = l_tran;
    s.local.service_demand_us_per_kb = l_kb;
    s.remote.service_demand_us_per_tran = r_tran;
    s.remote.service_demand_us_per_kb = r_kb;
    s.remote.cpu_util_percent = remote_cpu;
    if hist.count() > 0 {
        s.latency_ns = hist.summary_with(&plan.percentiles);
        s.histogram = Some(hist.to_base64());
    }
    // Packet counts are one interface's, read by each session: toward
    // several servers they may be several interfaces, or one counted once
    // per session. Neither is the cell's; the cell stands unchecked.
    s.tx_packets_per_s = None;
    s.rx_packets_per_s = None;
    s.error = error;
    out
}

/// Run the cell on every server at once, its flows spread over them.
pub fn run(targets: &[Target], plan: &TestPlan) -> TestResult {
    let plans = split(plan, targets.len());
    let mut results: Vec<TestResult> = std::thread::scope(|sc| {
        let handles: Vec<_> = targets
            .iter()
            .zip(&plans)
            .filter_map(|(t, p)| p.as_ref().map(|p| (t, p)))
            .map(|(t, p)| sc.spawn(move || client::run(t, p, &mut Quiet)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    // The first server's result carries the merged summary (its plan,
    // environment and intervals stand for the cell's).
    let summaries = results.iter().map(|r| r.summary.clone()).collect();
    let summary = merge(plan, summaries);
    let mut first = results.swap_remove(0);
    first.summary = summary;
    first
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::TestKind;

    #[test]
    fn flows_round_robin_and_rate_in_proportion() {
        let mut p = TestPlan::new(TestKind::TcpRr);
        p.flows = 5;
        p.threads = 4;
        p.offered_per_s = Some(1000);
        let s = split(&p, 3);
        let f: Vec<Option<u32>> = s.iter().map(|p| p.as_ref().map(|p| p.flows)).collect();
        assert_eq!(f, [Some(2), Some(2), Some(1)]);
        assert_eq!(s[2].as_ref().unwrap().threads, 1);
        assert_eq!(s[0].as_ref().unwrap().offered_per_s, Some(400));
        p.flows = 1;
        let s = split(&p, 2);
        assert!(s[0].is_some() && s[1].is_none());
    }

    #[test]
    fn merged_rates_and_service_demand() {
        let p = TestPlan::new(TestKind::TcpRr);
        let r = |tps: f64, lsd: f64, rsd: f64, rcpu: f64| {
            let mut s = Summary {
                transactions_per_s: Some(tps),
                ..Summary::default()
            };
            s.local.service_demand_us_per_tran = Some(lsd);
            s.remote.service_demand_us_per_tran = Some(rsd);
            s.remote.cpu_util_percent = Some(rcpu);
            s
        };
        // This host's CPU is one reading: 10 µs/tran at 1000/s is 10 ms/s,
        // which over the 3000/s of both sessions is 3.33 µs/tran.
        let m = merge(
            &p,
            vec![r(1000.0, 10.0, 4.0, 20.0), r(2000.0, 5.0, 2.0, 40.0)],
        );
        let s = &m;
        assert_eq!(s.transactions_per_s, Some(3000.0));
        assert!((s.local.service_demand_us_per_tran.unwrap() - 10.0 / 3.0).abs() < 1e-9);
        // The servers' work adds: (4·1000 + 2·2000) / 3000.
        assert!((s.remote.service_demand_us_per_tran.unwrap() - 8.0 / 3.0).abs() < 1e-9);
        assert_eq!(s.remote.cpu_util_percent, Some(30.0));
    }
}
