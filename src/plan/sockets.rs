//! neper's per-socket options that both ends set on their data sockets:
//! the firewall mark (`--mark`, SO_MARK) and the TCP transmit delay
//! (`--tcp-tx-delay`, TCP_TX_DELAY). One group, flattened into the plan,
//! so that the server applies what the client asked for and the result
//! says what each end's kernel read back.

use serde::{Deserialize, Serialize};

use super::{PlanError, TestKind, TestPlan, Transport};

/// The largest TCP_TX_DELAY the kernel takes, µs (it refuses `1 << 28`
/// and above: the delay is kept in 28 bits of the socket).
pub const MAX_TCP_TX_DELAY_US: u32 = (1 << 28) - 1;

/// SO_MARK and TCP_TX_DELAY on both ends' data sockets; in a result, as
/// each end's kernel read them back from a data socket with getsockopt.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct SocketMarks {
    /// SO_MARK (`--mark`): the mark policy routing (`ip rule fwmark`)
    /// and netfilter match on; absent: unmarked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mark: Option<u32>,
    /// TCP_TX_DELAY (`--tcp-tx-delay`), µs: the kernel holds each packet
    /// this socket sends this long before it leaves (RTT emulation, Linux
    /// 5.12 on); absent: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 268_435_455))]
    pub tcp_tx_delay_us: Option<u32>,
}

impl SocketMarks {
    /// Nothing asked for.
    pub fn is_unset(&self) -> bool {
        *self == SocketMarks::default()
    }
}

/// The most source addresses `--local-hosts` lists.
pub const MAX_LOCAL_HOSTS: usize = 64;

/// The most data listeners `--num-ports` asks for (the server's own cap,
/// `io::spread::MAX_LISTENERS`).
pub const MAX_NUM_PORTS: u32 = 64;

/// How the server spreads a test (neper's `--num-ports`, `--num-threads`
/// on the server side, `--listen-backlog`, `--max-events`): each None
/// leaves thrum's default.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Spreading {
    /// `--local-hosts`: the client's source addresses, its flows round
    /// them (flow i from address i mod the list; a connection test's flow
    /// dials every connection from its address); the server takes data
    /// connections and UDP flows from them besides the control connection's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub local_hosts: Vec<std::net::IpAddr>,
    /// `--num-ports`: the server listens on this many data ports and the
    /// client's long-lived TCP flows go round them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 64))]
    pub num_ports: Option<u32>,
    /// `--server-threads`: the server's worker threads (`threads` is then
    /// the client's alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub server_threads: Option<u32>,
    /// `--listen-backlog`: the backlog of the server's data listeners
    /// (the kernel caps it at net.core.somaxconn); absent: 4096.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub listen_backlog: Option<u32>,
    /// `--max-events`: the most events one epoll_wait returns, both ends'
    /// epoll workers; absent: 256.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65536))]
    pub max_events: Option<u32>,
    /// `--epoll-trigger`: how both ends' epoll workers register their data
    /// sockets; absent: edge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoll_trigger: Option<EpollTrigger>,
}

/// Edge- or level-triggered epoll (`--epoll-trigger`, neper's -T/--edge).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EpollTrigger {
    /// EPOLLET: a socket is reported when it becomes ready (thrum's default).
    Edge,
    /// A socket is reported at every wait while it is ready: a flow that
    /// waits for a response while its socket is writable wakes its worker
    /// at every turn, so the worker spins.
    Level,
}

impl Spreading {
    /// Nothing asked for.
    pub fn is_unset(&self) -> bool {
        *self == Spreading::default()
    }
}

/// `--tcp-tx-delay` (TCP tests, in range), `--num-ports`,
/// `--server-threads`, `--listen-backlog`, `--max-events`.
pub(super) fn validate(plan: &TestPlan) -> Result<(), PlanError> {
    let t = plan.test;
    if let Some(us) = plan.sockets.tcp_tx_delay_us {
        if t.traits().transport == Transport::Udp {
            return Err(PlanError::NotApplicable {
                flag: "--tcp-tx-delay",
                applies: TestKind::named(|x| x.transport != Transport::Udp),
                test: t,
            });
        }
        if us == 0 || us > MAX_TCP_TX_DELAY_US {
            return Err(PlanError::Invalid(format!(
                "--tcp-tx-delay {us}us is out of range (accepted: 1us to {MAX_TCP_TX_DELAY_US}us, about 268s)"
            )));
        }
    }
    let s = &plan.spreading;
    if !s.local_hosts.is_empty() && !t.traits().local_hosts {
        return Err(PlanError::NotApplicable {
            flag: "--local-hosts",
            applies: TestKind::named(|x| x.local_hosts),
            test: t,
        });
    }
    // The server cannot tell a listed address from a forged one, so it must
    // not answer one with more than it was sent: udp_rr's response datagram
    // is then no larger than its request (no reflection gain toward an
    // address the client merely named).
    if !s.local_hosts.is_empty()
        && t.traits().rr_is_datagram()
        && plan.response_bytes > plan.request_bytes
    {
        return Err(PlanError::Invalid(format!(
            "--local-hosts with udp_rr needs a response no larger than the request (-r {},{}; accepted: RESP <= REQ), as the server cannot verify a listed address",
            plan.request_bytes, plan.response_bytes
        )));
    }
    if s.local_hosts.len() > MAX_LOCAL_HOSTS {
        return Err(PlanError::Invalid(format!(
            "--local-hosts lists {} addresses (accepted: 1 to {MAX_LOCAL_HOSTS})",
            s.local_hosts.len()
        )));
    }
    if let Some(n) = s.num_ports {
        if t.traits().transport != Transport::Tcp {
            return Err(PlanError::NotApplicable {
                flag: "--num-ports",
                applies: TestKind::named(|x| x.transport == Transport::Tcp),
                test: t,
            });
        }
        if n == 0 || n > MAX_NUM_PORTS.min(plan.flows) {
            return Err(PlanError::Invalid(format!(
                "--num-ports {n} is out of range (accepted: 1 to {}, at most one port per flow)",
                MAX_NUM_PORTS.min(plan.flows)
            )));
        }
    }
    if let Some(n) = s.server_threads
        && (n == 0 || n > plan.flows)
    {
        return Err(PlanError::Invalid(format!(
            "--server-threads {n} is out of range (accepted: 1 to --flows, {})",
            plan.flows
        )));
    }
    if let Some(n) = s.listen_backlog
        && !(1..=65535).contains(&n)
    {
        return Err(PlanError::Invalid(format!(
            "--listen-backlog {n} is out of range (accepted: 1 to 65535)"
        )));
    }
    if let Some(n) = s.max_events
        && !(1..=65536).contains(&n)
    {
        return Err(PlanError::Invalid(format!(
            "--max-events {n} is out of range (accepted: 1 to 65536)"
        )));
    }
    if !plan.parts.is_empty() && !s.is_unset() {
        return Err(PlanError::Invalid(
            "--num-ports, --server-threads, --listen-backlog, --max-events and --epoll-trigger apply to a single test, not a mix".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--local-hosts` is taken for the tests whose row allows it, and
    /// refused for the others with the list of those it applies to.
    #[test]
    fn local_hosts_applies_where_the_row_says() {
        for k in TestKind::ALL {
            let mut p = TestPlan::new(k);
            p.spreading.local_hosts = vec!["127.0.0.2".parse().unwrap()];
            match p.validate() {
                Ok(()) => assert!(k.traits().local_hosts, "{k}"),
                Err(e) => {
                    assert!(!k.traits().local_hosts, "{k}: {e}");
                    let e = e.to_string();
                    assert!(e.contains("--local-hosts") && e.contains("udp_rr"), "{e}");
                }
            }
        }
    }

    /// A listed address may be forged, so udp_rr with `--local-hosts`
    /// answers no more than it is sent.
    #[test]
    fn udp_rr_with_local_hosts_gains_nothing_by_reflection() {
        let mut p = TestPlan::new(TestKind::UdpRr);
        p.spreading.local_hosts = vec!["127.0.0.2".parse().unwrap()];
        p.request_bytes = 64;
        p.response_bytes = 64;
        assert!(p.validate().is_ok());
        p.response_bytes = 65;
        let e = p.validate().unwrap_err().to_string();
        assert!(
            e.contains("--local-hosts") && e.contains("RESP <= REQ"),
            "{e}"
        );
        p.spreading.local_hosts.clear();
        assert!(p.validate().is_ok());
    }
}
