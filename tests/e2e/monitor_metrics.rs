//! `thrum monitor`'s metrics as a fleet reads them, with real parts: a
//! real `thrum server`, two tcp_rr probes with labels of their own, a
//! udp_rr, a mix and a ping probe, Debian's `prometheus` scraping the
//! monitor every second and answering `histogram_quantile` over the two
//! probes' buckets, `promtool check metrics` linting the exposition, and
//! the shipped Grafana dashboard's every PromQL expression run against
//! that Prometheus with each metric it names found in a real scrape. The
//! buckets are checked against ground truth: their count is every
//! transaction of the runs the store holds, and the quantile lies where
//! the runs' own p99s put it, to a bucket. Then the failure reasons, each
//! from a real failure in a namespace of the test's own: a closed port
//! (refused), a server that never answers (timeout), a network with no
//! route (unreachable), a peer that speaks HTTP (error).
//!
//! Without `prometheus` or `promtool` their parts print why and are
//! skipped, unless `THRUM_E2E_PROMETHEUS=required`.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use thrum::stats::latency::LatencyHistogram;

use crate::common::{Netns, Ran, ServerProc, Thrum};
use crate::monitor::{Killed, get, has, prometheus, skip, start_monitor, wait_for};

/// One sample of an exposition: its series name, labels and value.
#[derive(Debug, Clone)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// The samples of a text exposition (label values unescaped).
fn parse(text: &str) -> Vec<Sample> {
    let mut out = Vec::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (series, value) = line.rsplit_once(' ').expect("NAME VALUE");
        let (name, mut rest) = match series.split_once('{') {
            Some((n, r)) => (n, r.strip_suffix('}').expect("closing brace")),
            None => (series, ""),
        };
        let mut labels = BTreeMap::new();
        while !rest.is_empty() {
            let (k, after) = rest.split_once("=\"").expect("KEY=\"");
            let mut v = String::new();
            let mut chars = after.char_indices();
            let end = loop {
                match chars.next().expect("a closing quote") {
                    (_, '\\') => match chars.next().expect("an escape").1 {
                        'n' => v.push('\n'),
                        c => v.push(c),
                    },
                    (i, '"') => break i,
                    (_, c) => v.push(c),
                }
            };
            labels.insert(k.to_string(), v);
            rest = after[end + 1..].trim_start_matches(',');
        }
        out.push(Sample {
            name: name.to_string(),
            labels,
            value: value.parse().expect("a number"),
        });
    }
    out
}

/// The value of `name` for probe `probe` with `extra` labels.
fn value(s: &[Sample], name: &str, probe: &str, extra: &[(&str, &str)]) -> Option<f64> {
    s.iter()
        .find(|x| {
            x.name == name
                && x.labels.get("probe").map(String::as_str) == Some(probe)
                && extra
                    .iter()
                    .all(|(k, v)| x.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|x| x.value)
}

/// A query's text for a URL.
fn encode(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Prometheus' answer to an instant query: its status and its result.
fn query(prom: &str, q: &str) -> (String, Vec<Value>) {
    query_at(prom, q, "")
}

/// [`query`] evaluated at `time` (Unix seconds; empty: now).
fn query_at(prom: &str, q: &str, time: &str) -> (String, Vec<Value>) {
    let at = if time.is_empty() {
        String::new()
    } else {
        format!("&time={time}")
    };
    let Some((_, body)) = get(prom, &format!("/api/v1/query?query={}{at}", encode(q))) else {
        return ("no answer".into(), Vec::new());
    };
    let doc: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let status = match doc["status"].as_str() {
        Some("success") => "success".to_string(),
        _ => format!("{}: {}", doc["errorType"], doc["error"]),
    };
    let result = doc
        .pointer("/data/result")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    (status, result)
}

/// The number in a result's `value` (NaN where Prometheus wrote none).
fn number(r: &Value) -> f64 {
    r.pointer("/value/1")
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
        .unwrap_or(f64::NAN)
}

/// `promtool check metrics` on `text`: it lints what Prometheus' own
/// client libraries would be held to.
pub fn promtool_accepts(text: &str) {
    if !has("promtool") {
        skip("promtool not found (apt-get install prometheus)");
        return;
    }
    let mut lint = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    lint.stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = Ran::of("promtool check metrics", lint.wait_with_output().unwrap());
    assert!(out.success(), "{}\n{text}", out.report());
}

/// The stored runs of probe `name`, oldest first, each its whole document.
fn stored_runs(db: &std::path::Path, name: &str) -> Vec<Value> {
    let rows = Thrum::cmd(&["history", "--json", "--label"])
        .arg(format!("probe={name}"))
        .arg("--db")
        .arg(db)
        .json();
    let rows = rows.as_array().expect("history --json is an array");
    let mut docs: Vec<(f64, Value)> = rows
        .iter()
        .map(|r| {
            let doc = Thrum::cmd(&["show", "--json", r["id"].as_str().unwrap(), "--db"])
                .arg(db)
                .json();
            (r["time_unix_s"].as_f64().unwrap(), doc)
        })
        .collect();
    docs.sort_by(|a, b| a.0.total_cmp(&b.0));
    docs.into_iter().map(|d| d.1).collect()
}

/// The latency buckets' bounds, seconds (as the metrics write them).
fn bounds(s: &[Sample], probe: &str) -> Vec<f64> {
    s.iter()
        .filter(|x| {
            x.name == "thrum_probe_latency_seconds_bucket"
                && x.labels.get("probe").map(String::as_str) == Some(probe)
        })
        .filter_map(|x| x.labels["le"].parse::<f64>().ok())
        .filter(|b| b.is_finite())
        .collect()
}

/// Every metric name a PromQL expression names (thrum's: they start with
/// `thrum_`).
fn metric_names(expr: &str) -> Vec<String> {
    let mut v = Vec::new();
    let b = expr.as_bytes();
    let mut i = 0;
    while let Some(at) = expr[i..].find("thrum_") {
        let start = i + at;
        let boundary =
            start == 0 || !(b[start - 1].is_ascii_alphanumeric() || b[start - 1] == b'_');
        let mut end = start;
        while end < b.len() && (b[end].is_ascii_alphanumeric() || b[end] == b'_' || b[end] == b':')
        {
            end += 1;
        }
        if boundary {
            v.push(expr[start..end].to_string());
        }
        i = end;
    }
    v
}

/// Every PromQL expression of a Grafana dashboard: panels' targets (rows'
/// panels too) and the query variables' definitions.
fn expressions(dash: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    fn walk(panels: &Value, out: &mut Vec<(String, String)>) {
        for p in panels.as_array().into_iter().flatten() {
            let title = p["title"].as_str().unwrap_or("?").to_string();
            for t in p["targets"].as_array().into_iter().flatten() {
                if let Some(e) = t["expr"].as_str() {
                    out.push((title.clone(), e.to_string()));
                }
            }
            walk(&p["panels"], out);
        }
    }
    walk(&dash["panels"], &mut out);
    for v in dash["templating"]["list"].as_array().into_iter().flatten() {
        if v["type"] == "query" {
            let q = v["definition"].as_str().unwrap_or_default();
            out.push((format!("variable {}", v["name"]), q.to_string()));
        }
    }
    out
}

/// A dashboard expression made a query Prometheus runs: Grafana's
/// variables given values, `label_values(M, L)` queried as `M`.
fn runnable(expr: &str, probe: &str) -> String {
    let e = expr
        .replace("$__rate_interval", "1m")
        .replace("$__interval", "1m")
        .replace("$probe", probe)
        .replace("$site", ".*")
        .replace("$region", ".*")
        .replace("$test", ".*");
    match e.strip_prefix("label_values(") {
        Some(rest) => rest
            .rsplit_once(',')
            .map_or(rest.to_string(), |(m, _)| m.to_string()),
        None => e,
    }
}

#[test]
fn prometheus_adds_up_two_probes_buckets_and_the_dashboard_names_only_served_metrics() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("store.db");
    let server = ServerProc::start(&[]);
    // Two tcp_rr probes of one server with labels of their own (one with
    // characters the format escapes), a udp_rr, a udp_stream at 50 Mbit/s,
    // a short mix and a ping
    // (to 127.0.0.2, so that it waits for none of the others).
    let region = r#"eu "west" \1"#;
    let config = tmp.path().join("monitor.toml");
    let text = |b_site: &str| {
        format!(
            "[defaults]\nevery = \"2s\"\nduration = \"1s\"\nlabels = {{ region = '{region}' }}\n\
             [[probe]]\nname = \"rr-a\"\ntarget = \"{addr}\"\ntest = \"tcp_rr\"\nargs = [\"--warmup\", \"0s\"]\nlabels = {{ site = \"a\" }}\n\
             [[probe]]\nname = \"rr-b\"\ntarget = \"{addr}\"\ntest = \"tcp_rr\"\nargs = [\"--warmup\", \"0s\", \"-r\", \"200,200\"]\nlabels = {{ site = \"{b_site}\" }}\n\
             [[probe]]\nname = \"udp\"\ntarget = \"{addr}\"\ntest = \"udp_rr\"\nargs = [\"--warmup\", \"0s\"]\n\
             [[probe]]\nname = \"stream\"\ntarget = \"{addr}\"\ntest = \"udp_stream\"\nargs = [\"--warmup\", \"0s\", \"--rate\", \"50M\"]\n\
             [[probe]]\nname = \"bloat\"\ntarget = \"{addr}\"\ntest = \"mix\"\nmix = \"tcp_stream,udp_rr@rate=50\"\nevery = \"4s\"\nargs = [\"--warmup\", \"0s\", \"--idle\", \"1s\", \"--recovery\", \"1s\"]\n\
             [[probe]]\nname = \"echo\"\ntarget = \"127.0.0.2\"\ntest = \"ping\"\n",
            addr = server.addr
        )
    };
    std::fs::write(&config, text("b")).unwrap();
    let log = tmp.path().join("monitor.log");
    let (child, metrics) = start_monitor(&config, &db, &log, |t| t);
    let monitor = Killed(child);
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();
    let scrape = || {
        get(&metrics, "/metrics")
            .map(|(_, b)| b)
            .unwrap_or_default()
    };
    let prom = prometheus(tmp.path(), &metrics);

    // Three runs of each tcp_rr probe, and one of every other.
    let text_now = wait_for(Duration::from_secs(90), || {
        let t = scrape();
        let s = parse(&t);
        let runs = |p: &str| value(&s, "thrum_probe_runs_total", p, &[]).unwrap_or(0.0);
        (runs("rr-a") >= 3.0
            && runs("rr-b") >= 3.0
            && ["udp", "stream", "bloat", "echo"]
                .iter()
                .all(|p| runs(p) >= 1.0))
        .then_some(t)
    })
    .unwrap_or_else(|| panic!("the probes never ran enough:\n{}\n{}", scrape(), log_text()));
    promtool_accepts(&text_now);
    let s = parse(&text_now);

    // Every series of a probe carries its labels, the escaped one intact.
    for x in s.iter().filter(|x| x.labels.contains_key("probe")) {
        assert_eq!(
            x.labels.get("region").map(String::as_str),
            Some(region),
            "{x:?}"
        );
    }
    assert!(
        s.iter()
            .filter(|x| x.labels.get("probe").map(String::as_str) == Some("rr-a"))
            .all(|x| x.labels["site"] == "a")
    );

    // The buckets: cumulative, +Inf the count, and the count every
    // transaction of the runs counted so far (the store holds each run
    // before the monitor counts it; all succeeded on loopback).
    for probe in ["rr-a", "rr-b", "udp", "echo"] {
        let le = bounds(&s, probe);
        assert_eq!(le.len(), 19, "{probe}: {le:?}");
        assert!(
            (le[0] - 1e-5).abs() < 1e-12 && (le[18] - 10.0).abs() < 1e-9,
            "{le:?}"
        );
        let counts: Vec<f64> = s
            .iter()
            .filter(|x| {
                x.name == "thrum_probe_latency_seconds_bucket" && x.labels["probe"] == probe
            })
            .map(|x| x.value)
            .collect();
        assert!(
            counts.windows(2).all(|w| w[0] <= w[1]),
            "{probe}: {counts:?}"
        );
        let count = value(&s, "thrum_probe_latency_seconds_count", probe, &[]).unwrap();
        assert_eq!(counts.last(), Some(&count), "{probe}");
        assert!(count > 0.0, "{probe}");
    }
    for probe in ["rr-a", "rr-b"] {
        let runs = value(&s, "thrum_probe_runs_total", probe, &[]).unwrap() as usize;
        let count = value(&s, "thrum_probe_latency_seconds_count", probe, &[]).unwrap();
        let stored = stored_runs(&db, probe);
        assert!(
            stored.len() >= runs,
            "{probe}: {} stored, {runs} counted",
            stored.len()
        );
        let transactions: f64 = stored[..runs]
            .iter()
            .map(|d| {
                d.pointer("/summary/latency_ns/count")
                    .and_then(Value::as_f64)
                    .unwrap()
            })
            .sum();
        assert_eq!(
            count, transactions,
            "{probe}: buckets against the stored runs"
        );
        let sum = value(&s, "thrum_probe_latency_seconds_sum", probe, &[]).unwrap();
        let mean_stored: f64 = stored[..runs]
            .iter()
            .map(|d| {
                d.pointer("/summary/latency_ns/mean")
                    .and_then(Value::as_f64)
                    .unwrap()
                    * d.pointer("/summary/latency_ns/count")
                        .and_then(Value::as_f64)
                        .unwrap()
            })
            .sum::<f64>()
            / 1e9;
        // The mean of an HDR histogram is to its 3 significant digits.
        assert!(
            (sum - mean_stored).abs() <= mean_stored * 0.002,
            "{probe}: sum {sum} against {mean_stored}"
        );
    }
    // The loss ratios: exactly one of the runs' lost over lost and
    // arrived (udp_rr's transactions, udp_stream's datagrams).
    for (probe, arrived) in [("udp", "transactions"), ("stream", "datagrams_received")] {
        let loss = value(&s, "thrum_probe_loss_ratio", probe, &[]).expect("a loss ratio");
        let runs = stored_runs(&db, probe);
        assert!(
            runs.iter().any(|d| {
                let l = d["summary"]["lost"].as_f64().unwrap();
                let a = d["summary"][arrived].as_f64().unwrap();
                (l / (l + a) - loss).abs() < 1e-12
            }),
            "{probe}: loss {loss} is no run's"
        );
    }
    assert!(
        value(&s, "thrum_probe_throughput_bytes_per_second", "stream", &[])
            .is_some_and(|b| b > 0.0)
    );
    assert_eq!(value(&s, "thrum_probe_loss_ratio", "echo", &[]), Some(0.0));
    // The mix: latency under load in buckets and as its run's p99, goodput each way.
    for (name, extra) in [
        ("thrum_probe_latency_under_load_seconds_count", &[][..]),
        (
            "thrum_probe_run_latency_under_load_seconds",
            &[("quantile", "0.99")][..],
        ),
        (
            "thrum_probe_goodput_bytes_per_second",
            &[("direction", "up")][..],
        ),
    ] {
        let v = value(&s, name, "bloat", extra);
        assert!(v.is_some_and(|v| v > 0.0), "{name}: {v:?}\n{text_now}");
    }
    for reason in ["refused", "timeout", "unreachable", "error"] {
        assert_eq!(
            value(
                &s,
                "thrum_probe_failures_total",
                "rr-a",
                &[("reason", reason)]
            ),
            Some(0.0)
        );
    }

    // The dashboard names only what /metrics serves.
    let dash: Value =
        serde_json::from_str(include_str!("../../deploy/grafana/thrum-monitor.json")).unwrap();
    let served: std::collections::BTreeSet<&str> = s.iter().map(|x| x.name.as_str()).collect();
    let exprs = expressions(&dash);
    assert!(exprs.len() > 15, "{exprs:?}");
    let mut named = std::collections::BTreeSet::new();
    for (title, e) in &exprs {
        let names = metric_names(e);
        assert!(!names.is_empty(), "{title}: {e} names no thrum metric");
        for n in names {
            assert!(
                served.contains(n.as_str()),
                "{title}: {e} names {n}, which /metrics does not serve"
            );
            named.insert(n);
        }
    }
    // A heat map and the mix's panels are in it.
    for n in [
        "thrum_probe_latency_seconds_bucket",
        "thrum_probe_latency_under_load_seconds_bucket",
        "thrum_probe_goodput_bytes_per_second",
        "thrum_probe_failures_total",
    ] {
        assert!(named.contains(n), "the dashboard never shows {n}");
    }

    let Some((_prom_child, api)) = &prom else {
        return;
    };
    // Prometheus has rates of both probes' buckets: the p99 over them.
    let q = r#"histogram_quantile(0.99, sum by (le) (rate(thrum_probe_latency_seconds_bucket{probe=~"rr-a|rr-b"}[1m])))"#;
    let p99 = wait_for(Duration::from_secs(60), || {
        let (status, r) = query(api, q);
        assert_eq!(status, "success", "{q}");
        r.first().map(number).filter(|v| v.is_finite())
    })
    .unwrap_or_else(|| panic!("{q} gave no value: {:?}", query(api, q)));
    // The p99 of the union of runs lies between the runs' own smallest
    // and largest p99; interpolated inside a bucket, it lies in the
    // buckets that hold those two.
    let mut own: Vec<f64> = ["rr-a", "rr-b"]
        .iter()
        .flat_map(|p| stored_runs(&db, p))
        .filter_map(|d| d.pointer("/summary/latency_ns/p99").and_then(Value::as_f64))
        .map(|ns| ns / 1e9)
        .collect();
    own.sort_by(f64::total_cmp);
    let le = bounds(&s, "rr-a");
    let below = |v: f64| le.iter().copied().filter(|b| *b < v).fold(0.0, f64::max);
    let above = |v: f64| {
        le.iter()
            .copied()
            .find(|b| *b >= v)
            .unwrap_or(f64::INFINITY)
    };
    let (lo, hi) = (below(own[0]), above(own[own.len() - 1]));
    eprintln!(
        "histogram_quantile(0.99) over rr-a and rr-b: {:.1} us; the runs' own p99: {:.1} to {:.1} us ({} runs); buckets {lo} to {hi} s",
        p99 * 1e6,
        own[0] * 1e6,
        own[own.len() - 1] * 1e6,
        own.len()
    );
    assert!(
        p99 >= lo && p99 <= hi,
        "p99 {p99} outside [{lo}, {hi}] of the runs' own {own:?}"
    );

    // The same quantile of the buckets as they stand (every run counted so
    // far), against the exact p99 of those runs' own histograms merged:
    // the interpolation stays inside the bucket that holds the true p99.
    let now = format!(
        "{:.3}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
    );
    let q_all = r#"histogram_quantile(0.99, sum by (le) (thrum_probe_latency_seconds_bucket{probe=~"rr-a|rr-b"}))"#;
    let (_, r) = query_at(api, q_all, &now);
    let estimate = number(&r[0]);
    let (_, runs) = query_at(api, r#"thrum_probe_runs_total{probe=~"rr-a|rr-b"}"#, &now);
    let mut merged = LatencyHistogram::new();
    for r in &runs {
        let probe = r["metric"]["probe"].as_str().unwrap();
        let n = number(r) as usize;
        for d in &stored_runs(&db, probe)[..n] {
            let b64 = d
                .pointer("/summary/histogram")
                .and_then(Value::as_str)
                .unwrap();
            merged.merge(&LatencyHistogram::from_base64(b64).unwrap());
        }
    }
    let truth = merged.quantile(0.99) as f64 / 1e9;
    eprintln!(
        "histogram_quantile(0.99) of the buckets of {} transactions: {:.1} us; their exact p99: {:.1} us",
        merged.count(),
        estimate * 1e6,
        truth * 1e6
    );
    assert!(
        estimate >= below(truth) && estimate <= above(truth),
        "{estimate} is not in the bucket of the exact p99 {truth}"
    );

    // Every expression of the dashboard parses and runs, and the probe
    // explorer's latency panels have data for a probe.
    for (title, e) in &exprs {
        let q = runnable(e, "rr-a");
        let (status, r) = query(api, &q);
        assert_eq!(status, "success", "{title}: {q}");
        if title.starts_with("Latency heat map")
            || title == "Latency quantiles"
            || title.starts_with("variable")
        {
            assert!(!r.is_empty(), "{title}: {q} has no data");
        }
    }
    // The label with quotes and a backslash came through Prometheus intact.
    let (_, r) = query(api, r#"thrum_probe_runs_total{probe="rr-a"}"#);
    assert_eq!(r[0]["metric"]["region"], region, "{r:?}");

    // SIGHUP with rr-b's label changed: a new series for rr-b, from 0; rr-a kept.
    let a_runs = value(&parse(&scrape()), "thrum_probe_runs_total", "rr-a", &[]).unwrap();
    std::fs::write(&config, text("c")).unwrap();
    // SAFETY: kill(2) on our own child, not yet reaped.
    unsafe { libc::kill(monitor.0.id() as libc::pid_t, libc::SIGHUP) };
    let after = wait_for(Duration::from_secs(30), || {
        let s = parse(&scrape());
        let b = s
            .iter()
            .find(|x| x.name == "thrum_probe_runs_total" && x.labels["probe"] == "rr-b")?;
        (b.labels["site"] == "c").then_some(s)
    })
    .unwrap_or_else(|| {
        panic!(
            "rr-b never took its new label:\n{}\n{}",
            scrape(),
            log_text()
        )
    });
    assert!(value(&after, "thrum_probe_runs_total", "rr-a", &[]).unwrap() >= a_runs);
    assert!(
        log_text().contains("(5 kept, 1 added, 1 removed)"),
        "{}",
        log_text()
    );
    drop(monitor);
}

/// A listener in network namespace `ns`: the thread that makes it enters
/// the namespace, and the socket stays in it.
fn listen_in(ns: &str, addr: &str) -> TcpListener {
    let (ns, addr) = (ns.to_string(), addr.to_string());
    std::thread::spawn(move || {
        enter(&ns);
        TcpListener::bind(addr).unwrap()
    })
    .join()
    .unwrap()
}

/// This thread into network namespace `ns` (setns(2) moves the calling thread only).
fn enter(ns: &str) {
    let f = std::fs::File::open(format!("/var/run/netns/{ns}")).unwrap();
    // SAFETY: setns(2) with a namespace file we hold open.
    let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
}

/// `GET /metrics` from inside `ns`.
fn scrape_in(ns: &str, addr: &str) -> String {
    let (ns, addr) = (ns.to_string(), addr.to_string());
    std::thread::spawn(move || {
        enter(&ns);
        let mut c = TcpStream::connect(&addr).ok()?;
        c.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
        write!(c, "GET /metrics HTTP/1.0\r\n\r\n").ok()?;
        let mut text = String::new();
        c.read_to_string(&mut text).ok()?;
        Some(text.split_once("\r\n\r\n")?.1.to_string())
    })
    .join()
    .unwrap()
    .unwrap_or_default()
}

#[test]
fn failures_are_counted_by_their_reason() {
    let Some(ns) = Netns::loopback_only("monmet") else {
        return;
    };
    // A server that accepts and never answers, and a peer that answers HTTP.
    let silent = listen_in(&ns.0, "127.0.0.2:0");
    let silent_addr = silent.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in silent.incoming() {
            held.push(c);
        }
    });
    let http = listen_in(&ns.0, "127.0.0.3:0");
    let http_addr = http.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut c in http.incoming().flatten() {
            let _ = c.write_all(b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n");
        }
    });
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("monitor.toml");
    std::fs::write(
        &config,
        format!(
            "[defaults]\nevery = \"2s\"\nduration = \"1s\"\n\
             [[probe]]\nname = \"refused\"\ntarget = \"127.0.0.1:1\"\ntest = \"tcp_rr\"\n\
             [[probe]]\nname = \"timeout\"\ntarget = \"{silent_addr}\"\ntest = \"tcp_rr\"\n\
             [[probe]]\nname = \"unreachable\"\ntarget = \"10.213.77.1:12880\"\ntest = \"tcp_rr\"\n\
             [[probe]]\nname = \"error\"\ntarget = \"{http_addr}\"\ntest = \"tcp_rr\"\n"
        ),
    )
    .unwrap();
    let log = tmp.path().join("monitor.log");
    let (child, metrics) = start_monitor(&config, &tmp.path().join("store.db"), &log, |t| {
        t.netns(&ns.0)
    });
    let _monitor = Killed(child);
    let log_text = || std::fs::read_to_string(&log).unwrap_or_default();
    let s = wait_for(Duration::from_secs(60), || {
        let s = parse(&scrape_in(&ns.0, &metrics));
        ["refused", "timeout", "unreachable", "error"]
            .iter()
            .all(|r| value(&s, "thrum_probe_failures_total", r, &[("reason", r)]) >= Some(1.0))
            .then_some(s)
    })
    .unwrap_or_else(|| {
        panic!(
            "not every reason was counted:\n{}\n{}",
            scrape_in(&ns.0, &metrics),
            log_text()
        )
    });
    // Each probe's failures under its own reason alone.
    for probe in ["refused", "timeout", "unreachable", "error"] {
        let runs = value(&s, "thrum_probe_runs_total", probe, &[]).unwrap();
        assert_eq!(
            value(
                &s,
                "thrum_probe_failures_total",
                probe,
                &[("reason", probe)]
            ),
            Some(runs),
            "{probe}"
        );
        assert!(
            log_text().contains(&format!("probe {probe}: failed in ")),
            "{}",
            log_text()
        );
        assert!(
            log_text().contains(&format!("({probe}): ")),
            "{}",
            log_text()
        );
    }
}
