//! What a run from many agents adds to the result (`thrum run --from`):
//! each agent's own summary, its figures in each interval, the fleet's
//! timing, and each clock's offset from the controller's. Data only, as
//! the rest of the result; the merge that fills them is `fleet`'s.

use serde::{Deserialize, Serialize};

use super::{Figures, Summary};
use crate::stats::latency::LatencySummary;

/// One agent's run, with the summary it would have alone.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ClientSummary {
    /// The agent as given to `--from` (HOST[:PORT]).
    pub host: String,
    /// When its workers started, seconds after the fleet's start instant,
    /// on the controller's clock (its offset applied); null when it never
    /// started.
    pub start_s: Option<f64>,
    /// The agent's run toward the target as a single run's summary: its
    /// figures over its own measurement window, its latency, both ends'
    /// CPU, its warnings and its error (an agent that died or stalled:
    /// what it sent before, and why it ended).
    #[serde(flatten)]
    pub summary: Box<Summary>,
}

/// One agent's figures in one interval, on the controller's clock.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ClientInterval {
    pub host: String,
    /// The agent's interval, seconds after the fleet's start instant.
    pub start_s: f64,
    pub end_s: f64,
    pub sum: Figures,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ns: Option<LatencySummary>,
}

/// How a run from many agents was set up and started.
#[derive(Clone, Debug, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FleetTiming {
    /// Agents asked for (`--from`), and those that ran to their end.
    pub agents: u32,
    pub completed: u32,
    /// From the controller's first connection to the last agent's ready
    /// (its flows toward the target connected), seconds.
    pub setup_s: f64,
    /// From the last ready to the start instant: the clock exchanges and
    /// the margin that lets the start reach every agent, seconds.
    pub barrier_s: f64,
    /// The latest agent's start less the earliest's, seconds, on the
    /// controller's clock: each start is a reading of the agent's clock
    /// mapped with its offset, so this is known to within the two
    /// agents' `clock[].error_ns`.
    pub start_skew_s: Option<f64>,
    /// The latest start after the start instant, seconds (negative: before).
    pub start_late_s: Option<f64>,
    /// The controller's own cost: the most threads it ran (one per agent
    /// and one for the target's clock, beside its own), and its peak
    /// resident memory, KiB (VmHWM).
    pub controller_threads: u32,
    pub controller_max_rss_kb: u64,
}

/// One host's clock against the controller's CLOCK_MONOTONIC, from
/// timestamped exchanges before the run and after it (docs/fleet.md,
/// "Clocks"). Offsets are the host's reading less the controller's.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ClockOffset {
    /// The host as given (`--from`, or `-H` for the target).
    pub host: String,
    #[schemars(extend("enum" = ["agent", "target"]))]
    pub role: String,
    /// How the offset was found: `exchanges_monotonic` (the fastest third
    /// of a burst of pings over the control connection, CLOCK_MONOTONIC
    /// on both ends).
    pub method: String,
    /// Before the run, ns.
    pub offset_ns: i64,
    /// The largest error of `offset_ns`, ns: the mean of the kept
    /// exchanges' half round trips, each less the host's own turnaround.
    pub error_ns: u64,
    /// After the run, ns, and its error; null when the host did not
    /// answer after it.
    pub offset_after_ns: Option<i64>,
    pub error_after_ns: Option<u64>,
    /// The host's clock rate against the controller's, parts per million
    /// (the offset's change from before to after), and its bound.
    pub drift_ppm: Option<f64>,
    pub drift_error_ppm: Option<f64>,
    /// The fastest exchange's round trip less the host's turnaround, ns.
    pub min_rtt_ns: u64,
    /// Exchanges made before the run, and the fastest third kept.
    pub exchanges: u32,
    pub kept: u32,
    /// The host's CLOCK_REALTIME less the controller's, ns (wall clocks:
    /// a label, they may step), from the fastest exchange.
    pub realtime_offset_ns: Option<i64>,
    /// The host's kernel on its wall clock's synchronisation (adjtimex):
    /// its estimated and largest error, µs.
    pub sync: Option<crate::clock::SyncState>,
}
