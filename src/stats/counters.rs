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
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Counts {
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub transactions: u64,
    /// UDP: datagrams handed to the kernel.
    pub datagrams_sent: u64,
    /// UDP: distinct datagrams received (duplicates not included).
    pub datagrams_received: u64,
    /// udp_stream receiver: datagrams missing when a later one arrived (a gap
    /// in the sequence; the final total is the exact sent - received).
    /// udp_rr client: transactions whose response did not come within --rr-timeout.
    pub lost: u64,
    /// udp_stream receiver: datagrams that arrived after a later one.
    pub reordered: u64,
    /// udp_stream receiver: datagrams received more than once.
    pub duplicates: u64,
    /// Open-loop request/response: requests sent more than one schedule gap
    /// after their intended start (absent from an older peer's counts: 0).
    #[serde(default)]
    pub late: u64,
    /// Open-loop request/response: the time integral of the transactions in
    /// the system (intended start passed, response not in), ns × transactions;
    /// over a window's length it is the mean number in flight.
    #[serde(default)]
    pub in_flight_ns: u64,
    /// udp_stream receiver: the flow's RFC 3550 interarrival jitter at
    /// the snapshot, ns. A level, not a count: a difference of two
    /// snapshots keeps the later one's, a sum the largest.
    #[serde(default)]
    pub jitter_ns: u64,
}

impl AddAssign for Counts {
    fn add_assign(&mut self, o: Counts) {
        self.bytes_sent += o.bytes_sent;
        self.bytes_received += o.bytes_received;
        self.transactions += o.transactions;
        self.datagrams_sent += o.datagrams_sent;
        self.datagrams_received += o.datagrams_received;
        self.lost += o.lost;
        self.reordered += o.reordered;
        self.duplicates += o.duplicates;
        self.late += o.late;
        self.in_flight_ns += o.in_flight_ns;
        self.jitter_ns = self.jitter_ns.max(o.jitter_ns);
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
            datagrams_sent: self.datagrams_sent.saturating_sub(o.datagrams_sent),
            datagrams_received: self.datagrams_received.saturating_sub(o.datagrams_received),
            lost: self.lost.saturating_sub(o.lost),
            reordered: self.reordered.saturating_sub(o.reordered),
            duplicates: self.duplicates.saturating_sub(o.duplicates),
            late: self.late.saturating_sub(o.late),
            in_flight_ns: self.in_flight_ns.saturating_sub(o.in_flight_ns),
            jitter_ns: self.jitter_ns,
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
    datagrams_sent: AtomicU64,
    datagrams_received: AtomicU64,
    lost: AtomicU64,
    reordered: AtomicU64,
    duplicates: AtomicU64,
    late: AtomicU64,
    in_flight_ns: AtomicU64,
    jitter_ns: AtomicU64,
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
    #[inline]
    pub fn add_datagrams_sent(&self, n: u64) {
        bump(&self.datagrams_sent, n);
    }
    #[inline]
    pub fn add_datagrams_received(&self, n: u64) {
        bump(&self.datagrams_received, n);
    }
    #[inline]
    pub fn add_lost(&self, n: u64) {
        bump(&self.lost, n);
    }
    #[inline]
    pub fn add_reordered(&self, n: u64) {
        bump(&self.reordered, n);
    }
    #[inline]
    pub fn add_duplicates(&self, n: u64) {
        bump(&self.duplicates, n);
    }
    #[inline]
    pub fn add_late(&self, n: u64) {
        bump(&self.late, n);
    }
    #[inline]
    pub fn add_in_flight_ns(&self, n: u64) {
        bump(&self.in_flight_ns, n);
    }

    /// The flow's jitter now (a level: stored, not added).
    #[inline]
    pub fn set_jitter(&self, ns: u64) {
        self.jitter_ns.store(ns, Relaxed);
    }

    pub fn snapshot(&self) -> Counts {
        Counts {
            bytes_sent: self.bytes_sent.load(Relaxed),
            bytes_received: self.bytes_received.load(Relaxed),
            transactions: self.transactions.load(Relaxed),
            datagrams_sent: self.datagrams_sent.load(Relaxed),
            datagrams_received: self.datagrams_received.load(Relaxed),
            lost: self.lost.load(Relaxed),
            reordered: self.reordered.load(Relaxed),
            duplicates: self.duplicates.load(Relaxed),
            late: self.late.load(Relaxed),
            in_flight_ns: self.in_flight_ns.load(Relaxed),
            jitter_ns: self.jitter_ns.load(Relaxed),
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
