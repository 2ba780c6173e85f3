//! What the machine says about one end's measurement window: CPU time per
//! CPU (/proc/stat), this process's rusage, and the packet counters of the
//! interface that routes to the peer. Read at the window's two edges (the
//! ticks that enter and leave the measure phase), never on the data path;
//! the client also reads the interface counters at every tick
//! ([`Meter::counters`]) for each interval's link utilisation.

use std::net::IpAddr;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::{CpuSnapshot, CpuUsage, IfCounters, Rusage, link_speed_bps, route_interface};
use crate::plan::Phase;

/// One edge of the window.
struct Edge {
    at: Instant,
    cpu: Option<CpuSnapshot>,
    rusage: Rusage,
    packets: Option<IfCounters>,
}

/// The readings of one end over its measurement window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WindowStats {
    /// Between the two edges, on this end's clock.
    pub elapsed_s: f64,
    pub cpu: Option<CpuUsage>,
    /// This process's usage over the window.
    pub rusage: Option<Rusage>,
    /// The interface toward the peer (`lo` on loopback).
    pub interface: Option<String>,
    /// Its counters' change over the window.
    pub packets: Option<IfCounters>,
    /// Its link speed in bits/s, where the driver knows one (not `lo`).
    /// Older peers do not send it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_speed_bps: Option<u64>,
}

/// Takes the edges as the phases change.
pub struct Meter {
    interface: Option<String>,
    link_speed_bps: Option<u64>,
    start: Option<Edge>,
    end: Option<Edge>,
}

impl Meter {
    /// A meter for a session whose peer is `peer`.
    pub fn new(peer: IpAddr) -> Meter {
        let interface = route_interface(peer);
        Meter {
            link_speed_bps: interface.as_deref().and_then(link_speed_bps),
            interface,
            start: None,
            end: None,
        }
    }

    pub fn interface(&self) -> Option<&str> {
        self.interface.as_deref()
    }

    /// The interface's link speed, bits/s, where the driver knows one.
    pub fn link_speed_bps(&self) -> Option<u64> {
        self.link_speed_bps
    }

    /// The interface's counters now: read at every tick, on the control
    /// thread, for each interval's link utilisation.
    pub fn counters(&self) -> Option<IfCounters> {
        self.interface
            .as_deref()
            .and_then(|i| IfCounters::read(i).ok())
    }

    fn edge(&self) -> Edge {
        Edge {
            at: Instant::now(),
            cpu: CpuSnapshot::read().ok(),
            rusage: Rusage::process(),
            packets: self.counters(),
        }
    }

    /// At a tick that ends phase `ending` and enters `next`: the window
    /// opens on entering the measure phase and closes on leaving it.
    pub fn on_tick(&mut self, ending: Phase, next: Phase) {
        if next == Phase::Measure && self.start.is_none() {
            self.start = Some(self.edge());
        } else if ending == Phase::Measure && next != Phase::Measure && self.end.is_none() {
            self.end = Some(self.edge());
        }
    }

    /// The window's readings, once both edges are in.
    pub fn window(&self) -> Option<WindowStats> {
        let (a, b) = (self.start.as_ref()?, self.end.as_ref()?);
        Some(WindowStats {
            elapsed_s: b.at.duration_since(a.at).as_secs_f64(),
            cpu: a
                .cpu
                .as_ref()
                .zip(b.cpu.as_ref())
                .map(|(x, y)| CpuUsage::between(x, y)),
            rusage: Some(b.rusage.since(&a.rusage)),
            interface: self.interface.clone(),
            packets: a.packets.zip(b.packets).map(|(x, y)| y.since(&x)),
            link_speed_bps: self.link_speed_bps,
        })
    }
}

/// Is this machine a virtual one? The `hypervisor` CPU flag says so (x86;
/// elsewhere the answer is no, and /proc/stat is taken at its word).
pub fn on_hypervisor() -> bool {
    static ANSWER: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ANSWER.get_or_init(|| {
        std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|s| {
            s.lines()
                .filter(|l| l.starts_with("flags"))
                .any(|l| l.split_whitespace().any(|w| w == "hypervisor"))
        })
    })
}
