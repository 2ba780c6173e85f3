//! The io_uring driver: a completion driver for request/response flows,
//! a readiness driver for the rest.
//!
//! **Completions** (tcp_rr, udp_rr; see [`Completions`]). Each socket gets
//! one multishot `IORING_OP_RECV` (Linux 6.0) that picks its buffer from a
//! ring of provided buffers registered with `IORING_REGISTER_PBUF_RING`
//! (Linux 5.19): every arrival (for UDP, every datagram) posts one
//! completion carrying the buffer's id, without a syscall of ours. The
//! kernel ends a multishot receive when the completion queue overflows or
//! the buffers run out (`ENOBUFS`); the driver arms it again with the next
//! submission. Flows queue their sends as `IORING_OP_SEND` entries; the
//! sends, the re-arms and the wait go to the kernel together in one
//! `io_uring_enter` per loop of the worker. The buffers handed to flows in
//! one wake-up go back to the ring at the start of the next wait, once the
//! flows have read them: a flow never holds on to a received buffer.
//!
//! **Readiness** (tcp_stream and the other tests whose flows do their own
//! I/O): each socket gets one multishot `IORING_OP_POLL_ADD` (Linux 5.13)
//! for input, output and peer half-close, which posts a completion on every
//! wake-up of the socket, as edge-triggered epoll reports an edge.
//!
//! **Connections** (tcp_crr, tcp_cc). A pending request holds a reference
//! to its socket's file, where epoll drops a closed socket by itself, so a
//! multishot poll or receive on a socket that is closed would keep it open.
//! Connection tests therefore use only requests that complete by
//! themselves: `IORING_OP_CONNECT`, a one-shot `IORING_OP_RECV` into a
//! provided buffer, `IORING_OP_SEND` with `MSG_WAITALL` and
//! `IORING_OP_CLOSE`, linked (`IOSQE_IO_LINK`) so that a client's connect,
//! request and receive go to the kernel in one submission, and a close
//! waits for the receive of the peer's FIN (`IOSQE_IO_HARDLINK`: it runs
//! even if that receive is cancelled). A close is queued only once the
//! flow has let go of the socket, so a close that runs after a cancelled
//! request never meets a descriptor someone still owns. The server's
//! `IORING_OP_ACCEPT` on the listener (which the session closes only after
//! the workers and their drivers are gone) takes one connection and is
//! queued again, not multishot: a multishot accept (Linux 5.19) keeps
//! accepting until the queue is empty, so one worker took every connection
//! of a 2-thread server (49,874 against 0 in 2 s of `tcp_crr -F 16 -T 2`),
//! and it cannot return the peer's address (a `getpeername` each). A socket
//! closed before its receive completed (a token overdue) has its requests
//! cancelled by descriptor first.
//!
//! Under `--busy-poll` the ring is registered for io_uring's NAPI busy
//! polling when it is made ([`super::napi`]): the wait in `io_uring_enter`
//! polls the device queues of the sockets the ring serves, which
//! SO_BUSY_POLL alone would not do here (no receive call of ours waits).
//!
//! Dropping the driver cancels every request still pending and waits for
//! their last completions, so a send never outlives the buffer it reads and
//! the session closes sockets that no request holds.
//!
//! The ring of provided buffers is sized from the flows' wants
//! ([`ring_count`]): a power of two up to 32,768 buffers, and no more than
//! [`RING_MAX_BYTES`] of them (but at least 1,024) when they are large, since
//! the sizes come from a peer's spec (a server's udp_rr flows ask for a
//! buffer of the request's size per request in flight: 32,768 × 64 KB
//! would be 2.1 GB a worker). A ring that runs dry only ends the multishot
//! receive until the next submission. The allocation is fallible: a ring
//! the machine cannot give fails the driver's creation, not the process.
//!
//! [`probe`] checks at start-up that the kernel allows io_uring (it may be
//! disabled by `kernel.io_uring_disabled` or a seccomp filter) and has what
//! this driver needs, by running one multishot receive into a provided
//! buffer on a socket pair; without it `--driver uring` falls back to epoll
//! and the result says so.

use std::collections::HashMap;
use std::io;
use std::os::fd::RawFd;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

use io_uring::{IoUring, cqueue, opcode, squeue, types};

use super::{Completion, Completions, Driver, Event, RecvBuffers};

/// Completions of requests whose outcome nobody needs (poll removals, cancels).
const IGNORE: u64 = u64::MAX;
/// Submission queue entries; completions get twice as many.
const ENTRIES: u32 = 1024;
/// The provided-buffer group every receive of a driver picks from.
const GROUP: u16 = 0;
/// The top two bits of `user_data` say what a completion is for; the rest
/// is the flow's token (receives, polls) or slot and tag (sends).
const OP_MASK: u64 = 3 << 62;
const OP_POLL: u64 = 0;
const OP_RECV: u64 = 1 << 62;
const OP_SEND: u64 = 2 << 62;
/// Connection operations; the three bits under [`OP_MASK`] say which.
const OP_CONN: u64 = 3 << 62;
const CONN_KIND: u64 = 7 << 59;
const CONN_CONNECT: u64 = 1 << 59;
const CONN_ACCEPT: u64 = 2 << 59;
const CONN_RECV: u64 = 3 << 59;
const CONN_CLOSE: u64 = 4 << 59;
/// The flow-slot half of a token.
const SLOT_MASK: u64 = !OP_MASK & !0xFFFF_FFFF;

/// The most buffers a ring holds (the kernel's limit is 32,768 entries).
const RING_MAX_ENTRIES: usize = 32768;
/// Past this many bytes of buffers a ring holds fewer of them, down to
/// [`RING_MIN_LARGE`]: 32,768 small buffers, or 1,024 of 64 KiB.
pub const RING_MAX_BYTES: usize = 64 << 20;
/// Buffers a ring of large buffers keeps whatever their size.
const RING_MIN_LARGE: usize = 1024;

/// Buffers in the ring for `spec`: its count as a power of two in
/// 2..=32768, halved while the ring would pass [`RING_MAX_BYTES`] and
/// hold more than [`RING_MIN_LARGE`].
pub fn ring_count(spec: RecvBuffers) -> usize {
    let size = spec.size.max(1);
    let mut count = spec.count.clamp(2, RING_MAX_ENTRIES).next_power_of_two();
    while count > RING_MIN_LARGE && count.saturating_mul(size) > RING_MAX_BYTES {
        count /= 2;
    }
    count
}

/// The bytes of buffers a ring for `spec` allocates (the memory estimate
/// of a server session counts them).
pub fn ring_bytes(spec: RecvBuffers) -> u64 {
    ring_count(spec) as u64 * spec.size.max(1) as u64
}

/// `n` zeroed bytes (calloc: the pages are touched only when used), or
/// ENOMEM where the allocator cannot give them: a buffer sized by a peer
/// must never abort the process as `vec![0; n]` does.
pub fn zeroed(n: usize) -> io::Result<Box<[u8]>> {
    if n == 0 {
        return Ok(Box::default());
    }
    let layout = std::alloc::Layout::array::<u8>(n)
        .map_err(|_| io::Error::from_raw_os_error(libc::ENOMEM))?;
    // SAFETY: a non-zero size; the pointer is checked before use.
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    if ptr.is_null() {
        return Err(io::Error::new(
            io::ErrorKind::OutOfMemory,
            format!("cannot allocate {n} bytes of buffers"),
        ));
    }
    // SAFETY: `ptr` holds `n` initialised (zeroed) bytes allocated with the
    // layout a Box<[u8]> of length `n` frees with.
    Ok(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, n)) })
}

/// Is the io_uring driver usable here? `Err` says why not; probed once.
pub fn probe() -> Result<(), String> {
    static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
    PROBE.get_or_init(probe_now).clone()
}

fn probe_now() -> Result<(), String> {
    let ring = IoUring::new(8).map_err(|e| format!("io_uring_setup: {e}"))?;
    if !ring.params().is_feature_ext_arg() {
        return Err("the kernel lacks IORING_FEAT_EXT_ARG (Linux 5.11)".into());
    }
    let mut p = io_uring::Probe::new();
    ring.submitter()
        .register_probe(&mut p)
        .map_err(|e| format!("IORING_REGISTER_PROBE: {e}"))?;
    for (code, name) in [
        (opcode::PollAdd::CODE, "POLL_ADD"),
        (opcode::PollRemove::CODE, "POLL_REMOVE"),
        (opcode::RecvMulti::CODE, "RECV"),
        (opcode::Send::CODE, "SEND"),
        (opcode::AsyncCancel2::CODE, "ASYNC_CANCEL"),
        (opcode::Connect::CODE, "CONNECT"),
        (opcode::Accept::CODE, "ACCEPT"),
        (opcode::Close::CODE, "CLOSE"),
    ] {
        if !p.is_supported(code) {
            return Err(format!("the kernel does not support IORING_OP_{name}"));
        }
    }
    drop(ring);
    // Opcodes are not enough: multishot receive (6.0) and buffer rings
    // (5.19) are flags and registrations. Run one for real.
    let mut u = Uring::new(Some(RecvBuffers { size: 64, count: 8 }), None)
        .map_err(|e| format!("registering a provided-buffer ring (Linux 5.19): {e}"))?;
    let (a, b) = std::os::unix::net::UnixStream::pair().map_err(|e| e.to_string())?;
    use std::io::Write;
    use std::os::fd::AsRawFd;
    let c = u.completions().expect("completion driver");
    c.recv_multishot(b.as_raw_fd(), 1 << 32)
        .map_err(|e| format!("multishot receive: {e}"))?;
    (&a).write_all(b"xy").map_err(|e| e.to_string())?;
    let mut evs = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(2);
    while evs.is_empty() && Instant::now() < deadline {
        u.wait(&mut evs, Duration::from_millis(100))
            .map_err(|e| format!("io_uring_enter: {e}"))?;
    }
    match evs.first().map(|e| e.done) {
        Some(Completion::Received { len: 2, .. }) if u.recv_armed(1) => Ok(()),
        Some(Completion::RecvFailed(e)) => Err(format!(
            "multishot receive into provided buffers (Linux 6.0) failed: {}",
            io::Error::from_raw_os_error(e)
        )),
        other => Err(format!(
            "multishot receive into provided buffers (Linux 6.0) did not stay armed: {other:?}"
        )),
    }
}

/// A ring of provided buffers (`IORING_REGISTER_PBUF_RING`): the ring of
/// buffer descriptors is shared with the kernel (page-aligned, mapped here),
/// the buffers themselves are one allocation that never moves.
struct BufRing {
    ring: *mut types::BufRingEntry,
    ring_bytes: usize,
    bufs: Box<[u8]>,
    size: usize,
    mask: u16,
    /// Our copy of the tail; published to the kernel with a release store.
    tail: u16,
}

impl BufRing {
    fn new(spec: RecvBuffers) -> io::Result<BufRing> {
        let count = ring_count(spec);
        let size = spec.size.max(1);
        // Before the mapping, so that a failure leaves nothing to undo.
        let bufs = zeroed(count.saturating_mul(size))?;
        let ring_bytes = count * std::mem::size_of::<types::BufRingEntry>();
        // SAFETY: an anonymous private mapping; the result is checked.
        let ring = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                ring_bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_ANONYMOUS | libc::MAP_PRIVATE,
                -1,
                0,
            )
        };
        if ring == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let mut r = BufRing {
            ring: ring.cast(),
            ring_bytes,
            bufs,
            size,
            mask: (count - 1) as u16,
            tail: 0,
        };
        for bid in 0..count as u16 {
            r.give(bid);
        }
        r.publish();
        Ok(r)
    }

    fn entries(&self) -> u16 {
        self.mask.wrapping_add(1)
    }

    /// Put buffer `bid` at the tail (not yet visible to the kernel).
    fn give(&mut self, bid: u16) {
        // SAFETY: the index is masked into the ring; bid < count, so the
        // address is inside `bufs`. The kernel reads only entries between its
        // head and the published tail, and this one is past the tail.
        unsafe {
            let e = &mut *self.ring.add((self.tail & self.mask) as usize);
            e.set_addr(self.bufs.as_ptr().add(bid as usize * self.size) as u64);
            e.set_len(self.size as u32);
            e.set_bid(bid);
        }
        self.tail = self.tail.wrapping_add(1);
    }

    /// Show the kernel every buffer given so far.
    fn publish(&self) {
        // SAFETY: the tail is a u16 inside the first entry, naturally aligned.
        let tail =
            unsafe { &*(types::BufRingEntry::tail(self.ring).cast_mut() as *const AtomicU16) };
        tail.store(self.tail, Ordering::Release);
    }

    fn get(&self, bid: u16, len: u32) -> &[u8] {
        &self.bufs[bid as usize * self.size..][..(len as usize).min(self.size)]
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: our own mapping, unregistered from the ring before this.
        unsafe { libc::munmap(self.ring.cast(), self.ring_bytes) };
    }
}

pub struct Uring {
    ring: IoUring,
    /// token → fd of every socket registered for readiness, to re-arm a poll the kernel ended.
    fds: HashMap<u64, RawFd>,
    /// Completion driver only: the buffers receives pick from.
    bufs: Option<BufRing>,
    /// Flow slot → (token, fd) of its multishot receive, to re-arm it.
    recv_fds: Vec<Option<(u64, RawFd)>>,
    /// Buffers handed to flows in the last wait, returned at the next.
    handed: Vec<u16>,
    /// Receives the kernel ended that are to be armed again.
    rearm: Vec<u64>,
    /// Requests whose last completion has not come yet.
    pending: usize,
    /// Flags for the next request queued ([`Completions::link_next`]).
    link: Option<squeue::Flags>,
    /// The ring's NAPI busy polling as the kernel read it back, when asked.
    napi: Option<super::napi::NapiSet>,
}

impl Uring {
    /// A readiness driver, or with `recv_buffers` a completion driver too;
    /// with `napi`, its waits busy-poll ([`super::napi`]).
    pub fn new(
        recv_buffers: Option<RecvBuffers>,
        napi: Option<super::napi::NapiSet>,
    ) -> io::Result<Uring> {
        // One thread submits (the worker that owns the driver): let the
        // kernel skip the locking that several submitters would need.
        let ring = IoUring::builder()
            .setup_single_issuer()
            .build(ENTRIES)
            .or_else(|_| IoUring::new(ENTRIES))?;
        let napi = match napi {
            Some(ask) => Some(super::napi::register(&ring.submitter(), ask)?),
            None => None,
        };
        let bufs = match recv_buffers {
            Some(spec) => {
                let b = BufRing::new(spec)?;
                // SAFETY: the descriptor ring stays mapped until after the
                // ring is unregistered (Drop), and holds `entries` entries.
                unsafe {
                    ring.submitter().register_buf_ring_with_flags(
                        b.ring as u64,
                        b.entries(),
                        GROUP,
                        0,
                    )?
                };
                Some(b)
            }
            None => None,
        };
        let handed = Vec::with_capacity(bufs.as_ref().map_or(0, |b| b.entries() as usize));
        Ok(Uring {
            ring,
            fds: HashMap::new(),
            bufs,
            recv_fds: Vec::new(),
            handed,
            rearm: Vec::with_capacity(64),
            pending: 0,
            link: None,
            napi,
        })
    }

    /// Queue one request; when the submission queue is full, submit first.
    fn push(&mut self, e: squeue::Entry) -> io::Result<()> {
        let e = match self.link.take() {
            Some(f) => e.flags(f),
            None => e,
        };
        loop {
            // SAFETY: entries carry pointers only into memory that the
            // callers keep valid until the request completes (see `send`).
            if unsafe { self.ring.submission().push(&e) }.is_ok() {
                self.pending += 1;
                return Ok(());
            }
            self.ring.submit()?;
        }
    }

    fn arm(&mut self, fd: RawFd, token: u64, events: i16) -> io::Result<()> {
        let e = opcode::PollAdd::new(types::Fd(fd), events as u32)
            .multi(true)
            .build()
            .user_data(token);
        self.push(e)
    }

    fn arm_recv(&mut self, fd: RawFd, token: u64) -> io::Result<()> {
        let e = opcode::RecvMulti::new(types::Fd(fd), GROUP)
            .build()
            .user_data(OP_RECV | token);
        self.push(e)
    }

    /// Queue a send reported as [`Completion::Sent`] with `tag` and the slot of `token`.
    fn queue_send(
        &mut self,
        fd: RawFd,
        token: u64,
        tag: u32,
        buf: *const u8,
        len: usize,
        flags: i32,
    ) -> io::Result<()> {
        debug_assert!(tag < 1 << 30);
        let e = opcode::Send::new(types::Fd(fd), buf, len as u32)
            .flags(flags)
            .build()
            .user_data(OP_SEND | (token & SLOT_MASK) | tag as u64);
        self.push(e)
    }

    /// Is a receive registered for `slot` (not ended by EOF or an error)?
    fn recv_armed(&self, slot: usize) -> bool {
        self.recv_fds.get(slot).is_some_and(|r| r.is_some())
    }

    /// Return the buffers flows have read to the kernel.
    fn recycle(&mut self) {
        if self.handed.is_empty() {
            return;
        }
        let Some(b) = self.bufs.as_mut() else {
            return;
        };
        for &bid in &self.handed {
            b.give(bid);
        }
        b.publish();
        self.handed.clear();
    }

    /// Turn one completion into an event for the flow, if it needs one.
    fn readiness(token: u64, res: i32) -> Option<Event> {
        if res == -libc::ECANCELED {
            // A removed socket's poll ending.
            return None;
        }
        Some(if res < 0 {
            Event {
                token,
                readable: true,
                writable: true,
                error: true,
                may_have_more: true,
                done: Completion::None,
            }
        } else {
            let bits = res as i16;
            Event {
                token,
                readable: bits & (libc::POLLIN | libc::POLLRDHUP | libc::POLLHUP) != 0,
                writable: bits & libc::POLLOUT != 0,
                error: bits & (libc::POLLERR | libc::POLLHUP) != 0,
                may_have_more: bits & (libc::POLLRDHUP | libc::POLLHUP) != 0,
                done: Completion::None,
            }
        })
    }

    /// Enter the kernel: submit what is queued and, unless `timeout_ms` is
    /// 0, sleep until the first completion or the timeout.
    fn enter(&mut self, timeout: Duration) -> io::Result<()> {
        let queued = !self.ring.submission().is_empty();
        let have = !self.ring.completion().is_empty();
        if !timeout.is_zero() && !have {
            let r = {
                let ts = types::Timespec::from(timeout);
                let args = types::SubmitArgs::new().timespec(&ts);
                self.ring.submitter().submit_with_args(1, &args).map(|_| ())
            };
            match r {
                Ok(()) => Ok(()),
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY)
                    ) =>
                {
                    Ok(())
                }
                Err(e) => Err(e),
            }
        } else if queued {
            self.ring.submit().map(|_| ())
        } else {
            Ok(())
        }
    }
}

// The ring is used by one worker thread at a time; the buffer ring's raw
// pointer points into memory the driver owns.
unsafe impl Send for Uring {}

impl Drop for Uring {
    fn drop(&mut self) {
        // Cancel every request still pending (receives, polls, sends waiting
        // for room) and wait for their last completions: a send reads from
        // its flow's buffer until then, and a request holds its socket open.
        if self.pending > 0 {
            let cancel = opcode::AsyncCancel2::new(types::CancelBuilder::any())
                .build()
                .user_data(IGNORE);
            let _ = self.push(cancel);
            let deadline = Instant::now() + Duration::from_secs(5);
            while self.pending > 0 && Instant::now() < deadline {
                if self.enter(Duration::from_millis(100)).is_err() {
                    break;
                }
                for cqe in self.ring.completion() {
                    if !cqueue::more(cqe.flags()) {
                        self.pending -= 1;
                    }
                }
            }
        }
        if self.bufs.is_some() {
            let _ = self.ring.submitter().unregister_buf_ring(GROUP);
        }
    }
}

const SOCKET_EVENTS: i16 = libc::POLLIN | libc::POLLOUT | libc::POLLRDHUP;

impl Driver for Uring {
    fn register(&mut self, fd: RawFd, token: u64) -> io::Result<()> {
        self.fds.insert(token, fd);
        self.arm(fd, token, SOCKET_EVENTS)
    }

    fn register_listener(&mut self, fd: RawFd, token: u64) -> io::Result<()> {
        self.fds.insert(token, fd);
        self.arm(fd, token, libc::POLLIN)
    }

    fn deregister(&mut self, fd: RawFd) -> io::Result<()> {
        let Some(token) = self.fds.iter().find(|(_, f)| **f == fd).map(|(t, _)| *t) else {
            return Ok(());
        };
        self.fds.remove(&token);
        self.push(opcode::PollRemove::new(token).build().user_data(IGNORE))
    }

    fn wait(&mut self, out: &mut Vec<Event>, timeout: Duration) -> io::Result<()> {
        // The flows read last wake-up's buffers: the kernel may fill them again.
        self.recycle();
        self.enter(timeout)?;
        let mut rearm_polls = Vec::new();
        for cqe in self.ring.completion() {
            let (data, res, flags) = (cqe.user_data(), cqe.result(), cqe.flags());
            let more = cqueue::more(flags);
            if !more {
                self.pending -= 1;
            }
            if data == IGNORE {
                continue;
            }
            let token = data & !OP_MASK;
            let done = match data & OP_MASK {
                OP_RECV => {
                    if res > 0 {
                        let Some(bid) = cqueue::buffer_select(flags) else {
                            continue;
                        };
                        self.handed.push(bid);
                        if !more {
                            // Ended by the kernel (a full completion queue): again.
                            self.rearm.push(token);
                        }
                        Completion::Received {
                            buf: bid,
                            len: res as u32,
                        }
                    } else if res == -libc::ENOBUFS {
                        // Out of buffers: they come back at the next wait, and
                        // the data waits in the socket until then.
                        self.rearm.push(token);
                        continue;
                    } else {
                        let slot = (token >> 32) as usize;
                        if let Some(r) = self.recv_fds.get_mut(slot) {
                            *r = None;
                        }
                        match res {
                            0 => Completion::Eof,
                            e if e == -libc::ECANCELED => continue,
                            e => Completion::RecvFailed(-e),
                        }
                    }
                }
                OP_SEND => Completion::Sent {
                    tag: data as u32,
                    res,
                },
                OP_CONN => {
                    let done = match data & CONN_KIND {
                        CONN_CONNECT => Completion::Connected(res),
                        CONN_ACCEPT => Completion::Accepted(res),
                        CONN_RECV if res > 0 => match cqueue::buffer_select(flags) {
                            Some(bid) => {
                                self.handed.push(bid);
                                Completion::Received {
                                    buf: bid,
                                    len: res as u32,
                                }
                            }
                            None => Completion::RecvFailed(libc::EIO),
                        },
                        CONN_RECV if res == 0 => Completion::Eof,
                        CONN_RECV => Completion::RecvFailed(-res),
                        _ => Completion::Closed(res),
                    };
                    out.push(Event {
                        token: data & !(OP_MASK | CONN_KIND),
                        readable: false,
                        writable: false,
                        error: false,
                        may_have_more: false,
                        done,
                    });
                    continue;
                }
                _ => {
                    debug_assert_eq!(data & OP_MASK, OP_POLL);
                    if let Some(ev) = Self::readiness(token, res) {
                        out.push(ev);
                    }
                    // The kernel ends a multishot poll on errors or a full
                    // completion queue; a socket still registered is armed again.
                    if !more && let Some(&fd) = self.fds.get(&token) {
                        rearm_polls.push((fd, token));
                    }
                    continue;
                }
            };
            let token = if matches!(done, Completion::Sent { .. }) {
                token & SLOT_MASK
            } else {
                token
            };
            out.push(Event {
                token,
                readable: false,
                writable: false,
                error: false,
                may_have_more: false,
                done,
            });
        }
        for (fd, token) in rearm_polls {
            self.arm(fd, token, SOCKET_EVENTS)?;
        }
        for i in 0..self.rearm.len() {
            let token = self.rearm[i];
            if let Some(Some((t, fd))) = self.recv_fds.get((token >> 32) as usize).copied()
                && t == token
            {
                self.arm_recv(fd, token)?;
            }
        }
        self.rearm.clear();
        Ok(())
    }

    fn name(&self) -> &'static str {
        "uring"
    }

    fn napi(&self) -> Option<super::napi::NapiSet> {
        self.napi
    }

    fn completions(&mut self) -> Option<&mut dyn Completions> {
        if self.bufs.is_some() {
            Some(self)
        } else {
            None
        }
    }
}

impl Completions for Uring {
    fn recv_multishot(&mut self, fd: RawFd, token: u64) -> io::Result<()> {
        let slot = (token >> 32) as usize;
        if token & OP_MASK != 0 {
            return Err(io::Error::other("flow slot out of range for io_uring"));
        }
        if self.recv_fds.len() <= slot {
            self.recv_fds.resize(slot + 1, None);
        }
        self.recv_fds[slot] = Some((token, fd));
        self.arm_recv(fd, token)
    }

    unsafe fn send(
        &mut self,
        fd: RawFd,
        token: u64,
        tag: u32,
        buf: *const u8,
        len: usize,
    ) -> io::Result<()> {
        self.queue_send(fd, token, tag, buf, len, 0)
    }

    fn received(&self, buf: u16, len: u32) -> &[u8] {
        self.bufs.as_ref().map_or(&[], |b| b.get(buf, len))
    }

    fn link_next(&mut self, hard: bool) {
        self.link = Some(if hard {
            squeue::Flags::IO_HARDLINK
        } else {
            squeue::Flags::IO_LINK
        });
    }

    unsafe fn connect(
        &mut self,
        fd: RawFd,
        token: u64,
        addr: *const libc::sockaddr,
        len: libc::socklen_t,
    ) -> io::Result<()> {
        let e = opcode::Connect::new(types::Fd(fd), addr, len)
            .build()
            .user_data(conn_data(CONN_CONNECT, token)?);
        self.push(e)
    }

    unsafe fn accept(
        &mut self,
        listener: RawFd,
        token: u64,
        addr: *mut libc::sockaddr_storage,
        len: *mut libc::socklen_t,
    ) -> io::Result<()> {
        let e = opcode::Accept::new(types::Fd(listener), addr.cast(), len)
            .flags(libc::SOCK_CLOEXEC)
            .build()
            .user_data(conn_data(CONN_ACCEPT, token)?);
        self.push(e)
    }

    fn recv_once(&mut self, fd: RawFd, token: u64) -> io::Result<()> {
        let len = self.bufs.as_ref().map_or(0, |b| b.size) as u32;
        let e = opcode::Recv::new(types::Fd(fd), std::ptr::null_mut(), len)
            .buf_group(GROUP)
            .build()
            .flags(squeue::Flags::BUFFER_SELECT)
            .user_data(conn_data(CONN_RECV, token)?);
        self.push(e)
    }

    unsafe fn send_all(
        &mut self,
        fd: RawFd,
        token: u64,
        tag: u32,
        buf: *const u8,
        len: usize,
    ) -> io::Result<()> {
        self.queue_send(fd, token, tag, buf, len, libc::MSG_WAITALL)
    }

    fn close(&mut self, fd: RawFd, token: u64) -> io::Result<()> {
        let e = opcode::Close::new(types::Fd(fd))
            .build()
            .user_data(conn_data(CONN_CLOSE, token)?);
        self.push(e)
    }

    fn cancel_fd(&mut self, fd: RawFd) -> io::Result<()> {
        let e = opcode::AsyncCancel2::new(types::CancelBuilder::fd(types::Fd(fd)).all())
            .build()
            .user_data(IGNORE);
        self.push(e)
    }
}

/// The `user_data` of a connection operation for `token`, whose flow slot
/// must leave the top five bits free.
fn conn_data(kind: u64, token: u64) -> io::Result<u64> {
    if token & (OP_MASK | CONN_KIND) != 0 {
        return Err(io::Error::other("flow slot out of range for io_uring"));
    }
    Ok(OP_CONN | kind | token)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;

    /// The ring's size comes from a peer's spec: small buffers keep their
    /// count (a power of two, up to 32,768), large ones stop at 64 MiB
    /// unless 1,024 of them are more; nothing here aborts.
    #[test]
    fn a_ring_is_bounded_whatever_it_is_asked() {
        let r = |size, count| RecvBuffers { size, count };
        assert_eq!(ring_count(r(64, 100)), 128);
        assert_eq!(ring_count(r(2048, 1 << 20)), 32768);
        assert_eq!(ring_count(r(16 << 10, 32768)), 4096);
        assert_eq!(ring_count(r(65_508, 65_537)), 1024);
        assert_eq!(ring_bytes(r(65_508, 65_537)), 1024 * 65_508);
        assert!(ring_bytes(r(1 << 20, usize::MAX)) <= 1024 << 20);
        assert_eq!(zeroed(0).unwrap().len(), 0);
        assert!(zeroed(4096).unwrap().iter().all(|&b| b == 0));
        // 64 TiB: refused by the allocator, an error and not an abort.
        assert!(zeroed(1 << 46).is_err());
    }

    /// A connected loopback TCP pair, or None (said on stderr) without io_uring.
    fn pair_if_uring() -> Option<(TcpStream, TcpStream)> {
        if let Err(why) = probe() {
            eprintln!("SKIPPED: io_uring unavailable: {why}");
            return None;
        }
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        Some((a, b))
    }

    #[test]
    fn reports_readable_after_data_arrives_and_again_after_more() {
        let Some((mut a, b)) = pair_if_uring() else {
            return;
        };
        b.set_nonblocking(true).unwrap();
        let mut u = Uring::new(None, None).unwrap();
        u.register(b.as_raw_fd(), 7).unwrap();
        let mut evs = Vec::new();
        // Writable at once.
        u.wait(&mut evs, Duration::from_millis(1000)).unwrap();
        assert!(evs.iter().any(|e| e.token == 7 && e.writable), "{evs:?}");
        for round in 0..2 {
            evs.clear();
            a.write_all(b"x").unwrap();
            let mut waited = 0;
            while !evs.iter().any(|e| e.readable) && waited < 50 {
                u.wait(&mut evs, Duration::from_millis(100)).unwrap();
                waited += 1;
            }
            assert!(
                evs.iter().any(|e| e.token == 7 && e.readable),
                "round {round}: {evs:?}"
            );
            let mut buf = [0u8; 16];
            // SAFETY: reading into a local buffer.
            let n = unsafe { libc::recv(b.as_raw_fd(), buf.as_mut_ptr().cast(), 16, 0) };
            assert_eq!(n, 1);
        }
        // Nothing more: a timed wait returns empty.
        evs.clear();
        u.wait(&mut evs, Duration::from_millis(20)).unwrap();
        assert!(!evs.iter().any(|e| e.readable), "{evs:?}");
    }

    /// A ring of two 4-byte buffers runs dry at once: the receive ends with
    /// ENOBUFS and must be re-armed after the buffers come back, and the
    /// bytes must arrive whole and in order over many completions. A send
    /// queued with the ring must reach the peer.
    #[test]
    fn multishot_receive_survives_running_out_of_buffers() {
        let Some((mut a, b)) = pair_if_uring() else {
            return;
        };
        let mut u = Uring::new(Some(RecvBuffers { size: 4, count: 2 }), None).unwrap();
        let c = u.completions().unwrap();
        c.recv_multishot(b.as_raw_fd(), 3 << 32).unwrap();
        let out: Vec<u8> = (0..200u8).collect();
        // SAFETY: `out` outlives the driver's wait for the send below.
        unsafe { c.send(b.as_raw_fd(), 3 << 32, 5, out.as_ptr(), out.len()) }.unwrap();
        let sent: Vec<u8> = (0..=255u8).rev().collect();
        a.write_all(&sent).unwrap();
        let (mut got, mut evs, mut sent_back) = (Vec::new(), Vec::new(), None);
        let deadline = Instant::now() + Duration::from_secs(5);
        while (got.len() < sent.len() || sent_back.is_none()) && Instant::now() < deadline {
            evs.clear();
            u.wait(&mut evs, Duration::from_millis(100)).unwrap();
            for ev in &evs {
                assert_eq!(ev.token >> 32, 3, "{ev:?}");
                match ev.done {
                    Completion::Received { buf, len } => {
                        assert!(len <= 4, "{len}");
                        got.extend_from_slice(u.received(buf, len));
                    }
                    Completion::Sent { tag, res } => sent_back = Some((tag, res)),
                    other => panic!("{other:?}"),
                }
            }
        }
        assert_eq!(got, sent);
        assert!(u.recv_armed(3));
        assert_eq!(sent_back, Some((5, 200)));
        let mut back = vec![0u8; 200];
        std::io::Read::read_exact(&mut a, &mut back).unwrap();
        assert_eq!(back, out);
    }
}
