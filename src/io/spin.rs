//! The spinning driver (`--spin`): a worker that never sleeps.
//!
//! Every other driver lets the worker sleep in the kernel until a socket
//! is ready, so a request/response transaction pays the scheduler's
//! wake-up on each end as well as the network stack. This one keeps every
//! socket non-blocking and reports all of them ready on every wait without
//! a syscall: the flow's own receive is the poll, and one that finds
//! nothing returns EAGAIN, which the workloads already read as "not yet".
//! The worker loop then turns again, reading the phase and the stop flag
//! as it always does, so it notices the end of the window within one
//! receive. The price is a whole CPU per worker, which the result's CPU
//! figures show. The kernel's own device polling (SO_BUSY_POLL) acts
//! inside that receive where the device has NAPI.

use std::io;
use std::os::fd::RawFd;

use super::{Driver, Event};

/// The sockets of one spinning worker; never more than its flows hold.
#[derive(Default)]
pub struct Spin {
    sockets: Vec<(RawFd, u64)>,
}

impl Spin {
    pub fn new() -> Spin {
        Spin::default()
    }

    fn add(&mut self, fd: RawFd, token: u64) {
        self.sockets.retain(|&(f, _)| f != fd);
        self.sockets.push((fd, token));
    }
}

impl Driver for Spin {
    fn register(&mut self, fd: RawFd, token: u64) -> io::Result<()> {
        super::socket::set_nonblocking(fd, true)?;
        self.add(fd, token);
        Ok(())
    }

    fn register_blocking(&mut self, fd: RawFd, token: u64) -> io::Result<()> {
        self.register(fd, token)
    }

    fn register_listener(&mut self, _fd: RawFd, _token: u64) -> io::Result<()> {
        Err(io::Error::other(
            "the spinning driver does not serve listeners",
        ))
    }

    fn deregister(&mut self, fd: RawFd) -> io::Result<()> {
        self.sockets.retain(|&(f, _)| f != fd);
        Ok(())
    }

    /// Every socket, at once: the timeout is never slept (the worker loop
    /// keeps its own moments and reads them on its next turn).
    fn wait(&mut self, out: &mut Vec<Event>, _timeout: std::time::Duration) -> io::Result<()> {
        // Both ways and maybe more, as a kick says: nothing tells an empty
        // queue apart but the receive itself.
        out.extend(self.sockets.iter().map(|&(_, token)| Event::kick(token)));
        if self.sockets.is_empty() {
            std::hint::spin_loop();
        }
        Ok(())
    }

    fn name(&self) -> &'static str {
        "spin"
    }

    fn sole_socket(&self) -> Option<RawFd> {
        match self.sockets.as_slice() {
            [(fd, _)] => Some(*fd),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every registered socket is reported on every wait, none after it
    /// is deregistered, and a wait with a timeout returns at once.
    #[test]
    fn every_socket_is_ready_on_every_wait() {
        let a = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        use std::os::fd::AsRawFd;
        let mut d = Spin::new();
        d.register(a.as_raw_fd(), 1).unwrap();
        d.register(b.as_raw_fd(), 2).unwrap();
        assert_eq!(d.sole_socket(), None);
        let mut out = Vec::new();
        let t0 = std::time::Instant::now();
        for _ in 0..3 {
            d.wait(&mut out, std::time::Duration::from_secs(10))
                .unwrap();
        }
        assert!(t0.elapsed() < std::time::Duration::from_secs(10));
        let tokens: Vec<u64> = out.iter().map(|e| e.token).collect();
        assert_eq!(tokens, [1, 2, 1, 2, 1, 2]);
        d.deregister(a.as_raw_fd()).unwrap();
        assert_eq!(d.sole_socket(), Some(b.as_raw_fd()));
        // A receive on the socket now finds nothing instead of waiting.
        let mut buf = [0u8; 8];
        let e = b.recv(&mut buf).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
    }
}
