//! The aggregate tests of runemomniaggdemo.sh and the thrum plan each one runs.

use std::fmt;
use std::str::FromStr;

use crate::plan::{TestKind, TestPlan};
use crate::result::Interval;

/// One of `--tests tps,outbound,inbound,bidir,sync,rr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AggTest {
    /// 1-byte burst-mode udp_rr: the packet rate.
    Tps,
    /// tcp_stream with 64K sends.
    Outbound,
    /// tcp_maerts with 64K sends.
    Inbound,
    /// 64K request/response burst-mode tcp_rr with 1M socket buffers.
    Bidir,
    /// 1-byte tcp_rr, one transaction in flight.
    Sync,
    /// 1-byte tcp_rr, one transaction in flight per stream, ramped like tps:
    /// netperf's aggregate of concurrent `TCP_RR` processes, one per stream.
    Rr,
}

impl AggTest {
    pub const ALL: [AggTest; 6] = [
        AggTest::Tps,
        AggTest::Outbound,
        AggTest::Inbound,
        AggTest::Bidir,
        AggTest::Sync,
        AggTest::Rr,
    ];

    pub fn name(self) -> &'static str {
        match self {
            AggTest::Tps => "tps",
            AggTest::Outbound => "outbound",
            AggTest::Inbound => "inbound",
            AggTest::Bidir => "bidir",
            AggTest::Sync => "sync",
            AggTest::Rr => "rr",
        }
    }

    pub fn unit(self) -> &'static str {
        match self {
            AggTest::Tps | AggTest::Sync | AggTest::Rr => "Trans/s",
            _ => "Mbit/s",
        }
    }

    /// Whether the test keeps a burst of transactions in flight.
    /// Whether its streams run transactions (a latency per transaction).
    pub fn transactions(self) -> bool {
        !matches!(self, AggTest::Outbound | AggTest::Inbound)
    }

    pub fn uses_burst(self) -> bool {
        matches!(self, AggTest::Tps | AggTest::Bidir)
    }

    /// The plan of one stream: one flow on one worker thread, no warm-up
    /// (the ramp's trimming does that job), samples every `interval_ns`.
    pub fn plan(self, burst: u32, duration_ns: u64, interval_ns: u64) -> TestPlan {
        let kind = match self {
            AggTest::Tps => TestKind::UdpRr,
            AggTest::Outbound => TestKind::TcpStream,
            AggTest::Inbound => TestKind::TcpMaerts,
            AggTest::Bidir | AggTest::Sync | AggTest::Rr => TestKind::TcpRr,
        };
        let mut p = TestPlan::new(kind);
        p.flows = 1;
        p.threads = 1;
        p.warmup_ns = 0;
        p.cooldown_ns = 0;
        p.duration_ns = duration_ns;
        p.interval_ns = interval_ns;
        match self {
            AggTest::Tps => p.burst = burst,
            AggTest::Outbound | AggTest::Inbound => p.send_bytes = 64 << 10,
            AggTest::Bidir => {
                p.burst = burst;
                (p.request_bytes, p.response_bytes) = (64 << 10, 64 << 10);
                for side in [&mut p.local, &mut p.remote] {
                    side.send_buffer_bytes = Some(1 << 20);
                    side.recv_buffer_bytes = Some(1 << 20);
                }
            }
            AggTest::Sync | AggTest::Rr => {}
        }
        p
    }

    /// The figure of one interval in [`AggTest::unit`].
    pub fn value(self, plan: &TestPlan, iv: &Interval) -> f64 {
        self.value_of(plan, iv.sum.transactions_per_s, iv.sum.throughput_bps)
    }

    /// The figure in [`AggTest::unit`] from a rate of transactions or bits.
    pub fn value_of(self, plan: &TestPlan, tps: Option<f64>, bps: Option<f64>) -> f64 {
        match self {
            AggTest::Tps | AggTest::Sync | AggTest::Rr => tps.unwrap_or(0.0),
            AggTest::Outbound | AggTest::Inbound => bps.unwrap_or(0.0) / 1e6,
            // Both directions' payload: each transaction moves a request and a response.
            AggTest::Bidir => {
                tps.unwrap_or(0.0) * (plan.request_bytes + plan.response_bytes) as f64 * 8.0 / 1e6
            }
        }
    }
}

impl fmt::Display for AggTest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for AggTest {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        AggTest::ALL
            .into_iter()
            .find(|t| t.name() == s.trim())
            .ok_or_else(|| {
                format!(
                    "--tests: unknown test '{s}' (accepted: tps, outbound, inbound, bidir, sync, rr)"
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_are_valid() {
        for t in AggTest::ALL {
            t.plan(4, 3_000_000_000, 500_000_000).validate().unwrap();
            assert_eq!(t.name().parse::<AggTest>().unwrap(), t);
        }
        assert!("pps".parse::<AggTest>().is_err());
    }
}
