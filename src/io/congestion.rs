//! The congestion control a TCP data socket uses, read back with
//! getsockopt(TCP_CONGESTION) once the test has run, for the result (and
//! netperf's LOCAL_CONG_CONTROL, REMOTE_CONG_CONTROL). The system default
//! (net.ipv4.tcp_congestion_control) is only what a socket starts with:
//! `--cc`, a route's `congctl` or a BPF program may give it another, and
//! the socket is the one that knows. Read once per end, never on the data
//! path.

use std::io;
use std::os::fd::RawFd;

/// TCP_CA_NAME_MAX (include/net/tcp.h): the longest name and its NUL.
const NAME_MAX: usize = 16;

/// The congestion control of TCP socket `fd`.
pub fn of(fd: RawFd) -> io::Result<String> {
    let mut name = [0u8; NAME_MAX];
    let mut len = NAME_MAX as libc::socklen_t;
    // SAFETY: the buffer and its length are ours and outlive the call.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let name = &name[..(len as usize).min(NAME_MAX)];
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    Ok(String::from_utf8_lossy(&name[..end]).into_owned())
}

/// [`of`] a data socket of the end (`fd`), or where it keeps no long-lived
/// one (a connection test's connections are closed), of a fresh TCP
/// socket given `asked` (`--cc`) as its data sockets are; None for a UDP
/// test (`udp`), or when neither can be read.
pub fn of_or_probe(fd: Option<RawFd>, asked: Option<&str>, udp: bool) -> Option<String> {
    if udp {
        return None;
    }
    if let Some(fd) = fd {
        return of(fd).ok();
    }
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).ok()?;
    if let Some(cc) = asked {
        s.set_tcp_congestion(cc.as_bytes()).ok()?;
    }
    use std::os::fd::AsRawFd;
    of(s.as_raw_fd()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh socket reads the system default; one given reno (always
    /// built in) reads reno.
    #[test]
    fn reads_back_what_the_socket_uses() {
        let default = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control")
            .map(|s| s.trim().to_string())
            .ok();
        assert_eq!(of_or_probe(None, None, false), default);
        assert_eq!(
            of_or_probe(None, Some("reno"), false).as_deref(),
            Some("reno")
        );
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        assert_eq!(of_or_probe(None, Some("reno"), true), None);
        s.set_tcp_congestion(b"reno").unwrap();
        use std::os::fd::AsRawFd;
        assert_eq!(of(s.as_raw_fd()).unwrap(), "reno");
    }
}
