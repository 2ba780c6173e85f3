//! The probes' figures and their counters, and their rendering in the
//! Prometheus text exposition format (version 0.0.4, which Prometheus
//! scrapes and `promtool check metrics` lints). Names follow Prometheus'
//! conventions, which promtool enforces: base units (seconds, bytes), and
//! counters ending in `_total`. A figure the last run did not have (a
//! failed run, or throughput of a request/response test) is left out, not
//! written as 0: a gap on a graph is true where a zero would be a lie.
//!
//! Latency is a histogram a fleet can add up: every run's whole HDR
//! histogram is added into fixed buckets ([`super::buckets`]), cumulative over
//! the probe's runs, so `histogram_quantile` over `rate` of the buckets
//! works for one probe, for a site, or for all of them, and a heat map
//! can be drawn from them. A last run's own p50 and p99 are a summary
//! beside it, exact where a bucket's interpolation is not.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::buckets::{Buckets, LE};
use super::config::{Probe, ProbeTest};
use super::probe::{Figures, Outcome, Reason};
use crate::plan::Merit;

/// Whether a probe's runs give a latency histogram: the request/response
/// and connection tests, ping and the mixes. Their buckets are written
/// from the start, at 0, so that `rate` counts the first run too.
fn has_latency(test: ProbeTest) -> bool {
    match test {
        ProbeTest::Run(k) => k.traits().merit == Merit::Transactions,
        ProbeTest::Mix(_) | ProbeTest::Ping => true,
    }
}

/// One probe's state as the metrics show it.
#[derive(Clone, Debug, Default)]
pub struct ProbeState {
    pub name: String,
    pub target: String,
    pub test: &'static str,
    /// The probe's own labels, on every series.
    pub labels: BTreeMap<String, String>,
    pub runs: u64,
    /// Failed runs by reason, in [`Reason::ALL`]'s order.
    pub failures: [u64; 4],
    /// The last run's outcome (none before the first ends).
    pub last: Option<Outcome>,
    /// When the last successful run ended, seconds since the Unix epoch.
    pub last_success_unix_s: Option<f64>,
    /// Every successful run's latency, added (none for a test without).
    pub latency: Option<Buckets>,
    /// A mix: every successful run's probe latency in its loaded phase.
    pub under_load: Option<Buckets>,
}

impl ProbeState {
    pub fn new(p: &Probe) -> ProbeState {
        let buckets = has_latency(p.test).then(Buckets::default);
        ProbeState {
            name: p.name.clone(),
            target: p.target.clone(),
            test: p.test.name(),
            labels: p.labels.clone(),
            latency: buckets.clone(),
            under_load: buckets.filter(|_| matches!(p.test, ProbeTest::Mix(_))),
            ..ProbeState::default()
        }
    }

    /// Count a finished run.
    pub fn record(&mut self, outcome: Outcome, ended: SystemTime) {
        self.runs += 1;
        match outcome.reason() {
            None => {
                self.last_success_unix_s = ended
                    .duration_since(UNIX_EPOCH)
                    .ok()
                    .map(|d| d.as_secs_f64());
                let f = &outcome.figures;
                for (to, run) in [
                    (&mut self.latency, &f.latency),
                    (&mut self.under_load, &f.loaded_latency),
                ] {
                    if let Some(run) = run {
                        to.get_or_insert_with(Buckets::default).add(run);
                    }
                }
            }
            Some(r) => self.failures[r as usize] += 1,
        }
        self.last = Some(outcome);
    }
}

/// A metric's samples for one probe: the labels it adds to the probe's
/// (`quantile="0.5"`, `reason="refused"`; empty for none), and the value.
type Samples = Vec<(String, f64)>;

/// How a metric reads a probe.
enum Read {
    Samples(fn(&ProbeState) -> Samples),
    Histogram(fn(&ProbeState) -> Option<&Buckets>),
}

/// Every metric: name, type, help, and how a probe's value is read.
struct Metric {
    name: &'static str,
    kind: &'static str,
    help: &'static str,
    read: Read,
}

fn one(v: Option<f64>) -> Samples {
    v.into_iter().map(|v| (String::new(), v)).collect()
}

/// A figure of the last run, if it succeeded.
fn ok<T>(s: &ProbeState, f: impl Fn(&Outcome) -> Option<T>) -> Option<T> {
    s.last.as_ref().filter(|o| o.success).and_then(f)
}

/// A p50 and a p99 of the last successful run (which `pick` reads from
/// its figures), as a summary's quantiles.
fn quantiles(s: &ProbeState, pick: fn(&Figures) -> (Option<f64>, Option<f64>)) -> Samples {
    let Some((p50, p99)) = ok(s, |o| Some(pick(&o.figures))) else {
        return Vec::new();
    };
    [("0.5", p50), ("0.99", p99)]
        .into_iter()
        .filter_map(|(q, v)| v.map(|v| (format!("quantile=\"{q}\""), v)))
        .collect()
}

/// The metrics, in the order they are written; docs/monitor.md lists the
/// same names (a test says so).
const METRICS: &[Metric] = &[
    Metric {
        name: "thrum_probe_success",
        kind: "gauge",
        help: "Whether the probe's last run succeeded (1) or failed (0).",
        read: Read::Samples(|s| one(s.last.as_ref().map(|o| if o.success { 1.0 } else { 0.0 }))),
    },
    Metric {
        name: "thrum_probe_duration_seconds",
        kind: "gauge",
        help: "How long the probe's last run took, start to exit.",
        read: Read::Samples(|s| one(s.last.as_ref().map(|o| o.elapsed.as_secs_f64()))),
    },
    Metric {
        name: "thrum_probe_throughput_bytes_per_second",
        kind: "gauge",
        help: "Throughput of the last successful run of a bulk test (goodput, bytes per second; times 8 for bits).",
        read: Read::Samples(|s| one(ok(s, |o| o.figures.throughput_bps.map(|b| b / 8.0)))),
    },
    Metric {
        name: "thrum_probe_transactions_per_second",
        kind: "gauge",
        help: "Transactions per second of the last successful run of a request/response or connection test.",
        read: Read::Samples(|s| one(ok(s, |o| o.figures.transactions_per_s))),
    },
    Metric {
        name: "thrum_probe_latency_seconds",
        kind: "histogram",
        help: "Latency of every successful run added up: transaction latency, a ping's round trips, a mix's probes when idle.",
        read: Read::Histogram(|s| s.latency.as_ref()),
    },
    Metric {
        name: "thrum_probe_run_latency_seconds",
        kind: "summary",
        help: "Latency quantiles of the last successful run: transaction latency, a ping's round-trip time, a mix's probes when idle.",
        read: Read::Samples(|s| quantiles(s, |f| (f.latency_p50_s, f.latency_p99_s))),
    },
    Metric {
        name: "thrum_probe_loss_ratio",
        kind: "gauge",
        help: "Share lost in the last run (0 to 1): ping's echoes, udp_rr's transactions, udp_stream's datagrams.",
        read: Read::Samples(|s| one(s.last.as_ref().and_then(|o| o.figures.loss_ratio))),
    },
    Metric {
        name: "thrum_probe_latency_under_load_seconds",
        kind: "histogram",
        help: "A mix's probe latency in the loaded phase of every successful run, added up.",
        read: Read::Histogram(|s| s.under_load.as_ref()),
    },
    Metric {
        name: "thrum_probe_run_latency_under_load_seconds",
        kind: "summary",
        help: "A mix's probe latency in the loaded phase of its last successful run, p50 and p99.",
        read: Read::Samples(|s| quantiles(s, |f| (f.under_load_p50_s, f.under_load_p99_s))),
    },
    Metric {
        name: "thrum_probe_goodput_bytes_per_second",
        kind: "gauge",
        help: "A mix's goodput each way in the loaded phase of its last successful run (bytes per second; times 8 for bits).",
        read: Read::Samples(|s| {
            let Some(f) = s.last.as_ref().filter(|o| o.success).map(|o| &o.figures) else {
                return Vec::new();
            };
            [("up", f.goodput_up_bps), ("down", f.goodput_down_bps)]
                .into_iter()
                .filter_map(|(d, v)| Some((format!("direction=\"{d}\""), v? / 8.0)))
                .collect()
        }),
    },
    Metric {
        name: "thrum_probe_last_success_timestamp_seconds",
        kind: "gauge",
        help: "When the probe's last successful run ended, in seconds since the Unix epoch.",
        read: Read::Samples(|s| one(s.last_success_unix_s)),
    },
    Metric {
        name: "thrum_probe_runs_total",
        kind: "counter",
        help: "Runs of the probe that have ended, successful or not.",
        read: Read::Samples(|s| vec![(String::new(), s.runs as f64)]),
    },
    Metric {
        name: "thrum_probe_failures_total",
        kind: "counter",
        help: "Runs of the probe that failed, by reason: refused, timeout, unreachable or error.",
        read: Read::Samples(|s| {
            Reason::ALL
                .iter()
                .map(|&r| {
                    (
                        format!("reason=\"{}\"", r.name()),
                        s.failures[r as usize] as f64,
                    )
                })
                .collect()
        }),
    },
];

/// Every metric's name (for docs/monitor.md's test).
pub fn names() -> Vec<&'static str> {
    METRICS.iter().map(|m| m.name).collect()
}

/// Every series name a scrape can hold: a histogram's `_bucket`, `_sum`
/// and `_count`, a summary's `_sum`/`_count` never (its quantiles only),
/// and the uptime (what a dashboard may name; a test checks the shipped
/// one against a real scrape too).
pub fn series_names() -> Vec<String> {
    let mut v = Vec::new();
    for m in METRICS {
        match m.read {
            Read::Histogram(_) => {
                v.extend(["_bucket", "_sum", "_count"].map(|s| format!("{}{s}", m.name)))
            }
            Read::Samples(_) => v.push(m.name.to_string()),
        }
    }
    v.push("thrum_monitor_uptime_seconds".into());
    v
}

/// A label value escaped as the text format asks: `\`, `"` and newline.
fn escape(v: &str) -> String {
    v.replace('\\', r"\\")
        .replace('"', r#"\""#)
        .replace('\n', r"\n")
}

/// A probe's labels, as every one of its series carries them.
fn labels_of(s: &ProbeState) -> String {
    let mut l = format!(
        "probe=\"{}\",target=\"{}\",test=\"{}\"",
        escape(&s.name),
        escape(&s.target),
        s.test
    );
    for (k, v) in &s.labels {
        let _ = write!(l, ",{k}=\"{}\"", escape(v));
    }
    l
}

/// `labels` with `extra` after them, braced.
fn braced(labels: &str, extra: &str) -> String {
    if extra.is_empty() {
        format!("{{{labels}}}")
    } else {
        format!("{{{labels},{extra}}}")
    }
}

/// The exposition of `probes`.
pub fn render(probes: &[ProbeState], up_for: Duration) -> String {
    let mut out = String::new();
    let labels: Vec<String> = probes.iter().map(labels_of).collect();
    for m in METRICS {
        let _ = writeln!(out, "# HELP {} {}", m.name, m.help);
        let _ = writeln!(out, "# TYPE {} {}", m.name, m.kind);
        for (s, l) in probes.iter().zip(&labels) {
            match m.read {
                Read::Samples(f) => {
                    // The text format spells infinities +Inf/-Inf, not Rust's inf: none is written.
                    for (extra, v) in f(s).into_iter().filter(|(_, v)| v.is_finite()) {
                        let _ = writeln!(out, "{}{} {v}", m.name, braced(l, &extra));
                    }
                }
                Read::Histogram(f) => {
                    let Some(b) = f(s) else { continue };
                    for (le, n) in LE.iter().zip(b.at_most) {
                        let _ = writeln!(
                            out,
                            "{}_bucket{} {n}",
                            m.name,
                            braced(l, &format!("le=\"{le}\""))
                        );
                    }
                    let _ = writeln!(
                        out,
                        "{}_bucket{} {}",
                        m.name,
                        braced(l, "le=\"+Inf\""),
                        b.count
                    );
                    let _ = writeln!(out, "{}_sum{{{l}}} {}", m.name, b.sum_s);
                    let _ = writeln!(out, "{}_count{{{l}}} {}", m.name, b.count);
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
    use crate::plan::TestKind;
    use crate::stats::latency::LatencyHistogram;

    fn state() -> ProbeState {
        ProbeState {
            name: "rr \"a\"".into(),
            target: "lg1:12880".into(),
            test: "tcp_rr",
            latency: Some(Buckets::default()),
            ..ProbeState::default()
        }
    }

    #[test]
    fn before_the_first_run_only_counters_and_empty_buckets() {
        let text = render(&[state()], Duration::from_secs(3));
        assert!(text.contains(
            "thrum_probe_runs_total{probe=\"rr \\\"a\\\"\",target=\"lg1:12880\",test=\"tcp_rr\"} 0\n"
        ));
        assert!(text.contains(
            "thrum_probe_latency_seconds_bucket{probe=\"rr \\\"a\\\"\",target=\"lg1:12880\",test=\"tcp_rr\",le=\"+Inf\"} 0\n"
        ));
        assert!(!text.contains("thrum_probe_success{"));
        assert!(text.ends_with("thrum_monitor_uptime_seconds 3\n"));
    }

    #[test]
    fn a_success_then_a_failure() {
        let mut s = state();
        s.labels = BTreeMap::from([
            ("site".to_string(), "ams \"2\"".to_string()),
            ("region".to_string(), "eu\\w".to_string()),
        ]);
        let mut h = LatencyHistogram::new();
        for _ in 0..99 {
            h.record(40_000);
        }
        h.record(80_000);
        let ok = Outcome {
            success: true,
            elapsed: Duration::from_millis(1500),
            figures: Figures {
                transactions_per_s: Some(25000.0),
                latency_p50_s: Some(40e-6),
                latency_p99_s: Some(80e-6),
                latency: Some(Buckets::of(&h)),
                ..Figures::default()
            },
            error: None,
        };
        s.record(ok.clone(), UNIX_EPOCH + Duration::from_secs(100));
        s.record(ok, UNIX_EPOCH + Duration::from_secs(101));
        let text = render(std::slice::from_ref(&s), Duration::ZERO);
        // The probe's labels after the monitor's, sorted, escaped.
        let l = "probe=\"rr \\\"a\\\"\",target=\"lg1:12880\",test=\"tcp_rr\",region=\"eu\\\\w\",site=\"ams \\\"2\\\"\"";
        for line in [
            format!("thrum_probe_success{{{l}}} 1"),
            format!("thrum_probe_duration_seconds{{{l}}} 1.5"),
            format!("thrum_probe_transactions_per_second{{{l}}} 25000"),
            format!("thrum_probe_run_latency_seconds{{{l},quantile=\"0.5\"}} 0.00004"),
            format!("thrum_probe_run_latency_seconds{{{l},quantile=\"0.99\"}} 0.00008"),
            format!("thrum_probe_latency_seconds_bucket{{{l},le=\"2e-05\"}} 0"),
            format!("thrum_probe_latency_seconds_bucket{{{l},le=\"5e-05\"}} 198"),
            format!("thrum_probe_latency_seconds_bucket{{{l},le=\"0.0001\"}} 200"),
            format!("thrum_probe_latency_seconds_bucket{{{l},le=\"+Inf\"}} 200"),
            format!("thrum_probe_latency_seconds_count{{{l}}} 200"),
            format!("thrum_probe_last_success_timestamp_seconds{{{l}}} 101"),
            format!("thrum_probe_runs_total{{{l}}} 2"),
            format!("thrum_probe_failures_total{{{l},reason=\"refused\"}} 0"),
        ] {
            assert!(text.contains(&format!("{line}\n")), "{line} in\n{text}");
        }
        assert!(!text.contains("thrum_probe_throughput_bytes_per_second{"));
        assert!(!text.contains("thrum_probe_loss_ratio{"));
        let failed = Outcome {
            success: false,
            elapsed: Duration::from_millis(10),
            figures: Figures::default(),
            error: Some("cannot reach the thrum server at lg1:12880 (is `thrum server` running there?): Connection refused (os error 111)".into()),
        };
        s.record(failed, UNIX_EPOCH + Duration::from_secs(200));
        let text = render(&[s], Duration::ZERO);
        assert!(text.contains(&format!("thrum_probe_success{{{l}}} 0\n")));
        assert!(text.contains(&format!(
            "thrum_probe_failures_total{{{l},reason=\"refused\"}} 1\n"
        )));
        assert!(text.contains(&format!(
            "thrum_probe_failures_total{{{l},reason=\"timeout\"}} 0\n"
        )));
        assert!(text.contains(&format!("thrum_probe_runs_total{{{l}}} 3\n")));
        // The last success stays, and so do the buckets (they count runs);
        // the failed run's own figures are not shown.
        assert!(text.contains(&format!(
            "thrum_probe_last_success_timestamp_seconds{{{l}}} 101\n"
        )));
        assert!(text.contains(&format!("thrum_probe_latency_seconds_count{{{l}}} 200\n")));
        assert!(!text.contains("thrum_probe_run_latency_seconds{"));
    }

    #[test]
    fn a_mix_shows_latency_under_load_and_goodput_each_way() {
        let probe = crate::monitor::config::parse(
            "[[probe]]\nname = \"bloat\"\ntarget = \"lg\"\ntest = \"rrul\"\nlabels = { site = \"ams\" }\n",
        )
        .unwrap()
        .probes
        .remove(0);
        let mut s = ProbeState::new(&probe);
        let mut h = LatencyHistogram::new();
        h.record(150_000_000);
        s.record(
            Outcome {
                success: true,
                elapsed: Duration::from_secs(16),
                figures: Figures {
                    loaded_latency: Some(Buckets::of(&h)),
                    under_load_p50_s: Some(0.15),
                    under_load_p99_s: Some(0.2),
                    goodput_up_bps: Some(8e6),
                    goodput_down_bps: Some(16e6),
                    ..Figures::default()
                },
                error: None,
            },
            UNIX_EPOCH,
        );
        let text = render(&[s], Duration::ZERO);
        let l = "probe=\"bloat\",target=\"lg\",test=\"rrul\",site=\"ams\"";
        for line in [
            format!("thrum_probe_goodput_bytes_per_second{{{l},direction=\"up\"}} 1000000"),
            format!("thrum_probe_goodput_bytes_per_second{{{l},direction=\"down\"}} 2000000"),
            format!("thrum_probe_run_latency_under_load_seconds{{{l},quantile=\"0.99\"}} 0.2"),
            format!("thrum_probe_latency_under_load_seconds_bucket{{{l},le=\"0.1\"}} 0"),
            format!("thrum_probe_latency_under_load_seconds_bucket{{{l},le=\"0.2\"}} 1"),
            // Idle latency: none in this run, so the zero buckets stay.
            format!("thrum_probe_latency_seconds_count{{{l}}} 0"),
        ] {
            assert!(text.contains(&format!("{line}\n")), "{line} in\n{text}");
        }
    }

    #[test]
    fn a_bulk_probe_has_no_latency_buckets() {
        let p = crate::monitor::config::parse(
            "[[probe]]\ntarget = \"lg\"\ntest = \"tcp_stream\"\n[[probe]]\ntarget = \"lg2\"\ntest = \"tcp_crr\"\n",
        )
        .unwrap()
        .probes;
        assert!(ProbeState::new(&p[0]).latency.is_none());
        assert!(ProbeState::new(&p[1]).latency.is_some());
        assert_eq!(p[1].test, ProbeTest::Run(TestKind::TcpCrr));
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
            assert_eq!(
                m.kind == "histogram",
                matches!(m.read, Read::Histogram(_)),
                "{}",
                m.name
            );
        }
    }
}
