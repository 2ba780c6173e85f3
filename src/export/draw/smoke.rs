//! SmokePing's chart, for `thrum web`: each series' median as a line, the
//! spread around it as "smoke" (bands, the widest lightest), loss as the
//! colour of each point, and a sparkline for a cell of the overview grid.
//! Several series (one per set of labels) share the axes, each in a colour
//! of its own; with one series the smoke is grey and the line takes the
//! loss colours, as SmokePing draws a target.
//!
//! Drawn as SVG text rather than with plotters: a point here is a link to
//! its run with a tooltip (`<a>`, `<title>`), the smoke is translucent, and
//! the drawing scales to its container (a `viewBox`, no fixed size). The
//! axis says its unit and its ticks are in it (a latency axis in ms has
//! ticks in ms). Every text that may come from the store (a series name, a
//! tooltip, a link) is escaped here.

use std::fmt::Write;

use crate::text::escape_markup as esc;

/// What the y axis holds, which picks its unit and scale.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quantity {
    /// Nanoseconds, drawn in ns, µs, ms or s as the values need.
    Latency,
    /// Bits per second, drawn in bit/s, kbit/s, Mbit/s or Gbit/s.
    BitsPerSec,
    /// Transactions per second, with an SI prefix.
    TransPerSec,
    /// A percentage.
    Percent,
}

/// What the x axis holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XAxis {
    /// Unix seconds, drawn as local wall-clock times.
    Time,
    /// Seconds from a start (one run's intervals).
    Seconds,
}

/// One point of a series.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Point {
    pub x: f64,
    /// The line's value (the median, or the figure).
    pub y: f64,
    /// The smoke around it, the widest first: each `(low, high)`.
    pub bands: Vec<(f64, f64)>,
    /// Percent lost, where the run counts loss.
    pub loss_percent: Option<f64>,
    /// Where a click on the point goes.
    pub href: Option<String>,
    /// Its tooltip.
    pub title: String,
}

/// One line on the chart.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Series {
    pub name: String,
    /// Oldest first.
    pub points: Vec<Point>,
    /// Where runs of this series failed (x), marked under the plot.
    pub failed: Vec<f64>,
}

/// A whole chart.
pub struct Chart<'a> {
    /// What is drawn ("latency", "transactions/s"), the axis' name.
    pub what: &'a str,
    pub quantity: Quantity,
    pub x: XAxis,
    pub series: &'a [Series],
    /// What the smoke is, for the legend ("p10–p90, p1–p99").
    pub smoke: &'a str,
    /// The x axis' extent; None: the points' own, padded a little.
    pub x_range: Option<(f64, f64)>,
    /// Spans of x shaded behind the data, each with its name (a run's
    /// warm-up and cool-down).
    pub shaded: &'a [(f64, f64, &'a str)],
}

/// The series' colours (Tableau 10, which reads apart for most colour
/// vision): the first for one series' line is replaced by the loss colours.
pub const PALETTE: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac",
];

/// SmokePing's loss colours, by the most lost in a class: none, a little,
/// some, much, most.
pub const LOSS: [(f64, &str, &str); 5] = [
    (0.0, "#1a9c3e", "0 %"),
    (5.0, "#1f78d1", "≤ 5 %"),
    (10.0, "#7a3fd1", "≤ 10 %"),
    (25.0, "#c41fc4", "≤ 25 %"),
    (100.0, "#d7191c", "> 25 %"),
];

/// The colour of a point that lost `percent`.
pub fn loss_colour(percent: f64) -> &'static str {
    LOSS.iter()
        .find(|(most, _, _)| percent <= *most)
        .map_or(LOSS[4].1, |l| l.1)
}

const W: f64 = 1000.0;
const PLOT_H: f64 = 300.0;
const LEFT: f64 = 78.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 30.0;
/// Below the plot: the time axis' labels and the failure marks.
const AXIS_H: f64 = 46.0;
const LEGEND_ROW: f64 = 22.0;

/// A scale of the y axis: values are divided by `div` and the axis says `unit`.
fn y_unit(q: Quantity, top: f64) -> (f64, &'static str) {
    match q {
        Quantity::Latency => {
            if top >= 2e9 {
                (1e9, "s")
            } else if top >= 2e6 {
                (1e6, "ms")
            } else if top >= 2e3 {
                (1e3, "µs")
            } else {
                (1.0, "ns")
            }
        }
        Quantity::BitsPerSec => {
            if top >= 2e9 {
                (1e9, "Gbit/s")
            } else if top >= 2e6 {
                (1e6, "Mbit/s")
            } else if top >= 2e3 {
                (1e3, "kbit/s")
            } else {
                (1.0, "bit/s")
            }
        }
        Quantity::TransPerSec => {
            if top >= 2e6 {
                (1e6, "M trans/s")
            } else if top >= 2e3 {
                (1e3, "k trans/s")
            } else {
                (1.0, "trans/s")
            }
        }
        Quantity::Percent => (1.0, "%"),
    }
}

/// A step for about `n` ticks over `span`: 1, 2 or 5 times a power of ten.
fn nice_step(span: f64, n: f64) -> f64 {
    if span <= 0.0 || !span.is_finite() {
        return 1.0;
    }
    let raw = span / n;
    let p = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * p)
        .find(|&s| s >= raw)
        .unwrap_or(10.0 * p)
}

/// A tick's label: as few decimals as the step needs.
fn tick_text(v: f64, step: f64) -> String {
    let decimals = if step >= 1.0 {
        0
    } else {
        (-step.log10().floor()) as usize
    };
    format!("{v:.decimals$}")
}

/// Time ticks: a step of seconds from a fixed list, and the label's format.
fn time_ticks(t0: f64, t1: f64) -> (Vec<f64>, &'static str) {
    const STEPS: [f64; 16] = [
        1.0, 5.0, 15.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 10800.0, 21600.0, 43200.0,
        86400.0, 172800.0, 604800.0, 2592000.0,
    ];
    let span = (t1 - t0).max(1.0);
    let step = STEPS
        .into_iter()
        .find(|s| span / s <= 8.0)
        .unwrap_or(2592000.0);
    let format = if step >= 86400.0 {
        "%m-%d"
    } else if span >= 86400.0 {
        "%m-%d %H:%M"
    } else if step >= 60.0 {
        "%H:%M"
    } else {
        "%H:%M:%S"
    };
    // Whole steps of local time: the UTC offset moves a day's ticks to midnight.
    let offset = local_offset(t0);
    let first = ((t0 + offset) / step).ceil() * step - offset;
    let ticks = (0..)
        .map(|i| first + f64::from(i) * step)
        .take_while(|t| *t <= t1)
        .take(40)
        .collect();
    (ticks, format)
}

/// The local time's offset from UTC at `t`, in seconds.
fn local_offset(t: f64) -> f64 {
    let local = crate::units::fmt_strftime(t, "%z");
    let (sign, digits) = match local.as_bytes().first() {
        Some(b'-') => (-1.0, &local[1..]),
        Some(b'+') => (1.0, &local[1..]),
        _ => return 0.0,
    };
    let n: f64 = digits.parse().unwrap_or(0.0);
    sign * ((n / 100.0).floor() * 3600.0 + (n % 100.0) * 60.0)
}

/// The SVG of `c`.
pub fn svg(c: &Chart) -> String {
    let points = || c.series.iter().flat_map(|s| s.points.iter());
    let mut xs: Vec<f64> = points().map(|p| p.x).collect();
    xs.extend(c.series.iter().flat_map(|s| s.failed.iter().copied()));
    let (mut x0, mut x1) = xs
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
            (a.min(x), b.max(x))
        });
    if !x0.is_finite() {
        (x0, x1) = (0.0, 1.0);
    }
    if x1 - x0 < 1.0 {
        let pad = if c.x == XAxis::Time { 300.0 } else { 0.5 };
        x0 -= pad;
        x1 += pad;
    } else {
        // Points clear of the frame.
        let pad = (x1 - x0) * 0.015;
        x0 -= pad;
        x1 += pad;
    }
    if let Some((a, b)) = c.x_range.filter(|(a, b)| b > a) {
        (x0, x1) = (a, b);
    }
    let top = points()
        .flat_map(|p| std::iter::once(p.y).chain(p.bands.iter().map(|b| b.1)))
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max);
    let (div, unit) = y_unit(c.quantity, top);
    let y_top = super::plot::nice_ceil(top / div * 1.05) * div;
    let legend_rows = legend_rows(c);
    let h = TOP + PLOT_H + AXIS_H + LEGEND_ROW * legend_rows as f64 + 8.0;
    let pw = W - LEFT - RIGHT;
    let sx = |x: f64| LEFT + (x - x0) / (x1 - x0) * pw;
    let sy = |y: f64| TOP + PLOT_H - (y / y_top).clamp(0.0, 1.05) * PLOT_H;
    let mut o = String::new();
    let _ = write!(
        o,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {W} {h}\" class=\"chart smoke\" role=\"img\" font-family=\"sans-serif\" font-size=\"13\">\
<title>{}</title><rect width=\"{W}\" height=\"{h}\" fill=\"#fff\"/>",
        esc(c.what)
    );
    // Shaded spans first: the grid and the data over them.
    for (a, b, name) in c.shaded {
        let (xa, xb) = (sx(a.max(x0)), sx(b.min(x1)));
        if xb > xa {
            let _ = write!(
                o,
                "<rect x=\"{xa:.1}\" y=\"{TOP}\" width=\"{:.1}\" height=\"{PLOT_H}\" fill=\"#f1f3f5\"/>\
<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#868e96\" font-size=\"12\">{}</text>",
                xb - xa,
                (xa + xb) / 2.0,
                TOP + 14.0,
                esc(name)
            );
        }
    }
    // The y grid and ticks, in the axis' unit.
    let ystep = nice_step(y_top / div, 5.0);
    let mut v = 0.0;
    while v <= y_top / div * (1.0 + 1e-9) {
        let y = sy(v * div);
        let _ = write!(
            o,
            "<line x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#e4e4e4\"/>\
<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#444\">{}</text>",
            LEFT + pw,
            LEFT - 6.0,
            y + 4.0,
            tick_text(v, ystep)
        );
        v += ystep;
    }
    let _ = write!(
        o,
        "<text transform=\"translate(16 {:.1}) rotate(-90)\" text-anchor=\"middle\" fill=\"#222\">{} ({unit})</text>",
        TOP + PLOT_H / 2.0,
        esc(c.what)
    );
    // The x grid and ticks.
    let base = TOP + PLOT_H;
    match c.x {
        XAxis::Time => {
            let (ticks, format) = time_ticks(x0, x1);
            for t in ticks {
                let x = sx(t);
                let _ = write!(
                    o,
                    "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{TOP}\" y2=\"{base}\" stroke=\"#f0f0f0\"/>\
<text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#444\">{}</text>",
                    base + 18.0,
                    esc(&crate::units::fmt_strftime(t, format))
                );
            }
        }
        XAxis::Seconds => {
            let step = nice_step(x1 - x0, 8.0);
            let mut t = (x0 / step).ceil() * step;
            while t <= x1 + 1e-9 {
                let x = sx(t);
                let _ = write!(
                    o,
                    "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{TOP}\" y2=\"{base}\" stroke=\"#f0f0f0\"/>\
<text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#444\">{}</text>",
                    base + 18.0,
                    tick_text(t, step)
                );
                t += step;
            }
            let _ = write!(
                o,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#222\">seconds</text>",
                LEFT + pw / 2.0,
                base + 36.0
            );
        }
    }
    let _ = write!(
        o,
        "<rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{pw:.1}\" height=\"{PLOT_H}\" fill=\"none\" stroke=\"#999\"/>"
    );
    let single = c.series.len() == 1;
    for (i, s) in c.series.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        smoke(
            &mut o,
            s,
            single,
            if single { "#000" } else { colour },
            &sx,
            &sy,
        );
    }
    for (i, s) in c.series.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        line(&mut o, s, colour, single, &sx, &sy);
        for &f in &s.failed {
            let x = sx(f);
            let _ = write!(
                o,
                "<path d=\"M{x:.1} {:.1} l-5 9 h10 z\" fill=\"#d7191c\"><title>failed</title></path>",
                base + 22.0
            );
        }
    }
    legend(&mut o, c, h - LEGEND_ROW * legend_rows as f64 - 4.0);
    o.push_str("</svg>\n");
    o
}

/// The smoke of a series: each band as one polygon over its points, the
/// widest first and lightest. Beside other series, one band only (the
/// middle one), lighter: several series' full smoke would hide each other.
fn smoke(
    o: &mut String,
    s: &Series,
    single: bool,
    colour: &str,
    sx: &dyn Fn(f64) -> f64,
    sy: &dyn Fn(f64) -> f64,
) {
    let bands = s.points.iter().map(|p| p.bands.len()).max().unwrap_or(0);
    let drawn: Vec<usize> = if single || bands == 0 {
        (0..bands).collect()
    } else {
        vec![bands.min(2) - 1]
    };
    for b in drawn {
        let opacity = if single { 0.10 + 0.08 * b as f64 } else { 0.16 };
        // A band over the runs that have it, broken where one has not.
        for run in s.points.split(|p| p.bands.len() <= b) {
            if run.is_empty() {
                continue;
            }
            let mut d = String::new();
            if run.len() == 1 {
                let p = &run[0];
                let (lo, hi) = p.bands[b];
                let x = sx(p.x);
                let _ = write!(
                    o,
                    "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"6\" height=\"{:.1}\" fill=\"{colour}\" fill-opacity=\"{opacity:.2}\"/>",
                    x - 3.0,
                    sy(hi),
                    (sy(lo) - sy(hi)).max(0.5)
                );
                continue;
            }
            for (k, p) in run.iter().enumerate() {
                let _ = write!(
                    d,
                    "{}{:.1} {:.1} ",
                    if k == 0 { "M" } else { "L" },
                    sx(p.x),
                    sy(p.bands[b].1)
                );
            }
            for p in run.iter().rev() {
                let _ = write!(d, "L{:.1} {:.1} ", sx(p.x), sy(p.bands[b].0));
            }
            let _ = write!(
                o,
                "<path d=\"{}Z\" fill=\"{colour}\" fill-opacity=\"{opacity:.2}\" stroke=\"none\"/>",
                d
            );
        }
    }
}

/// The line of a series and a marker per point (a link to its run, with
/// its tooltip). With one series the line and markers take the loss
/// colours; with several, each its series' colour and the marker's
/// outline the loss colour.
fn line(
    o: &mut String,
    s: &Series,
    colour: &'static str,
    single: bool,
    sx: &dyn Fn(f64) -> f64,
    sy: &dyn Fn(f64) -> f64,
) {
    let stroke = |p: &Point| match (single, p.loss_percent) {
        (true, Some(l)) => loss_colour(l),
        (true, None) => "#222",
        (false, _) => colour,
    };
    for w in s.points.windows(2) {
        let _ = write!(
            o,
            "<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{}\" stroke-width=\"2\"/>",
            sx(w[0].x),
            sy(w[0].y),
            sx(w[1].x),
            sy(w[1].y),
            stroke(&w[1])
        );
    }
    let r = if s.points.len() > 120 { 2.5 } else { 3.5 };
    for p in &s.points {
        let fill = p.loss_percent.map_or(stroke(p), loss_colour);
        let mark = format!(
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"{r}\" fill=\"{fill}\" stroke=\"{}\" stroke-width=\"1.5\"><title>{}</title></circle>",
            sx(p.x),
            sy(p.y),
            if single { "#fff" } else { colour },
            esc(&p.title)
        );
        match &p.href {
            Some(h) => {
                let _ = write!(o, "<a href=\"{}\">{mark}</a>", esc(h));
            }
            None => o.push_str(&mark),
        }
    }
}

/// The legend's entries: the series (when more than one), the smoke, the
/// loss classes (when a point counts loss).
fn legend_entries(c: &Chart) -> Vec<(String, String, bool)> {
    let mut e = Vec::new();
    if c.series.len() > 1 {
        for (i, s) in c.series.iter().enumerate() {
            e.push((
                s.name.clone(),
                PALETTE[i % PALETTE.len()].to_string(),
                false,
            ));
        }
    } else if let Some(s) = c.series.first() {
        e.push((s.name.clone(), "#222".to_string(), false));
    }
    if c.series
        .iter()
        .any(|s| s.points.iter().any(|p| !p.bands.is_empty()))
    {
        e.push((format!("smoke: {}", c.smoke), "#999".to_string(), true));
    }
    if c.series
        .iter()
        .any(|s| s.points.iter().any(|p| p.loss_percent.is_some()))
    {
        for (_, colour, name) in LOSS {
            e.push((format!("loss {name}"), colour.to_string(), false));
        }
    }
    e
}

/// Entries of about this many characters fit a row.
const ROW_CHARS: usize = 110;

fn rows_of(entries: &[(String, String, bool)]) -> Vec<Vec<&(String, String, bool)>> {
    let mut rows: Vec<Vec<&(String, String, bool)>> = vec![Vec::new()];
    let mut used = 0;
    for e in entries {
        let n = e.0.chars().count().min(60) + 6;
        if used + n > ROW_CHARS && !rows.last().is_some_and(Vec::is_empty) {
            rows.push(Vec::new());
            used = 0;
        }
        used += n;
        rows.last_mut().expect("a row").push(e);
    }
    rows
}

fn legend_rows(c: &Chart) -> usize {
    rows_of(&legend_entries(c)).len()
}

/// The legend under the plot, outside the data, row after row.
fn legend(o: &mut String, c: &Chart, y0: f64) {
    let entries = legend_entries(c);
    for (r, row) in rows_of(&entries).into_iter().enumerate() {
        let y = y0 + r as f64 * LEGEND_ROW;
        let mut x = LEFT;
        for (name, colour, band) in row {
            if *band {
                let _ = write!(
                    o,
                    "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"22\" height=\"10\" fill=\"{colour}\" fill-opacity=\"0.4\"/>",
                    y - 5.0
                );
            } else {
                let _ = write!(
                    o,
                    "<line x1=\"{x:.1}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"{colour}\" stroke-width=\"3\"/>",
                    x + 22.0
                );
            }
            let shown = crate::text::escape(name, 60);
            let _ = write!(
                o,
                "<text x=\"{:.1}\" y=\"{:.1}\" fill=\"#222\">{}</text>",
                x + 28.0,
                y + 4.0,
                esc(&shown)
            );
            x += 28.0 + 7.2 * shown.chars().count() as f64 + 18.0;
        }
    }
}

/// A sparkline of `values` (oldest first), its last point in `colour`:
/// the shape of the recent runs, scaled to their own range (its height
/// says nothing alone; the cell beside it gives the figure).
pub fn sparkline(values: &[f64], colour: &str) -> String {
    const SW: f64 = 120.0;
    const SH: f64 = 28.0;
    let vals: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    let mut o = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {SW} {SH}\" class=\"spark\" preserveAspectRatio=\"none\" aria-hidden=\"true\">"
    );
    if vals.is_empty() {
        o.push_str("</svg>");
        return o;
    }
    let (lo, hi) = vals
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
            (a.min(v), b.max(v))
        });
    let span = if hi > lo { hi - lo } else { 1.0 };
    let n = vals.len();
    let px = |i: usize| {
        if n == 1 {
            SW / 2.0
        } else {
            3.0 + i as f64 / (n - 1) as f64 * (SW - 6.0)
        }
    };
    let py = |v: f64| {
        if hi > lo {
            SH - 4.0 - (v - lo) / span * (SH - 8.0)
        } else {
            SH / 2.0
        }
    };
    let pts: Vec<String> = vals
        .iter()
        .enumerate()
        .map(|(i, v)| format!("{:.1},{:.1}", px(i), py(*v)))
        .collect();
    let _ = write!(
        o,
        "<polyline points=\"{}\" fill=\"none\" stroke=\"#555\" stroke-width=\"1.5\" vector-effect=\"non-scaling-stroke\"/>\
<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{}\"/></svg>",
        pts.join(" "),
        px(n - 1),
        py(vals[n - 1]),
        esc(colour)
    );
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(x: f64, y: f64) -> Point {
        Point {
            x,
            y,
            bands: vec![(y * 0.5, y * 2.0), (y * 0.8, y * 1.2)],
            loss_percent: None,
            href: Some("/runs/abcd1234".into()),
            title: "run <b>".into(),
        }
    }

    #[test]
    fn units_match_the_ticks() {
        assert_eq!(y_unit(Quantity::Latency, 350_000.0), (1e3, "µs"));
        assert_eq!(y_unit(Quantity::Latency, 25e6), (1e6, "ms"));
        assert_eq!(y_unit(Quantity::BitsPerSec, 9.4e9), (1e9, "Gbit/s"));
        assert_eq!(y_unit(Quantity::TransPerSec, 60_000.0), (1e3, "k trans/s"));
        let series = [Series {
            name: "case=a".into(),
            points: vec![point(100.0, 400_000.0), point(200.0, 500_000.0)],
            failed: vec![150.0],
        }];
        let s = svg(&Chart {
            what: "latency",
            quantity: Quantity::Latency,
            x: XAxis::Seconds,
            series: &series,
            smoke: "p10–p90",
            x_range: None,
            shaded: &[(0.0, 120.0, "warmup")],
        });
        // In µs: a top of 1000 µs (the widest band), ticks of 500.
        assert!(s.contains("latency (µs)"), "{s}");
        assert!(s.contains(">500</text>"), "{s}");
        assert!(s.contains("viewBox=\"0 0 1000 "), "{s}");
        let open = &s[..s.find('>').unwrap()];
        assert!(!open.contains("width="), "no fixed size: {open}");
        assert!(s.contains("run &lt;b&gt;") && !s.contains("<b>"));
        assert!(s.contains("href=\"/runs/abcd1234\""));
        assert!(s.contains("<title>failed</title>"));
        roxmltree::Document::parse(&s).expect("well-formed XML");
    }

    #[test]
    fn several_series_have_a_legend_of_their_names_escaped() {
        let a = Series {
            name: "k=\"<script>\"".into(),
            points: vec![point(0.0, 5.0)],
            failed: vec![],
        };
        let mut b = a.clone();
        b.name = "k=b".into();
        b.points[0].loss_percent = Some(12.0);
        let s = svg(&Chart {
            what: "transactions/s",
            quantity: Quantity::TransPerSec,
            x: XAxis::Time,
            series: &[a, b],
            smoke: "intervals' p10–p90",
            x_range: Some((-1.0, 1.0)),
            shaded: &[],
        });
        assert!(!s.contains("<script>"));
        assert!(s.contains("k=&quot;&lt;script&gt;&quot;"), "{s}");
        assert!(s.contains("loss &gt; 25 %") || s.contains("loss ≤ 25 %"));
        assert!(s.contains(loss_colour(12.0)));
        roxmltree::Document::parse(&s).expect("well-formed XML");
    }

    #[test]
    fn loss_classes_and_sparklines() {
        assert_eq!(loss_colour(0.0), LOSS[0].1);
        assert_eq!(loss_colour(3.0), LOSS[1].1);
        assert_eq!(loss_colour(60.0), LOSS[4].1);
        let s = sparkline(&[1.0, 2.0, f64::NAN, 3.0], "#123456");
        assert!(s.contains("viewBox") && s.contains("#123456"));
        roxmltree::Document::parse(&s).expect("well-formed XML");
        assert!(sparkline(&[], "#000").ends_with("</svg>"));
    }

    #[test]
    fn time_ticks_are_whole_steps() {
        let (t, f) = time_ticks(1_795_701_600.0, 1_795_701_600.0 + 7200.0);
        assert!(t.len() >= 2 && t.len() <= 9, "{t:?}");
        assert_eq!(f, "%H:%M");
        assert_eq!(nice_step(1000.0, 5.0), 200.0);
        assert_eq!(tick_text(0.25, 0.05), "0.25");
    }
}
