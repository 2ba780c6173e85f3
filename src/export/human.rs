//! The human table: per-interval sums, then the summary with units, like
//! netperf's and iperf3's.

use std::io::{self, Write};

use super::Exporter;
use crate::result::{Figures, TestResult};
use crate::units::{BitsPerSec, fmt_ns};

pub struct Human;

fn headline(f: &Figures) -> String {
    if let Some(t) = f.throughput_bps {
        BitsPerSec(t).to_string()
    } else {
        format!("{:.1} trans/s", f.transactions_per_s.unwrap_or(0.0))
    }
}

impl Exporter for Human {
    fn write(&self, r: &TestResult, out: &mut dyn Write) -> io::Result<()> {
        let p = &r.spec.plan;
        let s = &r.summary;
        write!(
            out,
            "{} to {}: {} flow(s) on {} thread(s)",
            r.test, r.spec.server, p.flows, p.threads
        )?;
        if r.test == crate::plan::TestKind::UdpStream {
            match p.rate_bps {
                Some(rate) => writeln!(
                    out,
                    ", datagrams of {} B at {} per flow",
                    p.send_bytes,
                    crate::units::BitsPerSec(rate as f64)
                )?,
                None => writeln!(out, ", datagrams of {} B, unpaced", p.send_bytes)?,
            }
        } else if r.test.is_stream() {
            writeln!(out, ", send {} B, recv {} B", p.send_bytes, p.recv_bytes)?;
        } else {
            write!(
                out,
                ", request {} B, response {} B",
                p.request_bytes, p.response_bytes
            )?;
            if p.burst > 0 {
                write!(out, ", burst {}", p.burst)?;
            }
            writeln!(out)?;
        }
        writeln!(
            out,
            "{:>8} {:>8}  {:<9} {:>22}",
            "start_s", "end_s", "phase", "result"
        )?;
        for iv in &r.intervals {
            writeln!(
                out,
                "{:>8.2} {:>8.2}  {:<9} {:>22}",
                iv.start_s,
                iv.end_s,
                iv.phase.name(),
                headline(&iv.sum)
            )?;
        }
        writeln!(out, "-- summary over {:.2} s measured --", s.duration_s)?;
        if let Some(t) = s.throughput_bps {
            writeln!(out, "  throughput (received)  {}", BitsPerSec(t))?;
            if let (Some(a), Some(b)) = (s.throughput_bps_c2s, s.throughput_bps_s2c) {
                writeln!(out, "    client->server       {}", BitsPerSec(a))?;
                writeln!(out, "    server->client       {}", BitsPerSec(b))?;
            }
            if let Some(sent) = s.throughput_bps_sent {
                writeln!(out, "  throughput (sent)      {}", BitsPerSec(sent))?;
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
        if let Some(t) = s.transactions_per_s {
            write!(
                out,
                "  transactions/s         {:.1}  ({} transactions",
                t,
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
                "  packets/s (client)     {:.1} sent, {:.1} received",
                s.local.datagrams_sent_per_s, s.local.datagrams_received_per_s
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
        if let Some(setup) = s.setup_s {
            write!(
                out,
                "  setup                  {:.1} ms for {} flow(s)",
                setup * 1e3,
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
        for w in &s.warnings {
            writeln!(out, "warning: {w}")?;
        }
        if let Some(e) = &s.error {
            writeln!(out, "error: {e}")?;
        }
        Ok(())
    }
}
