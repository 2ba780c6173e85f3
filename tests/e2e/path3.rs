//! A three-namespace path for the tests of `thrum ping` and `thrum run
//! capacity`: A (client) — R (router) — B (server), on 10.213.S.0/24 and
//! 10.213.S+1.0/24, default routes through R, and whatever qdisc a test
//! puts on R's egress toward B (`shape`). Forwarded packets that R's
//! qdisc drops are real loss, and its rate is the path's narrow link
//! (shared/TESTING.md, "Three hosts").
//!
//! Names carry the process id and the subnet, so parallel tests and test
//! processes never collide; dropping the guard deletes the namespaces and
//! the veths with them, also when the test panics.

use std::process::Command;

use crate::common::{ServerProc, ip, netns_add_or_skip, ns_exec, ns_server, run_ok};

/// R's interface toward B, where a test shapes.
pub const TOWARD_B: &str = "rb";
/// R's interface toward A: the server-to-client direction's egress.
pub const TOWARD_A: &str = "ra";

pub struct Path3 {
    pub a: String,
    pub r: String,
    pub b: String,
    pub subnet: u8,
}

impl Path3 {
    /// Build the path, or explain why not and return None so the caller
    /// skips (see `netns_add_or_skip`). `subnet` and `subnet + 1` must be
    /// unique to the test.
    pub fn new(subnet: u8) -> Option<Path3> {
        let pid = std::process::id();
        let [a, r, b] = ["p", "q", "s"].map(|end| format!("thr{pid}{end}{subnet}"));
        if !netns_add_or_skip(&a) {
            return None;
        }
        let path = Path3 { a, r, b, subnet };
        let (a, r, b) = (path.a.as_str(), path.r.as_str(), path.b.as_str());
        ip(&["netns", "add", r]);
        ip(&["netns", "add", b]);
        for ns in [a, r, b] {
            run_ok(ns_exec(ns, "sysctl").args([
                "-qw",
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
            ]));
        }
        ip(&[
            "link", "add", "va", "netns", a, "type", "veth", "peer", "name", "ra", "netns", r,
        ]);
        ip(&[
            "link", "add", "vb", "netns", b, "type", "veth", "peer", "name", TOWARD_B, "netns", r,
        ]);
        let (near, far) = (subnet, subnet + 1);
        for (ns, dev, addr) in [
            (a, "va", format!("10.213.{near}.1/24")),
            (r, "ra", format!("10.213.{near}.254/24")),
            (r, TOWARD_B, format!("10.213.{far}.254/24")),
            (b, "vb", format!("10.213.{far}.1/24")),
        ] {
            ip(&["-n", ns, "addr", "add", &addr, "dev", dev]);
            ip(&["-n", ns, "link", "set", dev, "up"]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        ip(&[
            "-n",
            a,
            "route",
            "add",
            "default",
            "via",
            &format!("10.213.{near}.254"),
        ]);
        ip(&[
            "-n",
            b,
            "route",
            "add",
            "default",
            "via",
            &format!("10.213.{far}.254"),
        ]);
        run_ok(ns_exec(r, "sysctl").args(["-qw", "net.ipv4.ip_forward=1"]));
        Some(path)
    }

    /// B's address.
    pub fn addr_b(&self) -> String {
        format!("10.213.{}.1", self.subnet + 1)
    }

    /// An address on B's subnet with nothing behind it.
    pub fn addr_nobody(&self) -> String {
        format!("10.213.{}.77", self.subnet + 1)
    }

    /// Replace R's root qdisc toward B with the `tc` commands given, each
    /// an argument list after `tc` (`qdisc add dev rb root ...`).
    pub fn shape(&self, cmds: &[&[&str]]) {
        self.shape_dev(TOWARD_B, cmds);
    }

    /// Replace R's root qdisc on `dev` (TOWARD_B or TOWARD_A) with the
    /// `tc` commands given.
    pub fn shape_dev(&self, dev: &str, cmds: &[&[&str]]) {
        let _ = ns_exec(&self.r, "tc")
            .args(["qdisc", "del", "dev", dev, "root"])
            .output();
        for c in cmds {
            run_ok(ns_exec(&self.r, "tc").args(*c));
        }
    }

    /// Shape R's egress toward B with a tbf of `params` (tc's words after
    /// `tbf`: rate, burst, limit or latency).
    pub fn tbf(&self, params: &[&str]) {
        let cmd = [&["qdisc", "add", "dev", TOWARD_B, "root", "tbf"], params].concat();
        self.shape(&[&cmd]);
    }

    /// Shape R's egress toward B with htb at `rate` (tc's spelling).
    pub fn htb(&self, rate: &str) {
        self.htb_on(TOWARD_B, rate);
    }

    /// Shape R's egress on `dev` with htb at `rate`: its bucket is small
    /// (shared/TESTING.md).
    pub fn htb_on(&self, dev: &str, rate: &str) {
        self.htb_class(dev, &["rate", rate]);
    }

    /// Shape R's egress toward B with htb at `rate` and a bucket (rate and
    /// ceil alike) of `burst` (tc's spelling).
    pub fn htb_burst(&self, rate: &str, burst: &str) {
        self.htb_class(TOWARD_B, &["rate", rate, "burst", burst, "cburst", burst]);
    }

    fn htb_class(&self, dev: &str, params: &[&str]) {
        let class = [
            &[
                "class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb",
            ],
            params,
        ]
        .concat();
        self.shape_dev(
            dev,
            &[
                &[
                    "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "1",
                ],
                &class,
            ],
        );
    }

    /// Set the MTU of every veth on the path (both ends of both links).
    pub fn mtu(&self, mtu: &str) {
        for (ns, dev) in [
            (&self.a, "va"),
            (&self.r, TOWARD_A),
            (&self.r, TOWARD_B),
            (&self.b, "vb"),
        ] {
            ip(&["-n", ns, "link", "set", dev, "mtu", mtu]);
        }
    }

    /// Packets R's qdiscs on `dev` have dropped so far (`tc -s`: the
    /// kernel's own count).
    pub fn drops(&self, dev: &str) -> u64 {
        let out = run_ok(ns_exec(&self.r, "tc").args(["-s", "-j", "qdisc", "show", "dev", dev]));
        let qdiscs: serde_json::Value =
            serde_json::from_slice(&out.stdout).expect("tc -j prints JSON");
        qdiscs
            .as_array()
            .expect("tc -j: a list of qdiscs")
            .iter()
            .map(|q| q["drops"].as_u64().unwrap_or(0))
            .sum()
    }

    /// A `thrum server` in B.
    pub fn server(&self) -> ServerProc {
        ns_server(&self.b, &self.addr_b())
    }

    /// `program` in A.
    pub fn in_a(&self, program: &str) -> Command {
        ns_exec(&self.a, program)
    }
}

impl Drop for Path3 {
    fn drop(&mut self) {
        for ns in [&self.a, &self.r, &self.b] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}
