//! `thrum monitor`'s flags, checked into a plain [`MonitorRequest`]: the
//! configuration file read and checked (every probe's `args` parsed as its
//! command would parse them), the metrics address resolved.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;

use anyhow::{Context, Result, anyhow, bail};
use clap::{Args, Parser};

use crate::monitor::{Config, config, probe};

/// `thrum monitor --config FILE`.
#[derive(Debug, Args)]
pub struct MonitorArgs {
    /// The probes to run, as a TOML file (see docs/monitor.md).
    #[arg(short = 'c', long, value_name = "FILE")]
    pub config: PathBuf,
    /// Serve the probes' latest figures at http://ADDR/metrics (Prometheus text format), e.g. 0.0.0.0:12881.
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<String>,
    /// The results store the probes' runs are saved to (passed to them as THRUM_DB).
    #[arg(long, value_name = "PATH")]
    pub db: Option<PathBuf>,
    /// Check the file, print each probe's command line, and exit.
    #[arg(long)]
    pub dry_run: bool,
}

/// What `thrum monitor` does, checked.
#[derive(Clone, Debug)]
pub struct MonitorRequest {
    pub config: Config,
    pub metrics_listen: Option<SocketAddr>,
    pub db: Option<PathBuf>,
    pub dry_run: bool,
}

impl MonitorArgs {
    pub fn to_request(&self) -> Result<MonitorRequest> {
        let text = std::fs::read_to_string(&self.config)
            .with_context(|| format!("--config {}: cannot read it", self.config.display()))?;
        let config =
            config::parse(&text).map_err(|e| anyhow!("--config {}: {e}", self.config.display()))?;
        for (i, p) in config.probes.iter().enumerate() {
            let mut argv = vec!["thrum".to_string()];
            argv.extend(probe::command_args(p));
            if let Err(e) = super::Cli::try_parse_from(&argv) {
                let text = e.to_string();
                let first = text
                    .lines()
                    .next()
                    .unwrap_or("")
                    .trim_start_matches("error: ");
                bail!(
                    "--config {}: probe {} ({}).args: {first} (in `{}`)",
                    self.config.display(),
                    i + 1,
                    p.name,
                    argv.join(" ")
                );
            }
        }
        let metrics_listen = match &self.metrics_listen {
            None => None,
            Some(a) => Some(
                a.to_socket_addrs()
                    .ok()
                    .and_then(|mut v| v.next())
                    .ok_or_else(|| anyhow!("--metrics-listen {a:?} is not an address (accepted: HOST:PORT such as 127.0.0.1:12881 or [::]:12881)"))?,
            ),
        };
        Ok(MonitorRequest {
            config,
            metrics_listen,
            db: self.db.clone(),
            dry_run: self.dry_run,
        })
    }
}
