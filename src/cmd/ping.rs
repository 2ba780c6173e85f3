//! `thrum ping HOST`: availability and response time by packet size.
//!
//! ICMP echo requests of each size in turn (`-s 56,1400`: devices keep
//! separate buffer pools per packet size, so one size can suffer where
//! another does not), `-c` of them `-i` apart, each reply awaited up to
//! `-W`; or, with `--tcp PORT`, TCP connects timed to their SYN-ACK (or
//! RST: a refusal is an answer too) for hosts that filter ICMP. IPv4 and
//! IPv6 alike (ICMPv6 echo, `io::icmp`). As iputils `ping` does, `-v`
//! prints a line per reply as it comes, `-c 0` sends until Ctrl-C, and a
//! Ctrl-C at any time ends the sending and prints the summary of what was
//! sent so far. The gathering talks to the network; [`size_stats`] turns
//! the round trips of one size into its figures and is a pure function.

use std::collections::{BTreeSet, HashMap};
use std::net::{SocketAddr, TcpStream};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::cli::{PingArgs, PingPlan};
use crate::control::stop;
use crate::io::icmp::{EchoSocket, Event};
use crate::stats::latency::LatencyHistogram;
use crate::units::fmt_ns;

/// The schema name of `thrum ping --json` (schema/thrum.ping.v1.json).
pub const PING_SCHEMA: &str = "thrum.ping.v1";

/// Round-trip times in ns: send time before send(2) to the kernel's
/// receive timestamp (SO_TIMESTAMPNS); nearest-rank percentiles.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Rtt {
    pub min: u64,
    pub p50: u64,
    pub p99: u64,
    pub max: u64,
}

/// The figures of one packet size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SizeStats {
    /// ICMP payload bytes (0 with --tcp).
    pub size: usize,
    pub sent: u64,
    pub received: u64,
    pub loss_percent: f64,
    /// Null when nothing came back.
    pub rtt_ns: Option<Rtt>,
    /// Every round trip of this size as an HDR histogram (ns, 3
    /// significant digits), V2 compressed, base64, as a run's
    /// `summary.histogram`: what `thrum monitor` adds into a probe's
    /// Prometheus buckets. Null when nothing came back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_histogram: Option<String>,
    /// What the kernel reported for this size's echoes (host unreachable, …).
    pub errors: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
struct Summary {
    sizes: Vec<SizeStats>,
    /// Why the host counts as unavailable; null when anything answered.
    error: Option<String>,
}

// What `--json` writes; `thrum report` reads it back (a `//` comment: a
// doc comment would become the schema's description).
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub(crate) struct PingResult {
    schema: String,
    /// HOST as given.
    host: String,
    /// The address pinged.
    address: String,
    /// icmp_dgram: the unprivileged ICMP datagram socket
    /// (net.ipv4.ping_group_range); icmp_raw: a raw socket (root); tcp:
    /// --tcp PORT, connect time.
    #[schemars(extend("enum" = ["icmp_dgram", "icmp_raw", "tcp"]))]
    method: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    tcp_port: Option<u16>,
    /// Echo requests (or connects) per size; 0: until Ctrl-C (`sent`
    /// says how many went).
    count: u32,
    interval_s: f64,
    /// How long each reply was awaited; later ones count as lost.
    timeout_s: f64,
    summary: Summary,
}

/// `schema/thrum.ping.v1.json`, generated from the types `--json` writes
/// (`cargo xtask schema`; a test fails while the committed file differs).
pub fn schema() -> serde_json::Value {
    crate::export::schema::generate::<PingResult>("thrum ping --json", PING_SCHEMA, true, &[])
}

/// Nearest-rank percentile `p` of sorted `v` (not empty).
fn percentile(v: &[u64], p: f64) -> u64 {
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

/// One size's figures from what was sent and the round trips that came back.
pub fn size_stats(size: usize, sent: u64, mut rtts: Vec<u64>, errors: Vec<String>) -> SizeStats {
    rtts.sort_unstable();
    let received = rtts.len() as u64;
    SizeStats {
        size,
        sent,
        received,
        loss_percent: if sent == 0 {
            0.0
        } else {
            100.0 * sent.saturating_sub(received) as f64 / sent as f64
        },
        rtt_ns: (!rtts.is_empty()).then(|| Rtt {
            min: rtts[0],
            p50: percentile(&rtts, 50.0),
            p99: percentile(&rtts, 99.0),
            max: rtts[rtts.len() - 1],
        }),
        rtt_histogram: (!rtts.is_empty()).then(|| {
            let mut h = LatencyHistogram::new();
            for &ns in &rtts {
                h.record(ns);
            }
            h.to_base64()
        }),
        errors,
    }
}

/// A round trip in ms as iputils prints it: three significant decimals
/// below 1 ms, fewer above (`0.045`, `1.23`, `12.3`, `123`).
pub fn fmt_ms(ns: u64) -> String {
    let ms = ns as f64 / 1e6;
    match ms {
        m if m >= 100.0 => format!("{m:.0}"),
        m if m >= 10.0 => format!("{m:.1}"),
        m if m >= 1.0 => format!("{m:.2}"),
        m => format!("{m:.3}"),
    }
}

/// Write one `-v` line: to stdout, or to stderr where stdout carries JSON.
fn say(line: &str, json: bool) {
    if json {
        eprintln!("{line}");
    } else {
        // A closed pipe ends nothing here: the summary's print reports it.
        let _ = super::out::print(&format!("{line}\n"));
    }
}

/// What one size's echoes gathered: requests in flight by sequence number
/// (their CLOCK_REALTIME send time), round trips, errors.
struct Gather<'a> {
    pending: HashMap<u16, u64>,
    rtts: Vec<u64>,
    errors: BTreeSet<String>,
    timeout_ns: u64,
    plan: &'a PingPlan,
}

impl Gather<'_> {
    /// Take replies until `until`, or a Ctrl-C.
    fn wait(&mut self, sock: &EchoSocket, until: Instant) {
        loop {
            let now = Instant::now();
            if now >= until || stop::requested() {
                return;
            }
            match sock.next(until - now) {
                Event::Reply {
                    seq,
                    at_ns,
                    bytes,
                    ttl,
                } => {
                    if let Some(sent) = self.pending.remove(&seq) {
                        let rtt = at_ns.saturating_sub(sent);
                        // Later than -W is lost, as iputils' -W has it.
                        if rtt <= self.timeout_ns {
                            self.rtts.push(rtt);
                            if self.plan.verbose {
                                let ttl = ttl.map(|t| format!(" ttl={t}")).unwrap_or_default();
                                say(
                                    &format!(
                                        "{bytes} bytes from {}: icmp_seq={seq}{ttl} time={} ms",
                                        self.plan.address,
                                        fmt_ms(rtt)
                                    ),
                                    self.plan.json,
                                );
                            }
                        }
                    }
                }
                Event::Error(e) => {
                    self.errors.insert(e.to_string());
                }
                Event::Timeout => {}
            }
        }
    }
}

/// The requests to send per size: `-c`, or until Ctrl-C for `-c 0`.
fn counts(plan: &PingPlan) -> impl Iterator<Item = u32> {
    let n = if plan.count == 0 {
        u32::MAX
    } else {
        plan.count
    };
    0..n
}

fn icmp(plan: &PingPlan, sock: &EchoSocket) -> Vec<SizeStats> {
    let mut seq: u16 = 0;
    let mut out = Vec::new();
    for &size in &plan.sizes {
        let mut g = Gather {
            pending: HashMap::new(),
            rtts: Vec::new(),
            errors: BTreeSet::new(),
            timeout_ns: plan.timeout.as_nanos() as u64,
            plan,
        };
        let start = Instant::now();
        let mut last = start;
        let mut sent = 0u64;
        for k in counts(plan) {
            g.wait(sock, start + plan.interval * k);
            // Ctrl-C: what is in flight counts as lost, as iputils has it.
            if stop::requested() {
                break;
            }
            sent += 1;
            seq = seq.wrapping_add(1);
            match sock.send(seq, size) {
                Ok(at) => {
                    g.pending.insert(seq, at);
                }
                Err(e) => {
                    g.errors.insert(e.to_string());
                }
            }
            last = Instant::now();
        }
        g.wait(sock, last + plan.timeout);
        out.push(size_stats(
            size,
            sent,
            g.rtts,
            g.errors.into_iter().collect(),
        ));
    }
    out
}

fn tcp(plan: &PingPlan, port: u16) -> SizeStats {
    let addr = SocketAddr::new(plan.address, port);
    let (mut rtts, mut errors) = (Vec::new(), BTreeSet::new());
    let start = Instant::now();
    let mut sent = 0u64;
    for k in counts(plan) {
        let due = start + plan.interval * k;
        // In steps, so that a Ctrl-C during a long -i ends it soon.
        while let Some(d) = due.checked_duration_since(Instant::now())
            && !stop::requested()
        {
            std::thread::sleep(d.min(std::time::Duration::from_millis(50)));
        }
        if stop::requested() {
            break;
        }
        sent += 1;
        let t = Instant::now();
        let answer = match TcpStream::connect_timeout(&addr, plan.timeout) {
            Ok(_) => Some("connected"),
            // A RST answers as surely as a SYN-ACK: the host is up.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => Some("refused"),
            Err(e) => {
                errors.insert(e.to_string());
                None
            }
        };
        if let Some(what) = answer {
            let rtt = t.elapsed().as_nanos() as u64;
            rtts.push(rtt);
            if plan.verbose {
                say(
                    &format!("{what} by {addr}: seq={sent} time={} ms", fmt_ms(rtt)),
                    plan.json,
                );
            }
        }
    }
    size_stats(0, sent, rtts, errors.into_iter().collect())
}

/// Run `thrum ping`.
pub fn ping(args: &PingArgs) -> Result<ExitCode> {
    let plan = args.to_plan()?;
    // Ctrl-C ends the sending, and the summary of what went is printed,
    // as iputils does (and `-c 0` waits for it); a second one exits at once.
    stop::on_signals().context("catching Ctrl-C")?;
    let (method, sizes) = match plan.tcp_port {
        Some(port) => ("tcp", vec![tcp(&plan, port)]),
        None => {
            let sock = EchoSocket::open(plan.address)?;
            (sock.method().name(), icmp(&plan, &sock))
        }
    };
    let received: u64 = sizes.iter().map(|s| s.received).sum();
    let error = (received == 0).then(|| {
        let errors: BTreeSet<&str> = sizes
            .iter()
            .flat_map(|s| s.errors.iter().map(String::as_str))
            .collect();
        let what = if plan.tcp_port.is_some() {
            "TCP connects"
        } else {
            "echo requests"
        };
        let sent: u64 = sizes.iter().map(|s| s.sent).sum();
        let mut e = format!(
            "{} ({}) did not answer: none of {sent} {what} was answered within -W {}",
            plan.host,
            plan.address,
            crate::units::fmt_duration_ns(plan.timeout.as_nanos() as u64)
        );
        if !errors.is_empty() {
            e.push_str(&format!(
                " ({})",
                errors.into_iter().collect::<Vec<_>>().join("; ")
            ));
        }
        e
    });
    let result = PingResult {
        schema: PING_SCHEMA.into(),
        host: plan.host.clone(),
        address: plan.address.to_string(),
        method: method.into(),
        tcp_port: plan.tcp_port,
        count: plan.count,
        interval_s: plan.interval.as_secs_f64(),
        timeout_s: plan.timeout.as_secs_f64(),
        summary: Summary { sizes, error },
    };
    if plan.json {
        let mut text = serde_json::to_string_pretty(&result)?;
        text.push('\n');
        super::out::print(&text)?;
    } else {
        super::out::print(&human(&result))?;
    }
    if let Ok(doc) = serde_json::to_value(&result) {
        super::save::save(&plan.store, "ping", "ping", &plan.host, &doc);
    }
    match &result.summary.error {
        Some(e) => {
            eprintln!("error: {e}");
            Ok(ExitCode::FAILURE)
        }
        None => Ok(ExitCode::SUCCESS),
    }
}

impl PingResult {
    /// No echo (nor connect) came back: the host counts as unavailable.
    pub(crate) fn failed(&self) -> bool {
        self.summary.error.is_some()
    }
}

/// The table `thrum ping` prints (and `thrum report` of its `--json`).
pub(crate) fn human(r: &PingResult) -> String {
    let mut s = format!(
        "ping {} ({}) by {}{}, {} per size, every {}, timeout {}\n",
        r.host,
        r.address,
        r.method,
        r.tcp_port.map(|p| format!(" port {p}")).unwrap_or_default(),
        if r.count == 0 {
            "until Ctrl-C".to_string()
        } else {
            r.count.to_string()
        },
        crate::units::fmt_duration_ns((r.interval_s * 1e9) as u64),
        crate::units::fmt_duration_ns((r.timeout_s * 1e9) as u64),
    );
    s.push_str(&format!(
        "{:>7} {:>7} {:>7} {:>7} {:>10} {:>10} {:>10} {:>10}\n",
        "size", "sent", "recv", "loss %", "min", "p50", "p99", "max"
    ));
    for z in &r.summary.sizes {
        let t = |f: fn(&Rtt) -> u64| {
            z.rtt_ns
                .as_ref()
                .map_or("-".into(), |r| fmt_ns(f(r) as f64))
        };
        s.push_str(&format!(
            "{:>7} {:>7} {:>7} {:>7.1} {:>10} {:>10} {:>10} {:>10}\n",
            z.size,
            z.sent,
            z.received,
            z.loss_percent,
            t(|r| r.min),
            t(|r| r.p50),
            t(|r| r.p99),
            t(|r| r.max)
        ));
        for e in &z.errors {
            s.push_str(&format!("        {e}\n"));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_of_one_size() {
        let s = size_stats(56, 4, vec![40, 10, 30], vec![]);
        assert_eq!(s.received, 3);
        assert_eq!(s.loss_percent, 25.0);
        assert_eq!(
            s.rtt_ns,
            Some(Rtt {
                min: 10,
                p50: 30,
                p99: 40,
                max: 40
            })
        );
        let none = size_stats(56, 2, vec![], vec!["x".into()]);
        assert_eq!(none.loss_percent, 100.0);
        assert_eq!(none.rtt_ns, None);
        assert_eq!(none.rtt_histogram, None);
        let h = LatencyHistogram::from_base64(s.rtt_histogram.as_deref().unwrap()).unwrap();
        assert_eq!((h.count(), h.count_at_most(30)), (3, 2));
        let hundred: Vec<u64> = (1..=100).collect();
        let s = size_stats(0, 100, hundred, vec![]);
        let r = s.rtt_ns.unwrap();
        assert_eq!((r.p50, r.p99), (50, 99));
    }

    #[test]
    fn round_trips_print_as_iputils_prints_them() {
        assert_eq!(fmt_ms(45_123), "0.045");
        assert_eq!(fmt_ms(1_234_567), "1.23");
        assert_eq!(fmt_ms(12_345_678), "12.3");
        assert_eq!(fmt_ms(123_456_789), "123");
    }
}
