//! The barrier: when the agents start. Every agent connects its flows
//! toward the target and says it is ready; the controller then names one
//! instant on its own clock, a margin ahead so that the word reaches every
//! agent before it, and tells each agent that instant on the agent's own
//! clock (its offset applied). Pure functions of the clocks and the
//! target's limits, tested on their own.
//!
//! The target starts the first agent's wait for `start` when it accepts
//! that agent's spec, and ends the session after its start timeout
//! (stated in its hello): every agent must be ready, and the instant
//! reached, before that. [`ready_wait`] is what is left for the rest.

use std::time::Duration;

use crate::stats::offset::ClockMap;

/// The least margin between the controller's choice of the instant and
/// the instant: the start message's trip and its reading on a busy host.
pub const MIN_MARGIN: Duration = Duration::from_millis(100);

/// How long the last agents may take to be ready after the first, when
/// the target does not state its start timeout.
pub const DEFAULT_READY_WAIT: Duration = Duration::from_millis(3500);

/// How long to wait for the rest of the agents once one is ready: the
/// target's start timeout for a session of `flows` (its hello's
/// `start_timeout_ns` plus `start_timeout_per_flow_ns` per flow, the
/// agent's own connecting included) less the margin and a second for the
/// start to cross; at least a second.
pub fn ready_wait(start_timeout_ns: Option<(u64, u64)>, flows: u32) -> Duration {
    let Some((base, per_flow)) = start_timeout_ns.filter(|t| t.0 > 0) else {
        return DEFAULT_READY_WAIT;
    };
    let total = Duration::from_nanos(base.saturating_add(per_flow.saturating_mul(flows.into())));
    total
        .saturating_sub(MIN_MARGIN + Duration::from_secs(1))
        .max(Duration::from_secs(1))
}

/// The margin for agents whose fastest round trips (less their
/// turnaround) are `paths_ns`: four of the slowest, at least
/// [`MIN_MARGIN`].
pub fn margin(paths_ns: &[u64]) -> Duration {
    let slowest = paths_ns.iter().copied().max().unwrap_or(0);
    Duration::from_nanos(slowest.saturating_mul(4)).max(MIN_MARGIN)
}

/// The instant `at_ns` of the controller's clock on an agent's.
pub fn on_agent(clock: &ClockMap, at_ns: u64) -> u64 {
    clock.to_peer(at_ns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::offset::Estimate;

    #[test]
    fn the_wait_fits_in_the_targets_start_timeout() {
        // thrum's default: 5 s and 1 ms a flow; 4 flows.
        let w = ready_wait(Some((5_000_000_000, 1_000_000)), 4);
        assert_eq!(w, Duration::from_millis(3904));
        assert_eq!(ready_wait(None, 4), DEFAULT_READY_WAIT);
        assert_eq!(ready_wait(Some((0, 0)), 4), DEFAULT_READY_WAIT);
        assert_eq!(
            ready_wait(Some((500_000_000, 0)), 1),
            Duration::from_secs(1)
        );
    }

    #[test]
    fn the_margin_covers_the_slowest_path() {
        assert_eq!(margin(&[]), MIN_MARGIN);
        assert_eq!(margin(&[60_000, 90_000]), MIN_MARGIN);
        assert_eq!(margin(&[80_000_000]), Duration::from_millis(320));
    }

    /// An agent 5 s ahead starts at the controller's instant plus 5 s on
    /// its own clock.
    #[test]
    fn the_instant_is_translated_with_the_offset() {
        let c = ClockMap {
            before: Estimate {
                offset_ns: 5_000_000_000,
                error_ns: 30_000,
                at_ns: 1_000_000_000,
                min_path_ns: 60_000,
                kept: 8,
                exchanges: 24,
            },
            after: None,
        };
        assert_eq!(on_agent(&c, 2_000_000_000), 7_000_000_000);
    }
}
