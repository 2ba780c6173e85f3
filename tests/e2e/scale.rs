//! Scale: 10,000 concurrent tcp_rr flows on 2 threads per end, against a
//! separate server process (the embedded server would need 20,000 sockets
//! in one process, above a common hard RLIMIT_NOFILE of 20,000).
//!
//! A count-limited run (`-n`), so that the test does not depend on how fast
//! a shared machine is: every flow must complete exactly its share, and the
//! run ends when all have.

use std::time::Duration;

use crate::common::{
    SESSION_CODES, ServerProc, assert_schema, diagnostics_of, json, one_at_a_time, run_client, u,
};

const FLOWS: usize = 10_000;
const PER_FLOW: u64 = 3;

#[test]
fn ten_thousand_tcp_rr_flows_each_complete_their_share() {
    // Both CPUs flat out while it runs: not beside the tests that assume
    // the CPUs keep up.
    let _solo = one_at_a_time();
    // A server takes 1024 flows per session unless told otherwise.
    let server = ServerProc::start(&["--max-flows", "10000"]);
    let n = (FLOWS as u64 * PER_FLOW).to_string();
    let flows = FLOWS.to_string();
    let out = run_client(
        &[
            "run",
            "tcp_rr",
            "-H",
            &server.addr,
            "-F",
            &flows,
            "-T",
            "2",
            "-n",
            &n,
            "--json",
        ],
        Duration::from_secs(60),
    );
    let doc = json(&out);
    let s = &doc["summary"];
    assert!(
        out.status.success(),
        "exit {:?}, error {}",
        out.status,
        s["error"]
    );
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

    // Every flow ran and completed exactly its share, on both ends.
    for end in ["local", "remote"] {
        let mut per_flow = vec![0u64; FLOWS];
        for iv in doc["intervals"].as_array().expect("intervals") {
            let flows = iv[end].as_array().expect("per-flow counts");
            assert_eq!(flows.len(), FLOWS, "{end}: one count per flow");
            for (i, c) in flows.iter().enumerate() {
                per_flow[i] += u(&c["transactions"]);
            }
        }
        let wrong: Vec<usize> = (0..FLOWS).filter(|&i| per_flow[i] != PER_FLOW).collect();
        assert!(
            wrong.is_empty(),
            "{end}: {} flows did not complete {PER_FLOW} transactions, e.g. flow {} with {}",
            wrong.len(),
            wrong[0],
            per_flow[wrong[0]]
        );
    }

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
