//! The sending sockets' TCP_INFO over one interval (`intervals[].tcp_info`,
//! iperf3's Retr and Cwnd columns), from the readings both ends take of
//! every data socket at each tick (`Engine::tcp_infos` on the control
//! thread, the server's sent in its `Sample`).
//!
//! The sender's view is the one that counts: retransmissions, the
//! congestion window and the pacing rate are the sender's state, and a
//! receiver's smoothed RTT is only its own estimate from the data's
//! arrival. So the readings are the client's sockets where the client
//! sends (tcp_stream), the server's where the server sends (tcp_maerts),
//! both where both do (tcp_bidir, `--both`); of those, a socket that sent
//! no data segment in the interval is a receiver (under `--both` each end
//! has both kinds) or idle, and is left out.

use crate::plan::{TestPlan, Transport};
use crate::result::{IntervalTcpInfo, SocketTcpInfo, TcpInfoEnd};
use crate::sensors::TcpInfo;

use super::Gathered;

/// One end's readings at a tick, one per data socket.
type Readings = [Option<TcpInfo>];

/// The most flows whose TCP_INFO the ends read at every tick: each
/// reading is a getsockopt on the control thread and about 250 bytes of
/// the server's sample, and 100,000 flows' would outgrow a control frame
/// (16 MiB). Above it the intervals carry no `tcp_info`.
pub const MAX_FLOWS: u32 = 1024;

/// Do the ends read TCP_INFO at every tick for `plan`? TCP stream tests
/// alone (one long-lived connection per flow) of up to [`MAX_FLOWS`]
/// flows, not a mix (whose parts keep their own retransmission counts).
pub(crate) fn per_tick(plan: &TestPlan) -> bool {
    plan.parts.is_empty()
        && plan.flows <= MAX_FLOWS
        && plan.test.is_stream()
        && plan.test.traits().transport == Transport::Tcp
}

/// The interval that ends at local sample `k`: its sending sockets'
/// figures, or None where no reading pairs up (other tests, no sender).
pub(crate) fn interval(plan: &TestPlan, g: &Gathered, k: usize) -> Option<IntervalTcpInfo> {
    if !per_tick(plan) {
        return None;
    }
    let ways = plan.test.traits().ways(plan);
    let mut ends: Vec<(TcpInfoEnd, &Readings, &Readings)> = Vec::new();
    if ways.client_sends {
        ends.push((
            TcpInfoEnd::Client,
            &g.local[k - 1].tcp_info,
            &g.local[k].tcp_info,
        ));
    }
    if ways.client_receives
        && let (Some(Some(a)), Some(Some(b))) = (g.remote.get(k - 1), g.remote.get(k))
    {
        ends.push((TcpInfoEnd::Server, &a.tcp_info, &b.tcp_info));
    }
    let sockets: Vec<SocketTcpInfo> = ends
        .into_iter()
        .flat_map(|(end, a, b)| {
            a.iter()
                .zip(b)
                .filter_map(move |(a, b)| socket(end, a.as_ref()?, b.as_ref()?))
        })
        .collect();
    aggregate(sockets)
}

/// One socket's figures between readings `a` and `b`, if it sent data
/// between them (or the kernel cannot say).
fn socket(end: TcpInfoEnd, a: &TcpInfo, b: &TcpInfo) -> Option<SocketTcpInfo> {
    let sent = match (a.data_segs_out, b.data_segs_out) {
        (Some(x), Some(y)) => y != x,
        _ => true,
    };
    let retransmits = u64::from(b.total_retrans.saturating_sub(a.total_retrans));
    if !sent && retransmits == 0 {
        return None;
    }
    // u64::MAX: nothing limits the pacing (no fq, no BBR): no rate to show.
    let bps = |r: Option<u64>| r.filter(|&r| r != u64::MAX).map(|r| r.saturating_mul(8));
    Some(SocketTcpInfo {
        end,
        retransmits,
        cwnd: u64::from(b.snd_cwnd) * u64::from(b.snd_mss),
        srtt_us: u64::from(b.rtt_us),
        rttvar_us: u64::from(b.rttvar_us),
        pacing_rate_bps: bps(b.pacing_rate),
        delivery_rate_bps: bps(b.delivery_rate),
    })
}

/// The interval's figures over its sending sockets; None without any.
fn aggregate(sockets: Vec<SocketTcpInfo>) -> Option<IntervalTcpInfo> {
    if sockets.is_empty() {
        return None;
    }
    let n = sockets.len() as u64;
    let mean = |f: fn(&SocketTcpInfo) -> u64| sockets.iter().map(f).sum::<u64>().div_ceil(n);
    let sum = |f: fn(&SocketTcpInfo) -> Option<u64>| {
        sockets
            .iter()
            .map(f)
            .try_fold(0u64, |acc, v| Some(acc.saturating_add(v?)))
    };
    Some(IntervalTcpInfo {
        retransmits: sockets.iter().map(|s| s.retransmits).sum(),
        cwnd: mean(|s| s.cwnd),
        srtt_us: mean(|s| s.srtt_us),
        rttvar_us: mean(|s| s.rttvar_us),
        pacing_rate_bps: sum(|s| s.pacing_rate_bps),
        delivery_rate_bps: sum(|s| s.delivery_rate_bps),
        sockets,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(retrans: u32, cwnd: u32, rtt: u32, segs: u32) -> TcpInfo {
        TcpInfo {
            total_retrans: retrans,
            rtt_us: rtt,
            rttvar_us: rtt / 2,
            snd_cwnd: cwnd,
            snd_mss: 1000,
            pacing_rate: Some(1_000_000),
            delivery_rate: Some(u64::MAX),
            data_segs_out: Some(segs),
            ..TcpInfo::default()
        }
    }

    #[test]
    fn senders_retransmissions_sum_and_their_windows_average() {
        let a = info(3, 10, 100, 50);
        let b = info(7, 20, 300, 90);
        let c = info(1, 30, 200, 10);
        let d = info(1, 40, 400, 20);
        // A receiver: no data segment sent in the interval.
        let idle = info(0, 10, 50, 1);
        let s: Vec<_> = [(&a, &b), (&c, &d), (&idle, &idle)]
            .into_iter()
            .filter_map(|(x, y)| socket(TcpInfoEnd::Client, x, y))
            .collect();
        assert_eq!(s.len(), 2, "the receiver is left out");
        let t = aggregate(s).unwrap();
        assert_eq!(t.retransmits, 4);
        assert_eq!(t.cwnd, 30_000, "mean of 20 and 40 segments of 1000 B");
        assert_eq!(t.srtt_us, 350);
        assert_eq!(t.rttvar_us, 175);
        assert_eq!(
            t.pacing_rate_bps,
            Some(16_000_000),
            "bytes/s summed, as bits/s"
        );
        assert_eq!(t.delivery_rate_bps, None, "u64::MAX is no rate");
        assert!(aggregate(Vec::new()).is_none());
    }
}
