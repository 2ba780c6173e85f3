//! Command-line types (clap) and their conversion into plain requests.
//!
//! No clap type leaves this module. Each command's flags are turned, once,
//! into one plain request at the top of its `cmd` file (ripgrep's LowArgs →
//! HiArgs): [`RunArgs::to_request`] checks the flags into a [`RunRequest`]
//! (the `TestPlan`, the server, the outputs, the drawings, the repetition),
//! `curve`'s into a [`CurveRequest`], and so on; nothing after reads a clap
//! type. One file per command's flags (`run`, `curve`, `agg`, `ping`,
//! `hardening` for the server's, `store` for the results store's flags
//! and `history`, `show`, `compare`), with what two commands share in its own:
//! `load` (the load options `run` and `curve` both flatten) and `output`.
//! Here: the command list, the value parsers they share, and the server's
//! address forms.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};

use crate::control::server::{DEFAULT_PORT, ServerConfig};
use crate::plan::{TestKind, TestPlan};
use crate::units::{parse_duration, parse_rate, parse_size};

mod agg;
pub use agg::{
    AggArgs, AggOutput, AggOutputArgs, AggRequest, BurstChoice, FindBurstArgs, FindBurstRequest,
    ReportArgs, ReportRequest, host_list, target_for,
};
mod curve;
pub use curve::{CurveArgs, CurveRequest};
pub mod hardening;
mod load;
mod mesh;
pub use load::{FlowArgs, FlowOpts, LoadArgs, SocketArgs, arrivals_name};
pub use mesh::{MeshArgs, MeshRequest};
mod monitor;
pub use monitor::{MonitorArgs, MonitorRequest};
mod output;
pub use output::{FieldList, Format, OutputArgs, Outputs};
mod ping;
pub use ping::{MAX_PING_COUNT, MAX_PING_SIZE, PingArgs, PingPlan};
mod run;
pub use run::{Drawings, MAX_ITERATIONS, PercentileList, RunArgs, RunRequest, repeat_of};
mod sockets;
pub use sockets::SocketTuning;
mod sweep;
mod vary;
pub use sweep::{PlannedCell, SweepArgs, SweepRequest, U32List};
pub use vary::NicKnob;
pub mod store;
pub use store::{BaselineArgs, CompareArgs, HistoryArgs, ShowArgs, StoreArgs, StoreRequest};
mod web;
pub use web::{WebArgs, WebRequest};

/// The headings `--help` groups options under, in the order they first
/// appear (clap lists headings in the order of their first option): where
/// the test runs and for how long, then what load, of what sizes, on what
/// sockets, open or closed loop, a mix, and what is written.
pub mod heading {
    pub const TARGET: &str = "Target and duration";
    pub const LOAD: &str = "Load";
    pub const SIZES: &str = "Sizes";
    pub const SOCKETS: &str = "Sockets";
    pub const OPEN_LOOP: &str = "Open loop";
    pub const MIX: &str = "Mix";
    pub const OUTPUT: &str = "Output";
    pub const REPETITION: &str = "Repetition";
}

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
    /// Run every test for a few seconds against a server (-H) or an embedded one and print one table.
    Suite(SuiteArgs),
    /// Ramp streams 1, 2, 4 … over load generators and report the aggregate per step (netperf's aggregate method).
    Agg(Box<AggArgs>),
    /// Find the burst that maximises one flow's transactions/s (double while it still rises).
    FindBurst(FindBurstArgs),
    /// Run one test over a grid (burst × flows, or any load option with --vary) and print its tables.
    Sweep(Box<SweepArgs>),
    /// Run one test over every ordered pair of agents (sender → receiver) and print the matrix.
    Mesh(Box<MeshArgs>),
    /// Offer increasing open-loop rates and find the knee and the saturation point of latency against throughput.
    Curve(Box<CurveArgs>),
    /// Re-analyse a results.json (of agg or curve) or netperf demo-mode logs (netperf_TEST.log and its .out files).
    Report(ReportArgs),
    /// ICMP echo (or TCP connect) round trips by packet size: availability and response time.
    Ping(PingArgs),
    /// Run probes on a schedule and serve their latest figures to Prometheus (/metrics).
    Monitor(MonitorArgs),
    /// List the runs in the results store, newest first (or draw a figure over time: --chart).
    History(HistoryArgs),
    /// Print a stored run again, as its command did (--json, --out DIR for its page and charts).
    Show(ShowArgs),
    /// Compare two results figure by figure: the change, its interval with run-to-run noise, and a verdict.
    Compare(CompareArgs),
    /// Serve the results store read-only as web pages: a grid of every target and test, histories, runs, comparisons.
    Web(WebArgs),
    /// Take netperf's command line and print what netperf prints (also as a link named netperf).
    #[command(disable_help_flag = true)]
    Netperf(NetperfArgs),
}

/// `thrum netperf ARGS`: netperf's own command line, handed whole to the
/// netperf front end (`crate::netperf`), which reads it as netperf does;
/// `thrum netperf --help` lists what it takes.
#[derive(Debug, Args)]
pub struct NetperfArgs {
    /// netperf's global options, then `--` and the test's options.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0.., value_name = "ARGS")]
    pub args: Vec<String>,
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

/// A value taken as written (checked later, where its error names the
/// flag) whose usual values completions offer: `thrum curve`'s tests, `agg
/// --tests`' names, `--tos`' DSCP names. Without them a shell would offer
/// file names.
#[derive(Clone, Copy, Debug)]
pub struct Offered(pub fn() -> Vec<&'static str>);

impl Offered {
    /// The tests with an open loop: `thrum curve`'s.
    pub const OPEN_LOOP_TEST: Offered = Offered(|| {
        TestKind::ALL
            .into_iter()
            .filter(|t| t.traits().rate == crate::plan::Rate::Transactions)
            .map(TestKind::name)
            .collect()
    });
    /// `--tos`: the DSCP names (a TOS byte is accepted too).
    pub const DSCP: Offered = Offered(|| {
        vec![
            "BE", "BK", "LE", "CS0", "CS1", "CS2", "CS3", "CS4", "CS5", "CS6", "CS7", "AF11",
            "AF12", "AF13", "AF21", "AF22", "AF23", "AF31", "AF32", "AF33", "AF41", "AF42", "AF43",
            "EF", "VA",
        ]
    });
}

impl clap::builder::TypedValueParser for Offered {
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
        Some(Box::new(
            (self.0)()
                .into_iter()
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

/// A duration as whole nanoseconds, saturating.
fn ns(d: Duration) -> u64 {
    d.as_nanos().min(u64::MAX as u128) as u64
}

/// What a user of netperf or iperf3 meant by a flag thrum does not have,
/// said after clap's error. Hints, not aliases: `-P` or `-R` meaning
/// something here would make a typo run the wrong test.
pub fn foreign_hint(args: &[String], kind: clap::error::ErrorKind) -> Option<String> {
    use clap::error::ErrorKind::{InvalidSubcommand, UnknownArgument, ValueValidation};
    if !matches!(kind, UnknownArgument | InvalidSubcommand | ValueValidation) {
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
    if kind == ValueValidation {
        // netperf's -n (transactions) refusing iperf3's -n (bytes, with a size suffix).
        if let Some(n) =
            value_after("-n").filter(|v| v.parse::<u64>().is_err() && parse_size(v).is_ok())
        {
            let n = crate::text::echo(&n);
            return Some(format!(
                "-n is a transaction count here (netperf's); to send a number of bytes (iperf3's -n): --bytes {n}"
            ));
        }
        // netperf's -b (a count) refusing iperf3's -b (a bit rate).
        let b = value_after("-b").filter(|v| v.parse::<u32>().is_err() && parse_rate(v).is_ok())?;
        let b = crate::text::echo(&b);
        return Some(format!(
            "-b is the burst here (netperf's: extra transactions in flight, a count); \
             for a bit rate (iperf3's -b): --rate {b} (udp_stream) or --pacing-rate {b} (per TCP flow)"
        ));
    }
    if let Some(t) = value_after("-t") {
        // iperf3's -t is the duration: a number (of seconds) or a duration.
        if t.starts_with(|c: char| c.is_ascii_digit()) && parse_duration(&t).is_ok() {
            let l = if t.bytes().all(|c| c.is_ascii_digit() || c == b'.') {
                format!("{t}s")
            } else {
                t.clone()
            };
            let l = crate::text::echo(&l);
            return Some(format!(
                "the duration is -l here, not -t (iperf3's): -l {l}"
            ));
        }
        let test = t;
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
    if let Some(list) = ["-O", "-k"]
        .iter()
        .find_map(|f| value_after(f).map(|v| (*f, v)))
    {
        let (flag, v) = list;
        let v = crate::text::echo(&v);
        let style = if flag == "-k" { " --keyval" } else { "" };
        return Some(format!(
            "netperf's {flag} selectors are --output-fields {v}{style} here, or run the netperf command line as thrum netperf"
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
    if let Some(h) = value_after("-c").filter(|h| h.parse::<TestKind>().is_err()) {
        return Some(client_hint(&h));
    }
    if let Some(p) = value_after("-p") {
        let p = crate::text::echo(&p);
        return Some(format!(
            "the server's port goes with its host: -H HOST:{p} ([ADDRESS]:{p} for IPv6)"
        ));
    }
    None
}

/// iperf3's `-c HOST`: here -c is `--local-cpu`, and the server is `-H`.
fn client_hint(host: &str) -> String {
    let host = crate::text::echo(host);
    format!(
        "thrum's client takes the server as -H HOST (-c is --local-cpu here, not iperf3's client), e.g. thrum run tcp_stream -H {host}"
    )
}

/// An error said with a tip under it, as clap's are: `main` prints the
/// message as `error: …` and the tip as `  tip: …` after a blank line.
#[derive(Debug)]
pub struct Tipped {
    pub error: anyhow::Error,
    pub tip: String,
}

impl std::fmt::Display for Tipped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#}", self.error)
    }
}

impl std::error::Error for Tipped {}

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

/// What `thrum server` does: the server's configuration, checked (the
/// key file read), and what the operator should hear about it.
#[derive(Debug)]
pub struct ServeRequest {
    pub config: ServerConfig,
    /// Said on the log before serving (a key file others can read, …).
    pub warnings: Vec<String>,
}

impl ServerArgs {
    /// The one conversion: the listener, the limits, the hardening.
    pub fn to_request(&self) -> Result<ServeRequest> {
        let mut config = ServerConfig::new(SocketAddr::new(self.listen, self.port));
        config.data_ports = self.data_ports;
        config.once = self.once;
        config.limits.max_sessions = self.max_sessions;
        let warnings = self.hardening.apply(&mut config)?;
        config.log = !self.quiet;
        Ok(ServeRequest { config, warnings })
    }
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
    /// Server as HOST[:PORT]; absent: an embedded one on loopback.
    ///
    /// Server as HOST or HOST:PORT ([v6]:PORT), a running `thrum server`; absent: an embedded server on loopback, in this process.
    #[arg(short = 'H', long, value_name = "HOST[:PORT]")]
    pub host: Option<String>,
    /// Use IPv4 only (resolving -H).
    #[arg(short = '4', conflicts_with = "ipv6")]
    pub ipv4: bool,
    /// Use IPv6 only (resolving -H).
    #[arg(short = '6')]
    pub ipv6: bool,
    /// Local address for the control and data connections.
    #[arg(long, value_name = "ADDR")]
    pub bind: Option<IpAddr>,
    /// Prove this pre-shared key (FILE) to the server (-H).
    #[arg(long, value_name = "FILE", requires = "host")]
    pub psk_file: Option<std::path::PathBuf>,
    /// Measurement window of each test.
    #[arg(short = 'l', long, default_value = "3s", value_parser = duration, value_name = "DURATION")]
    pub duration: Duration,
    /// Traffic before each test's measurement window.
    #[arg(long, default_value = "1s", value_parser = duration, value_name = "DURATION")]
    pub warmup: Duration,
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

/// What `thrum suite` does: a plan per test, each validated.
#[derive(Debug)]
pub struct SuiteRequest {
    /// Every test but capacity (loopback has no narrow link), in
    /// [`TestKind::ALL`]'s order.
    pub plans: Vec<TestPlan>,
    /// `--json`: a JSON array instead of the table.
    pub json: bool,
    /// `-H`: the server; None: an embedded one.
    pub target: Option<crate::control::client::Target>,
    /// `--bind`: the local address, also toward an embedded server.
    pub bind: Option<IpAddr>,
}

impl SuiteArgs {
    /// The one conversion.
    pub fn to_request(&self) -> Result<SuiteRequest> {
        let mut plans = Vec::new();
        for test in TestKind::ALL.into_iter().filter(|t| t.traits().in_suite) {
            let mut plan = TestPlan::new(test);
            plan.duration_ns = self.duration.as_nanos() as u64;
            plan.warmup_ns = self.warmup.as_nanos() as u64;
            plan.flows = self.flows;
            plan.threads = self.threads;
            plan.validate()?;
            plans.push(plan);
        }
        let target = match &self.host {
            None => None,
            Some(host) => Some(crate::control::client::Target {
                addr: resolve(host, self.ipv4, self.ipv6)?,
                label: host.clone(),
                bind: self.bind,
                embedded: false,
                wait: None,
                psk: match &self.psk_file {
                    Some(p) => Some(crate::control::auth::Psk::from_file(p)?),
                    None => None,
                },
            }),
        };
        Ok(SuiteRequest {
            plans,
            json: self.json,
            target,
            bind: self.bind,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Completions offer the DSCP names as a list of their own; every one
    /// must be a name `--tos` and `dscp=` take (`plan::mix::dscp_tos`).
    #[test]
    fn every_offered_dscp_name_parses() {
        for name in (Offered::DSCP.0)() {
            assert!(crate::plan::mix::dscp_tos(name).is_ok(), "{name}");
        }
    }

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

    /// `run --help` groups its options under headings, in the order a user
    /// reaches for them (the target first, -H before --mix), and `-h` is
    /// the short form: one line a flag.
    #[test]
    fn run_help_has_headings_in_order() {
        use clap::CommandFactory;
        let mut cmd = Cli::command();
        cmd.build();
        let run = cmd.find_subcommand_mut("run").unwrap();
        let long = run.render_long_help().to_string();
        let short = run.render_help().to_string();
        let at = |text: &str, needle: &str| {
            text.find(needle)
                .unwrap_or_else(|| panic!("no {needle:?} in:\n{text}"))
        };
        for text in [&long, &short] {
            let order = [
                "Target and duration:",
                "Load:",
                "Sizes:",
                "Sockets:",
                "Open loop:",
                "Mix:",
                "Output:",
            ]
            .map(|h| at(text, &format!("\n{h}\n")));
            assert!(order.is_sorted(), "headings out of order: {order:?}");
            assert!(at(text, "--host") < at(text, "--mix"));
        }
        assert!(
            short.lines().count() < long.lines().count(),
            "-h is not shorter than --help"
        );
        // The same headings in curve.
        let curve = cmd.find_subcommand_mut("curve").unwrap();
        let help = curve.render_help().to_string();
        let order = [
            "Target and duration:",
            "Load:",
            "Sizes:",
            "Open loop:",
            "Output:",
        ]
        .map(|h| at(&help, &format!("\n{h}\n")));
        assert!(order.is_sorted(), "curve's headings out of order: {help}");
    }
}
