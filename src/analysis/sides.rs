//! Each end's share of the summary ([`Side`]): its counts' rates over the
//! window, and what its window readings give: CPU, service demand, packet
//! counters, zero-copy and retransmissions, with the warnings they call for
//! (netperf's `-c`/`-C`, judged against thrum's own CPU time).

use super::record::Gathered;
use crate::plan::TestPlan;
use crate::result::{Figures, LinkUtil, Side, Summary};
use crate::sensors::Rusage;
use crate::sensors::window::WindowStats;
use crate::stats::counters::Counts;
use crate::warning::{Code, Warning};

/// One end's counts over the window of `window_s` seconds on its clock, the
/// rates they give, and its totals over the whole test.
pub fn side(window: Counts, window_s: f64, total: Counts, rusage: Option<Rusage>) -> Side {
    let rate = |v: f64| if window_s > 0.0 { v / window_s } else { 0.0 };
    Side {
        bytes_sent: window.bytes_sent,
        bytes_received: window.bytes_received,
        transactions: window.transactions,
        window_s,
        send_bps: rate(window.bytes_sent as f64 * 8.0),
        recv_bps: rate(window.bytes_received as f64 * 8.0),
        transactions_per_s: rate(window.transactions as f64),
        datagrams_sent: window.datagrams_sent,
        datagrams_received: window.datagrams_received,
        datagrams_sent_per_s: rate(window.datagrams_sent as f64),
        datagrams_received_per_s: rate(window.datagrams_received as f64),
        total,
        rusage,
        ..Side::default()
    }
}

/// CPU, service demand, packet counters and retransmissions of both ends
/// from their window readings, and the warnings they call for.
pub(crate) fn apply_windows(plan: &TestPlan, fig: &Figures, g: &Gathered, s: &mut Summary) {
    let per_kb = plan.test.is_stream();
    let units_per_s = if per_kb {
        fig.throughput_bps.unwrap_or(0.0) / 8.0
    } else {
        fig.transactions_per_s.unwrap_or(0.0)
    };
    let cpu_s =
        |w: &Option<WindowStats>| w.as_ref().and_then(|w| w.rusage).map_or(0.0, |r| r.cpu_s());
    let hypervisor = g.hypervisor;
    let embedded = g.embedded;
    let mut warnings = Vec::new();
    for (end, side, window, other) in [
        ("local", &mut s.local, &g.local_window, &g.remote_window),
        ("remote", &mut s.remote, &g.remote_window, &g.local_window),
    ] {
        if let Some(w) = window {
            apply_window(
                side,
                &CpuBasis {
                    end,
                    window: w,
                    units_per_s,
                    per_kb,
                    other_thrum_cpu_s: if g.server_on_this_host {
                        cpu_s(other)
                    } else {
                        0.0
                    },
                    hypervisor,
                    warn: end == "local" || !(g.server_on_this_host || embedded),
                },
                &mut warnings,
            );
        }
    }
    s.local.tcp_retransmits = g.local_retransmits;
    s.remote.tcp_retransmits = g.remote_retransmits;
    s.local.zerocopy = g.local_zerocopy;
    s.remote.zerocopy = g.remote_zerocopy;
    s.local.call_times = g.local_call_times.clone();
    s.remote.call_times = g.remote_call_times.clone();
    s.local.socket_buffers = g.local_socket_buffers;
    s.remote.socket_buffers = g.remote_socket_buffers;
    s.local.busy_poll = g.local_busy_poll;
    s.remote.busy_poll = g.remote_busy_poll;
    s.local.uring_napi = g.local_uring_napi;
    s.remote.uring_napi = g.remote_uring_napi;
    s.local.socket_options = g.local_socket_options;
    s.remote.socket_options = g.remote_socket_options;
    s.local.congestion_control = g.local_congestion_control.clone();
    s.remote.congestion_control = g.remote_congestion_control.clone();
    if plan.zerocopy {
        warnings.extend(zerocopy_warnings(plan, g));
    }
    warnings.extend(udp_buffer_warning(plan, s));
    s.interface = s.local.interface.clone();
    s.tx_packets_per_s = s.local.tx_packets_per_s;
    s.rx_packets_per_s = s.local.rx_packets_per_s;
    s.link_speed_bps = s.local.link_speed_bps;
    s.link_util_percent = s.local.link_util_percent;
    if s.error.is_none() {
        if let Some(w) = packets_warning(plan, s, g) {
            warnings.push(w);
        }
        s.warnings.extend(warnings);
    }
}

/// udp_stream: datagrams were lost while the client's SO_SNDBUF held
/// more than the server's SO_RCVBUF. The sender's buffer lets a burst of
/// that size onto the wire at once, and a receiving socket that cannot
/// hold it drops the rest at its end, not the path: `-s 1M,1M -S 1M,16K`
/// lost 29-53 % on a path that carried every datagram with equal buffers
/// (a seed's measurement), and nothing said why.
fn udp_buffer_warning(plan: &TestPlan, s: &Summary) -> Option<Warning> {
    let t = plan.test.traits();
    if !(plan.test.is_udp() && t.client_sends && !t.client_receives) || s.lost? == 0 {
        return None;
    }
    let send = s.local.socket_buffers?.send_bytes;
    let recv = s.remote.socket_buffers?.recv_bytes;
    (send > recv).then(|| {
        Warning::new(
            Code::UdpSendBufferExceedsReceiver,
            format!(
                "{} datagrams lost with the client's send buffer ({} B) larger than the server's receive buffer ({} B): a burst the sender's buffer lets out at once can overflow the receiving socket, so part of the loss may be the receiver's rather than the path's (-s/-S: give the receiver at least the sender's buffer)",
                s.lost.unwrap_or(0),
                send,
                recv
            ),
        )
    })
}

/// Copied sends above this share of completions (percent) get a warning.
const ZEROCOPY_COPIED_WARN_PERCENT: f64 = 50.0;

/// `--zerocopy`: say when the kernel copied most sends anyway, and when a
/// sending server did not report any (an older thrum ignores the option).
fn zerocopy_warnings(plan: &TestPlan, g: &Gathered) -> Vec<Warning> {
    let mut w = Vec::new();
    let server_sends = plan.test.traits().server_sends();
    if server_sends && g.remote_zerocopy.is_none() {
        w.push(Warning::new(Code::ZerocopyNotReported, "--zerocopy: the server reported no zero-copy sends (a thrum server older than the option sends with copies)"));
    }
    for (end, zc) in [("local", &g.local_zerocopy), ("remote", &g.remote_zerocopy)] {
        if let Some(zc) = zc {
            let pct = zc.copied_percent();
            if pct > ZEROCOPY_COPIED_WARN_PERCENT {
                w.push(Warning::new(Code::ZerocopyCopied, format!(
                    "--zerocopy: the kernel copied {pct:.0} % of {end} sends ({} of {} completed; loopback/veth deliver through a copy)",
                    zc.copied, zc.completions
                )));
            }
        }
    }
    w
}

/// Largest header overhead of one segment (IPv6 + TCP with timestamps).
const SEGMENT_HEADERS: u64 = 40 + 32;

/// RR tests whose requests and responses each fit one segment should move
/// one packet per message each way (two on loopback, where each packet is
/// counted leaving and arriving); when packets/s and transactions/s part by
/// more than 2 %, segments carried several messages (TCP coalescing, --burst)
/// or were retransmitted.
fn packets_warning(plan: &TestPlan, s: &Summary, g: &Gathered) -> Option<Warning> {
    if !plan.test.is_rr() {
        return None;
    }
    let mtu = g
        .local_provenance
        .as_ref()
        .and_then(|p| p.interface.as_ref())
        .and_then(|i| i.mtu)
        .unwrap_or(1500) as u64;
    if plan.request_bytes.max(plan.response_bytes) + SEGMENT_HEADERS > mtu {
        return None;
    }
    let (dt, dr) = packets_off_percent(s)?;
    let iface = s.interface.as_deref().unwrap_or("?");
    (dt.abs() > PACKETS_WARN_PERCENT || dr.abs() > PACKETS_WARN_PERCENT).then(|| {
        let fewer = dt < -PACKETS_WARN_PERCENT || dr < -PACKETS_WARN_PERCENT;
        let more = dt > PACKETS_WARN_PERCENT || dr > PACKETS_WARN_PERCENT;
        let burst = if plan.burst > 0 { ", --burst" } else { "" };
        let why = match (fewer, more) {
            (true, false) => format!(
                "segments carried several requests or responses (TCP coalescing{burst})"
            ),
            (false, _) => "packets that carried no message moved too (pure ACKs when a delayed ACK fired before the reply, retransmissions)".to_string(),
            (true, true) => format!(
                "segments carried several messages one way (TCP coalescing{burst}) and packets without one moved the other (pure ACKs, retransmissions)"
            ),
        };
        Warning::new(Code::PacketsPartFromTransactions, format!(
            "packets/s on {iface} ({:.0} tx, {:.0} rx{}) differ from transactions/s ({:.0}) by {dt:+.1} % / {dr:+.1} %: {why}, so per-transaction figures are not per-packet ones (other traffic on {iface} counts too)",
            s.tx_packets_per_s.unwrap_or(0.0),
            s.rx_packets_per_s.unwrap_or(0.0),
            if iface == "lo" { ", two per transaction on loopback" } else { "" },
            s.transactions_per_s.unwrap_or(0.0),
        ))
    })
}

/// RR packets/s that part from transactions/s by more than this get a warning.
const PACKETS_WARN_PERCENT: f64 = 2.0;

/// Service demands from the two sources that differ by more than this
/// (percent of the smaller) get a warning.
pub const DEMAND_DISAGREE_PERCENT: f64 = 15.0;
/// CPU busy beyond thrum's own, as a share of the machine, that gets a warning.
pub const OTHER_BUSY_PERCENT: f64 = 10.0;
/// Steal time, percent of the window, that gets a warning.
pub const STEAL_WARN_PERCENT: f64 = 5.0;

/// The service demand to headline and its source: process CPU time on a
/// virtual machine, where tick-based /proc/stat misreads; /proc/stat
/// elsewhere (netperf's); whichever exists when only one does.
pub fn headline_demand(
    proc_stat: Option<f64>,
    rusage: Option<f64>,
    hypervisor: bool,
) -> (Option<f64>, Option<&'static str>) {
    match (proc_stat, rusage) {
        (Some(_), Some(r)) if hypervisor => (Some(r), Some("rusage")),
        (Some(p), _) => (Some(p), Some("proc_stat")),
        (None, Some(r)) => (Some(r), Some("rusage")),
        (None, None) => (None, None),
    }
}

/// What a side's CPU figures are computed from.
pub struct CpuBasis<'a> {
    /// "local" or "remote", for warnings.
    pub end: &'static str,
    pub window: &'a WindowStats,
    /// The figure of merit: transactions/s, or bytes/s for streams.
    pub units_per_s: f64,
    pub per_kb: bool,
    /// CPU seconds of the other thrum process in the window when it runs
    /// on this host as a separate process (a server on loopback), else 0.
    pub other_thrum_cpu_s: f64,
    pub hypervisor: bool,
    /// Add warnings (false for the second end on one host: the same machine twice).
    pub warn: bool,
}

/// Fill the CPU, service demand and packet fields from the window's readings.
pub fn apply_window(side: &mut Side, b: &CpuBasis, all_warnings: &mut Vec<Warning>) {
    let mut ignored = Vec::new();
    let warnings = if b.warn { all_warnings } else { &mut ignored };
    let w = b.window;
    side.rusage_window = w.rusage;
    side.interface = w.interface.clone();
    if let Some(p) = w.packets {
        side.tx_packets = Some(p.tx_packets);
        side.rx_packets = Some(p.rx_packets);
        if w.elapsed_s > 0.0 {
            side.tx_packets_per_s = Some(p.tx_packets as f64 / w.elapsed_s);
            side.rx_packets_per_s = Some(p.rx_packets as f64 / w.elapsed_s);
        }
    }
    side.link_speed_bps = w.link_speed_bps;
    if let (Some(p), Some(speed)) = (w.packets, w.link_speed_bps) {
        let util = |b| crate::sensors::link_util_percent(b, w.elapsed_s, speed);
        side.link_util_percent = LinkUtil {
            tx: util(p.tx_bytes),
            rx: util(p.rx_bytes),
        };
    }
    let units = if b.per_kb {
        b.units_per_s / 1024.0
    } else {
        b.units_per_s
    };
    let unit = if b.per_kb { "µs/KB" } else { "µs/Tr" };
    let cpu = w.cpu.as_ref().filter(|c| c.ticks > 0 && c.cpus > 0);
    if let Some(c) = cpu {
        side.cpu = Some(c.clone());
        side.cpu_util_percent = Some(c.overall.util_percent);
        side.cpus = Some(c.cpus);
        if c.overall.steal_percent > STEAL_WARN_PERCENT {
            warnings.push(Warning::new(Code::CpuStolen, format!(
                "{} host: the hypervisor stole {:.1} % of CPU time in the window; CPU figures and rates suffer",
                b.end, c.overall.steal_percent
            )));
        }
    }
    let (proc_stat, rusage) = if units > 0.0 && w.elapsed_s > 0.0 {
        (
            cpu.map(|c| crate::sensors::service_demand(c.overall.util_percent, c.cpus, units)),
            w.rusage.map(|r| {
                crate::sensors::service_demand_from_cpu_s(
                    r.cpu_s() + b.other_thrum_cpu_s,
                    units * w.elapsed_s,
                )
            }),
        )
    } else {
        (None, None)
    };
    side.service_demand_proc_stat = proc_stat;
    side.service_demand_rusage = rusage;
    let (headline, source) = headline_demand(proc_stat, rusage, b.hypervisor);
    side.service_demand_source = source;
    if b.per_kb {
        side.service_demand_us_per_kb = headline;
    } else {
        side.service_demand_us_per_tran = headline;
    }
    if let (Some(p), Some(r)) = (proc_stat, rusage) {
        let lo = p.min(r);
        if lo > 0.0 && 100.0 * (p - r).abs() / lo > DEMAND_DISAGREE_PERCENT {
            warnings.push(Warning::new(Code::ServiceDemandDisagrees, format!(
                "{} service demand: /proc/stat gives {p:.3} {unit}, thrum's own CPU time {r:.3} {unit}, {:.0} % apart; the headline uses {}{}",
                b.end,
                100.0 * (p - r).abs() / lo,
                source.unwrap_or("-"),
                if b.hypervisor {
                    " (virtual machine: tick-based /proc/stat is unreliable)"
                } else {
                    ""
                }
            )));
        }
    }
    // Busy time that thrum did not spend: other processes skew service demand.
    if let (Some(c), Some(r)) = (cpu, w.rusage) {
        let machine_s = c.cpus as f64 * w.elapsed_s;
        let busy_s = c.overall.util_percent / 100.0 * machine_s;
        let other_s = busy_s - r.cpu_s() - b.other_thrum_cpu_s;
        if machine_s > 0.0 && 100.0 * other_s / machine_s > OTHER_BUSY_PERCENT {
            warnings.push(Warning::new(Code::CpuBusyElsewhere, format!(
                "{} host: CPUs were busy beyond thrum's own use in the window ({:.2} CPU-s of {:.2}, {:.0} % of the machine): other processes or interrupt work skew service demand",
                b.end,
                other_s,
                machine_s,
                100.0 * other_s / machine_s
            )));
        }
    }
}

/// How far the client's packets/s each way (tx, rx) part from
/// transactions/s, in percent, counting one packet per message each way
/// (two on `lo`, where a packet is counted leaving and arriving). None
/// without packet counts or transactions.
pub fn packets_off_percent(s: &Summary) -> Option<(f64, f64)> {
    let tps = s.transactions_per_s.filter(|t| *t > 0.0)?;
    let (tx, rx) = (s.tx_packets_per_s?, s.rx_packets_per_s?);
    let per = if s.interface.as_deref() == Some("lo") {
        2.0
    } else {
        1.0
    };
    let off = |pps: f64| 100.0 * (pps / per - tps) / tps;
    Some((off(tx), off(rx)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::socket::SocketBuffers;
    use crate::plan::TestKind;

    /// Loss behind a send buffer larger than the receiver's is explained;
    /// no loss, equal buffers or another test say nothing.
    #[test]
    fn udp_loss_behind_a_larger_send_buffer_is_explained() {
        let plan = TestPlan::new(TestKind::UdpStream);
        let mut s = Summary {
            lost: Some(10),
            ..Summary::default()
        };
        s.local.socket_buffers = Some(SocketBuffers {
            send_bytes: 2 << 20,
            ..SocketBuffers::default()
        });
        s.remote.socket_buffers = Some(SocketBuffers {
            recv_bytes: 32768,
            ..SocketBuffers::default()
        });
        let w = udp_buffer_warning(&plan, &s).expect("a warning");
        assert_eq!(w.code, Code::UdpSendBufferExceedsReceiver);
        assert!(
            w.message.contains("2097152 B") && w.message.contains("32768 B"),
            "{w}"
        );
        s.lost = Some(0);
        assert!(udp_buffer_warning(&plan, &s).is_none());
        s.lost = Some(10);
        assert!(udp_buffer_warning(&TestPlan::new(TestKind::UdpRr), &s).is_none());
        s.remote.socket_buffers = Some(SocketBuffers {
            recv_bytes: 2 << 20,
            ..SocketBuffers::default()
        });
        assert!(udp_buffer_warning(&plan, &s).is_none());
    }
}
