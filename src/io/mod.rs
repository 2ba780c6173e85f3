//! Readiness drivers and sockets: the bottom of the data path.
//!
//! A workload asks a [`Driver`] which of its sockets are ready and then does
//! the I/O itself on non-blocking (or, for the blocking driver, time-limited
//! blocking) sockets. The engine owns one driver per worker thread.
//!
//! Three drivers exist, each earning its place:
//! - [`epoll::Epoll`], edge-triggered, for any number of sockets per thread;
//! - [`uring::Uring`] (`--driver uring`), io_uring multishot poll, for any
//!   number of sockets per thread;
//! - [`blocking::Blocking`], for a worker with exactly one flow, which owns
//!   one socket at a time (the common single-flow case; tcp_crr opens one
//!   after another). It skips `epoll_wait` entirely: a
//!   request/response transaction then costs one `send` and one `recv`, as in
//!   netperf, instead of three syscalls. The engine's watchdog interrupts a
//!   blocked worker with a signal so it still sees phase changes and stop.

pub mod blocking;
pub mod connect;
pub mod epoll;
pub mod fdlimit;
pub mod mmsg;
pub mod socket;
pub mod uring;
pub mod zerocopy;

use std::io;
use std::os::fd::RawFd;

/// One readiness report. `token` is what the workload registered the socket with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    pub token: u64,
    pub readable: bool,
    pub writable: bool,
    /// Error or hang-up reported by the kernel; the workload learns which from its next call.
    pub error: bool,
    /// A `recv` after a short one may still find something: the peer half-closed
    /// (EPOLLRDHUP/EPOLLHUP), or the driver is not edge-triggered. False only
    /// where a short read proves the queue empty until the next edge.
    pub may_have_more: bool,
}

impl Event {
    /// A wake-up the engine makes up itself (start, phase change, leftover budget).
    pub fn kick(token: u64) -> Event {
        Event {
            token,
            readable: true,
            writable: true,
            error: false,
            may_have_more: true,
        }
    }
}

/// The event-loop seam: epoll today, io_uring later.
pub trait Driver: Send {
    /// Watch a connected socket for both directions, edge-triggered.
    fn register(&mut self, fd: RawFd, token: u64) -> io::Result<()>;
    /// Watch a listening socket shared with other workers (level-triggered,
    /// woken exclusively so one connection wakes one worker).
    fn register_listener(&mut self, fd: RawFd, token: u64) -> io::Result<()>;
    /// Watch a socket that is already blocking, for the blocking driver
    /// (which then skips making it so); other drivers register it as usual.
    fn register_blocking(&mut self, fd: RawFd, token: u64) -> io::Result<()> {
        self.register(fd, token)
    }
    /// Stop watching `fd` (closing it also does).
    fn deregister(&mut self, fd: RawFd) -> io::Result<()>;
    /// Wait up to `timeout_ms` (0: do not block) and append ready sockets to `out`.
    fn wait(&mut self, out: &mut Vec<Event>, timeout_ms: i32) -> io::Result<()>;
    /// Name reported in results.
    fn name(&self) -> &'static str;
    /// Does the workload's own socket call do the waiting (the blocking
    /// driver)? A flow that waits for something else than its socket being
    /// readable or writable (MSG_ZEROCOPY completions) must then wait itself.
    fn waits_in_io(&self) -> bool {
        false
    }
}

/// Which driver a worker uses; chosen per worker by the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DriverKind {
    Epoll,
    Blocking,
    Uring,
}

impl DriverKind {
    pub fn name(self) -> &'static str {
        match self {
            DriverKind::Epoll => "epoll",
            DriverKind::Blocking => "blocking",
            DriverKind::Uring => "uring",
        }
    }

    /// `blocking_timeout`: the longest one blocking call may wait (blocking driver only).
    pub fn create(self, blocking_timeout: std::time::Duration) -> io::Result<Box<dyn Driver>> {
        Ok(match self {
            DriverKind::Epoll => Box::new(epoll::Epoll::new()?),
            DriverKind::Blocking => Box::new(blocking::Blocking::new(blocking_timeout)),
            DriverKind::Uring => Box::new(uring::Uring::new()?),
        })
    }
}
