//! netperf's omni output selectors: `--output-fields LIST` picks fields by
//! netperf's names (THROUGHPUT, THROUGHPUT_UNITS, MEAN_LATENCY,
//! P99_LATENCY, LOCAL_CPU_UTIL, REMOTE_SD, …) and thrum's own, and prints
//! them as netperf's `-o` (a CSV line under a header), `-k` (KEY=value
//! lines) or `-O` (one human line under its column titles) would, so that
//! scripts written for netperf's omni output keep working.
//!
//! The values are the key=value exporter's, so the two never disagree.

use std::io::{self, Write};

use super::Exporter;
use super::keyval::Keyval;
use crate::result::TestResult;

/// Every field name a result can carry (which ones it does depends on the
/// test and the options: MEAN_LATENCY only for request/response tests).
pub const KNOWN: &[&str] = &[
    "TEST",
    "ELAPSED_TIME",
    "FLOWS",
    "THREADS",
    "THROUGHPUT",
    "THROUGHPUT_UNITS",
    "THROUGHPUT_BPS",
    "THROUGHPUT_C2S_BPS",
    "THROUGHPUT_S2C_BPS",
    "TRANSACTION_RATE",
    "TRANSACTIONS",
    "REQUEST_SIZE",
    "RESPONSE_SIZE",
    "BURST_SIZE",
    "MIN_LATENCY",
    "MEAN_LATENCY",
    "RT_LATENCY",
    "STDDEV_LATENCY",
    "P50_LATENCY",
    "P90_LATENCY",
    "P99_LATENCY",
    "P999_LATENCY",
    "MAX_LATENCY",
    "LATENCY_UNITS",
    "DATAGRAMS_SENT",
    "DATAGRAMS_RECVD",
    "LOST",
    "REORDERED",
    "DUPLICATES",
    "LOCAL_DATAGRAMS_SENT_PER_S",
    "LOCAL_DATAGRAMS_RECVD_PER_S",
    "LOCAL_BYTES_SENT",
    "LOCAL_BYTES_RECVD",
    "REMOTE_BYTES_SENT",
    "REMOTE_BYTES_RECVD",
    "LOCAL_CPU_UTIL",
    "LOCAL_CPU_COUNT",
    "LOCAL_SD",
    "LOCAL_SD_SOURCE",
    "LOCAL_CPU_STEAL",
    "LOCAL_CPU_PEAK_ID",
    "LOCAL_CPU_PEAK_UTIL",
    "LOCAL_TRANSPORT_RETRANS",
    "LOCAL_ZEROCOPY_SENDS",
    "LOCAL_ZEROCOPY_COMPLETIONS",
    "LOCAL_ZEROCOPY_COPIED",
    "REMOTE_CPU_UTIL",
    "REMOTE_CPU_COUNT",
    "REMOTE_SD",
    "REMOTE_SD_SOURCE",
    "REMOTE_CPU_STEAL",
    "REMOTE_CPU_PEAK_ID",
    "REMOTE_CPU_PEAK_UTIL",
    "REMOTE_TRANSPORT_RETRANS",
    "REMOTE_ZEROCOPY_SENDS",
    "REMOTE_ZEROCOPY_COMPLETIONS",
    "REMOTE_ZEROCOPY_COPIED",
    "LSS_SIZE",
    "LSR_SIZE",
    "LSS_SIZE_REQ",
    "LSR_SIZE_REQ",
    "RSS_SIZE",
    "RSR_SIZE",
    "RSS_SIZE_REQ",
    "RSR_SIZE_REQ",
    "SD_UNITS",
    "LOCAL_INTERFACE_NAME",
    "LOCAL_TX_PACKETS_PER_S",
    "LOCAL_RX_PACKETS_PER_S",
    "LOCAL_SEND_SIZE",
    "LOCAL_RECV_SIZE",
    "LOCAL_DRIVER",
    "REMOTE_DRIVER",
    "ERROR",
    "WARNINGS",
];

/// `--output-fields`: names separated by commas (netperf's form), checked
/// against [`KNOWN`] case-insensitively.
pub fn parse_list(s: &str) -> Result<Vec<String>, String> {
    let names: Vec<String> = s
        .split(',')
        .map(|n| n.trim().to_ascii_uppercase())
        .filter(|n| !n.is_empty())
        .collect();
    if names.is_empty() {
        return Err(format!("empty list (accepted: {})", KNOWN.join(",")));
    }
    if let Some(bad) = names.iter().find(|n| !KNOWN.contains(&n.as_str())) {
        return Err(format!(
            "'{}' is not a field (accepted: {})",
            crate::text::echo(bad),
            KNOWN.join(",")
        ));
    }
    Ok(names)
}

/// How the chosen fields are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// netperf's `-o`: a header line of names, then one line of values.
    Csv,
    /// netperf's `-k`: `KEY=value`, one a line.
    Keyval,
    /// netperf's `-O`: the names over the values, in aligned columns.
    Human,
}

/// The chosen fields of a result.
pub struct Fields {
    pub names: Vec<String>,
    pub style: Style,
}

/// Every field the result carries, as key=value gives it.
pub fn values(r: &TestResult) -> Vec<(String, String)> {
    let text = super::render(&Keyval, r);
    String::from_utf8_lossy(&text)
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A CSV cell: quoted when it holds a comma, a quote or a line break.
fn csv_cell(v: &str) -> String {
    if v.contains([',', '"', '\n']) {
        format!("\"{}\"", v.replace('"', "\"\""))
    } else {
        v.to_string()
    }
}

impl Exporter for Fields {
    fn write(&self, r: &TestResult, out: &mut dyn Write) -> io::Result<()> {
        let all = values(r);
        // A field this test does not carry is empty, as in netperf.
        let get = |n: &str| {
            all.iter()
                .find(|(k, _)| k == n)
                .map_or("", |(_, v)| v.as_str())
        };
        match self.style {
            Style::Keyval => {
                for n in &self.names {
                    writeln!(out, "{n}={}", get(n))?;
                }
            }
            Style::Csv => {
                writeln!(out, "{}", self.names.join(","))?;
                let row: Vec<String> = self.names.iter().map(|n| csv_cell(get(n))).collect();
                writeln!(out, "{}", row.join(","))?;
            }
            Style::Human => {
                let cells: Vec<(&str, &str)> = self
                    .names
                    .iter()
                    .map(|n| (n.as_str(), get(n)))
                    .map(|(n, v)| (n, if v.is_empty() { "-" } else { v }))
                    .collect();
                let width = |(n, v): &(&str, &str)| n.len().max(v.chars().count());
                let head: Vec<String> = cells
                    .iter()
                    .map(|c| format!("{:<w$}", c.0, w = width(c)))
                    .collect();
                let vals: Vec<String> = cells
                    .iter()
                    .map(|c| format!("{:<w$}", c.1, w = width(c)))
                    .collect();
                writeln!(out, "{}", head.join("  ").trim_end())?;
                writeln!(out, "{}", vals.join("  ").trim_end())?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_checked_and_upper_cased() {
        assert_eq!(
            parse_list("throughput, THROUGHPUT_UNITS,p99_latency").unwrap(),
            vec!["THROUGHPUT", "THROUGHPUT_UNITS", "P99_LATENCY"]
        );
        let e = parse_list("THROUGPUT").unwrap_err();
        assert!(
            e.contains("'THROUGPUT' is not a field") && e.contains("MEAN_LATENCY"),
            "{e}"
        );
        assert!(parse_list(" , ").is_err());
    }

    #[test]
    fn csv_cells_are_quoted_when_they_must_be() {
        assert_eq!(csv_cell("a,b"), "\"a,b\"");
        assert_eq!(csv_cell("12.5"), "12.5");
    }
}
