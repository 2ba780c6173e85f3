//! Harness: start a real `thrum server` process, run the real client, parse its JSON.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use serde_json::Value;

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_thrum")
}

/// A `thrum server` child process, killed when dropped.
pub struct ServerProc {
    pub child: Child,
    pub addr: String,
}

impl ServerProc {
    /// Start `thrum server` on 127.0.0.1 with an ephemeral port and wait for its ready line.
    pub fn start(extra: &[&str]) -> ServerProc {
        Self::start_with(Command::new(bin()), "127.0.0.1", extra)
    }

    /// Start with a prepared command (e.g. `ip netns exec NS thrum`), listening on `listen`.
    pub fn start_with(cmd: Command, listen: &str, extra: &[&str]) -> ServerProc {
        Self::start_logging(cmd, listen, extra, Stdio::null())
    }

    /// Start on 127.0.0.1 with the server's log (stderr) going to `log`.
    pub fn start_logged(extra: &[&str], log: &std::path::Path) -> ServerProc {
        let file = std::fs::File::create(log).expect("server log file");
        Self::start_logging(Command::new(bin()), "127.0.0.1", extra, file.into())
    }

    /// Start on `listen`:`port` (several servers on one port, each on its own address).
    pub fn start_on(listen: &str, port: u16) -> ServerProc {
        let mut cmd = Command::new(bin());
        cmd.args(["server", "--port", &port.to_string()]);
        Self::start_args(cmd, listen, &[], Stdio::null())
    }

    fn start_logging(mut cmd: Command, listen: &str, extra: &[&str], log: Stdio) -> ServerProc {
        cmd.args(["server", "--port", "0"]);
        Self::start_args(cmd, listen, extra, log)
    }

    fn start_args(mut cmd: Command, listen: &str, extra: &[&str], log: Stdio) -> ServerProc {
        cmd.args(["--listen", listen])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(log);
        let mut child = cmd.spawn().expect("spawn thrum server");
        let stdout = child.stdout.take().expect("server stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("server ready line");
        let addr = line
            .split_whitespace()
            .find(|w| {
                w.contains(':')
                    && w.chars()
                        .next()
                        .is_some_and(|c| c.is_ascii_digit() || c == '[')
            })
            .unwrap_or_else(|| panic!("no address in ready line {line:?}"))
            .to_string();
        ServerProc { child, addr }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Open file descriptors of the server process.
    pub fn open_fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid())).map_or(0, |d| d.count())
    }

    /// Resident set size of the server process, KiB.
    pub fn rss_kb(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .expect("server /proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS in /proc status")
    }

    /// Poll until the server holds at most `fds` descriptors; false if it
    /// still holds more after `limit`.
    pub fn fds_return_to(&self, fds: usize, limit: Duration) -> bool {
        let t = Instant::now();
        while self.open_fds() > fds {
            if t.elapsed() > limit {
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        true
    }

    /// The server's JSON log lines (`--log-format json`) written to `log` so far.
    pub fn log_lines(log: &std::path::Path) -> Vec<Value> {
        std::fs::read_to_string(log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

impl Drop for ServerProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Run the client with a hard time limit; returns its output.
pub fn run_client(args: &[&str], limit: Duration) -> Output {
    run_cmd(Command::new(bin()).args(args), limit)
}

pub fn run_cmd(cmd: &mut Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn client");
    // Read both pipes while the child runs: a result larger than a pipe's
    // 64 KiB (10,000 flows' intervals) would otherwise block its writer.
    let drain = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            buf
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|r| Box::new(r) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|r| Box::new(r) as Box<dyn Read + Send>),
    );
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "command did not finish within {limit:?}\nstdout: {}\nstderr: {}",
                String::from_utf8_lossy(&stdout.join().expect("stdout reader")),
                String::from_utf8_lossy(&stderr.join().expect("stderr reader"))
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: stdout.join().expect("stdout reader"),
        stderr: stderr.join().expect("stderr reader"),
    }
}

/// Parse the JSON result on stdout, with the whole output in any failure message.
pub fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}); status {:?}\nstdout: {}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// A `--json-stream` run's stdout, one JSON object per line; the run must
/// have succeeded.
pub fn json_lines(out: &Output) -> Vec<Value> {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is one JSON object"))
        .collect()
}

/// The JSON result of a client run that must have succeeded; else the
/// result's error and the client's stderr, under `what`.
pub fn succeeded(out: &Output, what: &str) -> Value {
    let doc = json(out);
    assert!(
        out.status.success(),
        "{what}: {}\n{}",
        doc["summary"]["error"],
        String::from_utf8_lossy(&out.stderr)
    );
    doc
}

pub fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

pub fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// A `thrum server` inside network namespace `ns`, listening on `addr`.
pub fn ns_server(ns: &str, addr: &str) -> ServerProc {
    ServerProc::start_with(ns_exec(ns, bin()), addr, &[])
}

/// `thrum run TEST -H SERVER ARGS.. --json`, to be run inside namespace `ns`.
pub fn ns_client_cmd(ns: &str, server: &ServerProc, test: &str, args: &[&str]) -> Command {
    let mut cmd = ns_exec(ns, bin());
    cmd.args(["run", test, "-H", &server.addr])
        .args(args)
        .arg("--json");
    cmd
}

/// A short tcp_rr (300 ms, no warm-up, JSON) against the server at `addr`,
/// with `extra` flags.
pub fn short_rr(addr: &str, extra: &[&str]) -> Output {
    let args = ["run", "tcp_rr", "-H", addr, "-l", "300ms", "--warmup", "0s"];
    run_client(
        &[&args[..], extra, &["--json"]].concat(),
        Duration::from_secs(20),
    )
}

/// A short tcp_rr against `server` must succeed: it is still serving.
pub fn assert_serves(server: &ServerProc) -> Value {
    run_short(server, "tcp_rr", &[])
}

/// `thrum run TEST -H server -l 300ms --warmup 0s EXTRA.. --json`, which
/// must succeed; returns its result.
pub fn run_short(server: &ServerProc, test: &str, extra: &[&str]) -> Value {
    let mut args = vec![
        "run",
        test,
        "-H",
        &server.addr,
        "-l",
        "300ms",
        "--warmup",
        "0s",
        "--json",
    ];
    args.extend_from_slice(extra);
    let out = run_client(&args, Duration::from_secs(20));
    let doc = json(&out);
    assert!(
        out.status.success(),
        "{test} {extra:?} failed (has the server stopped serving?): {}",
        doc["summary"]["error"]
    );
    doc
}

/// Each command line must fail before running anything, with every needle in
/// its error message (the flag and the accepted range) and nothing on stdout.
pub fn assert_rejected(cases: &[(&[&str], &[&str])]) {
    for (args, needles) in cases {
        let out = run_client(args, Duration::from_secs(10));
        assert!(!out.status.success(), "{args:?} should fail");
        let err = String::from_utf8_lossy(&out.stderr);
        for n in *needles {
            assert!(err.contains(n), "{args:?}: stderr lacks {n:?}:\n{err}");
        }
        assert!(
            out.stdout.is_empty(),
            "{args:?}: nothing half-written on stdout"
        );
    }
}

/// Validate a result document against the committed JSON Schema.
pub fn assert_schema(doc: &Value) {
    assert_schema_named(doc, "thrum.result.v1.json");
}

/// Validate a document against `schema/NAME`.
pub fn assert_schema_named(doc: &Value, name: &str) {
    let path = format!("{}/schema/{name}", env!("CARGO_MANIFEST_DIR"));
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).expect("read schema"))
        .expect("schema is JSON");
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect();
    assert!(
        errors.is_empty(),
        "document does not match schema/{name}:\n{}",
        errors.join("\n")
    );
}

// Helpers shared by the shaped-link tests in network namespaces (`netns`,
// `udp_loss`).

/// Setup commands (ip, tc, sysctl, cat) finish in milliseconds; this only
/// bounds a wedged one.
pub const SETUP_LIMIT: Duration = Duration::from_secs(10);

/// Held for the whole of each shaped-link test (modules `netns` and
/// `udp_loss`), of the CPU-heavy `hostile` and `soak` tests and of the
/// `agg` ramps (whose streams flood every CPU), so they run one at a time.
/// On two vCPUs the 1-byte tcp_rr
/// test keeps both CPUs busy, and that delays tbf's dequeue timer: once the
/// bucket is full (64 KB is 2.6 ms at 200 Mbit/s), late tokens are lost, and
/// a concurrent bulk test read 0.92 of the rate instead of the 0.955 it reads
/// alone (and iperf3 reads).
///
/// Loopback tests that assume the CPUs keep up (a lossless UDP path, rr
/// responses well within --rr-timeout) take the shared side with
/// [`not_beside_floods`]: they run beside each other, but never beside a
/// shaped-link test, whose floods starve a loopback receiver into real loss.
static ONE_AT_A_TIME: RwLock<()> = RwLock::new(());

pub fn one_at_a_time() -> RwLockWriteGuard<'static, ()> {
    // A failed test poisons the lock; the next one should still run.
    ONE_AT_A_TIME
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

pub fn not_beside_floods() -> RwLockReadGuard<'static, ()> {
    ONE_AT_A_TIME
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Create network namespace `name`, doubling as the capability probe:
/// without root or without iproute2's netns support this is what fails.
/// Then it explains on stderr and returns false so the caller skips, unless
/// `THRUM_E2E_NETNS=required` is set: a root CI job sets it, so that losing
/// the capability fails instead of passing silently.
pub fn netns_add_or_skip(name: &str) -> bool {
    match Command::new("ip").args(["netns", "add", name]).output() {
        Ok(out) if out.status.success() => true,
        other => {
            let why = match other {
                Ok(out) => String::from_utf8_lossy(&out.stderr).trim().to_string(),
                Err(e) => format!("cannot run ip: {e}"),
            };
            let msg =
                format!("`ip netns add` failed ({why}); shaped-link tests need root and iproute2");
            if std::env::var("THRUM_E2E_NETNS").as_deref() == Ok("required") {
                panic!("{msg}");
            }
            eprintln!("SKIPPED: {msg}");
            false
        }
    }
}

/// A network namespace with only its loopback up, deleted on drop: a
/// kernel of its own for a test (its port range, its TIME_WAIT table).
pub struct Netns(pub String);

impl Netns {
    /// `thrum-TAG-PID`, or None (skipped, see [`netns_add_or_skip`]).
    pub fn loopback_only(tag: &str) -> Option<Netns> {
        let ns = Netns(format!("thrum-{tag}-{}", std::process::id()));
        if !netns_add_or_skip(&ns.0) {
            return None;
        }
        run_ok(Command::new("ip").args(["-n", &ns.0, "link", "set", "lo", "up"]));
        Some(ns)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Best effort and never a panic: this also runs while unwinding.
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

/// `program` run inside namespace `ns`; `ip netns exec` execs it, so the
/// child's pid is the program's own and killing the child kills it.
pub fn ns_exec(ns: &str, program: &str) -> Command {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", ns, program]);
    cmd
}

pub fn ip(args: &[&str]) -> Output {
    run_ok(Command::new("ip").args(args))
}

/// Run a setup command under the time bound and fail loudly if it fails.
pub fn run_ok(cmd: &mut Command) -> Output {
    let shown = format!("{cmd:?}");
    let out = run_cmd(cmd, SETUP_LIMIT);
    assert!(
        out.status.success(),
        "{shown} failed: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    out
}

/// A result's diagnostics (`summary.diagnostics`): code and message.
pub fn coded(doc: &serde_json::Value) -> impl Iterator<Item = (&str, &str)> {
    doc["summary"]["diagnostics"]
        .as_array()
        .expect("summary.diagnostics")
        .iter()
        .map(|d| {
            let text = |k: &str| d[k].as_str().unwrap_or_else(|| panic!("{k} in {d}"));
            (text("code"), text("message"))
        })
}

/// The messages of a result's diagnostics of `code`.
pub fn diagnostics(doc: &serde_json::Value, code: &str) -> Vec<String> {
    coded(doc)
        .filter(|(c, _)| *c == code)
        .map(|(_, m)| m.to_string())
        .collect()
}

/// The codes of the warnings about the session itself rather than the
/// machine: the server's errors and implausible usage, refused
/// connections or datagrams, missing server samples, undrained workers.
pub const SESSION_CODES: [&str; 5] = [
    "server_error",
    "server_usage_implausible",
    "server_refused",
    "server_samples_missing",
    "drain_timeout",
];

/// A result's diagnostics whose code is one of `codes`, as `code: message`.
pub fn diagnostics_of(doc: &serde_json::Value, codes: &[&str]) -> Vec<String> {
    coded(doc)
        .filter(|(c, _)| codes.contains(c))
        .map(|(c, m)| format!("{c}: {m}"))
        .collect()
}

/// Did this `--driver uring` run get io_uring on every worker of both ends
/// (`workers` per end)? False, with a printed reason, where the kernel
/// refused it (the test then skips); a silent fallback fails.
pub fn ran_on_uring(doc: &serde_json::Value, workers: usize) -> bool {
    if diagnostics(doc, "uring_fallback")
        .iter()
        .any(|m| m.contains("io_uring is unavailable"))
    {
        eprintln!("SKIPPED: io_uring unavailable");
        return false;
    }
    for key in ["local_drivers", "remote_drivers"] {
        assert_eq!(
            doc["environment"][key],
            serde_json::json!(vec!["uring"; workers]),
            "{key}"
        );
    }
    true
}

/// The text nodes of an SVG document, which must parse as XML.
pub fn svg_text(path: &std::path::Path) -> Vec<String> {
    let svg = std::fs::read_to_string(path).expect("the SVG was written");
    let doc = roxmltree::Document::parse(&svg).expect("the SVG parses as XML");
    doc.descendants()
        .filter_map(|n| n.text())
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .collect()
}

/// Wait until `path` has at least `n` lines: what a run streams as it goes
/// (a busy machine may take seconds to start it, so no fixed sleep).
pub fn wait_for_lines(path: &std::path::Path, n: usize) {
    let t = Instant::now();
    while std::fs::read_to_string(path).map_or(0, |s| s.lines().count()) < n {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "{} never had {n} lines",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `thrum ARGS..` on a pseudo-terminal (`script -qec`, util-linux), as a
/// user at a terminal runs it: stdout and stderr are one stream, with the
/// progress line and its `\r` and erase codes in it, and a Ctrl-C typed on
/// it reaches thrum as the terminal's SIGINT. Killed when dropped.
pub struct Pty {
    child: Child,
    keys: Option<std::process::ChildStdin>,
    rx: std::sync::mpsc::Receiver<Vec<u8>>,
    seen: Vec<u8>,
}

impl Pty {
    pub fn spawn(args: &[&str]) -> Pty {
        // Single-quoted for script's shell; the tests' arguments hold no quote.
        let line: Vec<String> = std::iter::once(bin())
            .chain(args.iter().copied())
            .map(|a| format!("'{a}'"))
            .collect();
        let mut child = Command::new("script")
            .args(["-qec", &line.join(" "), "/dev/null"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("script(1) from util-linux");
        let mut out = child.stdout.take().expect("script's stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = out.read(&mut buf) {
                if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
        Pty {
            keys: child.stdin.take(),
            child,
            rx,
            seen: Vec::new(),
        }
    }

    /// Everything the terminal has shown so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.seen).into_owned()
    }

    /// Read until the terminal shows `needle`; panics with what it showed
    /// if that takes longer than `limit` (a bound on a hung run, not a
    /// timing check).
    pub fn wait_for(&mut self, needle: &str, limit: Duration) {
        self.wait_until(needle, |t| t.contains(needle), limit);
    }

    /// Read until what the terminal shows satisfies `shows` (`what` names
    /// it for the failure message); at most `limit`, as [`Pty::wait_for`].
    pub fn wait_until(&mut self, what: &str, shows: impl Fn(&str) -> bool, limit: Duration) {
        let t = Instant::now();
        while !shows(&self.text()) {
            assert!(
                t.elapsed() < limit,
                "no {what} within {limit:?}: {:?}",
                self.text()
            );
            if let Ok(b) = self.rx.recv_timeout(Duration::from_millis(50)) {
                self.seen.extend(b);
            }
        }
    }

    /// Type Ctrl-C.
    pub fn ctrl_c(&mut self) {
        use std::io::Write;
        let keys = self.keys.as_mut().expect("the terminal's input");
        keys.write_all(b"\x03").unwrap();
        keys.flush().unwrap();
    }

    /// Wait for the command to end (at most `limit`, or panic): its exit
    /// status and all the terminal showed.
    pub fn finish(mut self, limit: Duration) -> (std::process::ExitStatus, String) {
        let t = Instant::now();
        let status = loop {
            if let Some(st) = self.child.try_wait().expect("wait") {
                break st;
            }
            if t.elapsed() > limit {
                let _ = self.child.kill();
                panic!("did not end within {limit:?}: {:?}", self.text());
            }
            if let Ok(b) = self.rx.recv_timeout(Duration::from_millis(20)) {
                self.seen.extend(b);
            }
        };
        self.keys.take();
        while let Ok(b) = self.rx.recv_timeout(Duration::from_secs(5)) {
            self.seen.extend(b);
        }
        (status, self.text())
    }
}

impl Drop for Pty {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
