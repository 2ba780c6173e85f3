//! `thrum monitor` with real parts: a real `thrum
//! server`, the monitor running tcp_rr and ping probes against it every
//! 2 s, Debian's `prometheus` scraping its `/metrics` every second and
//! answering queries on its HTTP API, and `promtool check metrics` linting
//! the exposition. The server is killed mid-way: its probe must read
//! `thrum_probe_success 0` with failures counted while the ping probe goes
//! on succeeding; then SIGTERM, sent while a probe runs, must let that probe
//! finish and end the monitor, status 0, within 10 s.
//!
//! Without `prometheus` or `promtool` (apt-get install prometheus) their
//! parts print why and are skipped, unless `THRUM_E2E_PROMETHEUS=required`
//! (as .ci/run sets as root), which turns the skip into a failure; the
//! monitor's own checks run either way.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{ServerProc, Thrum};

/// Skip with a printed reason, or fail where CI requires the test.
pub fn skip(why: &str) {
    if std::env::var("THRUM_E2E_PROMETHEUS").as_deref() == Ok("required") {
        panic!("{why}");
    }
    eprintln!("SKIPPED: {why}");
}

pub fn has(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A child process killed when dropped.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `GET path` on `addr`: the status code and the body (HTTP/1.0, so the
/// answer ends with the connection).
pub fn get(addr: &str, path: &str) -> Option<(u16, String)> {
    let mut c = TcpStream::connect(addr).ok()?;
    c.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(c, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut text = String::new();
    c.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, body.to_string()))
}

/// `thrum monitor --config CONFIG --metrics-listen 127.0.0.1:0 --db DB`
/// with `more` applied (a namespace, say), its stderr into `log`: the
/// running child and its `/metrics` host:port.
pub fn start_monitor(
    config: &Path,
    db: &Path,
    log: &Path,
    more: impl FnOnce(Thrum) -> Thrum,
) -> (Child, String) {
    let mut child = more(
        Thrum::cmd(&["monitor", "--config"])
            .arg(config)
            .args(["--metrics-listen", "127.0.0.1:0", "--db"])
            .arg(db),
    )
    .command()
    .stdout(Stdio::piped())
    .stderr(std::fs::File::create(log).unwrap())
    .spawn()
    .unwrap();
    let addr = metrics_address(&mut child);
    (child, addr)
}

/// host:port of a starting monitor's `/metrics`, read from its ready line
/// on its piped stdout.
fn metrics_address(monitor: &mut Child) -> String {
    let mut ready = String::new();
    BufReader::new(monitor.stdout.take().unwrap())
        .read_line(&mut ready)
        .unwrap();
    ready
        .split("http://")
        .nth(1)
        .and_then(|s| s.split('/').next())
        .unwrap_or_else(|| panic!("no metrics address in {ready:?}"))
        .to_string()
}

/// The value of `name` for the probe of `test` in an exposition.
pub fn sample(text: &str, name: &str, test: &str) -> Option<f64> {
    let label = format!("test=\"{test}\"");
    text.lines()
        .find(|l| l.starts_with(&format!("{name}{{")) && l.contains(&label))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// Poll `check` every 200 ms until it holds or `limit` passes (a bound
/// for a failure, not the time it normally takes).
pub fn wait_for<T>(limit: Duration, mut check: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    loop {
        if let Some(v) = check() {
            return Some(v);
        }
        if start.elapsed() > limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A port free on loopback a moment ago (prometheus takes no port 0 it would report).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Prometheus scraping `target` every second, its storage under `dir`;
/// None (after `skip`) where it is missing or does not come up.
pub fn prometheus(dir: &Path, target: &str) -> Option<(Killed, String)> {
    if !has("prometheus") {
        skip("prometheus not found (apt-get install prometheus)");
        return None;
    }
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n\
             scrape_configs:\n  - job_name: thrum\n    static_configs:\n      - targets: ['{target}']\n"
        ),
    )
    .unwrap();
    let listen = format!("127.0.0.1:{}", free_port());
    let log = dir.join("prometheus.log");
    let child = Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("tsdb").display()
        ))
        .arg(format!("--web.listen-address={listen}"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn();
    let child = match child {
        Ok(c) => Killed(c),
        Err(e) => {
            skip(&format!("cannot start prometheus: {e}"));
            return None;
        }
    };
    let ready = wait_for(Duration::from_secs(30), || {
        get(&listen, "/-/ready").filter(|(s, _)| *s == 200)
    });
    if ready.is_none() {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        skip(&format!("prometheus did not come up on {listen}:\n{text}"));
        return None;
    }
    Some((child, listen))
}

/// `thrum_probe_success` per test, as Prometheus' query API answers it.
fn queried(prom: &str, query: &str) -> Vec<(String, String)> {
    let Some((200, body)) = get(prom, &format!("/api/v1/query?query={query}")) else {
        return Vec::new();
    };
    let doc: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    doc.pointer("/data/result")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|r| {
                    let test = r.pointer("/metric/test")?.as_str()?.to_string();
                    let v = r.pointer("/value/1")?.as_str()?.to_string();
                    Some((test, v))
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn prometheus_scrapes_the_monitor_and_sees_a_dead_server() {
    let tmp = tempfile::tempdir().unwrap();
    let server = ServerProc::start(&[]);
    // Two hosts (127.0.0.1 and .2, both loopback), so that the monitor
    // does not queue one probe behind the other.
    let config = tmp.path().join("monitor.toml");
    std::fs::write(
        &config,
        format!(
            "[defaults]\nevery = \"2s\"\nduration = \"1s\"\n\
             [[probe]]\nname = \"rr\"\ntarget = \"{}\"\ntest = \"tcp_rr\"\nargs = [\"--warmup\", \"0s\"]\n\
             [[probe]]\nname = \"echo\"\ntarget = \"127.0.0.2\"\ntest = \"ping\"\n",
            server.addr
        ),
    )
    .unwrap();
    let log = tmp.path().join("monitor.log");
    let (child, metrics) = start_monitor(&config, &tmp.path().join("store.db"), &log, |t| t);
    let monitor = Killed(child);
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();
    let scrape = || {
        get(&metrics, "/metrics")
            .map(|(_, b)| b)
            .unwrap_or_default()
    };
    let prom = prometheus(tmp.path(), &metrics);

    // Both probes succeed: tcp_rr's success 1.
    let text = wait_for(Duration::from_secs(30), || {
        let t = scrape();
        (sample(&t, "thrum_probe_success", "tcp_rr") == Some(1.0)
            && sample(&t, "thrum_probe_success", "ping") == Some(1.0))
        .then_some(t)
    })
    .unwrap_or_else(|| panic!("both probes never succeeded:\n{}\n{}", scrape(), log_text()));
    let tps = sample(&text, "thrum_probe_transactions_per_second", "tcp_rr").unwrap();
    assert!(tps > 0.0, "{text}");
    let loss = sample(&text, "thrum_probe_loss_ratio", "ping").unwrap();
    assert_eq!(loss, 0.0, "ping over loopback lost echoes:\n{text}");
    assert!(
        text.contains("test=\"tcp_rr\",quantile=\"0.99\"}"),
        "no latency quantile:\n{text}"
    );
    assert_eq!(get(&metrics, "/").map(|(s, _)| s), Some(404));

    crate::monitor_metrics::promtool_accepts(&text);

    // Prometheus has scraped both probes' success.
    if let Some((_, api)) = &prom {
        let seen = wait_for(Duration::from_secs(30), || {
            let r = queried(api, "thrum_probe_success");
            let ones = |t: &str| r.iter().any(|(test, v)| test == t && v == "1");
            (ones("tcp_rr") && ones("ping")).then_some(r)
        });
        assert!(
            seen.is_some(),
            "prometheus never returned thrum_probe_success for both probes: {:?}",
            queried(api, "thrum_probe_success")
        );
    }

    // The tcp_rr probe's server dies; the ping probe goes on.
    drop(server);
    let ping_runs = sample(&scrape(), "thrum_probe_runs_total", "ping").unwrap();
    let text = wait_for(Duration::from_secs(30), || {
        let t = scrape();
        (sample(&t, "thrum_probe_success", "tcp_rr") == Some(0.0)
            && sample(&t, "thrum_probe_failures_total", "tcp_rr") >= Some(1.0)
            && sample(&t, "thrum_probe_runs_total", "ping") >= Some(ping_runs + 1.0))
        .then_some(t)
    })
    .unwrap_or_else(|| {
        panic!(
            "the dead server's probe never failed:\n{}\n{}",
            scrape(),
            log_text()
        )
    });
    assert_eq!(
        sample(&text, "thrum_probe_success", "ping"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "thrum_probe_failures_total", "ping"),
        Some(0.0),
        "{text}"
    );
    // A failed run shows no figures of its own.
    assert_eq!(
        sample(&text, "thrum_probe_transactions_per_second", "tcp_rr"),
        None
    );
    assert!(log_text().contains("probe rr: failed"), "{}", log_text());
    if let Some((_, api)) = &prom {
        let seen = wait_for(Duration::from_secs(30), || {
            let r = queried(api, "thrum_probe_success");
            let is = |t: &str, v: &str| r.iter().any(|(test, x)| test == t && x == v);
            (is("tcp_rr", "0") && is("ping", "1")).then_some(())
        });
        assert!(
            seen.is_some(),
            "prometheus never saw the tcp_rr probe fail: {:?}",
            queried(api, "thrum_probe_success")
        );
    }

    // SIGTERM while a probe runs (the ping probe measures 1.8 s of every
    // 2): no new probe starts, the running one ends and is logged, and the
    // monitor exits 0 within 10 s.
    let mut monitor = monitor;
    let child = &mut monitor.0;
    let pid = child.id();
    // The ping probe's process (the tcp_rr probe's, refused, lives for
    // milliseconds): its run ends, and is logged, only after the count below.
    let pinging = || {
        children(pid).into_iter().any(|c| {
            std::fs::read(format!("/proc/{c}/cmdline"))
                .is_ok_and(|cmd| cmd.split(|b| *b == 0).nth(1) == Some(&b"ping"[..]))
        })
    };
    let probing = wait_for(Duration::from_secs(30), || pinging().then_some(()));
    assert!(
        probing.is_some(),
        "no ping probe ever ran under the monitor"
    );
    let runs_before = log_text()
        .lines()
        .filter(|l| l.starts_with("probe "))
        .count();
    let asked = Instant::now();
    // SAFETY: kill(2) on our own child, not yet reaped.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
    let status = wait_for(Duration::from_secs(10), || child.try_wait().ok().flatten());
    let _ = child.kill();
    let _ = child.wait();
    let status =
        status.unwrap_or_else(|| panic!("the monitor outlived SIGTERM by 10 s:\n{}", log_text()));
    assert!(status.success(), "{status:?}:\n{}", log_text());
    let log = log_text();
    let runs_after = log.lines().filter(|l| l.starts_with("probe ")).count();
    assert!(
        runs_after > runs_before,
        "the running probe was not waited for:\n{log}"
    );
    assert!(!log.contains("stopped with the monitor"), "{log}");
    assert!(
        log.trim_end().ends_with("thrum monitor: stopped by signal"),
        "{log}"
    );
    eprintln!("monitor ended {:?} after SIGTERM", asked.elapsed());

    // Every probe's runs are in the monitor's store, labelled with its name.
    for (probe, test) in [("rr", "tcp_rr"), ("echo", "ping")] {
        let runs = Thrum::cmd(&["history", "--json", "--label"])
            .arg(format!("probe={probe}"))
            .arg("--db")
            .arg(tmp.path().join("store.db"))
            .json();
        let runs = runs.as_array().expect("history --json is an array");
        assert!(!runs.is_empty(), "no stored run of probe {probe}");
        assert!(runs.iter().all(|r| r["test"] == test), "{runs:?}");
    }
}

/// The processes whose parent is `pid` (/proc/PID/stat's fourth field).
fn children(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|stat| {
                stat.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok())
                    == Some(pid)
            })
        })
        .collect()
}

/// A bad file stops the monitor before anything starts, naming the probe
/// and the field.
#[test]
fn a_bad_config_names_the_probe_and_field() {
    let tmp = tempfile::tempdir().unwrap();
    for (text, says) in [
        (
            "[[probe]]\ntarget = \"a\"\ntest = \"tcp_rr\"\n[[probe]]\ntarget = \"b\"\ntest = \"ping\"\nevry = \"2s\"\n",
            "probe 2: unknown key `evry`",
        ),
        (
            "[[probe]]\ntarget = \"a\"\ntest = \"tcp_rr\"\nevery = \"1s\"\nduration = \"5s\"\n",
            "probe 1.every: 1s is shorter than duration 5s",
        ),
        (
            "[[probe]]\ntarget = \"a\"\ntest = \"udp_flood\"\n",
            "probe 1.test: unknown test \"udp_flood\"",
        ),
        (
            "[[probe]]\ntarget = \"a\"\ntest = \"tcp_rr\"\nduration = \"soon\"\n",
            "probe 1.duration: ",
        ),
        (
            "[[probe]]\ntarget = \"a\"\ntest = \"tcp_rr\"\nargs = [\"--no-such-flag\"]\n",
            "probe 1 (tcp_rr@a).args: unexpected argument '--no-such-flag'",
        ),
    ] {
        let config = tmp.path().join("bad.toml");
        std::fs::write(&config, text).unwrap();
        let out = Thrum::cmd(&["monitor", "--metrics-listen", "127.0.0.1:0", "--config"])
            .arg(&config)
            .output();
        let stderr = out.stderr();
        assert_eq!(out.code(), Some(2), "{text}:\n{}", out.report());
        assert!(stderr.contains(says), "{text}: {stderr}");
        assert!(out.stdout.is_empty(), "it started: {}", out.stdout());
    }
}
