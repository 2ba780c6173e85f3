//! Running the `thrum` client and reading its JSON: the one helper that
//! runs thrum with `--json` and insists on success ([`run_json`]), and the
//! short runs and refusals that many modules check.

use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;

use super::command::Thrum;
use super::processes::{ServerProc, run_client, run_cmd};

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

/// A `--json-stream` run's stdout, one JSON object per line; the run must
/// have succeeded.
pub fn json_lines(out: &Output) -> Vec<Value> {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is one JSON object"))
        .collect()
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

/// A short tcp_rr (300 ms, no warm-up, JSON) against the server at `addr`,
/// with `extra` flags.
pub fn short_rr(addr: &str, extra: &[&str]) -> Output {
    let args = ["run", "tcp_rr", "-H", addr, "-l", "300ms", "--warmup", "0s"];
    run_client(
        &[&args[..], extra, &["--json"]].concat(),
        Duration::from_secs(20),
    )
}

/// A short tcp_rr against `server` must succeed: it is still serving.
pub fn assert_serves(server: &ServerProc) -> Value {
    run_short(server, "tcp_rr", &[])
}

/// `thrum run TEST -H server -l 300ms --warmup 0s EXTRA.. --json`, which
/// must succeed; returns its result.
pub fn run_short(server: &ServerProc, test: &str, extra: &[&str]) -> Value {
    let mut args = vec![
        "run",
        test,
        "-H",
        &server.addr,
        "-l",
        "300ms",
        "--warmup",
        "0s",
        "--json",
    ];
    args.extend_from_slice(extra);
    run_json(
        server.thrum().args(&args),
        Duration::from_secs(20),
        &format!("{test} {extra:?} failed (has the server stopped serving?)"),
    )
}

/// Each command line must be refused before running anything, with every
/// needle in its error message (the flag and the accepted range) and
/// nothing on stdout ([`Thrum::refused`], each as typed).
pub fn assert_rejected(cases: &[(&[&str], &[&str])]) {
    for (args, needles) in cases {
        Thrum::cmd(args).refused(needles);
    }
}
