//! Sockets and their options, the syscalls that move data, and CPU pinning.
//!
//! Options are applied where the kernel reads them: buffer sizes and MSS
//! before `connect`/`listen` (the window scale is fixed in the handshake, so a
//! SO_RCVBUF set afterwards cannot widen the window), TCP_NODELAY, congestion
//! control and pacing on every data socket. A listening socket passes its
//! buffer sizes and MSS on to the sockets it accepts.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use crate::plan::{SocketOpts, TestPlan};

/// The options one end applies to its data sockets.
#[derive(Clone, Debug, Default)]
pub struct DataSocketOpts {
    pub send_buffer: Option<u64>,
    pub recv_buffer: Option<u64>,
    pub nodelay: bool,
    pub mss: Option<u32>,
    pub congestion: Option<String>,
    /// SO_MAX_PACING_RATE in bytes/s.
    pub pacing_bytes_per_s: Option<u64>,
    /// SO_BUSY_POLL in µs: a blocking receive polls the device queue this
    /// long before it sleeps (only where the NIC driver has NAPI; loopback
    /// and veth have none, so it changes nothing there).
    pub busy_poll_us: Option<u32>,
    /// SO_PREFER_BUSY_POLL (`--prefer-busy-poll`).
    pub prefer_busy_poll: bool,
    /// IP_TOS / IPV6_TCLASS: the DSCP and ECN byte of every packet sent.
    pub tos: Option<u8>,
    /// SO_MARK and TCP_TX_DELAY (`--mark`, `--tcp-tx-delay`).
    pub marks: crate::plan::sockets::SocketMarks,
}

impl DataSocketOpts {
    /// The options for the end whose view of the plan is `plan` (`plan.local` is this end).
    pub fn from_plan(plan: &TestPlan, this_end: &SocketOpts) -> DataSocketOpts {
        DataSocketOpts {
            send_buffer: this_end.send_buffer_bytes,
            recv_buffer: this_end.recv_buffer_bytes,
            nodelay: plan.nodelay || plan.open_loop_tcp_rr(),
            mss: plan.mss,
            congestion: plan.congestion.clone(),
            pacing_bytes_per_s: plan.pacing_rate_bps.map(|b| b / 8),
            busy_poll_us: plan.busy_poll_us,
            prefer_busy_poll: plan.prefer_busy_poll,
            tos: plan.tos,
            marks: plan.sockets,
        }
    }

    /// The TOS byte, on either family: an IPv6 socket carries IPv4 traffic
    /// too (mapped addresses), which takes IP_TOS, so it gets both (the
    /// IPv4 one where the kernel allows it on that socket).
    pub fn apply_tos(&self, s: &Socket) -> io::Result<()> {
        let Some(tos) = self.tos else { return Ok(()) };
        let v6 = s
            .local_addr()
            .ok()
            .and_then(|a| a.as_socket())
            .is_some_and(|a| a.is_ipv6())
            || s.domain().is_ok_and(|d| d == Domain::IPV6);
        if v6 {
            s.set_tclass_v6(tos as u32)
                .map_err(|e| ctx(e, "IPV6_TCLASS (--tos, dscp=)"))?;
            let _ = s.set_tos(tos as u32);
            Ok(())
        } else {
            s.set_tos(tos as u32)
                .map_err(|e| ctx(e, "IP_TOS (--tos, dscp=)"))
        }
    }

    /// SO_SNDBUF and SO_RCVBUF, where asked for.
    fn apply_buffers(&self, s: &Socket) -> io::Result<()> {
        if let Some(b) = self.send_buffer {
            s.set_send_buffer_size(b as usize)
                .map_err(|e| ctx(e, "SO_SNDBUF"))?;
        }
        if let Some(b) = self.recv_buffer {
            s.set_recv_buffer_size(b as usize)
                .map_err(|e| ctx(e, "SO_RCVBUF"))?;
        }
        Ok(())
    }

    /// Options that must be set before the connection exists.
    pub fn apply_before_connect(&self, s: &Socket) -> io::Result<()> {
        self.apply_tos(s)?;
        // Before connect: the route (an `ip rule fwmark`) is chosen then.
        super::sockmark::apply_mark(s.as_raw_fd(), &self.marks)?;
        super::sockmark::apply_tx_delay(s.as_raw_fd(), &self.marks)?;
        self.apply_buffers(s)?;
        if let Some(m) = self.mss {
            s.set_mss(m).map_err(|e| ctx(e, "TCP_MAXSEG"))?;
        }
        if let Some(cc) = &self.congestion {
            s.set_tcp_congestion(cc.as_bytes())
                .map_err(|e| ctx(e, &format!("TCP_CONGESTION {} (is the module loaded and allowed in net.ipv4.tcp_allowed_congestion_control?)", crate::text::echo(cc))))?;
        }
        Ok(())
    }

    /// Options set on every connected data socket.
    pub fn apply_connected(&self, s: &Socket) -> io::Result<()> {
        // An accepted socket gets them here (a dialled one has them already).
        super::sockmark::apply_mark(s.as_raw_fd(), &self.marks)?;
        super::sockmark::apply_tx_delay(s.as_raw_fd(), &self.marks)?;
        if self.nodelay {
            s.set_nodelay(true).map_err(|e| ctx(e, "TCP_NODELAY"))?;
        }
        if let Some(rate) = self.pacing_bytes_per_s {
            set_pacing_rate(s.as_raw_fd(), rate)?;
        }
        self.apply_busy_poll(s)
    }

    /// SO_BUSY_POLL and SO_PREFER_BUSY_POLL, on TCP and UDP data sockets
    /// alike ([`super::busypoll`]).
    pub fn apply_busy_poll(&self, s: &Socket) -> io::Result<()> {
        super::busypoll::apply(s.as_raw_fd(), self.busy_poll_us, self.prefer_busy_poll)
    }
}

/// One end's socket buffers: what was asked for and what the kernel set.
///
/// Linux doubles an SO_SNDBUF/SO_RCVBUF value (the other half is room for
/// its own bookkeeping, socket(7)) and caps the request at
/// `net.core.wmem_max`/`rmem_max` first, so what a socket gets is rarely
/// what was asked; netperf reports the getsockopt figure for that reason.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct SocketBuffers {
    /// SO_SNDBUF asked for (`-s`/`-S`); None: the kernel's default.
    pub send_requested_bytes: Option<u64>,
    /// SO_SNDBUF as getsockopt reads it once set.
    pub send_bytes: u64,
    /// SO_RCVBUF asked for; None: the kernel's default.
    pub recv_requested_bytes: Option<u64>,
    /// SO_RCVBUF as getsockopt reads it once set. A TCP buffer left to the
    /// kernel grows with the connection (tcp_wmem/tcp_rmem autotuning): its
    /// figure is where it starts.
    pub recv_bytes: u64,
}

impl SocketBuffers {
    /// The buffers the kernel gives a data socket of this end: a socket of
    /// the test's transport (`udp`, else TCP: the caller reads it from the
    /// test's row, which sits above this layer) and address family, given
    /// the same options the data sockets get before `connect`/`listen`,
    /// read back with getsockopt. Accepted TCP sockets inherit the
    /// listener's, so this is the figure of every data socket of the end at
    /// its start.
    pub fn as_set(
        plan: &TestPlan,
        this_end: &SocketOpts,
        udp: bool,
        ipv6: bool,
    ) -> io::Result<SocketBuffers> {
        let opts = DataSocketOpts::from_plan(plan, this_end);
        let domain = if ipv6 { Domain::IPV6 } else { Domain::IPV4 };
        let s = if udp {
            Socket::new(domain, Type::DGRAM.cloexec(), Some(Protocol::UDP))?
        } else {
            Socket::new(domain, Type::STREAM.cloexec(), Some(Protocol::TCP))?
        };
        opts.apply_buffers(&s)?;
        Ok(SocketBuffers {
            send_requested_bytes: opts.send_buffer,
            send_bytes: s.send_buffer_size()? as u64,
            recv_requested_bytes: opts.recv_buffer,
            recv_bytes: s.recv_buffer_size()? as u64,
        })
    }
}

/// setsockopt of one int; the error names `what` (the option and its flag).
pub fn set_int_option(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
    what: &str,
) -> io::Result<()> {
    // SAFETY: the value outlives the call and its size is given.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(ctx(io::Error::last_os_error(), what));
    }
    Ok(())
}

fn ctx(e: io::Error, what: &str) -> io::Error {
    io::Error::new(e.kind(), format!("setting {what}: {e}"))
}

fn set_pacing_rate(fd: RawFd, bytes_per_s: u64) -> io::Result<()> {
    // SO_MAX_PACING_RATE takes a u64 since Linux 4.20 (a u32 before).
    // SAFETY: the value outlives the call and its size is given.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_MAX_PACING_RATE,
            (&bytes_per_s as *const u64).cast(),
            std::mem::size_of::<u64>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(ctx(io::Error::last_os_error(), "SO_MAX_PACING_RATE"));
    }
    Ok(())
}

/// A new TCP socket of the address's family, close-on-exec.
pub fn tcp_socket(addr: &SocketAddr, nonblocking: bool) -> io::Result<Socket> {
    let ty = if nonblocking {
        Type::STREAM.nonblocking()
    } else {
        Type::STREAM
    };
    Socket::new(
        Domain::for_address(*addr),
        ty.cloexec(),
        Some(Protocol::TCP),
    )
}

/// IP_BIND_ADDRESS_NO_PORT: a `bind` to port 0 leaves the port to
/// `connect`, which picks one free *to that destination* (a bound port must
/// be free on the whole address): under `--bind`, as many connections to
/// each server port as without it.
pub fn bind_address_no_port(s: &Socket) -> io::Result<()> {
    let one: libc::c_int = 1;
    // SAFETY: an int option on a socket we own.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_BIND_ADDRESS_NO_PORT,
            (&raw const one).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(ctx(io::Error::last_os_error(), "IP_BIND_ADDRESS_NO_PORT"));
    }
    Ok(())
}

/// Connect a blocking TCP socket with a timeout, options applied in the right order.
pub fn connect(
    addr: &SocketAddr,
    bind: Option<IpAddr>,
    opts: &DataSocketOpts,
    timeout: Duration,
) -> io::Result<Socket> {
    let s = tcp_socket(addr, false)?;
    opts.apply_before_connect(&s)?;
    if let Some(ip) = bind {
        bind_address_no_port(&s)?;
        s.bind(&SockAddr::from(SocketAddr::new(ip, 0)))
            .map_err(|e| io::Error::new(e.kind(), format!("binding to {ip}: {e}")))?;
    }
    s.connect_timeout(&SockAddr::from(*addr), timeout)?;
    opts.apply_connected(&s)?;
    Ok(s)
}

/// A listening TCP socket on `addr` (port 0: any), options inherited by accepted sockets.
pub fn listen(addr: &SocketAddr, opts: &DataSocketOpts, backlog: i32) -> io::Result<Socket> {
    let s = tcp_socket(addr, false)?;
    s.set_reuse_address(true)?;
    if addr.is_ipv6() {
        s.set_only_v6(false).ok();
    }
    opts.apply_before_connect(&s)?;
    s.bind(&SockAddr::from(*addr))?;
    s.listen(backlog)?;
    Ok(s)
}

pub fn set_nonblocking(fd: RawFd, on: bool) -> io::Result<()> {
    // SAFETY: fcntl on an fd we hold; results checked.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 {
            return Err(io::Error::last_os_error());
        }
        let new = if on {
            flags | libc::O_NONBLOCK
        } else {
            flags & !libc::O_NONBLOCK
        };
        if new != flags && libc::fcntl(fd, libc::F_SETFL, new) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// `send` without SIGPIPE: a peer that went away is an error value, not a signal.
///
/// EINTR is returned, not retried: it is how the engine wakes a worker
/// blocked under the blocking driver (see [`would_block`]).
///
/// The raw syscall, not glibc's `send`: that one is a thread-cancellation
/// point and switches asynchronous cancellation on and off around every
/// call, about 60 instructions of 530 per 1-byte tcp_rr transaction in
/// callgrind (docs/performance.md). thrum never cancels threads.
#[inline]
pub fn send(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    send_flags(fd, buf, 0)
}

/// [`send`] with more MSG_* flags (MSG_ZEROCOPY).
#[inline]
pub fn send_flags(fd: RawFd, buf: &[u8], flags: libc::c_int) -> io::Result<usize> {
    // SAFETY: buf is valid for buf.len() bytes; no address is passed.
    let n = unsafe {
        libc::syscall(
            libc::SYS_sendto,
            fd,
            buf.as_ptr(),
            buf.len(),
            libc::MSG_NOSIGNAL | flags,
            std::ptr::null::<libc::sockaddr>(),
            0 as libc::socklen_t,
        )
    };
    if n >= 0 {
        return Ok(n as usize);
    }
    Err(io::Error::last_os_error())
}

/// `recv` as a raw syscall, for the reason given at [`send`]; EINTR is returned as there.
#[inline]
pub fn recv(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: buf is valid for buf.len() bytes; no address is asked for.
    let n = unsafe {
        libc::syscall(
            libc::SYS_recvfrom,
            fd,
            buf.as_mut_ptr(),
            buf.len(),
            0,
            std::ptr::null_mut::<libc::sockaddr>(),
            std::ptr::null_mut::<libc::socklen_t>(),
        )
    };
    if n >= 0 {
        return Ok(n as usize);
    }
    Err(io::Error::last_os_error())
}

/// Half-close: the peer reads EOF once it has read everything sent before.
pub fn shutdown_write(fd: RawFd) -> io::Result<()> {
    // SAFETY: plain syscall.
    if unsafe { libc::shutdown(fd, libc::SHUT_WR) } < 0 {
        let e = io::Error::last_os_error();
        // Already reset or never connected: nothing left to half-close.
        if e.raw_os_error() != Some(libc::ENOTCONN) {
            return Err(e);
        }
    }
    Ok(())
}

/// Would this error clear up by itself? EAGAIN on a non-blocking socket, or
/// EINTR: the engine's wake-up signal interrupted a blocking call so that
/// the worker looks at its phase and stop flags (a non-blocking call never
/// sleeps, so never sees it).
#[inline]
pub fn would_block(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    )
}

/// Wait up to `timeout_ms` (-1: no limit) for `events` on one socket and
/// return what poll reports (POLLERR and POLLHUP always count). An
/// interrupting signal (the engine's watchdog) ends the wait with 0, as a
/// timeout does.
pub fn poll_one(fd: RawFd, events: i16, timeout_ms: i32) -> io::Result<i16> {
    let mut p = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the duration of the call.
    if unsafe { libc::poll(&mut p, 1, timeout_ms) } < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(0)
        } else {
            Err(e)
        };
    }
    Ok(p.revents)
}

/// Pin the calling thread to one CPU.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data; CPU_SET bounds are checked by the plan (< 4096 > CPU_SETSIZE is caught below).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(io::Error::other(format!("CPU {cpu} is beyond CPU_SETSIZE")));
        }
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!("pinning to CPU {cpu}: {e}"),
            ));
        }
    }
    Ok(())
}

/// Accept one connection as a non-blocking, close-on-exec socket (one syscall).
pub fn accept_nonblocking(listener: RawFd) -> io::Result<(Socket, SocketAddr)> {
    accept_inner(listener, true)
}

/// [`accept_nonblocking`] that returns EINTR instead of retrying: on a
/// blocking listener the watchdog's signal must end the wait.
pub fn accept_interruptible(listener: RawFd) -> io::Result<(Socket, SocketAddr)> {
    accept_inner(listener, false)
}

fn accept_inner(listener: RawFd, retry_eintr: bool) -> io::Result<(Socket, SocketAddr)> {
    use std::os::fd::FromRawFd;
    // SAFETY: storage is large enough for any address; len is in/out.
    unsafe {
        let mut storage: libc::sockaddr_storage = std::mem::zeroed();
        let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        let fd = loop {
            let fd = libc::accept4(
                listener,
                (&mut storage as *mut libc::sockaddr_storage).cast(),
                &mut len,
                libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            );
            if fd >= 0 {
                break fd;
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted || !retry_eintr {
                return Err(e);
            }
        };
        let sock = Socket::from_raw_fd(fd);
        let addr = SockAddr::new(storage, len)
            .as_socket()
            .ok_or_else(|| io::Error::other("accepted a socket with a non-IP address"))?;
        Ok((sock, addr))
    }
}

/// The same host, ignoring IPv4-mapped IPv6 spelling.
pub fn same_host(a: IpAddr, b: IpAddr) -> bool {
    a.to_canonical() == b.to_canonical()
}

/// A UDP socket bound to `bind` (any address of the peer's family when None)
/// and connected to `peer`: the kernel then delivers only the peer's datagrams.
pub fn udp_connected(
    peer: &SocketAddr,
    bind: Option<IpAddr>,
    opts: &DataSocketOpts,
) -> io::Result<Socket> {
    let s = udp_bound(SocketAddr::new(bind.unwrap_or(unspecified(peer)), 0), opts)?;
    s.connect(&SockAddr::from(*peer))?;
    Ok(s)
}

/// A non-blocking UDP socket bound to `local`, buffer sizes applied.
pub fn udp_bound(local: SocketAddr, opts: &DataSocketOpts) -> io::Result<Socket> {
    let s = Socket::new(
        Domain::for_address(local),
        Type::DGRAM.nonblocking().cloexec(),
        Some(Protocol::UDP),
    )?;
    if let Some(b) = opts.send_buffer {
        s.set_send_buffer_size(b as usize)
            .map_err(|e| ctx(e, "SO_SNDBUF"))?;
    }
    if let Some(b) = opts.recv_buffer {
        s.set_recv_buffer_size(b as usize)
            .map_err(|e| ctx(e, "SO_RCVBUF"))?;
    }
    opts.apply_busy_poll(&s)?;
    opts.apply_tos(&s)?;
    super::sockmark::apply_mark(s.as_raw_fd(), &opts.marks)?;
    s.bind(&SockAddr::from(local))?;
    Ok(s)
}

fn unspecified(peer: &SocketAddr) -> IpAddr {
    if peer.is_ipv4() {
        IpAddr::from([0u8; 4])
    } else {
        IpAddr::from([0u16; 8])
    }
}

/// The kernel's path MTU for a connected socket (IP_MTU / IPV6_MTU), if it knows one.
pub fn path_mtu(s: &Socket, ipv6: bool) -> Option<u32> {
    let (level, opt) = if ipv6 {
        (libc::IPPROTO_IPV6, libc::IPV6_MTU)
    } else {
        (libc::IPPROTO_IP, libc::IP_MTU)
    };
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: v and len are valid for the call.
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            level,
            opt,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    (rc == 0 && v > 0).then_some(v as u32)
}

/// Give the calling thread a private copy of the process's descriptor table,
/// holding only `keep` and stdio (0, 1, 2).
///
/// In a process with more than one thread sharing its table, every syscall
/// on a descriptor takes a reference on the file (`fdget`) and drops it after
/// (`fput`): two atomic operations per call that a thread with a table of its
/// own is spared. The blocking driver's worker makes two such calls per
/// transaction and touches no other descriptor, so it takes a private table.
///
/// The copy is trimmed at once: a descriptor left in it would keep that file
/// open after the rest of the process closed it (another session's socket on
/// a server, for one). Descriptors the thread opens afterwards exist only in
/// its own table, so the caller must not hand any of them to another thread;
/// `keep` stays open in both tables, and is closed for good when both have
/// closed it (the thread's copy goes at its exit).
///
/// Refused (`Unsupported`) before anything changes where the kernel lacks
/// `close_range` (Linux < 5.9).
pub fn private_fd_table(keep: RawFd) -> io::Result<()> {
    // Probe: closing a range with no open descriptor succeeds where
    // close_range exists and changes nothing.
    if close_range(u32::MAX, u32::MAX).is_err() {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "close_range is not available",
        ));
    }
    // SAFETY: CLONE_FILES alone affects the calling thread's table only.
    if unsafe { libc::unshare(libc::CLONE_FILES) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let keep = u32::try_from(keep).map_err(|_| io::Error::other("negative descriptor"))?;
    if keep > 3 {
        close_range(3, keep - 1)?;
    }
    close_range(keep.max(2) + 1, u32::MAX)
}

/// close_range(2) over `first..=last`, no flags.
fn close_range(first: u32, last: u32) -> io::Result<()> {
    // SAFETY: closes descriptors of this thread's table; callers pass only
    // ranges they own (a private table, or a range with nothing open).
    let rc = unsafe { libc::syscall(libc::SYS_close_range, first, last, 0u32) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The local port of a bound socket.
pub fn local_port(s: &Socket) -> io::Result<u16> {
    s.local_addr()?
        .as_socket()
        .map(|a| a.port())
        .ok_or_else(|| io::Error::other("socket has no IP address"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn busy_poll_of(s: &Socket) -> i32 {
        let mut v: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: v and len are valid for the call.
        let rc = unsafe {
            libc::getsockopt(
                s.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_BUSY_POLL,
                (&mut v as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        assert_eq!(rc, 0);
        v
    }

    #[test]
    fn busy_poll_reaches_tcp_and_udp_sockets() {
        let opts = DataSocketOpts {
            busy_poll_us: Some(50),
            ..DataSocketOpts::default()
        };
        let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let tcp = tcp_socket(&addr, true).unwrap();
        match opts.apply_connected(&tcp) {
            Ok(()) => {}
            // Unprivileged, above net.core.busy_read: the kernel refuses.
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => return,
            Err(e) => panic!("{e}"),
        }
        assert_eq!(busy_poll_of(&tcp), 50);
        assert_eq!(busy_poll_of(&udp_bound(addr, &opts).unwrap()), 50);
        assert_eq!(busy_poll_of(&tcp_socket(&addr, true).unwrap()), 0);
    }

    fn is_open(fd: RawFd) -> bool {
        // SAFETY: F_GETFD only reads the descriptor's flags.
        unsafe { libc::fcntl(fd, libc::F_GETFD) != -1 }
    }

    #[test]
    fn a_private_fd_table_keeps_one_descriptor_and_holds_no_other_file() {
        let mut a = [0; 2];
        let mut b = [0; 2];
        // SAFETY: both arrays have room for two descriptors.
        unsafe {
            assert_eq!(libc::pipe2(a.as_mut_ptr(), libc::O_CLOEXEC), 0);
            assert_eq!(libc::pipe2(b.as_mut_ptr(), libc::O_CLOEXEC), 0);
        }
        let keep = a[1];
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            private_fd_table(keep).unwrap();
            let seen = (is_open(keep), is_open(a[0]), is_open(b[0]), is_open(b[1]));
            done_tx.send(seen).unwrap();
            // Stay alive (holding the private table) while the main thread checks.
            go_rx.recv().unwrap();
            // SAFETY: writes one byte from a valid buffer.
            unsafe { libc::write(keep, b"x".as_ptr().cast(), 1) }
        });
        assert_eq!(done_rx.recv().unwrap(), (true, false, false, false));
        // The process's own table is untouched.
        assert!(is_open(a[0]) && is_open(a[1]) && is_open(b[0]) && is_open(b[1]));
        // The thread holds no reference to b's write end: closing it here
        // ends the pipe, though the thread is still alive.
        // SAFETY: b[1] is ours to close; the read buffer is valid.
        unsafe {
            libc::close(b[1]);
            let mut c = [0u8; 1];
            assert_eq!(libc::read(b[0], c.as_mut_ptr().cast(), 1), 0);
        }
        go_tx.send(()).unwrap();
        // The kept descriptor still works in the thread's table.
        assert_eq!(t.join().unwrap(), 1);
        // SAFETY: closing our remaining descriptors.
        unsafe {
            libc::close(a[0]);
            libc::close(a[1]);
            libc::close(b[0]);
        }
    }
}
