//! Command-line types of the aggregate commands (`agg`, `find-burst`,
//! `report`; `sweep` has its own file), their checks, and the plain
//! requests they become. Every bad value is named with its flag and
//! accepted range before anything runs.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;

use super::{duration, resolve};
use crate::agg::hosts;
use crate::agg::kinds::AggTest;
use crate::control::client::Target;
use crate::control::server::DEFAULT_PORT;

/// `--burst auto|N`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BurstChoice {
    Auto,
    Fixed(u32),
}

fn burst_choice(s: &str) -> Result<BurstChoice, String> {
    if s == "auto" {
        return Ok(BurstChoice::Auto);
    }
    match s.parse::<u32>() {
        Ok(n) if n <= crate::plan::limits::MAX_BURST => Ok(BurstChoice::Fixed(n)),
        _ => Err(format!(
            "'{s}' is not a burst (accepted: auto or 0..={})",
            crate::plan::limits::MAX_BURST
        )),
    }
}

/// A resolved load generator, proving the key in `psk_file` when given.
pub fn target_for(host: &str, psk_file: Option<&std::path::Path>) -> Result<Target> {
    let psk = match psk_file {
        Some(p) => Some(crate::control::auth::Psk::from_file(p)?),
        None => None,
    };
    Ok(Target {
        addr: resolve(host, false, false).with_context(|| format!("load generator '{host}'"))?,
        label: host.to_string(),
        bind: None,
        embedded: false,
        psk,
        wait: None,
    })
}

/// The hosts of `--hosts`, `--hosts-file` or `--hosts-dns` (for a name,
/// every address it has, port 12880 unless it names one), as `agg`,
/// `sweep` and `mesh` read them; none when none is given.
pub fn host_list(
    list: &Option<String>,
    file: &Option<PathBuf>,
    dns: &Option<String>,
) -> Result<Vec<String>> {
    Ok(match (list, file, dns) {
        (Some(h), _, _) => hosts::parse_list(h)?,
        (None, Some(f), _) => hosts::read_file(f)?,
        (None, None, Some(name)) => hosts::from_dns(name, DEFAULT_PORT)?,
        (None, None, None) => Vec::new(),
    })
}

const MIN_STEP: Duration = Duration::from_secs(3);
// At most 11 steps (1024 streams): a stream of the first step runs 11 h, within a plan's 24 h.
const MAX_STEP: Duration = Duration::from_secs(3600);
const MAX_STREAMS: u32 = 1024;

#[derive(Debug, Args)]
pub struct AggArgs {
    /// Prove this pre-shared key to the server(s) (HMAC-SHA256 challenge-response), as `thrum run --psk-file`.
    #[arg(long, value_name = "FILE")]
    #[arg(help_heading = super::heading::TARGET)]
    pub psk_file: Option<PathBuf>,
    /// Load generators running `thrum server`: HOST[:PORT],HOST[:PORT],...
    #[arg(
        long,
        value_name = "LIST",
        conflicts_with_all = ["hosts_file", "hosts_dns"],
        required_unless_present_any = ["hosts_file", "hosts_dns"]
    )]
    #[arg(help_heading = super::heading::TARGET)]
    pub hosts: Option<String>,
    /// File of load generators: one HOST[:PORT] per line, or netperf's remote_hosts form (REMOTE_HOSTS[0]=lg1, NUM_REMOTE_HOSTS=2), read as data.
    #[arg(long, value_name = "FILE", conflicts_with = "hosts_dns")]
    #[arg(help_heading = super::heading::TARGET)]
    pub hosts_file: Option<PathBuf>,
    /// Load generators from DNS: every A and AAAA record of NAME is one (PORT: all of them; default 12880), e.g. a Kubernetes headless Service over a DaemonSet of `thrum server`.
    #[arg(long, value_name = "NAME[:PORT]")]
    #[arg(help_heading = super::heading::TARGET)]
    pub hosts_dns: Option<String>,
    /// Tests to run, in order: tps (1-byte burst udp_rr), outbound (tcp_stream), inbound (tcp_maerts), bidir (64K burst tcp_rr), sync (1-byte tcp_rr to each server in turn), rr (1-byte tcp_rr, one transaction in flight per stream, ramped).
    #[arg(long, default_value = "tps,outbound,inbound", value_name = "LIST", value_parser = super::Offered(agg_test_names), hide_possible_values = true)]
    #[arg(help_heading = super::heading::LOAD)]
    pub tests: String,
    /// Streams in the last step (1, 2, 4 … up to this); default: 2 × this host's CPUs, at least one per server.
    #[arg(long, value_name = "N")]
    #[arg(help_heading = super::heading::LOAD)]
    pub max_streams: Option<u32>,
    /// How long each step holds (at least 3s).
    #[arg(long, default_value = "60s", value_parser = duration, value_name = "DURATION")]
    #[arg(help_heading = super::heading::TARGET)]
    pub step: Duration,
    /// Transactions in flight beyond one per stream for tps and bidir: auto (tps: search as find_max_burst.sh; bidir: 12) or N for both.
    #[arg(long, default_value = "auto", value_parser = burst_choice, value_name = "auto|N")]
    #[arg(help_heading = super::heading::LOAD)]
    pub burst: BurstChoice,
    /// Length of each probe of the automatic burst search.
    #[arg(long, default_value = "2s", value_parser = duration, value_name = "DURATION")]
    #[arg(help_heading = super::heading::LOAD)]
    pub burst_probe: Duration,
    /// Interim sample period of every stream.
    #[arg(long, default_value = "500ms", value_parser = duration, value_name = "DURATION")]
    #[arg(help_heading = super::heading::TARGET)]
    pub interval: Duration,
    #[command(flatten)]
    pub output: AggOutputArgs,
    #[command(flatten)]
    pub store: super::StoreArgs,
}

/// Where `agg` and `report` write, and how much they print.
#[derive(Debug, Args)]
pub struct AggOutputArgs {
    /// Directory for results.json, TEST_streams.csv, TEST_overall.svg and report.html (agg: default ./thrum-agg-DATE/; report: none, summary only; report of a sweep: sweep.csv, sweep.html and heatmap.svg; of a mesh: heatmap.svg).
    #[arg(long, value_name = "DIR")]
    #[arg(help_heading = super::heading::OUTPUT)]
    pub out: Option<PathBuf>,
    /// Also draw one SVG per stream (TEST_stream_K.svg).
    #[arg(long)]
    #[arg(help_heading = super::heading::OUTPUT)]
    pub individual: bool,
    /// Print every step's average, minimum and maximum, not only the peak's.
    #[arg(long)]
    #[arg(help_heading = super::heading::OUTPUT)]
    pub intervals: bool,
    /// Print the result (results.json's document) as JSON on standard output instead of the summary.
    #[arg(long)]
    #[arg(help_heading = super::heading::OUTPUT)]
    pub json: bool,
    /// Also write the result as JSON to FILE (repeatable).
    #[arg(long, value_name = "FILE")]
    #[arg(help_heading = super::heading::OUTPUT)]
    pub export_json: Vec<PathBuf>,
    /// Title of the charts and of report.html, before the one made from the test, hosts and date (post_proc.py's -t); `report` replaces a saved one.
    #[arg(long, value_name = "TEXT", value_parser = label_text)]
    #[arg(help_heading = super::heading::OUTPUT)]
    pub title: Option<String>,
    /// A line of text on every chart and under report.html's title (post_proc.py's -a); `report` replaces a saved one.
    #[arg(long, value_name = "TEXT", value_parser = label_text)]
    #[arg(help_heading = super::heading::OUTPUT)]
    pub annotation: Option<String>,
}

/// The longest `--title` or `--annotation`, characters.
const MAX_LABEL: usize = 200;

/// `--title` and `--annotation`: one line of printable text.
fn label_text(s: &str) -> Result<String, String> {
    if s.chars().count() > MAX_LABEL {
        return Err(format!(
            "{} characters (accepted: 1..={MAX_LABEL} on one line)",
            s.chars().count()
        ));
    }
    if s.trim().is_empty() || s.chars().any(char::is_control) {
        return Err(format!(
            "'{}' is not one line of text (accepted: 1..={MAX_LABEL} printable characters)",
            crate::text::echo(s)
        ));
    }
    Ok(s.to_string())
}

/// Where `agg` and `report` write, and how much they print: the flags of
/// [`AggOutputArgs`], plain.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AggOutput {
    /// `--out DIR`; `agg` has a default (see [`AggRequest::dir`]).
    pub out: Option<PathBuf>,
    /// `--individual`: one SVG per stream too.
    pub individual: bool,
    /// `--intervals`: every step's average, minimum and maximum.
    pub intervals: bool,
    /// `--json`: the document on standard output instead of the summary.
    pub json: bool,
    /// `--export-json FILE`s.
    pub export_json: Vec<PathBuf>,
    /// `--title` and `--annotation`.
    pub title: Option<String>,
    pub annotation: Option<String>,
}

impl AggOutputArgs {
    pub(super) fn to_output(&self) -> AggOutput {
        AggOutput {
            out: self.out.clone(),
            individual: self.individual,
            intervals: self.intervals,
            json: self.json,
            export_json: self.export_json.clone(),
            title: self.title.clone(),
            annotation: self.annotation.clone(),
        }
    }
}

/// What `thrum agg` does, checked: everything `cmd::agg` reads.
#[derive(Debug)]
pub struct AggRequest {
    /// The load generators as written, and resolved (same order).
    pub hosts: Vec<String>,
    pub targets: Vec<Target>,
    /// The tests, in order, each once.
    pub tests: Vec<AggTest>,
    /// Streams in the last step.
    pub max_streams: u32,
    /// How long each step holds, and the streams' sample period.
    pub step: Duration,
    pub interval: Duration,
    /// `--burst`, and the length of each probe of its search.
    pub burst: BurstChoice,
    pub burst_probe: Duration,
    /// The output directory: `--out`, or `./thrum-agg-DATE/`.
    pub dir: PathBuf,
    pub output: AggOutput,
    /// Where the aggregate is saved, and its labels.
    pub store: super::StoreRequest,
}

impl AggArgs {
    /// The one conversion: the durations, the load generators (resolved,
    /// with their key), the tests and the stream count.
    pub fn to_request(&self) -> Result<AggRequest> {
        self.check()?;
        let hosts = self.host_list()?;
        let tests = self.test_list()?;
        let max_streams = self.max_streams(hosts.len())?;
        let targets = hosts
            .iter()
            .map(|h| target_for(h, self.psk_file.as_deref()))
            .collect::<Result<_>>()?;
        let dir = self.output.out.clone().unwrap_or_else(|| {
            PathBuf::from(format!(
                "thrum-agg-{}",
                crate::clock::date_stamp(crate::clock::unix_now() as u64)
            ))
        });
        Ok(AggRequest {
            hosts,
            targets,
            tests,
            max_streams,
            step: self.step,
            interval: self.interval,
            burst: self.burst,
            burst_probe: self.burst_probe,
            dir,
            output: self.output.to_output(),
            store: self.store.to_request()?,
        })
    }

    /// The load generators as written (for --hosts-dns: the addresses its name has).
    fn host_list(&self) -> Result<Vec<String>> {
        match host_list(&self.hosts, &self.hosts_file, &self.hosts_dns)? {
            v if v.is_empty() => Err(hosts::HostsError::Missing.into()),
            v => Ok(v),
        }
    }

    fn test_list(&self) -> Result<Vec<AggTest>> {
        let mut v = Vec::new();
        for t in self.tests.split(',') {
            let t: AggTest = t.parse().map_err(anyhow::Error::msg)?;
            if !v.contains(&t) {
                v.push(t);
            }
        }
        Ok(v)
    }

    /// `--max-streams`, by default 2 × CPUs but at least one per server (as runemomniaggdemo.sh).
    fn max_streams(&self, servers: usize) -> Result<u32> {
        let n = self.max_streams.unwrap_or_else(|| {
            let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
            (2 * cpus).max(servers as u32)
        });
        if !(1..=MAX_STREAMS).contains(&n) {
            bail!("--max-streams {n} is out of range (accepted: 1..={MAX_STREAMS})");
        }
        Ok(n)
    }

    /// Check the durations against each other.
    fn check(&self) -> Result<()> {
        if self.step < MIN_STEP || self.step > MAX_STEP {
            bail!(
                "--step {:?} is out of range (accepted: 3s..=1h; a step loses 1 s at each end)",
                self.step
            );
        }
        let max_iv = self.step / 2;
        if self.interval < Duration::from_millis(10) || self.interval > max_iv {
            bail!(
                "--interval {:?} is out of range (accepted: 10ms..={max_iv:?}, half a step)",
                self.interval
            );
        }
        if self.burst_probe < Duration::from_millis(100)
            || self.burst_probe > Duration::from_secs(600)
        {
            bail!(
                "--burst-probe {:?} is out of range (accepted: 100ms..=600s)",
                self.burst_probe
            );
        }
        Ok(())
    }
}

#[derive(Debug, Args)]
pub struct FindBurstArgs {
    /// Prove this pre-shared key to the server(s) (HMAC-SHA256 challenge-response), as `thrum run --psk-file`.
    #[arg(long, value_name = "FILE")]
    pub psk_file: Option<PathBuf>,
    /// Server to probe (1-byte udp_rr, one flow).
    #[arg(short = 'H', long, value_name = "HOST[:PORT]")]
    pub host: String,
    /// Length of each probe.
    #[arg(long, default_value = "3s", value_parser = duration, value_name = "DURATION")]
    pub probe: Duration,
    /// Print the search as JSON.
    #[arg(long)]
    pub json: bool,
}

/// What `thrum find-burst` does, checked.
#[derive(Debug)]
pub struct FindBurstRequest {
    pub target: Target,
    /// The length of each probe.
    pub probe: Duration,
    /// `--json`: the search as JSON instead of the table.
    pub json: bool,
}

impl FindBurstArgs {
    /// The one conversion: `--probe`'s range, then the server.
    pub fn to_request(&self) -> Result<FindBurstRequest> {
        if self.probe < Duration::from_millis(100) || self.probe > Duration::from_secs(600) {
            bail!(
                "--probe {:?} is out of range (accepted: 100ms..=600s)",
                self.probe
            );
        }
        Ok(FindBurstRequest {
            target: target_for(&self.host, self.psk_file.as_deref())?,
            probe: self.probe,
            json: self.json,
        })
    }
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A JSON document thrum wrote (`run --json`, `ping --json`, `sweep --json`, or the results.json of `agg` or `curve`, or a directory holding one), or a netperf_TEST.log from runemomniaggdemo.sh (or a directory of them) with its .out files beside it.
    #[arg(value_name = "PATH")]
    pub path: PathBuf,
    #[command(flatten)]
    pub output: AggOutputArgs,
}

/// What `thrum report` does: the saved run and where it goes.
#[derive(Debug)]
pub struct ReportRequest {
    /// A results.json, netperf log, or a directory of either.
    pub path: PathBuf,
    pub output: AggOutput,
}

impl ReportArgs {
    /// The one conversion.
    pub fn to_request(&self) -> ReportRequest {
        ReportRequest {
            path: self.path.clone(),
            output: self.output.to_output(),
        }
    }
}

/// `--tests`' names, offered to completions (a list is checked whole later).
fn agg_test_names() -> Vec<&'static str> {
    crate::agg::kinds::AggTest::ALL
        .into_iter()
        .map(|t| t.name())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bursts() {
        assert_eq!(burst_choice("auto"), Ok(BurstChoice::Auto));
        assert_eq!(burst_choice("8"), Ok(BurstChoice::Fixed(8)));
        assert!(
            burst_choice("-1")
                .unwrap_err()
                .contains("accepted: auto or 0..=")
        );
    }
}
