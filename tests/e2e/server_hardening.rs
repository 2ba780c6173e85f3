//! A server that keyless clients cannot hold, against a real server
//! process on loopback (the third round of the red team's findings):
//!
//! - connections that prove nothing (silent, or a hello and no answer to
//!   the challenge) from four addresses, reopened as they are dropped,
//!   leave a `--psk-file` server's sessions to keyed clients;
//! - one address's never-started UDP sessions hold their share of
//!   `--max-ports`, not all of it;
//! - a keyless spec cannot make the server mark its packets or delay
//!   them (`--allow-mark`, `--allow-tx-delay`);
//! - ticks sent back to back end the session instead of drawing a sample
//!   each;
//! - a server's provenance cannot forge a `KEY=value` line.
//!
//! `THRUM_E2E_SERVER_BIN=PATH` runs the server from another build (the
//! figures each test prints are the before and after).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde_json::Value;
use thrum::control::auth;
use thrum::control::proto::{self, ClientMsg, encode};
use thrum::plan::{Phase, TestKind, TestPlan};

use crate::common::{ServerProc, Thrum, bin};
use crate::crafted::rewriting_proxy;
use crate::hostile::{error_then_close, hello, next_frame};

/// The server under test: this build's, or `THRUM_E2E_SERVER_BIN`.
fn server_bin() -> String {
    // bin() first either way: it takes the test's serial group.
    let ours = bin();
    std::env::var("THRUM_E2E_SERVER_BIN").unwrap_or_else(|_| ours.to_string())
}

fn start_server(extra: &[&str]) -> ServerProc {
    ServerProc::start_with(Command::new(server_bin()), "127.0.0.1", extra)
}

/// A server whose provenance says its kernel is `Linux\nTHROUGHPUT=999`
/// (through a proxy that rewrites its final report): the old client wrote
/// the newline into `--keyval`'s REMOTE_SYSNAME, and a netperf-style
/// parser read a second THROUGHPUT line. The client escapes provenance on
/// arrival, and keyval escapes control characters in every value.
#[test]
fn a_servers_provenance_cannot_forge_a_keyval_line() {
    let server = start_server(&[]);
    let proxy = rewriting_proxy(&server.addr, |fin| {
        fin["provenance"]["kernel"] = serde_json::json!({
            "sysname": "Linux\nTHROUGHPUT=999",
            "release": "6.1\r\nTHROUGHPUT_UNITS=forged\u{1b}[2J",
            "version": "#1",
            "machine": "x86_64",
        });
    });
    let text = Thrum::run("tcp_rr")
        .host(&proxy)
        .len("300ms")
        .arg("--keyval")
        .stdout();
    let lines: Vec<&str> = text.lines().collect();
    let throughput = lines
        .iter()
        .filter(|l| l.starts_with("THROUGHPUT="))
        .count();
    let forged = lines
        .iter()
        .filter(|l| l.starts_with("THROUGHPUT=999") || (l.contains("forged") && !l.contains("\\n")))
        .count();
    let sysname = lines
        .iter()
        .find(|l| l.starts_with("REMOTE_SYSNAME="))
        .copied()
        .unwrap_or("");
    eprintln!(
        "server_hardening: forged provenance: {throughput} THROUGHPUT line(s), {forged} forged; {sysname}"
    );
    assert_eq!(throughput, 1, "{text}");
    assert_eq!(forged, 0, "{text}");
    assert_eq!(sysname, "REMOTE_SYSNAME=Linux\\nTHROUGHPUT=999");
    assert!(!text.contains('\x1b'), "{text}");
}

/// A control connection from `from` (port 0), or None when the connect
/// fails or takes over a second (a full backlog).
fn dial_from(addr: &str, from: &str) -> Option<TcpStream> {
    let to: SocketAddr = addr.parse().ok()?;
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).ok()?;
    s.bind(&SocketAddr::new(from.parse().ok()?, 0).into())
        .ok()?;
    s.connect_timeout(&to.into(), Duration::from_secs(1)).ok()?;
    let s: TcpStream = s.into();
    s.set_read_timeout(Some(Duration::from_secs(15))).ok()?;
    Some(s)
}

/// Hello and `spec` from `from`; the stream and the server's answer
/// (`accepted` or `error`, Null when it closed).
fn send_spec(addr: &str, from: &str, plan: &TestPlan) -> Option<(TcpStream, Value)> {
    let mut s = dial_from(addr, from)?;
    s.write_all(&hello()).ok()?;
    let h = next_frame(&mut s)?;
    if h["type"] != "hello" {
        return Some((s, h));
    }
    s.write_all(&encode(&ClientMsg::from(proto::Spec {
        flows_per_listener: 0,
        plan: Box::new(plan.clone()),
    })))
    .ok()?;
    let answer = next_frame(&mut s).unwrap_or(Value::Null);
    Some((s, answer))
}

fn tick(seq: u32) -> Vec<u8> {
    encode(&ClientMsg::from(proto::Tick {
        seq,
        phase: Phase::Measure,
        load: None,
        due_ns: None,
    }))
}

/// A tcp_stream session, started, its one data connection open: the
/// control stream (with `start` answered) and the data stream.
fn started_stream(addr: &str, interval_ns: u64) -> (TcpStream, TcpStream) {
    let mut plan = TestPlan::new(TestKind::TcpStream);
    plan.warmup_ns = 0;
    plan.duration_ns = 20_000_000_000;
    plan.interval_ns = interval_ns;
    let (mut s, acc) = send_spec(addr, "127.0.0.1", &plan).unwrap();
    assert_eq!(acc["type"], "accepted", "{acc}");
    let token: Vec<u8> = auth::from_hex::<16>(acc["token"].as_str().unwrap())
        .unwrap()
        .to_vec();
    let port = acc["data_port"].as_u64().unwrap() as u16;
    let mut data = TcpStream::connect(("127.0.0.1", port)).unwrap();
    data.write_all(&[&token[..], &0u32.to_be_bytes()].concat())
        .unwrap();
    s.write_all(&encode(&ClientMsg::from(proto::Start {
        udp_ports: vec![],
        udp_addrs: vec![],
        parts_udp_ports: vec![],
        parts_udp_addrs: vec![],
    })))
    .unwrap();
    let started = next_frame(&mut s).unwrap();
    assert_eq!(started["type"], "started", "{started}");
    (s, data)
}

/// Ticks sent back to back, as fast as the connection takes them, on a
/// session whose interval is 1 s: the old server answered every one with
/// a sample (323 a second of 378 KB each for 1,024 flows). Now the ticks
/// a session may send are bounded by its interval, with a burst of 16 and
/// 16 s' worth; past it the session ends naming `--interval`.
#[test]
fn ticks_faster_than_the_interval_end_the_session() {
    let server = start_server(&[]);
    let (mut s, _data) = started_stream(&server.addr, 1_000_000_000);
    let mut w = s.try_clone().unwrap();
    let t0 = Instant::now();
    let writer = thread::spawn(move || {
        let mut seq = 0;
        while t0.elapsed() < Duration::from_secs(3) {
            if w.write_all(&tick(seq)).is_err() {
                break;
            }
            seq += 1;
        }
        seq
    });
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut samples = 0u64;
    let mut error = String::new();
    while t0.elapsed() < Duration::from_secs(3) {
        match next_frame(&mut s) {
            Some(f) if f["type"] == "sample" => samples += 1,
            Some(f) => {
                error = f["message"].as_str().unwrap_or("").to_string();
                break;
            }
            None => break,
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    let _ = s.shutdown(std::net::Shutdown::Both);
    let sent = writer.join().unwrap();
    eprintln!(
        "server_hardening: back-to-back ticks: {sent} ticks sent back to back; {samples} samples in {secs:.1} s ({:.0}/s); then: {error}",
        samples as f64 / secs
    );
    // The burst (16, and 16 s' worth at 1 s) and one a second after it.
    assert!(samples <= 16 + 16 + secs.ceil() as u64, "{samples} samples");
    assert!(error.contains("--interval"), "{error}");
}

/// Honest clients are never near the bound: a short interval with
/// warm-up and cool-down (a tick at every phase's edge besides the
/// interval's), and a count-limited run, which ticks when its count is met.
#[test]
fn honest_ticks_are_answered() {
    let server = start_server(&[]);
    Thrum::run("tcp_stream")
        .on(&server)
        .interval("10ms")
        .len("1s")
        .warmup("200ms")
        .args(["--cooldown", "200ms"])
        .json();
    Thrum::run("tcp_rr")
        .on(&server)
        .interval("10ms")
        .args(["-n", "2000"])
        .default_warmup()
        .json();
}

/// The server's sockets (`ss -tuanep`, its pid) that carry `mark`.
fn marked_sockets(pid: u32, mark: &str) -> usize {
    let out = Command::new("ss").args(["-tuanep"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(&format!("pid={pid},")) && l.contains(&format!("fwmark:{mark}")))
        .count()
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn marked_stream(mark: Option<u32>, delay_us: Option<u32>) -> TestPlan {
    let mut p = TestPlan::new(TestKind::TcpStream);
    p.warmup_ns = 0;
    p.duration_ns = 1_000_000_000;
    p.sockets.mark = mark;
    p.sockets.tcp_tx_delay_us = delay_us;
    p
}

/// A keyless spec asking a server run as root for kube-proxy's masquerade
/// mark (0x4000) and a one-second transmit delay: the old server applied
/// both (`ss -e` showed `fwmark:0x4000` on its data listener). Without the
/// operator's `--allow-mark` and `--allow-tx-delay` each is refused naming
/// the flag, and no socket of the server carries the mark; with them, a
/// client's `--mark` and `--tcp-tx-delay` reach the server's sockets.
#[test]
fn marks_and_delays_need_the_operators_opt_in() {
    if !is_root() {
        eprintln!("server_hardening: marks and delays skipped: SO_MARK needs CAP_NET_ADMIN");
        return;
    }
    let server = start_server(&[]);
    let (_held, a) = send_spec(
        &server.addr,
        "127.0.0.1",
        &marked_stream(Some(0x4000), Some(1_000_000)),
    )
    .unwrap();
    let marked = marked_sockets(server.pid(), "0x4000");
    let (_held2, d) = send_spec(
        &server.addr,
        "127.0.0.1",
        &marked_stream(None, Some(1_000_000)),
    )
    .unwrap();
    eprintln!(
        "server_hardening: keyless marks and delays: mark 0x4000: {} {}; server sockets marked: {marked}; tx delay 1 s: {} {}",
        a["type"], a["message"], d["type"], d["message"]
    );
    assert_eq!(a["type"], "error", "{a}");
    assert!(
        a["message"].as_str().unwrap().contains("--allow-mark"),
        "{a}"
    );
    assert_eq!(marked, 0, "the server's sockets carry the mark");
    assert_eq!(d["type"], "error", "{d}");
    assert!(
        d["message"].as_str().unwrap().contains("--allow-tx-delay"),
        "{d}"
    );

    // The operator's opt-in: that mark, delays up to 5 ms.
    let allowing = start_server(&["--allow-mark", "0x4000,7", "--allow-tx-delay", "5ms"]);
    let run = |extra: &[&str]| {
        Thrum::run("tcp_stream")
            .on(&allowing)
            .len("300ms")
            .args(extra)
            .arg("--json")
    };
    let ok = run(&["--mark", "16384", "--tcp-tx-delay", "1ms"]).json();
    let remote = &ok["summary"]["remote"]["socket_options"];
    assert_eq!(remote["mark"], 16384, "{remote}");
    assert_eq!(remote["tcp_tx_delay_us"], 1000, "{remote}");
    // Refused by the server: the result's error names its flag.
    let refused = |extra: &[&str], flag: &str| {
        let ran = run(extra).fails();
        let e = ran.json()["summary"]["error"]
            .as_str()
            .unwrap_or("")
            .to_string();
        assert!(e.contains(flag), "{}", ran.report());
    };
    refused(&["--mark", "8"], "--allow-mark");
    refused(&["--tcp-tx-delay", "6ms"], "--allow-tx-delay 5ms");
}

/// Whether the server has closed `s`; what it sent meanwhile is read and
/// dropped. `s` must be non-blocking.
fn closed(s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
            Err(_) => return true,
        }
    }
}

/// Connections that prove nothing, held from each of a few addresses and
/// reopened as soon as the server drops them: silent ones, or (`hello`)
/// ones that say hello and never answer the challenge.
struct Siege {
    stop: Arc<AtomicBool>,
    opened: Arc<AtomicU64>,
    threads: Vec<JoinHandle<()>>,
}

impl Siege {
    fn start(addr: &str, from: &[(&str, bool)], per_address: usize) -> Siege {
        let stop = Arc::new(AtomicBool::new(false));
        let opened = Arc::new(AtomicU64::new(0));
        let threads = from
            .iter()
            .map(|&(from, says_hello)| {
                let (addr, from) = (addr.to_string(), from.to_string());
                let (stop, opened) = (stop.clone(), opened.clone());
                thread::spawn(move || {
                    let mut held: Vec<TcpStream> = Vec::new();
                    while !stop.load(Relaxed) {
                        held.retain_mut(|s| !closed(s));
                        while held.len() < per_address && !stop.load(Relaxed) {
                            let Some(mut s) = dial_from(&addr, &from) else {
                                break;
                            };
                            if says_hello {
                                let _ = s.write_all(&hello());
                            }
                            let _ = s.set_nonblocking(true);
                            opened.fetch_add(1, Relaxed);
                            held.push(s);
                        }
                        thread::sleep(Duration::from_millis(10));
                    }
                })
            })
            .collect();
        Siege {
            stop,
            opened,
            threads,
        }
    }

    /// 16 connections from each of 127.0.0.2 to 127.0.0.5 (the handshakes
    /// one address may have), those marked saying hello; given half a
    /// second to open them.
    fn of_four(addr: &str, hello: [bool; 4]) -> Siege {
        let from = ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"];
        let siege = Siege::start(addr, &from.into_iter().zip(hello).collect::<Vec<_>>(), 16);
        thread::sleep(Duration::from_millis(500));
        siege
    }

    /// Stop; how many connections were opened in all.
    fn stop(self) -> u64 {
        self.stop.store(true, Relaxed);
        for t in self.threads {
            let _ = t.join();
        }
        self.opened.load(Relaxed)
    }
}

fn key_file(dir: &std::path::Path) -> String {
    let p = dir.join("key");
    std::fs::write(&p, "the lab's key, long enough to be one\n").unwrap();
    p.to_str().unwrap().to_string()
}

/// A short tcp_rr from 127.0.0.6 against `server`, with `extra` flags.
fn rr_from_six(server: &ServerProc, extra: &[&str]) -> Thrum {
    Thrum::run("tcp_rr")
        .on(server)
        .args(["--bind", "127.0.0.6"])
        .len("200ms")
        .args(extra)
}

/// Run `client` with `--json` `tries` times; how many ran, and the
/// distinct errors of the others.
fn served_of(tries: usize, client: &Thrum) -> (usize, Vec<String>) {
    let client = client.clone().arg("--json");
    let mut served = 0;
    let mut errors: Vec<String> = Vec::new();
    for _ in 0..tries {
        let out = client.output();
        if out.success() {
            served += 1;
        } else {
            let e = out.json()["summary"]["error"]
                .as_str()
                .unwrap_or("no error in the result")
                .to_string();
            if !errors.contains(&e) {
                errors.push(e);
            }
        }
    }
    (served, errors)
}

/// A tcp_rr session from 127.0.0.1, accepted and never started: it holds
/// a session slot until its start deadline.
pub(crate) fn accepted_session(addr: &str) -> TcpStream {
    let mut plan = TestPlan::new(TestKind::TcpRr);
    plan.warmup_ns = 0;
    let (s, answer) = send_spec(addr, "127.0.0.1", &plan).expect("a connection");
    assert_eq!(answer["type"], "accepted", "{answer}");
    s
}

/// A `--psk-file` server; silent connections from 127.0.0.2 to 127.0.0.4
/// and hellos never completed from 127.0.0.5, 16 each (the handshakes one
/// address may have), each reopened as the server drops it. The old server
/// counted them against its 64 session slots, so a keyed client from
/// 127.0.0.6 was refused 20 of 20 times ("server busy: 64 sessions
/// running"). Keyed clients must be served every time.
#[test]
fn keyed_clients_are_served_beside_unproved_connections() {
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path());
    let server = start_server(&["--psk-file", &key]);
    let siege = Siege::of_four(&server.addr, [false, false, false, true]);
    let t0 = Instant::now();
    let (served, errors) = served_of(20, &rr_from_six(&server, &["--psk-file", &key]));
    let secs = t0.elapsed().as_secs_f64();
    let opened = siege.stop();
    eprintln!(
        "server_hardening: unproved connections, keyed server: keyed client served {served}/20 in {secs:.1} s beside 64 unproved connections ({opened} opened in all); errors: {errors:?}"
    );
    assert_eq!(served, 20, "keyed clients refused: {errors:?}");
}

/// The pool of handshakes is the server's; a keyless server still serves a
/// client from another address while four addresses hold every handshake
/// they may, and the unproved are dropped within the hello deadline.
#[test]
fn a_keyless_server_serves_beside_unproved_connections() {
    let server = start_server(&[]);
    let siege = Siege::of_four(&server.addr, [false, false, true, true]);
    // One silent connection of our own: how long the server holds it.
    let mut ours = dial_from(&server.addr, "127.0.0.7").unwrap();
    let t0 = Instant::now();
    let (served, errors) = served_of(5, &rr_from_six(&server, &[]));
    let said = error_then_close(&mut ours).unwrap_or_default();
    let held = t0.elapsed();
    let opened = siege.stop();
    eprintln!(
        "server_hardening: unproved connections, keyless server: served {served}/5 ({opened} unproved opened); a silent connection was held {held:.1?}: {said}"
    );
    assert_eq!(served, 5, "refused: {errors:?}");
    assert!(
        said.contains("timed out waiting for 'hello'") || said.contains("handshake"),
        "{said}"
    );
}

fn udp_stream(flows: u32) -> TestPlan {
    let mut p = TestPlan::new(TestKind::UdpStream);
    p.flows = flows;
    p.warmup_ns = 0;
    p.duration_ns = 2_000_000_000;
    p
}

/// `--max-ports 2048`: 127.0.0.2 keeps asking for udp_stream sessions of
/// 256 flows and never starts them (each reopened as the start deadline
/// drops it). The old server let it hold all 2,048 ports, and a udp_stream
/// client from 127.0.0.3 was refused; now 127.0.0.2 holds its share
/// (`--max-ports-per-client`, by default a quarter as of the session
/// slots: 512) and the other client is served.
#[test]
fn one_address_cannot_hold_every_port() {
    let server = start_server(&["--max-ports", "2048"]);
    let stop = Arc::new(AtomicBool::new(false));
    let holder = {
        let (addr, stop) = (server.addr.clone(), stop.clone());
        thread::spawn(move || {
            let mut held: Vec<TcpStream> = Vec::new();
            let mut most = 0;
            let mut refusal = String::new();
            while !stop.load(Relaxed) {
                held.retain_mut(|s| !closed(s));
                if held.len() < 16
                    && let Some((s, a)) = send_spec(&addr, "127.0.0.2", &udp_stream(256))
                {
                    if a["type"] == "accepted" {
                        s.set_nonblocking(true).unwrap();
                        held.push(s);
                        most = most.max(held.len());
                    } else if refusal.is_empty() {
                        refusal = a["message"].as_str().unwrap_or("").to_string();
                    }
                }
                thread::sleep(Duration::from_millis(50));
            }
            (most, refusal)
        })
    };
    thread::sleep(Duration::from_secs(1));
    let client = Thrum::run("udp_stream")
        .on(&server)
        .args(["--bind", "127.0.0.3"])
        .flows(8)
        .len("200ms");
    let (served, errors) = served_of(12, &client);
    stop.store(true, Relaxed);
    let (most, refusal) = holder.join().unwrap();
    eprintln!(
        "server_hardening: one address's ports: 127.0.0.2 held up to {most} sessions of 256 ports ({refusal}); 127.0.0.3 served {served}/12: {errors:?}"
    );
    assert_eq!(served, 12, "refused: {errors:?}");
    assert_eq!(most, 2, "sessions of 256 ports one address held");
    assert!(refusal.contains("--max-ports-per-client"), "{refusal}");
}
