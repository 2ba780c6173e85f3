//! Process resource usage (getrusage(RUSAGE_SELF)) and its window deltas.
//!
//! Both ends send this type in the `final` message and the result carries
//! it, so its JSON field names are the wire format. Process CPU time is the
//! check on /proc/stat: on virtual machines tick-based accounting
//! undercounts, while user + system of the process comes from precise
//! scheduler accounting.

use std::io;

use serde::{Deserialize, Serialize};

/// Resource usage of this process, or its change over a window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Rusage {
    pub user_s: f64,
    pub system_s: f64,
    /// High-water mark of the resident set, KiB (Linux reports KiB).
    pub max_rss_kb: u64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    /// Page faults served without I/O (`ru_minflt`); absent from an older
    /// peer: 0.
    #[serde(default)]
    pub minor_faults: u64,
    /// Page faults that needed I/O (`ru_majflt`); absent from an older
    /// peer: 0.
    #[serde(default)]
    pub major_faults: u64,
}

impl Rusage {
    /// Usage of this whole process (every thread, live or joined) so far,
    /// or the kernel's refusal; callers take [`Rusage::process`].
    fn read() -> io::Result<Rusage> {
        // SAFETY: rusage is plain old data, so all-zero is a valid value,
        // and getrusage writes only into the struct we pass it.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: as above; RUSAGE_SELF needs no other argument.
        if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        Ok(Rusage {
            user_s: tv(ru.ru_utime),
            system_s: tv(ru.ru_stime),
            max_rss_kb: ru.ru_maxrss.max(0) as u64,
            voluntary_switches: ru.ru_nvcsw.max(0) as u64,
            involuntary_switches: ru.ru_nivcsw.max(0) as u64,
            minor_faults: ru.ru_minflt.max(0) as u64,
            major_faults: ru.ru_majflt.max(0) as u64,
        })
    }

    /// Usage of this whole process (every thread, live or joined) so far,
    /// or zeros if the kernel ever refused (getrusage(2) fails for
    /// RUSAGE_SELF only on a bad buffer, which Rust rules out).
    pub fn process() -> Rusage {
        Rusage::read().unwrap_or_default()
    }

    /// The change from `earlier` to `self`. Max RSS is a high-water mark,
    /// not a counter, so the window carries the later mark.
    pub fn since(&self, earlier: &Rusage) -> Rusage {
        Rusage {
            user_s: (self.user_s - earlier.user_s).max(0.0),
            system_s: (self.system_s - earlier.system_s).max(0.0),
            max_rss_kb: self.max_rss_kb,
            voluntary_switches: self
                .voluntary_switches
                .saturating_sub(earlier.voluntary_switches),
            involuntary_switches: self
                .involuntary_switches
                .saturating_sub(earlier.involuntary_switches),
            minor_faults: self.minor_faults.saturating_sub(earlier.minor_faults),
            major_faults: self.major_faults.saturating_sub(earlier.major_faults),
        }
    }

    /// The most a process can report over `wall_s` seconds: CPU time on a
    /// machine of 65,536 CPUs, 64 TiB resident, and a context switch per
    /// microsecond on each CPU.
    pub fn bound_for(wall_s: f64) -> Rusage {
        let cpu_s = wall_s * 65_536.0;
        Rusage {
            user_s: cpu_s,
            system_s: cpu_s,
            max_rss_kb: 1 << 36,
            voluntary_switches: (cpu_s * 1e6) as u64,
            involuntary_switches: (cpu_s * 1e6) as u64,
            // A fault per microsecond on each CPU.
            minor_faults: (cpu_s * 1e6) as u64,
            major_faults: (cpu_s * 1e6) as u64,
        }
    }

    /// Which field of a peer's report is impossible against `bound`
    /// (negative, not a number, or over it), to say so instead of printing it.
    pub fn implausible(&self, bound: &Rusage) -> Option<String> {
        let secs = |v: f64, max: f64| !(0.0..=max).contains(&v);
        if secs(self.user_s, bound.user_s) {
            return Some(format!("an impossible user_s ({})", self.user_s));
        }
        if secs(self.system_s, bound.system_s) {
            return Some(format!("an impossible system_s ({})", self.system_s));
        }
        if self.max_rss_kb > bound.max_rss_kb {
            return Some(format!("an impossible max_rss_kb ({})", self.max_rss_kb));
        }
        if self.voluntary_switches > bound.voluntary_switches
            || self.involuntary_switches > bound.involuntary_switches
        {
            return Some("an impossible count of context switches".into());
        }
        None
    }

    /// User plus system seconds: the CPU time to set against /proc/stat.
    pub fn cpu_s(&self) -> f64 {
        self.user_s + self.system_s
    }

    /// This process's CPU time over a window as a utilisation of `ncpus`
    /// CPUs (0–100), comparable with `CpuUsage::overall.util_percent`.
    pub fn util_percent(&self, ncpus: usize, elapsed_s: f64) -> f64 {
        if ncpus == 0 || elapsed_s <= 0.0 {
            return 0.0;
        }
        100.0 * self.cpu_s() / (ncpus as f64 * elapsed_s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_delta() {
        let a = Rusage {
            user_s: 1.5,
            system_s: 0.5,
            max_rss_kb: 100,
            voluntary_switches: 10,
            involuntary_switches: 3,
            minor_faults: 7,
            major_faults: 1,
        };
        let b = Rusage {
            user_s: 3.0,
            system_s: 1.5,
            max_rss_kb: 120,
            voluntary_switches: 25,
            involuntary_switches: 3,
            minor_faults: 9,
            major_faults: 1,
        };
        let d = b.since(&a);
        assert_eq!(d.user_s, 1.5);
        assert_eq!(d.system_s, 1.0);
        assert_eq!(d.max_rss_kb, 120);
        assert_eq!(d.voluntary_switches, 15);
        assert_eq!(d.involuntary_switches, 0);
        assert_eq!((d.minor_faults, d.major_faults), (2, 0));
        assert_eq!(d.cpu_s(), 2.5);
        // 2.5 CPU-s in 2.5 s on 2 CPUs: half the machine.
        assert_eq!(d.util_percent(2, 2.5), 50.0);
        assert_eq!(d.util_percent(0, 2.5), 0.0);
        // Readings in the wrong order never go negative.
        assert_eq!(a.since(&b).user_s, 0.0);
        assert_eq!(a.since(&b).voluntary_switches, 0);
    }

    /// The field names are the wire format (the `final` message) and the
    /// result's schema: a rename must fail here, not at a peer.
    #[test]
    fn wire_names_match_the_protocol() {
        let r = Rusage {
            user_s: 0.25,
            system_s: 1.5,
            max_rss_kb: 4404,
            voluntary_switches: 99_788,
            involuntary_switches: 61_660,
            minor_faults: 1_200,
            major_faults: 3,
        };
        let wire = r#"{"user_s":0.25,"system_s":1.5,"max_rss_kb":4404,"voluntary_switches":99788,"involuntary_switches":61660,"minor_faults":1200,"major_faults":3}"#;
        let wire_value: serde_json::Value = serde_json::from_str(wire).unwrap();
        assert_eq!(serde_json::to_value(r).unwrap(), wire_value);
        assert_eq!(serde_json::from_str::<Rusage>(wire).unwrap(), r);
        // An older peer's report, without the fault counts, still reads.
        let old = r#"{"user_s":0.25,"system_s":1.5,"max_rss_kb":4404,"voluntary_switches":99788,"involuntary_switches":61660}"#;
        assert_eq!(serde_json::from_str::<Rusage>(old).unwrap().minor_faults, 0);
    }

    #[test]
    fn reads_this_process() {
        let a = Rusage::read().unwrap();
        crate::sensors::spin(std::time::Duration::from_millis(20));
        let b = Rusage::read().unwrap();
        assert!(b.max_rss_kb > 0);
        assert!(b.cpu_s() >= a.cpu_s());
        assert!(b.since(&a).cpu_s() > 0.0);
    }

    #[test]
    fn impossible_figures_are_named() {
        let bound = Rusage::bound_for(10.0);
        assert_eq!(Rusage::process().implausible(&bound), None);
        let rss = Rusage {
            max_rss_kb: u64::MAX,
            ..Rusage::default()
        };
        assert!(rss.implausible(&bound).unwrap().contains("max_rss_kb"));
        for user_s in [f64::NAN, -1.0, 1e12] {
            let r = Rusage {
                user_s,
                ..Rusage::default()
            };
            assert!(
                r.implausible(&bound).unwrap().contains("user_s"),
                "{user_s}"
            );
        }
    }
}
