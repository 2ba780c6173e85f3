//! The safe opener of input files: a file read, or a directory entered,
//! without following a symbolic link.
//!
//! `thrum report` reads files someone else may have prepared: a
//! results.json, a netperf log and every `.out` beside it (the aggregate's
//! netperf and ramp log readers open theirs here too). A `.out` that was a
//! link to /etc/os-release had its KEY=value lines copied into the
//! results, so every input is opened with O_NOFOLLOW, and a directory is
//! entered only when it is not a link either. The error says why and names
//! the link, so that a user who meant it can name the target. It sits at
//! the bottom of the layers, beside `text`, so that `cmd::report` and
//! `agg` both reach it.

use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Why a link is refused, for the error message.
pub const NO_LINKS: &str = "report inputs are opened without following symbolic links (O_NOFOLLOW), so that one file cannot pull another into the results; name the file it points to";

/// The text of `path`, refusing a symbolic link (ELOOP from O_NOFOLLOW,
/// turned into a message that says so).
pub fn read_to_string(path: &Path) -> io::Result<String> {
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| link_error(path, e))?;
    let mut s = String::new();
    f.read_to_string(&mut s)?;
    Ok(s)
}

/// Whether `path` is a directory that is not a symbolic link.
pub fn is_real_dir(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
}

/// Whether `path` is a symbolic link.
pub fn is_link(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

/// `e` from opening `path`; a link's ELOOP said in words.
fn link_error(path: &Path, e: io::Error) -> io::Error {
    if e.raw_os_error() == Some(libc::ELOOP) || is_link(path) {
        io::Error::other(format!("{} is a symbolic link: {NO_LINKS}", path.display()))
    } else {
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_are_refused_and_say_so() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.out");
        std::fs::write(&real, "X=1\n").unwrap();
        let link = dir.path().join("link.out");
        std::os::unix::fs::symlink("/etc/os-release", &link).unwrap();
        assert_eq!(read_to_string(&real).unwrap(), "X=1\n");
        let e = read_to_string(&link).unwrap_err().to_string();
        assert!(
            e.contains("link.out is a symbolic link") && e.contains("O_NOFOLLOW"),
            "{e}"
        );
        let sub = dir.path().join("sub");
        std::os::unix::fs::symlink(dir.path(), &sub).unwrap();
        assert!(is_real_dir(dir.path()) && !is_real_dir(&sub));
    }
}
