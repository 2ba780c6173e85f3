//! capacity: packet trains for the path's bottleneck capacity.
//!
//! The sender sends trains of back-to-back datagrams, 2, 4, 8 … up to
//! [`TRAIN_MAX`] packets in turn, and waits between trains so that its
//! average load is the plan's `--rate` (default [`DEFAULT_PROBE_BPS`]):
//! small beside the link it measures, so the probe does not fill the path
//! it measures. The receiver takes each datagram's kernel receive
//! timestamp (SO_TIMESTAMPNS: the time a datagram waits for the reader to
//! wake is not a gap) and records the gap between consecutive packets of a
//! train by the later packet's index ([`GapRecorder`]); the capacity comes
//! from those gaps in [`crate::stats::dispersion::estimate`].
//!
//! Each datagram starts with its train's number (u32), its index in the
//! train (u16), the train's length (u16) and the sender's pace (u32, ns),
//! big-endian. The pace is how long the sender's kernel took per datagram
//! to take in the last longest train (its `sendmmsg` over the datagrams):
//! on a path of veths and a software router that call carries each
//! datagram through every hop whose queue is empty, so a train that no
//! narrow link holds back takes the sender that long per datagram, and a
//! receiver that sees gaps no wider than the pace knows the trains were
//! never slowed by the path ([`crate::stats::dispersion::Estimate::sender_limited`]).
//! The receiver also counts the datagrams its trains lost: a train's
//! length follows from its number ([`length_of`]), so a missing tail and
//! a whole missing train are both counted.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use socket2::Socket;

use crate::io::mmsg::MsgBatch;
use crate::io::socket::would_block;
use crate::io::{Driver, Event};
use crate::plan::Phase;
use crate::stats::dispersion::{GapRecorder, TrainGaps};
use crate::workload::{CounterRef, Flow, FlowCtx, OPS_PER_CALL, Progress, token};

/// The longest train: 64 packets of 1472 bytes are 94 KB, which fits the
/// default socket buffers at both ends (212 KB), and whose second half
/// empties htb's bucket at up to 1 Gbit/s (shared/TESTING.md).
pub const TRAIN_MAX: u16 = 64;
/// The probe's average load without `--rate`: 10 % of a 10 Mbit/s link.
pub const DEFAULT_PROBE_BPS: u64 = 1_000_000;
/// Bytes of the train header at the front of each datagram.
pub const TRAIN_HEADER: usize = 12;
/// Bytes a datagram takes on an Ethernet link beyond its payload: UDP 8,
/// IPv4 20 or IPv6 40, Ethernet 14 (shared/TESTING.md: what tbf and htb
/// count).
pub fn frame_overhead(ipv6: bool) -> u64 {
    ip_udp_header(ipv6) + 14
}

/// The largest MTU the default packet fills: a jumbo frame's. A path
/// whose MTU is larger (loopback's 65,536) gets no more, so that a longest
/// train (64 datagrams of 8,972 bytes, 574 KB) stays within what socket
/// buffers hold; `--packet-size` goes up to 65,507.
pub const MAX_DEFAULT_MTU: u64 = 9000;

/// IP and UDP header bytes in front of a datagram's payload.
pub fn ip_udp_header(ipv6: bool) -> u64 {
    if ipv6 { 40 + 8 } else { 20 + 8 }
}

/// The default packet size toward `peer`: the payload that fills the path
/// MTU the kernel knows after a connect (IP_MTU, IPV6_MTU), at most
/// [`MAX_DEFAULT_MTU`], less the IP and UDP headers of the peer's family;
/// where the kernel knows none, a 1500-byte MTU's.
pub fn packet_size_toward(peer: SocketAddr, bind: Option<IpAddr>) -> u64 {
    let ipv6 = peer.is_ipv6();
    let mtu = crate::io::socket::udp_connected(&peer, bind, &Default::default())
        .ok()
        .and_then(|s| crate::io::socket::path_mtu(&s, ipv6))
        .map_or(1500, u64::from);
    mtu.min(MAX_DEFAULT_MTU)
        .saturating_sub(ip_udp_header(ipv6))
        .max(TRAIN_HEADER as u64)
}

/// Socket buffer bytes a longest train of `size`-byte datagrams takes in
/// the kernel: each datagram is charged its allocation (a power of two
/// above the payload and its headers: 16 KiB for 8,972 bytes) and its
/// bookkeeping (under a KiB).
fn train_buffer_bytes(size: usize) -> usize {
    usize::from(TRAIN_MAX) * ((size + 1024).next_power_of_two() + 1024)
}

/// Grow a socket's send or receive buffer to hold a longest train (a
/// smaller one cuts the train or drops its tail at the receiver, which
/// then reads as loss). Never shrinks one a user made larger; the kernel
/// caps the request at net.core.wmem_max / rmem_max (the kernel doubles
/// what it is asked for, and reports the doubled size).
fn fit_train(sock: &Socket, size: usize, send: bool) -> io::Result<()> {
    let want = train_buffer_bytes(size);
    if send {
        if sock.send_buffer_size()? < want {
            sock.set_send_buffer_size(want / 2)?;
        }
    } else if sock.recv_buffer_size()? < want {
        sock.set_recv_buffer_size(want / 2)?;
    }
    Ok(())
}

/// The train lengths in the order they are sent: 2, 4, … [`TRAIN_MAX`].
pub fn train_lengths() -> impl Iterator<Item = u16> {
    (1..=TRAIN_MAX.ilog2()).map(|k| 1u16 << k)
}

/// The length of train number `train`: [`train_lengths`] in turn.
pub fn length_of(train: u32) -> u16 {
    2 << (train % TRAIN_MAX.ilog2())
}

/// What each datagram carries at its front.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Header {
    train: u32,
    index: u16,
    len: u16,
    /// The sender's ns per datagram over its last longest train; 0 before.
    pace_ns: u32,
}

fn put_header(d: &mut [u8], h: Header) {
    d[..4].copy_from_slice(&h.train.to_be_bytes());
    d[4..6].copy_from_slice(&h.index.to_be_bytes());
    d[6..8].copy_from_slice(&h.len.to_be_bytes());
    d[8..12].copy_from_slice(&h.pace_ns.to_be_bytes());
}

fn header_of(d: &[u8]) -> Option<Header> {
    let h = d.get(..TRAIN_HEADER)?;
    Some(Header {
        train: u32::from_be_bytes(h[..4].try_into().ok()?),
        index: u16::from_be_bytes(h[4..6].try_into().ok()?),
        len: u16::from_be_bytes(h[6..8].try_into().ok()?),
        pace_ns: u32::from_be_bytes(h[8..12].try_into().ok()?),
    })
}

/// Sends the trains.
pub struct TrainSender {
    sock: Socket,
    counters: CounterRef,
    /// One buffer per packet of the longest train, sent with sendmmsg.
    batch: MsgBatch,
    size: usize,
    /// Payload bytes/s on average.
    rate: f64,
    train: u32,
    next: Option<Instant>,
    /// ns per datagram the last longest train took to send (the header's
    /// `pace_ns`).
    pace_ns: u32,
}

impl TrainSender {
    /// `size`: payload bytes per datagram (at least [`TRAIN_HEADER`]).
    pub fn new(
        sock: Socket,
        counters: CounterRef,
        size: usize,
        rate_bps: u64,
    ) -> io::Result<TrainSender> {
        fit_train(&sock, size, true)?;
        Ok(TrainSender {
            sock,
            counters,
            batch: MsgBatch::new(usize::from(TRAIN_MAX), size.max(TRAIN_HEADER)),
            size: size.max(TRAIN_HEADER),
            rate: rate_bps.max(1) as f64 / 8.0,
            train: 0,
            next: None,
            pace_ns: 0,
        })
    }
}

impl Flow for TrainSender {
    fn start(&mut self, driver: &mut dyn Driver, slot: usize) -> io::Result<()> {
        driver.register(self.sock.as_raw_fd(), token(slot, 0))
    }

    fn on_event(&mut self, _ev: Event, ctx: &mut FlowCtx<'_>) -> io::Result<Progress> {
        if ctx.phase_now() == Phase::Drain {
            return Ok(Progress::Done);
        }
        let now = Instant::now();
        if let Some(t) = self.next
            && now < t
        {
            return Ok(Progress::At(t));
        }
        let len = length_of(self.train);
        let fd = self.sock.as_raw_fd();
        let size = self.size;
        for index in 0..len {
            let h = Header {
                train: self.train,
                index,
                len,
                pace_ns: self.pace_ns,
            };
            put_header(self.batch.buf_mut(usize::from(index)), h);
        }
        let t0 = Instant::now();
        // Back to back: the whole train in one sendmmsg, so that the gaps
        // the sender leaves are the kernel's, not a system call's each
        // (one send per datagram left 30 µs between them on this VM, slower
        // than a frame at 1 Gbit/s).
        let sent = match self.batch.send(fd, usize::from(len), size) {
            Ok(k) => k as u64,
            // A full socket buffer cuts the train short; the receiver
            // counts it broken and keeps the gaps before the cut.
            Err(e) if would_block(&e) => 0,
            Err(e) => return Err(e),
        };
        if len == TRAIN_MAX && sent == u64::from(len) {
            let ns = t0.elapsed().as_nanos() / u128::from(len);
            self.pace_ns = u32::try_from(ns).unwrap_or(u32::MAX).max(1);
        }
        self.counters.add_datagrams_sent(sent);
        self.counters.add_sent(sent * size as u64);
        self.train = self.train.wrapping_add(1);
        let pause = Duration::from_secs_f64(f64::from(len) * size as f64 / self.rate);
        let next = now + pause;
        self.next = Some(next);
        // The socket's writability edges may wake us sooner; the check
        // above absorbs them.
        Ok(Progress::At(next))
    }

    fn blocking_ok(&self) -> bool {
        // It waits on time, not on the socket.
        false
    }
}

/// Receives the trains and records their gaps.
pub struct TrainReceiver {
    sock: Socket,
    counters: CounterRef,
    buf: Vec<u8>,
    gaps: GapRecorder,
    /// The train being received, the index expected next, the last
    /// packet's timestamp; None once a train broke until the next begins.
    current: Option<(u32, u16, u64)>,
    last_train: Option<u32>,
    /// Datagrams of the latest train that arrived, and whether that train
    /// began in the measurement window (its losses count, and a lost tail
    /// breaks it, when the next train begins).
    got: u16,
    counting: bool,
    /// Finish once the drain has begun and the socket is empty: the
    /// client's receiver under `--reverse`/`--both`, whose sender (the
    /// server) stops only after the client has drained, so no end of the
    /// trains can be waited for. The server's receiver runs until the
    /// session closes it, reading every train the client sent.
    done_at_drain: bool,
}

impl TrainReceiver {
    /// `size`: payload bytes per datagram, as the sender sends them.
    pub fn new(sock: Socket, counters: CounterRef, size: usize) -> io::Result<TrainReceiver> {
        crate::io::tstamp::enable(sock.as_raw_fd())?;
        fit_train(&sock, size, false)?;
        let ipv6 = sock.local_addr()?.is_ipv6();
        Ok(TrainReceiver {
            sock,
            counters,
            buf: vec![0u8; size.max(TRAIN_HEADER) + 1],
            gaps: GapRecorder::new(size as u64 + frame_overhead(ipv6)),
            current: None,
            last_train: None,
            got: 0,
            counting: false,
            done_at_drain: false,
        })
    }

    /// The client's receiver: done once the drain begins and nothing is
    /// queued (see `done_at_drain`).
    pub fn done_at_drain(mut self) -> TrainReceiver {
        self.done_at_drain = true;
        self
    }

    /// What it recorded.
    pub fn gaps(&self) -> TrainGaps {
        self.gaps.gaps()
    }

    /// Datagrams lost between the latest train and train `next`, which
    /// has just begun: the latest one's missing tail and every train
    /// between the two (a train's length follows from its number). A
    /// datagram that arrives after a later train began counts as lost.
    fn lost_before(&self, next: u32) -> u64 {
        let Some(last) = self.last_train else {
            return 0;
        };
        let skipped = next.wrapping_sub(last);
        if skipped == 0 {
            return 0;
        }
        let tail = u64::from(length_of(last).saturating_sub(self.got));
        // Whole trains lost: full cycles of the six lengths, then the rest.
        let between = skipped - 1;
        let cycle: u64 = train_lengths().map(u64::from).sum();
        let cycles = u64::from(between / TRAIN_MAX.ilog2());
        let rest: u64 = (0..between % TRAIN_MAX.ilog2())
            .map(|k| u64::from(length_of(last.wrapping_add(1 + k))))
            .sum();
        tail + cycles * cycle + rest
    }

    /// One datagram `h`, stamped `at` ns.
    fn arrive(&mut self, h: Header, at: u64, measure: bool) {
        let Header {
            train,
            index,
            pace_ns,
            ..
        } = h;
        if index >= length_of(train) {
            // Past the end of the train its number gives: no sender of
            // ours sends it. Kept out, the gaps hold at most
            // TRAIN_MAX − 1 indices by BINS bins (32,256 entries, under
            // 1.5 MB in memory and in the final message) whatever a peer
            // sends, so the recorder is constant-size by design.
            return;
        }
        if let Some(last) = self.last_train
            && train.wrapping_sub(last) > u32::MAX / 2
        {
            // A straggler of a train already given up on: counted lost
            // then, and not let back in (it would restart an old train).
            return;
        }
        if measure {
            self.gaps.datagram();
        }
        if self.last_train != Some(train) {
            // A new train. A tail lost from the one before leaves no
            // trace in the gaps: its gaps up to the loss are good ones.
            if measure && self.counting {
                self.gaps.lost(self.lost_before(train));
                // A lost tail breaks the train as a hole does (one the
                // hole already broke is counted once).
                if let Some(last) = self.last_train
                    && self.current.is_some()
                    && self.got < length_of(last)
                {
                    self.gaps.train_broken();
                }
            }
            // The sender's pace over its last longest train, which is
            // the one before this when this one is the shortest.
            if measure && pace_ns > 0 && length_of(train.wrapping_sub(1)) == TRAIN_MAX {
                self.gaps.sender_pace(u64::from(pace_ns));
            }
            self.counting = measure;
            self.got = 1;
            self.last_train = Some(train);
            self.current = None;
            if index == 0 {
                if measure {
                    self.gaps.train_started();
                }
                self.current = Some((train, 1, at));
            } else if measure {
                self.gaps.train_started();
                self.gaps.train_broken();
            }
            return;
        }
        self.got = self.got.saturating_add(1);
        match self.current {
            Some((t, expect, last)) if t == train && expect == index => {
                if measure {
                    self.gaps.gap(index, at.saturating_sub(last));
                }
                self.current = Some((t, expect + 1, at));
            }
            Some(_) => {
                if measure {
                    self.gaps.train_broken();
                }
                self.current = None;
            }
            None => {}
        }
    }
}

impl Flow for TrainReceiver {
    fn start(&mut self, driver: &mut dyn Driver, slot: usize) -> io::Result<()> {
        driver.register(self.sock.as_raw_fd(), token(slot, 0))
    }

    fn on_event(&mut self, _ev: Event, ctx: &mut FlowCtx<'_>) -> io::Result<Progress> {
        let fd = self.sock.as_raw_fd();
        let measure = ctx.phase_now() == Phase::Measure;
        for _ in 0..OPS_PER_CALL * 8 {
            let (n, at) = match crate::io::tstamp::recv(fd, &mut self.buf) {
                Ok(r) => r,
                Err(e) if would_block(&e) => {
                    return Ok(if self.done_at_drain && ctx.draining_now() {
                        Progress::Done
                    } else {
                        Progress::Idle
                    });
                }
                Err(e) => return Err(e),
            };
            self.counters.add_datagrams_received(1);
            self.counters.add_received(n as u64);
            let at = at.unwrap_or_else(crate::clock::realtime_ns);
            // A datagram whose length field does not match its number
            // is no train of ours (the numbering sets each length).
            if let Some(h) = header_of(&self.buf[..n]).filter(|h| h.len == length_of(h.train)) {
                self.arrive(h, at, measure);
            }
        }
        Ok(Progress::More)
    }

    fn blocking_ok(&self) -> bool {
        true
    }

    fn train_gaps(&self) -> Option<TrainGaps> {
        Some(self.gaps())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_double_up_to_the_longest() {
        assert_eq!(
            train_lengths().collect::<Vec<_>>(),
            vec![2, 4, 8, 16, 32, 64]
        );
        let mut d = [0u8; 14];
        let h = Header {
            train: 7,
            index: 3,
            len: 64,
            pace_ns: 12_345,
        };
        put_header(&mut d, h);
        assert_eq!(header_of(&d), Some(h));
        assert_eq!(header_of(&d[..TRAIN_HEADER - 1]), None);
        let lens: Vec<u16> = train_lengths().collect();
        for train in 0..13u32 {
            assert_eq!(length_of(train), lens[train as usize % lens.len()]);
        }
    }

    fn receiver() -> TrainReceiver {
        let (a, _b) = std::os::unix::net::UnixDatagram::pair().unwrap();
        let sock = Socket::from(std::os::fd::OwnedFd::from(a));
        let block: std::sync::Arc<[crate::stats::counters::FlowCounters]> =
            vec![crate::stats::counters::FlowCounters::default()].into();
        TrainReceiver {
            sock,
            counters: CounterRef::new(block, 0),
            buf: vec![0; 16],
            gaps: GapRecorder::new(1442),
            current: None,
            last_train: None,
            got: 0,
            counting: false,
            done_at_drain: false,
        }
    }

    /// Datagrams `(train, index, pace_ns, at)` into a fresh receiver.
    fn arrivals(all: &[(u32, u16, u32, u64)]) -> TrainGaps {
        let mut r = receiver();
        for &(train, index, pace_ns, at) in all {
            let h = Header {
                train,
                index,
                len: length_of(train),
                pace_ns,
            };
            r.arrive(h, at, true);
        }
        r.gaps()
    }

    #[test]
    fn gaps_are_kept_by_index_and_breaks_and_losses_counted() {
        let g = arrivals(&[
            // Train 0 (2 packets) whole, 1 µs apart.
            (0, 0, 0, 0),
            (0, 1, 0, 1000),
            // Train 1 (4) loses index 1: broken, one lost.
            (1, 0, 0, 9000),
            (1, 2, 0, 9500),
            (1, 3, 0, 9600),
            // Trains 2 (8) and 3 (16) lost whole; train 4 (32) keeps
            // its first packet only.
            (4, 0, 0, 20_000),
            // Train 5 (64) lost whole; train 6 carries the sender's pace
            // over train 5, the longest.
            (6, 0, 20_000, 30_000),
            // A straggler of train 1: already counted lost.
            (1, 1, 0, 31_000),
        ]);
        // Broken: train 1 by its hole, train 4 by its lost tail.
        assert_eq!((g.trains, g.broken), (4, 2));
        let b = u64::from(crate::stats::dispersion::bin_of(1000));
        assert_eq!(g.gaps, vec![[1, b, 1]]);
        assert_eq!(g.datagrams, 7);
        assert_eq!(g.lost, 1 + 8 + 16 + 31 + 64);
        let p = u64::from(crate::stats::dispersion::bin_of(20_000));
        assert_eq!(g.pace, vec![[p, 1]]);
    }

    #[test]
    fn crafted_indices_cannot_grow_the_gaps() {
        // A hostile sender: every train numbered anew, each carrying
        // indices 0..65,535 in order, 1 ns further apart each time (a
        // new bin for every gap). Before, 958,063 entries in 40 s.
        let mut r = receiver();
        for train in 0..40u32 {
            let mut at = 0u64;
            for index in 0..=u16::MAX {
                at += 1 + u64::from(index) * u64::from(train + 1);
                let h = Header {
                    train: train * 6 + 5,
                    index,
                    len: TRAIN_MAX,
                    pace_ns: 0,
                };
                r.arrive(h, at, true);
            }
        }
        let g = r.gaps();
        let bound = usize::from(TRAIN_MAX - 1) * usize::from(crate::stats::dispersion::BINS);
        assert!(g.gaps.len() <= bound, "{}", g.gaps.len());
        assert!(g.gaps.iter().all(|&[i, _, _]| i < u64::from(TRAIN_MAX)));
        assert_eq!(g.trains, 40);
    }

    #[test]
    fn whole_cycles_of_lost_trains_are_counted() {
        // Trains 1 to 12 lost: two cycles of 2 + 4 + … + 64.
        let g = arrivals(&[(0, 0, 0, 0), (0, 1, 0, 10), (13, 0, 0, 99)]);
        assert_eq!(g.lost, 2 * 126);
        // A pace that does not follow the longest train is not taken.
        assert!(g.pace.is_empty());
    }
}
