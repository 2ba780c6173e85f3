//! Exporters, in three rooms. The text exporters are the files here: the
//! result as a human table (with a mix's lines, `mix`), JSON,
//! netperf-style key=value and per-interval CSV samples (`csv`, `live`),
//! and the terminal tables and CSV of the curve (`curve`) and the sweep
//! (`sweep`), the mesh's matrix (`mesh`); `fields` is the one table of machine-readable fields
//! (`--keyval`, `--output-fields`); `schema` generates the result's JSON
//! Schema from its types. `draw` holds the SVG charts and `page` the HTML
//! pages. Pages embed charts and text, charts may format numbers as the
//! text does, and the text exporters name neither (`src/layers.rs` checks
//! it): a table never waits on the plotting code.
//! Files are written atomically (an exclusively created temp file in the
//! same directory, then rename), so a reader never sees half a result and no
//! planted link is followed; see [`write_atomic`].

pub mod csv;
pub mod curve;
pub mod draw;
pub mod fields;
pub mod fleet;
pub mod human;
pub mod json;
pub mod keyval;
pub mod live;
pub mod mesh;
pub mod mix;
pub mod netperf;
pub mod page;
pub mod schema;
pub mod sweep;

use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use crate::result::TestResult;

/// One output format.
pub trait Exporter {
    fn write(&self, result: &TestResult, out: &mut dyn Write) -> io::Result<()>;
}

/// What kind of place a result path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// `-` and the names of standard output (`/dev/stdout`, `/dev/fd/1`,
    /// `/proc/self/fd/1`): this process's standard output.
    Stdout,
    /// An existing FIFO, character device or socket (links followed): opened
    /// and written directly, since renaming over it would replace the node.
    Stream,
    /// Anything else: a regular file, replaced atomically.
    File,
}

impl Target {
    pub fn of(path: &Path) -> Target {
        if matches!(
            path.to_str(),
            Some("-" | "/dev/stdout" | "/dev/fd/1" | "/proc/self/fd/1")
        ) {
            return Target::Stdout;
        }
        match std::fs::metadata(path) {
            Ok(m) if !m.is_file() && !m.is_dir() => Target::Stream,
            _ => Target::File,
        }
    }
}

/// Write `bytes` to `path` so that a reader never sees half of it and no
/// name someone else could plant is ever opened (see [`Target`]).
///
/// A regular file goes through a temp file in the target's directory,
/// created exclusively (`O_CREAT|O_EXCL`: a link planted at its name is an
/// error, never followed) under an unpredictable name, then renamed over the
/// target. The rename replaces a link at the target itself rather than
/// writing through it. A broken pipe on standard output is not an error.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    match Target::of(path) {
        Target::Stdout => {
            let mut so = io::stdout().lock();
            match so.write_all(bytes).and_then(|_| so.flush()) {
                Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
                r => r,
            }
        }
        Target::Stream => {
            let mut f = std::fs::OpenOptions::new().write(true).open(path)?;
            f.write_all(bytes).and_then(|_| f.flush())
        }
        Target::File => {
            let dir = path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            let name = path.file_name().ok_or_else(|| {
                io::Error::other(format!("{} is not a file path", path.display()))
            })?;
            // Mode 0666 less the umask, as a plain create gives: results are
            // read by other tools and users.
            let mut tmp = tempfile::Builder::new()
                .prefix(&format!(".{}.", name.to_string_lossy()))
                .suffix(".tmp")
                .permissions(std::fs::Permissions::from_mode(0o666))
                .tempfile_in(dir)?;
            tmp.write_all(bytes)?;
            tmp.as_file().sync_all()?;
            // On failure the temp file is removed when it drops.
            tmp.persist(path).map(drop).map_err(|e| e.error)
        }
    }
}

/// Open `path` for a file written a piece at a time while a test runs
/// (`--samples`). Standard output and streams are written directly; a
/// regular file is created or truncated without following a link at its
/// name (`O_NOFOLLOW`). `None` when a link stands there: the live rows are
/// skipped and the final [`write_atomic`] replaces the link.
pub fn open_live(path: &Path) -> io::Result<Option<std::fs::File>> {
    use std::os::fd::AsFd;
    match Target::of(path) {
        Target::Stdout => Ok(Some(io::stdout().as_fd().try_clone_to_owned()?.into())),
        Target::Stream => std::fs::OpenOptions::new().write(true).open(path).map(Some),
        Target::File => match std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o666)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
        {
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => Ok(None),
            r => r.map(Some),
        },
    }
}

/// Render with one exporter into memory.
pub fn render(e: &dyn Exporter, r: &TestResult) -> Vec<u8> {
    let mut v = Vec::new();
    e.write(r, &mut v).expect("writing to memory cannot fail");
    v
}
