//! A mix's lines of the human summary (latency under load, the `rrul`
//! presets): one per part, then the phases (with `--one-way`, each way's
//! and which way the queue is), the latency under load and the fairness;
//! and the figures as those lines and the mix's page print them.

use std::io::{self, Write};

use crate::result::one_way::QueueDirection;
use crate::result::{PartSummary, PhaseFigures, ProbePhases, TestResult};
use crate::units::BitsPerSec;

/// Nanoseconds as milliseconds, two decimals.
pub fn ms(ns: f64) -> String {
    format!("{:.2} ms", ns / 1e6)
}

/// A difference in milliseconds with its sign always shown: the latency
/// under load is loaded minus idle, and on a busy host the loaded phase's
/// probes can be the faster ones ("-0.05 ms", never "+-0.05 ms").
pub fn signed_ms(ns: i64) -> String {
    format!("{:+.2} ms", ns as f64 / 1e6)
}

/// The mix's lines of the human summary: one per part, then the phases,
/// the latency under load and the fairness.
pub fn lines(r: &TestResult, out: &mut dyn Write) -> io::Result<()> {
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
        one_way_rows(ph, out)?;
    }
    if let Some(l) = &s.latency_under_load_ns {
        writeln!(
            out,
            "  latency under load     p50 {}  p99 {}",
            signed_ms(l.p50),
            signed_ms(l.p99)
        )?;
    }
    if let Some(q) = &s.queue_direction {
        writeln!(out, "  {}", queue_line(q))?;
        if !q.not_measured.is_empty() {
            writeln!(
                out,
                "  not measured one way: {} (its test carries no one-way stamps)",
                q.not_measured.join(", ")
            )?;
        }
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

/// `--one-way`: the probes' ways up and down, p50 in each phase.
fn one_way_rows(ph: &ProbePhases, out: &mut dyn Write) -> io::Result<()> {
    if ph.idle.one_way_ns.is_none() && ph.loaded.one_way_ns.is_none() {
        return Ok(());
    }
    writeln!(
        out,
        "  {:<9} {:>10} {:>10} {:>10}",
        "one-way", "idle p50", "loaded", "recovery"
    )?;
    for up in [true, false] {
        let cell = |f: &PhaseFigures| match &f.one_way_ns {
            Some(o) => ms((if up { o.up.p50 } else { o.down.p50 }) as f64),
            None => "-".into(),
        };
        writeln!(
            out,
            "  {:<9} {:>10} {:>10} {:>10}",
            if up { "up" } else { "down" },
            cell(&ph.idle),
            cell(&ph.loaded),
            cell(&ph.recovery)
        )?;
    }
    Ok(())
}

/// The verdict as one line: "the queue is on the way up: +98.40 ms up,
/// +0.10 ms down (± 0.00 ms)", each growth loaded p50 less idle p50.
pub fn queue_line(q: &QueueDirection) -> String {
    let lead = match q.direction.as_str() {
        "up" => "the queue is on the way up".to_string(),
        "down" => "the queue is on the way down".to_string(),
        "both" => "the queue is both ways".to_string(),
        _ => format!(
            "no queue either way (neither grew by {})",
            ms(q.floor_ns as f64)
        ),
    };
    format!(
        "{lead}: {} up, {} down (± {})",
        signed_ms(q.up_ns),
        signed_ms(q.down_ns),
        ms(q.error_ns as f64)
    )
}

/// The three phases in order, each with its probes' p50, p90 and p99 in
/// milliseconds ("-" without probe samples): the rows of the text and the
/// HTML phase tables.
pub fn phase_rows(ph: &ProbePhases) -> [(&'static str, &PhaseFigures, [String; 3]); 3] {
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
pub fn part_figure(p: &PartSummary) -> String {
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

/// Jain's index to three decimals, or `-`.
pub fn jain_text(x: Option<f64>) -> String {
    x.map_or("-".to_string(), |v| format!("{v:.3}"))
}

#[cfg(test)]
mod tests {
    use super::{QueueDirection, queue_line, signed_ms};

    /// The verdict's line: the way, each growth with its sign, the bound;
    /// where neither way grew enough, the floor it was held to.
    #[test]
    fn the_verdict_is_one_line() {
        let mut q = QueueDirection {
            direction: "up".into(),
            up_ns: 98_400_000,
            down_ns: 100_000,
            error_ns: 0,
            floor_ns: 1_000_000,
            probes: vec!["udp_rr".into()],
            not_measured: Vec::new(),
        };
        assert_eq!(
            queue_line(&q),
            "the queue is on the way up: +98.40 ms up, +0.10 ms down (± 0.00 ms)"
        );
        q.direction = "neither".into();
        q.up_ns = -50_000;
        assert_eq!(
            queue_line(&q),
            "no queue either way (neither grew by 1.00 ms): -0.05 ms up, +0.10 ms down (± 0.00 ms)"
        );
    }

    #[test]
    fn latency_under_load_carries_one_sign() {
        assert_eq!(signed_ms(5_010_000), "+5.01 ms");
        assert_eq!(signed_ms(-52_170_000), "-52.17 ms");
        assert_eq!(signed_ms(0), "+0.00 ms");
    }
}
