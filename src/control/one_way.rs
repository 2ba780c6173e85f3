//! The client's side of `--one-way` around a session: the server's clock
//! offset before the flows start (which they correct their stamps by)
//! and after the run (for the drift and the bound), and the flows'
//! histograms gathered into the raw record. The stamps are
//! `workload::one_way`'s; the figures `analysis::one_way`'s.
//!
//! Before the run the pings go on the session's own control connection,
//! where the server answers them until the spec comes; after it, on a
//! connection of their own (the session's ends with the final report).
//! Where both ends read one kernel's CLOCK_MONOTONIC (the same boot, as
//! namespaces on one host do) their offset is known exactly from the
//! hellos ([`crate::clock::MonotonicId`]) and the exchanges only check it.

use std::collections::BTreeMap;
use std::net::TcpStream;

use anyhow::{Result, anyhow};

use super::clocks::{EXCHANGES, ping};
use super::proto::Hello;
use crate::analysis::one_way::{ClockMethod, OneWayRecord};
use crate::engine::EngineOutcome;
use crate::stats::offset::{ClockMap, Estimate, estimate};

/// Slack for the check of an exact offset against the exchanges' interval,
/// ns: the estimate's mean is rounded to the nanosecond.
const ROUNDING_NS: u64 = 1_000;

/// The server's clock before the run, on `ctrl` before the spec;
/// `exchanges_only` (`--clock-method exchanges`): by the exchanges even
/// on one kernel.
pub(super) fn before(
    ctrl: &mut TcpStream,
    label: &str,
    hello: &Hello,
    exchanges_only: bool,
) -> Result<(Estimate, ClockMethod)> {
    let est = burst(ctrl, label)?;
    Ok(match exact(hello, &est).filter(|_| !exchanges_only) {
        Some(e) => (e, ClockMethod::SameKernel),
        None => (est, ClockMethod::Exchanges),
    })
}

/// The server's clock after the run, on `conn`, a connection of its own
/// (the session's hello and key done); None where it cannot be had (the
/// run's figures stand, with the one bound).
pub(super) fn after(
    conn: Result<(TcpStream, Hello)>,
    label: &str,
    exchanges_only: bool,
) -> Option<Estimate> {
    let (mut ctrl, hello) = conn.ok()?;
    let est = burst(&mut ctrl, label).ok()?;
    Some(
        exact(&hello, &est)
            .filter(|_| !exchanges_only)
            .unwrap_or(est),
    )
}

fn burst(ctrl: &mut TcpStream, label: &str) -> Result<Estimate> {
    let b = ping(ctrl, label, EXCHANGES)?;
    estimate(&b.exchanges)
        .ok_or_else(|| anyhow!("--one-way: the clock exchanges with {label} gave no estimate"))
}

/// The exact offset where the server's hello says it reads our kernel's
/// clock: the difference of the time namespaces' offsets, with no error,
/// if it lies in the interval the exchanges hold it to (it must; a
/// misread namespace would not).
fn exact(hello: &Hello, est: &Estimate) -> Option<Estimate> {
    let theirs = hello.clock_id.as_ref()?;
    let ours = crate::clock::monotonic_id()?;
    if theirs.boot_id != ours.boot_id {
        return None;
    }
    let offset_ns = theirs.offset_ns - ours.offset_ns;
    ((offset_ns - est.offset_ns).unsigned_abs() <= est.error_ns + ROUNDING_NS).then_some(Estimate {
        offset_ns,
        error_ns: 0,
        ..*est
    })
}

/// The raw record as the run starts: the clock before it, no interval yet.
pub(super) fn record(before: (Estimate, ClockMethod), interval_ns: u64) -> OneWayRecord {
    OneWayRecord {
        intervals: BTreeMap::new(),
        clamped: 0,
        clock: ClockMap {
            before: before.0,
            after: None,
        },
        method: before.1,
        interval_ns,
        settled: None,
    }
}

/// The run is over: every interval the engines kept, the flows' count of
/// ways below zero, and the clock after the run.
pub(super) fn finish(r: &mut OneWayRecord, outs: &[EngineOutcome], after: Option<Estimate>) {
    for o in outs {
        r.intervals
            .extend(o.interval_one_way.iter().map(|(&k, iv)| (k, iv.clone())));
    }
    r.clamped = outs
        .iter()
        .flat_map(|o| &o.flows)
        .filter_map(|f| f.one_way())
        .map(|w| w.clamped)
        .sum();
    r.clock.after = after;
    r.settle();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn est(offset_ns: i64, error_ns: u64) -> Estimate {
        Estimate {
            offset_ns,
            error_ns,
            at_ns: 0,
            min_path_ns: 2 * error_ns,
            kept: 8,
            exchanges: 24,
        }
    }

    /// A server on our kernel: its offset is exact, bound 0, when it lies
    /// in the exchanges' interval (a standing queue one way moved their
    /// estimate by half of it, within their bound); another boot, or an
    /// offset outside the interval, leaves the exchanges'.
    #[test]
    fn one_kernel_gives_the_exact_offset() {
        let ours = crate::clock::monotonic_id().unwrap();
        let hello = |id: Option<crate::clock::MonotonicId>| Hello {
            clock_id: id,
            ..Hello::ours()
        };
        let same = hello(Some(ours.clone()));
        let queued = est(50_000_000, 50_040_000);
        let e = exact(&same, &queued).unwrap();
        assert_eq!((e.offset_ns, e.error_ns), (0, 0));
        assert_eq!(exact(&same, &est(5_000_000, 40_000)), None);
        let other = crate::clock::MonotonicId {
            boot_id: "another boot".into(),
            ..ours
        };
        assert_eq!(exact(&hello(Some(other)), &queued), None);
        assert_eq!(exact(&hello(None), &queued), None);
    }
}
