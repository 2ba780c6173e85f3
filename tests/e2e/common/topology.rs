//! The one namespace topology of the shaped-link tests: a line of three
//! namespaces, A (client) — R (router) — B (server), on
//! 10.NET.SUBNET.0/24 (A .1, R .254) and 10.NET.SUBNET+1.0/24 (B .1, R
//! .254), default routes through R, IPv6 off (router solicitations, MLD
//! reports and DAD probes would otherwise cross the qdiscs and land in the
//! counters at unpredictable moments). Tests put tbf, htb or htb with a
//! bfifo under it on R's egresses, where forwarded packets that a qdisc
//! drops are real loss and its rate is the path's narrow link
//! (shared/TESTING.md, "Three hosts"); a shaper on the sender's own
//! interface would never drop, the kernel holding the socket back instead.
//! An extra unshaped R — B link can carry TCP around the shaper
//! ([`Path3::tcp_around`]).
//!
//! bench/lib/netns.sh builds the same path, with the same interface names,
//! for the bench scripts.
//!
//! Where a test needs no router (a shaper on the sender's own interface,
//! which holds the socket back instead of dropping; the sensors reading a
//! veth), [`Pair`] is the same path without R: A and B joined by one veth
//! `va`–`vb`, built by the same steps.
//!
//! Namespace names carry the process id, NET and SUBNET, so parallel tests
//! and test processes never collide; dropping the guard deletes the
//! namespaces and the veths with them, also when the test panics. Declare
//! it before any process running inside it, so that those go first.

use std::process::Command;

use super::command::{NICED, Thrum};
use super::netns::{ip, netns_add_or_skip, ns_exec, ns_server, run_ok};
use super::processes::{ServerProc, bin};

/// A's interface, toward R. (Not "a" or "br": `ip link add` reads those
/// as abbreviations of `address` and `broadcast`.)
pub const VETH_A: &str = "va";
/// R's interface toward A: the server-to-client direction's egress.
pub const TOWARD_A: &str = "ra";
/// R's interface toward B, where a test shapes the client-to-server way.
pub const TOWARD_B: &str = "rb";
/// B's interface, toward R.
pub const VETH_B: &str = "vb";
/// The unshaped R — B link of [`Path3::tcp_around`]: R's end and B's.
pub const AROUND_R: &str = "rc";
pub const AROUND_B: &str = "vc";

pub struct Path3 {
    pub a: String,
    pub r: String,
    pub b: String,
    /// The second octet of every address: 10.NET.x.y.
    pub net: u8,
    pub subnet: u8,
}

impl Path3 {
    /// The path on 10.213.`subnet`.0/24 and 10.213.`subnet`+1.0/24 (see
    /// [`Path3::build`]).
    pub fn new(subnet: u8) -> Option<Path3> {
        Path3::build(213, subnet)
    }

    /// Build the path on 10.`net`.`subnet`.0/24 and
    /// 10.`net`.`subnet`+1.0/24, unshaped, or explain why not and return
    /// None so the caller skips (see `netns_add_or_skip`). `net` and
    /// `subnet` together must be unique to the test: the names carry
    /// them, and the process id alone does not separate tests running in
    /// threads of one process.
    pub fn build(net: u8, subnet: u8) -> Option<Path3> {
        let [a, r, b] = ["a", "r", "b"].map(|end| ns_name(net, subnet, end));
        if !netns_add_or_skip(&a) {
            return None;
        }
        // From here on the guard exists, so a failing step still cleans up.
        let path = Path3 {
            a,
            r,
            b,
            net,
            subnet,
        };
        let (a, r, b) = (path.a.as_str(), path.r.as_str(), path.b.as_str());
        ip(&["netns", "add", r]);
        ip(&["netns", "add", b]);
        no_ipv6(&[a, r, b]);
        veth((a, VETH_A), (r, TOWARD_A));
        veth((b, VETH_B), (r, TOWARD_B));
        let (near, far) = (path.near(), path.far());
        for (ns, dev, addr) in [
            (a, VETH_A, format!("{near}.1/24")),
            (r, TOWARD_A, format!("{near}.254/24")),
            (r, TOWARD_B, format!("{far}.254/24")),
            (b, VETH_B, format!("{far}.1/24")),
        ] {
            addr_up(ns, dev, &addr);
        }
        ip(&[
            "-n",
            a,
            "route",
            "add",
            "default",
            "via",
            &format!("{near}.254"),
        ]);
        ip(&[
            "-n",
            b,
            "route",
            "add",
            "default",
            "via",
            &format!("{far}.254"),
        ]);
        run_ok(ns_exec(r, "sysctl").args(["-qw", "net.ipv4.ip_forward=1"]));
        Some(path)
    }

    /// A's and R's /24, without the last octet.
    fn near(&self) -> String {
        format!("10.{}.{}", self.net, self.subnet)
    }

    /// B's and R's /24, without the last octet.
    fn far(&self) -> String {
        format!("10.{}.{}", self.net, self.subnet + 1)
    }

    /// B's address.
    pub fn addr_b(&self) -> String {
        format!("{}.1", self.far())
    }

    /// An address on B's subnet with nothing behind it.
    pub fn addr_nobody(&self) -> String {
        format!("{}.77", self.far())
    }

    /// Carry TCP toward B around R's shaper: a second, unshaped veth from
    /// R to B on 10.`net`+1.`subnet`.0/24 (R .254, B .1), and a routing
    /// rule in R on the IP protocol that sends TCP to B's subnet over it
    /// (B takes it there: a local address is local on every interface,
    /// and rp_filter is off in a new namespace).
    pub fn tcp_around(&self) {
        let (r, b) = (self.r.as_str(), self.b.as_str());
        veth((r, AROUND_R), (b, AROUND_B));
        let around = format!("10.{}.{}", self.net + 1, self.subnet);
        addr_up(r, AROUND_R, &format!("{around}.254/24"));
        addr_up(b, AROUND_B, &format!("{around}.1/24"));
        ip(&["-n", r, "rule", "add", "ipproto", "tcp", "lookup", "100"]);
        ip(&[
            "-n",
            r,
            "route",
            "add",
            &format!("{}.0/24", self.far()),
            "via",
            &format!("{around}.1"),
            "dev",
            AROUND_R,
            "table",
            "100",
        ]);
    }

    /// `tc ARGS..` in R.
    pub fn tc(&self, args: &[&str]) {
        run_ok(ns_exec(&self.r, "tc").args(args));
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
            self.tc(c);
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

    /// Shape R's egress on `dev` with htb at `rate` (r2q 100) and a byte
    /// FIFO of `limit` bytes under its class 1:1: the buffer's depth is
    /// its delay, 8·limit/rate at most.
    pub fn htb_bfifo(&self, dev: &str, rate: &str, limit: &str) {
        self.shape_dev(
            dev,
            &[
                &[
                    "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "1",
                    "r2q", "100",
                ],
                &[
                    "class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate",
                    rate,
                ],
                &[
                    "qdisc", "add", "dev", dev, "parent", "1:1", "bfifo", "limit", limit,
                ],
            ],
        );
    }

    /// Set the MTU of every veth on the path (both ends of both links).
    pub fn mtu(&self, mtu: &str) {
        for (ns, dev) in [
            (&self.a, VETH_A),
            (&self.r, TOWARD_A),
            (&self.r, TOWARD_B),
            (&self.b, VETH_B),
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

    /// A `thrum server` in B, listening on B's address.
    pub fn server(&self) -> ServerProc {
        ns_server(&self.b, &self.addr_b())
    }

    /// The same at nice −10 ([`NICED`]).
    pub fn niced_server(&self) -> ServerProc {
        niced_server(&self.b, &self.addr_b())
    }

    /// A `thrum server` in B on `port`, a port its clients expect.
    pub fn server_on(&self, port: u16) -> ServerProc {
        let mut server = ServerProc::start_with_port(ns_exec(&self.b, bin()), &self.addr_b(), port);
        server.ns = Some(self.b.clone());
        server
    }

    /// `program` in A.
    pub fn in_a(&self, program: &str) -> Command {
        ns_exec(&self.a, program)
    }

    /// `thrum run TEST -H SERVER` in A, with the short-run defaults.
    pub fn client(&self, server: &ServerProc, test: &str) -> Thrum {
        Thrum::run(test).netns(&self.a).host(&server.addr)
    }
}

impl Drop for Path3 {
    fn drop(&mut self) {
        delete(&[&self.a, &self.r, &self.b]);
    }
}

/// A and B joined by one veth, `va`–`vb`, on 10.NET.SUBNET.0/24 (A .1,
/// B .2), IPv6 off, no router (module doc), or on fd00:NET:SUBNET::/64
/// alone ([`Pair::build_v6`]); deleted on drop.
pub struct Pair {
    pub a: String,
    pub b: String,
    pub net: u8,
    pub subnet: u8,
    v6: bool,
}

impl Pair {
    /// Build the pair, or explain why not and return None so the caller
    /// skips. `net` and `subnet` together must be unique to the test.
    pub fn build(net: u8, subnet: u8) -> Option<Pair> {
        Pair::make(net, subnet, false)
    }

    /// The pair over IPv6 alone: fd00:NET:SUBNET::1 (A) and ::2 (B), /64,
    /// without duplicate address detection (so the addresses are usable
    /// at once).
    pub fn build_v6(net: u8, subnet: u8) -> Option<Pair> {
        Pair::make(net, subnet, true)
    }

    fn make(net: u8, subnet: u8, v6: bool) -> Option<Pair> {
        let [a, b] = ["pa", "pb"].map(|end| ns_name(net, subnet, end));
        if !netns_add_or_skip(&a) {
            return None;
        }
        let pair = Pair {
            a,
            b,
            net,
            subnet,
            v6,
        };
        let (a, b) = (pair.a.as_str(), pair.b.as_str());
        ip(&["netns", "add", b]);
        if !v6 {
            no_ipv6(&[a, b]);
        }
        veth((a, VETH_A), (b, VETH_B));
        let (len, nodad): (u8, &[&str]) = if v6 { (64, &["nodad"]) } else { (24, &[]) };
        for (ns, dev, addr) in [(a, VETH_A, pair.addr_a()), (b, VETH_B, pair.addr_b())] {
            let cidr = format!("{addr}/{len}");
            ip(&[&["-n", ns, "addr", "add", &cidr, "dev", dev][..], nodad].concat());
            ip(&["-n", ns, "link", "set", dev, "up"]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        Some(pair)
    }

    /// A's address.
    pub fn addr_a(&self) -> String {
        self.host(1)
    }

    /// B's address.
    pub fn addr_b(&self) -> String {
        self.host(2)
    }

    fn host(&self, n: u8) -> String {
        if self.v6 {
            format!("fd00:{}:{}::{n}", self.net, self.subnet)
        } else {
            format!("10.{}.{}.{n}", self.net, self.subnet)
        }
    }

    /// Set the MTU of the veth's both ends.
    pub fn mtu(&self, mtu: &str) {
        for (ns, dev) in [(&self.a, VETH_A), (&self.b, VETH_B)] {
            ip(&["-n", ns, "link", "set", dev, "mtu", mtu]);
        }
    }

    /// `tc ARGS..` in namespace `ns` (A or B: each shapes its own egress).
    pub fn tc(&self, ns: &str, args: &[&str]) {
        run_ok(ns_exec(ns, "tc").args(args));
    }

    /// A `thrum server` in B, listening on B's address.
    pub fn server(&self) -> ServerProc {
        ns_server(&self.b, &self.addr_b())
    }

    /// The same at nice −10 ([`NICED`]).
    pub fn niced_server(&self) -> ServerProc {
        niced_server(&self.b, &self.addr_b())
    }

    /// `thrum run TEST -H SERVER` in A, with the short-run defaults.
    pub fn client(&self, server: &ServerProc, test: &str) -> Thrum {
        Thrum::run(test).netns(&self.a).host(&server.addr)
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        delete(&[&self.a, &self.b]);
    }
}

/// `thr{pid}-{net}-{subnet}{end}`: unique to the process and the test.
fn ns_name(net: u8, subnet: u8, end: &str) -> String {
    format!("thr{}-{net}-{subnet}{end}", std::process::id())
}

/// IPv6 off in each namespace (module doc).
pub fn no_ipv6(namespaces: &[&str]) {
    for ns in namespaces {
        run_ok(ns_exec(ns, "sysctl").args([
            "-qw",
            "net.ipv6.conf.all.disable_ipv6=1",
            "net.ipv6.conf.default.disable_ipv6=1",
        ]));
    }
}

/// A veth with one end in each namespace, created there directly, so the
/// names never exist in the root namespace and cannot collide between
/// tests or test processes.
pub fn veth((ns1, dev1): (&str, &str), (ns2, dev2): (&str, &str)) {
    ip(&[
        "link", "add", dev1, "netns", ns1, "type", "veth", "peer", "name", dev2, "netns", ns2,
    ]);
}

/// Give `dev` in `ns` the address `cidr`, and bring it and the
/// namespace's loopback up.
pub fn addr_up(ns: &str, dev: &str, cidr: &str) {
    ip(&["-n", ns, "addr", "add", cidr, "dev", dev]);
    ip(&["-n", ns, "link", "set", dev, "up"]);
    ip(&["-n", ns, "link", "set", "lo", "up"]);
}

/// Delete the namespaces, best effort and never a panic: this also runs
/// while unwinding.
pub fn delete(namespaces: &[&str]) {
    for ns in namespaces {
        let _ = Command::new("ip").args(["netns", "del", ns]).output();
    }
}

/// A `thrum server` in namespace `ns` on `addr`, at nice −10 ([`NICED`]).
fn niced_server(ns: &str, addr: &str) -> ServerProc {
    let mut c = ns_exec(ns, NICED[0]);
    c.args(&NICED[1..]).arg(bin());
    ServerProc::start_with(c, addr, &[])
}
