//! Input files read only up to a bound that fits their kind, and figures
//! and strings from a file shown in bounded space. A 1 GiB result file
//! once took 1,030 MB of memory before `compare` refused it, and a 300 MB
//! string was accepted and printed; a crafted `1.7e308` printed as 300
//! digits. Each test here hands the real binary such a file and checks the
//! refusal (the file, the bound, the flag) or the bounded output, and the
//! child's peak memory where reading the file whole would show in it.

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{Ran, Thrum};

/// Run `thrum` under `limit`: what it did, and its peak resident memory
/// in KiB (from wait4's rusage, the child's own, whatever runs beside it).
#[expect(
    clippy::zombie_processes,
    reason = "the child is reaped by wait4, which gives its rusage"
)]
fn run_measured(thrum: &Thrum, limit: Duration) -> (Ran, u64) {
    let mut child = thrum
        .command()
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {thrum}: {e}"));
    let pipe = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut s = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut s);
            }
            s
        })
    };
    let out = pipe(child.stdout.take().map(|r| Box::new(r) as _));
    let err = pipe(child.stderr.take().map(|r| Box::new(r) as _));
    let pid = child.id() as libc::pid_t;
    let start = Instant::now();
    let mut status = 0;
    // SAFETY: zeroed is a valid rusage; wait4 writes only into it and
    // `status`, for our own child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: as above; WNOHANG so that the limit is kept.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut ru) };
        assert!(r >= 0, "wait4: {}", std::io::Error::last_os_error());
        if r == pid {
            break;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{thrum} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = Output {
        status: ExitStatus::from_raw(status),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    };
    (Ran::of(thrum, out), ru.ru_maxrss as u64)
}

/// A file of `len` bytes that takes no disk (a hole), and so no time to
/// make: what a reader of the whole would still have to hold in memory.
fn sparse(path: &Path, len: u64) {
    std::fs::File::create(path).unwrap().set_len(len).unwrap();
}

/// `compare` and `report` of a 1 GiB result file: refused before a byte is
/// read, naming the file, its size, the bound and the arguments; the
/// child's peak memory stays far under the file's size (reading it whole
/// took 1,030 MB).
#[test]
fn a_huge_result_file_is_refused_unread() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.json");
    sparse(&big, 1 << 30);
    let big = big.to_str().unwrap();
    for thrum in [Thrum::cmd(&["compare", big, big]), Thrum::report(big)] {
        let (r, max_rss_kb) = run_measured(&thrum, Duration::from_secs(30));
        assert_eq!(r.code(), Some(2), "{}", r.report());
        let err = r.stderr();
        assert!(
            err.contains("big.json: 1073741824 bytes, over the 256 MiB")
                && err.contains("a result document (report PATH, compare A B)")
                && err.contains("refused unread"),
            "{}",
            r.report()
        );
        // 1 GiB read whole is 1,048,576 KiB; thrum's own start-up is a
        // few MB. A quarter of the bound leaves room for a debug build.
        assert!(
            max_rss_kb < 64 * 1024,
            "{thrum}: peak RSS {max_rss_kb} KiB for a refused file"
        );
    }
}

/// The operator's files have bounds of their own, named with their flag:
/// `--hosts-file` (agg and sweep), `--config`, `--psk-file`, a netperf log.
#[test]
fn every_kind_of_input_file_has_its_bound() {
    let dir = tempfile::tempdir().unwrap();
    let at = |name: &str, len: u64| {
        let p = dir.path().join(name);
        sparse(&p, len);
        p.to_str().unwrap().to_string()
    };
    let hosts = at("hosts", 2 << 20);
    let config = at("monitor.toml", 2 << 20);
    let key = at("key", 5000);
    let log = at("netperf_tps.log", 65 << 20);
    let cases: [(Vec<&str>, &str); 5] = [
        (
            vec!["agg", "--hosts-file", &hosts, "--tests", "tps"],
            "over the 1 MiB thrum reads of a hosts file (--hosts-file)",
        ),
        (
            vec!["sweep", "tcp_rr", "--hosts-file", &hosts],
            "over the 1 MiB thrum reads of a hosts file (--hosts-file)",
        ),
        (
            vec!["monitor", "--config", &config, "--dry-run"],
            "over the 1 MiB thrum reads of a monitor configuration (--config)",
        ),
        (
            vec!["run", "tcp_rr", "-H", "127.0.0.1:9", "--psk-file", &key],
            "5000 bytes is too long for a key (accepted: 16..=4096 bytes)",
        ),
        (
            vec!["report", &log],
            "over the 64 MiB thrum reads of a netperf or ramp log (report PATH)",
        ),
    ];
    for (args, says) in cases {
        let ran = Thrum::cmd(&args).timeout(Duration::from_secs(30)).fails();
        assert!(
            ran.stderr().contains(says),
            "stderr lacks {says:?}\n{}",
            ran.report()
        );
    }
}

/// A result document with a 5 MB host name, a server name of escapes and
/// absurd figures: `report` and `compare` print every line in bounded
/// space, the strings cut and saying so, the figures in the table's units
/// (`1.7e308 bit/s`, `inf`), and no raw escape reaches the terminal.
#[test]
fn strings_and_figures_from_a_file_print_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let mut doc = Thrum::run("tcp_stream")
        .len("300ms")
        .arg("--no-save")
        .json();
    let plain = dir.path().join("plain.json");
    std::fs::write(&plain, serde_json::to_vec(&doc).unwrap()).unwrap();
    doc["spec"]["server"] = Value::from("\u{1b}[2J".repeat(100_000));
    doc["environment"]["hostname"] = Value::from("h".repeat(5_000_000));
    let s = &mut doc["summary"];
    s["throughput_bps"] = Value::from(1.7e308);
    s["throughput_bps_sent"] = Value::from(1.7e308);
    s["local"]["cpu_util_percent"] = Value::from(1.7e308);
    let crafted = dir.path().join("crafted.json");
    std::fs::write(&crafted, serde_json::to_vec(&doc).unwrap()).unwrap();
    let crafted = crafted.to_str().unwrap();

    let (report, _) = run_measured(&Thrum::report(crafted), Duration::from_secs(60));
    let text = report.ok().stdout();
    assert!(
        text.contains("throughput (received)  1.7e308 bit/s"),
        "{text}"
    );
    assert!(text.contains("…(+"), "the cut says so: {text}");
    assert!(
        !text.contains('\u{1b}'),
        "a raw escape reached the terminal"
    );
    // The longest line: the server's name, cut to 4,096 characters of
    // which each escape prints as 7 (`\u{1b}`) or 1.
    let longest = text.lines().map(|l| l.chars().count()).max().unwrap();
    assert!(longest < 4096 * 7 + 200, "a line of {longest} characters");

    let (cmp, _) = run_measured(
        &Thrum::cmd(&["compare", crafted, plain.to_str().unwrap()]),
        Duration::from_secs(60),
    );
    let table = cmp.ok().stdout();
    let throughput = table
        .lines()
        .find(|l| l.starts_with("throughput"))
        .unwrap_or_else(|| panic!("no throughput row: {table}"));
    assert!(
        throughput.contains("1.7e308 bit/s") && throughput.len() < 200,
        "{throughput}"
    );
    assert!(table.lines().all(|l| l.chars().count() < 300), "{table}");
}
