//! One workload per test, read by both ends and the analysis.
//!
//! A test's workload is a row of [`TESTS`]: how the client and the server
//! build a flow, what the UDP tests' I/O path is, the largest datagram a
//! plan sends and the buffers the server's flows allocate. The client and
//! the server read the row instead of matching the test kind each in their
//! own way (neper's `struct neper_fn` is the model). What a test is — its
//! transport, which end sends on a flow, its figure of merit, which
//! options apply — needs no workload and sits below it, in
//! `plan::kinds` (`TestKind::traits()`), where the plan and the command
//! line read it too. Adding a test is its flow file in `workload/` plus
//! one row here, one row of `plan::kinds::TRAITS` and its name in
//! [`TestKind`].

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::RawFd;
use std::time::Duration;

use socket2::Socket;

use super::capacity::{DEFAULT_PROBE_BPS, TrainReceiver, TrainSender};
use super::crr::{ConnectClient, ConnectMode, ConnectServer, TOKEN_LEN};
use super::open_loop::OpenLoop;
use super::rr::{RrClient, RrServer};
use super::stream::StreamFlow;
use super::udp::{UdpRrClient, UdpRrServer, UdpStreamReceiver, UdpStreamSender, gso_segments};
use super::{CounterRef, Flow};
use crate::io::RecvBuffers;
use crate::io::mmsg::BATCH;
use crate::io::socket::DataSocketOpts;
use crate::plan::{DriverChoice, TestKind, TestPlan};

/// What a flow is built on.
pub enum Endpoint {
    /// The connected socket of a long-lived flow (TCP, or UDP connected to
    /// its peer's socket for that flow).
    Socket(Socket),
    /// A connection test's client: where to connect, and what to present.
    Dial {
        addr: SocketAddr,
        bind: Option<IpAddr>,
        opts: DataSocketOpts,
        token: [u8; TOKEN_LEN],
    },
    /// A connection test's server worker: the session's listener, the only
    /// peer address it accepts, and the token each connection must present.
    Listener {
        fd: RawFd,
        peer: IpAddr,
        token: [u8; TOKEN_LEN],
        /// The session has one flow: the worker may block in accept.
        single: bool,
    },
    /// Taken by the builder (see [`FlowArgs::take_socket`]).
    Taken,
}

/// Everything a flow builder gets.
pub struct FlowArgs<'a> {
    pub plan: &'a TestPlan,
    /// The flow's index in the session (the worker's, for a connection
    /// test's server).
    pub flow: u32,
    pub counters: CounterRef,
    pub endpoint: Endpoint,
    /// Does this end send on the flow, and does it receive? From the row:
    /// the server's are the client's, crossed.
    pub sends: bool,
    pub receives: bool,
    /// The client's end (it counts a stream's first bytes as its start).
    pub client: bool,
}

impl FlowArgs<'_> {
    /// The connected socket of a long-lived flow.
    pub fn take_socket(&mut self) -> io::Result<Socket> {
        match std::mem::replace(&mut self.endpoint, Endpoint::Taken) {
            Endpoint::Socket(s) => Ok(s),
            _ => Err(io::Error::other("this flow needs a connected socket")),
        }
    }
}

/// Builds one end's flow.
pub type Builder = fn(FlowArgs<'_>) -> io::Result<Box<dyn Flow>>;

/// One test's workload, for both ends and the analysis: what needs the
/// flows. Its facts (transport, ways, figure of merit, ...) are its
/// `plan::Traits`.
pub struct TestDesc {
    pub kind: TestKind,
    pub client: Builder,
    pub server: Builder,
    /// The datagram I/O path this plan runs, for the result (UDP tests).
    pub udp_io: fn(&TestPlan) -> Option<String>,
    /// The largest datagram payload the plan sends, for the path MTU check
    /// (UDP tests).
    pub largest_datagram: fn(&TestPlan) -> Option<u64>,
    /// The user-space buffer bytes the server's flows allocate: per flow,
    /// and per worker thread (connection tests), for its memory estimate
    /// (`control::limits`). An upper bound.
    pub server_buffers: fn(&TestPlan) -> (u64, u64),
}

impl TestDesc {
    /// Build the client's flow `flow` on `endpoint`.
    pub fn client_flow(
        &self,
        plan: &TestPlan,
        flow: u32,
        counters: CounterRef,
        endpoint: Endpoint,
    ) -> io::Result<Box<dyn Flow>> {
        let w = self.kind.traits().flow_ways(plan, flow);
        (self.client)(FlowArgs {
            plan,
            flow,
            counters,
            endpoint,
            sends: w.client_sends,
            receives: w.client_receives,
            client: true,
        })
    }

    /// Build the server's flow `flow` (a worker's, for a connection test).
    pub fn server_flow(
        &self,
        plan: &TestPlan,
        flow: u32,
        counters: CounterRef,
        endpoint: Endpoint,
    ) -> io::Result<Box<dyn Flow>> {
        let w = self.kind.traits().flow_ways(plan, flow);
        (self.server)(FlowArgs {
            plan,
            flow,
            counters,
            endpoint,
            sends: w.client_receives,
            receives: w.client_sends,
            client: false,
        })
    }
}

/// Every test thrum runs, one row each.
pub static TESTS: [TestDesc; 9] = [
    TestDesc {
        kind: TestKind::TcpStream,
        client: stream,
        server: stream,
        udp_io: none,
        largest_datagram: no_datagrams,
        server_buffers: stream_buffers,
    },
    TestDesc {
        kind: TestKind::TcpMaerts,
        client: stream,
        server: stream,
        udp_io: none,
        largest_datagram: no_datagrams,
        server_buffers: stream_buffers,
    },
    TestDesc {
        kind: TestKind::TcpBidir,
        client: stream,
        server: stream,
        udp_io: none,
        largest_datagram: no_datagrams,
        server_buffers: stream_buffers,
    },
    TestDesc {
        kind: TestKind::TcpRr,
        client: rr_client,
        server: rr_server,
        udp_io: none,
        largest_datagram: no_datagrams,
        server_buffers: rr_buffers,
    },
    TestDesc {
        kind: TestKind::TcpCrr,
        client: crr_client,
        server: crr_server,
        udp_io: none,
        largest_datagram: no_datagrams,
        server_buffers: connect_buffers,
    },
    TestDesc {
        kind: TestKind::TcpCc,
        client: cc_client,
        server: cc_server,
        udp_io: none,
        largest_datagram: no_datagrams,
        server_buffers: connect_buffers,
    },
    TestDesc {
        kind: TestKind::UdpStream,
        client: udp_stream_client,
        server: udp_stream_server,
        udp_io: udp_stream_io,
        largest_datagram: |p| Some(p.send_bytes),
        server_buffers: udp_stream_buffers,
    },
    TestDesc {
        kind: TestKind::UdpRr,
        client: udp_rr_client,
        server: udp_rr_server,
        udp_io: udp_rr_io,
        largest_datagram: |p| Some(p.request_bytes.max(p.response_bytes)),
        server_buffers: udp_rr_buffers,
    },
    TestDesc {
        kind: TestKind::Capacity,
        client: capacity_flow,
        server: capacity_flow,
        udp_io: |_| Some("send, recvmsg with SO_TIMESTAMPNS".into()),
        largest_datagram: |p| Some(p.send_bytes),
        // One datagram buffer (and a byte) per receiver.
        server_buffers: |p| (p.send_bytes + 1, 0),
    },
];

impl TestKind {
    /// This test's row.
    pub fn desc(self) -> &'static TestDesc {
        let d = &TESTS[self as usize];
        debug_assert_eq!(d.kind, self, "TESTS is in TestKind's order");
        d
    }
}

/// rr buffers are capped (`workload::rr`): at most this per direction.
const RR_MAX_BUF: u64 = 256 << 10;
/// A connection test worker's buffer is capped the same way (`workload::crr`).
const CRR_MAX_BUF: u64 = 256 << 10;

/// A bulk server flow: its receive buffer where it receives, its send
/// buffer (a ring of them with `--zerocopy`) where it sends.
fn stream_buffers(p: &TestPlan) -> (u64, u64) {
    let d = p.test.traits();
    let send = if p.zerocopy {
        p.send_bytes
            .saturating_mul(crate::io::zerocopy::RING_SLOTS as u64)
    } else {
        p.send_bytes
    };
    let mut b = 0u64;
    if d.server_sends() {
        b = b.saturating_add(send);
    }
    if d.server_receives() {
        b = b.saturating_add(p.recv_bytes);
    }
    (b, 0)
}

fn rr_buffers(p: &TestPlan) -> (u64, u64) {
    // As the server's flow allocates them: a receive buffer of at least
    // 4 KiB, a send buffer of just the responses in flight (1 byte for
    // 1-byte ones: 100,000 such flows fit the default 1 GiB).
    let in_flight = p.burst as u64 + 1;
    let cap = |m: u64, min: u64| m.saturating_mul(in_flight).clamp(min, RR_MAX_BUF);
    // Under io_uring (`workload::rr`'s `provided`): a buffer per request
    // in flight and one more, each up to 16 KiB.
    let provided = p
        .request_bytes
        .saturating_mul(in_flight)
        .clamp(64, 16 << 10);
    (
        cap(p.request_bytes, 4096) + cap(p.response_bytes, 1),
        ring(p, provided, in_flight + 1),
    )
}

/// Connection tests' server flows are one per worker.
fn connect_buffers(p: &TestPlan) -> (u64, u64) {
    // A connection test's flow closes its sockets: no receive ring
    // (`engine::choose_driver` keeps io_uring's readiness side for it).
    (
        0,
        p.request_bytes.max(p.response_bytes).clamp(64, CRR_MAX_BUF),
    )
}

fn udp_stream_buffers(p: &TestPlan) -> (u64, u64) {
    // --gso: each buffer takes a whole coalesced message.
    let each = if p.gso { 65_535 } else { p.send_bytes };
    (BATCH as u64 * each, 0)
}

/// Requests beyond the first a udp_rr server flow is sized for: the
/// burst, or open loop the client's `--max-inflight` (its window).
fn udp_rr_window(p: &TestPlan) -> u32 {
    match p.offered_per_s {
        Some(_) => p.max_inflight.max(1) - 1,
        None => p.burst,
    }
}

/// What a udp_rr server flow allocates (`UdpRrServer`): a batch of request
/// and response buffers, at most [`BATCH`]; under io_uring also a send
/// buffer per response the window may have out, twice over, and its
/// share of the worker's receive ring (a buffer per request in flight and
/// one more). Open loop the window is the client's `--max-inflight`, so
/// both grow with it: 65,536 × 64 KB is 8.6 GB, which is why the estimate
/// counts them before anything is allocated.
fn udp_rr_buffers(p: &TestPlan) -> (u64, u64) {
    let in_flight = udp_rr_window(p) as u64 + 1;
    let batch = (BATCH as u64).min(in_flight);
    let request = p.request_bytes.saturating_add(1);
    let mut per_flow = batch.saturating_mul(request.saturating_add(p.response_bytes));
    if may_complete(p) {
        let slab = (2 * in_flight + 2).saturating_mul(p.response_bytes.max(1));
        per_flow = per_flow.saturating_add(slab);
    }
    (per_flow, ring(p, request, in_flight + 1))
}

/// May this plan's workers run io_uring's completion driver? `--driver
/// uring`, and `auto` with enough flows per worker (`engine::choose_driver`
/// picks it from 4): counted as possible unless the plan says epoll.
fn may_complete(p: &TestPlan) -> bool {
    p.driver != DriverChoice::Epoll
}

/// A worker's io_uring receive ring for its flows, each wanting
/// `per_flow` buffers of `size` bytes, as the engine and the driver size it
/// (`io::uring::ring_bytes`); none when the plan cannot run io_uring.
fn ring(p: &TestPlan, size: u64, per_flow: u64) -> u64 {
    if !may_complete(p) {
        return 0;
    }
    let flows = p.flows.div_ceil(p.threads.max(1)) as u64;
    // The engine asks for at least 16 buffers; the driver caps the count.
    let count = flows.saturating_mul(per_flow).clamp(16, 1 << 20) as usize;
    crate::io::uring::ring_bytes(RecvBuffers {
        size: size.min(1 << 20) as usize,
        count,
    })
}

fn none(_: &TestPlan) -> Option<String> {
    None
}

fn no_datagrams(_: &TestPlan) -> Option<u64> {
    None
}

/// tcp_stream, tcp_maerts, tcp_bidir: the same flow at both ends, sending,
/// receiving or both as the row says. Only the client counts its first
/// bytes as the flow's start.
fn stream(mut a: FlowArgs<'_>) -> io::Result<Box<dyn Flow>> {
    let sock = a.take_socket()?;
    let f = StreamFlow::new(
        sock,
        a.counters,
        a.sends,
        a.receives,
        if a.sends {
            a.plan.send_bytes as usize
        } else {
            0
        },
        if a.receives {
            a.plan.recv_bytes as usize
        } else {
            0
        },
        a.client,
    );
    let f = if a.plan.call_times {
        f.with_call_times()
    } else {
        f
    };
    let f = match a.plan.bytes {
        Some(_) => f.with_byte_limit(a.plan.flow_bytes(a.flow)),
        None => f,
    };
    Ok(Box::new(if a.plan.zerocopy {
        f.with_zerocopy()?
    } else {
        f
    }))
}

/// A request/response client flow, run open-loop by its generator when the
/// plan has a rate (`--rate`), closed-loop otherwise.
fn on_schedule<F: Flow + 'static>(
    f: F,
    p: &TestPlan,
    flow: u32,
    open_loop: fn(F, OpenLoop) -> F,
) -> Box<dyn Flow> {
    match OpenLoop::of(p, flow) {
        Some(g) => Box::new(open_loop(f, g)),
        None => Box::new(f),
    }
}

fn rr_client(mut a: FlowArgs<'_>) -> io::Result<Box<dyn Flow>> {
    let sock = a.take_socket()?;
    let p = a.plan;
    let f = RrClient::new(
        sock,
        a.counters,
        p.request_bytes,
        p.response_bytes,
        p.burst,
        p.flow_quota(a.flow),
    )
    .with_delay(Duration::from_nanos(p.delay_ns));
    let f = if p.one_way { f.one_way(one_way(p)) } else { f };
    Ok(on_schedule(f, p, a.flow, RrClient::open_loop))
}

fn rr_server(mut a: FlowArgs<'_>) -> io::Result<Box<dyn Flow>> {
    let sock = a.take_socket()?;
    let p = a.plan;
    let f = RrServer::new(sock, a.counters, p.request_bytes, p.response_bytes, p.burst);
    Ok(Box::new(if p.one_way { f.one_way() } else { f }))
}

fn connect_client(mode: ConnectMode, a: FlowArgs<'_>) -> io::Result<Box<dyn Flow>> {
    let Endpoint::Dial {
        addr,
        bind,
        opts,
        token,
    } = a.endpoint
    else {
        return Err(io::Error::other(
            "a connection test's client dials the server",
        ));
    };
    let p = a.plan;
    let f = ConnectClient::new(
        mode,
        addr,
        bind,
        opts,
        a.counters,
        token,
        p.request_bytes,
        p.response_bytes,
        p.flow_quota(a.flow),
        p.close,
    );
    Ok(on_schedule(f, p, a.flow, ConnectClient::open_loop))
}

fn connect_server(mode: ConnectMode, a: FlowArgs<'_>) -> io::Result<Box<dyn Flow>> {
    let Endpoint::Listener {
        fd,
        peer,
        token,
        single,
    } = a.endpoint
    else {
        return Err(io::Error::other(
            "a connection test's server accepts on a listener",
        ));
    };
    let p = a.plan;
    Ok(Box::new(
        ConnectServer::new(
            mode,
            fd,
            peer,
            token,
            p.request_bytes,
            p.response_bytes,
            a.counters,
            single,
        )
        .also_from(&p.spreading.local_hosts),
    ))
}

fn crr_client(a: FlowArgs<'_>) -> io::Result<Box<dyn Flow>> {
    connect_client(ConnectMode::Crr, a)
}

fn crr_server(a: FlowArgs<'_>) -> io::Result<Box<dyn Flow>> {
    connect_server(ConnectMode::Crr, a)
}

fn cc_client(a: FlowArgs<'_>) -> io::Result<Box<dyn Flow>> {
    connect_client(ConnectMode::Cc, a)
}

fn cc_server(a: FlowArgs<'_>) -> io::Result<Box<dyn Flow>> {
    connect_server(ConnectMode::Cc, a)
}

fn udp_stream_client(mut a: FlowArgs<'_>) -> io::Result<Box<dyn Flow>> {
    let sock = a.take_socket()?;
    let p = a.plan;
    let s = UdpStreamSender::new(sock, a.counters, a.flow, p.send_bytes as usize, p.rate_bps)
        .with_byte_limit(p.flow_bytes(a.flow));
    let s = if p.zerocopy { s.with_zerocopy()? } else { s };
    Ok(Box::new(if p.gso { s.with_gso()? } else { s }))
}

fn udp_stream_server(mut a: FlowArgs<'_>) -> io::Result<Box<dyn Flow>> {
    let sock = a.take_socket()?;
    let p = a.plan;
    let r = UdpStreamReceiver::new(sock, a.counters, a.flow, p.send_bytes as usize);
    Ok(Box::new(if p.gso { r.with_gro()? } else { r }))
}

/// capacity: whichever end sends (the client, or the server with
/// `--reverse`) sends trains; the other takes their gaps.
fn capacity_flow(mut a: FlowArgs<'_>) -> io::Result<Box<dyn Flow>> {
    let sock = a.take_socket()?;
    let p = a.plan;
    let size = p.send_bytes as usize;
    if a.sends {
        let rate = p.rate_bps.unwrap_or(DEFAULT_PROBE_BPS);
        Ok(Box::new(TrainSender::new(sock, a.counters, size, rate)?))
    } else {
        let r = TrainReceiver::new(sock, a.counters, size)?;
        Ok(Box::new(if a.client { r.done_at_drain() } else { r }))
    }
}

/// `--one-way`'s client state for a flow of `p` (each interval's ways
/// are the worker's recorder's, a phased mix's probe's as any other's).
fn one_way(p: &TestPlan) -> super::one_way::OneWay {
    super::one_way::OneWay::new(p.one_way_offset_ns)
}

fn udp_rr_client(mut a: FlowArgs<'_>) -> io::Result<Box<dyn Flow>> {
    let sock = a.take_socket()?;
    let p = a.plan;
    let f = UdpRrClient::new(
        sock,
        a.counters,
        p.request_bytes,
        p.response_bytes,
        p.burst,
        Duration::from_nanos(p.rr_timeout_ns),
        p.flow_quota(a.flow),
    );
    let f = if p.rr_in_order { f.in_order() } else { f };
    let f = if p.one_way { f.one_way(one_way(p)) } else { f };
    Ok(on_schedule(f, p, a.flow, UdpRrClient::open_loop))
}

fn udp_rr_server(mut a: FlowArgs<'_>) -> io::Result<Box<dyn Flow>> {
    let sock = a.take_socket()?;
    let p = a.plan;
    // Open loop the client may have --max-inflight requests out at once:
    // the server's batches and (under io_uring) its provided buffers are
    // sized for that many, or a burst after a stall would find the ring
    // empty and queue in the socket behind later requests.
    let window = udp_rr_window(p);
    let f = UdpRrServer::new(sock, a.counters, p.request_bytes, p.response_bytes, window);
    Ok(Box::new(if p.one_way { f.one_way() } else { f }))
}

fn udp_stream_io(p: &TestPlan) -> Option<String> {
    Some(if p.gso {
        format!(
            "--gso: sendmmsg of up to {BATCH} messages of up to {} datagrams each (UDP_SEGMENT), recvmmsg with UDP_GRO, datagrams counted by segment size",
            gso_segments(p.send_bytes as usize)
        )
    } else {
        format!(
            "sendmmsg/recvmmsg, up to {BATCH} datagrams per call; a receiver alone on its thread naps between batches while datagrams stream in (wake-up coalescing)"
        )
    })
}

fn udp_rr_io(p: &TestPlan) -> Option<String> {
    Some(if p.burst == 0 {
        "send/recv, one datagram per call (one transaction in flight)".into()
    } else {
        format!(
            "sendmmsg/recvmmsg, up to {} datagrams per call",
            BATCH.min(p.burst as usize + 1)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_its_own_row_in_order() {
        for k in TestKind::ALL {
            assert_eq!(k.desc().kind, k);
        }
        assert_eq!(TESTS.len(), TestKind::ALL.len());
    }

    #[test]
    fn udp_rows_say_their_io_path_and_others_do_not() {
        let mut p = TestPlan::new(TestKind::UdpRr);
        p.burst = 3;
        let io = (TestKind::UdpRr.desc().udp_io)(&p).unwrap();
        assert!(io.contains("up to 4 datagrams per call"), "{io}");
        let p = TestPlan::new(TestKind::TcpRr);
        assert_eq!((TestKind::TcpRr.desc().udp_io)(&p), None);
    }
}
