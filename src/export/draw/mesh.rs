//! A mesh's matrix as a heat map (`thrum mesh --chart FILE`): rows send,
//! columns receive, each pair coloured by its figure of merit on one
//! scale, drawn by [`heat`]; the diagonal and a failed pair are grey.

use super::heat::{self, Heat, HeatCell};
use crate::export::mesh::shown_unit;
use crate::fleet::mesh::Mesh;

/// The heat map of `m`'s matrix.
pub fn svg(m: &Mesh) -> String {
    let (unit, scale) = shown_unit(&m.matrix.unit);
    let cells = m
        .matrix
        .cells
        .iter()
        .map(|row| {
            row.iter()
                .map(|c| match c {
                    None => HeatCell::Blank("-".into()),
                    Some(c) => match (c.value, &c.error) {
                        (Some(v), None) => HeatCell::Figure(v * scale, None),
                        _ => HeatCell::Blank("error".into()),
                    },
                })
                .collect()
        })
        .collect();
    heat::svg(&Heat {
        title: format!("{} mesh of {} hosts", m.test, m.hosts.len()),
        subtitle: "rows send, columns receive".into(),
        unit: unit.into(),
        row_headings: m.hosts.clone(),
        col_headings: m.hosts.clone(),
        cells,
    })
}
