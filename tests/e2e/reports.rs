//! Charts and reports that explain themselves: SI
//! units on the axes, titles with the test, hosts and date, a light grid,
//! and report.html with the provenance results.json holds.

use std::path::Path;
use std::time::Duration;

use crate::common::{Thrum, read_json, svg_text};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/netperf");

#[test]
fn charts_carry_si_units_titles_and_a_light_grid() {
    let dir = tempfile::tempdir().unwrap();
    Thrum::report(FIXTURES)
        .arg("--out")
        .arg(dir.path())
        .env("TZ", "UTC")
        .ok();
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
    let doc = Thrum::report(FIXTURES).json();
    crate::common::assert_schema_named(&doc, "thrum.agg.v1.json");
    let text = Thrum::report(FIXTURES)
        .arg("--export-json")
        .arg(&file)
        .output()
        .stdout();
    assert!(
        text.contains("Average of peak interval"),
        "the summary stays: {text}"
    );
    let saved = read_json(&file);
    assert_eq!(saved["tests"], doc["tests"]);
    // sweep: --json prints the cells instead of the table.
    let sw = Thrum::cmd(&["sweep", "tcp_rr", "-l", "0.2s", "--json"])
        .output()
        .json();
    assert_eq!(sw["schema"], "thrum.sweep.v1");
    assert_eq!(sw["cells"].as_array().unwrap().len(), 1);
}

/// Run `thrum ARGS` (thrum's own warm-up) with its stdout into `file`
/// (the saved `--json`).
fn save(args: &[&str], file: &Path) {
    let out = Thrum::cmd(args).timeout(Duration::from_secs(60)).ok();
    std::fs::write(file, &out.stdout).unwrap();
}

/// `thrum report FILE EXTRA…`, which must succeed; its stdout.
fn report(file: &Path, extra: &[&str]) -> Vec<u8> {
    Thrum::report(file).args(extra).ok().stdout.clone()
}

fn read(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// flent's `-i FILE -p PLOT`: a saved `run --json` of a
/// mix, read back, draws the page and the chart `run --html`/`--chart`
/// drew, byte for byte, and prints the same document with `--json`.
#[test]
fn report_of_a_saved_mix_draws_what_run_drew() {
    let dir = tempfile::tempdir().unwrap();
    let d = |n: &str| dir.path().join(n);
    let (html, svg) = (d("run.html"), d("run.svg"));
    save(
        &[
            "run",
            "--mix",
            "tcp_stream,tcp_rr",
            "-l",
            "2s",
            "--idle",
            "1s",
            "--recovery",
            "1s",
            "--json",
            "--html",
            html.to_str().unwrap(),
            "--chart",
            svg.to_str().unwrap(),
        ],
        &d("r.json"),
    );
    let out = d("out");
    report(&d("r.json"), &["--out", out.to_str().unwrap()]);
    assert_eq!(read(&out.join("report.html")), read(&html), "report.html");
    assert_eq!(read(&out.join("chart.svg")), read(&svg), "chart.svg");
    // The document read back is the document written.
    assert_eq!(report(&d("r.json"), &["--json"]), read(&d("r.json")));
}

/// capacity's `--chart`, drawn again from its saved result; the page holds it.
#[test]
fn report_of_a_saved_capacity_draws_its_histogram() {
    let dir = tempfile::tempdir().unwrap();
    let d = |n: &str| dir.path().join(n);
    let svg = d("run.svg");
    save(
        &[
            "run",
            "capacity",
            "-l",
            "2s",
            "--json",
            "--chart",
            svg.to_str().unwrap(),
        ],
        &d("c.json"),
    );
    let out = d("out");
    report(&d("c.json"), &["--out", out.to_str().unwrap()]);
    assert_eq!(read(&out.join("chart.svg")), read(&svg), "chart.svg");
    let page = String::from_utf8(read(&out.join("report.html"))).unwrap();
    assert!(
        page.contains("<h1>thrum capacity to embedded</h1>"),
        "{page}"
    );
    assert!(page.contains("<svg"), "the chart is not inlined: {page}");
    assert_eq!(report(&d("c.json"), &["--json"]), read(&d("c.json")));
}

/// A plain `run tcp_rr --json` (and an open-loop one) read back: the
/// summary as the run printed it, a page with its intervals in `--out`.
#[test]
fn report_of_a_saved_run_prints_it_and_writes_a_page() {
    let dir = tempfile::tempdir().unwrap();
    let d = |n: &str| dir.path().join(n);
    for (name, extra) in [("rr", &[][..]), ("open", &["--rate", "2000"][..])] {
        let file = d(&format!("{name}.json"));
        let mut args = vec!["run", "tcp_rr", "-l", "1s", "--json"];
        args.extend_from_slice(extra);
        save(&args, &file);
        let out = d(name);
        let text = String::from_utf8(report(&file, &["--out", out.to_str().unwrap()])).unwrap();
        assert!(
            text.contains("-- summary over") && text.contains("transactions/s"),
            "{text}"
        );
        let page = String::from_utf8(read(&out.join("report.html"))).unwrap();
        assert!(page.contains("<h1>thrum tcp_rr to embedded</h1>"), "{page}");
        assert!(
            page.contains("<tr><td>1</td><td>measure</td>"),
            "no interval rows: {page}"
        );
        assert_eq!(report(&file, &["--json"]), read(&file), "{name}");
    }
}

/// A sweep's `--json` read back: its table again, and in `--out` the CSV
/// its `--export-csv` wrote.
#[test]
fn report_of_a_saved_sweep_writes_its_csv() {
    let dir = tempfile::tempdir().unwrap();
    let d = |n: &str| dir.path().join(n);
    let csv = d("sweep.csv");
    save(
        &[
            "sweep",
            "tcp_rr",
            "-l",
            "300ms",
            "--flows",
            "1,2",
            "--json",
            "--export-csv",
            csv.to_str().unwrap(),
        ],
        &d("s.json"),
    );
    let out = d("out");
    let table = String::from_utf8(report(&d("s.json"), &["--out", out.to_str().unwrap()])).unwrap();
    assert!(table.contains("rows burst, columns flows"), "{table}");
    assert_eq!(read(&out.join("sweep.csv")), read(&csv));
}

/// A ping's `--json` read back prints its table (ping draws nothing).
#[test]
fn report_of_a_saved_ping_prints_its_table() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("p.json");
    let out = Thrum::cmd(&["ping", "127.0.0.1", "-c", "1", "--json"]).output();
    if !out.success() {
        eprintln!("skipped: ping 127.0.0.1 fails here:\n{}", out.report());
        return;
    }
    std::fs::write(&file, &out.stdout).unwrap();
    let text = String::from_utf8(report(&file, &[])).unwrap();
    assert!(text.starts_with("ping 127.0.0.1 (127.0.0.1) by "), "{text}");
    assert_eq!(report(&file, &["--json"]), out.stdout);
}

/// A document of no schema thrum reads: the error names the ones it does.
#[test]
fn report_names_the_schemas_it_reads() {
    let dir = tempfile::tempdir().unwrap();
    for (name, doc, says) in [
        (
            "other.json",
            r#"{"schema":"flent.v1"}"#,
            "schema 'flent.v1'",
        ),
        ("none.json", r#"{"x":0}"#, "no \"schema\" field"),
    ] {
        let file = dir.path().join(name);
        std::fs::write(&file, doc).unwrap();
        let err = Thrum::report(&file).fails().stderr();
        assert!(
            err.contains(says)
                && err.contains(
                    "thrum.result.v1, thrum.agg.v1, thrum.curve.v1, thrum.ping.v1, thrum.sweep.v1, thrum.mesh.v1"
                ),
            "{err}"
        );
    }
}
