//! The server's data setup for one session: its listener or UDP sockets
//! on the configured ports, the long-lived connections accepted and
//! checked (peer address, token, flow id), and the server's flows built
//! from the test's row.

use std::io::{self, Read};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use subtle::ConstantTimeEq;

use crate::io::socket::{DataSocketOpts, same_host, set_nonblocking};
use crate::io::spread::{AddrRun, expand, may_walk};
use crate::plan::TestPlan;
use crate::stats::counters::FlowCounters;
use crate::workload::crr::TOKEN_LEN;
use crate::workload::kinds::Endpoint;
use crate::workload::{CounterRef, Flow};

/// A data connection must present its token within this.
pub const TOKEN_TIMEOUT: Duration = crate::workload::crr::TOKEN_TIMEOUT;
/// All data connections of a session must arrive within this (plus 1 ms per
/// flow) after `accepted`.
pub const ACCEPT_TIMEOUT: Duration = Duration::from_secs(5);

/// The client's UDP sockets, as `start` names them.
#[derive(Clone, Copy)]
pub(crate) struct ClientUdp<'a> {
    pub(crate) ports: &'a [u16],
    pub(crate) addrs: &'a [AddrRun],
}

/// Connect each flow's UDP socket to the client's socket for that flow, on
/// the control peer's address (or, for a loopback peer, on another
/// loopback address: see [`crate::io::spread`]) and nowhere else, and build
/// the server's UDP flows.
pub(crate) fn udp_flows(
    socks: Vec<socket2::Socket>,
    client: ClientUdp<'_>,
    plan: &TestPlan,
    peer: IpAddr,
) -> Result<SessionFlows> {
    let client_ports = client.ports;
    if client_ports.len() != socks.len() {
        bail!(
            "the client named {} UDP ports for {} flows",
            client_ports.len(),
            socks.len()
        );
    }
    let addrs = expand(client.addrs, peer, socks.len())
        .map_err(|e| anyhow::anyhow!("the client's UDP addresses: {e}"))?;
    // `--local-hosts` names other addresses of the client; nothing proves
    // they are its, so they are taken only where the test's row allows it
    // (its server sends nothing unasked), never for capacity's reverse trains.
    let listed: &[IpAddr] = if plan.test.traits().local_hosts {
        &plan.spreading.local_hosts
    } else {
        &[]
    };
    if let Some(a) = client.addrs.iter().map(|r| r.addr).find(|&a| {
        !same_host(a, peer) && !may_walk(a, peer) && !listed.iter().any(|&h| same_host(a, h))
    }) {
        bail!(
            "the client named UDP address {a}, neither its own {peer} nor (from loopback) a loopback one"
        );
    }
    let counters: Arc<[FlowCounters]> = (0..socks.len()).map(|_| FlowCounters::default()).collect();
    let mut flows: Vec<Box<dyn Flow>> = Vec::with_capacity(socks.len());
    let mut refused = 0;
    for (f, ((sock, &port), ip)) in socks.into_iter().zip(client_ports).zip(addrs).enumerate() {
        if port == 0 {
            bail!("the client named UDP port 0 for flow {f}");
        }
        sock.connect(&SocketAddr::new(ip.to_canonical(), port).into())
            .with_context(|| format!("connecting UDP flow {f} to the client"))?;
        // connect() filters what arrives from now on; what anyone sent to
        // the port since it was bound at `accepted` is still queued.
        refused += drain_queued(&sock);
        let ctr = CounterRef::new(counters.clone(), f);
        flows.push(
            plan.test
                .desc()
                .server_flow(plan, f as u32, ctr, Endpoint::Socket(sock))?,
        );
    }
    Ok((counters, flows, refused))
}

/// Discard every datagram queued on `sock`; how many there were.
pub(crate) fn drain_queued(sock: &socket2::Socket) -> u64 {
    let mut n = 0;
    let mut byte = 0u8;
    loop {
        // SAFETY: a one-byte buffer we own; MSG_TRUNC discards the rest of
        // the datagram.
        let r = unsafe {
            libc::recv(
                sock.as_raw_fd(),
                (&raw mut byte).cast(),
                1,
                libc::MSG_DONTWAIT | libc::MSG_TRUNC,
            )
        };
        if r < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return n;
        }
        n += 1;
    }
}

/// A session's counter block, the flows that count into it, and how many
/// connections or datagrams were refused while setting them up (a foreign
/// address, a wrong or missing token, datagrams queued before `start`).
pub(crate) type SessionFlows = (Arc<[FlowCounters]>, Vec<Box<dyn Flow>>, u64);

/// Bind with `bind` on an ephemeral port, or, with --data-ports, on the first
/// free port of the range at or after `*cursor` (which then moves past it).
pub(crate) fn bind_data_port<T>(
    ip: IpAddr,
    range: Option<(u16, u16)>,
    cursor: &mut u16,
    what: &str,
    bind: impl Fn(SocketAddr) -> io::Result<T>,
) -> Result<T> {
    bind_port(ip, range, cursor, bind).map_err(|e| match range {
        Some((lo, hi)) if e.raw_os_error() == Some(libc::EADDRINUSE) => {
            anyhow::anyhow!("no free port left for {what} in --data-ports {lo}-{hi}")
        }
        _ => anyhow::Error::new(e).context(format!("opening {what}")),
    })
}

/// [`bind_data_port`] with the kernel's error: EADDRINUSE when the range
/// (or the ephemeral range) has no free port left.
pub(crate) fn bind_port<T>(
    ip: IpAddr,
    range: Option<(u16, u16)>,
    cursor: &mut u16,
    bind: impl Fn(SocketAddr) -> io::Result<T>,
) -> io::Result<T> {
    let Some((lo, hi)) = range else {
        return bind(SocketAddr::new(ip, 0));
    };
    for port in (*cursor).max(lo)..=hi {
        if let Ok(s) = bind(SocketAddr::new(ip, port)) {
            *cursor = port.saturating_add(1);
            return Ok(s);
        }
    }
    *cursor = hi;
    Err(io::Error::from_raw_os_error(libc::EADDRINUSE))
}

/// A data connection that has yet to present its token and flow id.
struct Pending {
    sock: socket2::Socket,
    hello: [u8; TOKEN_LEN + 4],
    got: usize,
    deadline: Instant,
    /// It has sent its token and id, or closed, or failed.
    done: bool,
}

/// Accept the session's long-lived data connections; each presents the
/// token and its flow id within [`TOKEN_TIMEOUT`] of its own accept. Tokens
/// are read from every pending connection at once (one poll over the
/// listener and all of them), so silent connections cost the real flows no
/// time. Every connection dropped (a foreign address, a wrong or missing
/// token, a bad or repeated flow id, still silent when the last flow is in)
/// is counted as refused.
pub(crate) fn accept_flows(
    listeners: &[socket2::Socket],
    plan: &TestPlan,
    peer: IpAddr,
    token: &[u8; TOKEN_LEN],
    opts: &DataSocketOpts,
) -> Result<SessionFlows> {
    let n = plan.flows as usize;
    let counters: Arc<[FlowCounters]> = (0..n).map(|_| FlowCounters::default()).collect();
    let mut slots: Vec<Option<Box<dyn Flow>>> = (0..n).map(|_| None).collect();
    let mut have = 0;
    let mut refused = 0u64;
    // Connections still owing their token, bounded so that a flood costs
    // at most this many descriptors; more are refused at once.
    let max_pending = n.max(64) * 2;
    let mut pending: Vec<Pending> = Vec::new();
    let mut pfds: Vec<libc::pollfd> = Vec::new();
    // 10,000 flows take a while to connect even in parallel: 1 ms per flow more.
    let limit = ACCEPT_TIMEOUT + Duration::from_millis(n as u64);
    let deadline = Instant::now() + limit;
    for l in listeners {
        set_nonblocking(l.as_raw_fd(), true)?;
    }
    let k = listeners.len();
    while have < n {
        let now = Instant::now();
        if now >= deadline {
            bail!("only {have} of {n} data connections arrived within {limit:?}");
        }
        let before = pending.len();
        pending.retain(|p| p.deadline > now);
        refused += (before - pending.len()) as u64;
        let next = pending
            .iter()
            .map(|p| p.deadline)
            .fold(deadline, Instant::min);
        let wait_ms = next.saturating_duration_since(now).as_millis().clamp(1, 50) as i32;
        pfds.clear();
        pfds.extend(listeners.iter().map(|l| libc::pollfd {
            fd: l.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }));
        pfds.extend(pending.iter().map(|p| libc::pollfd {
            fd: p.sock.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }));
        // SAFETY: `pfds` is a valid array of pollfds of that length.
        unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, wait_ms) };
        read_hellos(&mut pending, &pfds[k..]);
        let mut i = 0;
        while i < pending.len() {
            if !pending[i].done {
                i += 1;
                continue;
            }
            let p = pending.swap_remove(i);
            let id = u32::from_be_bytes(p.hello[TOKEN_LEN..].try_into().expect("4 bytes")) as usize;
            if p.got < p.hello.len()
                || !bool::from(p.hello[..TOKEN_LEN].ct_eq(token))
                || id >= n
                || slots[id].is_some()
            {
                refused += 1;
                continue;
            }
            slots[id] = Some(data_flow(
                p.sock,
                plan,
                opts,
                CounterRef::new(counters.clone(), id),
                id,
            )?);
            have += 1;
        }
        // Then take every connection waiting in the backlogs.
        for (listener, pfd) in listeners.iter().zip(&pfds[..k]) {
            if pfd.revents == 0 {
                continue;
            }
            accept_pending(
                listener,
                peer,
                &plan.spreading.local_hosts,
                &mut pending,
                max_pending,
                &mut refused,
            )?;
        }
    }
    // Every flow is in: what has not presented its token by now never will
    // be used.
    refused += pending.len() as u64;
    Ok((
        counters,
        slots
            .into_iter()
            .map(|s| s.expect("every slot filled"))
            .collect(),
        refused,
    ))
}

/// Take every connection waiting in `listener`'s backlog as pending (or
/// refused: a foreign address, or too many pending already).
fn accept_pending(
    listener: &socket2::Socket,
    peer: IpAddr,
    // `--local-hosts`: the client's other source addresses (the token
    // still has to match).
    also: &[IpAddr],
    pending: &mut Vec<Pending>,
    max_pending: usize,
    refused: &mut u64,
) -> Result<()> {
    loop {
        {
            let (sock, addr) = match listener.accept() {
                Ok(x) => x,
                Err(e)
                    if e.kind() == io::ErrorKind::WouldBlock
                        || e.kind() == io::ErrorKind::Interrupted =>
                {
                    break;
                }
                Err(e) => return Err(e).context("accepting data connections"),
            };
            let from = addr.as_socket().map(|a| a.ip());
            let known = from
                .is_some_and(|ip| same_host(ip, peer) || also.iter().any(|&a| same_host(ip, a)));
            if !known || pending.len() >= max_pending {
                *refused += 1;
                continue;
            }
            sock.set_nonblocking(true)?;
            pending.push(Pending {
                sock,
                hello: [0; TOKEN_LEN + 4],
                got: 0,
                deadline: Instant::now() + TOKEN_TIMEOUT,
                done: false,
            });
        }
    }
    Ok(())
}

/// Read from the pending connections that `pfds` (theirs, in order) say
/// are ready; one that has said all it will (its token and id, EOF or an
/// error) is done.
fn read_hellos(pending: &mut [Pending], pfds: &[libc::pollfd]) {
    for (p, pfd) in pending.iter_mut().zip(pfds) {
        if pfd.revents == 0 {
            continue;
        }
        match (&p.sock).read(&mut p.hello[p.got..]) {
            Ok(0) => p.done = true,
            Ok(got) => {
                p.got += got;
                p.done = p.got == p.hello.len();
            }
            Err(e)
                if e.kind() == io::ErrorKind::WouldBlock
                    || e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => p.done = true,
        }
    }
}

/// The server's flow on an accepted long-lived data connection.
pub(crate) fn data_flow(
    sock: socket2::Socket,
    plan: &TestPlan,
    opts: &DataSocketOpts,
    ctr: CounterRef,
    id: usize,
) -> Result<Box<dyn Flow>> {
    opts.apply_connected(&sock)?;
    sock.set_nonblocking(true)?;
    Ok(plan
        .test
        .desc()
        .server_flow(plan, id as u32, ctr, Endpoint::Socket(sock))?)
}
