//! The options peers' users type on their first day (issue 32, items 5,
//! 6, 7, 10, 11): netperf's omni fields and `-f` and its default test,
//! iperf3's `-n` (`--bytes`) and `--timestamps`, and `thrum suite -H`
//! against a running server. A few short runs, each checking several
//! things, so the module adds seconds, not minutes.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::common::{ServerProc, assert_rejected, bin, run_client, run_cmd, run_json};

fn kv(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn read_json(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A version 4 UUID in its text form.
fn is_uuid_v4(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    let lens: Vec<usize> = parts.iter().map(|p| p.len()).collect();
    lens == [8, 4, 4, 4, 12]
        && s.chars().all(|c| c == '-' || c.is_ascii_hexdigit())
        && parts[2].starts_with('4')
        && parts[3].starts_with(['8', '9', 'a', 'b'])
}

/// Item 5: netperf's omni fields `--output-fields` refused before, with
/// `--iterations 2,3`: accepted, and each value what the JSON result of
/// the same run says (the confidence, the percentile, the UUID), or what
/// the machine says (uname's sysname).
#[test]
fn omni_fields_confidence_uuid_percentiles_and_uname() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let fields = "COMMAND_LINE,UUID,CONFIDENCE_LEVEL,THROUGHPUT_CONFID,P50_LATENCY,P9999_LATENCY,\
CONFIDENCE_ITERATION,LOCAL_SYSNAME,LOCAL_RELEASE,REMOTE_SYSNAME,RESULT_BRAND";
    let out = run_client(
        &[
            "run",
            "tcp_rr",
            "-l",
            "300ms",
            "--warmup",
            "0s",
            "-i",
            "100ms",
            "--iterations",
            "2,3",
            "--percentiles",
            "99.99",
            "--brand",
            "rack 4",
            "--keyval",
            "--output-fields",
            fields,
            "--export-json",
            json.to_str().unwrap(),
        ],
        Duration::from_secs(60),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = kv(&String::from_utf8_lossy(&out.stdout));
    let r = read_json(&json);
    let c = &r["confidence"];
    assert_eq!(got["CONFIDENCE_LEVEL"], "99");
    let runs = c["iterations_run"].as_u64().unwrap();
    assert!((2..=3).contains(&runs), "{c}");
    assert_eq!(got["CONFIDENCE_ITERATION"], runs.to_string());
    assert_eq!(r["iterations"].as_array().unwrap().len() as u64, runs);
    let width = c["width_percent_achieved"].as_f64().unwrap();
    assert_eq!(got["THROUGHPUT_CONFID"], format!("{width:.3}"));
    let lat = &r["summary"]["latency_ns"];
    let us = |ns: &Value| format!("{:.3}", ns.as_u64().unwrap() as f64 / 1e3);
    assert_eq!(got["P50_LATENCY"], us(&lat["p50"]));
    let p9999 = &lat["percentiles"][0];
    assert_eq!(p9999["percentile"].as_f64(), Some(99.99));
    assert_eq!(got["P9999_LATENCY"], us(&p9999["ns"]));
    // One UUID for the run, in the field and the JSON alike.
    let uuid = &got["UUID"];
    assert!(is_uuid_v4(uuid), "{uuid}");
    assert_eq!(r["environment"]["uuid"], uuid.as_str());
    assert_eq!(got["RESULT_BRAND"], "rack 4");
    assert!(
        got["COMMAND_LINE"].contains("--iterations 2,3 --percentiles 99.99 --brand 'rack 4'"),
        "{}",
        got["COMMAND_LINE"]
    );
    let ostype = std::fs::read_to_string("/proc/sys/kernel/ostype").unwrap();
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert_eq!(got["LOCAL_SYSNAME"], ostype.trim());
    assert_eq!(got["LOCAL_RELEASE"], release.trim());
    // The embedded server shares its provenance: the same machine.
    assert_eq!(got["REMOTE_SYSNAME"], ostype.trim());

    // Refused before anything runs: a percentile not asked for, and
    // --bytes where it means nothing or with a duration.
    assert_rejected(&[
        (
            &["run", "tcp_rr", "--output-fields", "P95_LATENCY"],
            &["P95_LATENCY", "--percentiles"],
        ),
        (
            &["run", "tcp_rr", "--bytes", "1M"],
            &["--bytes", "tcp_stream"],
        ),
        (
            &["run", "tcp_crr", "--bytes", "1M"],
            &["--bytes", "tcp_crr"],
        ),
        (
            &["run", "--bytes", "1M", "-l", "2s"],
            &["--bytes", "--duration"],
        ),
        (&["run", "-f", "x"], &["--format", "K, M, G"]),
        // iperf3's -n SIZE is --bytes here.
        (&["run", "-n", "200M"], &["tip:", "--bytes 200M"]),
    ]);
    // netperf's -i MAX,MIN: taken the other way round, with a tip.
    let out = run_client(
        &["run", "--iterations", "3,2", "--dry-run"],
        Duration::from_secs(10),
    );
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("tip:") && err.contains("--iterations 2,3"),
        "{err}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("tcp_stream"));
}

/// A server in a namespace of its own, whose loopback carries only this
/// test's traffic: its packet counters are the ground truth of what moved.
fn lo_bytes(server: &ServerProc) -> Option<u64> {
    let ns = server.ns.as_ref()?;
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            ns,
            "cat",
            "/sys/class/net/lo/statistics/rx_bytes",
        ])
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}

/// Item 10 and 6: `--bytes 200M` moves exactly 200 MiB (thrum's sizes:
/// M = 2^20) as the receiver counts it, split over the flows to a byte;
/// the interface carried at least that (and no more than its headers and
/// the control connection add); the rate is over the time it took; and
/// `-f M` gives THROUGHPUT in MBytes/s from the same figure.
#[test]
fn bytes_move_exactly_that_many_and_format_sets_the_unit() {
    let server = ServerProc::isolated("bytes", &[]);
    let dir = tempfile::tempdir().unwrap();
    for (test, size, want, flows) in [
        ("tcp_stream", "200M", 200u64 << 20, 2u64),
        ("tcp_maerts", "100000001", 100_000_001, 3),
    ] {
        let json = dir.path().join(format!("{test}.json"));
        let before = lo_bytes(&server);
        let out = server.run_client(
            &[
                "run",
                test,
                "-H",
                &server.addr,
                "--bytes",
                size,
                "-F",
                &flows.to_string(),
                "-f",
                "M",
                "--keyval",
                "--output-fields",
                "THROUGHPUT,THROUGHPUT_UNITS,THROUGHPUT_BPS,ELAPSED_TIME",
                "--export-json",
                json.to_str().unwrap(),
            ],
            Duration::from_secs(60),
        );
        let after = lo_bytes(&server);
        assert!(
            out.status.success(),
            "{test}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let r = read_json(&json);
        let s = &r["summary"];
        // The receiver: the server for tcp_stream, the client for maerts.
        let (rx, tx) = if test == "tcp_stream" {
            (&s["remote"], &s["local"])
        } else {
            (&s["local"], &s["remote"])
        };
        assert_eq!(rx["total"]["bytes_received"].as_u64(), Some(want), "{s}");
        assert_eq!(tx["total"]["bytes_sent"].as_u64(), Some(want), "{s}");
        // All of it inside the measurement window (no warm-up), and so in
        // the rate.
        assert_eq!(rx["bytes_received"].as_u64(), Some(want), "{s}");
        // Each flow's share, summed over the intervals.
        let side = if test == "tcp_stream" {
            "remote"
        } else {
            "local"
        };
        let mut per_flow = vec![0u64; flows as usize];
        for iv in r["intervals"].as_array().unwrap() {
            for (f, c) in iv[side].as_array().unwrap().iter().enumerate() {
                per_flow[f] += c["bytes_received"].as_u64().unwrap();
            }
        }
        let share: Vec<u64> = (0..flows)
            .map(|f| want / flows + u64::from(f < want % flows))
            .collect();
        assert_eq!(per_flow, share, "{test}");
        // Over the receiver's window, on the receiver's clock.
        let secs = rx["window_s"].as_f64().unwrap();
        let bps = s["throughput_bps"].as_f64().unwrap();
        let rate = want as f64 * 8.0 / secs;
        assert!((bps - rate).abs() <= rate * 1e-6, "{bps} vs {rate}");
        let got = kv(&String::from_utf8_lossy(&out.stdout));
        assert_eq!(got["THROUGHPUT_UNITS"], "MBytes/s");
        let mib = got["THROUGHPUT_BPS"].parse::<f64>().unwrap() / 8.0 / 1048576.0;
        assert!(
            (got["THROUGHPUT"].parse::<f64>().unwrap() - mib).abs() <= 0.006,
            "{got:?}"
        );
        // Ground truth: the namespace's loopback carried the bytes, each
        // segment with its headers (at most ~1 % for 64 KiB segments,
        // more with small ones), plus the control connection.
        if let (Some(b), Some(a)) = (before, after) {
            let moved = a - b;
            eprintln!("{test}: lo carried {moved} bytes for {want} of payload");
            assert!(
                moved >= want && moved <= want + want / 10 + 1_000_000,
                "{test}: lo carried {moved} bytes for {want}"
            );
        }
    }
}

/// Item 10 for udp_stream: the sender sends exactly SIZE bytes of
/// payload (the last datagram carries what is left), and each datagram
/// is received or counted lost.
#[test]
fn udp_stream_sends_exactly_its_bytes() {
    let server = ServerProc::start(&[]);
    let want = 3_000_001u64;
    let r = run_json(
        Command::new(bin()).args([
            "run",
            "udp_stream",
            "-H",
            &server.addr,
            "--bytes",
            "3000001",
            "-F",
            "2",
            "--rate",
            "100M",
            "--json",
        ]),
        Duration::from_secs(30),
        "udp_stream --bytes",
    );
    let s = &r["summary"];
    assert_eq!(
        s["local"]["total"]["bytes_sent"].as_u64(),
        Some(want),
        "{s}"
    );
    let size = r["spec"]["send_bytes"].as_u64().unwrap();
    let per_flow = |f: u64| (want / 2 + u64::from(f < want % 2)).div_ceil(size);
    let sent = s["datagrams_sent"].as_u64().unwrap();
    assert_eq!(sent, per_flow(0) + per_flow(1), "{s}");
    // Over the whole test: datagrams still in flight when the last was
    // sent arrive in the drain, after the window.
    let total = &s["remote"]["total"];
    let got = total["datagrams_received"].as_u64().unwrap();
    assert_eq!(got + s["lost"].as_u64().unwrap(), sent, "{s}");
    let bytes = total["bytes_received"].as_u64().unwrap();
    assert!(bytes <= want && (got < sent || bytes == want), "{s}");
}

/// Item 7 and 11: `thrum run -H HOST -l 1s` runs tcp_stream (netperf
/// without -t), and `--timestamps=FORMAT` starts each row with the
/// wall-clock time its interval ended (the JSON's unix_end_s), `-f m` the
/// rates in Mbit/s.
#[test]
fn no_test_is_tcp_stream_with_timestamped_rows() {
    let server = ServerProc::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = run_cmd(
        Command::new(bin()).env("TZ", "UTC").args([
            "run",
            "-H",
            &server.addr,
            "-l",
            "1s",
            "--warmup",
            "0s",
            "-i",
            "250ms",
            "--timestamps=%H:%M:%S",
            "-f",
            "m",
            "--export-json",
            json.to_str().unwrap(),
        ]),
        Duration::from_secs(30),
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.starts_with("tcp_stream to "), "{text}");
    let r = read_json(&json);
    assert_eq!(r["test"], "tcp_stream");
    let hms = |t: f64| {
        let s = t.floor() as u64 % 86_400;
        format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    };
    let rows: Vec<&str> = text.lines().filter(|l| l.contains(" measure ")).collect();
    let ivs = r["intervals"].as_array().unwrap();
    assert_eq!(rows.len(), ivs.len(), "{text}");
    for (row, iv) in rows.iter().zip(ivs) {
        let want = hms(iv["unix_end_s"].as_f64().unwrap());
        assert!(row.starts_with(&want), "{row:?} does not start with {want}");
        // The rate in --format's unit, then TCP_INFO's Retr and Cwnd.
        assert!(row.contains(" Mbit/s "), "{row:?}");
    }
    assert!(
        text.lines().any(|l| l.starts_with("time ")),
        "no time column header: {text}"
    );
    assert!(
        text.contains("throughput (received)") && text.contains(" Mbit/s"),
        "{text}"
    );
}

/// Item 11: `thrum suite -H` runs every test against the given server
/// (not an embedded one). In a namespace of its own: tcp_crr and tcp_cc
/// fill the loopback's TIME_WAIT table.
#[test]
fn suite_runs_against_a_given_server() {
    let server = ServerProc::isolated("suite", &[]);
    let results = run_json(
        server.thrum().args([
            "suite",
            "-H",
            &server.addr,
            "-l",
            "100ms",
            "--warmup",
            "0s",
            "--json",
        ]),
        Duration::from_secs(60),
        "suite -H",
    );
    let results = results.as_array().expect("an array of results");
    assert_eq!(results.len(), 8, "every test but capacity");
    for r in results {
        assert_eq!(r["spec"]["server"], server.addr.as_str(), "{}", r["test"]);
        assert_eq!(r["spec"]["embedded_server"], false);
        assert!(r["summary"]["error"].is_null(), "{}", r["summary"]["error"]);
    }
}
