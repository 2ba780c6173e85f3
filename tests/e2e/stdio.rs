//! Where output goes: results on stdout,
//! everything else on stderr; no table for a run that measured nothing;
//! quiet by default, the CPU-source and packet notes with -c/-C/-v, all of
//! them in JSON and key=value; files beside the terminal output with
//! `--export-*`, and `--json` a switch everywhere.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::common::{ServerProc, Thrum, read_json};

/// The codes of the warnings the default human output leaves to -c, -C,
/// --cpu and -v (`cmd::run::shown`).
const QUIET: [&str; 3] = [
    "service_demand_disagrees",
    "cpu_busy_elsewhere",
    "packets_part_from_transactions",
];

/// Threads of the test process that keep the CPUs busy until dropped:
/// work outside thrum, which `cpu_busy_elsewhere` is about.
struct Spin {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Spin {
    fn start(n: usize) -> Spin {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..n)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        Spin { stop, threads }
    }
}

impl Drop for Spin {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

#[test]
fn results_on_stdout_everything_else_on_stderr() {
    // A server that cannot be reached: no zero-filled table, the error on stderr.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = closed.local_addr().unwrap().to_string();
    drop(closed);
    let out = Thrum::cmd(&["run", "tcp_rr", "-H", &addr, "-l", "0.3s"]).fails();
    assert!(out.stdout.is_empty(), "stdout: {}", out.stdout());
    let err = out.stderr();
    assert!(err.starts_with("error: cannot reach"), "{err}");

    // A --rate no sender reaches gives a warning that is always said: on stderr.
    let out = Thrum::run("udp_stream")
        .len("0.3s")
        .args(["--rate", "1T"])
        .ok();
    let (so, se) = (out.stdout(), out.stderr());
    assert!(so.contains("-- summary over"), "{so}");
    assert!(
        !so.contains("warning") && !so.contains("error"),
        "stdout: {so}"
    );
    assert!(se.contains("warning: --rate asked for"), "stderr: {se}");
}

/// The same run gives its human output on the terminal and its JSON in a
/// file: every warning is in the JSON with its code and in key=value, and
/// the human output says only those not left to -c/-C/--cpu/-v. A quiet
/// warning is forced: two threads of this process spin through every run,
/// so /proc/stat sees the CPUs busy beyond thrum's own time. On two CPUs
/// beside thrum's three busy threads (client worker and control, server
/// worker) the scheduler's fair share gives them at least 2 x 2/5 of a
/// CPU, 40 % of the machine; tick-based /proc/stat undercounting by a third
/// leaves over 25 %, well above the 10 % that raises `cpu_busy_elsewhere`.
/// More load on a busy machine only adds to it.
#[test]
fn quiet_by_default_and_everything_in_the_files() {
    let server = ServerProc::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let (j1, j2, kv, csv) = (
        dir.path().join("a.json"),
        dir.path().join("b.json"),
        dir.path().join("r.kv"),
        dir.path().join("r.csv"),
    );
    let _spin = Spin::start(2);
    for flag in [None, Some("-c"), Some("-C"), Some("--cpu"), Some("-v")] {
        let out = Thrum::run("tcp_rr")
            .host(&server.addr)
            .len("1s")
            .arg("--export-json")
            .arg(&j1)
            .arg("--export-json")
            .arg(&j2)
            .arg("--export-keyval")
            .arg(&kv)
            .arg("--export-csv")
            .arg(&csv)
            .args(flag)
            .ok();
        let (so, se) = (out.stdout(), out.stderr());
        assert!(
            so.contains("transactions/s"),
            "the terminal output is human: {so}"
        );
        let doc = read_json(&j1);
        assert_eq!(std::fs::read(&j1).unwrap(), std::fs::read(&j2).unwrap());
        crate::common::assert_schema(&doc);
        let busy = crate::common::diagnostics(&doc, "cpu_busy_elsewhere");
        assert!(
            !busy.is_empty(),
            "{flag:?}: no cpu_busy_elsewhere with the CPUs spinning: {}",
            doc["summary"]["diagnostics"]
        );
        let diagnostics = doc["summary"]["diagnostics"].as_array().unwrap();
        for d in diagnostics {
            let (code, message) = (d["code"].as_str().unwrap(), d["message"].as_str().unwrap());
            let said = se.contains(&format!("warning: {message}"));
            let quiet = QUIET.contains(&code);
            assert_eq!(
                said,
                flag.is_some() || !quiet,
                "{code}: {message:?}\n{}",
                out.report()
            );
        }
        // key=value carries them all, on one line, in the JSON's order.
        let messages: Vec<&str> = diagnostics
            .iter()
            .map(|d| d["message"].as_str().unwrap())
            .collect();
        let kvs = std::fs::read_to_string(&kv).unwrap();
        let line = kvs
            .lines()
            .find(|l| l.starts_with("WARNINGS="))
            .expect("WARNINGS=");
        assert_eq!(line, format!("WARNINGS={}", messages.join(" | ")));
        assert!(line.contains(&busy[0]), "{line}");
        let csv = std::fs::read_to_string(&csv).unwrap();
        assert!(csv.lines().count() >= 2, "{csv}");
    }
    // `--json FILE` is answered with the way to write a file.
    let err = Thrum::cmd(&["run", "tcp_rr", "--json", "out.json"])
        .timeout(Duration::from_secs(10))
        .fails()
        .stderr();
    assert!(err.contains("--export-json out.json"), "{err}");
}
