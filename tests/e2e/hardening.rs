//! A server that cannot be knocked over: clients without a key,
//! within the server's stated flags, against a real server process.
//!
//! - a spec whose open-loop window sizes gigabytes of buffers is refused
//!   naming the flags, under a 6 GiB address-space cap, while a bystander
//!   session is served;
//! - sessions that never send `start` are ended at the start deadline and
//!   their ports freed, and in a namespace with 1,001 ephemeral ports, idle
//!   sessions up to `--max-ports` leave the host ports of its own;
//! - one address holding its `--max-sessions-per-client` leaves the other
//!   slots to others.
//!
//! `THRUM_E2E_SERVER_BIN=PATH` runs the server from another build (the
//! figures each test prints compare the two builds).

use std::io::Write;
use std::net::{TcpStream, UdpSocket};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;
use thrum::control::proto::{self, ClientMsg, encode};
use thrum::plan::{DriverChoice, TestKind, TestPlan};

use crate::common::{Netns, Running, ServerProc, Thrum, bin, ns_exec, run_ok};
use crate::hostile::{connect_from, error_then_close, hello, next_frame};

/// The server under test: this build's, or `THRUM_E2E_SERVER_BIN`.
fn server_bin() -> String {
    std::env::var("THRUM_E2E_SERVER_BIN").unwrap_or_else(|_| bin().to_string())
}

/// Hello and `spec` from `from` (an address to bind, port 0); the server's
/// answer to the spec (`accepted` or `error`), or None when it closed.
fn send_spec(addr: &str, from: &str, plan: &TestPlan, per_listener: u32) -> (TcpStream, Value) {
    let mut s = connect_from(addr, &format!("{from}:0"));
    s.write_all(&hello()).unwrap();
    let h = next_frame(&mut s).expect("the server's hello");
    if h["type"] != "hello" {
        return (s, h);
    }
    s.write_all(&encode(&ClientMsg::from(proto::Spec {
        flows_per_listener: per_listener,
        plan: Box::new(plan.clone()),
    })))
    .unwrap();
    let answer = next_frame(&mut s).unwrap_or(Value::Null);
    (s, answer)
}

fn plan(test: TestKind, flows: u32) -> TestPlan {
    let mut p = TestPlan::new(test);
    p.flows = flows;
    p.warmup_ns = 0;
    p.duration_ns = 2_000_000_000;
    p
}

/// A client of `test` from `from`, running for `secs` against `addr`.
fn client_from(addr: &str, from: &str, test: &str, secs: &str) -> Running {
    Thrum::run(test)
        .host(addr)
        .args(["--bind", from])
        .len(secs)
        .arg("--json")
        .spawn()
}

fn outcome(child: Running) -> (bool, String) {
    let out = child.wait();
    let doc = out.json();
    (
        out.success(),
        doc["summary"]["error"].as_str().unwrap_or("").to_string(),
    )
}

/// A udp_rr open-loop spec with a window of 65,536
/// responses of 65,507 bytes under io_uring. The old server accepted it and
/// allocated 8.6 GB at `start`: under a 6 GiB address-space cap the whole
/// process aborted and a bystander session got EOF. It must be refused
/// naming the flags, and the bystander served.
#[test]
fn a_window_of_gigabytes_is_refused_and_the_server_stays_up() {
    let mut cmd = Command::new("prlimit");
    cmd.args(["--as=6442450944", &server_bin()]);
    let mut server = ServerProc::start_with(cmd, "127.0.0.1", &[]);
    let addr = server.addr.clone();
    // The bystander, running through the spec and past it.
    let bystander = client_from(&addr, "127.0.0.1", "tcp_rr", "3s");
    thread::sleep(Duration::from_millis(500));

    let mut p = plan(TestKind::UdpRr, 1);
    p.offered_per_s = Some(1000);
    p.max_inflight = 65_536;
    p.response_bytes = 65_507;
    p.driver = DriverChoice::Uring;
    let (mut s, answer) = send_spec(&addr, "127.0.0.2", &p, 0);
    let refusal = answer["message"].as_str().unwrap_or("").to_string();
    if answer["type"] == "accepted" {
        // The old server: `start` is where it allocates.
        let ours = UdpSocket::bind("127.0.0.2:0").unwrap();
        s.write_all(&encode(&ClientMsg::from(proto::Start {
            udp_ports: vec![ours.local_addr().unwrap().port()],
            udp_addrs: vec![],
            parts_udp_ports: vec![],
            parts_udp_addrs: vec![],
        })))
        .unwrap();
        let _ = next_frame(&mut s);
    }
    thread::sleep(Duration::from_millis(300));
    let died = server.child.try_wait().unwrap();
    let (served, why) = outcome(bystander);
    eprintln!(
        "hardening: a window of gigabytes: spec answered {:?} ({refusal}); server exit {died:?}; bystander served: {served} {why}",
        answer["type"]
    );
    assert_eq!(answer["type"], "error", "{answer}");
    assert!(
        refusal.contains("--max-inflight 65536")
            && refusal.contains("65507")
            && refusal.contains("--max-session-memory"),
        "{refusal}"
    );
    assert!(died.is_none(), "the server died: {died:?}");
    assert!(served, "the bystander session failed: {why}");
}

/// On loopback: a udp_stream session of 64 flows that
/// never sends `start` holds 64 ports until the start deadline (5 s +
/// 1 ms per flow; it was 30 s), then is told why and its ports are free.
#[test]
fn an_idle_accepted_session_ends_at_the_start_deadline() {
    let server = ServerProc::start_with(Command::new(server_bin()), "127.0.0.1", &[]);
    let fds0 = server.open_fds();
    let (mut s, acc) = send_spec(&server.addr, "127.0.0.1", &plan(TestKind::UdpStream, 64), 0);
    assert_eq!(acc["type"], "accepted", "{acc}");
    let t0 = Instant::now();
    assert!(server.open_fds() >= fds0 + 64, "64 UDP sockets held");
    s.set_read_timeout(Some(Duration::from_secs(45))).unwrap();
    let e = error_then_close(&mut s).unwrap_or_default();
    let held = t0.elapsed();
    eprintln!("hardening: an idle accepted session held 64 ports for {held:.1?}: {e}");
    assert!(e.contains("timed out waiting for 'start'"), "{e}");
    assert!(
        held >= Duration::from_secs(4) && held < Duration::from_secs(12),
        "held {held:?}"
    );
    assert!(
        server.fds_return_to(fds0, Duration::from_secs(5)),
        "the server holds {} fds, {fds0} before",
        server.open_fds()
    );
    // Its ports are free: each binds again.
    for port in acc["udp_ports"].as_array().unwrap() {
        let port = port.as_u64().unwrap();
        UdpSocket::bind(("127.0.0.1", port as u16))
            .unwrap_or_else(|e| panic!("port {port} still taken: {e}"));
    }
}

/// Run `f` on a thread inside network namespace `ns` (a namespace is a
/// thread's own: the sockets it opens are the namespace's).
fn in_netns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/var/run/netns/{ns}");
    thread::spawn(move || {
        let fd = std::fs::File::open(&path).expect("the namespace's file");
        use std::os::fd::AsRawFd;
        // SAFETY: a valid descriptor of a network namespace; this thread only.
        let r = unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "setns: {}", std::io::Error::last_os_error());
        f()
    })
    .join()
    .expect("the thread in the namespace")
}

/// UDP sockets bound to port 0 on the wildcard address, as a host's own
/// resolver or NTP client opens them: how many of `n` got a port.
fn host_udp_sockets(n: usize) -> usize {
    let socks: Vec<UdpSocket> = (0..n)
        .filter_map(|_| UdpSocket::bind("0.0.0.0:0").ok())
        .collect();
    socks.len()
}

/// In a namespace of 1,001 ephemeral ports: sessions that
/// never send `start` may hold `--max-ports` (a quarter: 250) and no more,
/// so the host can still open UDP sockets and connections; once the start
/// deadline has passed, all are free again. The old server gave one
/// session of 1,024 UDP flows every port (its sockets went on to further
/// loopback addresses), and the host could open none.
#[test]
fn idle_sessions_leave_the_host_its_ports() {
    let Some(ns) = Netns::loopback_only("harden") else {
        return;
    };
    run_ok(ns_exec(&ns.0, "sysctl").args(["-qw", "net.ipv4.ip_local_port_range=40000 41000"]));
    // One client holds them all here: its share of the ports is all of them.
    let server = ServerProc::start_with(
        ns_exec(&ns.0, &server_bin()),
        "127.0.0.1",
        &["--max-sessions-per-client", "64"],
    );
    let addr = server.addr.clone();
    let (answers, host_udp, host_tcp, controls) = in_netns(&ns.0, move || {
        let mut answers = Vec::new();
        let mut controls = Vec::new();
        for (test, flows, per) in [
            (TestKind::UdpStream, 1024, 0),
            (TestKind::UdpStream, 200, 0),
            (TestKind::UdpRr, 100, 0),
            (TestKind::TcpStream, 40, 1),
            (TestKind::TcpStream, 40, 1),
        ] {
            let (s, a) = send_spec(&addr, "127.0.0.1", &plan(test, flows), per);
            answers.push(a);
            controls.push(s);
        }
        let udp = host_udp_sockets(500);
        let tcp = TcpStream::connect(&addr).is_ok();
        (answers, udp, tcp, controls)
    });
    let kinds: Vec<String> = answers
        .iter()
        .map(|a| {
            let m = a["message"].as_str().unwrap_or("");
            format!("{} {}", a["type"], &m[..m.len().min(90)])
        })
        .collect();
    eprintln!(
        "hardening: in a 1,001-port namespace: {kinds:?}; the host then bound {host_udp} of 500 UDP sockets, connected: {host_tcp}"
    );
    // While they are held, a client in the namespace runs.
    let out = Thrum::run("tcp_rr")
        .netns(&ns.0)
        .host(&server.addr)
        .len("500ms")
        .arg("--json")
        .output();
    let served = out.success();
    let ports = |a: &Value| a["udp_ports"].as_array().map_or(0, |p| p.len());
    assert_eq!(answers[0]["type"], "error", "{}", answers[0]);
    let e = answers[0]["message"].as_str().unwrap();
    assert!(
        e.contains("1024 data ports") && e.contains("--max-ports 250"),
        "{e}"
    );
    assert_eq!(answers[1]["type"], "accepted", "{}", answers[1]);
    assert_eq!(ports(&answers[1]), 200);
    let e = answers[2]["message"].as_str().unwrap_or("");
    assert!(
        e.contains("server busy") && e.contains("--max-ports") && e.contains("hold 200 of"),
        "{}",
        answers[2]
    );
    assert_eq!(answers[3]["type"], "accepted", "{}", answers[3]);
    let e = answers[4]["message"].as_str().unwrap_or("");
    assert!(e.contains("--max-ports"), "{}", answers[4]);
    assert_eq!(
        host_udp, 500,
        "the host could bind {host_udp} of 500 UDP sockets"
    );
    assert!(host_tcp, "the host could not connect");
    assert!(served, "a client beside them:\n{}", out.report());
    // After the deadline every port is free again.
    let mut controls = controls;
    for s in &mut controls {
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        error_then_close(s);
    }
    let after = in_netns(&ns.0, || host_udp_sockets(900));
    eprintln!(
        "hardening: in the 1,001-port namespace, after the deadline the host bound {after} of 900"
    );
    assert_eq!(after, 900);
}

/// 16 accepted, idle sessions from 127.0.0.1 (its
/// `--max-sessions-per-client`, a quarter of 64) leave the other 48 slots:
/// a client from 127.0.0.9 is served, and the 17th from 127.0.0.1 is
/// refused naming the flag. The old server let one address take all 64.
#[test]
fn one_client_cannot_take_every_slot() {
    let server = ServerProc::start_with(Command::new(server_bin()), "127.0.0.1", &[]);
    let addr = server.addr.clone();
    let mut held = Vec::new();
    let mut refusal = String::new();
    for _ in 0..64 {
        let (s, a) = send_spec(&addr, "127.0.0.1", &plan(TestKind::TcpRr, 1), 0);
        if a["type"] != "accepted" {
            refusal = a["message"].as_str().unwrap_or("").to_string();
            break;
        }
        held.push(s);
    }
    let other = client_from(&addr, "127.0.0.9", "tcp_rr", "1s");
    let (served, why) = outcome(other);
    eprintln!(
        "hardening: sessions per address: 127.0.0.1 held {} idle sessions, then: {refusal}; 127.0.0.9 served: {served} {why}",
        held.len()
    );
    assert_eq!(held.len(), 16);
    assert!(
        refusal.contains("--max-sessions-per-client 16"),
        "{refusal}"
    );
    assert!(served, "a client from 127.0.0.9 was refused: {why}");
}
