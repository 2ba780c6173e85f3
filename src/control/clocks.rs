//! Clock exchanges on a control connection, both ends: the near end's
//! burst of pings ([`ping`]), each timed on its CLOCK_MONOTONIC, and the
//! far end's answer ([`pong`]) with its own two readings. What the
//! exchanges give (the offset and its bound) is `stats::offset`'s, a pure
//! function; this is only the wire.
//!
//! Any server answers pings where a spec may come (`session`), at most
//! [`MAX_PINGS`] on one connection, and an agent also while it waits for
//! its start and after its run. The pings go one at a time, each after
//! the last pong, so that none waits behind another: a burst of
//! [`EXCHANGES`] costs as many round trips.

use std::net::TcpStream;

use anyhow::{Result, bail};

use super::proto::{ClientMsg, ClockPing, ClockPong, ServerMsg, write_msg};
use super::reply::expect;
use crate::clock::{SyncState, monotonic_ns, sync_state, unix_now_ns};
use crate::stats::offset::Exchange;

/// Pings in one burst: the fastest third, eight, make the estimate.
pub const EXCHANGES: u32 = 24;

/// The most pings a server answers on one connection (a few bursts).
pub const MAX_PINGS: u32 = 256;

/// What a burst of pings gave.
#[derive(Clone, Debug, Default)]
pub struct Burst {
    pub exchanges: Vec<Exchange>,
    /// The peer's kernel on its clock's synchronisation, from the last pong.
    pub sync: Option<SyncState>,
    /// The peer's CLOCK_REALTIME less ours, ns, from the fastest exchange
    /// (wall clocks may step: a label beside the monotonic offset).
    pub realtime_offset_ns: Option<i64>,
}

/// `n` pings on `ctrl` (to `peer`, for messages), one after another.
pub fn ping(ctrl: &mut TcpStream, peer: &str, n: u32) -> Result<Burst> {
    let mut burst = Burst::default();
    let mut fastest = u64::MAX;
    for seq in 0..n {
        let sent = monotonic_ns();
        write_msg(ctrl, &ClientMsg::from(ClockPing { seq }))?;
        let pong: ClockPong = expect(ctrl, peer)?;
        let received = monotonic_ns();
        let unix_received = unix_now_ns();
        if pong.seq != seq {
            bail!(
                "{peer} answered clock ping {seq} with pong {}: not in turn",
                pong.seq
            );
        }
        let x = Exchange {
            sent_ns: sent,
            peer_rx_ns: pong.rx_ns,
            peer_tx_ns: pong.tx_ns,
            received_ns: received,
        };
        // The pong left half the path before it arrived (its wall-clock
        // reading is of its departure).
        if received >= sent && x.peer_tx_ns >= x.peer_rx_ns && x.path_ns() < fastest {
            fastest = x.path_ns();
            let ours = unix_received as i128 - (fastest / 2) as i128;
            burst.realtime_offset_ns = Some((pong.unix_ns as i128 - ours) as i64);
        }
        burst.sync = pong.sync.or(burst.sync);
        burst.exchanges.push(x);
    }
    Ok(burst)
}

/// Answer ping `seq`, which arrived when our clock read `rx_ns`.
pub fn pong(ctrl: &mut TcpStream, seq: u32, rx_ns: u64) -> Result<()> {
    let sync = sync_state();
    let tx_ns = monotonic_ns();
    let unix_ns = unix_now_ns();
    write_msg(
        ctrl,
        &ServerMsg::from(ClockPong {
            seq,
            rx_ns,
            tx_ns,
            unix_ns,
            sync,
        }),
    )?;
    Ok(())
}
