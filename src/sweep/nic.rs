//! NIC settings as sweep dimensions (`--vary coalesce-rx-usecs=0,8,64
//! --nic IFACE`, `ring-rx=…`): set with the ethtool ioctls before each
//! cell, read back into the cell, and put back as they were at the end —
//! on success, on error and on Ctrl-C alike, since the restore is the
//! guard's `Drop`.
//!
//! A device that refuses (lo and veth have no coalescing or rings) is
//! named with the ioctl's error before any cell runs: [`NicGuard::open`]
//! reads the settings the dimensions need and writes them back unchanged,
//! which is the same request a cell makes.

use std::collections::BTreeMap;

use anyhow::{Result, bail};

use crate::sensors::{Coalesce, Ethtool, Ring};

/// A NIC setting a sweep dimension names (`coalesce-rx-usecs`, `ring-rx`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Knob {
    CoalesceRxUsecs,
    CoalesceRxFrames,
    CoalesceTxUsecs,
    CoalesceTxFrames,
    RingRx,
    RingTx,
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
        }
    }

    fn is_ring(self) -> bool {
        matches!(self, Knob::RingRx | Knob::RingTx)
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
}

/// The device's settings as they were, put back on drop.
pub struct NicGuard {
    dev: String,
    eth: Ethtool,
    coalesce: Option<Coalesce>,
    ring: Option<Ring>,
}

impl NicGuard {
    /// Read the settings `knobs` touch on `dev` and write them back
    /// unchanged: a device that cannot be read or set is refused here,
    /// naming it and the ioctl's error.
    pub fn open(dev: &str, knobs: &[Knob]) -> Result<NicGuard> {
        let Some(eth) = Ethtool::new(dev) else {
            bail!("--nic {dev}: no such interface (or no socket for its ioctls)");
        };
        let refuse = |what: &str, e: std::io::Error| {
            anyhow::anyhow!(
                "--nic {dev}: the device refuses {what}: {e}; the sweep's NIC dimensions cannot run on it (lo and veth have neither coalescing nor rings)"
            )
        };
        let mut g = NicGuard {
            dev: dev.to_string(),
            eth,
            coalesce: None,
            ring: None,
        };
        if knobs.iter().any(|k| !k.is_ring()) {
            let c = g
                .eth
                .get_coalesce()
                .map_err(|e| refuse("ETHTOOL_GCOALESCE", e))?;
            g.eth
                .set_coalesce(&c)
                .map_err(|e| refuse("ETHTOOL_SCOALESCE", e))?;
            g.coalesce = Some(c);
        }
        if knobs.iter().any(|k| k.is_ring()) {
            let r = g
                .eth
                .get_ring()
                .map_err(|e| refuse("ETHTOOL_GRINGPARAM", e))?;
            g.eth
                .set_ring(&r)
                .map_err(|e| refuse("ETHTOOL_SRINGPARAM", e))?;
            g.ring = Some(r);
        }
        Ok(g)
    }

    /// Set one cell's values (on top of the settings as they were), then
    /// read back what the device took, by dimension name.
    pub fn apply(&self, settings: &[(Knob, u32)]) -> Result<BTreeMap<String, u32>> {
        let dev = &self.dev;
        let mut back = BTreeMap::new();
        if let Some(mut c) = self.coalesce {
            for (k, v) in settings.iter().filter(|(k, _)| !k.is_ring()) {
                *k.field_c(&mut c) = *v;
            }
            self.eth.set_coalesce(&c).map_err(|e| {
                anyhow::anyhow!("--nic {dev}: ETHTOOL_SCOALESCE refused the cell's values: {e}")
            })?;
            let mut now = self.eth.get_coalesce()?;
            for (k, _) in settings.iter().filter(|(k, _)| !k.is_ring()) {
                back.insert(k.name().to_string(), *k.field_c(&mut now));
            }
        }
        if let Some(mut r) = self.ring {
            for (k, v) in settings.iter().filter(|(k, _)| k.is_ring()) {
                *k.field_r(&mut r) = *v;
            }
            self.eth.set_ring(&r).map_err(|e| {
                anyhow::anyhow!("--nic {dev}: ETHTOOL_SRINGPARAM refused the cell's values: {e}")
            })?;
            let mut now = self.eth.get_ring()?;
            for (k, _) in settings.iter().filter(|(k, _)| k.is_ring()) {
                back.insert(k.name().to_string(), *k.field_r(&mut now));
            }
        }
        Ok(back)
    }
}

impl Drop for NicGuard {
    /// Put the settings back as they were; a failure is said, not raised
    /// (this also runs while an error or Ctrl-C ends the sweep).
    fn drop(&mut self) {
        if let Some(c) = &self.coalesce
            && let Err(e) = self.eth.set_coalesce(c)
        {
            eprintln!(
                "warning: --nic {}: restoring the coalescing settings failed: {e}",
                self.dev
            );
        }
        if let Some(r) = &self.ring
            && let Err(e) = self.eth.set_ring(r)
        {
            eprintln!(
                "warning: --nic {}: restoring the ring sizes failed: {e}",
                self.dev
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// lo has no coalescing: refused before anything runs, by name, with
    /// the driver's error.
    #[test]
    fn lo_is_refused_by_name() {
        let e = NicGuard::open("lo", &[Knob::CoalesceRxUsecs])
            .err()
            .expect("lo has no coalescing");
        let e = e.to_string();
        assert!(e.contains("--nic lo"), "{e}");
        assert!(e.contains("ETHTOOL_GCOALESCE"), "{e}");
        assert!(NicGuard::open("no-such-if0", &[Knob::RingRx]).is_err());
    }
}
