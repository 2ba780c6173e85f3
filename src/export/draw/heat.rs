//! A heat map: a table of figures, rows down and columns across, each
//! cell coloured by its figure on one scale from the table's least to its
//! most, with the figure written in it. A grid's shape (a sweep's rate
//! climbing with burst and falling with flows, a mesh's one slow pair)
//! shows at a glance, where the numbers alone need reading one by one. A
//! cell without a figure (failed, cut, the diagonal of a mesh) is grey
//! and says why in a word. `sweep` and `mesh` turn their tables into a
//! [`Heat`].

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::plot::{DrawResult, render};

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

/// A table to draw.
pub struct Heat {
    /// The first line, before `: UNIT`.
    pub title: String,
    /// The second line: what the rows and columns are.
    pub subtitle: String,
    /// The figures' unit, for the title and the scale.
    pub unit: String,
    /// Each row's heading, top to bottom, and each column's, left to right.
    pub row_headings: Vec<String>,
    pub col_headings: Vec<String>,
    /// The cells, `[row][column]`.
    pub cells: Vec<Vec<HeatCell>>,
}

/// One cell of a [`Heat`].
pub enum HeatCell {
    /// A figure, coloured on the scale, with a note under it.
    Figure(f64, Option<&'static str>),
    /// No figure: grey, with a word (`error`, `cut`, `-`).
    Blank(String),
}

/// A figure written in a cell: whole above 100, else to 3 significant digits.
fn shown(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

/// The heat map of `h`.
pub fn svg(h: &Heat) -> String {
    render(|out| draw(h, out))
}

const CELL_H: u32 = 54;
const HEAD_W: u32 = 160;
const TOP: u32 = 80;
const BOTTOM: u32 = 70;
const WIDTH: u32 = 900;

fn draw(h: &Heat, out: &mut String) -> DrawResult {
    let cols = h.col_headings.len().max(1) as u32;
    let rows = h.cells.len().max(1) as u32;
    let cell_w = (WIDTH - HEAD_W - 20) / cols;
    let height = TOP + rows * CELL_H + BOTTOM;
    let root = SVGBackend::with_string(out, (WIDTH, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let values: Vec<f64> = h
        .cells
        .iter()
        .flatten()
        .filter_map(|c| match c {
            HeatCell::Figure(v, _) => Some(*v),
            HeatCell::Blank(_) => None,
        })
        .collect();
    let unit = h.unit.as_str();
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(0.0, f64::max);
    let span = if hi > lo { hi - lo } else { 1.0 };
    let font = |size: u32, h: HPos| {
        TextStyle::from(("sans-serif", size).into_font()).pos(Pos::new(h, VPos::Center))
    };
    root.draw(&Text::new(
        format!("{}: {unit}", h.title),
        (10, 18),
        font(16, HPos::Left),
    ))?;
    root.draw(&Text::new(
        h.subtitle.clone(),
        (10, 42),
        font(13, HPos::Left),
    ))?;
    for (k, heading) in h.col_headings.iter().enumerate() {
        let x = (HEAD_W + k as u32 * cell_w + cell_w / 2) as i32;
        root.draw(&Text::new(
            heading.clone(),
            (x, (TOP - 14) as i32),
            font(14, HPos::Center),
        ))?;
    }
    for (r, row) in h.cells.iter().enumerate() {
        let y0 = (TOP + r as u32 * CELL_H) as i32;
        root.draw(&Text::new(
            h.row_headings.get(r).cloned().unwrap_or_default(),
            ((HEAD_W - 10) as i32, y0 + CELL_H as i32 / 2),
            font(14, HPos::Right),
        ))?;
        for (k, c) in row.iter().enumerate() {
            let x0 = (HEAD_W + k as u32 * cell_w) as i32;
            let rect = [
                (x0 + 1, y0 + 1),
                (x0 + cell_w as i32 - 1, y0 + CELL_H as i32 - 1),
            ];
            let (fill, words) = match c {
                HeatCell::Figure(v, note) => (colour((v - lo) / span), (shown(*v), *note)),
                HeatCell::Blank(why) => (EMPTY, (why.clone(), None)),
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
