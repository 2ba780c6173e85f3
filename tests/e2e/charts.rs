//! The charts as a reader sees them, from real runs: every SVG parses and
//! scales to its container (a `viewBox`, a width of 100 %, no fixed
//! size); a mix's chart is flent's "all scaled", three panels on one time
//! axis (download, upload, latency) with their legends beside them; the
//! mix's page names each interval's phase; `history --chart` draws one
//! series per label, the legend beside the plot, the value axis in a unit
//! its ticks read in; and `report` of a sweep writes its tables as a page
//! and a heat map beside its CSV, each rate printed plainly.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::common::{ServerProc, Thrum};

/// A text element of an SVG: its words and where it stands.
#[derive(Debug, Clone)]
struct Label {
    text: String,
    x: f64,
    y: f64,
}

/// Parse `svg` (it must), check it scales to its container, and give its
/// text elements.
fn scalable_svg(svg: &str) -> Vec<Label> {
    let doc = roxmltree::Document::parse(svg).expect("the SVG parses as XML");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg");
    let view = root.attribute("viewBox").expect("a viewBox");
    assert_eq!(view.split_whitespace().count(), 4, "{view}");
    assert_eq!(root.attribute("width"), Some("100%"));
    assert_eq!(root.attribute("height"), None, "a fixed height");
    doc.descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| Label {
            text: n.text().unwrap_or_default().trim().to_string(),
            x: n.attribute("x").and_then(|v| v.parse().ok()).unwrap_or(0.0),
            y: n.attribute("y").and_then(|v| v.parse().ok()).unwrap_or(0.0),
        })
        .collect()
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Rows of numeric labels: labels that read as numbers, grouped by their
/// y, only the rows holding at least three (an x axis's ticks; a y axis
/// has one label a row).
fn tick_rows(labels: &[Label]) -> Vec<Vec<(String, i64)>> {
    let mut rows: BTreeMap<i64, Vec<(String, i64)>> = BTreeMap::new();
    for l in labels.iter().filter(|l| l.text.parse::<f64>().is_ok()) {
        rows.entry(l.y.round() as i64)
            .or_default()
            .push((l.text.clone(), l.x.round() as i64));
    }
    rows.into_values().filter(|r| r.len() >= 3).collect()
}

#[test]
fn a_mix_is_three_panels_on_one_time_axis_and_its_page_names_the_phases() {
    let server = ServerProc::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let (chart, page) = (dir.path().join("mix.svg"), dir.path().join("mix.html"));
    Thrum::run("rrul")
        .on(&server)
        .len("2s")
        .args(["--idle", "1s", "--recovery", "1s", "--no-save", "--chart"])
        .arg(&chart)
        .arg("--html")
        .arg(&page)
        .timeout(Duration::from_secs(90))
        .ok();
    let labels = scalable_svg(&read(&chart));
    let has = |prefix: &str| labels.iter().filter(|l| l.text.starts_with(prefix)).count();
    // One axis each, a unit each; one time axis's title.
    for axis in ["download (", "upload (", "probe latency ("] {
        assert_eq!(has(axis), 1, "{axis}: {labels:?}");
    }
    assert_eq!(has("time (s)"), 1);
    // Three rows of time ticks, the same numbers at the same x: the panels
    // share the time axis.
    let rows = tick_rows(&labels);
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert!(rows.windows(2).all(|w| w[0] == w[1]), "{rows:?}");
    let right_edge = rows[0].iter().map(|t| t.1).max().unwrap() as f64;
    // Each part once in the legend (the probes' p50 and p99 told apart by
    // line style, not by entries), all of it right of the plots.
    for part in [
        "tcp_stream",
        "tcp_stream#4",
        "tcp_maerts",
        "tcp_maerts#2",
        "udp_rr",
        "tcp_rr",
    ] {
        let entries: Vec<&Label> = labels.iter().filter(|l| l.text == part).collect();
        assert_eq!(entries.len(), 1, "{part}: {labels:?}");
        assert!(
            entries[0].x > right_edge,
            "{part} at {} over the data",
            entries[0].x
        );
    }
    for key in ["up (sum)", "down (sum)", "solid: median", "dashed: p99"] {
        assert_eq!(has(key), 1, "{key}: {labels:?}");
    }
    assert_eq!(has("udp_rr p"), 0, "one entry per part: {labels:?}");
    // The page: its charts inlined scalable, each interval's phase named.
    let html = read(&page);
    let phases: Vec<&str> = html
        .split("<table class=\"intervals\">")
        .nth(1)
        .unwrap()
        .split("</table>")
        .next()
        .unwrap()
        .split("<tr>")
        .skip(2)
        .filter_map(|row| row.split("<td>").nth(2)?.split("</td>").next())
        .collect();
    for want in ["idle", "loaded", "recovery"] {
        assert!(phases.contains(&want), "{phases:?}");
    }
    assert!(!phases.contains(&"measure"), "{phases:?}");
    for svg in html.split("<svg").skip(1) {
        let svg = format!("<svg{}</svg>", svg.split("</svg>").next().unwrap());
        scalable_svg(&svg);
    }
}

#[test]
fn history_draws_a_series_per_label_in_the_unit_of_its_ticks() {
    let server = ServerProc::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("store.db");
    for (label, size) in [("case=a", "1,1"), ("case=b", "2000,2000")] {
        for _ in 0..3 {
            Thrum::run("tcp_rr")
                .on(&server)
                .len("300ms")
                .args(["-r", size, "--label", label, "--db"])
                .arg(&db)
                .timeout(Duration::from_secs(60))
                .ok();
        }
    }
    let svg = dir.path().join("h.svg");
    Thrum::cmd(&["history", "--chart", "latency", "--out"])
        .arg(&svg)
        .arg("--db")
        .arg(&db)
        .ok();
    let labels = scalable_svg(&read(&svg));
    for series in ["case=a", "case=b"] {
        let l: Vec<&Label> = labels.iter().filter(|l| l.text == series).collect();
        assert_eq!(l.len(), 1, "{series}: {labels:?}");
    }
    // The axis names its unit, and its ticks are numbers of that unit: the
    // largest p99 drawn, in it, is near the top tick.
    let axis = labels
        .iter()
        .find(|l| l.text.starts_with("latency ("))
        .expect("the value axis's title");
    let unit = axis
        .text
        .trim_start_matches("latency (")
        .trim_end_matches(')');
    let per = match unit {
        "ns" => 1.0,
        "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        other => panic!("unit {other}"),
    };
    let rows = Thrum::cmd(&["history", "--json", "--db"]).arg(&db).json();
    let top = rows
        .as_array()
        .expect("history --json is an array")
        .iter()
        .filter_map(|r| r["latency_p99_ns"].as_f64())
        .fold(0.0, f64::max)
        / per;
    let ticks: Vec<f64> = labels.iter().filter_map(|l| l.text.parse().ok()).collect();
    let highest = ticks.iter().copied().fold(0.0, f64::max);
    assert!(
        highest >= top * 0.4 && highest <= top * 1.5,
        "ticks up to {highest} {unit} for a p99 of {top} {unit}"
    );
    assert!(
        !labels
            .iter()
            .any(|l| l.text.ends_with(" us") || l.text.ends_with(" ms"))
    );
}

#[test]
fn a_sweeps_report_writes_its_tables_as_a_page_and_a_heat_map() {
    let server = ServerProc::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("sweep.json");
    Thrum::sweep("tcp_rr")
        .on(&server)
        .args(["--burst", "0,8", "--flows", "1,2"])
        .len("300ms")
        .args(["--no-save", "--export-json"])
        .arg(&json)
        .timeout(Duration::from_secs(90))
        .ok();
    let outdir = dir.path().join("out");
    Thrum::report(&json).arg("--out").arg(&outdir).ok();
    for f in ["sweep.csv", "sweep.html", "heatmap.svg"] {
        assert!(outdir.join(f).is_file(), "no {f}");
    }
    let doc: Value = serde_json::from_str(&read(&json)).unwrap();
    let cells = doc["cells"].as_array().unwrap();
    // The heat map: a cell per grid cell, its rate written in it.
    let labels = scalable_svg(&read(&outdir.join("heatmap.svg")));
    for c in cells {
        let rate = format!("{:.0}", c["transactions_per_s"].as_f64().unwrap());
        assert!(labels.iter().any(|l| l.text == rate), "{rate}: {labels:?}");
    }
    // The page: every rate plainly, its note where it is not a packet rate.
    let html = read(&outdir.join("sweep.html"));
    assert!(!html.contains("n/a"), "{html}");
    for c in cells {
        let rate = format!("{:.0}", c["transactions_per_s"].as_f64().unwrap());
        assert!(
            html.contains(&format!("<td>{rate}</td>")) || html.contains(&format!("<td>{rate} [")),
            "{rate} in {html}"
        );
    }
    let invalid = cells.iter().filter(|c| c["valid"] == false).count();
    assert_eq!(
        html.matches("transactions/s, not a packet rate").count(),
        invalid,
        "{html}"
    );
    let inline = html.split("<svg").nth(1).expect("the heat map inlined");
    scalable_svg(&format!(
        "<svg{}</svg>",
        inline.split("</svg>").next().unwrap()
    ));
}
