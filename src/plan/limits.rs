//! The hard limits of a plan, whoever sends it: the most flows, threads,
//! bytes and time thrum will run at all. `TestPlan::validate` holds a plan
//! to them on both ends; a server states its own, tighter bounds in its
//! hello (`control::limits`).

pub const MAX_FLOWS: u32 = 100_000;
pub const MAX_THREADS: u32 = 1024;
/// The highest `--rate` for request/response tests, transactions/s in all.
pub const MAX_OFFERED_PER_S: u64 = 100_000_000;
/// The largest `--max-inflight`.
pub const MAX_INFLIGHT: u32 = 1 << 16;
pub const MAX_BURST: u32 = 4096;
/// `--delay`: 1 us, the engine's timers' grain, to 10 s, past which a
/// transaction or two per window measures nothing.
pub const MIN_DELAY_NS: u64 = 1_000;
pub const MAX_DELAY_NS: u64 = 10_000_000_000;
/// --busy-poll: a second of spinning per receive is already absurd.
pub const MAX_BUSY_POLL_US: u32 = 1_000_000;
pub const MAX_RR_BYTES: u64 = 64 << 20;
pub const MAX_IO_BYTES: u64 = 64 << 20;
pub const MAX_BUFFER_BYTES: u64 = 1 << 30;
/// The largest UDP payload over IPv4 (65535 - 20 - 8).
pub const MAX_DATAGRAM_BYTES: u64 = 65_507;
pub const MIN_INTERVAL_NS: u64 = 10_000_000;
pub const MAX_DURATION_NS: u64 = 24 * 3600 * 1_000_000_000;
pub const MIN_DURATION_NS: u64 = 1_000_000;
pub const MAX_PERCENTILES: usize = 32;
/// `--one-way`: the fewest bytes of a udp_rr or tcp_rr request (8 front
/// bytes, udp_rr's sequence number, and the send time) and response (the
/// front, the send time echoed, the server's arrival and departure
/// times): `workload::one_way`.
pub const ONE_WAY_REQUEST_BYTES: u64 = 16;
pub const ONE_WAY_RESPONSE_BYTES: u64 = 32;

/// A congestion control's name as the kernel keeps it (`--cc`, and what
/// a peer reports its sockets used): 1 to 15 (TCP_CA_NAME_MAX less its
/// NUL) letters, digits or '_'.
pub fn is_congestion_name(name: &str) -> bool {
    (1..=15).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}
