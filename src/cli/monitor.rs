//! `thrum monitor`'s flags, checked into a plain [`MonitorRequest`]: the
//! configuration file read and checked (every probe's `args` parsed as its
//! command would parse them, at start-up and again on each reload),
//! the metrics address resolved.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};

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
    /// The file `config` was read from, read again on SIGHUP.
    pub config_path: PathBuf,
    pub metrics_listen: Option<SocketAddr>,
    pub db: Option<PathBuf>,
    pub dry_run: bool,
}

/// Read and check the configuration file: the TOML parsed into probes and
/// every probe's whole command line parsed as its command would parse it,
/// so that a flag that does not exist is refused before anything starts
/// (or, on a reload, before the probes in force are replaced).
fn read_config(path: &Path) -> Result<Config> {
    let text = crate::nofollow::read_to_string(path, &crate::nofollow::MONITOR_CONFIG)
        .with_context(|| format!("--config {}: cannot read it", path.display()))?;
    let config = config::parse(&text).map_err(|e| anyhow!("--config {}: {e}", path.display()))?;
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
                path.display(),
                i + 1,
                p.name,
                argv.join(" ")
            );
        }
    }
    Ok(config)
}

impl MonitorRequest {
    /// The configuration file read and checked again, as at start-up (a
    /// reload on SIGHUP).
    pub fn reread_config(&self) -> Result<Config> {
        read_config(&self.config_path)
    }
}

impl MonitorArgs {
    pub fn to_request(&self) -> Result<MonitorRequest> {
        let config = read_config(&self.config)?;
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
            config_path: self.config.clone(),
            metrics_listen,
            db: self.db.clone(),
            dry_run: self.dry_run,
        })
    }
}
