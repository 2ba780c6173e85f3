//! netperf-style `KEY=value` lines: every field of [`super::fields::FIELDS`]
//! the result carries, in the table's order (the omni output selectors'
//! names where they mean the same thing), for scripts written against
//! netperf.

use std::io::{self, Write};

use super::Exporter;
use crate::result::TestResult;

pub struct Keyval;

impl Exporter for Keyval {
    fn write(&self, r: &TestResult, out: &mut dyn Write) -> io::Result<()> {
        for (k, v) in super::fields::values(r) {
            writeln!(out, "{k}={v}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::plan::{TestKind, TestPlan};
    use crate::result::{Environment, LinkUtil, Provenances, Spec, Summary};
    use crate::stats::latency::LatencySummary;
    use crate::warning::{Code, Warning};

    fn latency(base: u64) -> LatencySummary {
        LatencySummary {
            count: 100,
            min: base,
            mean: base as f64 * 1.5,
            stddev: base as f64 / 3.0,
            p50: base + 1,
            p90: base * 2,
            p99: base * 3,
            p99_9: base * 4,
            max: base * 5,
            percentiles: Vec::new(),
        }
    }

    /// An open-loop udp_rr run with every reading keyval prints: both
    /// ends' CPU, buffers (asked and set), zero-copy and retransmit
    /// counts, the interface with its link speed and utilisation, an
    /// error and two warnings.
    pub(crate) fn full_open_loop() -> TestResult {
        let mut plan = TestPlan::new(TestKind::UdpRr);
        plan.offered_per_s = Some(500);
        plan.local.send_buffer_bytes = Some(65536);
        plan.remote.recv_buffer_bytes = Some(32768);
        let mut s = Summary {
            duration_s: 1.0004,
            transactions_per_s: Some(501.726),
            transactions: Some(502),
            latency_ns: Some(latency(17_776)),
            offered_per_s: Some(500.0),
            achieved_per_s: Some(501.726),
            late: Some(21),
            service_latency_ns: Some(latency(5_401)),
            generator_lag_ns: Some(crate::result::GeneratorLag {
                p50: 1000,
                p99: 4_395_007,
                max: 5_000_000,
            }),
            lost: Some(3),
            interface: Some("eth0".into()),
            tx_packets_per_s: Some(1005.514),
            rx_packets_per_s: Some(1004.2),
            link_speed_bps: Some(10_000_000_000),
            link_util_percent: LinkUtil {
                tx: Some(0.0123),
                rx: Some(0.0456),
            },
            error: Some("lost the\nserver".into()),
            ..Summary::default()
        };
        s.warnings.push(Warning::new(Code::Trend, "one\nwarning"));
        s.warnings.push(Warning::new(Code::Trend, "another"));
        for (i, side) in [&mut s.local, &mut s.remote].into_iter().enumerate() {
            side.datagrams_sent_per_s = 500.73;
            side.datagrams_received_per_s = 501.73;
            side.bytes_sent = 501 + i as u64;
            side.bytes_received = 502;
            side.cpu_util_percent = Some(12.345);
            side.cpus = Some(2);
            side.service_demand_us_per_tran = Some(106.2764);
            side.service_demand_source = Some("rusage");
            side.cpu = Some(crate::sensors::CpuUsage {
                busiest_cpu: Some(1),
                busiest_cpu_percent: Some(99.5),
                ..Default::default()
            });
            side.tcp_retransmits = Some(7);
            side.socket_buffers = Some(crate::io::socket::SocketBuffers {
                send_bytes: 212992,
                recv_bytes: 106496,
                ..Default::default()
            });
            side.zerocopy = Some(crate::io::zerocopy::ZeroCopyCounts {
                sends: 10,
                completions: 9,
                copied: 1,
            });
        }
        let environment = Environment {
            local_drivers: vec!["uring".into(), "epoll".into(), "uring".into()],
            remote_drivers: vec!["epoll".into()],
            ..Environment::default()
        };
        TestResult {
            schema: crate::result::SCHEMA,
            test: plan.test,
            spec: Spec {
                plan,
                server: "mock".into(),
                server_address: None,
                embedded_server: false,
                bind: None,
            },
            environment,
            provenance: Provenances::default(),
            intervals: Vec::new(),
            summary: s,
            iterations: Vec::new(),
            confidence: None,
        }
    }

    /// A bulk UDP run that also carries a per-direction split (as
    /// tcp_bidir does) and every datagram count, with no CPU readings.
    pub(crate) fn bulk() -> TestResult {
        let mut r = full_open_loop();
        r.test = TestKind::UdpStream;
        r.spec.plan = TestPlan::new(TestKind::UdpStream);
        r.environment = Environment::default();
        r.summary = Summary {
            duration_s: 2.0,
            throughput_bps: Some(123_456_789.4),
            throughput_bps_c2s: Some(100_000_000.6),
            throughput_bps_s2c: Some(23_456_788.8),
            datagrams_sent: Some(10),
            datagrams_received: Some(9),
            lost: Some(1),
            reordered: Some(2),
            duplicates: Some(0),
            ..Summary::default()
        };
        r.summary.local.service_demand_us_per_kb = Some(0.51);
        r
    }

    /// What keyval printed before the field table (issue 27), key for
    /// key and digit for digit.
    #[test]
    fn keys_values_and_order_are_as_before_the_table() {
        for (r, want) in [(full_open_loop(), OPEN_LOOP), (bulk(), BULK)] {
            let text = String::from_utf8(crate::export::render(&Keyval, &r)).unwrap();
            assert_eq!(text, want);
        }
    }

    const OPEN_LOOP: &str = "\
TEST=udp_rr
ELAPSED_TIME=1.000
FLOWS=1
THREADS=1
THROUGHPUT=501.73
THROUGHPUT_UNITS=Trans/s
TRANSACTION_RATE=501.73
TRANSACTIONS=502
REQUEST_SIZE=1
RESPONSE_SIZE=1
BURST_SIZE=0
MIN_LATENCY=17.776
MEAN_LATENCY=26.664
RT_LATENCY=26.664
STDDEV_LATENCY=5.925
P50_LATENCY=17.777
P90_LATENCY=35.552
P99_LATENCY=53.328
P999_LATENCY=71.104
MAX_LATENCY=88.880
LATENCY_UNITS=us
OFFERED_RATE=500.00
ACHIEVED_RATE=501.73
LATE=21
P50_SERVICE_LATENCY=5.402
P99_SERVICE_LATENCY=16.203
P99_GENERATOR_LAG=4395.007
LOST=3
LOCAL_DATAGRAMS_SENT_PER_S=500.73
LOCAL_DATAGRAMS_RECVD_PER_S=501.73
LOCAL_BYTES_SENT=501
LOCAL_BYTES_RECVD=502
REMOTE_BYTES_SENT=502
REMOTE_BYTES_RECVD=502
LOCAL_CPU_UTIL=12.35
LOCAL_CPU_COUNT=2
LOCAL_SD=106.276
LOCAL_SD_SOURCE=rusage
LOCAL_CPU_STEAL=0.00
LOCAL_CPU_PEAK_ID=1
LOCAL_CPU_PEAK_UTIL=99.50
LOCAL_TRANSPORT_RETRANS=7
LSS_SIZE=212992
LSR_SIZE=106496
LSS_SIZE_REQ=65536
LOCAL_ZEROCOPY_SENDS=10
LOCAL_ZEROCOPY_COMPLETIONS=9
LOCAL_ZEROCOPY_COPIED=1
REMOTE_CPU_UTIL=12.35
REMOTE_CPU_COUNT=2
REMOTE_SD=106.276
REMOTE_SD_SOURCE=rusage
REMOTE_CPU_STEAL=0.00
REMOTE_CPU_PEAK_ID=1
REMOTE_CPU_PEAK_UTIL=99.50
REMOTE_TRANSPORT_RETRANS=7
RSS_SIZE=212992
RSR_SIZE=106496
RSR_SIZE_REQ=32768
REMOTE_ZEROCOPY_SENDS=10
REMOTE_ZEROCOPY_COMPLETIONS=9
REMOTE_ZEROCOPY_COPIED=1
SD_UNITS=us/Tr
LOCAL_INTERFACE_NAME=eth0
LOCAL_TX_PACKETS_PER_S=1005.51
LOCAL_RX_PACKETS_PER_S=1004.20
LOCAL_LINK_SPEED_BPS=10000000000
LOCAL_LINK_UTIL_TX_PERCENT=0.012
LOCAL_LINK_UTIL_RX_PERCENT=0.046
LOCAL_DRIVER=uring,epoll
REMOTE_DRIVER=epoll
ERROR=lost the server
WARNINGS=one warning | another
";

    const BULK: &str = "\
TEST=udp_stream
ELAPSED_TIME=2.000
FLOWS=1
THREADS=1
THROUGHPUT=123.46
THROUGHPUT_UNITS=10^6bits/s
THROUGHPUT_BPS=123456789
THROUGHPUT_C2S_BPS=100000001
THROUGHPUT_S2C_BPS=23456789
DATAGRAMS_SENT=10
DATAGRAMS_RECVD=9
LOST=1
REORDERED=2
DUPLICATES=0
LOCAL_DATAGRAMS_SENT_PER_S=0.00
LOCAL_DATAGRAMS_RECVD_PER_S=0.00
LOCAL_BYTES_SENT=0
LOCAL_BYTES_RECVD=0
REMOTE_BYTES_SENT=0
REMOTE_BYTES_RECVD=0
LOCAL_SD=0.510
LOCAL_SD_SOURCE=
SD_UNITS=us/KB
LOCAL_SEND_SIZE=1472
LOCAL_RECV_SIZE=131072
LOCAL_DRIVER=
REMOTE_DRIVER=
WARNINGS=
";
}
