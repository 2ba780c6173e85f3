//! netperf-style `KEY=value` lines: every field of [`super::fields::FIELDS`]
//! the result carries, in the table's order (the omni output selectors'
//! names where they mean the same thing), for scripts written against
//! netperf. Control characters in a value are escaped (`\n`), so that
//! every line is one key.

use std::io::{self, Write};

use super::Exporter;
use crate::result::TestResult;

#[derive(Default)]
pub struct Keyval {
    /// `--format`: THROUGHPUT and THROUGHPUT_UNITS in this unit.
    pub units: Option<crate::units::RateUnit>,
}

impl Exporter for Keyval {
    fn write(&self, r: &TestResult, out: &mut dyn Write) -> io::Result<()> {
        let mut all = super::fields::values(r);
        super::fields::in_units(&mut all, r, self.units);
        for (k, v) in all {
            // A value may come from the server or a results file: a
            // newline in it would forge a line of its own.
            writeln!(out, "{k}={}", crate::text::escape(&v, usize::MAX))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::fields::tests::{bulk, full_open_loop};

    /// What keyval printed before it read the one field table, key for
    /// key and digit for digit.
    #[test]
    fn keys_values_and_order_are_as_before_the_table() {
        for (r, want) in [(full_open_loop(), OPEN_LOOP), (bulk(), BULK)] {
            let text = String::from_utf8(crate::export::render(&Keyval::default(), &r)).unwrap();
            assert_eq!(text, want);
        }
    }

    /// A value with a newline (a server's kernel name) stays one line.
    #[test]
    fn control_characters_in_values_are_escaped() {
        let mut r = bulk();
        r.provenance.remote = Some(crate::sensors::Provenance {
            kernel: Some(crate::sensors::provenance::Kernel {
                sysname: "Linux\nTHROUGHPUT=999".into(),
                release: "6.1\r\x1b[2J".into(),
                version: String::new(),
                machine: String::new(),
            }),
            ..Default::default()
        });
        let text = String::from_utf8(crate::export::render(&Keyval::default(), &r)).unwrap();
        assert_eq!(
            text.lines()
                .filter(|l| l.starts_with("THROUGHPUT="))
                .count(),
            1
        );
        assert!(
            text.contains("REMOTE_SYSNAME=Linux\\nTHROUGHPUT=999\n"),
            "{text}"
        );
        assert!(text.contains("REMOTE_RELEASE=6.1\\r\\u{1b}[2J\n"), "{text}");
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
PROTOCOL=UDP
DIRECTION=Send|Recv
LOCAL_SOCKET_TOS=0x00
REMOTE_SOCKET_TOS=0x00
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
REMOTE_SEND_SIZE=1472
REMOTE_RECV_SIZE=131072
PROTOCOL=UDP
DIRECTION=Send
LOCAL_SOCKET_TOS=0x00
REMOTE_SOCKET_TOS=0x00
LOCAL_DRIVER=
REMOTE_DRIVER=
WARNINGS=
";
}
