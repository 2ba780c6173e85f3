//! neper's socket options, part of [`super::LoadArgs`] (so `run` and
//! `sweep` take them): `--mark` (SO_MARK) and `--tcp-tx-delay`
//! (TCP_TX_DELAY) on both ends' data sockets.

use std::time::Duration;

use clap::Args;

use super::duration;
use crate::plan::TestPlan;

/// SO_MARK and TCP_TX_DELAY on both ends' data sockets.
#[derive(Debug, Args, Clone, Default)]
pub struct SocketArgs {
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
}

impl SocketArgs {
    /// Fill the plan's socket marks.
    pub fn apply(&self, p: &mut TestPlan) {
        p.sockets.mark = self.mark;
        // Rounded down to the µs the kernel takes; 0 (under 1 µs) is
        // refused by the plan's check, naming the flag.
        p.sockets.tcp_tx_delay_us = self
            .tcp_tx_delay
            .map(|d| u32::try_from(d.as_micros()).unwrap_or(u32::MAX));
    }
}
