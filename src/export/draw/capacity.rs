//! capacity's dispersion histogram as SVG (`thrum run capacity --chart`):
//! the per-train capacity estimates (each gap of the trains' second
//! halves, as the rate that frame over that gap gives) on a log rate axis,
//! with the estimate (the mode), its interval and a recognised token
//! bucket marked, one colour per direction measured. The JSON carries the
//! same bins (`summary.capacity_by_direction.*.dispersion_histogram`);
//! the picture shows at a glance whether the mode stands alone or cross
//! traffic spread the gaps into several.

use plotters::prelude::*;

use super::plot::{DrawResult, GRID_BOLD, GRID_LIGHT, render};
use crate::result::{CapacityEstimate, TestResult};
use crate::units::{BitsPerSec, fmt_si};

/// Client to server and server to client, as the mix chart's up and down.
pub const UP: RGBColor = super::mix::UP;
pub const DOWN: RGBColor = super::mix::DOWN;
/// A recognised token bucket's burst rate.
pub const BUCKET: RGBColor = RGBColor(230, 140, 0);

/// The SVG of a capacity result; a note instead of bars where no direction
/// had an estimate.
pub fn svg(r: &TestResult) -> String {
    render(|out| try_svg(r, out))
}

/// A rate for an axis tick or a label: SI prefix, bit/s.
fn bps(v: f64) -> String {
    let si = fmt_si(v);
    let sep = if si.ends_with(|c: char| c.is_ascii_digit()) {
        " "
    } else {
        ""
    };
    format!("{si}{sep}bit/s")
}

/// A mark's label: to the right of the mark, or to its left in the right
/// third of the (log) axis, so that it stays on the chart.
fn label_style(x: f64, lo: f64, hi: f64, size: u32) -> TextStyle<'static> {
    use plotters::style::text_anchor::{HPos, Pos, VPos};
    let h = if (x / lo).ln() / (hi / lo).ln() > 0.66 {
        HPos::Right
    } else {
        HPos::Left
    };
    TextStyle::from(("sans-serif", size).into_font()).pos(Pos::new(h, VPos::Top))
}

fn try_svg(r: &TestResult, out: &mut String) -> DrawResult {
    let dirs: Vec<(&str, RGBColor, &CapacityEstimate)> = r
        .summary
        .capacity_by_direction
        .iter()
        .flat_map(|d| {
            [
                d.c2s.as_ref().map(|e| ("up (client to server)", UP, e)),
                d.s2c.as_ref().map(|e| ("down (server to client)", DOWN, e)),
            ]
        })
        .flatten()
        .collect();
    // The axis spans every bin and mark, with a little room either side.
    let rates = dirs.iter().flat_map(|(_, _, e)| {
        e.dispersion_histogram
            .iter()
            .flat_map(|b| [b.low_bps, b.high_bps])
            .chain(e.shaper.map(|s| s.burst_rate_bps))
            .chain(e.capacity_interval_bps)
    });
    let (lo, hi) = rates.fold((f64::INFINITY, 0.0f64), |(lo, hi), x| {
        (lo.min(x), hi.max(x))
    });
    let (x_lo, x_hi) = if lo.is_finite() && hi > lo {
        (lo / 1.25, hi * 1.25)
    } else {
        (1e6, 1e10)
    };
    let y_max = dirs
        .iter()
        .flat_map(|(_, _, e)| e.dispersion_histogram.iter().map(|b| b.count))
        .max()
        .unwrap_or(1)
        .max(1) as f64
        * 1.25;
    let root = SVGBackend::with_string(out, (1000, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("capacity to {}: the trains' gaps as rates", r.spec.server),
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(70)
        // log10 of the rate on a linear axis: plotters' log scale labels
        // only whole decades, and a histogram rarely spans one.
        .build_cartesian_2d(x_lo.log10()..x_hi.log10(), 0f64..y_max)?;
    chart
        .configure_mesh()
        .x_desc("capacity a gap gives (frame bits over the gap; log scale)")
        .y_desc("gaps")
        .x_labels(10)
        .y_labels(6)
        .x_label_formatter(&|v| bps(10f64.powf(*v)))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .bold_line_style(GRID_BOLD)
        .light_line_style(GRID_LIGHT)
        .draw()?;
    if dirs.is_empty() {
        chart.draw_series(std::iter::once(Text::new(
            "no estimate: too few trains arrived whole",
            ((x_lo * 1.5).log10(), y_max * 0.5),
            ("sans-serif", 16).into_font(),
        )))?;
    }
    for (k, (name, colour, e)) in dirs.iter().enumerate() {
        let colour = *colour;
        let [ilo, ihi] = e.capacity_interval_bps;
        // The interval first, under the bars.
        chart.draw_series(std::iter::once(Rectangle::new(
            [(ilo.log10(), 0.0), (ihi.log10(), y_max)],
            colour.mix(0.12).filled(),
        )))?;
        chart
            .draw_series(e.dispersion_histogram.iter().map(|b| {
                Rectangle::new(
                    [
                        (b.low_bps.log10(), 0.0),
                        (b.high_bps.log10(), b.count as f64),
                    ],
                    colour.mix(0.7).filled(),
                )
            }))?
            .label(format!(
                "{name}: capacity {} ({} to {})",
                BitsPerSec(e.capacity_bps),
                BitsPerSec(ilo),
                BitsPerSec(ihi)
            ))
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 20, y + 5)], colour.filled()));
        // The mode, labelled with the estimate; a second direction's label
        // sits lower so the two do not overlap.
        let c = e.capacity_bps;
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(c.log10(), 0.0), (c.log10(), y_max)],
            colour.stroke_width(2),
        )))?;
        chart.draw_series(std::iter::once(Text::new(
            format!("capacity {}", BitsPerSec(c)),
            (c.log10(), y_max * (0.95 - 0.08 * k as f64)),
            label_style(c, x_lo, x_hi, 14).color(&colour),
        )))?;
        if let Some(s) = e.shaper {
            let b = s.burst_rate_bps;
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(b.log10(), 0.0), (b.log10(), y_max)],
                BUCKET.stroke_width(2),
            )))?;
            chart.draw_series(std::iter::once(Text::new(
                format!("token bucket: {} packets at {}", s.burst_packets, bps(b)),
                (b.log10(), y_max * (0.80 - 0.08 * k as f64)),
                label_style(b, x_lo, x_hi, 13).color(&BUCKET),
            )))?;
        }
    }
    if !dirs.is_empty() {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::dispersion::{RateBin, Shaper};

    #[test]
    fn the_chart_names_the_estimate_and_the_bucket() {
        let mut r = crate::result::fixtures::result(crate::plan::TestKind::Capacity);
        r.spec.server = "10.213.199.1".into();
        let est = CapacityEstimate {
            capacity_bps: 50.17e6,
            capacity_interval_bps: [47.5e6, 51.1e6],
            probe_load_fraction: 0.019,
            shaper: Some(Shaper {
                burst_packets: 22,
                burst_rate_bps: 6.45e9,
                sustained_rate_bps: 50.17e6,
            }),
            dispersion_histogram: vec![
                RateBin {
                    low_bps: 48.4e6,
                    high_bps: 50.2e6,
                    count: 40,
                },
                RateBin {
                    low_bps: 50.2e6,
                    high_bps: 52.1e6,
                    count: 90,
                },
            ],
            trains: 60,
            broken: 0,
            datagrams_received: 1260,
            datagrams_lost: 0,
            loss_percent: Some(0.0),
            sender_rate_bps: Some(900e6),
        };
        r.summary.capacity_by_direction = Some(crate::result::CapacityDirections {
            c2s: Some(est),
            s2c: None,
        });
        let svg = svg(&r);
        roxmltree::Document::parse(&svg).expect("well-formed XML");
        assert!(svg.contains("capacity 50.17 Mbit/s"), "{svg}");
        assert!(svg.contains("token bucket: 22 packets at 6.45 Gbit/s"));
        assert!(!svg.contains("chart error"));
    }
}
