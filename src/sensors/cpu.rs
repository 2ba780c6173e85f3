//! CPU utilisation from /proc/stat, and netperf's service demand.
//!
//! /proc/stat counts, per CPU, the clock ticks (USER_HZ) spent in each state
//! since boot. Two snapshots around a measurement window give each CPU's
//! share of the window in each state. Busy is user + nice + system + irq +
//! softirq. Idle, iowait (an idle CPU with I/O outstanding) and steal (time
//! the hypervisor gave to someone else) are not this machine's work, so they
//! are not busy; steal is reported on its own because it means the figures of
//! the window are suspect. guest and guest_nice are already included in user
//! and nice by the kernel (kernel/sched/cputime.c), so they are not added
//! again.
//!
//! Counters are read with saturating differences: per-CPU iowait is known to
//! step backwards on some kernels, and a CPU taken offline can reset.

use std::io;

use serde::{Deserialize, Serialize};

/// Ticks of one CPU (or of all of them: the `cpu` line) in each state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuTicks {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
    pub guest: u64,
    pub guest_nice: u64,
}

impl CpuTicks {
    /// Parse the numbers after `cpu`/`cpuN`; older kernels print fewer
    /// columns, and missing ones read as 0.
    fn parse(fields: &str) -> Option<CpuTicks> {
        let mut v = [0u64; 10];
        let mut n = 0;
        for (slot, f) in v.iter_mut().zip(fields.split_ascii_whitespace()) {
            *slot = f.parse().ok()?;
            n += 1;
        }
        // user, nice, system, idle are present on every kernel since 2.4.
        if n < 4 {
            return None;
        }
        Some(CpuTicks {
            user: v[0],
            nice: v[1],
            system: v[2],
            idle: v[3],
            iowait: v[4],
            irq: v[5],
            softirq: v[6],
            steal: v[7],
            guest: v[8],
            guest_nice: v[9],
        })
    }

    /// Ticks in every state, each counted once (guest is inside user).
    fn total(&self) -> u64 {
        self.user
            + self.nice
            + self.system
            + self.idle
            + self.iowait
            + self.irq
            + self.softirq
            + self.steal
    }

    fn since(&self, earlier: &CpuTicks) -> CpuTicks {
        let d = |a: u64, b: u64| a.saturating_sub(b);
        CpuTicks {
            user: d(self.user, earlier.user),
            nice: d(self.nice, earlier.nice),
            system: d(self.system, earlier.system),
            idle: d(self.idle, earlier.idle),
            iowait: d(self.iowait, earlier.iowait),
            irq: d(self.irq, earlier.irq),
            softirq: d(self.softirq, earlier.softirq),
            steal: d(self.steal, earlier.steal),
            guest: d(self.guest, earlier.guest),
            guest_nice: d(self.guest_nice, earlier.guest_nice),
        }
    }
}

/// One reading of /proc/stat: the all-CPU line and each `cpuN` line.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuSnapshot {
    pub all: CpuTicks,
    /// `(N, ticks)` for each `cpuN` line, in file order (offline CPUs are absent).
    pub per_cpu: Vec<(u32, CpuTicks)>,
}

impl CpuSnapshot {
    /// Read /proc/stat now.
    pub fn read() -> io::Result<CpuSnapshot> {
        let text = std::fs::read_to_string("/proc/stat")?;
        CpuSnapshot::parse(&text)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "/proc/stat has no cpu line"))
    }

    /// Parse /proc/stat text; `None` when it has no well-formed `cpu` line.
    pub fn parse(text: &str) -> Option<CpuSnapshot> {
        let mut all = None;
        let mut per_cpu = Vec::new();
        for line in text.lines() {
            let Some(rest) = line.strip_prefix("cpu") else {
                continue;
            };
            match rest.split_once(|c: char| c.is_ascii_whitespace()) {
                Some(("", fields)) => all = CpuTicks::parse(fields),
                Some((n, fields)) => {
                    if let (Ok(n), Some(t)) = (n.parse(), CpuTicks::parse(fields)) {
                        per_cpu.push((n, t));
                    }
                }
                None => {}
            }
        }
        Some(CpuSnapshot { all: all?, per_cpu })
    }
}

/// The host's busy and total ticks (the all-CPU line) and its CPU count:
/// what a server's interim sample carries, so that the client can take
/// the server host's utilisation over the stretch between any two of its
/// samples (`thrum agg`'s steps: the load generators' CPU per step).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuTotals {
    /// user + nice + system + irq + softirq ticks since boot.
    pub busy: u64,
    /// Ticks in every state since boot (guest is inside user).
    pub total: u64,
    /// CPUs with a `cpuN` line.
    pub cpus: u32,
}

impl CpuTotals {
    /// Read /proc/stat now; None where it cannot be read.
    pub fn read() -> Option<CpuTotals> {
        CpuSnapshot::read().ok().map(|s| CpuTotals::of(&s))
    }

    pub fn of(s: &CpuSnapshot) -> CpuTotals {
        let a = &s.all;
        CpuTotals {
            busy: a.user + a.nice + a.system + a.irq + a.softirq,
            total: a.total(),
            cpus: s.per_cpu.len() as u32,
        }
    }

    /// Utilisation (0–100 of all CPUs) from `earlier` to this reading;
    /// None when no tick passed between them.
    pub fn util_percent_since(&self, earlier: &CpuTotals) -> Option<f64> {
        let total = self.total.saturating_sub(earlier.total);
        let busy = self.busy.saturating_sub(earlier.busy).min(total);
        (total > 0).then(|| 100.0 * busy as f64 / total as f64)
    }
}

/// How one CPU (or all together) spent a window, in percent of the window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CpuShare {
    /// user + nice + system + irq + softirq: 0–100.
    #[schemars(range(min = 0, max = 100))]
    pub util_percent: f64,
    /// user + nice (guest time is inside it).
    #[schemars(range(min = 0, max = 100))]
    pub user_percent: f64,
    #[schemars(range(min = 0, max = 100))]
    pub system_percent: f64,
    #[schemars(range(min = 0, max = 100))]
    pub softirq_percent: f64,
    #[schemars(range(min = 0, max = 100))]
    pub irq_percent: f64,
    #[schemars(range(min = 0, max = 100))]
    pub iowait_percent: f64,
    #[schemars(range(min = 0, max = 100))]
    pub steal_percent: f64,
    #[schemars(range(min = 0, max = 100))]
    pub idle_percent: f64,
}

impl CpuShare {
    fn of(d: &CpuTicks) -> CpuShare {
        let total = d.total();
        if total == 0 {
            return CpuShare::default();
        }
        let pc = |t: u64| 100.0 * t as f64 / total as f64;
        CpuShare {
            util_percent: pc(d.user + d.nice + d.system + d.irq + d.softirq),
            user_percent: pc(d.user + d.nice),
            system_percent: pc(d.system),
            softirq_percent: pc(d.softirq),
            irq_percent: pc(d.irq),
            iowait_percent: pc(d.iowait),
            steal_percent: pc(d.steal),
            idle_percent: pc(d.idle),
        }
    }
}

/// One CPU's share of the window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PerCpu {
    /// N of `cpuN`.
    pub cpu: u32,
    #[serde(flatten)]
    pub share: CpuShare,
}

/// CPU utilisation over the window between two snapshots.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CpuUsage {
    /// All CPUs together (the `cpu` line, i.e. the average over CPUs
    /// weighted by their ticks): 0–100, where 100 is every CPU busy.
    #[serde(flatten)]
    pub overall: CpuShare,
    /// CPUs present in both snapshots.
    #[schemars(range(min = 1))]
    pub cpus: usize,
    pub per_cpu: Vec<PerCpu>,
    /// The CPU with the highest `util_percent` (a single CPU saturated by
    /// softirq can cap a test while the average looks idle).
    pub busiest_cpu: Option<u32>,
    #[schemars(range(min = 0, max = 100))]
    pub busiest_cpu_percent: Option<f64>,
    /// Ticks the window spanned on all CPUs together; 0 means the window
    /// was shorter than a tick and every percentage is 0.
    pub ticks: u64,
}

impl CpuUsage {
    /// Utilisation between snapshot `a` and the later snapshot `b`.
    pub fn between(a: &CpuSnapshot, b: &CpuSnapshot) -> CpuUsage {
        let d = b.all.since(&a.all);
        let per_cpu: Vec<PerCpu> = b
            .per_cpu
            .iter()
            .filter_map(|(n, tb)| {
                let (_, ta) = a.per_cpu.iter().find(|(m, _)| m == n)?;
                Some(PerCpu {
                    cpu: *n,
                    share: CpuShare::of(&tb.since(ta)),
                })
            })
            .collect();
        let busiest = per_cpu
            .iter()
            .max_by(|x, y| x.share.util_percent.total_cmp(&y.share.util_percent));
        CpuUsage {
            overall: CpuShare::of(&d),
            cpus: per_cpu.len(),
            busiest_cpu: busiest.map(|p| p.cpu),
            busiest_cpu_percent: busiest.map(|p| p.share.util_percent),
            per_cpu,
            ticks: d.total(),
        }
    }
}

/// netperf's service demand: microseconds of CPU, summed over all CPUs,
/// consumed per unit of work (a transaction, or a KB via
/// [`service_demand_us_per_kb`]).
///
/// `util_percent` is the overall utilisation (0–100 over all `ncpus`) and
/// `units_per_s` the rate achieved in the same window:
/// `util/100 × ncpus × 10^6 / units_per_s`. The window's length cancels out
/// (utilisation and rate are both per second), so it is not an argument.
/// A zero rate gives infinity, which callers should not report.
pub fn service_demand(util_percent: f64, ncpus: usize, units_per_s: f64) -> f64 {
    util_percent * ncpus as f64 * 1e4 / units_per_s
}

/// Service demand in µs per KB (1024 bytes, as netperf) for a byte rate.
pub fn service_demand_us_per_kb(util_percent: f64, ncpus: usize, bytes_per_s: f64) -> f64 {
    service_demand(util_percent, ncpus, bytes_per_s / 1024.0)
}

/// Service demand from measured CPU time instead of utilisation (process
/// rusage user + system over the window): µs of CPU per unit.
pub fn service_demand_from_cpu_s(cpu_s: f64, units: f64) -> f64 {
    cpu_s * 1e6 / units
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "cpu  1000 10 500 8000 100 20 300 50 0 0
cpu0 600 10 300 3900 60 10 200 20 0 0
cpu1 400 0 200 4100 40 10 100 30 0 0
intr 67384142 0 0 0
ctxt 317159050
btime 1763790000
processes 123
";
    const B: &str = "cpu  1600 10 700 8300 100 20 500 70 0 0
cpu0 1000 10 450 3900 60 10 350 20 0 0
cpu1 600 0 250 4400 40 10 150 50 0 0
intr 67384142 0 0 0
";

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn parses_every_cpu_line() {
        let s = CpuSnapshot::parse(A).unwrap();
        assert_eq!(s.all.user, 1000);
        assert_eq!(s.all.steal, 50);
        assert_eq!(s.per_cpu.len(), 2);
        assert_eq!(s.per_cpu[1].0, 1);
        assert_eq!(s.per_cpu[1].1.idle, 4100);
    }

    #[test]
    fn old_kernels_with_four_columns_parse_and_junk_does_not() {
        let s = CpuSnapshot::parse("cpu 1 2 3 4\ncpu0 1 2 3 4\n").unwrap();
        assert_eq!(s.all.idle, 4);
        assert_eq!(s.all.steal, 0);
        assert!(CpuSnapshot::parse("cpu 1 2 3\n").is_none());
        assert!(CpuSnapshot::parse("cpu 1 x 3 4\n").is_none());
        assert!(CpuSnapshot::parse("intr 5\n").is_none());
        assert!(CpuSnapshot::parse("").is_none());
    }

    #[test]
    fn window_split_and_busiest_cpu() {
        let u = CpuUsage::between(
            &CpuSnapshot::parse(A).unwrap(),
            &CpuSnapshot::parse(B).unwrap(),
        );
        // All: user 600, system 200, idle 300, softirq 200, steal 20 = 1320 ticks.
        assert_eq!(u.ticks, 1320);
        assert!(close(u.overall.util_percent, 100.0 * 1000.0 / 1320.0));
        assert!(close(u.overall.user_percent, 100.0 * 600.0 / 1320.0));
        assert!(close(u.overall.softirq_percent, 100.0 * 200.0 / 1320.0));
        assert!(close(u.overall.steal_percent, 100.0 * 20.0 / 1320.0));
        assert_eq!(u.cpus, 2);
        // cpu0: 400 + 150 + 150 busy, nothing idle: 100 %.
        assert!(close(u.per_cpu[0].share.util_percent, 100.0));
        // cpu1: 200 + 50 + 50 busy of 300 + 300 idle + 20 steal.
        assert!(close(
            u.per_cpu[1].share.util_percent,
            100.0 * 300.0 / 620.0
        ));
        assert_eq!(u.busiest_cpu, Some(0));
        assert_eq!(u.busiest_cpu_percent, Some(100.0));
    }

    #[test]
    fn counters_stepping_back_and_empty_windows_read_zero() {
        let a = CpuSnapshot::parse(B).unwrap();
        let u = CpuUsage::between(&a, &CpuSnapshot::parse(A).unwrap());
        assert_eq!(u.ticks, 0);
        assert_eq!(u.overall.util_percent, 0.0);
        let same = CpuUsage::between(&a, &a);
        assert_eq!(same.overall, CpuShare::default());
    }

    #[test]
    fn a_cpu_missing_from_one_snapshot_is_left_out() {
        let b = "cpu  1600 10 700 8300 100 20 500 70 0 0\ncpu1 600 0 250 4400 40 10 150 50 0 0\n";
        let u = CpuUsage::between(
            &CpuSnapshot::parse(A).unwrap(),
            &CpuSnapshot::parse(b).unwrap(),
        );
        assert_eq!(u.cpus, 1);
        assert_eq!(u.busiest_cpu, Some(1));
    }

    #[test]
    fn json_names_are_the_contract() {
        let u = CpuUsage::between(
            &CpuSnapshot::parse(A).unwrap(),
            &CpuSnapshot::parse(B).unwrap(),
        );
        let v = serde_json::to_value(&u).unwrap();
        for k in [
            "util_percent",
            "user_percent",
            "system_percent",
            "softirq_percent",
            "irq_percent",
            "iowait_percent",
            "steal_percent",
            "per_cpu",
            "busiest_cpu",
            "busiest_cpu_percent",
            "cpus",
        ] {
            assert!(v.get(k).is_some(), "missing {k} in {v}");
        }
        assert!(v["per_cpu"][0].get("cpu").is_some());
        assert!(v["per_cpu"][0].get("util_percent").is_some());
        let back: CpuUsage = serde_json::from_value(v).unwrap();
        assert_eq!(back, u);
    }

    #[test]
    fn service_demand_matches_netperf_worked_example() {
        // 39171 trans/s at 100 % of 2 CPUs: 51.058 µs/Tr.
        let sd = service_demand(100.0, 2, 39171.0);
        assert!((sd - 51.058).abs() < 0.0005, "{sd}");
        // The same CPU time from rusage: 2 CPU-s per s over a 10 s window.
        let sd2 = service_demand_from_cpu_s(20.0, 391_710.0);
        assert!((sd2 - sd).abs() < 1e-9);
        // 50 % of 4 CPUs at 1 GiB/s (1048576 KB/s): 2e6 µs / 1048576 KB.
        let kb = service_demand_us_per_kb(50.0, 4, (1u64 << 30) as f64);
        assert!((kb - 2e6 / 1_048_576.0).abs() < 1e-12, "{kb}");
    }

    #[test]
    fn reads_this_machine() {
        let a = CpuSnapshot::read().unwrap();
        // Burn a little CPU so the window spans a few ticks.
        crate::sensors::spin(std::time::Duration::from_millis(30));
        let b = CpuSnapshot::read().unwrap();
        assert!(!a.per_cpu.is_empty());
        let u = CpuUsage::between(&a, &b);
        assert_eq!(u.cpus, b.per_cpu.len());
        for p in &u.per_cpu {
            assert!((0.0..=100.0).contains(&p.share.util_percent), "{p:?}");
        }
        assert!((0.0..=100.0).contains(&u.overall.util_percent));
    }
}
