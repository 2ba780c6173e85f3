//! Every JSON Schema thrum's documents follow, generated from the types
//! that are serialized (see [`crate::export::schema`]): the list `cargo
//! xtask schema` writes to schema/, here at the top of the library because
//! the documents' types live in several layers (the result below
//! `export`, ping's beside its command).

use serde_json::Value;

/// Writes one schema.
pub type Generator = fn() -> Value;

/// Every generated schema: its file name under schema/ and its generator.
pub const SCHEMAS: &[(&str, Generator)] = &[
    ("thrum.result.v1.json", crate::export::schema::result),
    ("thrum.agg.v1.json", agg),
    ("thrum.curve.v1.json", curve),
    ("thrum.ping.v1.json", super::ping::schema),
    ("thrum.sweep.v1.json", sweep),
    ("thrum.mesh.v1.json", mesh),
];

/// `thrum mesh --json` (and --export-json): every pair's result and the
/// matrix. A pair's result keeps the result document's open objects open.
fn mesh() -> Value {
    crate::export::schema::generate::<crate::fleet::mesh::Mesh>(
        "thrum mesh --json: a test over every ordered pair of hosts, each pair's result and the matrix",
        crate::fleet::mesh::SCHEMA,
        true,
        crate::export::schema::OPEN,
    )
}

/// `thrum sweep --json` (and --export-json): the grid's cells.
fn sweep() -> Value {
    crate::export::schema::generate::<crate::sweep::Sweep>(
        "thrum sweep --json: a grid of cells, each a value of every dimension",
        crate::sweep::SCHEMA,
        true,
        &[],
    )
}

/// results.json of `thrum agg` and `thrum report` on a ramp.
fn agg() -> Value {
    crate::export::schema::generate::<crate::agg::model::AggResult>(
        "thrum agg / thrum report results.json",
        crate::agg::model::SCHEMA,
        true,
        &[],
    )
}

/// results.json of `thrum curve` and `thrum report` on a curve.
fn curve() -> Value {
    crate::export::schema::generate::<crate::curve::Curve>(
        "thrum curve / thrum report results.json of a latency-vs-throughput curve",
        crate::curve::SCHEMA,
        true,
        &[],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::schema::text;

    /// The committed schemas are what the types give.
    #[test]
    fn committed_schemas_are_generated() {
        for (name, generate) in SCHEMAS {
            let path = format!("{}/schema/{name}", env!("CARGO_MANIFEST_DIR"));
            let committed = std::fs::read_to_string(&path).unwrap_or_default();
            assert!(
                committed == text(&generate()),
                "schema/{name} differs from what the types give: run `cargo xtask schema` and commit it"
            );
        }
    }
}
