//! How long a run takes: `--dry-run` prints the checked plan and its total
//! run time without connecting to anything, and `--timeout` ends a run at
//! a hard limit with what it measured until then.

use std::time::Duration;

use crate::common::{ServerProc, Thrum, assert_rejected, u};

/// `--dry-run` prints the checked plan (every field as key=value) and its
/// total run time, warm-up + measurement + cool-down times the runs, and
/// exits 0 without dialling the server: a listener given as `-H` is never
/// connected to.
#[test]
fn dry_run_prints_the_plan_and_its_run_time_without_connecting() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let text = Thrum::run("tcp_rr")
        .host(&addr)
        .flows(2)
        .len("3s")
        .warmup("500ms")
        .args(["--cooldown", "500ms", "--iterations", "2,2", "--mark", "7"])
        .arg("--dry-run")
        .timeout(Duration::from_secs(10))
        .stdout();
    for line in [
        "flows=2",
        "duration_ns=3000000000",
        "warmup_ns=500000000",
        "mark=7",
    ] {
        assert!(text.lines().any(|l| l == line), "no {line} in {text}");
    }
    assert!(
        text.contains(
            "total_run_time=8s (warm-up 500ms + measurement 3s + cool-down 500ms, 2 run(s)"
        ),
        "{text}"
    );
    assert_eq!(
        listener.accept().map(|_| ()).unwrap_err().kind(),
        std::io::ErrorKind::WouldBlock,
        "a dry run connects to nothing"
    );
    // The plan is checked: a bad one fails as a real run would.
    assert_rejected(&[(
        &["run", "udp_rr", "--tcp-tx-delay", "1ms", "--dry-run"],
        &["--tcp-tx-delay"],
    )]);
}

/// `--timeout`: a 10 s run under a 1 s limit stops at the limit (well
/// before its plan's end), writes what it measured and exits 1 with an
/// error naming the flag; a run inside its limit is untouched.
#[test]
fn timeout_ends_the_run_with_what_was_measured() {
    let server = ServerProc::start(&[]);
    let t0 = std::time::Instant::now();
    let out = Thrum::run("tcp_rr")
        .on(&server)
        .len("10s")
        .interval("250ms")
        .args(["--timeout", "1s", "--json"])
        .output();
    let took = t0.elapsed();
    assert_eq!(out.code(), Some(1), "{}", out.report());
    let stderr = out.stderr();
    assert!(stderr.contains("error: --timeout 1s"), "{stderr}");
    let doc = out.json();
    let error = doc["summary"]["error"].as_str().unwrap();
    assert!(
        error.contains("--timeout 1s") && error.contains("measured until then"),
        "{error}"
    );
    let intervals = doc["intervals"].as_array().unwrap();
    assert!(!intervals.is_empty(), "what was measured is kept");
    assert!(u(&doc["summary"]["transactions"]) > 0);
    // Stopped at the limit plus the drain, not at the plan's 10 s.
    assert!(took < Duration::from_secs(8), "took {took:?}");
    // A run inside its --timeout.
    Thrum::run("tcp_rr")
        .on(&server)
        .len("300ms")
        .args(["--timeout", "20s"])
        .json();
    assert_rejected(&[(
        &["run", "tcp_rr", "--timeout", "0s"],
        &["--timeout", "accepted"],
    )]);
}
