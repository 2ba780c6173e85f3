//! The plot primitives every chart draws with (plotters' SVG backend):
//! [`render`], which turns a drawing error into an SVG that shows it, the
//! light grid, the legend beside a plot ([`Mark`], [`draw_legend`]) and a
//! nice axis end ([`nice_ceil`]). A chart of its own is a file beside this
//! one.

use plotters::element::DashedPathElement;
use plotters::prelude::*;

/// The grid: light enough that the data reads first.
pub const GRID_BOLD: RGBColor = RGBColor(215, 215, 215);
pub const GRID_LIGHT: RGBColor = RGBColor(242, 242, 242);

/// The size of a chart of one figure over time (the aggregate's, the
/// curve's, the history's).
pub const SIZE: (u32, u32) = (1000, 480);

/// An SVG drawn by `f`, or one that shows the error.
pub fn render(f: impl FnOnce(&mut String) -> DrawResult) -> String {
    let mut svg = String::new();
    if let Err(e) = f(&mut svg) {
        // Drawing into a String cannot fail for I/O; a plotters error here is a bug.
        return format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\"><text x=\"10\" y=\"20\">chart error: {}</text></svg>",
            crate::text::escape_markup(&e.to_string())
        );
    }
    svg
}

/// What drawing a chart into a `String` gives: an error is plotters'.
pub type DrawResult = Result<(), Box<dyn std::error::Error>>;

/// The least of 1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8 times a power of ten
/// that is at least `v`: an axis end a reader can take in, close to the
/// data's extent.
pub fn nice_ceil(v: f64) -> f64 {
    if v.is_nan() || v <= 0.0 {
        return 1.0;
    }
    let p = 10f64.powf(v.log10().floor());
    [1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0]
        .into_iter()
        .map(|m| m * p)
        .find(|&x| x >= v * (1.0 - 1e-12))
        .unwrap_or(10.0 * p)
}

/// How a legend entry shows its series.
pub enum Mark {
    Line,
    /// A thin line (a part under its sum).
    Thin,
    Dashed,
    Hollow,
    /// A thick band: a shaded span of the chart.
    Band,
}

/// The legend in its own area (beside the plot, not over it): one entry a
/// line, its mark then its name.
pub fn draw_legend(
    area: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    entries: &[(String, RGBColor, Mark)],
) -> DrawResult {
    let (x, mut y) = (8, 60);
    for (name, colour, mark) in entries {
        let (a, b) = ((x, y), (x + 24, y));
        match mark {
            Mark::Line => area.draw(&PathElement::new(vec![a, b], colour.stroke_width(2)))?,
            Mark::Thin => area.draw(&PathElement::new(vec![a, b], colour.stroke_width(1)))?,
            Mark::Band => area.draw(&PathElement::new(vec![a, b], colour.stroke_width(10)))?,
            Mark::Dashed => area.draw(&DashedPathElement::new(
                vec![a, b],
                6,
                4,
                colour.stroke_width(2),
            ))?,
            Mark::Hollow => {
                area.draw(&Circle::new((x + 12, y), 3, WHITE.filled()))?;
                area.draw(&Circle::new((x + 12, y), 3, colour.stroke_width(1)))?
            }
        }
        area.draw(&Text::new(
            name.clone(),
            (x + 32, y - 7),
            ("sans-serif", 14).into_font(),
        ))?;
        y += 22;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_ends_are_nice() {
        assert_eq!(nice_ceil(27_540.0), 30_000.0);
        assert_eq!(nice_ceil(49_980.0), 50_000.0);
        assert_eq!(nice_ceil(1020.0), 1200.0);
        assert_eq!(nice_ceil(1000.0), 1000.0);
        assert_eq!(nice_ceil(0.0), 1.0);
    }
}
