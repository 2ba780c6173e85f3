//! The analysis of one run: the raw record both ends' samples and totals
//! make ([`Gathered`]) turned into a [`TestResult`](crate::result::TestResult).
//!
//! Gathering talks to the network (`control`); this is a pure function of
//! what was gathered, with no socket, clock or file, so it is unit-tested on
//! constructed records (`record::fixtures`). Intervals are differences of
//! consecutive cumulative samples, the summary is the sum of the
//! measurement phase's intervals, and the warnings say where the figures
//! cannot be taken at face value. `result` holds the data only; every
//! figure in it is computed here.
//!
//! Top to bottom: `mix` (a mix's parts, phases and fairness) → `summary`
//! (one test's result) → `sides` (each end's rates, CPU and service
//! demand), `capacity` (packet-train estimates), `stability` (cv, trend,
//! stalled flows) → `intervals` (one interval's figures; `tcp_info`, its
//! senders' TCP_INFO) → `goodput` (a
//! stretch of the run's per-flow goodput, Jain's index) → `record` (the raw
//! record).

pub mod capacity;
pub mod goodput;
pub mod intervals;
pub mod mix;
pub mod one_way;
pub mod record;
pub mod sides;
pub mod stability;
pub mod summary;
pub mod tcp_info;

pub(crate) use intervals::interval;
pub(crate) use mix::assemble_mix;
pub(crate) use record::{Gathered, LocalSample, PartRecord, RemoteSample};
pub(crate) use summary::assemble;
