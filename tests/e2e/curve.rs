//! `thrum curve` end to end: a short curve on loopback writes every output
//! (results.json valid against schema/thrum.curve.v1.json, curve.csv,
//! curve.svg as XML, report.html) and `thrum report` re-renders it to the
//! same record; bad flags are refused before anything runs; and on a veth
//! shaped by tbf the curve finds saturation where the shaped rate says it
//! must be, from the frame sizes on the wire.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::common::{Thrum, assert_rejected, assert_schema_named, f, read_json, u};
use crate::netns::Link;

/// What every curve must satisfy, whatever the machine: the schema, the
/// steps in order of offered rate, and the two points where the rules put
/// them.
fn check_curve(doc: &Value, slo_ns: Option<u64>) {
    assert_schema_named(doc, "thrum.curve.v1.json");
    assert_eq!(doc["schema"], "thrum.curve.v1");
    let steps = doc["steps"].as_array().expect("steps");
    for (i, s) in steps.iter().enumerate() {
        assert_eq!(u(&s["index"]), i as u64);
        if i > 0 {
            assert!(f(&s["offered_per_s"]) > f(&steps[i - 1]["offered_per_s"]));
        }
    }
    let kept_up = |s: &Value| f(&s["achieved_per_s"]) >= 0.98 * f(&s["offered_per_s"]);
    // The saturation point follows the last step that kept up.
    match doc["saturation"].as_object() {
        Some(p) => {
            let k = u(&p["step"]) as usize;
            assert!(k == 0 || kept_up(&steps[k - 1]), "{doc}");
            assert_eq!(f(&p["achieved_per_s"]), f(&steps[k]["achieved_per_s"]));
            assert!(!p["reason"].as_str().unwrap().is_empty());
        }
        None => assert!(steps.last().is_none_or(kept_up), "{doc}"),
    }
    if let Some(k) = doc["knee"].as_object() {
        let s = &steps[u(&k["step"]) as usize];
        assert!(kept_up(s));
        if let Some(b) = slo_ns {
            assert!(u(&s["latency_ns"]["p99"]) <= b, "{doc}");
        }
        if let Some(p) = doc["saturation"].as_object() {
            assert!(u(&k["step"]) < u(&p["step"]));
        }
    }
}

/// Three 1 s steps of tcp_rr on loopback with every output, and the
/// report re-rendered from the saved directory.
#[test]
fn curve_loopback_writes_every_output_and_report_rerenders() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("curve");
    let out = Thrum::curve("tcp_rr")
        .args(["--rates", "200,500,1k"])
        .len("1s")
        .warmup("200ms")
        .args(["--slo", "p99=100ms", "--out"])
        .arg(&out_dir)
        .timeout(Duration::from_secs(60))
        .ok();
    let stdout = out.stdout();
    assert!(
        stdout.contains("knee:") && stdout.contains("saturation:"),
        "{stdout}"
    );
    // No progress line where stderr is not a terminal.
    assert!(!out.stderr().contains('\r'));

    let doc = read_json(&out_dir.join("results.json"));
    check_curve(&doc, Some(100_000_000));
    let steps = doc["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 3);
    for (s, r) in steps.iter().zip([200.0, 500.0, 1000.0]) {
        assert_eq!(f(&s["offered_per_s"]), r);
        // No transaction completes before its time on the schedule, which
        // began with the 200 ms warm-up: a backlog from the warm-up may
        // complete in the 1 s window, nothing more.
        assert!(f(&s["achieved_per_s"]) <= 1.2 * r, "{s}");
        for k in ["p50", "p90", "p99", "p99_9", "max"] {
            assert!(u(&s["latency_ns"][k]) > 0, "{s}");
        }
        assert!(u(&s["latency_ns"]["p50"]) <= u(&s["latency_ns"]["p99"]));
        assert!(!s["local"]["cpu_util_percent"].is_null(), "{s}");
        assert!(!s["remote"]["service_demand_us_per_tran"].is_null(), "{s}");
        assert_eq!(u(&s["lost"]), 0);
    }
    assert_eq!(doc["spec"]["slo"]["percentile"], "p99");

    let csv = std::fs::read_to_string(out_dir.join("curve.csv")).unwrap();
    assert_eq!(csv.lines().count(), 4, "{csv}");
    assert!(csv.starts_with("step,offered_per_s,achieved_per_s,p50_ns"));

    let svg = std::fs::read_to_string(out_dir.join("curve.svg")).unwrap();
    let xml = roxmltree::Document::parse(&svg).expect("curve.svg is XML");
    let labels: Vec<&str> = xml
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text())
        .map(str::trim)
        .collect();
    for want in [
        "p50",
        "p99",
        "p99.9",
        "max",
        "offered rate (transactions/s)",
    ] {
        assert!(labels.contains(&want), "{want} not in {labels:?}");
    }
    // The SLO line is in the legend; the latency axis is in SI time units.
    assert!(
        labels.iter().any(|l| l.starts_with("SLO p99")),
        "{labels:?}"
    );
    assert!(labels.iter().any(|l| l.ends_with(" ms")), "{labels:?}");

    let html = std::fs::read_to_string(out_dir.join("report.html")).unwrap();
    assert!(html.contains("thrum curve report") && html.contains("<svg"));

    // The report re-renders the same record, and the same table.
    let re_dir = dir.path().join("again");
    let re = Thrum::cmd(&["report"])
        .arg(&out_dir)
        .arg("--out")
        .arg(&re_dir)
        .ok();
    assert_eq!(read_json(&re_dir.join("results.json")), doc);
    for name in ["curve.csv", "curve.svg", "report.html"] {
        assert_eq!(
            std::fs::read(re_dir.join(name)).unwrap(),
            std::fs::read(out_dir.join(name)).unwrap(),
            "{name}"
        );
    }
    let table = |s: &str| {
        s.lines()
            .filter(|l| !l.starts_with("results in"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(table(&re.stdout()), table(&stdout));
}

/// `--rates auto`: a closed-loop probe, then steps from 5 % of its rate
/// upward, every one recorded and the record valid.
#[test]
fn curve_auto_steps_up_from_the_closed_loop_probe() {
    let doc = Thrum::curve("tcp_rr")
        .len("300ms")
        .args(["--probe", "300ms"])
        .timeout(Duration::from_secs(120))
        .json();
    check_curve(&doc, None);
    let probe = f(&doc["spec"]["closed_loop_per_s"]);
    let steps = doc["steps"].as_array().unwrap();
    assert!(steps.len() >= 2, "{doc}");
    let first = f(&steps[0]["offered_per_s"]);
    assert!(
        (first - 0.05 * probe).abs() <= 1.0,
        "{first} vs probe {probe}"
    );
    // Without a turn the steps go past the probe (to 120 % and beyond).
    if doc["saturation"].is_null() {
        assert!(f(&steps[steps.len() - 1]["offered_per_s"]) > probe, "{doc}");
    }
}

/// Each bad command line is refused naming the flag, before any step runs
/// and before the output directory exists.
#[test]
fn curve_refuses_bad_flags() {
    let dir = tempfile::tempdir().unwrap();
    let never = dir.path().join("never");
    let never = never.to_str().unwrap();
    let a = |extra: &'static [&'static str]| -> Vec<&str> {
        [&["curve", "tcp_rr", "--out", never][..], extra].concat()
    };
    let cases: Vec<(Vec<&str>, &[&str])> = vec![
        (a(&["--rates", ""]), &["--rates", "accepted"]),
        (a(&["--rates", "0"]), &["--rates", "accepted"]),
        (
            a(&["--rates", "1000,500"]),
            &["--rates", "strictly increasing"],
        ),
        (a(&["--rates", "1k,x"]), &["--rates", "accepted"]),
        (a(&["--slo", "p99"]), &["--slo", "p99=500us"]),
        (a(&["--slo", "p98=1ms"]), &["--slo", "p50, p90, p99"]),
        (a(&["--slo", "p99=soon"]), &["--slo", "accepted"]),
        (
            vec!["curve", "tcp_stream", "--out", never],
            &["tcp_stream has no open loop", "tcp_rr"],
        ),
        (
            vec!["curve", "udp_stream", "--rates", "100", "--out", never],
            &["no open loop"],
        ),
    ];
    let cases: Vec<(&[&str], &[&str])> = cases.iter().map(|(a, n)| (&a[..], *n)).collect();
    assert_rejected(&cases);
    assert!(!Path::new(never).exists(), "nothing half-written");
}

/// Bytes tbf counts per request of `test` with 1400-byte requests: the
/// payload and its transport header, IPv4's 20 and Ethernet's 14 (tbf sees
/// the frame without preamble or FCS). TCP's header carries timestamps (32
/// bytes); its requests, queued behind the shaper, are cut into full
/// segments instead, which costs the same within 0.2 %. The responses come
/// back through the server's unshaped egress.
fn request_wire_bytes(test: &str) -> f64 {
    let transport = match test {
        "udp_rr" => 8.0,
        "tcp_rr" => 32.0,
        _ => unreachable!("{test}"),
    };
    1400.0 + transport + 20.0 + 14.0
}

const SHAPED_BPS: f64 = 50e6;
/// tbf's queue: at most `latency` of backlog, below udp_rr's 50 ms timeout
/// so that the queued transactions complete and show the queueing delay.
const TBF_LATENCY_NS: u64 = 20_000_000;
const TBF: [&str; 8] = [
    "root", "tbf", "rate", "50mbit", "burst", "16kb", "latency", "20ms",
];

/// `thrum curve TEST -r 1400,64` from A over the client-shaped veth: the
/// saturation point lies within 10 % of the transactions/s the shaped rate
/// allows for the request's frame; below 80 % of it p50 stays within 2× the
/// unloaded p50 (an open-loop run at 100/s, 2 % of the capacity, before the
/// curve); above it p99 reaches at least the shaper's full queue.
///
/// Why no queue below 80 %: fixed arrivals under the shaped rate leave tbf
/// more tokens between two requests than one request spends, so its bucket
/// stays full and every request passes at once, as at 100/s. Why the full
/// queue above it: from 1.1× on the schedule offers 10 % more than the
/// shaper passes, so the backlog (in tbf's queue, then, the queue full, held
/// back in the client's socket) grows by 10 % of the elapsed time: 50 ms by
/// the end of the 500 ms warm-up, more after, past the 20 ms tbf's queue
/// holds. At 1.0× the mean backlog does not grow (critical load: only the
/// random walk of the generator's jitter), so that step is not asserted.
fn knee_at_shaped_capacity(test: &str, subnet: u8) {
    let Some(link) = Link::client_shaped(subnet, &TBF) else {
        return;
    };
    // Niced, client and server: on a busy host their own wake-ups read as
    // queueing (a load of 8 put the knee at 0.8 of the shaped rate).
    let server = link.niced_server();
    let capacity = SHAPED_BPS / 8.0 / request_wire_bytes(test);
    // The unloaded p50: the same requests and path at 100/s.
    let probe = link
        .client(&server, test)
        .niced()
        .args(["-r", "1400,64", "--rate", "100"])
        .len("2s")
        .warmup("200ms")
        .json();
    let unloaded = u(&probe["summary"]["latency_ns"]["p50"]) as f64;
    let shares = [0.25, 0.5, 0.7, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5];
    let rates: Vec<String> = shares
        .iter()
        .map(|s| format!("{:.0}", s * capacity))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("curve");
    let table = Thrum::curve(test)
        .netns(&link.a)
        .niced()
        .host(&server.addr)
        .args(["-r", "1400,64", "--rates", &rates.join(",")])
        .len("2s")
        .warmup("500ms")
        .arg("--out")
        .arg(&out_dir)
        .timeout(Duration::from_secs(120))
        .stdout();
    eprintln!("{test}: capacity {capacity:.0}/s\n{table}");
    let doc = read_json(&out_dir.join("results.json"));
    check_curve(&doc, None);
    let steps = doc["steps"].as_array().unwrap();
    // The steps ran open-loop: the generator's lateness is measured.
    assert!(
        steps.iter().all(|s| !s["generator_lag_p99_ns"].is_null()),
        "{test}: a step ran closed-loop: {doc}"
    );
    let sat = doc["saturation"]
        .as_object()
        .unwrap_or_else(|| panic!("{test}: no saturation up to 1.5x capacity: {doc}"));
    let found = f(&sat["achieved_per_s"]);
    assert!(
        (found / capacity - 1.0).abs() <= 0.10,
        "{test}: saturation at {found:.0}/s, the shaped rate allows {capacity:.0}/s"
    );
    let p50 = |s: &Value| u(&s["latency_ns"]["p50"]) as f64;
    for (s, share) in steps.iter().zip(shares) {
        if share <= 0.8 {
            assert!(
                p50(s) <= 2.0 * unloaded,
                "{test}: p50 {} at {share} of capacity, unloaded {unloaded}",
                p50(s)
            );
        }
        if share >= 1.1 {
            assert!(
                u(&s["latency_ns"]["p99"]) >= TBF_LATENCY_NS,
                "{test}: p99 {} at {share} of capacity, below the shaper's queue",
                s["latency_ns"]["p99"]
            );
        }
    }
}

#[test]
fn curve_udp_rr_saturates_at_the_shaped_rate() {
    knee_at_shaped_capacity("udp_rr", 70);
}

#[test]
fn curve_tcp_rr_saturates_at_the_shaped_rate() {
    knee_at_shaped_capacity("tcp_rr", 71);
}
