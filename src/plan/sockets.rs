//! neper's per-socket options that both ends set on their data sockets:
//! the firewall mark (`--mark`, SO_MARK) and the TCP transmit delay
//! (`--tcp-tx-delay`, TCP_TX_DELAY). One group, flattened into the plan,
//! so that the server applies what the client asked for and the result
//! says what each end's kernel read back.

use serde::{Deserialize, Serialize};

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
