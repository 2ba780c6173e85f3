//! A sweep's table as a heat map (`thrum report sweep.json --out DIR`):
//! the rows and columns of one of its 2-D tables
//! ([`crate::export::sweep::tables`]), each cell coloured by its figure of
//! merit (transactions/s, or Mbit/s for a stream test), drawn by [`heat`].
//! A rate that is not a packet rate is still drawn (it is the
//! transactions/s measured) and says so under its number; a cell that
//! failed or was cut is grey.

use super::heat::{self, Heat, HeatCell};
use crate::export::sweep::Table;
use crate::sweep::Cell;

/// A cell's figure of merit and its unit, where it has one.
pub fn merit(c: &Cell) -> Option<(f64, &'static str)> {
    if c.error.is_some() || c.interrupted {
        return None;
    }
    match (c.transactions_per_s, c.throughput_bps) {
        (Some(t), _) => Some((t, "transactions/s")),
        (None, Some(b)) => Some((b / 1e6, "Mbit/s")),
        _ => None,
    }
}

/// The heat map of table `t`.
pub fn svg(t: &Table) -> String {
    let unit = t
        .cells
        .iter()
        .flatten()
        .flatten()
        .find_map(|c| merit(c))
        .map_or("transactions/s", |m| m.1);
    let cells = t
        .cells
        .iter()
        .map(|row| {
            row.iter()
                .map(|c| match c.map(|c| (c, merit(c))) {
                    Some((c, Some((v, _)))) => {
                        HeatCell::Figure(v, c.why_na().map(|_| "not a packet rate"))
                    }
                    Some((c, None)) => {
                        HeatCell::Blank(if c.interrupted { "cut" } else { "error" }.into())
                    }
                    None => HeatCell::Blank("-".into()),
                })
                .collect()
        })
        .collect();
    heat::svg(&Heat {
        title: t.title.clone(),
        subtitle: format!("rows {}, columns {}", t.rows, t.cols),
        unit: unit.into(),
        row_headings: t
            .row_values
            .iter()
            .map(|v| format!("{} {v}", t.rows))
            .collect(),
        col_headings: (0..t.col_values.len()).map(|k| t.col_heading(k)).collect(),
        cells,
    })
}
