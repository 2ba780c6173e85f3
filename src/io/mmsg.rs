//! Batched datagram I/O: `sendmmsg`/`recvmmsg` over buffers allocated once.
//!
//! One syscall moves up to a batch of datagrams, which is where a UDP
//! packet-rate test spends its time. The headers and iovecs point into the
//! batch's own heap buffers, which never move after construction.

use std::io;
use std::os::fd::RawFd;

/// Datagrams per syscall.
pub const BATCH: usize = 32;

pub struct MsgBatch {
    size: usize,
    bufs: Box<[u8]>,
    iovs: Box<[libc::iovec]>,
    hdrs: Box<[libc::mmsghdr]>,
    /// Control-message space per header (u64-aligned), for UDP_GRO; empty without.
    ctrl: Box<[[u64; CTRL_WORDS]]>,
}

/// Control space per datagram: a cmsg carrying an int (UDP_GRO's segment
/// size, 24 bytes) and one carrying a timespec (SO_TIMESTAMPNS, 32).
const CTRL_WORDS: usize = 8;

// include/uapi/linux/udp.h.
const UDP_SEGMENT: libc::c_int = 103;
const UDP_GRO: libc::c_int = 104;

// The raw pointers point into the batch's own boxed buffers, which move with it.
unsafe impl Send for MsgBatch {}

impl MsgBatch {
    /// `count` buffers of `size` bytes each.
    pub fn new(count: usize, size: usize) -> MsgBatch {
        let mut bufs = vec![0u8; count * size.max(1)].into_boxed_slice();
        let mut iovs: Box<[libc::iovec]> = (0..count)
            .map(|i| libc::iovec {
                // SAFETY: i * size is within bufs.
                iov_base: unsafe { bufs.as_mut_ptr().add(i * size.max(1)) }.cast(),
                iov_len: size,
            })
            .collect();
        let hdrs: Box<[libc::mmsghdr]> = (0..count)
            .map(|i| {
                // SAFETY: msghdr is plain data; zero is a valid empty header.
                let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
                h.msg_hdr.msg_iov = unsafe { iovs.as_mut_ptr().add(i) };
                h.msg_hdr.msg_iovlen = 1;
                h
            })
            .collect();
        MsgBatch {
            size,
            bufs,
            iovs,
            hdrs,
            ctrl: Box::new([]),
        }
    }

    /// Like [`MsgBatch::new`], with room for a control message per datagram
    /// (the receiving side of [`enable_gro`]).
    pub fn with_control(count: usize, size: usize) -> MsgBatch {
        let mut b = MsgBatch::new(count, size);
        b.ctrl = vec![[0u64; CTRL_WORDS]; count].into_boxed_slice();
        for (h, c) in b.hdrs.iter_mut().zip(b.ctrl.iter_mut()) {
            h.msg_hdr.msg_control = c.as_mut_ptr().cast();
        }
        b
    }

    /// The UDP_GRO segment size the kernel attached to datagram `i` as
    /// received: it carries several datagrams of that size back to back
    /// (the last may be shorter). None: one datagram.
    pub fn gro_segment(&self, i: usize) -> Option<usize> {
        if self.ctrl.is_empty() {
            return None;
        }
        let msg = &self.hdrs[i].msg_hdr;
        // SAFETY: the kernel filled the control buffer this header points at;
        // the CMSG macros stay within msg_controllen.
        let mut c = unsafe { libc::CMSG_FIRSTHDR(msg) };
        while !c.is_null() {
            let h = unsafe { &*c };
            if h.cmsg_level == libc::SOL_UDP && h.cmsg_type == UDP_GRO {
                // SAFETY: a UDP_GRO message carries one int.
                let seg: libc::c_int =
                    unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(c).cast()) };
                return (seg > 0).then_some(seg as usize);
            }
            c = unsafe { libc::CMSG_NXTHDR(msg, c) };
        }
        None
    }

    /// The kernel's receive timestamp of datagram `i` (SO_TIMESTAMPNS,
    /// CLOCK_REALTIME ns), where the socket asked for them and the batch
    /// has control space.
    pub fn timestamp(&self, i: usize) -> Option<u64> {
        if self.ctrl.is_empty() {
            return None;
        }
        let msg = &self.hdrs[i].msg_hdr;
        // SAFETY: as in `gro_segment`.
        let mut c = unsafe { libc::CMSG_FIRSTHDR(msg) };
        while !c.is_null() {
            let h = unsafe { &*c };
            if h.cmsg_level == libc::SOL_SOCKET && h.cmsg_type == libc::SO_TIMESTAMPNS {
                // SAFETY: an SO_TIMESTAMPNS message carries one timespec.
                let ts: libc::timespec =
                    unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(c).cast()) };
                return Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
            }
            c = unsafe { libc::CMSG_NXTHDR(msg, c) };
        }
        None
    }

    /// Bytes of each buffer.
    pub fn size(&self) -> usize {
        self.size
    }

    pub fn capacity(&self) -> usize {
        self.hdrs.len()
    }

    /// Buffer `i`, to fill before `send`.
    pub fn buf_mut(&mut self, i: usize) -> &mut [u8] {
        &mut self.bufs[i * self.size.max(1)..][..self.size]
    }

    /// Datagram `i` as received: its bytes.
    pub fn received(&self, i: usize) -> &[u8] {
        let len = (self.hdrs[i].msg_len as usize).min(self.size);
        &self.bufs[i * self.size.max(1)..][..len]
    }

    /// Send the first `n` buffers as `n` datagrams of `len` bytes on a connected socket.
    pub fn send(&mut self, fd: RawFd, n: usize, len: usize) -> io::Result<usize> {
        self.send_flags(fd, n, len, 0)
    }

    /// [`MsgBatch::send`] with more `flags` (MSG_ZEROCOPY).
    pub fn send_flags(
        &mut self,
        fd: RawFd,
        n: usize,
        len: usize,
        flags: libc::c_int,
    ) -> io::Result<usize> {
        let n = n.min(self.hdrs.len());
        for iov in &mut self.iovs[..n] {
            iov.iov_len = len.min(self.size);
        }
        // EINTR is returned, not retried, and the raw syscall skips glibc's
        // cancellation-point bookkeeping, both as in socket::send.
        // SAFETY: hdrs[..n] point at valid iovecs and buffers.
        let r = unsafe {
            libc::syscall(
                libc::SYS_sendmmsg,
                fd,
                self.hdrs.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_NOSIGNAL | flags,
            )
        };
        if r >= 0 {
            return Ok(r as usize);
        }
        Err(io::Error::last_os_error())
    }

    /// Receive up to the whole batch; returns how many datagrams arrived.
    /// MSG_WAITFORONE: a blocking socket returns as soon as one is there.
    pub fn recv(&mut self, fd: RawFd) -> io::Result<usize> {
        for iov in self.iovs.iter_mut() {
            iov.iov_len = self.size;
        }
        if !self.ctrl.is_empty() {
            // The kernel overwrites msg_controllen with what it wrote.
            for h in self.hdrs.iter_mut() {
                // `as _`: size_t on glibc, socklen_t (u32) on musl.
                h.msg_hdr.msg_controllen = (CTRL_WORDS * 8) as _;
            }
        }
        // EINTR is returned, not retried; raw syscall as in send above.
        // SAFETY: every header points at a valid iovec and buffer of `size` bytes.
        let r = unsafe {
            libc::syscall(
                libc::SYS_recvmmsg,
                fd,
                self.hdrs.as_mut_ptr(),
                self.hdrs.len() as libc::c_uint,
                libc::MSG_WAITFORONE,
                std::ptr::null_mut::<libc::timespec>(),
            )
        };
        if r >= 0 {
            return Ok(r as usize);
        }
        Err(io::Error::last_os_error())
    }
}

/// UDP GSO (Linux 4.18): every send of more than `segment` bytes leaves as
/// datagrams of `segment` bytes, split by the kernel (or the NIC).
pub fn enable_gso(fd: RawFd, segment: usize) -> io::Result<()> {
    let what = "UDP_SEGMENT (--gso)";
    super::socket::set_int_option(fd, libc::SOL_UDP, UDP_SEGMENT, segment as libc::c_int, what)
}

/// UDP GRO (Linux 5.0): datagrams may arrive coalesced, with their segment
/// size in a control message ([`MsgBatch::gro_segment`]).
pub fn enable_gro(fd: RawFd) -> io::Result<()> {
    super::socket::set_int_option(fd, libc::SOL_UDP, UDP_GRO, 1, "UDP_GRO (--gso)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_batch_goes_out_and_comes_back_whole() {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        a.connect(b.local_addr().unwrap()).unwrap();
        let mut tx = MsgBatch::new(4, 100);
        for i in 0..4 {
            tx.buf_mut(i)[0] = i as u8 + 1;
        }
        assert_eq!(tx.send(a.as_raw_fd(), 4, 10).unwrap(), 4);
        let mut rx = MsgBatch::new(8, 100);
        let mut got = Vec::new();
        while got.len() < 4 {
            let n = rx.recv(b.as_raw_fd()).unwrap();
            for i in 0..n {
                assert_eq!(rx.received(i).len(), 10);
                got.push(rx.received(i)[0]);
            }
        }
        assert_eq!(got, vec![1, 2, 3, 4]);
    }
}
