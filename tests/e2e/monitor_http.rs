//! `thrum monitor`'s `/metrics` against clients that hold connections,
//! and its reload on SIGHUP, with the real binary. The server must answer
//! a scrape beside ten idle connections and one sending its request a byte
//! every 1.5 s (the one-connection-at-a-time server it replaced let such a
//! client hold the endpoint until a scrape timed out after 20 s), close a
//! request head that never ends, and answer beyond its bound on
//! connections. A SIGHUP reads the file again: a bad one changes nothing,
//! a good one swaps the probes, keeping the counters of the ones that stay.
//!
//! The probes here run against closed ports on loopback, so each
//! run fails within milliseconds: the tests need runs counted, not a
//! server.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use crate::monitor::{sample, start_monitor, wait_for};

/// How long the monitor's server gives a connection to send its request
/// head (`monitor::http::LIMITS`). A scrape answered in less cannot have
/// waited for an idle connection's deadline: the bound the tests assert
/// proves concurrency on a loaded CI machine, where a few hundred
/// milliseconds of scheduling delay are common, and stays far below both
/// Prometheus' 10 s scrape timeout and the 20 s the old server took.
const HEAD_TIMEOUT: Duration = Duration::from_secs(2);

/// A running `thrum monitor`, killed when dropped.
struct Monitor {
    child: Child,
    /// host:port of its `/metrics`.
    addr: String,
    log: PathBuf,
    config: PathBuf,
}

impl Drop for Monitor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Monitor {
    /// Start the monitor on `config`'s text, metrics on a free port of
    /// loopback, and wait for its ready line.
    fn start(dir: &Path, config: &str) -> Monitor {
        let path = dir.join("monitor.toml");
        std::fs::write(&path, config).unwrap();
        let log = dir.join("monitor.log");
        let (child, addr) = start_monitor(&path, &dir.join("store.db"), &log, |t| t);
        Monitor {
            child,
            addr,
            log,
            config: path,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn signal(&self, sig: libc::c_int) {
        // SAFETY: kill(2) on our own child, not yet reaped.
        unsafe { libc::kill(self.child.id() as libc::pid_t, sig) };
    }

    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// `GET /metrics`: the status and body, and how long it took.
    fn scrape(&self) -> (u16, String, Duration) {
        let t = Instant::now();
        let mut c = TcpStream::connect(&self.addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        write!(c, "GET /metrics HTTP/1.1\r\nHost: {}\r\n\r\n", self.addr).unwrap();
        let mut text = String::new();
        let read = c.read_to_string(&mut text);
        let took = t.elapsed();
        read.unwrap_or_else(|e| panic!("no answer in {took:?}: {e}"));
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or(("", ""));
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        (status, body.to_string(), took)
    }
}

/// Failing probes (closed ports), one run a second each: name, target,
/// test. The tests tell the probes apart by test (as
/// `monitor::sample` reads a series).
fn config(probes: &[(&str, &str, &str)]) -> String {
    let mut text = "[defaults]\nevery = \"1s\"\nduration = \"100ms\"\n".to_string();
    for (name, target, test) in probes {
        text.push_str(&format!(
            "[[probe]]\nname = \"{name}\"\ntarget = \"{target}\"\ntest = \"{test}\"\n"
        ));
    }
    text
}

/// A client that sends `start`, then one byte every `every`, until the
/// server closes the connection; how long that took, or None if it was
/// still open after `limit`.
fn dribble(addr: &str, start: &[u8], every: Duration, limit: Duration) -> Option<Duration> {
    let mut c = TcpStream::connect(addr).unwrap();
    let t = Instant::now();
    c.write_all(start).unwrap();
    // The read's timeout is the pause between two bytes.
    c.set_read_timeout(Some(every)).unwrap();
    let mut buf = [0u8; 512];
    while t.elapsed() < limit {
        match c.read(&mut buf) {
            // The end (or any answer): closed either way.
            Ok(_) => return Some(t.elapsed()),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return Some(t.elapsed()),
        }
        if c.write_all(b"X").is_err() {
            return Some(t.elapsed());
        }
    }
    None
}

/// The red team's case: 10 idle connections and one sending a byte every
/// 1.5 s held the old server for 20 s and more; now the scrape is answered
/// at once, and the slow one is closed by its head deadline.
#[test]
fn a_scrape_is_answered_beside_idle_and_slow_connections() {
    let tmp = tempfile::tempdir().unwrap();
    let m = Monitor::start(tmp.path(), &config(&[("rr", "127.0.0.1:1", "tcp_rr")]));
    let idle: Vec<TcpStream> = (0..10)
        .map(|_| TcpStream::connect(&m.addr).unwrap())
        .collect();
    let addr = m.addr.clone();
    let slow = std::thread::spawn(move || {
        dribble(
            &addr,
            b"GET /metrics HTTP/1.1\r\n",
            Duration::from_millis(1500),
            Duration::from_secs(30),
        )
    });
    // Every one of them accepted and waiting before the scrape.
    std::thread::sleep(Duration::from_millis(300));
    let (status, body, took) = m.scrape();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\nthrum_monitor_uptime_seconds "), "{body}");
    assert!(
        took < HEAD_TIMEOUT,
        "the scrape waited {took:?} beside 10 idle connections and a slow one"
    );
    eprintln!("scrape beside 10 idle + 1 slow connections: answered in {took:?}");
    // The slow client is closed by the deadline on its whole head (2 s),
    // not kept open by its bytes; the idle ones by the same deadline.
    let held = slow
        .join()
        .unwrap()
        .expect("the slow client was never closed");
    assert!(
        held < Duration::from_secs(5),
        "the slow client held on {held:?}"
    );
    for mut c in idle {
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = [0u8; 512];
        let open = c
            .read(&mut buf)
            .is_err_and(|e| matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut));
        assert!(!open, "an idle connection was still open 5 s on");
    }
}

/// A request head that never ends, sent a byte every 300 ms (each read
/// well within any per-read timeout), is closed by the deadline on the
/// whole head.
#[test]
fn a_request_head_that_never_ends_is_closed() {
    let tmp = tempfile::tempdir().unwrap();
    let m = Monitor::start(tmp.path(), &config(&[("rr", "127.0.0.1:1", "tcp_rr")]));
    let held = dribble(
        &m.addr,
        b"GET /metrics HTTP/1.1\r\nX-Slow: ",
        Duration::from_millis(300),
        Duration::from_secs(30),
    )
    .expect("a head sent a byte at a time was held open for 30 s");
    assert!(
        held >= HEAD_TIMEOUT - Duration::from_millis(200) && held < Duration::from_secs(5),
        "closed after {held:?}, not at its head deadline ({HEAD_TIMEOUT:?})"
    );
    eprintln!("a head sent a byte every 300 ms: closed after {held:?}");
}

/// More connections than the server's bound (64): the oldest idle ones
/// make room, and a scrape is answered at once.
#[test]
fn more_connections_than_the_bound_do_not_stop_a_scrape() {
    let tmp = tempfile::tempdir().unwrap();
    let m = Monitor::start(tmp.path(), &config(&[("rr", "127.0.0.1:1", "tcp_rr")]));
    let idle: Vec<TcpStream> = (0..200)
        .map(|_| TcpStream::connect(&m.addr).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let (status, body, took) = m.scrape();
    assert_eq!(status, 200, "{body}");
    assert!(
        took < HEAD_TIMEOUT,
        "the scrape waited {took:?} behind 200 idle connections"
    );
    eprintln!("scrape beside 200 idle connections: answered in {took:?}");
    drop(idle);
}

/// SIGHUP: a bad file changes nothing (and says why); a good one swaps
/// the probes: a kept probe keeps its counters, a removed one's series
/// leave `/metrics`, a new one's come.
#[test]
fn sighup_reloads_the_probes() {
    let tmp = tempfile::tempdir().unwrap();
    let mut m = Monitor::start(
        tmp.path(),
        &config(&[
            ("kept", "127.0.0.1:1", "tcp_rr"),
            ("gone", "127.0.0.2:1", "udp_rr"),
        ]),
    );
    let runs = |text: &str, test: &str| sample(text, "thrum_probe_runs_total", test);
    wait_for(Duration::from_secs(30), || {
        let (_, t, _) = m.scrape();
        (runs(&t, "tcp_rr") >= Some(2.0) && runs(&t, "udp_rr") >= Some(1.0)).then_some(())
    })
    .unwrap_or_else(|| panic!("the probes never ran:\n{}", m.log()));

    // A bad file: the monitor says why and goes on with its probes.
    std::fs::write(&m.config, "[[probe]]\nname = \"x\"\nevry = \"1s\"\n").unwrap();
    m.signal(libc::SIGHUP);
    let said = wait_for(Duration::from_secs(10), || {
        m.log()
            .lines()
            .find(|l| l.contains("SIGHUP") && l.contains("unknown key `evry`"))
            .map(str::to_string)
    })
    .unwrap_or_else(|| panic!("no word on the bad file:\n{}", m.log()));
    assert!(said.contains("the 2 probes in force go on"), "{said}");
    assert!(m.alive(), "SIGHUP ended the monitor:\n{}", m.log());
    let (_, before, _) = m.scrape();
    assert!(runs(&before, "udp_rr").is_some(), "{before}");
    let kept_before = runs(&before, "tcp_rr").unwrap();

    // A good file: kept stays (with new args), gone goes, added comes.
    std::fs::write(
        &m.config,
        config(&[
            ("added", "127.0.0.3:1", "tcp_crr"),
            ("kept", "127.0.0.1:1", "tcp_rr"),
        ])
        .replace(
            "test = \"tcp_rr\"\n",
            "test = \"tcp_rr\"\nargs = [\"--warmup\", \"0s\"]\n",
        ),
    )
    .unwrap();
    m.signal(libc::SIGHUP);
    let after = wait_for(Duration::from_secs(30), || {
        let (_, t, _) = m.scrape();
        (runs(&t, "tcp_crr") >= Some(1.0)).then_some(t)
    })
    .unwrap_or_else(|| panic!("the added probe never ran:\n{}", m.log()));
    assert!(m.alive(), "SIGHUP ended the monitor:\n{}", m.log());
    assert!(
        !after.contains("probe=\"gone\""),
        "the removed probe's series are still served:\n{after}"
    );
    assert!(
        runs(&after, "tcp_rr") >= Some(kept_before),
        "the kept probe's counters started again:\n{after}"
    );
    let log = m.log();
    assert!(
        log.contains("SIGHUP: read ") && log.contains("2 probes (1 kept, 1 added, 1 removed)"),
        "{log}"
    );

    // A SIGTERM still ends it as before.
    m.signal(libc::SIGTERM);
    let status = wait_for(Duration::from_secs(10), || {
        m.child.try_wait().ok().flatten()
    })
    .unwrap_or_else(|| panic!("the monitor outlived SIGTERM by 10 s:\n{}", m.log()));
    assert!(status.success(), "{status:?}");
}

/// The unit reloads the monitor with SIGHUP (`systemctl reload`).
#[test]
fn the_unit_reloads_with_sighup() {
    let unit = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/systemd/thrum-monitor.service"),
    )
    .unwrap();
    assert!(
        unit.contains("\nExecReload=/bin/kill -HUP $MAINPID\n"),
        "{unit}"
    );
}
