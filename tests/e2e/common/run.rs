//! Running the `thrum` client and reading its JSON: the one helper that
//! runs thrum with `--json` and insists on success ([`run_json`]), and the
//! short runs and refusals that many modules check.

use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;

use super::command::Thrum;
use super::processes::{ServerProc, run_cmd};

/// Run `cmd`, a thrum client with `--json`, under `limit`: its JSON
/// result, which must be a success; else the result's error and the
/// client's stderr, under `what`. Every test that runs thrum for its
/// result comes through here.
pub fn run_json(cmd: &mut Command, limit: Duration, what: &str) -> Value {
    succeeded(&run_cmd(cmd, limit), what)
}

/// Parse the JSON result on stdout, with the whole output in any failure message.
pub fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}); status {:?}\nstdout: {}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// The JSON result of a client run that must have succeeded; else the
/// result's error and the client's stderr, under `what`.
pub fn succeeded(out: &Output, what: &str) -> Value {
    let doc = json(out);
    assert!(
        out.status.success(),
        "{what}: {}\n{}",
        doc["summary"]["error"],
        String::from_utf8_lossy(&out.stderr)
    );
    doc
}

/// A short tcp_rr (300 ms) against `server` must succeed: it is still
/// serving. Its result.
pub fn assert_serves(server: &ServerProc) -> Value {
    Thrum::run("tcp_rr").on(server).len("300ms").json()
}

/// Each command line must be refused before running anything, with every
/// needle in its error message (the flag and the accepted range) and
/// nothing on stdout ([`Thrum::refused`], each as typed).
pub fn assert_rejected(cases: &[(&[&str], &[&str])]) {
    for (args, needles) in cases {
        Thrum::cmd(args).refused(needles);
    }
}
