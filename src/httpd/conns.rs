//! The server's table of open connections, and the choice of which one
//! goes when a new one arrives at the bound. A connection still waiting
//! for its request head (idle, or sending it a byte at a time) is what an
//! attacker holds cheaply, and what a scrape never is for long: a scrape
//! sends its request with, or right after, the handshake. So at the bound
//! the oldest connection still waiting for its head is closed to make room,
//! and a newcomer is turned away only when every connection is being
//! answered (each for at most the connection deadline). Waiting instead
//! (not accepting at the bound) would queue a scrape behind every
//! connection an attacker opens before it; closing every newcomer at the
//! bound would refuse scrapes for as long as the attacker holds it.

use std::collections::BTreeMap;

/// What happens to a new connection.
#[derive(Debug, PartialEq, Eq)]
pub enum Admit<T> {
    /// There is room: it is served.
    Room,
    /// The handle of the connection to close so that it is served.
    Evict(T),
    /// Every connection is being answered: it is closed at once.
    Full,
}

struct Slot<T> {
    handle: T,
    /// Its request head has not been read yet.
    waiting: bool,
}

/// The open connections in the order they were accepted (ids grow), each
/// with the handle that closes it (`T`: a task's abort handle).
pub struct Conns<T> {
    next: u64,
    open: BTreeMap<u64, Slot<T>>,
}

impl<T> Conns<T> {
    pub fn new() -> Conns<T> {
        Conns {
            next: 0,
            open: BTreeMap::new(),
        }
    }

    /// How many are open.
    pub fn len(&self) -> usize {
        self.open.len()
    }

    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    /// Make room for one more under `bound`, as the module says: the
    /// evicted connection leaves the table here, its handle goes to the
    /// caller to close it.
    pub fn admit(&mut self, bound: usize) -> Admit<T> {
        if self.open.len() < bound {
            return Admit::Room;
        }
        let oldest = self.open.iter().find(|(_, s)| s.waiting).map(|(id, _)| *id);
        match oldest.and_then(|id| self.open.remove(&id)) {
            Some(slot) => Admit::Evict(slot.handle),
            None => Admit::Full,
        }
    }

    /// The id the next connection gets (ids are never reused).
    pub fn next_id(&self) -> u64 {
        self.next
    }

    /// Enter an admitted connection, waiting for its head, under the id
    /// [`Conns::next_id`] gave.
    pub fn insert(&mut self, handle: T) -> u64 {
        let id = self.next;
        self.next += 1;
        self.open.insert(
            id,
            Slot {
                handle,
                waiting: true,
            },
        );
        id
    }

    /// Its request head has been read: it is being answered and is no
    /// longer closed to make room.
    pub fn heard(&mut self, id: u64) {
        if let Some(s) = self.open.get_mut(&id) {
            s.waiting = false;
        }
    }

    /// It has ended (or was evicted: then it is gone already).
    pub fn remove(&mut self, id: u64) {
        self.open.remove(&id);
    }
}

impl<T> Default for Conns<T> {
    fn default() -> Self {
        Conns::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_waiting_one_makes_room_then_newcomers_are_refused() {
        let mut c = Conns::new();
        assert_eq!(c.admit(3), Admit::Room);
        let a = c.insert("a");
        assert_eq!(c.next_id(), 1);
        let b = c.insert("b");
        let _ = c.insert("c");
        // a is being answered: b is the oldest still waiting.
        c.heard(a);
        assert_eq!(c.admit(3), Admit::Evict("b"));
        assert_eq!(c.len(), 2);
        // b's task ends after its eviction: nothing else goes.
        c.remove(b);
        assert_eq!(c.len(), 2);
        let d = c.insert("d");
        c.heard(d);
        assert_eq!(c.admit(3), Admit::Evict("c"));
        let e = c.insert("e");
        c.heard(e);
        assert_eq!(c.admit(3), Admit::Full);
        c.remove(a);
        assert_eq!(c.admit(3), Admit::Room);
    }
}
