//! `thrum monitor`: probes on a schedule, their latest figures served to
//! Prometheus. The configuration file lists probes ([`config`]); the
//! scheduler ([`schedule`]) starts each on its jittered period, never two
//! to one host at once; a run is `thrum run` or `thrum ping` as a child
//! process with `--json` ([`probe`]), whose figures and the runs' counters
//! ([`metrics`]; latency in fixed [`buckets`] that add up across probes)
//! the `/metrics` endpoint ([`http`]) serves in the Prometheus text
//! format. The command itself (signals, the log) is `cmd::monitor`. See
//! docs/monitor.md.

pub mod buckets;
pub mod config;
pub mod http;
pub mod metrics;
pub mod probe;
pub mod schedule;

pub use config::{Config, ConfigError, Probe, ProbeTest};
