//! `sweep --nic`'s journal: a device's settings as they were before the
//! sweep changed them, on disk, so that they survive what a destructor
//! does not.
//!
//! The guard in [`super::nic`] puts the settings back when it drops: at
//! the end, on an error and on Ctrl-C. A SIGKILL, the OOM killer, a second
//! Ctrl-C (which exits at once) or a crash of the machine run no
//! destructor, and left the last cell's coalescing, rings or channels on
//! the device with no record of the originals. So the originals are
//! written here before the first change and removed after a clean
//! restore; while a journal for a device exists, the next `sweep --nic`
//! on it refuses to start (its "originals" would be the last cell's), and
//! `thrum sweep --nic IFACE --restore` puts them back from it.
//!
//! One file per device and network namespace (an interface's name is only
//! unique within its namespace): `nic-IFACE-netnsINODE.json` in the state
//! directory (`$XDG_STATE_HOME/thrum`; as root without it
//! `/var/lib/thrum`, since a NIC is the machine's; else
//! `~/.local/state/thrum`). It is written to a temporary file opened with
//! O_EXCL and O_NOFOLLOW, mode 0600, synced, then linked to its name,
//! which fails if the name exists: two sweeps on one device cannot both
//! believe they hold its originals.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};
use serde::{Deserialize, Serialize};

use std::collections::BTreeMap;

use crate::sensors::{Channels, Coalesce, Ring};

/// The journal's schema name.
pub const SCHEMA: &str = "thrum.nic-journal.v1";

/// A device's settings before a sweep changed them, and who changed them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Journal {
    pub schema: String,
    pub device: String,
    /// The inode of the network namespace the device is in.
    pub netns: u64,
    /// The sweep that wrote it, and its start time (clock ticks since
    /// boot, /proc/PID/stat's 22nd field), so that a reused pid is not
    /// taken for it.
    pub pid: u32,
    pub pid_start_ticks: u64,
    /// When it was written, seconds since the Unix epoch.
    pub written_unix_s: f64,
    /// The settings the sweep's dimensions touch, as they were; None for
    /// those it leaves alone.
    pub coalesce: Option<Coalesce>,
    pub ring: Option<Ring>,
    pub channels: Option<Channels>,
    /// The netdev features its offload dimensions (tso, gso, gro) turn on
    /// and off, by kernel name, each requested on or off as it was; absent
    /// from a journal of a sweep that touched none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub features: Option<BTreeMap<String, bool>>,
}

impl Journal {
    /// A journal of this process for `device` in this network namespace.
    pub fn new(device: &str) -> Result<Journal> {
        let pid = std::process::id();
        Ok(Journal {
            schema: SCHEMA.into(),
            device: device.into(),
            netns: netns()?,
            pid,
            pid_start_ticks: start_ticks(pid).unwrap_or(0),
            written_unix_s: crate::clock::unix_now(),
            coalesce: None,
            ring: None,
            channels: None,
            features: None,
        })
    }

    /// Whether the sweep that wrote it is still running (the same pid,
    /// started at the same tick).
    pub fn writer_alive(&self) -> bool {
        self.pid != std::process::id()
            && start_ticks(self.pid).is_some_and(|t| t == self.pid_start_ticks)
    }
}

/// The directory journals are kept in, and the journals in it.
#[derive(Clone, Debug)]
pub struct Journals {
    dir: PathBuf,
}

impl Journals {
    /// The state directory: `$XDG_STATE_HOME/thrum`, else `/var/lib/thrum`
    /// as root, else `$HOME/.local/state/thrum`.
    pub fn locate() -> Result<Journals> {
        let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
        let dir = if let Some(d) = var("XDG_STATE_HOME") {
            Path::new(&d).join("thrum")
        // SAFETY: geteuid takes no arguments and cannot fail.
        } else if unsafe { libc::geteuid() } == 0 {
            PathBuf::from("/var/lib/thrum")
        } else if let Some(h) = var("HOME") {
            Path::new(&h).join(".local/state/thrum")
        } else {
            bail!("no $XDG_STATE_HOME or $HOME to keep the NIC settings journal in")
        };
        Ok(Journals { dir })
    }

    /// Journals kept in `dir`.
    pub fn at(dir: &Path) -> Journals {
        Journals {
            dir: dir.to_path_buf(),
        }
    }

    /// Where the journal of `device` in this network namespace is.
    pub fn path(&self, device: &str) -> Result<PathBuf> {
        // An interface name holds no '/' and is not "..": it cannot name a
        // file outside the directory.
        if !crate::sensors::net::valid_if_name(device) {
            bail!("--nic {}: not an interface name", crate::text::echo(device));
        }
        Ok(self
            .dir
            .join(format!("nic-{device}-netns{}.json", netns()?)))
    }

    /// The journal of `device`, if there is one.
    pub fn read(&self, device: &str) -> Result<Option<(PathBuf, Journal)>> {
        let p = self.path(device)?;
        let bytes = match crate::nofollow::read_bounded(&p, &crate::nofollow::NIC_JOURNAL) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(anyhow!("reading {}: {e}", p.display())),
        };
        let j: Journal = serde_json::from_slice(&bytes).with_context(|| {
            format!(
                "{}: not a NIC settings journal ({SCHEMA}); remove it if it is not one",
                p.display()
            )
        })?;
        if j.schema != SCHEMA || j.device != device {
            bail!(
                "{}: a journal of schema '{}' for device '{}' (expected {SCHEMA} for {device}); remove it if it is not one",
                p.display(),
                crate::text::echo(&j.schema),
                crate::text::echo(&j.device)
            );
        }
        Ok(Some((p, j)))
    }

    /// Write `j` as the journal of its device: refused if one exists.
    pub fn write(&self, j: &Journal) -> Result<PathBuf> {
        let p = self.path(&j.device)?;
        let d = &self.dir;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(d)
            .with_context(|| format!("creating {}", d.display()))?;
        let tmp = d.join(format!(".nic-{}-{}.tmp", j.device, std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        let body = serde_json::to_vec_pretty(j)?;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)
            .with_context(|| format!("creating {}", tmp.display()))?;
        let written = f.write_all(&body).and_then(|_| f.sync_all());
        // link(2) fails with EEXIST where rename(2) would replace: a
        // journal already there is never overwritten.
        let linked = written.and_then(|_| std::fs::hard_link(&tmp, &p));
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => bail!(
                "{} exists: another sweep holds the device's originals",
                p.display()
            ),
            Err(e) => return Err(anyhow!("writing {}: {e}", p.display())),
        }
        // The name itself on disk before the first change is made.
        if let Ok(dir) = std::fs::File::open(d) {
            let _ = dir.sync_all();
        }
        Ok(p)
    }
}

/// Remove the journal at `p` (after the settings are back).
pub fn remove(p: &Path) -> std::io::Result<()> {
    std::fs::remove_file(p)
}

/// The inode of this process's network namespace: the same interface name
/// in two namespaces is two devices.
fn netns() -> Result<u64> {
    std::fs::metadata("/proc/self/ns/net")
        .map(|m| m.ino())
        .context("reading /proc/self/ns/net (the network namespace)")
}

/// A process's start time in clock ticks since boot (/proc/PID/stat's
/// 22nd field); None when it is not running.
fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces:
    // count from the last ')'. Field 3 is the first after it.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_ticks_tell_this_process_apart() {
        let me = std::process::id();
        let t = start_ticks(me).expect("this process is running");
        assert!(t > 0);
        assert_eq!(start_ticks(me), Some(t));
        // pid 0 has no /proc entry.
        assert_eq!(start_ticks(0), None);
    }

    /// Written once, refused a second time, read back as written, the file
    /// 0600; interface names that are paths are refused.
    #[test]
    fn a_journal_is_written_once_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let journals = Journals::at(&dir.path().join("thrum"));
        let mut j = Journal::new("jtest0").unwrap();
        j.channels = Some(Channels {
            max_rx: 2,
            max_tx: 2,
            rx_count: 1,
            tx_count: 1,
            ..Channels::default()
        });
        assert!(journals.read("jtest0").unwrap().is_none());
        let p = journals.write(&j).unwrap();
        assert!(p.starts_with(dir.path().join("thrum")));
        let mode = std::fs::metadata(&p).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let e = journals.write(&j).unwrap_err().to_string();
        assert!(e.contains("exists"), "{e}");
        let (at, back) = journals.read("jtest0").unwrap().unwrap();
        assert_eq!((at.as_path(), &back), (p.as_path(), &j));
        assert!(!back.writer_alive(), "this process wrote it");
        remove(&p).unwrap();
        assert!(journals.read("jtest0").unwrap().is_none());
        assert!(journals.path("../etc").is_err());
    }
}
