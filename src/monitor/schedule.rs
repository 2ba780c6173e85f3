//! When each probe runs. Every probe has its own period (`every`); the
//! first runs are spread over the first period, in the order of the file,
//! and each next start is one period after the last start with ±10 %
//! jitter, so that probes that share a period drift apart instead of
//! staying in step. Two probes to one host never run at once: one that
//! comes due while another probe of its host runs waits for it, and the
//! earliest due goes first. A run that outlasts its period starts its next
//! at once (after the wait for its host). A probe whose runs fail keeps its
//! period: a target that is down is still probed, and no other probe
//! waits on it beyond its own run. A reload (SIGHUP) swaps the probe
//! set without a restart: a probe of the same series keeps its counters
//! and its schedule, a new one starts within its period, a removed one
//! is no longer started (a run it has going finishes).

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
    id: u64,
    outcome: Outcome,
}

/// One probe as the scheduler keeps it.
struct Entry {
    /// Never reused, so that a run that ends after a reload finds its
    /// probe, or finds it gone.
    id: u64,
    probe: Probe,
    due: Instant,
    /// When its running run started; none while it waits.
    started: Option<Instant>,
}

/// Whether two probes are the same series (name, target, test and the
/// probe's own labels: the labels of their metrics), so that a reload
/// keeps its counters and its place in the schedule while taking the new
/// settings. Counters under labels that changed would be a new series
/// that starts high, so a change of labels starts them again from 0.
pub fn same_series(a: &Probe, b: &Probe) -> bool {
    a.name == b.name && a.target == b.target && a.test == b.test && a.labels == b.labels
}

/// The probes in force, `live[i]` shown by `state[i]`, and the ones a
/// reload removed while they ran (waited for on a stop, their outcome
/// logged but shown nowhere).
struct Probes {
    live: Vec<Entry>,
    retired: Vec<Entry>,
    next_id: u64,
}

impl Probes {
    fn new(probes: &[Probe], start: Instant, jitter: &mut Jitter) -> Probes {
        let n = probes.len();
        let live = probes
            .iter()
            .enumerate()
            .map(|(i, p)| Entry {
                id: i as u64,
                probe: p.clone(),
                due: start + first_offset(i, n, p.every, jitter),
                started: None,
            })
            .collect();
        Probes {
            live,
            retired: Vec::new(),
            next_id: n as u64,
        }
    }

    fn running(&self) -> usize {
        self.live
            .iter()
            .chain(&self.retired)
            .filter(|e| e.started.is_some())
            .count()
    }

    /// Put `new` in force (a reloaded file). A probe of the same series
    /// keeps its state (counters, last run) and its next start, unless
    /// its new period brings that nearer; a new one starts within its
    /// period, the new ones spread over it as at start-up; a removed one
    /// loses its series, and finishes its run if one is going.
    fn swap(
        &mut self,
        new: Vec<Probe>,
        state: &mut Vec<ProbeState>,
        now: Instant,
        jitter: &mut Jitter,
    ) {
        let mut old: Vec<(Entry, ProbeState)> = self.live.drain(..).zip(state.drain(..)).collect();
        let added = new
            .iter()
            .filter(|p| !old.iter().any(|(e, _)| same_series(&e.probe, p)))
            .count();
        let mut a = 0;
        for p in new {
            match old.iter().position(|(e, _)| same_series(&e.probe, &p)) {
                Some(at) => {
                    let (mut e, s) = old.remove(at);
                    if p.every < e.probe.every {
                        e.due = e.due.min(now + jitter.jittered(p.every));
                    }
                    e.probe = p;
                    self.live.push(e);
                    state.push(s);
                }
                None => {
                    state.push(ProbeState::new(&p));
                    self.live.push(Entry {
                        id: self.next_id,
                        due: now + first_offset(a, added, p.every, jitter),
                        probe: p,
                        started: None,
                    });
                    self.next_id += 1;
                    a += 1;
                }
            }
        }
        self.retired.extend(
            old.into_iter()
                .map(|(e, _)| e)
                .filter(|e| e.started.is_some()),
        );
    }
}

/// Run the probes until `stop` is set, then wait for the running ones
/// (at most [`STOP_GRACE`] and a second) and return. Each run's outcome
/// goes into `state` (one entry per probe in force, in the file's order)
/// and to `log`. `reload` is asked between two turns of the loop (at least
/// every 100 ms) for a new list of probes, which is put in force at once.
pub fn run(
    probes: &[Probe],
    ctx: &Context,
    state: &Arc<Mutex<Vec<ProbeState>>>,
    stop: &Arc<AtomicBool>,
    log: &dyn Fn(&Probe, &Outcome),
    reload: &mut dyn FnMut() -> Option<Vec<Probe>>,
) {
    let mut jitter = Jitter::new();
    let mut all = Probes::new(probes, Instant::now(), &mut jitter);
    let mut busy: BTreeSet<String> = BTreeSet::new();
    let (tx, rx) = mpsc::channel::<Done>();
    loop {
        let stopping = stop.load(Ordering::Relaxed);
        if stopping && all.running() == 0 {
            return;
        }
        if let Some(new) = if stopping { None } else { reload() } {
            let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
            all.swap(new, &mut s, Instant::now(), &mut jitter);
        }
        let now = Instant::now();
        if !stopping {
            let mut ready: Vec<&mut Entry> = all
                .live
                .iter_mut()
                .filter(|e| e.started.is_none() && e.due <= now)
                .collect();
            ready.sort_by_key(|e| e.due);
            for e in ready {
                if !busy.insert(e.probe.host().to_string()) {
                    continue;
                }
                e.started = Some(Instant::now());
                let id = e.id;
                let (p, ctx, tx, stop) = (e.probe.clone(), ctx.clone(), tx.clone(), stop.clone());
                std::thread::Builder::new()
                    .name(format!("probe {}", id + 1))
                    .spawn(move || {
                        let outcome = probe::run(&p, &ctx, &stop, STOP_GRACE);
                        let _ = tx.send(Done { id, outcome });
                    })
                    .expect("spawning a probe's thread");
            }
        }
        let next = all
            .live
            .iter()
            .filter(|e| e.started.is_none())
            .map(|e| e.due)
            .min()
            .map_or(TICK, |d| d.saturating_duration_since(Instant::now()))
            .min(TICK);
        let Ok(done) = rx.recv_timeout(next) else {
            continue;
        };
        if let Some(i) = all.live.iter().position(|e| e.id == done.id) {
            let e = &mut all.live[i];
            let began = e.started.take().expect("a running probe");
            busy.remove(e.probe.host());
            e.due = (began + jitter.jittered(e.probe.every)).max(Instant::now());
            log(&e.probe, &done.outcome);
            state.lock().unwrap_or_else(|e| e.into_inner())[i]
                .record(done.outcome, SystemTime::now());
        } else if let Some(j) = all.retired.iter().position(|e| e.id == done.id) {
            let e = all.retired.remove(j);
            busy.remove(e.probe.host());
            log(&e.probe, &done.outcome);
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

    fn probes(text: &str) -> Vec<Probe> {
        crate::monitor::config::parse(text).unwrap().probes
    }

    #[test]
    fn a_swap_keeps_the_same_series_and_retires_the_running_removed() {
        let mut j = Jitter::new();
        let t0 = Instant::now();
        let old = probes(
            "[[probe]]\nname = \"a\"\ntarget = \"h1\"\ntest = \"tcp_rr\"\n\
             [[probe]]\nname = \"b\"\ntarget = \"h2\"\ntest = \"ping\"\n\
             [[probe]]\nname = \"c\"\ntarget = \"h3\"\ntest = \"ping\"\n",
        );
        let mut all = Probes::new(&old, t0, &mut j);
        let mut state: Vec<ProbeState> = old.iter().map(ProbeState::new).collect();
        state[0].runs = 5;
        state[1].runs = 7;
        // b is running when the file changes; c waits.
        all.live[1].started = Some(t0);
        let a_due = all.live[0].due;
        // a gets new args and a longer period; b and c go; d (a target
        // that changed is a new series) comes.
        let new = probes(
            "[[probe]]\nname = \"d\"\ntarget = \"h4\"\ntest = \"tcp_rr\"\nevery = \"10s\"\nduration = \"1s\"\n\
             [[probe]]\nname = \"a\"\ntarget = \"h1\"\ntest = \"tcp_rr\"\nargs = [\"-r\", \"1,1\"]\nevery = \"120s\"\n",
        );
        let now = t0 + Duration::from_secs(1);
        all.swap(new, &mut state, now, &mut j);
        let names: Vec<&str> = all.live.iter().map(|e| e.probe.name.as_str()).collect();
        assert_eq!(names, ["d", "a"]);
        assert_eq!(
            state.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
            names
        );
        assert_eq!((state[0].runs, state[1].runs), (0, 5));
        assert_eq!(all.live[1].id, 0);
        assert_eq!(all.live[1].due, a_due);
        assert_eq!(all.live[1].probe.args, ["-r", "1,1"]);
        assert_eq!(all.live[0].id, 3);
        assert!(all.live[0].due >= now && all.live[0].due <= now + Duration::from_secs(10));
        // b's run goes on, and is waited for; c is gone.
        assert_eq!(all.retired.len(), 1);
        assert_eq!(all.retired[0].probe.name, "b");
        assert_eq!(all.running(), 1);

        // A shorter period brings a's next start nearer.
        let shorter = probes(
            "[[probe]]\nname = \"a\"\ntarget = \"h1\"\ntest = \"tcp_rr\"\nevery = \"2s\"\nduration = \"1s\"\n",
        );
        all.swap(shorter, &mut state, now, &mut j);
        assert_eq!(state.len(), 1);
        assert_eq!(state[0].runs, 5);
        assert!(all.live[0].due <= now + Duration::from_millis(2200));
    }
}
