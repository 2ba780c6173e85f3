//! The `thrum` binary: parse arguments, run, map errors to an exit code.

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};

/// `thrum --version`: what was built, from which commit, when and for what
/// (set by build.rs), so that a report from a fleet names its binary.
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("THRUM_COMMIT"),
    ", built ",
    env!("THRUM_BUILD_DATE"),
    ", ",
    env!("THRUM_TARGET"),
    ")"
);

fn main() -> ExitCode {
    let matches = thrum::cli::Cli::command().version(VERSION).get_matches();
    let cli = match thrum::cli::Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    match thrum::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("Error: {e:#}");
            ExitCode::from(2)
        }
    }
}
