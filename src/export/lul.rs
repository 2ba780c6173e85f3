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
    use super::html::escape;
    use std::fmt::Write as _;
    let s = &r.summary;
    let title = format!("thrum latency under load: {}", escape(&r.spec.server));
    let mut o = super::html::head(&title);
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
        super::html::inline(&svg(r))
    );
    if let Some(cdf) = cdf_svg(r) {
        let _ = writeln!(
            o,
            "<h2>Probe latency, idle and loaded</h2>\n{}",
            super::html::inline(&cdf)
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

/// The probes' `pick` percentile (p50, p99) per interval, ms (the slowest
/// probe's when several).
fn probe_series(parts: &[PartSummary], pick: fn(&LatencySummary) -> u64) -> Vec<(f64, f64)> {
    let mut v: Vec<(f64, f64)> = Vec::new();
    for p in parts.iter().filter(|p| p.direction == "rr") {
        for iv in &p.intervals {
            let Some(l) = &iv.latency_ns else { continue };
            let (t, y) = (mid(iv.start_s, iv.end_s), pick(l) as f64 / 1e6);
            match v.iter_mut().find(|x| x.0 == t) {
                Some(x) => x.1 = x.1.max(y),
                None => v.push((t, y)),
            }
        }
    }
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v
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
/// bit/s on the left; the probes' median latency per interval (red) and
/// their p99 (dark red), ms on the right; the idle and recovery phases
/// shaded grey, the shading in the legend; each part a thin line under
/// its sum; titled with the parts, the server and the date.
pub fn svg(r: &TestResult) -> String {
    let mut out = String::new();
    if let Err(e) = try_svg(r, &mut out) {
        return format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\"><text x=\"10\" y=\"20\">chart error: {}</text></svg>",
            super::html::escape(&e.to_string())
        );
    }
    out
}

fn try_svg(r: &TestResult, out: &mut String) -> Result<(), Box<dyn std::error::Error>> {
    let parts = &r.summary.parts;
    let (up, down, probe, p99) = (
        series(parts, "up"),
        series(parts, "down"),
        probe_series(parts, |l| l.p50),
        probe_series(parts, |l| l.p99),
    );
    let x_max = r.intervals.last().map_or(1.0, |iv| iv.end_s).max(1.0);
    let y_max = up
        .iter()
        .chain(&down)
        .map(|p| p.1)
        .fold(0.0, f64::max)
        .max(1.0)
        * 1.1;
    let l_max = probe
        .iter()
        .chain(&p99)
        .map(|p| p.1)
        .fold(0.0, f64::max)
        .max(0.1)
        * 1.1;
    let root = SVGBackend::with_string(out, (1000, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let title = title(r);
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
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
        .bold_line_style(super::chart::GRID_BOLD)
        .light_line_style(super::chart::GRID_LIGHT)
        .draw()?;
    chart
        .configure_secondary_axes()
        .y_desc("probe latency (ms)")
        .draw()?;
    if let Some(ph) = &r.summary.phases {
        chart
            .draw_series(
                [&ph.idle, &ph.recovery]
                    .map(|f| Rectangle::new([(f.start_s, 0.0), (f.end_s, y_max)], QUIET.filled())),
            )?
            .label("probes alone (idle, recovery)")
            // A thick grey stroke, not a rectangle: the legend's swatch
            // reads as the shading without being one of the phases' boxes.
            .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], QUIET.stroke_width(10)));
    }
    // Each part as a thin line under the sums, as flent draws each flow,
    // where a sum has more than one part (one part is its own sum).
    let mut labelled = false;
    for dir in ["up", "down"] {
        let ps: Vec<&PartSummary> = parts.iter().filter(|p| p.direction == dir).collect();
        if ps.len() < 2 {
            continue;
        }
        let colour = if dir == "up" { UP } else { DOWN };
        for p in ps {
            let line = p.intervals.iter().map(|iv| {
                (
                    mid(iv.start_s, iv.end_s),
                    iv.sum.throughput_bps.unwrap_or(0.0),
                )
            });
            let drawn =
                chart.draw_series(LineSeries::new(line, colour.mix(0.35).stroke_width(1)))?;
            if !labelled {
                labelled = true;
                drawn.label("each part").legend(|(x, y)| {
                    PathElement::new([(x, y), (x + 20, y)], BLACK.mix(0.35).stroke_width(1))
                });
            }
        }
    }
    let probes: Vec<&PartSummary> = parts.iter().filter(|p| p.direction == "rr").collect();
    if probes.len() > 1 {
        for p in probes {
            let line = p.intervals.iter().filter_map(|iv| {
                let l = iv.latency_ns.as_ref()?;
                Some((mid(iv.start_s, iv.end_s), l.p50 as f64 / 1e6))
            });
            chart.draw_secondary_series(LineSeries::new(line, PROBE.mix(0.35).stroke_width(1)))?;
        }
    }
    chart
        .draw_series(LineSeries::new(up, UP.stroke_width(2)))?
        .label("up")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], UP.stroke_width(2)));
    chart
        .draw_series(LineSeries::new(down, DOWN.stroke_width(2)))?
        .label("down")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], DOWN.stroke_width(2)));
    chart
        .draw_secondary_series(LineSeries::new(probe, PROBE.stroke_width(2)))?
        .label("probe p50")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], PROBE.stroke_width(2)));
    chart
        .draw_secondary_series(LineSeries::new(p99, PROBE_P99.stroke_width(1)))?
        .label("probe p99")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 20, y)], PROBE_P99.stroke_width(1)));
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

/// The probes' latency distribution in the idle and the loaded phase, as
/// the percentiles the result keeps (min, p50, p90, p99, p99.9, max) drawn
/// as a step-free CDF on a log time axis: how far the load moved the whole
/// distribution, not only its median. None without probe phases.
pub fn cdf_svg(r: &TestResult) -> Option<String> {
    let ph = r.summary.phases.as_ref()?;
    let points = |l: &LatencySummary| -> Vec<(f64, f64)> {
        [
            (l.min, 0.0),
            (l.p50, 0.5),
            (l.p90, 0.9),
            (l.p99, 0.99),
            (l.p99_9, 0.999),
            (l.max, 1.0),
        ]
        .iter()
        .map(|&(ns, q)| ((ns.max(1)) as f64 / 1e6, q))
        .collect()
    };
    let idle = points(ph.idle.probe_latency_ns.as_ref()?);
    let loaded = points(ph.loaded.probe_latency_ns.as_ref()?);
    let mut out = String::new();
    if let Err(e) = try_cdf(&idle, &loaded, &title(r), &mut out) {
        return Some(format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\"><text x=\"10\" y=\"20\">chart error: {}</text></svg>",
            super::html::escape(&e.to_string())
        ));
    }
    Some(out)
}

fn try_cdf(
    idle: &[(f64, f64)],
    loaded: &[(f64, f64)],
    title: &str,
    out: &mut String,
) -> Result<(), Box<dyn std::error::Error>> {
    let all = idle.iter().chain(loaded).map(|p| p.0);
    let lo = all.clone().fold(f64::INFINITY, f64::min) / 1.5;
    let hi = all.fold(0.0, f64::max) * 1.5;
    let root = SVGBackend::with_string(out, (1000, 400)).into_drawing_area();
    root.fill(&WHITE)?;
    let title = title.replace("throughput and probe latency", "probe latency CDF");
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d((lo..hi).log_scale(), 0f64..1f64)?;
    chart
        .configure_mesh()
        .x_desc("probe latency (ms)")
        .y_desc("fraction of probes")
        .bold_line_style(super::chart::GRID_BOLD)
        .light_line_style(super::chart::GRID_LIGHT)
        .draw()?;
    for (name, pts, colour) in [("idle", idle, UP), ("loaded", loaded, PROBE)] {
        chart
            .draw_series(LineSeries::new(pts.to_vec(), colour.stroke_width(2)))?
            .label(name)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], colour.stroke_width(2)));
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
