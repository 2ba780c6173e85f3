//! `--spin`: both ends' workers poll with non-blocking receives instead of
//! sleeping. Against a server in its own process (so that each end's CPU
//! is its own): a tcp_rr and a udp_rr run complete, both ends count the
//! same transactions, the mode is recorded (the spec and every worker's
//! driver on both ends) and said in the human output, and the client's
//! CPU shows the spinning; tests, drivers and server limits it does not
//! cover are refused naming the flag, and the server's budget of spinning
//! workers holds across sessions and clients.
//!
//! The CPU bound comes from what spinning is, not from a timing: a worker
//! that never sleeps is always runnable, and a work-conserving scheduler
//! leaves no CPU idle while a thread is runnable. So either the client
//! took at least half a CPU in the window, or the host had no idle CPU to
//! give it (other work took its share: this runs beside other builds).
//! And a thread that never sleeps makes no voluntary context switch: the
//! client's are its control and sampling threads' few per second, where a
//! sleeping worker makes one for most transactions.
//!
//! Runs alone (serial.rs's `ALONE`): two spinning workers take both CPUs
//! of a two-CPU machine.

use serde_json::Value;

use crate::common::{ServerProc, Thrum, drivers, f, u};

/// A spinning run of `test` against `server`: the counts agree, the mode
/// is recorded, the client's CPU shows the spin.
fn spins(server: &ServerProc, test: &str, extra: &[&str]) -> Value {
    let doc = Thrum::run(test)
        .on(server)
        .len("2s")
        // A response held up by a busy CPU is late, not lost.
        .args(["--spin", "--rr-timeout", "2s"])
        .args(extra)
        .json();
    let total = |end: &str, field: &str| u(&doc["summary"][end]["total"][field]);
    let done = total("local", "transactions");
    assert!(done > 0, "{test}: no transaction completed");
    assert_eq!(
        done,
        total("remote", "transactions"),
        "{test}: the server answered every request the client counted"
    );
    assert_eq!(doc["spec"]["spin"], true, "{test}");
    for key in ["local_drivers", "remote_drivers"] {
        assert_eq!(drivers(&doc, key), ["spin"], "{test}: {key}");
    }
    let local = &doc["summary"]["local"];
    let window = f(&local["window_s"]);
    let used = f(&local["rusage_window"]["user_s"]) + f(&local["rusage_window"]["system_s"]);
    let idle = f(&local["cpu"]["idle_percent"]);
    assert!(
        used >= 0.5 * window || idle < 10.0,
        "{test}: a spinning worker took {used:.3} CPU-s of a {window:.3} s window while the host's CPUs were {idle:.1} % idle"
    );
    // The control thread's and the sampler's wake-ups: a few per interval.
    let voluntary = u(&local["rusage_window"]["voluntary_switches"]);
    let allowance = (200.0 * window) as u64 + 50;
    assert!(
        voluntary <= allowance,
        "{test}: {voluntary} voluntary context switches in {window:.3} s ({done} transactions): a spinning worker does not sleep"
    );
    doc
}

#[test]
fn tcp_rr_and_udp_rr_spin_on_both_ends() {
    let server = ServerProc::start(&[]);
    spins(&server, "tcp_rr", &[]);
    let doc = spins(&server, "udp_rr", &["-r", "64,64"]);
    assert_eq!(u(&doc["summary"]["local"]["total"]["lost"]), 0, "udp_rr");
    let human = Thrum::run("tcp_rr")
        .on(&server)
        .len("1s")
        .arg("--spin")
        .stdout();
    assert!(human.contains("spinning (--spin"), "{human}");
    assert!(
        human.contains("client spin (1 thread), server spin"),
        "{human}"
    );
}

#[test]
fn spin_is_refused_where_it_does_not_apply() {
    for (args, needles) in [
        (
            &["tcp_stream", "--spin"][..],
            &["--spin", "tcp_rr and udp_rr", "tcp_stream"][..],
        ),
        (&["tcp_crr", "--spin"], &["--spin", "tcp_rr and udp_rr"]),
        (
            &["udp_rr", "--spin", "--rate", "1k"],
            &["--spin", "without --rate"],
        ),
        (
            &["tcp_rr", "--spin", "--driver", "uring"],
            &["--spin", "--driver auto or epoll"],
        ),
    ] {
        Thrum::run(args[0])
            .len("1s")
            .args(&args[1..])
            .refused(needles);
    }
    // The server spins no more workers than its operator allows.
    let server = ServerProc::start(&["--max-spin-threads", "1"]);
    Thrum::run("tcp_rr")
        .on(&server)
        .len("1s")
        .args(["--spin", "-F", "2", "-T", "2"])
        .refused(&["--spin", "--max-spin-threads", "limit of 1"]);
}

/// `--max-spin-threads` is the server's total, not one session's: while
/// one client's spinning session holds the only spinning worker of a
/// server allowed one, another process's spinning run is refused naming
/// the flag with what is in use and free, a run that does not spin is
/// still served, and once the first has ended a spinning run gets in
/// again.
///
/// The second client starts only once the first has streamed an
/// interval (its session is running, so its worker is reserved), and the
/// first lasts long enough for two short runs to start on a loaded
/// machine; the refusal's "spin 1 of the 1" shows it came while the first
/// held the worker. The server releases a session's reservation as its
/// session thread ends, a moment after the client has its result: so the
/// last run is retried while refused for the budget, for a few seconds.
#[test]
fn spinning_workers_are_a_budget_of_the_whole_server() {
    use std::io::{BufRead, BufReader, Read};
    use std::time::{Duration, Instant};

    let server = ServerProc::start(&["--max-spin-threads", "1"]);
    let spinning = || {
        Thrum::run("tcp_rr")
            .on(&server)
            .args(["--spin", "--rr-timeout", "2s"])
    };
    let mut first = spinning()
        .len("4s")
        .interval("200ms")
        .arg("--json-stream")
        .spawn();
    let mut out = BufReader::new(first.child.stdout.take().expect("stdout"));
    let mut line = String::new();
    loop {
        line.clear();
        let n = out.read_line(&mut line).expect("the first client's stdout");
        assert!(
            n > 0,
            "the first spinning run ended before its first interval"
        );
        if line.contains(r#""type":"interval""#) {
            break;
        }
    }
    let e = spinning().len("1s").refused(&[
        "--max-spin-threads",
        "the server's total of spinning workers",
        "spin 1 of the 1",
        "0 free",
    ]);
    assert!(e.contains("server busy"), "{e}");
    let plain = Thrum::run("tcp_rr").on(&server).len("500ms").json();
    assert!(u(&plain["summary"]["transactions"]) > 0, "{plain}");
    assert_ne!(plain["spec"]["spin"], true, "a run that does not spin");

    let mut rest = String::new();
    out.read_to_string(&mut rest)
        .expect("the first client's stdout");
    let ran = first.wait();
    assert!(ran.success(), "{}", ran.report());
    let last: Value = serde_json::from_str(rest.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("the first run's last line ({e}): {rest}"));
    assert_eq!(last["type"], "result", "{last}");
    assert!(u(&last["result"]["summary"]["transactions"]) > 0, "{last}");

    let since = Instant::now();
    let again = loop {
        let ran = spinning().len("500ms").arg("--json").output();
        if ran.success() || !ran.stderr().contains("--max-spin-threads") {
            break ran.json_ok();
        }
        assert!(
            since.elapsed() < Duration::from_secs(5),
            "the first session's spinning worker was not released: {}",
            ran.report()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(again["spec"]["spin"], true);
    assert!(u(&again["summary"]["transactions"]) > 0);
}

/// `--busy-poll` and `--prefer-busy-poll` reach both ends' data sockets
/// and come back as each end's kernel read them (as root any value is
/// taken; loopback has no NAPI, so no figure changes), beside `--spin`
/// too, which is the study's other half.
#[test]
fn busy_poll_is_read_back_on_both_ends() {
    let server = ServerProc::start(&[]);
    for (test, spin) in [("tcp_rr", false), ("udp_rr", false), ("udp_rr", true)] {
        let mut run = Thrum::run(test).on(&server).len("500ms").args([
            "--busy-poll",
            "50",
            "--prefer-busy-poll",
            "--rr-timeout",
            "2s",
        ]);
        if spin {
            run = run.arg("--spin");
        }
        let doc = run.json();
        let want = serde_json::json!({"busy_poll_us": 50, "prefer_busy_poll": true});
        for end in ["local", "remote"] {
            assert_eq!(doc["summary"][end]["busy_poll"], want, "{test}: {end}");
        }
        assert_eq!(doc["spec"]["prefer_busy_poll"], true, "{test}");
        assert!(u(&doc["summary"]["transactions"]) > 0, "{test}");
    }
    // Without either, nothing is claimed.
    let doc = Thrum::run("tcp_rr").on(&server).len("300ms").json();
    assert!(doc["summary"]["local"].get("busy_poll").is_none());
}

/// Values out of range are refused naming the flag and the range; a user
/// without CAP_NET_ADMIN is refused SO_PREFER_BUSY_POLL by the kernel,
/// and told so.
#[test]
fn bad_busy_poll_values_are_refused_by_name() {
    for v in ["0", "1000001"] {
        Thrum::run("tcp_rr")
            .len("1s")
            .args(["--busy-poll", v])
            .refused(&["--busy-poll", "1..=1000000"]);
    }
    Thrum::run("tcp_rr")
        .len("1s")
        .args(["--prefer-busy-poll", "--no-save"])
        .under(&[
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ])
        .refused(&["--prefer-busy-poll", "CAP_NET_ADMIN"]);
}

/// The busy-poll study in one command: spin off and on by busy polling
/// unset and 50 µs, four cells, each valid with transactions, named by
/// both dimensions, and its local CPU reported.
#[test]
fn sweep_varies_spin_and_busy_poll() {
    let server = ServerProc::start(&[]);
    let doc = Thrum::sweep("udp_rr")
        .on(&server)
        .args(["--vary", "spin=off,on", "--vary", "busy-poll=0,50"])
        .args(["--rr-timeout", "2s"])
        .len("300ms")
        .json();
    let cells = doc["cells"].as_array().expect("cells");
    let mut seen = Vec::new();
    for c in cells {
        assert_eq!(c["valid"], true, "{c}");
        assert!(f(&c["transactions_per_s"]) > 0.0, "{c}");
        assert!(f(&c["local_cpu_util_percent"]) > 0.0, "{c}");
        let p = &c["params"];
        seen.push((
            p["spin"].as_str().expect("spin").to_string(),
            u(&p["busy-poll"]),
        ));
    }
    seen.sort();
    let want: Vec<(String, u64)> = [("off", 0), ("off", 50), ("on", 0), ("on", 50)]
        .into_iter()
        .map(|(s, b)| (s.to_string(), b))
        .collect();
    assert_eq!(seen, want);
}
