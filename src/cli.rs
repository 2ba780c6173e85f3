//! Command-line types (clap) and their conversion into plain plans.
//!
//! No clap type leaves this module: [`RunArgs::to_plan`] checks the flags and
//! produces a [`TestPlan`] and a [`Target`], which is all the rest takes.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::control::client::Target;
use crate::control::server::DEFAULT_PORT;
use crate::plan::{SocketOpts, TestKind, TestPlan};
use crate::units::{parse_duration, parse_rate, parse_size};

mod agg;
pub use agg::{AggArgs, AggOutput, BurstChoice, FindBurstArgs, ReportArgs, SweepArgs, target_for};
mod curve;
pub use curve::CurveArgs;
pub mod hardening;
mod ping;
pub use ping::{MAX_PING_COUNT, MAX_PING_SIZE, PingArgs, PingPlan};

#[derive(Debug, Parser)]
#[command(
    name = "thrum",
    version,
    about = "Network performance measurement: bulk throughput, request/response rate and latency, connection rate, packet rate and loss",
    long_about = "thrum measures bits/s (tcp_stream, tcp_maerts, tcp_bidir, udp_stream), transactions/s and latency \
(tcp_rr, tcp_crr, tcp_cc, udp_rr), and datagram loss, on many flows and threads.\n\nRun `thrum server` on one host and \
`thrum run TEST -H HOST` on another; without -H, `thrum run` starts a server inside its own process on loopback."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one test against a server (or an embedded one on loopback).
    Run(Box<RunArgs>),
    /// Serve tests to clients.
    Server(ServerArgs),
    /// Run every test for a few seconds against an embedded server and print one table.
    Suite(SuiteArgs),
    /// Ramp streams 1, 2, 4 … over load generators and report the aggregate per step (netperf's aggregate method).
    Agg(Box<AggArgs>),
    /// Find the burst that maximises one flow's transactions/s (double while it still rises).
    FindBurst(FindBurstArgs),
    /// Run one test over every burst × flows combination and print the matrix.
    Sweep(SweepArgs),
    /// Offer increasing open-loop rates and find the knee and the saturation point of latency against throughput.
    Curve(Box<CurveArgs>),
    /// Re-analyse a results.json (of agg or curve) or netperf demo-mode logs (netperf_TEST.log and its .out files).
    Report(ReportArgs),
    /// ICMP echo (or TCP connect) round trips by packet size: availability and response time.
    Ping(PingArgs),
}

/// A test's name as written: checked later by [`TestKind`]'s parser, which
/// also takes netperf's spellings (`TCP_RR`), or by `thrum run` as a preset
/// mix (`plan::mix::PRESETS`). It names the tests ([`TestKind::ALL`]), and
/// with `presets` the preset mixes, as possible values only so that shell
/// completions (clap_complete) offer them.
#[derive(Clone, Copy, Debug)]
pub struct TestName {
    /// Offer the preset mixes too (`thrum run rrul`).
    pub presets: bool,
}

impl TestName {
    /// A single test (`thrum sweep`).
    pub const TEST: TestName = TestName { presets: false };
    /// A test or a preset mix (`thrum run`).
    pub const TEST_OR_PRESET: TestName = TestName { presets: true };
}

impl clap::builder::TypedValueParser for TestName {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        clap::builder::StringValueParser::new().parse_ref(cmd, arg, value)
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        let presets = crate::plan::mix::PRESETS
            .iter()
            .filter(|_| self.presets)
            .map(|p| p.name);
        Some(Box::new(
            TestKind::ALL
                .into_iter()
                .map(TestKind::name)
                .chain(presets)
                .map(clap::builder::PossibleValue::new),
        ))
    }
}

fn size(s: &str) -> Result<u64, String> {
    parse_size(s).map(|b| b.0).map_err(|e| e.to_string())
}

fn duration(s: &str) -> Result<Duration, String> {
    parse_duration(s).map_err(|e| e.to_string())
}

fn rate(s: &str) -> Result<u64, String> {
    parse_rate(s).map(|r| r.0 as u64).map_err(|e| e.to_string())
}

/// `A` or `A,B`: both values, the second defaulting to the first.
fn size_pair(s: &str) -> Result<(u64, u64), String> {
    match s.split_once(',') {
        Some((a, b)) => Ok((size(a)?, size(b)?)),
        None => {
            let v = size(s)?;
            Ok((v, v))
        }
    }
}

/// A CPU list as one flag value (a newtype, so clap does not take it for repeated values).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuList(pub Vec<usize>);

fn cpu_list_arg(s: &str) -> Result<CpuList, String> {
    cpu_list(s).map(CpuList)
}

/// A CPU list: `0`, `0,2`, `0-3,6`.
pub fn cpu_list(s: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        let num = |x: &str| {
            x.trim()
                .parse::<usize>()
                .map_err(|_| format!("'{x}' is not a CPU number (expected a list like 0,2-3)"))
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a > b || b - a > 4096 {
                    return Err(format!("'{part}' is not a valid CPU range"));
                }
                out.extend(a..=b);
            }
            None => out.push(num(part)?),
        }
    }
    if out.is_empty() {
        return Err("empty CPU list".into());
    }
    Ok(out)
}

/// `--output-fields` as one flag value (a newtype, so clap does not take it for repeated values).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldList(pub Vec<String>);

fn field_list(s: &str) -> Result<FieldList, String> {
    crate::export::fields::parse_list(s).map(FieldList)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Human,
    Json,
    Keyval,
    /// `--csv`: one CSV line of the output fields.
    Csv,
}

/// Where and how results are written.
#[derive(Debug, Args, Clone)]
pub struct OutputArgs {
    /// Write the result as one JSON document (schema thrum.result.v1).
    #[arg(long, conflicts_with = "keyval")]
    pub json: bool,
    /// Write the result as netperf-style KEY=value lines (only the --output-fields, when given).
    #[arg(long, conflicts_with = "csv")]
    pub keyval: bool,
    /// Write the --output-fields (default THROUGHPUT,THROUGHPUT_UNITS) as one CSV line under a header of their names (netperf's -o).
    #[arg(long, conflicts_with = "json")]
    pub csv: bool,
    /// netperf's omni output selectors (-o/-O/-k): the fields, by netperf's names and thrum's own (THROUGHPUT,THROUGHPUT_UNITS,MEAN_LATENCY,P99_LATENCY,LOCAL_CPU_UTIL,REMOTE_SD, …), that --csv, --keyval or, alone, one human line shows.
    #[arg(long, value_parser = field_list, value_name = "LIST", conflicts_with = "json")]
    pub output_fields: Option<FieldList>,
    /// Write the result to FILE instead of standard output ('-' is standard output). A regular file is replaced atomically through an exclusively created temp file; a FIFO or device is written directly.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Write per-interval, per-flow samples as CSV to FILE, a row at a time as they arrive; the finished file replaces it atomically at the end.
    #[arg(long, value_name = "FILE")]
    pub samples: Option<PathBuf>,
    /// Write JSON Lines to standard output as the test runs: one line per interval as it completes, then the whole result as the last line.
    #[arg(long, conflicts_with_all = ["json", "keyval", "output"])]
    pub json_stream: bool,
    /// Also write the result as JSON to FILE, beside the output on the terminal (repeatable; hyperfine's habit).
    #[arg(long, value_name = "FILE")]
    pub export_json: Vec<PathBuf>,
    /// Also write the per-interval, per-flow samples as CSV to FILE (repeatable).
    #[arg(long, value_name = "FILE")]
    pub export_csv: Vec<PathBuf>,
    /// Also write the result as netperf-style KEY=value lines to FILE (repeatable).
    #[arg(long, value_name = "FILE")]
    pub export_keyval: Vec<PathBuf>,
}

impl OutputArgs {
    pub fn format(&self) -> Format {
        if self.json {
            Format::Json
        } else if self.keyval {
            Format::Keyval
        } else if self.csv {
            Format::Csv
        } else {
            Format::Human
        }
    }
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// tcp_stream, tcp_maerts, tcp_bidir, tcp_rr, tcp_crr, tcp_cc, udp_stream, udp_rr or capacity (netperf's TCP_RR etc. also accepted); or a preset mix: rrul, rrul_be, upload, download (see --dry-run).
    #[arg(value_name = "TEST", value_parser = TestName::TEST_OR_PRESET, hide_possible_values = true, required_unless_present = "mix", conflicts_with = "mix")]
    pub test: Option<String>,
    /// Several tests in one session, as parts joined by commas. A part is
    /// TEST, then optionally *FLOWS and any of @rate=N @dscp=NAME @tos=N
    /// @name=LABEL, e.g. tcp_stream*4,udp_rr@rate=100 (see
    /// docs/latency-under-load.md).
    #[arg(long, value_name = "SPEC")]
    pub mix: Option<String>,
    /// DSCP/TOS mark on the data sockets, both ends: a DSCP name (EF, CS5, AF41, BE, BK) or the TOS byte 0..255 (IP_TOS, IPV6_TCLASS).
    #[arg(long, value_name = "DSCP|TOS")]
    pub tos: Option<String>,
    /// A mix with latency probes and bulk parts: the probes run alone this long at the start of the measurement window (the idle phase), before the bulk parts start; 0 with --recovery 0: no phases.
    #[arg(long, default_value = "5s", value_parser = duration, value_name = "DURATION")]
    pub idle: Duration,
    /// A mix with latency probes and bulk parts: the probes run on alone this long after the bulk parts have drained (the recovery phase).
    #[arg(long, default_value = "5s", value_parser = duration, value_name = "DURATION")]
    pub recovery: Duration,
    /// capacity: the server sends the trains and the client times them, for
    /// the server-to-client direction's narrow link (default: client to
    /// server).
    #[arg(long, conflicts_with = "both")]
    pub reverse: bool,
    /// capacity: both directions in one session, each on its own flows
    /// (--flows and --threads are per direction) and reported apart.
    #[arg(long)]
    pub both: bool,
    /// Write a chart as SVG to FILE. A mix: the time series (throughput up and down, probe latency, phases shaded). capacity: the histogram of the trains' gaps as rates, with the estimate, its interval and any token bucket marked.
    #[arg(long, value_name = "FILE")]
    pub chart: Option<std::path::PathBuf>,
    /// A mix: write a self-contained HTML report (grades, parts, phases, the chart, every interval's goodput, probe latency, fairness and retransmits) to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: Option<std::path::PathBuf>,
    /// Print the plan (a preset's or --mix's SPEC and its parts) and exit without running.
    #[arg(long)]
    pub dry_run: bool,
    /// Server as HOST or HOST:PORT ([v6]:PORT); absent: an embedded server on loopback.
    #[arg(short = 'H', long, value_name = "HOST[:PORT]")]
    pub host: Option<String>,
    /// Length of the measurement window (10s, 500ms, 2m, 1h30m).
    #[arg(short = 'l', long, default_value = "10s", value_parser = duration, value_name = "DURATION")]
    pub duration: Duration,
    /// Measure this many transactions instead of a duration (tcp_rr, tcp_crr, tcp_cc, udp_rr).
    #[arg(short = 'n', long, value_name = "N")]
    pub transactions: Option<u64>,
    /// Number of flows (connections).
    #[arg(short = 'F', long, default_value_t = 1, value_name = "F")]
    pub flows: u32,
    /// Worker threads on each end; flows are spread evenly over them.
    #[arg(short = 'T', long, default_value_t = 1, value_name = "T")]
    pub threads: u32,
    /// Request and response sizes in bytes, REQ[,RESP] (rr, crr).
    #[arg(short = 'r', long, default_value = "1,1", value_parser = size_pair, value_name = "REQ[,RESP]")]
    pub rr_size: (u64, u64),
    /// Extra transactions in flight per flow: N+1 outstanding (netperf's burst; tcp_rr, udp_rr).
    #[arg(short = 'b', long, default_value_t = 0, value_name = "N")]
    pub burst: u32,
    /// Bytes per send call (stream tests; default 128K), the datagram size of udp_stream (default 1472, at most 65507), or capacity's packet size (--packet-size; default the payload that fills the path MTU, up to a 9000-byte MTU's; 12 to 65507). K/M/G = 2^10.., k/m/g = 10^3..
    #[arg(short = 'm', long, visible_alias = "packet-size", value_parser = size, value_name = "SIZE")]
    pub send_size: Option<u64>,
    /// Bytes per receive call (stream tests).
    #[arg(short = 'M', long, default_value = "128K", value_parser = size, value_name = "SIZE")]
    pub recv_size: u64,
    /// Local socket buffers SO_SNDBUF[,SO_RCVBUF]; default: kernel autotuning.
    #[arg(short = 's', long, value_parser = size_pair, value_name = "SND[,RCV]")]
    pub local_buffer: Option<(u64, u64)>,
    /// Server socket buffers SO_SNDBUF[,SO_RCVBUF].
    #[arg(short = 'S', long, value_parser = size_pair, value_name = "SND[,RCV]")]
    pub remote_buffer: Option<(u64, u64)>,
    /// Set TCP_NODELAY on data sockets, both ends.
    #[arg(long)]
    pub nodelay: bool,
    /// TCP congestion control, both ends (cubic, bbr, ...).
    #[arg(long, value_name = "ALGO")]
    pub cc: Option<String>,
    /// TCP_MAXSEG, both ends.
    #[arg(long, value_name = "BYTES")]
    pub mss: Option<u32>,
    /// SO_MAX_PACING_RATE per flow, in bits/s (100M = 10^8 bit/s).
    #[arg(long, value_parser = rate, value_name = "RATE")]
    pub pacing_rate: Option<u64>,
    /// Open loop. udp_stream: send each flow's datagrams at RATE bits/s of
    /// payload (as iperf3 -b). tcp_rr, udp_rr, tcp_crr, tcp_cc: offer RATE
    /// transactions/s in all (10k = 10,000/s), spread over the flows, on a
    /// schedule the responses do not slow; latency then runs from each
    /// transaction's intended start (no coordinated omission); tcp_rr then
    /// sets TCP_NODELAY on both ends. Default: as fast as possible (closed
    /// loop).
    #[arg(long, value_parser = rate, value_name = "RATE")]
    pub rate: Option<u64>,
    /// With --rate on a request/response test: `fixed` spacing, or `poisson`
    /// arrivals of the same mean rate.
    #[arg(long, default_value = "fixed", value_parser = ["fixed", "poisson"], value_name = "fixed|poisson")]
    pub arrivals: String,
    /// With --rate on tcp_rr or udp_rr: the most transactions in flight per
    /// flow; when full, the schedule keeps running and the owed requests go
    /// out as slots free. tcp_crr and tcp_cc keep one connection per flow.
    #[arg(long, default_value_t = crate::plan::DEFAULT_MAX_INFLIGHT, value_name = "N")]
    pub max_inflight: u32,
    /// tcp_stream, tcp_maerts, tcp_bidir: time every send and receive call
    /// on both ends into histograms (netperf's -v 2; shown with -v, always
    /// in JSON). Off by default: two clock reads per call.
    #[arg(long)]
    pub call_times: bool,
    /// udp_rr: a transaction without a response after this is lost and its
    /// slot reused. Default: 50ms; 2s in a mix, whose probes must wait out a
    /// bloated queue to measure it.
    #[arg(long, value_parser = duration, value_name = "DURATION")]
    pub rr_timeout: Option<Duration>,
    /// SO_BUSY_POLL on data sockets, both ends: a receive spins this many µs on
    /// the device queue before sleeping (NICs with NAPI only; not loopback or veth).
    #[arg(long, value_name = "USEC")]
    pub busy_poll: Option<u32>,
    /// tcp_stream, tcp_maerts, tcp_bidir: send with MSG_ZEROCOPY (SO_ZEROCOPY)
    /// on the sending end(s), from a ring of 16 buffers of --send-size that
    /// are reused once the kernel reports their completion. Over loopback and
    /// veth the kernel copies anyway on delivery, which makes sends slower, not
    /// faster; the result counts the sends, completions and copies.
    #[arg(long)]
    pub zerocopy: bool,
    /// udp_stream, unpaced: the sender hands the kernel up to 64 datagrams
    /// per send (UDP_SEGMENT, GSO) and the receiver takes them coalesced
    /// (UDP_GRO), counting datagrams by the segment size. Never the default:
    /// it measures the kernel's GSO/GRO path, where datagrams are split and
    /// merged in bulk, not one datagram per packet through the stack.
    #[arg(long)]
    pub gso: bool,
    /// I/O driver of the worker threads, both ends: auto (blocking for a
    /// thread with one flow; uring for a thread with 4 or more tcp_rr or
    /// udp_rr flows where the kernel has it; epoll otherwise), epoll, or uring (io_uring:
    /// multishot receive and queued sends for tcp_rr/udp_rr; connect, accept,
    /// receive, send and close as ring operations for tcp_crr/tcp_cc; multishot
    /// poll for the rest; falls back to epoll where unavailable).
    #[arg(long, default_value = "auto", value_parser = ["auto", "epoll", "uring"], value_name = "DRIVER")]
    pub driver: String,
    /// tcp_crr, tcp_cc: how the client ends each connection. fin: the server
    /// closes first once it has answered and the client closes on its FIN
    /// (graceful; TIME_WAIT on the server, as netperf's TCP_CRR). rst: the
    /// client aborts with SO_LINGER 0 (a reset) as soon as it has the
    /// response (crr) or the server's FIN (cc): no TIME_WAIT on either end,
    /// two packets fewer per connection (neper tcp_crr's default).
    #[arg(long, default_value = "fin", value_parser = ["fin", "rst"], value_name = "MODE")]
    pub close: String,
    /// Pin local worker threads to these CPUs, round-robin (0,2-3).
    #[arg(long, value_parser = cpu_list_arg, value_name = "LIST")]
    pub cpu_pin: Option<CpuList>,
    /// Pin the server's worker threads to these CPUs.
    #[arg(long, value_parser = cpu_list_arg, value_name = "LIST")]
    pub remote_cpu_pin: Option<CpuList>,
    /// Use IPv4 only.
    #[arg(short = '4', conflicts_with = "ipv6")]
    pub ipv4: bool,
    /// Use IPv6 only.
    #[arg(short = '6')]
    pub ipv6: bool,
    /// Local address for the control and data connections.
    #[arg(long, value_name = "ADDR")]
    pub bind: Option<IpAddr>,
    /// Prove this pre-shared key to the server (HMAC-SHA256 challenge-response); the file holds 16..=4096 bytes.
    #[arg(long, value_name = "FILE")]
    pub psk_file: Option<PathBuf>,
    /// Interim sample period.
    #[arg(short = 'i', long, default_value = "1s", value_parser = duration, value_name = "DURATION")]
    pub interval: Duration,
    /// Traffic before the measurement window (default 1s; none with -n).
    #[arg(long, value_parser = duration, value_name = "DURATION")]
    pub warmup: Option<Duration>,
    /// Traffic after the measurement window, before the drain.
    #[arg(long, default_value = "0s", value_parser = duration, value_name = "DURATION")]
    pub cooldown: Duration,
    /// Latency percentiles to report besides p50, p90, p99 and p99.9 (50,99.99; each in (0, 100]).
    #[arg(long, value_parser = percentile_list, value_name = "LIST")]
    pub percentiles: Option<PercentileList>,
    /// Print a log-scale latency histogram (human output; the JSON always carries the histogram).
    #[arg(long)]
    pub histogram: bool,
    /// Show this end's CPU utilisation and service demand (always measured; always in JSON).
    #[arg(short = 'c', long)]
    pub local_cpu: bool,
    /// Show the server's CPU utilisation and service demand.
    #[arg(short = 'C', long)]
    pub remote_cpu: bool,
    /// Show CPU utilisation and service demand of both ends (-c and -C).
    #[arg(long)]
    pub cpu: bool,
    /// Repeat the whole test at least MIN and at most MAX times (1..=30), until --confidence is met.
    #[arg(long, value_parser = iterations_arg, value_name = "MIN,MAX")]
    pub iterations: Option<(u32, u32)>,
    /// Confidence LEVEL (95 or 99) and interval WIDTH in percent of the mean (default 5: ±2.5 %).
    #[arg(long, value_parser = confidence_arg, value_name = "LEVEL[,WIDTH]")]
    pub confidence: Option<(u32, f64)>,
    /// Print provenance (versions, kernel, interface, offloads, sysctls) above the result.
    #[arg(short = 'v', long)]
    pub verbose: bool,
    #[command(flatten)]
    pub out: OutputArgs,
}

/// A list of latency percentiles as one flag value.
#[derive(Clone, Debug, PartialEq)]
pub struct PercentileList(pub Vec<f64>);

fn percentile_list(s: &str) -> Result<PercentileList, String> {
    let v = s
        .split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|p| {
            let x: f64 = p.trim().parse().map_err(|_| {
                format!("'{p}' is not a percentile (accepted: numbers in (0, 100], as in 50,99.9)")
            })?;
            if x.is_finite() && x > 0.0 && x <= 100.0 {
                Ok(x)
            } else {
                Err(format!(
                    "{p} is out of range (accepted: greater than 0 and at most 100)"
                ))
            }
        })
        .collect::<Result<Vec<f64>, String>>()?;
    if v.is_empty() {
        return Err("empty list (accepted: numbers in (0, 100], as in 50,99.9)".into());
    }
    Ok(PercentileList(v))
}

/// Most iterations netperf allows too.
pub const MAX_ITERATIONS: u32 = 30;

fn iterations_arg(s: &str) -> Result<(u32, u32), String> {
    let num = |x: &str| {
        x.trim().parse::<u32>().map_err(|_| {
            format!(
                "'{x}' is not a count (accepted: MIN,MAX with 1 <= MIN <= MAX <= {MAX_ITERATIONS})"
            )
        })
    };
    let (min, max) = match s.split_once(',') {
        Some((a, b)) => (num(a)?, num(b)?),
        None => {
            let n = num(s)?;
            (n, n)
        }
    };
    if min < 1 || min > max || max > MAX_ITERATIONS {
        return Err(format!(
            "{min},{max} is out of range (accepted: MIN,MAX with 1 <= MIN <= MAX <= {MAX_ITERATIONS})"
        ));
    }
    Ok((min, max))
}

fn confidence_arg(s: &str) -> Result<(u32, f64), String> {
    let (level, width) = match s.split_once(',') {
        Some((a, b)) => (a, Some(b)),
        None => (s, None),
    };
    let level: u32 = match level.trim() {
        "95" => 95,
        "99" => 99,
        other => {
            return Err(format!(
                "level '{other}' is not supported (accepted: 95 or 99)"
            ));
        }
    };
    let width = match width {
        None => 5.0,
        Some(w) => {
            let w: f64 = w.trim().trim_end_matches('%').parse().map_err(|_| {
                format!("width '{w}' is not a number (accepted: a percentage in (0, 100])")
            })?;
            if !(w.is_finite() && w > 0.0 && w <= 100.0) {
                return Err(format!(
                    "width {w} is out of range (accepted: a percentage in (0, 100])"
                ));
            }
            w
        }
    };
    Ok((level, width))
}

fn ns(d: Duration) -> u64 {
    d.as_nanos().min(u64::MAX as u128) as u64
}

impl RunArgs {
    /// The mix's SPEC: `--mix`, or the preset named as the test; None for a single test.
    pub fn mix_spec(&self) -> Option<&str> {
        self.mix.as_deref().or_else(|| {
            let name = self.test.as_deref()?;
            crate::plan::mix::preset(name).map(|p| p.spec)
        })
    }

    pub fn to_plan(&self) -> Result<TestPlan> {
        let parts = match self.mix_spec() {
            Some(spec) => crate::plan::mix::parse_spec(spec)?,
            None => Vec::new(),
        };
        let test: TestKind = match parts.first() {
            Some(first) => first.test,
            None => self.test.as_deref().unwrap_or_default().parse()?,
        };
        let mut p = TestPlan::new(test);
        p.flows = self.flows;
        p.threads = self.threads;
        p.duration_ns = ns(self.duration);
        p.transactions = self.transactions;
        p.warmup_ns = match (self.warmup, self.transactions) {
            (Some(w), _) => ns(w),
            (None, Some(_)) => 0,
            (None, None) => 1_000_000_000,
        };
        p.cooldown_ns = ns(self.cooldown);
        p.interval_ns = ns(self.interval);
        (p.request_bytes, p.response_bytes) = self.rr_size;
        p.burst = self.burst;
        if let Some(m) = self.send_size {
            p.send_bytes = m;
        }
        p.recv_bytes = self.recv_size;
        p.nodelay = self.nodelay;
        p.congestion = self.cc.clone();
        p.mss = self.mss;
        p.pacing_rate_bps = self.pacing_rate;
        // One flag, the test's own unit: payload bits/s for udp_stream,
        // transactions/s for the request/response tests.
        if p.test.traits().rate == crate::plan::Rate::Transactions {
            p.offered_per_s = self.rate;
        } else {
            p.rate_bps = self.rate;
        }
        if self.both {
            // Each direction gets the flows and threads asked for.
            p.direction = crate::plan::Direction::Both;
            p.flows = self.flows.saturating_mul(2);
            p.threads = self.threads.saturating_mul(2);
        } else if self.reverse {
            p.direction = crate::plan::Direction::Reverse;
        }
        p.arrivals = self.arrivals.parse()?;
        p.max_inflight = self.max_inflight;
        p.call_times = self.call_times;
        if let Some(t) = self.rr_timeout {
            p.rr_timeout_ns = ns(t);
        }
        p.busy_poll_us = self.busy_poll;
        p.zerocopy = self.zerocopy;
        p.gso = self.gso;
        p.driver = self.driver.parse().expect("clap checked the driver name");
        p.close = self.close.parse().expect("clap checked the close mode");
        let side = |buf: Option<(u64, u64)>, pin: &Option<CpuList>| SocketOpts {
            send_buffer_bytes: buf.map(|b| b.0),
            recv_buffer_bytes: buf.map(|b| b.1),
            cpu_pin: pin.as_ref().map(|c| c.0.clone()).unwrap_or_default(),
        };
        p.local = side(self.local_buffer, &self.cpu_pin);
        p.remote = side(self.remote_buffer, &self.remote_cpu_pin);
        p.percentiles = self
            .percentiles
            .as_ref()
            .map(|l| l.0.clone())
            .unwrap_or_default();
        p.tos = match &self.tos {
            Some(t) => Some(parse_tos(t)?),
            None => None,
        };
        if !parts.is_empty() {
            // -F, -T and --rate belong to a single test; a mix says them per part.
            if self.flows != 1
                || self.threads != 1
                || self.rate.is_some()
                || self.transactions.is_some()
                || self.send_size.is_some()
            {
                bail!(
                    "--flows, --threads, --rate, --transactions and --send-size do not apply to a mix: give each part its flows as TEST*N and its rate as @rate=N (each part sends its test's default sizes)"
                );
            }
            p.flows = parts.iter().map(|x| x.flows).sum();
            p.threads = 1;
            p.parts = parts;
            p.idle_ns = ns(self.idle);
            p.recovery_ns = ns(self.recovery);
            // A udp_rr probe behind a bloated queue must wait it out to
            // measure it: at the single-test default (50 ms) every probe
            // behind 200 ms of buffer would count as lost, and the
            // histogram keep only the lucky ones. A --rr-timeout given,
            // whatever its value, is kept.
            if self.rr_timeout.is_none() {
                p.rr_timeout_ns = MIX_RR_TIMEOUT_NS;
            }
        }
        p.validate()?;
        Ok(p)
    }

    /// The repetition asked for with --iterations and/or --confidence
    /// (netperf's defaults fill the other: 3,10 and 99,5).
    pub fn repeat(&self) -> Option<crate::control::repeat::Repeat> {
        if self.iterations.is_none() && self.confidence.is_none() {
            return None;
        }
        let (min, max) = self.iterations.unwrap_or((3, 10));
        let (level, width_percent) = self.confidence.unwrap_or((99, 5.0));
        Some(crate::control::repeat::Repeat {
            min,
            max,
            level,
            width_percent,
        })
    }

    /// What the human output shows beyond the defaults.
    pub fn human_options(&self) -> crate::export::human::Human {
        crate::export::human::Human {
            histogram: self.histogram,
            local_cpu: self.local_cpu || self.cpu,
            remote_cpu: self.remote_cpu || self.cpu,
            verbose: self.verbose,
            rows_shown: false,
        }
    }

    /// The server to use; None means start an embedded one.
    pub fn target(&self) -> Result<Option<Target>> {
        let Some(host) = &self.host else {
            if self.psk_file.is_some() {
                bail!("--psk-file needs -H: the embedded server asks for no key");
            }
            return Ok(None);
        };
        let addr = resolve(host, self.ipv4, self.ipv6)?;
        let psk = match &self.psk_file {
            Some(p) => Some(crate::control::auth::Psk::from_file(p)?),
            None => None,
        };
        Ok(Some(Target {
            addr,
            label: host.clone(),
            bind: self.bind,
            embedded: false,
            psk,
        }))
    }
}

/// A mix's `--rr-timeout` unless one is given: 2 s.
const MIX_RR_TIMEOUT_NS: u64 = 2_000_000_000;

/// `--tos`: a DSCP name or a TOS byte 0..=255.
fn parse_tos(s: &str) -> Result<u8> {
    if let Ok(n) = s.parse::<u16>() {
        return u8::try_from(n).map_err(|_| {
            anyhow::anyhow!(
                "--tos {s} is out of range (accepted: 0..=255, or a DSCP name as EF, CS5, AF41)"
            )
        });
    }
    crate::plan::mix::dscp_tos(s).map_err(|e| anyhow::anyhow!("--tos: {e}"))
}

/// What a user of netperf or iperf3 meant by a flag thrum does not have,
/// said after clap's error. Hints, not aliases: `-P` or `-R` meaning
/// something here would make a typo run the wrong test.
pub fn foreign_hint(args: &[String], kind: clap::error::ErrorKind) -> Option<String> {
    use clap::error::ErrorKind::{InvalidSubcommand, UnknownArgument};
    if !matches!(kind, UnknownArgument | InvalidSubcommand) {
        return None;
    }
    let run = args.iter().position(|a| a == "run")?;
    let rest = &args[run + 1..];
    let value_after = |flag: &str| {
        rest.iter().enumerate().find_map(|(i, a)| {
            if a == flag {
                rest.get(i + 1).cloned()
            } else {
                a.strip_prefix(flag)
                    .filter(|v| !v.is_empty())
                    .map(|v| v.trim_start_matches('=').to_string())
            }
        })
    };
    let has = |flag: &str| rest.iter().any(|a| a == flag);
    if let Some(test) = value_after("-t") {
        let test = crate::text::echo(&test);
        return Some(format!(
            "the test is positional, not -t (netperf's): thrum run {test}"
        ));
    }
    if let Some(n) = value_after("-P") {
        let n = crate::text::echo(&n);
        return Some(format!(
            "parallel streams are flows here: -F {n} (iperf3's -P)"
        ));
    }
    if has("-R") {
        return Some(
            "iperf3's -R (the server sends) is its own test here: thrum run tcp_maerts".into(),
        );
    }
    if has("-J") {
        return Some("JSON output is --json here (iperf3's -J)".into());
    }
    if let Some(f) = value_after("--json").filter(|v| !v.starts_with('-')) {
        let f = crate::text::echo(&f);
        return Some(format!(
            "--json is a switch (JSON on standard output); for a file beside the terminal output: --export-json {f}"
        ));
    }
    if let Some(p) = value_after("-p") {
        let p = crate::text::echo(&p);
        return Some(format!(
            "the server's port goes with its host: -H HOST:{p} ([ADDRESS]:{p} for IPv6)"
        ));
    }
    None
}

/// Split `host`, `host:port`, `[v6]:port` or a bare IPv6 address.
pub fn split_host_port(s: &str) -> Result<(String, u16)> {
    if let Some(rest) = s.strip_prefix('[') {
        let (h, tail) = rest
            .split_once(']')
            .context("-H: missing ']' after an IPv6 address")?;
        let port = match tail.strip_prefix(':') {
            Some(p) => p
                .parse()
                .with_context(|| format!("-H: '{p}' is not a port (accepted: 1..=65535)"))?,
            None if tail.is_empty() => DEFAULT_PORT,
            None => bail!("-H: unexpected '{tail}' after ']'"),
        };
        return Ok((h.to_string(), port));
    }
    if s.matches(':').count() > 1 {
        if s.parse::<std::net::Ipv6Addr>().is_err() {
            bail!(
                "-H: '{}' is not an IPv6 address; an IPv6 address with a port is written [ADDRESS]:PORT, as [::1]:{DEFAULT_PORT}",
                crate::text::echo(s)
            );
        }
        return Ok((s.to_string(), DEFAULT_PORT));
    }
    match s.split_once(':') {
        Some((h, p)) => Ok((
            h.to_string(),
            p.parse()
                .with_context(|| format!("-H: '{p}' is not a port (accepted: 1..=65535)"))?,
        )),
        None => Ok((s.to_string(), DEFAULT_PORT)),
    }
}

/// A bare IPv6 address whose last group could be a port (`fe80::1:5201`):
/// it is read as an address on the default port, so when the run fails
/// the user is told how to write a port.
pub fn ipv6_port_hint(host: &str) -> Option<String> {
    if host.starts_with('[') || host.matches(':').count() < 2 {
        return None;
    }
    let (addr, last) = host.rsplit_once(':')?;
    let addr = addr.strip_suffix(':').unwrap_or(addr);
    let port: u16 = last.parse().ok().filter(|p| *p > 0)?;
    addr.parse::<std::net::Ipv6Addr>().ok()?;
    Some(format!(
        "-H {host} was read as the IPv6 address {host} on port {DEFAULT_PORT}; for port {port} of {addr} write -H [{addr}]:{port}"
    ))
}

pub fn resolve(host: &str, v4: bool, v6: bool) -> Result<SocketAddr> {
    let (h, port) = split_host_port(host)?;
    if port == 0 {
        bail!("-H: port 0 is not a server port (accepted: 1..=65535)");
    }
    let addrs: Vec<SocketAddr> = (h.as_str(), port)
        .to_socket_addrs()
        .with_context(|| format!("-H: cannot resolve '{h}'"))?
        .filter(|a| (!v4 || a.is_ipv4()) && (!v6 || a.is_ipv6()))
        .collect();
    addrs.first().copied().with_context(|| {
        format!(
            "-H: '{h}' has no {} address",
            if v4 { "IPv4" } else { "IPv6" }
        )
    })
}

#[derive(Debug, Args)]
pub struct ServerArgs {
    /// Control port.
    #[arg(short = 'p', long, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Address to listen on (:: listens on IPv6 and IPv4).
    #[arg(long, default_value = "::", value_name = "ADDR")]
    pub listen: IpAddr,
    /// The data listener and UDP flow sockets take ports from this range, for firewalls (LO-HI).
    #[arg(long, value_parser = port_range, value_name = "LO-HI")]
    pub data_ports: Option<(u16, u16)>,
    /// Serve one test, then exit.
    #[arg(long)]
    pub once: bool,
    /// Sessions served at once; more are refused as busy.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub max_sessions: u32,
    #[command(flatten)]
    pub hardening: hardening::HardeningArgs,
    /// Do not log sessions to stderr.
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

fn port_range(s: &str) -> Result<(u16, u16), String> {
    let (a, b) = s
        .split_once('-')
        .ok_or("expected LO-HI, e.g. 20000-20100")?;
    let p = |x: &str| {
        x.parse::<u16>()
            .map_err(|_| format!("'{x}' is not a port (accepted: 1..=65535)"))
    };
    let (a, b) = (p(a)?, p(b)?);
    if a == 0 || a > b {
        return Err(format!(
            "'{s}' is not a range LO-HI with 1 <= LO <= HI <= 65535"
        ));
    }
    Ok((a, b))
}

#[derive(Debug, Args)]
pub struct SuiteArgs {
    /// Measurement window of each test.
    #[arg(short = 'l', long, default_value = "3s", value_parser = duration, value_name = "DURATION")]
    pub duration: Duration,
    /// Flows per test.
    #[arg(short = 'F', long, default_value_t = 1)]
    pub flows: u32,
    /// Worker threads per end.
    #[arg(short = 'T', long, default_value_t = 1)]
    pub threads: u32,
    /// Print the results as a JSON array of thrum.result.v1 documents.
    #[arg(long)]
    pub json: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_forms() {
        assert_eq!(split_host_port("a").unwrap(), ("a".into(), DEFAULT_PORT));
        assert_eq!(split_host_port("a:99").unwrap(), ("a".into(), 99));
        assert_eq!(split_host_port("[::1]:99").unwrap(), ("::1".into(), 99));
        assert_eq!(
            split_host_port("::1").unwrap(),
            ("::1".into(), DEFAULT_PORT)
        );
        assert!(split_host_port("a:x").is_err());
        let e = split_host_port("::1:99999").unwrap_err().to_string();
        assert!(e.contains("[ADDRESS]:PORT"), "{e}");
        assert!(
            ipv6_port_hint("fe80::1:5201")
                .unwrap()
                .contains("[fe80::1]:5201")
        );
        assert!(ipv6_port_hint("::1:5201").unwrap().contains("[::1]:5201"));
        assert_eq!(ipv6_port_hint("[::1]:5201"), None);
        assert_eq!(ipv6_port_hint("host:5201"), None);
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(cpu_list("0,2-4").unwrap(), vec![0, 2, 3, 4]);
        assert!(cpu_list("x").is_err());
        assert!(cpu_list("3-1").is_err());
    }

    fn plan_of(args: &[&str]) -> TestPlan {
        let cli = Cli::try_parse_from([&["thrum", "run"][..], args].concat()).unwrap();
        let Command::Run(run) = cli.command else {
            panic!("not a run")
        };
        run.to_plan().unwrap()
    }

    /// A mix waits 2 s for a udp_rr response unless --rr-timeout is given;
    /// one given is kept even when it is the single test's default (it was
    /// taken for "not given" and turned into 2 s).
    #[test]
    fn a_mix_keeps_an_explicit_rr_timeout() {
        let ms = |n: u64| n * 1_000_000;
        assert_eq!(plan_of(&["udp_rr"]).rr_timeout_ns, ms(50));
        assert_eq!(plan_of(&["rrul"]).rr_timeout_ns, MIX_RR_TIMEOUT_NS);
        assert_eq!(
            plan_of(&["rrul", "--rr-timeout", "50ms"]).rr_timeout_ns,
            ms(50)
        );
        assert_eq!(
            plan_of(&["--mix", "udp_rr@rate=10", "--rr-timeout", "300ms"]).rr_timeout_ns,
            ms(300)
        );
        assert_eq!(
            plan_of(&["udp_rr", "--rr-timeout", "1s"]).rr_timeout_ns,
            ms(1000)
        );
    }

    #[test]
    fn pairs() {
        assert_eq!(size_pair("1,64K").unwrap(), (1, 65536));
        assert_eq!(size_pair("1k").unwrap(), (1000, 1000));
    }

    /// What completions offer as TEST: every test for `run` and `sweep`,
    /// and the presets for `run` alone (a sweep of a mix is not a thing).
    #[test]
    fn test_names_offered_to_completions() {
        use clap::CommandFactory;
        let offered = |sub: &str| -> Vec<String> {
            let cmd = Cli::command();
            let arg = cmd
                .find_subcommand(sub)
                .unwrap()
                .get_positionals()
                .find(|a| a.get_id() == "test")
                .unwrap()
                .clone();
            arg.get_possible_values()
                .iter()
                .map(|v| v.get_name().to_string())
                .collect()
        };
        let tests: Vec<String> = TestKind::ALL.iter().map(|t| t.name().into()).collect();
        let mut with_presets = tests.clone();
        with_presets.extend(["rrul", "rrul_be", "upload", "download"].map(String::from));
        assert_eq!(offered("run"), with_presets);
        assert_eq!(offered("sweep"), tests);
    }
}
