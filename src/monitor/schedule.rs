//! When each probe runs. Every probe has its own period (`every`); the
//! first runs are spread over the first period, in the order of the file,
//! and each next start is one period after the last start with ±10 %
//! jitter, so that probes that share a period drift apart instead of
//! staying in step. Two probes to one host never run at once: one that
//! comes due while another probe of its host runs waits for it, and the
//! earliest due goes first. A run that outlasts its period starts its next
//! at once (after the wait for its host). A probe whose runs fail keeps its
//! period: a target that is down is still probed, and no other probe
//! waits on it beyond its own run.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use super::config::Probe;
use super::metrics::ProbeState;
use super::probe::{self, Context, Outcome};

/// The share of a period the next start moves by, either way.
pub const JITTER: f64 = 0.1;
/// How long the monitor lets its running probes finish after a stop
/// before it ends them (SIGTERM, then SIGKILL a second later), so that a
/// SIGTERM ends it within 10 s even when a probe measures for a minute.
pub const STOP_GRACE: Duration = Duration::from_secs(7);
/// The longest the loop sleeps before it looks at the stop flag again.
const TICK: Duration = Duration::from_millis(100);

/// A small random source (xorshift64*), seeded from the OS: jitter needs
/// no more.
pub struct Jitter(u64);

impl Jitter {
    pub fn new() -> Jitter {
        Jitter(getrandom::u64().unwrap_or(0x9e37_79b9_7f4a_7c15) | 1)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// `period` moved by up to ±[`JITTER`] of itself.
    pub fn jittered(&mut self, period: Duration) -> Duration {
        period.mul_f64(1.0 + JITTER * (2.0 * self.unit() - 1.0))
    }
}

impl Default for Jitter {
    fn default() -> Self {
        Jitter::new()
    }
}

/// The first start of probe `i` of `n`: its share of its own period, in
/// the file's order, moved by up to half a share.
pub fn first_offset(i: usize, n: usize, every: Duration, jitter: &mut Jitter) -> Duration {
    let share = 1.0 / n as f64;
    every.mul_f64((share * (i as f64 + 0.5 * jitter.unit())).min(1.0))
}

/// A finished run, as a probe's thread sends it back.
struct Done {
    index: usize,
    outcome: Outcome,
}

/// Run the probes until `stop` is set, then wait for the running ones
/// (at most [`STOP_GRACE`] and a second) and return. Each run's outcome
/// goes into `state` (one entry per probe, in order) and to `log`.
pub fn run(
    probes: &[Probe],
    ctx: &Context,
    state: &Arc<Mutex<Vec<ProbeState>>>,
    stop: &Arc<AtomicBool>,
    log: &dyn Fn(&Probe, &Outcome),
) {
    let mut jitter = Jitter::new();
    let start = Instant::now();
    let n = probes.len();
    let mut due: Vec<Instant> = probes
        .iter()
        .enumerate()
        .map(|(i, p)| start + first_offset(i, n, p.every, &mut jitter))
        .collect();
    let mut started: Vec<Option<Instant>> = vec![None; n];
    let mut busy: BTreeSet<String> = BTreeSet::new();
    let (tx, rx) = mpsc::channel::<Done>();
    loop {
        let stopping = stop.load(Ordering::Relaxed);
        let running = started.iter().filter(|s| s.is_some()).count();
        if stopping && running == 0 {
            return;
        }
        let now = Instant::now();
        if !stopping {
            let mut ready: Vec<usize> = (0..n)
                .filter(|&i| started[i].is_none() && due[i] <= now)
                .collect();
            ready.sort_by_key(|&i| due[i]);
            for i in ready {
                let p = &probes[i];
                if !busy.insert(p.host().to_string()) {
                    continue;
                }
                started[i] = Some(Instant::now());
                let (p, ctx, tx, stop) = (p.clone(), ctx.clone(), tx.clone(), stop.clone());
                std::thread::Builder::new()
                    .name(format!("probe {}", i + 1))
                    .spawn(move || {
                        let outcome = probe::run(&p, &ctx, &stop, STOP_GRACE);
                        let _ = tx.send(Done { index: i, outcome });
                    })
                    .expect("spawning a probe's thread");
            }
        }
        let next = (0..n)
            .filter(|&i| started[i].is_none())
            .map(|i| due[i])
            .min()
            .map_or(TICK, |d| d.saturating_duration_since(Instant::now()))
            .min(TICK);
        if let Ok(done) = rx.recv_timeout(next) {
            let i = done.index;
            let p = &probes[i];
            let began = started[i].take().expect("a running probe");
            busy.remove(p.host());
            due[i] = (began + jitter.jittered(p.every)).max(Instant::now());
            log(p, &done.outcome);
            state.lock().unwrap_or_else(|e| e.into_inner())[i]
                .record(done.outcome, SystemTime::now());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_within_ten_percent_and_spreads() {
        let mut j = Jitter::new();
        let every = Duration::from_secs(60);
        let (mut lo, mut hi) = (every, Duration::ZERO);
        for _ in 0..10_000 {
            let d = j.jittered(every);
            assert!(d >= every.mul_f64(0.9) && d <= every.mul_f64(1.1), "{d:?}");
            lo = lo.min(d);
            hi = hi.max(d);
        }
        // Ten thousand draws cover most of the ±6 s.
        assert!(
            lo < Duration::from_secs(55) && hi > Duration::from_secs(65),
            "{lo:?} {hi:?}"
        );
    }

    #[test]
    fn first_runs_are_spread_over_the_period_in_order() {
        let mut j = Jitter::new();
        let every = Duration::from_secs(60);
        let offsets: Vec<Duration> = (0..4).map(|i| first_offset(i, 4, every, &mut j)).collect();
        for (i, o) in offsets.iter().enumerate() {
            let lo = Duration::from_secs(15 * i as u64);
            assert!(
                *o >= lo && *o < lo + Duration::from_millis(7500),
                "{i}: {o:?}"
            );
        }
    }
}
