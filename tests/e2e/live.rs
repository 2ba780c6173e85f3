//! While a test runs: each interval's row in the human output as it
//! completes (with `--timestamps`, starting with the wall-clock time it
//! ended), the summary after; on a terminal a progress line with elapsed
//! and total time, kept off the rows.

use std::time::{Duration, Instant};

use crate::common::{ServerProc, Thrum, read_json};

/// The terminal's lines as a reader sees them: each line's text after the
/// last erase code (the progress line drawn and cleared before it).
fn screen_lines(text: &str) -> Vec<&str> {
    text.split("\r\n")
        .map(|l| l.rsplit("\x1b[2K").next().unwrap().trim_start())
        .collect()
}

/// An interval's row of the measurement window, starting its line.
fn is_row(l: &str) -> bool {
    l.starts_with(|c: char| c.is_ascii_digit()) && l.contains(" measure ")
}

/// The rows come while the test runs, on a terminal: the first row is on
/// the screen while most of the window is still to run. The window is 4 s
/// of 0.5 s intervals, so the first row cannot come before 0.5 s into it
/// and the summary not before 4 s: at least 3.5 s lie between them, less
/// whatever the first row was late by. Rows held back to the end (the old
/// way) come milliseconds before the summary. Half of 3.5 s tells the two
/// apart and leaves a busy machine 1.75 s of lateness for the first row.
#[test]
fn interval_rows_come_as_each_interval_completes() {
    let mut pty = Thrum::run("tcp_rr").len("4s").interval("0.5s").pty();
    // A row, not the progress line (which names the phase too).
    pty.wait_until(
        "interval row",
        |t| screen_lines(t).into_iter().any(is_row),
        Duration::from_secs(30),
    );
    let first = Instant::now();
    assert!(!pty.text().contains("-- summary"), "{:?}", pty.text());
    pty.wait_for("-- summary", Duration::from_secs(30));
    let apart = first.elapsed().as_secs_f64();
    assert!(
        apart > 3.5 / 2.0,
        "the first row came {apart:.2} s before the summary: rows held back"
    );
    let (status, text) = pty.finish(Duration::from_secs(30));
    assert!(status.success(), "{text}");
    // Each row once, the summary after the last; the head line first.
    let lines = screen_lines(&text);
    let head = lines
        .iter()
        .position(|l| l.starts_with("tcp_rr to embedded"))
        .expect("the head line");
    let rows: Vec<usize> = (0..lines.len()).filter(|&k| is_row(lines[k])).collect();
    assert!(rows.len() >= 7, "{lines:?}");
    assert!(rows[0] > head, "{lines:?}");
    let summary = lines
        .iter()
        .position(|l| l.starts_with("-- summary"))
        .unwrap();
    assert!(rows.iter().all(|&k| k < summary), "{lines:?}");
    assert_eq!(lines.iter().filter(|l| l.contains("start_s")).count(), 1);
}

/// On a terminal (a pseudo-terminal through `script`) the progress line
/// shows elapsed of total time, and is cleared before each row.
#[test]
fn the_progress_line_shows_elapsed_and_total_time() {
    let pty = Thrum::run("tcp_rr")
        .len("2s")
        .warmup("1s")
        .interval("0.5s")
        .pty();
    let (status, text) = pty.finish(Duration::from_secs(60));
    assert!(status.success(), "{text:?}");
    assert!(text.contains(" / 3.0s"), "no elapsed/total: {text:?}");
    assert!(text.contains("tcp_rr ["), "{text:?}");
    // Every row starts a clean line: the progress line was cleared first
    // (a row glued to it would not start the line's last segment).
    let rows = screen_lines(&text)
        .into_iter()
        .filter(|l| is_row(l))
        .count();
    assert!(rows >= 4, "rows mixed with the progress line: {text:?}");
    // Not on a terminal: no progress line at all.
    let plain = Thrum::run("tcp_rr").len("0.5s").output();
    assert!(!plain.stderr().contains('\r'));
}

/// The progress line of sweep and curve, on a terminal: the label, a bar,
/// and elapsed of the planned time (agg's is checked in
/// `interrupt::agg_keeps_the_steps_it_completed`).
#[test]
fn sweep_and_curve_show_elapsed_and_total_time() {
    // Two cells, each the run's default 1 s warm-up and a 0.3 s window.
    let pty = Thrum::sweep("tcp_rr")
        .args(["--flows", "1,2"])
        .len("0.3s")
        .default_warmup()
        .pty();
    let (status, text) = pty.finish(Duration::from_secs(60));
    assert!(status.success(), "{text:?}");
    assert!(text.contains("sweep ["), "no progress line: {text:?}");
    assert!(
        text.contains("s / 2.6s  cell "),
        "no elapsed/total: {text:?}"
    );
    // Two steps, each a 1 s window without warm-up: the clock starts again
    // at every step.
    let pty = Thrum::curve("tcp_rr")
        .args(["--rates", "100,200"])
        .len("1s")
        .pty();
    let (status, text) = pty.finish(Duration::from_secs(60));
    assert!(status.success(), "{text:?}");
    for step in ["step 1/2 [", "step 2/2 ["] {
        assert!(text.contains(step), "no {step:?}: {text:?}");
    }
    assert!(
        text.contains("s / 1.0s  offered "),
        "no elapsed/total: {text:?}"
    );
}

/// `thrum run -H HOST -l 1s` runs tcp_stream (netperf
/// without -t), and `--timestamps=FORMAT` starts each row with the
/// wall-clock time its interval ended (the JSON's unix_end_s), `-f m` the
/// rates in Mbit/s.
#[test]
fn no_test_is_tcp_stream_with_timestamped_rows() {
    let server = ServerProc::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let text = Thrum::run_without_test()
        .env("TZ", "UTC")
        .on(&server)
        .len("1s")
        .interval("250ms")
        .args(["--timestamps=%H:%M:%S", "-f", "m", "--export-json"])
        .arg(&json)
        .stdout();
    assert!(text.starts_with("tcp_stream to "), "{text}");
    let r = read_json(&json);
    assert_eq!(r["test"], "tcp_stream");
    let hms = |t: f64| {
        let s = t.floor() as u64 % 86_400;
        format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    };
    let rows: Vec<&str> = text.lines().filter(|l| l.contains(" measure ")).collect();
    let ivs = r["intervals"].as_array().unwrap();
    assert_eq!(rows.len(), ivs.len(), "{text}");
    for (row, iv) in rows.iter().zip(ivs) {
        let want = hms(iv["unix_end_s"].as_f64().unwrap());
        assert!(row.starts_with(&want), "{row:?} does not start with {want}");
        // The rate in --format's unit, then TCP_INFO's Retr and Cwnd.
        assert!(row.contains(" Mbit/s "), "{row:?}");
    }
    assert!(
        text.lines().any(|l| l.starts_with("time ")),
        "no time column header: {text}"
    );
    assert!(
        text.contains("throughput (received)") && text.contains(" Mbit/s"),
        "{text}"
    );
}
