//! Intervals: the difference of two consecutive cumulative samples, on
//! both ends, as the figures of merit of that stretch; a mix's per-part
//! figures, retransmissions and fairness in it.

use super::goodput::{flow_goodput, jain};
use super::record::{Gathered, LocalSample};
use crate::plan::Merit;
use crate::plan::TestPlan;
use crate::result::{Fairness, Figures, Interval, IntervalRusage, LoadPhase, PartInterval};
use crate::stats::counters::Counts;
use crate::stats::latency::LatencySummary;

/// The interval that ends at local sample `k`, both ends' counts of it.
pub(crate) fn interval(plan: &TestPlan, g: &Gathered, k: usize) -> Interval {
    let a = &g.local[k - 1];
    let b = &g.local[k];
    let local: Vec<Counts> = b
        .counts
        .iter()
        .zip(&a.counts)
        .map(|(x, y)| *x - *y)
        .collect();
    let (remote, remote_s) = match (
        g.remote.get(k - 1).and_then(|x| x.as_ref()),
        g.remote.get(k).and_then(|x| x.as_ref()),
    ) {
        (Some(ra), Some(rb)) => (
            rb.counts
                .iter()
                .zip(&ra.counts)
                .map(|(x, y)| *x - *y)
                .collect(),
            rb.elapsed_ns.saturating_sub(ra.elapsed_ns) as f64 / 1e9,
        ),
        _ => (Vec::new(), 0.0),
    };
    let local_s = (b.at - a.at).as_secs_f64();
    let local_len = local.len();
    let parts = part_intervals(plan, g, k, &local, &remote, local_s, remote_s);
    let mut sum = figures(
        plan,
        Counts::sum(&local),
        Counts::sum(&remote),
        local_s,
        remote_s,
    );
    mix_goodput(plan, &parts, &mut sum);
    sum.jitter_ns = jitter(plan, &local, &remote);
    Interval {
        index: (k - 1) as u32,
        phase: b.phase,
        start_s: a.at.as_secs_f64(),
        end_s: b.at.as_secs_f64(),
        unix_end_s: b.unix_s,
        local,
        remote,
        sum,
        latency_ns: g.interval_latency.get(&((k - 1) as u32)).cloned(),
        service_latency_ns: g.service_interval_latency.get(&((k - 1) as u32)).cloned(),
        owd_ns: g.one_way.as_ref().and_then(|r| r.interval((k - 1) as u32)),
        fairness: interval_fairness(plan, g, k),
        parts,
        link_util_percent: link_util(a, b, g.link_speed_bps),
        load_phase: load_phase(&g.load_bounds, k),
        tcp_info: super::tcp_info::interval(plan, g, k),
        remote_cpu_util_percent: remote_cpu(g, k),
        flow_latency_ns: flow_latency(g, (k - 1) as u32, local_len),
        rusage: interval_rusage(g, k, local_s),
        clients: Vec::new(),
    }
}

/// udp_stream: the receiving flows' jitter at the interval's end (each
/// flow's RFC 3550 estimate, `workload::udp::jitter`), their mean. Flows
/// that received nothing in the interval have no say.
fn jitter(plan: &TestPlan, local: &[Counts], remote: &[Counts]) -> Option<u64> {
    let t = plan.test.traits();
    if t.loss != crate::plan::Loss::Datagrams
        || !plan.test.is_stream()
        || t.rate == crate::plan::Rate::ProbeBits
        || !plan.parts.is_empty()
    {
        return None;
    }
    let receivers: Vec<&Counts> = local
        .iter()
        .chain(remote)
        .filter(|c| c.datagrams_received > 0)
        .collect();
    (!receivers.is_empty())
        .then(|| receivers.iter().map(|c| c.jitter_ns).sum::<u64>() / receivers.len() as u64)
}

/// The server host's utilisation between its samples `k - 1` and `k`,
/// when both carry its CPU ticks.
fn remote_cpu(g: &Gathered, k: usize) -> Option<f64> {
    let at = |i: usize| g.remote.get(i)?.as_ref()?.cpu;
    at(k)?.util_percent_since(&at(k - 1)?)
}

/// Each flow's latency in interval `index`, by flow id, when the client
/// kept it (`plan.flow_latency`); empty otherwise.
fn flow_latency(g: &Gathered, index: u32, flows: usize) -> Vec<Option<LatencySummary>> {
    let Some(of) = g.flow_interval_latency.get(&index) else {
        return Vec::new();
    };
    let mut v = vec![None; flows];
    for (f, s) in of {
        if let Some(slot) = v.get_mut(*f as usize) {
            *slot = Some(s.clone());
        }
    }
    v
}

/// Each end's process usage over the interval that ends at sample `k`:
/// the change between its two ticks' readings. The server's is left out
/// when a reading is missing or the change is impossible over the
/// interval's length (a hostile or broken peer).
fn interval_rusage(g: &Gathered, k: usize, secs: f64) -> Option<IntervalRusage> {
    let local = g.local[k].rusage?.since(&g.local[k - 1].rusage?);
    let remote = match (
        g.remote.get(k - 1).and_then(Option::as_ref),
        g.remote.get(k).and_then(Option::as_ref),
    ) {
        (Some(a), Some(b)) => match (a.rusage, b.rusage) {
            (Some(x), Some(y)) => Some(y.since(&x)),
            _ => None,
        },
        _ => None,
    }
    .filter(|r| {
        // A second of slack: the server's ticks trail the client's.
        r.implausible(&crate::sensors::Rusage::bound_for(secs + 1.0))
            .is_none()
    });
    Some(IntervalRusage { local, remote })
}

/// A phased mix: the segment that the interval ending at sample `k` lies
/// in. `bounds` are the samples that enter idle, loaded, drain and
/// recovery and the one that leaves recovery, as many as are known yet
/// (live, the later ones have not happened; an interval never straddles
/// a bound, so the count of bounds at or before its start says where it
/// is). A drain of no interval gives two equal bounds and is skipped.
pub(super) fn load_phase(bounds: &[u32], k: usize) -> Option<LoadPhase> {
    let start = (k - 1) as u32;
    let entered = bounds.iter().filter(|&&b| b <= start).count();
    LoadPhase::ORDER.get(entered.checked_sub(1)?).copied()
}

/// A mix with bulk parts: the interval's goodput is its bulk flows', each
/// direction apart (`throughput_bps_c2s` up, `throughput_bps_s2c` down,
/// `throughput_bps` both together), from each part's own figures; the
/// single-test reading of the summed counts would take one direction for
/// all. A mix without bulk parts keeps its transaction rate.
fn mix_goodput(plan: &TestPlan, parts: &[PartInterval], sum: &mut Figures) {
    let (mut up, mut down) = (None::<f64>, None::<f64>);
    let add =
        |to: &mut Option<f64>, v: Option<f64>| *to = Some(to.unwrap_or(0.0) + v.unwrap_or(0.0));
    for (part, p) in plan.parts.iter().zip(parts) {
        match crate::plan::mix::direction(part.test) {
            "up" => add(&mut up, p.sum.throughput_bps),
            "down" => add(&mut down, p.sum.throughput_bps),
            "both" => {
                add(&mut up, p.sum.throughput_bps_c2s);
                add(&mut down, p.sum.throughput_bps_s2c);
            }
            _ => {}
        }
    }
    if up.is_none() && down.is_none() {
        return;
    }
    sum.throughput_bps = Some(up.unwrap_or(0.0) + down.unwrap_or(0.0));
    sum.throughput_bps_c2s = up;
    sum.throughput_bps_s2c = down;
    sum.transactions_per_s = None;
}

/// The client interface's utilisation each way between two samples: its
/// byte counters' change over the time between them, against the link
/// speed; null where either is unknown.
fn link_util(a: &LocalSample, b: &LocalSample, speed: Option<u64>) -> crate::result::LinkUtil {
    let (Some(x), Some(y), Some(speed)) = (a.if_counters, b.if_counters, speed) else {
        return crate::result::LinkUtil::default();
    };
    let d = y.since(&x);
    let secs = b.at.saturating_sub(a.at).as_secs_f64();
    let util = |bytes| crate::sensors::link_util_percent(bytes, secs, speed);
    crate::result::LinkUtil {
        tx: util(d.tx_bytes),
        rx: util(d.rx_bytes),
    }
}

/// A mix: each part's figures in the interval that ends at local sample
/// `k`, from its slice of both ends' per-flow counts, and its
/// retransmissions (latency is the engine's, added by whoever has it).
pub(crate) fn part_intervals(
    plan: &TestPlan,
    g: &Gathered,
    k: usize,
    local: &[Counts],
    remote: &[Counts],
    local_s: f64,
    remote_s: f64,
) -> Vec<PartInterval> {
    if plan.parts.is_empty() {
        return Vec::new();
    }
    let offsets = plan.part_offsets();
    let part_plans = plan.part_plans();
    let slice =
        |v: &[Counts], i: usize| Counts::sum(v.get(offsets[i]..offsets[i + 1]).unwrap_or(&[]));
    plan.parts
        .iter()
        .zip(&part_plans)
        .enumerate()
        .map(|(i, (part, part_plan))| PartInterval {
            name: Some(part.name.clone()),
            index: (k - 1) as u32,
            phase: g.local[k].phase,
            start_s: g.local[k - 1].at.as_secs_f64(),
            end_s: g.local[k].at.as_secs_f64(),
            sum: figures(
                part_plan,
                slice(local, i),
                slice(remote, i),
                local_s,
                remote_s,
            ),
            latency_ns: None,
            tcp_retransmits: interval_retransmits(g, i, k),
        })
        .collect()
}

/// Part `i`'s TCP retransmissions in the interval that ends at local
/// sample `k`: both ends' TCP_INFO at the two ticks, differenced; the
/// client's alone when the server's samples lack them. None for a part
/// without long-lived TCP connections.
pub(crate) fn interval_retransmits(g: &Gathered, i: usize, k: usize) -> Option<u64> {
    let at = |v: &[Option<u64>]| v.get(i).copied().flatten();
    let local = at(&g.local[k].retransmits)
        .map(|b| b.saturating_sub(at(&g.local[k - 1].retransmits).unwrap_or(0)));
    let remote = match (
        g.remote.get(k - 1).and_then(Option::as_ref),
        g.remote.get(k).and_then(Option::as_ref),
    ) {
        (Some(a), Some(b)) => {
            at(&b.retransmits).map(|y| y.saturating_sub(at(&a.retransmits).unwrap_or(0)))
        }
        _ => None,
    };
    match (local, remote) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
    }
}

/// A mix with bulk flows: Jain's index over each direction's per-flow
/// goodputs in the interval that ends at local sample `k`, each flow's
/// bytes as its receiver counted them (as `summary.fairness` over the
/// loaded phase). None without bulk parts.
fn interval_fairness(plan: &TestPlan, g: &Gathered, k: usize) -> Option<Fairness> {
    if plan.parts.is_empty() {
        return None;
    }
    let offsets = plan.part_offsets();
    let (mut up, mut down) = (Vec::new(), Vec::new());
    for (i, part) in plan.parts.iter().enumerate() {
        if !part.test.is_stream() {
            continue;
        }
        let goodput = flow_goodput(g, part.test, offsets[i]..offsets[i + 1], (k - 1, k));
        match crate::plan::mix::direction(part.test) {
            "up" => up.extend(goodput),
            "down" => down.extend(goodput),
            _ => {}
        }
    }
    (!up.is_empty() || !down.is_empty()).then(|| Fairness {
        up: jain(&up),
        down: jain(&down),
    })
}

/// Rates of a window of `local_s` seconds on this end and `remote_s` on the server.
pub fn figures(
    plan: &TestPlan,
    local: Counts,
    remote: Counts,
    local_s: f64,
    remote_s: f64,
) -> Figures {
    let rate = |v: u64, s: f64| if s > 0.0 { v as f64 / s } else { 0.0 };
    let mut f = Figures {
        local,
        remote,
        ..Figures::default()
    };
    // Bytes count where they are received: the server's receive counts
    // carry the client's sending direction, ours the server's.
    let d = plan.test.traits();
    let w = d.ways(plan);
    match d.merit {
        Merit::Throughput => {
            let c2s = w
                .client_sends
                .then(|| rate(remote.bytes_received * 8, remote_s));
            let s2c = w
                .client_receives
                .then(|| rate(local.bytes_received * 8, local_s));
            if w.client_sends && w.client_receives {
                f.throughput_bps_c2s = c2s;
                f.throughput_bps_s2c = s2c;
            }
            f.throughput_bps = Some(c2s.unwrap_or(0.0) + s2c.unwrap_or(0.0));
        }
        Merit::Transactions => f.transactions_per_s = Some(rate(local.transactions, local_s)),
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::record::fixtures::record;

    #[test]
    fn interval_retransmits_difference_both_ends_ticks() {
        let mut g = record(|_| Counts::default(), |_| Some(Counts::default()));
        // Part 0 is TCP (cumulative 0, 2, 5, 9 here and 0, 1, 1, 4 there),
        // part 1 has no TCP socket; the server's sample at tick 2 is lost.
        for (k, l) in g.local.iter_mut().enumerate() {
            l.retransmits = vec![Some([0, 2, 5, 9][k]), None];
        }
        for (k, r) in g.remote.iter_mut().enumerate() {
            r.as_mut().unwrap().retransmits = vec![Some([0, 1, 1, 4][k]), None];
        }
        g.remote[2] = None;
        assert_eq!(interval_retransmits(&g, 0, 1), Some(2 + 1));
        // Either side of the lost sample: the client's count alone.
        assert_eq!(interval_retransmits(&g, 0, 2), Some(3));
        assert_eq!(interval_retransmits(&g, 0, 3), Some(4));
        assert_eq!(interval_retransmits(&g, 1, 1), None);
        // A single test's samples carry none.
        let g = record(|_| Counts::default(), |_| Some(Counts::default()));
        assert_eq!(interval_retransmits(&g, 0, 1), None);
    }
}
