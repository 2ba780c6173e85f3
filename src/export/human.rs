//! The human table: per-interval sums, then the summary with units, like
//! netperf's and iperf3's. Results only: warnings and errors are the
//! command's to say on stderr.

use std::io::{self, Write};

use super::Exporter;
use crate::result::{Environment, Figures, Side, TestResult};
use crate::units::{BitsPerSec, Fixed, RateUnit, fmt_ns};

/// The human table, with what the flags add to it.
#[derive(Clone, Debug, Default)]
pub struct Human {
    /// --histogram: the log-scale latency histogram.
    pub histogram: bool,
    /// -c / -C / --cpu: CPU utilisation and service demand of each end.
    pub local_cpu: bool,
    pub remote_cpu: bool,
    /// --verbose: provenance first.
    pub verbose: bool,
    /// The head and the interval rows were printed live, as each interval
    /// completed (iperf3's habit): the summary alone remains.
    pub rows_shown: bool,
    /// `--format`: bit and byte rates in this unit instead of one scaled
    /// to each figure.
    pub units: Option<crate::units::RateUnit>,
    /// `--timestamps[=FORMAT]`: each interval row starts with the wall-clock
    /// time its interval ended (strftime FORMAT; empty: date and time to
    /// the millisecond), as iperf3's `--timestamps`.
    pub timestamps: Option<String>,
    /// `--from`: the run goes from this many agents (0: from this host),
    /// each interval a row per agent and their sum.
    pub agents: usize,
}

/// A figure of merit with its unit, for people.
pub fn figure(v: f64, unit: &str) -> String {
    if unit == "bit/s" {
        BitsPerSec(v).to_string()
    } else {
        format!("{} {unit}", Fixed(v, 1))
    }
}

/// One end's CPU utilisation and service demand.
fn cpu_lines(out: &mut dyn Write, end: &str, side: &Side, stream: bool) -> io::Result<()> {
    let Some(c) = &side.cpu else {
        return writeln!(out, "  CPU {end:<7} not measured");
    };
    let o = &c.overall;
    writeln!(
        out,
        "  CPU {end:<7} {} % of {} CPUs (user {}, system {}, softirq {}, irq {}, iowait {}, steal {}){}",
        Fixed(o.util_percent, 1),
        c.cpus,
        Fixed(o.user_percent, 1),
        Fixed(o.system_percent, 1),
        Fixed(o.softirq_percent, 1),
        Fixed(o.irq_percent, 1),
        Fixed(o.iowait_percent, 1),
        Fixed(o.steal_percent, 1),
        match (c.busiest_cpu, c.busiest_cpu_percent) {
            (Some(n), Some(p)) => format!(", busiest cpu{n} {} %", Fixed(p, 1)),
            _ => String::new(),
        }
    )?;
    let unit = if stream { "us/KB" } else { "us/Tr" };
    if let Some(sd) = side
        .service_demand_us_per_tran
        .or(side.service_demand_us_per_kb)
    {
        write!(
            out,
            "      service demand {} {unit} ({})",
            Fixed(sd, 3),
            side.service_demand_source.unwrap_or("-")
        )?;
        match (side.service_demand_proc_stat, side.service_demand_rusage) {
            (Some(p), Some(u)) => writeln!(
                out,
                "; /proc/stat {}, process CPU time {}",
                Fixed(p, 3),
                Fixed(u, 3)
            )?,
            _ => writeln!(out)?,
        }
    }
    if let Some(ru) = &side.rusage_window {
        writeln!(
            out,
            "      process: user {} s, system {} s, max RSS {} KiB, switches {} voluntary, {} involuntary",
            Fixed(ru.user_s, 3),
            Fixed(ru.system_s, 3),
            ru.max_rss_kb,
            ru.voluntary_switches,
            ru.involuntary_switches
        )?;
    }
    Ok(())
}

/// One end's SO_SNDBUF and SO_RCVBUF: as set, and as asked when it was.
fn buffer_line(side: &Side, opts: &crate::plan::SocketOpts, udp: bool) -> String {
    let one = |set: Option<u64>, asked: Option<u64>| match (set, asked) {
        (Some(set), Some(asked)) => format!("{set} B (asked {asked} B)"),
        (Some(set), None) if udp => format!("{set} B (kernel default)"),
        (Some(set), None) => format!("{set} B at start (kernel default, autotuned)"),
        (None, Some(asked)) => format!("asked {asked} B (the server does not report what it set)"),
        (None, None) => "kernel default (not reported)".to_string(),
    };
    let b = side.socket_buffers.as_ref();
    format!(
        "send {}, receive {}",
        one(b.map(|b| b.send_bytes), opts.send_buffer_bytes),
        one(b.map(|b| b.recv_bytes), opts.recv_buffer_bytes)
    )
}

/// Open loop (--rate): the schedule against what was done, and the two
/// other clocks (service time from the send; the generator's own lag), so
/// a generator-bound run says so.
fn open_loop_lines(out: &mut dyn Write, s: &crate::result::Summary) -> io::Result<()> {
    let Some(o) = &s.open_loop else {
        return Ok(());
    };
    let (offered, achieved) = (Fixed(o.offered_per_s, 0), Fixed(o.achieved_per_s, 1));
    writeln!(
        out,
        "  open loop  offered {offered}/s  achieved {achieved}/s  late {}",
        o.late
    )?;
    if let Some(sv) = &o.service_latency_ns {
        write!(
            out,
            "           service p50 {}  p99 {}",
            fmt_ns(sv.p50 as f64),
            fmt_ns(sv.p99 as f64)
        )?;
    }
    if let Some(g) = &o.generator_lag_ns {
        write!(out, "  generator lag p99 {}", fmt_ns(g.p99 as f64))?;
    }
    writeln!(out)
}

/// `--one-way`: each way's percentiles, every one with the offset's bound
/// beside it, and where the offset came from. A way below zero after the
/// correction was recorded as 0 and is counted here, never printed.
fn one_way_lines(out: &mut dyn Write, s: &crate::result::Summary) -> io::Result<()> {
    let Some(o) = &s.owd_ns else {
        return Ok(());
    };
    let e = fmt_ns(o.error_ns as f64);
    for (way, l) in [("up", &o.up), ("down", &o.down)] {
        writeln!(
            out,
            "  one-way {way:<4} p50 {} ± {e}  p90 {} ± {e}  p99 {} ± {e}",
            fmt_ns(l.p50 as f64),
            fmt_ns(l.p90 as f64),
            fmt_ns(l.p99 as f64),
        )?;
    }
    let drift = o
        .drift_ppm
        .map(|d| format!(", drift {d:.2} ppm"))
        .unwrap_or_default();
    let clamped = if o.clamped > 0 {
        format!(
            "; {} transaction(s) below zero one way, counted as 0",
            o.clamped
        )
    } else {
        String::new()
    };
    let used = o.offsets.iter().filter(|w| w.used).count();
    let refreshed = if used > 0 {
        format!(", {used} of {} intervals' estimates", o.offsets.len())
    } else {
        String::new()
    };
    writeln!(
        out,
        "           server clock offset {} ns ± {e} ({}{refreshed}{drift}), stamps {}{clamped}",
        o.offset_ns, o.method, o.stamps
    )
}

/// The I/O driver each end's workers ran (`--driver auto` chooses per
/// worker), or None if no worker started: "client uring (2 threads),
/// server uring (2 threads)".
fn drivers_line(env: &Environment) -> Option<String> {
    let end = |who: &str, list: &[String]| {
        let groups: Vec<String> = Environment::driver_counts(list)
            .into_iter()
            .map(|(d, n)| format!("{d} ({n} thread{})", if n == 1 { "" } else { "s" }))
            .collect();
        (!groups.is_empty()).then(|| format!("{who} {}", groups.join(" and ")))
    };
    let ends: Vec<String> = [
        end("client", &env.local_drivers),
        end("server", &env.remote_drivers),
    ]
    .into_iter()
    .flatten()
    .collect();
    (!ends.is_empty()).then(|| ends.join(", "))
}

/// SO_BUSY_POLL and SO_PREFER_BUSY_POLL as each end's kernel read them
/// back, where either was asked for, and the io_uring rings' NAPI busy
/// polling where they registered it: "client 50 µs (preferred), io_uring
/// NAPI 50 µs (preferred), server …".
fn busy_poll_line(s: &crate::result::Summary) -> Option<String> {
    let figure = |us: u32, preferred: bool| {
        format!("{us} µs{}", if preferred { " (preferred)" } else { "" })
    };
    let end = |who: &str, side: &crate::result::Side| {
        let sock = side
            .busy_poll
            .map(|b| figure(b.busy_poll_us, b.prefer_busy_poll));
        let napi = side.uring_napi.map(|n| {
            format!(
                "io_uring NAPI {}",
                figure(n.busy_poll_us, n.prefer_busy_poll)
            )
        });
        let parts: Vec<String> = [sock, napi].into_iter().flatten().collect();
        (!parts.is_empty()).then(|| format!("{who} {}", parts.join(", ")))
    };
    let ends: Vec<String> = [end("client", &s.local), end("server", &s.remote)]
        .into_iter()
        .flatten()
        .collect();
    (!ends.is_empty()).then(|| ends.join("; "))
}

fn headline(f: &Figures, units: Option<RateUnit>) -> String {
    if let Some(t) = f.throughput_bps {
        RateUnit::show(units, t)
    } else {
        format!("{} trans/s", Fixed(f.transactions_per_s.unwrap_or(0.0), 1))
    }
}

/// The test line and the interval columns' header: printed before the
/// first interval when the rows come live, or with the whole table.
pub fn head(
    out: &mut dyn Write,
    test: crate::plan::TestKind,
    server: &str,
    p: &crate::plan::TestPlan,
    agents: usize,
) -> io::Result<()> {
    if !p.parts.is_empty() {
        let bulk = p
            .parts
            .iter()
            .any(|part| crate::plan::mix::direction(part.test) != "rr");
        write!(
            out,
            "mix to {server}: {} part(s), {} flow(s)",
            p.parts.len(),
            p.flows
        )?;
        if !bulk {
            writeln!(out, "; rows are all flows' transactions")?;
            return writeln!(
                out,
                "{:>8} {:>8}  {:<9} {:>22}",
                "start_s", "end_s", "phase", "result"
            );
        }
        writeln!(out, "; rows are the bulk flows' goodput each way")?;
        return writeln!(
            out,
            "{:>8} {:>8}  {:<9} {:>16} {:>16}",
            "start_s", "end_s", "phase", "up", "down"
        );
    }
    write!(out, "{test} to {server}")?;
    if agents > 0 {
        write!(out, " from {agents} agents, each")?;
    }
    write!(out, ": {} flow(s) on {} thread(s)", p.flows, p.threads)?;
    // A stream of numbered datagrams whose loss the receiver counts
    // (udp_stream's row): its size and pacing are what the line says.
    if test.traits().rate == crate::plan::Rate::ProbeBits {
        // capacity: the rows can only be its probe's load (the estimate
        // comes from the gaps within trains, gathered over the whole
        // window), so the head says what they are.
        writeln!(
            out,
            ", packet trains of {} B datagrams; rows are the probe's load, not the capacity (that is in the summary)",
            p.send_bytes
        )?;
    } else if test.traits().loss == crate::plan::Loss::Datagrams {
        match p.rate_bps {
            Some(rate) => writeln!(
                out,
                ", datagrams of {} B at {} per flow{}",
                p.send_bytes,
                crate::units::BitsPerSec(rate as f64),
                byte_limit(p)
            )?,
            None => writeln!(
                out,
                ", datagrams of {} B, unpaced{}",
                p.send_bytes,
                byte_limit(p)
            )?,
        }
    } else if test.is_stream() {
        writeln!(
            out,
            ", send {} B, recv {} B{}",
            p.send_bytes,
            p.recv_bytes,
            byte_limit(p)
        )?;
    } else {
        write!(
            out,
            ", request {} B, response {} B",
            p.request_bytes, p.response_bytes
        )?;
        if p.burst > 0 {
            write!(out, ", burst {}", p.burst)?;
        }
        if p.close == crate::plan::CloseMode::Rst {
            write!(out, ", client resets (--close rst)")?;
        }
        if p.spin {
            // Said up front: every figure below is of workers that never sleep.
            write!(out, ", spinning (--spin: both ends poll, a CPU per worker)")?;
        }
        writeln!(out)?;
    }
    write!(
        out,
        "{:>8} {:>8}  {:<9} {:>22}",
        "start_s", "end_s", "phase", "result"
    )?;
    // A run from many agents: a row per agent and their sum.
    if agents > 0 {
        return writeln!(out, "  host");
    }
    // A TCP stream's rows carry its senders' TCP_INFO, as iperf3's do.
    if p.parts.is_empty()
        && test.is_stream()
        && test.traits().transport == crate::plan::Transport::Tcp
    {
        write!(out, " {:>6} {:>12}", "Retr", "Cwnd")?;
    }
    writeln!(out)
}

/// A congestion window as iperf3 prints it (`320 KBytes`, `3.18 MBytes`).
fn cwnd_text(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= 1024.0 * 1024.0 {
        format!("{:.2} MBytes", b / (1024.0 * 1024.0))
    } else {
        format!("{:.0} KBytes", b / 1024.0)
    }
}

/// `--bytes`: what the run sends, for the head line.
fn byte_limit(p: &crate::plan::TestPlan) -> String {
    p.bytes
        .map(|b| format!(", {b} B in all (--bytes)"))
        .unwrap_or_default()
}

/// One interval's row. A mix's names its segment of the window (idle,
/// loaded, drain, recovery) and, with bulk parts (whose intervals carry a
/// fairness), their goodput up and down.
pub fn row(out: &mut dyn Write, iv: &crate::result::Interval) -> io::Result<()> {
    Human::default().row(out, iv)
}

impl Human {
    /// The test line and the columns' header ([`head`]), the header with a
    /// `time` column first under `--timestamps`.
    pub fn head(
        &self,
        out: &mut dyn Write,
        test: crate::plan::TestKind,
        server: &str,
        p: &crate::plan::TestPlan,
    ) -> io::Result<()> {
        let mut text = Vec::new();
        head(&mut text, test, server, p, self.agents)?;
        let text = String::from_utf8_lossy(&text);
        let Some(format) = &self.timestamps else {
            return out.write_all(text.as_bytes());
        };
        let width = crate::units::fmt_strftime(0.0, format).chars().count();
        let body = text.trim_end_matches('\n');
        let (first, columns) = body.rsplit_once('\n').unwrap_or(("", body));
        if !first.is_empty() {
            writeln!(out, "{first}")?;
        }
        writeln!(out, "{:<width$} {columns}", "time")
    }

    /// One interval's row ([`row`]), in `--format`'s unit and after the
    /// wall-clock time under `--timestamps`.
    pub fn row(&self, out: &mut dyn Write, iv: &crate::result::Interval) -> io::Result<()> {
        if !iv.clients.is_empty() {
            let lead = self.timestamps.as_ref().map_or(String::new(), |f| {
                format!("{} ", crate::units::fmt_strftime(iv.unix_end_s, f))
            });
            return super::fleet::rows(out, iv, self.units, &lead);
        }
        if let Some(format) = &self.timestamps {
            write!(
                out,
                "{} ",
                crate::units::fmt_strftime(iv.unix_end_s, format)
            )?;
        }
        row_in(out, iv, self.units)
    }
}

fn row_in(
    out: &mut dyn Write,
    iv: &crate::result::Interval,
    units: Option<RateUnit>,
) -> io::Result<()> {
    let phase = iv.load_phase.map_or(iv.phase.name(), |p| p.name());
    if iv.fairness.is_some() {
        let way = |v: Option<f64>| v.map_or("-".to_string(), |v| RateUnit::show(units, v));
        return writeln!(
            out,
            "{:>8} {:>8}  {:<9} {:>16} {:>16}",
            Fixed(iv.start_s, 2),
            Fixed(iv.end_s, 2),
            phase,
            way(iv.sum.throughput_bps_c2s),
            way(iv.sum.throughput_bps_s2c)
        );
    }
    write!(
        out,
        "{:>8} {:>8}  {:<9} {:>22}",
        Fixed(iv.start_s, 2),
        Fixed(iv.end_s, 2),
        phase,
        headline(&iv.sum, units)
    )?;
    if let Some(t) = &iv.tcp_info {
        write!(out, " {:>6} {:>12}", t.retransmits, cwnd_text(t.cwnd))?;
    }
    if let Some(j) = iv.sum.jitter_ns {
        write!(out, "  jitter {}", fmt_ns(j as f64))?;
    }
    if let Some(o) = &iv.owd_ns {
        write!(
            out,
            "  up {} down {} ± {}",
            fmt_ns(o.up_p50 as f64),
            fmt_ns(o.down_p50 as f64),
            fmt_ns(o.error_ns as f64)
        )?;
    }
    writeln!(out)
}

impl Exporter for Human {
    fn write(&self, r: &TestResult, out: &mut dyn Write) -> io::Result<()> {
        let p = &r.spec.plan;
        let s = &r.summary;
        if self.verbose {
            for (end, prov) in [
                ("local", &r.provenance.local),
                ("remote", &r.provenance.remote),
            ] {
                if let Some(prov) = prov {
                    writeln!(out, "# {end}")?;
                    // The remote end's strings are its word: escaped.
                    for line in crate::sensors::human_lines(prov) {
                        writeln!(out, "#   {}", crate::text::message(&line))?;
                    }
                }
            }
        }
        if !self.rows_shown {
            // A saved run from many agents shows as it ran.
            let human = Human {
                agents: self.agents.max(s.clients.len()),
                ..self.clone()
            };
            human.head(out, r.test, &r.spec.server, p)?;
            for iv in &r.intervals {
                self.row(out, iv)?;
            }
        }
        writeln!(
            out,
            "-- summary over {} s measured --",
            Fixed(s.duration_s, 2)
        )?;
        if !s.parts.is_empty() {
            super::mix::lines(r, out)?;
        }
        if !s.clients.is_empty() {
            super::fleet::lines(r, out, self.units)?;
        }
        // capacity's load is its probe's, not a figure of the path.
        let load = if r.test.traits().rate == crate::plan::Rate::ProbeBits {
            "probe load"
        } else {
            "throughput"
        };
        if let Some(t) = s.throughput_bps {
            let rate = |v| RateUnit::show(self.units, v);
            writeln!(out, "  {load:<10} (received)  {}", rate(t))?;
            if let (Some(a), Some(b)) = (s.throughput_bps_c2s, s.throughput_bps_s2c) {
                writeln!(out, "    client->server       {}", rate(a))?;
                writeln!(out, "    server->client       {}", rate(b))?;
            }
            if let Some(sent) = s.throughput_bps_sent {
                writeln!(out, "  {load:<10} (sent)      {}", rate(sent))?;
            }
        }
        if let (Some(sent), Some(recvd)) = (s.datagrams_sent, s.datagrams_received) {
            let lost = s.lost.unwrap_or(0);
            writeln!(
                out,
                "  datagrams              {sent} sent, {recvd} received, {lost} lost ({:.3} %), {} reordered, {} duplicates",
                100.0 * lost as f64 / (recvd + lost).max(1) as f64,
                s.reordered.unwrap_or(0),
                s.duplicates.unwrap_or(0)
            )?;
        }
        if let Some(j) = s.jitter_ns {
            writeln!(out, "  jitter                 {}", fmt_ns(j as f64))?;
        }
        if let Some(t) = s.transactions_per_s {
            write!(
                out,
                "  transactions/s         {}  ({} transactions",
                Fixed(t, 1),
                s.transactions.unwrap_or(0)
            )?;
            match s.lost {
                Some(l) => writeln!(out, ", {l} lost)")?,
                None => writeln!(out, ")")?,
            }
        }
        if r.test.is_udp() {
            writeln!(
                out,
                "  packets/s (client)     {} sent, {} received",
                Fixed(s.local.datagrams_sent_per_s, 1),
                Fixed(s.local.datagrams_received_per_s, 1)
            )?;
        }
        if let Some(l) = &s.latency_ns {
            writeln!(
                out,
                "  latency  min {}  mean {}  stddev {}",
                fmt_ns(l.min as f64),
                fmt_ns(l.mean),
                fmt_ns(l.stddev)
            )?;
            writeln!(
                out,
                "           p50 {}  p90 {}  p99 {}  p99.9 {}  max {}",
                fmt_ns(l.p50 as f64),
                fmt_ns(l.p90 as f64),
                fmt_ns(l.p99 as f64),
                fmt_ns(l.p99_9 as f64),
                fmt_ns(l.max as f64)
            )?;
            if !l.percentiles.is_empty() {
                let ps: Vec<String> = l
                    .percentiles
                    .iter()
                    .map(|p| format!("p{} {}", p.percentile, fmt_ns(p.ns as f64)))
                    .collect();
                writeln!(out, "           {}", ps.join("  "))?;
            }
        }
        open_loop_lines(out, s)?;
        one_way_lines(out, s)?;
        if self.histogram
            && let Some(h) = s
                .histogram
                .as_deref()
                .and_then(|h| crate::stats::latency::LatencyHistogram::from_base64(h).ok())
        {
            writeln!(out, "  latency histogram (log2 buckets)")?;
            for row in h.text_rows() {
                writeln!(out, "    {row}")?;
            }
        }
        // A probe's trains are bursty by design: their load's steadiness
        // says nothing (the JSON keeps the figures).
        if let Some(cv) = s.stability_cv.filter(|_| load == "throughput") {
            write!(
                out,
                "  stability              cv {} %",
                Fixed(100.0 * cv, 1)
            )?;
            match s.trend_percent {
                Some(t) => writeln!(out, ", trend {:+} % (last third vs first)", Fixed(t, 1))?,
                None => writeln!(out)?,
            }
        }
        writeln!(
            out,
            "  {:<8} {:>16} {:>16} {:>14}",
            "end", "bytes sent", "bytes received", "transactions"
        )?;
        for (name, side) in [("local", &s.local), ("remote", &s.remote)] {
            writeln!(
                out,
                "  {:<8} {:>16} {:>16} {:>14}",
                name, side.bytes_sent, side.bytes_received, side.transactions
            )?;
        }
        if let Some(d) = drivers_line(&r.environment) {
            writeln!(out, "  {:<23}{d}", "drivers")?;
        }
        if let Some(b) = busy_poll_line(s) {
            writeln!(out, "  {:<23}{b}", "busy poll")?;
        }
        if let (Some(i), Some(tx), Some(rx)) =
            (&s.interface, s.tx_packets_per_s, s.rx_packets_per_s)
        {
            let (tx, rx) = (Fixed(tx, 1), Fixed(rx, 1));
            writeln!(out, "  packets/s on {i:<10} {tx} tx, {rx} rx")?;
        }
        if let Some(d) = &s.capacity_by_direction {
            // One line per direction measured; "up" and "down" only when
            // there are two (or the one is not the default way).
            let both = d.c2s.is_some() && d.s2c.is_some();
            for (way, c) in [("up ", &d.c2s), ("down ", &d.s2c)] {
                let Some(c) = c else { continue };
                let way = if both || way == "down " { way } else { "" };
                let [lo, hi] = c.capacity_interval_bps;
                writeln!(
                    out,
                    "  capacity {way}{} ({} to {}), probe load {} % of it",
                    crate::units::BitsPerSec(c.capacity_bps),
                    crate::units::BitsPerSec(lo),
                    crate::units::BitsPerSec(hi),
                    Fixed(100.0 * c.probe_load_fraction, 1)
                )?;
                if let Some(p) = c.loss_percent {
                    let p = Fixed(p, 2);
                    writeln!(
                        out,
                        "  probe datagrams {way}{} received, {} lost ({p} %), {} of {} trains broken",
                        c.datagrams_received, c.datagrams_lost, c.broken, c.trains
                    )?;
                }
                if let Some(b) = &c.shaper {
                    writeln!(
                        out,
                        "  a token bucket{}: trains up to {} packets at {}, longer at {}",
                        if way.is_empty() { "" } else { " " }.to_owned() + way.trim_end(),
                        b.burst_packets,
                        crate::units::BitsPerSec(b.burst_rate_bps),
                        crate::units::BitsPerSec(b.sustained_rate_bps)
                    )?;
                }
            }
        }
        if let Some(i) = &s.interface {
            match (
                s.link_speed_bps,
                s.link_util_percent.tx,
                s.link_util_percent.rx,
            ) {
                (Some(speed), Some(tx), Some(rx)) => writeln!(
                    out,
                    "  link {i} at {}: {} % tx, {} % rx",
                    crate::units::fmt_rate_bps(speed),
                    Fixed(tx, 2),
                    Fixed(rx, 2)
                )?,
                (None, ..) => writeln!(out, "  link {i}: speed unknown, no utilisation")?,
                _ => {}
            }
        }
        let p = &r.spec.plan;
        let asked = |o: &crate::plan::SocketOpts| {
            o.send_buffer_bytes.is_some() || o.recv_buffer_bytes.is_some()
        };
        if self.verbose || asked(&p.local) || asked(&p.remote) {
            for (end, side, opts) in [
                ("local", &s.local, &p.local),
                ("remote", &s.remote, &p.remote),
            ] {
                writeln!(
                    out,
                    "  socket buffers {end:<7} {}",
                    buffer_line(side, opts, r.test.is_udp())
                )?;
            }
        }
        for (end, side, on) in [
            ("local", &s.local, self.local_cpu),
            ("remote", &s.remote, self.remote_cpu),
        ] {
            if on {
                cpu_lines(out, end, side, r.test.is_stream())?;
            }
        }
        if let Some(c) = &r.confidence {
            writeln!(out, "  iterations")?;
            for it in &r.iterations {
                writeln!(out, "    {:>3}  {}", it.index, figure(it.figure, it.unit))?;
            }
            let unit = r.iterations.first().map_or("", |i| i.unit);
            write!(
                out,
                "  mean {} over {} iteration(s); {} % interval ",
                figure(c.mean, unit),
                c.iterations_run,
                c.level
            )?;
            match c.width_percent_achieved {
                Some(w) => write!(out, "{} % wide (±{} %)", Fixed(w, 2), Fixed(w / 2.0, 2))?,
                None => write!(out, "undefined")?,
            }
            writeln!(
                out,
                ", {} % asked: {}",
                c.width_percent_requested,
                if c.achieved {
                    "achieved"
                } else {
                    "NOT ACHIEVED"
                }
            )?;
        }
        if let Some(setup) = s.setup_s {
            write!(
                out,
                "  setup                  {} ms for {} flow(s)",
                Fixed(setup * 1e3, 1),
                r.spec.plan.flows
            )?;
            let mb = |ru: &Option<crate::control::proto::Rusage>| {
                ru.as_ref().map(|u| u.max_rss_kb as f64 / 1024.0)
            };
            match (mb(&s.local.rusage), mb(&s.remote.rusage)) {
                (Some(c), _) if r.spec.embedded_server => {
                    writeln!(out, "; max RSS {c:.1} MB (client and embedded server)")?
                }
                (Some(c), Some(sv)) => {
                    writeln!(out, "; max RSS client {c:.1} MB, server {sv:.1} MB")?
                }
                _ => writeln!(out)?,
            }
        }
        if self.verbose {
            for (end, side) in [("local", &s.local), ("remote", &s.remote)] {
                let Some(t) = &side.call_times else { continue };
                for (what, h) in [("send", &t.send), ("receive", &t.recv)] {
                    if h.calls == 0 {
                        continue;
                    }
                    writeln!(out, "  {end} {what} call times (netperf's -v 2 histogram)")?;
                    for row in h.text_rows() {
                        writeln!(out, "    {row}")?;
                    }
                }
            }
        }
        for (end, side) in [("client", &s.local), ("server", &s.remote)] {
            if let Some(z) = &side.zerocopy {
                writeln!(
                    out,
                    "  zerocopy {end:<13} {} sends, {} completed, {} copied by the kernel ({:.0} %)",
                    z.sends,
                    z.completions,
                    z.copied,
                    z.copied_percent()
                )?;
            }
        }
        // Warnings and the error go to stderr (the command says them), so
        // that standard output holds results only.
        Ok(())
    }
}
