//! The one-way stamps (`--one-way`) of udp_rr and tcp_rr: where a request
//! and its response carry the clock readings that split the round trip
//! into its way up and its way down, and the client's two histograms of
//! them. One layout for both tests: a udp_rr datagram and a tcp_rr
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
//! the histograms are the flow's, made before it starts.

use std::time::Instant;

use crate::stats::latency::{LatencyHistogram, SparseHistogram};

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

/// The client's one-way state: the offset it corrects by, the map from
/// its `Instant`s to CLOCK_MONOTONIC, and the histograms.
pub struct OneWay {
    /// The server's clock less ours, ns.
    offset_ns: i64,
    base: Instant,
    base_ns: u64,
    /// The way up and the way down, ns, measurement window only.
    pub up: LatencyHistogram,
    pub down: LatencyHistogram,
    /// Transactions whose corrected way up or down came out below zero
    /// (the offset's error is more than that way's delay): recorded as 0.
    pub clamped: u64,
    /// A phased mix's probe: the two ways per interval as well, so that
    /// its idle and loaded phases each have their own (None otherwise: a
    /// long single test would keep a histogram a second for nothing).
    split: Option<Box<Split>>,
}

/// The two ways per interval: the current interval's histograms, and each
/// earlier one's kept compactly when the interval changes (once an
/// interval, never per transaction), as the engine keeps a probe's.
struct Split {
    at: u32,
    up: LatencyHistogram,
    down: LatencyHistogram,
    done: Vec<Interval>,
}

/// One interval's ways up and down: (interval index, up, down).
pub type Interval = (u32, SparseHistogram, SparseHistogram);

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
            up: LatencyHistogram::new(),
            down: LatencyHistogram::new(),
            clamped: 0,
            split: None,
        }
    }

    /// Keep the two ways per interval too (a phased mix's probe).
    pub fn per_interval(mut self) -> OneWay {
        self.split = Some(Box::new(Split {
            at: 0,
            up: LatencyHistogram::new(),
            down: LatencyHistogram::new(),
            done: Vec::new(),
        }));
        self
    }

    /// Each interval's ways up and down, oldest first, the current one
    /// last; empty unless kept ([`OneWay::per_interval`]).
    pub fn intervals(&self) -> Vec<Interval> {
        let Some(s) = &self.split else {
            return Vec::new();
        };
        let mut v = s.done.clone();
        if s.up.count() > 0 {
            v.push((
                s.at,
                SparseHistogram::of(&s.up),
                SparseHistogram::of(&s.down),
            ));
        }
        v
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
    /// transaction in the measurement window) in interval `interval` (the
    /// engine's, as its latency is); a response too short to carry the
    /// stamps records nothing.
    #[inline]
    pub(crate) fn record(&mut self, d: &[u8], now: Instant, interval: u32) {
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
        let (up, down) = (up.max(0) as u64, down.max(0) as u64);
        self.up.record(up);
        self.down.record(down);
        if let Some(s) = self.split.as_deref_mut() {
            if s.at != interval {
                s.advance(interval);
            }
            s.up.record(up);
            s.down.record(down);
        }
    }
}

impl Split {
    /// Keep the interval that ended, and start `interval`.
    #[cold]
    fn advance(&mut self, interval: u32) {
        if self.up.count() > 0 {
            self.done.push((
                self.at,
                SparseHistogram::of(&self.up),
                SparseHistogram::of(&self.down),
            ));
            self.up.reset();
            self.down.reset();
        }
        self.at = interval;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server 5 s ahead, 30 ms up and 2 ms down, 1 ms in the server:
    /// the stamps travel in the buffers and come out as the two ways.
    #[test]
    fn the_stamps_split_the_round_trip() {
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
        o.record(&resp, back, 0);
        assert!(
            (o.up.summary().unwrap().p50 as i64 - 30_000_000).abs() < 50_000,
            "{:?}",
            o.up.summary()
        );
        assert!(
            (o.down.summary().unwrap().p50 as i64 - 2_000_000).abs() < 5_000,
            "{:?}",
            o.down.summary()
        );
        assert_eq!(o.clamped, 0);
        // An offset overestimated by 40 ms: the way up is clamped and counted.
        let mut wrong = OneWay::new(ahead as i64 + 40_000_000);
        wrong.base = o.base;
        wrong.base_ns = o.base_ns;
        wrong.record(&resp, back, 0);
        assert_eq!(wrong.clamped, 1);
        // Too short to carry the stamps: nothing.
        o.record(&resp[..OWD_RESPONSE as usize - 1], back, 0);
        assert_eq!(o.up.count(), 1);
        assert!(o.intervals().is_empty(), "not kept unless asked");
    }

    /// A phased mix's probe keeps each interval's ways apart (the current
    /// one included), every transaction also in the window's histograms.
    #[test]
    fn per_interval_the_ways_are_kept_by_interval() {
        let mut o = OneWay::new(0).per_interval();
        let sent = o.base;
        let mut req = [0u8; OWD_REQUEST as usize];
        o.stamp_request(&mut req, sent);
        let t1 = o.base_ns;
        let mut resp = [0u8; OWD_RESPONSE as usize];
        stamp_arrival(&mut resp, &req, t1 + 1_000_000);
        stamp_departure(&mut resp, t1 + 1_000_000);
        let back = sent + std::time::Duration::from_millis(2);
        for interval in [3, 3, 4, 6] {
            o.record(&resp, back, interval);
        }
        let kept: Vec<_> = o
            .intervals()
            .iter()
            .map(|(i, u, d)| (*i, u.count(), d.count()))
            .collect();
        assert_eq!(kept, [(3, 2, 2), (4, 1, 1), (6, 1, 1)]);
        assert_eq!(o.up.count(), 4);
    }
}
