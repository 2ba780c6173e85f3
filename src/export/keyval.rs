//! netperf-style `KEY=value` lines (the omni output selectors' names where
//! they mean the same thing), for scripts written against netperf.

use std::io::{self, Write};

use super::Exporter;
use crate::result::{Environment, TestResult};

pub struct Keyval;

impl Exporter for Keyval {
    fn write(&self, r: &TestResult, out: &mut dyn Write) -> io::Result<()> {
        let s = &r.summary;
        let p = &r.spec.plan;
        writeln!(out, "TEST={}", r.test.name())?;
        writeln!(out, "ELAPSED_TIME={:.3}", s.duration_s)?;
        writeln!(out, "FLOWS={}", p.flows)?;
        writeln!(out, "THREADS={}", p.threads)?;
        if let Some(t) = s.throughput_bps {
            writeln!(out, "THROUGHPUT={:.2}", t / 1e6)?;
            writeln!(out, "THROUGHPUT_UNITS=10^6bits/s")?;
            writeln!(out, "THROUGHPUT_BPS={t:.0}")?;
        }
        if let (Some(a), Some(b)) = (s.throughput_bps_c2s, s.throughput_bps_s2c) {
            writeln!(out, "THROUGHPUT_C2S_BPS={a:.0}")?;
            writeln!(out, "THROUGHPUT_S2C_BPS={b:.0}")?;
        }
        if let Some(t) = s.transactions_per_s {
            writeln!(out, "THROUGHPUT={t:.2}")?;
            writeln!(out, "THROUGHPUT_UNITS=Trans/s")?;
            writeln!(out, "TRANSACTION_RATE={t:.2}")?;
            writeln!(out, "TRANSACTIONS={}", s.transactions.unwrap_or(0))?;
            writeln!(out, "REQUEST_SIZE={}", p.request_bytes)?;
            writeln!(out, "RESPONSE_SIZE={}", p.response_bytes)?;
            writeln!(out, "BURST_SIZE={}", p.burst)?;
        }
        if let Some(l) = &s.latency_ns {
            // netperf reports latency in microseconds.
            writeln!(out, "MIN_LATENCY={:.3}", l.min as f64 / 1e3)?;
            writeln!(out, "MEAN_LATENCY={:.3}", l.mean / 1e3)?;
            // netperf's name for the mean round trip.
            writeln!(out, "RT_LATENCY={:.3}", l.mean / 1e3)?;
            writeln!(out, "STDDEV_LATENCY={:.3}", l.stddev / 1e3)?;
            writeln!(out, "P50_LATENCY={:.3}", l.p50 as f64 / 1e3)?;
            writeln!(out, "P90_LATENCY={:.3}", l.p90 as f64 / 1e3)?;
            writeln!(out, "P99_LATENCY={:.3}", l.p99 as f64 / 1e3)?;
            writeln!(out, "P999_LATENCY={:.3}", l.p99_9 as f64 / 1e3)?;
            writeln!(out, "MAX_LATENCY={:.3}", l.max as f64 / 1e3)?;
            writeln!(out, "LATENCY_UNITS=us")?;
        }
        // Open loop (--rate); latencies in us as above.
        if let Some(ol) = &s.open_loop {
            let (o, a) = (ol.offered_per_s, ol.achieved_per_s);
            writeln!(out, "OFFERED_RATE={o:.2}\nACHIEVED_RATE={a:.2}")?;
            writeln!(out, "LATE={}", ol.late)?;
            if let Some(v) = &ol.service_latency_ns {
                writeln!(out, "P50_SERVICE_LATENCY={:.3}", v.p50 as f64 / 1e3)?;
                writeln!(out, "P99_SERVICE_LATENCY={:.3}", v.p99 as f64 / 1e3)?;
            }
            if let Some(g) = &ol.generator_lag_ns {
                writeln!(out, "P99_GENERATOR_LAG={:.3}", g.p99 as f64 / 1e3)?;
            }
        }
        for (k, v) in [
            ("DATAGRAMS_SENT", s.datagrams_sent),
            ("DATAGRAMS_RECVD", s.datagrams_received),
            ("LOST", s.lost),
            ("REORDERED", s.reordered),
            ("DUPLICATES", s.duplicates),
        ] {
            if let Some(v) = v {
                writeln!(out, "{k}={v}")?;
            }
        }
        if r.test.is_udp() {
            writeln!(
                out,
                "LOCAL_DATAGRAMS_SENT_PER_S={:.2}",
                s.local.datagrams_sent_per_s
            )?;
            writeln!(
                out,
                "LOCAL_DATAGRAMS_RECVD_PER_S={:.2}",
                s.local.datagrams_received_per_s
            )?;
        }
        writeln!(out, "LOCAL_BYTES_SENT={}", s.local.bytes_sent)?;
        writeln!(out, "LOCAL_BYTES_RECVD={}", s.local.bytes_received)?;
        writeln!(out, "REMOTE_BYTES_SENT={}", s.remote.bytes_sent)?;
        writeln!(out, "REMOTE_BYTES_RECVD={}", s.remote.bytes_received)?;
        for (pre, side) in [("LOCAL", &s.local), ("REMOTE", &s.remote)] {
            if let Some(u) = side.cpu_util_percent {
                writeln!(out, "{pre}_CPU_UTIL={u:.2}")?;
            }
            if let Some(n) = side.cpus {
                writeln!(out, "{pre}_CPU_COUNT={n}")?;
            }
            if let Some(sd) = side
                .service_demand_us_per_tran
                .or(side.service_demand_us_per_kb)
            {
                writeln!(out, "{pre}_SD={sd:.3}")?;
                writeln!(
                    out,
                    "{pre}_SD_SOURCE={}",
                    side.service_demand_source.unwrap_or("")
                )?;
            }
            if let Some(c) = &side.cpu {
                writeln!(out, "{pre}_CPU_STEAL={:.2}", c.overall.steal_percent)?;
                if let Some(b) = c.busiest_cpu {
                    writeln!(out, "{pre}_CPU_PEAK_ID={b}")?;
                    writeln!(
                        out,
                        "{pre}_CPU_PEAK_UTIL={:.2}",
                        c.busiest_cpu_percent.unwrap_or(0.0)
                    )?;
                }
            }
            if let Some(t) = side.tcp_retransmits {
                writeln!(out, "{pre}_TRANSPORT_RETRANS={t}")?;
            }
            // netperf omni's names: LSS/LSR (local send/receive socket
            // size), RSS/RSR (remote); _REQ is what was asked.
            let e = &pre[..1];
            let opts = if pre == "LOCAL" { &p.local } else { &p.remote };
            if let Some(b) = &side.socket_buffers {
                writeln!(out, "{e}SS_SIZE={}", b.send_bytes)?;
                writeln!(out, "{e}SR_SIZE={}", b.recv_bytes)?;
            }
            if let Some(v) = opts.send_buffer_bytes {
                writeln!(out, "{e}SS_SIZE_REQ={v}")?;
            }
            if let Some(v) = opts.recv_buffer_bytes {
                writeln!(out, "{e}SR_SIZE_REQ={v}")?;
            }
            if let Some(z) = &side.zerocopy {
                writeln!(out, "{pre}_ZEROCOPY_SENDS={}", z.sends)?;
                writeln!(out, "{pre}_ZEROCOPY_COMPLETIONS={}", z.completions)?;
                writeln!(out, "{pre}_ZEROCOPY_COPIED={}", z.copied)?;
            }
        }
        if r.test.is_stream() {
            writeln!(out, "SD_UNITS=us/KB")?;
        } else {
            writeln!(out, "SD_UNITS=us/Tr")?;
        }
        if let (Some(i), Some(tx), Some(rx)) =
            (&s.interface, s.tx_packets_per_s, s.rx_packets_per_s)
        {
            writeln!(out, "LOCAL_INTERFACE_NAME={i}")?;
            writeln!(out, "LOCAL_TX_PACKETS_PER_S={tx:.2}")?;
            writeln!(out, "LOCAL_RX_PACKETS_PER_S={rx:.2}")?;
        }
        if let Some(speed) = s.link_speed_bps {
            writeln!(out, "LOCAL_LINK_SPEED_BPS={speed}")?;
        }
        for (dir, u) in [
            ("TX", s.link_util_percent.tx),
            ("RX", s.link_util_percent.rx),
        ] {
            if let Some(u) = u {
                writeln!(out, "LOCAL_LINK_UTIL_{dir}_PERCENT={u:.3}")?;
            }
        }
        if r.test.is_stream() {
            writeln!(out, "LOCAL_SEND_SIZE={}", p.send_bytes)?;
            writeln!(out, "LOCAL_RECV_SIZE={}", p.recv_bytes)?;
        }
        // The drivers each end's workers ran (`--driver auto` chooses per
        // worker): distinct names, comma-separated; empty if none started.
        for (key, list) in [
            ("LOCAL_DRIVER", &r.environment.local_drivers),
            ("REMOTE_DRIVER", &r.environment.remote_drivers),
        ] {
            let names: Vec<&str> = Environment::driver_counts(list)
                .into_iter()
                .map(|(name, _)| name)
                .collect();
            writeln!(out, "{key}={}", names.join(","))?;
        }
        if let Some(e) = &s.error {
            writeln!(out, "ERROR={}", e.replace('\n', " "))?;
        }
        // Every warning, on one line as key=value wants: joined by " | ".
        let warnings: Vec<String> = s
            .warnings
            .iter()
            .map(|w| w.message.replace('\n', " "))
            .collect();
        writeln!(out, "WARNINGS={}", warnings.join(" | "))?;
        Ok(())
    }
}
