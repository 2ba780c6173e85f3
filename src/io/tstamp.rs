//! Kernel receive timestamps (SO_TIMESTAMPNS): the moment a packet reached
//! the host, on CLOCK_REALTIME, read from the control message `recvmsg`
//! returns with it. They leave out the time a packet waits in the socket
//! for its reader to wake, which is what packet-train dispersion
//! (`thrum run capacity`) and round-trip times (`thrum ping`) must not see.

use std::io;
use std::mem::size_of;
use std::os::fd::RawFd;

/// Ask the kernel to stamp every packet `fd` receives.
pub fn enable(fd: RawFd) -> io::Result<()> {
    let on: libc::c_int = 1;
    // SAFETY: SO_TIMESTAMPNS takes an int; pointer and length describe it.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&on as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Receive one datagram into `buf` without blocking: its length and its
/// kernel timestamp in ns (None where the kernel gave none).
pub fn recv(fd: RawFd, buf: &mut [u8]) -> io::Result<(usize, Option<u64>)> {
    recv_meta(fd, buf).map(|(n, at, _)| (n, at))
}

/// As [`recv`], and the datagram's TTL or hop limit where the socket asked
/// for it (IP_RECVTTL, IPV6_RECVHOPLIMIT): what `thrum ping -v` prints.
pub fn recv_meta(fd: RawFd, buf: &mut [u8]) -> io::Result<(usize, Option<u64>, Option<u8>)> {
    let mut cmsg = [0u64; 16];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: msghdr is plain old data; all-zero is valid.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cmsg.as_mut_ptr().cast();
    msg.msg_controllen = size_of::<[u64; 16]>() as _;
    // SAFETY: msg points at live buffers of the lengths it states.
    let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let (mut at, mut hops) = (None, None);
    // SAFETY: the CMSG macros walk the control buffer the kernel filled,
    // within msg_controllen.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SO_TIMESTAMPNS {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                at = Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64);
            }
            let (level, kind) = ((*c).cmsg_level, (*c).cmsg_type);
            if (level == libc::IPPROTO_IP && kind == libc::IP_TTL)
                || (level == libc::IPPROTO_IPV6 && kind == libc::IPV6_HOPLIMIT)
            {
                let v: libc::c_int = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                hops = u8::try_from(v).ok();
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n as usize, at, hops))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;

    #[test]
    fn datagrams_come_stamped() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        enable(rx.as_raw_fd()).unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.send_to(b"abc", rx.local_addr().unwrap()).unwrap();
        let mut buf = [0u8; 16];
        let (n, at) = recv(rx.as_raw_fd(), &mut buf).unwrap();
        assert_eq!(&buf[..n], b"abc");
        assert!(at.is_some_and(|t| t > 1_600_000_000_000_000_000));
        assert!(recv(rx.as_raw_fd(), &mut buf).is_err(), "nothing more");
    }
}
