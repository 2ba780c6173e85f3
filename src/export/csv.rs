//! Per-interval samples as CSV, one row per interval per flow (neper's
//! samples.csv), with both ends' counts side by side, then that flow's
//! latency in the interval (`intervals[].flow_latency_ns`; all flows' where
//! it was not kept, as in the rows written while the test runs), then each
//! end's process usage over the interval (the same on every row of it).
//! For tcp_crr and tcp_cc the server counts per worker thread, not per
//! flow, so its columns are left empty there and its sums appear in the
//! JSON.

use std::io::{self, Write};

use super::Exporter;
use crate::plan::TestKind;
use crate::result::{Interval, TestResult};
use crate::stats::latency::LatencySummary;
use crate::text::csv_field;

pub struct Csv;

pub const HEADER: &str = "interval,phase,start_s,end_s,unix_end_s,flow,\
local_bytes_sent,local_bytes_received,local_transactions,local_datagrams_sent,local_datagrams_received,local_lost,local_reordered,local_duplicates,\
remote_bytes_sent,remote_bytes_received,remote_transactions,remote_datagrams_sent,remote_datagrams_received,remote_lost,remote_reordered,remote_duplicates,\
latency_count,latency_p50_ns,latency_p90_ns,latency_p99_ns,latency_p99_9_ns,latency_max_ns,latency_min_ns,latency_mean_ns,latency_stddev_ns";

/// Each end's process usage over the interval, neper's rusage columns
/// (after the latency and open-loop ones, before a mix's `part`).
const RUSAGE: &str = "utime_s,stime_s,maxrss_kb,minflt,majflt,nvcsw,nivcsw";

/// The percentiles the fixed latency columns show (p50, p90, p99, p99.9).
const FIXED: [f64; 4] = [50.0, 90.0, 99.0, 99.9];

/// Whether entry `i` of a --percentiles list gets a column of its own: not
/// when a fixed column shows it already (`--percentiles 50,99.99` asks for
/// p50, which `latency_p50_ns` is), nor when an earlier entry has it; two
/// columns of one name would leave a reader to guess which it read.
fn own_column(percentiles: &[f64], i: usize) -> bool {
    let p = percentiles[i];
    !FIXED.contains(&p) && !percentiles[..i].contains(&p)
}

/// The percentiles of a --percentiles list that get a column of their
/// own ([`own_column`]), in the order given: the header's extra columns.
pub fn own_columns(percentiles: &[f64]) -> Vec<f64> {
    (0..percentiles.len())
        .filter(|&i| own_column(percentiles, i))
        .map(|i| percentiles[i])
        .collect()
}

/// The header, with one more column per percentile asked for with
/// --percentiles that a column does not show already; for an open-loop test (`--rate`, not a mix) the
/// client's late count and the service time (from the actual send) with
/// the same percentiles; and for a mix a last `part` column.
pub fn header(percentiles: &[f64], mix: bool, open: bool) -> String {
    let mut h = HEADER.to_string();
    let percentiles = own_columns(percentiles);
    for p in &percentiles {
        h.push_str(&format!(",latency_p{p}_ns"));
    }
    if open && !mix {
        h.push_str(",local_late,service_count,service_p50_ns,service_p90_ns,service_p99_ns,service_p99_9_ns,service_max_ns,service_min_ns,service_mean_ns,service_stddev_ns");
        for p in &percentiles {
            h.push_str(&format!(",service_p{p}_ns"));
        }
    }
    for end in ["local", "remote"] {
        for c in RUSAGE.split(',') {
            h.push_str(&format!(",{end}_{c}"));
        }
    }
    if mix {
        h.push_str(",part");
    }
    h
}

/// A part of a mix as the CSV needs it: its name, test and flow count,
/// in the plan's order (its flows follow the previous part's).
#[derive(Clone, Debug)]
pub struct PartCols {
    pub name: String,
    pub test: TestKind,
    pub flows: usize,
}

impl PartCols {
    /// The parts of a mix's plan, none for a single test.
    pub fn of_plan(plan: &crate::plan::TestPlan) -> Vec<PartCols> {
        plan.parts
            .iter()
            .zip(plan.part_plans())
            .map(|(p, pp)| PartCols {
                name: p.name.clone(),
                test: p.test,
                flows: pp.flows as usize,
            })
            .collect()
    }

    /// The parts of a mix's result, none for a single test.
    pub fn of(r: &TestResult) -> Vec<PartCols> {
        r.summary
            .parts
            .iter()
            .map(|p| PartCols {
                name: p.name.clone(),
                test: p.test,
                flows: p.flows as usize,
            })
            .collect()
    }
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
                ",{},{},{},{},{},{},{},{:.0},{:.0}",
                l.count, l.p50, l.p90, l.p99, l.p99_9, l.max, l.min, l.mean, l.stddev
            )?;
            // The summary's percentiles follow the --percentiles list,
            // so the header's columns are its entries with one of their own.
            let asked: Vec<f64> = l.percentiles.iter().map(|p| p.percentile).collect();
            for (i, p) in l.percentiles.iter().enumerate() {
                if own_column(&asked, i) {
                    write!(out, ",{}", p.ns)?;
                }
            }
            Ok(())
        }
        None => write!(out, ",,,,,,,,,{}", ",".repeat(extra)),
    }
}

/// One end's usage over the interval; empty where it is not known.
fn rusage(out: &mut dyn Write, r: Option<&crate::sensors::Rusage>) -> io::Result<()> {
    match r {
        Some(r) => write!(
            out,
            ",{:.6},{:.6},{},{},{},{},{}",
            r.user_s,
            r.system_s,
            r.max_rss_kb,
            r.minor_faults,
            r.major_faults,
            r.voluntary_switches,
            r.involuntary_switches
        ),
        None => write!(out, ",,,,,,,"),
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
        let parts = PartCols::of(r);
        let open = r.spec.plan.offered_per_s.is_some();
        writeln!(out, "{}", header(extra, !parts.is_empty(), open))?;
        for iv in &r.intervals {
            // A mix's latency is its probes', each part's own interval.
            let latency: Vec<Option<&LatencySummary>> = r
                .summary
                .parts
                .iter()
                .map(|p| {
                    p.intervals
                        .iter()
                        .find(|pi| pi.index == iv.index)
                        .and_then(|pi| pi.latency_ns.as_ref())
                })
                .collect();
            let cols = Cols {
                percentiles: own_columns(extra).len(),
                open,
            };
            write_interval(out, iv, r.test, cols, &parts, &latency)?;
        }
        Ok(())
    }
}

/// What columns a row has beyond the fixed ones (see [`header`]).
#[derive(Clone, Copy, Debug)]
pub struct Cols {
    /// `--percentiles` columns of their own ([`own_columns`]).
    pub percentiles: usize,
    /// Open loop: late count and service time.
    pub open: bool,
}

/// The rows of one interval, one per flow (also used while the test runs,
/// when the interval's latency is not in yet and its columns stay empty;
/// the finished file replaces those rows). `extra`: how many
/// `--percentiles` columns the header has. A mix (`parts` not empty):
/// each row's latency is its part's in this interval (`latency`, one per
/// part) and its last column the part's name.
pub fn write_interval(
    out: &mut dyn Write,
    iv: &Interval,
    test: TestKind,
    cols: Cols,
    parts: &[PartCols],
    latency_of: &[Option<&LatencySummary>],
) -> io::Result<()> {
    let extra = cols.percentiles;
    // Flow f's part, when a mix.
    let owner: Vec<usize> = parts
        .iter()
        .enumerate()
        .flat_map(|(i, p)| std::iter::repeat_n(i, p.flows))
        .collect();
    for (f, l) in iv.local.iter().enumerate() {
        let part = owner.get(f).copied();
        let per_flow_remote = !part.map_or(test, |i| parts[i].test).is_connect();
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
        match part {
            Some(i) => latency(out, latency_of.get(i).copied().flatten(), extra)?,
            None => {
                // The flow's own latency where it was kept, else all flows'.
                let own = if iv.flow_latency_ns.is_empty() {
                    iv.latency_ns.as_ref()
                } else {
                    iv.flow_latency_ns.get(f).and_then(Option::as_ref)
                };
                latency(out, own, extra)?;
                if cols.open {
                    write!(out, ",{}", l.late)?;
                    latency(out, iv.service_latency_ns.as_ref(), extra)?;
                }
            }
        }
        rusage(out, iv.rusage.as_ref().map(|r| &r.local))?;
        rusage(out, iv.rusage.as_ref().and_then(|r| r.remote.as_ref()))?;
        if let Some(i) = part {
            write!(out, ",{}", csv_field(&parts[i].name))?;
        }
        writeln!(out)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{Csv, header};
    use crate::export::Exporter;
    use crate::plan::{TestKind, TestPlan};
    use crate::result::fixtures;
    use crate::stats::counters::Counts;
    use crate::stats::latency::LatencyHistogram;

    /// A --percentiles entry that a fixed column shows (50, 99.9), or one
    /// listed twice, gets no second column of the same name, and every
    /// row keeps the header's columns with each value under its own name.
    #[test]
    fn a_percentile_has_one_column_however_often_it_is_asked_for() {
        let asked = [50.0, 99.99, 99.9, 99.99, 75.0];
        let mut plan = TestPlan::new(TestKind::TcpRr);
        plan.percentiles = asked.to_vec();
        let mut r = fixtures::result_of(plan);
        let mut h = LatencyHistogram::new();
        for ns in 1..=100_000u64 {
            h.record(ns * 10);
        }
        let mut iv = fixtures::interval(0, 0.0, 1.0);
        iv.local = vec![Counts::default()];
        iv.latency_ns = h.summary_with(&asked);
        r.intervals.push(iv);
        let mut out = Vec::new();
        Csv.write(&r, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let mut lines = text.lines();
        let head: Vec<&str> = lines.next().unwrap().split(',').collect();
        let row: Vec<&str> = lines.next().unwrap().split(',').collect();
        assert_eq!(row.len(), head.len(), "{text}");
        let mut names = head.clone();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), head.len(), "a column named twice: {text}");
        let at = |name: &str| {
            let i = head.iter().position(|h| *h == name).expect(name);
            row[i].parse::<u64>().unwrap()
        };
        assert_eq!(at("latency_p50_ns"), h.quantile(0.5));
        assert_eq!(at("latency_p99_9_ns"), h.quantile(0.999));
        assert_eq!(at("latency_p99.99_ns"), h.quantile(0.9999));
        assert_eq!(at("latency_p75_ns"), h.quantile(0.75));
        assert!(!head.contains(&"latency_p50_ns_2") && !head.contains(&"latency_p99.9_ns"));
    }

    /// docs/json.md shows the header as it is written and example rows
    /// with as many columns, so the page stays true to the file.
    #[test]
    fn the_documented_header_and_rows_are_the_files() {
        let doc = include_str!("../../docs/json.md");
        let h = header(&[], false, false);
        assert!(
            doc.lines().any(|l| l == h),
            "docs/json.md lacks the header {h}"
        );
        let section = doc
            .split("## `--samples FILE`")
            .nth(1)
            .and_then(|s| s.split("\n## ").next())
            .expect("the --samples section");
        let rows: Vec<&str> = section
            .lines()
            .filter(|l| l.contains(",measure,") || l.contains(",warmup,"))
            .collect();
        assert!(rows.len() >= 3, "{rows:?}");
        for r in rows {
            assert_eq!(r.split(',').count(), h.split(',').count(), "{r}");
        }
    }
}
