//! The open-loop schedule of one request/response flow: when each of its
//! transactions is meant to start, whatever the responses do.
//!
//! A closed-loop flow asks again only when an answer has come, so a server
//! that stalls for 300 ms is charged one slow transaction instead of the
//! hundreds that real clients would have sent into the stall (coordinated
//! omission). Here the schedule decides: each transaction has an intended
//! start, response time runs from it, and a flow that cannot send on time
//! (its in-flight bound is full, or its thread was late) sends the owed
//! requests as soon as it can, their response time still counted from the
//! intended start. How far behind the schedule each request went out is the
//! generator's own lag, reported apart so that a generator-bound run says
//! so instead of blaming the system under test.
//!
//! The schedule is the times alone; [`super::open_loop::OpenLoop`] is the
//! generator that runs a flow on it (what is in the system, the lag, the
//! late count).

use std::time::{Duration, Instant};

use crate::plan::{Arrivals, TestPlan};

/// One flow's schedule.
pub struct Schedule {
    /// The intended start of the next transaction.
    next: Instant,
    /// The mean gap between this flow's transactions, ns.
    gap_ns: f64,
    /// Poisson arrivals: the generator's state (xorshift64*); fixed: None.
    rng: Option<u64>,
    /// This flow's place among the flows: its first start after the
    /// schedule begins.
    offset: Duration,
    /// Transactions in flight may not exceed this.
    pub max_inflight: u64,
}

impl Schedule {
    /// The schedule of flow `flow` of `plan`, when the plan is open-loop:
    /// each flow offers rate/flows, and flow f starts f/rate after flow 0 so
    /// that the flows' sends interleave instead of coinciding.
    pub fn of(plan: &TestPlan, flow: u32) -> Option<Schedule> {
        let rate = plan.offered_per_s? as f64;
        let flows = plan.flows.max(1) as f64;
        let gap_ns = 1e9 * flows / rate;
        let offset = Duration::from_nanos((1e9 * flow as f64 / rate) as u64);
        let rng = match plan.arrivals {
            Arrivals::Fixed => None,
            // Any non-zero seed; distinct per flow.
            Arrivals::Poisson => {
                Some(0x9E37_79B9_7F4A_7C15 ^ (flow as u64 + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9))
            }
        };
        Some(Schedule {
            next: Instant::now() + offset,
            gap_ns,
            rng,
            offset,
            max_inflight: plan.max_inflight.max(1) as u64,
        })
    }

    /// Begin the schedule at `now` (when the flow starts on its worker:
    /// building flows and starting threads takes a while).
    pub fn begin(&mut self, now: Instant) {
        self.next = now + self.offset;
    }

    /// The intended start of the next transaction.
    #[inline]
    pub fn next(&self) -> Instant {
        self.next
    }

    /// One schedule gap: a request sent later than this after its intended
    /// start counts as late.
    #[inline]
    pub fn gap(&self) -> Duration {
        Duration::from_nanos(self.gap_ns as u64)
    }

    /// Take the next transaction's intended start and move the schedule on.
    #[inline]
    pub fn take(&mut self) -> Instant {
        let t = self.next;
        let gap = match &mut self.rng {
            None => self.gap_ns,
            Some(s) => {
                // xorshift64*: a uniform in (0, 1], then an exponential gap
                // of the same mean.
                *s ^= *s >> 12;
                *s ^= *s << 25;
                *s ^= *s >> 27;
                let x = s.wrapping_mul(0x2545_F491_4F6C_DD1D);
                let u = ((x >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
                -u.ln() * self.gap_ns
            }
        };
        self.next = t + Duration::from_nanos(gap as u64);
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::TestKind;

    fn plan(rate: u64, flows: u32, arrivals: Arrivals) -> TestPlan {
        let mut p = TestPlan::new(TestKind::TcpRr);
        p.offered_per_s = Some(rate);
        p.flows = flows;
        p.arrivals = arrivals;
        p
    }

    #[test]
    fn closed_loop_plans_have_no_schedule() {
        assert!(Schedule::of(&TestPlan::new(TestKind::TcpRr), 0).is_none());
    }

    #[test]
    fn fixed_arrivals_are_evenly_spaced_at_the_flows_share() {
        // 1000/s over 4 flows: each flow every 4 ms.
        let mut s = Schedule::of(&plan(1000, 4, Arrivals::Fixed), 1).unwrap();
        let t0 = s.take();
        let t1 = s.take();
        assert_eq!(t1 - t0, Duration::from_millis(4));
        assert_eq!(s.gap(), Duration::from_millis(4));
    }

    #[test]
    fn flows_are_staggered_by_one_over_the_rate() {
        let now = Instant::now();
        let a = Schedule::of(&plan(1000, 4, Arrivals::Fixed), 0).unwrap();
        let b = Schedule::of(&plan(1000, 4, Arrivals::Fixed), 3).unwrap();
        let d = b.next().duration_since(a.next());
        assert!(
            d >= Duration::from_millis(3) && d < Duration::from_millis(4),
            "{d:?}"
        );
        assert!(a.next() >= now);
    }

    /// Poisson gaps keep the mean rate (within 2 % over 100,000 draws: the
    /// standard error of the mean of exponential gaps is 1/sqrt(n) = 0.3 %)
    /// and vary as an exponential does (its coefficient of variation is 1).
    #[test]
    fn poisson_arrivals_keep_the_mean_and_vary() {
        let mut s = Schedule::of(&plan(10_000, 1, Arrivals::Poisson), 0).unwrap();
        let n = 100_000;
        let mut prev = s.take();
        let mut gaps = Vec::with_capacity(n);
        for _ in 0..n {
            let t = s.take();
            gaps.push((t - prev).as_nanos() as f64);
            prev = t;
        }
        let mean = gaps.iter().sum::<f64>() / n as f64;
        assert!((mean / 100_000.0 - 1.0).abs() < 0.02, "mean gap {mean} ns");
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / n as f64;
        let cv = var.sqrt() / mean;
        assert!((cv - 1.0).abs() < 0.05, "cv {cv}");
    }
}
