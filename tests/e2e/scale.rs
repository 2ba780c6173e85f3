//! Scale: 10,000 concurrent tcp_rr flows on 2 threads per end, against a
//! separate server process (the embedded server would need 20,000 sockets
//! in one process, above a common hard RLIMIT_NOFILE of 20,000).

use crate::common::{ServerProc, one_at_a_time, u};
use crate::loopback::run_and_check;

const FLOWS: u32 = 10_000;

#[test]
fn ten_thousand_tcp_rr_flows_all_run_and_add_up() {
    // Two seconds of both CPUs flat out: not beside the tests that assume
    // the CPUs keep up.
    let _solo = one_at_a_time();
    let server = ServerProc::start(&[]);
    // Everything run_and_check asserts for any test: conservation on both
    // ends, per-flow counts adding up to each interval's sum, intervals
    // tiling the window, the schema.
    let doc = run_and_check(&server, "tcp_rr", FLOWS, 2);
    let s = &doc["summary"];
    assert_eq!(
        s["warnings"].as_array().map(Vec::len),
        Some(0),
        "warnings: {}",
        s["warnings"]
    );
    // Every flow ran: each completed transactions over the whole test.
    let ivs = doc["intervals"].as_array().expect("intervals");
    let mut per_flow = vec![0u64; FLOWS as usize];
    for iv in ivs {
        for (i, c) in iv["local"].as_array().expect("local").iter().enumerate() {
            per_flow[i] += u(&c["transactions"]);
        }
    }
    let idle: Vec<usize> = (0..per_flow.len()).filter(|&i| per_flow[i] == 0).collect();
    assert!(
        idle.is_empty(),
        "{} flows never completed a transaction, first {:?}",
        idle.len(),
        &idle[..idle.len().min(10)]
    );
    // Set-up time and both ends' memory are reported.
    assert!(
        s["setup_s"].as_f64().is_some_and(|t| t > 0.0),
        "setup_s {}",
        s["setup_s"]
    );
    for end in ["local", "remote"] {
        let rss = u(&s[end]["rusage"]["max_rss_kb"]);
        assert!(rss > 0, "{end} max RSS {rss} kB");
    }
    drop(server);
}
