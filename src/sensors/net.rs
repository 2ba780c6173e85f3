//! Which interface carries the traffic to a peer, and its packet counters.
//!
//! The interface is what the kernel's routing decides, asked the way
//! `ip route get PEER` asks: an RTM_GETROUTE request on a netlink socket,
//! whose answer names the output interface (RTA_OIF). Guessing from the
//! local address instead (connect a UDP socket, find the interface holding
//! its source address) goes wrong whenever the source address lives on
//! another interface than the one that sends: a peer that is one of our own
//! addresses (routed over `lo`), policy routing, addresses on a dummy
//! device.
//!
//! Counters come from /proc/thread-self/net/dev, which shows the network
//! namespace of the calling thread, the same one the netlink and ioctl
//! sockets here see (setns(2) moves a single thread). /sys/class/net shows
//! the namespace of whoever mounted /sys, so a thread or process that changed
//! namespace without remounting would read another namespace's `lo` there
//! without noticing. /proc/self (kernels before 3.17) and then sysfs are the
//! fallbacks.

use std::io;
use std::mem::size_of;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use serde::{Deserialize, Serialize};

// From include/uapi/linux/netlink.h and rtnetlink.h.
const NLMSG_HDRLEN: usize = 16;
const RTMSG_LEN: usize = 12;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const RTM_NEWROUTE: u16 = 24;
const RTM_GETROUTE: u16 = 26;
const NLM_F_REQUEST: u16 = 1;
const RTA_DST: u16 = 1;
const RTA_OIF: u16 = 4;

/// The name of the interface the kernel routes packets for `peer` through
/// (`lo` for loopback and for the machine's own addresses), or `None` when
/// there is no route or the question cannot be asked.
pub fn route_interface(peer: IpAddr) -> Option<String> {
    let peer = match peer {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(peer, IpAddr::V4),
        v4 => v4,
    };
    if peer.is_unspecified() || peer.is_multicast() {
        return None;
    }
    match route_oif(peer) {
        Some(index) => if_name(index),
        // No netlink (a seccomp sandbox, say): loopback is still certain.
        None if peer.is_loopback() => Some("lo".to_string()),
        None => None,
    }
}

/// The RTM_GETROUTE request for `peer`: header, rtmsg, one RTA_DST.
fn route_request(peer: IpAddr) -> Vec<u8> {
    let (family, addr): (u8, Vec<u8>) = match peer {
        IpAddr::V4(a) => (libc::AF_INET as u8, a.octets().to_vec()),
        IpAddr::V6(a) => (libc::AF_INET6 as u8, a.octets().to_vec()),
    };
    let attr_len = 4 + addr.len();
    let len = NLMSG_HDRLEN + RTMSG_LEN + attr_len;
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&(len as u32).to_ne_bytes());
    m.extend_from_slice(&RTM_GETROUTE.to_ne_bytes());
    m.extend_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    m.extend_from_slice(&1u32.to_ne_bytes()); // sequence number
    m.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel fills it
    // rtmsg: family, dst_len (a host route), src_len, tos, table, protocol,
    // scope, type, flags.
    m.extend_from_slice(&[family, (addr.len() * 8) as u8, 0, 0, 0, 0, 0, 0]);
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(&(attr_len as u16).to_ne_bytes());
    m.extend_from_slice(&RTA_DST.to_ne_bytes());
    m.extend_from_slice(&addr);
    m
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// The output interface index in a netlink answer to [`route_request`].
fn parse_route_reply(buf: &[u8]) -> Option<u32> {
    let mut msg = buf;
    while msg.len() >= NLMSG_HDRLEN {
        let len = u32_at(msg, 0)? as usize;
        if len < NLMSG_HDRLEN || len > msg.len() {
            return None;
        }
        match u16_at(msg, 4)? {
            NLMSG_ERROR | NLMSG_DONE => return None,
            RTM_NEWROUTE => {
                let mut attrs = msg.get(NLMSG_HDRLEN + RTMSG_LEN..len)?;
                while attrs.len() >= 4 {
                    let alen = u16_at(attrs, 0)? as usize;
                    if alen < 4 || alen > attrs.len() {
                        return None;
                    }
                    if u16_at(attrs, 2)? == RTA_OIF {
                        return u32_at(attrs, 4);
                    }
                    attrs = attrs.get(alen.next_multiple_of(4)..).unwrap_or(&[]);
                }
                return None;
            }
            _ => {}
        }
        msg = msg.get(len.next_multiple_of(4)..).unwrap_or(&[]);
    }
    None
}

fn route_oif(peer: IpAddr) -> Option<u32> {
    // SAFETY: plain socket(2) call; the result is checked before use.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        )
    };
    if fd < 0 {
        return None;
    }
    // SAFETY: fd is a socket we just opened and own alone.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let timeout = libc::timeval {
        tv_sec: 1,
        tv_usec: 0,
    };
    // SAFETY: SO_RCVTIMEO takes a timeval; pointer and length describe it.
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&timeout as *const libc::timeval).cast(),
            size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    // SAFETY: sockaddr_nl is plain old data; all-zero addresses the kernel.
    let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    let req = route_request(peer);
    // SAFETY: req and kernel are valid for the lengths given.
    let sent = unsafe {
        libc::sendto(
            sock.as_raw_fd(),
            req.as_ptr().cast(),
            req.len(),
            0,
            (&kernel as *const libc::sockaddr_nl).cast(),
            size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if sent != req.len() as isize {
        return None;
    }
    // One route with its attributes (cache info, preferred source, table)
    // is a few hundred bytes.
    let mut buf = [0u8; 8192];
    // SAFETY: buf is valid for writes of its length.
    let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n <= 0 {
        return None;
    }
    parse_route_reply(&buf[..n as usize])
}

fn if_name(index: u32) -> Option<String> {
    let mut name = [0u8; libc::IF_NAMESIZE];
    // SAFETY: if_indextoname writes at most IF_NAMESIZE bytes, NUL included.
    let p = unsafe { libc::if_indextoname(index, name.as_mut_ptr().cast()) };
    if p.is_null() {
        return None;
    }
    let end = name.iter().position(|&b| b == 0)?;
    Some(String::from_utf8_lossy(&name[..end]).into_owned())
}

/// Whether `name` can be an interface name, so it is safe in a path.
pub(crate) fn valid_if_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() < libc::IF_NAMESIZE
        && name != "."
        && name != ".."
        && !name.contains(['/', '\0', ':'])
        && !name.chars().any(char::is_whitespace)
}

/// Utilisation in percent of a link of `speed_bps` that moved `bytes` in
/// `elapsed_s`, counting the bytes the interface counters count (the frame
/// from its MAC header on; preamble and gap are not counted).
pub fn link_util_percent(bytes: u64, elapsed_s: f64, speed_bps: u64) -> Option<f64> {
    (elapsed_s > 0.0 && speed_bps > 0)
        .then(|| 100.0 * bytes as f64 * 8.0 / elapsed_s / speed_bps as f64)
}

/// An interface's packet and byte counters (since it was created), or
/// their change over a window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IfCounters {
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
}

impl IfCounters {
    /// The counters of interface `name` in this process's network namespace.
    pub fn read(name: &str) -> io::Result<IfCounters> {
        if !valid_if_name(name) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{name:?} is not an interface name"),
            ));
        }
        let text = std::fs::read_to_string("/proc/thread-self/net/dev")
            .or_else(|_| std::fs::read_to_string("/proc/self/net/dev"));
        match text {
            Ok(text) => IfCounters::parse_proc_net_dev(&text, name).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("no interface {name} in /proc/net/dev"),
                )
            }),
            Err(_) => IfCounters::read_sysfs(name),
        }
    }

    fn read_sysfs(name: &str) -> io::Result<IfCounters> {
        let read = |c: &str| -> io::Result<u64> {
            let p = format!("/sys/class/net/{name}/statistics/{c}");
            let s = std::fs::read_to_string(&p)?;
            s.trim()
                .parse()
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{p}: {e}")))
        };
        Ok(IfCounters {
            rx_packets: read("rx_packets")?,
            tx_packets: read("tx_packets")?,
            rx_bytes: read("rx_bytes")?,
            tx_bytes: read("tx_bytes")?,
        })
    }

    /// The counters of `name` in /proc/net/dev text.
    pub fn parse_proc_net_dev(text: &str, name: &str) -> Option<IfCounters> {
        text.lines().find_map(|line| {
            let (n, rest) = line.split_once(':')?;
            if n.trim() != name {
                return None;
            }
            // Receive: bytes packets errs drop fifo frame compressed
            // multicast; then transmit: bytes packets ...
            let f: Vec<u64> = rest
                .split_ascii_whitespace()
                .map(str::parse)
                .collect::<Result<_, _>>()
                .ok()?;
            Some(IfCounters {
                rx_bytes: *f.first()?,
                rx_packets: *f.get(1)?,
                tx_bytes: *f.get(8)?,
                tx_packets: *f.get(9)?,
            })
        })
    }

    /// The change from `earlier` to `self` (0 where a counter was reset).
    pub fn since(&self, earlier: &IfCounters) -> IfCounters {
        IfCounters {
            rx_packets: self.rx_packets.saturating_sub(earlier.rx_packets),
            tx_packets: self.tx_packets.saturating_sub(earlier.tx_packets),
            rx_bytes: self.rx_bytes.saturating_sub(earlier.rx_bytes),
            tx_bytes: self.tx_bytes.saturating_sub(earlier.tx_bytes),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr, UdpSocket};

    const DEV: &str = "Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo: 9000 70    0    0    0     0          0         0     9000 70    0    0    0     0       0          0
  eth0: 123456789 1000 0 0 0 0 0 0 987654 2000 0 0 0 0 0 0
";

    #[test]
    fn parses_proc_net_dev() {
        let c = IfCounters::parse_proc_net_dev(DEV, "eth0").unwrap();
        assert_eq!(
            c,
            IfCounters {
                rx_bytes: 123456789,
                rx_packets: 1000,
                tx_bytes: 987654,
                tx_packets: 2000
            }
        );
        assert_eq!(
            IfCounters::parse_proc_net_dev(DEV, "lo")
                .unwrap()
                .tx_packets,
            70
        );
        assert!(IfCounters::parse_proc_net_dev(DEV, "eth").is_none());
        assert!(IfCounters::parse_proc_net_dev("  x: 1 2 3\n", "x").is_none());
    }

    #[test]
    fn delta_never_goes_negative() {
        let a = IfCounters::parse_proc_net_dev(DEV, "lo").unwrap();
        let b = IfCounters::parse_proc_net_dev(DEV, "eth0").unwrap();
        assert_eq!(b.since(&a).tx_packets, 1930);
        assert_eq!(a.since(&b).rx_bytes, 0);
    }

    #[test]
    fn names_that_would_escape_a_path_are_refused() {
        for bad in ["", ".", "..", "a/b", "../x", "sixteen-chars-xx", "a b"] {
            assert!(!valid_if_name(bad), "{bad:?}");
            assert!(IfCounters::read(bad).is_err());
        }
        assert!(valid_if_name("veth-a.100"));
    }

    #[test]
    fn route_reply_parser_survives_truncation_and_errors() {
        // An NLMSG_ERROR (ENETUNREACH) answer.
        let mut err = Vec::new();
        err.extend_from_slice(&36u32.to_ne_bytes());
        err.extend_from_slice(&NLMSG_ERROR.to_ne_bytes());
        err.extend_from_slice(&[0u8; 30]);
        assert_eq!(parse_route_reply(&err), None);
        // A route with RTA_TABLE then RTA_OIF = 7.
        let mut ok = Vec::new();
        ok.extend_from_slice(&44u32.to_ne_bytes());
        ok.extend_from_slice(&RTM_NEWROUTE.to_ne_bytes());
        ok.extend_from_slice(&[0u8; 10]);
        ok.extend_from_slice(&[0u8; RTMSG_LEN]);
        ok.extend_from_slice(&8u16.to_ne_bytes());
        ok.extend_from_slice(&15u16.to_ne_bytes());
        ok.extend_from_slice(&254u32.to_ne_bytes());
        ok.extend_from_slice(&8u16.to_ne_bytes());
        ok.extend_from_slice(&RTA_OIF.to_ne_bytes());
        ok.extend_from_slice(&7u32.to_ne_bytes());
        assert_eq!(parse_route_reply(&ok), Some(7));
        for cut in 0..ok.len() {
            assert_eq!(parse_route_reply(&ok[..cut]), None);
        }
        assert_eq!(route_request(IpAddr::V4(Ipv4Addr::LOCALHOST)).len(), 36);
        assert_eq!(route_request(IpAddr::V6(Ipv6Addr::LOCALHOST)).len(), 48);
    }

    #[test]
    fn loopback_and_own_addresses_route_over_lo() {
        assert_eq!(
            route_interface(Ipv4Addr::LOCALHOST.into()).as_deref(),
            Some("lo")
        );
        assert_eq!(
            route_interface(Ipv4Addr::new(127, 9, 8, 7).into()).as_deref(),
            Some("lo")
        );
        assert_eq!(
            route_interface("::ffff:127.0.0.1".parse().unwrap()).as_deref(),
            Some("lo")
        );
        if std::net::TcpListener::bind("[::1]:0").is_ok() {
            assert_eq!(
                route_interface(Ipv6Addr::LOCALHOST.into()).as_deref(),
                Some("lo")
            );
        }
        assert_eq!(route_interface(Ipv4Addr::UNSPECIFIED.into()), None);
        // An address of our own on another interface still goes over lo;
        // find one by asking which source address the default route uses.
        // (Connecting a UDP socket sends nothing.)
        let s = UdpSocket::bind("0.0.0.0:0").unwrap();
        if s.connect("192.0.2.1:9").is_ok() {
            let own = s.local_addr().unwrap().ip();
            assert_eq!(route_interface(own).as_deref(), Some("lo"), "{own}");
        }
    }

    #[test]
    fn util_needs_a_time_and_a_speed() {
        let u = link_util_percent(1_250_000, 1.0, 100_000_000).unwrap();
        assert!((u - 10.0).abs() < 1e-9, "{u}");
        assert_eq!(link_util_percent(1, 0.0, 1), None);
        assert_eq!(link_util_percent(1, 1.0, 0), None);
    }

    #[test]
    fn lo_counters_move_with_loopback_traffic() {
        let a = IfCounters::read("lo").unwrap();
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        for _ in 0..10 {
            tx.send_to(b"x", rx.local_addr().unwrap()).unwrap();
        }
        let b = IfCounters::read("lo").unwrap();
        // Other tests may add traffic, never remove it.
        assert!(b.since(&a).tx_packets >= 10);
        assert!(b.since(&a).rx_packets >= 10);
        assert_eq!(
            IfCounters::read_sysfs("lo").is_ok(),
            IfCounters::read("lo").is_ok()
        );
        assert!(IfCounters::read("no-such-if0").is_err());
    }
}
