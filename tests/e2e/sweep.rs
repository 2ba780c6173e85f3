//! `thrum sweep` over any dimension: the grid is the product of
//! the `--vary` dimensions, every cell names its value of each, carries
//! latency, both ends' CPU and, with `--iterations`, its confidence; the
//! CSV is long, one column per dimension. Loopback, short windows.

use std::time::Duration;

use serde_json::Value;

use crate::common::{Netns, ServerProc, Thrum, assert_rejected, assert_schema_named, f, ip};

/// `sweep`'s JSON record, which must be valid.
fn sweep_json(sweep: Thrum) -> Value {
    let doc = sweep.timeout(Duration::from_secs(120)).json();
    assert_schema_named(&doc, "thrum.sweep.v1.json");
    doc
}

/// Burst × flows with --nodelay, each cell run to a
/// confidence interval: 4 cells, each naming burst and flows, with p50 and
/// p99, both ends' CPU and a confidence object; cpu-pin pairs are a
/// dimension of their own.
#[test]
fn burst_by_flows_with_confidence_per_cell() {
    let s = ServerProc::start(&[]);
    let doc = sweep_json(
        Thrum::sweep("tcp_rr")
            .host(&s.addr)
            .args(["--vary", "burst=0,4", "--vary", "flows=1,2", "--nodelay"])
            .len("300ms")
            .warmup("100ms")
            .args(["--iterations", "2,3", "--confidence", "99,5"]),
    );
    let cells = doc["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4, "{doc}");
    let mut seen = Vec::new();
    for c in cells {
        let p = &c["params"];
        seen.push((p["burst"].as_u64().unwrap(), p["flows"].as_u64().unwrap()));
        // The params are the cell's own plan.
        assert_eq!(p["burst"], c["burst"], "{c}");
        assert_eq!(p["flows"], c["flows"], "{c}");
        let (p50, p99) = (f(&c["latency_ns"]["p50"]), f(&c["latency_ns"]["p99"]));
        assert!(p50 > 0.0 && p99 >= p50, "{c}");
        assert!(f(&c["latency_ns"]["mean"]) > 0.0, "{c}");
        for k in ["local_cpu_util_percent", "remote_cpu_util_percent"] {
            let v = f(&c[k]);
            assert!(v > 0.0 && v <= 100.0 + 1e-9, "{k}: {c}");
        }
        let k = &c["confidence"];
        let n = k["iterations"].as_u64().unwrap();
        assert!((2..=3).contains(&n), "{c}");
        assert!(k["achieved"].is_boolean(), "{c}");
        // A cell stops before its third run only once the interval is met.
        if n == 2 {
            assert_eq!(k["achieved"], true, "{c}");
        }
        assert!(f(&c["transactions_per_s"]) > 0.0, "{c}");
    }
    seen.sort_unstable();
    assert_eq!(seen, [(0, 1), (0, 2), (4, 1), (4, 2)]);
    let pin = sweep_json(
        Thrum::sweep("tcp_rr")
            .host(&s.addr)
            .args(["--vary", "cpu-pin=0:0,0:1"])
            .len("200ms"),
    );
    let cells = pin["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2, "{pin}");
    assert_eq!(cells[0]["params"]["cpu-pin"], "0:0");
    assert_eq!(cells[1]["params"]["cpu-pin"], "0:1");
}

/// A 3-D grid (burst × nodelay × cpu-pin): the long CSV has a column per
/// dimension and a row per cell, and the table is burst by the columns
/// asked for, one per value of the third dimension.
#[test]
fn a_three_dimensional_grid_in_long_csv() {
    let s = ServerProc::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("grid.csv");
    let text = Thrum::sweep("tcp_rr")
        .host(&s.addr)
        .args(["--burst", "0,1", "--vary", "nodelay=off,on"])
        .args(["--vary", "cpu-pin=0:0,0:1"])
        .args([
            "--rows",
            "burst",
            "--cols",
            "nodelay",
            "--cell",
            "tps,p50,cpu",
        ])
        .len("200ms")
        .arg("--export-csv")
        .arg(&csv)
        .timeout(Duration::from_secs(120))
        .stdout();
    assert!(
        text.contains("cpu-pin 0:0: rows burst, columns nodelay"),
        "{text}"
    );
    assert!(
        text.contains("cpu-pin 0:1: rows burst, columns nodelay"),
        "{text}"
    );
    assert!(text.contains("p50 us"), "{text}");
    let csv = std::fs::read_to_string(csv).unwrap();
    let rows: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).collect();
    assert_eq!(
        rows[0][..4],
        ["burst", "flows", "nodelay", "cpu-pin"],
        "{csv}"
    );
    assert_eq!(rows.len(), 1 + 8, "{csv}");
    let col = |name: &str| rows[0].iter().position(|h| *h == name).unwrap();
    let (tps, p50) = (col("transactions_per_s"), col("latency_p50_ns"));
    let mut combos: Vec<String> = rows[1..]
        .iter()
        .map(|r| {
            assert!(r[tps].parse::<f64>().unwrap() > 0.0, "{csv}");
            assert!(r[p50].parse::<u64>().unwrap() > 0, "{csv}");
            format!("{} {} {}", r[0], r[2], r[3])
        })
        .collect();
    combos.sort();
    combos.dedup();
    assert_eq!(combos.len(), 8, "every combination once: {csv}");
}

/// A dimension or value sweep does not know is refused before anything
/// runs, naming what it accepts.
#[test]
fn bad_dimensions_are_refused() {
    assert_rejected(&[
        (
            &["sweep", "tcp_rr", "--vary", "bursts=1,2"],
            &[
                "'bursts' is not a dimension",
                "burst, flows, threads",
                "cpu-pin",
            ],
        ),
        (
            &["sweep", "tcp_rr", "--vary", "burst=0,x"],
            &["--vary", "burst: 'x'", "0..=4096"],
        ),
        (
            &["sweep", "tcp_rr", "--vary", "nodelay=maybe"],
            &["nodelay: 'maybe'", "on or off"],
        ),
        (
            &["sweep", "tcp_rr", "--burst", "0,1", "--vary", "burst=2"],
            &["--burst and --vary burst"],
        ),
        (
            &["sweep", "tcp_rr", "--rows", "driver"],
            &["--rows driver", "burst, flows"],
        ),
        (
            &["sweep", "tcp_rr", "--cell", "p42"],
            &["--cell", "'p42' is not a figure", "p50, p99"],
        ),
    ]);
}

/// `--hosts-file` in netperf's remote_hosts form: each cell's flows spread
/// round-robin over both servers, the cell's rate theirs together.
#[test]
fn flows_spread_over_several_servers() {
    let (a, b) = (ServerProc::start(&[]), ServerProc::start(&[]));
    let dir = tempfile::tempdir().unwrap();
    let hosts = dir.path().join("remote_hosts");
    std::fs::write(
        &hosts,
        format!(
            "REMOTE_HOSTS[0]={}\nREMOTE_HOSTS[1]={}\nNUM_REMOTE_HOSTS=2\n",
            a.addr, b.addr
        ),
    )
    .unwrap();
    let doc = sweep_json(
        Thrum::sweep("tcp_rr")
            .arg("--hosts-file")
            .arg(&hosts)
            .args(["--flows", "2"])
            .len("300ms"),
    );
    assert_eq!(doc["hosts"].as_array().unwrap().len(), 2, "{doc}");
    let c = &doc["cells"][0];
    assert!(c["error"].is_null(), "{c}");
    assert!(f(&c["transactions_per_s"]) > 0.0, "{c}");
    assert!(f(&c["latency_ns"]["p50"]) > 0.0, "{c}");
    assert!(f(&c["remote_service_demand"]) > 0.0, "{c}");
}

/// A coalescing dimension on a veth (no coalescing in its driver) is
/// refused before any cell runs, naming the device and the ioctl's error.
#[test]
fn a_nic_dimension_on_a_veth_is_refused_before_any_cell() {
    let Some(ns) = Netns::loopback_only("swnic") else {
        return;
    };
    ip(&[
        "-n", &ns.0, "link", "add", "swv0", "type", "veth", "peer", "name", "swv1",
    ]);
    // Nothing on stdout: no cell ran.
    let err = Thrum::sweep("tcp_rr")
        .netns(&ns.0)
        .args(["--nic", "swv0", "--vary", "coalesce-rx-usecs=0,8"])
        .len("200ms")
        .arg("--json")
        .timeout(Duration::from_secs(30))
        .refused(&["--nic swv0", "ETHTOOL_GCOALESCE", "not supported"]);
    assert!(!err.contains("cell 1"), "{err}");
}
