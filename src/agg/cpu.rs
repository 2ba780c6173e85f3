//! CPU of the system under test over each step's window.
//!
//! `thrum agg` runs on the system under test, and every stream's client
//! session runs in its process, so the host's /proc/stat and this process's
//! rusage over a step's window are the SUT's CPU for that step. A sampler
//! thread reads both every quarter second, stamped with unix time; a step's
//! figures come from the first reading inside its window to the last one.
//! Service demand follows `thrum run`: process CPU time on a virtual machine,
//! /proc/stat elsewhere (docs/design.md).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::sensors::{CpuSnapshot, CpuUsage, Rusage};

/// How often the sampler reads.
pub const PERIOD: Duration = Duration::from_millis(250);

/// One reading.
#[derive(Clone, Debug)]
pub struct Reading {
    pub unix_s: f64,
    pub cpu: CpuSnapshot,
    pub rusage: Rusage,
}

/// The readings of a ramp, taken on their own thread.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Vec<Reading>>,
}

impl Sampler {
    pub fn start() -> std::io::Result<Sampler> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name("agg-cpu".into())
            .spawn(move || {
                let mut v = Vec::new();
                loop {
                    if let Ok(cpu) = CpuSnapshot::read() {
                        v.push(Reading {
                            unix_s: crate::clock::unix_now(),
                            cpu,
                            rusage: Rusage::process(),
                        });
                    }
                    if flag.load(Relaxed) {
                        return v;
                    }
                    std::thread::sleep(PERIOD);
                }
            })?;
        Ok(Sampler { stop, handle })
    }

    pub fn finish(self) -> Vec<Reading> {
        self.stop.store(true, Relaxed);
        self.handle.join().unwrap_or_default()
    }
}

/// A step's CPU figures.
#[derive(Clone, Debug, PartialEq)]
pub struct StepCpu {
    pub util_percent: f64,
    /// µs of CPU per transaction (Trans/s tests) or per KB (Mbit/s tests).
    pub service_demand: Option<f64>,
    /// Where `service_demand` came from; None without a rate.
    pub source: Option<&'static str>,
}

/// The figures over `[a, b]` from `readings`, for a step whose aggregate
/// averaged `average` in `unit` (`Trans/s` or `Mbit/s`). None when fewer
/// than two readings fall inside the window.
pub fn step_cpu(
    readings: &[Reading],
    (a, b): (f64, f64),
    average: Option<f64>,
    unit: &str,
    hypervisor: bool,
) -> Option<StepCpu> {
    let first = readings.iter().find(|r| r.unix_s >= a)?;
    let last = readings.iter().rev().find(|r| r.unix_s <= b)?;
    let elapsed = last.unix_s - first.unix_s;
    if elapsed <= 0.0 {
        return None;
    }
    let usage = CpuUsage::between(&first.cpu, &last.cpu);
    if usage.ticks == 0 || usage.cpus == 0 {
        return None;
    }
    let util = usage.overall.util_percent;
    let units_per_s = average.filter(|v| *v > 0.0).map(|v| match unit {
        "Mbit/s" => v * 1e6 / 8.0 / 1024.0,
        _ => v,
    });
    let cpu_s = last.rusage.since(&first.rusage).cpu_s();
    let proc_stat = units_per_s.map(|u| crate::sensors::service_demand(util, usage.cpus, u));
    let rusage = units_per_s.map(|u| crate::sensors::service_demand_from_cpu_s(cpu_s, u * elapsed));
    let (service_demand, source) =
        crate::analysis::sides::headline_demand(proc_stat, rusage, hypervisor);
    Some(StepCpu {
        util_percent: util,
        service_demand,
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(t: f64, busy: u64, idle: u64, cpu_s: f64) -> Reading {
        let text =
            format!("cpu  {busy} 0 0 {idle} 0 0 0 0 0 0\ncpu0 {busy} 0 0 {idle} 0 0 0 0 0 0\n");
        Reading {
            unix_s: t,
            cpu: CpuSnapshot::parse(&text).unwrap(),
            rusage: Rusage {
                user_s: cpu_s,
                ..Rusage::default()
            },
        }
    }

    #[test]
    fn window_takes_the_readings_inside_it() {
        // One CPU: 50 % busy between t=1 and t=3 (100 of 200 ticks).
        let rs = [
            reading(0.5, 0, 0, 0.0),
            reading(1.0, 100, 100, 0.5),
            reading(2.0, 150, 150, 1.0),
            reading(3.0, 200, 200, 1.5),
            reading(3.5, 400, 200, 2.0),
        ];
        let s = step_cpu(&rs, (0.9, 3.2), Some(1000.0), "Trans/s", false).unwrap();
        assert_eq!(s.util_percent, 50.0);
        // 50 % of 1 CPU at 1000 trans/s: 500 µs per transaction.
        assert!((s.service_demand.unwrap() - 500.0).abs() < 1e-9);
        assert_eq!(s.source, Some("proc_stat"));
        // Process time: 1.0 CPU-s over 2 s at 1000/s = 500 µs/Tr too.
        let r = step_cpu(&rs, (0.9, 3.2), Some(1000.0), "Trans/s", true).unwrap();
        assert!((r.service_demand.unwrap() - 500.0).abs() < 1e-9);
        assert_eq!(r.source, Some("rusage"));
        // Mbit/s: per KB. 8.192 Mbit/s is 1000 KB/s.
        let k = step_cpu(&rs, (0.9, 3.2), Some(8.192), "Mbit/s", false).unwrap();
        assert!((k.service_demand.unwrap() - 500.0).abs() < 1e-6);
        // Fewer than two readings in the window: nothing.
        assert!(step_cpu(&rs, (1.1, 1.9), Some(1.0), "Trans/s", false).is_none());
    }
}
