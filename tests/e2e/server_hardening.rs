//! A server that keyless clients cannot hold, against a real server
//! process on loopback (the third round of the red team's findings):
//!
//! - a server's provenance cannot forge a `KEY=value` line.
//!
//! `THRUM_E2E_SERVER_BIN=PATH` runs the server from another build (the
//! figures each test prints are the before and after).

use std::process::Command;
use std::time::Duration;

use crate::common::{ServerProc, bin, run_cmd};
use crate::crafted::rewriting_proxy;

/// The server under test: this build's, or `THRUM_E2E_SERVER_BIN`.
fn server_bin() -> String {
    std::env::var("THRUM_E2E_SERVER_BIN").unwrap_or_else(|_| bin().to_string())
}

fn start_server(extra: &[&str]) -> ServerProc {
    ServerProc::start_with(Command::new(server_bin()), "127.0.0.1", extra)
}

/// A server whose provenance says its kernel is `Linux\nTHROUGHPUT=999`
/// (through a proxy that rewrites its final report): the old client wrote
/// the newline into `--keyval`'s REMOTE_SYSNAME, and a netperf-style
/// parser read a second THROUGHPUT line. The client escapes provenance on
/// arrival, and keyval escapes control characters in every value.
#[test]
fn a_servers_provenance_cannot_forge_a_keyval_line() {
    let server = start_server(&[]);
    let proxy = rewriting_proxy(&server.addr, |fin| {
        fin["provenance"]["kernel"] = serde_json::json!({
            "sysname": "Linux\nTHROUGHPUT=999",
            "release": "6.1\r\nTHROUGHPUT_UNITS=forged\u{1b}[2J",
            "version": "#1",
            "machine": "x86_64",
        });
    });
    let out = run_cmd(
        Command::new(bin()).args([
            "run", "tcp_rr", "-H", &proxy, "-l", "300ms", "--warmup", "0s", "--keyval",
        ]),
        Duration::from_secs(20),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    let throughput = lines
        .iter()
        .filter(|l| l.starts_with("THROUGHPUT="))
        .count();
    let forged = lines
        .iter()
        .filter(|l| l.starts_with("THROUGHPUT=999") || (l.contains("forged") && !l.contains("\\n")))
        .count();
    let sysname = lines
        .iter()
        .find(|l| l.starts_with("REMOTE_SYSNAME="))
        .copied()
        .unwrap_or("");
    eprintln!(
        "server_hardening: item 13: {throughput} THROUGHPUT line(s), {forged} forged; {sysname}"
    );
    assert!(out.status.success(), "{text}");
    assert_eq!(throughput, 1, "{text}");
    assert_eq!(forged, 0, "{text}");
    assert_eq!(sysname, "REMOTE_SYSNAME=Linux\\nTHROUGHPUT=999");
    assert!(!text.contains('\x1b'), "{text}");
}
