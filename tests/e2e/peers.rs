//! What a server gives and takes from clients it does not know (issue 28,
//! items 8, 9 and 11): its machine's details only to a client that proved
//! the key, the TOS of its replies only within the classes below CS6
//! unless its operator allows any, and its log at a bounded rate however
//! fast clients connect.

use std::time::Duration;

use serde_json::Value;

use crate::common::{ServerProc, json, run_client};

fn key_file(dir: &std::path::Path) -> String {
    let key = dir.join("key");
    std::fs::write(&key, "a key of at least sixteen bytes\n").unwrap();
    key.to_str().unwrap().to_string()
}

/// `thrum run tcp_rr` against `server` for 300 ms, `extra` added; the JSON.
fn tcp_rr(server: &ServerProc, extra: &[&str]) -> Value {
    let mut args = vec![
        "run",
        "tcp_rr",
        "-H",
        &server.addr,
        "-l",
        "300ms",
        "--warmup",
        "0s",
        "--json",
    ];
    args.extend(extra);
    let out = run_client(&args, Duration::from_secs(30));
    let doc = json(&out);
    assert!(out.status.success(), "{}", doc["summary"]["error"]);
    doc
}

/// Issue 28 item 8: `final.provenance` gave every client, keyed or not,
/// the server's command line, hostname, kernel build, CPU, sysctls and
/// NIC. Without a key it carries the version only.
#[test]
fn provenance_goes_only_to_a_client_that_proved_the_key() {
    let open = ServerProc::start(&[]);
    let p = tcp_rr(&open, &[])["provenance"]["remote"].clone();
    eprintln!("unkeyed: {p}");
    assert!(!p["thrum_version"].as_str().unwrap().is_empty(), "{p}");
    assert_eq!(p["command_line"], "", "{p}");
    for field in [
        "hostname",
        "kernel",
        "cpu_model",
        "cpus",
        "interface",
        "congestion_control",
    ] {
        assert!(p[field].is_null(), "{field}: {p}");
    }
    assert_eq!(p["sysctls"], serde_json::json!({}), "{p}");

    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path());
    let keyed = ServerProc::start(&["--psk-file", &key]);
    let p = tcp_rr(&keyed, &["--psk-file", &key])["provenance"]["remote"].clone();
    assert!(
        p["command_line"].as_str().unwrap().contains("--psk-file"),
        "{p}"
    );
    assert!(
        p["kernel"].is_object() && p["interface"]["name"] == "lo",
        "{p}"
    );
}

/// Issue 28 item 9: a mix part with `tos=255` made the server's replies
/// carry DSCP 63 and ECN CE, and CS6/CS7 were taken too. A server takes
/// DSCP classes below CS6 with the ECN bits clear, unless its operator
/// says `--allow-tos-any`; the refusal names the field.
#[test]
fn a_server_takes_only_tos_below_cs6_unless_allowed() {
    let server = ServerProc::start(&[]);
    let run = |server: &ServerProc, extra: &[&str]| {
        let mut args = vec!["run", "-H", &server.addr, "-l", "300ms", "--warmup", "0s"];
        args.extend(extra);
        run_client(&args, Duration::from_secs(30))
    };
    for (extra, named) in [
        (
            &["--mix", "tcp_rr@tos=255"][..],
            "part 'tcp_rr' tos 0xff (DSCP 63, ECN 3)",
        ),
        (
            &["tcp_rr", "--tos", "CS6"][..],
            "--tos 0xc0 (DSCP 48, ECN 0)",
        ),
        (&["tcp_rr", "--tos", "224"][..], "--tos 0xe0"),
        (&["tcp_rr", "--tos", "1"][..], "--tos 0x01 (DSCP 0, ECN 1)"),
    ] {
        let out = run(&server, extra);
        let err = String::from_utf8_lossy(&out.stderr);
        eprintln!("{extra:?}: {err}");
        assert!(!out.status.success(), "{extra:?}");
        assert!(
            err.contains(named) && err.contains("--allow-tos-any"),
            "{extra:?}: {err}"
        );
    }
    for extra in [
        &["tcp_rr", "--tos", "EF"][..],
        &["--mix", "tcp_rr@dscp=CS5"][..],
    ] {
        let out = run(&server, extra);
        assert!(
            out.status.success(),
            "{extra:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let any = ServerProc::start(&["--allow-tos-any"]);
    let out = run(&any, &["--mix", "tcp_rr@tos=255"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
