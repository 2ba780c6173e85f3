//! Readiness drivers and sockets: the bottom of the data path.
//!
//! A workload asks a [`Driver`] which of its sockets are ready and then does
//! the I/O itself on non-blocking (or, for the blocking driver, time-limited
//! blocking) sockets. The engine owns one driver per worker thread.
//!
//! Four drivers exist, each earning its place:
//! - [`epoll::Epoll`], edge-triggered, for any number of sockets per thread;
//! - [`uring::Uring`] (`--driver uring`), io_uring. For flows that can take
//!   their data from it (tcp_rr, udp_rr) it is a completion driver (see
//!   [`Completions`]): it receives with one multishot receive per socket into
//!   buffers it provides, sends what flows queue, and reports what was done;
//!   for tcp_crr and tcp_cc it also connects, accepts and closes, with
//!   requests that each complete (no closed socket is held by a pending
//!   one); for the others it reports readiness from multishot poll requests;
//!   under `--busy-poll` its ring's wait busy-polls the sockets' NAPI
//!   instances ([`napi`]);
//! - [`blocking::Blocking`], for a worker with exactly one flow, which owns
//!   one socket at a time (the common single-flow case; tcp_crr opens one
//!   after another). It skips `epoll_wait` entirely: a
//!   request/response transaction then costs one `send` and one `recv`, as in
//!   netperf, instead of three syscalls. The engine's watchdog interrupts a
//!   blocked worker with a signal so it still sees phase changes and stop;
//! - [`spin::Spin`] (`--spin`), which never sleeps: every socket is reported
//!   ready on every wait and the flow's non-blocking receive is the poll, so
//!   a transaction pays no scheduler wake-up, at the price of a whole CPU
//!   per worker.

pub mod blocking;
pub mod busypoll;
pub mod congestion;
pub mod connect;
pub mod epoll;
pub mod fdlimit;
pub mod icmp;
pub mod mmsg;
pub mod napi;
pub mod pagebuf;
pub mod socket;
pub mod sockmark;
pub mod spin;
pub mod spread;
pub mod tstamp;
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
    /// What a completion driver did for the flow; [`Completion::None`] for a
    /// readiness report or a kick.
    pub done: Completion,
}

/// The outcome of I/O a completion driver did for a flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Completion {
    /// Nothing: a readiness report or a kick.
    None,
    /// `len` bytes (for UDP: one datagram) arrived in provided buffer `buf`.
    /// They are readable with [`Completions::received`] until the next wait,
    /// when the buffer goes back to the kernel.
    Received { buf: u16, len: u32 },
    /// The peer closed its side (the receive returned 0); no receive is armed any more.
    Eof,
    /// The receive failed with this errno; no receive is armed any more.
    RecvFailed(i32),
    /// The send the flow queued with `tag` finished: bytes sent, or -errno.
    Sent { tag: u32, res: i32 },
    /// A connect queued with [`Completions::connect`] finished: 0 or -errno.
    Connected(i32),
    /// [`Completions::accept`] took a connection (`res`: its descriptor)
    /// or failed (-errno).
    Accepted(i32),
    /// A close queued with [`Completions::close`] finished: 0 or -errno
    /// (-ECANCELED: a failed request before it in its chain; the
    /// descriptor is then still open).
    Closed(i32),
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
            done: Completion::None,
        }
    }
}

/// The completion seam: a driver that does a flow's receives and sends
/// itself and reports their outcome as [`Event::done`]. A flow asks for it
/// once, in [`crate::workload::Flow::start`], and uses it instead of its own
/// `send`/`recv` when it is there.
pub trait Completions {
    /// Keep one receive armed on `fd` for good: every arrival is reported
    /// as [`Completion::Received`] with `token`.
    fn recv_multishot(&mut self, fd: RawFd, token: u64) -> io::Result<()>;
    /// Queue a send of `len` bytes at `buf`; it goes to the kernel with the
    /// next wait and is reported as [`Completion::Sent`] with `tag` (< 2^30)
    /// and the token of the flow's slot (low bits 0).
    ///
    /// # Safety
    /// `buf..buf+len` must stay valid and unchanged until that report, or
    /// until the driver is dropped (which cancels and waits for every request).
    unsafe fn send(
        &mut self,
        fd: RawFd,
        token: u64,
        tag: u32,
        buf: *const u8,
        len: usize,
    ) -> io::Result<()>;
    /// The bytes of a [`Completion::Received`] of the current wake-up.
    fn received(&self, buf: u16, len: u32) -> &[u8];

    // Connection operations (tcp_crr, tcp_cc): each request completes by
    // itself, so no request outlives the socket it names (a multishot
    // request would keep a closed socket open).

    /// Link the next request queued to the one queued after it: that one
    /// starts only once this one has finished. Not `hard`, only if it
    /// succeeded (a send with [`Completions::send_all`]: in full), else it
    /// completes with -ECANCELED; `hard`, whatever its outcome (a close
    /// that must follow a receive even when it was cancelled).
    fn link_next(&mut self, hard: bool);
    /// Queue a connect of `fd` to `addr`, reported as [`Completion::Connected`].
    ///
    /// # Safety
    /// `addr..addr+len` must stay valid until the next wait has submitted it.
    unsafe fn connect(
        &mut self,
        fd: RawFd,
        token: u64,
        addr: *const libc::sockaddr,
        len: libc::socklen_t,
    ) -> io::Result<()>;
    /// Queue an accept of one connection on `listener`, reported as
    /// [`Completion::Accepted`]; the new socket is blocking, and the peer's
    /// address is written to `addr` (`*len` bytes at most; set it before
    /// each accept).
    ///
    /// # Safety
    /// `addr` and `len` must stay valid until the accept has completed, or
    /// until the driver is dropped.
    unsafe fn accept(
        &mut self,
        listener: RawFd,
        token: u64,
        addr: *mut libc::sockaddr_storage,
        len: *mut libc::socklen_t,
    ) -> io::Result<()>;
    /// Queue one receive into a provided buffer, reported as
    /// [`Completion::Received`], [`Completion::Eof`] or [`Completion::RecvFailed`].
    fn recv_once(&mut self, fd: RawFd, token: u64) -> io::Result<()>;
    /// [`Completions::send`] that counts as failed unless it sent all
    /// `len` bytes (MSG_WAITALL: the kernel retries a short one), so a
    /// request linked after it never starts after half a message.
    ///
    /// # Safety
    /// As for [`Completions::send`].
    unsafe fn send_all(
        &mut self,
        fd: RawFd,
        token: u64,
        tag: u32,
        buf: *const u8,
        len: usize,
    ) -> io::Result<()>;
    /// Queue a close of `fd`, reported as [`Completion::Closed`]; the
    /// caller gives up the descriptor.
    fn close(&mut self, fd: RawFd, token: u64) -> io::Result<()>;
    /// Cancel every request on `fd` (they complete with -ECANCELED), so
    /// that closing it lets the socket go.
    fn cancel_fd(&mut self, fd: RawFd) -> io::Result<()>;
}

/// The provided buffers a completion driver receives into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvBuffers {
    /// Bytes per buffer: the most one receive completion carries.
    pub size: usize,
    /// Buffers in the ring (a power of two, at most 32768).
    pub count: usize,
}

/// The event-loop seam between the workloads and the kernel: epoll,
/// io_uring and the blocking driver each implement it (see the module doc),
/// and a flow is written once against it.
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
    /// Wait up to `timeout` (zero: do not block) and append ready sockets
    /// to `out`. Drivers keep the timeout to the microsecond where the
    /// kernel can (epoll_pwait2, io_uring's timespec): an open-loop
    /// schedule's next send is its deadline.
    fn wait(&mut self, out: &mut Vec<Event>, timeout: std::time::Duration) -> io::Result<()>;
    /// Name reported in results.
    fn name(&self) -> &'static str;
    /// Does the workload's own socket call do the waiting (the blocking
    /// driver)? A flow that waits for something else than its socket being
    /// readable or writable (MSG_ZEROCOPY completions) must then wait itself.
    fn waits_in_io(&self) -> bool {
        false
    }
    /// The completion side, where this driver has one.
    fn completions(&mut self) -> Option<&mut dyn Completions> {
        None
    }
    /// The one socket this driver serves, if it serves exactly one and
    /// holds no descriptor of its own (the blocking driver).
    fn sole_socket(&self) -> Option<RawFd> {
        None
    }
    /// The NAPI busy polling of this driver's waits as the kernel read it
    /// back (io_uring under `--busy-poll`, [`napi`]).
    fn napi(&self) -> Option<napi::NapiSet> {
        None
    }
}

/// Which driver a worker uses; chosen per worker by the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DriverKind {
    Epoll,
    Blocking,
    Uring,
    Spin,
}

impl DriverKind {
    pub fn name(self) -> &'static str {
        match self {
            DriverKind::Epoll => "epoll",
            DriverKind::Blocking => "blocking",
            DriverKind::Uring => "uring",
            DriverKind::Spin => "spin",
        }
    }

    /// `blocking_timeout`: the longest one blocking call may wait (blocking
    /// driver only). `recv_buffers`: make the io_uring driver a completion
    /// driver receiving into these buffers. `napi`: register the io_uring
    /// driver's ring for NAPI busy polling (the others ignore it).
    pub fn create(
        self,
        blocking_timeout: std::time::Duration,
        recv_buffers: Option<RecvBuffers>,
        napi: Option<napi::NapiSet>,
    ) -> io::Result<Box<dyn Driver>> {
        Ok(match self {
            DriverKind::Epoll => Box::new(epoll::Epoll::new()?),
            DriverKind::Blocking => Box::new(blocking::Blocking::new(blocking_timeout)),
            DriverKind::Uring => Box::new(uring::Uring::new(recv_buffers, napi)?),
            DriverKind::Spin => Box::new(spin::Spin::new()),
        })
    }
}
