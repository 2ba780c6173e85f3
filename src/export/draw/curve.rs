//! The latency-vs-throughput curve's chart (`thrum curve`): response-time
//! percentiles on a log axis against the offered rate, in step order,
//! with the knee, the saturation point and the SLO marked and the legend
//! beside the plot.

use plotters::element::DashedPathElement;
use plotters::prelude::*;

use super::plot::{DrawResult, GRID_BOLD, GRID_LIGHT, Mark, SIZE, draw_legend, nice_ceil, render};
use crate::curve::{Curve, Point, Step};
use crate::units::{fmt_ns, fmt_si};

/// The curve's percentiles, p50 to max, and its marks.
pub const PERCENTILES: [RGBColor; 5] = [
    RGBColor(0, 160, 0),
    RGBColor(0, 110, 200),
    RGBColor(200, 120, 0),
    RGBColor(160, 0, 160),
    RGBColor(64, 64, 64),
];
pub const KNEE: RGBColor = RGBColor(0, 128, 0);
pub const SATURATION: RGBColor = RGBColor(255, 0, 0);
/// Teal, dashed: apart from every percentile's colour (p99's is orange).
pub const SLO: RGBColor = RGBColor(0, 160, 160);

/// The latency-vs-throughput chart of a curve.
pub fn svg(c: &Curve) -> String {
    render(|svg| try_curve(c, svg))
}

/// The curve chart's width for the plot; the rest, on the right, is the
/// legend's, so that it covers no point.
const CURVE_PLOT_W: u32 = 800;

fn try_curve(c: &Curve, out: &mut String) -> DrawResult {
    type Pick = fn(&crate::stats::latency::LatencySummary) -> u64;
    let series: [(&str, Pick); 5] = [
        ("p50", |l| l.p50),
        ("p90", |l| l.p90),
        ("p99", |l| l.p99),
        ("p99.9", |l| l.p99_9),
        ("max", |l| l.max),
    ];
    // Against the offered rate, in step order: the steps' offered rates
    // increase strictly, so the line never runs backwards. Against the
    // achieved rate, the steps past saturation achieve less than those
    // before and the line folded back on itself; the achieved
    // rate is the table's, and the knee's and saturation's labels.
    let mut steps: Vec<&Step> = c.steps.iter().collect();
    steps.sort_by(|a, b| a.offered_per_s.total_cmp(&b.offered_per_s));
    let sat = c.saturation.as_ref().map(|p| p.step);
    // From the saturation point on, no step keeps up: those points are
    // drawn hollow.
    let past = |s: &Step| sat.is_some_and(|k| s.index >= k);
    let points = |pick: Pick| -> Vec<((f64, f64), bool)> {
        steps
            .iter()
            .filter_map(|s| {
                let y = pick(s.latency_ns.as_ref()?).max(1) as f64;
                Some(((s.offered_per_s, y), past(s)))
            })
            .collect()
    };
    let slo_ns = c.spec.slo.map(|s| s.bound_ns as f64);
    let all: Vec<f64> = series
        .iter()
        .flat_map(|(_, p)| points(*p).into_iter().map(|x| x.0.1))
        .chain(slo_ns)
        .collect();
    // Whole decades around the data, so the log axis has labelled ticks.
    let lo = all.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = all.iter().copied().fold(0.0f64, f64::max);
    let (y_lo, y_hi) = if all.is_empty() {
        (1e3, 1e6)
    } else {
        (
            10f64.powf(lo.log10().floor()),
            10f64.powf((hi * 1.01).log10().ceil()),
        )
    };
    // To the data's extent, rounded up to a nice figure (a last step at
    // 80 k ends the axis there; its marker may touch the frame).
    let x_max = nice_ceil(
        steps
            .iter()
            .map(|s| s.offered_per_s)
            .fold(0.0f64, f64::max)
            .max(1.0),
    );
    let root = SVGBackend::with_string(out, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let (plot, side) = root.split_horizontally(CURVE_PLOT_W);
    let mut chart = ChartBuilder::on(&plot)
        .caption(
            format!("{}: response time against offered rate", c.test),
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(90)
        .build_cartesian_2d(0f64..x_max, (y_lo..y_hi).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("offered rate (transactions/s)")
        .y_desc("response time from the intended start")
        .bold_line_style(GRID_BOLD)
        .light_line_style(GRID_LIGHT)
        .x_label_formatter(&|v| fmt_si(*v))
        .y_label_formatter(&|v| fmt_ns(*v))
        .draw()?;
    // The legend's entries, drawn beside the plot once it is done.
    let mut legend: Vec<(String, RGBColor, Mark)> = Vec::new();
    for ((name, pick), colour) in series.iter().zip(PERCENTILES) {
        let pts = points(*pick);
        chart.draw_series(LineSeries::new(
            pts.iter().map(|p| p.0),
            colour.stroke_width(2),
        ))?;
        chart.draw_series(pts.into_iter().map(|(p, past)| {
            let style = if past {
                WHITE.filled()
            } else {
                colour.filled()
            };
            EmptyElement::at(p)
                + Circle::new((0, 0), 3, style)
                + Circle::new((0, 0), 3, colour.stroke_width(1))
        }))?;
        legend.push((name.to_string(), colour, Mark::Line));
    }
    type Labelled = Result<Option<String>, Box<dyn std::error::Error>>;
    let mut vertical = |p: &Option<Point>, colour: RGBColor, name: &str, y: f64| -> Labelled {
        let Some(p) = p else {
            return Ok(None);
        };
        let Some(x) = steps
            .iter()
            .find(|s| s.index == p.step)
            .map(|s| s.offered_per_s)
        else {
            return Ok(None);
        };
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(x, y_lo), (x, y_hi)],
            colour.stroke_width(2),
        )))?;
        // Left of the line in the plot's right third, so it stays inside.
        use plotters::style::text_anchor::{HPos, Pos, VPos};
        let h = if x > 0.66 * x_max {
            HPos::Right
        } else {
            HPos::Left
        };
        let style = TextStyle::from(("sans-serif", 13).into_font())
            .color(&colour)
            .pos(Pos::new(h, VPos::Top));
        chart.draw_series(std::iter::once(Text::new(
            format!(" {name}: {}/s achieved ", fmt_si(p.achieved_per_s)),
            (x, y),
            style,
        )))?;
        Ok(Some(format!("{name} (step {})", p.step + 1)))
    };
    if let Some(l) = vertical(&c.knee, KNEE, "knee", y_hi / 1.3)? {
        legend.push((l, KNEE, Mark::Line));
    }
    if let Some(l) = vertical(&c.saturation, SATURATION, "saturation", y_hi / 2.6)? {
        legend.push((l, SATURATION, Mark::Line));
    }
    if let (Some(slo), Some(ns)) = (c.spec.slo, slo_ns) {
        chart.draw_series(std::iter::once(DashedPathElement::new(
            vec![(0.0, ns), (x_max, ns)],
            8,
            5,
            SLO.stroke_width(2),
        )))?;
        legend.push((format!("SLO {slo}"), SLO, Mark::Dashed));
    }
    if sat.is_some() {
        legend.push(("past saturation".into(), PERCENTILES[4], Mark::Hollow));
    }
    draw_legend(&side, &legend)?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::curve::fixtures::{numbered, record, step};
    use crate::curve::{Slo, analyse};

    fn hex(c: RGBColor) -> String {
        format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
    }

    /// Past saturation the achieved rate falls (27k, 24k, 21k
    /// achieved of 30k, 40k, 49k offered). The curve runs against the
    /// offered rate in step order, so no line runs backwards; the x axis
    /// ends at the data's extent, rounded (50 k, not 53 k); the SLO has
    /// a colour of its own; the legend is beside the plot, over no point.
    #[test]
    fn the_curve_never_runs_backwards_and_its_legend_covers_nothing() {
        let mut c = record(numbered(vec![
            step(2000.0, 2000.0, 50_000, 300_000),
            step(10_000.0, 9990.0, 66_000, 400_000),
            step(20_000.0, 19_950.0, 150_000, 900_000),
            step(30_000.0, 27_100.0, 2_000_000, 12_000_000),
            step(40_000.0, 24_000.0, 6_000_000, 40_000_000),
            step(49_000.0, 21_000.0, 13_000_000, 80_000_000),
        ]));
        c.spec.slo = Some("p99=2ms".parse::<Slo>().unwrap());
        analyse(&mut c);
        assert_eq!(c.saturation.as_ref().map(|p| p.step), Some(3));
        let svg = svg(&c);
        let xml = roxmltree::Document::parse(&svg).unwrap();
        let attr = |n: &roxmltree::Node, a: &str| n.attribute(a).unwrap_or_default().to_string();
        let lines: Vec<(String, Vec<f64>)> = xml
            .descendants()
            .filter(|n| n.has_tag_name("polyline"))
            .map(|n| {
                let xs = attr(&n, "points")
                    .split_whitespace()
                    .map(|p| p.split(',').next().unwrap().parse().unwrap())
                    .collect();
                (attr(&n, "stroke"), xs)
            })
            .collect();
        for colour in PERCENTILES {
            let series: Vec<&Vec<f64>> = lines
                .iter()
                .filter(|(s, xs)| *s == hex(colour) && xs.len() == c.steps.len())
                .map(|(_, xs)| xs)
                .collect();
            assert_eq!(series.len(), 1, "{}", hex(colour));
            assert!(series[0].windows(2).all(|w| w[0] < w[1]), "{:?}", series[0]);
        }
        assert!(!PERCENTILES.contains(&SLO) && SLO != KNEE && SLO != SATURATION);
        assert!(lines.iter().any(|(s, _)| *s == hex(SLO)), "no SLO line");
        let texts: Vec<(f64, String)> = xml
            .descendants()
            .filter(|n| n.has_tag_name("text"))
            .map(|n| {
                (
                    attr(&n, "x").parse().unwrap(),
                    n.text().unwrap_or_default().trim().to_string(),
                )
            })
            .collect();
        let at = |want: &str| texts.iter().find(|t| t.1 == want).map(|t| t.0);
        for entry in [
            "p50",
            "p99",
            "max",
            "SLO p99 <= 2.00 ms",
            "saturation (step 4)",
        ] {
            let x = at(entry).unwrap_or_else(|| panic!("no {entry} in {texts:?}"));
            assert!(x >= CURVE_PLOT_W as f64, "{entry} at {x}");
        }
        assert!(at("offered rate (transactions/s)").is_some(), "{texts:?}");
        assert!(at("50 k").is_some() && at("55 k").is_none(), "{texts:?}");
    }
}
