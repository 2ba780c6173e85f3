//! Soak: 500 back-to-back short tests against one server, every test type
//! in turn. The server's open descriptors and resident memory after the
//! last must equal those after the first ten: nothing a session takes may
//! outlive it.

use std::time::{Duration, Instant};

use thrum::control::client::{Quiet, Target, run};
use thrum::plan::{TestKind, TestPlan};

use crate::common::ServerProc;

const TESTS: usize = 500;
const FIRST: usize = 10;
/// Resident memory may still move a little: glibc's arenas and the kernel's
/// page accounting are not byte-exact. Measured: +0.8 MiB over 490 tests,
/// in steps of about 0.5 MiB with flat stretches between them (a cache
/// filling, not a leak, which would grow with every test). A leak of 8 KiB
/// per test would add 3.8 MiB.
const RSS_SLACK_KB: u64 = 2 << 10;

#[test]
fn five_hundred_short_tests_leak_nothing() {
    let server = ServerProc::start(&[]);
    let target = Target {
        addr: server.addr.parse().unwrap(),
        label: server.addr.clone(),
        bind: None,
        embedded: false,
        psk: None,
        wait: None,
    };
    let started = Instant::now();
    let mut after_first = (0, 0);
    for i in 0..TESTS {
        let test = TestKind::ALL[i % TestKind::ALL.len()];
        let mut plan = TestPlan::new(test);
        plan.duration_ns = 50_000_000;
        plan.warmup_ns = 0;
        plan.interval_ns = 50_000_000;
        if test == TestKind::UdpRr {
            // A busy CPU must not read as loss (see loopback's udp_rr test).
            plan.rr_timeout_ns = 2_000_000_000;
        }
        let r = run(&target, &plan, &mut Quiet);
        assert!(
            r.summary.error.is_none(),
            "test {i} ({test}): {:?}",
            r.summary.error
        );
        if (i + 1) % 100 == 0 {
            // The trend, for the reader: a leak grows steadily, a cache does not.
            eprintln!(
                "soak: after {} tests: fds {}, RSS {} KiB",
                i + 1,
                server.open_fds(),
                server.rss_kb()
            );
        }
        if i + 1 == FIRST {
            // The server's session thread may still be closing its sockets.
            std::thread::sleep(Duration::from_millis(200));
            after_first = (server.open_fds(), server.rss_kb());
        }
    }
    let (fds10, rss10) = after_first;
    assert!(
        server.fds_return_to(fds10, Duration::from_secs(5)),
        "server holds {} fds after {TESTS} tests, {fds10} after the first {FIRST}",
        server.open_fds()
    );
    let rss = server.rss_kb();
    eprintln!(
        "soak: {TESTS} tests in {:.1?}; fds {fds10} -> {}, RSS {rss10} KiB -> {rss} KiB",
        started.elapsed(),
        server.open_fds()
    );
    assert!(
        rss <= rss10 + RSS_SLACK_KB,
        "RSS {rss} KiB after {TESTS} tests, {rss10} KiB after the first {FIRST}"
    );
}
