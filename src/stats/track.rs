//! The server's clock offset followed through a `--one-way` run: the
//! estimates before and after the run (`stats::offset`, clock pings on the
//! control connection) and, between them, one per interval from that
//! interval's fastest exchanges (`stats::owd`), joined into a piecewise
//! linear offset with a bound at every moment.
//!
//! The physics. Every exchange holds the offset θ in `[t3 − t4, t2 − t1]`,
//! whatever the path; the middle is off θ by half the difference of the
//! two ways' delays, and the half-width bounds that. A window's fastest
//! exchanges are the least delayed of it, so its estimate (their mean) is
//! within their mean half-width of θ at their mean moment — that much
//! holds for every window. But a standing queue one way (a bulk flow
//! filling a bottleneck's buffer) delays every exchange of the window by
//! its depth q, its fastest too: the window's estimate moves by q/2 toward
//! that way, within its bound (which grows by q/2) yet biased. A
//! correction that followed it would put half the queue on each way and
//! hide exactly the asymmetry `--one-way` is run to see. So a window
//! tightens the track only where its fastest path is near the run's
//! fastest (the reference: the least of every window's and both clock
//! bursts'), within [`tolerance_ns`]: half the reference and at least
//! 10 µs (a scheduler's wake-up on a busy host). Such a window carries at
//! most the idle path's asymmetry and that tolerance; the others are
//! reported and do not move the correction.
//!
//! Between two points the offset is their line (clock rates hold steady
//! over seconds: a crystal's drift changes with temperature over minutes,
//! and NTP slews it by at most 500 ppm, in steps seconds apart); its
//! error there is the two bounds interpolated, each holding θ at its
//! moment. Past the last point the last segment's line goes on with the
//! last point's bound, as the run's single estimate alone did before.

use super::offset::Estimate;

/// The least tolerance on a window's fastest path over the reference, ns.
pub const TOLERANCE_MIN_NS: u64 = 10_000;

/// How far a window's fastest path (round trip less the server's
/// turnaround) may exceed the reference and still tighten the track, ns:
/// half the reference, at least [`TOLERANCE_MIN_NS`].
pub fn tolerance_ns(reference_ns: u64) -> u64 {
    (reference_ns / 2).max(TOLERANCE_MIN_NS)
}

/// One interval's own estimate, and whether it moves the correction.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Window {
    pub index: u32,
    pub est: Estimate,
    pub used: bool,
}

/// The offset at one moment: its value, bound, and the slope of the line
/// it lies on (ppm), all ns on our clock.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Offset {
    pub offset_ns: i64,
    pub error_ns: u64,
    pub slope_ppm: f64,
}

/// The points the offset is followed through, by time.
#[derive(Clone, Debug, PartialEq)]
pub struct Track {
    points: Vec<Estimate>,
}

impl Track {
    /// The track through `before`, `after` and the windows near the
    /// reference path; every window with whether it was used.
    pub fn new(
        before: Estimate,
        after: Option<Estimate>,
        windows: &[(u32, Estimate)],
    ) -> (Track, Vec<Window>) {
        let reference = windows
            .iter()
            .map(|w| w.1.min_path_ns)
            .chain(after.map(|a| a.min_path_ns))
            .fold(before.min_path_ns, u64::min);
        let limit = reference.saturating_add(tolerance_ns(reference));
        let marked: Vec<Window> = windows
            .iter()
            .map(|&(index, est)| Window {
                index,
                est,
                used: est.min_path_ns <= limit,
            })
            .collect();
        let mut points: Vec<Estimate> = std::iter::once(before)
            .chain(marked.iter().filter(|w| w.used).map(|w| w.est))
            .chain(after)
            .collect();
        points.sort_by_key(|p| p.at_ns);
        (Track { points }, marked)
    }

    /// The offset at `t` ns on our clock.
    pub fn at(&self, t: u64) -> Offset {
        let p = &self.points;
        let i = p.partition_point(|x| x.at_ns <= t);
        let (a, b, inside) = match i {
            _ if p.len() == 1 => (p[0], p[0], false),
            0 => (p[0], p[1], false),
            i if i >= p.len() => (p[p.len() - 2], p[p.len() - 1], false),
            i => (p[i - 1], p[i], true),
        };
        let span = b.at_ns.saturating_sub(a.at_ns);
        if span == 0 {
            let near = if t < b.at_ns { a } else { b };
            return Offset {
                offset_ns: near.offset_ns,
                error_ns: near.error_ns,
                slope_ppm: 0.0,
            };
        }
        let slope = (b.offset_ns as f64 - a.offset_ns as f64) / span as f64;
        let off = a.offset_ns as f64 + slope * (t as f64 - a.at_ns as f64);
        let error_ns = if inside {
            let l = (t - a.at_ns) as f64 / span as f64;
            ((1.0 - l) * a.error_ns as f64 + l * b.error_ns as f64).ceil() as u64
        } else if t < a.at_ns {
            a.error_ns
        } else {
            b.error_ns
        };
        Offset {
            offset_ns: off.round() as i64,
            error_ns,
            slope_ppm: slope * 1e6,
        }
    }

    /// The bound on a correction taken at `t` for samples anywhere within
    /// `reach` ns of it: the larger bound at either end of the reach or at
    /// a point inside it, plus the most the line moves over the reach.
    pub fn error_over(&self, t: u64, reach: u64) -> u64 {
        let (from, to) = (t.saturating_sub(reach), t.saturating_add(reach));
        let mut err = 0u64;
        let mut slope = 0f64;
        let inner = self
            .points
            .iter()
            .filter(|p| p.at_ns > from && p.at_ns < to)
            .map(|p| p.at_ns);
        for s in [from, to].into_iter().chain(inner) {
            let o = self.at(s);
            err = err.max(o.error_ns);
            slope = slope.max(o.slope_ppm.abs());
            // The segment that starts at a point, too.
            let after = self.at(s.saturating_add(1));
            slope = slope.max(after.slope_ppm.abs());
        }
        err + (slope * 1e-6 * reach as f64).ceil() as u64
    }

    /// The points, by time.
    pub fn points(&self) -> &[Estimate] {
        &self.points
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::offset::{Exchange, estimate_kept};
    use crate::stats::owd::Fastest;

    const S: u64 = 1_000_000_000;

    /// A server whose clock runs 50 ppm fast, 5 s ahead at t = 0, over a
    /// path of `up` and `down` ns each way and 5 µs of turnaround; a
    /// window's exchanges, every 1 ms of `[from, from + 1 s)`, with
    /// `jitter` ns more on some at random.
    fn window(from: u64, up: u64, down: u64, jitter: u64) -> Vec<Exchange> {
        let theta = |t: u64| 5 * S as i64 + (t as f64 * 50e-6) as i64;
        let mut seed = from | 1;
        (0..1_000u64)
            .map(|i| {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let extra = (seed >> 33) % (jitter + 1);
                let t1 = from + i * 1_000_000;
                let arrive = t1 + up + extra;
                let leave = arrive + 5_000;
                let t4 = leave + down + extra / 2;
                Exchange {
                    sent_ns: t1,
                    peer_rx_ns: (arrive as i64 + theta(arrive)) as u64,
                    peer_tx_ns: (leave as i64 + theta(leave)) as u64,
                    received_ns: t4,
                }
            })
            .collect()
    }

    fn fastest_of(v: &[Exchange]) -> Estimate {
        let mut f = Fastest::default();
        for x in v {
            f.offer(*x);
        }
        estimate_kept(f.kept(), f.offered()).unwrap()
    }

    fn burst(at: u64, path: u64, err: u64) -> Estimate {
        Estimate {
            offset_ns: 5 * S as i64 + (at as f64 * 50e-6) as i64,
            error_ns: err,
            at_ns: at,
            min_path_ns: path,
            kept: 8,
            exchanges: 24,
        }
    }

    /// 50 ppm of drift over a 10 s run, estimated before and after with
    /// 40 µs bounds; the windows (20 µs each way, a little jitter) follow
    /// it: the offset anywhere in the run within its bound of the truth,
    /// and the bound the windows' (about 20 µs), not the bursts'. In the
    /// fifth second a queue of 2 ms stands on the way up: that window is
    /// recorded, its estimate 1 ms off, and does not move the track.
    #[test]
    fn a_drift_is_followed_and_a_queue_is_not() {
        let truth = |t: u64| 5 * S as i64 + (t as f64 * 50e-6) as i64;
        let windows: Vec<(u32, Estimate)> = (0..10u32)
            .map(|i| {
                let from = S + i as u64 * S;
                let up = if i == 4 { 2_020_000 } else { 20_000 };
                (i, fastest_of(&window(from, up, 20_000, 30_000)))
            })
            .collect();
        let before = burst(S / 2, 80_000, 40_000);
        let after = burst(11 * S + S / 2, 80_000, 40_000);
        let (track, marked) = Track::new(before, Some(after), &windows);
        assert_eq!(marked.iter().filter(|w| w.used).count(), 9, "{marked:?}");
        let queued = marked[4];
        assert!(!queued.used);
        assert!((queued.est.offset_ns - truth(queued.est.at_ns)).abs() > 900_000);
        assert!(
            (queued.est.offset_ns - truth(queued.est.at_ns)).unsigned_abs() <= queued.est.error_ns
        );
        for k in 0..=100u64 {
            let t = S + k * S / 10;
            let o = track.at(t);
            let off = (o.offset_ns - truth(t)).unsigned_abs();
            assert!(off <= o.error_ns + 1, "t {t}: {o:?} off {off}");
            assert!(o.error_ns <= 40_000, "{o:?}");
            assert!((o.slope_ppm - 50.0).abs() < 30.0, "{o:?}");
        }
        // At a used window's moment the bound is the window's, tighter
        // than the bursts'; over half a second either side it grows by
        // the 25 µs the offset moves in that time.
        let w = marked[2].est;
        assert_eq!(track.at(w.at_ns).error_ns, w.error_ns);
        assert!(w.error_ns < 30_000, "{w:?}");
        let e = track.error_over(w.at_ns, S / 2);
        assert!(
            (w.error_ns + 20_000..w.error_ns.max(marked[3].est.error_ns) + 40_000).contains(&e),
            "{e}"
        );
        // The line from before to after alone holds the truth too.
        let (line, _) = Track::new(before, Some(after), &[]);
        let mid = line.at(6 * S);
        assert!((mid.offset_ns - truth(6 * S)).unsigned_abs() <= mid.error_ns);
    }

    /// One estimate alone: its offset and bound everywhere.
    #[test]
    fn one_point_holds() {
        let b = burst(S, 50_000, 25_000);
        let (t, marked) = Track::new(b, None, &[]);
        assert!(marked.is_empty());
        let o = t.at(9 * S);
        assert_eq!((o.offset_ns, o.error_ns), (b.offset_ns, 25_000));
        assert_eq!(t.error_over(9 * S, S), 25_000);
    }
}
