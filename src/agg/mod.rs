//! The aggregate method (`thrum agg`, `find-burst`, `sweep`, `report`):
//! what runemomniaggdemo.sh, find_max_burst.sh and post_proc.py do, in one
//! command, with timestamps and trimmed windows instead of start/stop skew.
//!
//! Bottom to top: `series` (interval arithmetic on timestamped samples),
//! `ramp` (the doubling schedule), `burst` (the search), `hosts` (load
//! generator lists), `input` (report inputs opened without following
//! symbolic links), `kinds` (which thrum plan each aggregate test runs),
//! `model` (results.json and the analysis every source shares), `netperf`
//! (netperf's demo-mode files), `curve` (the latency-vs-throughput curve's
//! record, its knee and saturation point), `run` (the ramp against live servers),
//! `sweep` (the grid of cells), `spread` (a cell over several servers),
//! `nic` (NIC settings as dimensions, restored on drop), `cpu` (the system
//! under test's CPU per step), `steps` (a step's latency from merged
//! histograms and the load generators' CPU), `ramplog` (the ramp in
//! runemomniaggdemo.sh's words, beside results.json) and `progress` (the
//! terminal bar).
//! docs/agg.md explains the choices.

pub mod burst;
pub mod cpu;
pub mod curve;
pub mod hosts;
pub mod input;
pub mod kinds;
pub mod model;
pub mod netperf;
pub mod nic;
pub mod progress;
pub mod ramp;
pub mod ramplog;
pub mod run;
pub mod series;
pub mod spread;
pub mod steps;
pub mod sweep;
