//! Scale: 10,000 concurrent tcp_rr flows on 2 threads per end, against a
//! separate server process (the embedded server would need 20,000 sockets
//! in one process, above a common hard RLIMIT_NOFILE of 20,000).
//!
//! A count-limited run (`-n`), so that the test does not depend on how fast
//! a shared machine is: every flow must complete exactly its share, and the
//! run ends when all have.

use std::time::Duration;

use std::process::Command;

use serde_json::Value;

use crate::common::{
    Netns, Ran, SESSION_CODES, ServerProc, Thrum, assert_schema, diagnostics_of, ns_exec, run_cmd,
    run_ok, u,
};

const FLOWS: usize = 10_000;
const PER_FLOW: u64 = 3;

#[test]
fn ten_thousand_tcp_rr_flows_each_complete_their_share() {
    // A server takes 1024 flows per session unless told otherwise.
    // Its 10,000 connections' TIME_WAIT in a namespace of their own
    // (`ServerProc::isolated`).
    let server = ServerProc::isolated("scale-10k", &["--max-flows", "10000"]);
    let n = (FLOWS as u64 * PER_FLOW).to_string();
    let flows = FLOWS.to_string();
    let doc = Thrum::run("tcp_rr")
        .on(&server)
        .args(["-F", &flows, "-T", "2", "-n", &n])
        .timeout(Duration::from_secs(60))
        .json();
    let s = &doc["summary"];
    assert_schema(&doc);
    // No warning from the session itself (file limits, the server, missing
    // samples, undrained workers); warnings about the machine (busy CPUs,
    // packets on lo) are expected with both CPUs flat out.
    let session = diagnostics_of(&doc, &[&SESSION_CODES[..], &["descriptor_limit"]].concat());
    assert!(session.is_empty(), "{session:?}");

    // Exactly N in the window, and the ends agree on everything after the drain.
    assert_eq!(u(&s["transactions"]), FLOWS as u64 * PER_FLOW);
    let (l, r) = (&s["local"]["total"], &s["remote"]["total"]);
    assert_eq!(u(&l["transactions"]), u(&r["transactions"]));
    assert_eq!(u(&l["bytes_sent"]), u(&r["bytes_received"]));
    assert_eq!(u(&r["bytes_sent"]), u(&l["bytes_received"]));

    every_flow_completes(&doc, FLOWS, PER_FLOW, &["local", "remote"]);

    // Set-up time and both ends' memory are reported.
    assert!(
        s["setup_s"].as_f64().is_some_and(|t| t > 0.0),
        "setup_s {}",
        s["setup_s"]
    );
    for end in ["local", "remote"] {
        assert!(u(&s[end]["rusage"]["max_rss_kb"]) > 0, "{end} max RSS");
    }
}

/// Every one of `flows` flows completed exactly `share` transactions, on
/// each of `ends`, by the per-flow counts of the intervals.
fn every_flow_completes(doc: &Value, flows: usize, share: u64, ends: &[&str]) {
    for &end in ends {
        let mut per_flow = vec![0u64; flows];
        for iv in doc["intervals"].as_array().expect("intervals") {
            let counts = iv[end].as_array().expect("per-flow counts");
            assert_eq!(counts.len(), flows, "{end}: one count per flow");
            for (i, c) in counts.iter().enumerate() {
                per_flow[i] += u(&c["transactions"]);
            }
        }
        let wrong: Vec<usize> = (0..flows).filter(|&i| per_flow[i] != share).collect();
        assert!(
            wrong.is_empty(),
            "{end}: {} flows did not complete {share} transactions, e.g. flow {} with {}",
            wrong.len(),
            wrong[0],
            per_flow[wrong[0]]
        );
    }
}

/// Past one address's ports: in a namespace whose ephemeral range is 500
/// ports, 1,500 flows cannot each have a port of one address, yet every
/// flow must run. Long-lived TCP connections to one server port need 1,500
/// client ports to that destination, which `connect` can only find among
/// the 500 (it fails with EADDRNOTAVAIL at the 501st): the client must
/// spread them over several server listeners. UDP flows need 3,000 bound
/// ports on one host (1,500 a side): both ends must go on to further
/// loopback addresses. Count-limited, so every flow's share is exact.
#[test]
fn flows_spread_past_a_narrow_ephemeral_range() {
    const FLOWS: usize = 1_500;
    const PER_FLOW: u64 = 2;
    let Some(ns) = Netns::loopback_only("ports") else {
        return;
    };
    run_ok(ns_exec(&ns.0, "sysctl").args(["-qw", "net.ipv4.ip_local_port_range=40000 40499"]));
    let server = ServerProc::start_with(
        ns_exec(&ns.0, crate::common::bin()),
        "127.0.0.1",
        // 1,500 UDP sockets of 500 ports' range: past the server's default
        // --max-ports (a quarter of the range), on purpose here.
        &[
            "--max-flows",
            "2000",
            "--max-ports",
            "4000",
            "--max-ports-per-client",
            "4000",
        ],
    );
    let flows = FLOWS.to_string();
    let n = (FLOWS as u64 * PER_FLOW).to_string();
    // 1,500 flows' first requests go out at once: on a busy machine (or a
    // debug build) some answers take longer than udp_rr's default 50 ms
    // --rr-timeout, which would count them lost and send again.
    let wait = ["--rr-timeout", "5s"];
    for (test, extra) in [("tcp_rr", &[][..]), ("udp_rr", &wait[..])] {
        let doc = Thrum::run(test)
            .netns(&ns.0)
            .host(&server.addr)
            .args(["-F", &flows, "-T", "2", "-n", &n])
            .args(extra)
            .timeout(Duration::from_secs(60))
            .json();
        let s = &doc["summary"];
        let session = diagnostics_of(&doc, &SESSION_CODES);
        assert!(session.is_empty(), "{test}: {session:?}");
        assert_eq!(u(&s["transactions"]), FLOWS as u64 * PER_FLOW, "{test}");
        let (l, r) = (&s["local"]["total"], &s["remote"]["total"]);
        assert_eq!(u(&l["transactions"]), u(&r["transactions"]), "{test}");
        // The udp_rr server counts a transaction once its response is
        // sent, so the last responses of the window can reach the client
        // (which then ends it) before the server has counted them: they
        // fall in the drain, and only the totals above must agree.
        let ends: &[&str] = if test == "udp_rr" {
            &["local"]
        } else {
            &["local", "remote"]
        };
        every_flow_completes(&doc, FLOWS, PER_FLOW, ends);
    }
}

/// A copy of the binary in a directory anyone may enter (made with a
/// random name, so no one can have planted it), removed on drop.
struct OpenCopy(tempfile::TempDir);

impl OpenCopy {
    fn new() -> OpenCopy {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::Builder::new()
            .prefix("thrum-limited-")
            .tempdir()
            .unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::copy(crate::common::bin(), dir.path().join("thrum")).unwrap();
        OpenCopy(dir)
    }
}

/// `thrum` (the copy) with an open-file limit of 1,000 (`prlimit`) that it
/// may not raise: as root, run as nobody (`setpriv`).
fn limited(copy: &OpenCopy, args: &[&str]) -> Command {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let mut cmd = if unsafe { libc::geteuid() } == 0 {
        let mut c = Command::new("setpriv");
        c.args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "prlimit",
        ]);
        c
    } else {
        Command::new("prlimit")
    };
    cmd.arg("--nofile=1000:1000")
        .arg(copy.0.path().join("thrum"))
        .args(args);
    cmd
}

/// Every flow holds a socket at each end: 2,000 flows cannot run in a
/// process allowed 1,000 descriptors that may not raise its hard limit.
/// Either end says so before it opens a socket, naming the flag and the
/// limit, instead of failing at the flow that hits it; a server that
/// refused still serves.
#[test]
fn flows_past_the_descriptor_limit_are_refused_up_front_by_either_end() {
    let copy = OpenCopy::new();
    let refused = |out: &Ran, flag: &str| {
        assert!(!out.success());
        let e = out.json()["summary"]["error"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(
            e.contains(flag) && e.contains("RLIMIT_NOFILE") && e.contains("1000"),
            "{e}"
        );
    };
    // The client's limit.
    let server = ServerProc::start(&["--max-flows", "2000"]);
    let args = ["-H", &server.addr, "-F", "2000", "-l", "1", "--json"];
    let out = run_cmd(
        &mut limited(&copy, &[&["run", "tcp_rr"][..], &args].concat()),
        Duration::from_secs(30),
    );
    refused(&out, "-F 2000");
    // The server's: UDP sockets are the server's to open first. One client
    // may hold them all here, or its share of the ports (a quarter by
    // default) would refuse the test before the descriptor limit does.
    let server = ServerProc::start_with(
        limited(&copy, &[]),
        "127.0.0.1",
        &["--max-flows", "2000", "--max-ports-per-client", "2000"],
    );
    let args = ["-H", &server.addr, "-F", "2000", "-l", "1", "--json"];
    let out = Thrum::cmd(&["run", "udp_rr"]).args(args).output();
    refused(&out, "--flows 2000");
    crate::common::assert_serves(&server);
}
