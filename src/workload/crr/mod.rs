//! One connection per transaction: tcp_crr (connect, request, response, close)
//! and tcp_cc (connect, close).
//!
//! The client opens each connection (blocking when the worker runs the
//! blocking driver, one flow; non-blocking otherwise), presents the session
//! token (with the request, in one `send`), and times the whole cycle from
//! `connect` to the response's last byte (crr) or to the server's close (cc). The server
//! closes first, right after answering, and the client closes on reading EOF:
//! TIME_WAIT then lands on the server, which does not run out of ephemeral
//! ports the way a client opening thousands of connections per second would.
//! With `--close rst` the client instead aborts (SO_LINGER 0) as soon as it
//! has the response (crr) or the server's FIN (cc): its reset also ends the
//! server's half-closed socket, so no TIME_WAIT is left anywhere.
//!
//! With `--rate` the client is open-loop (see [`crate::workload::open_loop`]):
//! each scheduled transaction is a new connection, opened when its intended
//! start comes, and its response time (`latency_ns`) runs from that intended
//! start to the response's last byte (crr) or the server's close (cc); the
//! service time runs from `connect`. A flow has one connection open at a
//! time, as wrk2 has one request per connection: transactions that come due
//! while it is busy stay owed and go out back to back as soon as it is
//! free, still timed from their intended starts, so a stalled server is
//! charged for every one (more flows, `-F`, give more connections at once).
//!
//! On the server, each worker accepts from the session's shared listener,
//! one connection per wake-up, answers at once when the request is already
//! in, and keeps a small table of the connections still in progress. A
//! session of one flow has one server worker, which runs the blocking driver
//! like the client: it blocks in `accept` (netserver's calls: accept, recv,
//! send, close) and polls only while some connection has yet to present its
//! request.
//!
//! Under the io_uring completion driver (`--driver uring`) both ends make
//! the same exchanges as ring operations ([`crate::io::Completions`]): the
//! client queues connect, request and the response's receive as one linked
//! chain (tcp_cc: the FIN's receive and the close too) and, once answered,
//! a receive of the server's FIN with the close hard-linked behind it (or,
//! with `--close rst`, the close alone), then opens the next connection at
//! once; the server keeps an accept queued on the listener, receives each
//! token and request into provided buffers, and sends the response with
//! the close hard-linked behind it (a response larger than the server's
//! buffer goes in pieces, and the close follows the last one's completion).
//! No request is ever left on a socket that is closed: an overdue token's
//! receive is cancelled first.

//!
//! The files: this one holds what both ends share (the session token, the
//! mode); `client` is the client's state machine under a readiness driver
//! (blocking or epoll) and `client/uring` the same client as ring
//! operations; `server` and `server/uring` likewise for the server. An
//! open-loop client runs on [`super::open_loop::OpenLoop`].

use std::io;

use crate::io::{Completions, Driver};

mod client;
mod server;
#[cfg(test)]
mod tests;

pub use client::ConnectClient;
pub use server::ConnectServer;

/// Bytes of the session token every data connection presents first.
pub const TOKEN_LEN: usize = 16;
/// A data connection that has not presented the whole token within this is closed.
pub const TOKEN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnectMode {
    /// Connect, request, response, close.
    Crr,
    /// Connect, close.
    Cc,
}

/// The largest provided buffer a connection test asks for; larger messages
/// take several receives.
const MAX_RECV_BUFFER: usize = 64 << 10;

/// The completion side of a driver that was one when the flow started.
fn ring(driver: &mut dyn Driver) -> io::Result<&mut dyn Completions> {
    driver
        .completions()
        .ok_or_else(|| io::Error::other("the completion driver went away"))
}
