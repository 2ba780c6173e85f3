//! Who gets a session: at most `--max-sessions` at once, at most
//! `--max-sessions-per-client` of them from one client, and apart from
//! them a pool of connections still proving themselves.
//!
//! A connection is *unproved* until it has shown that it is a client this
//! server serves: on a server with `--psk-file`, until it has answered the
//! challenge; on one without, until its spec has passed every check.
//! Unproved connections take no session slot. They wait in a pool of
//! their own ([`handshake_pool`] of them, at most
//! [`MAX_HANDSHAKES_PER_ADDRESS`] from one client), each under the short
//! hello deadline, and when the pool is full a newcomer is not refused:
//! the oldest handshake of the client holding the most gives way. Someone
//! without the key can then fill the pool from any number of addresses
//! and still never hold a slot a keyed client needs, and a keyed client's
//! hello always gets its turn: it answers the challenge one round trip
//! later, and only a client with as few handshakes as its own, and older
//! ones, can be evicted before it. New connections are taken only while
//! the sessions have room.
//!
//! An accepted session holds its slot until its start deadline and then
//! for its stated length. Without a cap per client, one host opening idle
//! sessions would fill every slot and lock every other client out; with
//! it, that host holds its share and the others stay free. A client is
//! one IPv4 address, or one IPv6 /64: a host is given a whole /64 and
//! picks any address in it, so counting single IPv6 addresses would bound
//! nothing.
//!
//! A session whose spec is accepted also reserves its memory estimate, its
//! threads and its data ports against the server's totals (`--max-memory`,
//! `--max-threads`, `--max-ports`) until it ends, so that many sessions each
//! within the per-session limits cannot together exhaust the machine: its
//! memory, or the ephemeral ports the host needs for its own connections.
//! The ports are shared out per client as the slots are
//! (`--max-ports-per-client`, by default a client's share of the sessions):
//! one address's sessions that never start cannot hold every port.
//!
//! Spinning workers (`--spin`) are reserved the same way: each takes a
//! whole CPU for its session's length, so `--max-spin-threads` bounds all
//! sessions' spinning workers together, not one session's, or a client
//! could open as many spinning sessions as it has slots and starve every
//! other client of CPU. One client may spin at most its share of them
//! (`--max-spin-threads-per-client`, by default half), so that another
//! always finds some free.

use std::collections::HashMap;
use std::net::{IpAddr, Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};

/// Handshakes one client may have in progress at once.
pub const MAX_HANDSHAKES_PER_ADDRESS: u32 = 16;

/// The fewest unproved connections the pool holds (the default
/// `--max-sessions`): four clients' worth of [`MAX_HANDSHAKES_PER_ADDRESS`].
pub const MIN_HANDSHAKE_POOL: u32 = 64;

/// How many unproved connections a server holds at once: as many as its
/// sessions, at least [`MIN_HANDSHAKE_POOL`]. Each is a thread waiting on
/// a socket for at most the hello deadline.
pub fn handshake_pool(max_sessions: u32) -> u32 {
    max_sessions.max(MIN_HANDSHAKE_POOL)
}

pub struct Admission {
    max_sessions: u32,
    max_per_client: u32,
    pool: u32,
    state: Mutex<State>,
}

/// Everything admission counts, under one lock.
struct State {
    /// Proved sessions, running or setting up.
    sessions: u32,
    clients: HashMap<IpAddr, PerClient>,
    /// Unproved connections, oldest first.
    unproved: Vec<Unproved>,
    next_id: u64,
    /// Memory (bytes), threads and ports reserved by running sessions.
    reserved: Reservation,
}

/// What one client holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct PerClient {
    sessions: u32,
    handshakes: u32,
    /// Data ports its sessions reserved.
    ports: u64,
    /// Spinning workers its sessions reserved.
    spin: u64,
}

impl PerClient {
    fn holds_nothing(&self) -> bool {
        *self == PerClient::default()
    }
}

/// A connection in the pool: what the accept loop needs to evict it.
struct Unproved {
    id: u64,
    client: IpAddr,
    /// A second handle on its socket: shutting its reading side down
    /// wakes the session's thread from its read (None in unit tests).
    stream: Option<TcpStream>,
    evicted: Arc<AtomicBool>,
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
    /// Worker threads that spin (`--spin`), a whole CPU each.
    pub spin: u64,
}

/// What one client's sessions may hold together, of the totals shared
/// out per client (`--max-ports-per-client`, `--max-spin-threads-per-client`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientShare {
    pub ports: u64,
    pub spin: u64,
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
            spin: 0,
        }
    }

    fn add(&mut self, o: Reservation) {
        self.bytes += o.bytes;
        self.threads += o.threads;
        self.ports += o.ports;
        self.spin += o.spin;
    }

    fn sub(&mut self, o: Reservation) {
        self.bytes -= o.bytes;
        self.threads -= o.threads;
        self.ports -= o.ports;
        self.spin -= o.spin;
    }
}

impl Admission {
    /// `base` is held from the start: the server's own memory and threads
    /// count against its totals too.
    pub fn new(max_sessions: u32, max_per_client: u32, base: Reservation) -> Arc<Admission> {
        Arc::new(Admission {
            max_sessions,
            max_per_client,
            pool: handshake_pool(max_sessions),
            state: Mutex::new(State {
                sessions: 0,
                clients: HashMap::new(),
                unproved: Vec::new(),
                next_id: 0,
                reserved: base,
            }),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A place in the pool of unproved connections for `peer`, whose
    /// connection is `stream`, or the reason it is refused (naming the
    /// limit). A full pool makes room ([`State::evict`]).
    pub fn admit(
        self: &Arc<Self>,
        peer: IpAddr,
        stream: Option<&TcpStream>,
    ) -> Result<Ticket, String> {
        let client = client_of(peer);
        let mut st = self.state();
        // Only the accept loop admits, so the check and the increment do not race.
        if st.sessions >= self.max_sessions {
            return Err(self.full());
        }
        let c = st.clients.get(&client).copied().unwrap_or_default();
        if c.handshakes >= MAX_HANDSHAKES_PER_ADDRESS {
            return Err(format!(
                "server busy: {MAX_HANDSHAKES_PER_ADDRESS} connections from {} are still in their handshake, the limit per address",
                shown(client)
            ));
        }
        if c.sessions >= self.max_per_client {
            return Err(self.client_full(client, &c));
        }
        if st.unproved.len() >= self.pool as usize {
            st.evict();
        }
        let id = st.next_id;
        st.next_id += 1;
        let evicted = Arc::new(AtomicBool::new(false));
        st.unproved.push(Unproved {
            id,
            client,
            stream: stream.and_then(|s| s.try_clone().ok()),
            evicted: evicted.clone(),
        });
        st.clients.entry(client).or_default().handshakes += 1;
        Ok(Ticket {
            admission: self.clone(),
            client,
            unproved: Some(id),
            evicted,
            session: false,
            holds: Reservation::default(),
        })
    }

    fn full(&self) -> String {
        let max = self.max_sessions;
        format!("server busy: {max} sessions running, its limit (--max-sessions {max})")
    }

    fn client_full(&self, client: IpAddr, c: &PerClient) -> String {
        let n = self.max_per_client;
        format!(
            "server busy: {} holds {} sessions ({} more in their handshake), the limit per client (--max-sessions-per-client {n})",
            shown(client),
            c.sessions,
            c.handshakes
        )
    }

    /// The pool's size, for the refusal of an evicted handshake.
    fn evicted_message(&self) -> String {
        format!(
            "server busy: {} connections were in their handshake, the most this server holds unproved; this one was the oldest of the client holding the most and gave way to a newcomer",
            self.pool
        )
    }
}

impl State {
    /// Make room in a full pool: the oldest handshake of the client that
    /// has the most in it is dropped. A client with one handshake (a
    /// keyed client's, a few milliseconds from proving itself) is never
    /// the one while another holds more.
    fn evict(&mut self) {
        let clients = &self.clients;
        let held = |c: &IpAddr| clients.get(c).map_or(0, |c| c.handshakes);
        let Some(k) = self
            .unproved
            .iter()
            .enumerate()
            // The most held, then the oldest (the lowest id).
            .max_by_key(|(_, u)| (held(&u.client), std::cmp::Reverse(u.id)))
            .map(|(k, _)| k)
        else {
            return;
        };
        let u = self.unproved.remove(k);
        u.evicted.store(true, Relaxed);
        if let Some(s) = &u.stream {
            // Its thread's read returns at once; it tells the peer why.
            let _ = s.shutdown(Shutdown::Read);
        }
        self.forget_handshake(u.client);
    }

    fn forget_handshake(&mut self, client: IpAddr) {
        if let Some(c) = self.clients.get_mut(&client) {
            c.handshakes -= 1;
            if c.holds_nothing() {
                self.clients.remove(&client);
            }
        }
    }
}

/// One admitted connection: unproved, then (once [`Ticket::proved`]) a
/// session. Releases whatever it holds when dropped, also on a panic.
pub struct Ticket {
    admission: Arc<Admission>,
    client: IpAddr,
    /// Its place in the pool while unproved.
    unproved: Option<u64>,
    evicted: Arc<AtomicBool>,
    /// It holds a session slot.
    session: bool,
    holds: Reservation,
}

impl Ticket {
    /// The connection proved itself (the key, or a spec that passed every
    /// check): it leaves the pool and takes a session slot, or is told
    /// that none is free, or that it was evicted meanwhile.
    pub fn proved(&mut self) -> Result<(), String> {
        let a = self.admission.clone();
        let mut st = a.state();
        if let Some(id) = self.unproved.take() {
            match st.unproved.iter().position(|u| u.id == id) {
                Some(k) => {
                    st.unproved.remove(k);
                    st.forget_handshake(self.client);
                }
                None => return Err(a.evicted_message()),
            }
        }
        if self.session {
            return Ok(());
        }
        if st.sessions >= a.max_sessions {
            return Err(a.full());
        }
        let c = st.clients.entry(self.client).or_default();
        if c.sessions >= a.max_per_client {
            let c = *c;
            return Err(a.client_full(self.client, &c));
        }
        c.sessions += 1;
        st.sessions += 1;
        self.session = true;
        Ok(())
    }

    /// Whether the pool dropped this connection for a newcomer; then the
    /// refusal to send it.
    pub fn evicted(&self) -> Option<String> {
        self.evicted
            .load(Relaxed)
            .then(|| self.admission.evicted_message())
    }

    /// Reserve `want` against the server's totals `max`, and its ports
    /// and spinning workers against this client's `share` as well, or say
    /// which limit it would pass. Held until the ticket drops.
    pub fn reserve(
        &mut self,
        want: Reservation,
        max: Reservation,
        share: ClientShare,
    ) -> Result<(), String> {
        let mut st = self.admission.state();
        let r = st.reserved;
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
        if want.spin > 0 && r.spin.saturating_add(want.spin) > max.spin {
            return Err(format!(
                "server busy: --spin needs {} spinning server workers, and the sessions running spin {} of the {} this server allows in all (--max-spin-threads, the server's total of spinning workers, each a whole CPU): {} free",
                want.spin,
                r.spin,
                max.spin,
                max.spin.saturating_sub(r.spin)
            ));
        }
        let mine = st.clients.get(&self.client).copied().unwrap_or_default();
        if mine.ports.saturating_add(want.ports) > share.ports {
            return Err(format!(
                "server busy: the test needs {} data ports, and {}'s sessions hold {} of the {} one client may (--max-ports-per-client)",
                want.ports,
                shown(self.client),
                mine.ports,
                share.ports
            ));
        }
        if want.spin > 0 && mine.spin.saturating_add(want.spin) > share.spin {
            return Err(format!(
                "server busy: --spin needs {} spinning server workers, and {}'s sessions spin {} of the {} one client may (--max-spin-threads-per-client; the server's total is --max-spin-threads)",
                want.spin,
                shown(self.client),
                mine.spin,
                share.spin
            ));
        }
        st.reserved.add(want);
        let c = st.clients.entry(self.client).or_default();
        c.ports += want.ports;
        c.spin += want.spin;
        self.holds.add(want);
        Ok(())
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut st = self.admission.state();
        if let Some(id) = self.unproved.take()
            && let Some(k) = st.unproved.iter().position(|u| u.id == id)
        {
            st.unproved.remove(k);
            st.forget_handshake(self.client);
        }
        st.reserved.sub(self.holds);
        if let Some(c) = st.clients.get_mut(&self.client) {
            c.ports -= self.holds.ports;
            c.spin -= self.holds.spin;
            c.sessions -= self.session as u32;
            if c.holds_nothing() {
                st.clients.remove(&self.client);
            }
        }
        if self.session {
            st.sessions -= 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(last: u8) -> IpAddr {
        [127, 0, 0, last].into()
    }

    fn share(ports: u64, spin: u64) -> ClientShare {
        ClientShare { ports, spin }
    }

    /// A proved session for `peer`.
    fn session(a: &Arc<Admission>, peer: IpAddr) -> Ticket {
        let mut t = a.admit(peer, None).unwrap();
        t.proved().unwrap();
        t
    }

    #[test]
    fn reservations_add_up_and_return_when_sessions_end() {
        let a = Admission::new(8, 8, Reservation::default());
        let peer = addr(2);
        let max = Reservation {
            bytes: 100 << 20,
            threads: 10,
            ports: 10,
            spin: 10,
        };
        let want = Reservation {
            bytes: 40 << 20,
            threads: 4,
            ports: 4,
            spin: 0,
        };
        let mut t1 = session(&a, peer);
        let mut t2 = session(&a, peer);
        let mut t3 = session(&a, peer);
        assert_eq!(t1.reserve(want, max, share(10, 10)), Ok(()));
        assert_eq!(t2.reserve(want, max, share(10, 10)), Ok(()));
        assert!(
            t3.reserve(want, max, share(10, 10))
                .unwrap_err()
                .contains("--max-memory")
        );
        let few = Reservation {
            bytes: 1 << 20,
            threads: 3,
            ..Reservation::default()
        };
        assert!(
            t3.reserve(few, max, share(10, 10))
                .unwrap_err()
                .contains("--max-threads")
        );
        let ports = Reservation {
            ports: 3,
            ..Reservation::default()
        };
        let e = t3.reserve(ports, max, share(10, 10)).unwrap_err();
        assert!(
            e.contains("--max-ports") && e.contains("hold 8 of this server's 10"),
            "{e}"
        );
        drop(t1);
        assert_eq!(t3.reserve(want, max, share(10, 10)), Ok(()));
        drop((t2, t3));
        assert_eq!(a.state().reserved, Reservation::default());
        assert!(a.state().clients.is_empty());
    }

    /// One client holds at most its share of the ports, whatever is free;
    /// another client gets the rest.
    #[test]
    fn ports_are_shared_per_client() {
        let a = Admission::new(64, 16, Reservation::default());
        let max = Reservation {
            bytes: u64::MAX,
            threads: u64::MAX,
            ports: 2048,
            spin: 0,
        };
        let ports = |n| Reservation {
            ports: n,
            ..Reservation::default()
        };
        let mut held: Vec<Ticket> = Vec::new();
        for _ in 0..2 {
            let mut t = session(&a, addr(2));
            assert_eq!(t.reserve(ports(256), max, share(512, 0)), Ok(()));
            held.push(t);
        }
        let mut t = session(&a, addr(2));
        let e = t.reserve(ports(256), max, share(512, 0)).unwrap_err();
        assert!(
            e.contains(
                "127.0.0.2's sessions hold 512 of the 512 one client may (--max-ports-per-client)"
            ),
            "{e}"
        );
        let mut other = session(&a, addr(3));
        assert_eq!(other.reserve(ports(512), max, share(512, 0)), Ok(()));
        held.remove(0);
        assert_eq!(t.reserve(ports(256), max, share(512, 0)), Ok(()));
        drop((held, t, other));
        assert_eq!(a.state().reserved, Reservation::default());
        assert!(a.state().clients.is_empty());
    }

    /// Spinning workers are the server's total, whoever asks: two
    /// sessions within it, a third over it is refused naming the flag with
    /// what is in use and free, a session that does not spin still gets
    /// in, and an ended session's workers are free again. One client spins
    /// at most its share, whatever is free.
    #[test]
    fn spinning_workers_are_counted_across_sessions() {
        let a = Admission::new(64, 16, Reservation::default());
        let max = Reservation {
            bytes: u64::MAX,
            threads: u64::MAX,
            ports: u64::MAX,
            spin: 4,
        };
        let spin = |n| Reservation {
            threads: n + 1,
            spin: n,
            ..Reservation::default()
        };
        let mut t1 = session(&a, addr(2));
        let mut t2 = session(&a, addr(3));
        let mut t3 = session(&a, addr(4));
        assert_eq!(t1.reserve(spin(2), max, share(9, 2)), Ok(()));
        assert_eq!(t2.reserve(spin(2), max, share(9, 2)), Ok(()));
        let e = t3.reserve(spin(1), max, share(9, 2)).unwrap_err();
        assert!(
            e.contains("--max-spin-threads")
                && e.contains("the server's total of spinning workers")
                && e.contains("spin 4 of the 4")
                && e.contains("0 free"),
            "{e}"
        );
        // Nothing was held by the refusal; a test that does not spin runs.
        assert_eq!(t3.reserve(spin(0), max, share(9, 2)), Ok(()));
        drop(t1);
        assert_eq!(t3.reserve(spin(1), max, share(9, 2)), Ok(()));
        // 127.0.0.4 holds 1 of its 2: one more, not two, with room to spare.
        let mut t4 = session(&a, addr(4));
        let roomy = Reservation { spin: 8, ..max };
        let e = t4.reserve(spin(2), roomy, share(9, 2)).unwrap_err();
        assert!(
            e.contains(
                "127.0.0.4's sessions spin 1 of the 2 one client may (--max-spin-threads-per-client"
            ),
            "{e}"
        );
        assert_eq!(t4.reserve(spin(1), max, share(9, 2)), Ok(()));
        assert_eq!(a.state().reserved.spin, 4);
        drop((t2, t3, t4));
        assert_eq!(a.state().reserved, Reservation::default());
        assert!(a.state().clients.is_empty());
    }

    #[test]
    fn caps_handshakes_per_address() {
        let a = Admission::new(64, 64, Reservation::default());
        let (one, other) = (addr(2), addr(3));
        let mut held: Vec<Ticket> = (0..MAX_HANDSHAKES_PER_ADDRESS)
            .map(|_| a.admit(one, None).unwrap())
            .collect();
        let e = a.admit(one, None).err().unwrap();
        assert!(e.contains("limit per address"), "{e}");
        // Another address still gets in; a proved handshake frees its address's share.
        held.push(a.admit(other, None).unwrap());
        held[0].proved().unwrap();
        held.push(a.admit(one, None).unwrap());
        held.clear();
        assert_eq!(a.state().sessions, 0);
        assert!(a.state().unproved.is_empty());
        assert!(a.state().clients.is_empty());
    }

    /// Unproved connections hold no session slot: with every handshake
    /// four addresses may have in the pool, a fifth client still gets in
    /// (the oldest handshake of a client holding the most gives way), and
    /// proves itself into a free slot. Slots are taken only by the proved.
    #[test]
    fn unproved_connections_take_no_session_slot() {
        let a = Admission::new(2, 2, Reservation::default());
        let attackers: Vec<Ticket> = (2..6)
            .flat_map(|h| (0..16).map(move |_| h))
            .map(|h| a.admit(addr(h), None).unwrap())
            .collect();
        assert_eq!(a.state().unproved.len(), 64);
        let mut keyed = a.admit(addr(9), None).unwrap();
        // 127.0.0.2's first handshake gave way: the oldest of the most held.
        assert!(attackers[0].evicted().is_some());
        assert!(attackers[1..].iter().all(|t| t.evicted().is_none()));
        // Newcomers from the siege evict each other, never the lone handshake.
        let mut again = Vec::new();
        for h in [2, 3, 4, 5].repeat(8) {
            // (Refused while that address has all 16 of its own.)
            again.extend(a.admit(addr(h), None).ok());
        }
        assert!(again.len() >= 8, "{}", again.len());
        assert!(keyed.evicted().is_none());
        assert_eq!(keyed.proved(), Ok(()));
        assert_eq!(a.state().sessions, 1);
        // An evicted connection cannot prove itself afterwards.
        let mut first = attackers.into_iter().next().unwrap();
        let e = first.proved().unwrap_err();
        assert!(e.contains("gave way to a newcomer"), "{e}");
        let _second = session(&a, addr(9));
        // The sessions are full: new connections are refused at once.
        let e = a.admit(addr(10), None).err().unwrap();
        assert!(e.contains("--max-sessions 2"), "{e}");
        drop((first, keyed, again, _second));
        let st = a.state();
        assert!(st.unproved.is_empty() && st.sessions == 0 && st.clients.is_empty());
    }

    /// The accept loop's eviction wakes the evicted connection's reader.
    #[test]
    fn an_evicted_handshake_is_woken() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let a = Admission::new(1, 1, Reservation::default());
        let mut socks = Vec::new();
        let mut held = Vec::new();
        for i in 0..=MIN_HANDSHAKE_POOL {
            // From eight addresses: 127.0.0.2 has the most (9), the first among them.
            let peer =
                socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
            let from = std::net::SocketAddr::new(addr(2 + (i % 8) as u8), 0);
            peer.bind(&from.into()).unwrap();
            peer.connect(&l.local_addr().unwrap().into()).unwrap();
            let (s, from) = l.accept().unwrap();
            held.push(a.admit(from.ip(), Some(&s)).unwrap());
            socks.push((s, peer));
        }
        // The first (oldest) gave way: its read returns at once, with no byte.
        let mut buf = [0u8; 1];
        use std::io::Read;
        assert_eq!((&socks[0].0).read(&mut buf).unwrap(), 0);
        assert!(held[0].evicted().is_some());
    }

    /// Proved sessions count against their client too: 16 of them from
    /// one address leave the rest of the slots to others, and the 17th is
    /// told the flag.
    #[test]
    fn caps_sessions_per_client_after_their_handshake() {
        let a = Admission::new(64, 16, Reservation::default());
        let one = addr(1);
        let mut held: Vec<Ticket> = (0..16).map(|_| session(&a, one)).collect();
        let e = a.admit(one, None).err().unwrap();
        assert!(
            e.contains("--max-sessions-per-client 16") && e.contains("127.0.0.1 holds 16 sessions"),
            "{e}"
        );
        // The same client through a dual-stack server's mapped address.
        let mapped: IpAddr = "::ffff:127.0.0.1".parse().unwrap();
        assert!(a.admit(mapped, None).is_err());
        held.push(session(&a, addr(9)));
        held.remove(0);
        held.push(session(&a, one));
        held.clear();
        assert!(a.state().clients.is_empty());
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
        let _t = (session(&a, x), session(&a, y));
        let e = a
            .admit("2001:db8:1:2::7".parse().unwrap(), None)
            .err()
            .unwrap();
        assert!(
            e.contains("2001:db8:1:2::/64") && e.contains("--max-sessions-per-client 2"),
            "{e}"
        );
        assert!(a.admit(other, None).is_ok());
    }
}
