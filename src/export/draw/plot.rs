//! The plot primitives every chart draws with (plotters' SVG backend):
//! [`render`], which turns a drawing error into an SVG that shows it and
//! makes every chart scale to its container (a `viewBox` and a width of
//! 100 %, no fixed size), the light grid, the legend beside a plot
//! ([`Mark`], [`draw_legend`]), a nice axis end ([`nice_ceil`]) and an
//! axis unit picked from the data's range so that the ticks read plainly
//! in the unit the axis names ([`AxisUnit`]). A chart of its own is a file
//! beside this one.

use plotters::element::DashedPathElement;
use plotters::prelude::*;

/// The grid: light enough that the data reads first.
pub const GRID_BOLD: RGBColor = RGBColor(215, 215, 215);
pub const GRID_LIGHT: RGBColor = RGBColor(242, 242, 242);

/// The size of a chart of one figure over time (the aggregate's, the
/// curve's, the history's).
pub const SIZE: (u32, u32) = (1000, 480);

/// An SVG drawn by `f`, or one that shows the error; either scales to
/// its container ([`scalable`]).
pub fn render(f: impl FnOnce(&mut String) -> DrawResult) -> String {
    let mut svg = String::new();
    if let Err(e) = f(&mut svg) {
        // Drawing into a String cannot fail for I/O; a plotters error here is a bug.
        return format!(
            "<svg width=\"100%\" viewBox=\"0 0 600 30\" xmlns=\"http://www.w3.org/2000/svg\"><text x=\"10\" y=\"20\">chart error: {}</text></svg>",
            crate::text::escape_markup(&e.to_string())
        );
    }
    scalable(&svg)
}

/// The SVG with its root's fixed `width` and `height` replaced by a width
/// of 100 %: the `viewBox` plotters writes keeps the drawing's
/// proportions, so the chart fills the page's column or the browser's
/// window, on a phone as on a wide screen, instead of overflowing one and
/// leaving the other half empty.
pub fn scalable(svg: &str) -> String {
    let Some(start) = svg.find("<svg") else {
        return svg.to_string();
    };
    let Some(len) = svg[start..].find('>') else {
        return svg.to_string();
    };
    let head = &svg[start..start + len];
    if !head.contains("viewBox=") {
        return svg.to_string();
    }
    let mut kept: Vec<&str> = Vec::new();
    for attr in head.split(' ') {
        if !(attr.starts_with("width=") || attr.starts_with("height=")) {
            kept.push(attr);
        }
    }
    let mut head = kept.join(" ");
    head.insert_str("<svg".len(), " width=\"100%\"");
    format!("{}{head}{}", &svg[..start], &svg[start + len..])
}

/// The unit an axis is drawn in: its name (`µs`, `Gbit/s`) and how many of
/// the data's own unit make one. Picked from the largest value drawn, so
/// that the ticks are plain numbers of the unit the axis names ("latency
/// (µs)" with ticks 0 to 40, not "latency (ns)" with ticks in µs and ms).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AxisUnit {
    pub name: &'static str,
    pub per: f64,
}

impl AxisUnit {
    /// The largest of `units` (smallest first) that `max` fills at least once.
    fn pick(max: f64, units: &[(&'static str, f64)]) -> AxisUnit {
        let (name, per) = units.iter().rev().find(|u| max >= u.1).unwrap_or(&units[0]);
        AxisUnit { name, per: *per }
    }

    /// A time in ns: ns, µs, ms or s.
    pub fn time_ns(max_ns: f64) -> AxisUnit {
        Self::pick(max_ns, &[("ns", 1.0), ("µs", 1e3), ("ms", 1e6), ("s", 1e9)])
    }

    /// A rate in bit/s: bit/s to Tbit/s.
    pub fn bits_per_s(max: f64) -> AxisUnit {
        Self::pick(
            max,
            &[
                ("bit/s", 1.0),
                ("kbit/s", 1e3),
                ("Mbit/s", 1e6),
                ("Gbit/s", 1e9),
                ("Tbit/s", 1e12),
            ],
        )
    }

    /// A rate whose name says its unit (`transactions/s`): as is (no
    /// name), in thousands or in millions.
    pub fn per_s(max: f64) -> AxisUnit {
        Self::pick(max, &[("", 1.0), ("thousands", 1e3), ("millions", 1e6)])
    }

    /// `v` (in the data's own unit) in this unit.
    pub fn of(self, v: f64) -> f64 {
        v / self.per
    }
}

/// A tick's number: at most three decimals, trailing zeros dropped (`0.5`,
/// `12`, `0.025`), a whole number above 100.
pub fn tick(v: f64) -> String {
    if v.abs() >= 100.0 {
        return format!("{v:.0}");
    }
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" { "0".into() } else { s.into() }
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
    draw_legend_at(area, entries, 60)
}

/// [`draw_legend`] with its first entry `top` pixels down the area (a
/// legend beside each panel of a stacked chart starts near its top).
pub fn draw_legend_at(
    area: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    entries: &[(String, RGBColor, Mark)],
    top: i32,
) -> DrawResult {
    let (x, mut y) = (8, top);
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
    fn charts_scale_to_their_container() {
        let svg = render(|out| {
            let root = SVGBackend::with_string(out, (1000, 470)).into_drawing_area();
            root.fill(&WHITE)?;
            root.present()?;
            Ok(())
        });
        let head = &svg[..svg.find('>').unwrap()];
        assert!(head.contains(" width=\"100%\""), "{head}");
        assert!(head.contains("viewBox=\"0 0 1000 470\""), "{head}");
        assert!(!head.contains("height="), "{head}");
        assert!(!head.contains("width=\"1000\""), "{head}");
        roxmltree::Document::parse(&svg).unwrap();
        let broken = render(|_| Err("a bug".into()));
        assert!(broken.contains("viewBox=") && broken.contains("chart error: a bug"));
    }

    #[test]
    fn axis_units_follow_the_data() {
        assert_eq!(AxisUnit::time_ns(57_343.0).name, "µs");
        assert_eq!(AxisUnit::time_ns(3_500_000.0).name, "ms");
        assert_eq!(AxisUnit::time_ns(900.0).name, "ns");
        assert_eq!(AxisUnit::time_ns(12e9).of(12e9), 12.0);
        assert_eq!(AxisUnit::bits_per_s(6.2e9).name, "Gbit/s");
        assert_eq!(AxisUnit::bits_per_s(0.0).name, "bit/s");
        assert_eq!(AxisUnit::per_s(58_000.0).name, "thousands");
        assert_eq!(AxisUnit::per_s(580.0).name, "");
        assert_eq!(
            [0.5, 12.0, 0.025, 250.0, 1.2346, -0.0].map(tick),
            ["0.5", "12", "0.025", "250", "1.235", "0"]
        );
    }

    #[test]
    fn axis_ends_are_nice() {
        assert_eq!(nice_ceil(27_540.0), 30_000.0);
        assert_eq!(nice_ceil(49_980.0), 50_000.0);
        assert_eq!(nice_ceil(1020.0), 1200.0);
        assert_eq!(nice_ceil(1000.0), 1000.0);
        assert_eq!(nice_ceil(0.0), 1.0);
    }
}
