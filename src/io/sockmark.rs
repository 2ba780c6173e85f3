//! SO_MARK and TCP_TX_DELAY on a data socket, and reading them back
//! (`--mark`, `--tcp-tx-delay`; see [`crate::plan::sockets`]). Set once per
//! socket at its setup, never on the data path.

use std::io;
use std::os::fd::RawFd;

use crate::plan::sockets::SocketMarks;

/// TCP_TX_DELAY (include/uapi/linux/tcp.h; Linux 5.12 on), which the libc
/// crate does not name.
const TCP_TX_DELAY: libc::c_int = 37;

fn set_int(fd: RawFd, level: libc::c_int, name: libc::c_int, v: u32, what: &str) -> io::Result<()> {
    let v = v as libc::c_int;
    // SAFETY: the value outlives the call and its size is given.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("{what}: {e}")));
    }
    Ok(())
}

fn get_int(fd: RawFd, level: libc::c_int, name: libc::c_int) -> io::Result<u32> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the buffer and its length are ours and outlive the call.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            level,
            name,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(v as u32)
}

/// SO_MARK, where asked for (CAP_NET_ADMIN or CAP_NET_RAW: the error says so).
pub fn apply_mark(fd: RawFd, m: &SocketMarks) -> io::Result<()> {
    match m.mark {
        Some(mark) => set_int(
            fd,
            libc::SOL_SOCKET,
            libc::SO_MARK,
            mark,
            "SO_MARK (--mark; needs CAP_NET_ADMIN or CAP_NET_RAW)",
        ),
        None => Ok(()),
    }
}

/// TCP_TX_DELAY on a TCP socket, where asked for.
pub fn apply_tx_delay(fd: RawFd, m: &SocketMarks) -> io::Result<()> {
    match m.tcp_tx_delay_us {
        Some(us) => set_int(
            fd,
            libc::IPPROTO_TCP,
            TCP_TX_DELAY,
            us,
            "TCP_TX_DELAY (--tcp-tx-delay; Linux 5.12 on)",
        ),
        None => Ok(()),
    }
}

/// What the kernel holds for the options `asked` names, read back from
/// `fd` with getsockopt; None when nothing was asked for.
pub fn read_back(fd: RawFd, asked: &SocketMarks) -> Option<SocketMarks> {
    if asked.is_unset() {
        return None;
    }
    Some(SocketMarks {
        mark: asked
            .mark
            .and_then(|_| get_int(fd, libc::SOL_SOCKET, libc::SO_MARK).ok()),
        tcp_tx_delay_us: asked
            .tcp_tx_delay_us
            .and_then(|_| get_int(fd, libc::IPPROTO_TCP, TCP_TX_DELAY).ok()),
    })
}

/// [`read_back`] from a data socket of the end (`fd`), or where it has no
/// long-lived one (UDP, connection tests), from a fresh socket of the
/// transport given the same options, as its data sockets get them.
pub fn read_back_or_probe(
    fd: Option<RawFd>,
    asked: &SocketMarks,
    udp: bool,
) -> Option<SocketMarks> {
    if asked.is_unset() {
        return None;
    }
    if let Some(fd) = fd {
        return read_back(fd, asked);
    }
    let (ty, proto) = if udp {
        (libc::SOCK_DGRAM, libc::IPPROTO_UDP)
    } else {
        (libc::SOCK_STREAM, libc::IPPROTO_TCP)
    };
    // SAFETY: socket(2) with constant arguments; the descriptor is closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, ty | libc::SOCK_CLOEXEC, proto) };
    if fd < 0 {
        return None;
    }
    let _ = apply_mark(fd, asked);
    if !udp {
        let _ = apply_tx_delay(fd, asked);
    }
    let r = read_back(fd, asked);
    // SAFETY: we own fd and close it once.
    unsafe { libc::close(fd) };
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    /// What is set reads back (root here; elsewhere SO_MARK is refused
    /// with a message naming the flag and the capability).
    #[test]
    fn a_mark_and_a_delay_read_back() {
        let s = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let m = SocketMarks {
            mark: Some(7),
            tcp_tx_delay_us: Some(10_000),
        };
        match apply_mark(s.as_raw_fd(), &m) {
            Ok(()) => assert_eq!(read_back(s.as_raw_fd(), &m).unwrap().mark, Some(7)),
            Err(e) => assert!(e.to_string().contains("--mark"), "{e}"),
        }
        if apply_tx_delay(s.as_raw_fd(), &m).is_ok() {
            assert_eq!(
                read_back(s.as_raw_fd(), &m).unwrap().tcp_tx_delay_us,
                Some(10_000)
            );
        }
        assert_eq!(read_back(s.as_raw_fd(), &SocketMarks::default()), None);
    }
}
