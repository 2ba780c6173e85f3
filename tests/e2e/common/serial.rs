//! The lock that keeps the tests that flood the CPUs apart from each
//! other and from the loopback tests that assume the CPUs keep up.

use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Held for the whole of each shaped-link test (modules `netns` and
/// `udp_loss`), of the CPU-heavy `hostile` and `soak` tests and of the
/// `agg` ramps (whose streams flood every CPU), so they run one at a time.
/// On two vCPUs the 1-byte tcp_rr
/// test keeps both CPUs busy, and that delays tbf's dequeue timer: once the
/// bucket is full (64 KB is 2.6 ms at 200 Mbit/s), late tokens are lost, and
/// a concurrent bulk test read 0.92 of the rate instead of the 0.955 it reads
/// alone (and iperf3 reads).
///
/// Loopback tests that assume the CPUs keep up (a lossless UDP path, rr
/// responses well within --rr-timeout) take the shared side with
/// [`not_beside_floods`]: they run beside each other, but never beside a
/// shaped-link test, whose floods starve a loopback receiver into real loss.
static ONE_AT_A_TIME: RwLock<()> = RwLock::new(());

pub fn one_at_a_time() -> RwLockWriteGuard<'static, ()> {
    // A failed test poisons the lock; the next one should still run.
    ONE_AT_A_TIME
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

pub fn not_beside_floods() -> RwLockReadGuard<'static, ()> {
    ONE_AT_A_TIME
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
