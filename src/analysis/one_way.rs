//! `--one-way`'s figures from its raw record: each interval's two
//! histograms and fastest exchanges, and the server's clock before and
//! after the run, turned into `summary.owd_ns` and each interval's
//! `owd_ns` with their error bounds. Pure functions.
//!
//! The flows correct their stamps by the offset measured before the run
//! (nothing later is known on the data path); each interval is then
//! moved by how far the offset followed through the run
//! (`stats::track`: before, after, and the intervals whose fastest
//! exchanges crossed an idle path) lies from that one at the interval's
//! moment: the way up less the difference, the way down plus it. The
//! interval's bound is the track's there plus how far the offset moves
//! over an interval's length either side (its samples span the
//! interval). Where both ends read one kernel's clock the exact offset
//! corrects and the intervals' estimates are only checked against it.

use std::collections::BTreeMap;

use crate::plan::TestPlan;
use crate::result::one_way::{
    IntervalOffset, IntervalOneWay, OneWaySummary, PhaseOneWay, QueueDirection,
};
use crate::stats::latency::LatencyHistogram;
use crate::stats::latency::OneWayInterval;
use crate::stats::offset::{ClockMap, Estimate, estimate_kept};
use crate::stats::track::{Track, Window};

/// Slack for the check of an exact offset against an interval's
/// estimate, ns: the estimate's mean is rounded to the nanosecond.
const ROUNDING_NS: u64 = 1_000;

/// The least growth of a way's median under load that names a queue, ns.
/// A standing queue of a few packets at the bottleneck already adds
/// milliseconds (one 1,500-byte packet is 0.24 ms at 50 Mbit/s, 1.2 ms at
/// 10), while the host alone moves a way's median by less: the bulk
/// flows' receive and send processing on the same CPUs delays a probe's
/// stamp by tens to hundreds of µs, both ways alike (the stamps are read
/// in user space). So 1 ms; and on a longer path a tenth of its idle
/// round trip, since a wide-area path's delay wanders by a few percent
/// with routes and cross traffic that are not this run's load.
pub(crate) const QUEUE_FLOOR_NS: u64 = 1_000_000;

/// How the server's offset was found (`OneWaySummary::method`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockMethod {
    /// Clock pings on the control connection (`stats::offset`).
    Exchanges,
    /// Both ends read one kernel's CLOCK_MONOTONIC: exact.
    SameKernel,
}

/// What the client gathered for `--one-way` (a single test's flows, or
/// one part's of a mix).
#[derive(Clone)]
pub(crate) struct OneWayRecord {
    /// Each measured interval's ways (corrected by `clock.before`'s
    /// offset) and fastest exchanges.
    pub(crate) intervals: BTreeMap<u32, OneWayInterval>,
    pub(crate) clamped: u64,
    /// The server's clock before the run (what the flows corrected by)
    /// and after it.
    pub(crate) clock: ClockMap,
    pub(crate) method: ClockMethod,
    /// The length of an interval, ns: how far from its moment an
    /// interval's correction reaches.
    pub(crate) interval_ns: u64,
    /// The correction once the run is over ([`OneWayRecord::settle`]).
    pub(crate) settled: Option<Correction>,
}

/// An interval's own estimate of the offset, from its fastest exchanges.
pub(crate) fn window(iv: &OneWayInterval) -> Option<Estimate> {
    estimate_kept(iv.fastest.kept(), iv.fastest.offered())
}

/// The correction of a run: the track through its estimates, and each
/// interval's window marked.
#[derive(Clone)]
pub(crate) struct Correction {
    track: Track,
    windows: Vec<Window>,
    /// `same_kernel`: the exact offset, which corrects alone.
    exact: Option<i64>,
    /// What the flows corrected by.
    applied_ns: i64,
    reach_ns: u64,
}

impl Correction {
    /// From the clock and the intervals' estimates (`windows`, by index).
    pub(crate) fn new(
        clock: &ClockMap,
        method: ClockMethod,
        windows: &[(u32, Estimate)],
        interval_ns: u64,
    ) -> Correction {
        let (track, windows) = Track::new(clock.before, clock.after, windows);
        Correction {
            track,
            windows,
            exact: (method == ClockMethod::SameKernel).then_some(clock.before.offset_ns),
            applied_ns: clock.before.offset_ns,
            reach_ns: interval_ns,
        }
    }

    /// The offset an interval whose moment is `at_ns` is corrected by, and
    /// its bound.
    fn at(&self, at_ns: u64) -> (i64, u64) {
        match self.exact {
            Some(e) => (e, 0),
            None => (
                self.track.at(at_ns).offset_ns,
                self.track.error_over(at_ns, self.reach_ns),
            ),
        }
    }

    /// Interval `iv`'s two ways moved to the offset at its moment, into
    /// `up` and `down`; its figures, and how many values fell below zero.
    fn apply(
        &self,
        iv: &OneWayInterval,
        up: &mut LatencyHistogram,
        down: &mut LatencyHistogram,
    ) -> (IntervalOneWay, u64) {
        let (offset_ns, error_ns) = match window(iv) {
            Some(w) => self.at(w.at_ns),
            None => (self.applied_ns, self.at(self.track.points()[0].at_ns).1),
        };
        let by = offset_ns - self.applied_ns;
        let below = up.merge_sparse_shifted(&iv.up, -by) + down.merge_sparse_shifted(&iv.down, by);
        let figures = IntervalOneWay {
            up_p50: up.quantile(0.5),
            down_p50: down.quantile(0.5),
            count: up.count(),
            offset_ns,
            error_ns,
        };
        (figures, below)
    }

    /// Interval `iv`'s figures alone.
    pub(crate) fn interval(&self, iv: &OneWayInterval) -> Option<IntervalOneWay> {
        let (mut up, mut down) = (LatencyHistogram::new(), LatencyHistogram::new());
        let (f, _) = self.apply(iv, &mut up, &mut down);
        (f.count > 0).then_some(f)
    }

    /// Did any interval's estimate move the correction?
    fn refreshed(&self) -> bool {
        self.exact.is_none() && self.windows.iter().any(|w| w.used)
    }

    /// The intervals' estimates as reported.
    fn offsets(&self) -> Vec<IntervalOffset> {
        self.windows
            .iter()
            .map(|w| IntervalOffset {
                index: w.index,
                offset_ns: w.est.offset_ns,
                error_ns: w.est.error_ns,
                min_path_ns: w.est.min_path_ns,
                used: w.used && self.exact.is_none(),
                holds_exact: self
                    .exact
                    .map(|e| (e - w.est.offset_ns).unsigned_abs() <= w.est.error_ns + ROUNDING_NS),
            })
            .collect()
    }
}

impl ClockMethod {
    pub fn name(self) -> &'static str {
        match self {
            ClockMethod::Exchanges => "exchanges_monotonic",
            ClockMethod::SameKernel => "same_kernel",
        }
    }
}

impl OneWayRecord {
    /// Every interval's estimate, by index.
    fn windows(&self) -> Vec<(u32, Estimate)> {
        self.intervals
            .iter()
            .filter_map(|(&i, iv)| Some((i, window(iv)?)))
            .collect()
    }

    fn correction(&self) -> Correction {
        Correction::new(&self.clock, self.method, &self.windows(), self.interval_ns)
    }

    /// The correction while the run goes on: the clock before it and the
    /// intervals' estimates so far (`windows`, by index).
    pub(crate) fn live(&self, windows: &[(u32, Estimate)]) -> Correction {
        Correction::new(&self.clock, self.method, windows, self.interval_ns)
    }

    /// The run is over (every interval and the clock after it in): its
    /// correction, once for every interval's figures.
    pub(crate) fn settle(&mut self) {
        self.settled = Some(self.correction());
    }

    /// Interval `index`'s figures, corrected by every estimate of the run
    /// (so far, before [`OneWayRecord::settle`]).
    pub(crate) fn interval(&self, index: u32) -> Option<IntervalOneWay> {
        let iv = self.intervals.get(&index)?;
        self.with_correction(|c| c.interval(iv))
    }

    fn with_correction<T>(&self, f: impl FnOnce(&Correction) -> T) -> T {
        match &self.settled {
            Some(c) => f(c),
            None => f(&self.correction()),
        }
    }

    /// The bound on the difference of two of the run's one-way figures,
    /// ns (loaded less idle): each within its intervals' bounds of the
    /// truth, so the difference within the sum, at most twice the largest.
    pub(crate) fn growth_error_ns(&self) -> u64 {
        self.with_correction(|c| {
            let (mut up, mut down) = (LatencyHistogram::new(), LatencyHistogram::new());
            2 * self
                .intervals
                .values()
                .map(|iv| c.apply(iv, &mut up, &mut down).0.error_ns)
                .max()
                .unwrap_or(0)
        })
    }
}

/// The ways up and down of `records`' intervals in `from..to` (a phase of
/// a mix), each interval corrected as the run's, merged; None without a
/// transaction in it.
pub(crate) fn phase(
    records: &[&OneWayRecord],
    from: u32,
    to: u32,
    percentiles: &[f64],
) -> Option<PhaseOneWay> {
    let (mut up, mut down) = (LatencyHistogram::new(), LatencyHistogram::new());
    for r in records {
        r.with_correction(|c| {
            for (_, iv) in r.intervals.range(from..to) {
                c.apply(iv, &mut up, &mut down);
            }
        });
    }
    Some(PhaseOneWay {
        up: up.summary_with(percentiles)?,
        down: down.summary_with(percentiles)?,
    })
}

/// Which way the queue is: each way's loaded p50 less its idle p50, named
/// where it is more than the floor ([`QUEUE_FLOOR_NS`], or a tenth of the
/// idle round trip) plus the clock's bound on it (`error_ns`:
/// [`OneWayRecord::growth_error_ns`]).
pub(crate) fn queue_direction(
    idle: &PhaseOneWay,
    loaded: &PhaseOneWay,
    error_ns: u64,
    probes: Vec<String>,
    not_measured: Vec<String>,
) -> QueueDirection {
    let grew = |l: u64, i: u64| l as i64 - i as i64;
    let up_ns = grew(loaded.up.p50, idle.up.p50);
    let down_ns = grew(loaded.down.p50, idle.down.p50);
    let floor_ns = QUEUE_FLOOR_NS.max((idle.up.p50 + idle.down.p50) / 10);
    let queued = |g: i64| g > (floor_ns + error_ns) as i64;
    let direction = match (queued(up_ns), queued(down_ns)) {
        (true, true) => "both",
        (true, false) => "up",
        (false, true) => "down",
        (false, false) => "neither",
    };
    QueueDirection {
        direction: direction.into(),
        up_ns,
        down_ns,
        error_ns,
        floor_ns,
        probes,
        not_measured,
    }
}

/// `summary.owd_ns` of a run with `plan`, None without a transaction.
pub(crate) fn summary(r: &OneWayRecord, plan: &TestPlan) -> Option<OneWaySummary> {
    let c = r.correction();
    let (mut up, mut down) = (LatencyHistogram::new(), LatencyHistogram::new());
    let mut error_ns = 0;
    let mut below = 0;
    for iv in r.intervals.values() {
        let (f, b) = c.apply(iv, &mut up, &mut down);
        error_ns = error_ns.max(f.error_ns);
        below += b;
    }
    let method = if c.refreshed() {
        "exchanges_refreshed"
    } else {
        r.method.name()
    };
    Some(OneWaySummary {
        up: up.summary_with(&plan.percentiles)?,
        down: down.summary_with(&plan.percentiles)?,
        error_ns,
        offset_ns: r.clock.before.offset_ns,
        offset_after_ns: r.clock.after.map(|a| a.offset_ns),
        drift_ppm: r.clock.drift_ppm(),
        method: method.into(),
        offsets: c.offsets(),
        stamps: "user_space".into(),
        clamped: r.clamped + below,
        request_bytes: plan.request_bytes,
        response_bytes: plan.response_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::offset::Exchange;

    fn est(offset_ns: i64, error_ns: u64, at_ns: u64) -> Estimate {
        Estimate {
            offset_ns,
            error_ns,
            at_ns,
            min_path_ns: 2 * error_ns,
            kept: 8,
            exchanges: 24,
        }
    }

    /// An interval of `n` transactions at `at` ns, 100 ms up and 1 ms down
    /// as the flows corrected them, whose exchanges say the offset is
    /// `offset` within 10 µs.
    fn iv(at: u64, offset: i64, n: u64) -> OneWayInterval {
        let mut p = crate::stats::latency::OneWayPart::default();
        for i in 0..n {
            let t1 = at - 10_000 + i;
            let x = Exchange {
                sent_ns: t1,
                peer_rx_ns: (t1 as i64 + 10_000 + offset) as u64,
                peer_tx_ns: (t1 as i64 + 10_000 + offset) as u64,
                received_ns: t1 + 20_000,
            };
            p.record(100_000_000, 1_000_000, x);
        }
        p.sparse()
    }

    /// Before and after 5 µs apart with 40 and 60 µs bounds: with no
    /// interval between, the line between them corrects and the bound is
    /// theirs; with intervals on an idle path (20 µs) they tighten it and
    /// the method says so; one kernel's exact offset corrects alone and
    /// the intervals' estimates are checked against it.
    #[test]
    fn the_intervals_refresh_the_correction() {
        let s = 1_000_000_000u64;
        let clock = ClockMap {
            before: est(1_000, 40_000, 0),
            after: Some(est(-4_000, 60_000, 6 * s)),
        };
        let mut r = OneWayRecord {
            intervals: BTreeMap::new(),
            clamped: 0,
            clock,
            method: ClockMethod::Exchanges,
            interval_ns: s,
            settled: None,
        };
        let plan = TestPlan::new(crate::plan::TestKind::UdpRr);
        assert_eq!(summary(&r, &plan), None);
        r.intervals.insert(0, iv(3 * s, -1_500, 0));
        assert_eq!(r.interval(0), None);
        // The line alone: at 3 s, -1.5 µs, its bound the interpolated
        // bounds' largest a second either side, plus what it moves in one.
        r.intervals.insert(1, iv(3 * s, -1_500, 10));
        let c = Correction::new(&r.clock, r.method, &[], s);
        let one = c.interval(&r.intervals[&1]).unwrap();
        // At 4 s the bounds interpolate to 53.3 µs; the line moves 0.83 µs a second.
        assert_eq!((one.offset_ns, one.error_ns), (-1_500, 53_334 + 834));
        // The interval's own estimate (bound 10 µs, path 20 µs against the
        // bursts' 80) tightens it.
        let s1 = summary(&r, &plan).unwrap();
        assert_eq!(s1.method, "exchanges_refreshed");
        assert_eq!(s1.offsets.len(), 1);
        assert!(s1.offsets[0].used && s1.offsets[0].holds_exact.is_none());
        assert!(s1.error_ns < 60_000, "{s1:?}");
        // The flows corrected by +1 µs; the interval's moment says -1.5:
        // the way up reads 2.5 µs more, the way down as much less.
        let f = r.interval(1).unwrap();
        assert_eq!(f.offset_ns, -1_500);
        assert!((f.up_p50 as i64 - 100_002_500).abs() < 100_000, "{f:?}");
        assert!((f.down_p50 as i64 - 997_500).abs() < 1_000, "{f:?}");
        // One kernel: the exact offset (the before estimate's) corrects.
        r.method = ClockMethod::SameKernel;
        r.clock.before = Estimate {
            error_ns: 0,
            ..est(-1_500, 40_000, 0)
        };
        let s2 = summary(&r, &plan).unwrap();
        assert_eq!((s2.method.as_str(), s2.error_ns), ("same_kernel", 0));
        assert_eq!(s2.offsets[0].holds_exact, Some(true));
        assert!(!s2.offsets[0].used);
        r.clock.before.offset_ns = 900_000;
        assert_eq!(
            summary(&r, &plan).unwrap().offsets[0].holds_exact,
            Some(false)
        );
    }
    fn ways(up_ms: f64, down_ms: f64) -> PhaseOneWay {
        let one = |ms: f64| {
            let mut h = LatencyHistogram::new();
            h.record((ms * 1e6) as u64);
            h.summary().unwrap()
        };
        PhaseOneWay {
            up: one(up_ms),
            down: one(down_ms),
        }
    }

    /// The verdict names a way whose median grew by more than the floor
    /// (1 ms, or a tenth of the idle round trip) and the clock's bound.
    #[test]
    fn the_queue_is_where_the_median_grew_past_the_floor_and_bound() {
        let dir = |idle: PhaseOneWay, loaded: PhaseOneWay, error_ns: u64| {
            queue_direction(&idle, &loaded, error_ns, vec!["udp_rr".into()], Vec::new())
        };
        let q = dir(ways(0.2, 0.2), ways(98.6, 0.3), 0);
        assert_eq!(
            (q.direction.as_str(), q.floor_ns, q.error_ns),
            ("up", 1_000_000, 0)
        );
        assert!((q.up_ns - 98_400_000).abs() < 200_000, "{q:?}");
        assert_eq!(dir(ways(0.2, 0.2), ways(0.3, 50.0), 0).direction, "down");
        assert_eq!(dir(ways(0.2, 0.2), ways(9.0, 9.0), 0).direction, "both");
        assert_eq!(dir(ways(0.2, 0.2), ways(0.9, 1.1), 0).direction, "neither");
        // A 40 ms path: its floor is 4 ms, a 3.5 ms rise is not named.
        let far = dir(ways(20.0, 20.0), ways(23.5, 20.0), 0);
        assert_eq!(far.direction, "neither");
        assert!(far.floor_ns.abs_diff(4_000_000) < 10_000, "{far:?}");
        // A clock bound of 3.2 ms: a 3.5 ms rise is not named.
        let q = dir(ways(0.2, 0.2), ways(3.7, 0.2), 3_200_000);
        assert_eq!((q.direction.as_str(), q.error_ns), ("neither", 3_200_000));
    }
}
