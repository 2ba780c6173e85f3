//! Packet-train dispersion, and the path capacity it gives.
//!
//! A train of back-to-back datagrams leaves the narrowest link spaced by
//! that link's time to send one frame, `8·frame_bytes / capacity`, and
//! arrives so spaced unless other traffic slips in between (the gap then
//! grows by whole cross-traffic packets) or a queue after it squeezes the
//! packets together again. So the receiver's gaps between consecutive
//! packets of a train form a distribution with several modes, and the
//! capacity is the strongest one (pathrate's method, Dovrolis, Ramanathan
//! and Moore, 2004); later packets of longer trains narrow it, because a
//! train that lasts longer averages over the cross traffic.
//!
//! A token-bucket shaper breaks that model: the first packets of a train
//! pass at the sender's line rate while the bucket has tokens, the rest at
//! the shaped rate. The gaps are therefore kept by their packet's index in
//! the train: a head that is much faster than the tail is a bucket, named
//! as such (its depth in packets and both rates) rather than averaged.
//!
//! The receiver keeps log-spaced histograms per packet index, never every
//! gap: [`GapRecorder`] records, [`TrainGaps`] travels (in the server's
//! final report), and [`estimate`] is a pure function of it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Histogram bins per decade of gap: each bin is 3.7 % wide, so a mode's
/// bin places the capacity within ±1.8 %.
pub const BINS_PER_DECADE: f64 = 64.0;
/// The lower edge of bin 0, ns: 10 ns is one 1500-byte frame at 1.2 Tbit/s.
const BIN0_NS: f64 = 10.0;
/// Bins up to 1 s of gap.
pub const BINS: u16 = 8 * 64;
/// The highest packet index a train header can carry (a u16): a peer's
/// report with a larger one is no train of any thrum.
pub const MAX_INDEX: u64 = u16::MAX as u64;
/// The largest count a peer's report may carry: 2^48 datagrams are 32 days
/// of a 100 Mpps link; anything larger (2^64 − 1 above all) is a crafted
/// figure, not a measurement.
pub const MAX_COUNT: u64 = 1 << 48;
/// The largest frame a probe datagram takes: a 65,507-byte UDP payload
/// and its headers.
const MAX_FRAME_BYTES: u64 = 65_535 + 14 + 40;
/// Per-index modes need this many gaps to be believed.
const MIN_GAPS: u64 = 3;
/// A train's head counts as a bucket when its rate beats the tail's by this.
const SHAPER_RATIO: f64 = 1.3;
/// ... over at least this many gaps (three packets): htb lets one extra
/// packet through at line rate at any rate (its bucket is at least one
/// MTU), and that is not a shaper worth naming.
const SHAPER_MIN_GAPS: u16 = 2;

/// The bin of a gap of `ns` nanoseconds.
pub fn bin_of(ns: u64) -> u16 {
    let b = ((ns.max(1) as f64 / BIN0_NS).log10() * BINS_PER_DECADE).floor();
    b.clamp(0.0, f64::from(BINS - 1)) as u16
}

/// The lower edge of bin `b`, ns.
pub fn bin_low_ns(b: u32) -> f64 {
    BIN0_NS * 10f64.powf(f64::from(b) / BINS_PER_DECADE)
}

/// The middle of bin `b` (geometric), ns.
pub fn bin_mid_ns(b: u32) -> f64 {
    BIN0_NS * 10f64.powf((f64::from(b) + 0.5) / BINS_PER_DECADE)
}

/// Gaps of complete and broken trains as one receiver saw them: how many
/// gaps fell in each bin, by the later packet's index in its train.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TrainGaps {
    /// Bytes one probe datagram takes on the link: payload, UDP 8, IPv4
    /// 20 or IPv6 40, Ethernet 14 (what a shaper and a NIC count).
    pub frame_bytes: u64,
    /// Trains whose first packet arrived.
    pub trains: u64,
    /// Of those, trains that lost or reordered a packet; their gaps up to
    /// the break still count.
    pub broken: u64,
    /// `[index, bin, count]`: `count` gaps ending at packet `index` (1 for
    /// the gap between a train's first and second packet) fell in `bin`.
    pub gaps: Vec<[u64; 3]>,
    /// Datagrams of the trains that arrived in the window.
    #[serde(default)]
    pub datagrams: u64,
    /// Datagrams of those trains (and of whole trains between them) that
    /// did not arrive, or arrived after a later train.
    #[serde(default)]
    pub lost: u64,
    /// `[bin, count]`: the sender's time per datagram over its longest
    /// trains, as the trains' headers carried it (absent from older peers).
    #[serde(default)]
    pub pace: Vec<[u64; 2]>,
}

impl TrainGaps {
    /// The first field of a peer's report no receiver can produce, named
    /// with its value: a frame size of 0 or over 64 KB, an index or bin
    /// outside the histogram, a count near 2^64 (a wrapped subtraction),
    /// more broken trains than trains. The client drops such a report
    /// with a warning rather than print a capacity of 0 bit/s or a
    /// probe load of NaN % from it ([`estimate`] stays bounded on any
    /// input, but its figures would be the peer's invention).
    pub fn implausible(&self) -> Option<String> {
        if !(1..=MAX_FRAME_BYTES).contains(&self.frame_bytes) {
            return Some(format!(
                "train_gaps.frame_bytes {} (1 to {MAX_FRAME_BYTES})",
                self.frame_bytes
            ));
        }
        for (name, n) in [
            ("trains", self.trains),
            ("broken", self.broken),
            ("datagrams", self.datagrams),
            ("lost", self.lost),
        ] {
            if n > MAX_COUNT {
                return Some(format!("train_gaps.{name} {n} (at most 2^48)"));
            }
        }
        if self.broken > self.trains {
            return Some(format!(
                "train_gaps.broken {} of {} trains",
                self.broken, self.trains
            ));
        }
        if let Some(&[i, b, n]) = self
            .gaps
            .iter()
            .find(|&&[i, b, n]| i == 0 || i > MAX_INDEX || b >= u64::from(BINS) || n > MAX_COUNT)
        {
            return Some(format!(
                "train_gaps.gaps [{i}, {b}, {n}] (index 1 to {MAX_INDEX}, bin below {BINS}, count at most 2^48)"
            ));
        }
        if let Some(&[b, n]) = self
            .pace
            .iter()
            .find(|&&[b, n]| b >= u64::from(BINS) || n > MAX_COUNT)
        {
            return Some(format!(
                "train_gaps.pace [{b}, {n}] (bin below {BINS}, count at most 2^48)"
            ));
        }
        None
    }

    /// Several receivers' gaps as one (None when there are none).
    pub fn merged(all: impl Iterator<Item = TrainGaps>) -> Option<TrainGaps> {
        let mut counts: BTreeMap<(u64, u64), u64> = BTreeMap::new();
        let mut pace: BTreeMap<u64, u64> = BTreeMap::new();
        let mut out: Option<TrainGaps> = None;
        for g in all {
            for &[i, b, n] in &g.gaps {
                *counts.entry((i, b)).or_default() += n;
            }
            for &[b, n] in &g.pace {
                *pace.entry(b).or_default() += n;
            }
            let o = out.get_or_insert_with(TrainGaps::default);
            o.frame_bytes = o.frame_bytes.max(g.frame_bytes);
            o.trains += g.trains;
            o.broken += g.broken;
            o.datagrams += g.datagrams;
            o.lost += g.lost;
        }
        let mut out = out?;
        out.gaps = counts.into_iter().map(|((i, b), n)| [i, b, n]).collect();
        out.pace = pace.into_iter().map(|(b, n)| [b, n]).collect();
        Some(out)
    }
}

/// Builds a [`TrainGaps`] as packets arrive.
#[derive(Debug, Default)]
pub struct GapRecorder {
    frame_bytes: u64,
    trains: u64,
    broken: u64,
    datagrams: u64,
    lost: u64,
    counts: BTreeMap<(u16, u16), u64>,
    pace: BTreeMap<u16, u64>,
}

impl GapRecorder {
    pub fn new(frame_bytes: u64) -> GapRecorder {
        GapRecorder {
            frame_bytes,
            ..GapRecorder::default()
        }
    }

    pub fn train_started(&mut self) {
        self.trains += 1;
    }

    pub fn train_broken(&mut self) {
        self.broken += 1;
    }

    /// The gap of `ns` between packet `index - 1` and `index` of a train.
    pub fn gap(&mut self, index: u16, ns: u64) {
        *self.counts.entry((index, bin_of(ns))).or_default() += 1;
    }

    /// One datagram of a train arrived.
    pub fn datagram(&mut self) {
        self.datagrams += 1;
    }

    /// `n` datagrams of the trains did not arrive.
    pub fn lost(&mut self, n: u64) {
        self.lost += n;
    }

    /// The sender took `ns` per datagram over one of its longest trains.
    pub fn sender_pace(&mut self, ns: u64) {
        *self.pace.entry(bin_of(ns)).or_default() += 1;
    }

    pub fn gaps(&self) -> TrainGaps {
        TrainGaps {
            frame_bytes: self.frame_bytes,
            trains: self.trains,
            broken: self.broken,
            gaps: self
                .counts
                .iter()
                .map(|(&(i, b), &n)| [u64::from(i), u64::from(b), n])
                .collect(),
            datagrams: self.datagrams,
            lost: self.lost,
            pace: self.pace.iter().map(|(&b, &n)| [u64::from(b), n]).collect(),
        }
    }
}

/// A shaper recognised in the trains: the first `burst_packets` of a train
/// at `burst_rate_bps`, the rest at `sustained_rate_bps`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Shaper {
    #[schemars(range(min = 1))]
    pub burst_packets: u64,
    pub burst_rate_bps: f64,
    pub sustained_rate_bps: f64,
}

/// One bin of the capacity histogram, as rates (a gap's bin, turned into
/// the rate that frame size over that gap gives).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RateBin {
    pub low_bps: f64,
    pub high_bps: f64,
    pub count: u64,
}

/// The capacity the trains give.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Estimate {
    pub capacity_bps: f64,
    /// The mode's extent: bins holding at least half its count, next to it.
    pub interval_bps: [f64; 2],
    pub shaper: Option<Shaper>,
    /// The gaps the estimate comes from (the second half of the longest
    /// trains), as rates.
    pub histogram: Vec<RateBin>,
    /// The rate the sender put its longest trains into its kernel at (the
    /// median of their time per datagram); None when the headers did not
    /// carry it.
    pub sender_rate_bps: Option<f64>,
    /// The longest train the estimate saw, in packets.
    pub longest_train: u64,
}

impl Estimate {
    /// Were the trains never slowed by the path? When the sender could not
    /// put a train out faster than [`SHAPER_RATIO`] times the estimate,
    /// the gaps are the sender's own: its CPU (the path carries more), or
    /// a token bucket deeper than the longest train passing whole trains
    /// at the sender's pace (its sustained rate unseen). Either way the
    /// estimate is not the path's capacity.
    pub fn sender_limited(&self) -> bool {
        self.sender_rate_bps
            .is_some_and(|s| s < SHAPER_RATIO * self.capacity_bps)
    }
}

/// The mode bin of a histogram (bin → count), with each bin's count taken
/// together with its two neighbours' so that a mode split across a bin
/// edge still wins; None when empty.
fn mode(h: &BTreeMap<u32, u64>) -> Option<u32> {
    let at = |b: u32| h.get(&b).copied().unwrap_or(0);
    h.keys().copied().max_by_key(|&b| {
        (
            2u128 * u128::from(at(b))
                + u128::from(b.checked_sub(1).map_or(0, at))
                + u128::from(at(b + 1)),
            std::cmp::Reverse(b),
        )
    })
}

/// The capacity, its interval, the shaper if any, from the gaps; None
/// without enough gaps. Entries outside the histogram (an index over
/// [`MAX_INDEX`], a bin from [`BINS`] on: a crafted report) are left out,
/// and indices and bins are u32, so that no loop here wraps: the work is
/// bounded by the report's length.
pub fn estimate(g: &TrainGaps) -> Option<Estimate> {
    let mut by_index: BTreeMap<u32, BTreeMap<u32, u64>> = BTreeMap::new();
    for &[i, b, n] in &g.gaps {
        if i > MAX_INDEX || b >= u64::from(BINS) {
            continue;
        }
        let c = by_index
            .entry(i as u32)
            .or_default()
            .entry(b as u32)
            .or_default();
        *c = c.saturating_add(n);
    }
    let longest = *by_index.keys().next_back()?;
    let bits = 8.0 * g.frame_bytes as f64;
    let rate = |ns: f64| bits * 1e9 / ns;
    // The tail: the second half of the longest trains, past any bucket the
    // trains can empty.
    let mut tail: BTreeMap<u32, u64> = BTreeMap::new();
    for (_, h) in by_index.range(longest.div_ceil(2).max(1)..) {
        for (&b, &n) in h {
            let c = tail.entry(b).or_default();
            *c = c.saturating_add(n);
        }
    }
    if tail.values().fold(0u64, |a, &n| a.saturating_add(n)) < MIN_GAPS {
        return None;
    }
    let m = mode(&tail)?;
    let half = tail[&m].div_ceil(2);
    let (mut lo, mut hi) = (m, m);
    while lo > 0 && tail.get(&(lo - 1)).is_some_and(|&n| n >= half) {
        lo -= 1;
    }
    // Bins are below BINS, so hi + 1 stops there: no wrap, no endless walk.
    while tail.get(&(hi + 1)).is_some_and(|&n| n >= half) {
        hi += 1;
    }
    let capacity_bps = rate(bin_mid_ns(m));
    // Longer gaps are lower rates: the interval's low end is the slow edge.
    let interval_bps = [rate(bin_low_ns(hi + 1)), rate(bin_low_ns(lo))];

    // The head: leading indices whose own mode is well above the tail's.
    let mut head = 0u32;
    let mut head_hist: BTreeMap<u32, u64> = BTreeMap::new();
    for (&i, h) in &by_index {
        let fast = i == head + 1
            && h.values().fold(0u64, |a, &n| a.saturating_add(n)) >= MIN_GAPS
            && mode(h).is_some_and(|b| rate(bin_mid_ns(b)) > SHAPER_RATIO * capacity_bps);
        if !fast {
            break;
        }
        head = i;
        for (&b, &n) in h {
            let c = head_hist.entry(b).or_default();
            *c = c.saturating_add(n);
        }
    }
    let shaper = (head >= u32::from(SHAPER_MIN_GAPS) && head < longest.div_ceil(2))
        .then(|| mode(&head_hist))
        .flatten()
        .map(|b| Shaper {
            burst_packets: u64::from(head) + 1,
            burst_rate_bps: rate(bin_mid_ns(b)),
            sustained_rate_bps: capacity_bps,
        });
    let histogram = tail
        .iter()
        .map(|(&b, &n)| RateBin {
            low_bps: rate(bin_low_ns(b + 1)),
            high_bps: rate(bin_low_ns(b)),
            count: n,
        })
        .collect();
    // The median of the sender's pace: a preempted sender's slow train
    // is an outlier on one side only.
    let pace: Vec<[u64; 2]> = g
        .pace
        .iter()
        .copied()
        .filter(|&[b, _]| b < u64::from(BINS))
        .collect();
    let paced: u128 = pace.iter().map(|&[_, n]| u128::from(n)).sum();
    let mut below = 0u128;
    let sender_rate_bps = pace
        .iter()
        .find(|&&[_, n]| {
            below += u128::from(n);
            2 * below >= paced
        })
        .map(|&[b, _]| rate(bin_mid_ns(b as u32)));
    Some(Estimate {
        capacity_bps,
        interval_bps,
        shaper,
        histogram,
        sender_rate_bps,
        longest_train: u64::from(longest) + 1,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Frame of a 1400-byte payload.
    const FRAME: u64 = 1442;

    /// Gap of one frame at `bps`, ns.
    fn gap(bps: f64) -> u64 {
        (8.0 * FRAME as f64 / bps * 1e9).round() as u64
    }

    /// Trains of every length in `lens`, `n` of each, whose gaps come from
    /// `gap_at(index, train)`.
    fn trains(lens: &[u16], n: u64, gap_at: impl Fn(u16, u64) -> u64) -> TrainGaps {
        let mut r = GapRecorder::new(FRAME);
        for &len in lens {
            for t in 0..n {
                r.train_started();
                for i in 1..len {
                    r.gap(i, gap_at(i, t));
                }
            }
        }
        r.gaps()
    }

    fn near(x: f64, want: f64, tol: f64) -> bool {
        (x / want - 1.0).abs() <= tol
    }

    #[test]
    fn bins_are_log_spaced_and_round_trip() {
        for ns in [10u64, 100, 1_154, 23_072, 1_000_000] {
            let b = bin_of(ns);
            let b = u32::from(b);
            assert!(bin_low_ns(b) <= ns as f64 * 1.000_001, "{ns}");
            assert!(bin_low_ns(b + 1) > ns as f64, "{ns}");
        }
        assert_eq!(bin_of(0), 0);
        assert_eq!(bin_of(u64::MAX), BINS - 1);
    }

    #[test]
    fn a_clean_link_reads_its_rate_at_every_length() {
        for bps in [10e6, 50e6, 200e6, 1e9] {
            let g = trains(&[2, 4, 8, 16, 32], 10, |_, _| gap(bps));
            let e = estimate(&g).unwrap();
            assert!(near(e.capacity_bps, bps, 0.02), "{bps}: {e:?}");
            assert!(
                e.interval_bps[0] <= bps && bps <= e.interval_bps[1],
                "{e:?}"
            );
            assert_eq!(e.shaper, None);
        }
    }

    #[test]
    fn cross_traffic_widens_gaps_but_the_mode_stays() {
        // 50 Mbit/s with a competing 1500-byte packet in 40 % of the gaps,
        // sometimes two: the gap grows by whole cross-traffic frames.
        let bps = 50e6;
        let cross = gap(bps) * 1514 / FRAME;
        let g = trains(&[2, 4, 8, 16, 32, 64], 20, |i, t| {
            match (u64::from(i) * 7 + t * 13) % 10 {
                0..=3 => gap(bps) + cross,
                4 => gap(bps) + 2 * cross,
                _ => gap(bps),
            }
        });
        let e = estimate(&g).unwrap();
        assert!(near(e.capacity_bps, bps, 0.05), "{e:?}");
    }

    #[test]
    fn htb_lets_one_packet_through_and_is_no_shaper() {
        // The first gap at the sender's 520 Mbit/s, the rest at 10 Mbit/s
        // (shared/TESTING.md's htb measurement).
        let g = trains(&[2, 4, 8, 16, 32], 10, |i, _| {
            if i == 1 { gap(520e6) } else { gap(10e6) }
        });
        let e = estimate(&g).unwrap();
        assert!(near(e.capacity_bps, 10e6, 0.02), "{e:?}");
        assert_eq!(e.shaper, None);
    }

    #[test]
    fn a_deep_bucket_is_named_not_averaged() {
        // 20 packets at 900 Mbit/s, then 50 Mbit/s.
        let g = trains(&[2, 4, 8, 16, 32, 64], 10, |i, _| {
            if i < 20 { gap(900e6) } else { gap(50e6) }
        });
        let e = estimate(&g).unwrap();
        assert!(near(e.capacity_bps, 50e6, 0.02), "{e:?}");
        let s = e.shaper.expect("a shaper");
        assert_eq!(s.burst_packets, 20);
        assert!(near(s.burst_rate_bps, 900e6, 0.02), "{s:?}");
        assert_eq!(s.sustained_rate_bps, e.capacity_bps);
    }

    #[test]
    fn trains_as_fast_as_their_sender_are_a_sender_limit() {
        // Every gap at 400 Mbit/s, and the sender took as long per
        // datagram: nothing on the path slowed the trains.
        let mut g = trains(&[2, 4, 8, 16, 32, 64], 10, |_, _| gap(400e6));
        g.pace = vec![[u64::from(bin_of(gap(410e6))), 10]];
        let e = estimate(&g).unwrap();
        assert!(near(e.sender_rate_bps.unwrap(), 410e6, 0.02), "{e:?}");
        assert!(e.sender_limited());
        assert_eq!(e.longest_train, 64);
        // A sender twice as fast as the gaps (htb holding the trains
        // back), with one preempted train among nine: not a limit.
        g.pace = vec![[u64::from(bin_of(gap(40e6))), 1]];
        g.pace.insert(0, [u64::from(bin_of(gap(800e6))), 9]);
        let e = estimate(&g).unwrap();
        assert!(near(e.sender_rate_bps.unwrap(), 800e6, 0.02), "{e:?}");
        assert!(!e.sender_limited());
        // Without the pace (an older peer) nothing is claimed.
        g.pace.clear();
        assert!(!estimate(&g).unwrap().sender_limited());
    }

    #[test]
    fn receivers_merge_by_index_and_bin() {
        let a = trains(&[4], 2, |_, _| 1000);
        let mut b = a.clone();
        b.datagrams = 7;
        b.lost = 2;
        b.pace = vec![[5, 1]];
        let m = TrainGaps::merged([a.clone(), a.clone(), b].into_iter()).unwrap();
        assert_eq!((m.datagrams, m.lost, m.pace.clone()), (7, 2, vec![[5, 1]]));
        let m = TrainGaps::merged([a.clone(), a.clone()].into_iter()).unwrap();
        assert_eq!(m.trains, 4);
        assert_eq!(m.gaps.iter().map(|g| g[2]).sum::<u64>(), 12);
        assert_eq!(m.gaps.len(), a.gaps.len());
        assert_eq!(TrainGaps::merged(std::iter::empty()), None);
    }

    #[test]
    fn crafted_gaps_end_and_are_named() {
        // Every u16 bin at index 1 (and index 65,536): the walk up the
        // mode's neighbours wrapped a u16 and never ended.
        let mut g = TrainGaps {
            frame_bytes: FRAME,
            gaps: (0..=u64::from(u16::MAX) + 1).map(|b| [1, b, 1]).collect(),
            ..TrainGaps::default()
        };
        g.gaps.push([u64::from(u16::MAX) + 1, 3, u64::MAX]);
        g.pace = vec![[u64::MAX, u64::MAX], [3, u64::MAX]];
        let e = estimate(&g).unwrap();
        assert!(e.capacity_bps.is_finite() && e.capacity_bps > 0.0, "{e:?}");
        assert!(e.histogram.len() <= usize::from(BINS));
        assert!(
            g.implausible()
                .unwrap()
                .contains("train_gaps.gaps [1, 512, 1]")
        );
        let fine = trains(&[2, 4, 8], 3, |_, _| 1000);
        assert_eq!(fine.implausible(), None);
        for (bad, field) in [
            (
                TrainGaps {
                    lost: u64::MAX,
                    ..fine.clone()
                },
                "train_gaps.lost",
            ),
            (
                TrainGaps {
                    frame_bytes: 0,
                    ..fine.clone()
                },
                "train_gaps.frame_bytes",
            ),
            (
                TrainGaps {
                    broken: 99,
                    ..fine.clone()
                },
                "train_gaps.broken",
            ),
            (
                TrainGaps {
                    pace: vec![[512, 1]],
                    ..fine.clone()
                },
                "train_gaps.pace",
            ),
        ] {
            assert!(bad.implausible().unwrap().starts_with(field), "{field}");
        }
    }

    #[test]
    fn too_few_gaps_give_no_estimate() {
        assert_eq!(estimate(&TrainGaps::default()), None);
        assert_eq!(estimate(&trains(&[2], 1, |_, _| 1000)), None);
    }
}
