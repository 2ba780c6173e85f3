//! Sensors: what the machine itself says about a measurement window.
//!
//! Everything here reads the operating system, never the data path: CPU time
//! from /proc/stat, process rusage, interface packet counters, TCP_INFO of a
//! socket, and the provenance of a result (versions, kernel, NIC driver,
//! offloads, interrupt coalescing, sysctls). The engine reads these at phase
//! edges, so none of it costs anything while data moves. Every reading that
//! the machine may not offer (a missing file, an ioctl the driver does not
//! implement) is an `Option` that is simply left out, never an error.

pub mod cpu;
mod ethtool;
pub mod net;
pub mod provenance;
pub mod rusage;
pub mod tcp_info;
pub mod window;

pub use cpu::{
    CpuSnapshot, CpuUsage, service_demand, service_demand_from_cpu_s, service_demand_us_per_kb,
};
pub use ethtool::{Channels, Coalesce, Ethtool, Offload, Ring, link_speed_bps};
pub use net::{IfCounters, link_util_percent, route_interface};
pub use provenance::{Provenance, human_lines};
pub use rusage::Rusage;
pub use tcp_info::{TcpInfo, tcp_total_retrans};

/// Keep this thread busy for `d`, so that a test's CPU window has ticks in it.
#[cfg(test)]
pub(crate) fn spin(d: std::time::Duration) {
    let t = std::time::Instant::now();
    let mut x = 0u64;
    while t.elapsed() < d {
        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
    }
}
