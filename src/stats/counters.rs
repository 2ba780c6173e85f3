//! Per-flow counters written by one worker thread and read by the sampler.
//!
//! Each counter has a single writer, so an increment is a relaxed load and a
//! relaxed store: no locked read-modify-write on the hot path, and the sampler
//! on another thread still reads whole values (aligned 64-bit loads). Each
//! flow's counters sit on their own cache line so flows on different threads
//! do not false-share.

use std::ops::{AddAssign, Sub};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use serde::{Deserialize, Serialize};

/// A point-in-time copy of one flow's counters (or a sum of them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub transactions: u64,
}

impl AddAssign for Counts {
    fn add_assign(&mut self, o: Counts) {
        self.bytes_sent += o.bytes_sent;
        self.bytes_received += o.bytes_received;
        self.transactions += o.transactions;
    }
}

impl Sub for Counts {
    type Output = Counts;
    /// Difference of two snapshots of monotonically growing counters.
    fn sub(self, o: Counts) -> Counts {
        Counts {
            bytes_sent: self.bytes_sent.saturating_sub(o.bytes_sent),
            bytes_received: self.bytes_received.saturating_sub(o.bytes_received),
            transactions: self.transactions.saturating_sub(o.transactions),
        }
    }
}

impl Counts {
    pub fn sum<'a>(it: impl IntoIterator<Item = &'a Counts>) -> Counts {
        let mut t = Counts::default();
        for c in it {
            t += *c;
        }
        t
    }
}

/// The live counters of one flow.
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct FlowCounters {
    bytes_sent: AtomicU64,
    bytes_received: AtomicU64,
    transactions: AtomicU64,
}

#[inline]
fn bump(a: &AtomicU64, n: u64) {
    // Single writer: load + store is exact and avoids a locked instruction.
    a.store(a.load(Relaxed).wrapping_add(n), Relaxed);
}

impl FlowCounters {
    #[inline]
    pub fn add_sent(&self, n: u64) {
        bump(&self.bytes_sent, n);
    }
    #[inline]
    pub fn add_received(&self, n: u64) {
        bump(&self.bytes_received, n);
    }
    #[inline]
    pub fn add_transactions(&self, n: u64) {
        bump(&self.transactions, n);
    }

    pub fn snapshot(&self) -> Counts {
        Counts {
            bytes_sent: self.bytes_sent.load(Relaxed),
            bytes_received: self.bytes_received.load(Relaxed),
            transactions: self.transactions.load(Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn counts_add_and_subtract() {
        let c = FlowCounters::default();
        c.add_sent(10);
        c.add_received(3);
        c.add_transactions(2);
        let a = c.snapshot();
        c.add_sent(5);
        assert_eq!(
            c.snapshot() - a,
            Counts {
                bytes_sent: 5,
                ..Default::default()
            }
        );
        assert_eq!(std::mem::align_of::<FlowCounters>(), 64);
    }

    proptest! {
        /// Interval deltas of a growing counter add up to the whole.
        #[test]
        fn deltas_sum_to_total(steps in proptest::collection::vec((0u64..1<<40, 0u64..1<<20), 1..50)) {
            let c = FlowCounters::default();
            let mut snaps = vec![c.snapshot()];
            for (b, t) in &steps {
                c.add_received(*b);
                c.add_transactions(*t);
                snaps.push(c.snapshot());
            }
            let deltas: Vec<Counts> = snaps.windows(2).map(|w| w[1] - w[0]).collect();
            prop_assert_eq!(Counts::sum(&deltas), c.snapshot());
        }
    }
}
