//! The charts, as SVG drawn with plotters: `plot` holds the primitives
//! every chart draws with (the error SVG, the grid, the legend beside a
//! plot, a nice axis end); then one file per chart: the aggregate's ramp
//! (`agg`), the latency-vs-throughput curve (`curve`), a mix's time series
//! and its probes' latency CDF (`mix`), capacity's dispersion histogram
//! (`capacity`), a stored figure over time (`history`), the heat map
//! (`heat`) of a sweep's table (`sweep`) or a mesh's matrix (`mesh`); and
//! for `thrum web`, SmokePing's chart with the grid's sparklines (`smoke`)
//! and a compared figure's interval as a bar (`verdict`), both written as
//! SVG text: their points are links with tooltips and their smoke
//! translucent. Every one scales to its container (`plot::render`, or a
//! `viewBox` of its own for the SVG-text ones).
//!
//! The charts sit above the text exporters (a chart may format its numbers
//! as the text does) and below the pages (`super::page`), which embed them.

pub mod agg;
pub mod capacity;
pub mod curve;
pub mod heat;
pub mod history;
pub mod mesh;
pub mod mix;
pub mod plot;
pub mod smoke;
pub mod sweep;
pub mod verdict;
