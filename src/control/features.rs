//! What a server must say it applies before a client sends it a spec: every
//! field of the spec, and for the fields added since the protocol's version
//! the hello feature that says a server applies them.
//!
//! A server ignores a spec field it does not know (a newer client's spec
//! must still parse), so a field an older server lacks is dropped without a
//! word: `--bytes` ran tcp_maerts until the server's `--max-duration`. Each
//! such field is a [`Gate`] here, the features a server's hello names are
//! those of the gates ([`features`]), and the client asks [`needed`] which
//! features the spec it is about to send needs (from its plan, where every
//! gated field is), so that it refuses, naming the flag, a server whose
//! hello lacks one (`proto::Hello::lacks`). The
//! fields every server of the protocol's version applies are listed too
//! ([`PROTOCOL`]), and a unit test walks the spec's schema (in `proto`,
//! which owns the spec): a field that is in no list fails it, and the list
//! of the protocol's fields is closed.
//!
//! A server also names what it does differently on the data path
//! ([`BEHAVIOURS`]): no spec field asks for it, so nothing is refused; a
//! client whose plan would rely on one adapts to a server that lacks it,
//! where the plan is used, and says so in the result. Beyond the spec, it
//! names the requests every server of this build answers ([`REQUESTS`]:
//! the clock exchange), and a server started with `--agent` names
//! [`AGENT`].

use crate::plan::{TestPlan, Transport};

/// A spec field that a server applies only when its hello names a feature.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gate {
    /// The field's path in the spec's JSON, dots between the keys
    /// (`plan.bytes`; the plan's flattened groups' fields are the plan's).
    pub field: &'static str,
    /// The flag that sets it, as a refusal names it.
    pub flag: &'static str,
    /// The feature a server's hello names when it applies the field.
    pub feature: &'static str,
    /// A second feature needed where the flows are not long-lived TCP flows
    /// (UDP flows, a connection test's connections): `local_hosts` was
    /// first taken for long-lived TCP flows only.
    pub beyond_tcp: Option<&'static str>,
    /// A second feature needed where the flows are long-lived TCP flows:
    /// `one_way` was first udp_rr's alone.
    pub on_tcp: Option<&'static str>,
    /// A further feature needed in a mix: `one_way` was first a single
    /// test's, and a server before `one_way_mix` gives the stamps to every
    /// part without their room (a mix's sizes are each part's own).
    pub in_mix: Option<&'static str>,
}

const fn gate(field: &'static str, flag: &'static str, feature: &'static str) -> Gate {
    Gate {
        field,
        flag,
        feature,
        beyond_tcp: None,
        on_tcp: None,
        in_mix: None,
    }
}

/// The fields a server must announce, in the order a refusal names the
/// first one missing. `socket_marks`: SO_MARK and TCP_TX_DELAY on the
/// server's data sockets; `spreading`: the server's own threads, listen
/// backlog, epoll events and trigger, and `local_hosts` as sources of
/// long-lived TCP flows; `local_hosts_all`: `local_hosts` as sources of UDP
/// flows and connection tests' connections too; `bytes`: a byte-limited
/// run, whose server sends (tcp_maerts, tcp_bidir) or counts to the end;
/// `spin`: the server's workers poll instead of sleeping; `busy_poll`:
/// SO_PREFER_BUSY_POLL on its data sockets, and SO_BUSY_POLL read back;
/// `one_way`: udp_rr's server stamps each response with its request's
/// arrival and its own departure (`workload::one_way`); `one_way_tcp`:
/// tcp_rr's server does too, in the stream (`workload::rr_stamps`);
/// `one_way_mix`: the server gives them, and their room, to the parts of
/// a mix whose test carries them (`TestPlan::part_plans`).
pub const GATES: &[Gate] = &[
    gate("plan.mark", "--mark", "socket_marks"),
    gate("plan.tcp_tx_delay_us", "--tcp-tx-delay", "socket_marks"),
    Gate {
        beyond_tcp: Some("local_hosts_all"),
        ..gate("plan.local_hosts", "--local-hosts", "spreading")
    },
    gate("plan.server_threads", "--server-threads", "spreading"),
    gate("plan.listen_backlog", "--listen-backlog", "spreading"),
    gate("plan.max_events", "--max-events", "spreading"),
    gate("plan.epoll_trigger", "--epoll-trigger", "spreading"),
    gate("plan.bytes", "--bytes", "bytes"),
    gate("plan.spin", "--spin", "spin"),
    gate("plan.prefer_busy_poll", "--prefer-busy-poll", "busy_poll"),
    Gate {
        on_tcp: Some("one_way_tcp"),
        in_mix: Some("one_way_mix"),
        ..gate("plan.one_way", "--one-way", "one_way")
    },
];

/// The spec's fields that every server of this protocol version applies:
/// those of protocol v2, and those added before hellos named features
/// (`call_times`, `idle_ns`, `recovery_ns`, `direction`,
/// `flows_per_listener`), which no hello tells apart. Closed: a field
/// added now is a [`Gate`] (or [`CLIENT_ONLY`]), or an older server would
/// drop it without a word.
pub const PROTOCOL: &[&str] = &[
    "flows_per_listener",
    "plan",
    "plan.test",
    "plan.flows",
    "plan.threads",
    "plan.duration_ns",
    "plan.transactions",
    "plan.warmup_ns",
    "plan.cooldown_ns",
    "plan.interval_ns",
    "plan.request_bytes",
    "plan.response_bytes",
    "plan.burst",
    "plan.send_bytes",
    "plan.recv_bytes",
    "plan.nodelay",
    "plan.congestion",
    "plan.mss",
    "plan.pacing_rate_bps",
    "plan.rate_bps",
    "plan.rr_timeout_ns",
    "plan.busy_poll_us",
    "plan.zerocopy",
    "plan.gso",
    "plan.driver",
    "plan.close",
    "plan.local",
    "plan.local.send_buffer_bytes",
    "plan.local.recv_buffer_bytes",
    "plan.local.cpu_pin",
    "plan.remote",
    "plan.remote.send_buffer_bytes",
    "plan.remote.recv_buffer_bytes",
    "plan.remote.cpu_pin",
    "plan.percentiles",
    "plan.offered_per_s",
    "plan.arrivals",
    "plan.max_inflight",
    "plan.tos",
    "plan.parts",
    "plan.parts.name",
    "plan.parts.test",
    "plan.parts.flows",
    "plan.parts.offered_per_s",
    "plan.parts.tos",
    "plan.call_times",
    "plan.idle_ns",
    "plan.recovery_ns",
    "plan.direction",
];

/// The spec's fields the server never reads: the client's alone
/// (`flow_latency`, `delay_ns`), or carried by another field (`num_ports` travels as
/// `flows_per_listener`, which every server takes).
pub const CLIENT_ONLY: &[&str] = &["plan.flow_latency", "plan.num_ports", "plan.delay_ns"];

/// udp_rr: the server echoes a request's first bytes at the front of its
/// response, as many as request and response both have up to 8 (an older
/// server echoed 8 bytes where both had them, else nothing), so a client
/// matches each response by its short sequence number
/// (`workload::udp::matching_note`; without it, oldest first).
pub const RR_SHORT_SEQ: &str = "rr_short_seq";

/// The data-path behaviours this build's server has beyond the protocol's
/// version (module doc).
pub const BEHAVIOURS: &[&str] = &[RR_SHORT_SEQ];

/// The clock exchange (`control::clocks`): every server of this build
/// answers it.
pub const CLOCK: &str = "clock";

/// Requests beyond the spec that every server of this build answers.
pub const REQUESTS: &[&str] = &[CLOCK];

/// What a server started with `--agent` adds to its hello: it takes an
/// agent's run (`control::agent`).
pub const AGENT: &str = "agent";

/// The features this build's hello names: every gate's, in [`GATES`]'
/// order, each once, then the [`BEHAVIOURS`] and the [`REQUESTS`].
pub fn features() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for g in GATES {
        for f in std::iter::once(g.feature)
            .chain(g.beyond_tcp)
            .chain(g.on_tcp)
            .chain(g.in_mix)
        {
            if !out.contains(&f) {
                out.push(f);
            }
        }
    }
    out.extend_from_slice(BEHAVIOURS);
    out.extend_from_slice(REQUESTS);
    out
}

/// One feature a spec needs, and the flag that asked for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Need {
    pub feature: &'static str,
    pub flag: &'static str,
}

/// The features a spec with `plan` needs, in [`GATES`]' order: a gate's
/// field is set when its value in the plan's JSON differs from a new
/// plan's of the same test (an unset option is absent from both). The
/// spec's own fields besides its plan are the protocol's.
pub fn needed(plan: &TestPlan) -> Vec<Need> {
    let unset = TestPlan::new(plan.test);
    let (Ok(now), Ok(unset)) = (serde_json::to_value(plan), serde_json::to_value(&unset)) else {
        return Vec::new();
    };
    // A mix's parts each run their own test: its flows are of every
    // part's kind.
    let kinds: Vec<_> = if plan.parts.is_empty() {
        vec![plan.test]
    } else {
        plan.parts.iter().map(|p| p.test).collect()
    };
    let tcp = kinds.iter().any(|k| k.traits().transport == Transport::Tcp);
    let beyond = kinds.iter().any(|k| k.traits().transport != Transport::Tcp);
    let mix = !plan.parts.is_empty();
    let mut out = Vec::new();
    for g in GATES {
        let at = pointer(g.field);
        if now.pointer(&at) == unset.pointer(&at) {
            continue;
        }
        out.push(Need {
            feature: g.feature,
            flag: g.flag,
        });
        let further = [
            g.on_tcp.filter(|_| tcp),
            g.beyond_tcp.filter(|_| beyond),
            g.in_mix.filter(|_| mix),
        ];
        for f in further.into_iter().flatten() {
            out.push(Need {
                feature: f,
                flag: g.flag,
            });
        }
    }
    out
}

/// A gate's field as a JSON pointer into the plan: `plan.bytes` is `/bytes`.
fn pointer(field: &str) -> String {
    let in_plan = field.strip_prefix("plan.").unwrap_or(field);
    format!("/{}", in_plan.replace('.', "/"))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::plan::TestKind;
    use crate::plan::sockets::EpollTrigger;

    /// Each gated field, set alone on a new plan, needs its feature and is
    /// named by its flag; the spec's JSON differs from the new plan's in
    /// that field only, so the setter and the row agree.
    #[test]
    fn each_gated_field_set_alone_names_its_feature() {
        type Set = fn(&mut TestPlan);
        let setters: [(&str, TestKind, Set); 11] = [
            ("plan.mark", TestKind::TcpRr, |p| p.sockets.mark = Some(7)),
            ("plan.tcp_tx_delay_us", TestKind::TcpRr, |p| {
                p.sockets.tcp_tx_delay_us = Some(10)
            }),
            ("plan.local_hosts", TestKind::TcpRr, |p| {
                p.spreading.local_hosts = vec!["127.0.0.2".parse().unwrap()]
            }),
            ("plan.server_threads", TestKind::TcpRr, |p| {
                p.spreading.server_threads = Some(1)
            }),
            ("plan.listen_backlog", TestKind::TcpRr, |p| {
                p.spreading.listen_backlog = Some(8)
            }),
            ("plan.max_events", TestKind::TcpRr, |p| {
                p.spreading.max_events = Some(8)
            }),
            ("plan.epoll_trigger", TestKind::TcpRr, |p| {
                p.spreading.epoll_trigger = Some(EpollTrigger::Level)
            }),
            ("plan.bytes", TestKind::TcpMaerts, |p| {
                p.bytes = Some(1 << 20)
            }),
            ("plan.spin", TestKind::TcpRr, |p| p.spin = true),
            ("plan.prefer_busy_poll", TestKind::UdpRr, |p| {
                p.prefer_busy_poll = true
            }),
            ("plan.one_way", TestKind::UdpRr, |p| p.one_way = true),
        ];
        let gated: BTreeSet<&str> = GATES.iter().map(|g| g.field).collect();
        let set: BTreeSet<&str> = setters.iter().map(|s| s.0).collect();
        assert_eq!(
            gated, set,
            "a setter for every gate, and a gate for every setter"
        );
        for (field, kind, f) in setters {
            let g = GATES.iter().find(|g| g.field == field).unwrap();
            assert!(needed(&TestPlan::new(kind)).is_empty(), "{kind}");
            let mut p = TestPlan::new(kind);
            f(&mut p);
            let (now, unset) = (
                serde_json::to_value(&p).unwrap(),
                serde_json::to_value(TestPlan::new(kind)).unwrap(),
            );
            let differ: Vec<&String> = now
                .as_object()
                .unwrap()
                .iter()
                .filter(|(k, v)| unset.get(k.as_str()) != Some(v))
                .map(|(k, _)| k)
                .collect();
            assert_eq!(differ, [&field["plan.".len()..]], "{field}");
            assert_eq!(
                needed(&p)[0],
                Need {
                    feature: g.feature,
                    flag: g.flag
                },
                "{field}"
            );
        }
    }

    /// `local_hosts` beyond long-lived TCP flows needs the later feature
    /// too, and `one_way` on them; this build's hello names every feature
    /// a gate needs.
    #[test]
    fn second_features_by_transport_and_this_builds_features() {
        let with_hosts = |kind| {
            let mut p = TestPlan::new(kind);
            p.spreading.local_hosts = vec!["127.0.0.2".parse().unwrap()];
            needed(&p)
                .into_iter()
                .map(|n| n.feature)
                .collect::<Vec<_>>()
        };
        assert_eq!(with_hosts(TestKind::TcpStream), ["spreading"]);
        assert_eq!(
            with_hosts(TestKind::TcpCrr),
            ["spreading", "local_hosts_all"]
        );
        assert_eq!(
            with_hosts(TestKind::UdpRr),
            ["spreading", "local_hosts_all"]
        );
        // tcp_rr's stamps came after udp_rr's.
        let one_way = |kind| {
            let mut p = TestPlan::new(kind);
            p.one_way = true;
            needed(&p)
                .into_iter()
                .map(|n| n.feature)
                .collect::<Vec<_>>()
        };
        assert_eq!(one_way(TestKind::UdpRr), ["one_way"]);
        assert_eq!(one_way(TestKind::TcpRr), ["one_way", "one_way_tcp"]);
        // A mix: every part's kind, and a server that sizes its parts.
        let mut rrul = TestPlan::new(TestKind::UdpRr);
        rrul.parts = crate::plan::mix::parse_spec("udp_rr@rate=10,tcp_rr@rate=10").unwrap();
        rrul.one_way = true;
        let need: Vec<_> = needed(&rrul).into_iter().map(|n| n.feature).collect();
        assert_eq!(need, ["one_way", "one_way_tcp", "one_way_mix"]);
        assert_eq!(
            features(),
            [
                "socket_marks",
                "spreading",
                "local_hosts_all",
                "bytes",
                "spin",
                "busy_poll",
                "one_way",
                "one_way_tcp",
                "one_way_mix",
                "rr_short_seq",
                "clock"
            ]
        );
    }
}
