//! The server's configuration: where it listens, its limits, its key and
//! its log, as `thrum server`'s flags (`cli::hardening`) or the embedded
//! server set them. Every session reads it; `session` runs them.

use std::net::SocketAddr;

use super::auth::Psk;
use super::limits::SessionLimits;
use super::log::{LogFormat, LogLimit, SessionLine};

#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    /// Data listeners bind a port from this range (inclusive) instead of an ephemeral one.
    pub data_ports: Option<(u16, u16)>,
    /// Serve one test, then exit.
    pub once: bool,
    pub limits: SessionLimits,
    /// Clients must prove this key (HMAC challenge-response) when set.
    pub psk: Option<Psk>,
    /// Log one line per session to stderr.
    pub log: bool,
    pub log_format: LogFormat,
    /// Session log lines a second (`--log-rate`), shared by all sessions.
    pub log_limit: LogLimit,
    /// Give every client the full provenance, keyed or not: the embedded
    /// server, whose only client is the process that started it. A
    /// standalone server gives it only to a client that proved `psk`.
    pub provenance_to_all: bool,
    /// `--agent`: also run tests as a client toward other thrum servers,
    /// for a controller that proved `psk` (`super::agent`).
    pub agent: bool,
}

impl ServerConfig {
    pub fn new(listen: SocketAddr) -> ServerConfig {
        ServerConfig {
            listen,
            data_ports: None,
            once: false,
            limits: SessionLimits::default(),
            psk: None,
            log: true,
            log_format: LogFormat::Text,
            log_limit: LogLimit::default(),
            provenance_to_all: false,
            agent: false,
        }
    }

    pub(crate) fn emit(&self, line: SessionLine<'_>) {
        if self.log {
            self.log_limit.emit(&line, self.log_format);
        }
    }
}
