//! udp_stream `--zerocopy`: a ring of datagram batches sent with
//! `sendmmsg(MSG_ZEROCOPY)` (SO_ZEROCOPY on UDP, Linux 5.0).
//!
//! The sender writes each datagram's header (flow id, sequence number, send
//! time) into the buffer just before it goes out, and a buffer handed to the
//! kernel with MSG_ZEROCOPY must not change until the kernel says it let go
//! of its pages. So the sender cycles through [`RING_BATCHES`] batches of
//! [`BATCH`] datagrams, allocated up front, and writes into a batch only
//! when every datagram sent from it has completed
//! ([`crate::io::zerocopy::Completions`], the TCP ring's bookkeeping: each
//! datagram is one send call with its own completion id). When the next
//! batch is still pending it reaps the error queue without blocking; if that
//! frees nothing, the blocking driver sleeps in poll() for POLLERR and the
//! epoll driver waits for EPOLLERR. Completions flagged
//! SO_EE_CODE_ZEROCOPY_COPIED (every one on loopback or veth: the data ends
//! in a local socket) are counted as the TCP path counts them.

use std::io;
use std::os::fd::RawFd;

use crate::io::mmsg::{BATCH, MsgBatch};
use crate::io::zerocopy::{Completions, ZeroCopyCounts, socket_error, wait_for_completion};

/// Batches in the ring: at most this many times [`BATCH`] datagrams wait
/// for their completions.
pub const RING_BATCHES: usize = 8;

/// How long the drain waits for the last completions.
pub const SETTLE: std::time::Duration = std::time::Duration::from_secs(1);

pub struct UdpZeroCopy {
    ring: Box<[MsgBatch]>,
    cur: usize,
    done: Completions,
    /// The last send failed with ENOBUFS (notifications are charged to
    /// net.core.optmem_max): wait for a completion before the next.
    starved: bool,
}

/// What [`UdpZeroCopy::send`] did.
pub enum UdpZcSend {
    /// Datagrams sent.
    Sent(usize),
    /// Out of option memory with completions to come: wait for them.
    Starved,
}

impl UdpZeroCopy {
    /// Turn SO_ZEROCOPY on for `fd` and allocate the ring of batches of
    /// `size`-byte datagrams.
    pub fn new(fd: RawFd, size: usize) -> io::Result<UdpZeroCopy> {
        crate::io::zerocopy::enable(fd)?;
        Ok(UdpZeroCopy {
            ring: (0..RING_BATCHES)
                .map(|_| MsgBatch::new(BATCH, size))
                .collect(),
            cur: 0,
            done: Completions::new(RING_BATCHES, (RING_BATCHES * BATCH).next_power_of_two()),
            starved: false,
        })
    }

    pub fn counts(&self) -> ZeroCopyCounts {
        self.done.counts()
    }

    fn can_send(&self) -> bool {
        !self.starved && self.done.slot_free(self.cur) && self.done.room_for(BATCH)
    }

    fn reap(&mut self, fd: RawFd) -> io::Result<u64> {
        let n = self.done.reap(fd)?;
        if n > 0 {
            self.starved = false;
        }
        Ok(n)
    }

    /// May the next batch be written and sent? Reaps when the driver
    /// reported an error (`error_reported`: the error queue has something)
    /// or the next batch is pending; `blocking`: sleep in poll() for a
    /// completion rather than return false at once.
    #[inline]
    pub fn ready(&mut self, fd: RawFd, error_reported: bool, blocking: bool) -> io::Result<bool> {
        if error_reported {
            self.reap(fd)?;
        }
        if self.can_send() {
            return Ok(true);
        }
        self.reap(fd)?;
        if self.can_send() || !blocking {
            return Ok(self.can_send());
        }
        let events = wait_for_completion(fd, crate::io::blocking::POLL_TIMEOUT)?;
        if self.reap(fd)? == 0
            && events & libc::POLLERR != 0
            && let Some(e) = socket_error(fd)?
        {
            // POLLERR without a completion: the socket's own error (an
            // ICMP port unreachable), which would make every wait return at once.
            return Err(e);
        }
        Ok(self.can_send())
    }

    /// The batch to write the next datagrams into (after [`UdpZeroCopy::ready`]).
    #[inline]
    pub fn batch_mut(&mut self) -> &mut MsgBatch {
        &mut self.ring[self.cur]
    }

    /// Send `n` datagrams of `len` bytes from the current batch with
    /// MSG_ZEROCOPY; a batch that sent any moves the ring on.
    #[inline]
    pub fn send(&mut self, fd: RawFd, n: usize, len: usize) -> io::Result<UdpZcSend> {
        match self.ring[self.cur].send_flags(fd, n, len, libc::MSG_ZEROCOPY) {
            Ok(k) => {
                if k > 0 {
                    self.done.sent(self.cur, k);
                    self.cur = (self.cur + 1) % RING_BATCHES;
                }
                Ok(UdpZcSend::Sent(k))
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) && self.done.outstanding() > 0 => {
                self.starved = true;
                Ok(UdpZcSend::Starved)
            }
            Err(e) => Err(e),
        }
    }

    /// At the end: reap until every send has completed or [`SETTLE`] has passed.
    pub fn settle(&mut self, fd: RawFd) -> io::Result<()> {
        self.done.settle(fd, SETTLE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;

    /// Loopback: every datagram completes, each copied (a local socket
    /// takes them), and the ring comes round with headers intact.
    #[test]
    fn a_ring_of_batches_completes_on_loopback() {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        a.connect(b.local_addr().unwrap()).unwrap();
        b.set_nonblocking(true).unwrap();
        let Ok(mut z) = UdpZeroCopy::new(a.as_raw_fd(), 64) else {
            eprintln!("no SO_ZEROCOPY on UDP here (Linux < 5.0): skipped");
            return;
        };
        let fd = a.as_raw_fd();
        let mut sent = 0u64;
        let mut buf = [0u8; 64];
        for round in 0..(3 * RING_BATCHES) {
            assert!(z.ready(fd, false, true).unwrap(), "round {round}");
            z.batch_mut().buf_mut(0)[0] = round as u8;
            match z.send(fd, 4, 64).unwrap() {
                UdpZcSend::Sent(k) => sent += k as u64,
                UdpZcSend::Starved => {}
            }
            while b.recv(&mut buf).is_ok() {}
        }
        z.settle(fd).unwrap();
        let c = z.counts();
        assert_eq!(c.sends, sent);
        assert_eq!(c.completions, sent);
        assert_eq!(c.copied, sent, "loopback copies: {c:?}");
    }
}
