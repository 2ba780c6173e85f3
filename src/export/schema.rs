//! The JSON Schemas of thrum's documents, generated from the types that
//! are serialized (`#[derive(JsonSchema)]` beside `Serialize`, doc
//! comments as descriptions), so the schema cannot drift from the output.
//! `cargo xtask schema` writes them to schema/ (the list of files is
//! `cmd::schema::SCHEMAS`); a test fails when a committed file differs from
//! what the types give.
//!
//! What types cannot say is added here: the document's title and
//! description, which objects are closed (a renamed or misspelt field
//! fails validation) and which stay open because they will grow, and the
//! rules that tie fields to the test (`result_rules.json`: a bulk test has
//! no transaction figures, udp_stream has datagram accounting, ...).

use std::collections::BTreeSet;

use schemars::generate::SchemaSettings;
use serde_json::{Value, json};

use crate::result::{SCHEMA, TestResult};

/// Objects left open: they will grow, and a consumer ignores what it does
/// not know (the plan, where the test ran, provenance).
pub const OPEN: &[&str] = &[
    "Spec",
    "Environment",
    "Provenance",
    "Kernel",
    "Interface",
    "Offloads",
    "Coalesce",
    "Sysctls",
];

/// The result document, `thrum.result.v1`.
pub fn result() -> Value {
    let g = SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator();
    let mut doc = g.into_root_schema_for::<TestResult>().to_value();
    let root = doc.as_object_mut().expect("a schema is an object");
    root.insert("title".into(), json!("thrum result document, version 1"));
    root.insert(
        "description".into(),
        json!(
            "What `thrum run TEST --json` prints (one document) and `thrum suite --json` prints (an array of them). Field meanings, units and which end counts what: docs/json.md. Objects whose names are the contract (counts, latency, sides, figures, intervals, summary) are closed, so a renamed or misspelt field fails validation; `spec` and `environment` are open because they will grow. Consumers should ignore top-level keys they do not know. Generated from the result types by `cargo xtask schema`."
        ),
    );
    root["properties"]["schema"] = json!({ "const": SCHEMA });
    let rules: Value =
        serde_json::from_str(include_str!("result_rules.json")).expect("result_rules.json is JSON");
    root.insert("allOf".into(), rules);
    close_defs(&mut doc, OPEN);
    unwrap_descriptions(&mut doc);
    doc
}

/// Descriptions come from doc comments wrapped at 80 columns: their line
/// breaks become spaces, a blank line stays a paragraph break.
pub fn unwrap_descriptions(v: &mut Value) {
    match v {
        Value::Object(o) => {
            for (k, x) in o.iter_mut() {
                match x {
                    Value::String(d) if k == "description" => {
                        let paras: Vec<String> =
                            d.split("\n\n").map(|p| p.replace('\n', " ")).collect();
                        *d = paras.join("\n\n");
                    }
                    _ => unwrap_descriptions(x),
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(unwrap_descriptions),
        _ => {}
    }
}

/// The schema of a document of type `T` as `Serialize` writes it: `title`,
/// its `schema` field pinned to `name`, every object closed (the root too
/// when `closed_root`) but the definitions named `open`, and descriptions
/// unwrapped.
pub fn generate<T: schemars::JsonSchema>(
    title: &str,
    name: &str,
    closed_root: bool,
    open: &[&str],
) -> Value {
    let g = SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator();
    let mut doc = g.into_root_schema_for::<T>().to_value();
    doc["title"] = title.into();
    doc["properties"]["schema"] = json!({ "const": name });
    if closed_root {
        close(&mut doc);
    }
    close_defs(&mut doc, open);
    unwrap_descriptions(&mut doc);
    doc
}

/// Close every definition of a generated schema but those named `open`.
pub fn close_defs(doc: &mut Value, open: &[&str]) {
    if let Some(defs) = doc.get_mut("$defs").and_then(Value::as_object_mut) {
        for (name, def) in defs.iter_mut() {
            if !open.contains(&name.as_str()) {
                close(def);
            }
        }
    }
}

/// An object schema with named properties admits no others.
pub fn close(s: &mut Value) {
    if let Some(o) = s.as_object_mut() {
        if o.contains_key("properties") && !o.contains_key("additionalProperties") {
            o.insert("additionalProperties".into(), Value::Bool(false));
        }
    }
}

/// The property paths a schema describes (`summary.local.cpu.per_cpu[].cpu`;
/// `[]` for an array's items, `*` for a map's values), through `$ref`s,
/// `anyOf`/`oneOf`/`allOf` and conditions, but not the root's test rules,
/// which only repeat paths the types give.
pub fn paths(schema: &Value) -> BTreeSet<String> {
    fn walk(
        s: &Value,
        defs: &Value,
        path: &str,
        chain: &mut Vec<String>,
        out: &mut BTreeSet<String>,
    ) {
        let Some(o) = s.as_object() else { return };
        if let Some(name) = o
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.rsplit('/').next())
        {
            if !chain.iter().any(|c| c == name) {
                chain.push(name.to_string());
                walk(&defs[name], defs, path, chain, out);
                chain.pop();
            }
        }
        for (k, v) in o
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            let p = if path.is_empty() {
                k.clone()
            } else {
                format!("{path}.{k}")
            };
            out.insert(p.clone());
            walk(v, defs, &p, chain, out);
        }
        if let Some(items) = o.get("items").filter(|i| i.is_object()) {
            walk(items, defs, &format!("{path}[]"), chain, out);
        }
        if let Some(more) = o.get("additionalProperties").filter(|i| i.is_object()) {
            walk(more, defs, &format!("{path}.*"), chain, out);
        }
        for k in ["allOf", "anyOf", "oneOf"] {
            for v in o.get(k).and_then(Value::as_array).into_iter().flatten() {
                walk(v, defs, path, chain, out);
            }
        }
        for k in ["if", "then", "else", "not"] {
            if let Some(v) = o.get(k) {
                walk(v, defs, path, chain, out);
            }
        }
    }
    let mut root = schema.clone();
    if let Some(o) = root.as_object_mut() {
        o.remove("allOf");
    }
    let defs = schema.get("$defs").cloned().unwrap_or(Value::Null);
    let mut out = BTreeSet::new();
    walk(&root, &defs, "", &mut Vec::new(), &mut out);
    out
}

/// The property paths the result schema has ever promised
/// (`result_paths.txt`, one a line), with those it gives now: `cargo xtask
/// schema` writes this union back, so the list only grows, and a test
/// fails when a generated schema drops one of them.
pub fn promised_paths(committed: &str) -> String {
    let mut all: BTreeSet<String> = committed
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect();
    all.extend(paths(&result()));
    let mut s = all.into_iter().collect::<Vec<_>>().join("\n");
    s.push('\n');
    s
}

/// Where the list of promised paths lives, from the workspace root.
pub const PATHS_FILE: &str = "src/export/result_paths.txt";

/// A schema as committed: pretty, with a final newline.
pub fn text(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).expect("a Value serializes");
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The schema only grows: every property path the result schema ever
    /// described (the hand-written one's 920 to begin with) is still
    /// there, and the list names every path there is now.
    #[test]
    fn no_promised_path_is_dropped() {
        let committed = include_str!("result_paths.txt");
        let now = paths(&result());
        let missing: Vec<&str> = committed
            .lines()
            .filter(|l| !l.is_empty() && !now.contains(*l))
            .collect();
        assert!(
            missing.is_empty(),
            "the result schema no longer describes {missing:?}: a field a script may read was renamed or removed"
        );
        assert!(
            committed == promised_paths(committed),
            "{PATHS_FILE} lacks paths the schema now has: run `cargo xtask schema` and commit it"
        );
    }

    /// Results as the exporters see them validate against the generated
    /// types' schema: an open-loop run with every reading, and a bulk one.
    /// Constructed, they break the rules a real run keeps (no intervals; a
    /// split by direction on udp_stream), so the rules are left out here;
    /// the e2e tests validate real runs against the whole schema.
    #[test]
    fn results_validate() {
        use crate::export::fields::tests::{bulk, full_open_loop};
        let mut schema = result();
        schema.as_object_mut().unwrap().remove("allOf");
        let v = jsonschema::validator_for(&schema).expect("the schema compiles");
        for mut r in [full_open_loop(), bulk()] {
            r.iterations = vec![crate::result::Iteration::of(1, &r)];
            let doc = serde_json::to_value(&r).unwrap();
            let errors: Vec<String> = v
                .iter_errors(&doc)
                .map(|e| format!("{e} at {}", e.instance_path))
                .collect();
            assert!(errors.is_empty(), "{}", errors.join("\n"));
        }
    }
}
