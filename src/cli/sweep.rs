//! `thrum sweep`'s flags and the plain [`SweepRequest`] they become: the
//! grid of plans, each checked before anything runs, and the server.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;

use super::{duration, size_pair, target_for};
use crate::control::client::Target;
use crate::plan::{TestKind, TestPlan};

/// A comma-separated list of numbers (a newtype, so clap takes it as one value).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct U32List(pub Vec<u32>);

/// A comma-separated list of numbers (`0,1,2,4`).
fn u32_list(s: &str) -> Result<U32List, String> {
    let v: Result<Vec<u32>, _> = s.split(',').map(|x| x.trim().parse::<u32>()).collect();
    match v {
        Ok(v) if !v.is_empty() => Ok(U32List(v)),
        _ => Err(format!(
            "'{s}' is not a list of whole numbers (e.g. 0,1,2,4)"
        )),
    }
}

#[derive(Debug, Args)]
pub struct SweepArgs {
    /// Prove this pre-shared key to the server(s) (HMAC-SHA256 challenge-response), as `thrum run --psk-file`.
    #[arg(long, value_name = "FILE")]
    #[arg(help_heading = super::heading::TARGET)]
    pub psk_file: Option<PathBuf>,
    /// tcp_rr, udp_rr (or any test; burst applies to tcp_rr and udp_rr only).
    #[arg(value_name = "TEST", value_parser = super::TestName::TEST, hide_possible_values = true)]
    pub test: String,
    /// Server; absent: an embedded server on loopback.
    #[arg(short = 'H', long, value_name = "HOST[:PORT]")]
    #[arg(help_heading = super::heading::TARGET)]
    pub host: Option<String>,
    /// Bursts, the matrix's rows.
    #[arg(long, default_value = "0", value_parser = u32_list, value_name = "LIST")]
    #[arg(help_heading = super::heading::LOAD)]
    pub burst: U32List,
    /// Flows, the matrix's columns (each flow on its own worker thread, up to this host's CPUs).
    #[arg(long, default_value = "1", value_parser = u32_list, value_name = "LIST")]
    #[arg(help_heading = super::heading::LOAD)]
    pub flows: U32List,
    /// Request and response sizes, REQ[,RESP]; repeat the flag for one matrix per size.
    #[arg(short = 'r', long, default_value = "1,1", value_parser = size_pair, value_name = "REQ[,RESP]", action = clap::ArgAction::Append)]
    #[arg(help_heading = super::heading::SIZES)]
    pub rr_size: Vec<(u64, u64)>,
    /// Measurement window of each cell.
    #[arg(short = 'l', long, default_value = "5s", value_parser = duration, value_name = "DURATION")]
    #[arg(help_heading = super::heading::TARGET)]
    pub duration: Duration,
    /// Print every cell as JSON on standard output instead of the table.
    #[arg(long)]
    #[arg(help_heading = super::heading::OUTPUT)]
    pub json: bool,
    /// Also write the matrix as CSV to FILE (repeatable; --csv is the old name).
    #[arg(long, alias = "csv", value_name = "FILE")]
    #[arg(help_heading = super::heading::OUTPUT)]
    pub export_csv: Vec<PathBuf>,
    /// Also write every cell as JSON to FILE (repeatable).
    #[arg(long, value_name = "FILE")]
    #[arg(help_heading = super::heading::OUTPUT)]
    pub export_json: Vec<PathBuf>,
    #[command(flatten)]
    pub store: super::StoreArgs,
}

/// What `thrum sweep` does, checked: everything `cmd::sweep` reads.
#[derive(Debug)]
pub struct SweepRequest {
    pub test: TestKind,
    /// The request/response sizes, one matrix each (repeats dropped).
    pub rr_sizes: Vec<(u64, u64)>,
    /// The matrix's rows and columns.
    pub bursts: Vec<u32>,
    pub flows: Vec<u32>,
    /// Every cell's plan, validated: sizes, then bursts, then flows.
    pub plans: Vec<TestPlan>,
    /// The server; None: an embedded one on loopback.
    pub target: Option<Target>,
    /// `--json`: every cell as JSON instead of the table.
    pub json: bool,
    pub export_csv: Vec<PathBuf>,
    pub export_json: Vec<PathBuf>,
}

impl SweepArgs {
    /// The one conversion: the test, every cell's plan, then the server.
    pub fn to_request(&self) -> Result<SweepRequest> {
        let test: TestKind = self.test.parse()?;
        let (bursts, flows) = (self.burst.0.clone(), self.flows.0.clone());
        let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
        let mut rr_sizes = self.rr_size.clone();
        rr_sizes.dedup();
        let mut plans = Vec::new();
        for &rr in &rr_sizes {
            for &b in &bursts {
                for &f in &flows {
                    let mut p = TestPlan::new(test);
                    p.burst = b;
                    p.flows = f;
                    p.threads = f.clamp(1, ncpu);
                    p.duration_ns = self.duration.as_nanos() as u64;
                    (p.request_bytes, p.response_bytes) = rr;
                    p.validate().with_context(|| {
                        format!("sweep cell -r {},{} burst {b}, flows {f}", rr.0, rr.1)
                    })?;
                    plans.push(p);
                }
            }
        }
        let target = match &self.host {
            Some(h) => Some(target_for(h, self.psk_file.as_deref())?),
            None if self.psk_file.is_some() => {
                bail!("--psk-file needs -H: the embedded server asks for no key")
            }
            None => None,
        };
        Ok(SweepRequest {
            test,
            rr_sizes,
            bursts,
            flows,
            plans,
            target,
            json: self.json,
            export_csv: self.export_csv.clone(),
            export_json: self.export_json.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists() {
        assert_eq!(u32_list("0,1, 4").unwrap().0, vec![0, 1, 4]);
        assert!(u32_list("1,x").is_err());
    }
}
