//! Ctrl-C and SIGTERM: the run stops, and what was
//! measured is printed and written, marked `interrupted`, with exit status
//! 130; a second Ctrl-C exits at once; `agg` keeps the steps it completed,
//! `sweep` the cells it measured, `curve` its whole steps.
//!
//! Where a test must know the run is under way before it types Ctrl-C, it
//! watches the output (an interval, the progress line), never the clock: a
//! busy machine may take seconds to start a run.

use std::io::{BufRead, BufReader, Read};
use std::process::Child;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{ServerProc, Thrum, assert_schema, assert_schema_named, f, read_json};

fn kill(pid: u32, sig: i32) {
    // SAFETY: kill on a process this test started.
    assert_eq!(unsafe { libc::kill(pid as i32, sig) }, 0);
}

fn signal(child: &Child, sig: i32) {
    kill(child.id(), sig);
}

/// `run` with `--json-stream`, its stdout lines on a channel.
fn streaming(run: Thrum) -> (Child, mpsc::Receiver<String>) {
    let mut child = run.arg("--json-stream").spawn().child;
    let out = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

fn wait(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let t = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            panic!("thrum did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn stderr_of(child: &mut Child) -> String {
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    err
}

/// The result line of a `--json-stream` run's output, if it came.
fn result_line(lines: &[String]) -> Option<Value> {
    lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "result")
        .map(|v| v["result"].clone())
}

/// `run` on a terminal, Ctrl-C typed once it shows `under_way`: it must
/// exit 130 saying `error: interrupted`. Returns all it showed.
fn ctrl_c_once(run: Thrum, under_way: &str) -> String {
    let mut pty = run.pty();
    pty.wait_for(under_way, Duration::from_secs(60));
    pty.ctrl_c();
    let (status, text) = pty.finish(Duration::from_secs(60));
    assert_eq!(status.code(), Some(130), "{text}");
    assert!(text.contains("error: interrupted"), "{text}");
    text
}

/// A 30 s window, the signal after its first 0.5 s interval.
const PLANNED_S: f64 = 30.0;

/// The first signal stops the run early; the measured intervals and the
/// result, marked interrupted, still come, and the status is 130. SIGTERM
/// alike.
#[test]
fn a_signal_keeps_what_was_measured_and_exits_130() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        let (mut child, rx) = streaming(Thrum::run("tcp_rr").len("30s").interval("0.5s"));
        // One interval in: the run is under way.
        let first = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("a first interval");
        assert!(first.contains("\"interval\""), "{first}");
        let sent = Instant::now();
        signal(&child, sig);
        let status = wait(&mut child, Duration::from_secs(60));
        let after = sent.elapsed().as_secs_f64();
        let lines: Vec<String> = rx.iter().collect();
        let r = result_line(&lines).expect("the result line");
        assert_schema(&r);
        assert_eq!(r["summary"]["error"], "interrupted", "signal {sig}");
        assert!(!r["intervals"].as_array().unwrap().is_empty());
        assert!(
            r["summary"]["transactions"].as_u64().unwrap() > 0,
            "what was measured"
        );
        assert_eq!(status.code(), Some(130), "signal {sig}");
        // Stopped early: a run that waited out its plan would end no sooner
        // than the rest of its 30 s window after the signal, and its window
        // would be the whole 30 s. Stopping takes one tick and a loopback
        // drain (milliseconds); half the plan leaves a busy machine 14 s
        // for that, and no run that ignored the signal can get under it.
        assert!(
            after < PLANNED_S / 2.0,
            "signal {sig}: ended {after:.1} s after it"
        );
        let window = f(&r["summary"]["duration_s"]);
        assert!(
            window > 0.0 && window < PLANNED_S / 2.0,
            "signal {sig}: a window of {window} s of the planned {PLANNED_S}"
        );
        let err = stderr_of(&mut child);
        assert!(err.contains("error: interrupted"), "{err}");
    }
}

/// A second Ctrl-C does not wait for anything. The server is stopped
/// (SIGSTOP) before the first, so the drain after it cannot finish: no
/// flow reads its peer's EOF and no sample or final report comes. With one
/// signal the client keeps waiting until it gives the silent server up
/// (`SAMPLE_TIMEOUT`, 3 s after the first tick left unanswered), then
/// prints what it has, marked interrupted; a second signal ends it from
/// the handler, with 130 and nothing printed.
#[test]
fn a_second_signal_exits_at_once() {
    for second in [false, true] {
        let server = ServerProc::start(&[]);
        let (mut child, rx) = streaming(
            Thrum::run("tcp_rr")
                .host(&server.addr)
                .len("60s")
                .interval("0.2s"),
        );
        rx.recv_timeout(Duration::from_secs(30))
            .expect("a first interval");
        kill(server.pid(), libc::SIGSTOP);
        signal(&child, libc::SIGINT);
        // Still draining a second later: the tick whose answer we just read
        // was sent less than a second before we stopped the server, so the
        // client cannot give it up before 3 s - 1 s after the signal.
        std::thread::sleep(Duration::from_secs(1));
        assert!(
            child.try_wait().unwrap().is_none(),
            "one signal ended the run without the drain (second: {second})"
        );
        if second {
            signal(&child, libc::SIGINT);
        }
        let status = wait(&mut child, Duration::from_secs(60));
        kill(server.pid(), libc::SIGCONT);
        let lines: Vec<String> = rx.iter().collect();
        let err = stderr_of(&mut child);
        assert_eq!(status.code(), Some(130), "second {second}: {err}");
        match result_line(&lines) {
            // The second signal: out at once, from the handler.
            Some(r) if second => panic!("the second signal waited for the drain: {r}"),
            None if second => {}
            // One signal: the drain ran to its bound and what was measured
            // was printed, marked interrupted.
            Some(r) => {
                let e = r["summary"]["error"].as_str().unwrap();
                assert!(e.starts_with("interrupted"), "{e}");
                assert!(!r["intervals"].as_array().unwrap().is_empty());
                assert!(err.contains("error: interrupted"), "{err}");
            }
            None => panic!("one signal printed no result: {lines:?}\n{err}"),
        }
    }
}

/// Ctrl-C typed on a terminal: the human output of what was measured,
/// marked interrupted.
#[test]
fn ctrl_c_on_a_terminal_prints_what_was_measured() {
    // A row of the window: the run is under way.
    let text = ctrl_c_once(
        Thrum::run("tcp_rr").len("30s").interval("0.5s"),
        " measure ",
    );
    assert!(text.contains("-- summary over"), "{text}");
}

/// `-o FILE` after Ctrl-C holds the interrupted result: the measured
/// intervals, `summary.error` interrupted, a window shorter than planned.
#[test]
fn ctrl_c_writes_the_interrupted_result_to_the_output_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("out.json");
    // The progress line names the phase of the interval last reported.
    ctrl_c_once(
        Thrum::run("tcp_rr")
            .len("30s")
            .interval("0.5s")
            .args(["--json", "-o"])
            .arg(&file),
        "measure",
    );
    let r: Value = serde_json::from_slice(&std::fs::read(&file).expect("-o FILE written")).unwrap();
    assert_schema(&r);
    assert_eq!(r["summary"]["error"], "interrupted");
    assert!(!r["intervals"].as_array().unwrap().is_empty(), "{r}");
    // As in a_signal_keeps_what_was_measured_and_exits_130.
    let window = f(&r["summary"]["duration_s"]);
    assert!(window > 0.0 && window < PLANNED_S / 2.0, "{window} s");
}

/// agg stopped during its second step keeps the first, says so, and exits
/// 130. On the terminal its progress line shows elapsed and total time.
#[test]
fn agg_keeps_the_steps_it_completed() {
    let server = ServerProc::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("agg");
    // Three steps (1, 2, 4 streams) of 3 s: the line counts them and the
    // planned 9 s. Step 2 is drawn when it begins, that is once the first
    // step's 3 s have passed: from then on the first is complete.
    let text = ctrl_c_once(
        Thrum::cmd(&["agg", "--hosts", &server.addr, "--tests", "tps"])
            .args(["--burst", "1", "--step", "3s", "--max-streams", "4"])
            .arg("--out")
            .arg(&out_dir),
        "step 2/3",
    );
    assert!(text.contains("tps      ["), "no progress line: {text:?}");
    assert!(text.contains("s / 9s"), "no elapsed/total: {text:?}");
    let doc = read_json(&out_dir.join("results.json"));
    assert_schema_named(&doc, "thrum.agg.v1.json");
    let t = &doc["tests"][0];
    let steps = t["steps"].as_array().unwrap();
    assert!(!steps.is_empty() && steps.len() <= 3, "{t}");
    assert!(steps.iter().all(|s| s["complete"] == true), "{t}");
    if steps.len() < 3 {
        let w = t["warnings"].to_string();
        assert!(w.contains("interrupted: stopped after"), "{w}");
    }
}

/// sweep stopped by Ctrl-C prints the cells it measured, writes them to
/// `--export-json` (fewer than the grid), marks the cell it cut, and
/// exits 130.
#[test]
fn sweep_prints_and_writes_the_cells_it_measured() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sweep.json");
    // Cell 2 begins once cell 1 is measured; four cells of 2 s (the
    // default warm-up and the window) remain.
    let text = ctrl_c_once(
        Thrum::sweep("tcp_rr")
            .args(["--flows", "1,1,1,1,1,1"])
            .len("1s")
            .arg("--export-json")
            .arg(&file)
            .default_warmup(),
        "cell 2/6",
    );
    assert!(text.contains("rows burst, columns flows"), "{text}");
    let doc: Value = serde_json::from_slice(&std::fs::read(&file).expect("--export-json")).unwrap();
    let cells = doc["cells"].as_array().unwrap();
    assert!(
        (1..6).contains(&cells.len()),
        "{} cell(s) of 6: {doc}",
        cells.len()
    );
    assert!(
        cells[0]["transactions_per_s"].as_f64().unwrap() > 0.0,
        "{doc}"
    );
    // The cell Ctrl-C cut is kept and marked; the ones before it are whole.
    let (cut, whole) = cells.split_last().unwrap();
    assert_eq!(cut["interrupted"], true, "{doc}");
    assert!(
        whole.iter().all(|c| c.get("interrupted").is_none()),
        "{doc}"
    );
    assert!(whole.iter().all(|c| c["error"].is_null()), "{doc}");
    assert_eq!(doc["interrupted"], true, "{doc}");
    assert!(text.contains("cut ["), "{text}");
}

/// curve stopped by Ctrl-C analyses and writes the steps it completed,
/// marked interrupted, and exits 130; the step cut short is not kept.
#[test]
fn curve_keeps_the_steps_it_completed() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("curve");
    // Step 2 begins once step 1 is written: its line is on the terminal.
    let text = ctrl_c_once(
        Thrum::curve("tcp_rr")
            .args(["--rates", "100,200,300,400"])
            .len("2s")
            .arg("--out")
            .arg(&out_dir),
        "step 2/4",
    );
    assert!(text.contains("interrupted after"), "{text}");
    let doc = read_json(&out_dir.join("results.json"));
    assert_schema_named(&doc, "thrum.curve.v1.json");
    assert_eq!(doc["interrupted"], true, "{doc}");
    let steps = doc["steps"].as_array().unwrap();
    assert!((1..4).contains(&steps.len()), "{doc}");
    for s in steps {
        // Whole steps: every one kept its 2 s schedule at these low rates.
        assert!(s["error"].is_null(), "{s}");
        assert!(f(&s["achieved_per_s"]) > 0.0, "{s}");
    }
}
