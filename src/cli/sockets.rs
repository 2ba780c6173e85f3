//! neper's socket and spreading options, part of [`super::LoadArgs`]:
//! `--mark` (SO_MARK) and `--tcp-tx-delay` (TCP_TX_DELAY) on both ends'
//! data sockets; `--num-ports`, `--server-threads`, `--listen-backlog`
//! and `--max-events`, how the ends spread a test.

use std::time::Duration;

use clap::Args;

use super::duration;
use crate::plan::TestPlan;
use crate::plan::sockets::EpollTrigger;

/// SO_MARK and TCP_TX_DELAY on both ends' data sockets.
#[derive(Debug, Args, Clone, Default)]
pub struct SocketTuning {
    /// SO_MARK on data sockets, both ends (needs CAP_NET_ADMIN).
    ///
    /// SO_MARK on every data socket, both ends, before it connects or
    /// binds: policy routing (`ip rule add fwmark N lookup TABLE`) and
    /// netfilter see the mark (neper's --mark). Needs CAP_NET_ADMIN or
    /// CAP_NET_RAW on each end. The result reads it back from a data socket
    /// of each end (`summary.local.socket_options.mark`).
    #[arg(long, value_name = "N")]
    #[arg(help_heading = super::heading::SOCKETS)]
    pub mark: Option<u32>,
    /// TCP_TX_DELAY on TCP data sockets, both ends (RTT emulation).
    ///
    /// TCP_TX_DELAY on every TCP data socket, both ends (Linux 5.12 on;
    /// neper's --tx-delay): the kernel holds each packet the socket sends
    /// for this long, in µs (1us to about 268s), so each end adds it to
    /// the round trip. Read back into `summary.local.socket_options`.
    #[arg(long, value_parser = duration, value_name = "DURATION")]
    #[arg(help_heading = super::heading::SOCKETS)]
    pub tcp_tx_delay: Option<Duration>,
    /// The server listens on N data ports; TCP flows go round them.
    ///
    /// The server opens N data listeners, each on a port of its own, and
    /// the client's long-lived TCP flows (tcp_stream, tcp_maerts,
    /// tcp_bidir, tcp_rr) go round them: flow i to port i mod N (neper's
    /// --num-ports). 1 to 64, at most one per flow. Default: one listener
    /// per 12,700 flows or so (half the ephemeral port range).
    #[arg(long, value_name = "N")]
    #[arg(help_heading = super::heading::LOAD)]
    pub num_ports: Option<u32>,
    /// The server's worker threads, when not -T's.
    ///
    /// The server's worker threads (1 to --flows), so that the two ends
    /// may differ; -T is then the client's alone. Default: -T.
    #[arg(long, value_name = "N")]
    #[arg(help_heading = super::heading::LOAD)]
    pub server_threads: Option<u32>,
    /// listen() backlog of the server's data listeners.
    ///
    /// The backlog the server's data listeners are opened with (1 to 65535;
    /// the kernel caps it at net.core.somaxconn). Default: 4096.
    #[arg(long, value_name = "N")]
    #[arg(help_heading = super::heading::SOCKETS)]
    pub listen_backlog: Option<u32>,
    /// Most events per epoll_wait, both ends' epoll workers.
    ///
    /// The most events one epoll_wait returns, on both ends' epoll workers
    /// (1 to 65536; neper's --max-events). Workers on the blocking or
    /// io_uring driver are not affected. Default: 256.
    #[arg(long, value_name = "N")]
    #[arg(help_heading = super::heading::LOAD)]
    pub max_events: Option<u32>,
    /// Epoll workers register sockets edge- or level-triggered.
    ///
    /// How both ends' epoll workers register their data sockets: `edge`
    /// (EPOLLET, the default) or `level` (neper's default). Level-triggered,
    /// a flow waiting for a response on a writable socket is reported at
    /// every wait, so its worker spins. Workers on the blocking or io_uring
    /// driver are not affected (`--driver epoll` makes every worker epoll).
    #[arg(long, value_parser = ["edge", "level"], value_name = "edge|level")]
    #[arg(help_heading = super::heading::LOAD)]
    pub epoll_trigger: Option<String>,
    /// Client source addresses; flows go round them (a,b,...).
    ///
    /// The client's source addresses, comma-separated: its flows go round
    /// them, flow i from address i mod the list (neper's --local-hosts),
    /// for every test: long-lived TCP flows connect from it, UDP flows
    /// (udp_stream, udp_rr, capacity) send from it, and a tcp_crr or
    /// tcp_cc flow dials each of its connections from it. The server takes
    /// data connections and UDP flows from them besides the control
    /// connection's address. Up to 64; replaces --bind for the data flows.
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    #[arg(help_heading = super::heading::SOCKETS)]
    pub local_hosts: Vec<std::net::IpAddr>,
}

impl SocketTuning {
    /// Fill the plan's socket marks.
    pub fn apply(&self, p: &mut TestPlan) {
        p.sockets.mark = self.mark;
        // Rounded down to the µs the kernel takes; 0 (under 1 µs) is
        // refused by the plan's check, naming the flag.
        p.sockets.tcp_tx_delay_us = self
            .tcp_tx_delay
            .map(|d| u32::try_from(d.as_micros()).unwrap_or(u32::MAX));
        p.spreading.num_ports = self.num_ports;
        p.spreading.server_threads = self.server_threads;
        p.spreading.listen_backlog = self.listen_backlog;
        p.spreading.max_events = self.max_events;
        p.spreading.local_hosts = self.local_hosts.clone();
        p.spreading.epoll_trigger = self.epoll_trigger.as_deref().map(|t| match t {
            "level" => EpollTrigger::Level,
            _ => EpollTrigger::Edge,
        });
    }
}
