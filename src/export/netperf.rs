//! A result printed as netperf 2.7 prints it, for `thrum netperf` and thrum
//! reached as `netperf`: the test's header line ("TCP STREAM TEST from …
//! to …"), the classic tables with netperf's column titles, units and
//! number formats (`-v 0/1/2`, `-P 0`, `-c`/`-C`, the confidence warning),
//! the omni output selectors (`-o` CSV under netperf's titles, `-O` the
//! titles over aligned columns, `-k` KEY=VALUE) read from the one field
//! table ([`super::fields`]), and demo mode's interim lines in netperf's
//! three forms (`Interim result: …`, CSV, and flent's
//! `NETPERF_INTERIM_RESULT[i]`, `NETPERF_UNITS[i]`, `NETPERF_INTERVAL[i]`,
//! `NETPERF_ENDING[i]`), so that scripts, post_proc.py and flent parse it.
//!
//! The figures are thrum's (docs/netperf.md says where they differ from
//! netperf's by design): a bulk test's throughput is the receiver's
//! goodput over thrum's measurement window, and CPU and service demand
//! are the ends' measured ones. netperf's selector names that mean a field
//! thrum has under another name (`LSS_SIZE_END`) are read as that field;
//! a numeric one thrum does not measure (`TRANSPORT_MSS`) prints netperf's
//! "unknown", -1.

use std::io::{self, Write};

use anyhow::{Result, bail};

use super::Exporter;
use super::fields::{self, Style};
use crate::plan::{Merit, TestKind};
use crate::result::{Interval, Side, TestResult};
use crate::units::RateUnit;

/// Demo mode (`-D`): an interim result every `interval_ns`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Demo {
    pub interval_ns: u64,
}

/// The omni output selectors (`-k`, `-o`, `-O`): which fields, how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selection {
    /// netperf's names (or thrum's), upper case, in the order given.
    pub names: Vec<String>,
    pub style: Style,
}

/// How a netperf command line asked for its result.
#[derive(Clone, Debug, PartialEq)]
pub struct Print {
    pub test: TestKind,
    /// `-t omni`: the header names the direction ("OMNI Send TEST").
    pub omni: bool,
    /// `-k`/`-o`/`-O`; None: the classic table.
    pub selection: Option<Selection>,
    /// `-P`: the header line and the column titles.
    pub headers: bool,
    /// `-v`: 0 the figure alone, 1 the table, 2 the table and more.
    pub verbosity: u8,
    /// `-f`; None: 10^6bits/s for bulk tests, transactions for the others.
    pub unit: Option<RateUnit>,
    /// `-c`, `-C`: the CPU columns.
    pub local_cpu: bool,
    pub remote_cpu: bool,
    /// `-T`: the header says "cpu bind".
    pub cpu_bind: bool,
    /// `-D`: the header says "demo".
    pub demo: bool,
    /// `-B`: printed after a `-P 0` line.
    pub brand: Option<String>,
    /// `-i`/`-I`: the level and the width asked for, for the header.
    pub confidence: Option<(u32, f64)>,
}

/// netperf's omni names that thrum's table has under another name, and
/// netperf's four title lines of each name taken (from nettest_omni.c),
/// for `-o`'s header and `-O`'s columns. A name not here is titled by
/// itself.
const NAMES: &[(&str, Option<&str>, [&str; 4])] = &[
    ("THROUGHPUT", None, ["Throughput", "", "", ""]),
    ("THROUGHPUT_UNITS", None, ["Throughput", "Units", "", ""]),
    ("ELAPSED_TIME", None, ["Elapsed", "Time", "(sec)", ""]),
    (
        "MEAN_LATENCY",
        None,
        ["Mean", "Latency", "Microseconds", ""],
    ),
    (
        "MIN_LATENCY",
        None,
        ["Minimum", "Latency", "Microseconds", ""],
    ),
    (
        "MAX_LATENCY",
        None,
        ["Maximum", "Latency", "Microseconds", ""],
    ),
    (
        "P50_LATENCY",
        None,
        ["50th", "Percentile", "Latency", "Microseconds"],
    ),
    (
        "P90_LATENCY",
        None,
        ["90th", "Percentile", "Latency", "Microseconds"],
    ),
    (
        "P99_LATENCY",
        None,
        ["99th", "Percentile", "Latency", "Microseconds"],
    ),
    (
        "STDDEV_LATENCY",
        None,
        ["Stddev", "Latency", "Microseconds", ""],
    ),
    (
        "RT_LATENCY",
        None,
        ["Round", "Trip", "Latency", "usec/tran"],
    ),
    (
        "TRANSACTION_RATE",
        None,
        ["Transaction", "Rate", "Tran/s", ""],
    ),
    ("LOCAL_CPU_UTIL", None, ["Local", "CPU", "Util", "%"]),
    ("REMOTE_CPU_UTIL", None, ["Remote", "CPU", "Util", "%"]),
    ("LOCAL_SD", None, ["Local", "Service", "Demand", ""]),
    ("REMOTE_SD", None, ["Remote", "Service", "Demand", ""]),
    ("SD_UNITS", None, ["Service", "Demand", "Units", ""]),
    ("LOCAL_CPU_COUNT", None, ["Local", "CPU", "Count", ""]),
    ("REMOTE_CPU_COUNT", None, ["Remote", "CPU", "Count", ""]),
    (
        "LOCAL_CPU_PEAK_UTIL",
        None,
        ["Local", "Peak", "Per CPU", "Util %"],
    ),
    (
        "LOCAL_CPU_PEAK_ID",
        None,
        ["Local", "Peak", "Per CPU", "ID"],
    ),
    (
        "REMOTE_CPU_PEAK_UTIL",
        None,
        ["Remote", "Peak", "Per CPU", "Util %"],
    ),
    (
        "REMOTE_CPU_PEAK_ID",
        None,
        ["Remote", "Peak", "Per CPU", "ID"],
    ),
    // thrum reads the buffers once, as the data sockets start: netperf's
    // "initial" and "final" figures are the same reading here.
    (
        "LSS_SIZE",
        None,
        ["Local", "Send Socket", "Size", "Initial"],
    ),
    (
        "LSR_SIZE",
        None,
        ["Local", "Recv Socket", "Size", "Initial"],
    ),
    (
        "RSS_SIZE",
        None,
        ["Remote", "Send Socket", "Size", "Initial"],
    ),
    (
        "RSR_SIZE",
        None,
        ["Remote", "Recv Socket", "Size", "Initial"],
    ),
    (
        "LSS_SIZE_END",
        Some("LSS_SIZE"),
        ["Local", "Send Socket", "Size", "Final"],
    ),
    (
        "LSR_SIZE_END",
        Some("LSR_SIZE"),
        ["Local", "Recv Socket", "Size", "Final"],
    ),
    (
        "RSS_SIZE_END",
        Some("RSS_SIZE"),
        ["Remote", "Send Socket", "Size", "Final"],
    ),
    (
        "RSR_SIZE_END",
        Some("RSR_SIZE"),
        ["Remote", "Recv Socket", "Size", "Final"],
    ),
    (
        "LSS_SIZE_REQ",
        None,
        ["Local", "Send Socket", "Size", "Requested"],
    ),
    (
        "LSR_SIZE_REQ",
        None,
        ["Local", "Recv Socket", "Size", "Requested"],
    ),
    (
        "RSS_SIZE_REQ",
        None,
        ["Remote", "Send Socket", "Size", "Requested"],
    ),
    (
        "RSR_SIZE_REQ",
        None,
        ["Remote", "Recv Socket", "Size", "Requested"],
    ),
    ("LOCAL_SEND_SIZE", None, ["Local", "Send", "Size", ""]),
    ("LOCAL_RECV_SIZE", None, ["Local", "Recv", "Size", ""]),
    ("REMOTE_SEND_SIZE", None, ["Remote", "Send", "Size", ""]),
    ("REMOTE_RECV_SIZE", None, ["Remote", "Recv", "Size", ""]),
    ("REQUEST_SIZE", None, ["Request", "Size", "Bytes", ""]),
    ("RESPONSE_SIZE", None, ["Response", "Size", "Bytes", ""]),
    ("BURST_SIZE", None, ["Initial", "Burst", "Requests", ""]),
    ("PROTOCOL", None, ["Protocol", "", "", ""]),
    ("DIRECTION", None, ["Direction", "", "", ""]),
    ("UUID", None, ["Test", "UUID", "", ""]),
    ("RESULT_BRAND", None, ["Result", "Tag", "", ""]),
    ("COMMAND_LINE", None, ["Command", "Line", "", ""]),
    (
        "LOCAL_TRANSPORT_RETRANS",
        None,
        ["Local", "Transport", "Retransmissions", ""],
    ),
    (
        "REMOTE_TRANSPORT_RETRANS",
        None,
        ["Remote", "Transport", "Retransmissions", ""],
    ),
    ("TRANSPORT_MSS", None, ["Transport", "MSS", "bytes", ""]),
    (
        "CONFIDENCE_LEVEL",
        None,
        ["Confidence", "Level", "Percent", ""],
    ),
    (
        "CONFIDENCE_INTERVAL",
        None,
        ["Confidence", "Width", "Target", ""],
    ),
    (
        "CONFIDENCE_ITERATION",
        None,
        ["Confidence", "Iterations", "Run", ""],
    ),
    (
        "THROUGHPUT_CONFID",
        None,
        ["Throughput", "Confidence", "Width (%)", ""],
    ),
    (
        "LOCAL_CPU_CONFID",
        None,
        ["Local", "CPU", "Confidence", "Width (%)"],
    ),
    (
        "REMOTE_CPU_CONFID",
        None,
        ["Remote", "CPU", "Confidence", "Width (%)"],
    ),
    ("LOCAL_BYTES_SENT", None, ["Local", "Bytes", "Sent", ""]),
    (
        "LOCAL_BYTES_RECVD",
        None,
        ["Local", "Bytes", "Received", ""],
    ),
    ("REMOTE_BYTES_SENT", None, ["Remote", "Bytes", "Sent", ""]),
    (
        "REMOTE_BYTES_RECVD",
        None,
        ["Remote", "Bytes", "Received", ""],
    ),
    (
        "LOCAL_CONG_CONTROL",
        None,
        ["Local", "Congestion", "Control", "Algorithm"],
    ),
    (
        "REMOTE_CONG_CONTROL",
        None,
        ["Remote", "Congestion", "Control", "Algorithm"],
    ),
    ("LOCAL_SOCKET_TOS", None, ["Local", "Socket", "TOS", ""]),
    ("REMOTE_SOCKET_TOS", None, ["Remote", "Socket", "TOS", ""]),
    ("LOCAL_SYSNAME", None, ["Local", "Sysname", "", ""]),
    ("LOCAL_RELEASE", None, ["Local", "Release", "", ""]),
    ("REMOTE_SYSNAME", None, ["Remote", "Sysname", "", ""]),
    ("REMOTE_RELEASE", None, ["Remote", "Release", "", ""]),
];

/// netperf's numeric fields that thrum does not measure, or measures for
/// some tests only: where the result has no value they print netperf's
/// "unknown", -1, which scripts (flent) read as a number.
const NUMERIC: &[&str] = &[
    "TRANSPORT_MSS",
    "LOCAL_TRANSPORT_RETRANS",
    "REMOTE_TRANSPORT_RETRANS",
    "LOCAL_SEND_SIZE",
    "LOCAL_RECV_SIZE",
    "REMOTE_SEND_SIZE",
    "REMOTE_RECV_SIZE",
];

/// The field of thrum's table a netperf name reads.
fn field_of(name: &str) -> &str {
    NAMES
        .iter()
        .find(|(n, _, _)| *n == name)
        .and_then(|(_, thrum, _)| *thrum)
        .unwrap_or(name)
}

fn titles(name: &str) -> Vec<&str> {
    match NAMES.iter().find(|(n, _, _)| *n == name) {
        Some((_, _, t)) => t.iter().copied().filter(|l| !l.is_empty()).collect(),
        None => vec![name],
    }
}

/// Check a selector list (`-k A,B`; a file's content with its separators
/// turned into commas): each name thrum's table has, one netperf names
/// differently, or a numeric one printed as unknown; upper-cased.
pub fn parse_selectors(flag: &str, list: &str) -> Result<Vec<String>> {
    let known = fields::names();
    // netperf's keyword: every selector it knows; here every field.
    if list.trim().eq_ignore_ascii_case(fields::ALL) {
        return Ok(known);
    }
    let names: Vec<String> = list
        .split(',')
        .map(|n| n.trim().to_ascii_uppercase())
        .filter(|n| !n.is_empty())
        .collect();
    for n in &names {
        let ok = known.iter().any(|k| k == field_of(n)) || NUMERIC.contains(&n.as_str());
        if !ok {
            let mut accepted: Vec<&str> = known.iter().map(String::as_str).collect();
            accepted.extend(NAMES.iter().filter(|x| x.1.is_some()).map(|x| x.0));
            accepted.push("TRANSPORT_MSS");
            bail!(
                "{flag}: '{}' is not one of the output selectors taken (accepted: {})",
                crate::text::echo(n),
                accepted.join(",")
            );
        }
    }
    Ok(names)
}

/// netperf's default selection of `-t omni` (and of `-k`/`-o`/`-O`
/// without a list): the buffers, sizes, time and throughput.
pub fn default_selection(test: TestKind) -> Vec<String> {
    let rr = test.traits().merit == Merit::Transactions;
    let names: &[&str] = if rr {
        &[
            "LSS_SIZE_END",
            "LSR_SIZE_END",
            "RSR_SIZE_END",
            "RSS_SIZE_END",
            "REQUEST_SIZE",
            "RESPONSE_SIZE",
            "ELAPSED_TIME",
            "THROUGHPUT",
            "THROUGHPUT_UNITS",
        ]
    } else {
        &[
            "LSS_SIZE_END",
            "RSR_SIZE_END",
            "LOCAL_SEND_SIZE",
            "ELAPSED_TIME",
            "THROUGHPUT",
            "THROUGHPUT_UNITS",
        ]
    };
    names.iter().map(|s| s.to_string()).collect()
}

fn is_rr(test: TestKind) -> bool {
    test.traits().merit == Merit::Transactions
}

/// netperf's `format_units()`: the unit the figures are in, without "/s".
fn unit_word(p: &Print) -> &'static str {
    match p.unit {
        None if is_rr(p.test) => "Trans",
        None => "10^6bits",
        Some(u) => u.netperf_name().trim_end_matches("/s"),
    }
}

/// A rate in the unit printed; a request/response test in a bit unit
/// (`-f m`) is its bytes both ways, as netperf's "band" tables show it.
fn in_unit(p: &Print, bps: Option<f64>, tps: Option<f64>, plan: &crate::plan::TestPlan) -> f64 {
    match (p.unit, tps) {
        (None, Some(t)) => t,
        (Some(u), Some(t)) => u.of(t * (plan.request_bytes + plan.response_bytes) as f64 * 8.0),
        (u, None) => u.unwrap_or(RateUnit::Mbit).of(bps.unwrap_or(0.0)),
    }
}

/// The classic name of a test, as its header says it.
fn title(p: &Print) -> &'static str {
    if p.omni {
        let t = p.test.traits();
        return match (t.client_sends, t.client_receives) {
            (true, true) => "OMNI Send|Recv TEST",
            (false, true) => "OMNI Recv TEST",
            _ => "OMNI Send TEST",
        };
    }
    match p.test {
        TestKind::TcpStream => "TCP STREAM TEST",
        TestKind::TcpMaerts => "TCP MAERTS TEST",
        TestKind::TcpRr => "TCP REQUEST/RESPONSE TEST",
        TestKind::TcpCrr => "TCP Connect/Request/Response TEST",
        TestKind::TcpCc => "TCP Connect/Close TEST",
        TestKind::UdpStream => "UDP UNIDIRECTIONAL SEND TEST",
        TestKind::UdpRr => "UDP REQUEST/RESPONSE TEST",
        _ => "OMNI TEST",
    }
}

/// The header line netperf prints before the test runs: the test, from
/// where to where, and what is on (confidence, nodelay, demo, burst, CPU
/// binding). `local` is the bound address or the unspecified one;
/// `server` the server as written, `addr` its address.
pub fn header(
    p: &Print,
    plan: &crate::plan::TestPlan,
    local: std::net::IpAddr,
    server: &str,
    addr: std::net::SocketAddr,
) -> String {
    let af = |ip: std::net::IpAddr| if ip.is_ipv4() { "AF_INET" } else { "AF_INET6" };
    let mut s = format!(
        "{} from {local} ({local}) port 0 {} to {server} ({}) port {} {}",
        title(p),
        af(local),
        addr.ip(),
        addr.port(),
        af(addr.ip())
    );
    if let Some((level, width)) = p.confidence {
        s.push_str(&format!(" : +/-{:.3}% @ {level:2}% conf. ", width / 2.0));
    }
    if plan.nodelay {
        s.push_str(" : nodelay");
    }
    if p.demo {
        s.push_str(" : demo");
    }
    if plan.test.traits().burst {
        s.push_str(&format!(" : first burst {}", plan.burst));
    }
    if p.cpu_bind {
        s.push_str(" : cpu bind");
    }
    s.push('\n');
    s
}

/// Demo mode's interim results, as netperf emits them: a line only when
/// work completed since the last one, so an interval in which nothing
/// completed (a lost datagram waited out, a stalled stream) joins the next
/// one, whose line covers both with its rate over the whole span. netperf
/// ticks per transaction and never prints a zero; flent drops a line whose
/// interval is ten times its average, as it would drop netperf's.
#[derive(Debug, Default)]
pub struct InterimLines {
    /// Lines printed so far: the next line's index in the `-k` form.
    pub printed: usize,
    /// Where the span of intervals with nothing completed began.
    idle_since_s: Option<f64>,
}

impl InterimLines {
    /// The line for interval `iv` in the style of the output (the classic
    /// line, CSV, or the four `NETPERF_*[i]` keys flent reads), or None:
    /// outside the measurement window, without a figure yet, or nothing
    /// completed in it.
    pub fn line(
        &mut self,
        p: &Print,
        iv: &Interval,
        plan: &crate::plan::TestPlan,
    ) -> Option<String> {
        if iv.phase != crate::plan::Phase::Measure {
            return None;
        }
        let (tps, bps) = (iv.sum.transactions_per_s, iv.sum.throughput_bps);
        if tps.is_none() && bps.is_none() {
            return None;
        }
        let value = in_unit(p, bps, tps, plan);
        if value <= 0.0 {
            self.idle_since_s.get_or_insert(iv.start_s);
            return None;
        }
        let start = self.idle_since_s.take().unwrap_or(iv.start_s);
        let secs = iv.end_s - start;
        let value = value * (iv.end_s - iv.start_s) / secs;
        let end_ms = (iv.unix_end_s * 1000.0).floor() as i64;
        let ending = format!("{}.{:03}", end_ms / 1000, end_ms % 1000);
        let unit = unit_word(p);
        let index = self.printed;
        self.printed += 1;
        Some(match p.selection.as_ref().map(|s| s.style) {
            Some(Style::Keyval) => format!(
                "NETPERF_INTERIM_RESULT[{index}]={value:.2}\nNETPERF_UNITS[{index}]={unit}/s\n\
                 NETPERF_INTERVAL[{index}]={secs:.3}\nNETPERF_ENDING[{index}]={ending}\n"
            ),
            Some(Style::Csv) => format!("{value:7.2},{unit}/s,{secs:.3},{ending}\n"),
            _ => format!(
                "Interim result: {value:7.2} {unit}/s over {secs:.3} seconds ending at {ending}\n"
            ),
        })
    }
}

/// The result as netperf prints it after the test: the selectors' fields
/// or the classic table (after the confidence warning, when asked for and
/// not reached).
pub struct Netperf {
    pub print: Print,
}

impl Exporter for Netperf {
    fn write(&self, r: &TestResult, out: &mut dyn Write) -> io::Result<()> {
        match &self.print.selection {
            Some(s) => self.selected(s, r, out),
            None => {
                self.confidence_warning(r, out)?;
                self.table(r, out)
            }
        }
    }
}

/// SO_SNDBUF or SO_RCVBUF of one end as it read them back; 0 unknown.
fn buffer(side: &Side, send: bool) -> u64 {
    side.socket_buffers
        .map(|b| if send { b.send_bytes } else { b.recv_bytes })
        .unwrap_or(0)
}

/// The CPU method letter netperf prints after a CPU figure: `S` for
/// /proc/stat, `R` for process usage (rusage).
fn method(side: &Side) -> char {
    match side.service_demand_source {
        Some("rusage") => 'R',
        _ => 'S',
    }
}

impl Netperf {
    fn selected(&self, s: &Selection, r: &TestResult, out: &mut dyn Write) -> io::Result<()> {
        let mut all = fields::values(r);
        fields::in_units(
            &mut all,
            r,
            self.print
                .unit
                .or(Some(RateUnit::Mbit))
                .filter(|_| r.test.is_stream()),
        );
        let value = |n: &str| -> String {
            let key = field_of(n);
            match all.iter().find(|(k, _)| k == key) {
                Some((_, v)) => v.clone(),
                None if NUMERIC.contains(&n) => "-1".into(),
                None => String::new(),
            }
        };
        let values: Vec<String> = s.names.iter().map(|n| value(n)).collect();
        match s.style {
            Style::Keyval => {
                for (n, v) in s.names.iter().zip(&values) {
                    writeln!(out, "{n}={v}")?;
                }
            }
            Style::Csv => {
                if self.print.headers {
                    let head: Vec<String> = s.names.iter().map(|n| titles(n).join(" ")).collect();
                    writeln!(out, "{}", head.join(","))?;
                }
                let row: Vec<String> = values.iter().map(|v| crate::text::csv_field(v)).collect();
                writeln!(out, "{}", row.join(","))?;
            }
            Style::Human => {
                // netperf's columns: as wide as the widest title line or
                // the value and its terminator, and one space.
                let widths: Vec<usize> = s
                    .names
                    .iter()
                    .zip(&values)
                    .map(|(n, v)| {
                        let t = titles(n).iter().map(|l| l.len()).max().unwrap_or(0);
                        t.max(v.chars().count() + 1)
                    })
                    .collect();
                if self.print.headers {
                    for line in 0..4 {
                        let cells: Vec<String> = s
                            .names
                            .iter()
                            .zip(&widths)
                            .map(|(n, w)| {
                                format!("{:<w$}", titles(n).get(line).copied().unwrap_or(""))
                            })
                            .collect();
                        let text = cells.join(" ");
                        if !text.trim().is_empty() {
                            writeln!(out, "{}", text.trim_end())?;
                        }
                    }
                }
                let cells: Vec<String> = values
                    .iter()
                    .zip(&widths)
                    .map(|(v, w)| format!("{v:<w$}"))
                    .collect();
                writeln!(out, "{}", cells.join(" ").trim_end())?;
            }
        }
        Ok(())
    }

    /// netperf's warning when `-i`/`-I` did not reach the confidence asked
    /// for: each interval's width in percent of its mean.
    fn confidence_warning(&self, r: &TestResult, out: &mut dyn Write) -> io::Result<()> {
        let Some(c) = r.confidence.as_ref().filter(|c| !c.achieved) else {
            return Ok(());
        };
        if c.iterations_max <= 1 {
            return Ok(());
        }
        writeln!(out, "!!! WARNING")?;
        writeln!(
            out,
            "!!! Desired confidence was not achieved within the specified iterations."
        )?;
        writeln!(
            out,
            "!!! This implies that there was variability in the test environment that"
        )?;
        writeln!(out, "!!! must be investigated before going further.")?;
        writeln!(
            out,
            "!!! Confidence intervals: Throughput      : {:4.3}%",
            c.width_percent_achieved.unwrap_or(0.0)
        )?;
        writeln!(
            out,
            "!!!                       Local CPU util  : {:4.3}%",
            c.local_cpu_width_percent_achieved.unwrap_or(0.0)
        )?;
        writeln!(
            out,
            "!!!                       Remote CPU util : {:4.3}%\n",
            c.remote_cpu_width_percent_achieved.unwrap_or(0.0)
        )
    }

    fn table(&self, r: &TestResult, out: &mut dyn Write) -> io::Result<()> {
        let p = &self.print;
        let s = &r.summary;
        let (l, rem) = (&s.local, &s.remote);
        let cpu = p.local_cpu || p.remote_cpu;
        let brand = match (&p.brand, p.headers) {
            (Some(b), false) => b.as_str(),
            _ => "",
        };
        let rr = is_rr(p.test);
        let sd = |side: &Side| {
            side.service_demand_us_per_tran
                .or(side.service_demand_us_per_kb)
                .unwrap_or(-1.0)
        };
        let util = |side: &Side| side.cpu_util_percent.unwrap_or(-1.0);
        let thruput = in_unit(p, s.throughput_bps, s.transactions_per_s, &r.spec.plan);
        if p.verbosity == 0 {
            return if cpu {
                let side = if p.local_cpu { l } else { rem };
                writeln!(out, "{:6.3} {} {brand}", sd(side), method(side))
            } else {
                writeln!(out, "{thruput:7.2} {brand}")
            };
        }
        let plan = &r.spec.plan;
        let elapsed = s.duration_s;
        let (lm, rm) = (method(l), method(rem));
        let units8: String = unit_word(p).chars().take(8).collect();
        match p.test {
            TestKind::UdpStream => {
                let sent_bps = s.throughput_bps_sent.unwrap_or(l.send_bps);
                let sent = in_unit(p, Some(sent_bps), None, plan);
                let sends = s.datagrams_sent.unwrap_or(l.datagrams_sent);
                let recvs = s.datagrams_received.unwrap_or(rem.datagrams_received);
                if cpu {
                    if p.headers {
                        write!(
                            out,
                            "Socket  Message  Elapsed      Messages                   CPU      Service\n\
                             Size    Size     Time         Okay Errors   Throughput   Util     Demand\n\
                             bytes   bytes    secs            #      #   {}/sec % {lm}{rm}     us/KB\n\n",
                            unit_word(p)
                        )?;
                    }
                    write!(
                        out,
                        "{:6}  {:6}   {elapsed:<7.2}   {sends:7} {:6}    {sent:7.1}     {:<6.2}   {:<6.3}\n\
                         {:6}           {elapsed:<7.2}   {recvs:7}           {thruput:7.1}     {:<6.2}   {:<6.3}\n\n",
                        buffer(l, true),
                        plan.send_bytes,
                        0,
                        util(l),
                        sd(l),
                        buffer(rem, false),
                        util(rem),
                        sd(rem)
                    )
                } else {
                    if p.headers {
                        write!(
                            out,
                            "Socket  Message  Elapsed      Messages                \n\
                             Size    Size     Time         Okay Errors   Throughput\n\
                             bytes   bytes    secs            #      #   {}/sec\n\n",
                            unit_word(p)
                        )?;
                    }
                    write!(
                        out,
                        "{:6}  {:6}   {elapsed:<7.2}   {sends:7} {:6}    {sent:7.2}\n\
                         {:6}           {elapsed:<7.2}   {recvs:7}           {thruput:7.2}\n\n",
                        buffer(l, true),
                        plan.send_bytes,
                        0,
                        buffer(rem, false)
                    )
                }
            }
            _ if rr => {
                let band = p.unit.is_some();
                if p.headers {
                    if cpu {
                        let (rate, sdu) = if band {
                            (
                                format!(
                                    "Tput     CPU    CPU    S.dem   S.dem\nSend   Recv   Size    Size   Time    {units8:<8} local  remote local   remote\nbytes  bytes  bytes   bytes  secs.   per sec  % {lm}    % {rm}    us/KB   us/KB"
                                ),
                                "",
                            )
                        } else {
                            (
                                format!(
                                    "Trans.   CPU    CPU    S.dem   S.dem\nSend   Recv   Size    Size   Time    Rate     local  remote local   remote\nbytes  bytes  bytes   bytes  secs.   per sec  % {lm}    % {rm}    us/Tr   us/Tr"
                                ),
                                "",
                            )
                        };
                        write!(
                            out,
                            "Local /Remote\nSocket Size   Request Resp.  Elapsed {rate}{sdu}\n\n"
                        )?;
                    } else if band {
                        write!(
                            out,
                            "Local /Remote\nSocket Size   Request  Resp.   Elapsed  \n\
                             Send   Recv   Size     Size    Time     Throughput \n\
                             bytes  Bytes  bytes    bytes   secs.    {}/sec   \n\n",
                            unit_word(p)
                        )?;
                    } else {
                        write!(
                            out,
                            "Local /Remote\nSocket Size   Request  Resp.   Elapsed  Trans.\n\
                             Send   Recv   Size     Size    Time     Rate         \n\
                             bytes  Bytes  bytes    bytes   secs.    per sec   \n\n"
                        )?;
                    }
                }
                let (lss, lsr) = (buffer(l, true), buffer(l, false));
                let (rss, rsr) = (buffer(rem, true), buffer(rem, false));
                let (req, rsp) = (plan.request_bytes, plan.response_bytes);
                if cpu {
                    writeln!(
                        out,
                        "{lss:<6} {lsr:<6} {req:<6}  {rsp:<6} {elapsed:<6.2}  {thruput:<6.2}  {:<6.2} {:<6.2} {:<6.3}  {:<6.3} {brand}",
                        util(l),
                        util(rem),
                        sd(l),
                        sd(rem)
                    )?;
                } else {
                    writeln!(
                        out,
                        "{lss:<6} {lsr:<6} {req:<6}   {rsp:<6}  {elapsed:<6.2}   {thruput:7.2}   {brand}"
                    )?;
                }
                writeln!(out, "{rss:<6} {rsr:<6}")
            }
            _ => {
                // tcp_stream (and tcp_maerts, its ends crossed): the
                // receiver's buffer, the sender's, the send size.
                let maerts = !p.test.traits().client_sends;
                let (dir_a, dir_b) = if maerts {
                    ("Recv", "Send")
                } else {
                    ("Send", "Recv")
                };
                let (recv_buf, send_buf) = if maerts {
                    (buffer(l, false), buffer(rem, true))
                } else {
                    (buffer(rem, false), buffer(l, true))
                };
                if cpu {
                    if p.headers {
                        write!(
                            out,
                            "Recv   Send    Send                          Utilization       Service Demand\n\
                             Socket Socket  Message  Elapsed              {dir_a}     {dir_b}     {dir_a}    {dir_b}\n\
                             Size   Size    Size     Time     Throughput  local    remote   local   remote\n\
                             bytes  bytes   bytes    secs.    {units8:<8}/s  % {lm}      % {rm}      us/KB   us/KB\n\n"
                        )?;
                    }
                    writeln!(
                        out,
                        "{recv_buf:6} {send_buf:6} {:6}    {elapsed:<6.2}     {thruput:7.2}   {:<6.2}   {:<6.2}   {:<6.3}  {:<6.3} {brand}",
                        plan.send_bytes,
                        util(l),
                        util(rem),
                        sd(l),
                        sd(rem)
                    )
                } else {
                    if p.headers {
                        write!(
                            out,
                            "Recv   Send    Send                          \n\
                             Socket Socket  Message  Elapsed              \n\
                             Size   Size    Size     Time     Throughput  \n\
                             bytes  bytes   bytes    secs.    {}/sec  \n\n",
                            unit_word(p)
                        )?;
                    }
                    writeln!(
                        out,
                        "{recv_buf:6} {send_buf:6} {:6}    {elapsed:<6.2}   {thruput:7.2}   {brand}",
                        plan.send_bytes
                    )
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::fixtures;

    fn print(test: TestKind) -> Print {
        Print {
            test,
            omni: false,
            selection: None,
            headers: true,
            verbosity: 1,
            unit: None,
            local_cpu: false,
            remote_cpu: false,
            cpu_bind: false,
            demo: false,
            brand: None,
            confidence: None,
        }
    }

    fn text(p: Print, r: &TestResult) -> String {
        String::from_utf8(super::super::render(&Netperf { print: p }, r)).unwrap()
    }

    fn stream() -> TestResult {
        let mut r = fixtures::result(TestKind::TcpStream);
        r.spec.plan.send_bytes = 2048;
        r.summary.duration_s = 2.0;
        r.summary.throughput_bps = Some(47_160_000.0);
        r.summary.remote.socket_buffers = Some(crate::io::socket::SocketBuffers {
            recv_bytes: 131072,
            ..Default::default()
        });
        r.summary.local.socket_buffers = Some(crate::io::socket::SocketBuffers {
            send_bytes: 16384,
            ..Default::default()
        });
        r
    }

    /// netperf's TCP_STREAM table, column for column, and its -P 0 line.
    #[test]
    fn the_stream_table() {
        let r = stream();
        let t = text(print(TestKind::TcpStream), &r);
        assert_eq!(
            t,
            "Recv   Send    Send                          \n\
             Socket Socket  Message  Elapsed              \n\
             Size   Size    Size     Time     Throughput  \n\
             bytes  bytes   bytes    secs.    10^6bits/sec  \n\n\
             131072  16384   2048    2.00       47.16   \n"
        );
        let mut p = print(TestKind::TcpStream);
        p.headers = false;
        p.brand = Some("lab".into());
        assert_eq!(
            text(p.clone(), &r),
            "131072  16384   2048    2.00       47.16   lab\n"
        );
        p.verbosity = 0;
        assert_eq!(text(p, &r), "  47.16 lab\n");
    }

    /// A transaction test's two lines, and the -k selectors with netperf's
    /// "unknown" for a number thrum does not measure.
    #[test]
    fn rr_lines_and_selectors() {
        let mut r = fixtures::result(TestKind::TcpRr);
        r.summary.duration_s = 1.0;
        r.summary.transactions_per_s = Some(49545.57);
        let mut p = print(TestKind::TcpRr);
        p.headers = false;
        assert_eq!(
            text(p.clone(), &r),
            "0      0      1        1       1.00     49545.57   \n0      0     \n"
        );
        p.selection = Some(Selection {
            names: parse_selectors(
                "-k",
                "THROUGHPUT,TRANSPORT_MSS,DIRECTION,PROTOCOL,LSS_SIZE_END",
            )
            .unwrap(),
            style: Style::Keyval,
        });
        assert_eq!(
            text(p.clone(), &r),
            "THROUGHPUT=49545.57\nTRANSPORT_MSS=-1\nDIRECTION=Send|Recv\nPROTOCOL=TCP\nLSS_SIZE_END=\n"
        );
        p.headers = true;
        p.selection = Some(Selection {
            names: vec!["THROUGHPUT".into(), "MEAN_LATENCY".into()],
            style: Style::Csv,
        });
        assert_eq!(
            text(p, &r),
            "Throughput,Mean Latency Microseconds\n49545.57,\n"
        );
        let e = parse_selectors("-o", "THROUGHPUT,NOPE")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("-o: 'NOPE' is not one of the output selectors taken"),
            "{e}"
        );
    }

    /// The UDP stream table: the sender's line over the receiver's.
    #[test]
    fn the_udp_stream_table() {
        let mut r = fixtures::result(TestKind::UdpStream);
        r.spec.plan.send_bytes = 1024;
        r.summary.duration_s = 2.0;
        r.summary.throughput_bps = Some(45_690_000.0);
        r.summary.throughput_bps_sent = Some(808_480_000.0);
        r.summary.datagrams_sent = Some(197389);
        r.summary.datagrams_received = Some(11154);
        let t = text(print(TestKind::UdpStream), &r);
        assert!(
            t.contains("bytes   bytes    secs            #      #   10^6bits/sec\n"),
            "{t}"
        );
        assert!(t.ends_with(
            "     0    1024   2.00       197389      0     808.48\n     0           2.00        11154             45.69\n\n"
        ), "{t}");
    }

    /// Demo mode's interim lines in their three forms; an interval in
    /// which nothing completed joins the next line, as netperf's ticks do.
    #[test]
    fn interim_lines() {
        let plan = crate::plan::TestPlan::new(TestKind::TcpStream);
        let mut iv = fixtures::interval(3, 1.0, 0.203);
        iv.phase = crate::plan::Phase::Measure;
        iv.unix_end_s = 1795812300.5629;
        iv.sum.throughput_bps = Some(49_840_000.0);
        let mut p = print(TestKind::TcpStream);
        let mut lines = InterimLines::default();
        assert_eq!(
            lines.line(&p, &iv, &plan).unwrap(),
            "Interim result:   49.84 10^6bits/s over 0.203 seconds ending at 1795812300.562\n"
        );
        p.selection = Some(Selection {
            names: vec!["THROUGHPUT".into()],
            style: Style::Keyval,
        });
        assert_eq!(
            lines.line(&p, &iv, &plan).unwrap(),
            "NETPERF_INTERIM_RESULT[1]=49.84\nNETPERF_UNITS[1]=10^6bits/s\nNETPERF_INTERVAL[1]=0.203\nNETPERF_ENDING[1]=1795812300.562\n"
        );
        let mut idle = fixtures::interval(4, 0.6, 0.4);
        idle.phase = crate::plan::Phase::Measure;
        idle.sum.throughput_bps = Some(0.0);
        assert_eq!(lines.line(&p, &idle, &plan), None);
        let next = lines.line(&p, &iv, &plan).unwrap();
        assert!(
            next.starts_with("NETPERF_INTERIM_RESULT[2]=16.78\n")
                && next.contains("NETPERF_INTERVAL[2]=0.603\n"),
            "{next}"
        );
        iv.phase = crate::plan::Phase::Warmup;
        assert_eq!(lines.line(&p, &iv, &plan), None);
    }

    #[test]
    fn the_header_line() {
        let mut p = print(TestKind::TcpRr);
        p.confidence = Some((99, 5.0));
        p.demo = true;
        let mut plan = crate::plan::TestPlan::new(TestKind::TcpRr);
        plan.burst = 4;
        let h = header(
            &p,
            &plan,
            "0.0.0.0".parse().unwrap(),
            "lg1",
            "10.0.0.2:12865".parse().unwrap(),
        );
        assert_eq!(
            h,
            "TCP REQUEST/RESPONSE TEST from 0.0.0.0 (0.0.0.0) port 0 AF_INET to lg1 (10.0.0.2) port 12865 AF_INET : +/-2.500% @ 99% conf.  : demo : first burst 4\n"
        );
    }
}
