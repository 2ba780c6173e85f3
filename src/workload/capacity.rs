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
//! train (u16) and the train's length (u16), big-endian.

use std::io;
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
pub const TRAIN_HEADER: usize = 8;
/// Bytes a datagram takes on an Ethernet link beyond its payload: UDP 8,
/// IPv4 20, Ethernet 14 (shared/TESTING.md: what tbf and htb count).
pub const FRAME_OVERHEAD: u64 = 8 + 20 + 14;

/// The train lengths in the order they are sent: 2, 4, … [`TRAIN_MAX`].
pub fn train_lengths() -> impl Iterator<Item = u16> {
    (1..=TRAIN_MAX.ilog2()).map(|k| 1u16 << k)
}

fn put_header(d: &mut [u8], train: u32, index: u16, len: u16) {
    d[..4].copy_from_slice(&train.to_be_bytes());
    d[4..6].copy_from_slice(&index.to_be_bytes());
    d[6..8].copy_from_slice(&len.to_be_bytes());
}

fn header_of(d: &[u8]) -> Option<(u32, u16, u16)> {
    let h = d.get(..TRAIN_HEADER)?;
    Some((
        u32::from_be_bytes(h[..4].try_into().ok()?),
        u16::from_be_bytes(h[4..6].try_into().ok()?),
        u16::from_be_bytes(h[6..8].try_into().ok()?),
    ))
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
}

impl TrainSender {
    /// `size`: payload bytes per datagram (at least [`TRAIN_HEADER`]).
    pub fn new(sock: Socket, counters: CounterRef, size: usize, rate_bps: u64) -> TrainSender {
        TrainSender {
            sock,
            counters,
            batch: MsgBatch::new(usize::from(TRAIN_MAX), size.max(TRAIN_HEADER)),
            size: size.max(TRAIN_HEADER),
            rate: rate_bps.max(1) as f64 / 8.0,
            train: 0,
            next: None,
        }
    }

    /// This train's length: [`train_lengths`] in turn.
    fn length(&self) -> u16 {
        2 << (self.train % TRAIN_MAX.ilog2())
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
        let len = self.length();
        let fd = self.sock.as_raw_fd();
        let size = self.size;
        for index in 0..len {
            put_header(
                self.batch.buf_mut(usize::from(index)),
                self.train,
                index,
                len,
            );
        }
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
        Ok(TrainReceiver {
            sock,
            counters,
            buf: vec![0u8; size.max(TRAIN_HEADER) + 1],
            gaps: GapRecorder::new(size as u64 + FRAME_OVERHEAD),
            current: None,
            last_train: None,
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

    /// One datagram of train `train`, index `index`, stamped `at` ns.
    fn arrive(&mut self, train: u32, index: u16, at: u64, measure: bool) {
        if self.last_train != Some(train) {
            // A new train. A tail lost from the one before leaves no
            // trace here: its gaps up to the loss are good ones.
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
            let at = at.unwrap_or_else(crate::io::icmp::realtime_ns);
            if let Some((train, index, _len)) = header_of(&self.buf[..n]) {
                self.arrive(train, index, at, measure);
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
        let mut d = [0u8; 10];
        put_header(&mut d, 7, 3, 64);
        assert_eq!(header_of(&d), Some((7, 3, 64)));
        assert_eq!(header_of(&d[..7]), None);
        let lens: Vec<u16> = train_lengths().collect();
        for train in 0..13u32 {
            assert_eq!(
                2u16 << (train % TRAIN_MAX.ilog2()),
                lens[train as usize % lens.len()]
            );
        }
    }

    #[test]
    fn gaps_are_kept_by_index_and_breaks_counted() {
        let (a, _b) = std::os::unix::net::UnixDatagram::pair().unwrap();
        let sock = Socket::from(std::os::fd::OwnedFd::from(a));
        let block: std::sync::Arc<[crate::stats::counters::FlowCounters]> =
            vec![crate::stats::counters::FlowCounters::default()].into();
        let mut r = TrainReceiver {
            sock,
            counters: CounterRef::new(block, 0),
            buf: vec![0; 16],
            gaps: GapRecorder::new(1442),
            current: None,
            last_train: None,
            done_at_drain: false,
        };
        // Train 0 whole: 3 packets 1 µs apart; train 1 loses index 1.
        for (t, i, at) in [
            (0, 0, 0),
            (0, 1, 1000),
            (0, 2, 2000),
            (1, 0, 9000),
            (1, 2, 9500),
        ] {
            r.arrive(t, i, at, true);
        }
        let g = r.gaps();
        assert_eq!((g.trains, g.broken), (2, 1));
        let b = u64::from(crate::stats::dispersion::bin_of(1000));
        assert_eq!(g.gaps, vec![[1, b, 1], [2, b, 1]]);
    }
}
