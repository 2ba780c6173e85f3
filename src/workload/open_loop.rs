//! The open-loop generator (`--rate`) of one request/response client flow:
//! tcp_rr, udp_rr, tcp_crr and tcp_cc all run on it.
//!
//! It owns what the three clients used to keep each in its own way: the
//! [`Schedule`] (each transaction's intended start, and the arrival draw),
//! the count of transactions in the system (integrated into the flow's
//! `in_flight_ns`, for Little's law), and the generator's own figures, the
//! lag histogram and the late count. A flow asks it whether a transaction
//! is due ([`OpenLoop::wait`]), takes it when its in-flight bound has room
//! ([`OpenLoop::take`]), and says when transactions leave the system
//! ([`OpenLoop::completed`]); what it sends, and how it matches responses
//! to intended starts, stays the flow's own. Everything here is per
//! transaction: no allocation, no lock, and no clock reading of its own
//! (the flow passes the reading it took for its I/O).

use std::time::Instant;

use super::schedule::Schedule;
use super::{CounterRef, FlowCtx};
use crate::plan::{Phase, TestPlan};
use crate::stats::latency::OpenLoopRecorder;

/// One flow's open-loop generator.
pub struct OpenLoop {
    schedule: Schedule,
    in_system: InSystem,
}

impl OpenLoop {
    /// The generator of flow `flow` of `plan`, when the plan is open-loop
    /// (it has a rate); None for a closed loop.
    pub fn of(plan: &TestPlan, flow: u32) -> Option<OpenLoop> {
        Schedule::of(plan, flow).map(OpenLoop::new)
    }

    pub fn new(schedule: Schedule) -> OpenLoop {
        OpenLoop {
            schedule,
            in_system: InSystem::new(),
        }
    }

    /// Begin the schedule at `now` (when the flow starts on its worker:
    /// building flows and starting threads takes a while).
    pub fn begin(&mut self, now: Instant) {
        self.schedule.begin(now);
    }

    /// Transactions in flight may not exceed this (`--max-inflight`).
    #[inline]
    pub fn max_inflight(&self) -> u64 {
        self.schedule.max_inflight
    }

    /// The intended start of the next transaction.
    #[inline]
    pub fn next(&self) -> Instant {
        self.schedule.next()
    }

    /// None when a transaction is due at `now` (take it when there is room);
    /// else the intended start to wait for.
    #[inline]
    pub fn wait(&self, now: Instant) -> Option<Instant> {
        let next = self.schedule.next();
        (next > now).then_some(next)
    }

    /// Take the due transaction at `now` and move the schedule on: its lag
    /// (how far behind its intended start it was taken) goes into `lag`
    /// while `phase` is the measured one, one more than a schedule gap
    /// counts it late, and it is in the system from its intended start.
    /// Returns that intended start, which its response time runs from.
    // Inlined into each flow's issuing loop, where this code was before it
    // had a type of its own (left to itself the compiler keeps one copy
    // and calls it, per transaction).
    #[inline(always)]
    pub fn take(
        &mut self,
        now: Instant,
        phase: Phase,
        lag: Option<&mut OpenLoopRecorder>,
        c: &CounterRef,
    ) -> Instant {
        let due = self.schedule.take();
        let behind = now.duration_since(due);
        if phase == Phase::Measure
            && let Some(o) = lag
        {
            o.lag.record(behind.as_nanos() as u64);
        }
        if behind > self.schedule.gap() {
            c.add_late(1);
        }
        self.in_system.arrive(due, now, c);
        due
    }

    /// `k` transactions left the system at `now` (answered, or lost).
    #[inline]
    pub fn completed(&mut self, k: u64, now: Instant, c: &CounterRef) {
        self.in_system.depart(k, now, c);
    }

    /// A measured transaction answered at `now`: its response time from its
    /// intended start `meant`, its service time from `started` (the send, or
    /// the connect).
    #[inline(always)]
    pub fn record(ctx: &mut FlowCtx<'_>, meant: Instant, started: Instant, now: Instant) {
        ctx.hist.record(now.duration_since(meant).as_nanos() as u64);
        if let Some(o) = ctx.open.as_deref_mut() {
            o.service
                .record(now.duration_since(started).as_nanos() as u64);
        }
    }
}

/// How many transactions are in the system (their intended start has
/// passed and their response has not come), integrated over time into the
/// flow's `in_flight_ns` counter. Over a window it gives the mean number in
/// flight, which Little's law ties to the achieved rate and the mean
/// response time: a check on the response times that does not read them
/// (it counts queue entries and reads the clock at its own moments).
struct InSystem {
    n: u64,
    last: Instant,
}

impl InSystem {
    fn new() -> InSystem {
        InSystem {
            n: 0,
            last: Instant::now(),
        }
    }

    /// The area up to `now` at the current count.
    #[inline]
    fn advance(&mut self, now: Instant, c: &CounterRef) {
        if now > self.last {
            let dt = now.duration_since(self.last).as_nanos() as u64;
            c.add_in_flight_ns(self.n * dt);
            self.last = now;
        }
    }

    /// A transaction due at `due` was taken from the schedule at `now`: it
    /// has been in the system since `due`.
    #[inline]
    fn arrive(&mut self, due: Instant, now: Instant, c: &CounterRef) {
        self.advance(now, c);
        c.add_in_flight_ns(self.last.saturating_duration_since(due).as_nanos() as u64);
        self.n += 1;
    }

    /// `k` transactions left the system at `now`.
    #[inline]
    fn depart(&mut self, k: u64, now: Instant, c: &CounterRef) {
        self.advance(now, c);
        self.n = self.n.saturating_sub(k);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::plan::TestKind;
    use crate::workload::harness::Harness;

    /// 1,000/s on one flow: one transaction per ms. One taken half a gap
    /// behind its intended start is on time, one taken three gaps behind is
    /// late; only the measured one's lag is recorded; each is in the system
    /// from its intended start until both leave it together.
    #[test]
    fn taking_counts_the_lag_the_late_and_the_time_in_the_system() {
        let ms = Duration::from_millis(1);
        let mut p = TestPlan::new(TestKind::TcpRr);
        p.offered_per_s = Some(1000);
        let mut h = Harness::new(1);
        let c = h.counter(0);
        let mut g = OpenLoop::of(&p, 0).unwrap();
        let t0 = Instant::now() + ms;
        g.begin(t0 - ms);
        assert_eq!(g.wait(t0 - ms), None, "due from the start");
        let now = t0 - ms / 2;
        assert_eq!(g.take(now, Phase::Measure, Some(&mut h.open), &c), t0 - ms);
        assert_eq!(g.wait(now), Some(t0));
        let now = t0 + 3 * ms;
        assert_eq!(g.take(now, Phase::Warmup, Some(&mut h.open), &c), t0);
        g.completed(2, t0 + 4 * ms, &c);
        let k = c.snapshot();
        assert_eq!(k.late, 1);
        assert_eq!(h.open.lag.count(), 1);
        // 5 ms for the first (from t0 - 1 ms), 4 ms for the second.
        assert_eq!(k.in_flight_ns, 9_000_000);
    }

    #[test]
    fn closed_loop_plans_have_no_generator() {
        assert!(OpenLoop::of(&TestPlan::new(TestKind::TcpRr), 0).is_none());
    }
}
