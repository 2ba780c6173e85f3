//! Input files read only up to a bound that fits their kind, and figures
//! and strings from a file shown in bounded space. A 1 GiB result file
//! once took 1,030 MB of memory before `compare` refused it, and a 300 MB
//! string was accepted and printed; a crafted `1.7e308` printed as 300
//! digits. Each test here hands the real binary such a file and checks the
//! refusal (the file, the bound, the flag) or the bounded output, with the
//! child's address space capped below the file's size, so that reading
//! the file whole fails the test.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{Ran, Thrum};

/// Address space the child may map: half the 1 GiB file, so a reader of
/// the whole file fails, while thrum's own start-up (tens of MB, most of
/// it thread stacks and allocator arenas reserved, not touched) fits many
/// times over. The child's peak RSS cannot be asked instead: it is spawned
/// with vfork (posix_spawn), so wait4 reports the test harness's resident
/// set, which other tests running beside it swell.
const AS_LIMIT: u64 = 512 << 20;

/// Run `thrum` under `limit` of time and `AS_LIMIT` of address space.
fn run_bounded(thrum: &Thrum, limit: Duration) -> Ran {
    let mut cmd = thrum.command();
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    // SAFETY: setrlimit is async-signal-safe and touches only the child.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: AS_LIMIT as libc::rlim_t,
                rlim_max: AS_LIMIT as libc::rlim_t,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd
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
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{thrum} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    };
    Ran::of(thrum, out)
}

/// A file of `len` bytes that takes no disk (a hole), and so no time to
/// make: what a reader of the whole would still have to hold in memory.
fn sparse(path: &Path, len: u64) {
    std::fs::File::create(path).unwrap().set_len(len).unwrap();
}

/// `compare` and `report` of a 1 GiB result file: refused before a byte is
/// read, naming the file, its size, the bound and the arguments, by a
/// child that could not have mapped the file whole (`AS_LIMIT`; reading it
/// whole once took 1,030 MB).
#[test]
fn a_huge_result_file_is_refused_unread() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.json");
    sparse(&big, 1 << 30);
    let big = big.to_str().unwrap();
    for thrum in [Thrum::cmd(&["compare", big, big]), Thrum::report(big)] {
        let r = run_bounded(&thrum, Duration::from_secs(30));
        assert_eq!(r.code(), Some(2), "{}", r.report());
        let err = r.stderr();
        assert!(
            err.contains("big.json: 1073741824 bytes, over the 256 MiB")
                && err.contains("a result document (report PATH, compare A B)")
                && err.contains("refused unread"),
            "{}",
            r.report()
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

    let report = run_bounded(&Thrum::report(crafted), Duration::from_secs(60));
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

    let cmp = run_bounded(
        &Thrum::cmd(&["compare", crafted, plain.to_str().unwrap()]),
        Duration::from_secs(60),
    );
    let table = cmp.ok().stdout();
    let throughput = table
        .lines()
        .find(|l| l.trim_start_matches('*').starts_with("throughput"))
        .unwrap_or_else(|| panic!("no throughput row: {table}"));
    assert!(
        throughput.contains("1.7e308 bit/s") && throughput.len() < 200,
        "{throughput}"
    );
    assert!(table.lines().all(|l| l.chars().count() < 300), "{table}");
}
