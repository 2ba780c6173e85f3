//! The schedules: which streams run in each step, and where each stream goes.
//!
//! The ramp doubles the streams from one up to the maximum (1, 2, 4 … max,
//! the last step being the maximum even when it is not a power of two), as
//! runemomniaggdemo.sh's pauses do; stream k goes to server k mod n, so load
//! spreads round-robin over the load generators, and streams keep running
//! from the step that added them to the end of the ramp. The serial schedule
//! is that script's `run_cmd_serial` for the sync test: one stream to each
//! server in turn, each running for one step only.

use std::ops::Range;

/// One step: the streams running in it, and those it starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepPlan {
    pub running: Range<u32>,
    pub added: Range<u32>,
}

/// Streams running in each step of the doubling ramp.
pub fn steps(max_streams: u32) -> Vec<u32> {
    let mut v = Vec::new();
    let mut n = 1u32;
    while n < max_streams {
        v.push(n);
        n = n.saturating_mul(2);
    }
    v.push(max_streams.max(1));
    v
}

/// The doubling ramp up to `max_streams`.
pub fn doubling(max_streams: u32) -> Vec<StepPlan> {
    let mut prev = 0;
    steps(max_streams)
        .into_iter()
        .map(|n| {
            let p = StepPlan {
                running: 0..n,
                added: prev..n,
            };
            prev = n;
            p
        })
        .collect()
}

/// One stream to each of `servers` in turn.
pub fn serial(servers: usize) -> Vec<StepPlan> {
    (0..servers.max(1) as u32)
        .map(|i| StepPlan {
            running: i..i + 1,
            added: i..i + 1,
        })
        .collect()
}

/// The last step in which stream `k` runs.
pub fn last_step(plan: &[StepPlan], k: u32) -> usize {
    plan.iter()
        .rposition(|s| s.running.contains(&k))
        .unwrap_or(0)
}

/// The server of stream `k` among `servers`, round-robin.
pub fn server_of(k: u32, servers: usize) -> usize {
    k as usize % servers.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubling_up_to_the_maximum() {
        assert_eq!(steps(1), vec![1]);
        assert_eq!(steps(4), vec![1, 2, 4]);
        assert_eq!(steps(6), vec![1, 2, 4, 6]);
        assert_eq!(steps(8), vec![1, 2, 4, 8]);
        assert_eq!(steps(9), vec![1, 2, 4, 8, 9]);
    }

    #[test]
    fn streams_start_once_and_run_to_the_end() {
        let p = doubling(6);
        let added: Vec<Range<u32>> = p.iter().map(|s| s.added.clone()).collect();
        assert_eq!(added, vec![0..1, 1..2, 2..4, 4..6]);
        assert_eq!(p[3].running, 0..6);
        assert!((0..6).all(|k| last_step(&p, k) == 3));
        assert_eq!(
            (0..5).map(|k| server_of(k, 2)).collect::<Vec<_>>(),
            vec![0, 1, 0, 1, 0]
        );
    }

    #[test]
    fn serial_runs_one_stream_per_server_per_step() {
        let p = serial(3);
        assert_eq!(p.len(), 3);
        assert_eq!(p[1].running, 1..2);
        assert_eq!(last_step(&p, 1), 1);
        assert_eq!(server_of(2, 3), 2);
    }
}
