//! Charts and reports that explain themselves (issue 20, item 11): SI
//! units on the axes, titles with the test, hosts and date, a light grid,
//! and report.html with the provenance results.json holds.

use std::process::Command;
use std::time::Duration;

use crate::common::{bin, run_cmd, svg_text};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/netperf");

#[test]
fn charts_carry_si_units_titles_and_a_light_grid() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_cmd(
        Command::new(bin()).env("TZ", "UTC").args([
            "report",
            FIXTURES,
            "--out",
            dir.path().to_str().unwrap(),
        ]),
        Duration::from_secs(20),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The fixture's outbound test peaks at 3000 10^6bits/s: bit/s with SI prefixes.
    let outbound = svg_text(&dir.path().join("outbound_overall.svg"));
    assert!(
        outbound.iter().any(|t| t == "2 Gbit/s") && outbound.iter().any(|t| t == "500 Mbit/s"),
        "no SI ticks: {outbound:?}"
    );
    assert!(
        outbound
            .iter()
            .any(|t| t == "aggregate (throughput, bit/s)"),
        "{outbound:?}"
    );
    assert!(
        outbound.iter().any(
            |t| t.starts_with("outbound to lg1: per-second aggregate, 1970-01-01 00:33:20 UTC")
        ),
        "title without test, host and date: {outbound:?}"
    );
    let tps = svg_text(&dir.path().join("tps_overall.svg"));
    assert!(
        tps.iter()
            .any(|t| t == "tps to lg1, lg2: per-second aggregate, 1970-01-01 00:16:40 UTC"),
        "{tps:?}"
    );
    assert!(
        tps.iter().any(|t| t == "step averages (peak 263 trans/s)"),
        "{tps:?}"
    );
    // The grid is light grey, not plotters' default dark lines.
    let svg = std::fs::read_to_string(dir.path().join("tps_overall.svg")).unwrap();
    assert!(svg.contains("stroke=\"#F2F2F2\"") && svg.contains("stroke=\"#D7D7D7\""));
    // report.html names its sources and date.
    let html = std::fs::read_to_string(dir.path().join("report.html")).unwrap();
    assert!(
        html.contains("<th>date</th><td>1970-01-01 00:16:40.000 UTC</td>"),
        "{html}"
    );
    assert!(
        html.contains("<th>files</th>") && html.contains("netperf_tps.log"),
        "{html}"
    );
}

/// `--json` is a switch in `report` (and `agg`) as in `run`: the document
/// on standard output; `--export-json FILE` writes it beside the summary.
#[test]
fn json_is_a_switch_and_export_json_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("r.json");
    let out = run_cmd(
        Command::new(bin()).args(["report", FIXTURES, "--json"]),
        Duration::from_secs(20),
    );
    assert!(out.status.success());
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    crate::common::assert_schema_named(&doc, "thrum.agg.v1.json");
    let out = run_cmd(
        Command::new(bin()).args(["report", FIXTURES, "--export-json", file.to_str().unwrap()]),
        Duration::from_secs(20),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Average of peak interval"),
        "the summary stays: {text}"
    );
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(saved["tests"], doc["tests"]);
    // sweep: --json prints the cells instead of the table.
    let out = run_cmd(
        Command::new(bin()).args(["sweep", "tcp_rr", "-l", "0.2s", "--json"]),
        Duration::from_secs(30),
    );
    let sw: serde_json::Value = serde_json::from_slice(&out.stdout).expect("sweep JSON");
    assert_eq!(sw["schema"], "thrum.sweep.v1");
    assert_eq!(sw["cells"].as_array().unwrap().len(), 1);
}
