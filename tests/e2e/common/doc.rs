//! Reading a result document: numbers, the committed JSON Schema, the
//! diagnostics by code, whether io_uring ran, the drivers the workers ran,
//! an SVG's text, a JSON file, key=value lines.

use std::collections::BTreeMap;

use serde_json::Value;

pub fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

pub fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// The JSON document in file `path`.
pub fn read_json(path: &std::path::Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not JSON ({e}): {text}", path.display()))
}

/// The `KEY=value` lines of `text` (`--keyval`), by key.
pub fn keyval(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Validate a result document against the committed JSON Schema.
pub fn assert_schema(doc: &Value) {
    assert_schema_named(doc, "thrum.result.v1.json");
}

/// Validate a document against `schema/NAME`.
pub fn assert_schema_named(doc: &Value, name: &str) {
    let path = format!("{}/schema/{name}", env!("CARGO_MANIFEST_DIR"));
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).expect("read schema"))
        .expect("schema is JSON");
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(doc)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect();
    assert!(
        errors.is_empty(),
        "document does not match schema/{name}:\n{}",
        errors.join("\n")
    );
}

/// A result's diagnostics (`summary.diagnostics`): code and message.
pub fn coded(doc: &serde_json::Value) -> impl Iterator<Item = (&str, &str)> {
    doc["summary"]["diagnostics"]
        .as_array()
        .expect("summary.diagnostics")
        .iter()
        .map(|d| {
            let text = |k: &str| d[k].as_str().unwrap_or_else(|| panic!("{k} in {d}"));
            (text("code"), text("message"))
        })
}

/// The messages of a result's diagnostics of `code`.
pub fn diagnostics(doc: &serde_json::Value, code: &str) -> Vec<String> {
    coded(doc)
        .filter(|(c, _)| *c == code)
        .map(|(_, m)| m.to_string())
        .collect()
}

/// The codes of the warnings about the session itself rather than the
/// machine: the server's errors and implausible usage, refused
/// connections or datagrams, missing server samples, undrained workers.
pub const SESSION_CODES: [&str; 5] = [
    "server_error",
    "server_usage_implausible",
    "server_refused",
    "server_samples_missing",
    "drain_timeout",
];

/// A result's diagnostics whose code is one of `codes`, as `code: message`.
pub fn diagnostics_of(doc: &serde_json::Value, codes: &[&str]) -> Vec<String> {
    coded(doc)
        .filter(|(c, _)| codes.contains(c))
        .map(|(c, m)| format!("{c}: {m}"))
        .collect()
}

/// Did this `--driver uring` run get io_uring on every worker of both ends
/// (`workers` per end)? False, with a printed reason, where the kernel
/// refused it (the test then skips); a silent fallback fails.
pub fn ran_on_uring(doc: &serde_json::Value, workers: usize) -> bool {
    if diagnostics(doc, "uring_fallback")
        .iter()
        .any(|m| m.contains("io_uring is unavailable"))
    {
        eprintln!("SKIPPED: io_uring unavailable");
        return false;
    }
    for key in ["local_drivers", "remote_drivers"] {
        assert_eq!(
            doc["environment"][key],
            serde_json::json!(vec!["uring"; workers]),
            "{key}"
        );
    }
    true
}

/// The text nodes of an SVG document, which must parse as XML.
pub fn svg_text(path: &std::path::Path) -> Vec<String> {
    let svg = std::fs::read_to_string(path).expect("the SVG was written");
    let doc = roxmltree::Document::parse(&svg).expect("the SVG parses as XML");
    doc.descendants()
        .filter_map(|n| n.text())
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .collect()
}

/// The driver each worker of one end ran (`environment.local_drivers` or
/// `remote_drivers`).
pub fn drivers(doc: &Value, key: &str) -> Vec<String> {
    doc["environment"][key]
        .as_array()
        .expect("drivers")
        .iter()
        .map(|d| d.as_str().expect("name").to_string())
        .collect()
}
