//! The one opener of input files a user names: read only up to a bound
//! that fits the file's kind, and, for files someone else may have
//! prepared, without following a symbolic link.
//!
//! Every input was once read whole before it was checked: a 1 GiB file
//! handed to `thrum compare` took 1,030 MB of memory before it was refused
//! as not JSON. So each kind of file has a size ([`Input`]), a file larger
//! than it is refused before a byte is read (a pipe or a device, whose size
//! is not known, after one byte more than the bound), and the refusal
//! names the file, the bound and the flag that named it.
//!
//! `thrum report` reads files someone else may have prepared: a
//! results.json, a netperf log and every `.out` beside it (the aggregate's
//! netperf and ramp log readers open theirs here too). A `.out` that was a
//! link to /etc/os-release had its KEY=value lines copied into the
//! results, so those inputs are opened with O_NOFOLLOW, and a directory is
//! entered only when it is not a link either. The operator's own files (a
//! key, the monitor's configuration, a hosts list) are followed: Kubernetes
//! mounts secrets and ConfigMaps through links. It sits at the bottom of
//! the layers, beside `text`, so that `cmd`, `cli`, `agg` and `control`
//! all reach it.

use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Why a link is refused, for the error message.
pub const NO_LINKS: &str = "report inputs are opened without following symbolic links (O_NOFOLLOW), so that one file cannot pull another into the results; name the file it points to";

/// A kind of input file: how much of it is read, what names it, and
/// whether a symbolic link is followed.
#[derive(Clone, Copy, Debug)]
pub struct Input {
    /// What the file is, for the refusal: `a result document`.
    pub what: &'static str,
    /// The flag or argument that names it: `--psk-file`.
    pub flag: &'static str,
    /// The most bytes read; a larger file is refused.
    pub max_bytes: u64,
    /// Whether a symbolic link is followed (the operator's own files) or
    /// refused (files someone else may have prepared).
    pub follow_links: bool,
}

const MIB: u64 = 1 << 20;

/// A JSON document thrum wrote (a run, agg, curve, ping or sweep result)
/// read back. A 1,024-flow tcp_stream of 60 s with 1 s intervals writes
/// 51 MB (measured 2026-11-27: per-flow intervals are ~830 bytes each):
/// five times that, with room for a longer run.
pub const RESULT_DOCUMENT: Input = Input {
    what: "a result document",
    flag: "report PATH, compare A B",
    max_bytes: 256 * MIB,
    follow_links: false,
};

/// A netperf demo-mode log, one of its `.out` files, or a ramp log and its
/// streams CSV: a line a second per stream, so an hour of 64 streams is
/// about 20 MB.
pub const NETPERF_LOG: Input = Input {
    what: "a netperf or ramp log",
    flag: "report PATH",
    max_bytes: 64 * MIB,
    follow_links: false,
};

/// A pre-shared key: at most 4,096 bytes, with room for trailing
/// whitespace.
pub const KEY_FILE: Input = Input {
    what: "a key file",
    flag: "--psk-file",
    max_bytes: 4096 + 64,
    follow_links: true,
};

/// `thrum web`'s bearer token: at most 1,024 characters, with room for
/// trailing whitespace; not through a link, as a secret someone else may
/// have pointed elsewhere.
pub const TOKEN_FILE: Input = Input {
    what: "a token file",
    flag: "--token-file",
    max_bytes: 1024 + 64,
    follow_links: false,
};

/// `thrum monitor`'s TOML: a probe is a few hundred bytes.
pub const MONITOR_CONFIG: Input = Input {
    what: "a monitor configuration",
    flag: "--config",
    max_bytes: MIB,
    follow_links: true,
};

/// A list of load generators, one a line or netperf's remote_hosts form:
/// ten thousand hosts are about 300 KB.
pub const HOSTS_FILE: Input = Input {
    what: "a hosts file",
    flag: "--hosts-file",
    max_bytes: MIB,
    follow_links: true,
};

/// `run --from-file`'s agents, in a hosts file's forms: as long as one.
pub const AGENTS_FILE: Input = Input {
    what: "a list of agents",
    flag: "--from-file",
    ..HOSTS_FILE
};

/// `sweep --nic`'s journal of a device's settings: a few hundred bytes.
pub const NIC_JOURNAL: Input = Input {
    what: "a NIC settings journal",
    flag: "sweep --nic IFACE --restore",
    max_bytes: 64 * 1024,
    follow_links: false,
};

/// The bytes of `path`, read as `kind` says: at most `kind.max_bytes`,
/// a symbolic link refused unless `kind.follow_links`.
pub fn read_bounded(path: &Path, kind: &Input) -> io::Result<Vec<u8>> {
    let mut open = std::fs::OpenOptions::new();
    open.read(true);
    if !kind.follow_links {
        open.custom_flags(libc::O_NOFOLLOW);
    }
    let f = open.open(path).map_err(|e| {
        if kind.follow_links {
            e
        } else {
            link_error(path, e)
        }
    })?;
    let meta = f.metadata()?;
    // A regular file says its size: refused unread. A pipe or a device
    // (whose size reads 0) is read to one byte past the bound.
    if meta.is_file() && meta.len() > kind.max_bytes {
        return Err(too_large(kind, Some(meta.len())));
    }
    let mut v = Vec::with_capacity(meta.len().min(kind.max_bytes) as usize);
    f.take(kind.max_bytes + 1).read_to_end(&mut v)?;
    if v.len() as u64 > kind.max_bytes {
        return Err(too_large(kind, None));
    }
    Ok(v)
}

/// The text of `path`, read as [`read_bounded`] reads it; not UTF-8 is
/// an error (InvalidData), as `std::fs::read_to_string` has it.
pub fn read_to_string(path: &Path, kind: &Input) -> io::Result<String> {
    String::from_utf8(read_bounded(path, kind)?).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: not UTF-8 text", path.display()),
        )
    })
}

/// The refusal of a file over its kind's bound: its size when known, the
/// bound and the flag (every caller names the file in its context, as it
/// does for any other error of reading it).
fn too_large(kind: &Input, len: Option<u64>) -> io::Error {
    let bound = show_bytes(kind.max_bytes);
    let (what, flag) = (kind.what, kind.flag);
    let why = match len {
        Some(n) => {
            format!("{n} bytes, over the {bound} thrum reads of {what} ({flag}); refused unread")
        }
        None => format!("more than the {bound} thrum reads of {what} ({flag}); refused"),
    };
    io::Error::new(io::ErrorKind::FileTooLarge, why)
}

/// `256 MiB`, `64 KiB`, `4160 bytes`: a bound as the refusal states it.
fn show_bytes(n: u64) -> String {
    match n {
        n if n >= MIB && n % MIB == 0 => format!("{} MiB", n / MIB),
        n if n >= 1024 && n % 1024 == 0 => format!("{} KiB", n / 1024),
        n => format!("{n} bytes"),
    }
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
        assert_eq!(read_to_string(&real, &NETPERF_LOG).unwrap(), "X=1\n");
        let e = read_to_string(&link, &NETPERF_LOG).unwrap_err().to_string();
        assert!(
            e.contains("link.out is a symbolic link") && e.contains("O_NOFOLLOW"),
            "{e}"
        );
        // The operator's own files are followed.
        let key = dir.path().join("key");
        std::fs::write(&key, "k").unwrap();
        let key_link = dir.path().join("key-link");
        std::os::unix::fs::symlink(&key, &key_link).unwrap();
        assert_eq!(read_bounded(&key_link, &KEY_FILE).unwrap(), b"k");
        let sub = dir.path().join("sub");
        std::os::unix::fs::symlink(dir.path(), &sub).unwrap();
        assert!(is_real_dir(dir.path()) && !is_real_dir(&sub));
    }

    /// A file over its kind's bound is refused by name, with the bound and
    /// the flag; one at the bound is read whole.
    #[test]
    fn files_over_the_bound_are_refused_unread() {
        let dir = tempfile::tempdir().unwrap();
        let kind = Input {
            what: "a test file",
            flag: "--test-file",
            max_bytes: 10,
            follow_links: false,
        };
        let p = dir.path().join("f");
        std::fs::write(&p, "0123456789").unwrap();
        assert_eq!(read_bounded(&p, &kind).unwrap().len(), 10);
        std::fs::write(&p, "0123456789a").unwrap();
        let e = read_bounded(&p, &kind).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::FileTooLarge);
        let e = e.to_string();
        assert!(
            e.starts_with("11 bytes, over the 10 bytes") && e.contains("a test file (--test-file)"),
            "{e}"
        );
        // A device has no size to check first: read to the bound, then
        // refused.
        let e = read_bounded(Path::new("/dev/zero"), &kind)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("more than the 10 bytes"), "{e}");
        assert_eq!(show_bytes(256 * MIB), "256 MiB");
        assert_eq!(show_bytes(64 * 1024), "64 KiB");
        assert_eq!(show_bytes(4160), "4160 bytes");
    }
}
