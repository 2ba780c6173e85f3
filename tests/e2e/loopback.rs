//! Every TCP test over loopback against a real server process: figures are
//! present and sane, both ends' totals agree exactly after the drain
//! (conservation), the measurement window is exactly the sum of its
//! intervals, percentiles are ordered, and the JSON matches the schema.

use std::time::Duration;

use serde_json::Value;

use crate::common::{Netns, ServerProc, Thrum, assert_schema, f, u};

const TESTS: [&str; 6] = [
    "tcp_stream",
    "tcp_maerts",
    "tcp_bidir",
    "tcp_rr",
    "tcp_crr",
    "tcp_cc",
];

fn counts(v: &Value) -> [u64; 3] {
    [
        u(&v["bytes_sent"]),
        u(&v["bytes_received"]),
        u(&v["transactions"]),
    ]
}

fn add(a: [u64; 3], b: [u64; 3]) -> [u64; 3] {
    [a[0] + b[0], a[1] + b[1], a[2] + b[2]]
}

/// Run one test against `server` and check everything that must hold for any test.
fn run_and_check(server: &ServerProc, test: &str, flows: u32, threads: u32) -> Value {
    run_and_check_with(server, test, flows, threads, &[])
}

/// [`run_and_check`] with more client arguments.
pub(crate) fn run_and_check_with(
    server: &ServerProc,
    test: &str,
    flows: u32,
    threads: u32,
    extra: &[&str],
) -> Value {
    let doc = Thrum::run(test)
        .on(server)
        .flows(flows)
        .threads(threads)
        .len("1s")
        .warmup("300ms")
        .interval("250ms")
        .args(extra)
        .json();
    assert_schema(&doc);
    let s = &doc["summary"];
    assert!(s["error"].is_null());
    // The window ends at the first tick at or after its planned end: never
    // shorter than planned; later by however long a busy machine kept the
    // client's clock thread from running (no bound a loaded CI can promise).
    assert!(
        f(&s["duration_s"]) >= 1.0 - 1e-3,
        "{test}: window {}",
        s["duration_s"]
    );

    // Conservation: after the drain, what one end sent the other received.
    let (lt, rt) = (counts(&s["local"]["total"]), counts(&s["remote"]["total"]));
    assert_eq!(
        lt[0], rt[1],
        "{test}: client sent {} bytes, server received {}",
        lt[0], rt[1]
    );
    assert_eq!(
        rt[0], lt[1],
        "{test}: server sent {} bytes, client received {}",
        rt[0], lt[1]
    );
    if !test.ends_with("stream") && !test.ends_with("maerts") && !test.ends_with("bidir") {
        assert_eq!(
            lt[2], rt[2],
            "{test}: client completed {} transactions, server answered {}",
            lt[2], rt[2]
        );
    }

    // The window is exactly the sum of its measure intervals, on both ends.
    let ivs = doc["intervals"].as_array().expect("intervals");
    let measure: Vec<&Value> = ivs.iter().filter(|i| i["phase"] == "measure").collect();
    assert!(
        measure.len() >= 4,
        "{test}: {} measure intervals",
        measure.len()
    );
    let mut lsum = [0; 3];
    let mut rsum = [0; 3];
    for iv in &measure {
        lsum = add(lsum, counts(&iv["sum"]["local"]));
        rsum = add(rsum, counts(&iv["sum"]["remote"]));
        assert_eq!(iv["local"].as_array().unwrap().len(), flows as usize);
        let per_flow = iv["local"]
            .as_array()
            .unwrap()
            .iter()
            .fold([0; 3], |a, c| add(a, counts(c)));
        assert_eq!(
            per_flow,
            counts(&iv["sum"]["local"]),
            "{test}: flows do not add up to the interval sum"
        );
    }
    assert_eq!(
        lsum,
        counts(&s["local"]),
        "{test}: local intervals vs window"
    );
    assert_eq!(
        rsum,
        counts(&s["remote"]),
        "{test}: remote intervals vs window"
    );
    // Intervals tile time: each starts where the previous ended.
    for w in ivs.windows(2) {
        assert_eq!(f(&w[0]["end_s"]), f(&w[1]["start_s"]));
    }

    if let Some(t) = s["throughput_bps"].as_f64() {
        assert!(t > 1e6, "{test}: {t} bit/s");
        // Each direction's goodput is its receiver's window bytes over that
        // receiver's window (the server's clock for what the client sent).
        let rate = |end: &str| u(&s[end]["bytes_received"]) as f64 * 8.0 / f(&s[end]["window_s"]);
        let want = match test {
            "tcp_stream" => rate("remote"),
            "tcp_maerts" => rate("local"),
            _ => rate("remote") + rate("local"),
        };
        assert!(
            (want / t - 1.0).abs() < 1e-9,
            "{test}: {want} bit/s from the window's bytes vs {t} bit/s"
        );
    } else {
        let tps = f(&s["transactions_per_s"]);
        assert!(tps > 100.0, "{test}: {tps} trans/s");
        assert_eq!(u(&s["transactions"]), lsum[2]);
        let l = &s["latency_ns"];
        let order = ["min", "p50", "p90", "p99", "p99_9", "max"].map(|k| u(&l[k]));
        assert!(
            order.windows(2).all(|w| w[0] <= w[1]),
            "{test}: percentiles out of order {order:?}"
        );
        assert!(f(&l["mean"]) >= order[0] as f64 && f(&l["mean"]) <= order[5] as f64);
        // Workers read the live phase per recv, so the histogram and the counts share
        // the window edges; only a recv racing the phase switch may differ (one per flow).
        let n = u(&l["count"]);
        assert!(
            n.abs_diff(lsum[2]) <= flows as u64,
            "{test}: {n} latencies for {} transactions",
            lsum[2]
        );
    }
    doc
}

#[test]
fn every_test_one_flow_one_thread() {
    // tcp_crr and tcp_cc leave thousands of TIME_WAIT: in a namespace of
    // their own (`ServerProc::isolated`).
    let server = ServerProc::isolated("lo-1x1", &[]);
    for t in TESTS {
        let doc = run_and_check(&server, t, 1, 1);
        if t == "tcp_crr" || t == "tcp_cc" {
            // One flow opens its connections blocking, with no readiness
            // wait, and the server's one worker blocks in accept.
            assert_eq!(doc["environment"]["local_drivers"][0], "blocking", "{t}");
            assert_eq!(
                doc["environment"]["remote_drivers"],
                serde_json::json!(["blocking"]),
                "{t}"
            );
        }
    }
}

#[test]
fn every_test_eight_flows_two_threads() {
    let server = ServerProc::isolated("lo-8x2", &[]);
    for t in TESTS {
        let doc = run_and_check(&server, t, 8, 2);
        // Every flow moved data over the window.
        let flows_total = doc["intervals"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["phase"] == "measure")
            .fold(vec![0u64; 8], |mut acc, iv| {
                for (k, c) in iv["local"].as_array().unwrap().iter().enumerate() {
                    acc[k] += u(&c["bytes_sent"]) + u(&c["bytes_received"]) + u(&c["transactions"]);
                }
                acc
            });
        assert!(
            flows_total.iter().all(|&x| x > 0),
            "{t}: a flow was idle: {flows_total:?}"
        );
        let drivers = doc["environment"]["local_drivers"].as_array().unwrap();
        assert_eq!(drivers.len(), 2, "{t}: two local workers");
    }
}

#[test]
fn transaction_count_limit_is_exact() {
    let server = ServerProc::isolated("lo-count", &[]);
    for (t, flows, close) in [
        ("tcp_rr", "4", "fin"),
        ("tcp_crr", "4", "fin"),
        ("tcp_crr", "1", "fin"),
        ("tcp_crr", "4", "rst"),
        ("tcp_crr", "1", "rst"),
        ("tcp_cc", "1", "rst"),
    ] {
        let close_flag: &[&str] = if close == "rst" {
            &["--close", "rst"]
        } else {
            &[]
        };
        let doc = Thrum::run(t)
            .on(&server)
            .args(["-n", "3001", "-F", flows])
            .args(["-T", if flows == "1" { "1" } else { "2" }])
            .args(close_flag)
            .json();
        let t = &format!("{t} -F {flows} --close {close}");
        let s = &doc["summary"];
        assert_eq!(u(&s["transactions"]), 3001, "{t}");
        assert_eq!(u(&s["latency_ns"]["count"]), 3001, "{t}");
        assert_eq!(
            u(&s["local"]["total"]["transactions"]),
            3001,
            "{t}: nothing beyond the quota"
        );
    }
}

#[test]
fn burst_keeps_several_transactions_in_flight() {
    let server = ServerProc::start(&[]);
    let doc = Thrum::run("tcp_rr")
        .host(&server.addr)
        .args(["-b", "15", "-r", "64,1K", "--nodelay"])
        .len("1s")
        .warmup("200ms")
        .json();
    let s = &doc["summary"];
    let (lt, rt) = (counts(&s["local"]["total"]), counts(&s["remote"]["total"]));
    assert_eq!(lt[2], rt[2]);
    assert_eq!(lt[0], lt[2] * 64, "requests are 64 bytes each");
    assert_eq!(lt[1], lt[2] * 1024, "responses are 1 KiB each");
    assert_eq!(u(&doc["spec"]["burst"]), 15);
}

#[test]
fn embedded_server_needs_no_setup() {
    let doc = Thrum::run("tcp_rr").len("500ms").json();
    assert_eq!(doc["spec"]["embedded_server"], true);
    assert!(f(&doc["summary"]["transactions_per_s"]) > 100.0);
}

#[test]
fn ipv6_loopback() {
    let server =
        ServerProc::start_with(std::process::Command::new(crate::common::bin()), "::1", &[]);
    let port = server.addr.rsplit(':').next().unwrap().to_string();
    let host = format!("[::1]:{port}");
    let doc = Thrum::run("tcp_stream")
        .arg("-6")
        .host(&host)
        .len("500ms")
        .json();
    assert!(
        doc["spec"]["server_address"]
            .as_str()
            .unwrap()
            .starts_with("[::1]")
    );
}

#[test]
fn samples_csv_keyval_and_human_outputs() {
    let server = ServerProc::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("s.csv");
    let kv = dir.path().join("r.kv");
    let out = Thrum::run("TCP_RR")
        .host(&server.addr)
        .flows(3)
        .len("1s")
        .interval("500ms")
        .args(["--keyval", "-o"])
        .arg(&kv)
        .arg("--samples")
        .arg(&csv)
        .ok();
    assert!(out.stdout.is_empty(), "-o sends the result to the file");
    let kv = std::fs::read_to_string(kv).unwrap();
    assert!(
        kv.contains("TEST=tcp_rr\n")
            && kv.contains("THROUGHPUT_UNITS=Trans/s")
            && kv.contains("P99_LATENCY="),
        "{kv}"
    );
    let csv = std::fs::read_to_string(csv).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert!(lines[0].starts_with("interval,phase,"));
    // 2 measure intervals + 1 drain... every interval has one row per flow.
    assert_eq!((lines.len() - 1) % 3, 0, "{csv}");
    let total: u64 = lines[1..]
        .iter()
        .filter(|l| l.split(',').nth(1) == Some("measure"))
        .map(|l| l.split(',').nth(8).unwrap().parse::<u64>().unwrap())
        .sum();
    let tr: u64 = kv
        .lines()
        .find_map(|l| l.strip_prefix("TRANSACTIONS="))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(total, tr, "CSV measure rows add up to the result");

    let text = Thrum::run("tcp_stream")
        .host(&server.addr)
        .len("500ms")
        .stdout();
    assert!(
        text.contains("throughput (received)") && text.contains("bit/s"),
        "{text}"
    );
}

#[test]
fn suite_runs_every_test() {
    // Its tcp_crr and tcp_cc (embedded server) leave their TIME_WAIT in a
    // namespace of their own, where there can be one.
    let ns = Netns::loopback_only_or_host("lo-suite");
    let text = Thrum::suite()
        .len("300ms")
        .default_warmup()
        .netns_or_host(ns.as_ref())
        .timeout(Duration::from_secs(60))
        .stdout();
    for t in TESTS {
        assert!(
            text.lines().any(|l| l.starts_with(t)),
            "{t} missing from\n{text}"
        );
    }
    assert!(!text.contains("error"), "{text}");
}

/// `thrum suite -H` runs every test against the given server
/// (not an embedded one). In a namespace of its own: tcp_crr and tcp_cc
/// fill the loopback's TIME_WAIT table.
#[test]
fn suite_runs_against_a_given_server() {
    let server = ServerProc::isolated("suite", &[]);
    let results = Thrum::suite()
        .on(&server)
        .len("100ms")
        .timeout(Duration::from_secs(60))
        .json();
    let results = results.as_array().expect("an array of results");
    assert_eq!(results.len(), 8, "every test but capacity");
    for r in results {
        assert_eq!(r["spec"]["server"], server.addr.as_str(), "{}", r["test"]);
        assert_eq!(r["spec"]["embedded_server"], false);
        assert!(r["summary"]["error"].is_null(), "{}", r["summary"]["error"]);
    }
}

/// `--json-stream`: a line per interval as it completed, then the whole
/// result; the streamed intervals are exactly the result's, and the result
/// matches the schema.
#[test]
fn json_stream_lines_match_the_result() {
    let server = ServerProc::start(&[]);
    let lines = Thrum::run("tcp_stream")
        .host(&server.addr)
        .flows(2)
        .len("1s")
        .warmup("200ms")
        .interval("250ms")
        .json_lines();
    let (last, intervals) = lines.split_last().expect("at least the result line");
    assert_eq!(last["type"], "result");
    let result = &last["result"];
    assert_schema(result);
    assert!(intervals.iter().all(|l| l["type"] == "interval"));
    let streamed: Vec<&Value> = intervals.iter().map(|l| &l["interval"]).collect();
    let kept: Vec<&Value> = result["intervals"].as_array().unwrap().iter().collect();
    assert_eq!(
        streamed, kept,
        "the stream and the result hold the same intervals"
    );
    assert!(
        kept.len() >= 5,
        "warm-up and measure intervals: {}",
        kept.len()
    );
}

/// One-flow tcp_crr with messages larger than a socket buffer: the server's
/// blocking worker must wait for room to send a response (and for the rest
/// of a request) beside its listener, and every byte must arrive.
#[test]
fn one_flow_crr_moves_messages_larger_than_socket_buffers() {
    let server = ServerProc::start(&[]);
    for r in ["100,8M", "1M,1"] {
        let doc = Thrum::run("tcp_crr")
            .host(&server.addr)
            .args(["-n", "20", "-r", r])
            .timeout(Duration::from_secs(60))
            .json();
        assert_eq!(
            doc["environment"]["remote_drivers"],
            serde_json::json!(["blocking"])
        );
        let s = &doc["summary"];
        let (req, resp) = (
            u(&doc["spec"]["request_bytes"]),
            u(&doc["spec"]["response_bytes"]),
        );
        assert_eq!(u(&s["transactions"]), 20, "-r {r}");
        for (end, sent, got) in [("local", req, resp), ("remote", resp, req)] {
            let t = &s[end]["total"];
            assert_eq!(u(&t["bytes_sent"]), 20 * sent, "-r {r}: {end} sent");
            assert_eq!(u(&t["bytes_received"]), 20 * got, "-r {r}: {end} received");
        }
    }
}
