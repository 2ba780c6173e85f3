//! Who gets a session: at most `--max-sessions` at once, and at most
//! [`MAX_HANDSHAKES_PER_ADDRESS`] of them from one address still in their
//! handshake (hello, authentication, spec).
//!
//! Connections that have proved nothing hold a session slot for up to the
//! hello timeout. Without the per-address cap, one host opening idle
//! connections would fill every slot and lock every other client out; with
//! it, that host holds a few slots and the others stay free. A session that
//! has passed its handshake no longer counts against its address.
//!
//! A session whose spec is accepted also reserves its memory estimate and
//! its threads against the server's totals (`--max-memory`,
//! `--max-threads`) until it ends, so that many sessions each within
//! `--max-session-memory` cannot together exhaust the machine.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// Handshakes one address may have in progress at once.
pub const MAX_HANDSHAKES_PER_ADDRESS: u32 = 16;

pub struct Admission {
    max_sessions: u32,
    active: AtomicU32,
    handshaking: Mutex<HashMap<IpAddr, u32>>,
    /// Memory (bytes) and threads reserved by running sessions.
    reserved: Mutex<Reservation>,
}

/// What running sessions hold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reservation {
    pub bytes: u64,
    pub threads: u64,
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
        }
    }
}

impl Admission {
    /// `base` is held from the start: the server's own memory and threads
    /// count against its totals too.
    pub fn new(max_sessions: u32, base: Reservation) -> Arc<Admission> {
        Arc::new(Admission {
            max_sessions,
            active: AtomicU32::new(0),
            handshaking: Mutex::new(HashMap::new()),
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
        let mut hs = self.handshaking.lock().unwrap_or_else(|p| p.into_inner());
        let n = hs.entry(peer).or_insert(0);
        if *n >= MAX_HANDSHAKES_PER_ADDRESS {
            return Err(format!(
                "server busy: {MAX_HANDSHAKES_PER_ADDRESS} connections from {peer} are still in their handshake, the limit per address"
            ));
        }
        *n += 1;
        self.active.fetch_add(1, Relaxed);
        Ok(Ticket {
            admission: self.clone(),
            peer,
            handshaking: true,
            holds: Reservation::default(),
        })
    }

    fn handshake_over(&self, peer: IpAddr) {
        let mut hs = self.handshaking.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = hs.get_mut(&peer) {
            *n -= 1;
            if *n == 0 {
                hs.remove(&peer);
            }
        }
    }
}

/// One admitted session; releases its slot when dropped, also on a panic.
pub struct Ticket {
    admission: Arc<Admission>,
    peer: IpAddr,
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
        r.bytes += want.bytes;
        r.threads += want.threads;
        self.holds.bytes += want.bytes;
        self.holds.threads += want.threads;
        Ok(())
    }

    /// The session passed its handshake: it no longer counts against its address.
    pub fn handshake_done(&mut self) {
        if std::mem::take(&mut self.handshaking) {
            self.admission.handshake_over(self.peer);
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.handshake_done();
        let mut r = self
            .admission
            .reserved
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        r.bytes -= self.holds.bytes;
        r.threads -= self.holds.threads;
        drop(r);
        self.admission.active.fetch_sub(1, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_add_up_and_return_when_sessions_end() {
        let a = Admission::new(8, Reservation::default());
        let peer: IpAddr = [127, 0, 0, 2].into();
        let max = Reservation {
            bytes: 100 << 20,
            threads: 10,
        };
        let want = Reservation {
            bytes: 40 << 20,
            threads: 4,
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
        };
        assert!(t3.reserve(few, max).unwrap_err().contains("--max-threads"));
        drop(t1);
        assert_eq!(t3.reserve(want, max), Ok(()));
        drop((t2, t3));
        assert_eq!(*a.reserved.lock().unwrap(), Reservation::default());
    }

    #[test]
    fn caps_sessions_and_handshakes_per_address() {
        let a = Admission::new(MAX_HANDSHAKES_PER_ADDRESS + 2, Reservation::default());
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
        assert!(a.handshaking.lock().unwrap().is_empty());
    }
}
