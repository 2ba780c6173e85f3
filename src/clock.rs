//! Wall-clock time as the unix epoch counts it, for the timestamps that
//! leave the process (log lines, samples, the aggregate's series) and the
//! default names of output directories. Durations inside a test are taken
//! from `Instant`, never from here: the wall clock may step.
//!
//! Time that crosses to another host inside a test (the clock exchanges
//! that estimate a peer's offset, an agent's start instant) is
//! CLOCK_MONOTONIC as a number ([`monotonic_ns`]): it never steps (NTP
//! only slews it), and it is the clock `Instant` reads on Linux, so an
//! `Instant` converts to it ([`monotonic_ns_at`]). Its epoch is the
//! host's boot (or a time namespace's offset from it), so two hosts'
//! readings differ by an arbitrary amount: the offset the exchanges
//! measure. [`sync_state`] is what the kernel says of its own
//! synchronisation (adjtimex), reported beside an offset.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Seconds since the unix epoch; 0 on a clock set before 1970.
pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Nanoseconds since the unix epoch; 0 on a clock set before 1970.
pub fn unix_now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// CLOCK_MONOTONIC now, in nanoseconds since its epoch.
#[inline]
pub fn monotonic_ns() -> u64 {
    read_ns(libc::CLOCK_MONOTONIC)
}

/// CLOCK_REALTIME now, in nanoseconds: the clock the kernel's receive
/// timestamps (SO_TIMESTAMPNS) are read on.
#[inline]
pub fn realtime_ns() -> u64 {
    read_ns(libc::CLOCK_REALTIME)
}

/// One clock's reading in nanoseconds, straight from clock_gettime (a
/// vDSO call, no syscall): `SystemTime` and `Instant` hide the raw value
/// that a peer's or the kernel's stamps are compared with.
#[inline]
fn read_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill; both clocks always exist on Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CLOCK_MONOTONIC at `at`, in nanoseconds since its epoch: now's reading
/// less the time since `at` (or plus the time until it).
pub fn monotonic_ns_at(at: Instant) -> u64 {
    let (mono, now) = (monotonic_ns(), Instant::now());
    match now.checked_duration_since(at) {
        Some(ago) => mono.saturating_sub(ago.as_nanos() as u64),
        None => mono + at.duration_since(now).as_nanos() as u64,
    }
}

/// The `Instant` at which CLOCK_MONOTONIC reads `ns` (now, for a reading
/// before the process could have taken one).
pub fn instant_at_monotonic(ns: u64) -> Instant {
    let (mono, now) = (monotonic_ns(), Instant::now());
    if ns >= mono {
        now + Duration::from_nanos(ns - mono)
    } else {
        now.checked_sub(Duration::from_nanos(mono - ns))
            .unwrap_or(now)
    }
}

/// What the kernel says of its clock's synchronisation (adjtimex(2)).
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
pub struct SyncState {
    /// The estimated error of CLOCK_REALTIME, µs (`esterror`), as the NTP
    /// or PTP daemon that disciplines it last set it.
    pub esterror_us: i64,
    /// The largest error it may have, µs (`maxerror`): grows by 500 ppm
    /// while no daemon updates it, 16 s at most.
    pub maxerror_us: i64,
    /// Whether the kernel counts the clock as synchronised (STA_UNSYNC
    /// clear and the clock state not TIME_ERROR).
    pub synchronised: bool,
}

/// The kernel's view of its clock (adjtimex with no change asked); None
/// where the call fails.
pub fn sync_state() -> Option<SyncState> {
    // SAFETY: zeroed is a valid timex (all integers); modes 0 reads only.
    let mut tx: libc::timex = unsafe { std::mem::zeroed() };
    // SAFETY: a valid timex to fill.
    let state = unsafe { libc::adjtimex(&mut tx) };
    if state < 0 {
        return None;
    }
    Some(SyncState {
        esterror_us: tx.esterror as i64,
        maxerror_us: tx.maxerror as i64,
        synchronised: state != libc::TIME_ERROR && tx.status & libc::STA_UNSYNC == 0,
    })
}

/// Which CLOCK_MONOTONIC a process reads: its kernel's boot, and its time
/// namespace's offset from that kernel's clock. Two ends with the same
/// boot read one clock, offset by the difference of their namespaces'
/// offsets, exactly: no exchange over a path can tell the way up from the
/// way down, so a standing queue one way would bias an estimate by half
/// of it (within its bound), where this has no error at all.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MonotonicId {
    /// /proc/sys/kernel/random/boot_id: one per kernel boot.
    pub boot_id: String,
    /// The time namespace's CLOCK_MONOTONIC offset, ns (0 outside one).
    pub offset_ns: i64,
}

/// This process's [`MonotonicId`]; None where the kernel does not say its boot.
pub fn monotonic_id() -> Option<MonotonicId> {
    let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    // "monotonic  SECS  NANOS": the offsets of the namespace this process's
    // children get, which after the exec that started thrum in it is its own.
    let offset_ns = std::fs::read_to_string("/proc/self/timens_offsets")
        .ok()
        .and_then(|s| timens_monotonic_ns(&s))
        .unwrap_or(0);
    Some(MonotonicId {
        boot_id: boot_id.trim().to_string(),
        offset_ns,
    })
}

/// The monotonic line of /proc/PID/timens_offsets, ns.
fn timens_monotonic_ns(s: &str) -> Option<i64> {
    let line = s.lines().find(|l| l.starts_with("monotonic"))?;
    let mut w = line.split_whitespace().skip(1);
    let secs: i64 = w.next()?.parse().ok()?;
    let nanos: i64 = w.next()?.parse().ok()?;
    Some(secs * 1_000_000_000 + nanos)
}

/// The UTC calendar date and time of a unix time in seconds: (year,
/// month, day, hour, minute, second), by Howard Hinnant's civil-from-days
/// algorithm (any time, before 1970 too).
pub fn civil(unix_s: i64) -> (i64, i64, i64, i64, i64, i64) {
    let (days, secs) = (unix_s.div_euclid(86_400), unix_s.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d, secs / 3600, secs / 60 % 60, secs % 60)
}

/// `YYYYmmdd-HHMMSS` (UTC) of a unix time, for the default output directory.
pub fn date_stamp(unix_s: u64) -> String {
    let (y, m, d, hh, mm, ss) = civil(unix_s as i64);
    format!("{y:04}{m:02}{d:02}-{hh:02}{mm:02}{ss:02}")
}

/// Unix seconds as UTC, RFC 3339, to the second.
pub fn rfc3339(unix_s: f64) -> String {
    let (y, m, d, hh, mm, ss) = civil(unix_s.floor() as i64);
    format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// /proc/PID/timens_offsets as the kernel prints it: the monotonic
    /// line's seconds and nanoseconds; this process's boot is named.
    #[test]
    fn time_namespace_offsets() {
        let s = "monotonic           5         7\nboottime            0         0\n";
        assert_eq!(timens_monotonic_ns(s), Some(5_000_000_007));
        assert_eq!(
            timens_monotonic_ns("monotonic -1 0\n"),
            Some(-1_000_000_000)
        );
        assert_eq!(timens_monotonic_ns("boottime 0 0\n"), None);
        assert!(monotonic_id().is_some_and(|id| id.boot_id.len() == 36));
    }

    #[test]
    fn date_stamps() {
        assert_eq!(date_stamp(0), "19700101-000000");
        assert_eq!(date_stamp(1_795_000_000), "20261118-110640");
        assert_eq!(date_stamp(951_782_400), "20000229-000000");
    }

    /// An `Instant` and CLOCK_MONOTONIC are one clock: converting either
    /// way and back lands within a few microseconds (two readings apart).
    #[test]
    fn instants_and_monotonic_readings_convert() {
        let now = Instant::now();
        let ns = monotonic_ns_at(now);
        let back = instant_at_monotonic(ns);
        let apart = if back > now { back - now } else { now - back };
        assert!(apart < Duration::from_millis(5), "{apart:?}");
        let later = now + Duration::from_secs(3);
        let d = monotonic_ns_at(later) as i64 - ns as i64;
        assert!((d - 3_000_000_000).abs() < 5_000_000, "{d}");
        assert!(sync_state().is_some());
    }

    #[test]
    fn seconds_and_nanoseconds_agree() {
        let (s, ns) = (unix_now(), unix_now_ns());
        // Read one after the other: the same second give or take one.
        assert!((s - ns as f64 / 1e9).abs() < 1.0, "{s} vs {ns}");
        assert!(s > 1.6e9, "{s}: the clock is before 2020");
    }
}
