//! capacity: the bottleneck's estimate of each direction from the
//! packet-train gaps its receivers recorded (`stats::dispersion`), and the
//! warnings where the trains cannot give one or where what they give is
//! not a path's (loopback: the host's own limit).

use super::record::Gathered;
use crate::result::{CapacityDirections, CapacityEstimate, Summary};
use crate::warning::{Code, Warning};

/// capacity: each direction's estimate from its receivers' train gaps,
/// and the probe's own average load (its frames, as the link carries
/// them) over it. The top-level fields carry client to server when it was
/// measured (what scripts read), else server to client.
pub(crate) fn apply_capacity(g: &Gathered, payload: u64, s: &mut Summary) {
    let up = g
        .train_gaps
        .as_ref()
        .and_then(|t| capacity_of(t, payload, s.local.send_bps, "client to server", s));
    let down = g
        .local_train_gaps
        .as_ref()
        .and_then(|t| capacity_of(t, payload, s.remote.send_bps, "server to client", s));
    if g.train_gaps.is_none() && g.local_train_gaps.is_none() {
        return;
    }
    if let Some(c) = up.as_ref().or(down.as_ref()) {
        s.capacity_bps = Some(c.capacity_bps);
        s.capacity_interval_bps = Some(c.capacity_interval_bps);
        s.probe_load_fraction = Some(c.probe_load_fraction);
        s.shaper = Some(c.shaper);
        s.dispersion_histogram = Some(c.dispersion_histogram.clone());
    }
    if let (Some(c), true) = (&s.capacity_bps, over_loopback(g)) {
        s.warnings.push(Warning::new(
            Code::CapacityLoopback,
            format!(
                "capacity over loopback: the server is on this host, so no link is on the path and {} is this host's own limit (how fast its kernel and CPUs pass packets), not a network's capacity; it varies with the load on the host",
                crate::units::BitsPerSec(*c)
            ),
        ));
    }
    s.capacity_by_direction = Some(CapacityDirections { c2s: up, s2c: down });
}

/// Did the trains cross loopback alone? The embedded server, one on this
/// host at any of its addresses (the kernel routes a host's own addresses
/// over `lo`), or a loopback address.
fn over_loopback(g: &Gathered) -> bool {
    let loopback_ip = g
        .server_address
        .as_deref()
        .and_then(|a| a.parse::<std::net::SocketAddr>().ok())
        .is_some_and(|a| a.ip().is_loopback());
    g.embedded || g.server_on_this_host || loopback_ip
}

/// One direction's estimate from the gaps its receivers saw, the probe
/// sending datagrams of `payload` bytes, `payload_bps` on average; None
/// (and a warning naming the direction) when too few trains arrived whole.
fn capacity_of(
    gaps: &crate::stats::dispersion::TrainGaps,
    payload: u64,
    payload_bps: f64,
    way: &str,
    s: &mut Summary,
) -> Option<CapacityEstimate> {
    let Some(e) = crate::stats::dispersion::estimate(gaps) else {
        if s.error.is_none() {
            s.warnings.push(Warning::new(
                Code::CapacityNoEstimate,
                format!(
                    "capacity {way}: too few trains arrived whole for an estimate ({} trains, {} broken, {} of {} datagrams lost)",
                    gaps.trains,
                    gaps.broken,
                    gaps.lost,
                    gaps.datagrams + gaps.lost
                ),
            ));
        }
        return None;
    };
    let payload = payload.max(1);
    let wire_bps = payload_bps * gaps.frame_bytes as f64 / payload as f64;
    if let Some(sender) = e.sender_rate_bps.filter(|_| e.sender_limited()) {
        s.warnings.push(Warning::new(
            Code::CapacitySenderLimited,
            format!(
                "capacity {way}: trains of up to {n} packets arrived about as fast as the sender put them out ({} against the sender's {}): nothing on the path slowed them, so the estimate is not the path's capacity but the sender's limit (its CPU; the path carries more) or the burst of a token bucket deeper than {n} packets (its sustained rate unseen); larger packets (--packet-size) take the sender less time per bit",
                crate::units::BitsPerSec(e.capacity_bps),
                crate::units::BitsPerSec(sender),
                n = e.longest_train,
            ),
        ));
    }
    let offered = gaps.datagrams + gaps.lost;
    Some(CapacityEstimate {
        capacity_bps: e.capacity_bps,
        capacity_interval_bps: e.interval_bps,
        probe_load_fraction: wire_bps / e.capacity_bps,
        shaper: e.shaper,
        dispersion_histogram: e.histogram,
        trains: gaps.trains,
        broken: gaps.broken,
        datagrams_received: gaps.datagrams,
        datagrams_lost: gaps.lost,
        loss_percent: (offered > 0).then(|| 100.0 * gaps.lost as f64 / offered as f64),
        sender_rate_bps: e.sender_rate_bps,
    })
}
