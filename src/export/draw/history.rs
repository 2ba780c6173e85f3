//! `thrum history --chart`: one figure of the stored runs over time (a
//! headline column, or any figure of a run's kind by its stored name),
//! drawn with plotters as the other charts ([`super::plot`]'s grid, legend
//! and axis units). Runs of different labels are different series, each a
//! colour of its own, so that two setups side by side read as two lines
//! rather than one zigzag between them. Latency is drawn SmokePing's way:
//! the median as a line, the spread around it as bands (p10–p90 dark, up
//! to p99 light) where the runs carry them. The legend stands beside the
//! plot, never over the data, and the value axis is in the unit its
//! largest value reads best in (µs for a loopback's latency, Gbit/s for a
//! fast link; a figure's own unit where thrum does not scale it), named in
//! the axis's title.

use plotters::prelude::*;

use super::agg::LINE;
use super::plot::{
    AxisUnit, DrawResult, GRID_BOLD, GRID_LIGHT, Mark, draw_legend_at, nice_ceil, render, tick,
};

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
    /// The series the run belongs to: its labels (`case=a,host=x`), empty
    /// for a run without any.
    pub series: String,
}

/// The bands' colours of a lone series: the inner (p10–p90) darker than
/// the outer (p99).
pub const BAND_INNER: RGBColor = RGBColor(120, 180, 120);
pub const BAND_OUTER: RGBColor = RGBColor(200, 225, 200);

/// The series' colours when there are several (cycled past the end); a
/// lone series keeps the aggregate chart's green.
pub const SERIES: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

/// The chart's size, and the plot's share of its width: the legend has
/// the rest, beside it.
const HISTORY_SIZE: (u32, u32) = (1100, 480);
const PLOT_W: u32 = 840;

/// The SVG of `points` (oldest first) of the figure `what` in `unit`
/// (`ns`, `bit/s`, `trans/s`, `%`, a stored figure's own unit, or none):
/// one series per distinct `series`. The value axis is titled `what (UNIT)`
/// in the unit it is drawn in (`latency (µs)`, `throughput (Gbit/s)`,
/// `transactions/s (thousands)`, `knee_rate (k trans/s)`).
pub fn svg(what: &str, unit: &str, points: &[Point]) -> String {
    render(|out| draw(what, unit, points, out))
}

/// The unit the value axis is drawn in, from the largest value drawn: its
/// name (empty where `what` says it) and how many of the data's unit make
/// one. A rate of transactions is named as such unless `what` already is
/// one; a unit thrum does not scale (`us/KB`, an aggregate's own) is drawn
/// as it is.
fn axis_unit<'a>(what: &str, unit: &'a str, top: f64) -> (&'a str, f64) {
    let a = match unit {
        "ns" => AxisUnit::time_ns(top),
        "bit/s" => AxisUnit::bits_per_s(top),
        "trans/s" if what == "transactions/s" => AxisUnit::per_s(top),
        "trans/s" => {
            let a = AxisUnit::per_s(top);
            let name = match a.name {
                "" => "trans/s",
                "thousands" => "k trans/s",
                _ => "M trans/s",
            };
            return (name, a.per);
        }
        other => return (other, 1.0),
    };
    (a.name, a.per)
}

/// The points grouped by series, in the order their first run came.
fn by_series(points: &[Point]) -> Vec<(&str, Vec<&Point>)> {
    let mut out: Vec<(&str, Vec<&Point>)> = Vec::new();
    for p in points {
        match out.iter_mut().find(|(s, _)| *s == p.series) {
            Some((_, v)) => v.push(p),
            None => out.push((&p.series, vec![p])),
        }
    }
    out
}

/// The band between `lo` and `hi` of one series' runs, as polygons
/// between consecutive runs (a lone run: a thin bar `w` wide).
fn band(
    points: &[&Point],
    lo: impl Fn(&Point) -> Option<f64>,
    hi: impl Fn(&Point) -> Option<f64>,
    w: f64,
) -> Vec<Vec<(f64, f64)>> {
    let mut polys = Vec::new();
    for (i, p) in points.iter().enumerate() {
        let (Some(l), Some(h)) = (lo(p), hi(p)) else {
            continue;
        };
        let next = points
            .get(i + 1)
            .and_then(|q| Some((q.time, lo(q)?, hi(q)?)));
        match next {
            Some((tq, lq, hq)) => polys.push(vec![(p.time, l), (tq, lq), (tq, hq), (p.time, h)]),
            None if i == 0 || lo(points[i - 1]).is_none() => polys.push(vec![
                (p.time - w, l),
                (p.time + w, l),
                (p.time + w, h),
                (p.time - w, h),
            ]),
            None => {}
        }
    }
    polys
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
    let (axis_name, per) = axis_unit(what, unit, top);
    let y_max = if top > 0.0 {
        nice_ceil(top / per * 1.05)
    } else {
        1.0
    };
    let series = by_series(points);
    let lone = series.len() == 1;
    // A latency drawn with its bands is their median; any other figure
    // (a stored p50 or p99 among them) is named as it is.
    let median = unit == "ns" && points.iter().any(|p| p.band.is_some() || p.p99.is_some());
    let root = SVGBackend::with_string(out, HISTORY_SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let title = match series.len() {
        1 => format!("{what}: {} runs", points.len()),
        n => format!("{what}: {} runs, {n} series by label", points.len()),
    };
    let root = root.titled(&title, ("sans-serif", 20))?;
    let (plot, side) = root.split_horizontally(PLOT_W);
    let mut chart = ChartBuilder::on(&plot)
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d((t0 - pad)..(t1 + pad), 0f64..y_max)?;
    let x_label = |t: &f64| {
        let s = crate::units::fmt_local_time(*t, true);
        s.split('.').next().unwrap_or_default().to_string()
    };
    let y_label = |v: &f64| tick(*v);
    let y_desc = if axis_name.is_empty() {
        what.to_string()
    } else {
        format!("{what} ({axis_name})")
    };
    chart
        .configure_mesh()
        .x_desc("time of the run")
        .y_desc(y_desc)
        .x_labels(5)
        .x_label_formatter(&x_label)
        .y_label_formatter(&y_label)
        .bold_line_style(GRID_BOLD)
        .light_line_style(GRID_LIGHT)
        .draw()?;
    let scaled = |v: f64| v / per;
    let w = (t1 - t0) * 0.004;
    let mut legend: Vec<(String, RGBColor, Mark)> = Vec::new();
    let (mut outer_drawn, mut inner_drawn) = (false, false);
    for (k, (name, pts)) in series.iter().enumerate() {
        let colour = if lone { LINE } else { SERIES[k % SERIES.len()] };
        let (outer_fill, inner_fill) = if lone {
            (BAND_OUTER.filled(), BAND_INNER.filled())
        } else {
            (colour.mix(0.12).filled(), colour.mix(0.3).filled())
        };
        let outer = band(
            pts,
            |p| p.band.map(|b| scaled(b.0)),
            |p| p.p99.map(scaled),
            w,
        );
        outer_drawn |= !outer.is_empty();
        chart.draw_series(outer.into_iter().map(|v| Polygon::new(v, outer_fill)))?;
        let inner = band(
            pts,
            |p| p.band.map(|b| scaled(b.0)),
            |p| p.band.map(|b| scaled(b.1)),
            w,
        );
        inner_drawn |= !inner.is_empty();
        chart.draw_series(inner.into_iter().map(|v| Polygon::new(v, inner_fill)))?;
        let line: Vec<(f64, f64)> = pts.iter().map(|p| (p.time, scaled(p.value))).collect();
        chart.draw_series(LineSeries::new(line.clone(), colour.stroke_width(2)))?;
        chart.draw_series(
            line.into_iter()
                .map(|(x, y)| Circle::new((x, y), 3, colour.filled())),
        )?;
        let label = match (lone, name.is_empty(), median) {
            (true, true, true) => "median".to_string(),
            (true, true, false) => what.to_string(),
            (_, true, _) => "(no label)".to_string(),
            (_, false, _) => name.to_string(),
        };
        legend.push((label, colour, Mark::Line));
    }
    // The bands once, for every series: a key, not a series of its own.
    let key = if lone {
        BAND_INNER
    } else {
        RGBColor(170, 170, 170)
    };
    if median && !legend.iter().any(|l| l.0 == "median") {
        legend.push(("lines: median".into(), RGBColor(110, 110, 110), Mark::Line));
    }
    if inner_drawn {
        legend.push(("p10 to p90 (dark band)".into(), key, Mark::Band));
    }
    if outer_drawn {
        let light = if lone {
            BAND_OUTER
        } else {
            RGBColor(220, 220, 220)
        };
        legend.push(("p10 to p99 (light band)".into(), light, Mark::Band));
    }
    draw_legend_at(&side, &legend, 24)?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pt(time: f64, value: f64, series: &str) -> Point {
        Point {
            time,
            value,
            band: Some((value * 0.9, value * 1.2)),
            p99: Some(value * 4.0),
            series: series.into(),
        }
    }

    fn texts(svg: &str) -> Vec<String> {
        let doc = roxmltree::Document::parse(svg).unwrap();
        doc.descendants()
            .filter(|n| n.has_tag_name("text"))
            .filter_map(|n| n.text())
            .map(|t| t.trim().to_string())
            .collect()
    }

    /// Two labels, two series, each once in the legend beside the plot;
    /// the axis in µs for latencies of tens of µs, its ticks plain numbers.
    #[test]
    fn one_series_per_label_and_the_axis_in_the_datas_unit() {
        let points = [
            pt(100.0, 14_000.0, "case=a"),
            pt(110.0, 30_000.0, "case=b"),
            pt(120.0, 15_000.0, "case=a"),
            pt(130.0, 31_000.0, "case=b"),
        ];
        let svg = svg("latency", "ns", &points);
        let t = texts(&svg);
        for want in ["case=a", "case=b", "latency (µs)", "p10 to p90 (dark band)"] {
            assert_eq!(t.iter().filter(|x| *x == want).count(), 1, "{want}: {t:?}");
        }
        assert!(t.contains(&"latency: 4 runs, 2 series by label".to_string()));
        // Ticks are numbers of µs (the top p99 is 124 µs: ticks to 140).
        assert!(t.iter().any(|x| x == "140"), "{t:?}");
        assert!(
            !t.iter().any(|x| x.ends_with("us") || x.ends_with("ms")),
            "{t:?}"
        );
        // The legend stands right of the plot: every entry's x beyond it.
        let doc = roxmltree::Document::parse(&svg).unwrap();
        for n in doc.descendants().filter(|n| n.text() == Some("case=a")) {
            let x: f64 = n.attribute("x").unwrap().parse().unwrap();
            assert!(x > PLOT_W as f64, "{x}");
        }
        assert!(svg.starts_with("<svg width=\"100%\" viewBox=\"0 0 1100 480\""));
    }

    /// A stored figure (`history --chart FIGURE`) is one line named as it
    /// is, never "median", on an axis in its own unit: a rate of
    /// transactions said to be one, a time scaled, an unscaled unit as is.
    #[test]
    fn a_figure_is_drawn_by_its_name_in_its_unit() {
        let plain = |time, value, series: &str| Point {
            time,
            value,
            series: series.into(),
            ..Point::default()
        };
        let svg1 = svg(
            "knee_rate",
            "trans/s",
            &[plain(1.0, 11_700.0, ""), plain(2.0, 12_100.0, "")],
        );
        let t = texts(&svg1);
        assert!(t.contains(&"knee_rate (k trans/s)".to_string()), "{t:?}");
        assert!(t.contains(&"knee_rate".to_string()), "{t:?}");
        assert!(!t.iter().any(|x| x.contains("median")), "{t:?}");
        let t = texts(&svg(
            "udp_rr:latency_under_load_p99",
            "ns",
            &[plain(1.0, 2.1e6, "case=a"), plain(2.0, 9.5e6, "case=b")],
        ));
        assert!(
            t.contains(&"udp_rr:latency_under_load_p99 (ms)".to_string()),
            "{t:?}"
        );
        assert!(!t.iter().any(|x| x.contains("median")), "{t:?}");
        let t = texts(&svg(
            "local_service_demand",
            "us/KB",
            &[plain(1.0, 0.4, "")],
        ));
        assert!(
            t.contains(&"local_service_demand (us/KB)".to_string()),
            "{t:?}"
        );
        let t = texts(&svg("fairness", "", &[plain(1.0, 0.98, "")]));
        assert!(t.contains(&"fairness".to_string()), "{t:?}");
        assert!(!t.iter().any(|x| x.starts_with("fairness (")), "{t:?}");
    }

    #[test]
    fn a_lone_unlabelled_series_keeps_smokepings_look() {
        let svg = svg(
            "throughput",
            "bit/s",
            &[pt(1.0, 9.4e9, ""), pt(2.0, 9.3e9, "")],
        );
        let t = texts(&svg);
        assert!(t.contains(&"throughput (Gbit/s)".to_string()), "{t:?}");
        assert!(t.contains(&"throughput".to_string()), "{t:?}");
        assert!(svg.contains("#00A000"), "the lone series' green");
    }
}
