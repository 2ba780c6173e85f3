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
}

// The epoll fd is owned by exactly one worker thread at a time.
unsafe impl Send for Epoll {}

/// epoll_pwait2 (Linux 5.11): 1 where the kernel has it, 2 where it
/// answered ENOSYS, 0 before the first try.
static PWAIT2: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

impl Epoll {
    /// epoll_wait with a timeout to the nanosecond where the kernel takes
    /// one (epoll_pwait2), else rounded up to whole milliseconds: an early
    /// wake-up would make a paced sender spin, a late one only delays it.
    fn epoll_wait(&mut self, timeout: std::time::Duration) -> i32 {
        use std::sync::atomic::Ordering::Relaxed;
        let (ptr, len) = (self.buf.as_mut_ptr(), self.buf.len() as i32);
        let sub_ms = timeout.subsec_nanos() % 1_000_000 != 0;
        if sub_ms && PWAIT2.load(Relaxed) != 2 {
            let ts = libc::timespec {
                tv_sec: timeout.as_secs() as _,
                tv_nsec: timeout.subsec_nanos() as _,
            };
            // SAFETY: buf has len() initialised entries the kernel may
            // overwrite; ts lives across the call; no signal mask.
            let n = unsafe {
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
            if n >= 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ENOSYS) {
                PWAIT2.store(1, Relaxed);
                return n;
            }
            PWAIT2.store(2, Relaxed);
        }
        let ms = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
        // SAFETY: buf has len() initialised entries the kernel may overwrite.
        unsafe { libc::epoll_wait(self.epfd, ptr, len, ms) }
    }

    pub fn new() -> io::Result<Epoll> {
        // SAFETY: plain syscall; the result is checked.
        let epfd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if epfd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Epoll {
            epfd,
            buf: vec![libc::epoll_event { events: 0, u64: 0 }; 256],
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
        let ev = (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32;
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
