//! Open-loop pacing: how long before each intended start a worker stops
//! sleeping and polls its driver without blocking instead. A timed sleep
//! ends a wake-up latency after its deadline, whichever call sets the
//! timer; sleeping to `deadline - spin` and polling the rest sends on time
//! whenever the wake-up latency is below the spin, and polling the driver,
//! not just the clock, reads a response that arrives meanwhile at once
//! instead of holding it for the deadline. Only the client's open-loop
//! workers spin (a schedule is the client's alone); paced streams and
//! timeouts sleep to the moment. Chosen by measurement: docs/open-loop.md,
//! "Pacing".

use std::time::Duration;

/// The shortest spin before a deadline, and the whole spin of a worker
/// whose gaps between intended starts are 600 µs or shorter (1,667/s or
/// more on one worker): 30 µs took the generator's median lag from a
/// wake-up latency (20 to 35 µs on a busy VM, with 1 µs timer slack) to
/// about a microsecond. [`super::place()`] gives it to every worker; the
/// client's open-loop workers get [`pacer_spin`] of their rate instead.
pub(super) const PACER_SPIN: Duration = Duration::from_micros(30);

/// The longest spin before a deadline, for a worker whose schedule leaves
/// long gaps ([`pacer_spin`]).
const MAX_PACER_SPIN: Duration = Duration::from_micros(500);

/// The share of the gap between a worker's intended starts that it spins
/// before each one: a twentieth. The spin is spent once per intended
/// start, so it costs an otherwise idle worker 5 % of its CPU wherever
/// the gap is 600 µs or longer; shorter gaps spin the [`PACER_SPIN`]
/// floor, a larger share (30 µs of every 100 µs at 10,000/s: about 12
/// points of a CPU measured, docs/open-loop.md).
const SPIN_SHARE_OF_GAP: u32 = 20;

/// How long before each intended start a worker offering `per_s`
/// transactions/s (its flows' share of the rate) stops sleeping and polls:
/// a twentieth of its gap, from [`PACER_SPIN`] up to [`MAX_PACER_SPIN`].
/// The longer the gap, the longer a CPU has been idle before the deadline,
/// and waking an idle vCPU costs more than waking a busy one: on the 2-vCPU
/// test VM a thread asleep 100 ms woke 190 µs (p50) after its timer, one
/// asleep 10 ms about 27 µs, so a probe at 10/s with a 30 µs spin went out
/// ~100 µs late at the median (docs/open-loop.md, "Pacing"). 500 µs covers
/// the idle wake-up with room to spare and costs 0.5 % of a CPU at 10/s,
/// 50 µs at 1,000/s 5 %; from 1,667/s per worker on the spin is the 30 µs
/// floor.
pub fn pacer_spin(per_s: f64) -> Duration {
    if per_s.is_nan() || per_s <= 0.0 {
        return PACER_SPIN;
    }
    let gap = Duration::from_secs_f64((1.0 / per_s).min(3600.0));
    (gap / SPIN_SHARE_OF_GAP).clamp(PACER_SPIN, MAX_PACER_SPIN)
}

#[cfg(test)]
mod tests {
    use super::{MAX_PACER_SPIN, PACER_SPIN, pacer_spin};
    use std::time::Duration;

    /// The spin before a deadline is a twentieth of the worker's gap,
    /// never under the 30 µs it always had nor over 500 µs: a probe at
    /// 10/s spins 500 µs (0.5 % of a CPU), a worker at 1,000/s 50 µs, one
    /// at 100,000/s (or a rate nobody could mean) 30 µs.
    #[test]
    fn the_spin_before_a_deadline_grows_with_the_gap_within_its_bounds() {
        assert_eq!(pacer_spin(10.0), MAX_PACER_SPIN);
        assert_eq!(pacer_spin(0.001), MAX_PACER_SPIN);
        assert_eq!(pacer_spin(1_000.0), Duration::from_micros(50));
        assert_eq!(pacer_spin(100_000.0), PACER_SPIN);
        assert_eq!(pacer_spin(0.0), PACER_SPIN);
        assert_eq!(pacer_spin(f64::NAN), PACER_SPIN);
        for r in [1.0, 37.0, 2_500.0, 1e9] {
            let s = pacer_spin(r);
            assert!(s >= PACER_SPIN && s <= MAX_PACER_SPIN, "{r}: {s:?}");
            assert!(s.as_secs_f64() * r <= 0.05 || s == PACER_SPIN, "{r}: {s:?}");
        }
    }
}
