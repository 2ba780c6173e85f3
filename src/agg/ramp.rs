//! The ramp: how many streams run in each step and where each stream goes.
//!
//! Streams double from one up to the maximum (1, 2, 4 … max, the last step
//! being the maximum even when it is not a power of two), as
//! runemomniaggdemo.sh's pauses do; stream k goes to server k mod n, so load
//! spreads round-robin over the load generators. Streams keep running from
//! the step that added them to the end of the ramp.

/// Streams running in each step.
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

/// The step in which stream `k` (0-based) starts.
pub fn first_step(steps: &[u32], k: u32) -> usize {
    steps.iter().position(|&n| n > k).unwrap_or(steps.len())
}

/// The server of stream `k` among `servers`, round-robin.
pub fn server_of(k: u32, servers: usize) -> usize {
    k as usize % servers.max(1)
}

/// The streams that step `i` adds: `prev..steps[i]`.
pub fn added_in(steps: &[u32], i: usize) -> std::ops::Range<u32> {
    let prev = if i == 0 { 0 } else { steps[i - 1] };
    prev..steps[i]
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
    fn streams_start_once_and_go_round_robin() {
        let s = steps(6);
        assert_eq!(
            (0..6).map(|k| first_step(&s, k)).collect::<Vec<_>>(),
            vec![0, 1, 2, 2, 3, 3]
        );
        assert_eq!(added_in(&s, 3), 4..6);
        assert_eq!(
            (0..5).map(|k| server_of(k, 2)).collect::<Vec<_>>(),
            vec![0, 1, 0, 1, 0]
        );
    }
}
