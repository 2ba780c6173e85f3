//! Latency under load (a mix, the `rrul` presets) as SVG: the time series
//! with throughput up and down on the left axis and the probes' latency on
//! the right, the phases shaded (flent's "all scaled" picture), and the
//! probes' latency CDF, idle and loaded.

use plotters::prelude::*;

use super::plot::{DrawResult, GRID_BOLD, GRID_LIGHT, Mark, draw_legend, render};
use crate::result::{PartSummary, PhaseFigures, TestResult};
use crate::stats::latency::LatencySummary;

/// Colours, fixed so that readers (and tests) can find each series.
pub const UP: RGBColor = RGBColor(31, 119, 180);
pub const DOWN: RGBColor = RGBColor(44, 160, 44);
pub const PROBE: RGBColor = RGBColor(214, 39, 40);
/// The probes' p99: the p50's red, darker and thinner.
pub const PROBE_P99: RGBColor = RGBColor(140, 20, 20);
/// The idle and recovery phases' shading; the loaded phase is left white.
pub const QUIET: RGBColor = RGBColor(235, 235, 235);

/// One point per interval: its middle, in seconds.
fn mid(a: f64, b: f64) -> f64 {
    (a + b) / 2.0
}

/// Throughput of the parts of `dir`, per interval, summed: (time, bit/s);
/// the mix's page tabulates what the chart draws.
pub fn series(parts: &[PartSummary], dir: &str) -> Vec<(f64, f64)> {
    let mut v: Vec<(f64, f64)> = Vec::new();
    for p in parts.iter().filter(|p| p.direction == dir) {
        for (k, iv) in p.intervals.iter().enumerate() {
            let t = iv.sum.throughput_bps.unwrap_or(0.0);
            match v.get_mut(k) {
                Some(x) => x.1 += t,
                None => v.push((mid(iv.start_s, iv.end_s), t)),
            }
        }
    }
    v
}

/// The preset whose SPEC gives this mix's parts (names and tests), if any.
fn preset_of(r: &TestResult) -> Option<&'static str> {
    let ours: Vec<(&str, crate::plan::TestKind)> = r
        .summary
        .parts
        .iter()
        .map(|p| (p.name.as_str(), p.test))
        .collect();
    crate::plan::mix::PRESETS.iter().find_map(|p| {
        let parts = crate::plan::mix::parse_spec(p.spec).ok()?;
        let theirs: Vec<(&str, crate::plan::TestKind)> =
            parts.iter().map(|q| (q.name.as_str(), q.test)).collect();
        (theirs == ours).then_some(p.name)
    })
}

/// What a chart lifted out of its page needs: the parts, the server and
/// the date the run started (local time, to the second).
fn title(r: &TestResult) -> String {
    let parts = &r.summary.parts;
    let what = match parts.len() {
        0 => r.test.name().to_string(),
        1..=3 => parts
            .iter()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>()
            .join(" + "),
        n => format!("{n}-part mix"),
    };
    // The preset the parts are, when they are one (rrul, rrul_be, ...).
    let what = match preset_of(r) {
        Some(name) => format!("{name} ({what})"),
        None => what,
    };
    let start = r
        .intervals
        .first()
        .map(|iv| iv.unix_end_s - (iv.end_s - iv.start_s));
    let date = start
        .filter(|s| *s > 0.0)
        .map(|s| {
            let t = crate::units::fmt_local_time(s, true);
            // Seconds are enough in a title; keep the zone.
            match t.rsplit_once('.') {
                Some((a, b)) => format!("{a} {}", b.split_once(' ').map_or("", |z| z.1))
                    .trim_end()
                    .to_string(),
                None => t,
            }
        })
        .map_or(String::new(), |d| format!(", {d}"));
    format!(
        "{what} to {}: throughput and probe latency{date}",
        r.spec.server
    )
}

/// The time series of a mix as SVG: goodput up (blue) and down (green),
/// bit/s on the left, each part a thin line of its own colour under its
/// sum; each probe's median latency per interval (solid) and p99
/// (dashed) in a colour of its own, ms on the right; the idle and
/// recovery phases shaded grey; a legend beside the plot with one entry
/// per series (the shading, each sum, each part, each probe's p50 and
/// p99); titled with the preset or parts, the server and the date.
pub fn svg(r: &TestResult) -> String {
    render(|out| try_svg(r, out))
}

/// Colours of the parts drawn under the sums, by direction, and of the
/// probes, one each (cycled past the end): each part its own line and its
/// own legend entry.
const UP_PARTS: [RGBColor; 4] = [
    RGBColor(23, 190, 207),
    RGBColor(0, 70, 140),
    RGBColor(127, 127, 255),
    RGBColor(90, 160, 210),
];
const DOWN_PARTS: [RGBColor; 4] = [
    RGBColor(188, 189, 34),
    RGBColor(0, 100, 0),
    RGBColor(120, 200, 120),
    RGBColor(140, 86, 75),
];
const PROBES: [RGBColor; 4] = [
    PROBE,
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(227, 119, 194),
];

/// Width of the plot; the legend has the rest, beside it.
const PLOT_W: u32 = 820;

/// One legend entry per series: the shading, each sum, each part, each
/// probe's p50 and p99. A part's entry is its name (unique in a mix).
fn legend_of(r: &TestResult) -> Vec<(String, RGBColor, Mark)> {
    let parts = &r.summary.parts;
    let mut v = Vec::new();
    if r.summary.phases.is_some() {
        v.push(("idle, recovery (shaded)".to_string(), QUIET, Mark::Band));
    }
    for (dir, sum, palette) in [("up", UP, UP_PARTS), ("down", DOWN, DOWN_PARTS)] {
        let ps: Vec<&PartSummary> = parts.iter().filter(|p| p.direction == dir).collect();
        match ps.len() {
            0 => {}
            1 => v.push((format!("{} ({dir})", ps[0].name), sum, Mark::Line)),
            _ => {
                v.push((format!("{dir} (sum)"), sum, Mark::Line));
                for (j, p) in ps.iter().enumerate() {
                    v.push((p.name.clone(), palette[j % palette.len()], Mark::Thin));
                }
            }
        }
    }
    for (j, p) in parts.iter().filter(|p| p.direction == "rr").enumerate() {
        let c = PROBES[j % PROBES.len()];
        v.push((format!("{} p50", p.name), c, Mark::Line));
        v.push((format!("{} p99", p.name), c, Mark::Dashed));
    }
    v
}

fn try_svg(r: &TestResult, out: &mut String) -> DrawResult {
    let parts = &r.summary.parts;
    let (up, down) = (series(parts, "up"), series(parts, "down"));
    let probes: Vec<&PartSummary> = parts.iter().filter(|p| p.direction == "rr").collect();
    let probe_line = |p: &PartSummary, pick: fn(&LatencySummary) -> u64| -> Vec<(f64, f64)> {
        p.intervals
            .iter()
            .filter_map(|iv| {
                let l = iv.latency_ns.as_ref()?;
                Some((mid(iv.start_s, iv.end_s), pick(l) as f64 / 1e6))
            })
            .collect()
    };
    let x_max = r.intervals.last().map_or(1.0, |iv| iv.end_s).max(1.0);
    let y_max = up
        .iter()
        .chain(&down)
        .map(|p| p.1)
        .fold(0.0, f64::max)
        .max(1.0)
        * 1.1;
    let l_max = probes
        .iter()
        .flat_map(|p| probe_line(p, |l| l.p99))
        .map(|p| p.1)
        .fold(0.0, f64::max)
        .max(0.1)
        * 1.1;
    let root = SVGBackend::with_string(out, (1100, 520)).into_drawing_area();
    root.fill(&WHITE)?;
    let (plot, side) = root.split_horizontally(PLOT_W);
    let mut chart = ChartBuilder::on(&plot)
        .caption(title(r), ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(90)
        .right_y_label_area_size(70)
        .build_cartesian_2d(0f64..x_max, 0f64..y_max)?
        .set_secondary_coord(0f64..x_max, 0f64..l_max);
    let bps = |v: &f64| {
        let si = crate::units::fmt_si(*v);
        format!("{si}bit/s")
    };
    chart
        .configure_mesh()
        .x_desc("time (s)")
        .y_desc("goodput")
        .y_label_formatter(&bps)
        .bold_line_style(GRID_BOLD)
        .light_line_style(GRID_LIGHT)
        .draw()?;
    chart
        .configure_secondary_axes()
        .y_desc("probe latency (ms)")
        .draw()?;
    if let Some(ph) = &r.summary.phases {
        chart.draw_series(
            [&ph.idle, &ph.recovery]
                .map(|f| Rectangle::new([(f.start_s, 0.0), (f.end_s, y_max)], QUIET.filled())),
        )?;
    }
    // Each part as a thin line of its own colour under the sums, as flent
    // draws each flow, where a sum has more than one part.
    for (dir, palette) in [("up", UP_PARTS), ("down", DOWN_PARTS)] {
        let ps: Vec<&PartSummary> = parts.iter().filter(|p| p.direction == dir).collect();
        if ps.len() < 2 {
            continue;
        }
        for (j, p) in ps.iter().enumerate() {
            let line = p.intervals.iter().map(|iv| {
                (
                    mid(iv.start_s, iv.end_s),
                    iv.sum.throughput_bps.unwrap_or(0.0),
                )
            });
            let c = palette[j % palette.len()];
            chart.draw_series(LineSeries::new(line, c.stroke_width(1)))?;
        }
    }
    chart.draw_series(LineSeries::new(up, UP.stroke_width(2)))?;
    chart.draw_series(LineSeries::new(down, DOWN.stroke_width(2)))?;
    for (j, p) in probes.iter().enumerate() {
        let c = PROBES[j % PROBES.len()];
        chart
            .draw_secondary_series(LineSeries::new(probe_line(p, |l| l.p50), c.stroke_width(2)))?;
        chart.draw_secondary_series(DashedLineSeries::new(
            probe_line(p, |l| l.p99),
            6,
            4,
            c.stroke_width(1),
        ))?;
    }
    draw_legend(&side, &legend_of(r))?;
    root.present()?;
    Ok(())
}

/// How many points each CDF line has when drawn from the histograms.
pub const CDF_POINTS: usize = 200;

/// The probes' latency distribution in the idle and the loaded phase:
/// each phase's merged histogram (`probe_latency_histogram`) read at
/// [`CDF_POINTS`] latencies spread on a log axis, the share of probes at
/// or below each; how far the load moved the whole distribution, not only
/// its median. A result saved before the histograms were kept has only
/// the six percentiles (min, p50, p90, p99, p99.9, max), drawn as such and
/// said in the legend. None without probe phases.
pub fn cdf_svg(r: &TestResult) -> Option<String> {
    let ph = r.summary.phases.as_ref()?;
    let line = |f: &PhaseFigures| -> Option<(Vec<(f64, f64)>, bool)> {
        if let Some(h) = f
            .probe_latency_histogram
            .as_deref()
            .and_then(|b| crate::stats::latency::LatencyHistogram::from_base64(b).ok())
        {
            let pts: Vec<(f64, f64)> = h
                .cdf(CDF_POINTS)
                .into_iter()
                .map(|(ns, q)| (ns as f64 / 1e6, q))
                .collect();
            if !pts.is_empty() {
                return Some((pts, true));
            }
        }
        let l = f.probe_latency_ns.as_ref()?;
        let pts = [
            (l.min, 0.0),
            (l.p50, 0.5),
            (l.p90, 0.9),
            (l.p99, 0.99),
            (l.p99_9, 0.999),
            (l.max, 1.0),
        ]
        .iter()
        .map(|&(ns, q)| ((ns.max(1)) as f64 / 1e6, q))
        .collect();
        Some((pts, false))
    };
    let idle = line(&ph.idle)?;
    let loaded = line(&ph.loaded)?;
    Some(render(|out| try_cdf(&idle, &loaded, &title(r), out)))
}

type CdfLine = (Vec<(f64, f64)>, bool);

fn try_cdf(idle: &CdfLine, loaded: &CdfLine, title: &str, out: &mut String) -> DrawResult {
    let all = idle.0.iter().chain(&loaded.0).map(|p| p.0);
    let lo = all.clone().fold(f64::INFINITY, f64::min) / 1.5;
    let hi = all.fold(0.0, f64::max) * 1.5;
    let root = SVGBackend::with_string(out, (1100, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let (plot, side) = root.split_horizontally(PLOT_W);
    let title = title.replace("throughput and probe latency", "probe latency CDF");
    let mut chart = ChartBuilder::on(&plot)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d((lo..hi).log_scale(), 0f64..1f64)?;
    chart
        .configure_mesh()
        .x_desc("probe latency (ms)")
        .y_desc("fraction of probes")
        .bold_line_style(GRID_BOLD)
        .light_line_style(GRID_LIGHT)
        .draw()?;
    let mut legend = Vec::new();
    for (name, (pts, full), colour) in [("idle", idle, UP), ("loaded", loaded, PROBE)] {
        chart.draw_series(LineSeries::new(pts.to_vec(), colour.stroke_width(2)))?;
        let how = if *full {
            "all probes"
        } else {
            "6 percentiles only"
        };
        legend.push((format!("{name} ({how})"), colour, Mark::Line));
    }
    draw_legend(&side, &legend)?;
    root.present()?;
    Ok(())
}
