//! The aggregate commands end to end: `thrum agg` against two real servers
//! on loopback, `thrum report` on netperf fixture files with hand-computed
//! figures, the SVG as XML, report.html in headless Chromium, `find-burst`
//! and `sweep`, and their errors.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::common::{
    Ran, ServerProc, Thrum, assert_rejected, assert_schema_named, chromium_or_skip, f, ink, pixels,
    read_json, screenshot, u,
};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/netperf");

/// `thrum report` on the results.json in `out_dir`, writing into `re_dir`.
fn report_again(out_dir: &Path, re_dir: &Path) -> Ran {
    Thrum::report(out_dir.join("results.json"))
        .arg("--out")
        .arg(re_dir)
        .output()
}

/// The aggregate of a window computed straight from TEST_streams.csv: each
/// row's rate times the part of its interval inside the window.
fn csv_window_average(csv: &str, a: f64, b: f64) -> f64 {
    let mut units = 0.0;
    for row in csv.lines().skip(1) {
        let c: Vec<&str> = row.split(',').collect();
        let (s, e, v): (f64, f64, f64) = (
            c[2].parse().unwrap(),
            c[3].parse().unwrap(),
            c[5].parse().unwrap(),
        );
        units += v * (e.min(b) - s.max(a)).max(0.0);
    }
    units / (b - a)
}

/// The SVG parses as XML and holds the aggregate line, one start mark per
/// step and one average per complete step (colours of export::chart).
fn assert_chart(svg: &str, steps: usize, averages: usize) {
    let doc = roxmltree::Document::parse(svg).expect("the SVG parses as XML");
    let stroked = |colour: &str| {
        doc.descendants()
            .filter(|n| n.attribute("stroke") == Some(colour))
            .filter(|n| {
                n.attribute("points")
                    .is_some_and(|p| p.split_whitespace().count() >= 2)
            })
            .count()
    };
    // The line, plus its legend sample.
    assert!(stroked("#00A000") >= 1, "no aggregate line in the SVG");
    assert_eq!(stroked("#FF0000"), steps, "one start mark per step");
    assert_eq!(stroked("#0000A0"), 1, "the ramp's end");
    // The averages, plus the legend sample.
    assert_eq!(stroked("#404040"), averages + 1, "one average per step");
    let text: String = doc
        .descendants()
        .filter_map(|n| n.text())
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        text.contains("time since the ramp started (s)"),
        "x axis label: {text}"
    );
    assert!(text.contains("aggregate ("), "y axis label with its unit");
}

#[test]
fn agg_ramps_two_servers_and_its_steps_sum_the_streams() {
    let (s1, s2) = (ServerProc::start(&[]), ServerProc::start(&[]));
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("agg");
    // netperf's remote_hosts form, read as data.
    let hosts = dir.path().join("remote_hosts");
    std::fs::write(
        &hosts,
        format!(
            "REMOTE_HOSTS[0]={}\nREMOTE_HOSTS[1]={}\nREMOTE_HOSTS[2]=unused\nNUM_REMOTE_HOSTS=2\n",
            s1.addr, s2.addr
        ),
    )
    .unwrap();
    let out = Thrum::cmd(&["agg", "--hosts-file"])
        .arg(&hosts)
        .args([
            "--tests",
            "tps,outbound",
            "--step",
            "3s",
            "--max-streams",
            "4",
        ])
        .args(["--burst-probe", "200ms", "--individual", "--intervals"])
        .args([
            "--title",
            "Lab <A&B>",
            "--annotation",
            "two servers on one host",
        ])
        .arg("--out")
        .arg(&out_dir)
        .timeout(Duration::from_secs(90))
        .ok();
    let text = out.stdout();
    assert!(text.contains("Average of peak interval is "), "{text}");
    // The progress bar stays off when stderr is not a terminal.
    let err = out.stderr();
    assert!(!err.contains("step 1/3") && !err.contains('\r'), "{err}");
    assert!(
        text.contains("Average of interval 2 (4 streams) is "),
        "{text}"
    );
    let doc = read_json(&out_dir.join("results.json"));
    assert_schema_named(&doc, "thrum.agg.v1.json");
    assert_eq!(doc["schema"], "thrum.agg.v1");
    let tests = doc["tests"].as_array().unwrap();
    assert_eq!(tests.len(), 2);
    for t in tests {
        let name = t["name"].as_str().unwrap();
        let steps = t["steps"].as_array().unwrap();
        let counts: Vec<u64> = steps.iter().map(|s| u(&s["streams"])).collect();
        assert_eq!(counts, vec![1, 2, 4], "{name}: the ramp 1, 2, 4");
        // Round-robin: streams alternate over the two servers.
        let servers: Vec<&str> = t["streams"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["server"].as_str().unwrap())
            .collect();
        assert_eq!(
            servers,
            vec![s1.addr.as_str(), s2.addr.as_str(), &s1.addr, &s2.addr]
        );
        // Each stream's own final result, as netperf's .out files end with one.
        for st in t["streams"].as_array().unwrap() {
            let sum = &st["summary"];
            assert!(f(&sum["duration_s"]) > 0.0, "{name}: {sum}");
            assert!(f(&sum["value"]) > 0.0, "{name}: {sum}");
            assert!(f(&sum["local_cpu_util_percent"]) > 0.0, "{name}: {sum}");
            assert!(u(&sum["bytes_sent"]) > 0, "{name}: {sum}");
        }
        let csv = std::fs::read_to_string(out_dir.join(format!("{name}_streams.csv"))).unwrap();
        let started = |k: usize| f(&t["streams"][k]["started"]);
        for (i, s) in steps.iter().enumerate() {
            assert_eq!(s["complete"], true, "{name}: {s}");
            let (a, b) = (f(&s["start"]), f(&s["end"]));
            // The window: 1 s after the step's last stream started (streams
            // 0, 1, then 2 and 3), to 1 s before the next step (3 s steps).
            let last_start = match i {
                0 => started(0),
                1 => started(1),
                _ => started(2).max(started(3)),
            };
            assert!(
                (a - (last_start + 1.0)).abs() < 1e-6,
                "{name}: window {a}..{b}"
            );
            assert!(
                (b - (f(&s["started"]) + 2.0)).abs() < 1e-6,
                "{name}: window {a}..{b}"
            );
            assert!(b > a, "{name}: window {a}..{b}");
            let since_first = f(&s["started"]) - f(&steps[0]["started"]);
            assert!(
                (since_first - 3.0 * i as f64).abs() < 1e-6,
                "{name}: steps 3 s apart"
            );
            let avg = f(&s["average"]);
            let by_hand = csv_window_average(&csv, a, b);
            assert!(avg > 0.0, "{name}: {s}");
            assert!(
                ((avg - by_hand) / by_hand).abs() < 0.01,
                "{name}: step average {avg} but the streams' samples give {by_hand}"
            );
            assert!(f(&s["minimum"]) <= avg + 1e-6 && avg <= f(&s["maximum"]) + 1e-6);
            // The system under test's CPU over the window: in range, and a
            // service demand from the named source.
            let util = f(&s["cpu_util_percent"]);
            assert!(util > 0.0 && util <= 100.0, "{name}: {s}");
            assert!(f(&s["service_demand"]) > 0.0, "{name}: {s}");
            assert!(
                matches!(
                    s["service_demand_source"].as_str(),
                    Some("rusage" | "proc_stat")
                ),
                "{name}: {s}"
            );
        }
        step_latency_and_load_generators(name, t, &s1.addr, &s2.addr);
        let peak = u(&t["peak_step"]) as usize;
        let best = steps.iter().map(|s| f(&s["average"])).fold(0.0, f64::max);
        assert_eq!(f(&steps[peak]["average"]), best);
        let svg = std::fs::read_to_string(out_dir.join(format!("{name}_overall.svg"))).unwrap();
        assert_chart(&svg, 3, 3);
        for k in 0..4 {
            let p = out_dir.join(format!("{name}_stream_{k}.svg"));
            roxmltree::Document::parse(&std::fs::read_to_string(&p).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        }
    }
    // tps is burst-mode: the automatic search ran and its choice is recorded.
    let tps = &tests[0];
    assert_eq!(tps["burst"], tps["burst_search"]["burst"]);
    assert!(tps["burst_search"]["tried"].as_array().unwrap().len() >= 2);
    let html = std::fs::read_to_string(out_dir.join("report.html")).unwrap();
    assert_eq!(html.matches("<svg").count(), 2, "both charts inlined");
    assert_eq!(html.matches("<table>").count(), 2, "both tables");
    // Each load generator's CPU per step, both tests (steps 1 and 2 ran
    // streams to both servers).
    assert_eq!(html.matches("<table class=\"hosts\">").count(), 2);
    assert!(html.contains(&format!("<td>{}</td>", s2.addr)));
    assert!(html.contains("Burst search"), "tps shows its burst search");
    // The page says where and by what it was made, as results.json does.
    for key in ["thrum version", "command line", "kernel", "date", "hosts"] {
        assert!(
            html.contains(&format!("<th>{key}</th>")),
            "report.html lacks {key}"
        );
    }
    let kernel = doc["provenance"]["kernel"].as_str().unwrap();
    assert!(
        html.contains(kernel),
        "report.html lacks the kernel {kernel}"
    );
    // post_proc.py's -t and -a: on every chart and on the page, escaped.
    for t in ["tps", "outbound"] {
        let svg = std::fs::read_to_string(out_dir.join(format!("{t}_overall.svg"))).unwrap();
        assert!(svg.contains("Lab &lt;A&amp;B&gt; (") && svg.contains("two servers on one host"));
    }
    assert!(html.contains("<h1>Lab &lt;A&amp;B&gt; (thrum agg report)</h1>"));
    assert!(html.contains("<p class=\"annotation\">two servers on one host</p>"));
    ramp_logs_read_back(&out_dir, tests);
    // `thrum report` re-analyses the saved results to the same figures,
    // CPU utilisation and service demand of every step included.
    let re_dir = tempfile::tempdir().unwrap();
    let again = report_again(&out_dir, re_dir.path()).ok().stdout();
    for line in text.lines().filter(|l| l.starts_with("Average of peak")) {
        assert!(again.contains(line), "report lost {line:?}");
    }
    let re = read_json(&re_dir.path().join("results.json"));
    for (t, rt) in tests.iter().zip(re["tests"].as_array().unwrap()) {
        for (s, rs) in t["steps"]
            .as_array()
            .unwrap()
            .iter()
            .zip(rt["steps"].as_array().unwrap())
        {
            for key in [
                "cpu_util_percent",
                "service_demand",
                "service_demand_source",
                "latency_ns",
                "remote_cpu_util_percent",
                "remote_service_demand",
                "remote_hosts",
            ] {
                assert_eq!(s[key], rs[key], "report changed {key}: {s} -> {rs}");
            }
        }
    }
}

/// A step's latency (transaction tests) and the load generators' CPU,
/// held to what the run itself gives: the latency's
/// count is the transactions of the running streams' intervals whose
/// middle lies in the window (their samples are rates over known
/// intervals), and both servers run on this host, so each one's CPU is
/// this host's, which the SUT's sampler reads too over the same window.
fn step_latency_and_load_generators(name: &str, t: &Value, s1: &str, s2: &str) {
    let f = |v: &Value| {
        v.as_f64()
            .unwrap_or_else(|| panic!("{name}: not a number: {v} in {}", t["steps"]))
    };
    for (i, s) in t["steps"].as_array().unwrap().iter().enumerate() {
        let (a, b) = (f(&s["start"]), f(&s["end"]));
        let lat = &s["latency_ns"];
        if name == "tps" {
            let (p50, p99, mean) = (u(&lat["p50"]), u(&lat["p99"]), f(&lat["mean"]));
            assert!(
                p50 > 0 && p50 <= p99 && mean > 0.0,
                "{name} step {i}: {lat}"
            );
            let running = u(&s["streams"]);
            let mut by_hand = 0.0;
            for st in t["streams"].as_array().unwrap() {
                if u(&st["index"]) >= running {
                    continue;
                }
                for x in st["samples"].as_array().unwrap() {
                    let (end, len) = (f(&x["end"]), f(&x["interval_s"]));
                    let mid = end - len / 2.0;
                    if mid >= a && mid <= b {
                        by_hand += f(&x["value"]) * len;
                    }
                }
            }
            let count = f(&lat["count"]);
            // A worker hands an interval's transactions in as it sees the
            // tick; the counters are read at it: the burst in flight apart.
            assert!(
                (count - by_hand).abs() <= 0.02 * by_hand + 64.0,
                "{name} step {i}: latency of {count} transactions, the samples give {by_hand}"
            );
        } else {
            assert!(
                lat.is_null(),
                "{name} step {i}: a stream test has no latency: {lat}"
            );
        }
        let hosts = s["remote_hosts"].as_array().unwrap();
        let names: Vec<&str> = hosts.iter().map(|h| h["host"].as_str().unwrap()).collect();
        let want: &[&str] = if i == 0 { &[s1] } else { &[s1, s2] };
        assert_eq!(names, want, "{name} step {i}");
        let local = f(&s["cpu_util_percent"]);
        for h in hosts {
            let util = f(&h["cpu_util_percent"]);
            assert!(
                util > 0.0 && util <= 100.0 && (util - local).abs() < 25.0,
                "{name} step {i}: load generator {h} against this host's {local} %"
            );
            assert!(f(&h["service_demand"]) > 0.0, "{name} step {i}: {h}");
        }
        let all = f(&s["remote_cpu_util_percent"]);
        assert!(all > 0.0 && all <= 100.0, "{name} step {i}: {s}");
        assert!(f(&s["remote_service_demand"]) > 0.0, "{name} step {i}: {s}");
    }
}

/// TEST_ramp.log beside results.json, in runemomniaggdemo.sh's words:
/// `thrum report DIR` finds it agrees with results.json, and a directory
/// holding only the logs and the streams CSVs is reported with the logged
/// steps (the run's windows: the log's times are to the millisecond),
/// each step's figure the streams CSV's over its window.
fn ramp_logs_read_back(out_dir: &Path, tests: &[Value]) {
    let lonely = tempfile::tempdir().unwrap();
    for t in tests {
        let name = t["name"].as_str().unwrap();
        let log = std::fs::read_to_string(out_dir.join(format!("{name}_ramp.log"))).unwrap();
        assert!(log.starts_with(&format!(
            "Starting netperfs at {:.3} for {name}\n",
            f(&t["start"])
        )));
        for s in t["steps"].as_array().unwrap() {
            let pausing = format!(
                "Pausing for 3 seconds at {:.3} with {} netperfs running for {name}",
                f(&s["start"]) - 1.0,
                u(&s["streams"])
            );
            let pausing2 = pausing.replace("for 3 seconds", "for 2 seconds");
            assert!(
                log.contains(&pausing) || log.contains(&pausing2),
                "{pausing}\n{log}"
            );
        }
        assert!(log.contains(&format!("Netperfs stopping {:.3} for {name}", f(&t["end"]))));
        for f in [format!("{name}_ramp.log"), format!("{name}_streams.csv")] {
            std::fs::copy(out_dir.join(&f), lonely.path().join(&f)).unwrap();
        }
    }
    let err = Thrum::report(out_dir).ok().stderr();
    assert_eq!(
        err.matches("step(s), as results.json has them").count(),
        2,
        "{err}"
    );
    let doc = Thrum::report(lonely.path()).json();
    for t in tests {
        // The logs are read in name order: outbound before tps.
        let rt = doc["tests"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == t["name"])
            .unwrap();
        let name = t["name"].as_str().unwrap();
        for (s, rs) in t["steps"]
            .as_array()
            .unwrap()
            .iter()
            .zip(rt["steps"].as_array().unwrap())
        {
            assert_eq!(s["streams"], rs["streams"]);
            // Its windows are the run's: the log's times are to the ms.
            assert!((f(&s["start"]) - f(&rs["start"])).abs() < 2e-3, "{s} {rs}");
            assert!((f(&s["end"]) - f(&rs["end"])).abs() < 2e-3, "{s} {rs}");
            // The logged window's figure is the streams CSV's over it.
            let csv = std::fs::read_to_string(out_dir.join(format!("{name}_streams.csv"))).unwrap();
            let by_hand = csv_window_average(&csv, f(&rs["start"]), f(&rs["end"]));
            let re = f(&rs["average"]);
            assert!(
                re > 0.0 && (re - by_hand).abs() / by_hand < 0.01,
                "{rs}: {by_hand}"
            );
        }
    }
}

/// Figures computed by hand from the fixture files (see tests/fixtures/netperf/README.md).
#[test]
fn report_reads_netperf_demo_files() {
    let dir = tempfile::tempdir().unwrap();
    // The windows print as local time: UTC here, so the figures are fixed.
    let text = Thrum::report(FIXTURES)
        .args(["--intervals", "--individual", "--out"])
        .arg(dir.path())
        .env("TZ", "UTC")
        .stdout();
    for want in [
        "Average of peak interval is 263.333 Trans/s from 1970-01-01 00:16:48.000 UTC to 00:16:51.000 (unix 1008.000 to 1011.000)",
        "Minimum of peak interval is 230.000 Trans/s from 1970-01-01 00:16:48.000 UTC to 00:16:51.000 (unix 1008.000 to 1011.000)",
        "Maximum of peak interval is 290.000 Trans/s from 1970-01-01 00:16:48.000 UTC to 00:16:51.000 (unix 1008.000 to 1011.000)",
        "Average of interval 0 (1 streams) is 140.000 Trans/s from 1970-01-01 00:16:42.000 UTC to 00:16:45.000 (unix 1002.000 to 1005.000)",
        "Minimum of interval 0 (1 streams) is 130.000 Trans/s from 1970-01-01 00:16:42.000 UTC to 00:16:45.000 (unix 1002.000 to 1005.000)",
        "Maximum of interval 0 (1 streams) is 150.000 Trans/s from 1970-01-01 00:16:42.000 UTC to 00:16:45.000 (unix 1002.000 to 1005.000)",
        "Average of peak interval is 2500.000 10^6bits/s from 1970-01-01 00:33:22.000 UTC to 00:33:26.000 (unix 2002.000 to 2006.000)",
        "Minimum of peak interval is 2000.000 10^6bits/s from 1970-01-01 00:33:22.000 UTC to 00:33:26.000 (unix 2002.000 to 2006.000)",
        "Maximum of peak interval is 3000.000 10^6bits/s from 1970-01-01 00:33:22.000 UTC to 00:33:26.000 (unix 2002.000 to 2006.000)",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    let doc = read_json(&dir.path().join("results.json"));
    assert_schema_named(&doc, "thrum.agg.v1.json");
    let tps = doc["tests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "tps")
        .unwrap();
    assert_eq!(u(&tps["peak_step"]), 1);
    // The outbound stream's file ends with netperf's own final result.
    let outbound = doc["tests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "outbound")
        .unwrap();
    let sum = &outbound["streams"][0]["summary"];
    assert_eq!(f(&sum["value"]), 2500.0, "{sum}");
    assert_eq!(sum["netperf"]["THROUGHPUT"], "2500.00", "{sum}");
    // Second 8 (1008..1009): stream 0's 190 plus stream 1's 40.
    assert_eq!(f(&tps["per_second"][8]), 230.0);
    assert_chart(
        &std::fs::read_to_string(dir.path().join("tps_overall.svg")).unwrap(),
        2,
        2,
    );
    assert!(dir.path().join("tps_stream_1.svg").is_file());
    assert!(dir.path().join("outbound_streams.csv").is_file());
    // A single log file works too, and gives the same figures.
    let one = Thrum::report(format!("{FIXTURES}/netperf_tps.log")).output();
    assert!(
        one.stdout()
            .contains("Average of peak interval is 263.333 Trans/s")
    );
}

#[test]
fn report_html_renders_in_headless_chromium() {
    let Some(browser) = chromium_or_skip("report.html rendering") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    Thrum::report(FIXTURES).arg("--out").arg(dir.path()).ok();
    let shot = dir.path().join("shot.png");
    let url = format!("file://{}", dir.path().join("report.html").display());
    screenshot(browser, dir.path(), &url, &shot, "1200,900");
    let pixels = pixels(&shot);
    let (distinct, inked) = ink(&pixels);
    assert!(distinct > 20, "only {distinct} colours: a blank page");
    // Text, chart line, marks and table borders: a few percent of the page at least.
    assert!(inked > 0.01, "{inked:.4} of the page is not white");
    // The chart's green line is on screen.
    assert!(
        pixels.iter().any(|p| p[1] > 120 && p[0] < 80 && p[2] < 80),
        "no green aggregate line in the screenshot"
    );
}

#[test]
fn find_burst_and_sweep_on_loopback() {
    let s = ServerProc::start(&[]);
    let doc = Thrum::cmd(&["find-burst", "-H", &s.addr, "--probe", "200ms", "--json"])
        .timeout(Duration::from_secs(60))
        .json();
    let tried = doc["tried"].as_array().unwrap();
    assert!(tried.len() >= 2);
    assert_eq!(u(&tried[0][0]), 1);
    // The chosen burst is one that was tried, and the one after it did not rise.
    let chosen = u(&doc["burst"]);
    assert!(tried.iter().any(|t| u(&t[0]) == chosen));

    let dir = tempfile::tempdir().unwrap();
    let (csv, json) = (dir.path().join("m.csv"), dir.path().join("m.json"));
    let text = Thrum::sweep("tcp_rr")
        .host(&s.addr)
        .args(["--burst", "0,8", "--flows", "1,2"])
        .len("300ms")
        .arg("--csv")
        .arg(&csv)
        .arg("--export-json")
        .arg(&json)
        .default_warmup()
        .timeout(Duration::from_secs(60))
        .stdout();
    assert!(text.contains("rows burst, columns flows"), "{text}");
    // Every cell whose rate is not a packet rate says why, in the packets
    // per transaction measured, its rate printed plainly.
    let nas = text
        .matches(": transactions/s, not a packet rate: ")
        .count();
    assert!(nas >= 2, "the burst-8 cells have a note: {text}");
    assert!(!text.contains("n/a"), "a rate reads as a rate: {text}");
    assert!(text.contains("packets per transaction sent"), "{text}");
    // Long CSV: a column per dimension, a row per cell.
    let csv = std::fs::read_to_string(csv).unwrap();
    let rows: Vec<&str> = csv.lines().collect();
    assert!(
        rows[0].starts_with("burst,flows,request_bytes,response_bytes,transactions_per_s,"),
        "{csv}"
    );
    assert_eq!(rows.len(), 5, "{csv}");
    let doc = read_json(&json);
    let cells = doc["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4);
    assert!(cells.iter().all(|c| f(&c["transactions_per_s"]) > 0.0));
    // 1-byte tcp_rr with 9 in flight: TCP coalesces requests into segments,
    // so the interface's packets part from transactions by more than the
    // tolerance and the cell is n/a. Asserted as the rule itself (on lo a
    // packet counts leaving and arriving: 2 per message), not as a ratio
    // that only a quiet machine reaches.
    for c in cells.iter().filter(|c| u(&c["burst"]) == 8) {
        let tps = f(&c["transactions_per_s"]);
        let off = |pps: f64| (pps / 2.0 - tps).abs() / tps;
        assert!(
            off(f(&c["tx_packets_per_s"])) > thrum::sweep::PACKET_TOLERANCE
                || off(f(&c["rx_packets_per_s"])) > thrum::sweep::PACKET_TOLERANCE,
            "{c}"
        );
        assert_eq!(c["valid"], false, "{c}");
        let ppt = &c["packets_per_transaction"];
        assert!(f(&ppt[0]) > 0.0 && f(&ppt[1]) > 0.0, "{c}");
    }
    // Each cell carries both ends' CPU and service demand beside its rate.
    for c in cells {
        for key in [
            "local_cpu_util_percent",
            "remote_cpu_util_percent",
            "local_service_demand",
            "remote_service_demand",
        ] {
            let v = f(&c[key]);
            assert!(v > 0.0, "{key}: {c}");
        }
        assert!(f(&c["local_cpu_util_percent"]) <= 100.0, "{c}");
    }
    // The CSV keeps each measured rate and says in its own column that it
    // failed the packet rule.
    let head: Vec<&str> = rows[0].split(',').collect();
    let col = |name: &str| head.iter().position(|h| *h == name).unwrap();
    for r in &rows[1..] {
        let r: Vec<&str> = r.split(',').collect();
        let c = cells
            .iter()
            .find(|c| u(&c["burst"]).to_string() == r[0] && u(&c["flows"]).to_string() == r[1])
            .unwrap();
        assert_eq!(
            r[col("transactions_per_s")].parse::<f64>().unwrap(),
            f(&c["transactions_per_s"]),
            "{csv}"
        );
        assert_eq!(r[col("valid")], c["valid"].to_string(), "{csv}");
        if r[0] == "8" {
            assert_eq!(r[col("valid")], "false", "{csv}");
        }
    }
}

#[test]
fn agg_commands_reject_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let hosts = dir.path().join("hosts");
    std::fs::write(&hosts, "REMOTE_HOSTS[x]=lg1\n").unwrap();
    let hosts = hosts.to_str().unwrap();
    assert_rejected(&[
        (
            &["agg", "--hosts", "127.0.0.1", "--step", "1s"],
            &["--step", "3s..=1h"],
        ),
        (
            &["agg", "--hosts", "127.0.0.1", "--tests", "pps"],
            &["--tests", "tps, outbound"],
        ),
        (
            &["agg", "--hosts", "127.0.0.1", "--max-streams", "0"],
            &["--max-streams 0", "1..=1024"],
        ),
        (
            &["agg", "--hosts", "127.0.0.1", "--burst", "x"],
            &["--burst", "auto or 0..="],
        ),
        (&["agg", "--hosts", "a,,b"], &["--hosts", "empty host"]),
        (
            &["agg", "--hosts-dns", "lg:0"],
            &["--hosts-dns", "NAME[:PORT]", "1..=65535"],
        ),
        (
            &["agg", "--hosts-file", hosts],
            &["--hosts-file line 1", "REMOTE_HOSTS[0..]"],
        ),
        (&["agg"], &["--hosts"]),
        (
            &["agg", "--hosts", "127.0.0.1", "--title", "a\nb"],
            &["--title", "not one line of text", "accepted: 1..=200"],
        ),
        (
            &["report", "x", "--annotation", &"x".repeat(201)],
            &["--annotation", "201 characters", "accepted: 1..=200"],
        ),
        // A load generator that is not there is named before the ramp starts.
        (
            &["agg", "--hosts", "127.0.0.1:1", "--step", "3s"],
            &["load generator 127.0.0.1:1", "cannot reach"],
        ),
        (
            &["sweep", "tcp_rr", "--flows", "1,x"],
            &["--flows", "list of whole numbers"],
        ),
        (
            &["report", "/nonexistent/results.json"],
            &["/nonexistent/results.json"],
        ),
    ]);
    // A bad cell of the matrix is named before anything runs.
    let err = Thrum::cmd(&["sweep", "tcp_stream", "--burst", "2"])
        .timeout(Duration::from_secs(10))
        .fails()
        .stderr();
    assert!(err.contains("burst 2"));
}

/// `thrum agg --hosts HOSTS EXTRA.. --step 3s` into a new directory, which
/// must succeed; returns the directory and its results.json, checked
/// against the schema.
fn agg_3s_steps(hosts: &str, extra: &[&str]) -> (tempfile::TempDir, Value) {
    let dir = tempfile::tempdir().unwrap();
    Thrum::cmd(&["agg", "--hosts", hosts])
        .args(extra)
        .args(["--step", "3s", "--out"])
        .arg(dir.path())
        .timeout(Duration::from_secs(60))
        .ok();
    let doc = read_json(&dir.path().join("results.json"));
    assert_schema_named(&doc, "thrum.agg.v1.json");
    (dir, doc)
}

#[test]
fn agg_sync_runs_one_stream_to_each_server_in_turn() {
    let (s1, s2) = (ServerProc::start(&[]), ServerProc::start(&[]));
    let hosts = format!("{},{}", s1.addr, s2.addr);
    let (dir, doc) = agg_3s_steps(&hosts, &["--tests", "sync"]);
    let t = &doc["tests"][0];
    let steps = t["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "one step per server");
    let csv = std::fs::read_to_string(dir.path().join("sync_streams.csv")).unwrap();
    for (i, s) in steps.iter().enumerate() {
        assert_eq!((u(&s["streams"]), u(&s["first_stream"])), (1, i as u64));
        let stream = &t["streams"][i];
        assert_eq!(stream["server"], [&s1.addr, &s2.addr][i].as_str());
        // Stream i ran only in its own step: it ended before the next began.
        let last_end = stream["samples"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| f(&x["end"]))
            .fold(0.0, f64::max);
        assert!(last_end < f(&s["end"]) + 2.0, "stream {i} ran on");
        let (a, b) = (f(&s["start"]), f(&s["end"]));
        let by_hand = csv_window_average(&csv, a, b);
        let avg = f(&s["average"]);
        assert!(
            ((avg - by_hand) / by_hand).abs() < 0.01,
            "{avg} vs {by_hand}"
        );
    }
}

/// `--tests rr`: 1-byte tcp_rr streams, one transaction in flight each,
/// ramped like tps (netperf's aggregate of concurrent TCP_RR processes):
/// steps of 1 and 2 streams, each stream's request bytes one per
/// transaction, each step's average the streams' samples over its window.
#[test]
fn agg_rr_ramps_one_byte_tcp_rr_streams() {
    let server = ServerProc::start(&[]);
    let (dir, doc) = agg_3s_steps(&server.addr, &["--tests", "rr", "--max-streams", "2"]);
    let t = &doc["tests"][0];
    assert_eq!(
        (t["name"].as_str(), t["unit"].as_str()),
        (Some("rr"), Some("Trans/s"))
    );
    let steps = t["steps"].as_array().unwrap();
    let counts: Vec<u64> = steps.iter().map(|s| u(&s["streams"])).collect();
    assert_eq!(counts, vec![1, 2], "the ramp 1, 2");
    for st in t["streams"].as_array().unwrap() {
        let sum = &st["summary"];
        let (done, sent) = (u(&sum["transactions"]), u(&sum["bytes_sent"]));
        // One 1-byte request per transaction; the last may be unanswered.
        assert!(done > 0 && (done..=done + 1).contains(&sent), "{sum}");
    }
    let csv = std::fs::read_to_string(dir.path().join("rr_streams.csv")).unwrap();
    for s in steps {
        assert_eq!(s["complete"], true, "{s}");
        let (avg, by_hand) = (
            f(&s["average"]),
            csv_window_average(&csv, f(&s["start"]), f(&s["end"])),
        );
        assert!(
            avg > 0.0 && ((avg - by_hand) / by_hand).abs() < 0.01,
            "{avg} vs {by_hand}"
        );
    }
}

/// `--hosts-dns NAME:PORT` takes every address of NAME: here a name that
/// /etc/hosts gives two or three loopback addresses, each with a server on
/// the same port (as a headless Service's pods). The name lives in a
/// private mount namespace's /etc/hosts (`unshare --mount`, a bind mount
/// over it): the machine's own file is never written.
#[test]
fn agg_hosts_dns_takes_every_address_of_a_name() {
    let probe = Command::new("unshare")
        .args(["--mount", "mount", "--bind", "/dev/null", "/dev/null"])
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        let msg = "`unshare --mount` failed: --hosts-dns is tested in a private mount namespace, which needs root and util-linux";
        if std::env::var("THRUM_E2E_NETNS").as_deref() == Ok("required") {
            panic!("{msg}");
        }
        eprintln!("SKIPPED: {msg}");
        return;
    }
    let s1 = ServerProc::start_on("127.0.0.1", 0);
    let port: u16 = s1.addr.rsplit_once(':').unwrap().1.parse().unwrap();
    let mut servers = vec![s1, ServerProc::start_on("127.0.0.2", port)];
    let v6 = std::net::TcpListener::bind("[::1]:0").is_ok();
    if v6 {
        servers.push(ServerProc::start_on("::1", port));
    }
    let dir = tempfile::tempdir().unwrap();
    let hosts = dir.path().join("hosts");
    std::fs::write(
        &hosts,
        "127.0.0.1 localhost\n::1 localhost\n\
         127.0.0.2 lg.thrum.test\n127.0.0.1 lg.thrum.test\n::1 lg.thrum.test\n",
    )
    .unwrap();
    let out_dir = dir.path().join("agg");
    // The private mount namespace's shell binds the file and execs thrum.
    let script = "mount --bind \"$1\" /etc/hosts && shift && exec \"$@\"";
    let unshare = ["unshare", "--mount", "sh", "-c", script, "sh"];
    Thrum::cmd(&["agg", "--hosts-dns", &format!("lg.thrum.test:{port}")])
        .args(["--tests", "sync", "--step", "3s", "--out"])
        .arg(&out_dir)
        .under(&[&unshare[..], &[hosts.to_str().unwrap()]].concat())
        .timeout(Duration::from_secs(60))
        .ok();
    let doc = read_json(&out_dir.join("results.json"));
    let used: Vec<&str> = doc["tests"][0]["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["server"].as_str().unwrap())
        .collect();
    // Sorted, IPv4 first, each address once.
    let mut want = vec![format!("127.0.0.1:{port}"), format!("127.0.0.2:{port}")];
    if v6 {
        want.push(format!("[::1]:{port}"));
    }
    assert_eq!(used, want, "one sync stream to each address of the name");
}

/// agg, find-burst and sweep prove a key to a server that asks for one, as
/// `thrum run` does, and fail with the server's reason without it.
#[test]
fn aggregate_commands_take_the_pre_shared_key() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key");
    std::fs::write(&key, "a key of at least sixteen bytes\n").unwrap();
    let key = key.to_str().unwrap();
    let server = ServerProc::start(&["--psk-file", key]);
    let sweep = Thrum::sweep("tcp_rr")
        .host(&server.addr)
        .args(["--burst", "0", "--flows", "1"])
        .len("300ms")
        .default_warmup();
    sweep.clone().args(["--psk-file", key]).ok();
    // A keyless sweep must fail.
    let out = sweep.fails();
    let text = out.stdout() + &out.stderr();
    assert!(text.contains("pre-shared key"), "{text}");
    Thrum::cmd(&["find-burst", "-H", &server.addr, "--probe", "200ms"])
        .args(["--psk-file", key])
        .timeout(Duration::from_secs(60))
        .ok();
}

/// A run in which a load generator dies after agg has checked it: `agg`
/// fails and says why, and `thrum report` on its results.json prints the
/// same per-stream error, shows it in report.html and fails as `agg` did.
#[test]
fn report_keeps_why_streams_failed_and_fails_as_agg_did() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("s2.log");
    let s1 = ServerProc::start(&[]);
    let mut s2 = ServerProc::start_logged(&[], &log);
    let out_dir = dir.path().join("out");
    let hosts = format!("{},{}", s1.addr, s2.addr);
    let agg = Thrum::cmd(&["agg", "--hosts", &hosts, "--tests", "sync", "--step", "3s"])
        .arg("--out")
        .arg(&out_dir)
        .spawn();
    // agg checks every load generator before the first step (a session
    // that s2 logs); s2 dies after that, before its step begins 3 s in.
    let t0 = std::time::Instant::now();
    while std::fs::read_to_string(&log).unwrap_or_default().is_empty()
        && t0.elapsed() < Duration::from_secs(20)
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = s2.child.kill();
    // agg with a dead host fails.
    let out = agg.wait().fails();
    let text = out.stdout();
    // Why, as a warning: on stderr, with the results alone on stdout.
    let why = format!("stream 1 to {}", s2.addr);
    let err = out.stderr();
    let line = err
        .lines()
        .find(|l| l.contains(&why))
        .unwrap_or_else(|| panic!("agg does not say why stream 1 failed: {err}"));
    assert!(!text.contains(&why), "a warning on stdout: {text}");
    let re_dir = tempfile::tempdir().unwrap();
    let again = report_again(&out_dir, re_dir.path());
    let re_text = again.stderr();
    assert_eq!(again.code(), out.code(), "{}", again.report());
    assert!(re_text.contains(line), "report lost {line:?}: {re_text}");
    let html = std::fs::read_to_string(re_dir.path().join("report.html")).unwrap();
    assert!(
        html.contains(&why),
        "report.html does not say why stream 1 failed"
    );
}

/// A stream whose sampling stalls (an overloaded host; here
/// the whole agg process stopped with SIGSTOP for 1.5 s once its stream's
/// workers run) is told with the stable code `sampler_stalled`, and the
/// back-to-back ticks that catch up after the stall, microseconds apart,
/// are merged into their neighbours: no sample in the streams CSV is
/// shorter than a quarter of the 250 ms interval, and the samples still
/// cover the stream's whole run without a gap.
#[test]
fn agg_tells_of_a_stalled_sampler_and_keeps_no_zero_length_samples() {
    let server = ServerProc::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let agg = Thrum::cmd(&["agg", "--hosts", &server.addr, "--tests", "rr"])
        .args(["--max-streams", "1", "--step", "3s", "--interval", "250ms"])
        .arg("--out")
        .arg(dir.path());
    let child = agg
        .command()
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The ramp's stream runs once its thread and its engine's worker
    // thread exist (the preflight's session before the ramp has workers
    // but no stream thread); watched, not timed: a busy machine may take
    // seconds to start it.
    let pid = child.id();
    let running = || {
        let names: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
            .collect();
        names.iter().any(|c| c.starts_with("agg-stream-0"))
            && names.iter().any(|c| c.starts_with("thrum-worker"))
    };
    let t0 = std::time::Instant::now();
    while !running() {
        assert!(t0.elapsed() < Duration::from_secs(30), "no stream started");
        std::thread::sleep(Duration::from_millis(5));
    }
    // SAFETY: signals to a process this test started.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGSTOP) }, 0);
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGCONT) }, 0);
    Ran::of(&agg, child.wait_with_output().unwrap()).ok();
    let doc = read_json(&dir.path().join("results.json"));
    let t = &doc["tests"][0];
    let warnings: Vec<&str> = t["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .filter(|w| w.starts_with("sampler_stalled: "))
        .collect();
    let csv = std::fs::read_to_string(dir.path().join("rr_streams.csv")).unwrap();
    eprintln!("{}\n{csv}", t["warnings"]);
    assert_eq!(warnings.len(), 1, "{}\n{csv}", t["warnings"]);
    assert!(warnings[0].contains("in 1 of 1 streams"), "{}", warnings[0]);
    let rows: Vec<(f64, f64, f64)> = csv
        .lines()
        .skip(1)
        .map(|l| {
            let c: Vec<&str> = l.split(',').collect();
            let p = |i: usize| c[i].parse::<f64>().unwrap();
            (p(2), p(3), p(4))
        })
        .collect();
    assert!(rows.len() >= 4, "{csv}");
    for w in rows.windows(2) {
        assert!((w[1].0 - w[0].1).abs() < 1e-3, "a gap or overlap: {csv}");
    }
    assert!(
        rows.iter().all(|r| r.2 >= 0.25 / 4.0),
        "a sample shorter than a quarter interval: {csv}"
    );
    assert!(
        rows.iter().any(|r| r.2 > 1.4),
        "no sample spans the stall: {csv}"
    );
}
