//! Flows past one address's ports.
//!
//! A socket is named by its address and port, and one address has at most
//! 65,535 ports, of which the kernel hands out only its ephemeral range
//! (`net.ipv4.ip_local_port_range`, 32768–60999 by default: 28,232) to
//! sockets bound to port 0. Two limits follow:
//!
//! - **Long-lived TCP connections** to one server address and port: each
//!   needs its own client port, chosen by `connect` among the ephemeral
//!   ports not yet used *to that destination*. The kernel tries the even
//!   ports of the range first and the odd ones only when every even one is
//!   taken, each `connect` then scanning the whole even half: past half the
//!   range, set-up slows to a crawl (19,500 flows took 4.2 s, 10,000 took
//!   0.29 s) and past the whole range it fails. The client therefore asks
//!   the server for one data listener per [`flows_per_listener`] flows and
//!   spreads its connections over them, and binds with
//!   `IP_BIND_ADDRESS_NO_PORT` under `--bind` so that the port is chosen
//!   per destination there too.
//! - **UDP flows**: each end has one socket per flow, bound to a port of its
//!   own, and the client and server sockets of a test on one host share the
//!   same ephemeral range: 15,000 udp_rr flows on loopback need 30,000
//!   ports. When an end runs out of ports on an IPv4 loopback address it
//!   goes on to the next one ([`Walk`]): all of 127.0.0.0/8 is this host.
//!   Each end tells the other where its sockets are as [`AddrRun`]s. Over a
//!   real network an address has one range, and running out is an error
//!   naming it.

use std::io;
use std::net::{IpAddr, Ipv4Addr};

use serde::{Deserialize, Serialize};

/// The most addresses one end walks over: 64 × 28,232 ports is far past
/// the 100,000 flows a test may have.
pub const MAX_ADDRS: usize = 64;

/// The most data listeners a server opens for one test (or mix part).
pub const MAX_LISTENERS: u32 = 64;

/// Consecutive flows whose sockets share an address, in flow order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddrRun {
    pub addr: IpAddr,
    pub flows: u32,
}

/// The runs of a list of addresses, one per flow in flow order.
pub fn runs(addrs: impl IntoIterator<Item = IpAddr>) -> Vec<AddrRun> {
    let mut out: Vec<AddrRun> = Vec::new();
    for a in addrs {
        match out.last_mut() {
            Some(r) if r.addr == a => r.flows += 1,
            _ => out.push(AddrRun { addr: a, flows: 1 }),
        }
    }
    out
}

/// Each of `n` flows' address from `runs`; no runs: every flow on
/// `default`. An error when the runs do not cover exactly `n` flows.
pub fn expand(runs: &[AddrRun], default: IpAddr, n: usize) -> Result<Vec<IpAddr>, String> {
    if runs.is_empty() {
        return Ok(vec![default; n]);
    }
    if runs.len() > n {
        return Err(format!("{} address runs for {n} flows", runs.len()));
    }
    let total: u64 = runs.iter().map(|r| r.flows as u64).sum();
    if total != n as u64 {
        return Err(format!("address runs cover {total} flows of {n}"));
    }
    let mut out = Vec::with_capacity(n);
    for r in runs {
        out.extend(std::iter::repeat_n(r.addr, r.flows as usize));
    }
    Ok(out)
}

/// May sockets that talk to `peer` from `local` go on to other loopback
/// addresses? Only on IPv4 loopback, where every 127/8 address is this host.
pub fn may_walk(local: IpAddr, peer: IpAddr) -> bool {
    matches!((local.to_canonical(), peer.to_canonical()),
        (IpAddr::V4(l), IpAddr::V4(p)) if l.is_loopback() && p.is_loopback())
}

/// The next address of 127.0.0.0/8 after `ip` (127.255.255.255, the
/// broadcast address, is never one).
pub fn next_loopback(ip: Ipv4Addr) -> Option<Ipv4Addr> {
    let n = u32::from(ip).checked_add(1)?;
    (n < u32::from(Ipv4Addr::new(127, 255, 255, 255))).then(|| Ipv4Addr::from(n))
}

/// Did binding fail because the address has no port left to give?
/// (`bind` to port 0 says EADDRINUSE; a `connect` that binds an unbound
/// UDP socket says EAGAIN.)
pub fn out_of_ports(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EADDRINUSE) | Some(libc::EAGAIN)
    )
}

/// The address sockets are bound to now, moving on to the next loopback
/// address each time one runs out of ports (when allowed).
pub struct Walk {
    current: IpAddr,
    allowed: bool,
    walked: usize,
}

impl Walk {
    pub fn new(start: IpAddr, allowed: bool) -> Walk {
        Walk {
            current: start,
            allowed,
            walked: 0,
        }
    }

    /// Where the next socket goes.
    pub fn current(&self) -> IpAddr {
        self.current
    }

    /// Bind with `open` at the current address, going on to the next ones
    /// while they are out of ports. The error of the last try otherwise.
    pub fn open<T>(&mut self, mut open: impl FnMut(IpAddr) -> io::Result<T>) -> io::Result<T> {
        loop {
            match open(self.current) {
                Err(e) if out_of_ports(&e) && self.allowed && self.walked + 1 < MAX_ADDRS => {
                    let IpAddr::V4(v4) = self.current else {
                        return Err(e);
                    };
                    let Some(next) = next_loopback(v4) else {
                        return Err(e);
                    };
                    self.current = IpAddr::V4(next);
                    self.walked += 1;
                }
                r => return r,
            }
        }
    }
}

/// Flows a client spreads over one server data listener: half its
/// ephemeral range (the even ports `connect` tries first), less a tenth
/// for the connections others have open. At least 64.
pub fn flows_per_listener() -> u32 {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| {
            let mut it = s.split_whitespace().map(|x| x.parse::<u32>().ok());
            Some((it.next()??, it.next()??))
        });
    let size = range.map_or(28_232, |(lo, hi)| hi.saturating_sub(lo) + 1);
    (size / 2 * 9 / 10).max(64)
}

/// Listeners for `flows` flows at `per` flows each (at least one).
pub fn listeners_for(flows: u32, per: u32) -> u32 {
    if per == 0 {
        1
    } else {
        flows.div_ceil(per).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(a: u8, b: u8, c: u8, d: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(a, b, c, d))
    }

    #[test]
    fn runs_and_expand_round_trip() {
        let addrs = [
            v4(127, 0, 0, 1),
            v4(127, 0, 0, 1),
            v4(127, 0, 0, 2),
            v4(127, 0, 0, 1),
        ];
        let r = runs(addrs);
        assert_eq!(r.len(), 3);
        assert_eq!(r[0].flows, 2);
        assert_eq!(expand(&r, v4(10, 0, 0, 1), 4).unwrap(), addrs);
        assert_eq!(
            expand(&[], v4(10, 0, 0, 1), 2).unwrap(),
            [v4(10, 0, 0, 1); 2]
        );
    }

    #[test]
    fn runs_that_do_not_cover_the_flows_are_refused() {
        let r = runs([v4(127, 0, 0, 1); 3]);
        assert!(expand(&r, v4(127, 0, 0, 1), 4).is_err());
        assert!(expand(&r, v4(127, 0, 0, 1), 2).is_err());
        let huge = vec![
            AddrRun {
                addr: v4(127, 0, 0, 1),
                flows: u32::MAX
            };
            2
        ];
        assert!(expand(&huge, v4(127, 0, 0, 1), 2).is_err());
    }

    #[test]
    fn the_walk_stays_in_loopback() {
        assert_eq!(
            next_loopback(Ipv4Addr::new(127, 0, 0, 255)),
            Some(Ipv4Addr::new(127, 0, 1, 0))
        );
        assert_eq!(next_loopback(Ipv4Addr::new(127, 255, 255, 254)), None);
        assert!(may_walk(v4(127, 0, 0, 1), v4(127, 0, 0, 1)));
        assert!(!may_walk(v4(10, 0, 0, 1), v4(10, 0, 0, 2)));
        assert!(!may_walk("::1".parse().unwrap(), "::1".parse().unwrap()));
    }

    #[test]
    fn a_walk_moves_on_only_when_ports_run_out() {
        let mut w = Walk::new(v4(127, 0, 0, 1), true);
        let mut tries = Vec::new();
        let got = w.open(|a| {
            tries.push(a);
            if tries.len() < 3 {
                Err(io::Error::from_raw_os_error(libc::EADDRINUSE))
            } else {
                Ok(a)
            }
        });
        assert_eq!(got.unwrap(), v4(127, 0, 0, 3));
        assert_eq!(w.current(), v4(127, 0, 0, 3));
        // Another error is the caller's.
        let e = w.open(|_| Err::<(), _>(io::Error::from_raw_os_error(libc::EACCES)));
        assert_eq!(e.unwrap_err().raw_os_error(), Some(libc::EACCES));
        // Not allowed: the first out-of-ports error is returned.
        let mut w = Walk::new(v4(127, 0, 0, 1), false);
        let e = w.open(|_| Err::<(), _>(io::Error::from_raw_os_error(libc::EADDRINUSE)));
        assert!(e.is_err());
        assert_eq!(w.current(), v4(127, 0, 0, 1));
    }

    #[test]
    fn listeners_cover_the_flows() {
        assert_eq!(listeners_for(1, 12_000), 1);
        assert_eq!(listeners_for(12_000, 12_000), 1);
        assert_eq!(listeners_for(12_001, 12_000), 2);
        assert_eq!(listeners_for(100_000, 12_704), 8);
        assert_eq!(listeners_for(5, 0), 1);
        assert!(flows_per_listener() >= 64);
    }
}
