//! The aggregate method (`thrum agg`, `find-burst`, and `report` of what
//! they saved): what runemomniaggdemo.sh, find_max_burst.sh and
//! post_proc.py do, in one command, with timestamps and trimmed windows
//! instead of start/stop skew.
//!
//! Bottom to top: `series` (interval arithmetic on timestamped samples),
//! `ramp` (the doubling schedule), `burst` (the search), `hosts` (load
//! generator lists, which `sweep --hosts` reads too), `kinds` (which thrum
//! plan each aggregate test runs), `model` (results.json and the analysis
//! every source shares), `netperf` (netperf's demo-mode files, opened
//! through `crate::nofollow`), `run` (the ramp against live servers), `cpu`
//! (the system under test's CPU per step), `steps` (a step's latency from
//! merged histograms and the load generators' CPU), `ramplog` (the ramp in
//! runemomniaggdemo.sh's words, beside results.json) and `progress` (the
//! terminal bar). The sweep (`crate::sweep`) and the curve (`crate::curve`)
//! are studies of their own beside this one.
//! docs/agg.md explains the choices.

pub mod burst;
pub mod cpu;
pub mod hosts;
pub mod kinds;
pub mod model;
pub mod netperf;
pub mod progress;
pub mod ramp;
pub mod ramplog;
pub mod run;
pub mod series;
pub mod steps;
