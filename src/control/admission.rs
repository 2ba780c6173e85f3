//! Who gets a session: at most `--max-sessions` at once, and at most
//! [`MAX_HANDSHAKES_PER_ADDRESS`] of them from one address still in their
//! handshake (hello, authentication, spec).
//!
//! Connections that have proved nothing hold a session slot for up to the
//! hello timeout. Without the per-address cap, one host opening idle
//! connections would fill every slot and lock every other client out; with
//! it, that host holds a few slots and the others stay free. A session that
//! has passed its handshake no longer counts against its address.

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
}

impl Admission {
    pub fn new(max_sessions: u32) -> Arc<Admission> {
        Arc::new(Admission {
            max_sessions,
            active: AtomicU32::new(0),
            handshaking: Mutex::new(HashMap::new()),
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
}

impl Ticket {
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
        self.admission.active.fetch_sub(1, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_sessions_and_handshakes_per_address() {
        let a = Admission::new(MAX_HANDSHAKES_PER_ADDRESS + 2);
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
