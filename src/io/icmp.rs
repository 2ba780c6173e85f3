//! ICMP echo sockets for `thrum ping`: the unprivileged ICMP datagram
//! socket (`socket(AF_INET, SOCK_DGRAM, IPPROTO_ICMP)`, Linux 3.0+) where
//! `net.ipv4.ping_group_range` admits the caller's group, else a raw socket
//! (root or CAP_NET_RAW), else an error that says which of the two to grant.
//!
//! Times are taken the way iputils `ping` takes them, so that the two agree
//! on one path: the send time from CLOCK_REALTIME just before `send`, the
//! receive time from the kernel's receive timestamp (SO_TIMESTAMPNS, the
//! same clock), so the time a reply waits in the socket for this process to
//! wake is not counted.
//!
//! A datagram socket's replies come without the IP header, and the kernel
//! sets the echo identifier to the socket's own and delivers only replies
//! that carry it. A raw socket sees every ICMP packet for the host, IP
//! header first: it is connected to the peer (a raw socket then takes only
//! that source) and the identifier and type are checked here.
//!
//! IPv6 is the same with ICMPv6 (RFC 4443: echo request 128, reply 129):
//! `socket(AF_INET6, SOCK_DGRAM, IPPROTO_ICMPV6)`, admitted by the same
//! `net.ipv4.ping_group_range`, or a raw ICMPv6 socket. Neither hands over
//! the IPv6 header, and the kernel fills in the ICMPv6 checksum (it covers
//! a pseudo-header of addresses this process need not know). The TTL or
//! hop limit of each reply comes as a control message (IP_RECVTTL,
//! IPV6_RECVHOPLIMIT), for the per-reply line of `thrum ping -v`.

use std::io;
use std::mem::size_of;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// ICMP echo request and reply types (RFC 792).
const ECHO_REQUEST: u8 = 8;
const ECHO_REPLY: u8 = 0;
/// ICMPv6 echo request and reply types (RFC 4443).
const ECHO6_REQUEST: u8 = 128;
const ECHO6_REPLY: u8 = 129;
/// The echo header: type, code, checksum, identifier, sequence number.
pub const ECHO_HEADER: usize = 8;

/// Which kind of socket carries the echoes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// SOCK_DGRAM, IPPROTO_ICMP: no privilege, within ping_group_range.
    Dgram,
    /// SOCK_RAW, IPPROTO_ICMP: root or CAP_NET_RAW.
    Raw,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::Dgram => "icmp_dgram",
            Method::Raw => "icmp_raw",
        }
    }
}

/// What one wait on the socket brought.
#[derive(Debug)]
pub enum Event {
    /// An echo reply with this sequence number, received at `at_ns`
    /// (CLOCK_REALTIME, the kernel's timestamp where it gave one), of
    /// `bytes` ICMP bytes (header and data), with the TTL or hop limit it
    /// arrived with where the kernel said.
    Reply {
        seq: u16,
        at_ns: u64,
        bytes: usize,
        ttl: Option<u8>,
    },
    /// The kernel reported an error for the socket: an ICMP destination
    /// unreachable, or a neighbour that never answered ARP.
    Error(io::Error),
    /// Nothing in time.
    Timeout,
}

/// A connected ICMP echo socket toward one host, IPv4 or IPv6.
pub struct EchoSocket {
    fd: OwnedFd,
    method: Method,
    ident: u16,
    v6: bool,
}

fn socket(v6: bool, kind: libc::c_int) -> io::Result<OwnedFd> {
    let (family, proto) = if v6 {
        (libc::AF_INET6, libc::IPPROTO_ICMPV6)
    } else {
        (libc::AF_INET, libc::IPPROTO_ICMP)
    };
    // SAFETY: plain socket(2) call; the result is checked before use.
    let fd = unsafe { libc::socket(family, kind | libc::SOCK_CLOEXEC, proto) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a socket we just opened and own alone.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn ping_group_range() -> String {
    std::fs::read_to_string("/proc/sys/net/ipv4/ping_group_range")
        .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// The RFC 1071 Internet checksum of `b`.
pub fn checksum(b: &[u8]) -> u16 {
    let mut sum: u32 = b
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// An echo request: header, then `payload` bytes of a counting pattern.
pub fn echo_request(ident: u16, seq: u16, payload: usize) -> Vec<u8> {
    echo_request_of(ECHO_REQUEST, ident, seq, payload)
}

/// An echo request of ICMP type `kind` (8, or ICMPv6's 128: the kernel
/// overwrites the checksum computed here with the one over its
/// pseudo-header).
fn echo_request_of(kind: u8, ident: u16, seq: u16, payload: usize) -> Vec<u8> {
    let mut p = vec![kind, 0, 0, 0];
    p.extend_from_slice(&ident.to_be_bytes());
    p.extend_from_slice(&seq.to_be_bytes());
    p.extend((0..payload).map(|i| i as u8));
    let c = checksum(&p);
    p[2..4].copy_from_slice(&c.to_be_bytes());
    p
}

/// The sequence number of an echo reply in `b` (ICMP from its header on),
/// if it is one and carries `ident` (`None`: any identifier).
pub fn parse_reply(b: &[u8], ident: Option<u16>) -> Option<u16> {
    parse_reply_of(ECHO_REPLY, b, ident)
}

/// As [`parse_reply`] for replies of ICMP type `kind` (0, or ICMPv6's 129).
fn parse_reply_of(kind: u8, b: &[u8], ident: Option<u16>) -> Option<u16> {
    if b.len() < ECHO_HEADER || b[0] != kind || b[1] != 0 {
        return None;
    }
    let id = u16::from_be_bytes([b[4], b[5]]);
    if ident.is_some_and(|want| want != id) {
        return None;
    }
    Some(u16::from_be_bytes([b[6], b[7]]))
}

impl EchoSocket {
    /// A socket toward `peer`: the datagram kind first, then raw; the
    /// error names both ways to be allowed.
    pub fn open(peer: IpAddr) -> anyhow::Result<EchoSocket> {
        let v6 = peer.is_ipv6();
        let (fd, method) = match socket(v6, libc::SOCK_DGRAM) {
            Ok(fd) => (fd, Method::Dgram),
            Err(dgram) => match socket(v6, libc::SOCK_RAW) {
                Ok(fd) => (fd, Method::Raw),
                Err(raw) => anyhow::bail!(
                    "no ICMP socket: the unprivileged kind was refused ({dgram}; \
                     net.ipv4.ping_group_range is \"{}\" and must include your group id, \
                     e.g. sysctl -w net.ipv4.ping_group_range=\"0 2147483647\") and a raw one \
                     needs root or CAP_NET_RAW ({raw}); or measure TCP connect time with --tcp PORT",
                    ping_group_range()
                ),
            },
        };
        // Best effort: without stamps the time of reading stands in.
        let _ = super::tstamp::enable(fd.as_raw_fd());
        // Best effort too: without it `-v` prints no ttl.
        let _ = if v6 {
            set_int(fd.as_raw_fd(), libc::IPPROTO_IPV6, libc::IPV6_RECVHOPLIMIT)
        } else {
            set_int(fd.as_raw_fd(), libc::IPPROTO_IP, libc::IP_RECVTTL)
        };
        let sa = socket2::SockAddr::from(std::net::SocketAddr::new(peer, 0));
        // SAFETY: sa holds a valid sockaddr of the length it states.
        let rc = unsafe { libc::connect(fd.as_raw_fd(), sa.as_ptr().cast(), sa.len()) };
        if rc != 0 {
            let e = io::Error::last_os_error();
            anyhow::bail!("cannot reach {peer}: {e}");
        }
        // A datagram socket's identifier is its "port", set by connect's
        // implicit bind; a raw one uses ours.
        let ident = match method {
            Method::Dgram => {
                // SAFETY: sockaddr_storage is plain old data; all-zero is valid.
                let mut local: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
                let mut len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
                // SAFETY: local and len describe a writable sockaddr_storage.
                unsafe {
                    libc::getsockname(
                        fd.as_raw_fd(),
                        (&mut local as *mut libc::sockaddr_storage).cast(),
                        &mut len,
                    )
                };
                // SAFETY: the kernel wrote a sockaddr of len bytes.
                let local = unsafe { socket2::SockAddr::new(local, len) };
                local.as_socket().map_or(0, |a| a.port())
            }
            Method::Raw => std::process::id() as u16,
        };
        Ok(EchoSocket {
            fd,
            method,
            ident,
            v6,
        })
    }

    pub fn method(&self) -> Method {
        self.method
    }

    /// Send echo request `seq` with `payload` bytes of data; returns the
    /// send time (CLOCK_REALTIME ns).
    pub fn send(&self, seq: u16, payload: usize) -> io::Result<u64> {
        let kind = if self.v6 { ECHO6_REQUEST } else { ECHO_REQUEST };
        let p = echo_request_of(kind, self.ident, seq, payload);
        let at = crate::clock::realtime_ns();
        // SAFETY: p is valid for reads of its length.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), p.as_ptr().cast(), p.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(at)
    }

    /// Wait up to `wait` for a reply or an error.
    pub fn next(&self, wait: Duration) -> Event {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = wait.as_millis().min(i32::MAX as u128) as libc::c_int;
        // Round a sub-millisecond wait up, or poll would spin.
        let ms = if ms == 0 && !wait.is_zero() { 1 } else { ms };
        // SAFETY: pfd is one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Event::Timeout
            } else {
                Event::Error(e)
            };
        }
        if n == 0 {
            return Event::Timeout;
        }
        loop {
            match self.recv() {
                Ok(Some(ev)) => return ev,
                // Not ours (a raw socket sees every echo): read on without
                // blocking; an empty queue is a timeout for this wait.
                Ok(None) => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Event::Timeout,
                Err(e) => return Event::Error(e),
            }
        }
    }

    fn recv(&self) -> io::Result<Option<Event>> {
        let mut buf = [0u8; 65536];
        let (n, at_ns, ttl) = super::tstamp::recv_meta(self.fd.as_raw_fd(), &mut buf)?;
        let at_ns = at_ns.unwrap_or_else(crate::clock::realtime_ns);
        let data = &buf[..n];
        let (icmp, ident) = match (self.method, self.v6) {
            (Method::Dgram, _) => (data, None),
            // A raw ICMPv6 socket gets no IPv6 header (RFC 3542 3.).
            (Method::Raw, true) => (data, Some(self.ident)),
            (Method::Raw, false) => {
                let ihl = usize::from(data.first().map_or(0, |b| b & 0x0f)) * 4;
                (data.get(ihl..).unwrap_or_default(), Some(self.ident))
            }
        };
        let kind = if self.v6 { ECHO6_REPLY } else { ECHO_REPLY };
        Ok(parse_reply_of(kind, icmp, ident).map(|seq| Event::Reply {
            seq,
            at_ns,
            bytes: icmp.len(),
            ttl,
        }))
    }
}

fn set_int(fd: std::os::fd::RawFd, level: libc::c_int, name: libc::c_int) -> io::Result<()> {
    let on: libc::c_int = 1;
    // SAFETY: the option takes an int; pointer and length describe it.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&on as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn checksum_follows_rfc_1071() {
        // RFC 1071's example: 00 01 f2 03 f4 f5 f6 f7 sums to ddf2.
        assert_eq!(
            checksum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]),
            !0xddf2
        );
        // A packet with its checksum in place sums to zero.
        let p = echo_request(0x1234, 7, 57);
        assert_eq!(checksum(&p), 0);
        assert_eq!(p.len(), ECHO_HEADER + 57);
    }

    #[test]
    fn replies_are_recognised_by_type_and_identifier() {
        let mut r = echo_request(9, 300, 4);
        assert_eq!(parse_reply(&r, None), None, "a request is no reply");
        r[0] = ECHO_REPLY;
        assert_eq!(parse_reply(&r, None), Some(300));
        assert_eq!(parse_reply(&r, Some(9)), Some(300));
        assert_eq!(parse_reply(&r, Some(10)), None);
        assert_eq!(parse_reply(&r[..7], None), None);
    }

    #[test]
    fn loopback_answers_when_a_socket_opens() {
        // Unprivileged and without raw rights this cannot open; then the
        // error must say how to allow it.
        for peer in [
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
        ] {
            match EchoSocket::open(peer) {
                Ok(s) => {
                    let sent = s.send(1, 56).unwrap();
                    let deadline = std::time::Instant::now() + Duration::from_secs(5);
                    loop {
                        assert!(
                            std::time::Instant::now() < deadline,
                            "no echo reply from {peer}"
                        );
                        if let Event::Reply {
                            seq: 1,
                            at_ns,
                            bytes,
                            ttl,
                        } = s.next(Duration::from_secs(1))
                        {
                            assert!(at_ns >= sent);
                            assert_eq!(bytes, ECHO_HEADER + 56);
                            assert!(ttl.is_some_and(|t| t > 0), "{peer}: {ttl:?}");
                            break;
                        }
                    }
                }
                Err(e) => assert!(e.to_string().contains("ping_group_range"), "{e}"),
            }
        }
    }
}
