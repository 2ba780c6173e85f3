//! How long send and receive calls take, as netperf's `-v 2` histograms
//! show them: rows of ten buckets per decade, from 1 µs buckets (UNIT_USEC:
//! 0–9 µs) to 10 s buckets (TEN_SEC: 10–99 s), and one count beyond.
//!
//! A bulk flow times each call that moved data. The time a blocking send
//! waits for room in the socket buffer, or a receive for data, is what
//! makes these tell a window-limited sender from a CPU-limited one. Like
//! every record here it merges by adding.

use std::ops::AddAssign;

use serde::{Deserialize, Serialize};

/// netperf's names of the rows, smallest decade first.
pub const ROWS: [&str; 8] = [
    "UNIT_USEC",
    "TEN_USEC",
    "HUNDRED_USEC",
    "UNIT_MSEC",
    "TEN_MSEC",
    "HUNDRED_MSEC",
    "UNIT_SEC",
    "TEN_SEC",
];

/// One histogram of call times.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CallTimes {
    /// Calls timed.
    pub calls: u64,
    /// `rows[r][k]`: calls that took from k to k+1 units of row r's unit
    /// (1 µs, 10 µs, … 10 s; see [`ROWS`]).
    pub rows: [[u64; 10]; 8],
    /// Calls of 100 s or more.
    pub over_100_s: u64,
}

impl CallTimes {
    /// Count one call of `ns` nanoseconds: a few compares and one division.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.calls += 1;
        let mut unit = 1_000u64;
        for row in self.rows.iter_mut() {
            if ns < unit * 10 {
                row[(ns / unit) as usize] += 1;
                return;
            }
            unit *= 10;
        }
        self.over_100_s += 1;
    }

    /// The rows as netperf prints them: `UNIT_USEC     :    0:  1: …`.
    pub fn text_rows(&self) -> Vec<String> {
        let mut out: Vec<String> = ROWS
            .iter()
            .zip(&self.rows)
            .map(|(name, row)| {
                let cells: Vec<String> = row.iter().map(|c| format!("{c:>5}")).collect();
                format!("{name:<14}:{}", cells.join(":"))
            })
            .collect();
        out.push(format!("{:<14}:{:>5}", ">100_SECS", self.over_100_s));
        out.push(format!("{:<14}:{:>5}", "HIST_TOTAL", self.calls));
        out
    }
}

impl AddAssign<&CallTimes> for CallTimes {
    fn add_assign(&mut self, o: &CallTimes) {
        self.calls += o.calls;
        for (a, b) in self.rows.iter_mut().zip(&o.rows) {
            for (x, y) in a.iter_mut().zip(b) {
                *x += y;
            }
        }
        self.over_100_s += o.over_100_s;
    }
}

/// A bulk flow's two histograms.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SendRecvTimes {
    pub send: CallTimes,
    pub recv: CallTimes,
}

impl AddAssign<&SendRecvTimes> for SendRecvTimes {
    fn add_assign(&mut self, o: &SendRecvTimes) {
        self.send += &o.send;
        self.recv += &o.recv;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_land_in_their_decade() {
        let mut h = CallTimes::default();
        for ns in [
            0,
            999,
            1_000,
            9_999,
            10_000,
            25_000,
            3_000_000,
            99_999_999_999,
            100_000_000_000,
        ] {
            h.record(ns);
        }
        assert_eq!(h.calls, 9);
        assert_eq!(h.rows[0][0], 2, "under 1 µs");
        assert_eq!(h.rows[0][1], 1);
        assert_eq!(h.rows[0][9], 1);
        assert_eq!(h.rows[1][1], 1, "10 µs");
        assert_eq!(h.rows[1][2], 1, "25 µs");
        assert_eq!(h.rows[3][3], 1, "3 ms");
        assert_eq!(h.rows[7][9], 1, "99.9 s");
        assert_eq!(h.over_100_s, 1);
        let mut sum = h.clone();
        sum += &h;
        assert_eq!(sum.calls, 18);
        assert_eq!(sum.rows[1][2], 2);
        assert!(h.text_rows()[1].starts_with("TEN_USEC      :    0:    1:    1:"));
    }
}
