//! The `thrum` binary: parse arguments, run, map errors to an exit code.
//! Run as a link named `netperf`, it is `thrum netperf`.
//! Every error reads `error: …` on stderr, clap's and thrum's alike.

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

/// The command line, with `netperf` put before the arguments when thrum
/// runs as a link named `netperf` (`netperf -H host` is `thrum netperf -H
/// host`).
fn args() -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let called = args
        .first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .is_some_and(|n| n == "netperf");
    if called {
        args.insert(1, "netperf".into());
    }
    args
}

fn main() -> ExitCode {
    let argv = args();
    let parsed = thrum::cli::Cli::command()
        .version(VERSION)
        .try_get_matches_from(&argv)
        .and_then(|m| thrum::cli::Cli::from_arg_matches(&m));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(e) => {
            let args: Vec<String> = argv
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
            let hint = thrum::cli::foreign_hint(&args, e.kind());
            match hint {
                // Our tip replaces clap's (`use '-- -t'`), in clap's style.
                Some(h) if e.use_stderr() => {
                    let text = e.render().to_string();
                    let mut lines: Vec<&str> = text.lines().collect();
                    if let Some(i) = lines
                        .iter()
                        .position(|l| l.trim_start().starts_with("tip:"))
                    {
                        lines.remove(i);
                    }
                    let at = lines.iter().position(|l| l.is_empty()).unwrap_or(1);
                    let tip = format!("  tip: {h}");
                    // A blank line either side, as clap sets its own tip.
                    lines.insert(at + 1, &tip);
                    lines.insert(at + 2, "");
                    let mut text = lines.join("\n");
                    while text.contains("\n\n\n") {
                        text = text.replace("\n\n\n", "\n\n");
                    }
                    eprintln!("{text}");
                }
                // clap prints help and --version itself, to stdout with status 0.
                _ => {
                    let _ = e.print();
                }
            }
            return ExitCode::from(e.exit_code() as u8);
        }
    };
    match thrum::run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            if let Some(t) = e.downcast_ref::<thrum::cli::Tipped>() {
                eprintln!("\n  tip: {}", t.tip);
            }
            ExitCode::from(2)
        }
    }
}
