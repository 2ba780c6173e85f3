//! While a test runs (issue 20, item 6): each interval's row in the human
//! output as it completes, the summary after; on a terminal a progress
//! line with elapsed and total time, kept off the rows.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::{bin, run_cmd};

/// The first row comes while the test still runs: read it, and the process
/// has seconds of its window left.
#[test]
fn interval_rows_come_as_each_interval_completes() {
    let mut child = Command::new(bin())
        .args(["run", "tcp_rr", "-l", "4s", "--warmup", "0s", "-i", "0.5s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    let row = loop {
        let l = lines.next().expect("a row before the end").unwrap();
        seen.push(l.clone());
        if l.contains(" measure ") {
            break l;
        }
    };
    assert!(
        child.try_wait().unwrap().is_none(),
        "the row {row:?} came only when the run ended"
    );
    assert!(seen[0].starts_with("tcp_rr to embedded"), "{seen:?}");
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    assert!(child.wait().unwrap().success());
    // Each row once, the summary after the last.
    let all: Vec<&String> = seen.iter().chain(&rest).collect();
    let rows = all.iter().filter(|l| l.contains(" measure ")).count();
    assert!(rows >= 7, "{all:?}");
    let summary = all
        .iter()
        .position(|l| l.starts_with("-- summary"))
        .unwrap();
    assert!(
        all[summary..].iter().all(|l| !l.contains(" measure ")),
        "{all:?}"
    );
    assert_eq!(all.iter().filter(|l| l.contains("start_s")).count(), 1);
}

/// On a terminal (a pseudo-terminal through `script`) the progress line
/// shows elapsed of total time, and is cleared before each row.
#[test]
fn the_progress_line_shows_elapsed_and_total_time() {
    let out = run_cmd(
        Command::new("script").args([
            "-qec",
            &format!("{} run tcp_rr -l 2s --warmup 1s -i 0.5s", bin()),
            "/dev/null",
        ]),
        Duration::from_secs(60),
    );
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(" / 3.0s"), "no elapsed/total: {text:?}");
    assert!(text.contains("tcp_rr ["), "{text:?}");
    // Every row starts a clean line: the progress line was cleared first
    // (a row glued to it would not start the line's last segment).
    let rows = text
        .split("\r\n")
        .map(|l| l.rsplit("\x1b[2K").next().unwrap().trim_start())
        .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()) && l.contains(" measure "))
        .count();
    assert!(rows >= 4, "rows mixed with the progress line: {text:?}");
    // Not on a terminal: no progress line at all.
    let plain = run_cmd(
        Command::new(bin()).args(["run", "tcp_rr", "-l", "0.5s", "--warmup", "0s"]),
        Duration::from_secs(30),
    );
    assert!(!String::from_utf8_lossy(&plain.stderr).contains('\r'));
}
