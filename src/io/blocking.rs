//! The single-socket blocking driver.
//!
//! When a worker owns one long-lived socket there is nothing to multiplex, and
//! `epoll_wait` is a third syscall per request/response transaction. This
//! driver makes the socket blocking with a short SO_RCVTIMEO/SO_SNDTIMEO and
//! reports it ready on every call, so the workload's own `recv` is the wait.
//! When the timeout expires the call returns EAGAIN, which the workload treats
//! like any would-block, and the worker loop gets to look at its phase and
//! stop flags at least every [`POLL_TIMEOUT`].

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use super::{Driver, Event};

/// How long a blocking call may wait before the worker checks its flags.
pub const POLL_TIMEOUT: Duration = Duration::from_millis(50);

pub struct Blocking {
    token: Option<u64>,
    timeout: Duration,
}

impl Blocking {
    /// `timeout`: how long one blocking call may wait (at most [`POLL_TIMEOUT`]).
    pub fn new(timeout: Duration) -> Blocking {
        Blocking {
            token: None,
            timeout: timeout.clamp(Duration::from_millis(1), POLL_TIMEOUT),
        }
    }
}

fn set_timeout(fd: RawFd, opt: i32, d: Duration) -> io::Result<()> {
    let tv = libc::timeval {
        tv_sec: d.as_secs() as libc::time_t,
        tv_usec: d.subsec_micros() as libc::suseconds_t,
    };
    // SAFETY: tv outlives the call; size is correct.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            opt,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

impl Driver for Blocking {
    fn register(&mut self, fd: RawFd, token: u64) -> io::Result<()> {
        if self.token.is_some() {
            return Err(io::Error::other("the blocking driver serves one socket"));
        }
        super::socket::set_nonblocking(fd, false)?;
        set_timeout(fd, libc::SO_RCVTIMEO, self.timeout)?;
        set_timeout(fd, libc::SO_SNDTIMEO, self.timeout)?;
        self.token = Some(token);
        Ok(())
    }

    fn register_listener(&mut self, _fd: RawFd, _token: u64) -> io::Result<()> {
        Err(io::Error::other(
            "the blocking driver does not serve listeners",
        ))
    }

    fn deregister(&mut self, _fd: RawFd) -> io::Result<()> {
        self.token = None;
        Ok(())
    }

    fn wait(&mut self, out: &mut Vec<Event>, timeout_ms: i32) -> io::Result<()> {
        match self.token {
            Some(token) => out.push(Event {
                token,
                readable: true,
                writable: true,
                error: false,
                // The flow's blocking recv is the wait: always make it.
                may_have_more: true,
            }),
            None if timeout_ms > 0 => std::thread::sleep(self.timeout),
            None => {}
        }
        Ok(())
    }

    fn name(&self) -> &'static str {
        "blocking"
    }
}
