//! Edge-triggered epoll driver.
//!
//! Sockets are registered once for both directions with EPOLLET, so a
//! workload never calls `epoll_ctl` on the hot path: it reads and writes until
//! EAGAIN and is woken by the next edge. Listening sockets shared by several
//! workers use level-triggered EPOLLEXCLUSIVE (Linux 4.5) so that one incoming
//! connection wakes one worker, not all of them.

use std::io;
use std::os::fd::RawFd;

use super::{Completion, Driver, Event};

pub struct Epoll {
    epfd: RawFd,
    buf: Vec<libc::epoll_event>,
    /// Data sockets registered with EPOLLET (the default; `--epoll-trigger`).
    edge: bool,
}

// The epoll fd is owned by exactly one worker thread at a time.
unsafe impl Send for Epoll {}

/// epoll_pwait2 (Linux 5.11): 1 where the kernel has it, 2 where it
/// does not, 0 before the probe.
static PWAIT2: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// Does this kernel take epoll timeouts to the nanosecond (epoll_pwait2)?
/// Probed once, on a descriptor that cannot be an epoll instance: a kernel
/// with the call answers EBADF; one without it ENOSYS, and a seccomp filter
/// that does not know it (older container runtimes) ENOSYS or EPERM.
/// Without it epoll waits round up to whole milliseconds, and an open-loop
/// schedule's requests due within one go out together (warning
/// `timer_milliseconds`).
pub fn pwait2_available() -> bool {
    use std::sync::atomic::Ordering::Relaxed;
    match PWAIT2.load(Relaxed) {
        1 => return true,
        2 => return false,
        _ => {}
    }
    let mut ev = libc::epoll_event { events: 0, u64: 0 };
    let ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: one event's room; ts lives across the call; no signal mask.
    // An fd of -1 makes the kernel refuse before it waits.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_epoll_pwait2,
            -1,
            &mut ev as *mut libc::epoll_event,
            1,
            &ts as *const libc::timespec,
            std::ptr::null::<libc::sigset_t>(),
            0usize,
        )
    };
    let ok = rc >= 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EBADF);
    PWAIT2.store(if ok { 1 } else { 2 }, Relaxed);
    ok
}

impl Epoll {
    /// epoll_wait with a timeout to the nanosecond where the kernel takes
    /// one (epoll_pwait2), else rounded up to whole milliseconds: an early
    /// wake-up would make a paced sender spin, a late one only delays it.
    fn epoll_wait(&mut self, timeout: std::time::Duration) -> i32 {
        let (ptr, len) = (self.buf.as_mut_ptr(), self.buf.len() as i32);
        let sub_ms = timeout.subsec_nanos() % 1_000_000 != 0;
        if sub_ms && pwait2_available() {
            let ts = libc::timespec {
                tv_sec: timeout.as_secs() as _,
                tv_nsec: timeout.subsec_nanos() as _,
            };
            // SAFETY: buf has len() initialised entries the kernel may
            // overwrite; ts lives across the call; no signal mask.
            return unsafe {
                libc::syscall(
                    libc::SYS_epoll_pwait2,
                    self.epfd,
                    ptr,
                    len,
                    &ts as *const libc::timespec,
                    std::ptr::null::<libc::sigset_t>(),
                    0usize,
                )
            } as i32;
        }
        let ms = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
        // SAFETY: buf has len() initialised entries the kernel may overwrite.
        unsafe { libc::epoll_wait(self.epfd, ptr, len, ms) }
    }

    pub fn new() -> io::Result<Epoll> {
        Epoll::with_max_events(256)
    }

    /// An epoll instance whose waits return at most `n` events
    /// (`--max-events`; neper's -E): fewer per wait means more waits.
    pub fn with_max_events(n: usize) -> io::Result<Epoll> {
        Epoll::with_options(n, true)
    }

    /// `--max-events` and `--epoll-trigger`: at most `n` events per wait,
    /// sockets registered edge-triggered (`edge`) or level-triggered.
    pub fn with_options(n: usize, edge: bool) -> io::Result<Epoll> {
        // SAFETY: plain syscall; the result is checked.
        let epfd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if epfd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Epoll {
            epfd,
            buf: vec![libc::epoll_event { events: 0, u64: 0 }; n.max(1)],
            edge,
        })
    }

    fn ctl(&mut self, op: i32, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: ev lives across the call; the kernel copies it.
        let rc = unsafe { libc::epoll_ctl(self.epfd, op, fd, &mut ev) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Drop for Epoll {
    fn drop(&mut self) {
        // SAFETY: we own epfd.
        unsafe { libc::close(self.epfd) };
    }
}

impl Driver for Epoll {
    fn register(&mut self, fd: RawFd, token: u64) -> io::Result<()> {
        let et = if self.edge { libc::EPOLLET } else { 0 };
        let ev = (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | et) as u32;
        self.ctl(libc::EPOLL_CTL_ADD, fd, ev, token)
    }

    fn register_listener(&mut self, fd: RawFd, token: u64) -> io::Result<()> {
        let ev = (libc::EPOLLIN | libc::EPOLLEXCLUSIVE) as u32;
        self.ctl(libc::EPOLL_CTL_ADD, fd, ev, token)
    }

    fn deregister(&mut self, fd: RawFd) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0)
    }

    fn wait(&mut self, out: &mut Vec<Event>, timeout: std::time::Duration) -> io::Result<()> {
        let n = self.epoll_wait(timeout);
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(());
            }
            return Err(e);
        }
        for ev in &self.buf[..n as usize] {
            let bits = ev.events as i32;
            out.push(Event {
                token: ev.u64,
                readable: bits & (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLHUP) != 0,
                writable: bits & libc::EPOLLOUT != 0,
                error: bits & (libc::EPOLLERR | libc::EPOLLHUP) != 0,
                may_have_more: bits & (libc::EPOLLRDHUP | libc::EPOLLHUP) != 0,
                done: Completion::None,
            });
        }
        Ok(())
    }

    fn name(&self) -> &'static str {
        "epoll"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The probe answers, and answers the same twice (it is cached); a
    /// sub-millisecond wait with nothing to wake it ends by its timeout,
    /// never before (early wake-ups would make a paced sender spin).
    #[test]
    fn pwait2_probe_is_stable_and_a_short_wait_lasts_its_timeout() {
        let first = pwait2_available();
        assert_eq!(pwait2_available(), first);
        let mut ep = Epoll::new().unwrap();
        let mut out = Vec::new();
        // No socket registered: the wait can only end by its timeout.
        let t = std::time::Instant::now();
        ep.wait(&mut out, std::time::Duration::from_micros(200))
            .unwrap();
        let took = t.elapsed();
        assert!(out.is_empty());
        assert!(took >= std::time::Duration::from_micros(200), "{took:?}");
    }
}
