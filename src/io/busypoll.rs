//! The kernel's own busy polling on data sockets: SO_BUSY_POLL
//! (`--busy-poll USEC`: a receive with nothing queued polls the device's
//! NAPI queue this long before it sleeps) and SO_PREFER_BUSY_POLL
//! (`--prefer-busy-poll`: the device's interrupts stay deferred while the
//! application polls), set on both ends' data sockets and read back, so a
//! result says what the kernel applied rather than what was asked.
//!
//! Both act only where the receiving device has NAPI (loopback and veth
//! have none). The kernel refuses an SO_BUSY_POLL above the socket's
//! current value (`net.core.busy_read` for a new socket) without
//! CAP_NET_ADMIN, and SO_PREFER_BUSY_POLL on without it; a kernel older
//! than 5.11 lacks SO_PREFER_BUSY_POLL (ENOPROTOOPT). Each refusal names
//! the flag and the way out.

use std::io;
use std::os::fd::RawFd;

use serde::{Deserialize, Serialize};

/// SO_PREFER_BUSY_POLL (Linux 5.11, include/uapi/asm-generic/socket.h);
/// the libc crate does not name it.
pub const SO_PREFER_BUSY_POLL: libc::c_int = 69;

/// SO_BUSY_POLL and SO_PREFER_BUSY_POLL as one end's kernel read them back
/// from a data socket given the test's options.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct BusyPollSet {
    /// SO_BUSY_POLL in µs as getsockopt reads it (0: no busy polling).
    pub busy_poll_us: u32,
    /// SO_PREFER_BUSY_POLL as getsockopt reads it.
    pub prefer_busy_poll: bool,
}

/// `net.core.busy_read`: the SO_BUSY_POLL a new socket starts with, and
/// the most a process without CAP_NET_ADMIN may set.
pub fn busy_read_sysctl() -> Option<u32> {
    std::fs::read_to_string("/proc/sys/net/core/busy_read")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Set what was asked on `fd`: SO_BUSY_POLL to `us` where given, and
/// SO_PREFER_BUSY_POLL on where `prefer`.
pub fn apply(fd: RawFd, us: Option<u32>, prefer: bool) -> io::Result<()> {
    if let Some(us) = us
        && let Err(e) = set(fd, libc::SO_BUSY_POLL, us as libc::c_int)
    {
        let why = match e.raw_os_error() {
            Some(libc::EPERM) => format!(
                "the kernel refused it (EPERM): above net.core.busy_read ({}) SO_BUSY_POLL needs CAP_NET_ADMIN; run as root or with that capability, or raise the sysctl",
                busy_read_sysctl().map_or("unreadable".into(), |v| format!("{v} µs"))
            ),
            _ => format!("setting SO_BUSY_POLL: {e}"),
        };
        return Err(io::Error::new(e.kind(), format!("--busy-poll {us}: {why}")));
    }
    if prefer && let Err(e) = set(fd, SO_PREFER_BUSY_POLL, 1) {
        let why = match e.raw_os_error() {
            Some(libc::EPERM) => {
                "the kernel refused it (EPERM): SO_PREFER_BUSY_POLL needs CAP_NET_ADMIN; run as root or with that capability".to_string()
            }
            Some(libc::ENOPROTOOPT) => {
                "this kernel lacks SO_PREFER_BUSY_POLL (Linux 5.11 or later)".to_string()
            }
            _ => format!("setting SO_PREFER_BUSY_POLL: {e}"),
        };
        return Err(io::Error::new(
            e.kind(),
            format!("--prefer-busy-poll: {why}"),
        ));
    }
    Ok(())
}

/// What `fd` has, read back; a kernel without SO_PREFER_BUSY_POLL reads off.
pub fn read_back(fd: RawFd) -> io::Result<BusyPollSet> {
    Ok(BusyPollSet {
        busy_poll_us: get(fd, libc::SO_BUSY_POLL)?.max(0) as u32,
        prefer_busy_poll: get(fd, SO_PREFER_BUSY_POLL).is_ok_and(|v| v != 0),
    })
}

/// What a data socket of this end gets: a fresh socket of the test's
/// transport (`udp`, else TCP) given the options, read back. None when
/// neither option was asked for (the result then carries nothing).
pub fn as_set(
    us: Option<u32>,
    prefer: bool,
    udp: bool,
    ipv6: bool,
) -> io::Result<Option<BusyPollSet>> {
    if us.is_none() && !prefer {
        return Ok(None);
    }
    use socket2::{Domain, Protocol, Socket, Type};
    use std::os::fd::AsRawFd;
    let domain = if ipv6 { Domain::IPV6 } else { Domain::IPV4 };
    let s = if udp {
        Socket::new(domain, Type::DGRAM.cloexec(), Some(Protocol::UDP))?
    } else {
        Socket::new(domain, Type::STREAM.cloexec(), Some(Protocol::TCP))?
    };
    apply(s.as_raw_fd(), us, prefer)?;
    read_back(s.as_raw_fd()).map(Some)
}

fn set(fd: RawFd, name: libc::c_int, v: libc::c_int) -> io::Result<()> {
    // SAFETY: the value outlives the call and its size is given.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            name,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn get(fd: RawFd, name: libc::c_int) -> io::Result<libc::c_int> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: v and len are valid for writes of the given size.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            name,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nothing asked, nothing reported; asked, the kernel's figure (as
    /// root any value is taken; as another user, a value above the sysctl
    /// is refused naming the flag and the capability).
    #[test]
    fn asked_values_are_read_back_or_refused_by_name() {
        assert_eq!(as_set(None, false, false, false).unwrap(), None);
        match as_set(Some(50), false, true, false) {
            Ok(set) => assert_eq!(set.unwrap().busy_poll_us, 50),
            Err(e) => {
                let e = e.to_string();
                assert!(
                    e.contains("--busy-poll 50") && e.contains("CAP_NET_ADMIN"),
                    "{e}"
                );
            }
        }
        match as_set(None, true, false, false) {
            Ok(set) => assert!(set.unwrap().prefer_busy_poll),
            Err(e) => assert!(e.to_string().starts_with("--prefer-busy-poll: "), "{e}"),
        }
    }
}
