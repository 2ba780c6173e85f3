//! How a udp_rr response finds its transaction.
//!
//! A request carries the low bytes of its transaction's sequence number,
//! as many as request and response both have (8 at most,
//! [`super::header::rr_seq_bytes`]), and the server echoes them at the
//! front of its response. Matched oldest first instead, one lost datagram
//! charged every later response to the transaction before its own while
//! more than one was in flight (open loop, burst mode): a 50/s probe read
//! its 20 ms gap plus the round trip for the rest of the run, and the lost
//! transaction's entry stayed behind for good, never expiring.
//!
//! A `k`-byte number tells 256^k transactions apart. A new request skips a
//! number still in flight (a lost one waits out its timeout while the
//! numbers come round); a closed loop's burst wider than that is matched
//! oldest first, and so, open loop, are transactions beyond that many in
//! flight that share a number with one (a queue that long comes of a
//! stall; holding requests back for it would stretch the stall). So is a
//! flow against a server that echoes only 8-byte numbers (an older thrum,
//! whose hello lacks [`crate::control::features::RR_SHORT_SEQ`]), where
//! the plan says `rr_in_order`. [`matching_note`] is what the result says
//! of each.

use super::header::{RR_SEQ, rr_seq_bytes};
use crate::plan::{TestKind, TestPlan};

/// How many transactions a `k`-byte sequence number tells apart (8
/// bytes: all, said as u64::MAX).
pub(super) fn distinct(k: usize) -> u64 {
    if k >= RR_SEQ { u64::MAX } else { 1 << (8 * k) }
}

/// The bits of a sequence number that `k` bytes carry.
pub(super) fn seq_mask(k: usize) -> u64 {
    if k >= RR_SEQ {
        u64::MAX
    } else {
        (1 << (8 * k)) - 1
    }
}

/// Bytes of sequence number a client of `request` and `response` bytes
/// carries with `bound` transactions in flight at most (a closed loop's;
/// None open loop), 0 where it matches responses oldest first:
/// `in_order` (the server does not echo short numbers), or a closed
/// loop's burst wider than the number tells apart.
pub(super) fn seq_bytes_for(
    request: u64,
    response: u64,
    bound: Option<u64>,
    in_order: bool,
) -> usize {
    let k = rr_seq_bytes(request, response);
    if in_order && k < RR_SEQ || bound.is_some_and(|b| b > distinct(k)) {
        return 0;
    }
    k
}

/// Why a udp_rr client of plan `p` may not match each response to its
/// own request, as the result's warning says it (None where it does):
/// the server echoes no short number (`echoes` false), a closed loop's
/// burst is wider than the number tells apart, or open loop's schedule
/// could have more in flight than that (those sharing a number are
/// matched oldest first; a queue that long comes of a stall, and holding
/// requests back for it would stretch the stall).
pub fn matching_note(p: &TestPlan, echoes: bool) -> Option<String> {
    if p.test != TestKind::UdpRr {
        return None;
    }
    let k = rr_seq_bytes(p.request_bytes, p.response_bytes);
    if k == RR_SEQ {
        return None;
    }
    let n = distinct(k);
    let lift = format!("requests and responses of {} bytes or more (-r)", k + 1);
    let after = "so after a lost datagram a response may be charged to another transaction";
    if !echoes {
        return Some(format!(
            "udp_rr: the server echoes no sequence number shorter than 8 bytes (an older thrum): responses are matched to requests oldest first, {after} (with more than one in flight); upgrade the server, or use requests and responses of 8 bytes or more (-r 8,8)"
        ));
    }
    match p.offered_per_s {
        None if u64::from(p.burst) + 1 > n => Some(format!(
            "udp_rr: --burst {} keeps {} transactions in flight, more than the {n} a {k}-byte sequence number tells apart: responses are matched to requests oldest first, {after}; use {lift}",
            p.burst,
            u64::from(p.burst) + 1
        )),
        None => None,
        Some(rate) => {
            // Every transaction leaves within the timeout (the expiry scan
            // runs up to a quarter of it late): at most this many are out.
            let reach = rate as f64 * p.rr_timeout_ns as f64 * 1.25e-9;
            (u64::from(p.max_inflight) > n && reach >= n as f64).then(|| {
                format!(
                    "udp_rr: --max-inflight {} at --rate {rate} may hold more transactions in flight than the {n} a {k}-byte sequence number tells apart: beyond that, those sharing a number are matched oldest first, {after}; use {lift}",
                    p.max_inflight
                )
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the result says of each way a client matches: nothing where 8
    /// bytes travel or a short number tells the in-flight apart; in order
    /// against a server that echoes no short number, or a burst wider than
    /// the number; open loop where its schedule could have more in flight.
    #[test]
    fn the_matching_note_says_when_responses_may_be_mismatched() {
        let plan = |req: u64, burst: u32, rate: Option<u64>| {
            let mut p = TestPlan::new(TestKind::UdpRr);
            p.request_bytes = req;
            p.response_bytes = 64;
            p.burst = burst;
            p.offered_per_s = rate;
            p
        };
        let said = |n: Option<String>| n.is_some();
        assert_eq!(matching_note(&plan(8, 1000, None), false), None);
        // 256 in flight: 256 numbers, each its own.
        assert_eq!(matching_note(&plan(1, 255, None), true), None);
        assert!(said(matching_note(&plan(1, 0, None), false)));
        assert!(said(matching_note(&plan(1, 256, None), true)));
        assert_eq!(matching_note(&plan(2, 256, None), true), None);
        // 50/s with a 50 ms timeout: about 3 out at once, of 256.
        assert_eq!(matching_note(&plan(1, 0, Some(50)), true), None);
        let crowded = matching_note(&plan(1, 0, Some(10_000)), true).unwrap();
        assert!(
            crowded.contains("the 256 a 1-byte") && crowded.contains("-r"),
            "{crowded}"
        );
        assert_eq!(matching_note(&TestPlan::new(TestKind::TcpRr), false), None);
    }
}
