//! The commands end to end, one file each: `run`, `serve`, `suite`, `curve`,
//! `ping`, `monitor`, `mesh`, `netperf` (netperf's command line), the
//! aggregate commands `agg`, `find-burst`, `sweep` and `report`, the
//! results store's `history` (with `show`) and `compare`, and `web`, the
//! store served as pages; `save`
//! saves a measuring command's result in the store. This
//! is the top of the library: a command parses nothing. Its first line
//! turns clap's arguments into one plain request ([`crate::cli`]'s
//! `RunRequest`, `CurveRequest`, …: checked, the server resolved), and
//! nothing after reads a clap type; then it gathers with
//! [`crate::control`] or [`crate::agg`], and writes with
//! [`crate::export`]. What two commands share is in [`out`]; every JSON Schema the
//! commands' documents follow, in [`schema`].

pub mod agg;
pub mod compare;
pub mod curve;
pub mod find_burst;
pub mod history;
pub mod limit;
pub mod mesh;
pub mod monitor;
pub mod netperf;
pub mod out;
pub mod ping;
pub mod progress;
pub mod report;
pub mod run;
pub mod save;
pub mod schema;
pub mod serve;
pub mod suite;
pub mod sweep;
pub mod web;
