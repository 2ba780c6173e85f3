//! Unit tests of the client's session (`client.rs`).

use std::net::TcpListener;

use super::*;
use crate::control::proto::{Error as ErrorMsg, ServerMsg, read_msg};
use crate::control::server::EmbeddedServer;
use crate::plan::TestKind;
use crate::warning::Code;

fn target(addr: SocketAddr) -> Target {
    Target {
        addr,
        label: addr.to_string(),
        bind: None,
        embedded: false,
        psk: None,
        wait: None,
    }
}

fn short(test: TestKind) -> TestPlan {
    let mut p = TestPlan::new(test);
    p.warmup_ns = 0;
    p.duration_ns = 500_000_000;
    p.interval_ns = 250_000_000;
    p
}

/// A server that says hello, then answers the spec with `answer`.
fn fake_server(answer: ServerMsg) -> SocketAddr {
    fake_server_saying(Hello::ours(), answer)
}

/// [`fake_server`] with a hello of its own.
fn fake_server_saying(hello: Hello, answer: ServerMsg) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        let (mut c, _) = l.accept().unwrap();
        let _hello: ClientMsg = read_msg(&mut c).unwrap();
        write_msg(&mut c, &ServerMsg::from(hello)).unwrap();
        let _spec: ClientMsg = read_msg(&mut c).unwrap();
        write_msg(&mut c, &answer).unwrap();
        // Hold the connection until the client has read the answer.
        let _ = read_msg::<ClientMsg>(&mut c);
    });
    addr
}

#[test]
fn a_session_counts_the_same_transactions_at_both_ends() {
    let server = EmbeddedServer::start().unwrap();
    let r = run(&target(server.addr), &short(TestKind::TcpRr), &mut Quiet);
    let s = &r.summary;
    assert!(s.error.is_none(), "{:?}", s.error);
    assert!(s.local.total.transactions > 0);
    assert_eq!(s.local.total.transactions, s.remote.total.transactions);
    // Two intervals of the measure phase, each with both ends' counts.
    assert_eq!(r.intervals.len(), 2, "{:?}", r.intervals.len());
    assert!(r.intervals.iter().all(|i| !i.remote.is_empty()));
}

#[test]
fn a_reply_of_the_wrong_kind_is_named() {
    let addr = fake_server(
        Started {
            threads: 1,
            drivers: vec![],
        }
        .into(),
    );
    let r = run(&target(addr), &short(TestKind::TcpRr), &mut Quiet);
    let e = r.summary.error.unwrap();
    assert!(
        e.contains("sent 'started' where 'accepted' was expected"),
        "{e}"
    );
    assert!(r.intervals.is_empty());
}

/// A server whose hello lacks `rr_short_seq` (an older thrum) is still
/// run against, for a udp_rr of short requests too, and the result says
/// its responses are matched oldest first; with the feature, or with
/// 8-byte requests and responses, nothing is said.
#[test]
fn an_older_servers_short_udp_rr_is_matched_in_order_and_said() {
    let refuse = || {
        ServerMsg::from(ErrorMsg {
            message: "enough".into(),
        })
    };
    let mut old = Hello::ours();
    old.features
        .retain(|f| f != crate::control::features::RR_SHORT_SEQ);
    let mut eight = short(TestKind::UdpRr);
    eight.request_bytes = 8;
    eight.response_bytes = 8;
    for (hello, plan, said) in [
        (old.clone(), short(TestKind::UdpRr), true),
        (Hello::ours(), short(TestKind::UdpRr), false),
        (old, eight, false),
    ] {
        let addr = fake_server_saying(hello, refuse());
        let r = run(&target(addr), &plan, &mut Quiet);
        assert!(r.summary.error.is_some());
        assert_eq!(
            r.summary.warnings.has(Code::RrMatchedInOrder),
            said,
            "{:?}",
            r.summary.warnings
        );
    }
}

/// `--one-way` against a server whose hello lacks `one_way` (an older
/// thrum, which would send no stamps), and tcp_rr's against one that
/// stamps udp_rr's datagrams only (its hello lacks `one_way_tcp`):
/// refused before the spec, naming the flag.
#[test]
fn an_older_server_is_refused_for_one_way() {
    for (kind, lacks) in [
        (TestKind::UdpRr, "one_way"),
        (TestKind::TcpRr, "one_way"),
        (TestKind::TcpRr, "one_way_tcp"),
    ] {
        let mut old = Hello::ours();
        old.features.retain(|f| f != lacks);
        let addr = fake_server_saying(
            old,
            Started {
                threads: 1,
                drivers: vec![],
            }
            .into(),
        );
        let mut plan = short(kind);
        plan.one_way = true;
        (plan.request_bytes, plan.response_bytes) = (16, 32);
        let r = run(&target(addr), &plan, &mut Quiet);
        let e = r.summary.error.unwrap();
        let says = format!("does not name the feature {lacks}");
        assert!(e.contains("--one-way") && e.contains(&says), "{kind}: {e}");
    }
}

#[test]
fn a_refusal_carries_the_servers_words_escaped() {
    let addr = fake_server(
        ErrorMsg {
            message: "no\x1b[2J".into(),
        }
        .into(),
    );
    let r = run(&target(addr), &short(TestKind::TcpRr), &mut Quiet);
    let e = r.summary.error.unwrap();
    assert!(e.contains("refused: no") && !e.contains('\x1b'), "{e}");
}

#[test]
fn an_unreachable_server_is_an_error_not_a_panic() {
    // A port nobody listens on: bind one, then close it.
    let addr = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let r = run(&target(addr), &short(TestKind::TcpStream), &mut Quiet);
    let e = r.summary.error.unwrap();
    assert!(e.contains("cannot reach the thrum server"), "{e}");
    assert!(!r.summary.warnings.has(Code::ServerSamplesMissing));
}

/// A server's provenance is escaped on arrival: its kernel's name cannot
/// carry a newline into `--keyval` or CSV.
#[test]
fn a_servers_provenance_is_escaped_on_arrival() {
    let mut p = Provenance::version_only();
    p.kernel = Some(crate::sensors::provenance::Kernel {
        sysname: "Linux\nTHROUGHPUT=999".into(),
        release: "6.1\u{1b}[2J".into(),
        version: "#1".into(),
        machine: "x86_64".into(),
    });
    p.hostname = Some("plain".into());
    let e = super::escaped(p);
    let k = e.kernel.unwrap();
    assert_eq!(k.sysname, "Linux\\nTHROUGHPUT=999");
    assert_eq!(k.release, "6.1\\u{1b}[2J");
    assert_eq!(e.hostname.as_deref(), Some("plain"));
}
