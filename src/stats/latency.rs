//! Latency histograms: HDR, nanoseconds, 3 significant digits.
//!
//! One histogram per worker thread, recorded only during the measurement
//! window, merged by adding at the end. The range (1 ns to 1 hour) is fixed up
//! front so recording never allocates.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use serde::{Deserialize, Serialize};

use super::offset::Exchange;
use super::owd::Fastest;

const MAX_NS: u64 = 3_600_000_000_000;

/// A latency histogram in nanoseconds.
#[derive(Clone, Debug)]
pub struct LatencyHistogram {
    h: Histogram<u64>,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram::new()
    }
}

impl LatencyHistogram {
    pub fn new() -> LatencyHistogram {
        LatencyHistogram {
            h: Histogram::new_with_bounds(1, MAX_NS, 3).expect("static histogram bounds are valid"),
        }
    }

    /// Record one latency; values beyond an hour count as an hour.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.h.saturating_record(ns.max(1));
    }

    /// A histogram to 2 significant digits (1 %), a tenth of the memory of
    /// [`LatencyHistogram::new`]'s: one per flow for the per-flow samples
    /// (`--samples`), where thousands of flows may each keep one. Never
    /// merged with a full one.
    pub fn coarse() -> LatencyHistogram {
        LatencyHistogram {
            h: Histogram::new_with_bounds(1, MAX_NS, 2).expect("static histogram bounds are valid"),
        }
    }

    pub fn merge(&mut self, other: &LatencyHistogram) {
        self.h
            .add(&other.h)
            .expect("histograms with equal bounds always merge");
    }

    pub fn count(&self) -> u64 {
        self.h.len()
    }

    pub fn reset(&mut self) {
        self.h.reset();
    }

    /// How many latencies are at least `ns` (to the histogram's 3
    /// significant digits: a value in the bucket that holds `ns` counts).
    pub fn count_at_least(&self, ns: u64) -> u64 {
        let top = self.h.max();
        if self.h.is_empty() || ns > top {
            return 0;
        }
        self.h.count_between(ns.max(1), top)
    }

    /// How many latencies are at most `ns` (to the histogram's 3
    /// significant digits: a value in the bucket that holds `ns` counts):
    /// a cumulative bucket of a Prometheus histogram.
    pub fn count_at_most(&self, ns: u64) -> u64 {
        if self.h.is_empty() || ns == 0 {
            return 0;
        }
        self.h.count_between(1, ns.min(self.h.max()))
    }

    /// The sum of every latency recorded, ns (the mean times the count, to
    /// the histogram's precision): a Prometheus histogram's `_sum`.
    pub fn sum_ns(&self) -> f64 {
        self.h.mean() * self.h.len() as f64
    }

    /// The value at quantile `q` (0..=1); 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        self.h.value_at_quantile(q)
    }

    /// The summary with the fixed percentiles only.
    pub fn summary(&self) -> Option<LatencySummary> {
        self.summary_with(&[])
    }

    /// The summary, plus the value at each percentile of `percentiles` (0..=100).
    pub fn summary_with(&self, percentiles: &[f64]) -> Option<LatencySummary> {
        if self.h.is_empty() {
            return None;
        }
        let q = |p: f64| self.h.value_at_quantile(p);
        Some(LatencySummary {
            count: self.h.len(),
            min: self.h.min(),
            mean: self.h.mean(),
            stddev: self.h.stdev(),
            p50: q(0.50),
            p90: q(0.90),
            p99: q(0.99),
            p99_9: q(0.999),
            max: self.h.max(),
            percentiles: percentiles
                .iter()
                .map(|&p| Percentile {
                    percentile: p,
                    ns: self.h.value_at_percentile(p),
                })
                .collect(),
        })
    }

    /// Add what a [`SparseHistogram`] holds.
    pub fn merge_sparse(&mut self, s: &SparseHistogram) {
        for &(v, n) in &s.pairs {
            self.h.saturating_record_n(v.max(1), n);
        }
    }

    /// Add what a [`SparseHistogram`] holds, each value moved by `by_ns`
    /// (a correction found after it was recorded); values it takes below
    /// zero count as 0 and are counted in the return.
    pub fn merge_sparse_shifted(&mut self, s: &SparseHistogram, by_ns: i64) -> u64 {
        let mut below = 0;
        for &(v, n) in &s.pairs {
            let moved = v as i128 + by_ns as i128;
            if moved < 0 {
                below += n;
            }
            self.h
                .saturating_record_n(moved.clamp(1, u64::MAX as i128) as u64, n);
        }
        below
    }

    /// The share of latencies at or below each of `points` values spread
    /// evenly on a log scale from the smallest to the largest recorded
    /// (the empirical CDF, at least two points); empty when nothing was
    /// recorded. Each point is `(ns, fraction)`.
    pub fn cdf(&self, points: usize) -> Vec<(u64, f64)> {
        if self.h.is_empty() {
            return Vec::new();
        }
        let n = self.h.len() as f64;
        let (lo, hi) = (self.h.min().max(1) as f64, self.h.max().max(1) as f64);
        let points = points.max(2);
        let mut out: Vec<(u64, f64)> = Vec::with_capacity(points);
        for i in 0..points {
            let x = if i + 1 == points {
                self.h.max().max(1)
            } else {
                (lo * (hi / lo).powf(i as f64 / (points - 1) as f64)).round() as u64
            };
            let at = self.h.count_between(1, x) as f64 / n;
            if out.last().is_none_or(|p| p.0 < x) {
                out.push((x, at.min(1.0)));
            }
        }
        out
    }

    /// The histogram in HdrHistogram's interchange form: V2 compressed
    /// encoding, base64 (as HdrHistogram log files carry it), so results from
    /// many runs and hosts can be merged later with any HdrHistogram library.
    pub fn to_base64(&self) -> String {
        let mut bytes = Vec::new();
        V2DeflateSerializer::new()
            .serialize(&self.h, &mut bytes)
            .expect("serializing into memory cannot fail");
        BASE64.encode(bytes)
    }

    /// Read back what [`LatencyHistogram::to_base64`] wrote (or any
    /// HdrHistogram V2 encoding); values are re-recorded into thrum's range.
    pub fn from_base64(s: &str) -> Result<LatencyHistogram, String> {
        let bytes = BASE64
            .decode(s.trim())
            .map_err(|e| format!("histogram is not base64: {e}"))?;
        let other: Histogram<u64> = Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .map_err(|e| format!("histogram does not decode: {e:?}"))?;
        let mut h = LatencyHistogram::new();
        for v in other.iter_recorded() {
            h.h.saturating_record_n(
                other.highest_equivalent(v.value_iterated_to()).max(1),
                v.count_at_value(),
            );
        }
        Ok(h)
    }

    /// A log-scale text histogram: one row per power-of-two range of
    /// latency that holds samples, with its count, share and a bar.
    pub fn text_rows(&self) -> Vec<String> {
        if self.h.is_empty() {
            return Vec::new();
        }
        let total = self.h.len() as f64;
        let mut buckets: Vec<(u64, u64)> = Vec::new(); // (lower bound, count)
        for v in self.h.iter_recorded() {
            let value = self.h.highest_equivalent(v.value_iterated_to());
            let lower = if value <= 1 {
                1
            } else {
                1u64 << (63 - value.leading_zeros())
            };
            match buckets.last_mut() {
                Some((b, c)) if *b == lower => *c += v.count_at_value(),
                _ => buckets.push((lower, v.count_at_value())),
            }
        }
        let widest = buckets.iter().map(|b| b.1).max().unwrap_or(1) as f64;
        buckets
            .iter()
            .map(|&(lower, count)| {
                let bar = ((count as f64 / widest) * 50.0).ceil() as usize;
                format!(
                    "{:>10} .. {:<10} {:>12} {:>6.2}% {}",
                    compact_ns(lower),
                    compact_ns(lower.saturating_mul(2)),
                    count,
                    100.0 * count as f64 / total,
                    "#".repeat(bar)
                )
            })
            .collect()
    }
}

fn compact_ns(ns: u64) -> String {
    crate::units::fmt_ns(ns as f64).replace(' ', "")
}

/// A histogram kept for merging later, compactly: its recorded values
/// (each bucket's highest equivalent) and their counts only. A latency
/// distribution fills a few hundred of the HDR range's 33,792 counters
/// (270 KB each), so a histogram per interval of a long session stays
/// small this way.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SparseHistogram {
    pairs: Vec<(u64, u64)>,
}

impl SparseHistogram {
    pub fn of(h: &LatencyHistogram) -> SparseHistogram {
        SparseHistogram {
            pairs: h
                .h
                .iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_at_value()))
                .collect(),
        }
    }

    pub fn count(&self) -> u64 {
        self.pairs.iter().map(|p| p.1).sum()
    }
}

/// Per-interval histograms on their way to a summary, shared by the workers
/// of one engine. An interval's summary is computed once every worker has
/// handed in its part, and its histogram dropped, so memory does not grow
/// with the length of the test.
pub struct IntervalTable {
    workers: usize,
    percentiles: Vec<f64>,
    /// Interval → (workers that handed in, merged histogram).
    open: BTreeMap<u32, (usize, Option<LatencyHistogram>)>,
    done: BTreeMap<u32, LatencySummary>,
    /// The merged histogram of each interval too, when asked for
    /// ([`IntervalTable::keep_histograms`]): a mix's probe phases merge them.
    keep: bool,
    kept: BTreeMap<u32, SparseHistogram>,
    /// Every interval below this one has been handed in by every worker;
    /// `ahead` holds the complete ones past a gap.
    settled_below: u32,
    ahead: std::collections::BTreeSet<u32>,
    /// Per-flow latency (`--samples`): interval → (flow, summary) of the
    /// flows that completed any, handed in by each flow's worker.
    flows: BTreeMap<u32, Vec<(u32, LatencySummary)>>,
    /// `--one-way`: each interval's parts merging, and the merged ones
    /// kept to the end of the run (`stats::owd`).
    one_way_open: BTreeMap<u32, OneWayPart>,
    one_way: BTreeMap<u32, OneWayInterval>,
}

impl IntervalTable {
    pub fn new(workers: usize, percentiles: &[f64]) -> IntervalTable {
        IntervalTable {
            workers,
            percentiles: percentiles.to_vec(),
            open: BTreeMap::new(),
            done: BTreeMap::new(),
            keep: false,
            kept: BTreeMap::new(),
            settled_below: 0,
            ahead: std::collections::BTreeSet::new(),
            flows: BTreeMap::new(),
            one_way_open: BTreeMap::new(),
            one_way: BTreeMap::new(),
        }
    }

    /// One worker's one-way part of interval `epoch`, before its
    /// [`IntervalTable::hand_in`] of the same interval.
    fn hand_in_one_way(&mut self, epoch: u32, part: &OneWayPart) {
        self.one_way_open.entry(epoch).or_default().merge(part);
    }

    /// Interval `epoch`'s one-way record, once every worker has handed it in.
    pub fn one_way_of(&self, epoch: u32) -> Option<OneWayInterval> {
        self.one_way.get(&epoch).cloned()
    }

    /// Every settled interval's one-way record.
    pub fn take_one_way(&mut self) -> BTreeMap<u32, OneWayInterval> {
        std::mem::take(&mut self.one_way)
    }

    /// Has every worker handed in interval `epoch` (its summary, if it
    /// has one, is final)?
    pub fn settled(&self, epoch: u32) -> bool {
        epoch < self.settled_below
    }

    /// The summary of interval `epoch`, once settled and if it recorded any.
    pub fn summary_of(&self, epoch: u32) -> Option<LatencySummary> {
        self.done.get(&epoch).cloned()
    }

    /// One worker's part of interval `epoch` (None: it recorded nothing).
    fn hand_in(&mut self, epoch: u32, part: Option<&LatencyHistogram>) {
        let entry = self.open.entry(epoch).or_insert((0, None));
        entry.0 += 1;
        if let Some(h) = part.filter(|h| h.count() > 0) {
            entry.1.get_or_insert_with(LatencyHistogram::new).merge(h);
        }
        if entry.0 >= self.workers {
            let (_, h) = self.open.remove(&epoch).expect("entry exists");
            if let Some(s) = h.as_ref().and_then(|h| h.summary_with(&self.percentiles)) {
                self.done.insert(epoch, s);
            }
            if let (true, Some(h)) = (self.keep, h) {
                self.kept.insert(epoch, SparseHistogram::of(&h));
            }
            if let Some(w) = self.one_way_open.remove(&epoch) {
                self.one_way.insert(epoch, w.sparse());
            }
            // Workers hand in their intervals in order, so the gaps close.
            self.ahead.insert(epoch);
            while self.ahead.remove(&self.settled_below) {
                self.settled_below += 1;
            }
        }
    }

    /// Keep each interval's histogram besides its summary (one histogram
    /// per interval: for the few flows of a probe, not for every test).
    pub fn keep_histograms(&mut self) {
        self.keep = true;
    }

    /// The kept histograms of the intervals every worker has handed in.
    pub fn take_kept(&mut self) -> BTreeMap<u32, SparseHistogram> {
        std::mem::take(&mut self.kept)
    }

    /// The percentiles asked for besides the fixed ones.
    pub fn percentiles(&self) -> &[f64] {
        &self.percentiles
    }

    /// The per-flow summaries handed in so far (`--samples`), by interval.
    pub fn take_flows(&mut self) -> BTreeMap<u32, Vec<(u32, LatencySummary)>> {
        std::mem::take(&mut self.flows)
    }

    /// The summaries of the intervals every worker has handed in.
    pub fn take_done(&mut self) -> BTreeMap<u32, LatencySummary> {
        std::mem::take(&mut self.done)
    }
}

/// One worker's latency recording: the open interval's histogram, and the
/// total of the intervals already handed in. The session moves `live` to the
/// next interval index at every tick; the first record after that hands the
/// finished interval to the table (one short lock per worker per interval,
/// never per transaction).
///
/// With per-flow latency kept ([`LatencyRecorder::keep_per_flow`],
/// `--samples`), each of the worker's flows also has an interval histogram
/// of its own, allocated up front and swapped out at the same hand-in: the
/// worker loop names the flow it runs in `slot`, so a record costs one
/// more histogram increment and no lock.
pub struct LatencyRecorder {
    epoch: u32,
    interval: LatencyHistogram,
    total: LatencyHistogram,
    live: Arc<AtomicU32>,
    table: Arc<Mutex<IntervalTable>>,
    /// Per-flow interval histograms by the worker's slot (empty: not kept).
    flows: Vec<LatencyHistogram>,
    /// The engine's flow id of each slot.
    flow_ids: Vec<u32>,
    percentiles: Vec<f64>,
    /// The slot of the flow the worker runs now (set by the worker loop).
    pub slot: usize,
    /// `--one-way`: the open interval's two ways and fastest exchanges,
    /// made at the first response that carries them.
    one_way: Option<Box<OneWayPart>>,
}

impl LatencyRecorder {
    pub fn new(live: Arc<AtomicU32>, table: Arc<Mutex<IntervalTable>>) -> LatencyRecorder {
        LatencyRecorder {
            epoch: live.load(Relaxed),
            interval: LatencyHistogram::new(),
            total: LatencyHistogram::new(),
            live,
            table,
            flows: Vec::new(),
            flow_ids: Vec::new(),
            percentiles: Vec::new(),
            slot: 0,
            one_way: None,
        }
    }

    /// Keep each flow's latency per interval too (`--samples`): one coarse
    /// histogram per flow of this worker, `flow_ids` the engine's id of
    /// each slot. Call before the first record.
    pub fn keep_per_flow(&mut self, flow_ids: &[u32]) {
        self.flows = flow_ids
            .iter()
            .map(|_| LatencyHistogram::coarse())
            .collect();
        self.flow_ids = flow_ids.to_vec();
        self.percentiles = self
            .table
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .percentiles()
            .to_vec();
    }

    /// The interval a latency recorded now belongs to (the session's
    /// live epoch): for a flow's own per-interval figures, placed as this
    /// recorder places its latencies.
    #[inline]
    pub fn interval(&self) -> u32 {
        self.live.load(Relaxed)
    }

    /// Record one latency into the interval it completed in.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        let now = self.live.load(Relaxed);
        if now != self.epoch {
            self.advance(now);
        }
        self.interval.record(ns);
        if let Some(h) = self.flows.get_mut(self.slot) {
            h.record(ns);
        }
    }

    /// Record one transaction's two ways, ns, and its four clock readings
    /// (`--one-way`) into the interval it completed in.
    #[inline]
    pub fn record_one_way(&mut self, up_ns: u64, down_ns: u64, x: Exchange) {
        let now = self.live.load(Relaxed);
        if now != self.epoch {
            self.advance(now);
        }
        self.one_way
            .get_or_insert_with(Default::default)
            .record(up_ns, down_ns, x);
    }

    /// Hand in every interval before `now`.
    #[cold]
    fn advance(&mut self, now: u32) {
        // Each flow's summary, before the lock (only with --samples).
        let mut per_flow = Vec::new();
        for (h, &id) in self.flows.iter_mut().zip(&self.flow_ids) {
            if let Some(s) = h.summary_with(&self.percentiles) {
                per_flow.push((id, s));
                h.reset();
            }
        }
        let mut table = self.table.lock().unwrap_or_else(|p| p.into_inner());
        if !per_flow.is_empty() {
            table.flows.entry(self.epoch).or_default().extend(per_flow);
        }
        if let Some(w) = self.one_way.as_deref_mut().filter(|w| w.count() > 0) {
            table.hand_in_one_way(self.epoch, w);
            w.reset();
        }
        table.hand_in(self.epoch, Some(&self.interval));
        // Intervals between: nothing of this worker's in them.
        for e in self.epoch.saturating_add(1)..now {
            table.hand_in(e, None);
        }
        drop(table);
        if self.interval.count() > 0 {
            self.total.merge(&self.interval);
            self.interval.reset();
        }
        self.epoch = now;
    }

    /// At the worker's exit: hand in everything up to the current interval,
    /// and return the worker's whole histogram.
    pub fn finish(mut self) -> LatencyHistogram {
        let now = self.live.load(Relaxed);
        if self.epoch <= now {
            self.advance(now.saturating_add(1));
        }
        self.total
    }
}

/// An open-loop worker's other recordings: service time (from the actual
/// send, per interval like response time) and the generator's own lag
/// behind its schedule (whole run).
pub struct OpenLoopRecorder {
    pub service: LatencyRecorder,
    pub lag: LatencyHistogram,
}

/// The latency at one requested percentile.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Percentile {
    /// 0..=100, as asked with --percentiles.
    #[schemars(range(max = 100), extend("exclusiveMinimum" = 0))]
    pub percentile: f64,
    pub ns: u64,
}

/// The latency figures every RR-type result reports, in nanoseconds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LatencySummary {
    #[schemars(range(min = 1))]
    pub count: u64,
    pub min: u64,
    #[schemars(range(min = 0))]
    pub mean: f64,
    #[schemars(range(min = 0))]
    pub stddev: f64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p99_9: u64,
    pub max: u64,
    /// The percentiles asked for with --percentiles, in the order given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub percentiles: Vec<Percentile>,
}

/// One worker's open interval: the two ways, ns, corrected by the offset
/// the flows were given, and the fastest exchanges, raw.
#[derive(Clone, Debug, Default)]
pub struct OneWayPart {
    pub up: LatencyHistogram,
    pub down: LatencyHistogram,
    pub fastest: Fastest,
}

impl OneWayPart {
    /// One transaction: its two ways and its four readings.
    #[inline]
    pub fn record(&mut self, up_ns: u64, down_ns: u64, x: Exchange) {
        self.up.record(up_ns);
        self.down.record(down_ns);
        self.fastest.offer(x);
    }

    pub fn merge(&mut self, other: &OneWayPart) {
        self.up.merge(&other.up);
        self.down.merge(&other.down);
        self.fastest.merge(&other.fastest);
    }

    pub fn count(&self) -> u64 {
        self.up.count()
    }

    pub fn reset(&mut self) {
        self.up.reset();
        self.down.reset();
        self.fastest = Fastest::default();
    }

    /// The interval as the engine keeps it.
    pub fn sparse(&self) -> OneWayInterval {
        OneWayInterval {
            up: SparseHistogram::of(&self.up),
            down: SparseHistogram::of(&self.down),
            fastest: self.fastest,
        }
    }
}

/// One interval's one-way record, every worker's merged, kept to the end
/// of the run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OneWayInterval {
    pub up: SparseHistogram,
    pub down: SparseHistogram,
    pub fastest: Fastest,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A sparse copy merges back into the same figures, and the CDF has
    /// as many points as asked (no two at one latency), rising to 1.
    #[test]
    fn sparse_round_trip_and_cdf() {
        let mut h = LatencyHistogram::new();
        for i in 1..=10_000u64 {
            h.record(10_000 + i * 37 % 90_000);
        }
        h.record(5_000_000);
        let s = SparseHistogram::of(&h);
        assert_eq!(s.count(), h.count());
        let mut back = LatencyHistogram::new();
        back.merge_sparse(&s);
        back.merge_sparse(&s);
        let (a, b) = (h.summary().unwrap(), back.summary().unwrap());
        assert_eq!((a.p50, a.p99, a.max), (b.p50, b.p99, b.max));
        assert_eq!(b.count, 2 * a.count);
        let cdf = h.cdf(200);
        assert!(cdf.len() > 150, "{}", cdf.len());
        assert!(cdf.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
        assert_eq!(cdf.last().unwrap().1, 1.0);
        assert!(LatencyHistogram::new().cdf(200).is_empty());
    }

    #[test]
    fn count_at_least_counts_the_tail() {
        let mut h = LatencyHistogram::new();
        for ns in [1_000, 2_000_000, 10_000_000, 300_000_000] {
            h.record(ns);
        }
        assert_eq!(h.count_at_least(1), 4);
        assert_eq!(h.count_at_least(10_000_000), 2);
        assert_eq!(h.count_at_least(300_000_000), 1);
        assert_eq!(h.count_at_least(400_000_000), 0);
        assert_eq!(LatencyHistogram::new().count_at_least(1), 0);
    }

    #[test]
    fn an_interval_settles_once_every_worker_handed_it_in() {
        let mut t = IntervalTable::new(2, &[]);
        let mut h = LatencyHistogram::new();
        h.record(1_000);
        t.hand_in(0, Some(&h));
        assert!(!t.settled(0));
        // The other worker skipped interval 0 and 1 (nothing recorded) and
        // hands in 2 with a response; the first worker then hands in 1.
        t.hand_in(0, None);
        t.hand_in(1, None);
        t.hand_in(2, Some(&h));
        assert!(t.settled(0) && !t.settled(1) && !t.settled(2));
        assert_eq!(t.summary_of(0).map(|s| s.count), Some(1));
        t.hand_in(1, None);
        assert!(t.settled(1) && !t.settled(2));
        assert_eq!(t.summary_of(1), None);
        t.hand_in(2, None);
        assert!(t.settled(2));
        assert_eq!(t.summary_of(2).map(|s| s.count), Some(1));
    }

    #[test]
    fn empty_has_no_summary() {
        assert!(LatencyHistogram::new().summary().is_none());
    }

    #[test]
    fn requested_percentiles_follow_the_list() {
        let mut h = LatencyHistogram::new();
        for v in 1..=10_000u64 {
            h.record(v * 1000);
        }
        let s = h.summary_with(&[99.99, 50.0, 90.0]).unwrap();
        let ps: Vec<f64> = s.percentiles.iter().map(|p| p.percentile).collect();
        assert_eq!(ps, [99.99, 50.0, 90.0]);
        assert_eq!(s.percentiles[1].ns, s.p50);
        assert!((s.percentiles[0].ns as f64 - 9_999_000.0).abs() / 9_999_000.0 < 0.001);
    }

    #[test]
    fn text_rows_cover_every_sample_once() {
        let mut h = LatencyHistogram::new();
        for v in [10u64, 20, 30, 1000, 1500, 70_000] {
            h.record(v);
        }
        let rows = h.text_rows();
        let total: u64 = rows
            .iter()
            .map(|r| r.split_whitespace().nth(3).unwrap().parse::<u64>().unwrap())
            .sum();
        assert_eq!(total, 6);
        assert_eq!(rows.len(), 5, "{rows:#?}"); // 8-16, 16-32, 512-1K, 1K-2K, 64K-128K
    }

    #[test]
    fn percentiles_are_ordered_and_close() {
        let mut h = LatencyHistogram::new();
        for v in 1..=100_000u64 {
            h.record(v * 10);
        }
        let s = h.summary().unwrap();
        assert!(
            s.min <= s.p50
                && s.p50 <= s.p90
                && s.p90 <= s.p99
                && s.p99 <= s.p99_9
                && s.p99_9 <= s.max
        );
        // 3 significant digits: within 0.1 %.
        assert!(
            (s.p50 as f64 - 500_000.0).abs() / 500_000.0 < 0.001,
            "{}",
            s.p50
        );
    }

    /// Histograms of `a`, of `b`, and of both.
    fn three(a: &[u64], b: &[u64]) -> [LatencyHistogram; 3] {
        let [mut ha, mut hb, mut hu] = [(); 3].map(|_| LatencyHistogram::new());
        for v in a {
            ha.record(*v);
            hu.record(*v);
        }
        for v in b {
            hb.record(*v);
            hu.record(*v);
        }
        [ha, hb, hu]
    }

    proptest! {
        /// Merging per-thread histograms equals one histogram of all values.
        #[test]
        fn merge_equals_union(a in proptest::collection::vec(1u64..10_000_000_000, 0..200),
                              b in proptest::collection::vec(1u64..10_000_000_000, 0..200)) {
            let [mut ha, hb, hu] = three(&a, &b);
            ha.merge(&hb);
            prop_assert_eq!(ha.summary(), hu.summary());
        }

        /// The serialized form carries every count: histograms written by
        /// separate runs merge into the histogram of the union.
        #[test]
        fn serialized_histograms_merge_to_the_union(
            a in proptest::collection::vec(1u64..10_000_000_000, 0..200),
            b in proptest::collection::vec(1u64..10_000_000_000, 0..200)) {
            let [ha, hb, hu] = three(&a, &b);
            let mut merged = LatencyHistogram::from_base64(&ha.to_base64()).unwrap();
            merged.merge(&LatencyHistogram::from_base64(&hb.to_base64()).unwrap());
            prop_assert_eq!(merged.count(), hu.count());
            prop_assert_eq!(merged.summary_with(&[50.0, 99.99]), hu.summary_with(&[50.0, 99.99]));
        }
    }
}
