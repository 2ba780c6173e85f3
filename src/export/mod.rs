//! Exporters: the result as a human table, JSON, netperf-style key=value, and
//! per-interval CSV samples; an aggregate run's SVG charts and HTML report. Files are written atomically (a temp file in the
//! same directory, then rename), so a reader never sees half a result.

pub mod chart;
pub mod csv;
pub mod html;
pub mod human;
pub mod json;
pub mod keyval;
pub mod live;

use std::io::{self, Write};
use std::path::Path;

use crate::result::TestResult;

/// One output format.
pub trait Exporter {
    fn write(&self, result: &TestResult, out: &mut dyn Write) -> io::Result<()>;
}

/// Write `bytes` to `path` via a temp file and rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::other(format!("{} is not a file path", path.display())))?;
    let tmp = dir.join(format!(
        ".{}.tmp{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let res = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    res
}

/// Render with one exporter into memory.
pub fn render(e: &dyn Exporter, r: &TestResult) -> Vec<u8> {
    let mut v = Vec::new();
    e.write(r, &mut v).expect("writing to memory cannot fail");
    v
}
