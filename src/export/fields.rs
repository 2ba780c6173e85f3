//! The one table of machine-readable fields, and netperf's omni output
//! selectors over it.
//!
//! [`FIELDS`] lists every field a result can give by name: its name
//! (netperf's omni name where one means the same thing), its unit, when it
//! is present, and how it is read from a [`TestResult`]. `--keyval` prints
//! every field present, in the table's order ([`values`]);
//! `--output-fields LIST` picks fields from it by name ([`parse_list`]) and
//! prints them as netperf's `-o` (a CSV line under a header), `-k`
//! (KEY=value lines) or `-O` (one human line under its column titles)
//! would ([`Fields`]), so that scripts written for netperf's omni output
//! keep working. There is no other list of names: a field added here is
//! printed by `--keyval`, accepted by `--output-fields` and listed in its
//! error message at once (before this table the two lists drifted, and
//! `--output-fields` refused `OFFERED_RATE` that `--keyval` printed).

use std::io::{self, Write};

use super::Exporter;
use crate::plan::SocketOpts;
use crate::result::{Environment, OpenLoop, Side, TestResult};

/// One machine-readable field.
pub struct Field {
    /// The name, without the end's prefix for [`Read::End`] fields.
    pub name: &'static str,
    /// The value's unit ("" for names and counts of things).
    pub unit: &'static str,
    /// For which tests and options the field is present.
    pub when: &'static str,
    pub read: Read,
}

/// How a field is read from a result; `None` where the result does not
/// carry it (the test or the options do not give it).
pub enum Read {
    /// From the whole result.
    Whole(fn(&TestResult) -> Option<String>),
    /// From one end's side of the summary and that end's socket options
    /// in the plan; once for each end, the name behind the end's prefix.
    /// A run of `End` rows in the table gives the client's fields, then
    /// the server's.
    End(Prefix, fn(&Side, &SocketOpts) -> Option<String>),
}

/// How an end's field is named.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prefix {
    /// `LOCAL_`/`REMOTE_` (LOCAL_CPU_UTIL).
    Word,
    /// netperf's `L`/`R` (LSS_SIZE: local send socket size).
    Letter,
}

impl Prefix {
    fn of(self, local: bool) -> &'static str {
        match (self, local) {
            (Prefix::Word, true) => "LOCAL_",
            (Prefix::Word, false) => "REMOTE_",
            (Prefix::Letter, true) => "L",
            (Prefix::Letter, false) => "R",
        }
    }
}

const fn whole(
    name: &'static str,
    unit: &'static str,
    when: &'static str,
    read: fn(&TestResult) -> Option<String>,
) -> Field {
    Field {
        name,
        unit,
        when,
        read: Read::Whole(read),
    }
}

const fn end(
    prefix: Prefix,
    name: &'static str,
    unit: &'static str,
    when: &'static str,
    read: fn(&Side, &SocketOpts) -> Option<String>,
) -> Field {
    Field {
        name,
        unit,
        when,
        read: Read::End(prefix, read),
    }
}

fn f2(v: f64) -> String {
    format!("{v:.2}")
}

fn f3(v: f64) -> String {
    format!("{v:.3}")
}

/// ns as netperf's microseconds, 3 decimals.
fn us(ns: f64) -> String {
    format!("{:.3}", ns / 1e3)
}

fn open_loop(r: &TestResult) -> Option<&OpenLoop> {
    r.summary.open_loop.as_ref()
}

/// The interface's packet rates (all three or none).
fn packets(r: &TestResult) -> Option<(&str, f64, f64)> {
    let s = &r.summary;
    Some((
        s.interface.as_deref()?,
        s.tx_packets_per_s?,
        s.rx_packets_per_s?,
    ))
}

/// The drivers one end's workers ran (`--driver auto` chooses per worker):
/// distinct names, comma-separated; empty if none started.
fn drivers(list: &[String]) -> Option<String> {
    let names: Vec<&str> = Environment::driver_counts(list)
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    Some(names.join(","))
}

const SD: &str = "service demand measured";
const ALWAYS: &str = "always";
const BULK: &str = "bulk tests";
const TRANS: &str = "transaction tests";
const LATENCY: &str = "summary.latency_ns present";
const OPEN: &str = "--rate (open loop)";

/// Every field, in the order `--keyval` prints them. A name appears twice
/// only where two rows exclude each other (THROUGHPUT: bits/s for bulk
/// tests, transactions/s for the others); the first present one is the
/// field's value.
pub static FIELDS: &[Field] = &[
    whole("TEST", "", ALWAYS, |r| Some(r.test.name().into())),
    whole("ELAPSED_TIME", "s", ALWAYS, |r| {
        Some(f3(r.summary.duration_s))
    }),
    whole("FLOWS", "", ALWAYS, |r| Some(r.spec.plan.flows.to_string())),
    whole("THREADS", "", ALWAYS, |r| {
        Some(r.spec.plan.threads.to_string())
    }),
    whole("THROUGHPUT", "10^6bits/s", BULK, |r| {
        r.summary.throughput_bps.map(|t| f2(t / 1e6))
    }),
    whole("THROUGHPUT_UNITS", "", BULK, |r| {
        r.summary.throughput_bps.map(|_| "10^6bits/s".into())
    }),
    whole("THROUGHPUT_BPS", "bits/s", BULK, |r| {
        r.summary.throughput_bps.map(|t| format!("{t:.0}"))
    }),
    whole("THROUGHPUT_C2S_BPS", "bits/s", "tcp_bidir", |r| {
        let s = &r.summary;
        s.throughput_bps_s2c?;
        s.throughput_bps_c2s.map(|t| format!("{t:.0}"))
    }),
    whole("THROUGHPUT_S2C_BPS", "bits/s", "tcp_bidir", |r| {
        let s = &r.summary;
        s.throughput_bps_c2s?;
        s.throughput_bps_s2c.map(|t| format!("{t:.0}"))
    }),
    whole("THROUGHPUT", "Trans/s", TRANS, |r| {
        r.summary.transactions_per_s.map(f2)
    }),
    whole("THROUGHPUT_UNITS", "", TRANS, |r| {
        r.summary.transactions_per_s.map(|_| "Trans/s".into())
    }),
    whole("TRANSACTION_RATE", "Trans/s", TRANS, |r| {
        r.summary.transactions_per_s.map(f2)
    }),
    whole("TRANSACTIONS", "", TRANS, |r| {
        let s = &r.summary;
        s.transactions_per_s?;
        Some(s.transactions.unwrap_or(0).to_string())
    }),
    whole("REQUEST_SIZE", "bytes", TRANS, |r| {
        r.summary.transactions_per_s?;
        Some(r.spec.plan.request_bytes.to_string())
    }),
    whole("RESPONSE_SIZE", "bytes", TRANS, |r| {
        r.summary.transactions_per_s?;
        Some(r.spec.plan.response_bytes.to_string())
    }),
    whole("BURST_SIZE", "", TRANS, |r| {
        r.summary.transactions_per_s?;
        Some(r.spec.plan.burst.to_string())
    }),
    whole("MIN_LATENCY", "us", LATENCY, |r| {
        r.summary.latency_ns.as_ref().map(|l| us(l.min as f64))
    }),
    whole("MEAN_LATENCY", "us", LATENCY, |r| {
        r.summary.latency_ns.as_ref().map(|l| us(l.mean))
    }),
    // netperf's name for the mean round trip.
    whole("RT_LATENCY", "us", LATENCY, |r| {
        r.summary.latency_ns.as_ref().map(|l| us(l.mean))
    }),
    whole("STDDEV_LATENCY", "us", LATENCY, |r| {
        r.summary.latency_ns.as_ref().map(|l| us(l.stddev))
    }),
    whole("P50_LATENCY", "us", LATENCY, |r| {
        r.summary.latency_ns.as_ref().map(|l| us(l.p50 as f64))
    }),
    whole("P90_LATENCY", "us", LATENCY, |r| {
        r.summary.latency_ns.as_ref().map(|l| us(l.p90 as f64))
    }),
    whole("P99_LATENCY", "us", LATENCY, |r| {
        r.summary.latency_ns.as_ref().map(|l| us(l.p99 as f64))
    }),
    whole("P999_LATENCY", "us", LATENCY, |r| {
        r.summary.latency_ns.as_ref().map(|l| us(l.p99_9 as f64))
    }),
    whole("MAX_LATENCY", "us", LATENCY, |r| {
        r.summary.latency_ns.as_ref().map(|l| us(l.max as f64))
    }),
    whole("LATENCY_UNITS", "", LATENCY, |r| {
        r.summary.latency_ns.as_ref().map(|_| "us".into())
    }),
    whole("OFFERED_RATE", "Trans/s", OPEN, |r| {
        open_loop(r).map(|o| f2(o.offered_per_s))
    }),
    whole("ACHIEVED_RATE", "Trans/s", OPEN, |r| {
        open_loop(r).map(|o| f2(o.achieved_per_s))
    }),
    whole("LATE", "", OPEN, |r| {
        open_loop(r).map(|o| o.late.to_string())
    }),
    whole("P50_SERVICE_LATENCY", "us", OPEN, |r| {
        let v = open_loop(r)?.service_latency_ns.as_ref();
        v.map(|v| us(v.p50 as f64))
    }),
    whole("P99_SERVICE_LATENCY", "us", OPEN, |r| {
        let v = open_loop(r)?.service_latency_ns.as_ref();
        v.map(|v| us(v.p99 as f64))
    }),
    whole("P99_GENERATOR_LAG", "us", OPEN, |r| {
        let g = open_loop(r)?.generator_lag_ns.as_ref();
        g.map(|g| us(g.p99 as f64))
    }),
    whole("DATAGRAMS_SENT", "", "udp_stream", |r| {
        r.summary.datagrams_sent.map(|v| v.to_string())
    }),
    whole("DATAGRAMS_RECVD", "", "udp_stream", |r| {
        r.summary.datagrams_received.map(|v| v.to_string())
    }),
    whole("LOST", "", "UDP tests", |r| {
        r.summary.lost.map(|v| v.to_string())
    }),
    whole("REORDERED", "", "udp_stream", |r| {
        r.summary.reordered.map(|v| v.to_string())
    }),
    whole("DUPLICATES", "", "udp_stream", |r| {
        r.summary.duplicates.map(|v| v.to_string())
    }),
    whole("JITTER", "us", "udp_stream", |r| {
        r.summary
            .jitter_ns
            .map(|v| format!("{:.3}", v as f64 / 1e3))
    }),
    whole("LOCAL_DATAGRAMS_SENT_PER_S", "1/s", "UDP tests", |r| {
        let v = r.summary.local.datagrams_sent_per_s;
        r.test.is_udp().then(|| f2(v))
    }),
    whole("LOCAL_DATAGRAMS_RECVD_PER_S", "1/s", "UDP tests", |r| {
        let v = r.summary.local.datagrams_received_per_s;
        r.test.is_udp().then(|| f2(v))
    }),
    whole("LOCAL_BYTES_SENT", "bytes", ALWAYS, |r| {
        Some(r.summary.local.bytes_sent.to_string())
    }),
    whole("LOCAL_BYTES_RECVD", "bytes", ALWAYS, |r| {
        Some(r.summary.local.bytes_received.to_string())
    }),
    whole("REMOTE_BYTES_SENT", "bytes", ALWAYS, |r| {
        Some(r.summary.remote.bytes_sent.to_string())
    }),
    whole("REMOTE_BYTES_RECVD", "bytes", ALWAYS, |r| {
        Some(r.summary.remote.bytes_received.to_string())
    }),
    end(Prefix::Word, "CPU_UTIL", "%", "CPU measured", |s, _| {
        s.cpu_util_percent.map(f2)
    }),
    end(Prefix::Word, "CPU_COUNT", "", "CPU measured", |s, _| {
        s.cpus.map(|n| n.to_string())
    }),
    end(Prefix::Word, "SD", "SD_UNITS", SD, |s, _| {
        s.service_demand_us_per_tran
            .or(s.service_demand_us_per_kb)
            .map(f3)
    }),
    end(Prefix::Word, "SD_SOURCE", "", SD, |s, _| {
        s.service_demand_us_per_tran
            .or(s.service_demand_us_per_kb)?;
        Some(s.service_demand_source.unwrap_or("").into())
    }),
    end(Prefix::Word, "CPU_STEAL", "%", "CPU measured", |s, _| {
        s.cpu.as_ref().map(|c| f2(c.overall.steal_percent))
    }),
    end(Prefix::Word, "CPU_PEAK_ID", "", "CPU measured", |s, _| {
        s.cpu.as_ref()?.busiest_cpu.map(|b| b.to_string())
    }),
    end(
        Prefix::Word,
        "CPU_PEAK_UTIL",
        "%",
        "CPU measured",
        |s, _| {
            let c = s.cpu.as_ref()?;
            c.busiest_cpu?;
            Some(f2(c.busiest_cpu_percent.unwrap_or(0.0)))
        },
    ),
    end(
        Prefix::Word,
        "TRANSPORT_RETRANS",
        "",
        "TCP_INFO read",
        |s, _| s.tcp_retransmits.map(|t| t.to_string()),
    ),
    // netperf omni's names: LSS/LSR (local send/receive socket size),
    // RSS/RSR (remote); _REQ is what was asked.
    end(
        Prefix::Letter,
        "SS_SIZE",
        "bytes",
        "buffers reported",
        |s, _| s.socket_buffers.as_ref().map(|b| b.send_bytes.to_string()),
    ),
    end(
        Prefix::Letter,
        "SR_SIZE",
        "bytes",
        "buffers reported",
        |s, _| s.socket_buffers.as_ref().map(|b| b.recv_bytes.to_string()),
    ),
    end(Prefix::Letter, "SS_SIZE_REQ", "bytes", "-s/-S", |_, o| {
        o.send_buffer_bytes.map(|v| v.to_string())
    }),
    end(Prefix::Letter, "SR_SIZE_REQ", "bytes", "-s/-S", |_, o| {
        o.recv_buffer_bytes.map(|v| v.to_string())
    }),
    end(Prefix::Word, "ZEROCOPY_SENDS", "", "--zerocopy", |s, _| {
        s.zerocopy.map(|z| z.sends.to_string())
    }),
    end(
        Prefix::Word,
        "ZEROCOPY_COMPLETIONS",
        "",
        "--zerocopy",
        |s, _| s.zerocopy.map(|z| z.completions.to_string()),
    ),
    end(Prefix::Word, "ZEROCOPY_COPIED", "", "--zerocopy", |s, _| {
        s.zerocopy.map(|z| z.copied.to_string())
    }),
    whole("SD_UNITS", "", ALWAYS, |r| {
        Some(if r.test.is_stream() { "us/KB" } else { "us/Tr" }.into())
    }),
    whole("LOCAL_INTERFACE_NAME", "", "interface counters read", |r| {
        packets(r).map(|(i, _, _)| i.to_string())
    }),
    whole(
        "LOCAL_TX_PACKETS_PER_S",
        "1/s",
        "interface counters read",
        |r| packets(r).map(|(_, tx, _)| f2(tx)),
    ),
    whole(
        "LOCAL_RX_PACKETS_PER_S",
        "1/s",
        "interface counters read",
        |r| packets(r).map(|(_, _, rx)| f2(rx)),
    ),
    whole("LOCAL_LINK_SPEED_BPS", "bits/s", "link speed known", |r| {
        r.summary.link_speed_bps.map(|v| v.to_string())
    }),
    whole("LOCAL_LINK_UTIL_TX_PERCENT", "%", "link speed known", |r| {
        r.summary.link_util_percent.tx.map(f3)
    }),
    whole("LOCAL_LINK_UTIL_RX_PERCENT", "%", "link speed known", |r| {
        r.summary.link_util_percent.rx.map(f3)
    }),
    whole("LOCAL_SEND_SIZE", "bytes", BULK, |r| {
        let p = &r.spec.plan;
        r.test.is_stream().then(|| p.send_bytes.to_string())
    }),
    whole("LOCAL_RECV_SIZE", "bytes", BULK, |r| {
        let p = &r.spec.plan;
        r.test.is_stream().then(|| p.recv_bytes.to_string())
    }),
    whole("LOCAL_DRIVER", "", ALWAYS, |r| {
        drivers(&r.environment.local_drivers)
    }),
    whole("REMOTE_DRIVER", "", ALWAYS, |r| {
        drivers(&r.environment.remote_drivers)
    }),
    whole("ERROR", "", "on failure", |r| {
        r.summary.error.as_ref().map(|e| e.replace('\n', " "))
    }),
    // Every warning, on one line as key=value wants: joined by " | ".
    whole("WARNINGS", "", ALWAYS, |r| {
        let w: Vec<String> = r
            .summary
            .warnings
            .iter()
            .map(|w| w.message.replace('\n', " "))
            .collect();
        Some(w.join(" | "))
    }),
];

/// Every row with its full name (an end's rows once for each end), in the
/// table's order, and the end each is read from (`Some(true)`: local).
fn expanded() -> Vec<(String, &'static Field, Option<bool>)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < FIELDS.len() {
        let run = FIELDS[i..]
            .iter()
            .take_while(|f| matches!(f.read, Read::End(..)))
            .count();
        if run == 0 {
            out.push((FIELDS[i].name.to_string(), &FIELDS[i], None));
            i += 1;
            continue;
        }
        for local in [true, false] {
            for f in &FIELDS[i..i + run] {
                let Read::End(prefix, _) = f.read else {
                    unreachable!("the run holds End rows only")
                };
                out.push((format!("{}{}", prefix.of(local), f.name), f, Some(local)));
            }
        }
        i += run;
    }
    out
}

/// Every field name, each once, in the table's order.
pub fn names() -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (n, _, _) in expanded() {
        if !out.contains(&n) {
            out.push(n);
        }
    }
    out
}

/// Every field the result carries, with its value, in the table's order:
/// what `--keyval` prints.
pub fn values(r: &TestResult) -> Vec<(String, String)> {
    let p = &r.spec.plan;
    expanded()
        .into_iter()
        .filter_map(|(name, f, local)| {
            let v = match (&f.read, local) {
                (Read::Whole(read), _) => read(r),
                (Read::End(_, read), Some(true)) => read(&r.summary.local, &p.local),
                (Read::End(_, read), _) => read(&r.summary.remote, &p.remote),
            };
            v.map(|v| (name, v))
        })
        .collect()
}

/// `--output-fields`: names separated by commas (netperf's form), checked
/// against [`FIELDS`] case-insensitively.
pub fn parse_list(s: &str) -> Result<Vec<String>, String> {
    let known = names();
    let names: Vec<String> = s
        .split(',')
        .map(|n| n.trim().to_ascii_uppercase())
        .filter(|n| !n.is_empty())
        .collect();
    if names.is_empty() {
        return Err(format!("empty list (accepted: {})", known.join(",")));
    }
    if let Some(bad) = names.iter().find(|n| !known.contains(n)) {
        return Err(format!(
            "'{}' is not a field (accepted: {})",
            crate::text::echo(bad),
            known.join(",")
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
pub(crate) mod tests {
    use super::*;
    use crate::plan::{TestKind, TestPlan};
    use crate::result::{LinkUtil, Provenances, Spec, Summary};
    use crate::stats::latency::LatencySummary;
    use crate::warning::{Code, Warning};

    fn latency(base: u64) -> LatencySummary {
        LatencySummary {
            count: 100,
            min: base,
            mean: base as f64 * 1.5,
            stddev: base as f64 / 3.0,
            p50: base + 1,
            p90: base * 2,
            p99: base * 3,
            p99_9: base * 4,
            max: base * 5,
            percentiles: Vec::new(),
        }
    }

    /// An open-loop udp_rr run with every reading keyval prints: both
    /// ends' CPU, buffers (asked and set), zero-copy and retransmit
    /// counts, the interface with its link speed and utilisation, an
    /// error and two warnings.
    pub(crate) fn full_open_loop() -> TestResult {
        let mut plan = TestPlan::new(TestKind::UdpRr);
        plan.offered_per_s = Some(500);
        plan.local.send_buffer_bytes = Some(65536);
        plan.remote.recv_buffer_bytes = Some(32768);
        let mut s = Summary {
            duration_s: 1.0004,
            transactions_per_s: Some(501.726),
            transactions: Some(502),
            latency_ns: Some(latency(17_776)),
            open_loop: Some(crate::result::OpenLoop {
                offered_per_s: 500.0,
                achieved_per_s: 501.726,
                late: 21,
                service_latency_ns: Some(latency(5_401)),
                generator_lag_ns: Some(crate::result::GeneratorLag {
                    p50: 1000,
                    p99: 4_395_007,
                    max: 5_000_000,
                }),
                mean_in_flight: None,
            }),
            lost: Some(3),
            interface: Some("eth0".into()),
            tx_packets_per_s: Some(1005.514),
            rx_packets_per_s: Some(1004.2),
            link_speed_bps: Some(10_000_000_000),
            link_util_percent: LinkUtil {
                tx: Some(0.0123),
                rx: Some(0.0456),
            },
            error: Some("lost the\nserver".into()),
            ..Summary::default()
        };
        s.warnings.push(Warning::new(Code::Trend, "one\nwarning"));
        s.warnings.push(Warning::new(Code::Trend, "another"));
        for (i, side) in [&mut s.local, &mut s.remote].into_iter().enumerate() {
            side.datagrams_sent_per_s = 500.73;
            side.datagrams_received_per_s = 501.73;
            side.bytes_sent = 501 + i as u64;
            side.bytes_received = 502;
            side.cpu_util_percent = Some(12.345);
            side.cpus = Some(2);
            side.service_demand_us_per_tran = Some(106.2764);
            side.service_demand_source = Some("rusage");
            side.cpu = Some(crate::sensors::CpuUsage {
                busiest_cpu: Some(1),
                busiest_cpu_percent: Some(99.5),
                cpus: 2,
                ..Default::default()
            });
            side.tcp_retransmits = Some(7);
            side.socket_buffers = Some(crate::io::socket::SocketBuffers {
                send_bytes: 212992,
                recv_bytes: 106496,
                ..Default::default()
            });
            side.zerocopy = Some(crate::io::zerocopy::ZeroCopyCounts {
                sends: 10,
                completions: 9,
                copied: 1,
            });
        }
        let environment = Environment {
            local_drivers: vec!["uring".into(), "epoll".into(), "uring".into()],
            remote_drivers: vec!["epoll".into()],
            cpus: 2,
            ..Environment::default()
        };
        TestResult {
            schema: crate::result::SCHEMA,
            test: plan.test,
            spec: Spec {
                plan,
                server: "mock".into(),
                server_address: None,
                embedded_server: false,
                bind: None,
            },
            environment,
            provenance: Provenances::default(),
            intervals: Vec::new(),
            summary: s,
            iterations: Vec::new(),
            confidence: None,
        }
    }

    /// A bulk UDP run that also carries a per-direction split (as
    /// tcp_bidir does) and every datagram count, with no CPU readings.
    pub(crate) fn bulk() -> TestResult {
        let mut r = full_open_loop();
        r.test = TestKind::UdpStream;
        r.spec.plan = TestPlan::new(TestKind::UdpStream);
        r.environment = Environment {
            cpus: 2,
            ..Environment::default()
        };
        r.summary = Summary {
            duration_s: 2.0,
            throughput_bps: Some(123_456_789.4),
            throughput_bps_c2s: Some(100_000_000.6),
            throughput_bps_s2c: Some(23_456_788.8),
            datagrams_sent: Some(10),
            datagrams_received: Some(9),
            lost: Some(1),
            reordered: Some(2),
            duplicates: Some(0),
            ..Summary::default()
        };
        r.summary.local.service_demand_us_per_kb = Some(0.51);
        r
    }

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

    /// Issue 27: every key `--keyval` prints is a field `--output-fields`
    /// accepts, and gives the same value there: an open-loop run with link
    /// readings (OFFERED_RATE, LOCAL_LINK_UTIL_TX_PERCENT, ... were refused
    /// while the two lists were apart) and a bulk one.
    #[test]
    fn every_keyval_key_is_an_output_field_with_the_same_value() {
        for r in [full_open_loop(), bulk()] {
            let kv = values(&r);
            let keys: Vec<&str> = kv.iter().map(|(k, _)| k.as_str()).collect();
            for k in ["OFFERED_RATE", "LOCAL_LINK_UTIL_RX_PERCENT", "THROUGHPUT"] {
                assert!(
                    keys.contains(&k) || r.test.is_stream(),
                    "{k} missing: {keys:?}"
                );
            }
            let list = parse_list(&keys.join(",")).expect("every key is accepted");
            let f = Fields {
                names: list,
                style: Style::Keyval,
            };
            let picked = String::from_utf8(crate::export::render(&f, &r)).unwrap();
            // What keyval prints: every present field, `KEY=value`.
            let keyval: String = kv.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
            assert_eq!(picked, keyval);
        }
    }

    /// The table's names are distinct but for THROUGHPUT and its units,
    /// whose two rows (bits/s, transactions/s) never both apply.
    #[test]
    fn names_are_distinct_but_for_the_two_figures_of_merit() {
        let all: Vec<String> = expanded().into_iter().map(|(n, _, _)| n).collect();
        let mut twice: Vec<&String> = all
            .iter()
            .filter(|n| all.iter().filter(|m| m == n).count() > 1)
            .collect();
        twice.dedup();
        twice.sort();
        twice.dedup();
        assert_eq!(twice, ["THROUGHPUT", "THROUGHPUT_UNITS"]);
        for r in [full_open_loop(), bulk()] {
            let kv = values(&r);
            for n in twice.iter() {
                assert!(kv.iter().filter(|(k, _)| k == *n).count() <= 1);
            }
        }
    }

    /// docs/json.md's table names every field.
    #[test]
    fn the_docs_name_every_field() {
        let doc = include_str!("../../docs/json.md");
        let missing: Vec<String> = names()
            .into_iter()
            .filter(|n| !doc.contains(&format!("`{n}`")))
            .collect();
        assert!(
            missing.is_empty(),
            "docs/json.md's --keyval table lacks {missing:?}"
        );
    }
}
