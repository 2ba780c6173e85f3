//! One run of a probe: `thrum run` or `thrum ping` as a child process of
//! this same executable, with `--json`, under a hard time limit, and its
//! JSON read for the figures. A child of its own isolates each probe: one
//! that crashes, hangs or leaks takes no other probe with it, and what a
//! probe measures is exactly what `thrum run` would print by hand. Why a
//! run failed is read from the child's error line as one of a few
//! reasons ([`Reason`]), the failure counter's label.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::buckets::Buckets;
use super::config::{Probe, ProbeTest};
use crate::plan::{Loss, Merit};
use crate::stats::latency::LatencyHistogram;

/// The echo interval of a ping probe unless its `args` set one: five
/// echoes a second over `duration`.
const PING_INTERVAL: Duration = Duration::from_millis(200);
/// How long the output is waited for once the child has exited.
const DRAIN: Duration = Duration::from_secs(2);
/// How often a waiting run looks at its child.
const POLL: Duration = Duration::from_millis(20);

/// What the probe's children inherit from the monitor.
#[derive(Clone, Debug, Default)]
pub struct Context {
    /// The `thrum` executable the probes run (the monitor's own).
    pub exe: PathBuf,
    /// The results store the children save to (`THRUM_DB`), as `--db` gave it.
    pub db: Option<PathBuf>,
}

/// The one place a probe's command line is made: `thrum run TEST -H TARGET
/// -l DURATION --json …` or `thrum ping TARGET -c N -i 200ms --json
/// --label probe=NAME ARGS…`: the label names the probe in the results
/// store, so every run a probe makes carries it.
pub fn command(probe: &Probe, ctx: &Context) -> Command {
    let mut cmd = Command::new(&ctx.exe);
    cmd.args(command_args(probe));
    if let Some(db) = &ctx.db {
        cmd.env("THRUM_DB", db);
    }
    cmd
}

/// The arguments of [`command`], after the program's name.
pub fn command_args(probe: &Probe) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    match probe.test {
        ProbeTest::Run(_) | ProbeTest::Mix(_) => {
            v.push("run".into());
            match &probe.mix {
                Some(spec) => v.extend(["--mix".into(), spec.clone()]),
                None => v.push(probe.test.name().into()),
            }
            v.extend(["-H".into(), probe.target.clone()]);
            v.extend(["-l".into(), format!("{}ms", probe.duration.as_millis())]);
        }
        ProbeTest::Ping => {
            v.extend(["ping".into(), probe.target.clone()]);
            let sets = |flags: &[&str]| {
                probe.args.iter().any(|a| {
                    flags.iter().any(|f| {
                        a == f
                            || a.starts_with(&format!("{f}="))
                            || (f.len() == 2 && a.starts_with(f))
                    })
                })
            };
            if !sets(&["-i", "--interval"]) {
                v.extend(["-i".into(), format!("{}ms", PING_INTERVAL.as_millis())]);
            }
            if !sets(&["-c", "--count"]) {
                let n = (probe.duration.as_millis() / PING_INTERVAL.as_millis()).max(1);
                v.extend(["-c".into(), n.to_string()]);
            }
        }
    }
    v.push("--json".into());
    // The results store keeps the run (in the monitor's --db, passed down
    // as THRUM_DB) tagged with the probe's name, for `thrum history --label
    // probe=NAME` and `compare label:probe=NAME`.
    v.extend(["--label".into(), format!("probe={}", probe.name)]);
    // And with the probe's own labels, as its series carry them.
    for (k, val) in &probe.labels {
        v.extend(["--label".into(), format!("{k}={val}")]);
    }
    v.extend(probe.args.iter().cloned());
    v
}

/// The figures of one run, as far as its test has them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Figures {
    pub throughput_bps: Option<f64>,
    pub transactions_per_s: Option<f64>,
    pub latency_p50_s: Option<f64>,
    pub latency_p99_s: Option<f64>,
    /// The run's whole latency histogram in the metrics' buckets: a
    /// transaction test's `summary.histogram`, ping's round trips (its
    /// first size), a mix's probes in its idle phase.
    pub latency: Option<Buckets>,
    /// Lost over sent: ping's echoes, udp_rr's transactions, udp_stream's
    /// datagrams (0 to 1).
    pub loss_ratio: Option<f64>,
    /// A mix: its probes' latency in the loaded phase, in the buckets.
    pub loaded_latency: Option<Buckets>,
    /// A mix: latency under load, the loaded phase's p50 and p99 (s).
    pub under_load_p50_s: Option<f64>,
    pub under_load_p99_s: Option<f64>,
    /// A mix: the bulk parts' goodput in the loaded phase, each way (bit/s).
    pub goodput_up_bps: Option<f64>,
    pub goodput_down_bps: Option<f64>,
}

/// Why a run failed, as the failure counter's `reason` label says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reason {
    /// The target said no: a connection refused (RST), or its server
    /// refused the session.
    Refused,
    /// Nothing came back in time: a connect, a reply or an echo timed
    /// out, or the run outlasted the probe's `timeout`.
    Timeout,
    /// No way there: the name does not resolve, no route, the network or
    /// host unreachable (as the kernel or an ICMP error says).
    Unreachable,
    /// Anything else (a bad key, a server that speaks another protocol,
    /// a crash).
    Error,
}

impl Reason {
    /// Every reason, in the order the metrics list them.
    pub const ALL: [Reason; 4] = [
        Reason::Refused,
        Reason::Timeout,
        Reason::Unreachable,
        Reason::Error,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Reason::Refused => "refused",
            Reason::Timeout => "timeout",
            Reason::Unreachable => "unreachable",
            Reason::Error => "error",
        }
    }

    /// The reason a failed run's error line gives. The child is another
    /// process, so its error arrives as text: the kernel's own words for
    /// the errno (`Connection refused (os error 111)`, `No route to
    /// host`), and thrum's own for what it saw (`did not answer within`,
    /// `cannot resolve`, `refused:`).
    pub fn of(error: &str) -> Reason {
        let e = error.to_ascii_lowercase();
        let any = |words: &[&str]| words.iter().any(|w| e.contains(w));
        if any(&[
            "unreachable",
            "no route to host",
            "cannot resolve",
            "failed to lookup address",
            "name or service not known",
            "os error 101",
            "os error 113",
        ]) {
            Reason::Unreachable
        } else if any(&["connection refused", "os error 111", " refused:"]) {
            Reason::Refused
        } else if any(&[
            "timed out",
            "did not answer",
            "after its timeout",
            "was answered within",
            "os error 110",
        ]) {
            Reason::Timeout
        } else {
            Reason::Error
        }
    }
}

/// How one run ended.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// Its result had no error and its process exited with status 0.
    pub success: bool,
    /// Wall time from start to exit.
    pub elapsed: Duration,
    pub figures: Figures,
    /// Why it failed, in a line.
    pub error: Option<String>,
}

impl Outcome {
    /// Why it failed, as a [`Reason`]; none for a success.
    pub fn reason(&self) -> Option<Reason> {
        self.error.as_deref().map(Reason::of)
    }
}

/// Run `probe` once and wait for it; kill it when it outlasts the probe's
/// timeout, or when `stop` has been set for longer than `stop_grace` (a
/// SIGTERM first, which ends a run's window early, then SIGKILL a second
/// later).
pub fn run(probe: &Probe, ctx: &Context, stop: &AtomicBool, stop_grace: Duration) -> Outcome {
    let start = Instant::now();
    let fail = |e: String| Outcome {
        success: false,
        elapsed: start.elapsed(),
        figures: Figures::default(),
        error: Some(e),
    };
    // A process group of its own: a timeout ends whatever the probe
    // started too, and a Ctrl-C at the monitor's terminal reaches the
    // monitor alone, which then lets the probe finish.
    let mut child = match command(probe, ctx)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return fail(format!("cannot start {}: {e}", ctx.exe.display())),
    };
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let mut stopped_at: Option<Instant> = None;
    let mut killed = None;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) => {}
            Err(_) => break None,
        }
        if stop.load(Ordering::Relaxed) && stopped_at.is_none() {
            stopped_at = Some(Instant::now());
        }
        let over_time = start.elapsed() > probe.timeout;
        let over_grace = stopped_at.is_some_and(|t| t.elapsed() > stop_grace);
        if killed.is_none() && (over_time || over_grace) {
            // SIGTERM first: a run ends its window early and prints what it measured.
            // SAFETY: kill(2) on the process group our own child leads (not yet reaped).
            unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGTERM) };
            killed = Some((Instant::now(), over_time));
        }
        if let Some((at, _)) = killed
            && at.elapsed() > Duration::from_secs(1)
        {
            // SAFETY: as above.
            unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
        }
        std::thread::sleep(POLL);
    };
    // What the child wrote is in the pipes once it has exited; a process
    // it left behind holding them open is not waited for.
    let stdout = out.recv_timeout(DRAIN).unwrap_or_default();
    let stderr = err.recv_timeout(DRAIN).unwrap_or_default();
    let elapsed = start.elapsed();
    if let Some((_, over_time)) = killed {
        let why = if over_time {
            format!("killed after its timeout of {:?}", probe.timeout)
        } else {
            "stopped with the monitor".to_string()
        };
        return Outcome {
            elapsed,
            ..fail(why)
        };
    }
    let last_line = |s: &[u8]| {
        String::from_utf8_lossy(s)
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(|l| l.trim().trim_start_matches("error: ").to_string())
    };
    let doc: Option<Value> = serde_json::from_slice(&stdout).ok();
    let figures = doc
        .as_ref()
        .map(|d| figures(probe.test, d))
        .unwrap_or_default();
    let doc_error = doc
        .as_ref()
        .and_then(|d| d.pointer("/summary/error"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let exited_ok = status.is_some_and(|s| s.success());
    let error = match (exited_ok, doc_error, &doc) {
        (true, None, Some(_)) => None,
        (_, Some(e), _) => Some(e),
        (_, None, None) => Some(
            last_line(&stderr).unwrap_or_else(|| format!("exited with {status:?} and no result")),
        ),
        (false, None, Some(_)) => {
            Some(last_line(&stderr).unwrap_or_else(|| format!("exited with {status:?}")))
        }
    };
    Outcome {
        success: error.is_none(),
        elapsed,
        figures,
        error,
    }
}

/// Read a pipe to its end on a thread of its own (a result larger than
/// the pipe's 64 KiB would otherwise block its writer), handing the bytes
/// over when it closes.
fn drain<R: Read + Send + 'static>(pipe: Option<R>) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut v = Vec::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_end(&mut v);
        }
        let _ = tx.send(v);
    });
    rx
}

fn num(d: &Value, path: &str) -> Option<f64> {
    d.pointer(path).and_then(Value::as_f64)
}

/// The buckets of the histogram at `path` (HdrHistogram V2, base64).
fn buckets(d: &Value, path: &str) -> Option<Buckets> {
    let h = LatencyHistogram::from_base64(d.pointer(path)?.as_str()?).ok()?;
    (h.count() > 0).then(|| Buckets::of(&h))
}

/// `lost` over `lost` plus `arrived`: the share that never came back.
fn loss(lost: Option<f64>, arrived: Option<f64>) -> Option<f64> {
    let (l, a) = (lost?, arrived?);
    (l + a > 0.0).then(|| l / (l + a))
}

/// The headline figures of a `thrum.result.v1` or `thrum.ping.v1` document.
pub fn figures(test: ProbeTest, d: &Value) -> Figures {
    // Divided, not multiplied by 1e-9: 14071 ns reads 0.000014071, not 0.000014071000000000001.
    const NS: f64 = 1e9;
    match test {
        ProbeTest::Run(kind) => {
            let bulk = kind.traits().merit == Merit::Throughput;
            // capacity's figure is its estimate, not its probe's own load.
            let at = if kind == crate::plan::TestKind::Capacity {
                "/summary/capacity_bps"
            } else {
                "/summary/throughput_bps"
            };
            // The window's figures, as the headline counts them: udp_rr's
            // timed-out transactions beside those completed, udp_stream's
            // gaps beside the datagrams received.
            let loss_ratio = match kind.traits().loss {
                Loss::Transactions => {
                    loss(num(d, "/summary/lost"), num(d, "/summary/transactions"))
                }
                Loss::Datagrams => loss(
                    num(d, "/summary/lost"),
                    num(d, "/summary/datagrams_received"),
                ),
                _ => None,
            };
            Figures {
                throughput_bps: num(d, at).filter(|_| bulk),
                transactions_per_s: num(d, "/summary/transactions_per_s").filter(|_| !bulk),
                latency_p50_s: num(d, "/summary/latency_ns/p50").map(|v| v / NS),
                latency_p99_s: num(d, "/summary/latency_ns/p99").map(|v| v / NS),
                latency: buckets(d, "/summary/histogram"),
                loss_ratio,
                ..Figures::default()
            }
        }
        // The phases' own latency, idle and loaded (the summary's
        // `latency_under_load_ns` is their difference: a query takes it).
        ProbeTest::Mix(_) => Figures {
            latency_p50_s: num(d, "/summary/phases/idle/probe_latency_ns/p50").map(|v| v / NS),
            latency_p99_s: num(d, "/summary/phases/idle/probe_latency_ns/p99").map(|v| v / NS),
            latency: buckets(d, "/summary/phases/idle/probe_latency_histogram"),
            loaded_latency: buckets(d, "/summary/phases/loaded/probe_latency_histogram"),
            under_load_p50_s: num(d, "/summary/phases/loaded/probe_latency_ns/p50").map(|v| v / NS),
            under_load_p99_s: num(d, "/summary/phases/loaded/probe_latency_ns/p99").map(|v| v / NS),
            goodput_up_bps: num(d, "/summary/phases/loaded/throughput_up_bps"),
            goodput_down_bps: num(d, "/summary/phases/loaded/throughput_down_bps"),
            ..Figures::default()
        },
        ProbeTest::Ping => {
            let sizes = d
                .pointer("/summary/sizes")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let (sent, received) = sizes.iter().fold((0.0, 0.0), |(s, r), z| {
                (
                    s + num(z, "/sent").unwrap_or(0.0),
                    r + num(z, "/received").unwrap_or(0.0),
                )
            });
            // The first size's round trips: ping's default is one size.
            let first = sizes.first();
            Figures {
                latency_p50_s: first.and_then(|z| num(z, "/rtt_ns/p50")).map(|v| v / NS),
                latency_p99_s: first.and_then(|z| num(z, "/rtt_ns/p99")).map(|v| v / NS),
                latency: first.and_then(|z| buckets(z, "/rtt_histogram")),
                loss_ratio: (sent > 0.0).then(|| 1.0 - received / sent),
                ..Figures::default()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;
    use crate::plan::TestKind;

    fn probe(test: ProbeTest, args: &[&str]) -> Probe {
        Probe {
            name: "p".into(),
            target: "lg1:12880".into(),
            test,
            args: args.iter().map(|s| s.to_string()).collect(),
            every: Duration::from_secs(2),
            duration: Duration::from_secs(1),
            timeout: Duration::from_millis(400),
            mix: None,
            labels: Default::default(),
        }
    }

    #[test]
    fn command_lines() {
        let rr = probe(ProbeTest::Run(TestKind::TcpRr), &["-r", "64,64"]);
        assert_eq!(
            command_args(&rr).join(" "),
            "run tcp_rr -H lg1:12880 -l 1000ms --json --label probe=p -r 64,64"
        );
        let mut ping = probe(ProbeTest::Ping, &[]);
        ping.target = "lg1".into();
        assert_eq!(
            command_args(&ping).join(" "),
            "ping lg1 -i 200ms -c 5 --json --label probe=p"
        );
        let ping = probe(ProbeTest::Ping, &["-c20"]);
        assert_eq!(
            command_args(&ping).join(" "),
            "ping lg1:12880 -i 200ms --json --label probe=p -c20"
        );
        let mut rrul = probe(ProbeTest::Mix("rrul"), &[]);
        rrul.labels = [("site", "ams"), ("region", "eu")]
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .into();
        assert_eq!(
            command_args(&rrul).join(" "),
            "run rrul -H lg1:12880 -l 1000ms --json --label probe=p --label region=eu --label site=ams"
        );
        let mut mix = probe(ProbeTest::Mix("mix"), &["--idle", "2s"]);
        mix.mix = Some("tcp_stream*2,udp_rr@rate=10".into());
        assert_eq!(
            command_args(&mix).join(" "),
            "run --mix tcp_stream*2,udp_rr@rate=10 -H lg1:12880 -l 1000ms --json --label probe=p --idle 2s"
        );
        let ctx = Context {
            exe: "/bin/true".into(),
            db: Some("/tmp/x.db".into()),
        };
        let cmd = command(&rr, &ctx);
        let env: Vec<_> = cmd.get_envs().collect();
        assert_eq!(
            env,
            [(
                std::ffi::OsStr::new("THRUM_DB"),
                Some(std::ffi::OsStr::new("/tmp/x.db"))
            )]
        );
    }

    /// A stand-in for `thrum`: a shell script.
    fn fake(dir: &std::path::Path, body: &str) -> Context {
        let exe = dir.join("fake-thrum");
        std::fs::write(&exe, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        Context { exe, db: None }
    }

    #[test]
    fn outcomes_of_a_child() {
        let dir = tempfile::tempdir().unwrap();
        let p = probe(ProbeTest::Run(TestKind::TcpRr), &[]);
        let stop = AtomicBool::new(false);
        let grace = Duration::from_secs(60);

        let ok = r#"echo '{"summary":{"error":null,"transactions_per_s":1000.5,"latency_ns":{"p50":40000,"p99":90000}}}'"#;
        let o = run(&p, &fake(dir.path(), ok), &stop, grace);
        assert!(o.success, "{o:?}");
        assert_eq!(o.figures.transactions_per_s, Some(1000.5));
        assert_eq!(o.figures.latency_p50_s, Some(0.00004));
        assert_eq!(o.figures.throughput_bps, None);
        let cap =
            serde_json::json!({"summary": {"throughput_bps": 963_000.0, "capacity_bps": 89.21e6}});
        let f = figures(ProbeTest::Run(TestKind::Capacity), &cap);
        assert_eq!(f.throughput_bps, Some(89.21e6));

        let refused = r#"echo '{"summary":{"error":"cannot reach"}}'; echo 'error: cannot reach' >&2; exit 1"#;
        let o = run(&p, &fake(dir.path(), refused), &stop, grace);
        assert!(!o.success);
        assert_eq!(o.error.as_deref(), Some("cannot reach"));

        let crashed = "echo 'error: boom' >&2; kill -SEGV $$";
        let o = run(&p, &fake(dir.path(), crashed), &stop, grace);
        assert_eq!(o.error.as_deref(), Some("boom"), "{o:?}");

        // A hung child is ended at its timeout, even one that ignores SIGTERM.
        let hung = "trap '' TERM; sleep 30 & wait; sleep 30";
        let o = run(&p, &fake(dir.path(), hung), &stop, grace);
        assert!(!o.success);
        assert!(o.error.as_deref().unwrap().contains("timeout"), "{o:?}");
        assert!(o.elapsed < Duration::from_secs(10), "{o:?}");
    }

    /// The errors thrum and the kernel give, each to its reason.
    #[test]
    fn failures_are_classified_by_reason() {
        for (e, r) in [
            (
                "cannot reach the thrum server at 127.0.0.1:1 (is `thrum server` running there?): Connection refused (os error 111)",
                Reason::Refused,
            ),
            (
                "server lg1:12880 refused: too many sessions (limit 64)",
                Reason::Refused,
            ),
            (
                "cannot reach the thrum server at [2001:db8::1]:12880 (is `thrum server` running there?): No route to host (os error 113)",
                Reason::Unreachable,
            ),
            (
                "cannot reach the thrum server at 10.213.9.1:12880 (is `thrum server` running there?): Network is unreachable (os error 101)",
                Reason::Unreachable,
            ),
            (
                "-H: cannot resolve 'no-such-host.invalid': failed to lookup address information: Name or service not known",
                Reason::Unreachable,
            ),
            (
                "lg1 (10.0.0.1) did not answer: 5 echo requests got Destination Host Unreachable",
                Reason::Unreachable,
            ),
            (
                "server 127.0.0.1:23999 did not answer within 5s (waiting for 'hello')",
                Reason::Timeout,
            ),
            (
                "cannot reach the thrum server at [2001:db8::1]:12880 (is `thrum server` running there?): timed out",
                Reason::Timeout,
            ),
            (
                "2001:db8::1 (2001:db8::1) did not answer: none of 2 echo requests was answered within -W 1s",
                Reason::Timeout,
            ),
            ("killed after its timeout of 16s", Reason::Timeout),
            (
                "authentication failed: the server at lg1 requires a pre-shared key (--psk-file)",
                Reason::Error,
            ),
            (
                "10.213.99.1 is not a thrum server (it answered like HTTP: \"HTTP/1.1 400 Bad Request\")",
                Reason::Error,
            ),
            ("boom", Reason::Error),
        ] {
            assert_eq!(Reason::of(e), r, "{e}");
        }
    }

    /// Loss and the histogram from a udp_rr run's document, and a mix's
    /// figures from its phases.
    #[test]
    fn figures_of_udp_and_mix_documents() {
        let mut h = LatencyHistogram::new();
        h.record(30_000);
        h.record(70_000);
        let b64 = h.to_base64();
        let udp_rr = serde_json::json!({"summary": {"transactions": 990, "lost": 10,
            "transactions_per_s": 99.0, "histogram": b64}});
        let f = figures(ProbeTest::Run(TestKind::UdpRr), &udp_rr);
        assert_eq!(f.loss_ratio, Some(0.01));
        let b = f.latency.unwrap();
        assert_eq!((b.count, b.at_most[2], b.at_most[3]), (2, 1, 2));
        let udp_stream = serde_json::json!({"summary": {"datagrams_received": 300, "lost": 100,
            "throughput_bps": 1e6}});
        let f = figures(ProbeTest::Run(TestKind::UdpStream), &udp_stream);
        assert_eq!(f.loss_ratio, Some(0.25));
        assert_eq!(f.latency, None);
        let tcp = figures(ProbeTest::Run(TestKind::TcpRr), &udp_rr);
        assert_eq!(tcp.loss_ratio, None);
        let mix = serde_json::json!({"summary": {
            "latency_under_load_ns": {"p50": 2_950_000, "p99": 199_900_000},
            "phases": {
                "idle": {"probe_latency_histogram": b64,
                         "probe_latency_ns": {"p50": 50_000, "p99": 100_000}},
                "loaded": {"probe_latency_histogram": b64, "throughput_up_bps": 8e6,
                           "throughput_down_bps": 4e6,
                           "probe_latency_ns": {"p50": 3_000_000, "p99": 200_000_000}}}}});
        let f = figures(ProbeTest::Mix("rrul"), &mix);
        assert_eq!(
            (f.under_load_p50_s, f.under_load_p99_s),
            (Some(0.003), Some(0.2))
        );
        assert_eq!(
            (f.latency_p50_s, f.latency_p99_s),
            (Some(0.00005), Some(0.0001))
        );
        assert_eq!(
            (f.goodput_up_bps, f.goodput_down_bps),
            (Some(8e6), Some(4e6))
        );
        assert_eq!(f.loaded_latency.unwrap().count, 2);
        assert_eq!(f.latency.unwrap().count, 2);
    }

    #[test]
    fn a_stop_ends_a_long_run_after_the_grace() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = probe(ProbeTest::Run(TestKind::TcpRr), &[]);
        p.timeout = Duration::from_secs(60);
        let stop = AtomicBool::new(true);
        let o = run(
            &p,
            &fake(dir.path(), "exec sleep 30"),
            &stop,
            Duration::from_millis(100),
        );
        assert_eq!(o.error.as_deref(), Some("stopped with the monitor"));
        assert!(o.elapsed < Duration::from_secs(10), "{o:?}");
    }
}
