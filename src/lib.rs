//! thrum: network performance measurement.
//!
//! The library holds everything; `main.rs` only parses arguments and maps
//! errors to an exit code. Layers, top to bottom; every import points down
//! this list, and `layers.rs` checks it: `cmd` (one file per command) →
//! `netperf` (netperf's command line read into a request) → `cli` (clap's
//! types, checked into a plan) → `monitor` (probes on a
//! schedule, their metrics), `web` (the store as pages) → `export` (text,
//! charts, pages), `store` → `agg` (the aggregate method), `sweep` (the
//! grid of cells), `curve` (the latency-vs-throughput curve), `fleet` (one
//! test from many agents) → `control` (protocol, client and server
//! sessions) → `analysis` (the record turned into a result) → `result` →
//! `engine` (worker threads) → `workload` (flow state machines) → `io`
//! (drivers, sockets) → `sensors`, `stats` (counters, histograms) → `plan`,
//! `text`, `clock`, `term`, `warning`, `nofollow` → `units`, `httpd` (the
//! HTTP server under the monitor's `/metrics` and `thrum web`).

pub mod agg;
pub mod analysis;
pub mod cli;
pub mod clock;
pub mod cmd;
pub mod control;
pub mod curve;
pub mod engine;
pub mod export;
pub mod fleet;
pub mod httpd;
pub mod io;
#[cfg(test)]
mod layers;
pub mod monitor;
pub mod netperf;
pub mod nofollow;
pub mod plan;
pub mod result;
pub mod sensors;
pub mod stats;
pub mod store;
pub mod sweep;
pub mod term;
pub mod text;
pub mod units;
pub mod warning;
pub mod web;
pub mod workload;

use std::process::ExitCode;

use anyhow::Result;

use cli::{Cli, Command};

/// Run a parsed command line; the exit code says whether the test succeeded.
pub fn run(cli: Cli) -> Result<ExitCode> {
    // Every flow is a socket: start with all the descriptors allowed.
    io::fdlimit::raise_to_hard();
    match cli.command {
        Command::Run(args) => cmd::run::run(&args),
        Command::Server(args) => cmd::serve::serve(&args),
        Command::Suite(args) => cmd::suite::suite(&args),
        Command::Agg(args) => cmd::agg::agg(&args),
        Command::FindBurst(args) => cmd::find_burst::find_burst(&args),
        Command::Sweep(args) => cmd::sweep::sweep(&args),
        Command::Mesh(args) => cmd::mesh::mesh(&args),
        Command::Curve(args) => cmd::curve::curve(&args),
        Command::Report(args) => cmd::report::report(&args),
        Command::Ping(args) => cmd::ping::ping(&args),
        Command::Monitor(args) => cmd::monitor::monitor(&args),
        Command::History(args) => cmd::history::history(&args),
        Command::Show(args) => cmd::history::show(&args),
        Command::Compare(args) => cmd::compare::compare(&args),
        Command::Netperf(args) => cmd::netperf::netperf(&args.args),
        Command::Web(args) => cmd::web::web(&args),
    }
}
