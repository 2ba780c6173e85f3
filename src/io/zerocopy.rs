//! MSG_ZEROCOPY sends for bulk TCP senders and udp_stream's (`--zerocopy`).
//!
//! With SO_ZEROCOPY set, a `send(MSG_ZEROCOPY)` pins the caller's pages
//! instead of copying them into socket buffers, and the kernel reports on the
//! socket's error queue when it has let go of them: one notification per
//! range of send calls, numbered from 0 per socket in call order
//! (Documentation/networking/msg_zerocopy.rst). Until then the application
//! must not change the buffer, so the sender cycles through a ring of
//! [`RING_SLOTS`] buffers and reuses a slot only once every send from it has
//! completed; a full ring waits for completions (POLLERR), not for each send.
//!
//! Where the data goes to a local socket (loopback, veth into a namespace on
//! the same host) the kernel cannot hand the pages on and copies them on
//! delivery (`skb_orphan_frags_rx`); the notification then carries
//! SO_EE_CODE_ZEROCOPY_COPIED. Such runs pay for page pinning and
//! notifications on top of the copy, so they are slower than plain sends:
//! the counts here say how often that happened.

use std::io;
use std::ops::AddAssign;
use std::os::fd::RawFd;

use serde::{Deserialize, Serialize};

/// Send buffers per flow: the data in flight that waits for completions is
/// at most this many times `--send-size`.
pub const RING_SLOTS: usize = 16;

/// Send calls whose completion may be outstanding at once (a power of two;
/// partial sends make several calls per slot).
const ID_WINDOW: usize = 256;

// include/uapi/asm-generic/socket.h and linux/errqueue.h; not all in the libc crate.
const SO_ZEROCOPY: libc::c_int = 60;
const SO_EE_ORIGIN_ZEROCOPY: u8 = 5;
const SO_EE_CODE_ZEROCOPY_COPIED: u8 = 1;

/// What one end's zero-copy sends came to, over the whole test.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct ZeroCopyCounts {
    /// `send(MSG_ZEROCOPY)` calls that queued data.
    pub sends: u64,
    /// Send calls whose completion came back on the error queue.
    pub completions: u64,
    /// Completions flagged SO_EE_CODE_ZEROCOPY_COPIED: the kernel copied the data anyway.
    pub copied: u64,
}

impl AddAssign for ZeroCopyCounts {
    fn add_assign(&mut self, o: ZeroCopyCounts) {
        self.sends += o.sends;
        self.completions += o.completions;
        self.copied += o.copied;
    }
}

impl ZeroCopyCounts {
    /// Percent of completed sends the kernel copied.
    pub fn copied_percent(&self) -> f64 {
        if self.completions == 0 {
            0.0
        } else {
            self.copied as f64 * 100.0 / self.completions as f64
        }
    }
}

/// Turn SO_ZEROCOPY on (Linux 4.14 for TCP, 5.0 for UDP).
pub fn enable(fd: RawFd) -> io::Result<()> {
    let what = "SO_ZEROCOPY (--zerocopy; Linux 4.14 or later for TCP, 5.0 for UDP)";
    super::socket::set_int_option(fd, libc::SOL_SOCKET, SO_ZEROCOPY, 1, what)
}

/// What [`ZeroCopySender::send`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ZcSend {
    /// Bytes queued by one send call.
    Sent(usize),
    /// The next buffer still waits for completions: call [`ZeroCopySender::reap`]
    /// when the socket reports an error (POLLERR), or [`wait_for_completion`].
    RingFull,
}

/// A ring of send buffers and the bookkeeping of their completions.
pub struct ZeroCopySender {
    bufs: Box<[u8]>,
    len: usize,
    /// The slot being sent from, and how far.
    cur: usize,
    off: usize,
    done: Completions,
}

impl ZeroCopySender {
    /// `RING_SLOTS` buffers of `len` bytes.
    pub fn new(len: usize) -> ZeroCopySender {
        ZeroCopySender {
            bufs: vec![0u8; RING_SLOTS * len].into_boxed_slice(),
            len,
            cur: 0,
            off: 0,
            done: Completions::new(RING_SLOTS, ID_WINDOW),
        }
    }

    pub fn counts(&self) -> ZeroCopyCounts {
        self.done.counts()
    }

    /// Send calls still waiting for their completion.
    pub fn outstanding(&self) -> u64 {
        self.done.outstanding()
    }

    /// One `send(MSG_ZEROCOPY)` from the current slot. Errors are the
    /// socket's, as from [`super::socket::send`] (EAGAIN, EINTR included).
    #[inline]
    pub fn send(&mut self, fd: RawFd) -> io::Result<ZcSend> {
        if (self.off == 0 && !self.done.slot_free(self.cur)) || !self.done.room_for(1) {
            return Ok(ZcSend::RingFull);
        }
        let buf = &self.bufs[self.cur * self.len + self.off..(self.cur + 1) * self.len];
        match super::socket::send_flags(fd, buf, libc::MSG_ZEROCOPY) {
            Ok(n) => {
                self.done.sent(self.cur, 1);
                self.off += n;
                if self.off == self.len {
                    self.off = 0;
                    self.cur = (self.cur + 1) % RING_SLOTS;
                }
                Ok(ZcSend::Sent(n))
            }
            // Notifications are charged to the socket's option memory
            // (net.core.optmem_max); with completions to come, wait for them.
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) && self.done.outstanding() > 0 => {
                Ok(ZcSend::RingFull)
            }
            Err(e) => Err(e),
        }
    }

    /// Read every completion queued on `fd`'s error queue; returns how many
    /// send calls completed. Never blocks (the error queue does not).
    pub fn reap(&mut self, fd: RawFd) -> io::Result<u64> {
        self.done.reap(fd)
    }

    /// At the end: reap until every send has completed or `limit` has passed.
    pub fn settle(&mut self, fd: RawFd, limit: std::time::Duration) -> io::Result<()> {
        self.done.settle(fd, limit)
    }
}

/// Which ring slot each zero-copy send call came from, and what came back
/// on the error queue: the completion side of a ring of send buffers, shared
/// by the TCP ring ([`ZeroCopySender`]) and udp_stream's ring of datagram
/// batches (`workload::udp::zerocopy`).
pub struct Completions {
    /// Send calls of each slot that have not completed.
    pending: Box<[u32]>,
    /// The slot of send call `id`, at `id % window` (a power of two).
    slot_of: Box<[u8]>,
    /// The kernel's number for our next send call (per socket, from 0).
    next_id: u32,
    counts: ZeroCopyCounts,
    /// Room for one control message holding a `sock_extended_err` (u64-aligned).
    cmsg: [u64; 16],
}

impl Completions {
    /// `slots` ring slots (at most 256), up to `window` send calls (a power
    /// of two) outstanding at once.
    pub fn new(slots: usize, window: usize) -> Completions {
        assert!(slots <= 256 && window.is_power_of_two());
        Completions {
            pending: vec![0; slots].into_boxed_slice(),
            slot_of: vec![0; window].into_boxed_slice(),
            next_id: 0,
            counts: ZeroCopyCounts::default(),
            cmsg: [0; 16],
        }
    }

    pub fn counts(&self) -> ZeroCopyCounts {
        self.counts
    }

    /// Send calls still waiting for their completion.
    pub fn outstanding(&self) -> u64 {
        self.counts.sends - self.counts.completions
    }

    /// May `slot`'s buffer be written? (Every send from it has completed.)
    #[inline]
    pub fn slot_free(&self, slot: usize) -> bool {
        self.pending[slot] == 0
    }

    /// Room for `calls` more send calls in the id window.
    #[inline]
    pub fn room_for(&self, calls: usize) -> bool {
        self.outstanding() + calls as u64 <= self.slot_of.len() as u64
    }

    /// `calls` successful send calls from `slot`, in order.
    #[inline]
    pub fn sent(&mut self, slot: usize, calls: usize) {
        let mask = self.slot_of.len() - 1;
        for _ in 0..calls {
            self.slot_of[self.next_id as usize & mask] = slot as u8;
            self.next_id = self.next_id.wrapping_add(1);
        }
        self.pending[slot] += calls as u32;
        self.counts.sends += calls as u64;
    }

    /// Read every completion queued on `fd`'s error queue; returns how many
    /// send calls completed. Never blocks (the error queue does not).
    pub fn reap(&mut self, fd: RawFd) -> io::Result<u64> {
        let mut done = 0;
        loop {
            // SAFETY: msghdr is plain data; the control buffer lives in self
            // and its size is given; no data buffer is asked for.
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_control = self.cmsg.as_mut_ptr().cast();
            msg.msg_controllen = std::mem::size_of_val(&self.cmsg) as _;
            let rc =
                unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) };
            if rc < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EAGAIN) => return Ok(done),
                    Some(libc::EINTR) => continue,
                    _ => return Err(e),
                }
            }
            // SAFETY: the kernel filled msg's control buffer; the CMSG macros
            // stay within msg_controllen.
            let mut c = unsafe { libc::CMSG_FIRSTHDR(&msg) };
            while !c.is_null() {
                let h = unsafe { &*c };
                let ip_err = (h.cmsg_level == libc::SOL_IP && h.cmsg_type == libc::IP_RECVERR)
                    || (h.cmsg_level == libc::SOL_IPV6 && h.cmsg_type == libc::IPV6_RECVERR);
                if ip_err {
                    // SAFETY: an IP(V6)_RECVERR message starts with a sock_extended_err.
                    let ee: libc::sock_extended_err =
                        unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(c).cast()) };
                    if ee.ee_errno == 0 && ee.ee_origin == SO_EE_ORIGIN_ZEROCOPY {
                        done += self.complete(
                            ee.ee_info,
                            ee.ee_data,
                            ee.ee_code & SO_EE_CODE_ZEROCOPY_COPIED != 0,
                        );
                    }
                }
                c = unsafe { libc::CMSG_NXTHDR(&msg, c) };
            }
        }
    }

    /// Send calls `lo..=hi` (wrapping) completed.
    fn complete(&mut self, lo: u32, hi: u32, copied: bool) -> u64 {
        let n = hi.wrapping_sub(lo) as u64 + 1;
        let mut id = lo;
        let mask = self.slot_of.len() - 1;
        for _ in 0..n.min(self.slot_of.len() as u64) {
            let slot = self.slot_of[id as usize & mask] as usize;
            self.pending[slot] = self.pending[slot].saturating_sub(1);
            id = id.wrapping_add(1);
        }
        self.counts.completions += n;
        if copied {
            self.counts.copied += n;
        }
        n
    }

    /// At the end: reap until every send has completed or `limit` has passed.
    pub fn settle(&mut self, fd: RawFd, limit: std::time::Duration) -> io::Result<()> {
        let deadline = std::time::Instant::now() + limit;
        loop {
            self.reap(fd)?;
            let now = std::time::Instant::now();
            if self.outstanding() == 0 || now >= deadline {
                return Ok(());
            }
            wait_for_completion(
                fd,
                (deadline - now).min(std::time::Duration::from_millis(10)),
            )?;
        }
    }
}

/// Sleep until `fd` reports POLLERR (a completion or a socket error) or
/// `timeout` passes: the wait of a full ring under the blocking driver. An
/// interrupting signal (the engine's watchdog) ends it early. Returns the
/// poll events (0 after a timeout or a signal).
pub fn wait_for_completion(fd: RawFd, timeout: std::time::Duration) -> io::Result<i16> {
    // No events asked for: poll always reports POLLERR and POLLHUP.
    super::socket::poll_one(fd, 0, timeout.as_millis().max(1) as libc::c_int)
}

/// The socket's pending error (SO_ERROR), if any: what a POLLERR that
/// brought no completion means.
pub fn socket_error(fd: RawFd) -> io::Result<Option<io::Error>> {
    let mut err: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: err and len outlive the call and len is err's size.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            (&mut err as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((err != 0).then(|| io::Error::from_raw_os_error(err)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_free_only_when_all_their_sends_complete() {
        let mut z = Completions::new(RING_SLOTS, ID_WINDOW);
        // Pretend two partial sends from slot 0 (ids 0, 1) and one from slot 1 (id 2).
        z.sent(0, 2);
        z.sent(1, 1);
        assert_eq!(z.complete(1, 2, true), 2);
        assert!(!z.slot_free(0) && z.slot_free(1));
        assert_eq!(z.complete(0, 0, false), 1);
        assert!((0..RING_SLOTS).all(|s| z.slot_free(s)));
        assert_eq!(
            z.counts(),
            ZeroCopyCounts {
                sends: 3,
                completions: 3,
                copied: 2
            }
        );
        assert_eq!(z.outstanding(), 0);
    }

    #[test]
    fn ranges_wrap_around_the_id_space() {
        let mut z = Completions::new(RING_SLOTS, ID_WINDOW);
        assert_eq!(z.complete(u32::MAX - 1, 1, false), 4);
    }
}
