//! The server's log: one line per session on stderr, as text for people or
//! as a JSON object per line (`--log-format json`) for collectors.
//!
//! A line names the peer, the test (when the session got that far), the
//! outcome and how long the session lasted. Messages come from errors the
//! server itself formats; none carries key material. They may quote what a
//! client sent (a serde error names an unknown value), so every message is
//! escaped and cut to [`crate::text::MESSAGE_CHARS`] before it is written:
//! a client can neither forge a line nor write a terminal escape, and the
//! JSON format stays one object per line.

use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;

use serde::Serialize;

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// How a session ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The test ran and the final report was sent.
    Ok,
    /// Refused before any test ran: authentication, limits, malformed input, timeouts.
    Refused,
    /// The test started and then failed (client vanished, data path error).
    Failed,
    /// Not served: --max-sessions sessions were running.
    Busy,
}

#[derive(Debug, Serialize)]
pub struct SessionLine<'a> {
    pub unix_s: f64,
    pub peer: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub test: Option<&'a str>,
    pub outcome: Outcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub duration_s: f64,
}

impl<'a> SessionLine<'a> {
    pub fn new(
        peer: SocketAddr,
        test: Option<&'a str>,
        outcome: Outcome,
        error: Option<&'a str>,
        lasted: Duration,
    ) -> SessionLine<'a> {
        SessionLine {
            unix_s: crate::clock::unix_now(),
            peer: peer.to_string(),
            test,
            outcome,
            error: error.map(crate::text::message),
            duration_s: lasted.as_secs_f64(),
        }
    }

    pub fn render(&self, format: LogFormat) -> String {
        match format {
            LogFormat::Json => serde_json::to_string(self).expect("log lines serialise"),
            LogFormat::Text => {
                let outcome = match self.outcome {
                    Outcome::Ok => "ok",
                    Outcome::Refused => "refused",
                    Outcome::Failed => "failed",
                    Outcome::Busy => "busy",
                };
                let mut s = format!("thrum server: session {}", self.peer);
                if let Some(t) = self.test {
                    s += &format!(" {t}");
                }
                s += &format!(": {outcome} after {:.1} s", self.duration_s);
                if let Some(e) = &self.error {
                    s += &format!(": {e}");
                }
                s
            }
        }
    }

    /// Write the line to stderr in one call, so lines of concurrent sessions never interleave.
    pub fn emit(&self, format: LogFormat) {
        let mut line = self.render(format);
        line.push('\n');
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }
}

/// A line about the server itself, not a session (it stopped, accept failed),
/// in the same format as the session lines.
pub fn server_event(format: LogFormat, event: &str) {
    let event = crate::text::message(event);
    let line = match format {
        LogFormat::Text => format!("thrum server: {event}\n"),
        LogFormat::Json => {
            let unix_s = crate::clock::unix_now();
            format!(
                "{}\n",
                serde_json::json!({"unix_s": unix_s, "event": event})
            )
        }
    };
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_formats() {
        let peer: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        let l = SessionLine::new(
            peer,
            Some("tcp_rr"),
            Outcome::Refused,
            Some("authentication failed"),
            Duration::from_millis(1500),
        );
        let t = l.render(LogFormat::Text);
        assert!(
            t.contains("127.0.0.1:5000 tcp_rr: refused after 1.5 s: authentication failed"),
            "{t}"
        );
        let j: serde_json::Value = serde_json::from_str(&l.render(LogFormat::Json)).unwrap();
        assert_eq!(j["peer"], "127.0.0.1:5000");
        assert_eq!(j["test"], "tcp_rr");
        assert_eq!(j["outcome"], "refused");
        assert_eq!(j["error"], "authentication failed");
    }

    /// What a client can put in an error (an unknown value quoted by serde,
    /// its software name) cannot forge a line, write an escape or a NUL,
    /// or make a line longer than a message may be.
    #[test]
    fn client_text_cannot_forge_or_flood_a_line() {
        let peer: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        let forged = format!(
            "x\nthrum server: session 10.0.0.1:1 tcp_rr: ok after 1.0 s\x1b[2J\0{}",
            "y".repeat(1 << 20)
        );
        let l = SessionLine::new(peer, None, Outcome::Refused, Some(&forged), Duration::ZERO);
        for format in [LogFormat::Text, LogFormat::Json] {
            let line = l.render(format);
            assert!(!line.contains('\n') && !line.contains('\x1b') && !line.contains('\0'));
            assert!(
                line.len() < 2 * crate::text::MESSAGE_CHARS,
                "{} bytes",
                line.len()
            );
        }
        let j: serde_json::Value = serde_json::from_str(&l.render(LogFormat::Json)).unwrap();
        assert!(j["error"].as_str().unwrap().starts_with("x\\nthrum server"));
    }
}
