//! `thrum history --chart`: one figure of the stored runs over time, drawn
//! with plotters as the other charts ([`super::plot`]'s grid, the
//! aggregate chart's line colour).
//! Latency is drawn SmokePing's way: the median as a line, the spread
//! around it as bands (p10–p90 dark, up to p99 light) where the runs carry
//! them.

use plotters::prelude::*;

use super::agg::LINE;
use super::plot::{DrawResult, GRID_BOLD, GRID_LIGHT, SIZE, render};

/// One run on the chart.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Point {
    /// Unix seconds.
    pub time: f64,
    /// The figure (latency: the median).
    pub value: f64,
    /// Latency: p10 and p90.
    pub band: Option<(f64, f64)>,
    /// Latency: p99.
    pub p99: Option<f64>,
}

/// The bands' colours: the inner (p10–p90) darker than the outer (p99).
pub const BAND_INNER: RGBColor = RGBColor(120, 180, 120);
pub const BAND_OUTER: RGBColor = RGBColor(200, 225, 200);

/// The SVG of `points` (oldest first) of the figure `what` in `unit`.
pub fn svg(what: &str, unit: &str, points: &[Point]) -> String {
    render(|out| draw(what, unit, points, out))
}

fn label(v: f64, unit: &str) -> String {
    match unit {
        "bit/s" => crate::units::BitsPerSec(v).to_string(),
        "ns" => crate::units::fmt_ns(v),
        "%" => format!("{v:.1} %"),
        _ => crate::units::fmt_si(v),
    }
}

fn draw(what: &str, unit: &str, points: &[Point], out: &mut String) -> DrawResult {
    let t0 = points.first().map_or(0.0, |p| p.time);
    let t1 = points.last().map_or(1.0, |p| p.time).max(t0 + 1.0);
    let pad = (t1 - t0) * 0.03;
    let top = points
        .iter()
        .map(|p| {
            p.p99
                .unwrap_or(0.0)
                .max(p.value)
                .max(p.band.map_or(0.0, |b| b.1))
        })
        .fold(0.0f64, f64::max);
    let y_max = if top > 0.0 { top * 1.12 } else { 1.0 };
    let root = SVGBackend::with_string(out, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let title = format!("{what}: {} runs", points.len());
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(90)
        .build_cartesian_2d((t0 - pad)..(t1 + pad), 0f64..y_max)?;
    let x_label = |t: &f64| {
        let s = crate::units::fmt_local_time(*t, true);
        s.split('.').next().unwrap_or_default().to_string()
    };
    let y_label = |v: &f64| label(*v, unit);
    chart
        .configure_mesh()
        .x_desc("time of the run")
        .y_desc(if unit.is_empty() {
            what.to_string()
        } else {
            format!("{what} ({unit})")
        })
        .x_labels(5)
        .x_label_formatter(&x_label)
        .y_label_formatter(&y_label)
        .bold_line_style(GRID_BOLD)
        .light_line_style(GRID_LIGHT)
        .draw()?;
    // Bands as polygons between consecutive runs (a lone run: a bar).
    let band = |lo: &dyn Fn(&Point) -> Option<f64>, hi: &dyn Fn(&Point) -> Option<f64>| {
        let w = (t1 - t0) * 0.004;
        let mut polys = Vec::new();
        for (i, p) in points.iter().enumerate() {
            let (Some(l), Some(h)) = (lo(p), hi(p)) else {
                continue;
            };
            let next = points
                .get(i + 1)
                .and_then(|q| Some((q.time, lo(q)?, hi(q)?)));
            match next {
                Some((tq, lq, hq)) => {
                    polys.push(vec![(p.time, l), (tq, lq), (tq, hq), (p.time, h)])
                }
                None if i == 0 || lo(&points[i - 1]).is_none() => polys.push(vec![
                    (p.time - w, l),
                    (p.time + w, l),
                    (p.time + w, h),
                    (p.time - w, h),
                ]),
                None => {}
            }
        }
        polys
    };
    let outer = band(&|p| p.band.map(|b| b.0), &|p| p.p99);
    if !outer.is_empty() {
        chart
            .draw_series(
                outer
                    .into_iter()
                    .map(|v| Polygon::new(v, BAND_OUTER.filled())),
            )?
            .label("p10 to p99")
            .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 20, y + 5)], BAND_OUTER.filled()));
    }
    let inner = band(&|p| p.band.map(|b| b.0), &|p| p.band.map(|b| b.1));
    if !inner.is_empty() {
        chart
            .draw_series(
                inner
                    .into_iter()
                    .map(|v| Polygon::new(v, BAND_INNER.filled())),
            )?
            .label("p10 to p90")
            .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 20, y + 5)], BAND_INNER.filled()));
    }
    let line = points.iter().map(|p| (p.time, p.value));
    // The median of a latency drawn with its bands; any other figure by name.
    let banded = points.iter().any(|p| p.band.is_some() || p.p99.is_some());
    let name = if banded { "median" } else { what };
    chart
        .draw_series(LineSeries::new(line.clone(), LINE.stroke_width(2)))?
        .label(name)
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], LINE.stroke_width(2)));
    chart.draw_series(line.map(|(x, y)| Circle::new((x, y), 3, LINE.filled())))?;
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}
