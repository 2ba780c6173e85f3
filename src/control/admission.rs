//! Who gets a session: at most `--max-sessions` at once, at most
//! `--max-sessions-per-client` of them from one client (in their handshake
//! or running), and at most [`MAX_HANDSHAKES_PER_ADDRESS`] of those still in
//! their handshake (hello, authentication, spec).
//!
//! Connections that have proved nothing hold a session slot for up to the
//! hello timeout, and an accepted session holds one until its start
//! deadline and then for its stated length. Without a cap per client, one
//! host opening idle sessions would fill every slot and lock every other
//! client out; with it, that host holds its share and the others stay free.
//! A client is one IPv4 address, or one IPv6 /64: a host is given a whole
//! /64 and picks any address in it, so counting single IPv6 addresses would
//! bound nothing.
//!
//! A session whose spec is accepted also reserves its memory estimate, its
//! threads and its data ports against the server's totals (`--max-memory`,
//! `--max-threads`, `--max-ports`) until it ends, so that many sessions each
//! within the per-session limits cannot together exhaust the machine: its
//! memory, or the ephemeral ports the host needs for its own connections.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// Handshakes one client may have in progress at once.
pub const MAX_HANDSHAKES_PER_ADDRESS: u32 = 16;

pub struct Admission {
    max_sessions: u32,
    max_per_client: u32,
    active: AtomicU32,
    clients: Mutex<HashMap<IpAddr, PerClient>>,
    /// Memory (bytes), threads and ports reserved by running sessions.
    reserved: Mutex<Reservation>,
}

/// What one client holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct PerClient {
    sessions: u32,
    handshakes: u32,
}

/// The client a peer address belongs to: an IPv4 address (also when it
/// reaches a dual-stack server as `::ffff:a.b.c.d`), or an IPv6 /64.
pub fn client_of(peer: IpAddr) -> IpAddr {
    match peer.to_canonical() {
        IpAddr::V6(v6) => {
            let bits = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(bits.into())
        }
        v4 => v4,
    }
}

/// How a client is named in a refusal: its address, or its /64.
fn shown(client: IpAddr) -> String {
    match client {
        IpAddr::V6(_) => format!("{client}/64"),
        v4 => v4.to_string(),
    }
}

/// What running sessions hold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reservation {
    pub bytes: u64,
    pub threads: u64,
    /// Data ports: listeners and UDP sockets.
    pub ports: u64,
}

impl Reservation {
    /// What this process holds now: its resident memory and its threads,
    /// from /proc/self/status (nothing where it cannot be read).
    pub fn this_process() -> Reservation {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                .unwrap_or(0)
        };
        Reservation {
            bytes: field("VmRSS:") * 1024,
            threads: field("Threads:"),
            ports: 0,
        }
    }
}

impl Admission {
    /// `base` is held from the start: the server's own memory and threads
    /// count against its totals too.
    pub fn new(max_sessions: u32, max_per_client: u32, base: Reservation) -> Arc<Admission> {
        Arc::new(Admission {
            max_sessions,
            max_per_client,
            active: AtomicU32::new(0),
            clients: Mutex::new(HashMap::new()),
            reserved: Mutex::new(base),
        })
    }

    /// A session for `peer`, or the reason it is refused (naming the limit).
    pub fn admit(self: &Arc<Self>, peer: IpAddr) -> Result<Ticket, String> {
        let max = self.max_sessions;
        // Only the accept loop admits, so the check and the increment do not race.
        if self.active.load(Relaxed) >= max {
            return Err(format!(
                "server busy: {max} sessions running, its limit (--max-sessions {max})"
            ));
        }
        let client = client_of(peer);
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        let c = clients.entry(client).or_default();
        if c.handshakes >= MAX_HANDSHAKES_PER_ADDRESS {
            return Err(format!(
                "server busy: {MAX_HANDSHAKES_PER_ADDRESS} connections from {} are still in their handshake, the limit per address",
                shown(client)
            ));
        }
        if c.sessions >= self.max_per_client {
            let n = self.max_per_client;
            return Err(format!(
                "server busy: {} holds {} sessions ({} in their handshake), the limit per client (--max-sessions-per-client {n})",
                shown(client),
                c.sessions,
                c.handshakes
            ));
        }
        c.handshakes += 1;
        c.sessions += 1;
        self.active.fetch_add(1, Relaxed);
        Ok(Ticket {
            admission: self.clone(),
            client,
            handshaking: true,
            holds: Reservation::default(),
        })
    }

    /// Take one of `client`'s handshakes (`session`: and its session) off its count.
    fn release(&self, client: IpAddr, handshake: bool, session: bool) {
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = clients.get_mut(&client) {
            c.handshakes -= handshake as u32;
            c.sessions -= session as u32;
            if c.sessions == 0 {
                clients.remove(&client);
            }
        }
    }
}

/// One admitted session; releases its slot when dropped, also on a panic.
pub struct Ticket {
    admission: Arc<Admission>,
    client: IpAddr,
    handshaking: bool,
    holds: Reservation,
}

impl Ticket {
    /// Reserve `want` against the server's totals `max`, or say which
    /// limit it would pass. Held until the ticket drops.
    pub fn reserve(&mut self, want: Reservation, max: Reservation) -> Result<(), String> {
        let mut r = self
            .admission
            .reserved
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if r.bytes.saturating_add(want.bytes) > max.bytes {
            return Err(format!(
                "server busy: the test needs about {} MiB, and the sessions running hold {} MiB of this server's {} MiB (--max-memory)",
                want.bytes.div_ceil(1 << 20),
                r.bytes.div_ceil(1 << 20),
                max.bytes >> 20
            ));
        }
        if r.threads.saturating_add(want.threads) > max.threads {
            return Err(format!(
                "server busy: the test needs {} threads, and the sessions running hold {} of this server's {} (--max-threads)",
                want.threads, r.threads, max.threads
            ));
        }
        if r.ports.saturating_add(want.ports) > max.ports {
            return Err(format!(
                "server busy: the test needs {} data ports, and the sessions running hold {} of this server's {} (--max-ports)",
                want.ports, r.ports, max.ports
            ));
        }
        r.bytes += want.bytes;
        r.threads += want.threads;
        r.ports += want.ports;
        self.holds.bytes += want.bytes;
        self.holds.threads += want.threads;
        self.holds.ports += want.ports;
        Ok(())
    }

    /// The session passed its handshake: it no longer counts against its
    /// client's handshakes (it still counts as one of its sessions).
    pub fn handshake_done(&mut self) {
        if std::mem::take(&mut self.handshaking) {
            self.admission.release(self.client, true, false);
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let handshaking = std::mem::take(&mut self.handshaking);
        self.admission.release(self.client, handshaking, true);
        let mut r = self
            .admission
            .reserved
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        r.bytes -= self.holds.bytes;
        r.threads -= self.holds.threads;
        r.ports -= self.holds.ports;
        drop(r);
        self.admission.active.fetch_sub(1, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_add_up_and_return_when_sessions_end() {
        let a = Admission::new(8, 8, Reservation::default());
        let peer: IpAddr = [127, 0, 0, 2].into();
        let max = Reservation {
            bytes: 100 << 20,
            threads: 10,
            ports: 10,
        };
        let want = Reservation {
            bytes: 40 << 20,
            threads: 4,
            ports: 4,
        };
        let mut t1 = a.admit(peer).unwrap();
        let mut t2 = a.admit(peer).unwrap();
        let mut t3 = a.admit(peer).unwrap();
        assert_eq!(t1.reserve(want, max), Ok(()));
        assert_eq!(t2.reserve(want, max), Ok(()));
        assert!(t3.reserve(want, max).unwrap_err().contains("--max-memory"));
        let few = Reservation {
            bytes: 1 << 20,
            threads: 3,
            ports: 0,
        };
        assert!(t3.reserve(few, max).unwrap_err().contains("--max-threads"));
        let ports = Reservation {
            bytes: 0,
            threads: 0,
            ports: 3,
        };
        let e = t3.reserve(ports, max).unwrap_err();
        assert!(
            e.contains("--max-ports") && e.contains("hold 8 of this server's 10"),
            "{e}"
        );
        drop(t1);
        assert_eq!(t3.reserve(want, max), Ok(()));
        drop((t2, t3));
        assert_eq!(*a.reserved.lock().unwrap(), Reservation::default());
    }

    #[test]
    fn caps_sessions_and_handshakes_per_address() {
        let a = Admission::new(
            MAX_HANDSHAKES_PER_ADDRESS + 2,
            MAX_HANDSHAKES_PER_ADDRESS + 2,
            Reservation::default(),
        );
        let one: IpAddr = [127, 0, 0, 2].into();
        let other: IpAddr = [127, 0, 0, 3].into();
        let mut held: Vec<Ticket> = (0..MAX_HANDSHAKES_PER_ADDRESS)
            .map(|_| a.admit(one).unwrap())
            .collect();
        let e = a.admit(one).err().unwrap();
        assert!(e.contains("limit per address"), "{e}");
        // Another address still gets in; a finished handshake frees its address's share.
        held.push(a.admit(other).unwrap());
        held[0].handshake_done();
        held.push(a.admit(one).unwrap());
        let e = a.admit(other).err().unwrap();
        assert!(e.contains("--max-sessions"), "{e}");
        held.clear();
        assert_eq!(a.active.load(Relaxed), 0);
        assert!(a.clients.lock().unwrap().is_empty());
    }

    /// Sessions past their handshake count against their client too: 16
    /// accepted sessions from one address leave the rest of the slots to
    /// others, and the 17th is told the flag.
    #[test]
    fn caps_sessions_per_client_after_their_handshake() {
        let a = Admission::new(64, 16, Reservation::default());
        let one: IpAddr = [127, 0, 0, 1].into();
        let mut held: Vec<Ticket> = (0..16).map(|_| a.admit(one).unwrap()).collect();
        for t in &mut held {
            t.handshake_done();
        }
        let e = a.admit(one).err().unwrap();
        assert!(
            e.contains("--max-sessions-per-client 16") && e.contains("127.0.0.1 holds 16 sessions"),
            "{e}"
        );
        // The same client through a dual-stack server's mapped address.
        let mapped: IpAddr = "::ffff:127.0.0.1".parse().unwrap();
        assert!(a.admit(mapped).is_err());
        held.push(a.admit([127, 0, 0, 9].into()).unwrap());
        held.remove(0);
        held.push(a.admit(one).unwrap());
        held.clear();
        assert!(a.clients.lock().unwrap().is_empty());
    }

    #[test]
    fn an_ipv6_client_is_its_slash_64() {
        let a = Admission::new(64, 2, Reservation::default());
        let x: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let y: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let other: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(client_of(x), client_of(y));
        assert_ne!(client_of(x), client_of(other));
        // IPv4 clients stay apart: a mapped address is its IPv4 address.
        assert_eq!(
            client_of("::ffff:10.0.0.1".parse().unwrap()),
            IpAddr::from([10, 0, 0, 1])
        );
        let _t = (a.admit(x).unwrap(), a.admit(y).unwrap());
        let e = a.admit("2001:db8:1:2::7".parse().unwrap()).err().unwrap();
        assert!(
            e.contains("2001:db8:1:2::/64") && e.contains("--max-sessions-per-client 2"),
            "{e}"
        );
        assert!(a.admit(other).is_ok());
    }
}
