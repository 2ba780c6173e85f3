//! The io_uring driver: readiness from multishot poll requests.
//!
//! A first step, shaped by the readiness-based [`Driver`] trait: each socket
//! gets one multishot `IORING_OP_POLL_ADD` (Linux 5.13) for input, output and
//! peer half-close, which posts a completion on every wake-up of the socket,
//! as edge-triggered epoll reports an edge; the workloads still do their own
//! `send`/`recv`. What io_uring saves here is the readiness syscall: the
//! completion queue is shared memory, so a worker that has work queued reads
//! new readiness without entering the kernel, and re-arms, removals and the
//! wait itself go to the kernel together in one `io_uring_enter` per loop
//! (batched submission). Multishot receive with provided buffers would also
//! save the `recv` calls, but needs the workloads to take their data from the
//! driver instead of reading it; that is future work.
//!
//! Sockets that are closed while registered (tcp_crr, tcp_cc) would stay
//! open: a pending poll request holds a reference to the file, where epoll
//! drops a closed socket by itself. Connection-test workers therefore run
//! epoll (see [`crate::engine::choose_driver`]).
//!
//! [`probe`] checks at start-up that the kernel allows io_uring (it may be
//! disabled by `kernel.io_uring_disabled` or a seccomp filter) and has what
//! this driver needs; without it `--driver uring` falls back to epoll and the
//! result says so.

use std::collections::HashMap;
use std::io;
use std::os::fd::RawFd;
use std::sync::OnceLock;
use std::time::Duration;

use io_uring::{IoUring, cqueue, opcode, squeue, types};

use super::{Driver, Event};

/// Completions of requests whose outcome nobody needs (poll removals).
const IGNORE: u64 = u64::MAX;
/// Submission queue entries; completions get twice as many.
const ENTRIES: u32 = 1024;

/// Is the io_uring driver usable here? `Err` says why not; probed once.
pub fn probe() -> Result<(), String> {
    static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
    PROBE
        .get_or_init(|| {
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
            ] {
                if !p.is_supported(code) {
                    return Err(format!("the kernel does not support IORING_OP_{name}"));
                }
            }
            Ok(())
        })
        .clone()
}

pub struct Uring {
    ring: IoUring,
    /// token → fd of every registered socket, to re-arm a poll the kernel ended.
    fds: HashMap<u64, RawFd>,
}

impl Uring {
    pub fn new() -> io::Result<Uring> {
        // One thread submits (the worker that owns the driver): let the
        // kernel skip the locking that several submitters would need.
        let ring = IoUring::builder()
            .setup_single_issuer()
            .build(ENTRIES)
            .or_else(|_| IoUring::new(ENTRIES))?;
        Ok(Uring {
            ring,
            fds: HashMap::new(),
        })
    }

    /// Queue one request; when the submission queue is full, submit first.
    fn push(&mut self, e: squeue::Entry) -> io::Result<()> {
        loop {
            // SAFETY: the entries carry no pointers into our memory.
            if unsafe { self.ring.submission().push(&e) }.is_ok() {
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
}

// The ring is used by one worker thread at a time.
unsafe impl Send for Uring {}

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

    fn wait(&mut self, out: &mut Vec<Event>, timeout_ms: i32) -> io::Result<()> {
        let queued = !self.ring.submission().is_empty();
        let have = !self.ring.completion().is_empty();
        if timeout_ms != 0 && !have {
            // Submit what is queued and sleep for the first completion, in one call.
            let r = if timeout_ms < 0 {
                self.ring.submit_and_wait(1).map(|_| ())
            } else {
                let ts = types::Timespec::from(Duration::from_millis(timeout_ms as u64));
                let args = types::SubmitArgs::new().timespec(&ts);
                self.ring.submitter().submit_with_args(1, &args).map(|_| ())
            };
            match r {
                Ok(()) => {}
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY)
                    ) => {}
                Err(e) => return Err(e),
            }
        } else if queued {
            self.ring.submit()?;
        }
        let mut rearm = Vec::new();
        for cqe in self.ring.completion() {
            let token = cqe.user_data();
            if token == IGNORE {
                continue;
            }
            let res = cqe.result();
            if res == -libc::ECANCELED {
                // A removed socket's poll ending.
                continue;
            }
            let ev = if res < 0 {
                Event {
                    token,
                    readable: true,
                    writable: true,
                    error: true,
                    may_have_more: true,
                }
            } else {
                let bits = res as i16;
                Event {
                    token,
                    readable: bits & (libc::POLLIN | libc::POLLRDHUP | libc::POLLHUP) != 0,
                    writable: bits & libc::POLLOUT != 0,
                    error: bits & (libc::POLLERR | libc::POLLHUP) != 0,
                    may_have_more: bits & (libc::POLLRDHUP | libc::POLLHUP) != 0,
                }
            };
            out.push(ev);
            // The kernel ends a multishot poll on errors or a full completion
            // queue; a socket still registered is armed again.
            if !cqueue::more(cqe.flags())
                && let Some(&fd) = self.fds.get(&token)
            {
                rearm.push((fd, token));
            }
        }
        for (fd, token) in rearm {
            self.arm(fd, token, SOCKET_EVENTS)?;
        }
        Ok(())
    }

    fn name(&self) -> &'static str {
        "uring"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;

    #[test]
    fn reports_readable_after_data_arrives_and_again_after_more() {
        if let Err(why) = probe() {
            eprintln!("SKIPPED: io_uring unavailable: {why}");
            return;
        }
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        b.set_nonblocking(true).unwrap();
        let mut u = Uring::new().unwrap();
        u.register(b.as_raw_fd(), 7).unwrap();
        let mut evs = Vec::new();
        // Writable at once.
        u.wait(&mut evs, 1000).unwrap();
        assert!(evs.iter().any(|e| e.token == 7 && e.writable), "{evs:?}");
        for round in 0..2 {
            evs.clear();
            a.write_all(b"x").unwrap();
            let mut waited = 0;
            while !evs.iter().any(|e| e.readable) && waited < 50 {
                u.wait(&mut evs, 100).unwrap();
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
        u.wait(&mut evs, 20).unwrap();
        assert!(!evs.iter().any(|e| e.readable), "{evs:?}");
    }
}
