//! UDP tests: udp_stream and udp_rr, which count every datagram and never stall.
//!
//! `stream` is udp_stream's sender and receiver, `rr` udp_rr's client and
//! `rr_server` its server, `matching` how a udp_rr response finds its
//! transaction, `slab` their send buffers under io_uring, and `header`
//! the few bytes at the front of a datagram that both tests use to number
//! it (and udp_stream's to stamp it with its send time; udp_rr's
//! `--one-way` stamps follow it: `super::one_way`), `jitter` the
//! receiver's RFC 3550 interarrival jitter, and `zerocopy` the sender's
//! ring of batches for `--zerocopy`.

mod header;
pub mod jitter;
mod matching;
mod rr;
mod rr_server;
mod slab;
mod stream;
pub mod zerocopy;

use std::io;

pub use header::{RR_SEQ, STREAM_HEADER};
pub use matching::matching_note;
pub use rr::UdpRrClient;
pub use rr_server::UdpRrServer;
pub use stream::{
    Arrival, Coalesce, MAX_NAP, SeqTracker, UdpStreamReceiver, UdpStreamSender, gso_segments,
};

/// A connected socket whose peer vanished answers with ECONNREFUSED (ICMP port unreachable).
fn refused(e: &io::Error) -> io::Error {
    if e.raw_os_error() == Some(libc::ECONNREFUSED) {
        io::Error::new(
            e.kind(),
            "the peer's UDP port is closed (ICMP port unreachable)",
        )
    } else {
        io::Error::new(e.kind(), e.to_string())
    }
}
