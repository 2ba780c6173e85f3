//! A peer's clock offset from timestamped exchanges, with a bound on its
//! error: NTP's on-wire arithmetic, filtered as crusader filters its
//! pings (the fastest third, the least queued), and the drift between an
//! estimate before a test and one after it.
//!
//! One exchange is four readings: our clock when the ping left (`t1`), the
//! peer's when it arrived (`t2`) and when the pong left (`t3`), ours when
//! the pong arrived (`t4`). Whatever the path, the peer's two readings
//! were taken at true moments between `t1` and `t4`, so its offset θ (peer
//! − ours) lies in `[t3 − t4, t2 − t1]`: the estimate is that interval's
//! middle, `((t2 − t1) + (t3 − t4)) / 2`, and its half-width,
//! `((t4 − t1) − (t3 − t2)) / 2` (half the round trip less the peer's own
//! turnaround), bounds the error however asymmetric the path. Queueing
//! widens an exchange's interval, so the fastest third are kept; each
//! holds θ, so their mean lies within the mean of their half-widths of
//! it. The readings are CLOCK_MONOTONIC (`crate::clock`), which never
//! steps, so the bound holds between exchanges too, up to the drift the
//! second estimate measures.
//!
//! Pure functions of recorded exchanges: the near end that pings
//! (`control::clocks`) and every user of an offset (the fleet's start
//! instant and its intervals, and one-way delays) call them.

use serde::{Deserialize, Serialize};

/// One exchange's four readings, ns: ours at the ping's send and the
/// pong's receipt, the peer's at the ping's receipt and the pong's send.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exchange {
    pub sent_ns: u64,
    pub peer_rx_ns: u64,
    pub peer_tx_ns: u64,
    pub received_ns: u64,
}

impl Exchange {
    /// Readings that can be true: the pong came after the ping, and the
    /// peer's turnaround fits in the round trip.
    pub fn sane(&self) -> bool {
        self.received_ns >= self.sent_ns
            && self.peer_tx_ns >= self.peer_rx_ns
            && self.peer_tx_ns - self.peer_rx_ns <= self.received_ns - self.sent_ns
    }

    /// The round trip less the peer's turnaround: time on the path and in
    /// both stacks, ns.
    pub fn path_ns(&self) -> u64 {
        (self.received_ns - self.sent_ns) - (self.peer_tx_ns - self.peer_rx_ns)
    }

    /// The middle of the interval the offset lies in, ns (peer − ours).
    pub fn offset_ns(&self) -> i128 {
        let up = self.peer_rx_ns as i128 - self.sent_ns as i128;
        let down = self.peer_tx_ns as i128 - self.received_ns as i128;
        (up + down) / 2
    }

    /// Half the interval's width: the largest error of [`Exchange::offset_ns`].
    pub fn half_width_ns(&self) -> u64 {
        self.path_ns().div_ceil(2)
    }

    /// When on our clock: the middle of the round trip.
    pub fn at_ns(&self) -> u64 {
        self.sent_ns + (self.received_ns - self.sent_ns) / 2
    }
}

/// The offset of a peer's clock from ours at one moment, from a burst of
/// exchanges.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// Peer − ours, ns.
    pub offset_ns: i64,
    /// The largest error of `offset_ns`, ns: the mean half-width of the
    /// exchanges kept (module doc).
    pub error_ns: u64,
    /// When on our clock, ns: the mean middle of the exchanges kept.
    pub at_ns: u64,
    /// The fastest exchange's round trip less the peer's turnaround, ns.
    pub min_path_ns: u64,
    /// Exchanges kept (the fastest third) and made (the sane ones).
    pub kept: u32,
    pub exchanges: u32,
}

/// The estimate from `exchanges`: the fastest third (at least one) by
/// path time, their offsets' mean and half-widths' mean. None when no
/// exchange is sane.
pub fn estimate(exchanges: &[Exchange]) -> Option<Estimate> {
    let mut x: Vec<&Exchange> = exchanges.iter().filter(|e| e.sane()).collect();
    if x.is_empty() {
        return None;
    }
    x.sort_by_key(|e| e.path_ns());
    let keep = x.len().div_ceil(3);
    Some(mean_of(&x[..keep], x.len()))
}

/// The estimate from exchanges already chosen as the fastest of a window
/// (`stats::track`) out of `made`: every sane one kept. None when none
/// is sane.
pub fn estimate_kept(fastest: &[Exchange], made: u64) -> Option<Estimate> {
    let mut x: Vec<&Exchange> = fastest.iter().filter(|e| e.sane()).collect();
    if x.is_empty() {
        return None;
    }
    x.sort_by_key(|e| e.path_ns());
    let made = (made as usize).max(x.len());
    Some(mean_of(&x, made))
}

/// The mean of `kept` (sorted fastest first) out of `made` exchanges.
fn mean_of(kept: &[&Exchange], made: usize) -> Estimate {
    let keep = kept.len();
    let n = keep as i128;
    let offset = kept.iter().map(|e| e.offset_ns()).sum::<i128>() / n;
    let error = kept.iter().map(|e| e.half_width_ns() as u128).sum::<u128>();
    let at = kept.iter().map(|e| e.at_ns() as u128).sum::<u128>() / keep as u128;
    Estimate {
        offset_ns: offset.clamp(i64::MIN as i128, i64::MAX as i128) as i64,
        error_ns: error.div_ceil(keep as u128) as u64,
        at_ns: at as u64,
        min_path_ns: kept[0].path_ns(),
        kept: keep as u32,
        exchanges: made as u32,
    }
}

/// The peer's clock against ours over a stretch of time: an estimate
/// before, and after when there is one (then with the drift between them).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClockMap {
    pub before: Estimate,
    pub after: Option<Estimate>,
}

impl ClockMap {
    /// How much faster the peer's clock runs than ours, parts per million
    /// (the offset's change over the time between the two estimates);
    /// None without a later estimate.
    pub fn drift_ppm(&self) -> Option<f64> {
        let a = self.after?;
        let span = a.at_ns.checked_sub(self.before.at_ns).filter(|&s| s > 0)?;
        Some((a.offset_ns as f64 - self.before.offset_ns as f64) / span as f64 * 1e6)
    }

    /// The drift's own bound, ppm: both estimates' errors over the time
    /// between them.
    pub fn drift_error_ppm(&self) -> Option<f64> {
        let a = self.after?;
        let span = a.at_ns.checked_sub(self.before.at_ns).filter(|&s| s > 0)?;
        Some((a.error_ns + self.before.error_ns) as f64 / span as f64 * 1e6)
    }

    /// The offset at `ours_ns` on our clock, ns: the line through the two
    /// estimates (or the one), and its error: between them, the larger of
    /// theirs (a mix of two intervals that each hold the offset).
    pub fn offset_at(&self, ours_ns: u64) -> (i64, u64) {
        let b = self.before;
        match (self.after, self.drift_ppm()) {
            (Some(a), Some(ppm)) => {
                let off = b.offset_ns as f64 + ppm * 1e-6 * (ours_ns as f64 - b.at_ns as f64);
                (off.round() as i64, b.error_ns.max(a.error_ns))
            }
            _ => (b.offset_ns, b.error_ns),
        }
    }

    /// A reading of the peer's clock as ours, ns: `peer = ours + offset(ours)`
    /// solved for ours, the drift's share taken at the peer's reading
    /// less the first estimate's offset (their difference is the drift
    /// over the offset's error, far under a nanosecond).
    pub fn to_ours(&self, peer_ns: u64) -> u64 {
        let first = (peer_ns as i128 - self.before.offset_ns as i128).max(0) as u64;
        let (off, _) = self.offset_at(first);
        (peer_ns as i128 - off as i128).max(0) as u64
    }

    /// A reading of our clock as the peer's, ns.
    pub fn to_peer(&self, ours_ns: u64) -> u64 {
        let (off, _) = self.offset_at(ours_ns);
        (ours_ns as i128 + off as i128).max(0) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn x(sent: u64, rx: u64, tx: u64, received: u64) -> Exchange {
        Exchange {
            sent_ns: sent,
            peer_rx_ns: rx,
            peer_tx_ns: tx,
            received_ns: received,
        }
    }

    /// A peer 5 s ahead over a symmetric path of 40 µs each way, 10 µs of
    /// turnaround: the offset to the nanosecond, its bound 40 µs.
    #[test]
    fn a_symmetric_exchange_finds_the_offset() {
        let off: u64 = 5_000_000_000;
        let e = x(1_000, 41_000 + off, 51_000 + off, 91_000);
        assert_eq!(e.offset_ns(), off as i128);
        assert_eq!(e.half_width_ns(), 40_000);
        let est = estimate(&[e]).unwrap();
        assert_eq!((est.offset_ns, est.error_ns), (off as i64, 40_000));
    }

    /// All the delay one way: the estimate is off by half the path, and
    /// the bound still holds it.
    #[test]
    fn an_asymmetric_path_stays_within_the_bound() {
        // 80 µs up, nothing down; true offset 0.
        let e = x(0, 80_000, 90_000, 90_000);
        let est = estimate(&[e]).unwrap();
        assert_eq!(est.offset_ns, 40_000);
        assert!(est.offset_ns.unsigned_abs() <= est.error_ns);
    }

    /// The fastest third are kept: queued exchanges (a ms late one way)
    /// move nothing.
    #[test]
    fn queued_exchanges_are_left_out() {
        let mut v = Vec::new();
        for i in 0..6u64 {
            let t = i * 1_000_000;
            v.push(x(t, t + 30_000, t + 35_000, t + 65_000));
        }
        for i in 6..18u64 {
            let t = i * 1_000_000;
            // Queued 900 µs on the way back.
            v.push(x(t, t + 30_000, t + 35_000, t + 965_000));
        }
        let est = estimate(&v).unwrap();
        assert_eq!((est.kept, est.exchanges), (6, 18));
        assert_eq!(est.offset_ns, 0);
        assert_eq!(est.error_ns, 30_000);
        assert_eq!(est.min_path_ns, 60_000);
    }

    /// Readings that cannot be true (a pong before its ping, a turnaround
    /// longer than the round trip) are dropped, and none left is None.
    #[test]
    fn impossible_readings_are_dropped() {
        assert_eq!(estimate(&[x(100, 0, 0, 50)]), None);
        assert_eq!(estimate(&[x(0, 10, 200, 100)]), None);
        assert_eq!(estimate(&[]), None);
        let est = estimate(&[x(100, 0, 0, 50), x(0, 10, 20, 30)]).unwrap();
        assert_eq!(est.exchanges, 1);
    }

    /// Exchanges recorded on one kernel (a thrum agent and its
    /// controller; one agent in a time namespace whose CLOCK_MONOTONIC
    /// runs 5 s ahead): each offset comes out within its bound of the
    /// truth, 0 and 5 s, and the bound is tens of microseconds.
    #[test]
    fn recorded_exchanges_in_a_time_namespace() {
        let est = estimate(RECORDED_AHEAD_5S).unwrap();
        let err = (est.offset_ns - 5_000_000_000).unsigned_abs();
        assert!(err <= est.error_ns, "{est:?}");
        assert!(est.error_ns < 1_000_000, "{est:?}");
        let est = estimate(RECORDED_SAME_CLOCK).unwrap();
        assert!(est.offset_ns.unsigned_abs() <= est.error_ns, "{est:?}");
    }

    /// Drift from two estimates, and a peer's reading mapped to ours and
    /// back through the line between them.
    #[test]
    fn drift_and_mapping() {
        let e = |at: u64, off: i64| Estimate {
            offset_ns: off,
            error_ns: 50_000,
            at_ns: at,
            min_path_ns: 100_000,
            kept: 8,
            exchanges: 24,
        };
        // 20 µs more over 10 s: 2 ppm.
        let m = ClockMap {
            before: e(1_000_000_000, 3_000_000_000),
            after: Some(e(11_000_000_000, 3_000_020_000)),
        };
        assert!((m.drift_ppm().unwrap() - 2.0).abs() < 1e-9);
        assert!((m.drift_error_ppm().unwrap() - 10.0).abs() < 1e-9);
        assert_eq!(m.offset_at(6_000_000_000), (3_000_010_000, 50_000));
        let ours = 6_000_000_000;
        let peer = m.to_peer(ours);
        assert_eq!(peer, 9_000_010_000);
        assert_eq!(m.to_ours(peer), ours);
        let alone = ClockMap {
            before: e(1_000, -7),
            after: None,
        };
        assert_eq!(alone.drift_ppm(), None);
        assert_eq!(alone.to_ours(993), 1_000);
    }

    /// Recorded by `thrum run --from` on one busy two-CPU kernel (load 17)
    /// over loopback: a burst of 24 to an agent on the controller's clock,
    /// and one to an agent in a time namespace 5 s ahead.
    const RECORDED_SAME_CLOCK: &[Exchange] = &[
        x(8065877459710, 8065877489885, 8065877568913, 8065877636544),
        x(8065877639438, 8065877661391, 8065877663284, 8065877692597),
        x(8065877692818, 8065877707429, 8065877709142, 8065877735711),
        x(8065877735862, 8065877749722, 8065877751375, 8065877777223),
        x(8065877777383, 8065877791504, 8065877793147, 8065877818915),
        x(8065877823742, 8065877838545, 8065877840137, 8065877866626),
        x(8065877866807, 8065877881418, 8065877883021, 8065877972234),
        x(8065877972524, 8065878058622, 8065878061056, 8065878656703),
        x(8065878657144, 8065878686217, 8065878688250, 8065880042647),
        x(8065880043408, 8065880077539, 8065880079862, 8065880173211),
        x(8065880173381, 8065880191348, 8065880192981, 8065881354580),
        x(8065881355732, 8065881460228, 8065881462161, 8065881556902),
        x(8065881557052, 8065881574698, 8065881576381, 8065881605294),
        x(8065881605434, 8065881692173, 8065881693846, 8065884952809),
        x(8065884952909, 8065884991256, 8065884993650, 8065885281528),
        x(8065885281649, 8065885305975, 8065885307968, 8065885369149),
        x(8065885369449, 8065885410070, 8065885411742, 8065885470640),
        x(8065885471291, 8065885512052, 8065885513704, 8065885571180),
        x(8065885571430, 8065885610438, 8065885612121, 8065885685220),
        x(8065885685310, 8065885702595, 8065885704218, 8065885805148),
        x(8065885805318, 8065885862844, 8065885864376, 8065885917766),
        x(8065885917866, 8065885982202, 8065885983854, 8065886061370),
        x(8065886061470, 8065886122731, 8065886124354, 8065891863089),
        x(8065891863620, 8065892061735, 8065892064459, 8065892149326),
    ];
    const RECORDED_AHEAD_5S: &[Exchange] = &[
        x(8065877905074, 8070877930281, 8070877932304, 8065878549053),
        x(8065878549884, 8070878610734, 8070878613248, 8065879914967),
        x(8065879916209, 8070879963389, 8070879966203, 8065880119201),
        x(8065880119481, 8070880140873, 8070880142556, 8065880221032),
        x(8065880221193, 8070880237827, 8070880239470, 8065880266751),
        x(8065880272219, 8070880287061, 8070880288683, 8065881387179),
        x(8065881387319, 8070881417835, 8070881420419, 8065881504994),
        x(8065881505275, 8070881525585, 8070881527248, 8065881626115),
        x(8065881626215, 8070881643351, 8070881644813, 8065881672514),
        x(8065881672874, 8070884816616, 8070884819841, 8065884917466),
        x(8065884919099, 8070885181870, 8070885183723, 8065885233397),
        x(8065885234048, 8070885334758, 8070885336370, 8065885391011),
        x(8065885391122, 8070885437581, 8070885439013, 8065885493314),
        x(8065885493424, 8070885538551, 8070885540174, 8065885592642),
        x(8065885592862, 8070885635906, 8070885637318, 8065885665270),
        x(8065885665510, 8070885729035, 8070885730557, 8065885759130),
        x(8065885759370, 8070885776516, 8070885778038, 8065885825498),
        x(8065885825759, 8070885839339, 8070885840731, 8065885896504),
        x(8065885896745, 8070885935472, 8070885937085, 8065885964295),
        x(8065885964415, 8070886008331, 8070886009753, 8065886040198),
        x(8065886040469, 8070886077283, 8070886078806, 8065886104834),
        x(8065886104985, 8070886148890, 8070886150422, 8065891708259),
        x(8065891711514, 8070891926874, 8070891932423, 8065892123187),
        x(8065892123728, 8070892608510, 8070892611073, 8065892661048),
    ];
}
