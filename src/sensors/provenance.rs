//! Provenance: where a result came from, gathered once per end and test.
//!
//! A number without its machine is a rumour. Engineers compare results
//! across kernels, NICs and tunings, and the tuning that moves latency
//! against throughput (interrupt coalescing, offloads, socket-buffer limits,
//! congestion control) is invisible in the figures themselves. Everything
//! here is optional: a missing /proc file or an ioctl the driver does not
//! offer leaves its field out of the JSON.

use std::collections::BTreeMap;
use std::ffi::{CStr, OsString};
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::ethtool::Ethtool;
pub use super::ethtool::{Coalesce, Offloads, Ring};

/// uname(2).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Kernel {
    pub sysname: String,
    pub release: String,
    /// The build string (`#1 SMP PREEMPT_DYNAMIC ...`).
    pub version: String,
    pub machine: String,
}

/// Socket-buffer limits, by their sysctl names.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Sysctls {
    #[serde(rename = "net.core.rmem_max", skip_serializing_if = "Option::is_none")]
    pub rmem_max: Option<u64>,
    #[serde(rename = "net.core.wmem_max", skip_serializing_if = "Option::is_none")]
    pub wmem_max: Option<u64>,
    /// min, default, max.
    #[serde(rename = "net.ipv4.tcp_rmem", skip_serializing_if = "Option::is_none")]
    pub tcp_rmem: Option<[u64; 3]>,
    #[serde(rename = "net.ipv4.tcp_wmem", skip_serializing_if = "Option::is_none")]
    pub tcp_wmem: Option<[u64; 3]>,
}

/// The interface that carries the test's traffic.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Interface {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver_version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub firmware_version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bus_info: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    /// TSO, GSO, GRO, LRO, checksumming, scatter-gather.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offloads: Option<Offloads>,
    /// Every netdev feature by kernel name, true when active (`ethtool -k`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub features: Option<BTreeMap<String, bool>>,
    /// Interrupt coalescing (`ethtool -c`), where the driver offers it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub coalesce: Option<Coalesce>,
    /// Ring sizes (`ethtool -g`, ETHTOOL_GRINGPARAM), where the driver offers them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ring: Option<Ring>,
    /// The interface's interrupts (its queues', by /proc/interrupts) and the
    /// CPUs each may run on: where the coalesced interrupts land.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub irqs: Vec<Irq>,
}

/// One interrupt of an interface and its affinity.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Irq {
    /// The IRQ number.
    pub irq: u32,
    /// Its name in /proc/interrupts (`eth0-TxRx-0`).
    pub name: String,
    /// /proc/irq/N/smp_affinity_list (`0-3`).
    pub cpus: String,
}

/// The interrupts /proc/interrupts names after interface `name` (`name`
/// itself, or `name-…` as multi-queue drivers name their queues), each
/// with its affinity.
pub fn interface_irqs(
    proc_interrupts: &str,
    name: &str,
    affinity: impl Fn(u32) -> Option<String>,
) -> Vec<Irq> {
    let mut out = Vec::new();
    for line in proc_interrupts.lines() {
        let Some((num, rest)) = line.trim_start().split_once(':') else {
            continue;
        };
        let Ok(irq) = num.trim().parse::<u32>() else {
            continue;
        };
        let Some(last) = rest.split_whitespace().last() else {
            continue;
        };
        let ours = last == name
            || last
                .strip_prefix(name)
                .is_some_and(|t| t.starts_with('-') || t.starts_with('@'));
        if ours {
            out.push(Irq {
                irq,
                name: last.to_string(),
                cpus: affinity(irq).unwrap_or_default(),
            });
        }
    }
    out
}

impl Interface {
    /// Everything the kernel tells about interface `name` in this
    /// process's network namespace.
    pub fn gather(name: &str) -> Interface {
        let mut i = Interface {
            name: name.to_string(),
            ..Interface::default()
        };
        let Some(e) = Ethtool::new(name) else {
            return i;
        };
        if let Some(d) = e.drvinfo() {
            i.driver = d.driver;
            i.driver_version = d.version;
            i.firmware_version = d.firmware_version;
            i.bus_info = d.bus_info;
        }
        i.mtu = e.mtu();
        let o = e.offloads();
        i.offloads = (o != Offloads::default()).then_some(o);
        i.features = e.features();
        i.coalesce = e.coalesce();
        i.ring = e.ring();
        if let Ok(text) = std::fs::read_to_string("/proc/interrupts") {
            i.irqs = interface_irqs(&text, name, |n| {
                std::fs::read_to_string(format!("/proc/irq/{n}/smp_affinity_list"))
                    .ok()
                    .map(|s| s.trim().to_string())
            });
        }
        i
    }
}

/// Where and how a result was measured, on one end.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Provenance {
    pub thrum_version: String,
    /// The command line, each argument shell-quoted where it needs it.
    pub command_line: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel: Option<Kernel>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub cpus: Option<usize>,
    /// net.ipv4.tcp_congestion_control: the default for new sockets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub congestion_control: Option<String>,
    pub sysctls: Sysctls,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interface: Option<Interface>,
}

impl Provenance {
    /// Gather everything, with `interface` described when given.
    pub fn gather(interface: Option<&str>) -> Provenance {
        let (cpu_model, cpus) = std::fs::read_to_string("/proc/cpuinfo")
            .map(|t| parse_cpuinfo(&t))
            .unwrap_or_default();
        let kernel = uname();
        Provenance {
            thrum_version: env!("CARGO_PKG_VERSION").to_string(),
            command_line: command_line(std::env::args_os()),
            hostname: kernel.as_ref().map(|k| k.1.clone()),
            kernel: kernel.map(|k| k.0),
            cpu_model,
            cpus: cpus.or_else(online_cpus),
            congestion_control: proc_sys("net/ipv4/tcp_congestion_control"),
            sysctls: Sysctls {
                rmem_max: proc_sys("net/core/rmem_max").and_then(|s| s.parse().ok()),
                wmem_max: proc_sys("net/core/wmem_max").and_then(|s| s.parse().ok()),
                tcp_rmem: proc_sys("net/ipv4/tcp_rmem").and_then(|s| triple(&s)),
                tcp_wmem: proc_sys("net/ipv4/tcp_wmem").and_then(|s| triple(&s)),
            },
            interface: interface.map(Interface::gather),
        }
    }

    /// The version alone: what a server tells a client that did not
    /// authenticate. The rest (its command line, hostname, kernel build,
    /// CPU, sysctls and NIC) is a map of the machine for anyone who can
    /// connect, so it goes only to a client that proved the key
    /// (`--psk-file`). `command_line` stays, empty, because older clients
    /// require the field.
    pub fn version_only() -> Provenance {
        Provenance {
            thrum_version: env!("CARGO_PKG_VERSION").to_string(),
            command_line: String::new(),
            hostname: None,
            kernel: None,
            cpu_model: None,
            cpus: None,
            congestion_control: None,
            sysctls: Sysctls::default(),
            interface: None,
        }
    }

    /// Gather everything, describing the interface that routes to `peer`.
    pub fn for_peer(peer: IpAddr) -> Provenance {
        Provenance::gather(super::net::route_interface(peer).as_deref())
    }
}

/// One value under /proc/sys, trimmed; these follow the network namespace
/// of the process that reads them.
fn proc_sys(path: &str) -> Option<String> {
    let s = std::fs::read_to_string(format!("/proc/sys/{path}")).ok()?;
    let s = s.trim();
    (!s.is_empty()).then(|| s.to_string())
}

fn triple(s: &str) -> Option<[u64; 3]> {
    let mut it = s.split_ascii_whitespace().map(str::parse::<u64>);
    let v = [it.next()?.ok()?, it.next()?.ok()?, it.next()?.ok()?];
    it.next().is_none().then_some(v)
}

/// The CPU model and the number of CPUs listed in /proc/cpuinfo text.
/// x86 says `model name`; other architectures use `Model`, `cpu model` or
/// `cpu` for the same thing.
pub fn parse_cpuinfo(text: &str) -> (Option<String>, Option<usize>) {
    let mut count = 0;
    let mut models: [Option<String>; 4] = Default::default();
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v = v.trim();
        let slot = match k.trim() {
            "processor" => {
                count += 1;
                continue;
            }
            "model name" => 0,
            "Model" => 1,
            "cpu model" => 2,
            "cpu" => 3,
            _ => continue,
        };
        if models[slot].is_none() && !v.is_empty() {
            models[slot] = Some(v.to_string());
        }
    }
    let model = models.into_iter().flatten().next();
    (model, (count > 0).then_some(count))
}

fn online_cpus() -> Option<usize> {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    (n > 0).then_some(n as usize)
}

fn uname() -> Option<(Kernel, String)> {
    // SAFETY: utsname is plain old data; all-zero is valid.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: uname writes only into the struct we pass it.
    if unsafe { libc::uname(&mut u) } != 0 {
        return None;
    }
    let s = |f: &[libc::c_char]| {
        // SAFETY: uname NUL-terminates every field within its array.
        unsafe { CStr::from_ptr(f.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    };
    Some((
        Kernel {
            sysname: s(&u.sysname),
            release: s(&u.release),
            version: s(&u.version),
            machine: s(&u.machine),
        },
        s(&u.nodename),
    ))
}

/// Join arguments into one line a POSIX shell would split back into the
/// same arguments: each argument with anything beyond a safe set of
/// characters is single-quoted. Arguments that are not UTF-8 are shown
/// lossily rather than dropped.
pub fn command_line(args: impl IntoIterator<Item = OsString>) -> String {
    args.into_iter()
        .map(|a| shell_quote(&a.to_string_lossy()))
        .collect::<Vec<_>>()
        .join(" ")
}

fn shell_quote(a: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "-_=+/.,:@%".contains(c);
    if !a.is_empty() && a.chars().all(safe) {
        return a.to_string();
    }
    format!("'{}'", a.replace('\'', r"'\''"))
}

fn on_off(b: bool) -> &'static str {
    if b { "on" } else { "off" }
}

/// Provenance as a few lines for `--verbose` human output.
pub fn human_lines(p: &Provenance) -> Vec<String> {
    let mut out = vec![format!("thrum {}: {}", p.thrum_version, p.command_line)];
    let mut host = p.hostname.clone().unwrap_or_else(|| "?".into());
    if let Some(k) = &p.kernel {
        host += &format!(
            ": {} {} {} ({})",
            k.sysname, k.release, k.machine, k.version
        );
    }
    out.push(format!("host {host}"));
    if p.cpu_model.is_some() || p.cpus.is_some() {
        out.push(format!(
            "cpu {} x {}",
            p.cpus.map_or("?".into(), |n| n.to_string()),
            p.cpu_model.as_deref().unwrap_or("?")
        ));
    }
    let s = &p.sysctls;
    let mut tcp = Vec::new();
    if let Some(cc) = &p.congestion_control {
        tcp.push(format!("congestion control {cc}"));
    }
    let opt = |n: &str, v: Option<u64>| v.map(|v| format!("{n} {v}"));
    let tri = |n: &str, v: Option<[u64; 3]>| v.map(|[a, b, c]| format!("{n} {a} {b} {c}"));
    tcp.extend(opt("rmem_max", s.rmem_max));
    tcp.extend(opt("wmem_max", s.wmem_max));
    tcp.extend(tri("tcp_rmem", s.tcp_rmem));
    tcp.extend(tri("tcp_wmem", s.tcp_wmem));
    if !tcp.is_empty() {
        out.push(format!("tcp {}", tcp.join(", ")));
    }
    if let Some(i) = &p.interface {
        out.extend(interface_lines(i));
    }
    out
}

fn interface_lines(i: &Interface) -> Vec<String> {
    let mut head = format!("interface {}", i.name);
    if let Some(d) = &i.driver {
        head += &format!(": driver {d}");
        if let Some(v) = &i.driver_version {
            head += &format!(" {v}");
        }
    }
    if let Some(b) = &i.bus_info {
        head += &format!(", bus {b}");
    }
    if let Some(f) = &i.firmware_version {
        head += &format!(", firmware {f}");
    }
    if let Some(m) = i.mtu {
        head += &format!(", mtu {m}");
    }
    let mut out = vec![head];
    if let Some(o) = &i.offloads {
        let parts: Vec<String> = [
            ("tso", o.tso),
            ("gso", o.gso),
            ("gro", o.gro),
            ("lro", o.lro),
            ("rx-checksum", o.rx_checksum),
            ("tx-checksum", o.tx_checksum),
            ("sg", o.scatter_gather),
        ]
        .into_iter()
        .filter_map(|(n, v)| v.map(|v| format!("{n} {}", on_off(v))))
        .collect();
        out.push(format!("  offloads {}", parts.join(", ")));
    }
    if let Some(c) = &i.coalesce {
        out.push(format!(
            "  coalescing rx-usecs {} rx-frames {} tx-usecs {} tx-frames {} adaptive-rx {} adaptive-tx {}",
            c.rx_usecs,
            c.rx_frames,
            c.tx_usecs,
            c.tx_frames,
            on_off(c.adaptive_rx != 0),
            on_off(c.adaptive_tx != 0)
        ));
    }
    if let Some(r) = &i.ring {
        out.push(format!(
            "  rings rx {} (max {}) tx {} (max {})",
            r.rx_pending, r.rx_max_pending, r.tx_pending, r.tx_max_pending
        ));
    }
    if !i.irqs.is_empty() {
        let irqs: Vec<String> = i
            .irqs
            .iter()
            .map(|q| format!("{} {} on {}", q.irq, q.name, q.cpus))
            .collect();
        out.push(format!("  irqs {}", irqs.join(", ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const X86: &str = "processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz
flags\t\t: fpu vme

processor\t: 1
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz
";
    const ARM: &str = "processor\t: 0
BogoMIPS\t: 108.00
CPU implementer\t: 0x41

processor\t: 1
BogoMIPS\t: 108.00

Hardware\t: BCM2835
Model\t\t: Raspberry Pi 4 Model B Rev 1.4
";

    #[test]
    fn cpuinfo_model_and_count() {
        assert_eq!(
            parse_cpuinfo(X86),
            (
                Some("Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz".into()),
                Some(2)
            )
        );
        assert_eq!(
            parse_cpuinfo(ARM),
            (Some("Raspberry Pi 4 Model B Rev 1.4".into()), Some(2))
        );
        assert_eq!(parse_cpuinfo(""), (None, None));
    }

    #[test]
    fn command_line_round_trips_through_a_shell() {
        let args = [
            "thrum",
            "run",
            "tcp_rr",
            "-H",
            "::1",
            "--title",
            "it's a test",
            "",
            "a;b",
        ];
        let line = command_line(args.iter().map(OsString::from));
        assert_eq!(
            line,
            r"thrum run tcp_rr -H ::1 --title 'it'\''s a test' '' 'a;b'"
        );
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("printf '%s\\n' {line}"))
            .output()
            .unwrap();
        let back: Vec<&str> = std::str::from_utf8(&out.stdout).unwrap().lines().collect();
        assert_eq!(back, args);
    }

    #[test]
    fn sysctl_triples() {
        assert_eq!(
            triple("4096\t131072\t6291456"),
            Some([4096, 131072, 6291456])
        );
        assert_eq!(triple("4096 131072"), None);
        assert_eq!(triple("1 2 3 4"), None);
    }

    #[test]
    fn gathers_this_machine_on_lo() {
        let p = Provenance::for_peer("127.0.0.1".parse().unwrap());
        assert_eq!(p.thrum_version, env!("CARGO_PKG_VERSION"));
        assert!(!p.command_line.is_empty());
        assert_eq!(p.kernel.as_ref().unwrap().sysname, "Linux");
        assert!(p.cpus.unwrap() >= 1);
        assert!(p.congestion_control.is_some());
        assert!(p.sysctls.rmem_max.unwrap() > 0);
        assert!(p.sysctls.tcp_rmem.is_some());
        let i = p.interface.as_ref().unwrap();
        assert_eq!(i.name, "lo");
        assert!(i.mtu.is_some());
        let v = serde_json::to_value(&p).unwrap();
        assert!(v["sysctls"]["net.core.rmem_max"].is_u64(), "{v}");
        assert_eq!(v["interface"]["name"], "lo");
        let back: Provenance = serde_json::from_value(v).unwrap();
        assert_eq!(back, p);
        let lines = human_lines(&p);
        assert!(lines[0].starts_with("thrum "), "{lines:?}");
        assert!(
            lines.iter().any(|l| l.starts_with("interface lo")),
            "{lines:?}"
        );
    }

    #[test]
    fn missing_everything_is_left_out() {
        let p = Provenance {
            thrum_version: "0.1.0".into(),
            command_line: "thrum".into(),
            ..Provenance::default()
        };
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"thrum_version": "0.1.0", "command_line": "thrum", "sysctls": {}})
        );
        assert_eq!(human_lines(&p), ["thrum 0.1.0: thrum", "host ?"]);
        let i = Interface::gather("no-such-if0");
        assert_eq!(i.driver, None);
        assert_eq!(i.mtu, None);
        assert_eq!(i.coalesce, None);
    }

    #[test]
    fn interface_lines_show_driver_offloads_and_coalescing() {
        let i = Interface {
            name: "eth0".into(),
            driver: Some("ixgbe".into()),
            driver_version: Some("5.1.0".into()),
            bus_info: Some("0000:03:00.0".into()),
            mtu: Some(9000),
            offloads: Some(Offloads {
                tso: Some(true),
                lro: Some(false),
                ..Offloads::default()
            }),
            coalesce: Some(Coalesce {
                rx_usecs: 50,
                adaptive_rx: 1,
                ..Coalesce::default()
            }),
            ..Interface::default()
        };
        assert_eq!(
            interface_lines(&i),
            [
                "interface eth0: driver ixgbe 5.1.0, bus 0000:03:00.0, mtu 9000",
                "  offloads tso on, lro off",
                "  coalescing rx-usecs 50 rx-frames 0 tx-usecs 0 tx-frames 0 adaptive-rx on adaptive-tx off",
            ]
        );
    }

    #[test]
    fn queue_interrupts_by_interface_name() {
        let text = "           CPU0       CPU1
  24:          0          0   PCI-MSI 524288-edge      eth0
  25:        100          7   PCI-MSI 524289-edge      eth0-TxRx-0
  26:          3          9   PCI-MSI 524290-edge      eth0-TxRx-1
  27:          3          9   PCI-MSI 524291-edge      eth10-TxRx-0
 NMI:          0          0   Non-maskable interrupts
";
        let irqs = interface_irqs(text, "eth0", |n| Some(format!("{}", n % 2)));
        let got: Vec<(u32, &str)> = irqs.iter().map(|q| (q.irq, q.name.as_str())).collect();
        assert_eq!(
            got,
            [(24, "eth0"), (25, "eth0-TxRx-0"), (26, "eth0-TxRx-1")]
        );
        assert_eq!(irqs[2].cpus, "0");
    }
}
