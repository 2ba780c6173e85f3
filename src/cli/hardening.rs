//! The server's hardening flags: authentication, per-session limits, what a
//! client may set on the server's sockets (TOS, marks, transmit delay), log format.
//!
//! Kept apart from `cli.rs` so that the flags of the server's security model
//! read in one place; like the rest of `cli`, they are checked here and
//! turned into the plain [`ServerConfig`] the server takes.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::{Args, ValueEnum};

use crate::control::auth::Psk;
use crate::control::limits::{
    AllowedMarks, DEFAULT_MAX_DURATION_NS, DEFAULT_MAX_FLOWS, DEFAULT_MAX_SESSION_MEMORY,
    DEFAULT_MAX_THREADS, default_max_ports_per_client, default_max_sessions_per_client,
    default_max_spin_threads_per_client,
};
use crate::control::log::LogFormat;
use crate::control::server::ServerConfig;
use crate::plan::limits;
use crate::plan::sockets::MAX_TCP_TX_DELAY_US;
use crate::units::{parse_duration, parse_size};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogFormatArg {
    /// One readable line per session.
    Text,
    /// One JSON object per line: unix_s, peer, test, outcome, error, duration_s.
    Json,
}

fn max_flows(s: &str) -> Result<u32, String> {
    let n: u32 = s.parse().map_err(|_| {
        format!(
            "'{s}' is not a number (accepted: 1..={})",
            limits::MAX_FLOWS
        )
    })?;
    if !(1..=limits::MAX_FLOWS).contains(&n) {
        return Err(format!(
            "{n} is out of range (accepted: 1..={})",
            limits::MAX_FLOWS
        ));
    }
    Ok(n)
}

fn max_duration(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s).map_err(|e| e.to_string())?;
    let max = Duration::from_nanos(limits::MAX_DURATION_NS);
    if d < Duration::from_secs(1) || d > max {
        return Err(format!("{s} is out of range (accepted: 1s..=24h)"));
    }
    Ok(d)
}

fn memory(s: &str) -> Result<u64, String> {
    let b = parse_size(s).map_err(|e| e.to_string())?.0;
    if !(1 << 20..=1 << 40).contains(&b) {
        return Err(format!("{s} is out of range (accepted: 1M..=1T)"));
    }
    Ok(b)
}

/// `--allow-mark`: `any`, or marks (decimal or 0x hex), comma-separated.
fn mark_list(s: &str) -> Result<AllowedMarks, String> {
    if s.trim() == "any" {
        return Ok(AllowedMarks::Any);
    }
    let marks = s
        .split(',')
        .map(|m| {
            let m = m.trim();
            match m.strip_prefix("0x").or_else(|| m.strip_prefix("0X")) {
                Some(hex) => u32::from_str_radix(hex, 16),
                None => m.parse::<u32>(),
            }
            .map_err(|_| format!("'{m}' is not a mark (accepted: numbers 0..=4294967295, 0x for hex, comma-separated, or 'any')"))
        })
        .collect::<Result<Vec<u32>, String>>()?;
    Ok(AllowedMarks::These(marks))
}

/// `--allow-tx-delay`: 1us up to what the kernel takes.
fn tx_delay(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s).map_err(|e| e.to_string())?;
    let max = Duration::from_micros(MAX_TCP_TX_DELAY_US.into());
    if d < Duration::from_micros(1) || d > max {
        return Err(format!(
            "{s} is out of range (accepted: 1us..={MAX_TCP_TX_DELAY_US}us, about 268s)"
        ));
    }
    Ok(d)
}

#[derive(Debug, Args)]
pub struct HardeningArgs {
    /// Require clients to prove this pre-shared key (HMAC-SHA256 challenge-response); the file holds 16..=4096 bytes.
    #[arg(long, value_name = "FILE")]
    pub psk_file: Option<PathBuf>,
    /// Flows (and worker threads) one session may ask for (1..=100000).
    #[arg(long, default_value_t = DEFAULT_MAX_FLOWS, value_parser = max_flows, value_name = "N")]
    pub max_flows: u32,
    /// Longest test a session may ask for, warm-up and cool-down included (1s..=24h).
    #[arg(long, default_value = "1h", value_parser = max_duration, value_name = "DURATION")]
    pub max_duration: Duration,
    /// Buffer memory one session may make the server allocate (1M..=1T; K/M/G = 2^10..).
    #[arg(long, default_value = "1G", value_parser = memory, value_name = "SIZE")]
    pub max_session_memory: u64,
    /// Memory all sessions together may make the server allocate: their buffers and threads (1M..=1T; default half of the machine's memory).
    #[arg(long, value_parser = memory, value_name = "SIZE")]
    pub max_memory: Option<u64>,
    /// Threads all sessions together may make the server run, a worker per --threads and one per session (2..=1000000).
    #[arg(long, default_value_t = DEFAULT_MAX_THREADS, value_parser = clap::value_parser!(u64).range(2..=1_000_000), value_name = "N")]
    pub max_threads: u64,
    /// Sessions one client may hold at once, from its key (without --psk-file: its accepted spec) to their end; a client is an IPv4 address or an IPv6 /64 (1..=4096; default a quarter of --max-sessions).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=4096), value_name = "N")]
    pub max_sessions_per_client: Option<u32>,
    /// Data ports (listeners, UDP sockets) all sessions together may hold (1..=1000000; default a quarter of the ephemeral range, net.ipv4.ip_local_port_range, so that the host keeps ports of its own).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_000_000), value_name = "N")]
    pub max_ports: Option<u64>,
    /// Data ports one client's sessions may hold together, so that one address cannot take them all (1..=1000000; default its share of the sessions: --max-ports × --max-sessions-per-client / --max-sessions, a quarter).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_000_000), value_name = "N")]
    pub max_ports_per_client: Option<u64>,
    /// Accept any TOS byte from clients (--tos, a mix part's tos=/dscp=); by default only DSCP classes below CS6 (TOS < 0xc0) with the ECN bits clear.
    #[arg(long)]
    pub allow_tos_any: bool,
    /// Firewall marks (SO_MARK) clients may put on the server's data sockets (--mark): numbers, 0x for hex, comma-separated, or `any`; by default none (a mark steers policy routing and netfilter).
    #[arg(long, value_parser = mark_list, value_name = "LIST")]
    pub allow_mark: Option<AllowedMarks>,
    /// Longest TCP_TX_DELAY clients may put on the server's data sockets (--tcp-tx-delay; up to 268s); by default none.
    #[arg(long, value_parser = tx_delay, value_name = "DURATION")]
    pub allow_tx_delay: Option<Duration>,
    /// Worker threads all sessions together may make the server spin with --spin, each taking a whole CPU for its test: the server's total of spinning workers, not one session's (1..=4096; default the CPUs this server may run on).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=4096), value_name = "N")]
    pub max_spin_threads: Option<u32>,
    /// Spinning workers (--max-spin-threads) one client's sessions may hold together, so that one address cannot keep every CPU spinning (1..=4096; default half of --max-spin-threads, at least 1).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=4096), value_name = "N")]
    pub max_spin_threads_per_client: Option<u32>,
    /// Also run tests as a client toward other thrum servers, for a controller that proves the key (`thrum run --from`); needs --psk-file.
    ///
    /// An agent sends traffic on another's behalf: it takes a run only from a controller that answered --psk-file's challenge, only toward a thrum server that answers the handshake (with the same key when it asks for one), and within this server's limits (--max-flows, --max-duration, --max-session-memory, --max-memory, --max-threads, --max-spin-threads, --max-sessions, --allow-mark, --allow-tx-delay, --allow-tos-any); see docs/fleet.md.
    #[arg(long)]
    pub agent: bool,
    /// Session log lines per second, in bursts of ten seconds' worth; the lines dropped are counted in the next line written (0: no limit).
    #[arg(long, default_value_t = crate::control::log::DEFAULT_LOG_RATE, value_name = "LINES")]
    pub log_rate: u32,
    /// Format of the per-session log lines on stderr.
    #[arg(long, value_enum, default_value_t = LogFormatArg::Text, value_name = "FORMAT")]
    pub log_format: LogFormatArg,
}

impl HardeningArgs {
    /// Fill the server's configuration; reads the key file. Returns what
    /// the operator should hear about it (a key others can read, or one
    /// reached through a link someone could swap).
    pub fn apply(&self, cfg: &mut ServerConfig) -> Result<Vec<String>> {
        cfg.limits.max_flows = self.max_flows;
        cfg.limits.max_duration_ns = self.max_duration.as_nanos() as u64;
        cfg.limits.max_session_memory_bytes = self.max_session_memory;
        if let Some(m) = self.max_memory {
            cfg.limits.max_memory_bytes = m;
        }
        cfg.limits.max_threads = self.max_threads;
        // Read after --max-sessions, which the caller has set.
        cfg.limits.max_sessions_per_client = self
            .max_sessions_per_client
            .unwrap_or_else(|| default_max_sessions_per_client(cfg.limits.max_sessions));
        if let Some(p) = self.max_ports {
            cfg.limits.max_ports = p;
        }
        let l = &cfg.limits;
        cfg.limits.max_ports_per_client = self.max_ports_per_client.unwrap_or_else(|| {
            default_max_ports_per_client(l.max_ports, l.max_sessions_per_client, l.max_sessions)
        });
        cfg.limits.allow_tos_any = self.allow_tos_any;
        cfg.limits.allowed_marks = self.allow_mark.clone().unwrap_or_default();
        cfg.limits.max_tx_delay_us = self
            .allow_tx_delay
            // Rounded: the parser's seconds are a float (5ms is 4.999… ms).
            .map_or(0, |d| ((d.as_nanos() + 500) / 1000) as u32);
        if let Some(n) = self.max_spin_threads {
            cfg.limits.max_spin_threads = n;
        }
        cfg.limits.max_spin_threads_per_client = self
            .max_spin_threads_per_client
            .unwrap_or_else(|| default_max_spin_threads_per_client(cfg.limits.max_spin_threads));
        cfg.log_limit = crate::control::log::LogLimit::new(self.log_rate);
        cfg.log_format = match self.log_format {
            LogFormatArg::Text => LogFormat::Text,
            LogFormatArg::Json => LogFormat::Json,
        };
        cfg.psk = match &self.psk_file {
            Some(p) => Some(Psk::from_file(p)?),
            None => None,
        };
        if self.agent && cfg.psk.is_none() {
            anyhow::bail!(
                "--agent needs --psk-file: an agent sends traffic for whoever holds its key, so it must have one (make one with `head -c 32 /dev/urandom | base64 > FILE`, and give the controller the same file)"
            );
        }
        cfg.agent = self.agent;
        Ok(self
            .psk_file
            .as_deref()
            .map(key_file_warnings)
            .unwrap_or_default())
    }
}

/// What is unsafe about the key file at `path`: readable or writable by
/// group or others, or reached through a symbolic link.
fn key_file_warnings(path: &std::path::Path) -> Vec<String> {
    use std::os::unix::fs::PermissionsExt;
    let mut w = Vec::new();
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        w.push(format!(
            "--psk-file {} is a symbolic link: whoever can change the link chooses the key",
            path.display()
        ));
    }
    if let Ok(m) = std::fs::metadata(path) {
        let mode = m.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            w.push(format!(
                "--psk-file {} has mode {mode:03o}: others can read the key (chmod 600)",
                path.display()
            ));
        }
    }
    w
}

// The defaults above are spelled twice (as strings for clap); keep them equal.
const _: () = assert!(DEFAULT_MAX_DURATION_NS == 3600 * 1_000_000_000);
const _: () = assert!(DEFAULT_MAX_SESSION_MEMORY == 1 << 30);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowed_marks_and_delays_parse() {
        assert_eq!(
            mark_list("0x4000, 7,0XfF"),
            Ok(AllowedMarks::These(vec![0x4000, 7, 0xff]))
        );
        assert_eq!(mark_list("any"), Ok(AllowedMarks::Any));
        assert!(
            mark_list("0x4000,nine")
                .unwrap_err()
                .contains("'nine' is not a mark")
        );
        assert_eq!(tx_delay("5ms"), Ok(Duration::from_millis(5)));
        assert!(tx_delay("300s").unwrap_err().contains("out of range"));
    }
}
