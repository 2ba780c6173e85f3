//! Opening many long-lived data connections at once.
//!
//! A blocking `connect` per flow costs one round trip each, one after the
//! other: 10,000 flows would take 10,000 handshakes in sequence. Here every
//! socket connects non-blocking, up to [`IN_FLIGHT`] at a time (below the
//! server's accept backlog, so no SYN is dropped and retried a second later),
//! and one epoll instance reports which handshakes finished. Each connection
//! sends its greeting (session token and flow id) as soon as it is up: 20
//! bytes into an empty send buffer, so a non-blocking `send` takes them whole.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use socket2::{SockAddr, Socket};

use super::socket::{DataSocketOpts, bind_address_no_port, send, tcp_socket};

/// Handshakes in progress at once. The server's data listener has a backlog
/// of 4096 (net.core.somaxconn caps it, 4096 by default since Linux 5.4).
pub const IN_FLIGHT: usize = 1024;

/// Open a non-blocking TCP socket and start connecting it to `addr`.
pub fn start_connect(
    addr: &SocketAddr,
    bind: Option<IpAddr>,
    opts: &DataSocketOpts,
) -> io::Result<Socket> {
    let s = tcp_socket(addr, true)?;
    opts.apply_before_connect(&s)?;
    if let Some(ip) = bind {
        bind_address_no_port(&s)?;
        s.bind(&SockAddr::from(SocketAddr::new(ip, 0)))
            .map_err(|e| io::Error::new(e.kind(), format!("binding to {ip}: {e}")))?;
    }
    match s.connect(&SockAddr::from(*addr)) {
        Ok(()) => Ok(s),
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => Ok(s),
        Err(e) if e.raw_os_error() == Some(libc::EADDRNOTAVAIL) => Err(io::Error::new(
            e.kind(),
            format!("connecting to {addr}: no local port free ({e})"),
        )),
        Err(e) => Err(io::Error::new(
            e.kind(),
            format!("connecting to {addr}: {e}"),
        )),
    }
}

/// Connect `n` sockets to `addrs` in parallel, connection `i` to
/// `addrs[i % addrs.len()]` (a server's several listeners: see
/// [`super::spread`]); connection `i` sends `greeting(i)` once it is up.
/// Returns the sockets in order of `i`, non-blocking, options applied.
/// Fails if any connection fails or the whole set is not up within
/// `timeout`.
pub fn connect_many(
    addrs: &[SocketAddr],
    bind: Option<IpAddr>,
    opts: &DataSocketOpts,
    n: usize,
    greeting: impl Fn(usize) -> Vec<u8>,
    timeout: Duration,
) -> io::Result<Vec<Socket>> {
    let deadline = Instant::now() + timeout;
    // SAFETY: plain syscall; the result is checked.
    let epfd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if epfd < 0 {
        return Err(io::Error::last_os_error());
    }
    // Closing the epoll instance drops every registration with it.
    struct Close(i32);
    impl Drop for Close {
        fn drop(&mut self) {
            // SAFETY: we own the descriptor.
            unsafe { libc::close(self.0) };
        }
    }
    let _ep = Close(epfd);

    let mut socks: Vec<Option<Socket>> = (0..n).map(|_| None).collect();
    let mut next = 0usize;
    let mut pending = 0usize;
    let mut done = 0usize;
    let mut evs = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
    while done < n {
        while next < n && pending < IN_FLIGHT {
            let s = start_connect(&addrs[next % addrs.len()], bind, opts)
                .map_err(|e| io::Error::new(e.kind(), format!("data connection {next}: {e}")))?;
            let mut ev = libc::epoll_event {
                events: libc::EPOLLOUT as u32,
                u64: next as u64,
            };
            // SAFETY: ev lives across the call; the kernel copies it.
            if unsafe { libc::epoll_ctl(epfd, libc::EPOLL_CTL_ADD, s.as_raw_fd(), &mut ev) } < 0 {
                return Err(io::Error::last_os_error());
            }
            socks[next] = Some(s);
            next += 1;
            pending += 1;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "only {done} of {n} data connections to {} were up within {timeout:?}",
                    addrs[0]
                ),
            ));
        }
        let ms = left.as_millis().clamp(1, 100) as i32;
        // SAFETY: evs has len() initialised entries the kernel may overwrite.
        let k = unsafe { libc::epoll_wait(epfd, evs.as_mut_ptr(), evs.len() as i32, ms) };
        if k < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        for ev in &evs[..k as usize] {
            let i = ev.u64 as usize;
            let s = socks[i].as_ref().expect("registered socket");
            // SAFETY: s is open and registered.
            unsafe {
                libc::epoll_ctl(
                    epfd,
                    libc::EPOLL_CTL_DEL,
                    s.as_raw_fd(),
                    std::ptr::null_mut(),
                )
            };
            if let Some(e) = s.take_error()? {
                return Err(io::Error::new(
                    e.kind(),
                    format!("data connection {i} to {}: {e}", addrs[i % addrs.len()]),
                ));
            }
            opts.apply_connected(s)?;
            let g = greeting(i);
            let sent = send(s.as_raw_fd(), &g).map_err(|e| {
                io::Error::new(e.kind(), format!("greeting on data connection {i}: {e}"))
            })?;
            if sent != g.len() {
                return Err(io::Error::other(format!(
                    "greeting on data connection {i}: only {sent} of {} bytes sent",
                    g.len()
                )));
            }
            pending -= 1;
            done += 1;
        }
    }
    Ok(socks.into_iter().map(|s| s.expect("connected")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;

    #[test]
    fn connects_all_and_each_sends_its_greeting() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let n = 50;
        let acceptor = std::thread::spawn(move || {
            let mut seen = Vec::new();
            for _ in 0..n {
                let (mut s, _) = l.accept().unwrap();
                let mut b = [0u8; 4];
                s.read_exact(&mut b).unwrap();
                seen.push(u32::from_be_bytes(b));
            }
            seen.sort();
            seen
        });
        let socks = connect_many(
            &[addr],
            None,
            &DataSocketOpts::default(),
            n,
            |i| (i as u32).to_be_bytes().to_vec(),
            Duration::from_secs(10),
        )
        .unwrap();
        assert_eq!(socks.len(), n);
        assert_eq!(acceptor.join().unwrap(), (0..n as u32).collect::<Vec<_>>());
    }

    #[test]
    fn a_refused_connection_is_an_error_naming_it() {
        // A port that was just free: nothing listens there.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let e = connect_many(
            &[port],
            None,
            &DataSocketOpts::default(),
            3,
            |_| vec![0],
            Duration::from_secs(5),
        )
        .unwrap_err();
        assert!(e.to_string().contains("data connection"), "{e}");
    }
}
