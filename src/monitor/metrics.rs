//! The probes' latest figures and their counters, and their rendering in
//! the Prometheus text exposition format (version 0.0.4, which Prometheus
//! scrapes and `promtool check metrics` lints). Names follow Prometheus'
//! conventions, which promtool enforces: base units (seconds, bytes), and
//! counters ending in `_total`. A figure the last run did not have (a
//! failed run, or throughput of a request/response test) is left out, not
//! written as 0: a gap on a graph is true where a zero would be a lie.

use std::fmt::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::config::Probe;
use super::probe::Outcome;

/// One probe's state as the metrics show it.
#[derive(Clone, Debug, Default)]
pub struct ProbeState {
    pub name: String,
    pub target: String,
    pub test: &'static str,
    pub runs: u64,
    pub failures: u64,
    /// The last run's outcome (none before the first ends).
    pub last: Option<Outcome>,
    /// When the last successful run ended, seconds since the Unix epoch.
    pub last_success_unix_s: Option<f64>,
}

impl ProbeState {
    pub fn new(p: &Probe) -> ProbeState {
        ProbeState {
            name: p.name.clone(),
            target: p.target.clone(),
            test: p.test.name(),
            ..ProbeState::default()
        }
    }

    /// Count a finished run.
    pub fn record(&mut self, outcome: Outcome, ended: SystemTime) {
        self.runs += 1;
        if outcome.success {
            self.last_success_unix_s = ended
                .duration_since(UNIX_EPOCH)
                .ok()
                .map(|d| d.as_secs_f64());
        } else {
            self.failures += 1;
        }
        self.last = Some(outcome);
    }
}

/// A metric's samples for one probe: the quantile label where it has one, and the value.
type Samples = Vec<(Option<&'static str>, f64)>;

/// Every metric: name, type, help, and how a probe's value is read.
struct Metric {
    name: &'static str,
    kind: &'static str,
    help: &'static str,
    value: fn(&ProbeState) -> Samples,
}

fn one(v: Option<f64>) -> Samples {
    v.into_iter().map(|v| (None, v)).collect()
}

fn last<T>(s: &ProbeState, f: impl Fn(&Outcome) -> Option<T>) -> Option<T> {
    s.last.as_ref().and_then(f)
}

/// The metrics, in the order they are written; docs/monitor.md lists the
/// same names (a test says so).
const METRICS: &[Metric] = &[
    Metric {
        name: "thrum_probe_success",
        kind: "gauge",
        help: "Whether the probe's last run succeeded (1) or failed (0).",
        value: |s| one(last(s, |o| Some(if o.success { 1.0 } else { 0.0 }))),
    },
    Metric {
        name: "thrum_probe_duration_seconds",
        kind: "gauge",
        help: "How long the probe's last run took, start to exit.",
        value: |s| one(last(s, |o| Some(o.elapsed.as_secs_f64()))),
    },
    Metric {
        name: "thrum_probe_throughput_bytes_per_second",
        kind: "gauge",
        help: "Throughput of the last successful run of a bulk test (goodput, bytes per second; times 8 for bits).",
        value: |s| {
            one(last(s, |o| {
                o.figures
                    .throughput_bps
                    .filter(|_| o.success)
                    .map(|b| b / 8.0)
            }))
        },
    },
    Metric {
        name: "thrum_probe_transactions_per_second",
        kind: "gauge",
        help: "Transactions per second of the last successful run of a request/response or connection test.",
        value: |s| {
            one(last(s, |o| {
                o.figures.transactions_per_s.filter(|_| o.success)
            }))
        },
    },
    Metric {
        name: "thrum_probe_latency_seconds",
        kind: "summary",
        help: "Latency quantiles of the last successful run: transaction latency, or a ping's round-trip time.",
        value: |s| {
            let Some(o) = s.last.as_ref().filter(|o| o.success) else {
                return Vec::new();
            };
            [
                ("0.5", o.figures.latency_p50_s),
                ("0.99", o.figures.latency_p99_s),
            ]
            .into_iter()
            .filter_map(|(q, v)| v.map(|v| (Some(q), v)))
            .collect()
        },
    },
    Metric {
        name: "thrum_probe_ping_loss_ratio",
        kind: "gauge",
        help: "Share of the last ping run's echoes that got no reply (0 to 1).",
        value: |s| one(last(s, |o| o.figures.loss_ratio)),
    },
    Metric {
        name: "thrum_probe_last_success_timestamp_seconds",
        kind: "gauge",
        help: "When the probe's last successful run ended, in seconds since the Unix epoch.",
        value: |s| one(s.last_success_unix_s),
    },
    Metric {
        name: "thrum_probe_runs_total",
        kind: "counter",
        help: "Runs of the probe that have ended, successful or not.",
        value: |s| vec![(None, s.runs as f64)],
    },
    Metric {
        name: "thrum_probe_failures_total",
        kind: "counter",
        help: "Runs of the probe that failed (no server, an error, a timeout).",
        value: |s| vec![(None, s.failures as f64)],
    },
];

/// Every metric's name (for docs/monitor.md's test).
pub fn names() -> Vec<&'static str> {
    METRICS.iter().map(|m| m.name).collect()
}

/// A label value escaped as the text format asks: `\`, `"` and newline.
fn escape(v: &str) -> String {
    v.replace('\\', r"\\")
        .replace('"', r#"\""#)
        .replace('\n', r"\n")
}

/// The exposition of `probes`.
pub fn render(probes: &[ProbeState], up_for: Duration) -> String {
    let mut out = String::new();
    for m in METRICS {
        let _ = writeln!(out, "# HELP {} {}", m.name, m.help);
        let _ = writeln!(out, "# TYPE {} {}", m.name, m.kind);
        for s in probes {
            let labels = format!(
                "probe=\"{}\",target=\"{}\",test=\"{}\"",
                escape(&s.name),
                escape(&s.target),
                s.test
            );
            // The text format spells infinities +Inf/-Inf, not Rust's inf: none is written.
            for (q, v) in (m.value)(s).into_iter().filter(|(_, v)| v.is_finite()) {
                match q {
                    Some(q) => {
                        let _ = writeln!(out, "{}{{{labels},quantile=\"{q}\"}} {v}", m.name);
                    }
                    None => {
                        let _ = writeln!(out, "{}{{{labels}}} {v}", m.name);
                    }
                }
            }
        }
    }
    let _ = writeln!(
        out,
        "# HELP thrum_monitor_uptime_seconds How long the monitor has run."
    );
    let _ = writeln!(out, "# TYPE thrum_monitor_uptime_seconds gauge");
    let _ = writeln!(out, "thrum_monitor_uptime_seconds {}", up_for.as_secs_f64());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::monitor::probe::Figures;

    fn state() -> ProbeState {
        ProbeState {
            name: "rr \"a\"".into(),
            target: "lg1:12880".into(),
            test: "tcp_rr",
            ..ProbeState::default()
        }
    }

    #[test]
    fn before_the_first_run_only_counters() {
        let text = render(&[state()], Duration::from_secs(3));
        assert!(text.contains(
            "thrum_probe_runs_total{probe=\"rr \\\"a\\\"\",target=\"lg1:12880\",test=\"tcp_rr\"} 0\n"
        ));
        assert!(!text.contains("thrum_probe_success{"));
        assert!(text.ends_with("thrum_monitor_uptime_seconds 3\n"));
    }

    #[test]
    fn a_success_then_a_failure() {
        let mut s = state();
        let ok = Outcome {
            success: true,
            elapsed: Duration::from_millis(1500),
            figures: Figures {
                transactions_per_s: Some(25000.0),
                latency_p50_s: Some(40e-6),
                latency_p99_s: Some(80e-6),
                ..Figures::default()
            },
            error: None,
        };
        s.record(ok, UNIX_EPOCH + Duration::from_secs(100));
        let text = render(std::slice::from_ref(&s), Duration::ZERO);
        let l = "probe=\"rr \\\"a\\\"\",target=\"lg1:12880\",test=\"tcp_rr\"";
        for line in [
            format!("thrum_probe_success{{{l}}} 1"),
            format!("thrum_probe_duration_seconds{{{l}}} 1.5"),
            format!("thrum_probe_transactions_per_second{{{l}}} 25000"),
            format!("thrum_probe_latency_seconds{{{l},quantile=\"0.5\"}} 0.00004"),
            format!("thrum_probe_latency_seconds{{{l},quantile=\"0.99\"}} 0.00008"),
            format!("thrum_probe_last_success_timestamp_seconds{{{l}}} 100"),
            format!("thrum_probe_runs_total{{{l}}} 1"),
            format!("thrum_probe_failures_total{{{l}}} 0"),
        ] {
            assert!(text.contains(&format!("{line}\n")), "{line} in\n{text}");
        }
        assert!(!text.contains("thrum_probe_throughput_bytes_per_second{"));
        let failed = Outcome {
            success: false,
            elapsed: Duration::from_millis(10),
            figures: Figures::default(),
            error: Some("refused".into()),
        };
        s.record(failed, UNIX_EPOCH + Duration::from_secs(200));
        let text = render(&[s], Duration::ZERO);
        assert!(text.contains(&format!("thrum_probe_success{{{l}}} 0\n")));
        assert!(text.contains(&format!("thrum_probe_failures_total{{{l}}} 1\n")));
        assert!(text.contains(&format!("thrum_probe_runs_total{{{l}}} 2\n")));
        // The last success stays; the failed run's figures are not shown.
        assert!(text.contains(&format!(
            "thrum_probe_last_success_timestamp_seconds{{{l}}} 100\n"
        )));
        assert!(!text.contains("thrum_probe_latency_seconds{"));
    }

    #[test]
    fn docs_name_every_metric() {
        let doc = include_str!("../../docs/monitor.md");
        for name in names().into_iter().chain(["thrum_monitor_uptime_seconds"]) {
            assert!(
                doc.contains(&format!("| `{name}")),
                "docs/monitor.md's table lacks {name}"
            );
        }
    }

    #[test]
    fn every_metric_has_help_and_type_and_counters_end_in_total() {
        let text = render(&[state()], Duration::ZERO);
        for m in METRICS {
            assert!(text.contains(&format!("# HELP {} ", m.name)));
            assert!(text.contains(&format!("# TYPE {} {}\n", m.name, m.kind)));
            assert_eq!(
                m.kind == "counter",
                m.name.ends_with("_total"),
                "{}",
                m.name
            );
        }
    }
}
