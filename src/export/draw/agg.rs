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
//! axis against the offered rate, in step order, with the knee, the
//! saturation point and the SLO marked and the legend beside the plot.

use plotters::element::DashedPathElement;
use plotters::prelude::*;

use crate::agg::model::TestAgg;
use crate::agg::series::{self, Sample};
use crate::curve::Curve;
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
/// Teal, dashed: apart from every percentile's colour (p99's is orange).
pub const SLO: RGBColor = RGBColor(0, 160, 160);

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

/// An SVG drawn by `f`, or one that shows the error.
pub(crate) fn render(f: impl FnOnce(&mut String) -> DrawResult) -> String {
    let mut svg = String::new();
    if let Err(e) = f(&mut svg) {
        // Drawing into a String cannot fail for I/O; a plotters error here is a bug.
        return format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\"><text x=\"10\" y=\"20\">chart error: {}</text></svg>",
            crate::export::page::agg::escape(&e.to_string())
        );
    }
    svg
}

pub(crate) type DrawResult = Result<(), Box<dyn std::error::Error>>;

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

/// The latency-vs-throughput chart of a curve.
pub fn curve_svg(c: &Curve) -> String {
    render(|svg| try_curve(c, svg))
}

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
    // before and the line folded back on itself (issue 29); the achieved
    // rate is the table's, and the knee's and saturation's labels.
    let mut steps: Vec<&crate::curve::Step> = c.steps.iter().collect();
    steps.sort_by(|a, b| a.offered_per_s.total_cmp(&b.offered_per_s));
    let sat = c.saturation.as_ref().map(|p| p.step);
    // From the saturation point on, no step keeps up: those points are
    // drawn hollow.
    let past = |s: &crate::curve::Step| sat.is_some_and(|k| s.index >= k);
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
    let mut vertical =
        |p: &Option<crate::curve::Point>, colour: RGBColor, name: &str, y: f64| -> Labelled {
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

/// How a legend entry shows its series.
pub(super) enum Mark {
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
pub(super) fn draw_legend(
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
    use crate::curve::fixtures::{numbered, record, step};
    use crate::curve::{Slo, analyse};

    fn hex(c: RGBColor) -> String {
        format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
    }

    /// Issue 29: past saturation the achieved rate falls (27k, 24k, 21k
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
        let svg = curve_svg(&c);
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

    #[test]
    fn axis_ends_are_nice() {
        assert_eq!(nice_ceil(27_540.0), 30_000.0);
        assert_eq!(nice_ceil(49_980.0), 50_000.0);
        assert_eq!(nice_ceil(1020.0), 1200.0);
        assert_eq!(nice_ceil(1000.0), 1000.0);
        assert_eq!(nice_ceil(0.0), 1.0);
    }
}
