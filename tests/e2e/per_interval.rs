//! The figures of every interval: the TCP stream tests' `tcp_info`, as
//! iperf3 shows it (retransmissions, congestion window, RTT), checked
//! against the kernel's own counts over a shaped path that drops, and on
//! loopback; udp_stream's jitter against a queue that grows; and in
//! `--samples`, each flow's own latency and both ends' process usage.
//!
//! The shaped tests need root and `ip netns`; they skip without them
//! unless `THRUM_E2E_NETNS=required`.

use serde_json::Value;

use crate::common::{
    Path3, ServerProc, TOWARD_A, TOWARD_B, Thrum, assert_schema, ns_exec, run_ok, u,
};

/// Namespace counter `Tcp: RetransSegs` of `ns`: the kernel's count of
/// every TCP segment retransmitted there (a fresh namespace: this test's).
fn retrans_segs(ns: &str) -> u64 {
    let out = run_ok(ns_exec(ns, "cat").arg("/proc/net/snmp"));
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines().filter(|l| l.starts_with("Tcp:"));
    let (names, values) = (lines.next().unwrap(), lines.next().unwrap());
    let at = names
        .split_whitespace()
        .position(|n| n == "RetransSegs")
        .expect("Tcp RetransSegs");
    values.split_whitespace().nth(at).unwrap().parse().unwrap()
}

/// Every interval has `tcp_info` with a congestion window and an RTT,
/// and its figures are its sockets': retransmissions their sum, the
/// congestion window their mean (integer division, so within one byte);
/// the intervals' retransmissions, summed.
fn interval_retransmits(doc: &Value) -> u64 {
    let ivs = doc["intervals"].as_array().expect("intervals");
    assert!(!ivs.is_empty(), "{doc}");
    ivs.iter()
        .map(|iv| {
            let t = &iv["tcp_info"];
            assert!(u(&t["cwnd"]) > 0, "no cwnd in {iv}");
            assert!(u(&t["srtt_us"]) > 0, "no srtt in {iv}");
            let sockets = t["sockets"].as_array().expect("sockets");
            assert!(!sockets.is_empty());
            let sum: u64 = sockets.iter().map(|k| u(&k["retransmits"])).sum();
            assert_eq!(u(&t["retransmits"]), sum, "not its sockets' sum: {t}");
            let mean = sockets.iter().map(|k| u(&k["cwnd"])).sum::<u64>() / sockets.len() as u64;
            assert!(
                u(&t["cwnd"]).abs_diff(mean) <= 1,
                "not its sockets' mean: {t}"
            );
            u(&t["retransmits"])
        })
        .sum()
}

/// Over R's 20 Mbit/s htb with a 16 KB byte FIFO each way, one cubic
/// flow overflows the FIFO again and again: the sender retransmits. The
/// intervals' retransmissions (the sender's `tcpi_total_retrans` at each
/// tick, differenced) must add up to no more than the run's total from the
/// sender's final TCP_INFO (`summary.local` for tcp_stream, `.remote` for
/// tcp_maerts, the server sending), which is in turn no more than the
/// kernel's namespace-wide `RetransSegs` of the sender's namespace; what
/// the intervals miss is what the drain after the last tick retransmits
/// (the queued tail of 32 KB socket buffers, a small share of the run:
/// measured 80 of 1,191 and 179 of 1,001).
#[test]
fn tcp_info_retransmits_add_up_over_a_lossy_path() {
    let Some(path) = Path3::build(219, 40) else {
        return;
    };
    for dev in [TOWARD_B, TOWARD_A] {
        path.htb_bfifo(dev, "20mbit", "16000");
    }
    let server = path.server();
    for (test, sender_ns, end) in [
        ("tcp_stream", path.a.clone(), "local"),
        ("tcp_maerts", path.b.clone(), "remote"),
    ] {
        let before = retrans_segs(&sender_ns);
        let doc = path
            .client(&server, test)
            .len("2s")
            .interval("0.5s")
            .args(["-s", "32K", "-S", "32K"])
            .json();
        let kernel = retrans_segs(&sender_ns) - before;
        let intervals = interval_retransmits(&doc);
        let total = u(&doc["summary"][end]["tcp_retransmits"]);
        eprintln!(
            "{test}: intervals {intervals}, final TCP_INFO {total}, namespace RetransSegs {kernel}"
        );
        assert!(
            intervals > 0,
            "{test}: no retransmission over a path that drops: {doc}"
        );
        assert!(
            intervals <= total,
            "{test}: intervals {intervals} > total {total}"
        );
        assert!(
            total <= kernel,
            "{test}: TCP_INFO {total} > the kernel's {kernel}"
        );
        // The drain's share: its tail, not the run.
        assert!(
            total - intervals <= total / 2,
            "{test}: intervals {intervals} of {total}"
        );
        for iv in doc["intervals"].as_array().unwrap() {
            let end_of = iv["tcp_info"]["sockets"][0]["end"].as_str().unwrap();
            let want = if test == "tcp_stream" {
                "client"
            } else {
                "server"
            };
            assert_eq!(end_of, want, "{test}: the sender's view");
        }
    }
}

/// On loopback, tcp_bidir's intervals carry both ends' sending sockets,
/// each with a congestion window; a tcp_stream's human rows carry
/// iperf3's `Retr` and `Cwnd` columns.
#[test]
fn tcp_info_in_every_interval_on_loopback() {
    let server = ServerProc::start(&[]);
    let doc = Thrum::run("tcp_bidir")
        .on(&server)
        .flows(2)
        .len("1s")
        .interval("0.25s")
        .json();
    let intervals = interval_retransmits(&doc);
    let total = u(&doc["summary"]["local"]["tcp_retransmits"])
        + u(&doc["summary"]["remote"]["tcp_retransmits"]);
    assert!(intervals <= total, "intervals {intervals} > total {total}");
    for iv in doc["intervals"].as_array().unwrap() {
        let ends: Vec<&str> = iv["tcp_info"]["sockets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["end"].as_str().unwrap())
            .collect();
        assert!(ends.contains(&"client") && ends.contains(&"server"), "{iv}");
    }
    let text = Thrum::run("tcp_stream")
        .host(&server.addr)
        .len("0.5s")
        .interval("0.25s")
        .stdout();
    let head = text.lines().nth(1).unwrap_or_default();
    assert!(head.contains("Retr") && head.contains("Cwnd"), "{text}");
    assert!(text.contains("Bytes"), "a cwnd in bytes: {text}");
}

/// udp_stream's jitter against the physics of a queue that grows: R's
/// 2.5 Mbit/s htb toward B over a byte FIFO deep enough (1.25 MB) that a
/// 3 Mbit/s stream of 1472-byte datagrams loses nothing in 1 s. The queue
/// never empties, so datagrams leave R one frame time L apart (1514 bytes
/// at 2.5 Mbit/s: 4844.8 µs) while they were sent s apart (1472 payload
/// bytes at 3 Mbit/s: 3925.3 µs): every transit is L − s longer than the
/// one before, |D| is that 919.5 µs at every arrival, and RFC 3550's J
/// converges to it if the sender keeps its gaps. Its pacer does not on a
/// busy machine: a gap stretched by a late wake-up and the short one that
/// catches up both move |D| = |L − gap| away from L − s, and only up on
/// the whole (RFC 3550 counts the sender's irregularity as jitter too).
/// Measured on a quiet machine at 20 and 25 Mbit/s (L − s = 134.6 µs):
/// 133.6 to 138.9 µs per interval, within 3 %; under a load average of
/// 13 on 2 CPUs, 197 to 832 µs, the pacer sending two datagrams at once.
/// So the queue's growth is a floor, within 10 % below, and one frame
/// time L, the most |D| a gap of up to 2L can give, bounds the intervals'
/// median from above (read there at 3 Mbit/s: 1.02 to 1.44 ms alone,
/// 1.05 to 4.5 ms beside the TCP tests, against 0.92 and 4.84 ms). The
/// summary, the intervals and `--output-fields JITTER` must all carry it.
#[test]
fn udp_jitter_is_the_growth_of_a_queue() {
    let Some(path) = Path3::build(219, 42) else {
        return;
    };
    path.htb_bfifo(TOWARD_B, "2500kbit", "1250000");
    let server = path.server();
    let doc = path
        .client(&server, "udp_stream")
        .len("1s")
        .interval("0.25s")
        .args(["--rate", "3M", "-m", "1472"])
        .json();
    let s = &doc["summary"];
    assert_eq!(u(&s["lost"]), 0, "the queue overflowed: {s}");
    let want_ns = (1514.0 * 8.0 / 2.5e6 - 1472.0 * 8.0 / 3e6) * 1e9;
    let mut j: Vec<u64> = doc["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|iv| iv["phase"] == "measure")
        .map(|iv| u(&iv["sum"]["jitter_ns"]))
        .collect();
    j.sort_unstable();
    let median = j[(j.len() - 1) / 2] as f64;
    let frame_ns = 1514.0 * 8.0 / 2.5e6 * 1e9;
    eprintln!("jitter per interval {j:?} ns, the queue's growth {want_ns:.0} ns");
    assert!(
        median >= 0.9 * want_ns && median <= frame_ns,
        "jitter {median} ns: not between the queue's growth {want_ns:.0} ns (less 10 %) and one frame time {frame_ns:.0} ns"
    );
    assert!(u(&s["jitter_ns"]) > 0, "{s}");
    // The same through keyval's field list, on loopback.
    let local = ServerProc::start(&[]);
    let text = Thrum::run("udp_stream")
        .host(&local.addr)
        .len("0.5s")
        .args(["--rate", "10M", "--output-fields", "THROUGHPUT,JITTER"])
        .arg("--keyval")
        .stdout();
    let jitter: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("JITTER="))
        .unwrap_or_else(|| panic!("no JITTER in {text}"))
        .parse()
        .expect("JITTER in µs");
    assert!(jitter >= 0.0, "{text}");
}

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
    let doc = Thrum::run("tcp_rr")
        .on(&server)
        .flows(2)
        .threads(2)
        .len("1s")
        .interval("250ms")
        .arg("--samples")
        .arg(&csv)
        .json();
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
