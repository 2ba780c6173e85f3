//! Latency under load (a mix, the `rrul` presets) as SVG: the time series
//! as flent's "all scaled" picture (download, upload and the probes'
//! latency in stacked panels on one time axis, the phases shaded, each
//! panel's legend beside it), and the probes' latency CDF, idle and
//! loaded.

use plotters::prelude::*;

use super::plot::{
    AxisUnit, DrawResult, GRID_BOLD, GRID_LIGHT, Mark, draw_legend, draw_legend_at, nice_ceil,
    render, tick,
};
use crate::result::{PartSummary, PhaseFigures, TestResult};
use crate::stats::latency::LatencySummary;

/// Colours, fixed so that readers (and tests) can find each series.
pub const UP: RGBColor = RGBColor(31, 119, 180);
pub const DOWN: RGBColor = RGBColor(44, 160, 44);
pub const PROBE: RGBColor = RGBColor(214, 39, 40);
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

/// The time series of a mix as SVG, flent's "all scaled": stacked panels
/// that share the time axis, each with an axis of its own in a unit
/// picked from its data: the download (the parts whose payload the server
/// sends) and the upload, each direction's sum and every part a thin line
/// of its own colour under it where it has several; then each probe's
/// latency per interval, its median solid and its p99 dashed in the
/// probe's colour. The idle and recovery phases are shaded grey in every
/// panel. A panel without parts (a mix that only uploads) is left out.
/// Beside each panel, outside the data, its legend: one entry per part
/// (a direction's sum is one more), and the shading and the probes' line
/// styles once. Titled with the preset or parts, the server and the date.
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
/// The probes' line styles in the legend: a key, not a series.
const KEY: RGBColor = RGBColor(110, 110, 110);

/// Width of the plots; the legends have the rest, beside them.
const PLOT_W: u32 = 820;
/// The chart's size: three panels of about 220 px under the title.
const MIX_SIZE: (u32, u32) = (1100, 760);

/// One stacked panel of the time series.
enum Panel<'a> {
    /// Goodput of the parts going one way ("down" or "up").
    Goodput {
        dir: &'static str,
        parts: Vec<&'a PartSummary>,
    },
    /// The probes' latency.
    Latency { probes: Vec<&'a PartSummary> },
}

/// The panels a mix has, in flent's order: download, upload, latency.
fn panels(parts: &[PartSummary]) -> Vec<Panel<'_>> {
    let of = |d: &str| -> Vec<&PartSummary> { parts.iter().filter(|p| p.direction == d).collect() };
    let mut v = Vec::new();
    for dir in ["down", "up"] {
        let ps = of(dir);
        if !ps.is_empty() {
            v.push(Panel::Goodput { dir, parts: ps });
        }
    }
    let probes = of("rr");
    if !probes.is_empty() {
        v.push(Panel::Latency { probes });
    }
    v
}

/// A probe's latency per interval (ns): its median or its p99.
fn probe_line(p: &PartSummary, pick: fn(&LatencySummary) -> u64) -> Vec<(f64, f64)> {
    p.intervals
        .iter()
        .filter_map(|iv| {
            let l = iv.latency_ns.as_ref()?;
            Some((mid(iv.start_s, iv.end_s), pick(l) as f64))
        })
        .collect()
}

/// One part's goodput per interval (bit/s).
fn part_line(p: &PartSummary) -> Vec<(f64, f64)> {
    p.intervals
        .iter()
        .map(|iv| {
            (
                mid(iv.start_s, iv.end_s),
                iv.sum.throughput_bps.unwrap_or(0.0),
            )
        })
        .collect()
}

/// A direction's colours: its sum's, and its parts' under it.
fn colours_of(dir: &str) -> (RGBColor, [RGBColor; 4]) {
    if dir == "up" {
        (UP, UP_PARTS)
    } else {
        (DOWN, DOWN_PARTS)
    }
}

/// A panel's legend: one entry per part (and a direction's sum), the
/// probes' line styles once.
fn legend_of(panel: &Panel) -> Vec<(String, RGBColor, Mark)> {
    let mut v = Vec::new();
    match panel {
        Panel::Goodput { dir, parts } => {
            let (sum, palette) = colours_of(dir);
            if let [one] = parts[..] {
                v.push((format!("{} ({dir})", one.name), sum, Mark::Line));
            } else {
                v.push((format!("{dir} (sum)"), sum, Mark::Line));
                for (j, p) in parts.iter().enumerate() {
                    v.push((p.name.clone(), palette[j % palette.len()], Mark::Thin));
                }
            }
        }
        Panel::Latency { probes } => {
            for (j, p) in probes.iter().enumerate() {
                v.push((p.name.clone(), PROBES[j % PROBES.len()], Mark::Line));
            }
            v.push(("solid: median".to_string(), KEY, Mark::Line));
            v.push(("dashed: p99".to_string(), KEY, Mark::Dashed));
        }
    }
    v
}

/// What one panel draws: its solid lines (data units: bit/s, ns), its
/// dashed ones, the solid lines' colours and widths (a dashed line takes
/// its solid one's colour), its axis's word and unit.
struct Drawn {
    lines: Vec<Vec<(f64, f64)>>,
    dashed: Vec<Vec<(f64, f64)>>,
    colours: Vec<(RGBColor, u32)>,
    what: &'static str,
    unit: AxisUnit,
}

/// The lines of `panel`, from the mix's parts `all`.
fn drawn(panel: &Panel, all: &[PartSummary]) -> Drawn {
    match panel {
        Panel::Goodput { dir, parts } => {
            let (sum, palette) = colours_of(dir);
            let total = series(all, dir);
            let top = total.iter().map(|p| p.1).fold(0.0, f64::max);
            let unit = AxisUnit::bits_per_s(top);
            // Each part thin under the sum, as flent draws each flow.
            let mut lines: Vec<Vec<(f64, f64)>> = Vec::new();
            let mut colours = Vec::new();
            if parts.len() > 1 {
                for (j, p) in parts.iter().enumerate() {
                    lines.push(part_line(p));
                    colours.push((palette[j % palette.len()], 1));
                }
            }
            lines.push(total);
            colours.push((sum, 2));
            let word = if *dir == "up" { "upload" } else { "download" };
            Drawn {
                lines,
                dashed: Vec::new(),
                colours,
                what: word,
                unit,
            }
        }
        Panel::Latency { probes } => {
            let top = probes
                .iter()
                .flat_map(|p| probe_line(p, |l| l.p99))
                .map(|p| p.1)
                .fold(0.0, f64::max);
            let unit = AxisUnit::time_ns(top);
            let colours = (0..probes.len())
                .map(|j| (PROBES[j % PROBES.len()], 2))
                .collect();
            Drawn {
                lines: probes.iter().map(|p| probe_line(p, |l| l.p50)).collect(),
                dashed: probes.iter().map(|p| probe_line(p, |l| l.p99)).collect(),
                colours,
                what: "probe latency",
                unit,
            }
        }
    }
}

fn try_svg(r: &TestResult, out: &mut String) -> DrawResult {
    let panels = panels(&r.summary.parts);
    let x_max = r.intervals.last().map_or(1.0, |iv| iv.end_s).max(1.0);
    let root = SVGBackend::with_string(out, MIX_SIZE).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(&title(r), ("sans-serif", 18))?;
    let (plots, side) = root.split_horizontally(PLOT_W);
    let n = panels.len().max(1);
    let areas = plots.split_evenly((n, 1));
    let sides = side.split_evenly((n, 1));
    for (k, ((panel, area), side)) in panels.iter().zip(&areas).zip(&sides).enumerate() {
        let bottom = k + 1 == n;
        let Drawn {
            lines,
            dashed,
            colours,
            what,
            unit,
        } = drawn(panel, &r.summary.parts);
        let top = lines
            .iter()
            .chain(&dashed)
            .flatten()
            .map(|p| unit.of(p.1))
            .fold(0.0, f64::max);
        let y_max = nice_ceil(top * 1.05);
        let mut chart = ChartBuilder::on(area)
            .margin_top(6)
            .margin_right(12)
            .margin_left(6)
            .x_label_area_size(if bottom { 42 } else { 22 })
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..x_max, 0f64..y_max)?;
        let x_tick = |v: &f64| tick(*v);
        let y_tick = |v: &f64| tick(*v);
        let mut mesh = chart.configure_mesh();
        mesh.y_desc(format!("{what} ({})", unit.name))
            .x_label_formatter(&x_tick)
            .y_label_formatter(&y_tick)
            .y_labels(5)
            .bold_line_style(GRID_BOLD)
            .light_line_style(GRID_LIGHT);
        if bottom {
            mesh.x_desc("time (s)");
        }
        mesh.draw()?;
        if let Some(ph) = &r.summary.phases {
            chart
                .draw_series([&ph.idle, &ph.recovery].map(|f| {
                    Rectangle::new([(f.start_s, 0.0), (f.end_s, y_max)], QUIET.filled())
                }))?;
        }
        for (line, (c, w)) in lines.iter().zip(&colours) {
            let pts = line.iter().map(|&(t, v)| (t, unit.of(v)));
            chart.draw_series(LineSeries::new(pts, c.stroke_width(*w)))?;
        }
        for (line, (c, _)) in dashed.iter().zip(&colours) {
            let pts = line.iter().map(|&(t, v)| (t, unit.of(v)));
            chart.draw_series(DashedLineSeries::new(pts, 6, 4, c.stroke_width(1)))?;
        }
        let mut legend = legend_of(panel);
        if k == 0 && r.summary.phases.is_some() {
            legend.insert(
                0,
                ("idle, recovery (shaded)".to_string(), QUIET, Mark::Band),
            );
        }
        draw_legend_at(side, &legend, 14)?;
    }
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
