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
    /// largest of the intervals' bounds (`offsets`, `intervals[].owd_ns`),
    /// each the offset's bound where its interval was corrected plus how
    /// far the offset moves over an interval; 0 where both ends read one
    /// kernel's clock (`method` `same_kernel`).
    pub error_ns: u64,
    /// The server's CLOCK_MONOTONIC less the client's, ns, measured before
    /// the run: what the flows' stamps were first corrected by (each
    /// interval then by the offset followed to its moment).
    pub offset_ns: i64,
    /// The offset measured after the run, ns; null where it could not be.
    pub offset_after_ns: Option<i64>,
    /// The server's clock rate against the client's, parts per million
    /// (from the two offsets); null without the second.
    pub drift_ppm: Option<f64>,
    /// How the offset was found: `exchanges_monotonic` (the fastest third
    /// of a burst of clock pings on the control connection before and
    /// after the run, whose bound is half the round trip less the server's
    /// turnaround, so a queue on the path widens it, and the line between
    /// them), `exchanges_refreshed` (those, and between them the estimates
    /// of the intervals whose fastest exchanges crossed an idle path:
    /// `offsets`), or `same_kernel` (both ends on one kernel, the same
    /// boot: one CLOCK_MONOTONIC, the offset exact from their time
    /// namespaces').
    #[schemars(extend("enum" = ["exchanges_monotonic", "exchanges_refreshed", "same_kernel"]))]
    pub method: String,
    /// Each interval's own estimate of the offset, from its fastest
    /// exchanges (every transaction is one), in interval order.
    #[serde(default)]
    pub offsets: Vec<IntervalOffset>,
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

/// One interval's estimate of the server's clock offset from its eight
/// fastest transactions (round trip less the server's turnaround).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IntervalOffset {
    /// The interval (`intervals[].index`).
    pub index: u32,
    /// Server − client, ns, and its bound: the mean half path of the
    /// exchanges kept.
    pub offset_ns: i64,
    pub error_ns: u64,
    /// The fastest exchange's round trip less the server's turnaround, ns.
    pub min_path_ns: u64,
    /// Whether it moved the correction: its fastest path within the
    /// tolerance of the run's fastest (half of it, at least 10 µs); a
    /// window slower than that crossed a queue, which biases it toward
    /// that way. Always false with `same_kernel` (the exact offset corrects).
    pub used: bool,
    /// `same_kernel`: whether the exact offset lies within `error_ns` of
    /// `offset_ns` (it must); null otherwise.
    pub holds_exact: Option<bool>,
}

/// `intervals[].owd_ns`: one interval's one-way delays (`--one-way`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IntervalOneWay {
    /// The median way up and way down, ns.
    pub up_p50: u64,
    pub down_p50: u64,
    /// Transactions in the interval.
    pub count: u64,
    /// The offset the interval was corrected by, ns, and its bound there
    /// plus how far the offset moves over an interval.
    pub offset_ns: i64,
    pub error_ns: u64,
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
    /// The bound on each growth from the clock, ns: twice the largest
    /// interval's bound (`owd_ns.error_ns`), each phase's figures being
    /// within it of the truth; 0 on one kernel.
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
