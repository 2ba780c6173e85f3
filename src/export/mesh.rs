//! A mesh's matrix as a terminal table: rows send, columns receive, each
//! cell the pair's figure of merit (Mbit/s for a bulk test, transactions/s
//! for a request/response one), `-` on the diagonal, and a failed pair's
//! cell naming its error by a number whose line under the table says it
//! whole (an error is a sentence; a column is a few characters).

use std::fmt::Write;

use crate::fleet::mesh::Mesh;

/// The matrix's unit as people read it, and the factor from the
/// document's (bit/s → Mbit/s).
pub fn shown_unit(unit: &str) -> (&'static str, f64) {
    if unit == "bit/s" {
        ("Mbit/s", 1e-6)
    } else {
        ("trans/s", 1.0)
    }
}

/// A figure in a cell: one decimal below 10,000, whole above.
fn shown(v: f64) -> String {
    if v >= 10_000.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// The table, and under it each failed pair's error.
pub fn table(m: &Mesh) -> String {
    let (unit, scale) = shown_unit(&m.matrix.unit);
    let mut errors: Vec<String> = Vec::new();
    let mut rows: Vec<Vec<String>> = Vec::new();
    for (s, row) in m.matrix.cells.iter().enumerate() {
        let mut line = vec![m.hosts[s].clone()];
        for (r, cell) in row.iter().enumerate() {
            line.push(match cell {
                None => "-".into(),
                Some(c) => match (c.value, &c.error) {
                    (_, Some(e)) => {
                        errors.push(format!(
                            "[{}] {} -> {}: {e}",
                            errors.len() + 1,
                            m.hosts[s],
                            m.hosts[r]
                        ));
                        format!("error [{}]", errors.len())
                    }
                    (Some(v), None) => shown(v * scale),
                    (None, None) => "-".into(),
                },
            });
        }
        rows.push(line);
    }
    let mut head = vec!["send \\ receive".to_string()];
    head.extend(m.hosts.iter().cloned());
    let widths: Vec<usize> = (0..head.len())
        .map(|k| {
            rows.iter()
                .map(|r| r[k].len())
                .chain([head[k].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = format!(
        "{} mesh of {} hosts, {} pair(s) at a time: {unit} (rows send, columns receive)\n",
        m.test,
        m.hosts.len(),
        m.parallel
    );
    for line in std::iter::once(&head).chain(&rows) {
        for (k, w) in widths.iter().enumerate() {
            if k == 0 {
                let _ = write!(out, "{:<w$}", line[k]);
            } else {
                let _ = write!(out, "  {:>w$}", line[k]);
            }
        }
        out.push('\n');
    }
    for e in errors {
        out.push_str(&e);
        out.push('\n');
    }
    if m.interrupted {
        out.push_str("interrupted: the pairs after the cut did not run\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::mesh::{Matrix, MatrixCell};

    #[test]
    fn rows_send_columns_receive_and_errors_are_numbered() {
        let cell = |v: Option<f64>, e: Option<&str>| {
            Some(MatrixCell {
                value: v,
                error: e.map(str::to_string),
            })
        };
        let m = Mesh {
            schema: crate::fleet::mesh::SCHEMA.into(),
            test: "tcp_stream".into(),
            hosts: vec!["a".into(), "b".into()],
            parallel: 1,
            matrix: Matrix {
                figure: "throughput_bps".into(),
                unit: "bit/s".into(),
                cells: vec![
                    vec![None, cell(Some(19.1e6), None)],
                    vec![cell(None, Some("agent b: refused")), None],
                ],
            },
            pairs: Vec::new(),
            interrupted: false,
        };
        let t = table(&m);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].contains("Mbit/s"), "{t}");
        assert!(
            lines[2].starts_with("a ") && lines[2].ends_with("19.1"),
            "{t}"
        );
        assert!(lines[3].contains("error [1]"), "{t}");
        assert_eq!(lines[4], "[1] b -> a: agent b: refused");
    }
}
