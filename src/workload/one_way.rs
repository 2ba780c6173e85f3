//! The one-way stamps (`--one-way`) of udp_rr and tcp_rr: where a request
//! and its response carry the clock readings that split the round trip
//! into its way up and its way down, recorded into the worker's
//! recorder. One layout for both tests: a udp_rr datagram and a tcp_rr
//! message start alike (tcp_rr's stream framing: [`super::rr_stamps`]).
//!
//! A request carries, after its 8-byte sequence number, the client's
//! CLOCK_MONOTONIC at its send (`t1`); the server's response echoes it and
//! adds its own CLOCK_MONOTONIC at the request's receipt (`t2`) and at the
//! response's send (`t3`); the client reads `t4` at the response's
//! receipt. With the server's offset θ (server − client, measured by
//! clock exchanges before the run: `stats::offset`) the way up is
//! `t2 − θ − t1` and the way down `t4 − t3 + θ`. CLOCK_MONOTONIC because
//! it is the clock the offset is measured on: kernel receive timestamps
//! (SO_TIMESTAMPNS, SO_TIMESTAMPING) are CLOCK_REALTIME, which may step
//! and is not the clock the exchanges compare, so both ends read the clock
//! in user space, the server once per receive batch and once per send
//! batch (a vDSO call, no syscall): the stamps include each end's time in
//! its own stack. Everything is written into the flows' existing buffers;
//! each response's two ways and four readings go to the worker's
//! recorder (`stats::owd`: per interval, the readings of the fastest
//! few refresh the offset through the run, `stats::track`).

use std::time::Instant;

use crate::stats::latency::LatencyRecorder;
use crate::stats::offset::Exchange;

/// A request's bytes with `--one-way`: its sequence number and `t1`.
pub const OWD_REQUEST: u64 = (RR_SEQ + 8) as u64;
/// A response's bytes with `--one-way`: its sequence number, `t1`
/// echoed, `t2` and `t3`.
pub const OWD_RESPONSE: u64 = (RR_SEQ + 24) as u64;
// The plan holds `--one-way`'s sizes to these.
const _: () = assert!(
    OWD_REQUEST == crate::plan::limits::ONE_WAY_REQUEST_BYTES
        && OWD_RESPONSE == crate::plan::limits::ONE_WAY_RESPONSE_BYTES
);

/// The front bytes a udp_rr sequence number takes (`udp::RR_SEQ`, which
/// udp_rr holds to it); tcp_rr's messages leave them unused, as TCP's
/// order pairs each response with its request.
pub const RR_SEQ: usize = 8;
const T1: usize = RR_SEQ;
const T2: usize = RR_SEQ + 8;
/// Where the departure stamp lies in a response: a tcp_rr server keeps
/// it once any of its bytes went out (`super::rr_stamps`).
pub(super) const T3: usize = RR_SEQ + 16;

/// A request's stamped front, and a response's.
pub(super) type RequestHead = [u8; OWD_REQUEST as usize];
pub(super) type ResponseHead = [u8; OWD_RESPONSE as usize];

#[inline]
fn put(d: &mut [u8], at: usize, ns: u64) {
    if let Some(s) = d.get_mut(at..at + 8) {
        s.copy_from_slice(&ns.to_be_bytes());
    }
}

#[inline]
fn get(d: &[u8], at: usize) -> Option<u64> {
    d.get(at..at + 8)
        .map(|s| u64::from_be_bytes(s.try_into().expect("8 bytes")))
}

/// Server: stamp a response `tx` to request `rx`, which arrived at
/// `t2` ns: `t1` echoed and `t2` (`t3` comes with [`stamp_departure`]).
#[inline]
pub(crate) fn stamp_arrival(tx: &mut [u8], rx: &[u8], t2: u64) {
    put(tx, T1, get(rx, T1).unwrap_or(0));
    put(tx, T2, t2);
}

/// Server: stamp a response about to leave at `t3` ns.
#[inline]
pub(crate) fn stamp_departure(tx: &mut [u8], t3: u64) {
    put(tx, T3, t3);
}

/// The client's one-way state: the offset it corrects by and the map
/// from its `Instant`s to CLOCK_MONOTONIC.
pub struct OneWay {
    /// The server's clock less ours, ns.
    offset_ns: i64,
    base: Instant,
    base_ns: u64,
    /// Transactions whose corrected way up or down came out below zero
    /// (the offset's error is more than that way's delay): recorded as 0.
    pub clamped: u64,
}

impl OneWay {
    pub fn new(offset_ns: i64) -> OneWay {
        // `Instant` reads CLOCK_MONOTONIC but hides its value: the base is
        // the middle of two readings around one `Instant` (tens of ns).
        let a = crate::clock::monotonic_ns();
        let base = Instant::now();
        let b = crate::clock::monotonic_ns();
        OneWay {
            offset_ns,
            base,
            base_ns: a + (b - a) / 2,
            clamped: 0,
        }
    }

    /// The offset it corrects by, ns (the server's clock less ours).
    pub fn offset_ns(&self) -> i64 {
        self.offset_ns
    }

    #[inline]
    fn ns(&self, t: Instant) -> u64 {
        self.base_ns + t.saturating_duration_since(self.base).as_nanos() as u64
    }

    /// Stamp a request `d` sent at `t` with `t1`.
    #[inline]
    pub(crate) fn stamp_request(&self, d: &mut [u8], t: Instant) {
        put(d, T1, self.ns(t));
    }

    /// Record a response `d` received at `now` (one that completed its
    /// transaction in the measurement window) into `rec`, the worker's;
    /// a response too short to carry the stamps records nothing.
    #[inline]
    pub(crate) fn record(&mut self, d: &[u8], now: Instant, rec: &mut LatencyRecorder) {
        let (Some(t1), Some(t2), Some(t3)) = (get(d, T1), get(d, T2), get(d, T3)) else {
            return;
        };
        let t4 = self.ns(now);
        let off = i128::from(self.offset_ns);
        let up = i128::from(t2) - off - i128::from(t1);
        let down = i128::from(t4) - i128::from(t3) + off;
        if up < 0 || down < 0 {
            self.clamped += 1;
        }
        let x = Exchange {
            sent_ns: t1,
            peer_rx_ns: t2,
            peer_tx_ns: t3,
            received_ns: t4,
        };
        rec.record_one_way(up.max(0) as u64, down.max(0) as u64, x);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::latency::LatencyHistogram;

    /// A server 5 s ahead, 30 ms up and 2 ms down, 1 ms in the server:
    /// the stamps travel in the buffers and come out as the two ways.
    #[test]
    fn the_stamps_split_the_round_trip() {
        use crate::stats::latency::IntervalTable;
        use std::sync::atomic::AtomicU32;
        use std::sync::{Arc, Mutex};
        let table = Arc::new(Mutex::new(IntervalTable::new(1, &[])));
        let mut rec = LatencyRecorder::new(Arc::new(AtomicU32::new(0)), table.clone());
        let ahead: u64 = 5_000_000_000;
        let mut o = OneWay::new(ahead as i64);
        let sent = o.base;
        let mut req = [0u8; OWD_REQUEST as usize];
        o.stamp_request(&mut req, sent);
        let t1 = o.base_ns;
        let mut resp = [0u8; OWD_RESPONSE as usize];
        stamp_arrival(&mut resp, &req, t1 + ahead + 30_000_000);
        stamp_departure(&mut resp, t1 + ahead + 31_000_000);
        let back = sent + std::time::Duration::from_millis(33);
        o.record(&resp, back, &mut rec);
        assert_eq!(o.clamped, 0);
        // An offset overestimated by 40 ms: the way up is clamped and counted.
        let mut wrong = OneWay::new(ahead as i64 + 40_000_000);
        wrong.base = o.base;
        wrong.base_ns = o.base_ns;
        let mut elsewhere = LatencyRecorder::new(
            Arc::new(AtomicU32::new(0)),
            Arc::new(Mutex::new(IntervalTable::new(1, &[]))),
        );
        wrong.record(&resp, back, &mut elsewhere);
        assert_eq!(wrong.clamped, 1);
        // Too short to carry the stamps: nothing.
        o.record(&resp[..OWD_RESPONSE as usize - 1], back, &mut rec);
        rec.finish();
        let iv = table.lock().unwrap().take_one_way().remove(&0).unwrap();
        let (mut up, mut down) = (LatencyHistogram::new(), LatencyHistogram::new());
        up.merge_sparse(&iv.up);
        down.merge_sparse(&iv.down);
        assert_eq!(up.count(), 1);
        assert!(
            (up.quantile(0.0) as i64 - 30_000_000).abs() < 50_000,
            "{:?}",
            up.summary()
        );
        assert!(
            (down.quantile(0.0) as i64 - 2_000_000).abs() < 5_000,
            "{:?}",
            down.summary()
        );
        // The readings, raw: the offset to within the exchange's bound.
        let x = iv.fastest.kept()[0];
        assert!((x.offset_ns() - ahead as i128).unsigned_abs() <= x.half_width_ns() as u128);
    }
}
