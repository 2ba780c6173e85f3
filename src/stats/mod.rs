//! Counters and latency histograms: what the data path records.
//!
//! Everything here merges by adding: per-flow counters sum into totals,
//! per-thread histograms add into one. Nothing keeps a list of samples.

pub mod calltime;
pub mod confidence;
pub mod counters;
pub mod dispersion;
pub mod latency;
