//! Several tests in one session (`thrum run --mix SPEC`, the `rrul`
//! presets): the parts of a mix, the SPEC grammar that names them, DSCP
//! names, and the presets.
//!
//! A mix is one [`TestPlan`] whose `parts` each say which test runs on how
//! many flows with which options; the session shares its schedule, ticks and
//! drain, and each part gets a plan of its own ([`TestPlan::part_plans`]) so
//! that the test's row builds its flows exactly as in a single test.
//!
//! The grammar, one part after another separated by commas:
//!
//! ```text
//! SPEC   = PART { "," PART }
//! PART   = TEST [ "*" FLOWS ] { "@" OPTION }
//! OPTION = "rate=" TRANSACTIONS_PER_S   (rr tests: open loop, in all)
//!        | "dscp=" (NAME | 0..63)       (BE, BK, CS0..CS7, AF11..AF43, EF, VA)
//!        | "tos=" 0..255                (the whole TOS / traffic-class byte)
//!        | "name=" LABEL                (the part's name in the output)
//! ```
//!
//! for example `tcp_stream*4,tcp_maerts*4,udp_rr@rate=100,tcp_rr@rate=100@dscp=EF`.

use serde::{Deserialize, Serialize};

use super::{Merit, PlanError, TestKind, TestPlan, Transport};

/// The most parts a mix may have.
pub const MAX_PARTS: usize = 32;

/// One part of a mix: a test on its own flows with its own options.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PartPlan {
    /// Unique within the mix: the test's name, with `#k` when it repeats.
    pub name: String,
    pub test: TestKind,
    pub flows: u32,
    /// Open loop, transactions/s offered in all over the part's flows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offered_per_s: Option<u64>,
    /// IP_TOS / IPV6_TCLASS byte on the part's data sockets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tos: Option<u8>,
}

impl PartPlan {
    /// A latency probe: an open-loop request/response part on long-lived
    /// flows, whose latency is the figure of a latency-under-load test.
    pub fn is_probe(&self) -> bool {
        let t = self.test.traits();
        self.offered_per_s.is_some()
            && t.merit == Merit::Transactions
            && t.transport != Transport::TcpPerTransaction
    }
}

/// `--tos` and `dscp=`: the TOS byte for a DSCP name (RFC 4594's classes,
/// RFC 2474's class selectors, RFC 3246's EF, RFC 5865's VOICE-ADMIT) or a
/// number 0..=63; the DSCP sits in the byte's upper six bits.
pub fn dscp_tos(s: &str) -> Result<u8, String> {
    let up = s.to_ascii_uppercase();
    let dscp: u8 = match up.as_str() {
        "BE" | "DF" | "CS0" => 0,
        // flent's rrul marks its background flow CS1 (TOS 0x20) and calls it BK.
        "BK" | "CS1" => 8,
        "LE" => 1,
        "EF" => 46,
        "VA" => 44,
        _ => {
            if let Some(c) = up.strip_prefix("CS").and_then(|d| d.parse::<u8>().ok()) {
                if c > 7 {
                    return Err(format!("dscp={s}: class selectors are CS0..CS7"));
                }
                c << 3
            } else if let Some(af) = up.strip_prefix("AF") {
                let b = af.as_bytes();
                if b.len() != 2 || !(b'1'..=b'4').contains(&b[0]) || !(b'1'..=b'3').contains(&b[1])
                {
                    return Err(format!("dscp={s}: assured forwarding is AF11..AF43"));
                }
                ((b[0] - b'0') << 3) | ((b[1] - b'0') << 1)
            } else {
                match s.parse::<u8>() {
                    Ok(n) if n < 64 => n,
                    _ => {
                        return Err(format!(
                            "dscp={s} is not a DSCP (accepted: BE, BK, CS0..CS7, AF11..AF43, EF, VA, or 0..63)"
                        ));
                    }
                }
            }
        }
    };
    Ok(dscp << 2)
}

/// Parse a SPEC into its parts; an error names the part (its position and
/// its text) and what is wrong with it.
pub fn parse_spec(spec: &str) -> Result<Vec<PartPlan>, PlanError> {
    let texts: Vec<&str> = spec.split(',').map(str::trim).collect();
    if texts.len() > MAX_PARTS {
        return Err(PlanError::Invalid(format!(
            "--mix has {} parts (accepted: 1..={MAX_PARTS})",
            texts.len()
        )));
    }
    let mut parts: Vec<PartPlan> = Vec::with_capacity(texts.len());
    for (i, text) in texts.iter().enumerate() {
        let at =
            |why: String| PlanError::Invalid(format!("--mix part {} '{}': {why}", i + 1, text));
        if text.is_empty() {
            return Err(at(
                "is empty (parts are separated by single commas, e.g. tcp_stream*4,tcp_rr@rate=100)"
                    .into(),
            ));
        }
        let mut pieces = text.split('@');
        let head = pieces.next().unwrap_or_default();
        let (test, flows) = match head.split_once('*') {
            Some((t, n)) => {
                let n: u32 = n.parse().map_err(|_| {
                    at(format!(
                        "'*{n}' is not a flow count (accepted: *1..*{})",
                        super::limits::MAX_FLOWS
                    ))
                })?;
                (t, n)
            }
            None => (head, 1),
        };
        let test: TestKind = test.parse().map_err(|e: PlanError| at(e.to_string()))?;
        if flows == 0 || flows > super::limits::MAX_FLOWS {
            return Err(at(format!(
                "*{flows} flows is out of range (accepted: 1..={})",
                super::limits::MAX_FLOWS
            )));
        }
        let mut part = PartPlan {
            name: String::new(),
            test,
            flows,
            offered_per_s: None,
            tos: None,
        };
        for opt in pieces {
            let (k, v) = opt.split_once('=').ok_or_else(|| {
                at(format!(
                    "option '{opt}' is not KEY=VALUE (accepted: rate=, dscp=, tos=, name=)"
                ))
            })?;
            match k {
                "rate" => {
                    let r: u64 = v
                        .parse()
                        .map_err(|_| at(format!("rate={v} is not a number of transactions/s")))?;
                    part.offered_per_s = Some(r);
                }
                "dscp" => part.tos = Some(dscp_tos(v).map_err(at)?),
                "tos" => {
                    part.tos =
                        Some(v.parse().map_err(|_| {
                            at(format!("tos={v} is out of range (accepted: 0..=255)"))
                        })?)
                }
                "name" => {
                    if v.is_empty()
                        || !v
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || "_-.#".contains(c))
                    {
                        return Err(at(format!(
                            "name={v}: a name is letters, digits and _-.# only"
                        )));
                    }
                    part.name = v.to_string();
                }
                _ => {
                    return Err(at(format!(
                        "unknown option '{k}' (accepted: rate=, dscp=, tos=, name=)"
                    )));
                }
            }
        }
        parts.push(part);
    }
    name_parts(&mut parts)?;
    Ok(parts)
}

/// Give every unnamed part its test's name, with `#k` from the second of
/// the same test on; two parts of the same name are an error.
fn name_parts(parts: &mut [PartPlan]) -> Result<(), PlanError> {
    for i in 0..parts.len() {
        if parts[i].name.is_empty() {
            let base = parts[i].test.name();
            let same = parts[..i].iter().filter(|p| p.test.name() == base).count();
            parts[i].name = if same == 0 {
                base.to_string()
            } else {
                format!("{base}#{}", same + 1)
            };
        }
        if parts[..i].iter().any(|p| p.name == parts[i].name) {
            return Err(PlanError::Invalid(format!(
                "--mix part {}: the name '{}' is taken by an earlier part (give it name=LABEL)",
                i + 1,
                parts[i].name
            )));
        }
    }
    Ok(())
}

/// A named SPEC: `thrum run rrul` runs the `rrul` preset's SPEC as a mix.
pub struct Preset {
    pub name: &'static str,
    pub spec: &'static str,
    pub about: &'static str,
}

/// The presets, as flent names its tests. The probes are one udp_rr and
/// one tcp_rr flow at 10 transactions/s each, open loop: a low fixed rate,
/// so that they measure the queue rather than add to it, free of
/// coordinated omission.
pub const PRESETS: &[Preset] = &[
    Preset {
        name: "rrul",
        spec: "tcp_stream@dscp=BE,tcp_stream@dscp=BK,tcp_stream@dscp=CS5,tcp_stream@dscp=EF,\
               tcp_maerts@dscp=BE,tcp_maerts@dscp=BK,tcp_maerts@dscp=CS5,tcp_maerts@dscp=EF,\
               udp_rr@rate=10@dscp=EF,tcp_rr@rate=10@dscp=BE",
        about: "4 flows up and 4 down marked BE/BK/CS5/EF, with UDP and TCP latency probes",
    },
    Preset {
        name: "rrul_be",
        spec: "tcp_stream*4,tcp_maerts*4,udp_rr@rate=10,tcp_rr@rate=10",
        about: "rrul unmarked: 4 flows up and 4 down, with UDP and TCP latency probes",
    },
    Preset {
        name: "upload",
        spec: "tcp_stream*4,udp_rr@rate=10,tcp_rr@rate=10",
        about: "4 flows up, with UDP and TCP latency probes",
    },
    Preset {
        name: "download",
        spec: "tcp_maerts*4,udp_rr@rate=10,tcp_rr@rate=10",
        about: "4 flows down, with UDP and TCP latency probes",
    },
];

/// The preset of this name, if any.
pub fn preset(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.name == name)
}

/// Which way a part's payload goes, for the per-direction figures: its
/// row's ways for a load, "rr" for the rest (transactions, capacity's
/// trains).
pub fn direction(test: TestKind) -> &'static str {
    let t = test.traits();
    if !t.carries_load() {
        return "rr";
    }
    match (t.client_sends, t.client_receives) {
        (true, false) => "up",
        (false, true) => "down",
        _ => "both",
    }
}

impl TestPlan {
    /// The plan of each part as the test would run alone (one entry, the
    /// plan itself, for a single test): the part's test, flows, rate and
    /// mark, its test's own send and receive sizes (a TCP stream's 128 KiB
    /// write is no UDP datagram); one worker thread per part.
    pub fn part_plans(&self) -> Vec<TestPlan> {
        if self.parts.is_empty() {
            return vec![self.clone()];
        }
        self.parts
            .iter()
            .map(|p| {
                let mut q = self.clone();
                q.parts = Vec::new();
                let own = TestPlan::new(p.test);
                q.send_bytes = own.send_bytes;
                q.recv_bytes = own.recv_bytes;
                q.test = p.test;
                q.flows = p.flows;
                q.threads = 1;
                q.transactions = None;
                q.offered_per_s = p.offered_per_s;
                q.tos = p.tos.or(self.tos);
                q.idle_ns = 0;
                q.recovery_ns = 0;
                // --one-way: the parts whose test carries the stamps, with
                // the room for them; the rest run as they would without.
                q.one_way = self.one_way && p.test.traits().one_way;
                if q.one_way {
                    q.request_bytes = q.request_bytes.max(super::limits::ONE_WAY_REQUEST_BYTES);
                    q.response_bytes = q.response_bytes.max(super::limits::ONE_WAY_RESPONSE_BYTES);
                }
                q
            })
            .collect()
    }

    /// `--one-way` in a mix: the parts whose test carries no stamps (their
    /// names), which the result says were not measured one way.
    pub fn parts_without_one_way(&self) -> Vec<&str> {
        self.parts
            .iter()
            .filter(|p| self.one_way && p.is_probe() && !p.test.traits().one_way)
            .map(|p| p.name.as_str())
            .collect()
    }

    /// A mix with latency probes and bulk parts, and an idle or recovery
    /// phase: the bulk parts run only in the middle of the window.
    pub fn load_phases(&self) -> bool {
        (self.idle_ns > 0 || self.recovery_ns > 0)
            && self.parts.iter().any(PartPlan::is_probe)
            && self.parts.iter().any(|p| !p.is_probe())
    }

    /// The parts held back until the load starts (the bulk parts of a
    /// phased mix), in the parts' order.
    pub fn held_parts(&self) -> Vec<bool> {
        if self.parts.is_empty() {
            return vec![false];
        }
        let phased = self.load_phases();
        self.parts.iter().map(|p| phased && !p.is_probe()).collect()
    }

    /// The first global flow index of each part, and the total after the last.
    pub fn part_offsets(&self) -> Vec<usize> {
        let mut v = vec![0];
        for p in self.part_plans() {
            v.push(v.last().copied().unwrap_or(0) + p.flows as usize);
        }
        v
    }

    /// A mix's own rules, then each part's plan as a single test's, its
    /// error naming the part.
    pub(super) fn validate_parts(&self) -> Result<(), PlanError> {
        if self.parts.len() > MAX_PARTS {
            return Err(PlanError::Invalid(format!(
                "--mix has {} parts (accepted: 1..={MAX_PARTS})",
                self.parts.len()
            )));
        }
        if self.transactions.is_some() {
            return Err(PlanError::Invalid(
                "--transactions does not combine with --mix: the parts share one time-limited window (give --duration)".into(),
            ));
        }
        for (flag, ns) in [("--idle", self.idle_ns), ("--recovery", self.recovery_ns)] {
            if ns > super::limits::MAX_DURATION_NS {
                return Err(PlanError::Invalid(format!(
                    "{flag} is out of range (accepted: 0s..=1d)"
                )));
            }
        }
        let sum: u64 = self.parts.iter().map(|p| p.flows as u64).sum();
        if sum != self.flows as u64 {
            return Err(PlanError::Invalid(format!(
                "a mix's flows ({}) must be the sum of its parts' ({sum})",
                self.flows
            )));
        }
        if self.one_way && !self.parts.iter().any(|p| p.test.traits().one_way) {
            return Err(PlanError::Invalid(format!(
                "--one-way: no part of this mix carries the stamps (accepted: a mix with a part of these tests: {})",
                TestKind::named(|t| t.one_way)
            )));
        }
        for (i, (p, q)) in self.parts.iter().zip(self.part_plans()).enumerate() {
            q.validate().map_err(|e| {
                PlanError::Invalid(format!("--mix part {} '{}': {e}", i + 1, p.name))
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A part's direction and whether it is a probe, from its test's facts.
    #[test]
    fn directions_and_probes_by_test() {
        let dirs: Vec<_> = TestKind::ALL.into_iter().map(direction).collect();
        assert_eq!(
            dirs,
            ["up", "down", "both", "rr", "rr", "rr", "up", "rr", "rr"]
        );
        let probes: Vec<_> = TestKind::ALL
            .into_iter()
            .filter(|&test| {
                PartPlan {
                    name: String::new(),
                    test,
                    flows: 1,
                    offered_per_s: Some(10),
                    tos: None,
                }
                .is_probe()
            })
            .collect();
        assert_eq!(probes, [TestKind::TcpRr, TestKind::UdpRr]);
    }

    #[test]
    fn parses_bulk_both_ways_and_two_probes() {
        let p = parse_spec("tcp_stream*4,tcp_maerts*4,udp_rr@rate=100,tcp_rr@rate=100").unwrap();
        assert_eq!(p.len(), 4);
        assert_eq!((p[0].test, p[0].flows), (TestKind::TcpStream, 4));
        assert_eq!(p[2].offered_per_s, Some(100));
        assert!(p[3].is_probe() && !p[0].is_probe());
        assert_eq!(p[1].name, "tcp_maerts");
    }

    #[test]
    fn repeated_tests_get_numbered_names() {
        let p = parse_spec("tcp_stream@dscp=EF,tcp_stream@dscp=BK,tcp_stream").unwrap();
        let names: Vec<_> = p.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["tcp_stream", "tcp_stream#2", "tcp_stream#3"]);
        assert_eq!(p[0].tos, Some(0xb8));
        assert_eq!(p[1].tos, Some(0x20));
    }

    #[test]
    fn errors_point_at_the_part() {
        for (spec, want) in [
            ("tcp_stream,tcp_rrr", "part 2 'tcp_rrr': unknown test"),
            (
                "tcp_stream*x",
                "part 1 'tcp_stream*x': '*x' is not a flow count",
            ),
            ("tcp_stream,,tcp_rr", "part 2 '': is empty"),
            ("tcp_rr@rate", "option 'rate' is not KEY=VALUE"),
            ("tcp_rr@dscp=ZZ", "dscp=ZZ is not a DSCP"),
            ("tcp_rr@foo=1", "unknown option 'foo'"),
            (
                "tcp_rr@name=a,udp_rr@name=a",
                "part 2: the name 'a' is taken",
            ),
            ("tcp_stream*0", "*0 flows is out of range"),
        ] {
            let e = parse_spec(spec).unwrap_err().to_string();
            assert!(e.contains(want), "{spec}: {e}");
        }
    }

    #[test]
    fn dscp_names() {
        assert_eq!(dscp_tos("EF"), Ok(46 << 2));
        assert_eq!(dscp_tos("cs5"), Ok(40 << 2));
        assert_eq!(dscp_tos("AF41"), Ok(34 << 2));
        assert_eq!(dscp_tos("BE"), Ok(0));
        assert_eq!(dscp_tos("63"), Ok(63 << 2));
        assert!(dscp_tos("64").is_err() && dscp_tos("CS8").is_err() && dscp_tos("AF44").is_err());
    }

    #[test]
    fn presets_parse() {
        for p in PRESETS {
            let parts = parse_spec(p.spec).unwrap_or_else(|e| panic!("{}: {e}", p.name));
            assert_eq!(
                parts.iter().filter(|p| p.is_probe()).count(),
                2,
                "{}",
                p.name
            );
        }
    }

    /// `--one-way` in a mix: the parts whose test carries the stamps get
    /// them and the room for them; the rest run as without (a bulk part's sizes), and a
    /// mix with no such part is refused.
    #[test]
    fn one_way_goes_to_the_parts_that_carry_it() {
        let mut plan = TestPlan::new(TestKind::TcpStream);
        plan.parts = parse_spec("tcp_stream,udp_rr@rate=10,tcp_rr@rate=10").unwrap();
        plan.flows = 3;
        plan.idle_ns = 1_000_000_000;
        plan.one_way = true;
        plan.validate().unwrap();
        let q = plan.part_plans();
        let carried: Vec<_> = q.iter().map(|q| (q.one_way, q.request_bytes)).collect();
        assert_eq!(carried, [(false, 1), (true, 16), (true, 16)]);
        assert_eq!(q[1].response_bytes, 32);
        assert!(plan.parts_without_one_way().is_empty());
        plan.parts = parse_spec("tcp_stream,tcp_maerts").unwrap();
        plan.flows = 2;
        let e = plan.validate().unwrap_err().to_string();
        assert!(e.contains("--one-way") && e.contains("udp_rr"), "{e}");
    }

    #[test]
    fn part_plans_validate_and_name_their_part() {
        let mut plan = TestPlan::new(TestKind::TcpStream);
        plan.parts = parse_spec("tcp_stream*2,tcp_rr@rate=100").unwrap();
        plan.flows = 3;
        plan.validate().unwrap();
        assert_eq!(plan.part_offsets(), [0, 2, 3]);
        plan.parts[0].offered_per_s = Some(5);
        let e = plan.validate().unwrap_err().to_string();
        assert!(e.contains("--mix part 1 'tcp_stream'"), "{e}");
    }
}
