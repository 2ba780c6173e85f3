//! Watching a run as a user does: files that grow as thrum streams into
//! them, and thrum on a pseudo-terminal.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::command::Thrum;
use super::processes::bin;

/// `run` (a tcp_stream against a server) for 20 s of 200 ms intervals,
/// its JSON result to `res` and its samples to `csv` as it goes, stdout
/// discarded, stderr piped: a run a test cuts short and reads back from
/// its files ([`wait_for_lines`]).
pub fn stream_into_files(run: Thrum, res: &Path, csv: &Path) -> Child {
    run.len("20s")
        .interval("200ms")
        .args(["--json", "-o"])
        .arg(res)
        .arg("--samples")
        .arg(csv)
        .command()
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn thrum run")
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
        // `exec`, so that the terminal's SIGINT reaches thrum alone: a shell
        // that stays as its parent (dash, CI's /bin/sh, does) dies of the
        // SIGINT itself, and script would report 130 whatever thrum exits with.
        let line: Vec<String> = std::iter::once(bin())
            .chain(args.iter().copied())
            .map(|a| format!("'{a}'"))
            .collect();
        let line = format!("exec {}", line.join(" "));
        // script runs the line with $SHELL: named here, so that an unset or
        // empty one in the test's environment changes nothing.
        let mut child = Command::new("script")
            .args(["-qec", &line, "/dev/null"])
            .env("SHELL", "/bin/sh")
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
