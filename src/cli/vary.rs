//! `thrum sweep --vary NAME=LIST`: the dimensions a sweep's grid can run
//! over, each a load option of `thrum run` (or a CPU pinning pair, or a
//! NIC setting) with the values it takes in turn. The grid is the product
//! of the dimensions; a cell is one value of each, applied on top of the
//! options every cell shares.
//!
//! Parsing happens here, once: a bad NAME is refused with the list of
//! accepted names, a bad value names its dimension and the accepted range,
//! and nothing is parsed again when the cells run.

use crate::plan::{CloseMode, DriverChoice, TestPlan};

/// One value of one dimension, as parsed.
#[derive(Clone, Debug, PartialEq)]
pub enum Setting {
    Burst(u32),
    Flows(u32),
    Threads(u32),
    RequestSize(u64),
    ResponseSize(u64),
    /// `-r` given more than once: (request, response) bytes together.
    RrSize(u64, u64),
    SendSize(u64),
    RecvSize(u64),
    /// SO_SNDBUF and SO_RCVBUF, this end, the server's, or both.
    LocalBuffer(u64),
    RemoteBuffer(u64),
    Buffer(u64),
    Nodelay(bool),
    /// `--spin` on or off.
    Spin(bool),
    /// `--busy-poll` in µs; 0: not set.
    BusyPoll(u32),
    Driver(DriverChoice),
    Cc(String),
    /// Open-loop rate in the test's unit (transactions/s, or bits/s).
    Rate(u64),
    /// (local CPU, remote CPU) for the worker threads of each end.
    CpuPin(u32, u32),
    /// One end's CPU alone, for a pinning matrix of local rows by remote
    /// columns (`--vary local-cpu=0,1 --vary remote-cpu=0,1`).
    LocalCpu(u32),
    RemoteCpu(u32),
    Close(CloseMode),
    /// A NIC setting (ethtool), applied by the sweep before the cell:
    /// the dimension's name and the value.
    Nic(NicKnob, u32),
}

/// The NIC settings a sweep can vary (ethtool coalescing, rings, channels
/// and offloads).
pub use crate::sweep::nic::Knob as NicKnob;

/// Every dimension's name and the values it accepts, in `--help`'s order.
pub const NAMES: &[(&str, &str)] = &[
    ("burst", "whole numbers 0..=4096"),
    ("flows", "whole numbers 1..=100000"),
    ("threads", "whole numbers 1..=1024"),
    ("request-size", "sizes 1..=64M (K/M/G = 2^10..)"),
    ("response-size", "sizes 1..=64M (K/M/G = 2^10..)"),
    ("rr-size", "REQ:RESP pairs of sizes, as 1:1,64:1024"),
    ("send-size", "sizes 1..=64M"),
    ("recv-size", "sizes 1..=64M"),
    (
        "local-buffer",
        "sizes up to 1G (SO_SNDBUF and SO_RCVBUF, this end)",
    ),
    (
        "remote-buffer",
        "sizes up to 1G (SO_SNDBUF and SO_RCVBUF, the server)",
    ),
    (
        "buffer",
        "sizes up to 1G (SO_SNDBUF and SO_RCVBUF, both ends)",
    ),
    ("nodelay", "on or off"),
    ("spin", "on or off (tcp_rr, udp_rr)"),
    (
        "busy-poll",
        "whole numbers of µs 0..=1000000 (SO_BUSY_POLL; 0: not set)",
    ),
    ("driver", "auto, epoll or uring"),
    ("cc", "congestion control names (cubic, bbr, reno, ...)"),
    (
        "rate",
        "rates, 10k = 10,000/s (transactions/s; bits/s for udp_stream)",
    ),
    ("cpu-pin", "LOCAL:REMOTE CPU pairs, as 0:0,0:1,1:1"),
    (
        "local-cpu",
        "CPU numbers of this host (the worker threads' pin)",
    ),
    (
        "remote-cpu",
        "CPU numbers of the server (its worker threads' pin)",
    ),
    ("close", "fin or rst"),
    ("coalesce-rx-usecs", "whole numbers (ethtool -C rx-usecs)"),
    ("coalesce-rx-frames", "whole numbers (ethtool -C rx-frames)"),
    ("coalesce-tx-usecs", "whole numbers (ethtool -C tx-usecs)"),
    ("coalesce-tx-frames", "whole numbers (ethtool -C tx-frames)"),
    ("ring-rx", "whole numbers 1.. (ethtool -G rx)"),
    ("ring-tx", "whole numbers 1.. (ethtool -G tx)"),
    ("channels-rx", "whole numbers 1.. (ethtool -L rx)"),
    ("channels-tx", "whole numbers 1.. (ethtool -L tx)"),
    ("channels-combined", "whole numbers (ethtool -L combined)"),
    ("tso", "on or off (ethtool -K tso)"),
    ("gso", "on or off (ethtool -K gso)"),
    ("gro", "on or off (ethtool -K gro)"),
];

/// The accepted names, for an error.
pub fn names() -> String {
    NAMES.iter().map(|n| n.0).collect::<Vec<_>>().join(", ")
}

/// One dimension of the grid: its name and the values it takes in turn.
#[derive(Clone, Debug, PartialEq)]
pub struct Dim {
    pub name: &'static str,
    pub values: Vec<Setting>,
}

/// `NAME=LIST` as `--vary` takes it.
pub fn vary_arg(s: &str) -> Result<Dim, String> {
    let (name, list) = s.split_once('=').ok_or_else(|| {
        format!(
            "'{s}' is not NAME=LIST (e.g. burst=0,1,4); accepted names: {}",
            names()
        )
    })?;
    let name = name.trim();
    let Some(&(name, accepted)) = NAMES.iter().find(|n| n.0 == name) else {
        return Err(format!(
            "'{name}' is not a dimension (accepted names: {})",
            names()
        ));
    };
    let values = list
        .split(',')
        .map(|v| {
            parse_value(name, v.trim())
                .map_err(|why| format!("{name}: '{}' {why} (accepted: {accepted})", v.trim()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if values.is_empty() || list.trim().is_empty() {
        return Err(format!("{name}: no values (accepted: {accepted})"));
    }
    Ok(Dim { name, values })
}

fn whole(v: &str, lo: u64, hi: u64) -> Result<u64, String> {
    let n: u64 = v.parse().map_err(|_| "is not a whole number".to_string())?;
    if n < lo || n > hi {
        return Err("is out of range".into());
    }
    Ok(n)
}

fn sized(v: &str, lo: u64, hi: u64) -> Result<u64, String> {
    let n = super::size(v).map_err(|_| "is not a size".to_string())?;
    if n < lo || n > hi {
        return Err("is out of range".into());
    }
    Ok(n)
}

fn on_off(v: &str) -> Result<bool, String> {
    match v {
        "on" | "true" | "1" | "yes" => Ok(true),
        "off" | "false" | "0" | "no" => Ok(false),
        _ => Err("is not on or off".into()),
    }
}

fn parse_value(name: &str, v: &str) -> Result<Setting, String> {
    use crate::plan::limits as L;
    use Setting::*;
    const RR: u64 = L::MAX_RR_BYTES;
    const IO: u64 = L::MAX_IO_BYTES;
    const BUF: u64 = L::MAX_BUFFER_BYTES;
    let nic = |k: NicKnob, lo: u64| whole(v, lo, u32::MAX as u64).map(|n| Nic(k, n as u32));
    let offload =
        |o: crate::sensors::Offload| on_off(v).map(|on| Nic(NicKnob::Offload(o), u32::from(on)));
    Ok(match name {
        "burst" => Burst(whole(v, 0, L::MAX_BURST as u64)? as u32),
        "flows" => Flows(whole(v, 1, L::MAX_FLOWS as u64)? as u32),
        "threads" => Threads(whole(v, 1, L::MAX_THREADS as u64)? as u32),
        "request-size" => RequestSize(sized(v, 1, RR)?),
        "response-size" => ResponseSize(sized(v, 1, RR)?),
        "rr-size" => {
            let (a, b) = v.split_once(':').ok_or("is not REQ:RESP")?;
            RrSize(sized(a, 1, RR)?, sized(b, 1, RR)?)
        }
        "send-size" => SendSize(sized(v, 1, IO)?),
        "recv-size" => RecvSize(sized(v, 1, IO)?),
        "local-buffer" => LocalBuffer(sized(v, 1, BUF)?),
        "remote-buffer" => RemoteBuffer(sized(v, 1, BUF)?),
        "buffer" => Buffer(sized(v, 1, BUF)?),
        "nodelay" => Nodelay(on_off(v)?),
        "spin" => Spin(on_off(v)?),
        "busy-poll" => BusyPoll(whole(v, 0, L::MAX_BUSY_POLL_US as u64)? as u32),
        "driver" => Driver(v.parse().map_err(|_| "is not a driver".to_string())?),
        "cc" => {
            if !crate::plan::limits::is_congestion_name(v) {
                return Err("is not a congestion control name".into());
            }
            Cc(v.to_string())
        }
        "rate" => {
            let r = super::rate(v).map_err(|_| "is not a rate".to_string())?;
            if r == 0 {
                return Err("is out of range".into());
            }
            Rate(r)
        }
        "cpu-pin" => {
            let (l, r) = v.split_once(':').ok_or("is not LOCAL:REMOTE")?;
            let cpu = |c: &str| whole(c.trim(), 0, 4095).map(|n| n as u32);
            let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
            let l = cpu(l)?;
            if l >= ncpu {
                return Err(format!("names local CPU {l}, and this host has {ncpu}"));
            }
            CpuPin(l, cpu(r)?)
        }
        "local-cpu" => {
            let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
            LocalCpu(whole(v, 0, ncpu - 1)? as u32)
        }
        "remote-cpu" => RemoteCpu(whole(v, 0, 4095)? as u32),
        "close" => Close(v.parse().map_err(|_| "is not fin or rst".to_string())?),
        "coalesce-rx-usecs" => nic(NicKnob::CoalesceRxUsecs, 0)?,
        "coalesce-rx-frames" => nic(NicKnob::CoalesceRxFrames, 0)?,
        "coalesce-tx-usecs" => nic(NicKnob::CoalesceTxUsecs, 0)?,
        "coalesce-tx-frames" => nic(NicKnob::CoalesceTxFrames, 0)?,
        "ring-rx" => nic(NicKnob::RingRx, 1)?,
        "ring-tx" => nic(NicKnob::RingTx, 1)?,
        "channels-rx" => nic(NicKnob::ChannelsRx, 1)?,
        "channels-tx" => nic(NicKnob::ChannelsTx, 1)?,
        "channels-combined" => nic(NicKnob::ChannelsCombined, 0)?,
        "tso" => offload(crate::sensors::Offload::Tso)?,
        "gso" => offload(crate::sensors::Offload::Gso)?,
        "gro" => offload(crate::sensors::Offload::Gro)?,
        _ => unreachable!("every name in NAMES has a parser"),
    })
}

impl Setting {
    /// Put this value into the cell's plan (a NIC setting is the sweep's
    /// to apply, not the plan's).
    pub fn apply(&self, p: &mut TestPlan) {
        use Setting::*;
        match self {
            Burst(b) => p.burst = *b,
            Flows(f) => p.flows = *f,
            Threads(t) => p.threads = *t,
            RequestSize(n) => p.request_bytes = *n,
            ResponseSize(n) => p.response_bytes = *n,
            RrSize(a, b) => (p.request_bytes, p.response_bytes) = (*a, *b),
            SendSize(n) => p.send_bytes = *n,
            RecvSize(n) => p.recv_bytes = *n,
            LocalBuffer(n) => {
                p.local.send_buffer_bytes = Some(*n);
                p.local.recv_buffer_bytes = Some(*n);
            }
            RemoteBuffer(n) => {
                p.remote.send_buffer_bytes = Some(*n);
                p.remote.recv_buffer_bytes = Some(*n);
            }
            Buffer(n) => {
                for s in [&mut p.local, &mut p.remote] {
                    s.send_buffer_bytes = Some(*n);
                    s.recv_buffer_bytes = Some(*n);
                }
            }
            Nodelay(on) => p.nodelay = *on,
            Spin(on) => p.spin = *on,
            BusyPoll(us) => p.busy_poll_us = (*us > 0).then_some(*us),
            Driver(d) => p.driver = *d,
            Cc(c) => p.congestion = Some(c.clone()),
            Rate(r) => {
                if p.test.traits().rate == crate::plan::Rate::Transactions {
                    p.offered_per_s = Some(*r);
                } else {
                    p.rate_bps = Some(*r);
                }
            }
            CpuPin(l, r) => {
                p.local.cpu_pin = vec![*l as usize];
                p.remote.cpu_pin = vec![*r as usize];
            }
            LocalCpu(c) => p.local.cpu_pin = vec![*c as usize],
            RemoteCpu(c) => p.remote.cpu_pin = vec![*c as usize],
            Close(c) => p.close = *c,
            Nic(..) => {}
        }
    }

    /// The value as a cell's `params` and the CSV carry it: a number where
    /// it is one, else its name (`on`, `epoll`, `0:1`).
    pub fn json(&self) -> serde_json::Value {
        use Setting::*;
        use serde_json::json;
        match self {
            Burst(n) | Flows(n) | Threads(n) | LocalCpu(n) | RemoteCpu(n) => json!(n),
            RequestSize(n) | ResponseSize(n) | SendSize(n) | RecvSize(n) | LocalBuffer(n)
            | RemoteBuffer(n) | Buffer(n) | Rate(n) => json!(n),
            Nic(k, n) if !k.is_switch() => json!(n),
            BusyPoll(n) => json!(n),
            _ => json!(self.label()),
        }
    }

    /// The value as a table's row or column heading shows it.
    pub fn label(&self) -> String {
        use Setting::*;
        match self {
            Nic(k, n) if k.is_switch() => (if *n != 0 { "on" } else { "off" }).into(),
            Burst(n)
            | Flows(n)
            | Threads(n)
            | Nic(_, n)
            | LocalCpu(n)
            | RemoteCpu(n)
            | BusyPoll(n) => n.to_string(),
            RequestSize(n) | ResponseSize(n) | SendSize(n) | RecvSize(n) | LocalBuffer(n)
            | RemoteBuffer(n) | Buffer(n) | Rate(n) => n.to_string(),
            RrSize(a, b) => format!("{a}:{b}"),
            Nodelay(on) | Spin(on) => (if *on { "on" } else { "off" }).into(),
            Driver(d) => match d {
                DriverChoice::Auto => "auto",
                DriverChoice::Epoll => "epoll",
                DriverChoice::Uring => "uring",
            }
            .into(),
            Cc(c) => c.clone(),
            CpuPin(l, r) => format!("{l}:{r}"),
            Close(c) => match c {
                CloseMode::Fin => "fin",
                CloseMode::Rst => "rst",
            }
            .into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_values_and_refusals() {
        let d = vary_arg("cpu-pin=0:0,0:1").unwrap();
        assert_eq!(d.name, "cpu-pin");
        assert_eq!(d.values, vec![Setting::CpuPin(0, 0), Setting::CpuPin(0, 1)]);
        let d = vary_arg("nodelay=on,off").unwrap();
        assert_eq!(
            d.values,
            vec![Setting::Nodelay(true), Setting::Nodelay(false)]
        );
        assert_eq!(d.values[1].label(), "off");
        let d = vary_arg("request-size=1,4K").unwrap();
        assert_eq!(d.values[1], Setting::RequestSize(4096));
        assert_eq!(d.values[1].json(), serde_json::json!(4096));
        let e = vary_arg("bursts=1").unwrap_err();
        assert!(e.contains("'bursts' is not a dimension"), "{e}");
        assert!(e.contains("burst, flows, threads"), "{e}");
        let e = vary_arg("burst=0,5000").unwrap_err();
        assert!(e.contains("burst: '5000' is out of range"), "{e}");
        assert!(e.contains("0..=4096"), "{e}");
        let e = vary_arg("flows=0").unwrap_err();
        assert!(e.contains("flows: '0'"), "{e}");
        let e = vary_arg("driver=kqueue").unwrap_err();
        assert!(e.contains("auto, epoll or uring"), "{e}");
        let e = vary_arg("cpu-pin=0").unwrap_err();
        assert!(e.contains("LOCAL:REMOTE"), "{e}");
        assert!(vary_arg("burst").unwrap_err().contains("NAME=LIST"));
        let mut p = TestPlan::new(crate::plan::TestKind::TcpRr);
        Setting::CpuPin(1, 0).apply(&mut p);
        assert_eq!(
            (p.local.cpu_pin.clone(), p.remote.cpu_pin.clone()),
            (vec![1], vec![0])
        );
        Setting::Rate(500).apply(&mut p);
        assert_eq!(p.offered_per_s, Some(500));
        // The busy-poll study: spin off and on, busy polling unset and 50 µs.
        let d = vary_arg("spin=off,on").unwrap();
        assert_eq!(d.values, vec![Setting::Spin(false), Setting::Spin(true)]);
        assert_eq!(d.values[1].json(), serde_json::json!("on"));
        d.values[1].apply(&mut p);
        assert!(p.spin);
        let d = vary_arg("busy-poll=0,50").unwrap();
        assert_eq!(d.values[1].json(), serde_json::json!(50));
        d.values[1].apply(&mut p);
        assert_eq!(p.busy_poll_us, Some(50));
        d.values[0].apply(&mut p);
        assert_eq!(p.busy_poll_us, None);
        let e = vary_arg("busy-poll=2000000").unwrap_err();
        assert!(e.contains("busy-poll: '2000000' is out of range"), "{e}");
        assert!(vary_arg("spin=maybe").unwrap_err().contains("on or off"));
    }
}
