//! Counters and latency histograms: what the data path records.
//!
//! Everything here merges by adding: per-flow counters sum into totals,
//! per-thread histograms add into one. Nothing keeps a list of samples.
//! `offset` is the one estimator of a peer's clock offset, from a burst of
//! timestamped exchanges.

pub mod calltime;
pub mod confidence;
pub mod counters;
pub mod dispersion;
pub mod latency;
pub mod offset;
pub mod owd;
pub mod track;
