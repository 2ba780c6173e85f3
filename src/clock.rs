//! Wall-clock time as the unix epoch counts it, for the timestamps that
//! leave the process (log lines, samples, the aggregate's series) and the
//! default names of output directories. Durations inside a test are taken
//! from `Instant`, never from here: the wall clock may step.

use std::time::{SystemTime, UNIX_EPOCH};

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

    #[test]
    fn date_stamps() {
        assert_eq!(date_stamp(0), "19700101-000000");
        assert_eq!(date_stamp(1_795_000_000), "20261118-110640");
        assert_eq!(date_stamp(951_782_400), "20000229-000000");
    }

    #[test]
    fn seconds_and_nanoseconds_agree() {
        let (s, ns) = (unix_now(), unix_now_ns());
        // Read one after the other: the same second give or take one.
        assert!((s - ns as f64 / 1e9).abs() < 1.0, "{s} vs {ns}");
        assert!(s > 1.6e9, "{s}: the clock is before 2020");
    }
}
