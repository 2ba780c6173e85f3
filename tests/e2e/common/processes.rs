//! The processes of a test: the `thrum` binary, a `thrum server` child
//! (killed when dropped) and a command run to completion under a time
//! limit with both its pipes drained.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::command::Ran;
use super::netns::{Netns, ns_exec};

/// The `thrum` binary; the running test joins its group first
/// ([`enter`](super::serial::enter)). On the first call, the results store every run
/// saves to is pointed (`$THRUM_DB`, inherited by every child) at a fresh
/// file under cargo's temporary directory for tests, not at the home of
/// the machine: hundreds of runs save there and then nowhere else. A test
/// of the store gives its runs a store of their own (`--db`).
pub fn bin() -> &'static str {
    super::serial::enter();
    static STORE: std::sync::Once = std::sync::Once::new();
    STORE.call_once(|| {
        let db = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("e2e-results.db");
        for ext in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{ext}", db.display()));
        }
        // SAFETY: set once, before the first child starts; std's own
        // environment functions take its lock, and the tests call no C
        // code that reads the environment meanwhile.
        unsafe { std::env::set_var("THRUM_DB", &db) };
    });
    env!("CARGO_BIN_EXE_thrum")
}

/// A `thrum server` child process, killed when dropped.
pub struct ServerProc {
    pub child: Child,
    pub addr: String,
    /// The network namespace it runs in, where its clients run too
    /// ([`Thrum::on`](super::Thrum::on)); None on the host.
    pub ns: Option<String>,
    /// A namespace of its own ([`ServerProc::isolated`]), deleted when the
    /// server has been killed (fields drop after `Drop::drop`).
    _own: Option<Netns>,
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
        Self::start_with_port(Command::new(bin()), listen, port)
    }

    /// Start with a prepared command (e.g. `ip netns exec NS thrum`) on
    /// `listen`:`port`, a port a client expects (netperf's 12865).
    pub fn start_with_port(mut cmd: Command, listen: &str, port: u16) -> ServerProc {
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
        ServerProc {
            child,
            addr,
            ns: None,
            _own: None,
        }
    }

    /// Start `thrum server` on 127.0.0.1 in a loopback-only namespace of
    /// its own (`tag` unique to the test), for a connection-heavy test: on
    /// loopback both ends share one TIME_WAIT table, and the host's, filled
    /// to `tcp_max_tw_buckets` by one run of the suite, refused the SYNs of
    /// the next run within a minute. Its clients run there too
    /// ([`Thrum::on`](super::Thrum::on)). Where namespaces are unavailable
    /// it runs on the host, as before, unless `THRUM_E2E_NETNS=required`.
    pub fn isolated(tag: &str, extra: &[&str]) -> ServerProc {
        match Netns::loopback_only_or_host(tag) {
            Some(ns) => {
                let mut server = Self::start_with(ns_exec(&ns.0, bin()), "127.0.0.1", extra);
                server.ns = Some(ns.0.clone());
                server._own = Some(ns);
                server
            }
            None => Self::start(extra),
        }
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

/// Run `cmd` with both pipes drained, killed (and the test failed) past
/// `limit`: what it did, with its command line for the failure messages
/// ([`Ran::report`]).
#[track_caller]
pub fn run_cmd(cmd: &mut Command, limit: Duration) -> Ran {
    let line = format!("{cmd:?}");
    Ran::of(line, output_of(cmd, limit))
}

/// Run `cmd` with both pipes drained, killed (and the test failed) past
/// `limit`; its output.
#[track_caller]
pub(super) fn output_of(cmd: &mut Command, limit: Duration) -> Output {
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
                "{cmd:?} did not finish within {limit:?}\nstdout: {}\nstderr: {}",
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
