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
//!
//! Lines are rate-limited ([`LogLimit`], a token bucket): a client that
//! opens connections as fast as it can (`thrum ping --tcp PORT -c 3000 -i
//! 1ms` wrote 3,000 lines) cannot fill the operator's disk or bury the
//! lines that matter. What the bucket drops is counted, and the count is
//! logged with the next line the refilled bucket lets through.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
    /// Not served for want of room: the session slots, or the client's
    /// share of them or of the handshakes, were taken, or the pool of
    /// unproved connections dropped it for a newcomer.
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

/// Session log lines per second by default (`--log-rate`).
pub const DEFAULT_LOG_RATE: u32 = 10;
/// The bucket holds this many seconds of lines: a burst of sessions (an
/// aggregate's streams ending together) is logged whole.
const BURST_SECONDS: u32 = 10;

/// A token bucket of session log lines, shared by every session of a
/// server: `rate` lines a second, bursts of [`BURST_SECONDS`] times that;
/// rate 0 lets every line through.
#[derive(Clone, Debug)]
pub struct LogLimit {
    rate: u32,
    bucket: Arc<Mutex<Bucket>>,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    last: Instant,
    suppressed: u64,
}

impl Default for LogLimit {
    fn default() -> Self {
        LogLimit::new(DEFAULT_LOG_RATE)
    }
}

impl LogLimit {
    pub fn new(rate: u32) -> LogLimit {
        LogLimit {
            rate,
            bucket: Arc::new(Mutex::new(Bucket {
                tokens: f64::from(rate.saturating_mul(BURST_SECONDS)),
                last: Instant::now(),
                suppressed: 0,
            })),
        }
    }

    pub fn rate(&self) -> u32 {
        self.rate
    }

    /// May a line be written `now`? None: dropped (and counted). Some(n):
    /// yes, and `n` lines were dropped since the last one written.
    fn admit(&self, now: Instant) -> Option<u64> {
        if self.rate == 0 {
            return Some(0);
        }
        let mut b = self.bucket.lock().unwrap_or_else(|p| p.into_inner());
        let rate = f64::from(self.rate);
        let burst = f64::from(self.rate.saturating_mul(BURST_SECONDS));
        let refill = now.saturating_duration_since(b.last).as_secs_f64() * rate;
        b.tokens = (b.tokens + refill).min(burst);
        b.last = now;
        if b.tokens < 1.0 {
            b.suppressed += 1;
            return None;
        }
        b.tokens -= 1.0;
        Some(std::mem::take(&mut b.suppressed))
    }

    /// Write `line` if the bucket allows, after the count of the lines it
    /// dropped before.
    pub fn emit(&self, line: &SessionLine<'_>, format: LogFormat) {
        let Some(dropped) = self.admit(Instant::now()) else {
            return;
        };
        if dropped > 0 {
            suppressed_event(format, dropped, self.rate);
        }
        line.emit(format);
    }
}

/// The count of session lines the bucket dropped, as its own line.
fn suppressed_event(format: LogFormat, dropped: u64, rate: u32) {
    let line = match format {
        LogFormat::Text => format!(
            "thrum server: {dropped} session log line(s) suppressed (--log-rate {rate} lines/s)\n"
        ),
        LogFormat::Json => format!(
            "{}\n",
            serde_json::json!({
                "unix_s": crate::clock::unix_now(),
                "event": "log lines suppressed",
                "suppressed": dropped,
                "log_rate": rate,
            })
        ),
    };
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
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
    fn the_bucket_passes_its_burst_then_its_rate_and_counts_the_rest() {
        let l = LogLimit::new(10);
        let t0 = Instant::now();
        let passed = (0..3000).filter(|_| l.admit(t0).is_some()).count();
        assert_eq!(passed, 100);
        // A second on: ten more, the first carrying the count.
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(l.admit(t1), Some(2900));
        assert_eq!((1..10).filter(|_| l.admit(t1) == Some(0)).count(), 9);
        assert_eq!(l.admit(t1), None);
        let open = LogLimit::new(0);
        assert!((0..10_000).all(|_| open.admit(t0) == Some(0)));
    }

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
