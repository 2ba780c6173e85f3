//! Measurement depth on loopback: repeated runs with a confidence interval,
//! latency percentiles and histograms, per-interval latency, CPU fields.

use std::time::Duration;

use serde_json::Value;

use thrum::stats::latency::LatencyHistogram;

use crate::common::*;

/// Two-sided Student-t quantiles at 99 %, by degrees of freedom 1..=9
/// (printed tables), the ground truth for the interval the client reports.
const T99: [f64; 9] = [
    63.657, 9.925, 5.841, 4.604, 4.032, 3.707, 3.499, 3.355, 3.250,
];

#[test]
fn iterations_stop_on_the_confidence_rule_and_report_it() {
    let server = ServerProc::start(&[]);
    let out = Thrum::run("tcp_rr")
        .host(&server.addr)
        .len("300ms")
        .warmup("100ms")
        .args(["--iterations", "3,10", "--confidence", "99,5", "--json"])
        .timeout(Duration::from_secs(60))
        .output();
    let doc = out.json_ok();
    assert_schema(&doc);
    let its = doc["iterations"].as_array().unwrap();
    let c = &doc["confidence"];
    let n = its.len();
    assert!((3..=10).contains(&n), "{n} iterations");
    assert_eq!(u(&c["iterations_run"]) as usize, n);
    assert_eq!(u(&c["level"]), 99);
    assert_eq!(f(&c["width_percent_requested"]), 5.0);

    // The interval, recomputed from the iterations with a printed t table.
    let xs: Vec<f64> = its.iter().map(|i| f(&i["figure"])).collect();
    let mean = xs.iter().sum::<f64>() / n as f64;
    let sd = (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt();
    let width = 200.0 * T99[n - 2] * sd / (n as f64).sqrt() / mean;
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-3 * b.abs().max(1e-9);
    assert!(close(f(&c["mean"]), mean), "{c}");
    assert!(
        close(f(&c["width_percent_achieved"]), width),
        "{c} vs {width}"
    );
    // The summary's figure of merit is that mean.
    assert!(close(f(&doc["summary"]["transactions_per_s"]), mean));

    // The stopping rule: stopped early only when the width was met, and a
    // miss is loud.
    let achieved = c["achieved"].as_bool().unwrap();
    assert_eq!(achieved, width <= 5.0, "{c}");
    if !achieved {
        assert_eq!(n, 10, "gave up before the maximum: {c}");
        let w = doc["summary"]["warnings"][0].as_str().unwrap();
        assert!(w.contains("CONFIDENCE NOT ACHIEVED"), "{w}");
        assert_eq!(
            doc["summary"]["diagnostics"][0]["code"],
            "confidence_not_reached"
        );
        assert!(out.stderr().contains("CONFIDENCE NOT ACHIEVED"));
    }
    // Latency is merged over every iteration.
    let total: u64 = doc["summary"]["latency_ns"]["count"].as_u64().unwrap();
    assert!(
        total > u(&doc["summary"]["transactions"]),
        "merged over runs"
    );
}

/// With `--iterations` each end's service demand in the
/// summary is the mean over the iterations (netperf's -i), not the last
/// run's. Every iteration carries its own, so the mean is checked against
/// the runs it was made of, per transaction (tcp_rr) and per KB (tcp_stream).
#[test]
fn service_demand_with_iterations_is_the_mean_of_the_iterations() {
    let server = ServerProc::start(&[]);
    for (test, unit) in [("tcp_rr", "us_per_tran"), ("tcp_stream", "us_per_kb")] {
        let doc = Thrum::run(test)
            .on(&server)
            .len("300ms")
            .args(["--iterations", "3,3"])
            .json();
        // The schema names the new fields.
        assert_schema(&doc);
        let its = doc["iterations"].as_array().unwrap();
        assert_eq!(its.len(), 3, "{test}");
        for end in ["local", "remote"] {
            let field = format!("{end}_service_demand_{unit}");
            let each: Vec<f64> = its
                .iter()
                .map(|i| {
                    i[&field]
                        .as_f64()
                        .unwrap_or_else(|| panic!("{test}: no {field} in {i}"))
                })
                .collect();
            let mean = each.iter().sum::<f64>() / each.len() as f64;
            let summary = f(&doc["summary"][end][format!("service_demand_{unit}")]);
            // The same three doubles averaged the same way: equal but for
            // the last bits of rounding (JSON keeps 17 significant digits).
            assert!(
                (summary - mean).abs() <= 1e-9 * mean.abs(),
                "{test} {end}: summary {summary} against the mean {mean} of {each:?}"
            );
            // Three runs' CPU readings are never all alike to the last bit;
            // where the last differs from the mean, the summary is not the
            // last run's (what it was before the fix).
            let last = each[2];
            if (last - mean).abs() > 1e-9 * mean.abs() {
                assert!(
                    (summary - last).abs() > 1e-9 * mean.abs(),
                    "{test} {end}: the summary is the last iteration's {last}"
                );
            }
        }
    }
}

#[test]
fn iterations_print_in_human_output() {
    let server = ServerProc::start(&[]);
    let text = Thrum::run("udp_rr")
        .host(&server.addr)
        .len("200ms")
        .args(["--rr-timeout", "2s", "--iterations", "2,2"])
        .stdout();
    assert!(text.contains("iterations\n"), "{text}");
    assert!(
        text.contains("over 2 iteration(s); 99 % interval"),
        "{text}"
    );
}

/// The percentiles asked for, the serialized histogram, per-interval
/// latency in JSON and in the samples CSV, and the text histogram.
#[test]
fn percentiles_histograms_and_interval_latency() {
    let server = ServerProc::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("s.csv");
    let run = Thrum::run("tcp_rr")
        .host(&server.addr)
        .flows(2)
        .len("1s")
        .warmup("200ms")
        .interval("250ms")
        .args(["--percentiles", "99.99,50"]);
    let doc = run.clone().arg("--samples").arg(&csv).json();
    assert_schema(&doc);
    let lat = &doc["summary"]["latency_ns"];
    let ps = lat["percentiles"].as_array().unwrap();
    assert_eq!(f(&ps[0]["percentile"]), 99.99);
    assert_eq!(f(&ps[1]["percentile"]), 50.0);
    assert_eq!(u(&ps[1]["ns"]), u(&lat["p50"]));
    assert!(u(&ps[0]["ns"]) >= u(&lat["p99_9"]) && u(&ps[0]["ns"]) <= u(&lat["max"]));

    // The serialized histogram is the window's: same count, same percentiles.
    let h = LatencyHistogram::from_base64(doc["summary"]["histogram"].as_str().unwrap()).unwrap();
    let s = h.summary().unwrap();
    assert_eq!(s.count, u(&lat["count"]));
    assert_eq!(
        (s.p50, s.p99, s.max),
        (u(&lat["p50"]), u(&lat["p99"]), u(&lat["max"]))
    );

    // Per-interval latency: measure intervals only, adding up to the window.
    let mut sum = 0;
    for iv in doc["intervals"].as_array().unwrap() {
        let l = &iv["latency_ns"];
        if iv["phase"] == "measure" {
            let c = u(&l["count"]);
            // Each interval's transactions, within the flows straddling its edges.
            let t = u(&iv["sum"]["local"]["transactions"]);
            assert!(
                c.abs_diff(t) <= 2 * 2,
                "interval latency {c} vs transactions {t}"
            );
            assert!(u(&l["p50"]) <= u(&l["p99"]) && u(&l["p99"]) <= u(&l["max"]));
            sum += c;
        } else {
            assert!(l.is_null(), "no latency outside the window: {iv}");
        }
    }
    assert!(
        sum.abs_diff(u(&lat["count"])) <= 2,
        "{sum} vs {}",
        lat["count"]
    );

    // The samples CSV carries the interval's percentiles on each flow's row.
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (cnt, p9999) = (col("latency_count"), col("latency_p99.99_ns"));
    let mut rows = 0;
    for line in lines {
        let cells: Vec<&str> = line.split(',').collect();
        assert_eq!(cells.len(), header.len(), "{line}");
        if cells[1] == "measure" {
            assert!(cells[cnt].parse::<u64>().unwrap() > 0, "{line}");
            assert!(cells[p9999].parse::<u64>().is_ok(), "{line}");
            rows += 1;
        }
    }
    assert!(rows >= 8, "2 flows x 4 measure intervals: {text}");

    // --histogram: the text rows hold every latency of the window once.
    let text = run.arg("--histogram").stdout();
    let rows: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.contains("latency histogram"))
        .skip(1)
        .take_while(|l| l.contains(" .. "))
        .collect();
    assert!(!rows.is_empty(), "{text}");
    let counted: u64 = rows
        .iter()
        .map(|r| r.split_whitespace().nth(3).unwrap().parse::<u64>().unwrap())
        .sum();
    let transactions: u64 = text
        .split("transactions/s")
        .nth(1)
        .and_then(|t| t.split('(').nth(1))
        .and_then(|t| t.split_whitespace().next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no transaction count in {text}"));
    assert!(
        counted.abs_diff(transactions) <= 2,
        "{counted} vs {transactions}\n{text}"
    );
}

#[test]
fn measurement_flags_are_checked() {
    assert_rejected(&[
        (
            &["run", "tcp_rr", "--percentiles", "0"],
            &["--percentiles", "greater than 0 and at most 100"],
        ),
        (
            &["run", "tcp_rr", "--percentiles", "50,101"],
            &["--percentiles", "at most 100"],
        ),
        (
            &["run", "tcp_rr", "--percentiles", "p99"],
            &["--percentiles", "(0, 100]"],
        ),
        (
            &["run", "tcp_rr", "--iterations", "0,3"],
            &["--iterations", "1 <= MIN <= MAX <= 30"],
        ),
        (
            // The larger first is netperf's MAX,MIN: read as
            // MIN,MAX, and still bounded.
            &["run", "tcp_rr", "--iterations", "31,3"],
            &["--iterations", "1 <= MIN <= MAX <= 30"],
        ),
        (
            &["run", "tcp_rr", "--iterations", "3,31"],
            &["--iterations", "<= 30"],
        ),
        (
            &["run", "tcp_rr", "--confidence", "90"],
            &["--confidence", "95 or 99"],
        ),
        (
            &["run", "tcp_rr", "--confidence", "99,0"],
            &["--confidence", "(0, 100]"],
        ),
    ]);
}

/// A document's CPU block for one end is present and in range.
pub fn assert_cpu_side(side: &Value, what: &str) {
    let util = f(&side["cpu_util_percent"]);
    assert!((0.0..=100.0).contains(&util), "{what}: util {util}");
    let cpu = &side["cpu"];
    let n = u(&cpu["cpus"]);
    assert!(n >= 1 && u(&side["cpus"]) == n, "{what}: {cpu}");
    let per = cpu["per_cpu"].as_array().unwrap();
    assert_eq!(per.len() as u64, n, "{what}: {cpu}");
    for c in per {
        for k in [
            "util_percent",
            "user_percent",
            "system_percent",
            "softirq_percent",
            "steal_percent",
        ] {
            let p = f(&c[k]);
            assert!((0.0..=100.0).contains(&p), "{what}: per-CPU {k} {p}");
        }
    }
    let busiest = f(&cpu["busiest_cpu_percent"]);
    assert!(
        per.iter().all(|c| f(&c["util_percent"]) <= busiest),
        "{what}: {cpu}"
    );
    // Both sources of service demand, and the headline naming its source.
    let (p, r) = (
        f(&side["service_demand_proc_stat"]),
        f(&side["service_demand_rusage"]),
    );
    assert!(p > 0.0 && r > 0.0, "{what}: {p} {r}");
    let head = side
        .get("service_demand_us_per_tran")
        .or(side.get("service_demand_us_per_kb"))
        .map(f)
        .unwrap_or_else(|| panic!("{what}: no headline service demand"));
    match side["service_demand_source"].as_str() {
        Some("proc_stat") => assert_eq!(head, p),
        Some("rusage") => assert_eq!(head, r),
        other => panic!("{what}: source {other:?}"),
    }
    let ru = &side["rusage_window"];
    assert!(f(&ru["user_s"]) + f(&ru["system_s"]) > 0.0, "{what}: {ru}");
}

/// CPU and service demand on both ends against a separate server on
/// loopback, in JSON, human (-c -C) and key=value output.
#[test]
fn cpu_and_service_demand_on_both_ends() {
    // A keyed server: only a client that proved the key gets the server's
    // full provenance.
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key");
    std::fs::write(&key, "a key of at least sixteen bytes\n").unwrap();
    let key = key.to_str().unwrap();
    let server = ServerProc::start(&["--psk-file", key]);
    let run = |test: &str| {
        Thrum::run(test)
            .host(&server.addr)
            .len("1s")
            .warmup("200ms")
            .args(["--psk-file", key])
    };
    for test in ["tcp_rr", "tcp_stream"] {
        let doc = run(test).json();
        assert_schema(&doc);
        let s = &doc["summary"];
        assert_cpu_side(&s["local"], "local");
        assert_cpu_side(&s["remote"], "remote");
        let key = if test == "tcp_stream" {
            "service_demand_us_per_kb"
        } else {
            "service_demand_us_per_tran"
        };
        assert!(s["local"].get(key).is_some(), "{test}: {key}");
        assert_eq!(s["interface"], "lo");
        assert!(u(&s["local"]["tcp_retransmits"]) < 1000);
        for end in ["local", "remote"] {
            let p = &doc["provenance"][end];
            assert_eq!(p["interface"]["name"], "lo", "{p}");
            assert!(p["sysctls"]["net.core.rmem_max"].as_u64().is_some(), "{p}");
            assert!(!p["thrum_version"].as_str().unwrap().is_empty());
        }
    }
    let text = run("tcp_rr").args(["-c", "-C", "-v"]).stdout();
    for needle in [
        "CPU local",
        "CPU remote",
        "service demand",
        "us/Tr",
        "# local",
        "# remote",
        "interface lo",
    ] {
        assert!(
            text.contains(needle),
            "human output lacks {needle:?}:\n{text}"
        );
    }
    let kv = run("tcp_rr").arg("--keyval").output().stdout();
    for needle in [
        "LOCAL_CPU_UTIL=",
        "REMOTE_CPU_UTIL=",
        "LOCAL_SD=",
        "REMOTE_SD=",
        "SD_UNITS=us/Tr",
    ] {
        assert!(kv.contains(needle), "keyval lacks {needle}:\n{kv}");
    }
}

/// A window that ran far longer than asked says so. The client
/// is stopped (SIGSTOP) for 2 s inside a `-l 1s` window, once its first
/// interval is out: its timeline cannot end the window on time, the
/// window runs about 2.2 s, and the result carries `window_overran` with
/// both lengths (the rate is over the window as it ran).
#[test]
fn a_window_that_overran_is_told() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let server = ServerProc::start(&[]);
    let mut child = Thrum::run("tcp_rr")
        .host(&server.addr)
        .len("1s")
        .interval("200ms")
        .arg("--json-stream")
        .command()
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut result = None;
    let mut stopped = false;
    for l in lines.by_ref().map_while(Result::ok) {
        let v: Value = serde_json::from_str(&l).unwrap();
        if v["type"] == "interval" && !stopped {
            // SAFETY: signals to a process this test started.
            assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGSTOP) }, 0);
            std::thread::sleep(Duration::from_secs(2));
            assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGCONT) }, 0);
            stopped = true;
        }
        if v["type"] == "result" {
            result = Some(v["result"].clone());
        }
    }
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let doc = result.expect("a result line");
    assert_schema(&doc);
    let window = f(&doc["summary"]["duration_s"]);
    assert!(window > 2.0, "the window ran {window} s");
    let told = diagnostics(&doc, "window_overran");
    assert_eq!(told.len(), 1, "{doc}");
    assert!(
        told[0].contains(&format!("{window:.3} s")) && told[0].contains("1.000 s"),
        "{}",
        told[0]
    );
}
