//! Several tests in one session (`--mix`, the `rrul` presets) on loopback:
//! each part keeps its own figures, and every single-test invariant holds
//! per part after the one drain.

use std::time::Duration;

use serde_json::Value;

use crate::common::{ServerProc, Thrum, assert_rejected, assert_schema, f, read_json, svg_text, u};

/// Short phases for loopback runs (after no warm-up: the client's
/// default): 1 s idle, 2 s loaded, 1 s recovery.
const SHORT_PHASES: [&str; 6] = ["--idle", "1s", "-l", "2s", "--recovery", "1s"];

/// `thrum run -H server rrul_be` with the short phases, `extra` added,
/// which must succeed, its result saved to `saved`: what it printed and
/// the result, valid against the schema.
fn rrul_be_saved(server: &ServerProc, extra: Thrum, saved: &std::path::Path) -> (String, Value) {
    let text = extra
        .host(&server.addr)
        .arg("rrul_be")
        .arg("--export-json")
        .arg(saved)
        .args(SHORT_PHASES)
        .timeout(Duration::from_secs(60))
        .stdout();
    let doc = read_json(saved);
    assert_schema(&doc);
    (text, doc)
}

/// `thrum run -H server ARGS` (no warm-up) that must succeed: its result.
pub fn run_mix(server: &ServerProc, args: &[&str]) -> Value {
    let doc = Thrum::run_without_test()
        .on(server)
        .args(args)
        .timeout(Duration::from_secs(90))
        .json();
    assert_schema(&doc);
    doc
}

/// Every part conserves as a single test does: TCP bytes sent by one end
/// are the bytes the other received, after the drain (a tcp_rr probe's
/// requests and responses too); UDP datagrams sent are received plus lost;
/// a udp_rr probe's requests are, once drained, each answered or given up
/// after --rr-timeout (udp_loss.rs's rule for the single test).
pub fn assert_conserved(doc: &Value) {
    for p in doc["summary"]["parts"].as_array().expect("parts") {
        let (l, r) = (&p["local"]["total"], &p["remote"]["total"]);
        let name = &p["name"];
        match p["test"].as_str().unwrap() {
            "udp_stream" => assert_eq!(
                u(&l["datagrams_sent"]),
                u(&r["datagrams_received"]) + u(&r["lost"]),
                "{name}: sent = received + lost"
            ),
            "udp_rr" => {
                let sent = u(&l["datagrams_sent"]);
                assert_eq!(
                    sent,
                    u(&l["transactions"]) + u(&l["lost"]),
                    "{name}: requests sent = answered + lost"
                );
                // The server answers what reaches it, no more than was sent.
                assert!(u(&r["datagrams_received"]) <= sent, "{name}: {r}");
                assert_eq!(
                    u(&r["datagrams_sent"]),
                    u(&r["datagrams_received"]),
                    "{name}: one response per request received"
                );
            }
            _ => {
                assert_eq!(u(&l["bytes_sent"]), u(&r["bytes_received"]), "{name} up");
                assert_eq!(u(&r["bytes_sent"]), u(&l["bytes_received"]), "{name} down");
            }
        }
    }
}

#[test]
fn a_mix_reports_each_part_as_it_would_alone() {
    let server = ServerProc::start(&[]);
    let doc = run_mix(
        &server,
        &[
            "--mix",
            "tcp_stream*2,tcp_maerts,tcp_rr@rate=200@dscp=EF,udp_stream",
            "-l",
            "2s",
            "--idle",
            "0",
            "--recovery",
            "0",
        ],
    );
    let parts = doc["summary"]["parts"].as_array().unwrap();
    let names: Vec<&str> = parts.iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["tcp_stream", "tcp_maerts", "tcp_rr", "udp_stream"]);
    let dirs: Vec<&str> = parts
        .iter()
        .map(|p| p["direction"].as_str().unwrap())
        .collect();
    assert_eq!(dirs, ["up", "down", "rr", "up"]);
    assert_eq!(u(&parts[0]["flows"]), 2);
    assert_eq!(u(&doc["spec"]["flows"]), 5);
    // Stream parts have goodput, per flow too; the probe has latency.
    for p in [&parts[0], &parts[1], &parts[3]] {
        assert!(p["throughput_bps"].as_f64().unwrap() > 0.0, "{}", p["name"]);
    }
    assert_eq!(parts[0]["flow_throughput_bps"].as_array().unwrap().len(), 2);
    assert!(parts[2]["latency_ns"]["p50"].as_u64().unwrap() > 0);
    assert!(parts[2]["throughput_bps"].is_null());
    assert_eq!(u(&parts[2]["tos"]), 0xb8);
    // The probe ran at its own rate, 200/s, not the bulk flows' pace: the
    // window's share of its schedule, give or take what was behind at
    // either edge. A generator that stalled catches up after, and a
    // response is counted when it arrives, so at the window's start or end
    // at most 200/s times (its worst lag + the slowest response) moves
    // across the edge, plus the one under way. A bound of fixed slack
    // (300..=500 before) held only where no stall reached an edge.
    let probe = &parts[2];
    let tx = u(&probe["transactions"]) as f64;
    let scheduled = 200.0 * f(&probe["duration_s"]);
    let behind_s =
        (u(&probe["generator_lag_ns"]["max"]) + u(&probe["latency_ns"]["max"])) as f64 / 1e9;
    let edge = 200.0 * behind_s + 2.0;
    assert!(
        (tx - scheduled).abs() <= edge,
        "probe transactions {tx} for {scheduled} scheduled (behind by up to {behind_s} s)"
    );
    // One set of ticks: every part has the session's intervals.
    let n = doc["intervals"].as_array().unwrap().len();
    for p in parts {
        assert_eq!(p["intervals"].as_array().unwrap().len(), n);
    }
    // No idle or recovery phase asked for: no phases.
    assert!(doc["summary"]["phases"].is_null());
    assert_conserved(&doc);
}

#[test]
fn presets_print_their_spec_and_run() {
    let dry = |preset| {
        Thrum::cmd(&["run", preset, "--dry-run"])
            .timeout(Duration::from_secs(10))
            .stdout()
    };
    let text = dry("rrul");
    assert!(text.starts_with("--mix tcp_stream@dscp=BE,"), "{text}");
    assert!(
        text.contains("tcp_maerts#4") && text.contains("tos 0xb8"),
        "{text}"
    );
    for preset in ["rrul_be", "upload", "download"] {
        assert!(dry(preset).contains("tcp_rr@rate="), "{preset}");
    }
    let server = ServerProc::start(&[]);
    // An --rr-timeout given is the mix's, the single test's default too
    // (a mix's own default is 2 s).
    let doc = run_mix(&server, &["upload", "-l", "1s", "--rr-timeout", "50ms"]);
    assert_eq!(u(&doc["spec"]["rr_timeout_ns"]), 50_000_000);
    let parts = doc["summary"]["parts"].as_array().unwrap();
    assert_eq!(parts.len(), 3);
    assert_eq!(u(&parts[0]["flows"]), 4);
    assert_conserved(&doc);
}

#[test]
fn bad_specs_name_the_part() {
    assert_rejected(&[
        (
            &["run", "--mix", "tcp_stream*4,tcp_rrr"],
            &["--mix part 2 'tcp_rrr'", "unknown test"],
        ),
        (
            &["run", "--mix", "tcp_stream,tcp_rr@dscp=XX"],
            &["--mix part 2", "dscp=XX is not a DSCP"],
        ),
        (
            &["run", "--mix", "tcp_stream@rate=5"],
            &["--mix part 1 'tcp_stream'", "--rate"],
        ),
        (&["run", "--mix", "tcp_stream", "-F", "4"], &["TEST*N"]),
        (
            &["run", "tcp_rr", "--html", "r.html"],
            &["--html draws a mix", "single test"],
        ),
        (
            &["run", "tcp_rr", "--tos", "300"],
            &["--tos 300", "0..=255"],
        ),
    ]);
}

/// Jain's index, from the goodputs the result reports.
pub fn jain(x: &[f64]) -> f64 {
    let s: f64 = x.iter().sum();
    s * s / (x.len() as f64 * x.iter().map(|v| v * v).sum::<f64>())
}

/// The goodputs a direction's parts report, flow by flow.
pub fn flow_goodputs(doc: &Value, dir: &str) -> Vec<f64> {
    doc["summary"]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["direction"] == dir)
        .flat_map(|p| p["flow_throughput_bps"].as_array().unwrap().clone())
        .map(|v| v.as_f64().unwrap())
        .collect()
}

#[test]
fn a_preset_has_idle_loaded_and_recovery_phases() {
    let server = ServerProc::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("r.html");
    let doc = run_mix(
        &server,
        &[
            &["rrul_be", "--html", html.to_str().unwrap()][..],
            &SHORT_PHASES,
        ]
        .concat(),
    );
    assert_html_report(&doc, &std::fs::read_to_string(&html).unwrap());
    assert_eq!(u(&doc["spec"]["rr_timeout_ns"]), 2_000_000_000);
    let s = &doc["summary"];
    let ph = &s["phases"];
    // The bulk flows run only in the loaded phase.
    assert_eq!(ph["idle"]["throughput_up_bps"].as_f64(), Some(0.0));
    assert_eq!(ph["idle"]["throughput_down_bps"].as_f64(), Some(0.0));
    assert!(ph["loaded"]["throughput_up_bps"].as_f64().unwrap() > 0.0);
    assert!(ph["loaded"]["throughput_down_bps"].as_f64().unwrap() > 0.0);
    for name in ["idle", "loaded", "recovery"] {
        assert!(u(&ph[name]["probe_latency_ns"]["count"]) > 0, "{name}");
    }
    // The headline is loaded minus idle.
    let p50 = |k: &str| ph[k]["probe_latency_ns"]["p50"].as_i64().unwrap();
    assert_eq!(
        s["latency_under_load_ns"]["p50"].as_i64().unwrap(),
        p50("loaded") - p50("idle")
    );
    // Fairness is Jain's formula over the per-flow goodputs reported.
    for dir in ["up", "down"] {
        let x = flow_goodputs(&doc, dir);
        assert_eq!(x.len(), 4);
        let want = jain(&x);
        let got = s["fairness"][dir].as_f64().unwrap();
        assert!((got - want).abs() < 1e-9, "{dir}: {got} vs {want}");
    }
    assert_interval_fairness(&doc, 4);
    assert_interval_retransmits(&doc);
    assert_conserved(&doc);
}

/// A bulk part of a phased mix runs only in the loaded phase, so
/// its goodput is over that phase, not over idle, loaded and recovery (which
/// gave 14.4 Gbit/s for flows that moved 21.7 while they ran): the part's
/// `throughput_bps` is the sum of its flows' and the loaded phase's own.
#[test]
fn a_bulk_part_s_goodput_is_its_loaded_phase_s() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.json");
    Thrum::run("rrul_be")
        .len("4s")
        .args(["--idle", "1s", "--recovery", "1s", "--export-json"])
        .arg(&path)
        .default_warmup()
        .timeout(Duration::from_secs(90))
        .ok();
    let doc = read_json(&path);
    assert_schema(&doc);
    let s = &doc["summary"];
    let part = &s["parts"][0];
    assert_eq!(part["direction"], "up", "{}", part["name"]);
    let got = f(&part["throughput_bps"]);
    let flows: f64 = part["flow_throughput_bps"]
        .as_array()
        .unwrap()
        .iter()
        .map(f)
        .sum();
    let loaded = f(&s["phases"]["loaded"]["throughput_up_bps"]);
    for (what, want) in [("its flows' sum", flows), ("the loaded phase's", loaded)] {
        assert!(
            (got - want).abs() <= 0.05 * want,
            "part {} goodput {got} against {what} {want}",
            part["name"]
        );
    }
}

/// A latency difference as the human and HTML outputs print it: one sign
/// always, never "+-".
pub fn signed_ms(v: &Value) -> String {
    format!("{:+.2} ms", v.as_f64().unwrap() / 1e6)
}

/// `--html` of a mix: the grades, a row per part and per phase, the
/// chart inline, and a row per interval with its fairness, each figure as
/// the JSON of the same run has it.
pub fn assert_html_report(doc: &Value, html: &str) {
    let s = &doc["summary"];
    let ms = |v: &Value| format!("{:.2} ms", v.as_f64().unwrap() / 1e6);
    let j = |v: &Value| v.as_f64().map_or("-".to_string(), |x| format!("{x:.3}"));
    let l = &s["latency_under_load_ns"];
    assert!(
        html.contains(&format!(
            "<td>p50 {}</td><td>p99 {}</td>",
            signed_ms(&l["p50"]),
            signed_ms(&l["p99"])
        )),
        "latency under load"
    );
    assert!(html.contains(&format!(
        "<td>up {}</td><td>down {}</td>",
        j(&s["fairness"]["up"]),
        j(&s["fairness"]["down"])
    )));
    for p in s["parts"].as_array().unwrap() {
        let row = format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
            p["name"].as_str().unwrap(),
            p["test"].as_str().unwrap(),
            p["flows"],
            p["direction"].as_str().unwrap()
        );
        assert!(html.contains(&row), "part row {row}");
    }
    for ph in ["idle", "loaded", "recovery"] {
        let f = &s["phases"][ph];
        let row = format!(
            "<tr><td>{ph}</td><td>{:.2}</td><td>{:.2}</td><td>{}</td>",
            f["start_s"].as_f64().unwrap(),
            f["end_s"].as_f64().unwrap(),
            ms(&f["probe_latency_ns"]["p50"])
        );
        assert!(html.contains(&row), "phase row {row}");
    }
    assert!(
        html.contains("<svg") && !html.contains("<?xml"),
        "the chart inline"
    );
    for iv in doc["intervals"].as_array().unwrap() {
        let head = format!(
            "<tr><td>{}</td><td>{}</td>",
            iv["index"],
            iv["load_phase"].as_str().or(iv["phase"].as_str()).unwrap()
        );
        let row = html
            .lines()
            .find(|r| r.starts_with(&head))
            .unwrap_or_else(|| panic!("no row for interval {}", iv["index"]));
        let fair = format!(
            "<td>{}</td><td>{}</td>",
            j(&iv["fairness"]["up"]),
            j(&iv["fairness"]["down"])
        );
        assert!(
            row.contains(&fair),
            "interval {}: {row} lacks {fair}",
            iv["index"]
        );
    }
}

/// Every interval's fairness is Jain's formula over that interval's
/// per-flow bytes as the receivers counted them: the server for the first
/// `n_up` flows (sent up), the client for the next `n_up` (sent down).
/// An interval with no bulk bytes in a direction (idle, recovery) has null.
pub fn assert_interval_fairness(doc: &Value, n_up: usize) {
    let mut loaded = 0;
    for iv in doc["intervals"].as_array().unwrap() {
        let f = &iv["fairness"];
        assert!(f.is_object(), "interval {} has no fairness", iv["index"]);
        if iv["remote"].as_array().unwrap().is_empty() {
            continue;
        }
        let bytes = |side: &str, flows: std::ops::Range<usize>| -> Vec<f64> {
            flows
                .map(|i| u(&iv[side][i]["bytes_received"]) as f64)
                .collect()
        };
        for (dir, x) in [
            ("up", bytes("remote", 0..n_up)),
            ("down", bytes("local", n_up..2 * n_up)),
        ] {
            if x.iter().all(|&b| b == 0.0) {
                assert!(f[dir].is_null(), "interval {}: {dir} {f}", iv["index"]);
                continue;
            }
            loaded += 1;
            let (want, got) = (jain(&x), f[dir].as_f64().unwrap());
            assert!(
                (got - want).abs() < 1e-9,
                "interval {} {dir}: {got} vs {want} over {x:?}",
                iv["index"]
            );
        }
    }
    assert!(loaded > 0, "no interval carried bulk bytes");
}

/// The TCP parts' intervals carry retransmissions (the UDP probe's do
/// not), and over the intervals they add up to no more than the part's
/// total after the drain.
pub fn assert_interval_retransmits(doc: &Value) {
    for p in doc["summary"]["parts"].as_array().unwrap() {
        let ivs = p["intervals"].as_array().unwrap();
        if p["test"] == "udp_rr" {
            assert!(ivs.iter().all(|iv| iv["tcp_retransmits"].is_null()));
            continue;
        }
        let sum: u64 = ivs.iter().map(|iv| u(&iv["tcp_retransmits"])).sum();
        assert!(
            sum <= u(&p["tcp_retransmits"]),
            "{}: {sum} per interval > {} in all",
            p["name"],
            p["tcp_retransmits"]
        );
    }
}

/// `--json-stream` and `--samples` of a mix name the parts: each streamed
/// interval has `parts` whose figures add up, interval by interval, to
/// each part's own intervals in the final result (and the probe's latency
/// when its workers had handed it in), and every samples row's `part`
/// column names the part its flow belongs to.
#[test]
fn stream_and_samples_name_each_part() {
    let server = ServerProc::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("s.csv");
    let lines = Thrum::run_without_test()
        .host(&server.addr)
        .args(["--mix", "tcp_stream*2,tcp_maerts,tcp_rr@rate=50@name=probe"])
        .interval("500ms")
        .arg("--samples")
        .arg(&csv)
        .args(SHORT_PHASES)
        .timeout(Duration::from_secs(60))
        .json_lines();
    let (last, records) = lines.split_last().unwrap();
    let doc = &last["result"];
    assert_schema(doc);
    let parts = doc["summary"]["parts"].as_array().unwrap();
    let names: Vec<&str> = parts.iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["tcp_stream", "tcp_maerts", "probe"]);
    // The stream's records are the result's intervals, plus each part's figures.
    let kept = doc["intervals"].as_array().unwrap();
    assert_eq!(records.len(), kept.len());
    let mut probe_latency = 0;
    for (rec, iv) in records.iter().zip(kept) {
        let mut streamed = rec["interval"].clone();
        let sp = streamed.as_object_mut().unwrap().remove("parts").unwrap();
        assert_eq!(
            &streamed, iv,
            "the stream and the result hold the same intervals"
        );
        let sp = sp.as_array().unwrap();
        assert_eq!(sp.len(), parts.len());
        for (p, part) in sp.iter().zip(parts) {
            assert_eq!(p["name"], part["name"]);
            let own = part["intervals"]
                .as_array()
                .unwrap()
                .iter()
                .find(|x| x["index"] == iv["index"])
                .expect("the part has the interval");
            for side in ["local", "remote"] {
                for k in ["bytes_sent", "bytes_received", "transactions"] {
                    assert_eq!(
                        p["sum"][side][k], own["sum"][side][k],
                        "{} interval {} {side} {k}",
                        part["name"], iv["index"]
                    );
                }
            }
            assert_eq!(p["tcp_retransmits"], own["tcp_retransmits"]);
            if let Some(n) = p["latency_ns"]["count"].as_u64() {
                assert!(n <= u(&own["latency_ns"]["count"]), "{}", part["name"]);
                probe_latency += 1;
            }
        }
    }
    assert!(
        probe_latency > 0,
        "no streamed interval had the probe's latency"
    );
    // The samples: one row per flow per interval, the part column by flow.
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut rows = text.lines();
    let header: Vec<&str> = rows.next().unwrap().split(',').collect();
    assert_eq!(header.last(), Some(&"part"));
    let flow_col = header.iter().position(|h| *h == "flow").unwrap();
    let owner: Vec<&str> = parts
        .iter()
        .flat_map(|p| std::iter::repeat_n(p["name"].as_str().unwrap(), u(&p["flows"]) as usize))
        .collect();
    let mut n = 0;
    for row in rows {
        let cols: Vec<&str> = row.split(',').collect();
        assert_eq!(cols.len(), header.len(), "{row}");
        let flow: usize = cols[flow_col].parse().unwrap();
        assert_eq!(*cols.last().unwrap(), owner[flow], "{row}");
        n += 1;
    }
    assert_eq!(n, kept.len() * owner.len());
}

/// `bench/rrul.sh --quick` on loopback: a row with thrum's CPU per Gbit of
/// bulk (a positive number), goodput both ways and the probe latency under
/// load, and a line on flent either way.
#[test]
fn bench_rrul_quick_prints_a_loopback_row() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/bench/rrul.sh");
    let bin = crate::common::bin();
    let text = crate::common::run_cmd(
        std::process::Command::new(script).args(["--quick", "--no-netns", "--thrum", bin]),
        Duration::from_secs(120),
    )
    .ok()
    .stdout();
    let row = text
        .lines()
        .find(|l| l.starts_with("| loopback |"))
        .unwrap_or_else(|| panic!("no loopback row in\n{text}"));
    let cols: Vec<&str> = row.split('|').map(str::trim).collect();
    let cpu: f64 = cols[2].parse().unwrap_or_else(|_| panic!("{row}"));
    assert!(cpu > 0.0, "{row}");
    let (up, down) = cols[3].split_once(" / ").unwrap();
    assert!(
        up.parse::<f64>().unwrap() > 0.0 && down.parse::<f64>().unwrap() > 0.0,
        "{row}"
    );
    // Latency under load, p50 and p99: signed differences in ms, one sign
    // each (negative when the loaded probes were the faster).
    for col in &cols[5..7] {
        assert!(col.starts_with(['+', '-']), "{row}");
        assert!(!col[1..].starts_with(['+', '-']), "{row}");
        col.parse::<f64>().unwrap_or_else(|_| panic!("{row}"));
    }
    let flent = text
        .lines()
        .find(|l| l.starts_with("| loopback: flent rrul |"))
        .unwrap_or_else(|| panic!("no flent row in\n{text}"));
    if flent.contains("not run") {
        // The note names what is missing, each with where it comes from.
        let has = |p: &str| {
            std::process::Command::new("sh")
                .args(["-c", &format!("command -v {p}")])
                .output()
                .is_ok_and(|o| o.status.success())
        };
        assert_eq!(
            flent.contains("flent is not on PATH (pip install flent"),
            !has("flent"),
            "{flent}"
        );
        assert_eq!(
            flent.contains("netperf/netserver are not on PATH (not on PyPI"),
            !(has("netperf") && has("netserver")),
            "{flent}"
        );
    }
}

/// A mix's human summary fits one screen and leads with the grades as the
/// JSON has them; its `--chart` is flent's "all scaled" picture: download,
/// upload and the probes' latency in panels on one time axis, and the
/// idle and recovery phases shaded, in proportion to their lengths.
#[test]
fn the_summary_fits_a_screen_and_the_chart_shades_the_phases() {
    let server = ServerProc::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let (chart, saved) = (dir.path().join("c.svg"), dir.path().join("r.json"));
    let page = dir.path().join("r.html");
    let charts = Thrum::run_without_test()
        .arg("--chart")
        .arg(&chart)
        .arg("--html")
        .arg(&page);
    let (text, doc) = rrul_be_saved(&server, charts, &saved);
    let s = &doc["summary"];

    // The summary: from its rule to the end, within a 24-line terminal, no
    // line wider than 100 columns (the widest, a probe's part line, is
    // about 95), the grades as the JSON has them.
    let summary: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("-- summary"))
        .collect();
    assert!(
        (10..=24).contains(&summary.len()),
        "{} lines:\n{text}",
        summary.len()
    );
    for l in &summary {
        assert!(l.chars().count() <= 100, "too wide: {l}");
    }
    let l = &s["latency_under_load_ns"];
    let headline = format!(
        "  latency under load     p50 {}  p99 {}",
        signed_ms(&l["p50"]),
        signed_ms(&l["p99"])
    );
    assert!(summary.contains(&headline.as_str()), "{headline}\n{text}");
    let j = |v: &Value| format!("{:.3}", v.as_f64().unwrap());
    let fairness = format!(
        "  fairness (Jain)        up {}  down {}",
        j(&s["fairness"]["up"]),
        j(&s["fairness"]["down"])
    );
    assert!(summary.contains(&fairness.as_str()), "{fairness}\n{text}");
    for ph in ["idle", "loaded", "recovery"] {
        let p50 = s["phases"][ph]["probe_latency_ns"]["p50"].as_f64().unwrap();
        let row = summary
            .iter()
            .find(|l| l.trim_start().starts_with(ph))
            .unwrap_or_else(|| panic!("no {ph} row:\n{text}"));
        let want = format!("{:.2}", p50 / 1e6);
        assert_eq!(
            row.split_whitespace().nth(1),
            Some(want.as_str()),
            "{ph}: {row}"
        );
    }

    // The chart: every panel's axis described, and every series in the
    // legend once: the shading, the sums, each part, each probe (its p50
    // and p99 told apart by line style); the title names the preset.
    let words = svg_text(&chart);
    for want in ["time (s)", "download (", "upload (", "probe latency ("] {
        assert!(
            words.iter().any(|w| w.starts_with(want)),
            "no '{want}' in {words:?}"
        );
    }
    // One <text> element per legend entry: a direction with one part is
    // that part's line, with several a sum and each part under it.
    let svg = std::fs::read_to_string(&chart).unwrap();
    let xml = roxmltree::Document::parse(&svg).unwrap();
    let texts: Vec<String> = xml
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| n.text().unwrap_or_default().trim().to_string())
        .collect();
    let parts = s["parts"].as_array().unwrap();
    let mut want = vec!["idle, recovery (shaded)".to_string()];
    for dir in ["up", "down"] {
        let ps: Vec<&str> = parts
            .iter()
            .filter(|p| p["direction"] == dir)
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        match ps[..] {
            [] => {}
            [one] => want.push(format!("{one} ({dir})")),
            _ => {
                want.push(format!("{dir} (sum)"));
                want.extend(ps.iter().map(|p| p.to_string()));
            }
        }
    }
    for p in parts.iter().filter(|p| p["direction"] == "rr") {
        let name = p["name"].as_str().unwrap();
        want.push(name.to_string());
    }
    assert!(want.len() >= 5, "{want:?}");
    for w in &want {
        let n = texts.iter().filter(|x| *x == w).count();
        assert_eq!(n, 1, "'{w}' is {n} legend entries, not one: {texts:?}");
    }
    assert!(
        words
            .iter()
            .any(|w| w.starts_with("rrul_be (") && w.contains(" to ")),
        "{words:?}"
    );
    // The CDF on the page: idle and loaded from the phases' histograms,
    // each a line of many points, not six percentiles joined.
    let html = std::fs::read_to_string(&page).unwrap();
    let cdf_at = html.find("Probe latency, idle and loaded").expect("a CDF");
    let cdf = &html[cdf_at..];
    let cdf = &cdf[cdf.find("<svg").unwrap()..cdf.find("</svg>").unwrap() + 6];
    let xml = roxmltree::Document::parse(cdf).unwrap();
    // The longest line of each phase's colour (the legend's mark is
    // another, of two points): idle blue, loaded red.
    let lines: Vec<usize> = ["#1F77B4", "#D62728"]
        .iter()
        .map(|c| {
            xml.descendants()
                .filter(|n| n.has_tag_name("polyline") && n.attribute("stroke") == Some(c))
                .map(|n| {
                    n.attribute("points")
                        .unwrap_or_default()
                        .split_whitespace()
                        .count()
                })
                .max()
                .unwrap_or(0)
        })
        .collect();
    assert!(
        lines.iter().all(|&n| n >= 50),
        "CDF points per line: {lines:?}"
    );
    for ph in ["idle", "loaded"] {
        assert!(cdf.contains(&format!("{ph} (all probes)")), "{cdf}");
        assert!(s["phases"][ph]["probe_latency_histogram"].is_string());
    }
    assert!(words.iter().any(|w| w.contains("bit/s")), "{words:?}");
    // The phases: two grey rectangles a panel (the loaded phase is left
    // white), idle left of recovery, each as wide as its phase on one time scale
    // (plotters rounds each edge to a pixel).
    let svg = std::fs::read_to_string(&chart).unwrap();
    let xml = roxmltree::Document::parse(&svg).unwrap();
    let px = |n: roxmltree::Node, a: &str| -> f64 { n.attribute(a).unwrap().parse().unwrap() };
    let shaded: Vec<(f64, f64)> = xml
        .descendants()
        .filter(|n| n.has_tag_name("rect") && n.attribute("fill") == Some("#EBEBEB"))
        .map(|n| (px(n, "x"), px(n, "width")))
        .collect();
    assert_eq!(shaded.len(), 6, "two in each of three panels: {shaded:?}");
    let len = |ph: &str| {
        let f = &s["phases"][ph];
        f["end_s"].as_f64().unwrap() - f["start_s"].as_f64().unwrap()
    };
    let ((x_idle, w_idle), (x_rec, w_rec)) = (shaded[0], shaded[1]);
    assert!(x_idle + w_idle <= x_rec, "{shaded:?}");
    let scale = |w: f64, ph: &str| w / len(ph);
    let (a, b) = (scale(w_idle, "idle"), scale(w_rec, "recovery"));
    assert!(
        (a - b).abs() <= 2.0 / len("idle").min(len("recovery")),
        "px per s: idle {a}, recovery {b}"
    );
    for colour in ["#1F77B4", "#2CA02C", "#D62728"] {
        assert!(
            xml.descendants()
                .any(|n| n.has_tag_name("polyline") && n.attribute("stroke") == Some(colour)),
            "no {colour} line"
        );
    }
}

/// A mix's interval rows show its bulk flows' goodput up and
/// down, each row under the segment of the window it lies in (warm-up,
/// idle, loaded, drain, recovery), as the JSON's `load_phase` has it; no
/// row reads `measure`.
#[test]
fn mix_rows_show_both_directions_and_their_phase() {
    let server = ServerProc::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("r.json");
    let (text, doc) = rrul_be_saved(&server, Thrum::run_without_test().interval("1s"), &saved);
    let mut lines = text.lines();
    assert!(
        lines
            .next()
            .unwrap()
            .ends_with("rows are the bulk flows' goodput each way"),
        "{text}"
    );
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["start_s", "end_s", "phase", "up", "down"],
        "{text}"
    );
    let rows: Vec<&str> = lines.take_while(|l| !l.starts_with("-- summary")).collect();
    let ivs = doc["intervals"].as_array().unwrap();
    assert_eq!(rows.len(), ivs.len(), "{text}");
    let mut seen = Vec::new();
    for (row, iv) in rows.iter().zip(ivs) {
        let words: Vec<&str> = row.split_whitespace().collect();
        let phase = iv["load_phase"].as_str().or(iv["phase"].as_str()).unwrap();
        assert_eq!(words[2], phase, "{row}\n{iv}");
        assert_ne!(phase, "measure", "{text}");
        // Up and down, each a figure with its unit.
        assert_eq!(words.len(), 7, "{row}");
        assert!(
            words[4].ends_with("bit/s") && words[6].ends_with("bit/s"),
            "{row}"
        );
        seen.push(phase);
    }
    for want in ["idle", "loaded", "recovery"] {
        assert!(seen.contains(&want), "no {want} row:\n{text}");
    }
    // While loaded, both directions move, and the sum is both.
    let loaded: Vec<&Value> = ivs
        .iter()
        .filter(|iv| iv["load_phase"] == "loaded")
        .collect();
    assert!(
        loaded
            .iter()
            .any(|iv| f(&iv["sum"]["throughput_bps_c2s"]) > 0.0),
        "{doc}"
    );
    assert!(
        loaded
            .iter()
            .any(|iv| f(&iv["sum"]["throughput_bps_s2c"]) > 0.0),
        "{doc}"
    );
    for iv in &loaded {
        let s = &iv["sum"];
        let both = f(&s["throughput_bps_c2s"]) + f(&s["throughput_bps_s2c"]);
        assert!(
            (f(&s["throughput_bps"]) - both).abs() <= 1e-6 * both.max(1.0),
            "{s}"
        );
    }
}
