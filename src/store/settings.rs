//! A stored run's settings key: what makes two runs "the same settings",
//! so that run-to-run noise is learned only from runs that differ by
//! chance, never from runs of another duration, size or flow count.
//!
//! The settings are the command's options as the result document records
//! them, less what names the run rather than shapes it: the target (its
//! own column), labels, name and the store's flags (which no document
//! holds), and figures measured on the way (curve's closed-loop rate).
//! Absent and null values are dropped, so that an option a later thrum
//! adds as optional leaves the keys of older runs as they were. The rest,
//! as canonical JSON (keys sorted, as serde_json's map keeps them), is
//! hashed with 64-bit FNV-1a (stable across builds and platforms, which
//! std's hasher does not promise) into 16 hex digits: a column an index
//! can serve.

use serde_json::{Map, Value};

/// The settings key of a result document: 16 hex digits.
pub fn key(doc: &Value) -> String {
    format!("{:016x}", fnv1a(canonical(doc).as_bytes()))
}

/// The settings of `doc` as canonical JSON (for tests and the key).
pub fn canonical(doc: &Value) -> String {
    let schema = doc["schema"].as_str().unwrap_or_default();
    let pick = |v: &Value, drop: &[&str]| -> Map<String, Value> {
        v.as_object()
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| !drop.contains(&k.as_str()))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut s = match schema {
        // The plan, flattened into `spec`, less the target's fields.
        crate::result::SCHEMA => pick(
            &doc["spec"],
            &["server", "server_address", "embedded_server", "bind"],
        ),
        "thrum.ping.v1" => {
            let mut m = pick(doc, &["schema", "host", "address", "summary"]);
            let sizes: Vec<Value> = doc["summary"]["sizes"]
                .as_array()
                .map(|z| z.iter().map(|s| s["size"].clone()).collect())
                .unwrap_or_default();
            m.insert("sizes".into(), Value::Array(sizes));
            m
        }
        "thrum.curve.v1" => {
            let mut m = pick(&doc["spec"], &["closed_loop_per_s"]);
            m.insert("test".into(), doc["test"].clone());
            m
        }
        "thrum.agg.v1" => pick(&doc["spec"], &["hosts"]),
        "thrum.sweep.v1" => pick(doc, &["schema", "server", "hosts", "cells", "interrupted"]),
        // Every pair runs one plan: the first pair's, less its target.
        "thrum.mesh.v1" => {
            let mut m = pick(
                &doc["pairs"][0]["result"]["spec"],
                &["server", "server_address", "embedded_server", "bind"],
            );
            m.insert("parallel".into(), doc["parallel"].clone());
            m
        }
        _ => Map::new(),
    };
    s.insert("schema".into(), Value::String(schema.into()));
    let mut v = Value::Object(s);
    drop_nulls(&mut v);
    v.to_string()
}

/// Remove every null member of every object, however deep.
fn drop_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, x| !x.is_null());
            m.values_mut().for_each(drop_nulls);
        }
        Value::Array(a) => a.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

/// 64-bit FNV-1a.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(duration_ns: u64, server: &str) -> Value {
        json!({"schema": "thrum.result.v1", "test": "tcp_stream",
               "spec": {"test": "tcp_stream", "duration_ns": duration_ns, "mss": null,
                        "local": {"cpu_pin": [], "send_buffer_bytes": null},
                        "server": server, "server_address": server,
                        "embedded_server": false, "bind": null},
               "summary": {"throughput_bps": 1e8}})
    }

    #[test]
    fn the_target_and_nulls_are_not_settings_the_duration_is() {
        let a = run(3_000_000_000, "10.0.0.1");
        assert_eq!(key(&a), key(&run(3_000_000_000, "10.0.0.2:5000")));
        assert_ne!(key(&a), key(&run(2_000_000_000, "10.0.0.1")));
        assert_eq!(
            canonical(&a),
            r#"{"duration_ns":3000000000,"local":{"cpu_pin":[]},"schema":"thrum.result.v1","test":"tcp_stream"}"#
        );
        // An option added later as null leaves the key as it was.
        let mut b = a.clone();
        b["spec"]["new_option"] = Value::Null;
        assert_eq!(key(&a), key(&b));
        assert_eq!(key(&a).len(), 16);
    }

    #[test]
    fn each_kind_keeps_its_options_not_its_figures() {
        let ping = |host: &str, rtt: u64| {
            json!({"schema": "thrum.ping.v1", "host": host, "address": host, "count": 10,
                   "summary": {"sizes": [{"size": 56, "rtt_ns": {"p50": rtt}}], "error": null}})
        };
        assert_eq!(key(&ping("a", 1)), key(&ping("b", 2)));
        let curve = |probe: f64| {
            json!({"schema": "thrum.curve.v1", "test": "udp_rr",
                   "spec": {"rates": "auto", "closed_loop_per_s": probe}, "steps": []})
        };
        assert_eq!(key(&curve(1.0)), key(&curve(2.0)));
        let sweep = |tps: f64| {
            json!({"schema": "thrum.sweep.v1", "test": "tcp_rr", "server": "x",
                   "bursts": [0, 4], "cells": [{"transactions_per_s": tps}]})
        };
        assert_eq!(key(&sweep(1.0)), key(&sweep(2.0)));
        assert_ne!(key(&sweep(1.0)), key(&ping("a", 1)));
        // FNV-1a's published value for "a".
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
