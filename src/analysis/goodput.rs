//! Goodput over a stretch of the run between two ticks: each flow's bytes
//! as its receiver counted them, and Jain's fairness index over such
//! goodputs. A mix's parts, its phase table and its per-interval fairness
//! all take their figures from here, so they agree by construction.

use super::record::{Gathered, RemoteSample};
use crate::plan::Phase;

/// Two local sample indices: a stretch of the run between two ticks.
pub(crate) type Window = (usize, usize);

/// The loaded phase of a phased mix, when all its bounds were reached.
pub(crate) fn loaded_window(g: &Gathered) -> Option<Window> {
    match g.load_bounds[..] {
        [_, a, b, _, _] => Some((a as usize, b as usize)),
        _ => None,
    }
}

/// The measurement window: from the first tick of the measure phase to the last.
pub(crate) fn measure_window(g: &Gathered) -> Window {
    let first = g.local.iter().position(|l| l.phase == Phase::Measure);
    let last = g.local.iter().rposition(|l| l.phase == Phase::Measure);
    match (first, last) {
        // Sample k closes the interval (k-1, k] of its phase.
        (Some(a), Some(b)) => (a.saturating_sub(1), b),
        _ => (0, 0),
    }
}

/// The window's length on the client's clock, seconds (0 for an empty one).
pub(crate) fn window_s(g: &Gathered, (a, b): Window) -> f64 {
    match (g.local.get(a), g.local.get(b)) {
        (Some(x), Some(y)) if b > a => (y.at - x.at).as_secs_f64(),
        _ => 0.0,
    }
}

/// Bytes the receiving end of flow `f` took in over the window: the
/// server for what the client sent, the client for what the server sent.
pub(crate) fn received(g: &Gathered, f: usize, (a, b): Window, by_server: bool) -> u64 {
    if by_server {
        match (
            g.remote.get(a).and_then(Option::as_ref),
            g.remote.get(b).and_then(Option::as_ref),
        ) {
            (Some(x), Some(y)) => {
                let at = |s: &RemoteSample| s.counts.get(f).map_or(0, |c| c.bytes_received);
                at(y).saturating_sub(at(x))
            }
            _ => 0,
        }
    } else {
        let at = |k: usize| {
            g.local
                .get(k)
                .and_then(|l| l.counts.get(f))
                .map_or(0, |c| c.bytes_received)
        };
        at(b).saturating_sub(at(a))
    }
}

/// Each flow's goodput over the window, bits/s, as its receiver counted it.
pub(crate) fn flow_goodput(
    g: &Gathered,
    test: crate::plan::TestKind,
    flows: std::ops::Range<usize>,
    w: Window,
) -> Vec<f64> {
    let secs = window_s(g, w);
    let down = crate::plan::mix::direction(test) == "down";
    flows
        .map(|f| {
            let bytes = received(g, f, w, !down);
            if secs > 0.0 {
                bytes as f64 * 8.0 / secs
            } else {
                0.0
            }
        })
        .collect()
}

/// Jain's fairness index of `x`: 1 when all are equal, 1/n when one has all.
pub fn jain(x: &[f64]) -> Option<f64> {
    let sum: f64 = x.iter().sum();
    let sq: f64 = x.iter().map(|v| v * v).sum();
    (!x.is_empty() && sq > 0.0).then(|| sum * sum / (x.len() as f64 * sq))
}
