//! Unit tests of tcp_crr and tcp_cc's flows, both ends, on epoll and on
//! io_uring, over loopback with `workload::harness`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Instant;

use socket2::Socket;

use super::*;
use crate::io::RecvBuffers;
use crate::io::socket::{DataSocketOpts, listen, set_nonblocking};
use crate::plan::{CloseMode, Phase};
use crate::workload::harness::{Harness, Status};
use crate::workload::open_loop::OpenLoop;

const TOKEN: [u8; TOKEN_LEN] = [7; TOKEN_LEN];

/// A server's listener on loopback, non-blocking as the session leaves it.
fn listener() -> (Socket, SocketAddr) {
    let any = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    let l = listen(&any, &DataSocketOpts::default(), 128).unwrap();
    set_nonblocking(l.as_raw_fd(), true).unwrap();
    let addr = l.local_addr().unwrap().as_socket().unwrap();
    (l, addr)
}

/// A bench for `flows` flows on epoll, or (`ring`) on the io_uring
/// completion driver; None (said on stderr) where io_uring is unavailable.
fn bench(flows: usize, ring: bool) -> Option<Harness> {
    if !ring {
        return Some(Harness::new(flows));
    }
    if let Err(why) = crate::io::uring::probe() {
        eprintln!("SKIPPED: io_uring unavailable: {why}");
        return None;
    }
    let bufs = RecvBuffers {
        size: MAX_RECV_BUFFER,
        count: 128,
    };
    let driver = crate::io::uring::Uring::new(Some(bufs), None).expect("io_uring driver");
    Some(Harness::with_driver(flows, Box::new(driver)))
}

/// A bench with a server flow (slot 1, counters 1) on `listener` and a
/// client flow (slot 0, counters 0) presenting `token`.
#[allow(clippy::too_many_arguments)]
fn pair(
    mode: ConnectMode,
    close: CloseMode,
    token: [u8; TOKEN_LEN],
    quota: Option<u64>,
    (request, response): (u64, u64),
    l: &(Socket, SocketAddr),
    ring: bool,
) -> Option<Harness> {
    let mut h = bench(2, ring)?;
    let (cc, sc) = (h.counter(0), h.counter(1));
    let client = ConnectClient::new(
        mode,
        l.1,
        None,
        DataSocketOpts::default(),
        cc,
        token,
        request,
        response,
        quota,
        close,
    );
    let server = ConnectServer::new(
        mode,
        l.0.as_raw_fd(),
        Ipv4Addr::LOCALHOST.into(),
        TOKEN,
        request,
        response,
        sc,
        false,
    );
    h.add(client);
    h.add(server);
    Some(h)
}

/// Measured until `at_least` transactions, then drained: both ends count
/// the same transactions and each other's bytes, the server refused
/// nothing, and only measured cycles were timed.
fn cycles(mode: ConnectMode, close: CloseMode, (request, response): (u64, u64), ring: bool) {
    let l = listener();
    let Some(mut h) = pair(mode, close, TOKEN, None, (request, response), &l, ring) else {
        return;
    };
    h.run_until("measured cycles", |h| h.counts(0).transactions >= 30);
    let measured = h.counts(0).transactions;
    h.set_phase(Phase::Drain);
    h.run_until("the client done", |h| h.status(0) != &Status::Active);
    assert_eq!(h.status(0), &Status::Done);
    // The server answered before the client completed: nothing left.
    h.settle();
    let (c, s) = (h.counts(0), h.counts(1));
    assert_eq!(c.transactions, s.transactions, "{c:?} {s:?}");
    // One connection at a time: the drain finishes at most the one open.
    assert!(c.transactions - measured <= 1, "{c:?}, {measured} measured");
    let (req, resp) = match mode {
        ConnectMode::Crr => (request, response),
        ConnectMode::Cc => (0, 0),
    };
    // The token is not payload.
    assert_eq!(c.bytes_sent, c.transactions * req);
    assert_eq!(s.bytes_received, c.bytes_sent);
    assert_eq!(s.bytes_sent, s.transactions * resp);
    assert_eq!(c.bytes_received, s.bytes_sent);
    assert_eq!(h.flow(1).refused(), 0);
    assert_eq!(h.latencies(), measured);
}

#[test]
fn crr_cycles_count_at_both_ends() {
    for ring in [false, true] {
        cycles(ConnectMode::Crr, CloseMode::Fin, (100, 2000), ring);
        // Larger than the flows' buffers: several calls per message.
        cycles(
            ConnectMode::Crr,
            CloseMode::Fin,
            (300 << 10, 300 << 10),
            ring,
        );
    }
}

#[test]
fn crr_cycles_ending_in_a_reset_count_at_both_ends() {
    for ring in [false, true] {
        cycles(ConnectMode::Crr, CloseMode::Rst, (64, 64), ring);
    }
}

#[test]
fn cc_cycles_count_at_both_ends() {
    for ring in [false, true] {
        cycles(ConnectMode::Cc, CloseMode::Fin, (1, 1), ring);
        cycles(ConnectMode::Cc, CloseMode::Rst, (1, 1), ring);
    }
}

#[test]
fn a_quota_parks_the_client_after_that_many_cycles() {
    for ring in [false, true] {
        quota_parks(ring);
    }
}

fn quota_parks(ring: bool) {
    let l = listener();
    let Some(mut h) = pair(
        ConnectMode::Crr,
        CloseMode::Fin,
        TOKEN,
        Some(5),
        (10, 10),
        &l,
        ring,
    ) else {
        return;
    };
    h.run_until("the quota", |h| h.status(0) != &Status::Active);
    assert_eq!(h.status(0), &Status::Parked);
    assert_eq!(h.counts(0).transactions, 5);
    assert_eq!(h.quota_done(), 1);
    h.set_phase(Phase::Drain);
    h.run_until("the client done", |h| h.status(0) != &Status::Active);
    assert_eq!(h.status(0), &Status::Done);
    assert_eq!(h.counts(0).transactions, 5);
}

/// Open loop: one connection per scheduled transaction, never ahead of
/// the schedule (100 at 1,000/s take at least 99 ms whatever the
/// machine's load), each timed from its intended start and from its
/// connect, the generator's lag recorded for each.
#[test]
fn open_loop_cycles_follow_the_schedule() {
    for ring in [false, true] {
        open_loop_cycles(ring);
    }
}

fn open_loop_cycles(ring: bool) {
    let l = listener();
    let mut p = crate::plan::TestPlan::new(crate::plan::TestKind::TcpCrr);
    p.offered_per_s = Some(1000);
    let Some(mut h) = bench(2, ring) else {
        return;
    };
    let (cc, sc) = (h.counter(0), h.counter(1));
    let client = ConnectClient::new(
        ConnectMode::Crr,
        l.1,
        None,
        DataSocketOpts::default(),
        cc,
        TOKEN,
        10,
        20,
        None,
        CloseMode::Fin,
    );
    h.add(client.open_loop(OpenLoop::of(&p, 0).unwrap()));
    h.add(ConnectServer::new(
        ConnectMode::Crr,
        l.0.as_raw_fd(),
        Ipv4Addr::LOCALHOST.into(),
        TOKEN,
        10,
        20,
        sc,
        false,
    ));
    let t0 = Instant::now();
    h.run_until("100 cycles", |h| h.counts(0).transactions >= 100);
    let took = t0.elapsed();
    assert!(took >= std::time::Duration::from_millis(99), "{took:?}");
    let n = h.counts(0).transactions;
    assert!(h.open.lag.count() >= n);
    let open = std::mem::replace(&mut h.open, Harness::new(0).open);
    assert_eq!(open.service.finish().count(), n);
    assert_eq!(h.latencies(), n);
}

#[test]
fn a_wrong_token_is_refused() {
    for ring in [false, true] {
        wrong_token(ring);
    }
}

fn wrong_token(ring: bool) {
    let l = listener();
    let Some(mut h) = pair(
        ConnectMode::Crr,
        CloseMode::Fin,
        [8; TOKEN_LEN],
        None,
        (100, 100),
        &l,
        ring,
    ) else {
        return;
    };
    h.run_until("the client's error", |h| h.status(0) != &Status::Active);
    assert!(
        matches!(h.status(0), Status::Failed(_)),
        "{:?}",
        h.status(0)
    );
    h.settle();
    assert_eq!(h.flow(1).refused(), 1);
    let s = h.counts(1);
    assert_eq!((s.transactions, s.bytes_received, s.bytes_sent), (0, 0, 0));
}

/// tcp_cc under io_uring gives each connection's descriptor to the ring
/// close at the end of its chain. When the connect fails, the kernel
/// cancels that close with the rest of the chain, so the flow closes the
/// descriptor itself: after the refused connect no socket of this
/// process is left on the flow's own bind address.
#[test]
fn a_refused_tcp_cc_connect_on_uring_leaves_no_socket_open() {
    let bind: IpAddr = Ipv4Addr::new(127, 77, 3, 9).into();
    // A port nothing listens on: a listener's, closed again.
    let refused = listener().1;
    let Some(mut h) = bench(1, true) else {
        return;
    };
    let client = ConnectClient::new(
        ConnectMode::Cc,
        refused,
        Some(bind),
        DataSocketOpts::default(),
        h.counter(0),
        TOKEN,
        1,
        1,
        None,
        CloseMode::Fin,
    );
    h.add(client);
    h.run_until("the refused connect", |h| h.status(0) != &Status::Active);
    assert!(
        matches!(h.status(0), Status::Failed(e) if e.contains("refused")),
        "{:?}",
        h.status(0)
    );
    h.settle();
    let on_bind = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<RawFd>().ok())
        .filter(|&fd| {
            // SAFETY: getsockname writes at most `len` bytes into `ss`;
            // a descriptor closed meanwhile just fails.
            let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
            let mut len = std::mem::size_of_val(&ss) as libc::socklen_t;
            let rc = unsafe { libc::getsockname(fd, (&raw mut ss).cast(), &mut len) };
            rc == 0 && ss.ss_family == libc::AF_INET as libc::sa_family_t && {
                // SAFETY: an AF_INET address fills a sockaddr_in.
                let sin: &libc::sockaddr_in = unsafe { &*(&raw const ss).cast() };
                sin.sin_addr.s_addr == u32::from(Ipv4Addr::new(127, 77, 3, 9)).to_be()
            }
        })
        .count();
    assert_eq!(on_bind, 0, "sockets left open on {bind}");
}

/// A connection that never presents its whole token is closed after
/// [`TOKEN_TIMEOUT`] on either driver (under io_uring its pending
/// receive is cancelled first, so the close lets the socket go), and a
/// well-behaved client is served all the while.
#[test]
fn a_silent_connection_is_closed_after_the_token_timeout() {
    for ring in [false, true] {
        silent_connection(ring);
    }
}

fn silent_connection(ring: bool) {
    use std::io::{Read, Write};
    let l = listener();
    let Some(mut h) = pair(
        ConnectMode::Crr,
        CloseMode::Fin,
        TOKEN,
        None,
        (10, 10),
        &l,
        ring,
    ) else {
        return;
    };
    let mut silent = std::net::TcpStream::connect(l.1).unwrap();
    let mut half = std::net::TcpStream::connect(l.1).unwrap();
    half.write_all(&TOKEN[..TOKEN_LEN / 2]).unwrap();
    let t0 = Instant::now();
    h.run_until("both refused", |h| h.flow(1).refused() == 2);
    assert!(t0.elapsed() >= TOKEN_TIMEOUT / 2, "{:?}", t0.elapsed());
    // The client kept going meanwhile, and goes on.
    let served = h.counts(0).transactions;
    assert!(served > 0);
    h.run_until("more cycles", |h| h.counts(0).transactions > served);
    // The closes (after the cancelled receives) reach the kernel.
    h.settle();
    for s in [&mut silent, &mut half] {
        s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        let mut b = [0u8; 8];
        assert_eq!(s.read(&mut b).unwrap(), 0, "closed by the server");
    }
}
