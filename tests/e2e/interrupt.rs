//! Ctrl-C and SIGTERM (issue 20, item 3): the run stops, and what was
//! measured is printed and written, marked `interrupted`, with exit status
//! 130; a second Ctrl-C exits at once; `agg` keeps the steps it completed.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{ServerProc, assert_schema, assert_schema_named, bin};

fn signal(child: &Child, sig: i32) {
    // SAFETY: kill on a child we own.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
}

/// `thrum run ... --json-stream`, its stdout lines on a channel.
fn streaming(args: &[&str]) -> (Child, mpsc::Receiver<String>) {
    let mut child = Command::new(bin())
        .args(args)
        .arg("--json-stream")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
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

/// The first signal stops the run; the measured intervals and the result,
/// marked interrupted, still come, and the status is 130. SIGTERM alike.
#[test]
fn a_signal_keeps_what_was_measured_and_exits_130() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        let (mut child, rx) =
            streaming(&["run", "tcp_rr", "-l", "3s", "--warmup", "0s", "-i", "0.5s"]);
        // One interval in: the run is under way.
        let first = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("a first interval");
        assert!(first.contains("\"interval\""), "{first}");
        signal(&child, sig);
        let status = wait(&mut child, Duration::from_secs(60));
        let lines: Vec<String> = rx.iter().collect();
        let last: Value = serde_json::from_str(lines.last().expect("the result line")).unwrap();
        let r = &last["result"];
        assert_schema(r);
        assert_eq!(r["summary"]["error"], "interrupted", "signal {sig}");
        assert!(!r["intervals"].as_array().unwrap().is_empty());
        assert!(
            r["summary"]["transactions"].as_u64().unwrap() > 0,
            "what was measured"
        );
        assert_eq!(status.code(), Some(130), "signal {sig}");
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        assert!(err.contains("error: interrupted"), "{err}");
    }
}

/// A second Ctrl-C does not wait for anything: the process ends long
/// before the 60 s it was asked to run.
#[test]
fn a_second_signal_exits_at_once() {
    let (mut child, rx) =
        streaming(&["run", "tcp_rr", "-l", "60s", "--warmup", "0s", "-i", "0.2s"]);
    rx.recv_timeout(Duration::from_secs(30))
        .expect("a first interval");
    let t = Instant::now();
    signal(&child, libc::SIGINT);
    std::thread::sleep(Duration::from_millis(100));
    signal(&child, libc::SIGINT);
    let status = wait(&mut child, Duration::from_secs(120));
    assert_eq!(status.code(), Some(130));
    assert!(
        t.elapsed() < Duration::from_secs(60),
        "it waited for the run: {:?}",
        t.elapsed()
    );
}

/// Ctrl-C typed on a terminal (a pseudo-terminal through `script`): the
/// human output of what was measured, marked interrupted.
#[test]
fn ctrl_c_on_a_terminal_prints_what_was_measured() {
    let mut child = Command::new("script")
        .args([
            "-qec",
            &format!("{} run tcp_rr -l 3s --warmup 0s -i 0.5s", bin()),
            "/dev/null",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("script(1) from util-linux");
    let mut out = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = out.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    // The progress line shows an interval: the run is under way.
    let mut seen = Vec::new();
    let t = Instant::now();
    while !String::from_utf8_lossy(&seen).contains("measure") {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "no progress: {seen:?}"
        );
        if let Ok(b) = rx.recv_timeout(Duration::from_millis(100)) {
            seen.extend(b);
        }
    }
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"\x03").unwrap();
    stdin.flush().unwrap();
    let status = wait(&mut child, Duration::from_secs(60));
    drop(stdin);
    for b in rx.iter() {
        seen.extend(b);
    }
    let text = String::from_utf8_lossy(&seen);
    assert!(text.contains("-- summary over"), "{text}");
    assert!(text.contains("error: interrupted"), "{text}");
    assert_eq!(status.code(), Some(130), "{text}");
}

/// agg stopped after its first step keeps that step, says so, and exits 130.
#[test]
fn agg_keeps_the_steps_it_completed() {
    let _g = crate::common::one_at_a_time();
    let server = ServerProc::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("agg");
    let mut child = Command::new(bin())
        .args([
            "agg",
            "--hosts",
            &server.addr,
            "--tests",
            "tps",
            "--burst",
            "1",
            "--step",
            "3s",
            "--max-streams",
            "4",
            "--out",
        ])
        .arg(&out_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Within the ramp of three 3 s steps; where exactly does not matter.
    std::thread::sleep(Duration::from_secs(4));
    signal(&child, libc::SIGINT);
    let status = wait(&mut child, Duration::from_secs(60));
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(status.code(), Some(130), "{err}");
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("results.json")).unwrap())
            .unwrap();
    assert_schema_named(&doc, "thrum.agg.v1.json");
    let t = &doc["tests"][0];
    let steps = t["steps"].as_array().unwrap();
    assert!(!steps.is_empty() && steps.len() <= 3, "{t}");
    assert!(steps.iter().all(|s| s["complete"] == true), "{t}");
    if steps.len() < 3 {
        let w = t["warnings"].to_string();
        assert!(w.contains("interrupted: stopped after"), "{w}");
    }
    assert!(err.contains("error: interrupted"), "{err}");
}

/// sweep stopped by Ctrl-C prints the cells it measured and exits 130.
#[test]
fn sweep_prints_the_cells_it_measured() {
    let mut child = Command::new(bin())
        .args(["sweep", "tcp_rr", "--flows", "1,1,1,1,1,1", "-l", "1s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Within the six cells of 2 s each; where exactly does not matter.
    std::thread::sleep(Duration::from_millis(2500));
    signal(&child, libc::SIGINT);
    let status = wait(&mut child, Duration::from_secs(60));
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert_eq!(status.code(), Some(130), "{out}");
    assert!(out.contains("rows burst, columns flows"), "{out}");
}
