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
use crate::text::csv_field;

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
const CONF: &str = "--iterations or --confidence";
const CONF2: &str = "--iterations or --confidence, two runs or more";
const REMOTE_PROV: &str = "the server shared its provenance (embedded, or keyed)";

/// One end's uname (sysname, release), from its provenance.
fn uname(r: &TestResult, local: bool) -> Option<&crate::sensors::provenance::Kernel> {
    let p = if local {
        &r.provenance.local
    } else {
        &r.provenance.remote
    };
    p.as_ref()?.kernel.as_ref()
}

/// The congestion control of a TCP test's end: what its data sockets used
/// (read back with getsockopt); from a result without that (an older
/// server's end, an older result), `--cc`, or the end's kernel default
/// from its provenance. None for UDP tests.
fn congestion(r: &TestResult, local: bool) -> Option<String> {
    if r.test.is_udp() {
        return None;
    }
    let (side, p) = if local {
        (&r.summary.local, &r.provenance.local)
    } else {
        (&r.summary.remote, &r.provenance.remote)
    };
    if let Some(c) = &side.congestion_control {
        return Some(c.clone());
    }
    if let Some(c) = &r.spec.plan.congestion {
        return Some(c.clone());
    }
    p.as_ref()?.congestion_control.clone()
}

/// `P{N}_LATENCY` for a percentile asked with `--percentiles`: N is the
/// percentile as written without its point (99.99: P9999_LATENCY), as
/// netperf's P99_LATENCY and thrum's P999_LATENCY (99.9) are.
pub fn percentile_field(p: f64) -> String {
    format!("P{}_LATENCY", format!("{p}").replace('.', ""))
}

/// Whether `name` has the form of a `P{N}_LATENCY` field (N a number in
/// (0, 100], written with or without its point); which N a run has is
/// known only once `--percentiles` is read ([`percentile_missing`]).
fn is_percentile_field(name: &str) -> bool {
    let Some(n) = name
        .strip_prefix('P')
        .and_then(|n| n.strip_suffix("_LATENCY"))
    else {
        return false;
    };
    !n.is_empty() && n.chars().all(|c| c.is_ascii_digit() || c == '.') && n.parse::<f64>().is_ok()
}

/// The `P{N}_LATENCY` name that matches one of `percentiles`: its own
/// (`P9999_LATENCY`) or written with the point (`P99.99_LATENCY`).
fn percentile_of(name: &str, percentiles: &[f64]) -> Option<f64> {
    percentiles
        .iter()
        .copied()
        .find(|&p| name == percentile_field(p) || name == format!("P{p}_LATENCY"))
}

/// The first `P{N}_LATENCY` in `names` that is neither a fixed field nor
/// one of `percentiles` (`--percentiles` must ask for it), for the error.
pub fn percentile_missing<'a>(list: &'a [String], percentiles: &[f64]) -> Option<&'a str> {
    let fixed = names();
    list.iter()
        .find(|n| {
            !fixed.contains(n) && is_percentile_field(n) && percentile_of(n, percentiles).is_none()
        })
        .map(String::as_str)
}

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
    // The server's sizes of a bulk test: thrum's one send size and one
    // receive size serve whichever end sends or receives (flent reads
    // these for TCP_MAERTS).
    whole("REMOTE_SEND_SIZE", "bytes", BULK, |r| {
        let p = &r.spec.plan;
        r.test.is_stream().then(|| p.send_bytes.to_string())
    }),
    whole("REMOTE_RECV_SIZE", "bytes", BULK, |r| {
        let p = &r.spec.plan;
        r.test.is_stream().then(|| p.recv_bytes.to_string())
    }),
    // netperf omni's names for what a test is: its transport and which
    // way its data goes as seen from the client.
    whole("PROTOCOL", "", ALWAYS, |r| {
        Some(if r.test.is_udp() { "UDP" } else { "TCP" }.into())
    }),
    whole("DIRECTION", "", ALWAYS, |r| {
        let t = r.test.traits();
        Some(
            match (t.client_sends, t.client_receives) {
                (true, true) => "Send|Recv",
                (false, true) => "Recv",
                _ => "Send",
            }
            .into(),
        )
    }),
    // `--tos` on both ends' data sockets, as netperf prints IP_TOS.
    whole("LOCAL_SOCKET_TOS", "", ALWAYS, |r| {
        Some(format!("0x{:02x}", r.spec.plan.tos.unwrap_or(0)))
    }),
    whole("REMOTE_SOCKET_TOS", "", ALWAYS, |r| {
        Some(format!("0x{:02x}", r.spec.plan.tos.unwrap_or(0)))
    }),
    // What each end's data sockets used, read back (a route's congctl or
    // `--cc` as the socket took it); see `congestion` for older results.
    whole("LOCAL_CONG_CONTROL", "", "TCP tests", |r| {
        congestion(r, true)
    }),
    whole("REMOTE_CONG_CONTROL", "", "TCP tests", |r| {
        congestion(r, false)
    }),
    whole("LOCAL_DRIVER", "", ALWAYS, |r| {
        drivers(&r.environment.local_drivers)
    }),
    whole("REMOTE_DRIVER", "", ALWAYS, |r| {
        drivers(&r.environment.remote_drivers)
    }),
    // netperf's -i/-I: the level and width asked for, the runs made, and
    // each interval's achieved width (the whole interval in percent of
    // the mean, the figure -I's width is compared with).
    whole("CONFIDENCE_LEVEL", "%", CONF, |r| {
        r.confidence.as_ref().map(|c| c.level.to_string())
    }),
    whole("CONFIDENCE_INTERVAL", "%", CONF, |r| {
        r.confidence.as_ref().map(|c| f2(c.width_percent_requested))
    }),
    whole("CONFIDENCE_ITERATION", "", CONF, |r| {
        r.confidence.as_ref().map(|c| c.iterations_run.to_string())
    }),
    whole("THROUGHPUT_CONFID", "%", CONF2, |r| {
        r.confidence.as_ref()?.width_percent_achieved.map(f3)
    }),
    whole("LOCAL_CPU_CONFID", "%", CONF2, |r| {
        r.confidence
            .as_ref()?
            .local_cpu_width_percent_achieved
            .map(f3)
    }),
    whole("REMOTE_CPU_CONFID", "%", CONF2, |r| {
        r.confidence
            .as_ref()?
            .remote_cpu_width_percent_achieved
            .map(f3)
    }),
    whole("COMMAND_LINE", "", ALWAYS, |r| {
        let argv = &r.environment.command_line;
        let args = argv.iter().map(Into::into);
        (!argv.is_empty()).then(|| crate::sensors::provenance::command_line(args))
    }),
    whole("UUID", "", ALWAYS, |r| {
        Some(r.environment.uuid.clone()).filter(|u| !u.is_empty())
    }),
    whole("RESULT_BRAND", "", "--brand", |r| {
        r.environment.brand.clone()
    }),
    whole("LOCAL_SYSNAME", "", ALWAYS, |r| {
        uname(r, true).map(|k| k.sysname.clone())
    }),
    whole("LOCAL_RELEASE", "", ALWAYS, |r| {
        uname(r, true).map(|k| k.release.clone())
    }),
    whole("REMOTE_SYSNAME", "", REMOTE_PROV, |r| {
        uname(r, false).map(|k| k.sysname.clone())
    }),
    whole("REMOTE_RELEASE", "", REMOTE_PROV, |r| {
        uname(r, false).map(|k| k.release.clone())
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
    let mut out: Vec<(String, String)> = expanded()
        .into_iter()
        .filter_map(|(name, f, local)| {
            let v = match (&f.read, local) {
                (Read::Whole(read), _) => read(r),
                (Read::End(_, read), Some(true)) => read(&r.summary.local, &p.local),
                (Read::End(_, read), _) => read(&r.summary.remote, &p.remote),
            };
            v.map(|v| (name, v))
        })
        .collect();
    // --percentiles' own P{N}_LATENCY, after the fixed ones; one the
    // fixed rows already name (P50, P999) is theirs.
    if let Some(l) = &r.summary.latency_ns {
        let at = out
            .iter()
            .position(|(k, _)| k == "MAX_LATENCY")
            .unwrap_or(out.len());
        let extra: Vec<(String, String)> = l
            .percentiles
            .iter()
            .map(|q| (percentile_field(q.percentile), us(q.ns as f64)))
            .filter(|(k, _)| !out.iter().any(|(n, _)| n == k))
            .collect();
        out.splice(at..at, extra);
    }
    out
}

/// The value of `name` in `all` (what [`values`] gave), a
/// `P{N}_LATENCY` written with its point included.
fn lookup<'a>(all: &'a [(String, String)], name: &str, r: &TestResult) -> &'a str {
    let key = match percentile_of(name, &r.spec.plan.percentiles) {
        Some(p) if !all.iter().any(|(k, _)| k == name) => percentile_field(p),
        _ => name.to_string(),
    };
    all.iter()
        .find(|(k, _)| *k == key)
        .map_or("", |(_, v)| v.as_str())
}

/// netperf's keyword for every output selector (`-o all`), kept as the
/// list's one name until the run's percentiles are known ([`chosen`]).
pub const ALL: &str = "ALL";

/// The fields a parsed `--output-fields` list shows: the list itself, or
/// for [`ALL`] every field in the table's order and then each
/// `--percentiles` entry's own `P{N}_LATENCY`, so that a CSV's columns are
/// the same for every test (one a test does not carry is empty).
pub fn chosen(list: Vec<String>, percentiles: &[f64]) -> Vec<String> {
    if list != [ALL] {
        return list;
    }
    let mut out = names();
    for p in percentiles {
        let name = percentile_field(*p);
        if !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

/// `--output-fields`: names separated by commas (netperf's form), checked
/// against [`FIELDS`] case-insensitively, or `all` ([`ALL`]).
pub fn parse_list(s: &str) -> Result<Vec<String>, String> {
    if s.trim().eq_ignore_ascii_case(ALL) {
        return Ok(vec![ALL.to_string()]);
    }
    let known = names();
    let names: Vec<String> = s
        .split(',')
        .map(|n| n.trim().to_ascii_uppercase())
        .filter(|n| !n.is_empty())
        .collect();
    if names.is_empty() {
        return Err(format!("empty list (accepted: {})", known.join(",")));
    }
    if let Some(bad) = names
        .iter()
        .find(|n| !known.contains(n) && !is_percentile_field(n))
    {
        return Err(format!(
            "'{}' is not a field (accepted: {}, P{{N}}_LATENCY for each N of --percentiles, or all alone)",
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
    /// `--format`: THROUGHPUT and THROUGHPUT_UNITS in this unit.
    pub units: Option<crate::units::RateUnit>,
}

/// `--format` (netperf's `-f`): a bulk test's THROUGHPUT and
/// THROUGHPUT_UNITS in the unit chosen instead of 10^6bits/s; the other
/// fields keep theirs (THROUGHPUT_BPS stays bits/s).
pub fn in_units(
    all: &mut [(String, String)],
    r: &TestResult,
    units: Option<crate::units::RateUnit>,
) {
    let (Some(u), Some(t)) = (units, r.summary.throughput_bps) else {
        return;
    };
    for (k, v) in all.iter_mut() {
        match k.as_str() {
            "THROUGHPUT" => *v = f2(u.of(t)),
            "THROUGHPUT_UNITS" => *v = u.netperf_name().into(),
            _ => {}
        }
    }
}

impl Exporter for Fields {
    fn write(&self, r: &TestResult, out: &mut dyn Write) -> io::Result<()> {
        let mut all = values(r);
        in_units(&mut all, r, self.units);
        // A field this test does not carry is empty, as in netperf.
        let get = |n: &str| lookup(&all, n, r);
        match self.style {
            Style::Keyval => {
                for n in &self.names {
                    writeln!(out, "{n}={}", get(n))?;
                }
            }
            Style::Csv => {
                writeln!(out, "{}", self.names.join(","))?;
                let row: Vec<String> = self.names.iter().map(|n| csv_field(get(n))).collect();
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
    use crate::result::{LinkUtil, Summary};
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
        let mut r = crate::result::fixtures::result_of(plan);
        r.environment = environment;
        r.summary = s;
        r
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

    /// Every key `--keyval` prints is a field `--output-fields`
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
                units: None,
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

    /// netperf's confidence, identity and uname fields, and a
    /// P{N}_LATENCY for each --percentiles N, by its name with or without
    /// the point; an N not asked for is refused before the run.
    #[test]
    fn confidence_identity_and_asked_percentiles() {
        use crate::stats::latency::Percentile;
        let mut r = full_open_loop();
        r.spec.plan.percentiles = vec![99.99, 75.0, 50.0];
        let l = r.summary.latency_ns.as_mut().unwrap();
        l.percentiles = vec![
            Percentile {
                percentile: 99.99,
                ns: 123_456,
            },
            Percentile {
                percentile: 75.0,
                ns: 20_000,
            },
            Percentile {
                percentile: 50.0,
                ns: 17_777,
            },
        ];
        r.confidence = Some(crate::result::Confidence {
            level: 99,
            width_percent_requested: 5.0,
            width_percent_achieved: Some(1.23456),
            achieved: true,
            iterations_min: 2,
            iterations_max: 3,
            iterations_run: 2,
            mean: 501.0,
            stddev: Some(1.0),
            half_width: Some(3.0),
            local_cpu_width_percent_achieved: Some(4.5),
            remote_cpu_width_percent_achieved: None,
        });
        r.environment.command_line = vec!["thrum".into(), "run".into(), "a b".into()];
        r.environment.uuid = "u-1".into();
        r.environment.brand = Some("lab, rack 4".into());
        r.provenance.local = Some(crate::sensors::Provenance {
            kernel: Some(crate::sensors::provenance::Kernel {
                sysname: "Linux".into(),
                release: "6.1.0".into(),
                ..Default::default()
            }),
            ..Default::default()
        });
        let names = parse_list(
            "CONFIDENCE_LEVEL,CONFIDENCE_ITERATION,THROUGHPUT_CONFID,LOCAL_CPU_CONFID,REMOTE_CPU_CONFID,\
             P9999_LATENCY,p99.99_latency,P75_LATENCY,P50_LATENCY,COMMAND_LINE,UUID,RESULT_BRAND,\
             LOCAL_SYSNAME,LOCAL_RELEASE,REMOTE_SYSNAME",
        )
        .unwrap();
        assert_eq!(percentile_missing(&names, &r.spec.plan.percentiles), None);
        let f = Fields {
            names,
            style: Style::Csv,
            units: None,
        };
        let text = String::from_utf8(crate::export::render(&f, &r)).unwrap();
        let row = text.lines().nth(1).unwrap();
        assert_eq!(
            row,
            "99,2,1.235,4.500,,123.456,123.456,20.000,17.777,thrum run 'a b',u-1,\"lab, rack 4\",Linux,6.1.0,"
        );
        // --keyval prints the asked percentiles once, after the fixed ones.
        let keys: Vec<String> = values(&r).into_iter().map(|(k, _)| k).collect();
        let at = |k: &str| keys.iter().position(|x| x == k).unwrap();
        assert!(at("P999_LATENCY") < at("P9999_LATENCY") && at("P75_LATENCY") < at("MAX_LATENCY"));
        assert_eq!(keys.iter().filter(|k| *k == "P50_LATENCY").count(), 1);
        // A percentile not asked for, and a name that is no percentile.
        let asked = parse_list("P95_LATENCY").unwrap();
        assert_eq!(percentile_missing(&asked, &[99.0]), Some("P95_LATENCY"));
        assert!(parse_list("PX_LATENCY").is_err());
    }
}
