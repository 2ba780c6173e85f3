//! What `--one-way` adds to a udp_rr or tcp_rr result: the way up and
//! the way down apart, with the clock offset they were corrected by and
//! its error bound beside them. Data only; the stamps are `workload::one_way`'s
//! and the figures `analysis::one_way`'s.

use serde::{Deserialize, Serialize};

use crate::stats::latency::LatencySummary;

/// `summary.owd_ns`: one-way delays, ns, over the measurement window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OneWaySummary {
    /// Client to server: the server's arrival stamp less the request's send
    /// stamp, corrected by the offset.
    pub up: LatencySummary,
    /// Server to client: the response's arrival less the server's departure
    /// stamp, corrected by the offset.
    pub down: LatencySummary,
    /// The largest error of every figure in `up` and `down`, ns (one way
    /// may read up to this much more and the other as much less): the
    /// offset's bound before or after the run, whichever is larger, plus
    /// how far the offset moved between them; 0 where both ends read one
    /// kernel's clock (`method` `same_kernel`).
    pub error_ns: u64,
    /// The server's CLOCK_MONOTONIC less the client's, ns, measured before
    /// the run: what the stamps were corrected by.
    pub offset_ns: i64,
    /// The offset measured after the run, ns; null where it could not be.
    pub offset_after_ns: Option<i64>,
    /// The server's clock rate against the client's, parts per million
    /// (from the two offsets); null without the second.
    pub drift_ppm: Option<f64>,
    /// How the offset was found: `exchanges_monotonic` (the fastest third
    /// of a burst of clock pings on the control connection, whose bound is
    /// half the round trip less the server's turnaround, so a queue on
    /// the path widens it), or `same_kernel` (both ends on one kernel, the
    /// same boot: one CLOCK_MONOTONIC, the offset exact from their time
    /// namespaces').
    #[schemars(extend("enum" = ["exchanges_monotonic", "same_kernel"]))]
    pub method: String,
    /// Where the stamps were read: `user_space` (CLOCK_MONOTONIC read by
    /// each end beside its send and receive calls, so each way includes
    /// the time in both stacks).
    #[schemars(extend("enum" = ["user_space"]))]
    pub stamps: String,
    /// Transactions whose way up or down came out below zero after the
    /// correction (the offset's error is more than that way's delay):
    /// recorded as 0, never printed as a negative delay.
    pub clamped: u64,
    /// The request and response sizes the stamps travelled in (`--one-way`
    /// raises `-r` to 16 and 32 bytes at least).
    pub request_bytes: u64,
    pub response_bytes: u64,
}

/// A phase of a mix with `--one-way`: its probes' ways up and down, ns
/// (every probe that carried the stamps, merged; in a probe's own
/// `phases`, that probe's), each within the run's `owd_ns.error_ns`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PhaseOneWay {
    pub up: LatencySummary,
    pub down: LatencySummary,
}

/// `summary.queue_direction`: which way the load's queue is, from each
/// way's loaded p50 less its idle p50.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QueueDirection {
    /// The ways whose growth is more than `floor_ns` + `error_ns`: `up`
    /// (client to server: the upload's queue), `down`, `both` or `neither`.
    #[schemars(extend("enum" = ["up", "down", "both", "neither"]))]
    pub direction: String,
    /// The way up's loaded p50 less its idle p50, ns.
    pub up_ns: i64,
    /// The way down's loaded p50 less its idle p50, ns.
    pub down_ns: i64,
    /// The bound on each growth from the clock, ns: both phases are
    /// corrected by one offset, so its error cancels in the difference
    /// and only the offset's movement over the run remains (the two
    /// estimates' bounds plus the distance between them; 0 on one kernel).
    pub error_ns: u64,
    /// The least growth named a queue, ns: 1 ms, or a tenth of the idle
    /// round trip (idle p50 up plus down) on a longer path.
    pub floor_ns: u64,
    /// The probes measured one way (their parts' names) ...
    pub probes: Vec<String>,
    /// ... and those whose test carries no stamps, not measured one way.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_measured: Vec<String>,
}
