//! A sweep's table as a heat map (`thrum report sweep.json --out DIR`):
//! the rows and columns of one of its 2-D tables
//! ([`crate::export::sweep::tables`]), each cell coloured by its figure of
//! merit (transactions/s, or Mbit/s for a stream test) on one scale from
//! the table's least to its most, with the figure written in it. Where a
//! grid's rate climbs with burst and falls with flows shows at a glance,
//! where the numbers alone need reading one by one. A rate that is not a
//! packet rate is still drawn (it is the transactions/s measured) and says
//! so under its number; a cell that failed or was cut is grey.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::plot::{DrawResult, render};
use crate::export::sweep::Table;
use crate::sweep::Cell;

/// A cell without a figure (failed, cut, or missing from the grid).
pub const EMPTY: RGBColor = RGBColor(225, 225, 225);

/// The scale's colours, least to most (ColorBrewer's YlGnBu, light to
/// dark: the larger rate the darker, as a reader of a heat map expects).
const SCALE: [RGBColor; 5] = [
    RGBColor(255, 255, 204),
    RGBColor(161, 218, 180),
    RGBColor(65, 182, 196),
    RGBColor(44, 127, 184),
    RGBColor(37, 52, 148),
];

/// The colour of `t` (0 to 1) on the scale.
pub fn colour(t: f64) -> RGBColor {
    let t = t.clamp(0.0, 1.0) * (SCALE.len() - 1) as f64;
    let i = (t.floor() as usize).min(SCALE.len() - 2);
    let f = t - i as f64;
    let (a, b) = (SCALE[i], SCALE[i + 1]);
    let mix = |x: u8, y: u8| (x as f64 + (y as f64 - x as f64) * f).round() as u8;
    RGBColor(mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

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

/// A figure written in a cell: whole above 100, else to 3 significant digits.
fn shown(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

/// The heat map of table `t`.
pub fn svg(t: &Table) -> String {
    render(|out| draw(t, out))
}

const CELL_H: u32 = 54;
const HEAD_W: u32 = 130;
const TOP: u32 = 80;
const BOTTOM: u32 = 70;
const WIDTH: u32 = 900;

fn draw(t: &Table, out: &mut String) -> DrawResult {
    let cols = t.col_values.len().max(1) as u32;
    let rows = t.cells.len().max(1) as u32;
    let cell_w = (WIDTH - HEAD_W - 20) / cols;
    let height = TOP + rows * CELL_H + BOTTOM;
    let root = SVGBackend::with_string(out, (WIDTH, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let values: Vec<(f64, &str)> = t
        .cells
        .iter()
        .flatten()
        .flatten()
        .filter_map(|c| merit(c))
        .collect();
    let unit = values.first().map_or("transactions/s", |v| v.1);
    let lo = values.iter().map(|v| v.0).fold(f64::INFINITY, f64::min);
    let hi = values.iter().map(|v| v.0).fold(0.0, f64::max);
    let span = if hi > lo { hi - lo } else { 1.0 };
    let font = |size: u32, h: HPos| {
        TextStyle::from(("sans-serif", size).into_font()).pos(Pos::new(h, VPos::Center))
    };
    root.draw(&Text::new(
        format!("{}: {unit}", t.title),
        (10, 18),
        font(16, HPos::Left),
    ))?;
    root.draw(&Text::new(
        format!("rows {}, columns {}", t.rows, t.cols),
        (10, 42),
        font(13, HPos::Left),
    ))?;
    for k in 0..cols as usize {
        let x = (HEAD_W + k as u32 * cell_w + cell_w / 2) as i32;
        root.draw(&Text::new(
            t.col_heading(k),
            (x, (TOP - 14) as i32),
            font(14, HPos::Center),
        ))?;
    }
    for (r, row) in t.cells.iter().enumerate() {
        let y0 = (TOP + r as u32 * CELL_H) as i32;
        root.draw(&Text::new(
            format!("{} {}", t.rows, t.row_values[r]),
            ((HEAD_W - 10) as i32, y0 + CELL_H as i32 / 2),
            font(14, HPos::Right),
        ))?;
        for (k, c) in row.iter().enumerate() {
            let x0 = (HEAD_W + k as u32 * cell_w) as i32;
            let rect = [
                (x0 + 1, y0 + 1),
                (x0 + cell_w as i32 - 1, y0 + CELL_H as i32 - 1),
            ];
            let (fill, words) = match c.map(|c| (c, merit(c))) {
                Some((c, Some((v, _)))) => {
                    let note = if c.why_na().is_some() {
                        Some("not a packet rate")
                    } else {
                        None
                    };
                    (colour((v - lo) / span), (shown(v), note))
                }
                Some((c, None)) => {
                    let why = if c.interrupted { "cut" } else { "error" };
                    (EMPTY, (why.to_string(), None))
                }
                None => (EMPTY, ("-".to_string(), None)),
            };
            root.draw(&Rectangle::new(rect, fill.filled()))?;
            // Dark text on the light end of the scale, white on the dark.
            let luma = 0.299 * fill.0 as f64 + 0.587 * fill.1 as f64 + 0.114 * fill.2 as f64;
            let ink = if luma > 140.0 { BLACK } else { WHITE };
            let cx = x0 + cell_w as i32 / 2;
            let cy = y0 + CELL_H as i32 / 2;
            let (main_y, note_y) = match words.1 {
                Some(_) => (cy - 8, cy + 12),
                None => (cy, cy),
            };
            root.draw(&Text::new(
                words.0,
                (cx, main_y),
                font(15, HPos::Center).color(&ink),
            ))?;
            if let Some(n) = words.1 {
                root.draw(&Text::new(
                    n,
                    (cx, note_y),
                    font(11, HPos::Center).color(&ink),
                ))?;
            }
        }
    }
    // The scale: least to most, under the table.
    let y = (TOP + rows * CELL_H + 24) as i32;
    let (x0, x1) = (HEAD_W as i32, (WIDTH - 20) as i32);
    let steps = 60;
    for i in 0..steps {
        let a = x0 + (x1 - x0) * i / steps;
        let b = x0 + (x1 - x0) * (i + 1) / steps;
        root.draw(&Rectangle::new(
            [(a, y), (b, y + 14)],
            colour(i as f64 / (steps - 1) as f64).filled(),
        ))?;
    }
    if !values.is_empty() {
        root.draw(&Text::new(shown(lo), (x0, y + 28), font(12, HPos::Left)))?;
        root.draw(&Text::new(shown(hi), (x1, y + 28), font(12, HPos::Right)))?;
        root.draw(&Text::new(
            unit,
            ((x0 + x1) / 2, y + 28),
            font(12, HPos::Center),
        ))?;
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scale_runs_light_to_dark() {
        assert_eq!(colour(0.0), SCALE[0]);
        assert_eq!(colour(1.0), SCALE[4]);
        assert_eq!(colour(2.0), SCALE[4]);
        let luma = |c: RGBColor| c.0 as u32 + c.1 as u32 + c.2 as u32;
        assert!(
            (0..10).all(|i| luma(colour(i as f64 / 10.0)) >= luma(colour((i + 1) as f64 / 10.0)))
        );
    }
}
