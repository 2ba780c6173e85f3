//! `thrum run`'s flags ([`RunArgs`]) and the plain [`RunRequest`] they
//! become at the top of `cmd::run`: the checked [`TestPlan`], the server,
//! the outputs and drawings, the repetition, what the human output shows,
//! the results store and the baseline. After [`RunArgs::to_request`]
//! nothing reads a clap type.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;

use super::{LoadArgs, OutputArgs, Outputs, StoreRequest, TestName, duration, ns, resolve};
use crate::control::client::Target;
use crate::control::repeat::Repeat;
use crate::export::human::Human;
use crate::plan::{TestKind, TestPlan};
use crate::store::compare::Baseline;

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The test (default tcp_stream) or a preset mix (rrul, …).
    ///
    /// tcp_stream, tcp_maerts, tcp_bidir, tcp_rr, tcp_crr, tcp_cc, udp_stream, udp_rr or capacity (netperf's TCP_RR etc. also accepted); or a preset mix: rrul, rrul_be, upload, download (see --dry-run). Absent: tcp_stream, as netperf without -t runs TCP_STREAM.
    #[arg(value_name = "TEST", value_parser = TestName::TEST_OR_PRESET, hide_possible_values = true, conflicts_with = "mix")]
    pub test: Option<String>,
    /// Server as HOST[:PORT]; absent: an embedded one on loopback.
    ///
    /// Server as HOST or HOST:PORT ([v6]:PORT); absent: an embedded server on loopback.
    #[arg(short = 'H', long, value_name = "HOST[:PORT]")]
    #[arg(help_heading = super::heading::TARGET)]
    pub host: Option<String>,
    /// Length of the measurement window (0: until Ctrl-C).
    ///
    /// Length of the measurement window (10s, 500ms, 2m, 1h30m). 0 (netperf's -l 0): until Ctrl-C stops it, or at most what a server allows a test by default (an hour, warm-up and cool-down included); the result covers the window until the stop.
    #[arg(short = 'l', long, default_value = "10s", value_parser = duration, value_name = "DURATION")]
    #[arg(help_heading = super::heading::TARGET)]
    pub duration: Duration,
    /// Measure this many transactions instead of a duration.
    ///
    /// Measure this many transactions instead of a duration (tcp_rr, tcp_crr, tcp_cc, udp_rr).
    #[arg(short = 'n', long, value_name = "N")]
    #[arg(help_heading = super::heading::TARGET)]
    pub transactions: Option<u64>,
    /// Send exactly SIZE bytes instead of for a duration (iperf3's -n).
    ///
    /// tcp_stream, tcp_maerts, tcp_bidir, udp_stream: the sender sends exactly SIZE bytes of payload in all (tcp_bidir: each way), the flows' shares equal to a byte (the first SIZE mod --flows flows one byte more), and the window ends when the last byte has arrived (udp_stream: has been sent; its last datagram carries what is left); the rates are over the time that took. SIZE as the other sizes: 200M = 200 MiB = 209715200 bytes, 200m = 200000000. No warm-up or cool-down.
    #[arg(long, value_parser = super::size, value_name = "SIZE", conflicts_with_all = ["duration", "transactions"])]
    #[arg(help_heading = super::heading::TARGET)]
    pub bytes: Option<u64>,
    /// Interim sample period.
    #[arg(short = 'i', long, default_value = "1s", value_parser = duration, value_name = "DURATION")]
    #[arg(help_heading = super::heading::TARGET)]
    pub interval: Duration,
    /// Traffic before the measurement window (default 1s; none with -n).
    #[arg(long, value_parser = duration, value_name = "DURATION")]
    #[arg(help_heading = super::heading::TARGET)]
    pub warmup: Option<Duration>,
    /// Traffic after the measurement window, before the drain.
    #[arg(long, default_value = "0s", value_parser = duration, value_name = "DURATION")]
    #[arg(help_heading = super::heading::TARGET)]
    pub cooldown: Duration,
    /// Hard limit on the whole run; past it the run ends with an error.
    ///
    /// Hard limit on the whole run, client side (neper's -s): set-up,
    /// warm-up, measurement, cool-down, drain and every --iterations run.
    /// Past it the run stops as Ctrl-C stops it, writes what was measured
    /// until then and exits 1 with an error naming --timeout; a run that
    /// cannot stop within 10s more exits at once. Default: no limit.
    #[arg(long, value_parser = duration, value_name = "DURATION")]
    #[arg(help_heading = super::heading::TARGET)]
    pub timeout: Option<Duration>,
    /// Wait up to DURATION for the server to accept, retrying.
    ///
    /// A client started before its server (a script starting both at
    /// once): while the server refuses the control connection, try again
    /// every 200 ms for up to DURATION instead of failing at once (neper's
    /// habit). A refused connection never reaches the server, so a server
    /// started with --once is not used up by the waiting. Needs -H; not
    /// with --from, whose agents start at one instant.
    #[arg(
        long,
        value_parser = duration,
        value_name = "DURATION",
        requires = "host",
        conflicts_with_all = ["from", "from_file", "from_dns"]
    )]
    #[arg(help_heading = super::heading::TARGET)]
    pub wait_server: Option<Duration>,
    /// Use IPv4 only.
    #[arg(short = '4', conflicts_with = "ipv6")]
    #[arg(help_heading = super::heading::TARGET)]
    pub ipv4: bool,
    /// Use IPv6 only.
    #[arg(short = '6')]
    #[arg(help_heading = super::heading::TARGET)]
    pub ipv6: bool,
    /// Local address for the control and data connections.
    #[arg(long, value_name = "ADDR")]
    #[arg(help_heading = super::heading::TARGET)]
    pub bind: Option<IpAddr>,
    /// Run the test from these agents toward -H, all started at once.
    ///
    /// Run the test from each of these agents toward the server -H, all started at one instant: HOST[:PORT],... (port 12880 by default), each a `thrum server --agent --psk-file FILE`. Every agent runs the whole plan (-F and -T are per agent); the result adds them up (summary.clients, summary.fairness_jain, each agent's clock offset in clock[]), and the human output prints a row per agent and their sum every interval. Needs --psk-file: the agents' key, also proved to the target when it asks for one. See docs/fleet.md.
    #[arg(long, value_name = "HOST[:PORT],...", conflicts_with_all = ["from_file", "from_dns"])]
    #[arg(help_heading = super::heading::TARGET)]
    pub from: Option<String>,
    /// File of agents for --from: one HOST[:PORT] per line.
    ///
    /// File of agents for --from: one HOST[:PORT] per line, or netperf's remote_hosts form (REMOTE_HOSTS[0]=lg1, NUM_REMOTE_HOSTS=2), read as data, as agg's --hosts-file.
    #[arg(long, value_name = "FILE", conflicts_with = "from_dns")]
    #[arg(help_heading = super::heading::TARGET)]
    pub from_file: Option<PathBuf>,
    /// Every address of NAME[:PORT] as an agent, for --from.
    ///
    /// Every address NAME[:PORT] resolves to as an agent (A and AAAA; a Kubernetes headless Service names every ready pod), as agg's --hosts-dns.
    #[arg(long, value_name = "NAME[:PORT]")]
    #[arg(help_heading = super::heading::TARGET)]
    pub from_dns: Option<String>,
    /// Prove this pre-shared key (FILE) to the server.
    ///
    /// Prove this pre-shared key to the server (HMAC-SHA256 challenge-response); the file holds 16..=4096 bytes.
    #[arg(long, value_name = "FILE")]
    #[arg(help_heading = super::heading::TARGET)]
    pub psk_file: Option<PathBuf>,
    #[command(flatten)]
    pub load: LoadArgs,
    /// Several tests in one session: TEST[*FLOWS][@rate=N…],….
    ///
    /// Several tests in one session, as parts joined by commas. A part is
    /// TEST, then optionally *FLOWS and any of @rate=N @dscp=NAME @tos=N
    /// @name=LABEL, e.g. tcp_stream*4,udp_rr@rate=100 (see
    /// docs/latency-under-load.md).
    #[arg(long, value_name = "SPEC")]
    #[arg(help_heading = super::heading::MIX)]
    pub mix: Option<String>,
    /// A mix: the probes alone this long before the bulk parts.
    ///
    /// A mix with latency probes and bulk parts: the probes run alone this long at the start of the measurement window (the idle phase), before the bulk parts start; 0 with --recovery 0: no phases.
    #[arg(long, default_value = "5s", value_parser = duration, value_name = "DURATION")]
    #[arg(help_heading = super::heading::MIX)]
    pub idle: Duration,
    /// A mix: the probes alone this long after the bulk parts.
    ///
    /// A mix with latency probes and bulk parts: the probes run on alone this long after the bulk parts have drained (the recovery phase).
    #[arg(long, default_value = "5s", value_parser = duration, value_name = "DURATION")]
    #[arg(help_heading = super::heading::MIX)]
    pub recovery: Duration,
    /// Print the checked plan and its run time, and exit without running.
    ///
    /// Print the checked plan (a preset's or --mix's SPEC and its parts,
    /// then every field of the plan as key=value) and its total run time
    /// (warm-up, measurement and cool-down, times the --iterations), and
    /// exit 0 without connecting (neper's --dry-run).
    #[arg(long)]
    #[arg(help_heading = super::heading::MIX)]
    pub dry_run: bool,
    /// DSCP name or TOS byte on the data sockets, both ends.
    ///
    /// DSCP/TOS mark on the data sockets, both ends: a DSCP name (EF, CS5, AF41, BE, BK) or the TOS byte 0..255 (IP_TOS, IPV6_TCLASS).
    #[arg(long, value_name = "DSCP|TOS", value_parser = super::Offered::DSCP, hide_possible_values = true)]
    #[arg(help_heading = super::heading::SOCKETS)]
    pub tos: Option<String>,
    /// capacity: the server-to-client direction.
    ///
    /// capacity: the server sends the trains and the client times them, for
    /// the server-to-client direction's narrow link (default: client to
    /// server).
    #[arg(long, conflicts_with = "both")]
    #[arg(help_heading = super::heading::LOAD)]
    pub reverse: bool,
    /// capacity: both directions, reported apart.
    ///
    /// capacity: both directions in one session, each on its own flows
    /// (--flows and --threads are per direction) and reported apart.
    #[arg(long)]
    #[arg(help_heading = super::heading::LOAD)]
    pub both: bool,
    /// udp_rr, tcp_rr and a mix's probes: the way up and the way down apart.
    ///
    /// udp_rr, tcp_rr: each request carries its send time, the server stamps its arrival and the response's departure (CLOCK_MONOTONIC, read in user space), and the client measures the server's clock offset before and after the run (clock exchanges over the control connection, the fastest third; exact where both ends share one kernel) and between them from each interval's fastest transactions (those of an interval whose fastest path is near the run's fastest: one behind a queue is reported and left out), and reports the way up and the way down as percentiles with the offset's error bound beside them (summary.owd_ns), and each interval's p50s in its row. Requests and responses are raised to 16 and 32 bytes at least (-r), to carry the stamps, and udp_rr's --rr-timeout defaults to 2s, to wait out a queue. In a mix (rrul and the other presets, --mix) every part whose test carries the stamps (udp_rr, tcp_rr) gets them on the one clock measured for the session, each its own owd_ns and each phase its ways up and down, and summary.queue_direction says which way the load's queue is (up, down, both or neither: each way's loaded p50 less its idle p50 against 1 ms or a tenth of the idle round trip, plus the clock's bound); a probe whose test carries none runs as without and is named as not measured one way. The server must be this version or later.
    #[arg(long)]
    #[arg(help_heading = super::heading::LOAD)]
    pub one_way: bool,
    /// A diagnostic of --one-way: `exchanges` finds the server's clock
    /// offset by clock exchanges alone even where both ends read one
    /// kernel's clock (whose exact offset then only checks them), to
    /// measure the exchanges' accuracy against it; `auto` (the default)
    /// takes the exact offset where there is one.
    #[arg(long, value_name = "METHOD", hide = true, requires = "one_way")]
    #[arg(value_parser = ["auto", "exchanges"])]
    pub clock_method: Option<String>,
    /// Write a chart as SVG to FILE (a mix, or capacity).
    ///
    /// Write a chart as SVG to FILE. A mix: the time series as flent's all_scaled (download, upload and probe latency in stacked panels on one time axis, phases shaded). capacity: the histogram of the trains' gaps as rates, with the estimate, its interval and any token bucket marked.
    #[arg(long, value_name = "FILE")]
    #[arg(help_heading = super::heading::OUTPUT)]
    pub chart: Option<std::path::PathBuf>,
    /// A mix: write a self-contained HTML report to FILE.
    ///
    /// A mix: write a self-contained HTML report (grades, parts, phases, the chart, every interval's goodput, probe latency, fairness and retransmits) to FILE.
    #[arg(long, value_name = "FILE")]
    #[arg(help_heading = super::heading::OUTPUT)]
    pub html: Option<std::path::PathBuf>,
    /// More latency percentiles to report (50,99.99).
    ///
    /// Latency percentiles to report besides p50, p90, p99 and p99.9 (50,99.99; each in (0, 100]).
    #[arg(long, value_parser = percentile_list, value_name = "LIST")]
    #[arg(help_heading = super::heading::OUTPUT)]
    pub percentiles: Option<PercentileList>,
    /// Print a log-scale latency histogram.
    ///
    /// Print a log-scale latency histogram (human output; the JSON always carries the histogram).
    #[arg(long)]
    #[arg(help_heading = super::heading::OUTPUT)]
    pub histogram: bool,
    /// Show this end's CPU utilisation and service demand.
    ///
    /// Show this end's CPU utilisation and service demand (always measured; always in JSON).
    #[arg(short = 'c', long)]
    #[arg(help_heading = super::heading::OUTPUT)]
    pub local_cpu: bool,
    /// Show the server's CPU utilisation and service demand.
    #[arg(short = 'C', long)]
    #[arg(help_heading = super::heading::OUTPUT)]
    pub remote_cpu: bool,
    /// Show CPU utilisation and service demand of both ends (-c and -C).
    #[arg(long)]
    #[arg(help_heading = super::heading::OUTPUT)]
    pub cpu: bool,
    /// Repeat the test MIN..MAX times until --confidence is met.
    ///
    /// Repeat the whole test at least MIN and at most MAX times (1..=30), until --confidence is met. netperf's order (-i MAX,MIN: the larger first) is taken too, with a tip.
    #[arg(long, value_parser = iterations_arg, value_name = "MIN,MAX")]
    #[arg(help_heading = super::heading::REPETITION)]
    pub iterations: Option<Iterations>,
    /// Confidence LEVEL (95, 99) and interval WIDTH in % of the mean.
    ///
    /// Confidence LEVEL (95 or 99) and interval WIDTH in percent of the mean (default 5: ±2.5 %).
    #[arg(long, value_parser = confidence_arg, value_name = "LEVEL[,WIDTH]")]
    #[arg(help_heading = super::heading::REPETITION)]
    pub confidence: Option<(u32, f64)>,
    /// Start each interval row with the wall-clock time (iperf3's).
    ///
    /// Start each interval row of the human output with the wall-clock time its interval ended, in strftime(3) FORMAT (--timestamps='%H:%M:%S'); without one, the local date and time to the millisecond (iperf3's --timestamps[=FORMAT]). The JSON has it always: intervals[].unix_end_s.
    #[arg(long, value_name = "FORMAT", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    #[arg(help_heading = super::heading::OUTPUT)]
    pub timestamps: Option<String>,
    /// Name this run with ID instead of a random UUID (UUID field).
    ///
    /// Name this run with ID (1..=128 printable characters, no spaces) instead of a random version 4 UUID: the result's environment.uuid and the UUID output field (netperf's -u).
    #[arg(long, value_parser = uuid_arg, value_name = "ID")]
    #[arg(help_heading = super::heading::OUTPUT)]
    pub uuid: Option<String>,
    /// A label carried in the result (RESULT_BRAND field).
    ///
    /// A label carried in the result (environment.brand) and printed as the RESULT_BRAND output field (netperf's -B); 1..=256 characters, no control characters.
    #[arg(long, value_parser = brand_arg, value_name = "TEXT")]
    #[arg(help_heading = super::heading::OUTPUT)]
    pub brand: Option<String>,
    /// Print provenance (versions, kernel, interface, …) above the result.
    ///
    /// Print provenance (versions, kernel, interface, offloads, sysctls) above the result.
    #[arg(short = 'v', long)]
    #[arg(help_heading = super::heading::OUTPUT)]
    pub verbose: bool,
    #[command(flatten)]
    pub out: OutputArgs,
    #[command(flatten)]
    pub store: super::StoreArgs,
    #[command(flatten)]
    pub baseline: super::BaselineArgs,
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

fn uuid_arg(s: &str) -> Result<String, String> {
    if s.is_empty() || s.len() > 128 || !s.chars().all(|c| c.is_ascii_graphic()) {
        return Err(format!(
            "'{}' is not an ID (accepted: 1..=128 printable ASCII characters without spaces)",
            crate::text::echo(s)
        ));
    }
    Ok(s.to_string())
}

fn brand_arg(s: &str) -> Result<String, String> {
    if s.is_empty() || s.chars().count() > 256 || s.chars().any(char::is_control) {
        return Err(format!(
            "'{}' is not a label (accepted: 1..=256 characters, no control characters)",
            crate::text::echo(s)
        ));
    }
    Ok(s.to_string())
}

/// `-o THROUGHPUT,MEAN_LATENCY`: an output file named like a list of
/// netperf's selectors (upper case, no directory or extension, every name
/// a field), which a netperf habit meant as `--output-fields`; with `--csv`
/// or `--keyval` also netperf's `-o all`, in either case.
fn selector_list(path: &std::path::Path, fields_out: bool) -> Option<String> {
    let s = path.to_str()?;
    if fields_out && s.eq_ignore_ascii_case(crate::export::fields::ALL) {
        return Some("all".to_string());
    }
    let looks = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_' || c == ',');
    (looks && crate::export::fields::parse_list(s).is_ok()).then(|| s.to_string())
}

/// A random RFC 4122 version 4 UUID, as netperf gives each run.
fn random_uuid() -> String {
    let mut b = [0u8; 16];
    // Without the kernel's randomness a run still needs a name: the time.
    if getrandom::fill(&mut b).is_err() {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        b = (t ^ (u128::from(std::process::id()) << 64)).to_be_bytes();
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// The repetition asked for with --iterations and/or --confidence
/// (netperf's defaults fill the other: 3,10 and 99,5); `run` and `sweep`.
pub fn repeat_of(iterations: Option<(u32, u32)>, confidence: Option<(u32, f64)>) -> Option<Repeat> {
    if iterations.is_none() && confidence.is_none() {
        return None;
    }
    let (min, max) = iterations.unwrap_or((3, 10));
    let (level, width_percent) = confidence.unwrap_or((99, 5.0));
    Some(Repeat {
        min,
        max,
        level,
        width_percent,
    })
}

/// `--iterations MIN,MAX` as a pair, either order (sweep's cells).
pub(super) fn iteration_pair(s: &str) -> Result<(u32, u32), String> {
    iterations_arg(s).map(|i| (i.min, i.max))
}

/// Most iterations netperf allows too.
pub const MAX_ITERATIONS: u32 = 30;

/// `--iterations MIN,MAX` as given: `swapped` when it was written in
/// netperf's order (`-i MAX,MIN`, the larger first).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Iterations {
    pub min: u32,
    pub max: u32,
    pub swapped: bool,
}

pub(super) fn iterations_arg(s: &str) -> Result<Iterations, String> {
    let num = |x: &str| {
        x.trim().parse::<u32>().map_err(|_| {
            format!(
                "'{x}' is not a count (accepted: MIN,MAX with 1 <= MIN <= MAX <= {MAX_ITERATIONS})"
            )
        })
    };
    let (a, b) = match s.split_once(',') {
        Some((a, b)) => (num(a)?, num(b)?),
        None => {
            let n = num(s)?;
            (n, n)
        }
    };
    // netperf's -i is MAX,MIN: the larger first is that order, not an error.
    let (min, max, swapped) = if a > b { (b, a, true) } else { (a, b, false) };
    if min < 1 || max > MAX_ITERATIONS {
        return Err(format!(
            "{a},{b} is out of range (accepted: MIN,MAX with 1 <= MIN <= MAX <= {MAX_ITERATIONS}; netperf's MAX,MIN is read too)"
        ));
    }
    Ok(Iterations { min, max, swapped })
}

pub(super) fn confidence_arg(s: &str) -> Result<(u32, f64), String> {
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

/// A mix's and `--one-way`'s `--rr-timeout` unless one is given: 2 s.
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

/// `--chart` and `--html`: the drawings a mix (and `--chart` a single
/// test whose row has a chart, capacity) writes after the result.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Drawings {
    /// `--chart FILE`: a mix's time series, or the single test's chart
    /// (capacity's histogram), as SVG.
    pub chart: Option<PathBuf>,
    /// `--html FILE`: a mix's self-contained report.
    pub html: Option<PathBuf>,
}

/// What `thrum run` does, checked: everything `cmd::run` reads.
#[derive(Debug)]
pub struct RunRequest {
    /// The test, validated.
    pub plan: TestPlan,
    /// `--dry-run`: print the plan and exit; nothing is dialled, and the
    /// server is not resolved.
    pub dry_run: bool,
    /// The mix's SPEC (`--mix`, or a preset's); None for a single test.
    pub mix_spec: Option<String>,
    /// `--timeout`: the whole run's hard limit; None: none.
    pub timeout: Option<Duration>,
    /// The server; None: an embedded one on loopback (or a dry run).
    pub target: Option<Target>,
    /// `--bind`: the local address, also toward an embedded server.
    pub bind: Option<IpAddr>,
    /// A test whose row says so (capacity), without its send flag: its
    /// packets fill the path MTU, which only the target's route knows.
    pub fill_path_mtu: bool,
    pub outputs: Outputs,
    pub drawings: Drawings,
    /// `--iterations`/`--confidence`; None: one run.
    pub repeat: Option<Repeat>,
    /// What the human output shows beyond the defaults.
    pub human: Human,
    /// Said under the error of a failed run: how to write a port after an
    /// IPv6 address (`-H fe80::1:5201` is read as an address).
    pub error_tip: Option<String>,
    /// Tips said on stderr before the run (`--iterations` in netperf's
    /// MAX,MIN order, taken as MIN,MAX).
    pub tips: Vec<String>,
    /// The run's UUID (`--uuid`, or a random one) and `--brand`, for the
    /// result's environment.
    pub uuid: String,
    pub brand: Option<String>,
    /// The test as the results store files the run: the test's name, the
    /// preset's (rrul, ...), or `mix` for `--mix`.
    pub stored_test: String,
    /// `--from`: each agent as given and where it resolved; the run goes
    /// from them toward `target` (`fleet`). None: from this host.
    pub agents: Option<Vec<(String, std::net::SocketAddr)>>,
    /// Where the result is saved, and its labels.
    pub store: StoreRequest,
    /// `--baseline`: the stored run to compare the result with; None: none.
    pub baseline: Option<Baseline>,
}

impl RunArgs {
    /// The one conversion: check every flag and return the plain request.
    /// Errors come in the order a user fixes them: the plan, the drawings,
    /// then the server (not resolved for a dry run).
    pub fn to_request(&self) -> Result<RunRequest> {
        let mut plan = self.to_plan()?;
        if let Some(f) = self
            .out
            .output_fields
            .as_ref()
            .and_then(|f| crate::export::fields::percentile_missing(&f.0, &plan.percentiles))
        {
            bail!(
                "--output-fields {f}: that percentile is not reported; ask for it with --percentiles (fixed: P50_LATENCY, P90_LATENCY, P99_LATENCY, P999_LATENCY)"
            );
        }
        let fields_out = self.out.csv || self.out.keyval;
        if let Some(list) = self
            .out
            .output
            .as_deref()
            .and_then(|p| selector_list(p, fields_out))
        {
            return Err(super::Tipped {
                error: anyhow::anyhow!(
                    "-o {list} names netperf's output selectors, but -o is the file the result is written to here"
                ),
                tip: format!(
                    "--output-fields {list} --csv (netperf's -o; --keyval for -k, alone for -O), or the whole netperf command line as `thrum netperf ...`"
                ),
            }
            .into());
        }
        let mut outputs = self.out.to_outputs();
        outputs.fields = outputs
            .fields
            .map(|f| crate::export::fields::chosen(f, &plan.percentiles));
        // The samples' latency columns are per flow: the client keeps them.
        plan.flow_latency = outputs.samples.is_some() || !outputs.export_csv.is_empty();
        let drawings = Drawings {
            chart: self.chart.clone(),
            html: self.html.clone(),
        };
        check_drawings(&drawings, &plan)?;
        let target = if self.dry_run { None } else { self.target()? };
        let agents = self.agents(&plan)?;
        let stored_test = match (&self.test, plan.parts.is_empty()) {
            (_, true) => plan.test.name().to_string(),
            (Some(preset), false) => preset.clone(),
            (None, false) => "mix".to_string(),
        };
        Ok(RunRequest {
            fill_path_mtu: plan.test.traits().fills_path_mtu && self.load.sock.send_size.is_none(),
            plan,
            stored_test,
            dry_run: self.dry_run,
            mix_spec: self.mix_spec().map(str::to_string),
            timeout: match self.timeout {
                Some(t) if t.is_zero() => {
                    bail!("--timeout 0s is no limit (accepted: a duration over 0, e.g. 30s)")
                }
                t => t,
            },
            target,
            bind: self.bind,
            outputs,
            drawings,
            repeat: self.repeat(),
            human: Human {
                agents: agents.as_ref().map_or(0, Vec::len),
                ..self.human_options()
            },
            error_tip: self.host.as_deref().and_then(super::ipv6_port_hint),
            tips: self.tips(),
            uuid: self.uuid.clone().unwrap_or_else(random_uuid),
            brand: self.brand.clone(),
            store: self.store.to_request()?,
            baseline: self.baseline.to_baseline()?,
            agents,
        })
    }

    /// `--from`, `--from-file`, `--from-dns`: the agents, checked against
    /// what a run from many hosts takes, and resolved (not for a dry run).
    fn agents(&self, plan: &TestPlan) -> Result<Option<Vec<(String, std::net::SocketAddr)>>> {
        use crate::agg::hosts;
        // agg's parser names agg's flags; these are --from's.
        let ours = |e: hosts::HostsError| {
            anyhow::anyhow!(
                "{}",
                e.to_string()
                    .replace("--hosts-file", "--from-file")
                    .replace("--hosts-dns", "--from-dns")
                    .replace("--hosts", "--from")
            )
        };
        let hosts = match (&self.from, &self.from_file, &self.from_dns) {
            (Some(h), _, _) => hosts::parse_list(h).map_err(ours)?,
            (None, Some(f), _) => {
                let text = crate::nofollow::read_to_string(f, &crate::nofollow::AGENTS_FILE)
                    .map_err(|e| anyhow::anyhow!("--from-file: reading {}: {e}", f.display()))?;
                hosts::parse_file(&text).map_err(ours)?
            }
            (None, None, Some(name)) => {
                hosts::from_dns(name, crate::control::server::DEFAULT_PORT).map_err(ours)?
            }
            (None, None, None) => return Ok(None),
        };
        let refuse = |what: &str| -> Result<()> {
            bail!("--from runs one test from every agent; {what} (docs/fleet.md)")
        };
        if self.host.is_none() {
            refuse("it needs -H TARGET, the thrum server the agents send to")?;
        }
        if self.psk_file.is_none() {
            refuse("it needs --psk-file: agents act only for a controller that proves their key")?;
        }
        if !plan.parts.is_empty() {
            refuse(
                "a mix (--mix, rrul and the other presets) is not run from agents yet: run its parts as single tests",
            )?;
        }
        if self.iterations.is_some() || self.confidence.is_some() {
            refuse("--iterations and --confidence do not apply to it yet")?;
        }
        if plan.count_limited() {
            refuse(
                "--transactions and --bytes do not apply: each agent would end at its own time, and no window would be one where every agent ran",
            )?;
        }
        if plan.test.traits().rate == crate::plan::Rate::ProbeBits {
            refuse("capacity measures the path from one sender: run it from one host")?;
        }
        if self.chart.is_some() || self.html.is_some() {
            refuse("--chart and --html do not apply to it")?;
        }
        if hosts.len() > crate::fleet::MAX_AGENTS {
            bail!(
                "--from names {} agents (accepted: 1..={})",
                hosts.len(),
                crate::fleet::MAX_AGENTS
            );
        }
        let mut seen = std::collections::BTreeSet::new();
        if let Some(h) = hosts.iter().find(|h| !seen.insert(h.as_str())) {
            bail!(
                "--from names {} twice (each agent runs the whole plan: ask for more flows with -F)",
                crate::text::echo(h)
            );
        }
        if self.dry_run {
            return Ok(Some(Vec::new()));
        }
        hosts
            .into_iter()
            .map(|h| {
                let addr = resolve(&h, self.ipv4, self.ipv6)
                    .with_context(|| format!("--from: agent '{}'", crate::text::echo(&h)))?;
                Ok((h, addr))
            })
            .collect::<Result<Vec<_>>>()
            .map(Some)
    }

    /// What stderr says before the run about how a flag was read.
    fn tips(&self) -> Vec<String> {
        let mut tips = Vec::new();
        if let Some(i) = self.iterations.filter(|i| i.swapped) {
            tips.push(format!(
                "--iterations {max},{min} read in netperf's order (-i MAX,MIN) as at least {min} and at most {max} runs; thrum writes it --iterations {min},{max}",
                min = i.min,
                max = i.max
            ));
        }
        tips
    }

    /// The mix's SPEC: `--mix`, or the preset named as the test; None for a single test.
    fn mix_spec(&self) -> Option<&str> {
        self.mix.as_deref().or_else(|| {
            let name = self.test.as_deref()?;
            crate::plan::mix::preset(name).map(|p| p.spec)
        })
    }

    /// The test plan, validated.
    fn to_plan(&self) -> Result<TestPlan> {
        let parts = match self.mix_spec() {
            Some(spec) => crate::plan::mix::parse_spec(spec)?,
            None => Vec::new(),
        };
        let test: TestKind = match parts.first() {
            Some(first) => first.test,
            // netperf without -t runs TCP_STREAM.
            None if self.test.is_none() => TestKind::TcpStream,
            None => {
                let name = self.test.as_deref().unwrap_or_default();
                match name.parse() {
                    Ok(t) => t,
                    // `-c HOST` took HOST for the test: iperf3's habit.
                    Err(e) if self.local_cpu => {
                        return Err(super::Tipped {
                            error: anyhow::Error::from(e),
                            tip: super::client_hint(name),
                        }
                        .into());
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        };
        let mut p = TestPlan::new(test);
        self.load.apply(&mut p);
        p.duration_ns = ns(self.duration);
        p.transactions = self.transactions;
        p.bytes = self.bytes;
        let count_limited = self.transactions.is_some() || self.bytes.is_some();
        p.warmup_ns = match (self.warmup, count_limited) {
            (Some(w), _) => ns(w),
            (None, true) => 0,
            (None, false) => 1_000_000_000,
        };
        p.cooldown_ns = ns(self.cooldown);
        if self.duration.is_zero() {
            // `-l 0` (netperf's): until Ctrl-C, or the whole test as long
            // as a server allows by default.
            p.duration_ns = crate::control::limits::DEFAULT_MAX_DURATION_NS
                .saturating_sub(p.warmup_ns + p.cooldown_ns)
                .max(crate::plan::limits::MIN_DURATION_NS);
        }
        p.interval_ns = ns(self.interval);
        if self.one_way {
            // The stamps need the room; a larger size is kept (the raise
            // is said in summary.owd_ns's sizes and in --help). A mix
            // raises it in the parts that carry them (`part_plans`) only.
            use crate::plan::limits::{ONE_WAY_REQUEST_BYTES, ONE_WAY_RESPONSE_BYTES};
            p.one_way = true;
            p.one_way_exchanges_only = self.clock_method.as_deref() == Some("exchanges");
            if parts.is_empty() {
                p.request_bytes = p.request_bytes.max(ONE_WAY_REQUEST_BYTES);
                p.response_bytes = p.response_bytes.max(ONE_WAY_RESPONSE_BYTES);
            }
            // It is asked to find a queue: as a mix's probes, it waits one
            // out (at 50 ms, every transaction behind a 100 ms queue would
            // be lost and neither way read at all).
            if self.load.flow.opts.rr_timeout.is_none() {
                p.rr_timeout_ns = MIX_RR_TIMEOUT_NS;
            }
        }
        let (flows, threads) = (self.load.flow.flows, self.load.flow.threads);
        if self.both {
            // Each direction gets the flows and threads asked for.
            p.direction = crate::plan::Direction::Both;
            p.flows = flows.saturating_mul(2);
            p.threads = threads.saturating_mul(2);
        } else if self.reverse {
            p.direction = crate::plan::Direction::Reverse;
        }
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
            if flows != 1
                || threads != 1
                || self.load.sock.rate.is_some()
                || self.transactions.is_some()
                || self.bytes.is_some()
                || self.load.sock.send_size.is_some()
            {
                bail!(
                    "--flows, --threads, --rate, --transactions, --bytes and --send-size do not apply to a mix: give each part its flows as TEST*N and its rate as @rate=N (each part sends its test's default sizes)"
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
            if self.load.flow.opts.rr_timeout.is_none() {
                p.rr_timeout_ns = MIX_RR_TIMEOUT_NS;
            }
        }
        p.validate()?;
        Ok(p)
    }

    /// The repetition asked for with --iterations and/or --confidence
    /// (netperf's defaults fill the other: 3,10 and 99,5).
    fn repeat(&self) -> Option<Repeat> {
        repeat_of(self.iterations.map(|i| (i.min, i.max)), self.confidence)
    }

    /// What the human output shows beyond the defaults.
    fn human_options(&self) -> Human {
        Human {
            histogram: self.histogram,
            local_cpu: self.local_cpu || self.cpu,
            remote_cpu: self.remote_cpu || self.cpu,
            verbose: self.verbose,
            rows_shown: false,
            units: self.out.format,
            timestamps: self.timestamps.clone(),
            agents: 0,
        }
    }

    /// The server to use; None means start an embedded one.
    fn target(&self) -> Result<Option<Target>> {
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
            wait: self.wait_server,
        }))
    }
}

/// `--chart` and `--html` draw a mix (and `--chart` the charts of single
/// tests whose row has one: capacity's dispersion histogram): refused
/// before anything runs for any other test.
fn check_drawings(d: &Drawings, plan: &TestPlan) -> Result<()> {
    let charts: Vec<String> = TestKind::ALL
        .into_iter()
        .filter_map(|k| k.traits().chart.map(|c| format!("{k}'s {}", c.name())))
        .collect();
    let mix = "a mix (--mix SPEC or a preset such as rrul)";
    for (flag, set, alone, what) in [
        (
            "--chart",
            d.chart.is_some(),
            plan.test.traits().chart.is_some(),
            format!("{mix} or {}", charts.join(" or ")),
        ),
        ("--html", d.html.is_some(), false, mix.to_string()),
    ] {
        if set && plan.parts.is_empty() && !alone {
            bail!("{flag} draws {what}; {} is a single test", plan.test);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn args_of(args: &[&str]) -> Box<RunArgs> {
        let cli = Cli::try_parse_from([&["thrum", "run"][..], args].concat()).unwrap();
        let Command::Run(run) = cli.command else {
            panic!("not a run")
        };
        run
    }

    fn plan_of(args: &[&str]) -> TestPlan {
        args_of(args).to_plan().unwrap()
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

    /// The enums clap parses land in the plan as given.
    #[test]
    fn driver_close_and_arrivals_reach_the_plan() {
        use crate::plan::{Arrivals, CloseMode, DriverChoice};
        let p = plan_of(&[
            "tcp_crr",
            "--driver",
            "uring",
            "--close",
            "rst",
            "--rate",
            "100",
            "--arrivals",
            "poisson",
        ]);
        assert_eq!(
            (p.driver, p.close, p.arrivals, p.offered_per_s),
            (
                DriverChoice::Uring,
                CloseMode::Rst,
                Arrivals::Poisson,
                Some(100)
            )
        );
        let p = plan_of(&["tcp_rr"]);
        assert_eq!(
            (p.driver, p.close, p.arrivals),
            (DriverChoice::Auto, CloseMode::Fin, Arrivals::Fixed)
        );
        let e = Cli::try_parse_from(["thrum", "run", "tcp_rr", "--driver", "x"]).unwrap_err();
        let e = e.to_string();
        assert!(
            e.contains("--driver") && e.contains("auto, epoll, uring"),
            "{e}"
        );
    }

    /// What the test table's columns decide on the command line, for
    /// every test: the packets that fill the path MTU, `--chart` of a
    /// single test, and which tests `thrum suite` runs.
    #[test]
    fn the_rows_decide_path_mtu_chart_and_suite() {
        let suite = Cli::try_parse_from(["thrum", "suite"]).unwrap();
        let Command::Suite(suite) = suite.command else {
            panic!("not a suite")
        };
        let suite: Vec<TestKind> = suite
            .to_request()
            .unwrap()
            .plans
            .iter()
            .map(|p| p.test)
            .collect();
        for k in TestKind::ALL {
            let t = k.traits();
            let req = args_of(&[k.name(), "--dry-run"]).to_request().unwrap();
            assert_eq!(req.fill_path_mtu, t.fills_path_mtu, "{k}");
            let chart = args_of(&[k.name(), "--dry-run", "--chart", "c.svg"]).to_request();
            match chart {
                Ok(_) => assert!(t.chart.is_some(), "{k}"),
                Err(e) => {
                    assert!(t.chart.is_none(), "{k}: {e}");
                    let e = e.to_string();
                    assert!(e.contains("capacity's dispersion histogram"), "{e}");
                }
            }
            assert_eq!(suite.contains(&k), t.in_suite, "{k}");
        }
    }

    /// A dry run resolves no server; a capacity run without --send-size
    /// sizes its packets to the path.
    #[test]
    fn the_request() {
        let r = args_of(&["rrul", "--dry-run", "-H", "no-such-host.invalid"])
            .to_request()
            .unwrap();
        assert!(r.dry_run && r.target.is_none());
        assert!(r.mix_spec.is_some_and(|s| s.contains("udp_rr")));
        assert!(args_of(&["capacity"]).to_request().unwrap().fill_path_mtu);
        assert!(
            !args_of(&["capacity", "-m", "1000"])
                .to_request()
                .unwrap()
                .fill_path_mtu
        );
        let e = args_of(&["tcp_rr", "--html", "x.html"])
            .to_request()
            .unwrap_err();
        assert!(e.to_string().contains("--html draws"), "{e}");
        let r = args_of(&["tcp_rr", "--json", "-c", "--iterations", "3,5"])
            .to_request()
            .unwrap();
        assert_eq!(r.outputs.format, crate::cli::Format::Json);
        assert!(r.human.local_cpu && !r.human.remote_cpu);
        assert_eq!(r.repeat.map(|x| (x.min, x.max)), Some((3, 5)));
    }

    /// `--from` is refused, naming what is missing or what it does not
    /// take, before anything is resolved or dialled.
    #[test]
    fn from_refuses_what_a_run_from_many_hosts_cannot_take() {
        let dir = tempfile::tempdir().unwrap();
        let k = dir.path().join("k");
        std::fs::write(&k, "0123456789abcdef0123").unwrap();
        let k: &'static str = k.to_str().unwrap().to_string().leak();
        let refused = |args: &[&str]| args_of(args).to_request().unwrap_err().to_string();
        let base = ["--from", "a1,a2", "--dry-run"];
        let with = |more: &[&'static str]| -> Vec<&str> { [&base[..], more].concat() };
        for (args, needle) in [
            (with(&["--psk-file", k]), "-H TARGET"),
            (with(&["-H", "t"]), "--psk-file"),
            (
                with(&["-H", "t", "--psk-file", k, "--mix", "tcp_stream"]),
                "a mix",
            ),
            (
                with(&["-H", "t", "--psk-file", k, "-n", "10", "tcp_rr"]),
                "--transactions",
            ),
            (
                with(&["-H", "t", "--psk-file", k, "--iterations", "3,5"]),
                "--iterations",
            ),
            (
                with(&["-H", "t", "--psk-file", k, "capacity"]),
                "one sender",
            ),
        ] {
            let e = refused(&args);
            assert!(e.contains("--from") && e.contains(needle), "{args:?}: {e}");
        }
        let e = refused(&["--from", "a1,a1", "-H", "t", "--psk-file", k, "--dry-run"]);
        assert!(e.contains("a1 twice"), "{e}");
        let e = refused(&["--from", "a1,,a2", "-H", "t", "--psk-file", k, "--dry-run"]);
        assert!(e.starts_with("--from: empty host"), "{e}");
        let r = args_of(&["--from", "a1,a2", "-H", "t", "--psk-file", k, "--dry-run"])
            .to_request()
            .unwrap();
        assert!(r.agents.is_some());
    }

    /// netperf without -t runs TCP_STREAM, and so does `thrum
    /// run` without a test; iperf3's `-c HOST` still gets its tip.
    #[test]
    fn no_test_is_tcp_stream() {
        assert_eq!(plan_of(&["-H", "h", "-l", "1s"]).test, TestKind::TcpStream);
        assert_eq!(plan_of(&[]).test, TestKind::TcpStream);
        let e = args_of(&["-c", "server1"]).to_plan().unwrap_err();
        let tip = e
            .downcast_ref::<crate::cli::Tipped>()
            .expect("a tip")
            .tip
            .clone();
        assert!(tip.contains("-H server1"), "{tip}");
    }

    /// `-l 0` runs until stopped: as long as a server allows by default.
    #[test]
    fn zero_length_runs_until_stopped() {
        let p = plan_of(&["-l", "0"]);
        assert_eq!(p.duration_ns + p.warmup_ns, 3600 * 1_000_000_000);
        assert_eq!(plan_of(&["-l", "2s"]).duration_ns, 2_000_000_000);
    }

    /// netperf's `-o LIST` is refused with a tip naming --output-fields; a
    /// file that only looks like a name is written as asked.
    #[test]
    fn netperfs_o_gets_a_tip() {
        let e = args_of(&["-o", "THROUGHPUT,MEAN_LATENCY"])
            .to_request()
            .unwrap_err();
        let t = e.downcast_ref::<crate::cli::Tipped>().expect("a tip");
        assert!(
            t.tip
                .contains("--output-fields THROUGHPUT,MEAN_LATENCY --csv"),
            "{}",
            t.tip
        );
        assert!(format!("{e:#}").contains("-o is the file"), "{e:#}");
        assert!(args_of(&["-o", "RESULT.json"]).to_request().is_ok());
        assert!(args_of(&["-o", "THROUGHPUT"]).to_request().is_err());
        assert!(args_of(&["-o", "OUT"]).to_request().is_ok());
        // netperf's -o all beside --csv: every field, not a file "all".
        let e = args_of(&["--csv", "-o", "all"]).to_request().unwrap_err();
        let t = e.downcast_ref::<crate::cli::Tipped>().expect("a tip");
        assert!(t.tip.contains("--output-fields all --csv"), "{}", t.tip);
        assert!(args_of(&["-o", "all"]).to_request().is_ok());
    }

    /// `--output-fields all` is every field, then each --percentiles
    /// entry's own, each once.
    #[test]
    fn output_fields_all_is_every_field() {
        let r = args_of(&[
            "--csv",
            "--output-fields",
            "all",
            "--percentiles",
            "99.99,50",
        ])
        .to_request()
        .unwrap();
        let f = r.outputs.fields.expect("the fields");
        let mut every = crate::export::fields::names();
        every.push("P9999_LATENCY".into());
        assert_eq!(f, every);
        let r = args_of(&["--output-fields", "THROUGHPUT"])
            .to_request()
            .unwrap();
        assert_eq!(r.outputs.fields, Some(vec!["THROUGHPUT".to_string()]));
    }

    /// `--iterations 10,3` is netperf's `-i 10,3` (MAX,MIN): read as 3..10
    /// with a tip; MIN,MAX is read as it stands, without one.
    #[test]
    fn iterations_in_netperfs_order_are_swapped_with_a_tip() {
        let r = args_of(&["--iterations", "10,3"]).to_request().unwrap();
        assert_eq!(r.repeat.map(|x| (x.min, x.max)), Some((3, 10)));
        assert!(r.tips[0].contains("--iterations 3,10"), "{:?}", r.tips);
        let r = args_of(&["--iterations", "2,3"]).to_request().unwrap();
        assert_eq!(r.repeat.map(|x| (x.min, x.max)), Some((2, 3)));
        assert!(r.tips.is_empty());
        assert!(iterations_arg("0,3").is_err());
        assert!(iterations_arg("31,3").is_err());
    }
}
