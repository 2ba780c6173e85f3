//! The engine: worker threads that run flows, and the handle the control
//! session uses to steer and sample them.
//!
//! Each worker owns its flows, its driver and its latency histogram; nothing
//! on the data path takes a lock or allocates. The session thread steers the
//! workers through three atomics (phase, stop, and the count of flows that met
//! their quota) and samples the per-flow counters at interval boundaries. A
//! phase change wakes every flow once (a kick), so a flow blocked on one
//! direction still learns that it must drain.
//!
//! Latency is recorded per interval: the session bumps an epoch (the interval
//! index) at every tick, and a worker that sees a new epoch hands its
//! interval histogram to a shared table (one short lock per worker per
//! interval, never per transaction), merges it into its window total and
//! starts afresh. An interval's percentiles are computed once every worker
//! has handed in its part, and its histogram is dropped, so memory does not
//! grow with the length of the test. A worker blocked in a receive notices
//! the epoch up to one receive timeout late; the latencies of that moment
//! land in the interval before.
//!
//! The rooms, from the session down: `handle` is the [`Engine`] a session
//! starts and steers, and what its workers leave behind; [`parts`] runs one
//! engine per part of a mix; `place` reads a part's worker options from the
//! plan ([`WorkerOpts::from_plan`], the same for both ends), spreads its
//! flows over the workers and chooses each worker's driver; `worker` is one
//! worker thread, the per-transaction loop; `pacer` is how long an
//! open-loop worker polls before each intended start instead of sleeping;
//! [`sched`] gives a latency probe's workers a short scheduler slice; and
//! `watchdog` wakes workers blocked under the blocking driver.

mod handle;
mod pacer;
pub mod parts;
mod place;
pub mod sched;
mod watchdog;
mod worker;

pub use handle::{
    Engine, EngineOutcome, call_times, first_tcp_socket, tcp_retransmits, zerocopy_counts,
};
pub use pacer::pacer_spin;
pub use parts::Engines;
pub use place::{
    AUTO_URING_FLOWS, Side, WorkerOpts, WorkerSpec, choose_driver, pacing_resolution, place,
    uring_fallback, uring_napi_refusal,
};
