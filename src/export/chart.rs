//! SVG charts of an aggregate ramp, drawn with plotters' SVG backend.
//!
//! The overall chart shows the per-second aggregate (green line), each
//! complete step's average over its measurement window (dark grey segment),
//! each step's start (red vertical mark, labelled with the streams then
//! running) and the end of the ramp (blue mark), in the manner of post_proc.py's rrdtool graphs. Per-stream
//! charts use the same axes so they can be laid side by side. The title
//! names the test, the load generators and the date; values carry SI
//! prefixes (180 k, 1.2 M, 2.5 Gbit/s) on a light grid.
//!
//! The curve chart (`thrum curve`) plots response-time percentiles on a log
//! axis against the achieved rate, with the knee, the saturation point and
//! the SLO marked.

use plotters::prelude::*;

use crate::agg::curve::Curve;
use crate::agg::model::TestAgg;
use crate::agg::series::{self, Sample};
use crate::units::{fmt_ns, fmt_si};

/// Colours, fixed so that tests (and readers of the SVG) can find each part.
pub const LINE: RGBColor = RGBColor(0, 160, 0);
pub const STEP_MARK: RGBColor = RGBColor(255, 0, 0);
pub const STEP_AVERAGE: RGBColor = RGBColor(64, 64, 64);
pub const RAMP_END: RGBColor = RGBColor(0, 0, 160);
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
pub const SLO: RGBColor = RGBColor(230, 140, 0);

/// The grid: light enough that the data reads first.
pub const GRID_BOLD: RGBColor = RGBColor(215, 215, 215);
pub const GRID_LIGHT: RGBColor = RGBColor(242, 242, 242);

const SIZE: (u32, u32) = (1000, 480);

/// A value of `unit` for an axis tick: SI prefix, bits for the megabit
/// units (`2.5 Gbit/s`), transactions bare (`180 k`), any other unit as is.
fn tick(v: f64, unit: &str) -> String {
    match unit {
        "Mbit/s" | "10^6bits/s" => {
            let si = crate::units::fmt_si(v * 1e6);
            let sep = if si.ends_with(|c: char| c.is_ascii_digit()) {
                " "
            } else {
                ""
            };
            format!("{si}{sep}bit/s")
        }
        "Trans/s" => crate::units::fmt_si(v),
        _ => format!("{v:.1}"),
    }
}

/// The y axis's title for a test's unit.
fn y_desc(unit: &str) -> String {
    match unit {
        "Mbit/s" | "10^6bits/s" => "aggregate (throughput, bit/s)".into(),
        "Trans/s" => "aggregate (transactions/s)".into(),
        u => format!("aggregate ({u})"),
    }
}

/// test, load generators, date: what a chart lifted out of its page needs.
fn title(t: &TestAgg, what: &str) -> String {
    let mut hosts: Vec<&str> = t.streams.iter().map(|s| s.server.as_str()).collect();
    hosts.sort_unstable();
    hosts.dedup();
    let hosts = match hosts.len() {
        0 => String::new(),
        1..=3 => format!(" to {}", hosts.join(", ")),
        n => format!(" to {n} hosts"),
    };
    format!(
        "{}{hosts}: {what}, {}",
        t.name,
        crate::units::fmt_local_time(t.start, true)
            .rsplit_once('.')
            .map_or(String::new(), |(a, b)| {
                // Seconds are enough in a title; keep the zone.
                let zone = b.split_once(' ').map_or("", |z| z.1);
                format!("{a} {zone}").trim_end().to_string()
            })
    )
}

/// The overall chart of one test.
pub fn overall_svg(t: &TestAgg) -> String {
    draw(t, &title(t, "per-second aggregate"), &t.per_second, true)
}

/// The chart of one stream of a test, on the overall chart's time axis.
pub fn stream_svg(t: &TestAgg, stream: usize) -> String {
    let s = &t.streams[stream];
    let samples: [&[Sample]; 1] = [&s.samples];
    let per_second = series::per_second(&samples, t.start, t.end);
    draw(
        t,
        &title(t, &format!("stream {} to {}", s.index, s.server)),
        &per_second,
        false,
    )
}

fn draw(t: &TestAgg, title: &str, per_second: &[f64], averages: bool) -> String {
    render(|svg| try_draw(t, title, per_second, averages, svg))
}

/// An SVG drawn by `f`, or one that shows the error.
pub(crate) fn render(f: impl FnOnce(&mut String) -> DrawResult) -> String {
    let mut svg = String::new();
    if let Err(e) = f(&mut svg) {
        // Drawing into a String cannot fail for I/O; a plotters error here is a bug.
        return format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\"><text x=\"10\" y=\"20\">chart error: {}</text></svg>",
            super::html::escape(&e.to_string())
        );
    }
    svg
}

pub(crate) type DrawResult = Result<(), Box<dyn std::error::Error>>;

fn try_draw(
    t: &TestAgg,
    title: &str,
    per_second: &[f64],
    averages: bool,
    out: &mut String,
) -> DrawResult {
    // A little room right of the ramp's end, for its mark.
    let x_max = (t.end - t.start).max(1.0) * 1.04;
    let y_top = per_second
        .iter()
        .copied()
        .chain(t.steps.iter().filter_map(|s| s.maximum))
        .fold(0.0f64, f64::max);
    let y_max = if y_top > 0.0 { y_top * 1.12 } else { 1.0 };
    let root = SVGBackend::with_string(out, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(90)
        .build_cartesian_2d(0f64..x_max, 0f64..y_max)?;
    let y_label = |v: &f64| tick(*v, &t.unit);
    chart
        .configure_mesh()
        .x_desc("time since the ramp started (s)")
        .y_desc(y_desc(&t.unit))
        .y_label_formatter(&y_label)
        .bold_line_style(GRID_BOLD)
        .light_line_style(GRID_LIGHT)
        .draw()?;
    // Each second's value at the middle of its second.
    let line = per_second
        .iter()
        .enumerate()
        .map(|(k, v)| (k as f64 + 0.5, *v));
    chart
        .draw_series(LineSeries::new(line, LINE.stroke_width(2)))?
        .label(format!("per-second aggregate ({})", t.unit))
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], LINE.stroke_width(2)));
    for s in &t.steps {
        let x = s.started - t.start;
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(x, 0.0), (x, y_max)],
            STEP_MARK.stroke_width(1),
        )))?;
        chart.draw_series(std::iter::once(Text::new(
            format!("{} stream(s)", s.streams),
            (x, y_max * 0.99),
            ("sans-serif", 12).into_font().color(&STEP_MARK),
        )))?;
        if let (true, Some(avg)) = (averages, s.average) {
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(s.start - t.start, avg), (s.end - t.start, avg)],
                STEP_AVERAGE.stroke_width(3),
            )))?;
        }
    }
    let x_end = t.end - t.start;
    chart.draw_series(std::iter::once(PathElement::new(
        vec![(x_end, 0.0), (x_end, y_max)],
        RAMP_END.stroke_width(1),
    )))?;
    chart.draw_series(std::iter::once(Text::new(
        "ramp end",
        (x_end - x_max * 0.06, y_max * 0.95),
        ("sans-serif", 12).into_font().color(&RAMP_END),
    )))?;
    if averages {
        let peak = t.peak_step.and_then(|i| t.steps[i].average).map_or(
            "no complete step".to_string(),
            |a| {
                let peak = match t.unit.as_str() {
                    "Trans/s" => format!("{} trans/s", crate::units::fmt_si(a)),
                    u if tick(a, u).ends_with("bit/s") => tick(a, u),
                    u => format!("{a:.1} {u}"),
                };
                format!("step averages (peak {peak})")
            },
        );
        chart
            .draw_series(std::iter::empty::<PathElement<(f64, f64)>>())?
            .label(peak)
            .legend(|(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], STEP_AVERAGE.stroke_width(3))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

/// The latency-vs-throughput chart of a curve.
pub fn curve_svg(c: &Curve) -> String {
    render(|svg| try_curve(c, svg))
}

fn try_curve(c: &Curve, out: &mut String) -> DrawResult {
    type Pick = fn(&crate::stats::latency::LatencySummary) -> u64;
    let series: [(&str, Pick); 5] = [
        ("p50", |l| l.p50),
        ("p90", |l| l.p90),
        ("p99", |l| l.p99),
        ("p99.9", |l| l.p99_9),
        ("max", |l| l.max),
    ];
    let points = |pick: Pick| -> Vec<(f64, f64)> {
        c.steps
            .iter()
            .filter_map(|s| Some((s.achieved_per_s, pick(s.latency_ns.as_ref()?).max(1) as f64)))
            .collect()
    };
    let slo_ns = c.spec.slo.map(|s| s.bound_ns as f64);
    let all: Vec<f64> = series
        .iter()
        .flat_map(|(_, p)| points(*p).into_iter().map(|x| x.1))
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
    let x_max = c
        .steps
        .iter()
        .map(|s| s.achieved_per_s.max(s.offered_per_s))
        .fold(0.0f64, f64::max)
        .max(1.0)
        * 1.08;
    let root = SVGBackend::with_string(out, SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{}: response time against achieved rate", c.test),
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(90)
        .build_cartesian_2d(0f64..x_max, (y_lo..y_hi).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("achieved rate (transactions/s)")
        .y_desc("response time from the intended start")
        .bold_line_style(GRID_BOLD)
        .light_line_style(GRID_LIGHT)
        .x_label_formatter(&|v| fmt_si(*v))
        .y_label_formatter(&|v| fmt_ns(*v))
        .draw()?;
    for ((name, pick), colour) in series.iter().zip(PERCENTILES) {
        let pts = points(*pick);
        chart
            .draw_series(LineSeries::new(pts.clone(), colour.stroke_width(2)))?
            .label(*name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
            });
        chart.draw_series(pts.into_iter().map(|p| Circle::new(p, 3, colour.filled())))?;
    }
    let mut vertical = |p: &Option<crate::agg::curve::Point>, colour: RGBColor, name: &str| {
        if let Some(p) = p {
            let x = p.achieved_per_s;
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(x, y_lo), (x, y_hi)],
                colour.stroke_width(2),
            )))?;
            chart.draw_series(std::iter::once(Text::new(
                format!("{name} {}/s", fmt_si(x)),
                (x, y_hi / 1.6),
                ("sans-serif", 13).into_font().color(&colour),
            )))?;
        }
        DrawResult::Ok(())
    };
    vertical(&c.knee, KNEE, "knee")?;
    vertical(&c.saturation, SATURATION, "saturation")?;
    if let (Some(slo), Some(ns)) = (c.spec.slo, slo_ns) {
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(0.0, ns), (x_max, ns)],
                SLO.stroke_width(2),
            )))?
            .label(format!("SLO {slo}"))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], SLO.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}
