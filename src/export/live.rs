//! Output while the test runs, so that no sample is lost if it ends badly.
//!
//! `--json-stream` writes a JSON line per interval to standard output as the
//! interval completes (both ends' counts in), then the whole result as the
//! last line. `--samples FILE` gets its CSV rows the same way: the header
//! when the test starts and each interval's rows as they come, one `write`
//! per interval, so a reader (or a crash) sees whole lines only. When the
//! test ends, the complete CSV replaces that file atomically (temp file and
//! rename), which adds any interval whose server sample came late.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

use serde::Serialize;

use super::csv;
use crate::control::client::Observer;
use crate::plan::TestKind;
use crate::result::{Interval, TestResult};

/// One line of `--json-stream`.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamLine<'a> {
    Interval { interval: &'a Interval },
    Result { result: &'a TestResult },
}

impl StreamLine<'_> {
    pub fn to_line(&self) -> Vec<u8> {
        let mut v = serde_json::to_vec(self).expect("results serialise");
        v.push(b'\n');
        v
    }
}

/// Writes intervals as they complete.
pub struct Live {
    test: TestKind,
    percentiles: Vec<f64>,
    json_stream: bool,
    csv: Option<File>,
    /// A mix's parts, for the samples' `part` column.
    parts: Vec<csv::PartCols>,
    /// Open loop: the samples carry late counts and service time.
    open: bool,
    /// The first write error; later intervals are not written.
    pub error: Option<String>,
}

impl Live {
    /// Open the samples file (if any) and write its header, with a column
    /// for each of `percentiles` and, for a mix (`parts`), a `part` column.
    pub fn new(
        test: TestKind,
        percentiles: &[f64],
        json_stream: bool,
        samples: Option<&Path>,
        parts: Vec<csv::PartCols>,
        open: bool,
    ) -> io::Result<Live> {
        let mut csv = match samples {
            Some(p) => super::open_live(p)?,
            None => None,
        };
        if let Some(f) = &mut csv {
            f.write_all(
                format!("{}\n", csv::header(percentiles, !parts.is_empty(), open)).as_bytes(),
            )?;
        }
        Ok(Live {
            test,
            percentiles: percentiles.to_vec(),
            json_stream,
            csv,
            parts,
            open,
            error: None,
        })
    }

    fn write(&mut self, iv: &Interval) -> io::Result<()> {
        if self.json_stream {
            let mut so = io::stdout().lock();
            so.write_all(&StreamLine::Interval { interval: iv }.to_line())?;
            so.flush()?;
        }
        if let Some(f) = &mut self.csv {
            let mut rows = Vec::new();
            let latency: Vec<_> = iv.parts.iter().map(|p| p.latency_ns.as_ref()).collect();
            csv::write_interval(
                &mut rows,
                iv,
                self.test,
                csv::Cols {
                    percentiles: csv::own_columns(&self.percentiles).len(),
                    open: self.open,
                },
                &self.parts,
                &latency,
            )?;
            f.write_all(&rows)?;
        }
        Ok(())
    }
}

impl Observer for Live {
    fn on_interval(&mut self, iv: &Interval) {
        if self.error.is_some() {
            return;
        }
        if let Err(e) = self.write(iv) {
            // A reader that went away is not the test's failure.
            if e.kind() != io::ErrorKind::BrokenPipe {
                self.error = Some(e.to_string());
            }
            self.json_stream = false;
        }
    }
}

/// Tell several observers.
pub struct Both<'a>(pub &'a mut dyn Observer, pub &'a mut dyn Observer);

impl Observer for Both<'_> {
    fn on_interval(&mut self, iv: &Interval) {
        self.0.on_interval(iv);
        self.1.on_interval(iv);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::counters::Counts;

    #[test]
    fn csv_rows_land_as_intervals_complete() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.csv");
        let mut live = Live::new(TestKind::TcpRr, &[], false, Some(&p), Vec::new(), false).unwrap();
        let iv = Interval {
            local: vec![Counts::default(); 2],
            remote: vec![Counts::default(); 2],
            ..crate::result::fixtures::interval(0, 0.0, 1.0)
        };
        live.on_interval(&iv);
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(
            text.lines().count(),
            3,
            "header and one row per flow:\n{text}"
        );
        assert!(text.starts_with(csv::HEADER));
        assert!(live.error.is_none());
    }
}
