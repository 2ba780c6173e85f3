//! neper's habits (issue 32 items 1–4): per-flow samples with both ends'
//! process usage, the socket and spreading options, `--dry-run` and the
//! client's hard limit `--timeout`.

use std::time::Duration;

use crate::common::*;

/// The CSV as (header, rows), every row as long as the header.
fn read_csv(path: &std::path::Path) -> (Vec<String>, Vec<Vec<String>>) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<String> = lines
        .next()
        .unwrap()
        .split(',')
        .map(str::to_string)
        .collect();
    let rows: Vec<Vec<String>> = lines
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect();
    for r in &rows {
        assert_eq!(r.len(), header.len(), "{r:?}");
    }
    (header, rows)
}

/// `--samples` of tcp_rr with 2 flows on 2 workers: each flow's row carries
/// that flow's own latency (its count is its own transactions, which the
/// JSON's per-flow counts confirm, and the two flows' means differ), and
/// every row both ends' process usage over the interval: the server's CPU
/// time is that of a separate process, so it is a real reading of it.
#[test]
fn samples_carry_each_flows_latency_and_both_ends_usage() {
    let server = ServerProc::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("samples.csv");
    let out = server.run_client(
        &[
            "run",
            "tcp_rr",
            "-H",
            &server.addr,
            "-F",
            "2",
            "-T",
            "2",
            "-l",
            "1s",
            "--warmup",
            "0s",
            "-i",
            "250ms",
            "--json",
            "--samples",
            csv.to_str().unwrap(),
        ],
        Duration::from_secs(30),
    );
    let doc = succeeded(&out, "tcp_rr --samples");
    assert_schema(&doc);
    let (header, rows) = read_csv(&csv);
    let col = |name: &str| {
        header
            .iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("no column {name} in {header:?}"))
    };
    let (iv, flow, trans) = (col("interval"), col("flow"), col("local_transactions"));
    let (count, mean) = (col("latency_count"), col("latency_mean_ns"));
    let (min, max, sd) = (
        col("latency_min_ns"),
        col("latency_max_ns"),
        col("latency_stddev_ns"),
    );
    let n = |r: &Vec<String>, c: usize| -> f64 {
        r[c].parse()
            .unwrap_or_else(|_| panic!("column {} empty: {r:?}", header[c]))
    };
    let mut differing = 0;
    let intervals = doc["intervals"].as_array().unwrap();
    for pair in rows.chunks(2) {
        let [a, b] = pair else {
            panic!("2 rows per interval")
        };
        assert_eq!((a[flow].as_str(), b[flow].as_str()), ("0", "1"));
        for r in pair {
            // The flow's own count: its own transactions (a response that
            // lands past a tick counts in the next interval, as the
            // counters do, so to within its burst of 1).
            assert!(
                (n(r, count) - n(r, trans)).abs() <= 1.0,
                "flow's latency count vs its transactions: {r:?}"
            );
            assert!(n(r, min) <= n(r, mean) && n(r, mean) <= n(r, max) && n(r, sd) >= 0.0);
            // Both ends' usage: CPU seconds of the interval, on each end.
            for end in ["local", "remote"] {
                let cpu =
                    n(r, col(&format!("{end}_utime_s"))) + n(r, col(&format!("{end}_stime_s")));
                assert!(
                    cpu > 0.0 && cpu < 4.0,
                    "{end} CPU in a 250 ms interval: {r:?}"
                );
                assert!(n(r, col(&format!("{end}_maxrss_kb"))) > 1000.0, "{r:?}");
                for c in ["minflt", "majflt", "nvcsw", "nivcsw"] {
                    n(r, col(&format!("{end}_{c}")));
                }
            }
        }
        // Usage is the process's: the same on both rows of an interval.
        assert_eq!(a[col("remote_utime_s")], b[col("remote_utime_s")]);
        if a[mean] != b[mean] {
            differing += 1;
        }
        // The JSON's per-flow latency is what the rows carry.
        let i: usize = a[iv].parse().unwrap();
        let fl = &intervals[i]["flow_latency_ns"];
        assert_eq!(u(&fl[0]["count"]), n(a, count) as u64);
        assert_eq!(u(&fl[1]["count"]), n(b, count) as u64);
        assert!(intervals[i]["rusage"]["remote"]["user_s"].is_number());
    }
    assert!(rows.len() >= 8, "2 flows x 4 intervals: {rows:?}");
    assert!(
        differing >= rows.len() / 2 - 1,
        "two flows' own latencies differ in (nearly) every interval: {differing} of {}",
        rows.len() / 2
    );
}
