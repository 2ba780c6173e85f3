//! udp_rr's client and server flows over loopback.

use std::net::UdpSocket;

use super::*;
use crate::plan::{TestKind, TestPlan};
use crate::workload::harness::Harness;
use crate::workload::udp::UdpRrServer;

/// Two connected loopback UDP sockets, non-blocking.
fn udp_pair() -> (Socket, Socket) {
    let a = UdpSocket::bind("127.0.0.1:0").unwrap();
    let b = UdpSocket::bind("127.0.0.1:0").unwrap();
    a.connect(b.local_addr().unwrap()).unwrap();
    b.connect(a.local_addr().unwrap()).unwrap();
    a.set_nonblocking(true).unwrap();
    b.set_nonblocking(true).unwrap();
    (Socket::from(a), Socket::from(b))
}

fn schedule(rate: u64, max_inflight: u32) -> OpenLoop {
    let mut p = TestPlan::new(TestKind::UdpRr);
    p.offered_per_s = Some(rate);
    p.max_inflight = max_inflight;
    OpenLoop::of(&p, 0).unwrap()
}

/// Open loop against a server flow: the schedule, not the responses,
/// issues; every measured transaction has a response time and a service
/// time, and the generator's lag is recorded once per request.
#[test]
fn open_loop_answers_are_timed_twice() {
    for size in [1, 64] {
        let (a, b) = udp_pair();
        let mut h = Harness::new(2);
        let (cc, sc) = (h.counter(0), h.counter(1));
        let timeout = Duration::from_secs(5);
        let c = UdpRrClient::new(a, cc, size, size, 0, timeout, None);
        h.add(c.open_loop(schedule(5_000, 64)));
        h.add(UdpRrServer::new(b, sc, size, size, 63));
        h.run_until("transactions", |h| h.counts(0).transactions >= 300);
        let c = h.counts(0);
        assert_eq!(c.lost, 0, "{c:?}");
        let lag = h.open.lag.count();
        let open = std::mem::replace(&mut h.open, Harness::new(0).open);
        let service = open.service.finish().count();
        assert!(
            lag >= c.transactions && lag <= c.datagrams_sent,
            "{lag} lags for {c:?}"
        );
        assert_eq!(h.latencies(), c.transactions);
        assert_eq!(service, c.transactions);
    }
}

/// A peer that never answers: each transaction is lost after
/// --rr-timeout and frees its slot, so the schedule goes on (bounded by
/// --max-inflight, the held-back requests owed and late) instead of
/// stalling on the first lost datagram.
#[test]
fn open_loop_losses_free_their_slots() {
    for size in [1, 64] {
        let (a, _silent) = udp_pair();
        let mut h = Harness::new(1);
        let cc = h.counter(0);
        let c = UdpRrClient::new(a, cc, size, size, 0, Duration::from_millis(10), None);
        h.add(c.open_loop(schedule(2_000, 4)));
        h.run_until("many lost", |h| h.counts(0).lost >= 20);
        let c = h.counts(0);
        // Never more than the bound in flight: all but those are lost.
        assert!(c.datagrams_sent - c.lost <= 4, "{c:?}");
        assert_eq!(c.transactions, 0);
        // 4 slots per ~10 ms against 20 requests due per 10 ms: held back.
        assert!(c.late > 0, "{c:?}");
    }
}

/// Open loop against a silent peer with room in flight: every request
/// that goes out was taken from the schedule (one lag reading each), so
/// losses do not add requests of their own beyond the offered rate.
#[test]
fn open_loop_losses_issue_nothing_off_schedule() {
    let (a, _silent) = udp_pair();
    let mut h = Harness::new(1);
    let cc = h.counter(0);
    let c = UdpRrClient::new(a, cc, 64, 64, 0, Duration::from_millis(5), None);
    h.add(c.open_loop(schedule(2_000, 1_000)));
    h.run_until("many lost", |h| h.counts(0).lost >= 50);
    let c = h.counts(0);
    let taken = h.open.lag.count();
    assert_eq!(c.datagrams_sent, taken, "{c:?}");
}

/// The far end of a test driven by hand: it answers each request with the
/// request itself (thrum's server echoes a request's first bytes; here
/// request and response are one size, so all of them), except the
/// `drop`th (counted from 1), which it reads and discards: a datagram lost
/// on the path. `old`: it answers zeros instead, as a server that echoes
/// no short sequence number does.
struct LossyEcho {
    sock: UdpSocket,
    seen: u64,
    drop: u64,
    old: bool,
}

impl LossyEcho {
    fn new(sock: Socket, drop: u64) -> LossyEcho {
        LossyEcho {
            sock: sock.into(),
            seen: 0,
            drop,
            old: false,
        }
    }

    /// Answer every request waiting.
    fn serve(&mut self) {
        let mut buf = [0u8; 2048];
        while let Ok(n) = self.sock.recv(&mut buf) {
            self.seen += 1;
            if self.old {
                buf[..n].fill(0);
            }
            if self.seen != self.drop {
                self.sock.send(&buf[..n]).unwrap();
            }
        }
    }
}

/// A bench for one flow on epoll or (`ring`) on the io_uring completion
/// driver; None (said on stderr) where io_uring is unavailable.
fn bench(ring: bool) -> Option<Harness> {
    if !ring {
        return Some(Harness::new(1));
    }
    if let Err(why) = crate::io::uring::probe() {
        eprintln!("SKIPPED: io_uring unavailable: {why}");
        return None;
    }
    let bufs = RecvBuffers {
        size: 64,
        count: 256,
    };
    let driver = crate::io::uring::Uring::new(Some(bufs), None).expect("io_uring driver");
    Some(Harness::with_driver(1, Box::new(driver)))
}

/// Open loop at 50/s (a request every 20 ms, well inside the timeout), and
/// the first request lost: its transaction is lost when its timeout
/// passes, and every later response completes its own transaction, so the
/// service times stay at loopback's round trip. Matched oldest first, every
/// later response was charged to the transaction before its own: the gap
/// plus the round trip, 20 ms, for the rest of the run, and the lost
/// transaction never expired.
#[test]
fn open_loop_a_lost_request_leaves_the_others_matched() {
    for ring in [false, true] {
        for size in [1, 4, 64] {
            let Some(mut h) = bench(ring) else { return };
            let (a, b) = udp_pair();
            let mut far = LossyEcho::new(b, 1);
            let cc = h.counter(0);
            // A timeout far above loopback's round trip, so that only the
            // dropped request is lost on a busy machine too.
            let c = UdpRrClient::new(a, cc, size, size, 0, Duration::from_millis(200), None);
            h.add(c.open_loop(schedule(50, 64)));
            h.run_until("transactions", |h| {
                far.serve();
                h.counts(0).transactions >= 20 && h.counts(0).lost >= 1
                    || h.counts(0).transactions >= 40
            });
            let c = h.counts(0);
            let open = std::mem::replace(&mut h.open, Harness::new(0).open);
            let service = open.service.finish();
            let p50 = Duration::from_nanos(service.quantile(0.5));
            assert_eq!(
                c.lost, 1,
                "ring {ring}, size {size}: {c:?}, service p50 {p50:?}"
            );
            assert!(
                p50 < Duration::from_millis(5),
                "ring {ring}, size {size}: service p50 {p50:?} (the gap is 20 ms), {c:?}"
            );
        }
    }
}

/// Closed loop, four in flight, one request lost: its transaction expires
/// on its own and its slot goes to a new request. Matched oldest first,
/// each later response popped the send time before its own, the lost
/// transaction's entry moved to the back and never expired: a phantom
/// that held one of the four slots for the rest of the run, and no loss
/// counted.
#[test]
fn burst_a_lost_request_expires_and_frees_its_slot() {
    for ring in [false, true] {
        for size in [1, 64] {
            let Some(mut h) = bench(ring) else { return };
            let (a, b) = udp_pair();
            let mut far = LossyEcho::new(b, 2);
            let cc = h.counter(0);
            let c = UdpRrClient::new(a, cc, size, size, 3, Duration::from_millis(200), None);
            h.add(c);
            let t0 = Instant::now();
            h.run_until("transactions past the timeout", |h| {
                far.serve();
                h.counts(0).transactions >= 100 && t0.elapsed() > Duration::from_millis(400)
            });
            let c = h.counts(0);
            assert_eq!(c.lost, 1, "ring {ring}, size {size}: {c:?}");
        }
    }
}

/// One-byte requests carry one byte of sequence number: 256 values. A lost
/// request still in flight when the numbers come round again must not take
/// the response of the request that reuses its byte: new requests skip a
/// value in flight. Taken, the reused value's response completed the lost
/// transaction, charged with all the time since it was sent (over 250 ms
/// at 1,000/s).
#[test]
fn a_short_sequence_number_in_flight_is_not_reused() {
    for ring in [false, true] {
        let Some(mut h) = bench(ring) else { return };
        let (a, b) = udp_pair();
        let mut far = LossyEcho::new(b, 1);
        let cc = h.counter(0);
        let c = UdpRrClient::new(a, cc, 1, 1, 0, Duration::from_secs(30), None);
        h.add(c.open_loop(schedule(1_000, 64)));
        h.run_until("past 256 requests", |h| {
            far.serve();
            h.counts(0).transactions >= 600
        });
        let open = std::mem::replace(&mut h.open, Harness::new(0).open);
        let service = open.service.finish();
        assert_eq!(
            service.count_at_least(125_000_000),
            0,
            "ring {ring}: service max {} ns",
            service.quantile(1.0)
        );
    }
}

/// Against a server that answers zeros (an older thrum's short
/// responses), a client told to match in order completes its
/// transactions, in a burst and open loop; matching by sequence number it
/// would take every response for transaction 0's.
#[test]
fn in_order_runs_against_a_server_that_echoes_nothing() {
    for open in [false, true] {
        let mut h = Harness::new(1);
        let (a, b) = udp_pair();
        let mut far = LossyEcho::new(b, 0);
        far.old = true;
        let cc = h.counter(0);
        let c = UdpRrClient::new(a, cc, 1, 1, 3, Duration::from_secs(5), None).in_order();
        if open {
            h.add(c.open_loop(schedule(2_000, 64)));
        } else {
            h.add(c);
        }
        h.run_until("transactions", |h| {
            far.serve();
            h.counts(0).transactions >= 100
        });
        assert_eq!(h.counts(0).lost, 0, "open {open}: {:?}", h.counts(0));
    }
}

/// Open loop with more in flight than a 1-byte number tells apart (a far
/// end that answers nothing until 300 requests have come, then all of
/// them in order): the schedule is not held back at 256, the numbers are
/// shared, and each response takes the oldest transaction of its number,
/// its own, so none is lost and none is answered twice.
#[test]
fn open_loop_beyond_256_in_flight_shares_numbers() {
    let mut h = Harness::new(1);
    let (a, b) = udp_pair();
    let far = UdpSocket::from(b);
    let cc = h.counter(0);
    let c = UdpRrClient::new(a, cc, 1, 1, 0, Duration::from_secs(30), None);
    h.add(c.open_loop(schedule(5_000, 1_024)));
    let mut held: Vec<u8> = Vec::new();
    let mut most = 0;
    h.run_until("600 answered", |h| {
        let mut buf = [0u8; 64];
        while let Ok(n) = far.recv(&mut buf) {
            assert_eq!(n, 1);
            held.push(buf[0]);
        }
        let c = h.counts(0);
        most = most.max(c.datagrams_sent - c.datagrams_received);
        if most >= 300 {
            for d in held.drain(..) {
                far.send(&[d]).unwrap();
            }
        }
        c.transactions >= 600
    });
    let c = h.counts(0);
    assert!(most >= 300, "{most} in flight at most: {c:?}");
    assert_eq!(c.lost, 0, "{c:?}");
    assert_eq!(c.transactions, c.datagrams_received, "{c:?}");
}
