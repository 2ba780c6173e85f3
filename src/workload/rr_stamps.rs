//! tcp_rr's one-way stamps (`--one-way`) in a byte stream: the same fronts
//! udp_rr's datagrams carry ([`super::one_way`]), laid into each message
//! where it starts in the stream and read back from wherever the segments
//! split it.
//!
//! A TCP send or receive call moves bytes, not messages: one call may carry
//! many messages, or part of one, and a send may stop mid-message when the
//! socket buffer fills. So a sender lays the front of every message a send
//! call carries into its buffer at that message's offset (the rest of a
//! message is padding, whatever the buffer last held), and a receiver
//! gathers each message's front from the chunks it arrives in. The stamps
//! still take one clock reading per call: the client's send time is the
//! reading tcp_rr already takes for its latency (the request's first byte
//! handed to the kernel), its arrival time the one its receive takes; the
//! server reads the clock once per receive that completes a request (`t2`
//! for every request it completes) and once per send (`t3`). TCP keeps
//! order, so the server answers the requests in turn and the client's
//! responses complete its transactions oldest first: the fronts need no
//! sequence number to pair, and a burst's stamps still pair with their own
//! requests. Nothing here allocates after the flow is built (the queues
//! are made for the flow's transactions in flight, and grow only if an
//! open loop puts more in flight than that).

use std::collections::VecDeque;
use std::time::Instant;

use super::one_way::{
    OWD_REQUEST, OWD_RESPONSE, OneWay, RequestHead, ResponseHead, T3, stamp_arrival,
    stamp_departure,
};
use crate::clock::monotonic_ns;

/// Gathers the front `H` bytes of each message of a received stream.
struct Fronts<const H: usize> {
    cur: [u8; H],
}

impl<const H: usize> Fronts<H> {
    fn new() -> Self {
        Fronts { cur: [0; H] }
    }

    /// `chunk` arrived `at` bytes into a message of `len` bytes (at least
    /// `H`: the plan holds `--one-way`'s sizes to it): hand `done` the
    /// front of every message it completes, oldest first.
    #[inline]
    fn scan(&mut self, chunk: &[u8], at: u64, len: u64, mut done: impl FnMut(&[u8; H])) {
        let len = len as usize;
        let (mut pos, mut i) = (at as usize, 0);
        while i < chunk.len() {
            if pos < H {
                let k = (H - pos).min(chunk.len() - i);
                self.cur[pos..pos + k].copy_from_slice(&chunk[i..i + k]);
            }
            let step = (len - pos).min(chunk.len() - i);
            i += step;
            pos += step;
            if pos == len {
                done(&self.cur);
                pos = 0;
            }
        }
    }
}

/// Lay into `buf`, a send's bytes starting `at` bytes into a message of
/// `len` bytes, the front of every message it carries: `front(i)` is the
/// `i`th's (0: the one `buf` starts in). A front cut by the buffer's end
/// is laid as far as it goes.
#[inline]
fn lay<const H: usize>(buf: &mut [u8], at: u64, len: u64, mut front: impl FnMut(usize) -> [u8; H]) {
    let (at, len) = (at as usize, len as usize);
    // Where message `i`'s front starts in `buf`, and how much of it is behind.
    let (mut start, mut skip, mut i) = (0usize, at, 0usize);
    while start < buf.len() {
        if skip < H {
            let f = front(i);
            let k = (H - skip).min(buf.len() - start);
            buf[start..start + k].copy_from_slice(&f[skip..skip + k]);
        }
        start += len - skip;
        skip = 0;
        i += 1;
    }
}

/// The messages of `len` bytes a send of `n` bytes starting `at` bytes into
/// one touches.
fn touched(at: u64, n: u64, len: u64) -> usize {
    (at + n).div_ceil(len) as usize
}

/// The tcp_rr client's stamps: each request's send time laid into it, each
/// response's front gathered, and the two ways recorded as its
/// transaction completes.
pub(super) struct ClientStamps {
    pub(super) one_way: OneWay,
    fronts: Fronts<{ OWD_RESPONSE as usize }>,
    /// Responses the last chunk completed, oldest first, not yet taken by
    /// their transactions.
    arrived: VecDeque<ResponseHead>,
}

impl ClientStamps {
    /// Stamps recorded into `one_way` (which corrects them by its offset),
    /// for `in_flight` transactions at a time.
    pub(super) fn new(one_way: OneWay, in_flight: u64) -> ClientStamps {
        ClientStamps {
            one_way,
            fronts: Fronts::new(),
            arrived: VecDeque::with_capacity(in_flight.min(1024) as usize),
        }
    }

    /// Before a send of `buf`, `at` bytes into a request of `len` bytes:
    /// each request it carries is stamped with its send time, `begun` for
    /// the one an earlier send began (what its latency runs from), `t` for
    /// the rest.
    #[inline]
    pub(super) fn lay(&self, buf: &mut [u8], at: u64, len: u64, begun: Instant, t: Instant) {
        let o = &self.one_way;
        lay(buf, at, len, |i| {
            let mut f: RequestHead = [0; OWD_REQUEST as usize];
            o.stamp_request(&mut f, if i == 0 && at > 0 { begun } else { t });
            f
        });
    }

    /// `chunk` of responses arrived, `at` bytes into one of `len` bytes.
    #[inline]
    pub(super) fn scan(&mut self, chunk: &[u8], at: u64, len: u64) {
        let arrived = &mut self.arrived;
        self.fronts.scan(chunk, at, len, |f| arrived.push_back(*f));
    }

    /// The oldest transaction completed at `now`: record its two ways
    /// into `rec`, the worker's, if `measuring`.
    #[inline]
    pub(super) fn complete(
        &mut self,
        now: Instant,
        measuring: bool,
        rec: &mut crate::stats::latency::LatencyRecorder,
    ) {
        if let Some(f) = self.arrived.pop_front()
            && measuring
        {
            self.one_way.record(&f, now, rec);
        }
    }

    /// Every completed transaction took its response: any front left
    /// belongs to none (a response beyond the transactions in flight).
    #[inline]
    pub(super) fn settle(&mut self) {
        self.arrived.clear();
    }
}

/// The tcp_rr server's stamps: each request's send time echoed, with its
/// arrival and its response's departure, in the response's front.
pub(super) struct ServerStamps {
    fronts: Fronts<{ OWD_REQUEST as usize }>,
    /// The responses owed, oldest first (the first maybe partly sent), each
    /// front stamped with its request's `t1` and arrival.
    owed: VecDeque<ResponseHead>,
    /// Bytes of the oldest owed response already sent.
    sent_at: u64,
}

impl ServerStamps {
    pub(super) fn new(in_flight: u64) -> ServerStamps {
        ServerStamps {
            fronts: Fronts::new(),
            owed: VecDeque::with_capacity(in_flight.min(1024) as usize),
            sent_at: 0,
        }
    }

    /// `chunk` of requests arrived, `at` bytes into one of `len` bytes:
    /// every request it completes arrived now (one clock reading).
    #[inline]
    pub(super) fn scan(&mut self, chunk: &[u8], at: u64, len: u64) {
        if at + (chunk.len() as u64) < len {
            return self.fronts.scan(chunk, at, len, |_| {});
        }
        let t2 = monotonic_ns();
        let owed = &mut self.owed;
        self.fronts.scan(chunk, at, len, |req| {
            let mut f: ResponseHead = [0; OWD_RESPONSE as usize];
            stamp_arrival(&mut f, req, t2);
            owed.push_back(f);
        });
    }

    /// Before a send of `buf`, responses of `len` bytes: stamp each it
    /// carries with its departure now (one clock reading) and lay their
    /// fronts. A response whose departure stamp already began to go out
    /// keeps it, or its two halves would be two readings.
    #[inline]
    pub(super) fn lay(&mut self, buf: &mut [u8], len: u64) {
        let t3 = monotonic_ns();
        let n = touched(self.sent_at, buf.len() as u64, len);
        for (i, f) in self.owed.iter_mut().take(n).enumerate() {
            if i > 0 || self.sent_at <= T3 as u64 {
                stamp_departure(f, t3);
            }
        }
        let owed = &self.owed;
        lay(buf, self.sent_at, len, |i| {
            owed.get(i).copied().unwrap_or([0; OWD_RESPONSE as usize])
        });
    }

    /// `n` bytes of responses of `len` bytes went out: the ones done leave.
    #[inline]
    pub(super) fn sent(&mut self, n: u64, len: u64) {
        let total = self.sent_at + n;
        let done = (total / len) as usize;
        self.owed.drain(..done.min(self.owed.len()));
        self.sent_at = total % len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fronts laid into a stream of messages come back whole wherever the
    /// stream is cut, and a send that begins mid-message leaves the part
    /// of the front already sent alone.
    #[test]
    fn fronts_survive_any_cut_of_the_stream() {
        const LEN: u64 = 40;
        let front = |i: usize| [i as u8 + 1; 16];
        // Five messages, sent in pieces of 7, 33, 1, 59 and the rest.
        let mut stream = vec![0u8; 5 * LEN as usize];
        let mut at = 0u64;
        for piece in [7u64, 33, 1, 59, 100] {
            let first = (at / LEN) as usize;
            let mut buf = vec![0xeeu8; piece as usize];
            lay(&mut buf, at % LEN, LEN, |i| front(first + i));
            stream[at as usize..(at + piece) as usize].copy_from_slice(&buf);
            at += piece;
        }
        for m in 0..5 {
            let s = m * LEN as usize;
            assert_eq!(stream[s..s + 16], front(m), "message {m}");
        }
        // Read back in other pieces: every front, in order, once.
        let mut got = Vec::new();
        let mut f = Fronts::<16>::new();
        let mut at = 0u64;
        for piece in [3u64, 50, 17, 30, 100] {
            let c = &stream[at as usize..(at + piece) as usize];
            f.scan(c, at % LEN, LEN, |x| got.push(x[0]));
            at += piece;
        }
        assert_eq!(got, [1, 2, 3, 4, 5]);
        assert_eq!(touched(39, 2, LEN), 2);
        assert_eq!(touched(0, 40, LEN), 1);
    }

    /// The server: the request's `t1` echoed, its arrival, and a departure
    /// that stays once its first byte went out.
    #[test]
    fn the_server_keeps_a_departure_once_it_began_to_leave() {
        const LEN: u64 = 32;
        let mut s = ServerStamps::new(2);
        let mut req = [0u8; 16];
        req[8..16].copy_from_slice(&77u64.to_be_bytes());
        s.scan(&req, 0, 16);
        s.scan(&req, 0, 16);
        assert_eq!(s.owed.len(), 2);
        let t = |f: &[u8], at: usize| u64::from_be_bytes(f[at..at + 8].try_into().unwrap());
        // 28 bytes out: the first response's departure half sent.
        let mut buf = [0u8; 64];
        s.lay(&mut buf, LEN);
        let first = t(&buf, 24);
        assert_eq!(t(&buf, 8), 77);
        assert!(t(&buf, 16) <= first);
        s.sent(28, LEN);
        std::thread::sleep(std::time::Duration::from_millis(2));
        let mut rest = [0u8; 36];
        s.lay(&mut rest, LEN);
        assert_eq!(rest[..4], first.to_be_bytes()[4..]);
        assert!(t(&rest, 4 + 24) > first + 1_000_000);
        s.sent(36, LEN);
        assert!(s.owed.is_empty());
    }
}
