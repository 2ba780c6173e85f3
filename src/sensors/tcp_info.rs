//! A TCP socket's own view of its connection: getsockopt(TCP_INFO).
//!
//! Retransmissions explain an RR test whose packet rate exceeds its
//! transaction rate, and an RTT next to the measured latency shows how much
//! of it the network owns. One getsockopt per flow at the end of a window,
//! never on the data path.
//!
//! The struct follows `struct tcp_info` in include/uapi/linux/tcp.h. The
//! kernel copies min(our length, its length) and says how much it wrote, so
//! fields newer than the running kernel are `None`, not garbage.

use std::mem::{offset_of, size_of};
use std::os::fd::RawFd;

use serde::{Deserialize, Serialize};

#[repr(C)]
#[derive(Default)]
struct RawTcpInfo {
    state: u8,
    ca_state: u8,
    retransmits: u8,
    probes: u8,
    backoff: u8,
    options: u8,
    wscale: u8,
    flags: u8,
    rto: u32,
    ato: u32,
    snd_mss: u32,
    rcv_mss: u32,
    unacked: u32,
    sacked: u32,
    lost: u32,
    retrans: u32,
    fackets: u32,
    last_data_sent: u32,
    last_ack_sent: u32,
    last_data_recv: u32,
    last_ack_recv: u32,
    pmtu: u32,
    rcv_ssthresh: u32,
    rtt: u32,
    rttvar: u32,
    snd_ssthresh: u32,
    snd_cwnd: u32,
    advmss: u32,
    reordering: u32,
    rcv_rtt: u32,
    rcv_space: u32,
    total_retrans: u32,
    pacing_rate: u64,
    max_pacing_rate: u64,
    bytes_acked: u64,
    bytes_received: u64,
    segs_out: u32,
    segs_in: u32,
    notsent_bytes: u32,
    min_rtt: u32,
    data_segs_in: u32,
    data_segs_out: u32,
    delivery_rate: u64,
    busy_time: u64,
    rwnd_limited: u64,
    sndbuf_limited: u64,
    delivered: u32,
    delivered_ce: u32,
    bytes_sent: u64,
    bytes_retrans: u64,
}

/// What TCP_INFO says about one connection, at the moment it was read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TcpInfo {
    /// Segments retransmitted over the connection's life.
    pub total_retrans: u32,
    /// Smoothed round-trip time and its mean deviation, µs.
    pub rtt_us: u32,
    pub rttvar_us: u32,
    /// Congestion window, segments.
    pub snd_cwnd: u32,
    pub snd_mss: u32,
    /// Lowest RTT seen, µs (Linux 4.6+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_rtt_us: Option<u32>,
    /// Segments sent and received, retransmissions included (Linux 4.2+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub segs_out: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub segs_in: Option<u32>,
    /// Bytes retransmitted (Linux 4.19+).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_retrans: Option<u64>,
    /// The pacing rate the stack sets for the connection, bytes/s (Linux
    /// 3.15+; u64::MAX where nothing limits it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pacing_rate: Option<u64>,
    /// The most recent delivery rate sample, bytes/s (Linux 4.9+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_rate: Option<u64>,
    /// Segments sent that carried data (Linux 4.6+): a socket that has
    /// sent none is a receiver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_segs_out: Option<u32>,
}

impl TcpInfo {
    /// Read TCP_INFO of the TCP socket `fd`; `None` when it is not one.
    pub fn read(fd: RawFd) -> Option<TcpInfo> {
        let mut raw = RawTcpInfo::default();
        let mut len = size_of::<RawTcpInfo>() as libc::socklen_t;
        // SAFETY: raw is valid for writes of len bytes, and the kernel writes
        // at most that many and stores the count in len.
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_INFO,
                (&mut raw as *mut RawTcpInfo).cast(),
                &mut len,
            )
        };
        if rc != 0 {
            return None;
        }
        let len = len as usize;
        let has = |end: usize| len >= end;
        if !has(offset_of!(RawTcpInfo, total_retrans) + 4) {
            return None;
        }
        let upto = |off: usize, sz: usize| has(off + sz);
        Some(TcpInfo {
            total_retrans: raw.total_retrans,
            rtt_us: raw.rtt,
            rttvar_us: raw.rttvar,
            snd_cwnd: raw.snd_cwnd,
            snd_mss: raw.snd_mss,
            min_rtt_us: upto(offset_of!(RawTcpInfo, min_rtt), 4).then_some(raw.min_rtt),
            segs_out: upto(offset_of!(RawTcpInfo, segs_out), 4).then_some(raw.segs_out),
            segs_in: upto(offset_of!(RawTcpInfo, segs_in), 4).then_some(raw.segs_in),
            bytes_retrans: upto(offset_of!(RawTcpInfo, bytes_retrans), 8)
                .then_some(raw.bytes_retrans),
            pacing_rate: upto(offset_of!(RawTcpInfo, pacing_rate), 8).then_some(raw.pacing_rate),
            delivery_rate: upto(offset_of!(RawTcpInfo, delivery_rate), 8)
                .then_some(raw.delivery_rate),
            data_segs_out: upto(offset_of!(RawTcpInfo, data_segs_out), 4)
                .then_some(raw.data_segs_out),
        })
    }
}

/// Segments the TCP socket `fd` has retransmitted so far.
pub fn tcp_total_retrans(fd: RawFd) -> Option<u32> {
    TcpInfo::read(fd).map(|i| i.total_retrans)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream, UdpSocket};
    use std::os::fd::AsRawFd;

    #[test]
    fn layout_follows_the_kernel_header() {
        // Offsets from include/uapi/linux/tcp.h on every Linux ABI.
        assert_eq!(offset_of!(RawTcpInfo, rto), 8);
        assert_eq!(offset_of!(RawTcpInfo, rtt), 68);
        assert_eq!(offset_of!(RawTcpInfo, snd_cwnd), 80);
        assert_eq!(offset_of!(RawTcpInfo, total_retrans), 100);
        assert_eq!(offset_of!(RawTcpInfo, pacing_rate), 104);
        assert_eq!(offset_of!(RawTcpInfo, segs_out), 136);
        assert_eq!(offset_of!(RawTcpInfo, min_rtt), 148);
        assert_eq!(offset_of!(RawTcpInfo, delivery_rate), 160);
        assert_eq!(offset_of!(RawTcpInfo, bytes_retrans), 208);
        assert_eq!(size_of::<RawTcpInfo>(), 216);
    }

    #[test]
    fn reads_a_loopback_connection() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        for _ in 0..20 {
            c.write_all(b"ping").unwrap();
            let mut b = [0u8; 4];
            s.read_exact(&mut b).unwrap();
            s.write_all(&b).unwrap();
            c.read_exact(&mut b).unwrap();
        }
        let i = TcpInfo::read(c.as_raw_fd()).unwrap();
        assert_eq!(i.total_retrans, 0);
        assert!(i.rtt_us > 0);
        assert!(i.snd_cwnd > 0);
        assert!(i.snd_mss > 0);
        assert!(i.segs_out.unwrap() >= 20);
        assert_eq!(tcp_total_retrans(c.as_raw_fd()), Some(0));
        let u = UdpSocket::bind("127.0.0.1:0").unwrap();
        assert_eq!(tcp_total_retrans(u.as_raw_fd()), None);
        assert_eq!(tcp_total_retrans(-1), None);
    }
}
