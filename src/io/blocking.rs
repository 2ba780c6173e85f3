//! The single-socket blocking driver.
//!
//! When a worker owns one long-lived socket there is nothing to multiplex, and
//! `epoll_wait` is a third syscall per request/response transaction. This
//! driver makes the socket blocking and reports it ready on every call, so the
//! workload's own `recv` is the wait.
//!
//! A blocked worker must still notice phase changes, stop, and (udp_rr) lost
//! datagrams. A receive timeout (SO_RCVTIMEO) would do it, but the kernel
//! then arms and cancels a timer on every wait, once per transaction: about
//! 3 % of a pinned 1-byte udp_rr. Instead the socket has no timeout, and the
//! engine's watchdog ([`crate::engine`]) interrupts a worker that has made no
//! progress for [`POLL_TIMEOUT`] (or the flow's shorter timeout) with
//! [`WAKE_SIGNAL`], whose handler does nothing and is installed without
//! SA_RESTART: the blocked call returns EINTR, which the workloads treat like
//! EAGAIN, and the worker loop looks at its flags. A transaction pays nothing.

use std::io;
use std::os::fd::RawFd;
use std::sync::Once;
use std::time::Duration;

use super::{Completion, Driver, Event};

/// How long a blocking call may wait before the worker checks its flags.
pub const POLL_TIMEOUT: Duration = Duration::from_millis(50);

/// The signal that interrupts a blocked worker. SIGURG: ignored by default
/// (a stray one harms no process), not queued (repeats coalesce), and only
/// raised by the kernel for TCP urgent data to a socket's F_SETOWN owner,
/// which thrum never sets.
pub const WAKE_SIGNAL: i32 = libc::SIGURG;

extern "C" fn on_wake_signal(_: libc::c_int) {}

/// Install the do-nothing handler for [`WAKE_SIGNAL`], once per process.
pub fn install_wake_handler() -> io::Result<()> {
    static ONCE: Once = Once::new();
    let mut result = Ok(());
    ONCE.call_once(|| {
        // SAFETY: a zeroed sigaction with a handler that does nothing
        // (async-signal-safe); flags without SA_RESTART, so blocking calls
        // return EINTR.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_wake_signal as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            sa.sa_flags = 0;
            if libc::sigaction(WAKE_SIGNAL, &sa, std::ptr::null_mut()) != 0 {
                result = Err(io::Error::last_os_error());
            }
        }
    });
    result
}

/// Interrupt `thread`'s blocking call, if it is in one.
///
/// # Safety
/// `thread` must be a thread that has not been joined or, detached, exited.
pub unsafe fn interrupt(thread: libc::pthread_t) {
    // SAFETY: the caller guarantees the thread id is still valid.
    unsafe { libc::pthread_kill(thread, WAKE_SIGNAL) };
}

pub struct Blocking {
    token: Option<u64>,
    fd: Option<RawFd>,
    timeout: Duration,
}

impl Blocking {
    /// `timeout`: how long the worker sleeps when it has no socket (at most [`POLL_TIMEOUT`]).
    pub fn new(timeout: Duration) -> Blocking {
        Blocking {
            token: None,
            fd: None,
            timeout: timeout.clamp(Duration::from_millis(1), POLL_TIMEOUT),
        }
    }
}

impl Driver for Blocking {
    fn register(&mut self, fd: RawFd, token: u64) -> io::Result<()> {
        if self.token.is_some() {
            return Err(io::Error::other("the blocking driver serves one socket"));
        }
        super::socket::set_nonblocking(fd, false)?;
        self.token = Some(token);
        self.fd = Some(fd);
        Ok(())
    }

    fn register_blocking(&mut self, fd: RawFd, token: u64) -> io::Result<()> {
        if self.token.is_some() {
            return Err(io::Error::other("the blocking driver serves one socket"));
        }
        self.token = Some(token);
        self.fd = Some(fd);
        Ok(())
    }

    fn register_listener(&mut self, _fd: RawFd, _token: u64) -> io::Result<()> {
        Err(io::Error::other(
            "the blocking driver does not serve listeners",
        ))
    }

    fn deregister(&mut self, _fd: RawFd) -> io::Result<()> {
        self.token = None;
        self.fd = None;
        Ok(())
    }

    fn wait(&mut self, out: &mut Vec<Event>, timeout: std::time::Duration) -> io::Result<()> {
        match self.token {
            Some(token) => out.push(Event {
                token,
                readable: true,
                writable: true,
                error: false,
                // The flow's blocking recv is the wait: always make it.
                may_have_more: true,
                done: Completion::None,
            }),
            None if !timeout.is_zero() => std::thread::sleep(self.timeout),
            None => {}
        }
        Ok(())
    }

    fn name(&self) -> &'static str {
        "blocking"
    }

    fn waits_in_io(&self) -> bool {
        true
    }

    fn sole_socket(&self) -> Option<RawFd> {
        self.fd
    }
}
