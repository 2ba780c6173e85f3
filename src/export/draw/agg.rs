//! SVG charts of an aggregate ramp, drawn with plotters' SVG backend.
//!
//! The overall chart shows the per-second aggregate (green line), each
//! complete step's average over its measurement window (dark grey segment),
//! each step's start (red vertical mark, labelled with the streams then
//! running) and the end of the ramp (blue mark), in the manner of post_proc.py's rrdtool graphs. Per-stream
//! charts use the same axes so they can be laid side by side. The title
//! names the test, the load generators and the date; values carry SI
//! prefixes (180 k, 1.2 M, 2.5 Gbit/s) on a light grid.

use plotters::prelude::*;

use super::plot::{DrawResult, GRID_BOLD, GRID_LIGHT, SIZE, render};
use crate::agg::model::TestAgg;
use crate::agg::series::{self, Sample};

/// Colours, fixed so that tests (and readers of the SVG) can find each part.
pub const LINE: RGBColor = RGBColor(0, 160, 0);
pub const STEP_MARK: RGBColor = RGBColor(255, 0, 0);
pub const STEP_AVERAGE: RGBColor = RGBColor(64, 64, 64);
pub const RAMP_END: RGBColor = RGBColor(0, 0, 160);

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

/// What the user put on the charts: `--title` in place of the one made
/// from the test, hosts and date (which then follows it), and
/// `--annotation`, a line under it (post_proc.py's `-t` and `-a`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Labels<'a> {
    pub title: Option<&'a str>,
    pub annotation: Option<&'a str>,
}

impl<'a> Labels<'a> {
    pub fn of(spec: &'a crate::agg::model::AggSpec) -> Labels<'a> {
        Labels {
            title: spec.title.as_deref(),
            annotation: spec.annotation.as_deref(),
        }
    }

    fn caption(&self, made: String) -> String {
        match self.title {
            Some(t) => format!("{t} ({made})"),
            None => made,
        }
    }
}

/// The overall chart of one test.
pub fn overall_svg(t: &TestAgg, labels: Labels) -> String {
    let title = labels.caption(title(t, "per-second aggregate"));
    render(|svg| try_draw(t, &title, labels.annotation, &t.per_second, true, svg))
}

/// The chart of one stream of a test, on the overall chart's time axis.
pub fn stream_svg(t: &TestAgg, stream: usize, labels: Labels) -> String {
    let s = &t.streams[stream];
    let samples: [&[Sample]; 1] = [&s.samples];
    let per_second = series::per_second(&samples, t.start, t.end);
    draw(
        t,
        labels,
        &title(t, &format!("stream {} to {}", s.index, s.server)),
        &per_second,
        false,
    )
}

fn draw(t: &TestAgg, labels: Labels, title: &str, per_second: &[f64], averages: bool) -> String {
    let title = labels.caption(title.to_string());
    render(|svg| try_draw(t, &title, labels.annotation, per_second, averages, svg))
}

fn try_draw(
    t: &TestAgg,
    title: &str,
    annotation: Option<&str>,
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
    if let Some(a) = annotation {
        // Inside the plot's top left, under the caption.
        chart.draw_series(std::iter::once(Text::new(
            a.to_string(),
            (x_max * 0.01, y_max * 0.94),
            ("sans-serif", 14).into_font().color(&BLACK),
        )))?;
    }
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
