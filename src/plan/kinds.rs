//! The tests thrum runs and the facts of each: one [`Traits`] row a test.
//!
//! A test's facts that need no workload — its transport, which end sends,
//! its figure of merit, how it counts loss, and which options apply to it
//! (`--burst`, what `--rate` means, `--max-inflight`, `--close`, ...) —
//! live here, below everything that asks them: the plan's validation, the
//! command line, the mix grammar, the client, the server, the analysis and
//! the exporters read [`TestKind::traits`] instead of matching the test
//! kind each in their own way. What needs the workload (the flow builders,
//! the UDP I/O path, the server's buffers) is the test's row in
//! `workload::kinds`, one layer up. An option's "applies only to …" list
//! is built from this table ([`TestKind::named`]), so it cannot drift from
//! what the check allows.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::{PlanError, TestPlan};

/// The test types. Names are the lower-case ones; netperf's upper-case names
/// (`TCP_RR`, `TCP_STREAM`, ...) are accepted as aliases.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TestKind {
    TcpStream,
    TcpMaerts,
    TcpBidir,
    TcpRr,
    TcpCrr,
    TcpCc,
    UdpStream,
    UdpRr,
    /// Path capacity by packet trains (`workload::capacity`).
    Capacity,
}

impl TestKind {
    /// Every test, in the order `thrum suite` runs them.
    pub const ALL: [TestKind; 9] = [
        TestKind::TcpStream,
        TestKind::TcpMaerts,
        TestKind::TcpBidir,
        TestKind::TcpRr,
        TestKind::TcpCrr,
        TestKind::TcpCc,
        TestKind::UdpStream,
        TestKind::UdpRr,
        TestKind::Capacity,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TestKind::TcpStream => "tcp_stream",
            TestKind::TcpMaerts => "tcp_maerts",
            TestKind::TcpBidir => "tcp_bidir",
            TestKind::TcpRr => "tcp_rr",
            TestKind::TcpCrr => "tcp_crr",
            TestKind::TcpCc => "tcp_cc",
            TestKind::UdpStream => "udp_stream",
            TestKind::UdpRr => "udp_rr",
            TestKind::Capacity => "capacity",
        }
    }

    /// This test's facts.
    pub fn traits(self) -> &'static Traits {
        let t = &TRAITS[self as usize];
        debug_assert_eq!(t.kind, self, "TRAITS is in TestKind's order");
        t
    }

    /// The tests whose facts pass `pick`, named as an error's "applies
    /// only to" list: `tcp_rr, tcp_crr, tcp_cc and udp_rr`, in
    /// [`TestKind::ALL`]'s order.
    pub fn named(pick: impl Fn(&Traits) -> bool) -> String {
        let names: Vec<&str> = TestKind::ALL
            .into_iter()
            .filter(|k| pick(k.traits()))
            .map(TestKind::name)
            .collect();
        match names.split_last() {
            None => String::new(),
            Some((last, [])) => last.to_string(),
            Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        }
    }

    /// Bulk tests report bits/s; the others report transactions/s.
    pub fn is_stream(self) -> bool {
        self.traits().merit == Merit::Throughput
    }

    pub fn is_udp(self) -> bool {
        self.traits().transport == Transport::Udp
    }

    /// Request/response tests, where `--burst` applies.
    pub fn is_rr(self) -> bool {
        self.traits().burst
    }

    /// Tests that open one connection per transaction instead of long-lived flows.
    pub fn is_connect(self) -> bool {
        self.traits().transport == Transport::TcpPerTransaction
    }
}

impl fmt::Display for TestKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for TestKind {
    type Err = PlanError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.to_ascii_lowercase();
        TestKind::ALL
            .into_iter()
            .find(|k| k.name() == lower)
            .ok_or_else(|| PlanError::UnknownTest(s.to_string()))
    }
}

/// How a test's flows reach the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// One long-lived TCP connection per flow, opened before the start; it
    /// presents the session token and its flow id first.
    Tcp,
    /// A new TCP connection per transaction; the server accepts on one
    /// listener with one flow per worker thread.
    TcpPerTransaction,
    /// One connected UDP socket per flow at each end.
    Udp,
}

/// What a test's headline figure counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Merit {
    /// Bits per second received (goodput), in each direction that carries data.
    Throughput,
    /// Transactions per second, counted where the response completes (the client).
    Transactions,
}

impl Merit {
    /// The unit the human output prints beside the figure.
    pub fn unit(self) -> &'static str {
        match self {
            Merit::Throughput => "bit/s",
            Merit::Transactions => "trans/s",
        }
    }
}

/// How a test counts what did not arrive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loss {
    /// TCP: nothing is lost (retransmissions are reported apart).
    None,
    /// Sequence-numbered datagrams, counted by the receiver; the client's
    /// total sent per flow goes in `finish`, so the final loss is exact.
    Datagrams,
    /// Transactions whose response did not come within `--rr-timeout`,
    /// counted by the client.
    Transactions,
}

/// What `--rate` sets for a test: one flag in the test's own unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rate {
    /// No rate: the TCP bulk tests pace with `--pacing-rate` instead.
    None,
    /// Transactions per second offered in all, open loop
    /// (`TestPlan::offered_per_s`).
    Transactions,
    /// Bits per second of datagram payload per flow (`TestPlan::rate_bps`).
    PayloadBits,
    /// The packet trains' pace, bits per second (`TestPlan::rate_bps`).
    ProbeBits,
}

impl Rate {
    /// `--rate` sets a rate in bits per second (`TestPlan::rate_bps`).
    pub fn in_bits(self) -> bool {
        matches!(self, Rate::PayloadBits | Rate::ProbeBits)
    }
}

/// One test's facts, for the plan, the command line and everything above.
#[derive(Debug)]
pub struct Traits {
    pub kind: TestKind,
    pub transport: Transport,
    /// On each flow, does the client send data, and does it receive? The
    /// server does the crossed: request/response tests do both at both ends.
    pub client_sends: bool,
    pub client_receives: bool,
    pub merit: Merit,
    pub loss: Loss,
    /// Does `--burst` (transactions in flight per flow) apply?
    pub burst: bool,
    /// Does `--delay` (a pause between a response and the next request)
    /// apply? tcp_rr's closed loop, whose flow waits on one stream.
    pub delay: bool,
    /// What `--rate` means for the test.
    pub rate: Rate,
    /// Open loop, does `--max-inflight` bound a flow's transactions in
    /// flight? (A connection test has one connection open per flow.)
    pub max_inflight: bool,
    /// Does `--close` (how the client ends each connection) apply?
    pub close: bool,
    /// Do `--zerocopy` sends apply?
    pub zerocopy: bool,
    /// Does `--call-times` (timing each send and receive call) apply?
    pub call_times: bool,
    /// Does `--gso` (UDP_SEGMENT and UDP_GRO) apply?
    pub gso: bool,
    /// Does `--spin` (workers poll their one kind of long-lived socket
    /// instead of sleeping) apply? The request/response tests: their flows
    /// keep one socket each and treat an empty receive as "not yet".
    pub spin: bool,
    /// Does `--one-way` (send and arrival stamps in each transaction) apply?
    /// The request/response tests on long-lived flows: their requests and
    /// responses carry the stamps (`workload::one_way`), so a mix's
    /// probes of such a test can too.
    pub one_way: bool,
    /// Do `--reverse` and `--both` apply? (The TCP bulk tests are each
    /// other's reverse: tcp_maerts, tcp_bidir.)
    pub reverse: bool,
    /// The flag that sets the bytes per send call, as errors name it.
    pub send_flag: &'static str,
    /// The fewest bytes per send call the test's datagrams hold (capacity's
    /// carry their train's header, `workload::capacity::TRAIN_HEADER`).
    pub min_send_bytes: u64,
    /// Without its send flag, does a datagram fill the path MTU toward the
    /// server (`cli::RunRequest::fill_path_mtu`)? capacity's do: the frame
    /// whose spacing the narrow link sets is then the one the path carries.
    pub fills_path_mtu: bool,
    /// Does `--local-hosts` apply: may the server take the test's data
    /// flows from listed addresses it cannot verify as the client's? A
    /// long-lived TCP flow or a connection presents the session token; a
    /// UDP flow proves nothing, so only where the server sends nothing
    /// unasked (udp_stream receives; udp_rr answers what arrives from the
    /// flow's connected address). Not capacity: with `--reverse` its server
    /// sends trains on its own.
    pub local_hosts: bool,
    /// What `--chart` draws of one run of the test alone (a mix's chart is
    /// its time series); None: `--chart` is refused for it.
    pub chart: Option<Chart>,
    /// Does `thrum suite` run it? Not capacity: it measures a path's narrow
    /// link, which loopback, suite's usual server, has not.
    pub in_suite: bool,
}

/// A chart of one run of a single test (`--chart`, and `report --out`'s
/// chart.svg).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chart {
    /// capacity's packet-train dispersion histogram (`export::capacity`).
    Dispersion,
}

impl Chart {
    /// What it is, as `--chart`'s refusal names it after the test's name.
    pub fn name(self) -> &'static str {
        match self {
            Chart::Dispersion => "dispersion histogram",
        }
    }
}

/// Which ends send on a flow, or in a session: the row's way, crossed
/// where the plan turns it (`--reverse`, `--both`), as tcp_maerts is
/// tcp_stream's row crossed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ways {
    pub client_sends: bool,
    pub client_receives: bool,
}

impl Traits {
    /// Flow `flow`'s ways under `plan`'s direction.
    pub fn flow_ways(&self, plan: &TestPlan, flow: u32) -> Ways {
        if plan.direction.crosses(flow) {
            Ways {
                client_sends: self.client_receives,
                client_receives: self.client_sends,
            }
        } else {
            Ways {
                client_sends: self.client_sends,
                client_receives: self.client_receives,
            }
        }
    }

    /// The session's ways: any flow's, so `--both` carries data both ways
    /// as tcp_bidir does.
    pub fn ways(&self, plan: &TestPlan) -> Ways {
        let (a, b) = (self.flow_ways(plan, 0), self.flow_ways(plan, 1));
        let one_flow = plan.flows < 2;
        Ways {
            client_sends: a.client_sends || (!one_flow && b.client_sends),
            client_receives: a.client_receives || (!one_flow && b.client_receives),
        }
    }

    /// The server's flow directions: the client's, crossed.
    pub fn server_sends(&self) -> bool {
        self.client_receives
    }

    pub fn server_receives(&self) -> bool {
        self.client_sends
    }

    /// Are the send calls' bytes (`--send-size`) one datagram's payload?
    pub fn send_is_datagram(&self) -> bool {
        self.transport == Transport::Udp && self.merit == Merit::Throughput
    }

    /// Are the request and response (`--rr-size`) one datagram's payload each?
    pub fn rr_is_datagram(&self) -> bool {
        self.transport == Transport::Udp && self.merit == Merit::Transactions
    }

    /// Is the test's traffic a load whose goodput a mix shares out per
    /// direction? capacity's trains probe the path instead.
    pub fn carries_load(&self) -> bool {
        self.merit == Merit::Throughput && self.rate != Rate::ProbeBits
    }
}

/// A bulk TCP test: everything but its ways.
const TCP_BULK: Traits = Traits {
    kind: TestKind::TcpStream,
    transport: Transport::Tcp,
    client_sends: true,
    client_receives: false,
    merit: Merit::Throughput,
    loss: Loss::None,
    burst: false,
    delay: false,
    rate: Rate::None,
    max_inflight: false,
    close: false,
    zerocopy: true,
    call_times: true,
    gso: false,
    spin: false,
    one_way: false,
    reverse: false,
    send_flag: "--send-size",
    min_send_bytes: 1,
    fills_path_mtu: false,
    local_hosts: true,
    chart: None,
    in_suite: true,
};

/// A request/response test: long-lived flows, transactions in flight.
const RR: Traits = Traits {
    kind: TestKind::TcpRr,
    transport: Transport::Tcp,
    client_sends: true,
    client_receives: true,
    merit: Merit::Transactions,
    loss: Loss::None,
    burst: true,
    delay: true,
    rate: Rate::Transactions,
    max_inflight: true,
    close: false,
    zerocopy: false,
    call_times: false,
    gso: false,
    spin: true,
    one_way: true,
    reverse: false,
    send_flag: "--send-size",
    min_send_bytes: 1,
    fills_path_mtu: false,
    local_hosts: true,
    chart: None,
    in_suite: true,
};

/// A connection test: one connection per transaction, one open per flow.
const CONNECT: Traits = Traits {
    kind: TestKind::TcpCrr,
    transport: Transport::TcpPerTransaction,
    burst: false,
    delay: false,
    max_inflight: false,
    close: true,
    spin: false,
    one_way: false,
    ..RR
};

/// Every test's facts, in [`TestKind`]'s order (a unit test checks it).
pub static TRAITS: [Traits; 9] = [
    TCP_BULK,
    Traits {
        kind: TestKind::TcpMaerts,
        client_sends: false,
        client_receives: true,
        ..TCP_BULK
    },
    Traits {
        kind: TestKind::TcpBidir,
        client_receives: true,
        ..TCP_BULK
    },
    RR,
    CONNECT,
    Traits {
        kind: TestKind::TcpCc,
        ..CONNECT
    },
    Traits {
        kind: TestKind::UdpStream,
        transport: Transport::Udp,
        loss: Loss::Datagrams,
        rate: Rate::PayloadBits,
        zerocopy: true,
        call_times: false,
        gso: true,
        ..TCP_BULK
    },
    Traits {
        kind: TestKind::UdpRr,
        transport: Transport::Udp,
        loss: Loss::Transactions,
        delay: false,
        ..RR
    },
    Traits {
        kind: TestKind::Capacity,
        transport: Transport::Udp,
        rate: Rate::ProbeBits,
        zerocopy: false,
        call_times: false,
        reverse: true,
        send_flag: "--packet-size",
        min_send_bytes: 12,
        fills_path_mtu: true,
        local_hosts: false,
        chart: Some(Chart::Dispersion),
        in_suite: false,
        ..TCP_BULK
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_its_own_row_in_order() {
        for k in TestKind::ALL {
            assert_eq!(k.traits().kind, k);
        }
        assert_eq!(TRAITS.len(), TestKind::ALL.len());
    }

    /// The facts that follow from others hold in every row, so a new row
    /// cannot say, say, that `--burst` applies to a bulk test.
    #[test]
    fn the_table_is_consistent() {
        for k in TestKind::ALL {
            let t = k.traits();
            let trans = t.merit == Merit::Transactions;
            assert!(t.client_sends || t.client_receives, "{k}: no data");
            // Transactions go both ways; a bulk test's ways are its row's.
            if trans {
                assert!(t.client_sends && t.client_receives, "{k}");
            }
            assert!(!t.burst || trans, "{k}: --burst on a bulk test");
            assert_eq!(
                t.rate == Rate::Transactions,
                trans,
                "{k}: --rate's unit is the figure of merit's"
            );
            assert!(!t.max_inflight || t.rate == Rate::Transactions, "{k}");
            assert!(!t.rate.in_bits() || t.transport == Transport::Udp, "{k}");
            assert_eq!(
                t.close,
                t.transport == Transport::TcpPerTransaction,
                "{k}: --close is how a connection test ends each connection"
            );
            // Without a connection per transaction, open loop bounds the
            // window of each flow (and closed loop the burst).
            if trans {
                assert_eq!(t.burst, t.transport != Transport::TcpPerTransaction, "{k}");
                assert_eq!(t.max_inflight, t.burst, "{k}");
            }
            assert!(
                !t.call_times || (t.transport == Transport::Tcp && !trans),
                "{k}: --call-times is for TCP bulk tests"
            );
            assert!(
                !t.zerocopy
                    || (t.transport == Transport::Tcp && !trans)
                    || k == TestKind::UdpStream,
                "{k}: --zerocopy is for TCP bulk tests and udp_stream"
            );
            assert!(!t.gso || t.send_is_datagram(), "{k}");
            assert!(!t.reverse || !trans, "{k}");
            assert!(t.loss != Loss::Datagrams || t.send_is_datagram(), "{k}");
            assert!(
                t.loss == Loss::None || t.transport == Transport::Udp,
                "{k}: TCP loses nothing"
            );
            assert_eq!(t.loss == Loss::Transactions, t.rr_is_datagram(), "{k}");
            assert!(t.min_send_bytes >= 1, "{k}");
        }
    }

    /// The columns that replaced a test named in the code (`matches!` on
    /// the kind, `== TestKind::Capacity`) say for every test what the
    /// names said.
    #[test]
    fn the_columns_that_were_names_say_what_the_names_did() {
        for k in TestKind::ALL {
            let t = k.traits();
            // `--local-hosts`: every test but the UDP ones whose server
            // sends on its own (`local_hosts_ok_for_udp` was udp_stream
            // and udp_rr).
            let udp_ok = matches!(k, TestKind::UdpStream | TestKind::UdpRr);
            assert_eq!(
                t.local_hosts,
                t.transport != Transport::Udp || udp_ok,
                "{k}"
            );
            let capacity = k == TestKind::Capacity;
            assert_eq!(t.fills_path_mtu, capacity, "{k}");
            assert_eq!(t.chart, capacity.then_some(Chart::Dispersion), "{k}");
            assert_eq!(t.in_suite, !capacity, "{k}");
            // A datagram filled to the path MTU is one the test's own
            // send flag sizes.
            assert!(!t.fills_path_mtu || t.send_is_datagram(), "{k}");
        }
        assert_eq!(
            TestKind::named(|t| !t.local_hosts),
            "capacity",
            "--local-hosts' list"
        );
    }

    #[test]
    fn applies_lists_come_from_the_table() {
        assert_eq!(TestKind::named(|t| t.burst), "tcp_rr and udp_rr");
        assert_eq!(TestKind::named(|t| t.gso), "udp_stream");
        assert_eq!(
            TestKind::named(|t| t.zerocopy),
            "tcp_stream, tcp_maerts, tcp_bidir and udp_stream"
        );
        assert_eq!(
            TestKind::named(|t| t.merit == Merit::Transactions),
            "tcp_rr, tcp_crr, tcp_cc and udp_rr"
        );
        assert_eq!(TestKind::named(|_| false), "");
    }

    /// The tables both ends used to write out by hand, now derived from one
    /// row: which end sends on a flow.
    #[test]
    fn directions_cross_between_the_ends() {
        let t = TestKind::TcpStream.traits();
        assert!(t.client_sends && !t.client_receives);
        assert!(!t.server_sends() && t.server_receives());
        let m = TestKind::TcpMaerts.traits();
        assert!(m.server_sends() && !m.server_receives());
        for k in [TestKind::TcpBidir, TestKind::TcpRr, TestKind::UdpRr] {
            let d = k.traits();
            assert!(d.server_sends() && d.server_receives(), "{k}");
        }
    }

    #[test]
    fn reverse_and_both_cross_the_row_per_flow() {
        let d = TestKind::Capacity.traits();
        let mut p = TestPlan::new(TestKind::Capacity);
        let fwd = Ways {
            client_sends: true,
            client_receives: false,
        };
        let rev = Ways {
            client_sends: false,
            client_receives: true,
        };
        assert_eq!((d.flow_ways(&p, 0), d.ways(&p)), (fwd, fwd));
        p.direction = super::super::Direction::Reverse;
        assert_eq!((d.flow_ways(&p, 0), d.ways(&p)), (rev, rev));
        p.direction = super::super::Direction::Both;
        p.flows = 2;
        assert_eq!((d.flow_ways(&p, 0), d.flow_ways(&p, 1)), (fwd, rev));
        let both = d.ways(&p);
        assert!(both.client_sends && both.client_receives);
    }

    #[test]
    fn the_classes_of_tests() {
        let pick = |f: fn(TestKind) -> bool| -> Vec<TestKind> {
            TestKind::ALL.into_iter().filter(|&k| f(k)).collect()
        };
        assert_eq!(
            pick(TestKind::is_stream),
            [
                TestKind::TcpStream,
                TestKind::TcpMaerts,
                TestKind::TcpBidir,
                TestKind::UdpStream,
                TestKind::Capacity
            ]
        );
        assert_eq!(pick(TestKind::is_rr), [TestKind::TcpRr, TestKind::UdpRr]);
        assert_eq!(
            pick(TestKind::is_connect),
            [TestKind::TcpCrr, TestKind::TcpCc]
        );
        assert_eq!(
            pick(TestKind::is_udp),
            [TestKind::UdpStream, TestKind::UdpRr, TestKind::Capacity]
        );
        let datagram_send = pick(|k| k.traits().send_is_datagram());
        assert_eq!(datagram_send, [TestKind::UdpStream, TestKind::Capacity]);
        let load = pick(|k| k.traits().carries_load());
        assert_eq!(
            load,
            [
                TestKind::TcpStream,
                TestKind::TcpMaerts,
                TestKind::TcpBidir,
                TestKind::UdpStream
            ]
        );
    }
}
