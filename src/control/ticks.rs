//! The server's clock for the client's ticks: when each tick was due here,
//! and the counters as they stood then.
//!
//! The control connection shares the data path. When the test's data fills
//! that path (udp_stream above the bottleneck's rate, through a tbf or a
//! full sender queue), the tick's segments are dropped with the data and
//! TCP's retransmission timer delivers them seconds late. A server that
//! sampled on receipt then counted whole seconds into the wrong interval
//! (per-second counts of 12 688, 0, 6 231 … where the link delivered a
//! steady 8 267) and moved the measurement window's edges. So the server
//! records its counters every few milliseconds while it waits, and a tick
//! that says when it was due (`Tick::due_ns`, the client's clock since its
//! first tick) is answered with the record taken at that moment here.
//!
//! The two clocks are tied once, before any data flows: the client starts
//! its clock when our `started` reaches it, so its time 0 is our engines'
//! start plus half the control connection's round trip as the kernel
//! measured it during the handshake. The tie never moves afterwards:
//! taken from the ticks themselves (the one that arrived soonest after it
//! was due), it moved by a retransmission timeout when a tick finally got
//! through quickly, and the interval across the move lost 40 % of its
//! count. An error in the tie only shifts every sample by the same amount.
//! A tick that arrives before its moment by our clock is sampled on
//! receipt, and so is an older client's tick that does not say when it
//! was due. A late tick therefore changes nothing but how late its sample
//! is reported.
//!
//! Except for a flow whose sender stopped at the tick or before it (every
//! flow at the window's end, a phased mix's bulk flows from the end of the
//! loaded phase on): it is counted up to the tick's arrival. All it sent
//! was sent before the tick, and what a deep buffer still held when the
//! tick was due (or an overloaded server still had to answer) belongs
//! before it; the tick queues behind that data, and the flow sends nothing
//! after it ([`TickClock::sample`], docs/design.md).

use std::collections::VecDeque;
use std::net::TcpStream;
use std::ops::Range;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::Result;

use super::deadline::read_msg_within;
use super::proto::{ClientMsg, FrameError, Tick};
use super::timeline::CONGESTED_SAMPLE_TIMEOUT;
use crate::plan::{LoadStep, Phase};
use crate::stats::counters::Counts;

/// The most counters (records × flows) kept while waiting for a tick: a
/// tick held up for seconds must still find its moment, but a session of
/// thousands of flows must not hoard memory. Beyond it, every other record
/// is dropped and the step between records doubles.
const MAX_KEPT: usize = 1 << 18;

/// The least time between records per flow recorded (see
/// [`TickClock::with_load`]): 10,000 flows are recorded every 50 ms.
const PER_FLOW: Duration = Duration::from_micros(5);

/// Counters recorded on the server's clock, and the tie to the client's.
pub struct TickClock {
    /// The server's instant that the client's time 0 maps to.
    origin: Instant,
    /// (when, every flow's counters then), oldest first.
    history: VecDeque<(Instant, Vec<Counts>)>,
    /// The step between records (it doubles while the history is full).
    step: Duration,
    base_step: Duration,
    /// The widest step: one interval (by then no tick has come for long).
    max_step: Duration,
    /// The flows (ranges of the counters) of a phased mix's bulk parts,
    /// whose senders stop at the tick that ends the loaded phase.
    load: Vec<Range<usize>>,
    /// That tick has come.
    load_stopped: bool,
}

impl TickClock {
    /// Records every 1/50 of an interval, between 1 and 10 ms: an interval's
    /// count is then off by at most that share of it. `origin`: the
    /// client's time 0 on our clock.
    pub fn new(interval: Duration, origin: Instant) -> TickClock {
        let step = (interval / 50).clamp(Duration::from_millis(1), Duration::from_millis(10));
        TickClock {
            origin,
            history: VecDeque::new(),
            step,
            base_step: step,
            max_step: interval.max(step),
            load: Vec::new(),
            load_stopped: false,
        }
    }

    /// The parts' counter blocks (their lengths, in order) and which of
    /// them are load, held for the loaded phase (`TestPlan::held_parts`).
    /// Many flows widen the step between records: each record reads every
    /// flow's counters on the session's thread, and an overloaded server
    /// with 10,000 flows must not spend its CPU on them (at most one flow's
    /// read per [`PER_FLOW`] of time, up to half an interval).
    pub fn with_load(mut self, block_lens: &[usize], held: &[bool]) -> TickClock {
        let mut at = 0;
        for (&n, &h) in block_lens.iter().zip(held) {
            if h {
                self.load.push(at..at + n);
            }
            at += n;
        }
        let widest = (self.max_step / 2).max(self.base_step);
        self.base_step = (PER_FLOW * at as u32).clamp(self.base_step, widest);
        self.step = self.base_step;
        self
    }

    /// A tick received at `now`, when the counters were `counts`: when it
    /// was due here, and its sample. A flow that keeps sending across the
    /// tick is counted up to the tick's due time; a flow whose sender
    /// stopped at the tick or before it (every flow at the tick that ends
    /// the window, a mix's bulk flows from the tick that ends the loaded
    /// phase on) is counted up to the tick's arrival, so that all it sent
    /// before the tick — still in a deep buffer when the tick was due, and
    /// ahead of the tick in it — counts before it. It sends nothing more,
    /// so the later moment adds nothing sent after the tick.
    pub fn sample(
        &mut self,
        now: Instant,
        counts: Vec<Counts>,
        tick: &Tick,
    ) -> (Instant, Vec<Counts>) {
        let due = self.due(now, tick.due_ns);
        self.record(now, counts.clone());
        let at_due = self.counts_at(due);
        if tick.load == Some(LoadStep::Stop) {
            self.load_stopped = true;
        }
        if tick.phase == Phase::Drain {
            return (due, counts);
        }
        let Some(mut out) = at_due else {
            return (due, counts);
        };
        if self.load_stopped {
            let n = out.len().min(counts.len());
            for r in &self.load {
                let r = r.start.min(n)..r.end.min(n);
                out[r.clone()].clone_from_slice(&counts[r]);
            }
        }
        (due, out)
    }

    /// How often to [`record`](Self::record).
    pub fn step(&self) -> Duration {
        self.step
    }

    /// Keep the counters as they stand at `now`.
    pub fn record(&mut self, now: Instant, counts: Vec<Counts>) {
        let per = counts.len().max(1);
        self.history.push_back((now, counts));
        if self.history.len() > 2 && self.history.len() * per > MAX_KEPT {
            // Keep the newest and every other one before it.
            let n = self.history.len();
            let mut k = 0;
            self.history.retain(|_| {
                k += 1;
                k == n || (n - k) % 2 == 0
            });
            self.step = (self.step * 2).min(self.max_step);
        }
    }

    /// The server's instant a tick received at `now` was due: `due_ns` on
    /// the client's clock, mapped through the tie, and never after its
    /// receipt. An older client's tick (no `due_ns`) is due on receipt.
    pub fn due(&self, now: Instant, due_ns: Option<u64>) -> Instant {
        match due_ns {
            Some(due) => (self.origin + Duration::from_nanos(due)).min(now),
            None => now,
        }
    }

    /// The counters recorded last at or before `at` (the oldest kept when
    /// none is that old), and forget the records before them: ticks come
    /// in order, so no later tick needs them.
    pub fn counts_at(&mut self, at: Instant) -> Option<Vec<Counts>> {
        let k = self.history.partition_point(|(t, _)| *t <= at);
        let k = k.saturating_sub(1);
        self.history.drain(..k);
        if self.history.len() * 4 < MAX_KEPT / self.flows().max(1) {
            self.step = self.base_step;
        }
        self.history.front().map(|(_, c)| c.clone())
    }

    fn flows(&self) -> usize {
        self.history.front().map_or(1, |(_, c)| c.len())
    }
}

/// The ticks a session may send beyond one per interval: a tick at every
/// phase's edge besides the interval's (a dozen at most: warm-up,
/// measure, a mix's idle, loaded, drain and recovery, cool-down, the
/// drain, an interrupt, a count met), with room to spare.
pub const TICK_BURST: u32 = 16;

/// And the ticks of this long, which arrive late and at once when the
/// path drops them (the data fills it): the client waits up to
/// [`CONGESTED_SAMPLE_TIMEOUT`] for each sample, and TCP delivers its
/// retransmitted ticks back to back.
pub const TICK_BURST_TIME: Duration =
    CONGESTED_SAMPLE_TIMEOUT.saturating_add(Duration::from_secs(4));

/// How many ticks a session may send: one per interval on average, in
/// bursts of [`TICK_BURST`] and [`TICK_BURST_TIME`]'s worth (a token
/// bucket, its tokens counted as time). Each tick costs the server a
/// sample of every flow's counters (and with TCP_INFO per tick, of every
/// socket: 378 KB for 1,024 flows), so a client sending ticks back to
/// back could make it send hundreds of megabytes for kilobytes. An honest
/// client never sends faster than its interval, its phase edges and a
/// congested path's late deliveries aside, which the burst covers; past
/// it the session ends, naming the interval.
pub struct TickRate {
    interval: Duration,
    /// What the ticks to come may spend.
    credit: Duration,
    most: Duration,
    last: Instant,
}

impl TickRate {
    /// A full bucket at `now` for a session of this interval.
    pub fn new(interval: Duration, now: Instant) -> TickRate {
        let interval = interval.max(Duration::from_nanos(1));
        let most = interval
            .saturating_mul(TICK_BURST)
            .saturating_add(TICK_BURST_TIME);
        TickRate {
            interval,
            credit: most,
            most,
            last: now,
        }
    }

    /// Take a tick arriving at `now`; false when it comes too soon.
    pub fn take(&mut self, now: Instant) -> bool {
        let since = now.saturating_duration_since(self.last);
        self.credit = self.credit.saturating_add(since).min(self.most);
        self.last = now;
        match self.credit.checked_sub(self.interval) {
            Some(left) => {
                self.credit = left;
                true
            }
            None => false,
        }
    }

    /// Why the session ends.
    pub fn refusal(&self) -> String {
        format!(
            "ticks came faster than the session's interval allows (--interval {} s: one tick per interval, in bursts of up to {}); session ended",
            self.interval.as_secs_f64(),
            self.most.as_nanos() / self.interval.as_nanos()
        )
    }
}

/// Read the client's messages on their own thread, each within `idle`,
/// until `finish`, an error or the end of the connection, so that the
/// session's thread keeps recording its counters while it waits.
pub fn spawn_reader(
    ctrl: &TcpStream,
    frame: usize,
    idle: Duration,
) -> Result<mpsc::Receiver<Result<ClientMsg, FrameError>>> {
    let (tx, rx) = mpsc::channel();
    let reader = ctrl.try_clone()?;
    std::thread::Builder::new()
        .name("thrum-session-reader".into())
        .spawn(move || {
            loop {
                let m = read_msg_within::<ClientMsg>(&reader, frame, idle);
                let more = matches!(m, Ok(ClientMsg::Tick(_)));
                if tx.send(m).is_err() || !more {
                    break;
                }
            }
        })?;
    Ok(rx)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(n: u64) -> Vec<Counts> {
        vec![Counts {
            datagrams_received: n,
            ..Default::default()
        }]
    }

    #[test]
    fn a_late_tick_is_answered_with_the_counts_when_it_was_due() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        // The client's time 0 is 1 ms after ours.
        let mut c = TickClock::new(Duration::from_secs(1), t0 + ms(1));
        for i in 0..=3000 {
            c.record(t0 + ms(i), counts(i * 8));
        }
        // Tick 1 was due at 1000 ms and arrives 1.9 s late.
        let due = c.due(t0 + ms(2900), Some(1_000_000_000));
        assert_eq!(due, t0 + ms(1001));
        assert_eq!(c.counts_at(due).unwrap()[0].datagrams_received, 1001 * 8);
        // Tick 2 arrives on time: the same tie.
        let due = c.due(t0 + ms(2001), Some(2_000_000_000));
        assert_eq!(due, t0 + ms(2001));
        assert_eq!(c.counts_at(due).unwrap()[0].datagrams_received, 2001 * 8);
        // A tick cannot be due after it arrived.
        assert_eq!(c.due(t0 + ms(2500), Some(3_000_000_000)), t0 + ms(2500));
    }

    #[test]
    fn a_flow_that_stopped_sending_counts_up_to_the_ticks_arrival() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        // Two parts of one flow each: bulk (held for the loaded phase) and a probe.
        let mut c = TickClock::new(Duration::from_secs(1), t0).with_load(&[1, 1], &[true, false]);
        let both = |n: u64| {
            vec![
                Counts {
                    bytes_received: n,
                    ..Default::default()
                };
                2
            ]
        };
        for i in 0..=3000 {
            c.record(t0 + ms(i), both(i));
        }
        let tick = |due_ms: u64, phase, load| Tick {
            seq: 1,
            phase,
            load,
            due_ns: Some(due_ms * 1_000_000),
        };
        let got = |v: &[Counts]| v.iter().map(|c| c.bytes_received).collect::<Vec<_>>();
        // An interval tick 200 ms late: both flows keep sending, both at due.
        let (due, v) = c.sample(t0 + ms(1200), both(1200), &tick(1000, Phase::Measure, None));
        assert_eq!((due, got(&v)), (t0 + ms(1000), vec![1000, 1000]));
        // The loaded phase ends 189 ms late (behind the bulk data in a deep
        // buffer): the bulk flow counts what arrived before the tick.
        let stop = tick(2000, Phase::Measure, Some(LoadStep::Stop));
        let (_, v) = c.sample(t0 + ms(2189), both(2189), &stop);
        assert_eq!(got(&v), vec![2189, 2000]);
        // Later ticks too: the bulk flow stays stopped.
        let (_, v) = c.sample(t0 + ms(2600), both(2600), &tick(2500, Phase::Measure, None));
        assert_eq!(got(&v), vec![2600, 2500]);
        // The window's end: every flow stops, every flow at arrival.
        let (due, v) = c.sample(t0 + ms(3000), both(3000), &tick(2900, Phase::Drain, None));
        assert_eq!((due, got(&v)), (t0 + ms(2900), vec![3000, 3000]));
    }

    #[test]
    fn many_flows_are_recorded_less_often() {
        let t0 = Instant::now();
        let c = |flows| TickClock::new(Duration::from_secs(1), t0).with_load(&[flows], &[false]);
        assert_eq!(c(1).step(), Duration::from_millis(10));
        assert_eq!(c(10_000).step(), Duration::from_millis(50));
        assert_eq!(c(1_000_000).step(), Duration::from_millis(500));
    }

    #[test]
    fn an_older_client_is_sampled_on_receipt() {
        let t0 = Instant::now();
        let c = TickClock::new(Duration::from_secs(1), t0);
        assert_eq!(c.due(t0, None), t0);
    }

    /// One tick per interval, a burst of 16 and 16 s worth on top; a
    /// client sending back to back is stopped there, one that keeps to
    /// its interval never is, and a late bunch within the burst passes.
    #[test]
    fn ticks_are_bounded_by_the_interval() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let mut r = TickRate::new(s, t0);
        let back_to_back = (0..1000).take_while(|_| r.take(t0)).count();
        assert_eq!(back_to_back, 16 + 16);
        assert!(!r.take(t0 + s / 2));
        assert!(r.take(t0 + s));
        assert!(r.refusal().contains("--interval 1 s") && r.refusal().contains("up to 32"));

        let mut honest = TickRate::new(Duration::from_millis(10), t0);
        let ms = Duration::from_millis;
        for k in 1..=10_000u32 {
            // Every tick on time, and a phase edge every second.
            assert!(honest.take(t0 + ms(10) * k), "tick {k}");
            if k % 100 == 0 {
                assert!(honest.take(t0 + ms(10) * k), "edge at {k}");
            }
        }
        // Twelve seconds of ticks held back by retransmissions, then all at once.
        let at = t0 + ms(100_000 + 12_000);
        assert!((0..1_200).all(|_| honest.take(at)));
    }

    #[test]
    fn the_history_stays_bounded() {
        let t0 = Instant::now();
        let mut c = TickClock::new(Duration::from_secs(1), t0);
        let many = vec![Counts::default(); 10_000];
        for i in 0..1000 {
            c.record(t0 + Duration::from_millis(i), many.clone());
        }
        assert!(c.history.len() * 10_000 <= MAX_KEPT + 10_000);
        assert!(c.step() > Duration::from_millis(10));
        assert_eq!(c.history.back().unwrap().0, t0 + Duration::from_millis(999));
    }
}
