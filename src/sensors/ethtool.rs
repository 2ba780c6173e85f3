//! The ethtool ioctl (SIOCETHTOOL): driver, offloads, interrupt coalescing,
//! rings and channels.
//!
//! The structs follow include/uapi/linux/ethtool.h; libc does not carry
//! them. Every query goes through an AF_INET datagram socket, so it sees the
//! interfaces of this process's network namespace. A driver that does not
//! implement a query answers EOPNOTSUPP (or EINVAL, ENODEV): that is `None`,
//! never an error, because most of these are optional for drivers (veth has
//! channels but no coalescing or rings, even on 6.18; `lo` has no driver
//! info beyond its name).

use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use serde::{Deserialize, Serialize};

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const SIOCGIFMTU: libc::c_ulong = 0x8921;

const ETHTOOL_GSET: u32 = 0x01;
const ETHTOOL_GDRVINFO: u32 = 0x03;
const ETHTOOL_GCOALESCE: u32 = 0x0e;
const ETHTOOL_SCOALESCE: u32 = 0x0f;
const ETHTOOL_GRINGPARAM: u32 = 0x10;
const ETHTOOL_SRINGPARAM: u32 = 0x11;
const ETHTOOL_GRXCSUM: u32 = 0x14;
const ETHTOOL_GTXCSUM: u32 = 0x16;
const ETHTOOL_GSG: u32 = 0x18;
const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GTSO: u32 = 0x1e;
const ETHTOOL_GGSO: u32 = 0x23;
const ETHTOOL_GFLAGS: u32 = 0x25;
const ETHTOOL_GGRO: u32 = 0x2b;
const ETHTOOL_GSSET_INFO: u32 = 0x37;
const ETHTOOL_GFEATURES: u32 = 0x3a;
const ETHTOOL_SFEATURES: u32 = 0x3b;
const ETHTOOL_GCHANNELS: u32 = 0x3c;
const ETHTOOL_SCHANNELS: u32 = 0x3d;
const ETH_FLAG_LRO: u32 = 1 << 15;
const ETH_SS_FEATURES: u32 = 4;
const ETH_GSTRING_LEN: usize = 32;
/// More feature bits than any kernel defines (about 70 in 6.x); a guard
/// against a nonsense count sizing our buffers.
const MAX_FEATURES: u32 = 1024;

/// struct ifreq: a name, then a 24-byte union (on 64-bit ABIs the largest
/// member is struct ifmap; `ifr_data` is a pointer, `ifr_mtu` an int).
#[repr(C)]
struct IfReq {
    name: [u8; libc::IF_NAMESIZE],
    data: IfReqData,
}

#[repr(C)]
union IfReqData {
    ptr: *mut libc::c_void,
    int: libc::c_int,
    _size: [u8; 24],
}

/// struct ethtool_drvinfo.
#[repr(C)]
struct DrvInfoRaw {
    cmd: u32,
    driver: [u8; 32],
    version: [u8; 32],
    fw_version: [u8; 32],
    bus_info: [u8; 32],
    erom_version: [u8; 32],
    reserved2: [u8; 12],
    n_priv_flags: u32,
    n_stats: u32,
    testinfo_len: u32,
    eedump_len: u32,
    regdump_len: u32,
}

/// struct ethtool_cmd (the legacy link settings; the kernel fills it from
/// the driver's get_link_ksettings, so it serves every driver that has one).
#[repr(C)]
struct LinkCmd {
    cmd: u32,
    supported: u32,
    advertising: u32,
    speed: u16,
    duplex: u8,
    port: u8,
    phy_address: u8,
    transceiver: u8,
    autoneg: u8,
    mdio_support: u8,
    maxtxpkt: u32,
    maxrxpkt: u32,
    speed_hi: u16,
    eth_tp_mdix: u8,
    eth_tp_mdix_ctrl: u8,
    lp_advertising: u32,
    reserved: [u32; 2],
}

/// struct ethtool_value.
#[repr(C)]
struct Value {
    cmd: u32,
    data: u32,
}

/// struct ethtool_sset_info with room for one set's count.
#[repr(C)]
struct SsetInfo {
    cmd: u32,
    reserved: u32,
    sset_mask: u64,
    data: [u32; 1],
}

/// Interrupt coalescing: struct ethtool_coalesce, field for field (without
/// `cmd`). Times in µs, counts in frames; 0 usually means "not used".
#[repr(C)]
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Coalesce {
    pub rx_usecs: u32,
    pub rx_frames: u32,
    pub rx_usecs_irq: u32,
    pub rx_frames_irq: u32,
    pub tx_usecs: u32,
    pub tx_frames: u32,
    pub tx_usecs_irq: u32,
    pub tx_frames_irq: u32,
    pub stats_block_usecs: u32,
    pub adaptive_rx: u32,
    pub adaptive_tx: u32,
    pub pkt_rate_low: u32,
    pub rx_usecs_low: u32,
    pub rx_frames_low: u32,
    pub tx_usecs_low: u32,
    pub tx_frames_low: u32,
    pub pkt_rate_high: u32,
    pub rx_usecs_high: u32,
    pub rx_frames_high: u32,
    pub tx_usecs_high: u32,
    pub tx_frames_high: u32,
    pub rate_sample_interval: u32,
}

#[repr(C)]
struct CoalesceRaw {
    cmd: u32,
    c: Coalesce,
}

/// Ring sizes: struct ethtool_ringparam, field for field (without `cmd`):
/// the most descriptors each ring can have, and how many it has.
#[repr(C)]
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Ring {
    pub rx_max_pending: u32,
    pub rx_mini_max_pending: u32,
    pub rx_jumbo_max_pending: u32,
    pub tx_max_pending: u32,
    pub rx_pending: u32,
    pub rx_mini_pending: u32,
    pub rx_jumbo_pending: u32,
    pub tx_pending: u32,
}

#[repr(C)]
struct RingRaw {
    cmd: u32,
    r: Ring,
}

/// Queue counts: struct ethtool_channels, field for field (without `cmd`):
/// the most queues of each kind the device can have, and how many it has
/// (`ethtool -l`). veth has rx and tx channels (up to its CPUs by default).
#[repr(C)]
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Channels {
    pub max_rx: u32,
    pub max_tx: u32,
    pub max_other: u32,
    pub max_combined: u32,
    pub rx_count: u32,
    pub tx_count: u32,
    pub other_count: u32,
    pub combined_count: u32,
}

#[repr(C)]
struct ChannelsRaw {
    cmd: u32,
    c: Channels,
}

/// Driver identity as `ethtool -i` shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DrvInfo {
    pub driver: Option<String>,
    pub version: Option<String>,
    pub firmware_version: Option<String>,
    pub bus_info: Option<String>,
}

/// The offloads engineers ask about first, from the legacy get ioctls.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Offloads {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tso: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gso: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gro: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lro: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx_checksum: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_checksum: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scatter_gather: Option<bool>,
}

/// An offload a sweep turns on and off, as `ethtool -K DEV tso|gso|gro`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offload {
    Tso,
    Gso,
    Gro,
}

impl Offload {
    /// Whether netdev feature `name` is part of it, as ethtool reads its
    /// `-K` words: tso is every `tx-tcp*-segmentation` (IPv4, IPv6, ECN,
    /// mangled IDs, AccECN on newer kernels: the legacy ETHTOOL_STSO misses
    /// the last, and a device then still segments some TCP), gso
    /// `tx-generic-segmentation`, gro `rx-gro`.
    pub fn covers(self, name: &str) -> bool {
        match self {
            Offload::Tso => name.starts_with("tx-tcp") && name.ends_with("-segmentation"),
            Offload::Gso => name == "tx-generic-segmentation",
            Offload::Gro => name == "rx-gro",
        }
    }
}

/// A device's features as ETHTOOL_GFEATURES gives them, by the names
/// ETHTOOL_GSTRINGS gives them: the bits a set names.
pub struct FeatureTable {
    names: Vec<String>,
    /// struct ethtool_gfeatures' blocks: available, requested, active,
    /// never_changed, 32 features each.
    blocks: Vec<[u32; 4]>,
}

impl FeatureTable {
    fn bit(&self, i: usize, word: usize) -> bool {
        self.blocks[i / 32][word] & (1 << (i % 32)) != 0
    }

    /// The features of `o` the device lets one change (in `available`,
    /// its hw_features), by name, with whether each is requested on.
    pub fn changeable(&self, o: Offload) -> BTreeMap<String, bool> {
        self.names
            .iter()
            .enumerate()
            .filter(|(i, n)| o.covers(n) && self.bit(*i, 0))
            .map(|(i, n)| (n.clone(), self.bit(i, 1)))
            .collect()
    }

    /// Whether any feature of `o` is active: off means the device does
    /// none of it, as `ethtool -k` reads it.
    pub fn active(&self, o: Offload) -> bool {
        self.names
            .iter()
            .enumerate()
            .any(|(i, n)| o.covers(n) && self.bit(i, 2))
    }

    /// Every feature by name and whether it is active.
    fn all_active(&self) -> BTreeMap<String, bool> {
        self.names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.clone(), self.bit(i, 2)))
            .collect()
    }
}

fn c_str(b: &[u8]) -> Option<String> {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    let s = String::from_utf8_lossy(&b[..end]).trim().to_string();
    (!s.is_empty()).then_some(s)
}

/// A socket to ask the kernel about one interface.
pub struct Ethtool {
    sock: OwnedFd,
    name: [u8; libc::IF_NAMESIZE],
}

impl Ethtool {
    /// `None` when `name` cannot be an interface name or no socket opens.
    pub fn new(name: &str) -> Option<Ethtool> {
        if !super::net::valid_if_name(name) {
            return None;
        }
        let mut n = [0u8; libc::IF_NAMESIZE];
        n[..name.len()].copy_from_slice(name.as_bytes());
        // SAFETY: plain socket(2) call; the result is checked before use.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return None;
        }
        // SAFETY: fd is a socket we just opened and own alone.
        let sock = unsafe { OwnedFd::from_raw_fd(fd) };
        Some(Ethtool { sock, name: n })
    }

    /// SIOCETHTOOL with `cmd` pointing at a struct that starts with the
    /// ethtool command word. Returns whether the driver answered.
    ///
    /// # Safety
    /// `cmd` must point to a live, writable ethtool struct of the layout the
    /// command in its first word expects, including any trailing array the
    /// kernel will fill.
    unsafe fn ioctl<T>(&self, cmd: *mut T) -> bool {
        let mut ifr = IfReq {
            name: self.name,
            data: IfReqData {
                ptr: cmd.cast::<libc::c_void>(),
            },
        };
        // SAFETY: ifr is a valid ifreq naming our interface; the caller
        // guarantees what ifr_data points to.
        unsafe { libc::ioctl(self.sock.as_raw_fd(), SIOCETHTOOL as _, &mut ifr) == 0 }
    }

    pub fn mtu(&self) -> Option<u32> {
        let mut ifr = IfReq {
            name: self.name,
            data: IfReqData { _size: [0; 24] },
        };
        // SAFETY: SIOCGIFMTU reads the name and writes ifr_mtu in the union.
        let ok = unsafe { libc::ioctl(self.sock.as_raw_fd(), SIOCGIFMTU as _, &mut ifr) == 0 };
        // SAFETY: the union was zeroed whole, and after a successful
        // SIOCGIFMTU its int member is the one the kernel set.
        let mtu = unsafe { ifr.data.int };
        ok.then_some(mtu as u32)
    }

    /// The link's speed in bits/s, as `ethtool IF` shows it; `None` where
    /// the driver has no link settings (`lo`) or the speed is unknown (a
    /// link that is down answers SPEED_UNKNOWN, all ones).
    pub fn speed_bps(&self) -> Option<u64> {
        // SAFETY: LinkCmd is plain old data; all-zero is valid.
        let mut c: LinkCmd = unsafe { std::mem::zeroed() };
        c.cmd = ETHTOOL_GSET;
        // SAFETY: c is a struct ethtool_cmd, as GSET expects.
        if !unsafe { self.ioctl(&mut c) } {
            return None;
        }
        mbit_to_bps(u32::from(c.speed) | (u32::from(c.speed_hi) << 16))
    }

    pub fn drvinfo(&self) -> Option<DrvInfo> {
        // SAFETY: DrvInfoRaw is plain old data; all-zero is valid.
        let mut d: DrvInfoRaw = unsafe { std::mem::zeroed() };
        d.cmd = ETHTOOL_GDRVINFO;
        // SAFETY: d is a struct ethtool_drvinfo, as GDRVINFO expects.
        if !unsafe { self.ioctl(&mut d) } {
            return None;
        }
        Some(DrvInfo {
            driver: c_str(&d.driver),
            version: c_str(&d.version),
            firmware_version: c_str(&d.fw_version),
            bus_info: c_str(&d.bus_info),
        })
    }

    fn value(&self, cmd: u32) -> Option<u32> {
        let mut v = Value { cmd, data: 0 };
        // SAFETY: every legacy get command used here takes struct ethtool_value.
        unsafe { self.ioctl(&mut v) }.then_some(v.data)
    }

    pub fn offloads(&self) -> Offloads {
        let on = |cmd| self.value(cmd).map(|v| v != 0);
        Offloads {
            tso: on(ETHTOOL_GTSO),
            gso: on(ETHTOOL_GGSO),
            gro: on(ETHTOOL_GGRO),
            lro: self.value(ETHTOOL_GFLAGS).map(|f| f & ETH_FLAG_LRO != 0),
            rx_checksum: on(ETHTOOL_GRXCSUM),
            tx_checksum: on(ETHTOOL_GTXCSUM),
            scatter_gather: on(ETHTOOL_GSG),
        }
    }

    pub fn coalesce(&self) -> Option<Coalesce> {
        self.get_coalesce().ok()
    }

    /// ETHTOOL_GCOALESCE, or the error the driver gave (EOPNOTSUPP: lo, veth).
    pub fn get_coalesce(&self) -> std::io::Result<Coalesce> {
        let mut c = CoalesceRaw {
            cmd: ETHTOOL_GCOALESCE,
            c: Coalesce::default(),
        };
        // SAFETY: c is a struct ethtool_coalesce, as GCOALESCE expects.
        self.checked(unsafe { self.ioctl(&mut c) })?;
        Ok(c.c)
    }

    /// ETHTOOL_SCOALESCE: set the interrupt coalescing (needs CAP_NET_ADMIN).
    pub fn set_coalesce(&self, c: &Coalesce) -> std::io::Result<()> {
        let mut raw = CoalesceRaw {
            cmd: ETHTOOL_SCOALESCE,
            c: *c,
        };
        // SAFETY: raw is a struct ethtool_coalesce, as SCOALESCE expects.
        self.checked(unsafe { self.ioctl(&mut raw) })
    }

    /// Ring sizes (`ethtool -g`), where the driver offers them.
    pub fn ring(&self) -> Option<Ring> {
        self.get_ring().ok()
    }

    /// ETHTOOL_GRINGPARAM, or the error the driver gave.
    pub fn get_ring(&self) -> std::io::Result<Ring> {
        let mut r = RingRaw {
            cmd: ETHTOOL_GRINGPARAM,
            r: Ring::default(),
        };
        // SAFETY: r is a struct ethtool_ringparam, as GRINGPARAM expects.
        self.checked(unsafe { self.ioctl(&mut r) })?;
        Ok(r.r)
    }

    /// ETHTOOL_SRINGPARAM: resize the rings (needs CAP_NET_ADMIN; most
    /// drivers reset the device to do it).
    pub fn set_ring(&self, r: &Ring) -> std::io::Result<()> {
        let mut raw = RingRaw {
            cmd: ETHTOOL_SRINGPARAM,
            r: *r,
        };
        // SAFETY: raw is a struct ethtool_ringparam, as SRINGPARAM expects.
        self.checked(unsafe { self.ioctl(&mut raw) })
    }

    /// ETHTOOL_GCHANNELS (`ethtool -l`), or the error the driver gave.
    pub fn get_channels(&self) -> std::io::Result<Channels> {
        let mut c = ChannelsRaw {
            cmd: ETHTOOL_GCHANNELS,
            c: Channels::default(),
        };
        // SAFETY: c is a struct ethtool_channels, as GCHANNELS expects.
        self.checked(unsafe { self.ioctl(&mut c) })?;
        Ok(c.c)
    }

    /// ETHTOOL_SCHANNELS: set the queue counts (needs CAP_NET_ADMIN; the
    /// kernel checks them against the maximums).
    pub fn set_channels(&self, c: &Channels) -> std::io::Result<()> {
        let mut raw = ChannelsRaw {
            cmd: ETHTOOL_SCHANNELS,
            c: *c,
        };
        // SAFETY: raw is a struct ethtool_channels, as SCHANNELS expects.
        self.checked(unsafe { self.ioctl(&mut raw) })
    }

    /// The ioctl's answer as a Result: errno, read straight after it.
    fn checked(&self, ok: bool) -> std::io::Result<()> {
        if ok {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }

    /// Every netdev feature by its kernel name (as `ethtool -k` lists them)
    /// and whether it is active.
    pub fn features(&self) -> Option<BTreeMap<String, bool>> {
        self.get_features().ok().map(|t| t.all_active())
    }

    /// The device's features (ETHTOOL_GSSET_INFO, GSTRINGS, GFEATURES), or
    /// the error the kernel gave.
    pub fn get_features(&self) -> std::io::Result<FeatureTable> {
        let invalid = || std::io::Error::from_raw_os_error(libc::EINVAL);
        let mut info = SsetInfo {
            cmd: ETHTOOL_GSSET_INFO,
            reserved: 0,
            sset_mask: 1 << ETH_SS_FEATURES,
            data: [0],
        };
        // SAFETY: info is a struct ethtool_sset_info with room for the one
        // count that the one bit in sset_mask asks for.
        self.checked(unsafe { self.ioctl(&mut info) })?;
        let n = info.data[0];
        if info.sset_mask & (1 << ETH_SS_FEATURES) == 0 || n == 0 || n > MAX_FEATURES {
            return Err(invalid());
        }
        let n = n as usize;
        // struct ethtool_gstrings: cmd, string_set, len, then n × 32 bytes.
        // Held as u32 words so that the header is aligned.
        let mut strings = vec![0u32; 3 + n * ETH_GSTRING_LEN / 4];
        strings[..3].copy_from_slice(&[ETHTOOL_GSTRINGS, ETH_SS_FEATURES, n as u32]);
        // SAFETY: strings holds a gstrings header and room for n strings.
        self.checked(unsafe { self.ioctl(strings.as_mut_ptr()) })?;
        if strings[2] as usize != n {
            return Err(invalid());
        }
        // struct ethtool_gfeatures: cmd, size (blocks), then per block
        // available, requested, active, never_changed.
        let count = n.div_ceil(32);
        let mut feats = vec![0u32; 2 + 4 * count];
        feats[..2].copy_from_slice(&[ETHTOOL_GFEATURES, count as u32]);
        // SAFETY: feats holds a gfeatures header and `count` blocks.
        self.checked(unsafe { self.ioctl(feats.as_mut_ptr()) })?;
        let bytes: Vec<u8> = strings[3..].iter().flat_map(|w| w.to_ne_bytes()).collect();
        let names = bytes
            .chunks_exact(ETH_GSTRING_LEN)
            .map(|b| c_str(b).unwrap_or_default())
            .collect();
        let blocks = feats[2..]
            .chunks_exact(4)
            .map(|b| [b[0], b[1], b[2], b[3]])
            .collect();
        Ok(FeatureTable { names, blocks })
    }

    /// ETHTOOL_SFEATURES: request each named feature of `table` on or off,
    /// as `ethtool -K` does (needs CAP_NET_ADMIN); the others are left as
    /// they are. A name the device does not have is EINVAL.
    pub fn set_features(
        &self,
        table: &FeatureTable,
        want: &BTreeMap<String, bool>,
    ) -> std::io::Result<()> {
        // struct ethtool_sfeatures: cmd, size (blocks), then per block
        // valid (the features to change) and requested.
        let count = table.blocks.len();
        let mut sets = vec![0u32; 2 + 2 * count];
        sets[..2].copy_from_slice(&[ETHTOOL_SFEATURES, count as u32]);
        for (name, on) in want {
            let Some(i) = table.names.iter().position(|n| n == name) else {
                return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
            };
            let (block, bit) = (2 + 2 * (i / 32), 1u32 << (i % 32));
            sets[block] |= bit;
            if *on {
                sets[block + 1] |= bit;
            }
        }
        // SAFETY: sets holds an sfeatures header and `count` blocks. The
        // kernel answers a positive value when it changed other features
        // than asked (dependencies): still a success, read back anyway.
        let rc = unsafe {
            let mut ifr = IfReq {
                name: self.name,
                data: IfReqData {
                    ptr: sets.as_mut_ptr().cast::<libc::c_void>(),
                },
            };
            libc::ioctl(self.sock.as_raw_fd(), SIOCETHTOOL as _, &mut ifr)
        };
        self.checked(rc >= 0)
    }
}

/// The link speed of interface `name` in bits/s: the ethtool ioctl first
/// (it sees this thread's namespace), then /sys/class/net/NAME/speed.
/// `None` where the interface has no speed (`lo`, a link that is down).
pub fn link_speed_bps(name: &str) -> Option<u64> {
    let e = Ethtool::new(name)?;
    e.speed_bps().or_else(|| {
        let s = std::fs::read_to_string(format!("/sys/class/net/{name}/speed")).ok()?;
        // sysfs prints SPEED_UNKNOWN as -1.
        let mbit: i64 = s.trim().parse().ok()?;
        mbit_to_bps(u32::try_from(mbit).ok()?)
    })
}

/// A speed in Mbit/s as ethtool and sysfs give it, in bits/s; 0 and
/// SPEED_UNKNOWN (-1, all ones) are no speed.
pub(crate) fn mbit_to_bps(mbit: u32) -> Option<u64> {
    (mbit != 0 && mbit != u32::MAX && mbit != u32::from(u16::MAX))
        .then(|| u64::from(mbit) * 1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_follow_the_kernel_header() {
        assert_eq!(size_of::<IfReq>(), 40);
        assert_eq!(size_of::<DrvInfoRaw>(), 196);
        assert_eq!(size_of::<CoalesceRaw>(), 92);
        assert_eq!(size_of::<SsetInfo>(), 24);
        assert_eq!(size_of::<Value>(), 8);
        assert_eq!(size_of::<LinkCmd>(), 44);
    }

    #[test]
    fn unknown_speeds_are_none() {
        assert_eq!(mbit_to_bps(10_000), Some(10_000_000_000));
        assert_eq!(mbit_to_bps(0), None);
        assert_eq!(mbit_to_bps(u32::MAX), None);
        assert_eq!(mbit_to_bps(u32::from(u16::MAX)), None);
        assert_eq!(link_speed_bps("lo"), None);
        assert_eq!(link_speed_bps("../x"), None);
    }

    #[test]
    fn loopback_answers_what_it_has() {
        let e = Ethtool::new("lo").unwrap();
        assert_eq!(e.mtu(), Some(65536));
        // lo implements ethtool_ops only partly; whatever it answers must
        // not be garbage, and what it lacks is None.
        let f = e.features().expect("every netdev has feature strings");
        assert!(f.len() > 20, "{f:?}");
        assert!(f.contains_key("tx-scatter-gather"), "{f:?}");
        let _ = e.offloads();
        let _ = e.coalesce();
        assert_eq!(e.speed_bps(), None, "lo has no link speed");
        assert!(Ethtool::new("no-such-if0").unwrap().mtu().is_none());
        assert!(Ethtool::new("no-such-if0").unwrap().speed_bps().is_none());
        assert!(Ethtool::new("no-such-if0").unwrap().drvinfo().is_none());
        assert!(Ethtool::new("../x").is_none());
    }

    /// Each offload covers the features `ethtool -K` sets for its word,
    /// and no other: tso all of TCP's segmentation, whatever a newer
    /// kernel adds under that pattern; lo's table has every one of them.
    #[test]
    fn offloads_cover_ethtools_features() {
        let tso = [
            "tx-tcp-segmentation",
            "tx-tcp6-segmentation",
            "tx-tcp-ecn-segmentation",
            "tx-tcp-mangleid-segmentation",
            "tx-tcp-accecn-segmentation",
        ];
        assert!(tso.iter().all(|n| Offload::Tso.covers(n)));
        for other in ["tx-udp-segmentation", "tx-generic-segmentation", "rx-gro"] {
            assert!(!Offload::Tso.covers(other), "{other}");
        }
        assert!(Offload::Gso.covers("tx-generic-segmentation"));
        assert!(!Offload::Gso.covers("tx-gso-partial"));
        assert!(Offload::Gro.covers("rx-gro") && !Offload::Gro.covers("rx-gro-hw"));
        let t = Ethtool::new("lo").unwrap().get_features().unwrap();
        for o in [Offload::Tso, Offload::Gso, Offload::Gro] {
            assert!(!t.changeable(o).is_empty(), "{o:?}");
        }
    }
}
