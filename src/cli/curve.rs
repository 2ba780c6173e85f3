//! Command-line types of `thrum curve` and their checks: `--rates`,
//! `--slo` and the test are refused before anything runs, naming the flag
//! and what it accepts, and the rest becomes the closed-loop plan every
//! step starts from.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Result, bail};
use clap::Args;

use super::{FlowArgs, duration, ns};
use crate::control::client::Target;
use crate::curve::{Rates, Slo};
use crate::plan::{TestKind, TestPlan};

fn rates(s: &str) -> Result<Rates, String> {
    s.parse()
        .map_err(|e: crate::curve::CurveError| e.to_string())
}

fn slo(s: &str) -> Result<Slo, String> {
    s.parse()
        .map_err(|e: crate::curve::CurveError| e.to_string())
}

/// `thrum curve`'s flags. The flows' are [`FlowArgs`], as `thrum run`'s,
/// said here in curve's words, and `--rr-timeout` keeps its own default
/// (50ms: curve runs no mix, whose probes wait longer).
#[derive(Debug, Args)]
#[command(
    mut_arg("flows", |a| a.long_help(None::<&str>).help("Number of flows; the offered rate is spread over them")),
    mut_arg("threads", |a| a.long_help(None::<&str>).help("Worker threads on each end")),
    mut_arg("rr_size", |a| a.long_help(None::<&str>).help("Request and response sizes in bytes, REQ[,RESP]")),
    mut_arg("nodelay", |a| a),
    mut_arg("arrivals", |a| a.long_help(None::<&str>).help("`fixed` spacing, or `poisson` arrivals of the same mean rate")),
    mut_arg("max_inflight", |a| a.long_help(None::<&str>).help("The most transactions in flight per flow")),
    mut_arg("rr_timeout", |a| a
        .long_help(None::<&str>)
        .help("udp_rr: a transaction without a response after this is lost")
        .default_value(CURVE_RR_TIMEOUT)),
    // mut_arg moves an option to the end, and clap lists headings in the
    // order of their first option: the rest follow, so that the headings
    // keep run's order.
    mut_arg("rates", |a| a),
    mut_arg("slo", |a| a),
    mut_arg("json", |a| a),
    mut_arg("out", |a| a),
)]
pub struct CurveArgs {
    /// tcp_rr, udp_rr, tcp_crr or tcp_cc: the tests with an open loop (--rate).
    #[arg(value_name = "TEST", value_parser = super::Offered::OPEN_LOOP_TEST, hide_possible_values = true)]
    pub test: String,
    /// Server as HOST or HOST:PORT; absent: an embedded server on loopback.
    #[arg(short = 'H', long, value_name = "HOST[:PORT]")]
    #[arg(help_heading = super::heading::TARGET)]
    pub host: Option<String>,
    /// Prove this pre-shared key to the server, as `thrum run --psk-file`.
    #[arg(long, value_name = "FILE")]
    #[arg(help_heading = super::heading::TARGET)]
    pub psk_file: Option<PathBuf>,
    /// Measurement window of each step.
    #[arg(short = 'l', long, default_value = "5s", value_parser = duration, value_name = "DURATION")]
    #[arg(help_heading = super::heading::TARGET)]
    pub duration: Duration,
    /// Traffic before each step's window.
    #[arg(long, default_value = "1s", value_parser = duration, value_name = "DURATION")]
    #[arg(help_heading = super::heading::TARGET)]
    pub warmup: Duration,
    /// Interim sample period; default a tenth of a step.
    ///
    /// Interim sample period; default a tenth of a step (100ms..=1s), so
    /// that growth of latency over a step can be seen (it needs 6 intervals).
    #[arg(short = 'i', long, value_parser = duration, value_name = "DURATION")]
    #[arg(help_heading = super::heading::TARGET)]
    pub interval: Option<Duration>,
    /// auto: length of the closed-loop probe.
    #[arg(long, default_value = "2s", value_parser = duration, value_name = "DURATION")]
    #[arg(help_heading = super::heading::TARGET)]
    pub probe: Duration,
    #[command(flatten)]
    pub flow: FlowArgs,
    #[command(flatten)]
    pub store: super::StoreArgs,
    /// Offered rates in transactions/s (1000,5k,20k), or auto.
    ///
    /// Offered rates in transactions/s, strictly increasing (1000,5k,20k), or
    /// auto: probe the closed-loop maximum, step geometrically from 5 % to
    /// 120 % of it (and up to 4 steps beyond while none saturated), then
    /// add steps between the last good one and the turn.
    #[arg(long, default_value = "auto", value_parser = rates, value_name = "LIST|auto")]
    #[arg(help_heading = super::heading::OPEN_LOOP)]
    pub rates: Rates,
    /// A bound on response time the knee must meet, PCT=DURATION.
    ///
    /// A bound on response time, PCT=DURATION (p50, p90, p99, p99.9 or max):
    /// the knee is the highest achieved rate below saturation that meets it.
    #[arg(long, value_parser = slo, value_name = "PCT=DURATION")]
    #[arg(help_heading = super::heading::OPEN_LOOP)]
    pub slo: Option<Slo>,
    /// Print the record (thrum.curve.v1) instead of the table.
    ///
    /// Print the record (results.json's document, schema thrum.curve.v1) on
    /// standard output instead of the table.
    #[arg(long)]
    #[arg(help_heading = super::heading::OUTPUT)]
    pub json: bool,
    /// Directory for results.json, curve.csv, curve.svg and report.html.
    ///
    /// Directory for results.json (schema thrum.curve.v1), curve.csv,
    /// curve.svg and report.html.
    #[arg(long, value_name = "DIR")]
    #[arg(help_heading = super::heading::OUTPUT)]
    pub out: Option<PathBuf>,
}

/// `--rr-timeout`'s default in a curve (in `run` the plan's, or a mix's).
const CURVE_RR_TIMEOUT: &str = "50ms";

/// The interval for a step of `step`: a tenth of it, within 100ms..=1s.
fn default_interval(step: Duration) -> Duration {
    (step / 10).clamp(Duration::from_millis(100), Duration::from_secs(1))
}

/// What `thrum curve` does, checked: everything `cmd::curve` reads.
#[derive(Debug)]
pub struct CurveRequest {
    /// The closed-loop plan every step (and auto's probe) starts from.
    pub base: TestPlan,
    /// `--rates`: the offered rates, or auto.
    pub rates: Rates,
    /// `--slo`: the bound the knee must meet.
    pub slo: Option<Slo>,
    /// auto: the length of the closed-loop probe.
    pub probe: Duration,
    /// `--json`: the record on standard output instead of the table.
    pub json: bool,
    /// `--out DIR`: results.json, curve.csv, curve.svg, report.html.
    pub out: Option<PathBuf>,
    /// The server; None: an embedded one on loopback.
    pub target: Option<Target>,
    /// Where the curve is saved, and its labels.
    pub store: super::StoreRequest,
}

impl CurveArgs {
    /// The one conversion: the plan, `--out`, the server, then the store.
    pub fn to_request(&self) -> Result<CurveRequest> {
        let base = self.base_plan()?;
        if let Some(d) = &self.out
            && d.exists()
            && !d.is_dir()
        {
            bail!(
                "--out {}: exists and is not a directory (accepted: a directory, created if missing)",
                d.display()
            );
        }
        Ok(CurveRequest {
            base,
            rates: self.rates.clone(),
            slo: self.slo,
            probe: self.probe,
            json: self.json,
            out: self.out.clone(),
            target: self.target()?,
            store: self.store.to_request()?,
        })
    }

    /// The closed-loop plan of every step (and of auto's probe): a test
    /// without an open loop is refused, and the plan is checked as it runs
    /// with an offered rate.
    fn base_plan(&self) -> Result<TestPlan> {
        let test: TestKind = self.test.parse()?;
        let mut p = TestPlan::new(test);
        self.flow.apply(&mut p);
        p.duration_ns = ns(self.duration);
        p.warmup_ns = ns(self.warmup);
        p.interval_ns = ns(self
            .interval
            .unwrap_or_else(|| default_interval(self.duration)));
        let open_loop = |t: &crate::plan::Traits| t.rate == crate::plan::Rate::Transactions;
        if !open_loop(test.traits()) {
            let applies = TestKind::named(open_loop);
            bail!("TEST: {test} has no open loop, so no curve (accepted: {applies})");
        }
        let mut open = p.clone();
        open.offered_per_s = Some(1);
        open.validate()?;
        if self.probe < Duration::from_millis(100) || self.probe > Duration::from_secs(600) {
            bail!(
                "--probe {:?} is out of range (accepted: 100ms..=600s)",
                self.probe
            );
        }
        Ok(p)
    }

    /// The server to use; None means start an embedded one.
    fn target(&self) -> Result<Option<Target>> {
        match &self.host {
            Some(h) => Ok(Some(super::target_for(h, self.psk_file.as_deref())?)),
            None if self.psk_file.is_some() => {
                bail!("--psk-file needs -H: the embedded server asks for no key")
            }
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn parse(args: &[&str]) -> Result<CurveArgs, clap::Error> {
        #[derive(Parser)]
        struct W {
            #[command(flatten)]
            a: CurveArgs,
        }
        W::try_parse_from([&["thrum"], args].concat()).map(|w| w.a)
    }

    /// `curve` flattens the flows' options it shares with `run`, and no
    /// more: a flag added to `FlowArgs` would appear here too.
    #[test]
    fn curve_takes_its_own_flags_only() {
        use clap::CommandFactory;
        let cmd = crate::cli::Cli::command();
        let curve = cmd.find_subcommand("curve").unwrap();
        let mut longs: Vec<&str> = curve.get_arguments().filter_map(|a| a.get_long()).collect();
        longs.sort_unstable();
        assert_eq!(
            longs,
            [
                "arrivals",
                "db",
                "duration",
                "flows",
                "host",
                "interval",
                "json",
                "label",
                "max-inflight",
                "name",
                "no-save",
                "nodelay",
                "out",
                "probe",
                "psk-file",
                "rates",
                "rr-size",
                "rr-timeout",
                "slo",
                "threads",
                "warmup"
            ]
        );
    }

    #[test]
    fn plans_and_refusals() {
        let a = parse(&["tcp_rr", "--rates", "100,200", "-l", "1s"]).unwrap();
        let p = a.base_plan().unwrap();
        assert_eq!(p.rr_timeout_ns, 50_000_000);
        assert_eq!(p.offered_per_s, None);
        assert_eq!(p.interval_ns, 100_000_000);
        let e = parse(&["tcp_stream"]).unwrap().base_plan().unwrap_err();
        assert!(e.to_string().contains("no open loop"), "{e}");
        assert!(e.to_string().contains("tcp_rr"), "{e}");
        let e = parse(&["tcp_rr", "--rates", "200,100"]).unwrap_err();
        assert!(e.to_string().contains("--rates"), "{e}");
        assert_eq!(
            default_interval(Duration::from_secs(60)),
            Duration::from_secs(1)
        );
    }
}
