//! Every kind's figures: what `thrum compare` compares, `history` lists
//! and `history --chart` draws, read from a result document by its
//! `schema` (the JSON, not the types, so that a document of any command
//! and of an older thrum goes through one function).
//!
//! A figure has a name unique in its document, a unit, a direction
//! (higher or lower is better) and a role: the kind's **headline**
//! figures are what `--fail-on regression` gates on unless `--gate` names
//! others; **secondary** figures get a verdict at a stricter level (the
//! family of figures shares one 5 % false-alarm budget, see
//! [`super::compare`]); **CPU** % is shown but never judged on its own,
//! since it moves with the load (a lower throughput uses less CPU) and
//! service demand carries the CPU story.
//!
//! | kind | headline | secondary |
//! |---|---|---|
//! | bulk test | `throughput` | `loss` (udp), service demand |
//! | request/response | `transactions_per_s`; open loop: `latency_p50`, `latency_p99` | latency, loss, service demand |
//! | capacity | `capacity` (the estimate) | |
//! | mix with phases (rrul, …) | each probe's `P:latency_under_load_p50` | `P:loaded_latency_p99`, `goodput_up`, `goodput_down`, `fairness_up`, `fairness_down`; with `--one-way`, `one_way_up_under_load_p50`, `one_way_down_under_load_p50` |
//! | mix without phases | each probe's `P:latency_p50`, else goodput | `P:latency_p99`, goodput, fairness |
//! | curve | `saturation_rate`, `knee_rate` | |
//! | agg | each test's `T:peak` | |
//! | sweep | each cell's figure, `burst=0/flows=1:transactions_per_s` | |
//! | mesh | each pair's figure, `a:12880->b:12880:throughput` | |
//! | ping | each size's `56B:rtt_p50` | `56B:rtt_p99`, `56B:loss` |
//!
//! Qualified names read `QUALIFIER:figure` (a probe, a test, a cell, a
//! size), so that `--gate` can name them in a comma-separated list.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a figure is for in a comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The kind's figure(s) of merit: gated by default.
    Headline,
    /// Judged, at a stricter level.
    Secondary,
    /// CPU %: shown, never judged on its own.
    Cpu,
}

/// One figure of one result.
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    pub name: String,
    pub value: f64,
    pub unit: String,
    pub higher_is_better: bool,
    pub role: Role,
    /// A quantile read from one run's histogram: the JSON pointer of the
    /// base64 histogram in the document, and the quantile. Its sampling
    /// error is a floor under the comparison's interval.
    pub quantile: Option<(String, f64)>,
    /// The figure `--iterations` repeats (the iterations' `figure`).
    pub iterated: bool,
}

/// A figure as the store keeps it (`runs.figures`) and `history --json`
/// prints it: the name is the key.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stored {
    pub value: f64,
    pub unit: String,
    pub higher_is_better: bool,
    pub role: Role,
}

/// The stored figures of a run, by name.
pub type StoredFigures = BTreeMap<String, Stored>;

/// An added latency under this is counted as this much: the difference of
/// two medians is compared as a ratio, and below a tenth of a millisecond
/// it is in their noise on a shared host (the loaded probe can even be
/// the faster one, a negative difference with no logarithm).
pub const ADDED_LATENCY_FLOOR_NS: f64 = 100_000.0;

/// Every figure of `doc`, in the order a comparison lists them.
pub fn of(doc: &Value) -> Vec<Figure> {
    let mut out = Figures(Vec::new());
    match doc["schema"].as_str() {
        Some(crate::result::SCHEMA) => {
            if doc["summary"]["parts"]
                .as_array()
                .is_some_and(|p| !p.is_empty())
            {
                mix(doc, &mut out);
            } else {
                run(doc, &mut out);
            }
        }
        Some("thrum.ping.v1") => ping(doc, &mut out),
        Some("thrum.curve.v1") => curve(doc, &mut out),
        Some("thrum.agg.v1") => agg(doc, &mut out),
        Some("thrum.sweep.v1") => sweep(doc, &mut out),
        Some("thrum.mesh.v1") => mesh(doc, &mut out),
        _ => {}
    }
    out.0
}

/// The figures of `doc` as the store keeps them.
pub fn stored(doc: &Value) -> StoredFigures {
    of(doc)
        .into_iter()
        .map(|f| {
            (
                f.name,
                Stored {
                    value: f.value,
                    unit: f.unit,
                    higher_is_better: f.higher_is_better,
                    role: f.role,
                },
            )
        })
        .collect()
}

fn num(v: &Value) -> Option<f64> {
    v.as_f64().filter(|x| x.is_finite())
}

struct Figures(Vec<Figure>);

impl Figures {
    /// Add `name` when `value` is a number.
    fn add(&mut self, name: &str, value: Option<f64>, unit: &str, higher: bool, role: Role) {
        if let Some(value) = value {
            self.0.push(Figure {
                name: name.to_string(),
                value,
                unit: unit.to_string(),
                higher_is_better: higher,
                role,
                quantile: None,
                iterated: false,
            });
        }
    }

    /// Mark the last figure added, when there is one named `name`.
    fn last(&mut self, name: &str) -> Option<&mut Figure> {
        self.0.last_mut().filter(|f| f.name == name)
    }

    /// A latency quantile `q` at `at` (its summary) with its histogram at
    /// the JSON pointer `hist`.
    fn quantile(&mut self, name: &str, at: &Value, key: &str, q: f64, hist: &str, role: Role) {
        self.add(name, num(&at[key]), "ns", false, role);
        if let Some(f) = self.last(name) {
            f.quantile = Some((hist.to_string(), q));
        }
    }

    /// Local and remote CPU % and service demand of a summary (`s`).
    fn cpu(&mut self, s: &Value, prefix: &str) {
        for side in ["local", "remote"] {
            let x = &s[side];
            self.add(
                &format!("{prefix}{side}_cpu"),
                num(&x["cpu_util_percent"]),
                "%",
                false,
                Role::Cpu,
            );
        }
        for side in ["local", "remote"] {
            let x = &s[side];
            let (v, unit) = match num(&x["service_demand_us_per_kb"]) {
                Some(v) => (Some(v), "us/KB"),
                None => (num(&x["service_demand_us_per_tran"]), "us/tran"),
            };
            self.add(
                &format!("{prefix}{side}_service_demand"),
                v,
                unit,
                false,
                Role::Secondary,
            );
        }
    }
}

/// A single test (`run`, not a mix).
fn run(doc: &Value, out: &mut Figures) {
    let s = &doc["summary"];
    if doc["test"] == "capacity" {
        // The estimate; the summary's throughput is the probe's own load.
        out.add(
            "capacity",
            num(&s["capacity_bps"]),
            "bit/s",
            true,
            Role::Headline,
        );
        return;
    }
    let open_loop = num(&s["offered_per_s"]).is_some();
    let bulk = num(&s["throughput_bps"]).is_some();
    let role = |headline: bool| {
        if headline {
            Role::Headline
        } else {
            Role::Secondary
        }
    };
    out.add(
        "throughput",
        num(&s["throughput_bps"]),
        "bit/s",
        true,
        Role::Headline,
    );
    if let Some(f) = out.last("throughput") {
        f.iterated = true;
    }
    out.add(
        "transactions_per_s",
        num(&s["transactions_per_s"]),
        "trans/s",
        true,
        role(!bulk && !open_loop),
    );
    if let Some(f) = out.last("transactions_per_s") {
        f.iterated = true;
    }
    let lat = &s["latency_ns"];
    let hist = "/summary/histogram";
    out.quantile("latency_p50", lat, "p50", 0.5, hist, role(open_loop));
    out.quantile("latency_p99", lat, "p99", 0.99, hist, role(open_loop));
    let loss = match (num(&s["lost"]), num(&s["datagrams_sent"])) {
        (Some(l), Some(n)) if n > 0.0 => Some(100.0 * l / n),
        _ => None,
    };
    out.add("loss", loss, "%", false, Role::Secondary);
    out.cpu(s, "");
}

/// A mix: each probe's latency (under load, when phased), the goodput
/// each way, the fairness, and the session's CPU.
fn mix(doc: &Value, out: &mut Figures) {
    let s = &doc["summary"];
    let parts = s["parts"].as_array().map(Vec::as_slice).unwrap_or_default();
    let phased = s["phases"].is_object();
    let probes: Vec<(usize, &Value)> = parts
        .iter()
        .enumerate()
        .filter(|(_, p)| p["direction"] == "rr")
        .collect();
    let own = probes.iter().any(|(_, p)| p["phases"].is_object());
    if phased && !own && !probes.is_empty() {
        // An older result: every probe's latency merged.
        under_load(out, &s["phases"], "", "/summary/phases");
    }
    for (i, p) in &probes {
        let name = p["name"].as_str().unwrap_or_default();
        if phased && own {
            let at = format!("/summary/parts/{i}/phases");
            under_load(out, &p["phases"], &format!("{name}:"), &at);
        } else if !phased {
            let hist = format!("/summary/parts/{i}/histogram");
            let lat = &p["latency_ns"];
            out.quantile(
                &format!("{name}:latency_p50"),
                lat,
                "p50",
                0.5,
                &hist,
                Role::Headline,
            );
            out.quantile(
                &format!("{name}:latency_p99"),
                lat,
                "p99",
                0.99,
                &hist,
                Role::Secondary,
            );
        }
    }
    let goodput_role = if probes.is_empty() {
        Role::Headline
    } else {
        Role::Secondary
    };
    let (up, down) = if phased {
        let l = &s["phases"]["loaded"];
        (num(&l["throughput_up_bps"]), num(&l["throughput_down_bps"]))
    } else {
        let sum = |dir: &str, key: &str| -> f64 {
            parts
                .iter()
                .filter(|p| p["direction"] == dir)
                .filter_map(|p| num(&p[key]))
                .sum()
        };
        (
            Some(sum("up", "throughput_bps") + sum("both", "throughput_bps_c2s")),
            Some(sum("down", "throughput_bps") + sum("both", "throughput_bps_s2c")),
        )
    };
    let has = |dirs: &[&str]| {
        parts
            .iter()
            .any(|p| dirs.iter().any(|d| p["direction"] == *d))
    };
    if has(&["up", "both"]) {
        out.add("goodput_up", up, "bit/s", true, goodput_role);
    }
    if has(&["down", "both"]) {
        out.add("goodput_down", down, "bit/s", true, goodput_role);
    }
    let f = &s["fairness"];
    out.add("fairness_up", num(&f["up"]), "", true, Role::Secondary);
    out.add("fairness_down", num(&f["down"]), "", true, Role::Secondary);
    // --one-way: what the load added to each way's median, floored as the
    // latency under load is (a way faster under load is no queue).
    let q = &s["queue_direction"];
    for way in ["up", "down"] {
        out.add(
            &format!("one_way_{way}_under_load_p50"),
            num(&q[format!("{way}_ns")]).map(|g| g.max(ADDED_LATENCY_FLOOR_NS)),
            "ns",
            false,
            Role::Secondary,
        );
    }
    out.cpu(s, "");
}

/// The latency under load of the phases `ph` (at the JSON pointer `at`):
/// loaded minus idle p50 (floored at [`ADDED_LATENCY_FLOOR_NS`]) and the
/// loaded p99, named with `prefix`.
fn under_load(out: &mut Figures, ph: &Value, prefix: &str, at: &str) {
    let lat = |phase: &str| num(&ph[phase]["probe_latency_ns"]["p50"]);
    let added = lat("loaded")
        .zip(lat("idle"))
        .map(|(l, i)| (l - i).max(ADDED_LATENCY_FLOOR_NS));
    out.add(
        &format!("{prefix}latency_under_load_p50"),
        added,
        "ns",
        false,
        Role::Headline,
    );
    out.quantile(
        &format!("{prefix}loaded_latency_p99"),
        &ph["loaded"]["probe_latency_ns"],
        "p99",
        0.99,
        &format!("{at}/loaded/probe_latency_histogram"),
        Role::Secondary,
    );
}

/// ping: each size's round trip and loss.
fn ping(doc: &Value, out: &mut Figures) {
    let sizes = doc["summary"]["sizes"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    for z in sizes {
        let size = z["size"].as_u64().unwrap_or_default();
        let rtt = &z["rtt_ns"];
        out.add(
            &format!("{size}B:rtt_p50"),
            num(&rtt["p50"]),
            "ns",
            false,
            Role::Headline,
        );
        out.add(
            &format!("{size}B:rtt_p99"),
            num(&rtt["p99"]),
            "ns",
            false,
            Role::Secondary,
        );
        out.add(
            &format!("{size}B:loss"),
            num(&z["loss_percent"]),
            "%",
            false,
            Role::Secondary,
        );
    }
}

/// curve: the saturation rate and the knee.
fn curve(doc: &Value, out: &mut Figures) {
    for (name, key) in [("saturation_rate", "saturation"), ("knee_rate", "knee")] {
        out.add(
            name,
            num(&doc[key]["achieved_per_s"]),
            "trans/s",
            true,
            Role::Headline,
        );
    }
}

/// agg: each test's peak, the average of its best step.
fn agg(doc: &Value, out: &mut Figures) {
    let tests = doc["tests"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    for t in tests {
        let name = t["name"].as_str().unwrap_or_default();
        let peak = t["peak_step"]
            .as_u64()
            .and_then(|i| num(&t["steps"][i as usize]["average"]));
        let (scale, unit) = match t["unit"].as_str().unwrap_or_default() {
            "Mbit/s" => (1e6, "bit/s"),
            u if u.eq_ignore_ascii_case("trans/s") => (1.0, "trans/s"),
            u => (1.0, u),
        };
        out.add(
            &format!("{name}:peak"),
            peak.map(|p| p * scale),
            unit,
            true,
            Role::Headline,
        );
    }
}

/// sweep: each cell's figure, named by the cell's parameters.
fn sweep(doc: &Value, out: &mut Figures) {
    let cells = doc["cells"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let sizes = doc["rr_sizes"].as_array().map_or(0, Vec::len);
    for c in cells.iter().filter(|c| c["error"].is_null()) {
        let mut key: Vec<String> = c["params"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| match v {
                        Value::String(s) => format!("{k}={s}"),
                        v => format!("{k}={v}"),
                    })
                    .collect()
            })
            .unwrap_or_default();
        if sizes > 1 {
            key.insert(
                0,
                format!("r={},{}", c["request_bytes"], c["response_bytes"]),
            );
        }
        let key = key.join("/");
        if let Some(t) = num(&c["throughput_bps"]) {
            out.add(
                &format!("{key}:throughput"),
                Some(t),
                "bit/s",
                true,
                Role::Headline,
            );
        } else {
            out.add(
                &format!("{key}:transactions_per_s"),
                num(&c["transactions_per_s"]),
                "trans/s",
                true,
                Role::Headline,
            );
        }
    }
}

/// mesh: each pair's figure of merit, named `SENDER->RECEIVER:figure`.
fn mesh(doc: &Value, out: &mut Figures) {
    let (unit, name) = match doc["matrix"]["unit"].as_str() {
        Some("bit/s") => ("bit/s", "throughput"),
        _ => ("trans/s", "transactions_per_s"),
    };
    for p in doc["pairs"].as_array().into_iter().flatten() {
        if p["error"].is_null() {
            let (s, r) = (&p["sender"], &p["receiver"]);
            let key = format!(
                "{}->{}:{name}",
                s.as_str().unwrap_or_default(),
                r.as_str().unwrap_or_default()
            );
            out.add(&key, num(&p["figure"]), unit, true, Role::Headline);
        }
    }
}

/// A figure's value in its unit, for tables.
pub fn format(unit: &str, v: f64) -> String {
    match unit {
        "bit/s" => crate::units::BitsPerSec(v).to_string(),
        "trans/s" => format!("{} trans/s", crate::units::fmt_si(v)),
        "ns" => crate::units::fmt_ns(v),
        "%" => format!("{} %", crate::units::Fixed(v, 2)),
        "" => crate::units::Fixed(v, 3).to_string(),
        u => format!("{} {u}", crate::units::Fixed(v, 3)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn names(doc: &Value) -> Vec<(String, Role)> {
        of(doc).into_iter().map(|f| (f.name, f.role)).collect()
    }

    #[test]
    fn a_single_tests_headline_is_its_figure_of_merit() {
        let bulk = json!({"schema": "thrum.result.v1", "test": "tcp_stream", "summary": {
            "throughput_bps": 9e7,
            "local": {"cpu_util_percent": 3.0, "service_demand_us_per_kb": 0.2}, "remote": {}}});
        assert_eq!(
            names(&bulk),
            [
                ("throughput".to_string(), Role::Headline),
                ("local_cpu".into(), Role::Cpu),
                ("local_service_demand".into(), Role::Secondary),
            ]
        );
        let rr = json!({"schema": "thrum.result.v1", "test": "tcp_rr", "summary": {
            "transactions_per_s": 5.0, "latency_ns": {"p50": 10, "p99": 20}, "local": {}, "remote": {}}});
        let f = of(&rr);
        assert_eq!(f[0].role, Role::Headline);
        assert_eq!(f[1].quantile, Some(("/summary/histogram".into(), 0.5)));
        assert_eq!(f[1].role, Role::Secondary);
        let open = json!({"schema": "thrum.result.v1", "test": "udp_rr", "summary": {
            "transactions_per_s": 5.0, "offered_per_s": 5.0,
            "latency_ns": {"p50": 10, "p99": 20}, "local": {}, "remote": {}}});
        let r: Vec<Role> = of(&open).iter().map(|f| f.role).collect();
        assert_eq!(r, [Role::Secondary, Role::Headline, Role::Headline]);
    }

    #[test]
    fn capacity_is_the_estimate_not_the_probes_load() {
        let cap = json!({"schema": "thrum.result.v1", "test": "capacity", "summary": {
            "throughput_bps": 963_000.0, "capacity_bps": 89.21e6, "local": {}, "remote": {}}});
        let f = of(&cap);
        assert_eq!(f.len(), 1);
        assert_eq!((f[0].name.as_str(), f[0].value), ("capacity", 89.21e6));
    }

    #[test]
    fn a_mix_has_each_probes_latency_under_load_and_the_goodput_each_way() {
        let phase = |p50: u64| json!({"probe_latency_ns": {"p50": p50, "p99": p50 * 2}});
        let doc = json!({"schema": "thrum.result.v1", "test": "tcp_stream", "summary": {
            "parts": [
                {"name": "tcp_stream", "direction": "up", "throughput_bps": 4e7},
                {"name": "tcp_maerts", "direction": "down", "throughput_bps": 4.5e7},
                {"name": "udp_rr", "direction": "rr", "phases": {
                    "idle": phase(50_000), "loaded": phase(30_000_000),
                    "recovery": phase(50_000)}},
                {"name": "tcp_rr", "direction": "rr", "phases": {
                    "idle": phase(80_000), "loaded": phase(70_000),
                    "recovery": phase(50_000)}}],
            "phases": {"idle": phase(60_000), "loaded": {"probe_latency_ns": {"p50": 1, "p99": 2},
                       "throughput_up_bps": 4e7, "throughput_down_bps": 4.5e7},
                       "recovery": phase(1)},
            "fairness": {"up": 0.99, "down": null},
            "queue_direction": {"direction": "up", "up_ns": 98_000_000, "down_ns": -4_000},
            "local": {"cpu_util_percent": 50.0}, "remote": {}}});
        let f = of(&doc);
        let get = |n: &str| {
            f.iter()
                .find(|f| f.name == n)
                .unwrap_or_else(|| panic!("{n}"))
        };
        let u = get("udp_rr:latency_under_load_p50");
        assert_eq!((u.value, u.role), (29_950_000.0, Role::Headline));
        // Faster under load (a busy host): the floor, not a negative.
        assert_eq!(
            get("tcp_rr:latency_under_load_p50").value,
            ADDED_LATENCY_FLOOR_NS
        );
        let p99 = get("udp_rr:loaded_latency_p99");
        assert_eq!(p99.value, 60_000_000.0);
        assert_eq!(
            p99.quantile.as_ref().unwrap().0,
            "/summary/parts/2/phases/loaded/probe_latency_histogram"
        );
        assert_eq!(get("goodput_up").value, 4e7);
        assert_eq!(get("goodput_down").role, Role::Secondary);
        assert_eq!(get("fairness_up").value, 0.99);
        assert!(f.iter().all(|f| f.name != "fairness_down"));
        assert_eq!(get("local_cpu").role, Role::Cpu);
        // --one-way: each way's growth, the faster way floored.
        assert_eq!(get("one_way_up_under_load_p50").value, 98e6);
        let down = get("one_way_down_under_load_p50");
        assert_eq!(
            (down.value, down.role),
            (ADDED_LATENCY_FLOOR_NS, Role::Secondary)
        );
    }

    /// A mesh's pairs by name, its failed pair left out; it is not ok.
    #[test]
    fn mesh_figures_are_its_pairs() {
        let mesh = json!({"schema": "thrum.mesh.v1", "test": "tcp_stream", "hosts": ["a", "b"],
            "matrix": {"unit": "bit/s", "cells": [[null, {"value": 19e6, "error": null}],
                                                   [{"value": null, "error": "refused"}, null]]},
            "pairs": [{"sender": "a", "receiver": "b", "figure": 19e6, "error": null},
                      {"sender": "b", "receiver": "a", "figure": null, "error": "refused"}]});
        let f = of(&mesh);
        assert_eq!(f.len(), 1);
        assert_eq!((f[0].name.as_str(), f[0].value), ("a->b:throughput", 19e6));
        assert!(!super::super::headline::ok(&mesh));
        assert_eq!(
            super::super::headline::identity(&mesh),
            ("mesh".into(), "tcp_stream".into(), "a,b".into())
        );
    }

    #[test]
    fn curve_agg_sweep_and_ping_figures() {
        let curve = json!({"schema": "thrum.curve.v1", "knee": {"achieved_per_s": 11_717.6},
                           "saturation": {"achieved_per_s": 18_172.5}});
        assert_eq!(
            names(&curve),
            [
                ("saturation_rate".to_string(), Role::Headline),
                ("knee_rate".into(), Role::Headline)
            ]
        );
        let agg = json!({"schema": "thrum.agg.v1", "tests": [
            {"name": "outbound", "unit": "Mbit/s", "peak_step": 1,
             "steps": [{"average": 10.0}, {"average": 22_281.5}]},
            {"name": "rr", "unit": "Trans/s", "peak_step": 0, "steps": [{"average": 97_453.0}]}]});
        let f = of(&agg);
        assert_eq!(
            (f[0].name.as_str(), f[0].value, f[0].unit.as_str()),
            ("outbound:peak", 22_281.5e6, "bit/s")
        );
        assert_eq!(
            (f[1].name.as_str(), f[1].unit.as_str()),
            ("rr:peak", "trans/s")
        );
        let sweep = json!({"schema": "thrum.sweep.v1", "rr_sizes": [[1, 1]], "cells": [
            {"params": {"burst": 0, "flows": 1}, "transactions_per_s": 65_291.8, "error": null},
            {"params": {"burst": 4, "flows": 1}, "transactions_per_s": 1.0, "error": "failed"}]});
        assert_eq!(
            names(&sweep),
            [(
                "burst=0/flows=1:transactions_per_s".to_string(),
                Role::Headline
            )]
        );
        let ping = json!({"schema": "thrum.ping.v1", "summary": {"sizes": [
            {"size": 56, "loss_percent": 0.0, "rtt_ns": {"p50": 24_787, "p99": 55_643}}]}});
        assert_eq!(
            names(&ping),
            [
                ("56B:rtt_p50".to_string(), Role::Headline),
                ("56B:rtt_p99".into(), Role::Secondary),
                ("56B:loss".into(), Role::Secondary)
            ]
        );
        assert_eq!(stored(&ping)["56B:rtt_p50"].value, 24_787.0);
    }
}
