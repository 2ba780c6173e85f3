//! NIC settings as sweep dimensions (`--vary coalesce-rx-usecs=0,8,64
//! --nic IFACE`, `ring-rx=…`, `channels-rx=…`, and the offloads `tso=on,off`,
//! `gso=…`, `gro=…`): set with the ethtool
//! ioctls before each cell, read back into the cell, and put back as they
//! were at the end — on success, on error and on Ctrl-C alike, since the
//! restore is the guard's `Drop`; and, for what runs no destructor (a
//! SIGKILL, the OOM killer, a second Ctrl-C), from the journal the guard
//! writes before the first change ([`super::journal`]): the next sweep on
//! the device refuses to start until `--restore` has put them back.
//!
//! A device that refuses is named with the ioctl's error before any cell
//! runs: [`NicGuard::open`] reads the settings the dimensions need and
//! writes them back unchanged, which is the same request a cell makes.
//! The refusal says what the error means: no such interface, no
//! CAP_NET_ADMIN, or a driver without that setting (lo has no coalescing,
//! rings or channels, veth has channels only; both have the three
//! offloads).

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Result, anyhow, bail};

use super::journal::{Journal, Journals};
use crate::sensors::{Channels, Coalesce, Ethtool, Offload, Ring};

/// A NIC setting a sweep dimension names (`coalesce-rx-usecs`, `ring-rx`,
/// `channels-rx`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Knob {
    CoalesceRxUsecs,
    CoalesceRxFrames,
    CoalesceTxUsecs,
    CoalesceTxFrames,
    RingRx,
    RingTx,
    ChannelsRx,
    ChannelsTx,
    ChannelsCombined,
    /// An offload, on (1) or off (0).
    Offload(Offload),
}

/// The ethtool request a knob belongs to: each is read and set whole (an
/// offload on its own).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Group {
    Coalesce,
    Ring,
    Channels,
    Offload(Offload),
}

impl Knob {
    pub fn name(self) -> &'static str {
        match self {
            Knob::CoalesceRxUsecs => "coalesce-rx-usecs",
            Knob::CoalesceRxFrames => "coalesce-rx-frames",
            Knob::CoalesceTxUsecs => "coalesce-tx-usecs",
            Knob::CoalesceTxFrames => "coalesce-tx-frames",
            Knob::RingRx => "ring-rx",
            Knob::RingTx => "ring-tx",
            Knob::ChannelsRx => "channels-rx",
            Knob::ChannelsTx => "channels-tx",
            Knob::ChannelsCombined => "channels-combined",
            Knob::Offload(Offload::Tso) => "tso",
            Knob::Offload(Offload::Gso) => "gso",
            Knob::Offload(Offload::Gro) => "gro",
        }
    }

    /// A setting that is on or off (an offload), not a number.
    pub fn is_switch(self) -> bool {
        matches!(self, Knob::Offload(_))
    }

    fn group(self) -> Group {
        match self {
            Knob::RingRx | Knob::RingTx => Group::Ring,
            Knob::ChannelsRx | Knob::ChannelsTx | Knob::ChannelsCombined => Group::Channels,
            Knob::Offload(o) => Group::Offload(o),
            _ => Group::Coalesce,
        }
    }

    fn field_c(self, c: &mut Coalesce) -> &mut u32 {
        match self {
            Knob::CoalesceRxUsecs => &mut c.rx_usecs,
            Knob::CoalesceRxFrames => &mut c.rx_frames,
            Knob::CoalesceTxUsecs => &mut c.tx_usecs,
            _ => &mut c.tx_frames,
        }
    }

    fn field_r(self, r: &mut Ring) -> &mut u32 {
        match self {
            Knob::RingRx => &mut r.rx_pending,
            _ => &mut r.tx_pending,
        }
    }

    fn field_ch(self, c: &mut Channels) -> &mut u32 {
        match self {
            Knob::ChannelsRx => &mut c.rx_count,
            Knob::ChannelsTx => &mut c.tx_count,
            _ => &mut c.combined_count,
        }
    }
}

impl Group {
    /// The get and set requests, for errors.
    fn requests(self) -> (&'static str, &'static str) {
        match self {
            Group::Coalesce => ("ETHTOOL_GCOALESCE", "ETHTOOL_SCOALESCE"),
            Group::Ring => ("ETHTOOL_GRINGPARAM", "ETHTOOL_SRINGPARAM"),
            Group::Channels => ("ETHTOOL_GCHANNELS", "ETHTOOL_SCHANNELS"),
            Group::Offload(_) => ("ETHTOOL_GFEATURES", "ETHTOOL_SFEATURES"),
        }
    }

    /// The dimensions' family, for errors.
    fn what(self) -> &'static str {
        match self {
            Group::Coalesce => "coalesce-…",
            Group::Ring => "ring-…",
            Group::Channels => "channels-…",
            Group::Offload(o) => Knob::Offload(o).name(),
        }
    }
}

/// `--nic DEV`'s refusal of `request`: what its errno means here.
fn refused(dev: &str, group: Group, request: &str, e: &std::io::Error) -> anyhow::Error {
    match e.raw_os_error() {
        Some(libc::ENODEV) => {
            anyhow!(
                "--nic {dev}: no such interface in this network namespace (`ip link` lists them)"
            )
        }
        Some(libc::EPERM | libc::EACCES) => anyhow!(
            "--nic {dev}: {request}: {e}: setting a NIC needs CAP_NET_ADMIN (run the sweep as root)"
        ),
        Some(libc::EOPNOTSUPP) => {
            let which = match group {
                Group::Offload(_) => "",
                _ => " (lo has no coalescing, rings or channels; veth has channels only)",
            };
            anyhow!(
                "--nic {dev}: the device refuses {request}: {e}; the sweep's {} dimensions cannot run on it{which}",
                group.what()
            )
        }
        _ => anyhow!("--nic {dev}: the device refuses {request}: {e}"),
    }
}

/// The device's settings as they were, put back on drop; their journal on
/// disk until then.
pub struct NicGuard {
    dev: String,
    eth: Ethtool,
    saved: Journal,
    journal: PathBuf,
}

impl NicGuard {
    /// Read the settings `knobs` touch on `dev`, write them back unchanged
    /// (a device that cannot be read or set is refused here, naming it and
    /// what the ioctl's error means), then keep them in a journal: refused
    /// while a journal of an earlier sweep is there. Nothing is changed
    /// before the journal is on disk.
    pub fn open(dev: &str, knobs: &[Knob], journals: &Journals) -> Result<NicGuard> {
        let Some(eth) = Ethtool::new(dev) else {
            bail!(
                "--nic {}: not an interface name (or no socket for its ioctls)",
                crate::text::echo(dev)
            );
        };
        let mut saved = Journal::new(dev)?;
        let wants = |g: Group| knobs.iter().any(|k| k.group() == g);
        let fail = |g: Group, set: bool| {
            let (get_req, set_req) = g.requests();
            let req = if set { set_req } else { get_req };
            move |e: std::io::Error| refused(dev, g, req, &e)
        };
        if wants(Group::Coalesce) {
            let g = Group::Coalesce;
            let c = eth.get_coalesce().map_err(fail(g, false))?;
            eth.set_coalesce(&c).map_err(fail(g, true))?;
            saved.coalesce = Some(c);
        }
        if wants(Group::Ring) {
            let g = Group::Ring;
            let r = eth.get_ring().map_err(fail(g, false))?;
            eth.set_ring(&r).map_err(fail(g, true))?;
            saved.ring = Some(r);
        }
        if wants(Group::Channels) {
            let g = Group::Channels;
            let c = eth.get_channels().map_err(fail(g, false))?;
            eth.set_channels(&c).map_err(fail(g, true))?;
            saved.channels = Some(c);
        }
        for o in [Offload::Tso, Offload::Gso, Offload::Gro] {
            let g = Group::Offload(o);
            if wants(g) {
                let table = eth.get_features().map_err(fail(g, false))?;
                let was = table.changeable(o);
                if was.is_empty() {
                    let fixed = std::io::Error::from_raw_os_error(libc::EOPNOTSUPP);
                    return Err(refused(dev, g, "ETHTOOL_SFEATURES", &fixed));
                }
                eth.set_features(&table, &was).map_err(fail(g, true))?;
                saved.features.get_or_insert_with(BTreeMap::new).extend(was);
            }
        }
        // A journal left by an earlier sweep holds the true originals: what
        // was read above may be its last cell's.
        if let Some((p, j)) = journals.read(dev)? {
            return Err(pending(dev, &p, &j));
        }
        let journal = journals.write(&saved).map_err(|e| {
            anyhow!(
                "--nic {dev}: its settings cannot be kept on disk before the sweep changes them ({e:#}); nothing was changed (XDG_STATE_HOME names another directory)"
            )
        })?;
        Ok(NicGuard {
            dev: dev.to_string(),
            eth,
            saved,
            journal,
        })
    }

    /// Set one cell's values (on top of the settings as they were), then
    /// read back what the device took, by dimension name.
    pub fn apply(&self, settings: &[(Knob, u32)]) -> Result<BTreeMap<String, u32>> {
        let dev = &self.dev;
        let of = |g: Group| settings.iter().filter(move |(k, _)| k.group() == g);
        let cell = |req: &str| {
            let req = req.to_string();
            move |e: std::io::Error| anyhow!("--nic {dev}: {req} refused the cell's values: {e}")
        };
        let mut back = BTreeMap::new();
        if let Some(mut c) = self.saved.coalesce {
            for (k, v) in of(Group::Coalesce) {
                *k.field_c(&mut c) = *v;
            }
            self.eth
                .set_coalesce(&c)
                .map_err(cell("ETHTOOL_SCOALESCE"))?;
            let mut now = self.eth.get_coalesce()?;
            for (k, _) in of(Group::Coalesce) {
                back.insert(k.name().to_string(), *k.field_c(&mut now));
            }
        }
        if let Some(mut r) = self.saved.ring {
            for (k, v) in of(Group::Ring) {
                *k.field_r(&mut r) = *v;
            }
            self.eth.set_ring(&r).map_err(cell("ETHTOOL_SRINGPARAM"))?;
            let mut now = self.eth.get_ring()?;
            for (k, _) in of(Group::Ring) {
                back.insert(k.name().to_string(), *k.field_r(&mut now));
            }
        }
        if let Some(mut c) = self.saved.channels {
            for (k, v) in of(Group::Channels) {
                *k.field_ch(&mut c) = *v;
            }
            self.eth
                .set_channels(&c)
                .map_err(cell("ETHTOOL_SCHANNELS"))?;
            let mut now = self.eth.get_channels()?;
            for (k, _) in of(Group::Channels) {
                back.insert(k.name().to_string(), *k.field_ch(&mut now));
            }
        }
        // Each offload's features all on or all off, as ethtool -K sets
        // them; one the sweep does not vary stays as it was. Read back as
        // ethtool -k reads it: on while any of its features is active.
        for (k, v) in settings {
            let Knob::Offload(o) = *k else { continue };
            let table = self.eth.get_features()?;
            let want = table
                .changeable(o)
                .into_keys()
                .map(|n| (n, *v != 0))
                .collect();
            self.eth
                .set_features(&table, &want)
                .map_err(cell("ETHTOOL_SFEATURES"))?;
            back.insert(
                k.name().to_string(),
                u32::from(self.eth.get_features()?.active(o)),
            );
        }
        Ok(back)
    }
}

impl Drop for NicGuard {
    /// Put the settings back as they were and remove their journal; a
    /// failure is said, not raised (this also runs while an error or
    /// Ctrl-C ends the sweep), and keeps the journal for `--restore`.
    fn drop(&mut self) {
        let dev = &self.dev;
        match put_back(&self.eth, &self.saved) {
            Ok(()) => {
                if let Err(e) = super::journal::remove(&self.journal) {
                    eprintln!(
                        "warning: --nic {dev}: the settings are back, but their journal {} could not be removed ({e}): the next sweep on {dev} will ask for --restore",
                        self.journal.display()
                    );
                }
            }
            Err(failed) => eprintln!(
                "warning: --nic {dev}: {}; the settings as they were stay in {}: `thrum sweep --nic {dev} --restore` puts them back",
                failed.join("; "),
                self.journal.display()
            ),
        }
    }
}

/// Set every group `saved` holds; the failures, said.
fn put_back(eth: &Ethtool, saved: &Journal) -> Result<(), Vec<String>> {
    let mut failed = Vec::new();
    if let Some(c) = &saved.coalesce
        && let Err(e) = eth.set_coalesce(c)
    {
        failed.push(format!("restoring the coalescing settings failed: {e}"));
    }
    if let Some(r) = &saved.ring
        && let Err(e) = eth.set_ring(r)
    {
        failed.push(format!("restoring the ring sizes failed: {e}"));
    }
    if let Some(c) = &saved.channels
        && let Err(e) = eth.set_channels(c)
    {
        failed.push(format!("restoring the channels failed: {e}"));
    }
    if let Some(features) = &saved.features
        && let Err(e) = eth
            .get_features()
            .and_then(|table| eth.set_features(&table, features))
    {
        failed.push(format!("restoring the offloads' features failed: {e}"));
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(failed)
    }
}

/// The refusal to start while `dev` has a journal at `p`: its sweep is
/// still running, or it ended without putting the settings back.
fn pending(dev: &str, p: &std::path::Path, j: &Journal) -> anyhow::Error {
    if j.writer_alive() {
        anyhow!(
            "--nic {dev}: a sweep (pid {}) is changing the device's settings now (its journal: {}); run one sweep on a device at a time",
            j.pid,
            p.display()
        )
    } else {
        anyhow!(
            "--nic {dev}: a sweep (pid {}, started {}) ended without putting the device's settings back (killed?); they are kept in {}. Run `thrum sweep --nic {dev} --restore` first",
            j.pid,
            crate::clock::rfc3339(j.written_unix_s),
            p.display()
        )
    }
}

/// `thrum sweep --nic DEV --restore`: put back the settings a journal of
/// `dev` keeps and remove it; what was done, in words.
pub fn restore(dev: &str, journals: &Journals) -> Result<String> {
    let Some((p, j)) = journals.read(dev)? else {
        return Ok(format!(
            "--nic {dev}: no journal of its settings ({}): nothing to restore",
            journals.path(dev)?.display()
        ));
    };
    if j.writer_alive() {
        bail!(
            "--nic {dev}: the sweep that keeps {} (pid {}) is still running: it puts the settings back when it ends",
            p.display(),
            j.pid
        );
    }
    let Some(eth) = Ethtool::new(dev) else {
        bail!("--nic {dev}: no socket for its ioctls");
    };
    put_back(&eth, &j).map_err(|failed| {
        anyhow!(
            "--nic {dev}: {}; the journal {} is kept (if the device is gone for good, remove it)",
            failed.join("; "),
            p.display()
        )
    })?;
    super::journal::remove(&p)
        .map_err(|e| anyhow!("--nic {dev}: settings restored, but {}: {e}", p.display()))?;
    Ok(format!(
        "--nic {dev}: {} put back as they were before the sweep of pid {} ({}); {} removed",
        described(&j),
        j.pid,
        crate::clock::rfc3339(j.written_unix_s),
        p.display()
    ))
}

/// The settings a journal keeps, as `ethtool` names them.
fn described(j: &Journal) -> String {
    let mut parts = Vec::new();
    if let Some(c) = &j.coalesce {
        parts.push(format!(
            "coalescing (rx-usecs {}, rx-frames {}, tx-usecs {}, tx-frames {})",
            c.rx_usecs, c.rx_frames, c.tx_usecs, c.tx_frames
        ));
    }
    if let Some(r) = &j.ring {
        parts.push(format!("rings (rx {}, tx {})", r.rx_pending, r.tx_pending));
    }
    if let Some(c) = &j.channels {
        parts.push(format!(
            "channels (rx {}, tx {}, combined {})",
            c.rx_count, c.tx_count, c.combined_count
        ));
    }
    if let Some(features) = &j.features {
        let each: Vec<String> = features
            .iter()
            .map(|(n, on)| format!("{n} {}", if *on { "on" } else { "off" }))
            .collect();
        parts.push(format!("offload features ({})", each.join(", ")));
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// lo has no coalescing: refused before anything runs, by name, with
    /// the driver's error and what it means; a missing device is said to
    /// be missing, without the hint about lo and veth.
    #[test]
    fn refusals_say_what_the_error_means() {
        let dir = tempfile::tempdir().unwrap();
        let journals = Journals::at(dir.path());
        let e = NicGuard::open("lo", &[Knob::CoalesceRxUsecs], &journals)
            .err()
            .expect("lo has no coalescing")
            .to_string();
        assert!(e.contains("--nic lo"), "{e}");
        assert!(e.contains("ETHTOOL_GCOALESCE"), "{e}");
        assert!(e.contains("veth has channels only"), "{e}");
        let e = NicGuard::open("nosuch0", &[Knob::RingRx], &journals)
            .err()
            .expect("no such device")
            .to_string();
        assert_eq!(
            e,
            "--nic nosuch0: no such interface in this network namespace (`ip link` lists them)"
        );
        let eperm = std::io::Error::from_raw_os_error(libc::EPERM);
        let e = refused("eth0", Group::Channels, "ETHTOOL_SCHANNELS", &eperm).to_string();
        assert!(
            e.ends_with("needs CAP_NET_ADMIN (run the sweep as root)"),
            "{e}"
        );
        assert!(!e.contains("veth"), "{e}");
        // Nothing was written for a refused device.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    /// A journal left by a sweep that is gone refuses the next sweep,
    /// naming --restore.
    #[test]
    fn a_journal_left_behind_refuses_the_next_sweep() {
        let dir = tempfile::tempdir().unwrap();
        let journals = Journals::at(dir.path());
        let mut j = Journal::new("lo").unwrap();
        j.pid = u32::MAX;
        journals.write(&j).unwrap();
        // No dimension, so no ioctl: lo has none of the settings.
        let e = NicGuard::open("lo", &[], &journals)
            .err()
            .expect("a journal is there")
            .to_string();
        assert!(
            e.contains("ended without putting the device's settings back")
                && e.ends_with("Run `thrum sweep --nic lo --restore` first"),
            "{e}"
        );
        // A journal that holds nothing to set is restored at once.
        let said = restore("lo", &journals).unwrap();
        assert!(said.contains("removed"), "{said}");
        assert!(journals.read("lo").unwrap().is_none());
        let said = restore("lo", &journals).unwrap();
        assert!(said.contains("nothing to restore"), "{said}");
    }
}
