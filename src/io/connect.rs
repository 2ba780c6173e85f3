//! Opening many long-lived data connections at once.
//!
//! A blocking `connect` per flow costs one round trip each, one after the
//! other: 10,000 flows would take 10,000 handshakes in sequence. Here every
//! socket connects non-blocking, up to [`IN_FLIGHT`] at a time (below the
//! server's accept backlog, so no SYN is dropped and retried a second later),
//! and one epoll instance reports which handshakes finished. Each connection
//! sends its greeting (session token and flow id) as soon as it is up: 20
//! bytes into an empty send buffer, so a non-blocking `send` takes them whole.
//!
//! On loopback both ends share one TIME_WAIT table: a new connection whose
//! port pair matches a TIME_WAIT left by an earlier connection the other
//! way round has its SYN go unanswered until that entry expires (a test
//! suite run twice within a minute hits it). So a loopback handshake still
//! pending after [`RETRY_AFTER`] starts again from a fresh source port, at
//! most [`RETRIES`] times within the caller's timeout, and a timeout while
//! the table is nearly full says so ([`time_wait_note`]) rather than leave
//! the reader to suspect the server.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use socket2::{SockAddr, Socket};

use super::socket::{DataSocketOpts, bind_address_no_port, connect, send, tcp_socket};

/// Handshakes in progress at once. The server's data listener has a backlog
/// of 4096 (net.core.somaxconn caps it, 4096 by default since Linux 5.4).
pub const IN_FLIGHT: usize = 1024;

/// How long a loopback handshake may stay unanswered before it starts
/// again from a fresh source port: TCP's initial retransmission timeout
/// (RFC 6298, 1 s), when the kernel would resend the same SYN from the
/// same port into the same TIME_WAIT entry.
pub const RETRY_AFTER: Duration = Duration::from_secs(1);

/// Fresh starts a loopback handshake gets after its first, within the
/// caller's timeout.
pub const RETRIES: u32 = 2;

/// Whether a handshake to `addr` pending for `pending` with `retries`
/// already used should start again from a fresh port.
fn should_retry(addr: &SocketAddr, pending: Duration, retries: u32) -> bool {
    addr.ip().is_loopback() && retries < RETRIES && pending >= RETRY_AFTER
}

/// Run `attempt` with a time limit each until it succeeds, fails other
/// than by timing out, or `timeout` is spent: on loopback in slices of
/// [`RETRY_AFTER`] (the last one gets what is left, at least half a
/// slice), at most [`RETRIES`]
/// fresh starts; elsewhere once, with the whole of `timeout`.
fn attempts<T>(
    loopback: bool,
    timeout: Duration,
    mut attempt: impl FnMut(Duration) -> io::Result<T>,
) -> io::Result<T> {
    if !loopback {
        return attempt(timeout);
    }
    let deadline = Instant::now() + timeout;
    let mut retries = 0;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let last = retries >= RETRIES || left < RETRY_AFTER * 3 / 2;
        let slice = if last { left } else { RETRY_AFTER };
        match attempt(slice.max(Duration::from_millis(1))) {
            Err(e) if !last && is_timeout(&e) => retries += 1,
            r => return r,
        }
    }
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
    )
}

/// Connect a blocking TCP socket within `timeout` (as
/// [`super::socket::connect`]); on loopback an unanswered handshake starts
/// again from a fresh source port (module doc).
pub fn connect_retrying(
    addr: &SocketAddr,
    bind: Option<IpAddr>,
    opts: &DataSocketOpts,
    timeout: Duration,
) -> io::Result<Socket> {
    attempts(addr.ip().is_loopback(), timeout, |slice| {
        connect(addr, bind, opts, slice)
    })
}

/// The share of `tcp_max_tw_buckets` above which a connect timeout is
/// blamed on the TIME_WAIT table: 90 %.
const TW_FULL_PERCENT: u64 = 90;

/// What to say about a TIME_WAIT table holding `tw` of at most `cap`
/// entries: nothing below 90 % of the cap.
pub fn time_wait_hint(tw: u64, cap: u64) -> Option<String> {
    (cap > 0 && tw * 100 >= cap * TW_FULL_PERCENT).then(|| {
        format!(
            "the kernel's TIME_WAIT table is full ({tw} of {cap}): connections on this host's \
             own addresses whose port pair matches an entry go unanswered until it expires \
             (60 s); wait a minute or run in a network namespace of its own"
        )
    })
}

/// [`time_wait_hint`] for this network namespace's table now:
/// `tw` in /proc/net/sockstat against net.ipv4.tcp_max_tw_buckets. None
/// where either cannot be read.
pub fn time_wait_note() -> Option<String> {
    let sockstat = std::fs::read_to_string("/proc/net/sockstat").ok()?;
    let cap = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_max_tw_buckets").ok()?;
    time_wait_hint(sockstat_tw(&sockstat)?, cap.trim().parse().ok()?)
}

/// The `tw` figure of /proc/net/sockstat's `TCP:` line.
fn sockstat_tw(sockstat: &str) -> Option<u64> {
    let line = sockstat.lines().find(|l| l.starts_with("TCP:"))?;
    let mut words = line.split_whitespace();
    words.find(|w| *w == "tw")?;
    words.next()?.parse().ok()
}

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
    binds: &[IpAddr],
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
    // When each pending handshake started, and its fresh starts so far
    // (module doc); None once it is up.
    let mut started: Vec<Option<Instant>> = vec![None; n];
    let mut retries = vec![0u32; n];
    let loopback = addrs.iter().any(|a| a.ip().is_loopback());
    let mut last_scan = Instant::now();
    let mut next = 0usize;
    let mut pending = 0usize;
    let mut done = 0usize;
    let mut evs = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
    while done < n {
        while next < n && pending < IN_FLIGHT {
            socks[next] = Some(start_registered(epfd, addrs, binds, opts, next)?);
            started[next] = Some(Instant::now());
            next += 1;
            pending += 1;
        }
        if loopback && last_scan.elapsed() >= Duration::from_millis(100) {
            last_scan = Instant::now();
            for i in 0..next {
                let Some(t) = started[i] else { continue };
                if should_retry(&addrs[i % addrs.len()], t.elapsed(), retries[i])
                    && !handshake_over(socks[i].as_ref().expect("pending socket"))
                {
                    // Closing the socket drops its registration with it.
                    socks[i] = None;
                    socks[i] = Some(start_registered(epfd, addrs, binds, opts, i)?);
                    started[i] = Some(Instant::now());
                    retries[i] += 1;
                }
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            let mut msg = format!(
                "only {done} of {n} data connections to {} were up within {timeout:?}",
                addrs[0]
            );
            if let Some(note) = time_wait_note() {
                msg = format!("{msg}: {note}");
            }
            return Err(io::Error::new(io::ErrorKind::TimedOut, msg));
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
            started[i] = None;
            pending -= 1;
            done += 1;
        }
    }
    Ok(socks.into_iter().map(|s| s.expect("connected")).collect())
}

/// Whether a pending handshake has ended (up or failed) and its event
/// is only waiting to be read: then it is not started again, which would
/// leave the server a connection closed before its token.
fn handshake_over(s: &Socket) -> bool {
    let mut p = libc::pollfd {
        fd: s.as_raw_fd(),
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one pollfd, valid for the call; a zero timeout never blocks.
    unsafe { libc::poll(&mut p, 1, 0) > 0 }
}

/// Start connecting data connection `i` (to `addrs[i % addrs.len()]`) and
/// register it with `epfd` for its handshake's end, tagged `i`.
fn start_registered(
    epfd: i32,
    addrs: &[SocketAddr],
    binds: &[IpAddr],
    opts: &DataSocketOpts,
    i: usize,
) -> io::Result<Socket> {
    // Flow i from local address i mod the list (`--local-hosts`, `--bind`).
    let bind = (!binds.is_empty()).then(|| binds[i % binds.len()]);
    let s = start_connect(&addrs[i % addrs.len()], bind, opts)
        .map_err(|e| io::Error::new(e.kind(), format!("data connection {i}: {e}")))?;
    let mut ev = libc::epoll_event {
        events: libc::EPOLLOUT as u32,
        u64: i as u64,
    };
    // SAFETY: ev lives across the call; the kernel copies it.
    if unsafe { libc::epoll_ctl(epfd, libc::EPOLL_CTL_ADD, s.as_raw_fd(), &mut ev) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(s)
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
            &[],
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
            &[],
            &DataSocketOpts::default(),
            3,
            |_| vec![0],
            Duration::from_secs(5),
        )
        .unwrap_err();
        assert!(e.to_string().contains("data connection"), "{e}");
    }

    #[test]
    fn a_time_wait_table_nearly_full_is_named_with_its_figures() {
        assert_eq!(time_wait_hint(0, 131_072), None);
        assert_eq!(time_wait_hint(117_964, 131_072), None);
        let hint = time_wait_hint(131_072, 131_072).unwrap();
        assert!(
            hint.starts_with("the kernel's TIME_WAIT table is full (131072 of 131072)"),
            "{hint}"
        );
        assert!(time_wait_hint(117_965, 131_072).is_some());
        assert_eq!(time_wait_hint(5, 0), None, "a cap of 0 is no table");
    }

    #[test]
    fn sockstat_gives_its_time_wait_count() {
        let text = "sockets: used 33\nTCP: inuse 3 orphan 0 tw 131072 alloc 3 mem 373\n\
                    UDP: inuse 0 mem 0\n";
        assert_eq!(sockstat_tw(text), Some(131_072));
        assert_eq!(sockstat_tw("UDP: inuse 0 mem 0\n"), None);
    }

    #[test]
    fn an_unanswered_loopback_attempt_starts_again_within_the_budget() {
        let mut slices = Vec::new();
        let r = attempts(true, Duration::from_secs(3), |slice| {
            slices.push(slice);
            if slices.len() == 1 {
                Err(io::Error::from(io::ErrorKind::TimedOut))
            } else {
                Ok(slices.len())
            }
        });
        assert_eq!(r.unwrap(), 2);
        assert_eq!(slices[0], RETRY_AFTER);

        // Never answered: three attempts, the whole budget and no more.
        let mut slices = Vec::new();
        let t = Instant::now();
        let e = attempts(true, Duration::from_secs(3), |slice| -> io::Result<()> {
            slices.push(slice);
            std::thread::sleep(slice);
            Err(io::Error::from(io::ErrorKind::TimedOut))
        })
        .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert_eq!(slices.len(), 1 + RETRIES as usize, "{slices:?}");
        assert!(
            t.elapsed() < Duration::from_millis(3500),
            "{:?}",
            t.elapsed()
        );

        // Elsewhere, and for other errors: one attempt.
        let mut calls = 0;
        let _ = attempts(false, Duration::from_secs(3), |slice| -> io::Result<()> {
            calls += 1;
            assert_eq!(slice, Duration::from_secs(3));
            Err(io::Error::from(io::ErrorKind::TimedOut))
        });
        let _ = attempts(true, Duration::from_secs(3), |_| -> io::Result<()> {
            calls += 1;
            Err(io::Error::from(io::ErrorKind::ConnectionRefused))
        });
        assert_eq!(calls, 2);
    }

    #[test]
    fn only_a_loopback_handshake_pending_a_second_starts_again() {
        let lo: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let far: SocketAddr = "10.0.0.1:9".parse().unwrap();
        let second = Duration::from_secs(1);
        assert!(should_retry(&lo, second, 0));
        assert!(should_retry(&lo, second, RETRIES - 1));
        assert!(!should_retry(&lo, second, RETRIES));
        assert!(!should_retry(&lo, Duration::from_millis(999), 0));
        assert!(!should_retry(&far, second * 2, 0));
        assert!(should_retry(&"[::1]:9".parse().unwrap(), second, 0));
    }
}
