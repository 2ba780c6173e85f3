//! The client's data setup for one part of a session: the data sockets the
//! test's row asks for (long-lived TCP connections, connected UDP sockets,
//! or the address connection tests dial), the flows built on them, and the
//! warnings the setup calls for (descriptor limit, datagrams over the path
//! MTU). The server's side of this is `data`.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};

use super::proto::PartPorts;
use crate::io::connect::connect_many;
use crate::io::socket::{
    DataSocketOpts, SocketBuffers, local_port, path_mtu, same_host, udp_connected,
};
use crate::io::spread::{AddrRun, Walk, expand, may_walk, out_of_ports, runs};
use crate::plan::{TestPlan, Transport};
use crate::stats::counters::FlowCounters;
use crate::warning::{Code, Warning};
use crate::workload::crr::TOKEN_LEN;
use crate::workload::kinds::Endpoint;
use crate::workload::{CounterRef, Flow};

/// How long connecting to a server may take before it counts as
/// unreachable (data connections: a millisecond more per flow).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// The flows of one part, built from the test's row, and what the server
/// must learn of them.
pub(crate) struct Flows {
    pub(crate) counters: Arc<[FlowCounters]>,
    pub(crate) flows: Vec<Box<dyn Flow>>,
    /// UDP tests: each flow's local port, for `start`.
    pub(crate) udp_ports: Vec<u16>,
    /// UDP tests: each flow's local address, in runs, for `start` (none
    /// when all are on the control connection's address).
    pub(crate) udp_addrs: Vec<AddrRun>,
}

/// Where and how this client opens a session's data flows.
pub(crate) struct Dial {
    /// `--bind`: the local address of every data socket.
    pub(crate) bind: Option<IpAddr>,
    pub(crate) server_ip: IpAddr,
    /// The control connection's local address.
    pub(crate) control_ip: IpAddr,
    /// The session token each connection presents.
    pub(crate) token: [u8; TOKEN_LEN],
    /// Descriptors the session needs in this process (its flows; twice
    /// with the embedded server).
    pub(crate) fds_needed: u64,
}

impl Dial {
    /// Open every data flow of one part (the whole test, alone) as its
    /// row asks: long-lived TCP connections all at once (each presenting
    /// the token and its flow id as soon as it is up), connected UDP
    /// sockets, or nothing yet for the connection tests, whose flows dial
    /// as they go.
    pub(crate) fn open_flows(
        &self,
        plan: &TestPlan,
        ports: &PartPorts,
        warnings: &mut Vec<Warning>,
    ) -> Result<(Flows, Option<SocketBuffers>)> {
        let (server_ip, token) = (self.server_ip, self.token);
        let test = plan.test.desc();
        let transport = plan.test.traits().transport;
        let data_addr = SocketAddr::new(server_ip, ports.data_port);
        // Long-lived connections go round the server's listeners.
        let data_addrs: Vec<SocketAddr> = std::iter::once(ports.data_port)
            .chain(ports.more_data_ports.iter().copied())
            .map(|p| SocketAddr::new(server_ip, p))
            .collect();
        let opts = DataSocketOpts::from_plan(plan, &plan.local);
        let buffers =
            SocketBuffers::as_set(plan, &plan.local, plan.test.is_udp(), server_ip.is_ipv6()).ok();
        let flows_n = plan.flows as usize;
        if let Err(w) = crate::io::fdlimit::ensure(self.fds_needed) {
            // Every flow holds a socket: past the limit the test cannot run,
            // and failing at the flow that hits it would say less.
            if !crate::io::fdlimit::fits(self.fds_needed) {
                anyhow::bail!(
                    "-F {}: {w} (one socket per flow{})",
                    plan.flows,
                    if self.fds_needed > plan.flows as u64 {
                        ", in each end of this process"
                    } else {
                        ""
                    }
                );
            }
            warnings.push(Warning::new(Code::DescriptorLimit, w));
        }
        let mut tcp_socks = if transport == Transport::Tcp {
            let greeting = |f: usize| {
                let mut hello = Vec::with_capacity(TOKEN_LEN + 4);
                hello.extend_from_slice(&token);
                hello.extend_from_slice(&(f as u32).to_be_bytes());
                hello
            };
            // `--local-hosts` round the flows; else `--bind`, or none.
            let binds: Vec<IpAddr> = if plan.spreading.local_hosts.is_empty() {
                self.bind.into_iter().collect()
            } else {
                plan.spreading.local_hosts.clone()
            };
            connect_many(
                &data_addrs,
                &binds,
                &opts,
                flows_n,
                greeting,
                CONNECT_TIMEOUT.max(Duration::from_millis(flows_n as u64)),
            )
            .context("opening data connections")?
        } else {
            Vec::new()
        }
        .into_iter();
        let counters: Arc<[FlowCounters]> = (0..flows_n).map(|_| FlowCounters::default()).collect();
        let mut flows = Vec::with_capacity(flows_n);
        let mut udp_ports = Vec::new();
        let mut udp_local = Vec::new();
        let server_udp = if transport == Transport::Udp {
            let addrs = expand(&ports.udp_addrs, server_ip, flows_n)
                .map_err(|e| anyhow::anyhow!("the server's UDP addresses: {e}"))?;
            // As the server checks ours: only the server's own address, or
            // (a loopback server) another loopback one; never a third host.
            if let Some(a) = ports
                .udp_addrs
                .iter()
                .map(|r| r.addr)
                .find(|&a| !same_host(a, server_ip) && !may_walk(a, server_ip))
            {
                anyhow::bail!(
                    "the server named UDP address {a}, neither its own {server_ip} nor (on loopback) a loopback one"
                );
            }
            addrs
        } else {
            Vec::new()
        };
        // Past the ports of our address, on to the next loopback ones
        // (see crate::io::spread).
        let may =
            may_walk(server_ip, server_ip) && self.bind.is_none_or(|b| may_walk(b, server_ip));
        let mut walk: Option<Walk> = None;
        // `--local-hosts`: flow f's source address, f mod the list.
        let hosts = &plan.spreading.local_hosts;
        let local_host = |f: u32| (!hosts.is_empty()).then(|| hosts[f as usize % hosts.len()]);
        for f in 0..plan.flows {
            let endpoint = match transport {
                Transport::Tcp => {
                    Endpoint::Socket(tcp_socks.next().expect("one connection per flow"))
                }
                Transport::TcpPerTransaction => Endpoint::Dial {
                    addr: data_addr,
                    bind: local_host(f).or(self.bind),
                    opts: opts.clone(),
                    token,
                },
                Transport::Udp => {
                    let port = *ports
                        .udp_ports
                        .get(f as usize)
                        .context("the server sent fewer UDP ports than flows")?;
                    // An IPv4 server reached as ::ffff:a.b.c.d gets an IPv4
                    // socket: see the server's session() on mapped addresses.
                    let peer = SocketAddr::new(server_udp[f as usize].to_canonical(), port);
                    let bind = local_host(f).or(self.bind).map(|b| b.to_canonical());
                    let sock = match &mut walk {
                        None => match udp_connected(&peer, bind, &opts) {
                            Err(e) if may && out_of_ports(&e) => {
                                let w = walk.insert(Walk::new(
                                    bind.unwrap_or(server_ip.to_canonical()),
                                    true,
                                ));
                                w.open(|ip| udp_connected(&peer, Some(ip), &opts))
                            }
                            r => r,
                        },
                        Some(w) => w.open(|ip| udp_connected(&peer, Some(ip), &opts)),
                    }
                    .map_err(|e| {
                        let hint = if out_of_ports(&e) {
                            format!(
                                " (each UDP flow has a port of its own; {} flows)",
                                plan.flows
                            )
                        } else {
                            String::new()
                        };
                        anyhow::anyhow!("opening UDP socket {f} to {peer}: {e}{hint}")
                    })?;
                    udp_ports.push(local_port(&sock)?);
                    udp_local.push(local_ip(&sock)?);
                    if f == 0 {
                        warnings.extend(check_mtu(plan, &sock, peer.is_ipv6()));
                    }
                    Endpoint::Socket(sock)
                }
            };
            let ctr = CounterRef::new(counters.clone(), f as usize);
            flows.push(
                test.client_flow(plan, f, ctr, endpoint)
                    .with_context(|| format!("building flow {f}"))?,
            );
        }
        Ok((
            Flows {
                counters,
                flows,
                udp_ports,
                udp_addrs: {
                    let r = runs(udp_local);
                    if r.iter().all(|r| same_host(r.addr, self.control_ip)) {
                        Vec::new()
                    } else {
                        r
                    }
                },
            },
            buffers,
        ))
    }
}

/// Warn when datagrams will not fit the path MTU (they are fragmented,
/// and one lost fragment loses the datagram).
fn check_mtu(plan: &TestPlan, sock: &socket2::Socket, ipv6: bool) -> Option<Warning> {
    let largest = (plan.test.desc().largest_datagram)(plan)?;
    let headers = if ipv6 { 48 } else { 28 };
    let mtu = path_mtu(sock, ipv6)?;
    (largest + headers > mtu as u64).then(|| {
        Warning::new(Code::DatagramsFragmented, format!(
            "datagrams of {largest} bytes exceed the path MTU of {mtu} bytes ({} bytes of payload fit): they are sent as IP fragments",
            mtu as u64 - headers
        ))
    })
}

/// The local address of a bound socket, IPv4-mapped spelled as IPv4.
fn local_ip(s: &socket2::Socket) -> Result<IpAddr> {
    Ok(s.local_addr()?
        .as_socket()
        .context("a UDP socket with a non-IP address")?
        .ip()
        .to_canonical())
}
