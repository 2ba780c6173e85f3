//! Units and their parsers: byte sizes, bit rates and durations.
//!
//! Suffixes follow netperf's convention because that is what network engineers
//! type: for sizes, upper-case `K/M/G` are binary (2^10, 2^20, 2^30 bytes) and
//! lower-case `k/m/g` are decimal (10^3, 10^6, 10^9 bytes). Rates are always
//! bits per second with decimal `k/M/G/T` (either case), so `100M` is 10^8 bit/s.
//! A rate never silently becomes a byte size: neper's `-m 1Gb` meaning 2^30
//! bytes/s is exactly the ambiguity these parsers rule out (a trailing `b`/`B`
//! is rejected for rates, and a size never accepts a per-second suffix).

use std::fmt;
use std::time::Duration;

use thiserror::Error;

/// Why a value did not parse; the caller adds the flag name.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum UnitError {
    #[error("'{0}' is not a number with an optional suffix")]
    NotANumber(String),
    #[error("unknown suffix '{suffix}' in '{input}' (accepted: {accepted})")]
    BadSuffix {
        input: String,
        suffix: String,
        accepted: &'static str,
    },
    #[error("'{0}' is too large")]
    Overflow(String),
    #[error("'{0}' must not be negative")]
    Negative(String),
}

/// A count of bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bytes(pub u64);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        const UNITS: [(u64, &str); 3] = [(1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")];
        for (div, name) in UNITS {
            if b >= div && b % div == 0 {
                return write!(f, "{}{}", b / div, name);
            }
        }
        write!(f, "{b}")
    }
}

fn split_number(input: &str) -> Result<(f64, &str), UnitError> {
    let s = input.trim();
    if s.starts_with('-') {
        return Err(UnitError::Negative(input.to_string()));
    }
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(end);
    if num.is_empty() || num == "." {
        return Err(UnitError::NotANumber(input.to_string()));
    }
    let value: f64 = num
        .parse()
        .map_err(|_| UnitError::NotANumber(input.to_string()))?;
    Ok((value, suffix))
}

/// Parse a byte size: `65536`, `64K` (65536), `64k` (64000), `1M`, `1m`, `1G`, `1g`.
pub fn parse_size(input: &str) -> Result<Bytes, UnitError> {
    let (value, suffix) = split_number(input)?;
    let mult: f64 = match suffix {
        "" => 1.0,
        "K" => 1024.0,
        "M" => 1024.0 * 1024.0,
        "G" => 1024.0 * 1024.0 * 1024.0,
        "k" => 1e3,
        "m" => 1e6,
        "g" => 1e9,
        _ => {
            return Err(UnitError::BadSuffix {
                input: input.to_string(),
                suffix: suffix.to_string(),
                accepted: "K/M/G = 2^10/2^20/2^30 bytes, k/m/g = 10^3/10^6/10^9 bytes",
            });
        }
    };
    let bytes = value * mult;
    if bytes.fract() != 0.0 {
        return Err(UnitError::NotANumber(input.to_string()));
    }
    if bytes > u64::MAX as f64 {
        return Err(UnitError::Overflow(input.to_string()));
    }
    Ok(Bytes(bytes as u64))
}

/// A rate in bits per second.
#[derive(Clone, Copy, Debug, Default, PartialEq, PartialOrd)]
pub struct BitsPerSec(pub f64);

impl fmt::Display for BitsPerSec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        if !in_fixed_range(v) {
            return write!(f, "{} bit/s", Compact(v));
        }
        let (div, unit) = if v >= 1e9 {
            (1e9, "Gbit/s")
        } else if v >= 1e6 {
            (1e6, "Mbit/s")
        } else if v >= 1e3 {
            (1e3, "kbit/s")
        } else {
            (1.0, "bit/s")
        };
        write!(f, "{:.2} {}", v / div, unit)
    }
}

/// A fixed unit for rates in the output (`--format`, netperf's `-f`):
/// lower case bits per second in powers of 10, upper case bytes per
/// second in powers of 2, as netperf's and iperf3's letters mean.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RateUnit {
    Kbit,
    Mbit,
    Gbit,
    KiByte,
    MiByte,
    GiByte,
}

impl RateUnit {
    /// The letters `--format` takes.
    pub const LETTERS: &str = "k, m, g (10^3/10^6/10^9 bits/s) or K, M, G (2^10/2^20/2^30 bytes/s)";

    /// `k m g K M G`.
    pub fn from_letter(s: &str) -> Option<RateUnit> {
        Some(match s {
            "k" => RateUnit::Kbit,
            "m" => RateUnit::Mbit,
            "g" => RateUnit::Gbit,
            "K" => RateUnit::KiByte,
            "M" => RateUnit::MiByte,
            "G" => RateUnit::GiByte,
            _ => return None,
        })
    }

    /// A rate in bits/s in this unit.
    pub fn of(self, bps: f64) -> f64 {
        let kib = 8.0 * 1024.0;
        match self {
            RateUnit::Kbit => bps / 1e3,
            RateUnit::Mbit => bps / 1e6,
            RateUnit::Gbit => bps / 1e9,
            RateUnit::KiByte => bps / kib,
            RateUnit::MiByte => bps / (kib * 1024.0),
            RateUnit::GiByte => bps / (kib * 1024.0 * 1024.0),
        }
    }

    /// netperf's name of the unit (THROUGHPUT_UNITS).
    pub fn netperf_name(self) -> &'static str {
        match self {
            RateUnit::Kbit => "10^3bits/s",
            RateUnit::Mbit => "10^6bits/s",
            RateUnit::Gbit => "10^9bits/s",
            RateUnit::KiByte => "KBytes/s",
            RateUnit::MiByte => "MBytes/s",
            RateUnit::GiByte => "GBytes/s",
        }
    }

    /// The unit for people: `Mbit/s`, `MiB/s`.
    pub fn name(self) -> &'static str {
        match self {
            RateUnit::Kbit => "kbit/s",
            RateUnit::Mbit => "Mbit/s",
            RateUnit::Gbit => "Gbit/s",
            RateUnit::KiByte => "KiB/s",
            RateUnit::MiByte => "MiB/s",
            RateUnit::GiByte => "GiB/s",
        }
    }

    /// A rate in bits/s for people: in this unit, or scaled to its size
    /// (`BitsPerSec`'s display) when none was chosen.
    pub fn show(unit: Option<RateUnit>, bps: f64) -> String {
        match unit {
            Some(u) => format!("{} {}", Fixed(u.of(bps), 2), u.name()),
            None => BitsPerSec(bps).to_string(),
        }
    }
}

/// Parse a rate in bits/s: `1000`, `100k`, `100M`, `10G`, `1T` (decimal, either case).
pub fn parse_rate(input: &str) -> Result<BitsPerSec, UnitError> {
    let (value, suffix) = split_number(input)?;
    let mult = match suffix {
        "" => 1.0,
        "k" | "K" => 1e3,
        "m" | "M" => 1e6,
        "g" | "G" => 1e9,
        "t" | "T" => 1e12,
        _ => {
            return Err(UnitError::BadSuffix {
                input: input.to_string(),
                suffix: suffix.to_string(),
                accepted: "k/M/G/T = 10^3/10^6/10^9/10^12 bit/s (rates are bits per second)",
            });
        }
    };
    Ok(BitsPerSec(value * mult))
}

/// Parse a duration: `10s`, `500ms`, `250us`, `2m`, `1h`, a bare number of
/// seconds, or parts from the largest unit down, as `1h30m` or `2m30s`.
pub fn parse_duration(input: &str) -> Result<Duration, UnitError> {
    const ACCEPTED: &str =
        "h, m, s, ms, us, or parts from the largest down as in 1h30m (a bare number is seconds)";
    let mut rest = input.trim();
    if rest.starts_with('-') {
        return Err(UnitError::Negative(input.to_string()));
    }
    let mut secs = 0.0;
    // Each part must name a smaller unit than the one before it.
    let mut last_rank = usize::MAX;
    loop {
        let (value, tail) =
            split_number(rest).map_err(|_| UnitError::NotANumber(input.to_string()))?;
        let end = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (suffix, next) = tail.split_at(end);
        let (rank, mult) = match suffix {
            "h" => (0, 3600.0),
            "m" | "min" => (1, 60.0),
            "" | "s" => (2, 1.0),
            "ms" => (3, 1e-3),
            "us" => (4, 1e-6),
            _ => {
                return Err(UnitError::BadSuffix {
                    input: input.to_string(),
                    suffix: suffix.to_string(),
                    accepted: ACCEPTED,
                });
            }
        };
        let bare = suffix.is_empty();
        if last_rank != usize::MAX && (rank <= last_rank || bare) {
            return Err(UnitError::BadSuffix {
                input: input.to_string(),
                suffix: if bare {
                    "(none)".to_string()
                } else {
                    suffix.to_string()
                },
                accepted: ACCEPTED,
            });
        }
        last_rank = rank;
        secs += value * mult;
        if next.is_empty() {
            break;
        }
        if bare {
            // `1 30` or `5.5.5`: a bare number must stand alone.
            return Err(UnitError::NotANumber(input.to_string()));
        }
        rest = next;
    }
    if !secs.is_finite() || secs > 1e9 {
        return Err(UnitError::Overflow(input.to_string()));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// A duration in nanoseconds the way a user types one: `1ms`, `2.5s`,
/// `24h`, `1h30m` (the inverse of [`parse_duration`] for whole units).
pub fn fmt_duration_ns(ns: u64) -> String {
    const UNITS: [(u64, &str); 5] = [
        (3_600_000_000_000, "h"),
        (60_000_000_000, "m"),
        (1_000_000_000, "s"),
        (1_000_000, "ms"),
        (1_000, "us"),
    ];
    if ns == 0 {
        return "0s".into();
    }
    // Whole units from the largest down, as long as they add up exactly.
    let mut out = String::new();
    let mut rest = ns;
    for (div, name) in UNITS {
        if rest >= div {
            out.push_str(&format!("{}{name}", rest / div));
            rest %= div;
        }
    }
    if rest == 0 {
        return out;
    }
    // Not whole: one figure in the largest unit it reaches.
    let (div, name) = UNITS
        .into_iter()
        .find(|(d, _)| ns >= *d)
        .unwrap_or((1_000, "us"));
    format!("{}{name}", ns as f64 / div as f64)
}

/// A rate in bits/s the way a user types one: `8`, `100M`, `1T` (decimal,
/// as [`parse_rate`] reads it), followed by ` bit/s`.
pub fn fmt_rate_bps(bps: u64) -> String {
    for (div, name) in [
        (1_000_000_000_000, "T"),
        (1_000_000_000, "G"),
        (1_000_000, "M"),
        (1_000, "k"),
    ] {
        if bps >= div && bps % div == 0 {
            return format!("{}{name} bit/s", bps / div);
        }
    }
    format!("{bps} bit/s")
}

/// Nanoseconds as f64 seconds, for rate arithmetic.
pub fn ns_to_s(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// Human form of a latency in nanoseconds.
pub fn fmt_ns(ns: f64) -> String {
    if !in_fixed_range(ns) {
        format!("{} ns", Compact(ns))
    } else if ns >= 1e9 {
        format!("{:.2} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.1} us", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

/// A unix time as local wall-clock time in a strftime(3) `format`
/// (iperf3's `--timestamps=FORMAT`); an empty format is
/// [`fmt_local_time`]'s with the date. At most 255 bytes come out.
pub fn fmt_strftime(unix_s: f64, format: &str) -> String {
    if format.is_empty() {
        return fmt_local_time(unix_s, true);
    }
    let Ok(cfmt) = std::ffi::CString::new(format) else {
        return fmt_local_time(unix_s, true);
    };
    unsafe extern "C" {
        fn tzset();
    }
    // SAFETY: as in fmt_local_time.
    unsafe { tzset() };
    let t = unix_s.floor() as i64;
    // SAFETY: zeroed is a valid tm; localtime_r writes only into it.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid for the call.
    if unsafe { libc::localtime_r(&(t as _), &mut tm) }.is_null() {
        return format!("unix {unix_s:.3}");
    }
    let mut buf = [0u8; 256];
    // SAFETY: buf is valid for its length; cfmt is NUL-terminated; tm is
    // filled. strftime returns the bytes written, 0 when they do not fit.
    let n = unsafe { libc::strftime(buf.as_mut_ptr().cast(), buf.len(), cfmt.as_ptr(), &tm) };
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// A unix time as local wall-clock time (the TZ environment variable and
/// /etc/localtime, through localtime_r): `2026-11-25 01:05:03.250 CET`
/// with `date`, `01:05:03.250` without.
pub fn fmt_local_time(unix_s: f64, date: bool) -> String {
    let secs = unix_s.floor();
    let millis = (((unix_s - secs) * 1000.0).round() as u32).min(999);
    let t = secs as i64;
    unsafe extern "C" {
        fn tzset();
    }
    // SAFETY: tzset takes no arguments; it reads TZ, which localtime_r
    // alone need not (POSIX), so a TZ set for this run is honoured.
    unsafe { tzset() };
    // SAFETY: zeroed is a valid tm; localtime_r writes only into it.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid for the call.
    if unsafe { libc::localtime_r(&(t as _), &mut tm) }.is_null() {
        return format!("unix {unix_s:.3}");
    }
    let time = format!(
        "{:02}:{:02}:{:02}.{millis:03}",
        tm.tm_hour, tm.tm_min, tm.tm_sec
    );
    if !date {
        return time;
    }
    let zone = if tm.tm_zone.is_null() {
        String::new()
    } else {
        // SAFETY: tm_zone points at a NUL-terminated name libc keeps.
        let z = unsafe { std::ffi::CStr::from_ptr(tm.tm_zone) };
        format!(" {}", z.to_string_lossy())
    };
    format!(
        "{:04}-{:02}-{:02} {time}{zone}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday
    )
}

/// A value with an SI prefix for axes and cells: `950`, `180 k`, `1.2 M`,
/// `3.4 G` (three significant figures at most).
pub fn fmt_si(v: f64) -> String {
    if !in_fixed_range(v) {
        return Compact(v).to_string();
    }
    let a = v.abs();
    let (div, prefix) = if a >= 1e12 {
        (1e12, " T")
    } else if a >= 1e9 {
        (1e9, " G")
    } else if a >= 1e6 {
        (1e6, " M")
    } else if a >= 1e3 {
        (1e3, " k")
    } else {
        (1.0, "")
    };
    let x = v / div;
    let digits = if x.abs() >= 100.0 || x == x.trunc() {
        0
    } else if x.abs() >= 10.0 {
        1
    } else {
        2
    };
    let text = format!("{x:.digits$}");
    // 1.50 k reads as 1.5 k.
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    };
    format!("{text}{prefix}")
}

/// The largest magnitude a table prints in fixed notation: 10^15 is a
/// petabit per second, a billion transactions a microsecond, eleven days
/// in nanoseconds. Beyond it a figure is no measurement (a crafted or
/// corrupted document's 1.7e308) and prints as [`Compact`] does.
pub const FIXED_MAX: f64 = 1e15;

/// Whether `v` prints in fixed notation: finite and under [`FIXED_MAX`].
fn in_fixed_range(v: f64) -> bool {
    v.is_finite() && v.abs() < FIXED_MAX
}

/// A figure with a number of decimals as tables print it (`Fixed(v, 2)`
/// is `{v:.2}`), or, not finite or beyond [`FIXED_MAX`], as [`Compact`]
/// writes it: a figure from a file never prints as 300 digits. Width,
/// alignment and sign (`{:>8}`, `{:+}`) apply to the whole.
#[derive(Clone, Copy, Debug)]
pub struct Fixed(pub f64, pub usize);

impl fmt::Display for Fixed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Fixed(v, decimals) = *self;
        let mut text = if in_fixed_range(v) {
            format!("{v:.decimals$}")
        } else {
            Compact(v).to_string()
        };
        // `{:+}` as for a float: a sign on positive figures too.
        if f.sign_plus() && !text.starts_with(['-', 'N']) {
            text.insert(0, '+');
        }
        f.pad(&text)
    }
}

/// A figure in scientific notation with at most three significant digits
/// (`1.7e308`, `-2.5e20`), or `inf`, `-inf`, `NaN`.
#[derive(Clone, Copy, Debug)]
pub struct Compact(pub f64);

impl fmt::Display for Compact {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        let text = if v.is_nan() {
            "NaN".to_string()
        } else if v.is_infinite() {
            (if v > 0.0 { "inf" } else { "-inf" }).to_string()
        } else {
            // 1.70e308 reads as 1.7e308.
            let s = format!("{v:.2e}");
            match s.split_once('e') {
                Some((m, e)) if m.contains('.') => {
                    format!("{}e{e}", m.trim_end_matches('0').trim_end_matches('.'))
                }
                _ => s,
            }
        };
        f.pad(&text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A figure no network makes (a crafted file's 1.7e308, an inf) prints
    /// in the table's unit in a few characters, never as 300 digits.
    #[test]
    fn absurd_figures_print_compactly() {
        assert_eq!(BitsPerSec(1.7e308).to_string(), "1.7e308 bit/s");
        assert_eq!(BitsPerSec(f64::INFINITY).to_string(), "inf bit/s");
        assert_eq!(BitsPerSec(f64::NAN).to_string(), "NaN bit/s");
        assert_eq!(BitsPerSec(-5e20).to_string(), "-5e20 bit/s");
        assert_eq!(BitsPerSec(17.6e9).to_string(), "17.60 Gbit/s");
        assert_eq!(fmt_ns(1.7e308), "1.7e308 ns");
        assert_eq!(fmt_ns(f64::NEG_INFINITY), "-inf ns");
        assert_eq!(fmt_ns(2.5e6), "2.50 ms");
        assert_eq!(fmt_si(1.7e308), "1.7e308");
        assert_eq!(fmt_si(f64::INFINITY), "inf");
        assert_eq!(fmt_si(1.2e6), "1.2 M");
        assert_eq!(Fixed(1.7e308, 1).to_string(), "1.7e308");
        assert_eq!(Fixed(1.234e20, 1).to_string(), "1.23e20");
        assert_eq!(Fixed(99.75, 1).to_string(), "99.8");
        assert_eq!(format!("{:>9}", Fixed(f64::NAN, 2)), "      NaN");
        assert_eq!(format!("{:>8}", Fixed(1.5, 2)), "    1.50");
        assert_eq!(format!("{:+}", Fixed(4.25, 1)), "+4.2");
        assert_eq!(format!("{:+}", Fixed(-4.25, 1)), "-4.2");
        assert_eq!(format!("{:+}", Fixed(1e300, 1)), "+1e300");
        assert_eq!(
            RateUnit::show(Some(RateUnit::Mbit), 1.7e308),
            "1.7e302 Mbit/s"
        );
        for v in [f64::MAX, f64::MIN, f64::MIN_POSITIVE, 1e15, -1e15] {
            for s in [
                BitsPerSec(v).to_string(),
                fmt_ns(v),
                fmt_si(v),
                Fixed(v, 3).to_string(),
            ] {
                assert!(s.len() <= 16, "{v}: {s}");
            }
        }
    }

    #[test]
    fn sizes_follow_netperf_case_convention() {
        assert_eq!(parse_size("64K"), Ok(Bytes(65536)));
        assert_eq!(parse_size("64k"), Ok(Bytes(64000)));
        assert_eq!(parse_size("1M"), Ok(Bytes(1 << 20)));
        assert_eq!(parse_size("1m"), Ok(Bytes(1_000_000)));
        assert_eq!(parse_size("1G"), Ok(Bytes(1 << 30)));
        assert_eq!(parse_size("1g"), Ok(Bytes(1_000_000_000)));
        assert_eq!(parse_size("1.5K"), Ok(Bytes(1536)));
        assert_eq!(parse_size("1"), Ok(Bytes(1)));
    }

    #[test]
    fn sizes_reject_rate_suffixes_and_junk() {
        // neper's `-m 1Gb` read as 2^30 bytes: never again.
        assert!(matches!(
            parse_size("1Gb"),
            Err(UnitError::BadSuffix { .. })
        ));
        assert!(matches!(
            parse_size("1KB"),
            Err(UnitError::BadSuffix { .. })
        ));
        assert!(matches!(parse_size("x"), Err(UnitError::NotANumber(_))));
        assert!(matches!(parse_size("-1"), Err(UnitError::Negative(_))));
        assert!(matches!(parse_size("1.5"), Err(UnitError::NotANumber(_))));
        assert!(matches!(
            parse_size("99999999999G"),
            Err(UnitError::Overflow(_))
        ));
    }

    #[test]
    fn rates_are_decimal_bits() {
        assert_eq!(parse_rate("100M"), Ok(BitsPerSec(1e8)));
        assert_eq!(parse_rate("100m"), Ok(BitsPerSec(1e8)));
        assert_eq!(parse_rate("1G"), Ok(BitsPerSec(1e9)));
        assert_eq!(parse_rate("2.5k"), Ok(BitsPerSec(2500.0)));
        assert!(matches!(
            parse_rate("1Gb"),
            Err(UnitError::BadSuffix { .. })
        ));
        assert!(matches!(
            parse_rate("1GB"),
            Err(UnitError::BadSuffix { .. })
        ));
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("10"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("5x").is_err());
    }

    #[test]
    fn compound_durations_go_from_the_largest_unit_down() {
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("2m30s"), Ok(Duration::from_secs(150)));
        assert_eq!(parse_duration("1s500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("1m0.5s"), Ok(Duration::from_millis(60_500)));
        for bad in ["30m1h", "1s1s", "1m30", "1h 30m", "1h-30m", "1hm", "5.5.5"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn si_prefixes_for_axes() {
        assert_eq!(fmt_si(0.0), "0");
        assert_eq!(fmt_si(950.0), "950");
        assert_eq!(fmt_si(180_000.0), "180 k");
        assert_eq!(fmt_si(1_200_000.0), "1.2 M");
        assert_eq!(fmt_si(1_250_000.0), "1.25 M");
        assert_eq!(fmt_si(12_500_000_000.0), "12.5 G");
        assert_eq!(fmt_si(0.5), "0.5");
    }

    #[test]
    fn local_time_follows_tz() {
        // SAFETY: tests in this module do not read the environment concurrently.
        unsafe { std::env::set_var("TZ", "UTC") };
        assert_eq!(fmt_local_time(1008.25, false), "00:16:48.250");
        assert_eq!(
            fmt_local_time(1_795_000_000.0, true),
            "2026-11-18 11:06:40.000 UTC"
        );
    }

    #[test]
    fn limits_print_as_typed() {
        assert_eq!(fmt_duration_ns(1_000_000), "1ms");
        assert_eq!(fmt_duration_ns(24 * 3_600_000_000_000), "24h");
        assert_eq!(fmt_duration_ns(5_400_000_000_000), "1h30m");
        assert_eq!(fmt_duration_ns(10_000_000), "10ms");
        assert_eq!(fmt_duration_ns(1_500), "1.5us");
        assert_eq!(fmt_rate_bps(1_000_000_000_000), "1T bit/s");
        assert_eq!(fmt_rate_bps(8), "8 bit/s");
    }

    #[test]
    fn display() {
        assert_eq!(Bytes(65536).to_string(), "64K");
        assert_eq!(Bytes(1000).to_string(), "1000");
        assert_eq!(BitsPerSec(1.5e9).to_string(), "1.50 Gbit/s");
        assert_eq!(fmt_ns(1500.0), "1.5 us");
    }

    proptest! {
        #[test]
        fn binary_suffix_is_exact_power_of_two(n in 0u64..1_000_000) {
            prop_assert_eq!(parse_size(&format!("{n}K")), Ok(Bytes(n * 1024)));
            prop_assert_eq!(parse_size(&format!("{n}k")), Ok(Bytes(n * 1000)));
            prop_assert_eq!(parse_size(&format!("{n}M")), Ok(Bytes(n << 20)));
        }

        #[test]
        fn size_display_round_trips(n in 1u64..1_000_000_000) {
            let b = Bytes(n);
            prop_assert_eq!(parse_size(&b.to_string()), Ok(b));
        }

        #[test]
        fn parsers_never_panic(s in ".{0,12}") {
            let _ = parse_size(&s);
            let _ = parse_rate(&s);
            let _ = parse_duration(&s);
        }

        #[test]
        fn formatted_whole_durations_parse_back(ns in 0u64..100_000_000_000_000) {
            let us = ns / 1000 * 1000;
            let text = fmt_duration_ns(us);
            prop_assert_eq!(parse_duration(&text).map(|d| d.as_nanos() as u64), Ok(us), "{}", text);
        }
    }

    /// `--format`'s letters as netperf's -f reads them: lower case bits/s
    /// in powers of 10, upper case bytes/s in powers of 2.
    #[test]
    fn rate_units_follow_netperfs_letters() {
        let bps = 8.0 * 1024.0 * 1024.0 * 1024.0; // 1 GiB/s
        let of = |l: &str| RateUnit::from_letter(l).unwrap().of(bps);
        assert_eq!(of("G"), 1.0);
        assert_eq!(of("M"), 1024.0);
        assert_eq!(of("K"), 1024.0 * 1024.0);
        assert_eq!(of("g"), bps / 1e9);
        assert_eq!(of("m"), bps / 1e6);
        assert_eq!(of("k"), bps / 1e3);
        assert_eq!(RateUnit::from_letter("x"), None);
        assert_eq!(
            RateUnit::show(Some(RateUnit::Mbit), 941.5e6),
            "941.50 Mbit/s"
        );
        assert_eq!(
            RateUnit::show(None, 941.5e6),
            BitsPerSec(941.5e6).to_string()
        );
    }

    /// `--timestamps=FORMAT` is strftime's; without one, the date and
    /// time to the millisecond.
    #[test]
    fn strftime_formats_and_the_default() {
        // SAFETY: set before any other thread of this test reads TZ.
        unsafe { std::env::set_var("TZ", "UTC") };
        assert_eq!(
            fmt_strftime(86_400.25, "%Y-%m-%d %H:%M:%S"),
            "1970-01-02 00:00:00"
        );
        assert!(fmt_strftime(86_400.25, "").starts_with("1970-01-02 00:00:00.250"));
    }
}
