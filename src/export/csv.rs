//! Per-interval samples as CSV, one row per interval per flow (neper-style),
//! with both ends' counts side by side, then the interval's latency
//! percentiles over all flows (the same on every row of that interval). For tcp_crr and tcp_cc the server
//! counts per worker thread, not per flow, so its columns are left empty
//! there and its sums appear in the JSON.

use std::io::{self, Write};

use super::Exporter;
use crate::plan::TestKind;
use crate::result::{Interval, TestResult};

pub struct Csv;

pub const HEADER: &str = "interval,phase,start_s,end_s,unix_end_s,flow,\
local_bytes_sent,local_bytes_received,local_transactions,local_datagrams_sent,local_datagrams_received,local_lost,local_reordered,local_duplicates,\
remote_bytes_sent,remote_bytes_received,remote_transactions,remote_datagrams_sent,remote_datagrams_received,remote_lost,remote_reordered,remote_duplicates,\
latency_count,latency_p50_ns,latency_p90_ns,latency_p99_ns,latency_p99_9_ns,latency_max_ns";

/// The header, with one more column per percentile asked for with --percentiles.
pub fn header(percentiles: &[f64]) -> String {
    let mut h = HEADER.to_string();
    for p in percentiles {
        h.push_str(&format!(",latency_p{p}_ns"));
    }
    h
}

fn latency(
    out: &mut dyn Write,
    l: Option<&crate::stats::latency::LatencySummary>,
    extra: usize,
) -> io::Result<()> {
    match l {
        Some(l) => {
            write!(
                out,
                ",{},{},{},{},{},{}",
                l.count, l.p50, l.p90, l.p99, l.p99_9, l.max
            )?;
            for p in &l.percentiles {
                write!(out, ",{}", p.ns)?;
            }
            Ok(())
        }
        None => write!(out, ",,,,,,{}", ",".repeat(extra)),
    }
}

fn counts(out: &mut dyn Write, c: Option<&crate::stats::counters::Counts>) -> io::Result<()> {
    match c {
        Some(c) => write!(
            out,
            ",{},{},{},{},{},{},{},{}",
            c.bytes_sent,
            c.bytes_received,
            c.transactions,
            c.datagrams_sent,
            c.datagrams_received,
            c.lost,
            c.reordered,
            c.duplicates
        ),
        None => write!(out, ",,,,,,,,"),
    }
}

impl Exporter for Csv {
    fn write(&self, r: &TestResult, out: &mut dyn Write) -> io::Result<()> {
        let extra = &r.spec.plan.percentiles;
        writeln!(out, "{}", header(extra))?;
        for iv in &r.intervals {
            write_interval(out, iv, r.test, extra.len())?;
        }
        Ok(())
    }
}

/// The rows of one interval, one per flow (also used while the test runs,
/// when the interval's latency is not in yet and its columns stay empty;
/// the finished file replaces those rows). `extra`: how many
/// `--percentiles` columns the header has.
pub fn write_interval(
    out: &mut dyn Write,
    iv: &Interval,
    test: TestKind,
    extra: usize,
) -> io::Result<()> {
    let per_flow_remote = !test.is_connect();
    for (f, l) in iv.local.iter().enumerate() {
        write!(
            out,
            "{},{},{:.6},{:.6},{:.6},{}",
            iv.index,
            iv.phase.name(),
            iv.start_s,
            iv.end_s,
            iv.unix_end_s,
            f
        )?;
        counts(out, Some(l))?;
        counts(out, iv.remote.get(f).filter(|_| per_flow_remote))?;
        latency(out, iv.latency_ns.as_ref(), extra)?;
        writeln!(out)?;
    }
    Ok(())
}
