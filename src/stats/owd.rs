//! One interval's one-way record as the data path keeps it: the way up's
//! and the way down's histograms, and the few fastest of its exchanges,
//! which make the interval's own estimate of the server's clock offset
//! (`stats::track`). Every `--one-way` response is a clock exchange
//! (`t1` to `t4`, the server's turnaround `t3 − t2` known exactly), so
//! following the offset through a run costs a comparison per response
//! and no message of its own. A worker keeps a `stats::latency::OneWayPart`
//! for the open interval and hands it in with its latency at the
//! interval's end; the engine keeps each merged interval as a
//! `OneWayInterval`, sparse, until the run ends, because the correction
//! of an interval is known only once the estimates after it are.

use super::offset::Exchange;

/// Exchanges kept per interval: the fastest eight by path time (round
/// trip less turnaround).
pub const FASTEST: usize = 8;

/// The fastest exchanges offered, at most [`FASTEST`], in no order. A
/// fixed array: offering one never allocates, and once it is full costs
/// one comparison unless the exchange is faster than the slowest kept.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fastest {
    n: usize,
    /// The slowest kept, once full: the one a faster exchange replaces.
    worst: usize,
    worst_path: u64,
    x: [Exchange; FASTEST],
    /// Every sane exchange offered.
    offered: u64,
}

impl Fastest {
    /// Offer one exchange; readings that cannot be true are left out.
    #[inline]
    pub fn offer(&mut self, e: Exchange) {
        if !e.sane() {
            return;
        }
        self.offered += 1;
        if self.n < FASTEST {
            self.x[self.n] = e;
            self.n += 1;
            if self.n == FASTEST {
                self.find_worst();
            }
        } else if e.path_ns() < self.worst_path {
            self.x[self.worst] = e;
            self.find_worst();
        }
    }

    #[cold]
    fn find_worst(&mut self) {
        let (i, p) = self.x[..self.n]
            .iter()
            .enumerate()
            .map(|(i, e)| (i, e.path_ns()))
            .max_by_key(|&(_, p)| p)
            .unwrap_or((0, 0));
        (self.worst, self.worst_path) = (i, p);
    }

    /// Another worker's: the fastest of both.
    pub fn merge(&mut self, other: &Fastest) {
        let offered = self.offered + other.offered;
        for e in other.kept() {
            self.offer(*e);
        }
        self.offered = offered;
    }

    pub fn kept(&self) -> &[Exchange] {
        &self.x[..self.n]
    }

    /// Sane exchanges offered, kept or not.
    pub fn offered(&self) -> u64 {
        self.offered
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn x(sent: u64, path: u64) -> Exchange {
        Exchange {
            sent_ns: sent,
            peer_rx_ns: sent + path / 2,
            peer_tx_ns: sent + path / 2 + 1_000,
            received_ns: sent + path + 1_000,
        }
    }

    /// The eight fastest of many stay, whatever the order they came in,
    /// and two workers' merge to the eight fastest of both.
    #[test]
    fn the_fastest_stay() {
        let mut a = Fastest::default();
        for i in 0..100u64 {
            a.offer(x(i * 1_000_000, 10_000 + (i * 37) % 100 * 1_000));
        }
        let mut paths: Vec<u64> = a.kept().iter().map(|e| e.path_ns()).collect();
        paths.sort();
        assert_eq!(
            paths,
            (0..8).map(|i| 10_000 + i * 1_000).collect::<Vec<_>>()
        );
        let mut b = Fastest::default();
        b.offer(x(5, 1_000));
        b.offer(Exchange {
            sent_ns: 10,
            received_ns: 5,
            ..Exchange::default()
        });
        assert_eq!(b.offered(), 1);
        a.merge(&b);
        assert_eq!(a.offered(), 101);
        assert!(a.kept().iter().any(|e| e.path_ns() == 1_000));
        assert!(!a.kept().iter().any(|e| e.path_ns() == 17_000));
    }
}
