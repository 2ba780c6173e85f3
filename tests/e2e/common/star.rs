//! The star of the many-host tests (`fleet`, `mesh`): hosts, each a
//! namespace on its own /24 behind one router, and a target behind the
//! router on a link of its own that a test may shape; and the key file
//! their agents share.

use crate::common::*;

/// Agents A0..An, each on its own /24 to the router R (10.NET.i+1.0/24:
/// the agent .1, R .254), and the target T on 10.NET.200.0/24 (T .1, R
/// .254), IPv6 off, default routes through R; deleted on drop.
pub struct Star {
    pub agents: Vec<String>,
    pub r: String,
    pub t: String,
    pub net: u8,
}

/// R's interface toward T, where the tests shape; T's end.
pub const TOWARD_T: &str = "rt";
pub const VETH_T: &str = "vt";

impl Star {
    pub fn build(net: u8, agents: usize) -> Option<Star> {
        let name = |end: &str| format!("thr{}-f{net}{end}", std::process::id());
        let r = name("r");
        if !netns_add_or_skip(&r) {
            return None;
        }
        let star = Star {
            agents: (0..agents).map(|i| name(&format!("a{i}"))).collect(),
            r,
            t: name("t"),
            net,
        };
        for ns in star.agents.iter().chain([&star.t]) {
            ip(&["netns", "add", ns]);
        }
        let all: Vec<&str> = star
            .agents
            .iter()
            .chain([&star.r, &star.t])
            .map(String::as_str)
            .collect();
        no_ipv6(&all);
        let mut ends: Vec<(&str, String, u8)> = star
            .agents
            .iter()
            .enumerate()
            .map(|(i, a)| (a.as_str(), format!("r{i}"), i as u8 + 1))
            .collect();
        ends.push((&star.t, TOWARD_T.to_string(), 200));
        for (ns, r_dev, subnet) in ends {
            let dev = if subnet == 200 { VETH_T } else { "va" };
            veth((ns, dev), (&star.r, &r_dev));
            addr_up(ns, dev, &format!("10.{net}.{subnet}.1/24"));
            addr_up(&star.r, &r_dev, &format!("10.{net}.{subnet}.254/24"));
            ip(&[
                "-n",
                ns,
                "route",
                "add",
                "default",
                "via",
                &format!("10.{net}.{subnet}.254"),
            ]);
        }
        run_ok(ns_exec(&star.r, "sysctl").args(["-qw", "net.ipv4.ip_forward=1"]));
        Some(star)
    }

    pub fn agent_addr(&self, i: usize) -> String {
        format!("10.{}.{}.1", self.net, i + 1)
    }

    pub fn target_addr(&self) -> String {
        format!("10.{}.200.1", self.net)
    }

    /// htb at `rate` on R's egress toward the target (its bucket is
    /// small, shared/TESTING.md), over a byte FIFO of `limit` bytes.
    ///
    /// The FIFO is kept short on purpose. At the window's end a stream's
    /// sender stops, and the server counts it up to the tick's arrival
    /// (docs/design.md): what its socket buffer and the queue held then
    /// counts in the last interval. Under htb's default leaf (a pfifo of
    /// the veth's 1,000 packets, 133 ms at 90 Mbit/s) three cubic streams
    /// left about 5 MB there: the last interval read 116–127 Mbit/s and the
    /// 8 s window 89.7 (one host, -F 3) to 91.1 (three agents, each
    /// counted to its own tick) instead of 86.
    pub fn shape(&self, rate: &str, limit: &str) {
        for cmd in [
            &[
                "qdisc", "add", "dev", TOWARD_T, "root", "handle", "1:", "htb", "default", "1",
                "r2q", "100",
            ][..],
            &[
                "class", "add", "dev", TOWARD_T, "parent", "1:", "classid", "1:1", "htb", "rate",
                rate,
            ],
            &[
                "qdisc", "add", "dev", TOWARD_T, "parent", "1:1", "bfifo", "limit", limit,
            ],
        ] {
            run_ok(ns_exec(&self.r, "tc").args(cmd));
        }
    }

    /// htb at `rate` over a byte FIFO of `limit` bytes on agent `i`'s
    /// link to the router, for its packets to `dst` alone (a u32 filter on
    /// the destination): htb's default class 0 sends every other packet
    /// straight out, unshaped. One ordered pair of hosts is slow, its
    /// reverse and every other pair not.
    pub fn shape_pair(&self, i: usize, dst: &str, rate: &str, limit: &str) {
        let dst = format!("{dst}/32");
        for cmd in [
            &[
                "qdisc", "add", "dev", "va", "root", "handle", "1:", "htb", "default", "0", "r2q",
                "100",
            ][..],
            &[
                "class", "add", "dev", "va", "parent", "1:", "classid", "1:1", "htb", "rate", rate,
            ],
            &[
                "qdisc", "add", "dev", "va", "parent", "1:1", "bfifo", "limit", limit,
            ],
            &[
                "filter", "add", "dev", "va", "parent", "1:", "protocol", "ip", "prio", "1", "u32",
                "match", "ip", "dst", &dst, "flowid", "1:1",
            ],
        ] {
            run_ok(ns_exec(&self.agents[i], "tc").args(cmd));
        }
    }

    /// Bytes agent `i`'s interface has sent.
    pub fn agent_tx_bytes(&self, i: usize) -> u64 {
        let out =
            run_ok(ns_exec(&self.agents[i], "cat").arg("/sys/class/net/va/statistics/tx_bytes"))
                .stdout();
        out.trim().parse().expect("a byte count")
    }

    /// Bytes the target's interface has received.
    pub fn target_rx_bytes(&self) -> u64 {
        let path = format!("/sys/class/net/{VETH_T}/statistics/rx_bytes");
        let out = run_ok(ns_exec(&self.t, "cat").arg(path)).stdout();
        out.trim().parse().expect("a byte count")
    }

    /// `thrum server EXTRA..` in agent `i`'s namespace, on its address.
    pub fn agent_server(&self, i: usize, extra: &[&str]) -> ServerProc {
        let mut s =
            ServerProc::start_with(ns_exec(&self.agents[i], bin()), &self.agent_addr(i), extra);
        s.ns = Some(self.agents[i].clone());
        s
    }

    /// `thrum server EXTRA..` in the target's namespace, on its address.
    pub fn target_server(&self, extra: &[&str]) -> ServerProc {
        let mut s = ServerProc::start_with(ns_exec(&self.t, bin()), &self.target_addr(), extra);
        s.ns = Some(self.t.clone());
        s
    }

    /// `thrum run TEST -H TARGET --psk-file KEY --from AGENTS` in the
    /// first agent's namespace, with thrum's own warm-up.
    pub fn run(&self, test: &str, target: &ServerProc, agents: &[&ServerProc], key: &str) -> Thrum {
        let from: Vec<&str> = agents.iter().map(|a| a.addr.as_str()).collect();
        Thrum::run(test)
            .netns(&self.agents[0])
            .host(&target.addr)
            .args(["--psk-file", key, "--from", &from.join(",")])
            .default_warmup()
    }
}

impl Drop for Star {
    fn drop(&mut self) {
        let mut all: Vec<&str> = self.agents.iter().map(String::as_str).collect();
        all.extend([self.r.as_str(), self.t.as_str()]);
        delete(&all);
    }
}

/// A key file (mode 600) in `dir`, of 32 bytes made of `b`.
pub fn key_file(dir: &tempfile::TempDir, name: &str, b: char) -> String {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.path().join(name);
    std::fs::write(&p, b.to_string().repeat(32)).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    p.to_str().unwrap().to_string()
}
