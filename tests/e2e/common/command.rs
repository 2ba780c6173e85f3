//! The one way the tests run the `thrum` client: a command builder in the
//! spirit of ripgrep's `TestCommand`. A test says what it runs
//! (`Thrum::run("tcp_rr").on(&server).len("1s").flows(4)`) and how it
//! judges the outcome (`.json()`, `.ok()`, `.fails()`, `.refused(..)`, or
//! `.output()` to judge it itself); the builder adds the short-run
//! defaults, runs the command under a time limit (30 s, 10 s for a
//! refusal, or `.timeout(..)`) with both pipes drained, and on any failure
//! prints the same report ([`Ran::report`]): the command line, the exit
//! status, the result's error (or the end of stdout when it holds no
//! result), and the whole stderr. Any other command a test runs
//! ([`run_cmd`](super::run_cmd)) fails with the same report.
//!
//! The defaults: the commands that measure (`run`, `suite`, `sweep`,
//! `curve`) get `--warmup 0s` at the end of their arguments, unless the
//! test gives a warm-up of its own (`.warmup(..)`, or `--warmup` among its
//! arguments) or asks for thrum's own default (`.default_warmup()`: 1 s for
//! a timed run, none with `-n` or `--bytes`). [`Thrum::cmd`] adds nothing:
//! it runs exactly the words given, for the other subcommands and for a
//! command line that must be refused as a user typed it.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;

use super::netns::{Netns, ns_exec};
use super::processes::{ServerProc, bin, output_of};
use super::pty::Pty;

/// A latency or rate test's processes at nice −10: the builds and tests
/// beside them on a busy machine (a load of ten on two CPUs) then take
/// their CPU less often, and a run measures the path more often than the
/// host. Tests run as root, which may raise a priority.
pub const NICED: &[&str] = &["nice", "-n", "-10"];
/// The limit of a command that is not given one: it only bounds a wedged
/// run (the tests' runs last a few seconds at most).
const LIMIT: Duration = Duration::from_secs(30);

/// The limit of a refusal, which must come before anything runs.
const REFUSAL_LIMIT: Duration = Duration::from_secs(10);

/// How much of a failed run's stdout its report shows (a table, a plan:
/// not a result, whose error it shows instead).
const STDOUT_SHOWN: usize = 8192;

/// A `thrum` command line being built; see the module's doc.
#[derive(Clone)]
pub struct Thrum {
    args: Vec<OsString>,
    /// `--warmup VALUE` added at the end, unless the arguments name one.
    warmup: Option<String>,
    /// The network namespace it runs in (`ip netns exec`), if any.
    ns: Option<String>,
    /// A program it runs under (`taskset -c 0`), if any.
    under: Vec<OsString>,
    /// A link to thrum it runs through (a symlink named `netperf`), if
    /// any: thrum reads the name it was invoked by.
    via: Option<OsString>,
    envs: Vec<(OsString, OsString)>,
    timeout: Option<Duration>,
}

impl Thrum {
    fn measuring(words: &[&str]) -> Thrum {
        Thrum {
            warmup: Some("0s".to_string()),
            ..Thrum::cmd(words)
        }
    }

    /// `thrum run TEST`, with the short-run defaults.
    pub fn run(test: &str) -> Thrum {
        Thrum::measuring(&["run", test])
    }

    /// `thrum run` with no test named here (it may come among the
    /// arguments, else thrum runs its default, tcp_stream), with the
    /// short-run defaults.
    pub fn run_without_test() -> Thrum {
        Thrum::measuring(&["run"])
    }

    /// `thrum suite`, with the short-run defaults.
    pub fn suite() -> Thrum {
        Thrum::measuring(&["suite"])
    }

    /// `thrum sweep TEST`, with the short-run defaults.
    pub fn sweep(test: &str) -> Thrum {
        Thrum::measuring(&["sweep", test])
    }

    /// `thrum curve TEST`, with the short-run defaults.
    pub fn curve(test: &str) -> Thrum {
        Thrum::measuring(&["curve", test])
    }

    /// `thrum report PATH`.
    pub fn report(path: impl AsRef<OsStr>) -> Thrum {
        Thrum::cmd(&["report"]).arg(path)
    }

    /// `thrum WORDS..`, exactly as given: no defaults.
    pub fn cmd(words: &[&str]) -> Thrum {
        Thrum {
            args: words.iter().map(OsString::from).collect(),
            warmup: None,
            ns: None,
            under: Vec::new(),
            via: None,
            envs: Vec::new(),
            timeout: None,
        }
    }

    /// Against `server`: `-H ADDR`, run where the server runs (inside its
    /// namespace, if it has one).
    pub fn on(self, server: &ServerProc) -> Thrum {
        self.host(&server.addr).beside(server)
    }

    /// Run where `server` runs (inside its namespace, if it has one),
    /// without naming it: the test's `-H`, if any, comes among the
    /// arguments.
    pub fn beside(mut self, server: &ServerProc) -> Thrum {
        self.ns = server.ns.clone().or(self.ns);
        self
    }

    /// `-H ADDR`.
    pub fn host(self, addr: &str) -> Thrum {
        self.args(["-H", addr])
    }

    /// `-l LENGTH`: the measurement window.
    pub fn len(self, length: &str) -> Thrum {
        self.args(["-l", length])
    }

    /// `-F N`: the flows of `run` and `curve` (sweep's `--flows` is a list:
    /// give it with `.args`).
    pub fn flows(self, n: u32) -> Thrum {
        self.args(["-F", &n.to_string()])
    }

    /// `-T N`: worker threads on each end.
    pub fn threads(self, n: u32) -> Thrum {
        self.args(["-T", &n.to_string()])
    }

    /// `-i INTERVAL`.
    pub fn interval(self, every: &str) -> Thrum {
        self.args(["-i", every])
    }

    /// `--warmup VALUE` instead of the default's `0s`.
    pub fn warmup(mut self, value: &str) -> Thrum {
        self.warmup = Some(value.to_string());
        self
    }

    /// No `--warmup`: thrum's own default (1 s for a timed run; none with
    /// `-n` or `--bytes`).
    pub fn default_warmup(mut self) -> Thrum {
        self.warmup = None;
        self
    }

    /// One more argument.
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Thrum {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    /// More arguments.
    pub fn args<I, S>(mut self, args: I) -> Thrum
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Run inside network namespace `ns`.
    pub fn netns(mut self, ns: &str) -> Thrum {
        self.ns = Some(ns.to_string());
        self
    }

    /// Run inside `ns` where there is one ([`Netns::loopback_only_or_host`]),
    /// else on the host.
    pub fn netns_or_host(self, ns: Option<&Netns>) -> Thrum {
        match ns {
            Some(ns) => self.netns(&ns.0),
            None => self,
        }
    }

    /// Run under `program ARGS..` (`taskset -c 0`), which execs thrum.
    pub fn under(mut self, program: &[&str]) -> Thrum {
        self.under = program.iter().map(OsString::from).collect();
        self
    }

    /// Run through `link`, a link to the binary (a symlink named
    /// `netperf`), instead of the binary itself.
    pub fn via(mut self, link: impl AsRef<OsStr>) -> Thrum {
        self.via = Some(link.as_ref().to_owned());
        self
    }

    /// Run at nice −10 ([`NICED`]).
    pub fn niced(self) -> Thrum {
        self.under(NICED)
    }

    /// An environment variable of the client.
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Thrum {
        self.envs
            .push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// The limit past which the command is killed and the test fails (30 s
    /// unless given; 10 s for a refusal).
    pub fn timeout(mut self, limit: Duration) -> Thrum {
        self.timeout = Some(limit);
        self
    }

    /// The arguments thrum gets, defaults included.
    pub fn argv(&self) -> Vec<OsString> {
        let mut argv = self.args.clone();
        let named = argv.iter().any(|a| {
            let a = a.to_string_lossy();
            a == "--warmup" || a.starts_with("--warmup=")
        });
        if let (Some(w), false) = (&self.warmup, named) {
            argv.extend(["--warmup".into(), w.into()]);
        }
        argv
    }

    /// The `std::process::Command`, for a test that drives the process
    /// itself (signals, stdin, a terminal).
    pub fn command(&self) -> Command {
        // bin() first, whatever runs: it joins the test's serial group.
        let bin = OsStr::new(bin());
        let thrum = self.via.as_deref().unwrap_or(bin);
        let mut cmd = match (&self.ns, self.under.split_first()) {
            (Some(ns), Some((program, rest))) => {
                let mut c = ns_exec(ns, &program.to_string_lossy());
                c.args(rest).arg(thrum);
                c
            }
            (Some(ns), None) => ns_exec(ns, &thrum.to_string_lossy()),
            (None, Some((program, rest))) => {
                let mut c = Command::new(program);
                c.args(rest).arg(thrum);
                c
            }
            (None, None) => Command::new(thrum),
        };
        cmd.args(self.argv());
        for (k, v) in &self.envs {
            cmd.env(k, v);
        }
        cmd
    }

    /// Start it with both pipes captured, for a test that watches it run
    /// or signals it; [`Running::wait`] gives what it did.
    #[track_caller]
    pub fn spawn(&self) -> Running {
        let child = self
            .command()
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {self}: {e}"));
        Running {
            child,
            line: self.to_string(),
        }
    }

    /// Start it on a pseudo-terminal, as a user at a terminal runs it (on
    /// the host, in the test's environment).
    #[track_caller]
    pub fn pty(&self) -> Pty {
        assert!(
            self.ns.is_none()
                && self.under.is_empty()
                && self.via.is_none()
                && self.envs.is_empty(),
            "a terminal runs thrum alone, on the host: {self}"
        );
        let argv: Vec<String> = self
            .argv()
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        Pty::spawn(&argv.iter().map(String::as_str).collect::<Vec<_>>())
    }

    /// Run it to its end (or its limit), whatever its exit status.
    #[track_caller]
    pub fn output(&self) -> Ran {
        self.output_within(self.timeout.unwrap_or(LIMIT))
    }

    #[track_caller]
    fn output_within(&self, limit: Duration) -> Ran {
        Ran {
            out: output_of(&mut self.command(), limit),
            line: self.to_string(),
        }
    }

    /// Run it; it must succeed.
    #[track_caller]
    pub fn ok(&self) -> Ran {
        self.output().ok()
    }

    /// Run it; it must succeed: its standard output.
    #[track_caller]
    pub fn stdout(&self) -> String {
        self.ok().stdout()
    }

    /// Run it with `--json`; it must succeed: its JSON document.
    #[track_caller]
    pub fn json(&self) -> Value {
        self.with_json().output().json_ok()
    }

    /// Run it with `--json-stream`; it must succeed: its lines, one JSON
    /// object each.
    #[track_caller]
    pub fn json_lines(&self) -> Vec<Value> {
        self.clone().arg("--json-stream").output().json_lines()
    }

    /// Run it; it must fail (a non-zero exit).
    #[track_caller]
    pub fn fails(&self) -> Ran {
        self.output().fails()
    }

    /// Run it; it must be refused cleanly: a non-zero exit, every needle
    /// (the flag, the accepted range) in its stderr, and nothing
    /// half-written on stdout. Its stderr.
    #[track_caller]
    pub fn refused(&self, needles: &[&str]) -> String {
        let ran = self.output_within(self.timeout.unwrap_or(REFUSAL_LIMIT));
        assert!(!ran.success(), "should be refused\n{}", ran.report());
        let err = ran.stderr();
        for n in needles {
            assert!(err.contains(n), "stderr lacks {n:?}\n{}", ran.report());
        }
        assert!(
            ran.stdout.is_empty(),
            "nothing half-written on stdout\n{}",
            ran.report()
        );
        err
    }

    fn with_json(&self) -> Thrum {
        if self.args.iter().any(|a| a == "--json") {
            self.clone()
        } else {
            self.clone().arg("--json")
        }
    }
}

/// The command line as a user would type it (an argument with a space in
/// quotes), with its namespace.
impl fmt::Display for Thrum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(ns) = &self.ns {
            write!(f, "ip netns exec {ns} ")?;
        }
        for w in &self.under {
            write!(f, "{} ", w.to_string_lossy())?;
        }
        match &self.via {
            Some(link) => f.write_str(&link.to_string_lossy())?,
            None => f.write_str("thrum")?,
        }
        for a in self.argv() {
            let a = a.to_string_lossy();
            if a.is_empty() || a.contains(|c: char| c.is_whitespace() || c == '\'') {
                write!(f, " '{}'", a.replace('\'', r"'\''"))?;
            } else {
                write!(f, " {a}")?;
            }
        }
        Ok(())
    }
}

/// A finished `thrum` process: its output (`Deref` to
/// `std::process::Output`) and the command line that ran, for the failure
/// messages.
pub struct Ran {
    out: Output,
    line: String,
}

impl Ran {
    /// What the command `line` (a [`Thrum`] a test ran itself through
    /// [`Thrum::command`], or any other) did.
    pub fn of(line: impl fmt::Display, out: Output) -> Ran {
        Ran {
            out,
            line: line.to_string(),
        }
    }

    pub fn success(&self) -> bool {
        self.out.status.success()
    }

    pub fn code(&self) -> Option<i32> {
        self.out.status.code()
    }

    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.out.stdout).into_owned()
    }

    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.out.stderr).into_owned()
    }

    /// What a failed assertion about this run prints: the command line,
    /// the exit status, the result's error if stdout holds a result (else
    /// the end of stdout), and the whole stderr.
    pub fn report(&self) -> String {
        let error = serde_json::from_slice::<Value>(&self.out.stdout)
            .ok()
            .and_then(|doc| doc["summary"]["error"].as_str().map(str::to_string));
        let mut s = format!("command: {}\nstatus: {}\n", self.line, self.out.status);
        match error {
            Some(e) => s += &format!("result's error: {e}\n"),
            // Not a result: what it printed may say what went wrong.
            None if !self.out.stdout.is_empty() => {
                let out = self.stdout();
                let mut from = out.len().saturating_sub(STDOUT_SHOWN);
                while !out.is_char_boundary(from) {
                    from += 1;
                }
                let tail = &out[from..];
                s += &format!("stdout (its last {STDOUT_SHOWN} bytes at most):\n{tail}\n");
            }
            None => {}
        }
        s += &format!("stderr:\n{}", self.stderr());
        s
    }

    /// It must have succeeded.
    #[track_caller]
    pub fn ok(self) -> Ran {
        assert!(self.success(), "failed\n{}", self.report());
        self
    }

    /// It must have failed.
    #[track_caller]
    pub fn fails(self) -> Ran {
        assert!(!self.success(), "should fail\n{}", self.report());
        self
    }

    /// The JSON document on stdout, whatever the exit status.
    #[track_caller]
    pub fn json(&self) -> Value {
        match serde_json::from_slice(&self.out.stdout) {
            Ok(doc) => doc,
            Err(e) => panic!("stdout is not JSON ({e})\n{}", self.report()),
        }
    }

    /// The JSON document of a run that must have succeeded.
    #[track_caller]
    pub fn json_ok(&self) -> Value {
        assert!(self.success(), "failed\n{}", self.report());
        self.json()
    }

    /// The lines of a `--json-stream` run that must have succeeded.
    #[track_caller]
    pub fn json_lines(&self) -> Vec<Value> {
        assert!(self.success(), "failed\n{}", self.report());
        let mut lines = Vec::new();
        for l in self.stdout().lines() {
            match serde_json::from_str(l) {
                Ok(v) => lines.push(v),
                Err(e) => panic!("not one JSON object ({e}): {l}\n{}", self.report()),
            }
        }
        lines
    }
}

impl std::ops::Deref for Ran {
    type Target = Output;

    fn deref(&self) -> &Output {
        &self.out
    }
}

/// A `thrum` process a test started ([`Thrum::spawn`]) and may signal.
pub struct Running {
    pub child: Child,
    line: String,
}

impl Running {
    /// Wait for it to end: what it did.
    pub fn wait(self) -> Ran {
        let out = self
            .child
            .wait_with_output()
            .unwrap_or_else(|e| panic!("{}: {e}", self.line));
        Ran {
            out,
            line: self.line,
        }
    }
}
