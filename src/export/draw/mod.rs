//! The SVG charts, drawn with plotters: the aggregate's ramp and the
//! latency-vs-throughput curve (`agg`, with the plot primitives the others
//! draw with), a mix's time series and its probes' latency CDF (`mix`),
//! capacity's dispersion histogram (`capacity`) and a stored figure over
//! time (`history`).

pub mod agg;
pub mod capacity;
pub mod history;
pub mod mix;
