//! `thrum mesh`'s flags ([`MeshArgs`]) and the plain [`MeshRequest`] they
//! become: the hosts (as `agg --hosts` and `run --from` read them), each
//! resolved, the key they share, the plan every pair runs (the test and
//! `run`'s load options), how many pairs run at once, and the outputs.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;

use super::{LoadArgs, duration, ns, resolve};
use crate::fleet::mesh::{MAX_HOSTS, MeshPlan};
use crate::plan::{TestKind, TestPlan};

#[derive(Debug, Args)]
pub struct MeshArgs {
    /// The test every pair runs (default tcp_stream): any single test but capacity.
    #[arg(value_name = "TEST", value_parser = super::TestName::TEST, hide_possible_values = true)]
    pub test: Option<String>,
    /// The hosts: HOST[:PORT],...; each a `thrum server --agent --psk-file FILE`.
    ///
    /// The hosts, HOST[:PORT],... (port 12880 by default), each a `thrum server --agent --psk-file FILE`: every ordered pair runs the test, the first host sending as an agent to the second's server. At least 2, at most 64.
    #[arg(
        long,
        value_name = "HOST[:PORT],...",
        conflicts_with_all = ["hosts_file", "hosts_dns"],
        required_unless_present_any = ["hosts_file", "hosts_dns"]
    )]
    #[arg(help_heading = super::heading::TARGET)]
    pub hosts: Option<String>,
    /// File of hosts: one HOST[:PORT] per line, or netperf's remote_hosts form, read as data.
    #[arg(long, value_name = "FILE", conflicts_with = "hosts_dns")]
    #[arg(help_heading = super::heading::TARGET)]
    pub hosts_file: Option<PathBuf>,
    /// Every address of NAME[:PORT] as a host (a Kubernetes headless Service names every ready pod).
    #[arg(long, value_name = "NAME[:PORT]")]
    #[arg(help_heading = super::heading::TARGET)]
    pub hosts_dns: Option<String>,
    /// The hosts' pre-shared key (FILE): agents act only for a controller that proves it.
    #[arg(long, value_name = "FILE", required = true)]
    #[arg(help_heading = super::heading::TARGET)]
    pub psk_file: PathBuf,
    /// Pairs run at once (default 1: pairs that share a link would each read a share of it).
    #[arg(long, default_value_t = 1, value_name = "N")]
    #[arg(help_heading = super::heading::TARGET)]
    pub parallel: u32,
    /// Length of each pair's measurement window.
    #[arg(short = 'l', long, default_value = "10s", value_parser = duration, value_name = "DURATION")]
    #[arg(help_heading = super::heading::TARGET)]
    pub duration: Duration,
    /// Interim sample period.
    #[arg(short = 'i', long, default_value = "1s", value_parser = duration, value_name = "DURATION")]
    #[arg(help_heading = super::heading::TARGET)]
    pub interval: Duration,
    /// Traffic before each pair's measurement window.
    #[arg(long, default_value = "1s", value_parser = duration, value_name = "DURATION")]
    #[arg(help_heading = super::heading::TARGET)]
    pub warmup: Duration,
    /// Use IPv4 only.
    #[arg(short = '4', conflicts_with = "ipv6")]
    #[arg(help_heading = super::heading::TARGET)]
    pub ipv4: bool,
    /// Use IPv6 only.
    #[arg(short = '6')]
    #[arg(help_heading = super::heading::TARGET)]
    pub ipv6: bool,
    #[command(flatten)]
    pub load: LoadArgs,
    /// Print the mesh (every pair's result and the matrix) as JSON instead of the table.
    #[arg(long)]
    #[arg(help_heading = super::heading::OUTPUT)]
    pub json: bool,
    /// Also write the mesh as JSON to FILE (repeatable).
    #[arg(long, value_name = "FILE")]
    #[arg(help_heading = super::heading::OUTPUT)]
    pub export_json: Vec<PathBuf>,
    /// Draw the matrix as a heat map (SVG) to FILE.
    #[arg(long, value_name = "FILE")]
    #[arg(help_heading = super::heading::OUTPUT)]
    pub chart: Option<PathBuf>,
    #[command(flatten)]
    pub store: super::StoreArgs,
}

/// What `thrum mesh` does, checked: everything `cmd::mesh` reads.
#[derive(Debug)]
pub struct MeshRequest {
    pub mesh: MeshPlan,
    pub json: bool,
    pub export_json: Vec<PathBuf>,
    pub chart: Option<PathBuf>,
    /// Where the pairs and the matrix are saved, and their labels.
    pub store: super::StoreRequest,
}

impl MeshArgs {
    /// The one conversion: the plan, the hosts, the key.
    pub fn to_request(&self) -> Result<MeshRequest> {
        let plan = self.to_plan()?;
        if !(1..=MAX_HOSTS as u32).contains(&self.parallel) {
            bail!(
                "--parallel {}: pairs run at once (accepted: 1..={MAX_HOSTS})",
                self.parallel
            );
        }
        let names = super::host_list(&self.hosts, &self.hosts_file, &self.hosts_dns)?;
        if !(2..=MAX_HOSTS).contains(&names.len()) {
            bail!(
                "--hosts names {} host(s) (accepted: 2..={MAX_HOSTS}: a mesh is every ordered pair)",
                names.len()
            );
        }
        let mut seen = std::collections::BTreeSet::new();
        if let Some(h) = names.iter().find(|h| !seen.insert(h.as_str())) {
            bail!(
                "--hosts names {} twice (each host is one row and one column)",
                crate::text::echo(h)
            );
        }
        let hosts = names
            .into_iter()
            .map(|h| {
                let addr = resolve(&h, self.ipv4, self.ipv6)
                    .with_context(|| format!("--hosts: host '{}'", crate::text::echo(&h)))?;
                Ok((h, addr))
            })
            .collect::<Result<Vec<_>>>()?;
        let psk = crate::control::auth::Psk::from_file(&self.psk_file)
            .with_context(|| format!("--psk-file {}", self.psk_file.display()))?;
        Ok(MeshRequest {
            mesh: MeshPlan {
                hosts,
                psk: Some(psk),
                bind: None,
                plan,
                parallel: self.parallel as usize,
            },
            json: self.json,
            export_json: self.export_json.clone(),
            chart: self.chart.clone(),
            store: self.store.to_request()?,
        })
    }

    /// The plan every pair runs, validated; what a run from an agent does
    /// not take is refused as `run --from` refuses it.
    fn to_plan(&self) -> Result<TestPlan> {
        let test: TestKind = match &self.test {
            Some(t) => t.parse()?,
            None => TestKind::TcpStream,
        };
        if test.traits().rate == crate::plan::Rate::ProbeBits {
            bail!(
                "capacity measures the path from one sender by its own probe: run it per pair with `thrum run capacity`"
            );
        }
        let mut p = TestPlan::new(test);
        self.load.apply(&mut p);
        p.duration_ns = ns(self.duration);
        p.warmup_ns = ns(self.warmup);
        p.interval_ns = ns(self.interval);
        p.validate()?;
        Ok(p)
    }
}
