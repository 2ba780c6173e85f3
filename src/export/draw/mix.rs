//! Latency under load (a mix, the `rrul` presets): the human summary of
//! the parts, phases and grades, and the time-series SVG with throughput
//! up and down on the left axis and the probes' latency on the right, the
//! phases shaded (flent's "all scaled" picture).

use std::io::{self, Write};

use plotters::prelude::*;

use crate::result::{PartSummary, PhaseFigures, ProbePhases, TestResult};
use crate::stats::latency::LatencySummary;
use crate::units::BitsPerSec;

/// Colours, fixed so that readers (and tests) can find each series.
pub const UP: RGBColor = RGBColor(31, 119, 180);
pub const DOWN: RGBColor = RGBColor(44, 160, 44);
pub const PROBE: RGBColor = RGBColor(214, 39, 40);
/// The probes' p99: the p50's red, darker and thinner.
pub const PROBE_P99: RGBColor = RGBColor(140, 20, 20);
/// The idle and recovery phases' shading; the loaded phase is left white.
pub const QUIET: RGBColor = RGBColor(235, 235, 235);

fn ms(ns: f64) -> String {
    format!("{:.2} ms", ns / 1e6)
}

/// A difference in milliseconds with its sign always shown: the latency
/// under load is loaded minus idle, and on a busy host the loaded phase's
/// probes can be the faster ones ("-0.05 ms", never "+-0.05 ms").
fn signed_ms(ns: i64) -> String {
    format!("{:+.2} ms", ns as f64 / 1e6)
}

/// The mix's lines of the human summary: one per part, then the phases,
/// the latency under load and the fairness.
pub fn human(r: &TestResult, out: &mut dyn Write) -> io::Result<()> {
    let s = &r.summary;
    writeln!(
        out,
        "  {:<14} {:<10} {:>5} {:>5}  result",
        "part", "test", "flows", "dir"
    )?;
    for p in &s.parts {
        let fig = part_figure(p);
        let retrans = p
            .tcp_retransmits
            .map(|n| format!(", {n} retransmits"))
            .unwrap_or_default();
        writeln!(
            out,
            "  {:<14} {:<10} {:>5} {:>5}  {fig}{retrans}",
            p.name,
            p.test.name(),
            p.flows,
            p.direction
        )?;
    }
    if let Some(ph) = &s.phases {
        writeln!(
            out,
            "  {:<9} {:>10} {:>10} {:>10} {:>14} {:>14}",
            "phase", "probe p50", "p90", "p99", "up", "down"
        )?;
        for (name, f, [p50, p90, p99]) in phase_rows(ph) {
            writeln!(
                out,
                "  {name:<9} {p50:>10} {p90:>10} {p99:>10} {:>14} {:>14}",
                BitsPerSec(f.throughput_up_bps).to_string(),
                BitsPerSec(f.throughput_down_bps).to_string()
            )?;
        }
        writeln!(
            out,
            "  (the bulk flows' buffers drained in {:.2} s between loaded and recovery)",
            ph.drain_s
        )?;
    }
    if let Some(l) = &s.latency_under_load_ns {
        writeln!(
            out,
            "  latency under load     p50 {}  p99 {}",
            signed_ms(l.p50),
            signed_ms(l.p99)
        )?;
    }
    if let Some(f) = &s.fairness {
        let j = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.3}"));
        writeln!(
            out,
            "  fairness (Jain)        up {}  down {}",
            j(f.up),
            j(f.down)
        )?;
    }
    Ok(())
}

/// The three phases in order, each with its probes' p50, p90 and p99 in
/// milliseconds ("-" without probe samples): the rows of the text and the
/// HTML phase tables.
fn phase_rows(ph: &ProbePhases) -> [(&'static str, &PhaseFigures, [String; 3]); 3] {
    let cells = |f: &PhaseFigures| match &f.probe_latency_ns {
        Some(l) => [l.p50, l.p90, l.p99].map(|v| ms(v as f64)),
        None => ["-", "-", "-"].map(String::from),
    };
    [
        ("idle", &ph.idle, cells(&ph.idle)),
        ("loaded", &ph.loaded, cells(&ph.loaded)),
        ("recovery", &ph.recovery, cells(&ph.recovery)),
    ]
}

/// A part's figure as one line: goodput, or transactions/s and latency.
fn part_figure(p: &PartSummary) -> String {
    if let Some(t) = p.summary.throughput_bps {
        return BitsPerSec(t).to_string();
    }
    let tps = p.summary.transactions_per_s.unwrap_or(0.0);
    match &p.summary.latency_ns {
        Some(l) => format!(
            "{tps:.1} trans/s, p50 {} p99 {}",
            ms(l.p50 as f64),
            ms(l.p99 as f64)
        ),
        None => format!("{tps:.1} trans/s"),
    }
}

fn jain_text(x: Option<f64>) -> String {
    x.map_or("-".to_string(), |v| format!("{v:.3}"))
}

/// `--html`: one self-contained page for a mix (no scripts, no external
/// files): the grades, the parts, the phases, the chart and the probes'
/// latency CDF idle and loaded inlined, and the intervals with each
/// direction's goodput, the probes' median, the fairness and the
/// retransmissions.
pub fn html(r: &TestResult) -> String {
    use crate::export::page::agg::escape;
    use std::fmt::Write as _;
    let s = &r.summary;
    let title = format!("thrum latency under load: {}", escape(&r.spec.server));
    let mut o = crate::export::page::agg::head(&title);
    let _ = writeln!(
        o,
        "<p>{} part(s), {} flow(s), {:.2} s measured.</p>",
        s.parts.len(),
        r.spec.plan.flows,
        s.duration_s
    );
    if let Some(e) = &s.error {
        let _ = writeln!(o, "<p class=\"warnings\">error: {}</p>", escape(e));
    }
    o.push_str("<h2>Grades</h2>\n<table>\n");
    if let Some(l) = &s.latency_under_load_ns {
        let _ = writeln!(
            o,
            "<tr><th>latency under load</th><td>p50 {}</td><td>p99 {}</td></tr>",
            signed_ms(l.p50),
            signed_ms(l.p99)
        );
    }
    if let Some(f) = &s.fairness {
        let _ = writeln!(
            o,
            "<tr><th>fairness (Jain)</th><td>up {}</td><td>down {}</td></tr>",
            jain_text(f.up),
            jain_text(f.down)
        );
    }
    o.push_str("</table>\n<h2>Parts</h2>\n<table class=\"parts\">\n<tr><th>part</th><th>test</th><th>flows</th><th>dir</th><th>tos</th><th>result</th><th>retransmits</th></tr>\n");
    for p in &s.parts {
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&p.name),
            p.test.name(),
            p.flows,
            p.direction,
            p.tos.map_or("-".into(), |t| format!("0x{t:02x}")),
            part_figure(p),
            p.tcp_retransmits.map_or("-".into(), |n| n.to_string())
        );
    }
    o.push_str("</table>\n");
    if let Some(ph) = &s.phases {
        o.push_str("<h2>Phases</h2>\n<table class=\"phases\">\n<tr><th>phase</th><th>from (s)</th><th>to (s)</th><th>probe p50</th><th>p90</th><th>p99</th><th>up</th><th>down</th></tr>\n");
        for (name, f, [p50, p90, p99]) in phase_rows(ph) {
            let _ = writeln!(
                o,
                "<tr><td>{name}</td><td>{:.2}</td><td>{:.2}</td><td>{p50}</td><td>{p90}</td><td>{p99}</td><td>{}</td><td>{}</td></tr>",
                f.start_s,
                f.end_s,
                BitsPerSec(f.throughput_up_bps),
                BitsPerSec(f.throughput_down_bps)
            );
        }
        let _ = writeln!(
            o,
            "</table>\n<p>The bulk flows' buffers drained in {:.2} s between loaded and recovery.</p>",
            ph.drain_s
        );
    }
    let _ = writeln!(
        o,
        "<h2>Throughput and probe latency</h2>\n{}",
        crate::export::page::agg::inline(&svg(r))
    );
    if let Some(cdf) = cdf_svg(r) {
        let _ = writeln!(
            o,
            "<h2>Probe latency, idle and loaded</h2>\n{}",
            crate::export::page::agg::inline(&cdf)
        );
    }
    o.push_str("<h2>Intervals</h2>\n<table class=\"intervals\">\n<tr><th>interval</th><th>phase</th><th>from (s)</th><th>to (s)</th><th>up</th><th>down</th><th>probe p50</th><th>fairness up</th><th>fairness down</th><th>retransmits</th></tr>\n");
    let (up, down) = (series(&s.parts, "up"), series(&s.parts, "down"));
    for (k, iv) in r.intervals.iter().enumerate() {
        let at = |v: &[(f64, f64)]| v.get(k).map_or("-".into(), |x| BitsPerSec(x.1).to_string());
        // The slowest probe's median, as the chart draws it.
        let probe = s
            .parts
            .iter()
            .filter(|p| p.direction == "rr")
            .filter_map(|p| p.intervals.get(k)?.latency_ns.as_ref().map(|l| l.p50))
            .max()
            .map_or("-".into(), |ns| ms(ns as f64));
        let retrans: Option<u64> = s
            .parts
            .iter()
            .filter_map(|p| p.intervals.get(k)?.tcp_retransmits)
            .reduce(|a, b| a + b);
        let (fu, fd) = iv.fairness.map_or(("-".into(), "-".into()), |f| {
            (jain_text(f.up), jain_text(f.down))
        });
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{:.2}</td><td>{:.2}</td><td>{}</td><td>{}</td><td>{probe}</td><td>{fu}</td><td>{fd}</td><td>{}</td></tr>",
            iv.index,
            iv.phase.name(),
            iv.start_s,
            iv.end_s,
            at(&up),
            at(&down),
            retrans.map_or("-".into(), |n| n.to_string())
        );
    }
    o.push_str("</table>\n");
    if !s.warnings.0.is_empty() {
        o.push_str("<h2>Warnings</h2>\n<ul class=\"warnings\">\n");
        for w in &s.warnings.0 {
            let _ = writeln!(o, "<li>{}</li>", escape(&w.message));
        }
        o.push_str("</ul>\n");
    }
    o.push_str("</body></html>\n");
    o
}

/// One point per interval: its middle, in seconds.
fn mid(a: f64, b: f64) -> f64 {
    (a + b) / 2.0
}

/// Throughput of the parts of `dir`, per interval, summed: (time, bit/s).
fn series(parts: &[PartSummary], dir: &str) -> Vec<(f64, f64)> {
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
    let mut out = String::new();
    if let Err(e) = try_svg(r, &mut out) {
        return format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\"><text x=\"10\" y=\"20\">chart error: {}</text></svg>",
            crate::export::page::agg::escape(&e.to_string())
        );
    }
    out
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
fn legend_of(r: &TestResult) -> Vec<(String, RGBColor, super::agg::Mark)> {
    use super::agg::Mark;
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

fn try_svg(r: &TestResult, out: &mut String) -> Result<(), Box<dyn std::error::Error>> {
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
        .bold_line_style(super::agg::GRID_BOLD)
        .light_line_style(super::agg::GRID_LIGHT)
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
    super::agg::draw_legend(&side, &legend_of(r))?;
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
    let mut out = String::new();
    if let Err(e) = try_cdf(&idle, &loaded, &title(r), &mut out) {
        return Some(format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\"><text x=\"10\" y=\"20\">chart error: {}</text></svg>",
            crate::export::page::agg::escape(&e.to_string())
        ));
    }
    Some(out)
}

type CdfLine = (Vec<(f64, f64)>, bool);

fn try_cdf(
    idle: &CdfLine,
    loaded: &CdfLine,
    title: &str,
    out: &mut String,
) -> Result<(), Box<dyn std::error::Error>> {
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
        .bold_line_style(super::agg::GRID_BOLD)
        .light_line_style(super::agg::GRID_LIGHT)
        .draw()?;
    let mut legend = Vec::new();
    for (name, (pts, full), colour) in [("idle", idle, UP), ("loaded", loaded, PROBE)] {
        chart.draw_series(LineSeries::new(pts.to_vec(), colour.stroke_width(2)))?;
        let how = if *full {
            "all probes"
        } else {
            "6 percentiles only"
        };
        legend.push((format!("{name} ({how})"), colour, super::agg::Mark::Line));
    }
    super::agg::draw_legend(&side, &legend)?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::signed_ms;

    #[test]
    fn latency_under_load_carries_one_sign() {
        assert_eq!(signed_ms(5_010_000), "+5.01 ms");
        assert_eq!(signed_ms(-52_170_000), "-52.17 ms");
        assert_eq!(signed_ms(0), "+0.00 ms");
    }
}
