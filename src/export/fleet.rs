//! A run from many agents in the human table (`thrum run --from`): each
//! interval's row per agent with the sum's row after them, and the
//! summary's lines per agent, their fairness, their clocks and the start.

use std::io::{self, Write};

use crate::result::{ClientSummary, Figures, Interval, TestResult};
use crate::units::{RateUnit, fmt_ns};

/// A figure of merit as the rows print it.
fn figure(f: &Figures, units: Option<RateUnit>) -> String {
    match (f.throughput_bps, f.transactions_per_s) {
        (Some(t), _) => RateUnit::show(units, t),
        (None, Some(t)) => format!("{t:.1} trans/s"),
        (None, None) => "-".into(),
    }
}

/// One interval: a row per agent, then their sum; `lead` is what
/// precedes each row (the wall-clock time under `--timestamps`).
pub fn rows(
    out: &mut dyn Write,
    iv: &Interval,
    units: Option<RateUnit>,
    lead: &str,
) -> io::Result<()> {
    let phase = iv.phase.name();
    for c in &iv.clients {
        writeln!(
            out,
            "{lead}{:>8.2} {:>8.2}  {:<9} {:>22}  {}",
            c.start_s,
            c.end_s,
            phase,
            figure(&c.sum, units),
            c.host
        )?;
    }
    writeln!(
        out,
        "{lead}{:>8.2} {:>8.2}  {:<9} {:>22}  sum",
        iv.start_s,
        iv.end_s,
        phase,
        figure(&iv.sum, units)
    )
}

fn client_figure(c: &ClientSummary, units: Option<RateUnit>) -> String {
    let s = &c.summary;
    match (s.throughput_bps, s.transactions_per_s) {
        (Some(t), _) => RateUnit::show(units, t),
        (None, Some(t)) => format!("{t:.1} trans/s"),
        (None, None) => "-".into(),
    }
}

/// The summary's lines of a run from many agents: one per agent (its
/// figure, latency, both hosts' CPU, its error), the fairness, each
/// clock's offset with its bound, and how the start went.
pub fn lines(r: &TestResult, out: &mut dyn Write, units: Option<RateUnit>) -> io::Result<()> {
    let s = &r.summary;
    writeln!(
        out,
        "  {:<22} {:>16} {:>10} {:>10} {:>8} {:>8}",
        "agent", "result", "p50", "p99", "cpu", "target"
    )?;
    let pct = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.1} %"));
    for c in &s.clients {
        let l = c.summary.latency_ns.as_ref();
        writeln!(
            out,
            "  {:<22} {:>16} {:>10} {:>10} {:>8} {:>8}{}",
            c.host,
            client_figure(c, units),
            l.map_or("-".into(), |l| fmt_ns(l.p50 as f64)),
            l.map_or("-".into(), |l| fmt_ns(l.p99 as f64)),
            pct(c.summary.local.cpu_util_percent),
            pct(c.summary.remote.cpu_util_percent),
            c.summary
                .error
                .as_deref()
                .map(|e| format!("  ({})", crate::text::message(e)))
                .unwrap_or_default()
        )?;
    }
    let sum = Figures {
        throughput_bps: s.throughput_bps,
        transactions_per_s: s.transactions_per_s,
        ..Figures::default()
    };
    writeln!(out, "  {:<22} {:>16}", "sum", figure(&sum, units))?;
    if let Some(j) = s.fairness_jain {
        writeln!(out, "  fairness (Jain)        {j:.3}")?;
    }
    for c in &r.clock {
        let drift = c
            .drift_ppm
            .map(|d| format!(", drift {d:+.2} ppm"))
            .unwrap_or_default();
        writeln!(
            out,
            "  clock {:<6} {:<16} offset {:+.3} ms ± {:.3} ms{drift}",
            c.role,
            c.host,
            c.offset_ns as f64 / 1e6,
            c.error_ns as f64 / 1e6
        )?;
    }
    if let Some(f) = &s.fleet {
        write!(
            out,
            "  start                  {} of {} agents ran; set-up {:.2} s, barrier {:.2} s",
            f.completed, f.agents, f.setup_s, f.barrier_s
        )?;
        match f.start_skew_s {
            Some(k) => writeln!(out, ", skew {}", fmt_ns(k * 1e9))?,
            None => writeln!(out)?,
        }
    }
    Ok(())
}
