//! Limits that hold against a client that follows the protocol just well
//! enough: sessions end at their stated bound, control frames
//! after the spec are sized to the session, UDP flow sockets drop what was
//! queued before `start`, silent data connections cost the real flows no
//! time, and every dropped connection is counted as refused.

use std::io::Write;
use std::net::{TcpStream, UdpSocket};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;
use thrum::control::proto::{self, ClientMsg, encode};
use thrum::plan::Phase;
use thrum::plan::{TestKind, TestPlan};
use thrum::workload::crr::TOKEN_LEN;

use crate::common::{ServerProc, Thrum, u};
use crate::hostile::{connect, connect_from, error_then_close, hello, next_frame};

/// Hello and spec on a server without a key; returns the control
/// connection and the `accepted` frame.
fn open_session(addr: &str, plan: TestPlan) -> (TcpStream, Value) {
    let mut s = connect(addr);
    s.set_read_timeout(Some(Duration::from_secs(40))).unwrap();
    s.write_all(&hello()).unwrap();
    assert_eq!(next_frame(&mut s).unwrap()["type"], "hello");
    s.write_all(&encode(&ClientMsg::from(proto::Spec {
        flows_per_listener: 0,
        plan: Box::new(plan),
    })))
    .unwrap();
    let acc = next_frame(&mut s).expect("accepted");
    assert_eq!(acc["type"], "accepted", "{acc}");
    (s, acc)
}

fn short_plan(test: TestKind) -> TestPlan {
    let mut p = TestPlan::new(test);
    p.warmup_ns = 0;
    p.duration_ns = 1_000_000_000;
    p.interval_ns = 200_000_000;
    p
}

/// The session token of an `accepted` frame, as the data connections send it.
fn token(acc: &Value) -> [u8; TOKEN_LEN] {
    thrum::control::auth::from_hex(acc["token"].as_str().unwrap()).unwrap()
}

/// A UDP socket on 127.0.0.1 for the client's end of a flow.
fn udp_end() -> (UdpSocket, u16) {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = s.local_addr().unwrap().port();
    (s, port)
}

fn tick(s: &mut TcpStream, seq: u32) {
    s.write_all(&encode(&ClientMsg::from(proto::Tick {
        seq,
        phase: Phase::Measure,
        load: None,
        due_ns: None,
    })))
    .unwrap();
}

/// Tick until the server ends the session; its error and when it came.
fn tick_until_ended(s: &mut TcpStream, every: Duration, give_up: Duration) -> (String, Duration) {
    let t0 = Instant::now();
    s.set_read_timeout(Some(every)).unwrap();
    let mut seq = 0;
    while t0.elapsed() < give_up {
        // A write fails once the server has closed and reset.
        if s.write_all(&encode(&ClientMsg::from(proto::Tick {
            seq,
            phase: Phase::Measure,
            load: None,
            due_ns: None,
        })))
        .is_err()
        {
            break;
        }
        seq += 1;
        // Read what came (samples, or the error and EOF).
        loop {
            match next_frame(s) {
                Some(f) if f["type"] == "error" => {
                    return (f["message"].as_str().unwrap().to_string(), t0.elapsed());
                }
                Some(_) => continue,
                None => break,
            }
        }
    }
    (String::new(), t0.elapsed())
}

/// A client that asks for a 1 s test and then keeps ticking is ended at
/// the stated length + one interval + the drain allowance (15 s), with an
/// error naming --max-duration; a count-limited run (-n) is ended at the
/// server's --max-duration plus the same allowance.
#[test]
fn a_session_ends_at_its_stated_bound_whatever_the_client_sends() {
    let server = ServerProc::start(&["--max-duration", "3s"]);
    let runs: Vec<_> = [None, Some(1_000_000_000u64)]
        .into_iter()
        .map(|transactions| {
            let addr = server.addr.clone();
            thread::spawn(move || {
                let mut plan = short_plan(TestKind::UdpRr);
                plan.transactions = transactions;
                let stated = if transactions.is_some() { 3.0 } else { 1.0 };
                let (mut s, _) = open_session(&addr, plan);
                let (_sock, port) = udp_end();
                s.write_all(&encode(&ClientMsg::from(proto::Start {
                    udp_addrs: vec![],
                    parts_udp_addrs: vec![],
                    udp_ports: vec![port],
                    parts_udp_ports: vec![],
                })))
                .unwrap();
                assert_eq!(next_frame(&mut s).unwrap()["type"], "started");
                let bound = stated + 0.2 + 15.0;
                let (err, lasted) = tick_until_ended(
                    &mut s,
                    Duration::from_millis(200),
                    Duration::from_secs_f64(bound + 20.0),
                );
                (stated, bound, err, lasted)
            })
        })
        .collect();
    for r in runs {
        let (stated, bound, err, lasted) = r.join().unwrap();
        assert!(
            err.contains("--max-duration"),
            "stated {stated} s: the session was not ended with an error naming the limit \
             within {:.1} s (got {err:?} after {lasted:?})",
            bound + 20.0
        );
        // Never before the bound; after it by no more than a tick's read
        // time and a loaded machine's scheduling.
        assert!(
            lasted.as_secs_f64() >= bound - 0.5,
            "ended after {lasted:?}, before its bound of {bound} s: {err}"
        );
        assert!(
            lasted.as_secs_f64() < bound + 10.0,
            "ended after {lasted:?}, well past its bound of {bound} s"
        );
    }
}

/// After the spec a session's control frames are sized to what it needs (a
/// `start` or `finish` with one entry per flow): a 2 MiB frame on a
/// one-flow session is refused on its length prefix, before any of it is
/// read or allocated.
#[test]
fn control_frames_after_the_spec_are_sized_to_the_session() {
    let server = ServerProc::start(&[]);
    let (mut s, _) = open_session(&server.addr, short_plan(TestKind::UdpRr));
    s.write_all(&(2u32 << 20).to_be_bytes()).unwrap();
    let err = error_then_close(&mut s).unwrap_or_default();
    assert!(
        err.contains("over the limit"),
        "a 2 MiB frame after the spec was not refused: {err:?}"
    );
    // The same during the test: a `finish` of a million counts.
    let (mut s, _) = open_session(&server.addr, short_plan(TestKind::UdpStream));
    let (_sock, port) = udp_end();
    s.write_all(&encode(&ClientMsg::from(proto::Start {
        udp_addrs: vec![],
        parts_udp_addrs: vec![],
        udp_ports: vec![port],
        parts_udp_ports: vec![],
    })))
    .unwrap();
    assert_eq!(next_frame(&mut s).unwrap()["type"], "started");
    s.write_all(&encode(&ClientMsg::from(proto::Finish {
        datagrams_sent: vec![0; 1_000_000],
    })))
    .unwrap_or(());
    let err = error_then_close(&mut s).unwrap_or_default();
    assert!(
        err.contains("over the limit"),
        "a finish of a million counts was not refused: {err:?}"
    );
}

/// Read frames until the final report.
fn final_report(s: &mut TcpStream) -> Value {
    loop {
        let f = next_frame(s).expect("the final report");
        match f["type"].as_str() {
            Some("final") => return f,
            Some("error") => panic!("session failed: {f}"),
            _ => {}
        }
    }
}

/// Datagrams anyone sent to a UDP flow's port between `accepted` and
/// `start` are dropped, not counted as the flow's, and counted as refused.
#[test]
fn udp_datagrams_queued_before_start_are_refused() {
    let server = ServerProc::start(&[]);
    let (mut s, acc) = open_session(&server.addr, short_plan(TestKind::UdpStream));
    let server_port = u(&acc["udp_ports"][0]) as u16;
    let foreign = UdpSocket::bind("127.0.0.2:0").unwrap();
    // 64-byte datagrams that look like udp_stream ones with high sequence
    // numbers: counted, they would make the receiver see a huge gap.
    let mut d = [0u8; 64];
    d[4..12].copy_from_slice(&(1u64 << 40).to_be_bytes());
    for _ in 0..200 {
        let _ = foreign.send_to(&d, ("127.0.0.1", server_port));
    }
    thread::sleep(Duration::from_millis(100));
    let (_sock, port) = udp_end();
    s.write_all(&encode(&ClientMsg::from(proto::Start {
        udp_addrs: vec![],
        parts_udp_addrs: vec![],
        udp_ports: vec![port],
        parts_udp_ports: vec![],
    })))
    .unwrap();
    assert_eq!(next_frame(&mut s).unwrap()["type"], "started");
    tick(&mut s, 0);
    s.write_all(&encode(&ClientMsg::from(proto::Finish {
        datagrams_sent: vec![0],
    })))
    .unwrap();
    let f = final_report(&mut s);
    let c = &f["counts"][0];
    assert_eq!(
        u(&c["datagrams_received"]),
        0,
        "foreign datagrams counted: {f}"
    );
    assert_eq!(u(&c["lost"]), 0, "{f}");
    let refused = u(&f["refused"]);
    assert!(
        (1..=200).contains(&refused),
        "the queued datagrams were not counted as refused: {f}"
    );
}

/// Silent data connections from the client's own address, one with a wrong
/// token and one from another address do not hold up the real flow (before,
/// tokens were read one connection at a time, 2 s each, within a 5 s
/// window), and all of them are counted in `final.refused`.
#[test]
fn silent_data_connections_neither_delay_nor_go_uncounted() {
    let server = ServerProc::start(&[]);
    let (mut s, acc) = open_session(&server.addr, short_plan(TestKind::TcpStream));
    let data = format!("127.0.0.1:{}", u(&acc["data_port"]));
    let silent: Vec<TcpStream> = (0..3).map(|_| connect(&data)).collect();
    let mut wrong = connect(&data);
    wrong.write_all(&[0u8; TOKEN_LEN + 4]).unwrap();
    let foreign = connect_from(&data, "127.0.0.2:0");
    let mut real = connect(&data);
    real.write_all(&token(&acc)).unwrap();
    real.write_all(&0u32.to_be_bytes()).unwrap();
    s.write_all(&encode(&ClientMsg::from(proto::Start {
        udp_addrs: vec![],
        parts_udp_addrs: vec![],
        udp_ports: vec![],
        parts_udp_ports: vec![],
    })))
    .unwrap();
    let started = next_frame(&mut s).unwrap();
    assert_eq!(started["type"], "started", "{started}");
    real.write_all(&[7u8; 1000]).unwrap();
    tick(&mut s, 0);
    real.shutdown(std::net::Shutdown::Write).unwrap();
    s.write_all(&encode(&ClientMsg::from(proto::Finish {
        datagrams_sent: vec![],
    })))
    .unwrap();
    let f = final_report(&mut s);
    assert_eq!(
        u(&f["refused"]),
        5,
        "3 silent, 1 wrong token, 1 foreign: {f}"
    );
    drop((silent, foreign));
}

/// Threads of a process, from /proc.
fn threads_of(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |d| d.count())
}

/// 64 hostile sessions at once, each asking for 64 tcp_crr worker threads
/// (about 41 MiB each by the estimate, within --max-session-memory): the
/// server admits what fits its --max-memory of 256 MiB, its own memory
/// included, refuses the rest naming the flag, stays under the limit while
/// they are held, and returns to its descriptors and threads once they
/// vanish.
#[test]
fn many_sessions_together_stay_under_max_memory() {
    const MAX_MB: u64 = 256;
    let server = ServerProc::start(&["--max-memory", "256M"]);
    let (fds0, threads0) = (server.open_fds(), threads_of(server.pid()));
    let (tx, rx) = std::sync::mpsc::channel();
    let clients: Vec<_> = (0..64)
        .map(|i| {
            let (addr, tx) = (server.addr.clone(), tx.clone());
            thread::spawn(move || {
                // Four source addresses: one address may hold only 16
                // handshakes at once.
                let mut s = connect_from(&addr, &format!("127.0.0.{}:0", 1 + i % 4));
                s.write_all(&hello()).unwrap();
                assert_eq!(next_frame(&mut s).unwrap()["type"], "hello");
                let mut plan = short_plan(TestKind::TcpCrr);
                (plan.flows, plan.threads) = (64, 64);
                plan.duration_ns = 20_000_000_000;
                s.write_all(&encode(&ClientMsg::from(proto::Spec {
                    flows_per_listener: 0,
                    plan: Box::new(plan),
                })))
                .unwrap();
                let reply = next_frame(&mut s).unwrap();
                if reply["type"] == "accepted" {
                    s.write_all(&encode(&ClientMsg::from(proto::Start {
                        udp_addrs: vec![],
                        parts_udp_addrs: vec![],
                        udp_ports: vec![],
                        parts_udp_ports: vec![],
                    })))
                    .unwrap();
                    assert_eq!(next_frame(&mut s).unwrap()["type"], "started");
                    tx.send(Ok(())).unwrap();
                } else {
                    let e = reply["message"].as_str().unwrap_or_default().to_string();
                    tx.send(Err(e)).unwrap();
                }
                s
            })
        })
        .collect();
    drop(tx);
    let replies: Vec<Result<(), String>> = rx.iter().collect();
    let admitted = replies.iter().filter(|r| r.is_ok()).count();
    let rss_mb = server.rss_kb() >> 10;
    let threads = threads_of(server.pid());
    let conns: Vec<TcpStream> = clients.into_iter().map(|h| h.join().unwrap()).collect();
    for r in &replies {
        if let Err(e) = r {
            assert!(
                e.contains("--max-memory"),
                "refused for another reason: {e}"
            );
        }
    }
    assert!(
        (1..64).contains(&admitted),
        "{admitted} of 64 sessions admitted: the limit should admit some and refuse the rest"
    );
    assert!(
        threads >= admitted * 64,
        "{admitted} sessions admitted but the server runs {threads} threads"
    );
    assert!(
        rss_mb < MAX_MB,
        "the server holds {rss_mb} MiB with {admitted} sessions, over --max-memory {MAX_MB}M"
    );
    // The clients vanish: every session ends, its threads and sockets go.
    drop(conns);
    let t0 = Instant::now();
    while (server.open_fds() > fds0 || threads_of(server.pid()) > threads0)
        && t0.elapsed() < Duration::from_secs(10)
    {
        thread::sleep(Duration::from_millis(50));
    }
    assert!(
        server.open_fds() <= fds0 && threads_of(server.pid()) <= threads0,
        "after 10 s the server still has {} descriptors (was {fds0}) and {} threads (was {threads0})",
        server.open_fds(),
        threads_of(server.pid())
    );
    eprintln!(
        "admitted {admitted} of 64, server RSS {rss_mb} MiB with {threads} threads; back to baseline in {:?}",
        t0.elapsed()
    );
}

/// A frame of raw JSON text, as a client that is not thrum may send.
fn raw_frame(json: &str) -> Vec<u8> {
    let mut f = (json.len() as u32).to_be_bytes().to_vec();
    f.extend_from_slice(json.as_bytes());
    f
}

/// Strings a client sends before and after authentication (the hello's
/// `software`, an unknown value in the spec that the decoder quotes) reach
/// the server's log escaped and cut: no forged line, no terminal escape or
/// NUL, no line longer than a few kilobytes, one JSON object per line.
#[test]
fn client_strings_cannot_forge_or_flood_the_server_log() {
    let dir = tempfile::tempdir().unwrap();
    let evil = format!(
        "evil\nthrum server: session 10.9.9.9:1 tcp_rr: ok after 1.0 s\x1b[2J\0{}",
        "A".repeat(60_000)
    );
    for format in ["json", "text"] {
        let log = dir.path().join(format!("{format}.log"));
        let server = ServerProc::start_logged(&["--log-format", format], &log);
        // A hello of another protocol version: the refusal quotes `software`.
        let mut s = connect(&server.addr);
        let hello = serde_json::json!({"type": "hello", "protocol": 999, "software": evil});
        s.write_all(&raw_frame(&hello.to_string())).unwrap();
        error_then_close(&mut s);
        // A spec naming a test that does not exist: the decoder quotes it.
        let mut s = connect(&server.addr);
        s.write_all(&crate::hostile::hello()).unwrap();
        next_frame(&mut s).unwrap();
        let spec = serde_json::json!({"type": "spec", "plan": {"test": evil}});
        s.write_all(&raw_frame(&spec.to_string())).unwrap();
        error_then_close(&mut s);
        // Both sessions are logged once they have ended.
        let t0 = Instant::now();
        while std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .count()
            < 2
            && t0.elapsed() < Duration::from_secs(10)
        {
            thread::sleep(Duration::from_millis(50));
        }
        drop(server);
        let text = std::fs::read(&log).unwrap();
        let text = String::from_utf8(text).expect("the log is UTF-8");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines.len(),
            2,
            "{format}: two sessions, two lines: {text:?}"
        );
        for l in &lines {
            assert!(l.len() < 4096, "{format}: a {}-byte line", l.len());
            assert!(
                !l.chars().any(char::is_control),
                "{format}: a control character in {l:?}"
            );
            assert!(
                l.contains("evil"),
                "{format}: the value is still quoted: {l}"
            );
            if format == "json" {
                let v: Value = serde_json::from_str(l).expect("one JSON object per line");
                assert_eq!(v["outcome"], "refused", "{v}");
            } else {
                assert!(l.starts_with("thrum server: session 127.0.0.1:"), "{l}");
            }
        }
    }
}

/// A hostile server on loopback that follows the protocol well enough for
/// a one-flow udp_rr run and fills every string it sends with terminal
/// escapes and forged lines, and its usage with an impossible figure.
fn hostile_server() -> (String, thread::JoinHandle<()>) {
    hostile_server_naming(Vec::new())
}

/// [`hostile_server`], naming `udp_addrs` as where its UDP sockets are.
fn hostile_server_naming(
    udp_addrs: Vec<thrum::io::spread::AddrRun>,
) -> (String, thread::JoinHandle<()>) {
    use thrum::control::proto::{ServerMsg, read_msg, write_msg};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let evil = "\x1b[2J\x1b[H\nthrum: all good\0".to_string();
    let h = thread::spawn(move || {
        let (mut c, _) = l.accept().unwrap();
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        let started = Instant::now();
        while let Ok(m) = read_msg::<ClientMsg>(&mut c) {
            let reply: ServerMsg = match m {
                ClientMsg::Hello(_) => proto::Hello {
                    protocol: thrum::control::proto::PROTOCOL_VERSION,
                    software: evil.clone(),
                    limits: None,
                    nonce: None,
                    features: Vec::new(),
                    clock_id: None,
                }
                .into(),
                ClientMsg::Spec(_) => proto::Accepted {
                    data_port: 0,
                    token: "00".repeat(TOKEN_LEN),
                    udp_ports: vec![udp.local_addr().unwrap().port()],
                    more_data_ports: vec![],
                    udp_addrs: udp_addrs.clone(),
                    parts: vec![],
                }
                .into(),
                ClientMsg::Start(_) => proto::Started {
                    threads: 1,
                    drivers: vec![evil.clone()],
                }
                .into(),
                ClientMsg::Tick(proto::Tick { seq, .. }) => proto::Sample {
                    seq,
                    elapsed_ns: started.elapsed().as_nanos() as u64,
                    unix_ns: 0,
                    counts: vec![Default::default()],
                    part_retransmits: Vec::new(),
                    tcp_info: Vec::new(),
                    cpu: None,
                    rusage: None,
                }
                .into(),
                ClientMsg::Finish(_) => proto::Final {
                    counts: vec![Default::default()],
                    rusage: thrum::sensors::Rusage {
                        max_rss_kb: u64::MAX,
                        ..Default::default()
                    },
                    errors: vec![evil.clone()],
                    refused: 0,
                    window: None,
                    provenance: None,
                    tcp_retransmits: None,
                    zerocopy: None,
                    socket_buffers: None,
                    busy_poll: None,
                    uring_napi: None,
                    socket_options: None,
                    congestion_control: Some(evil.clone()),
                    call_times: None,
                    train_gaps: None,
                    part_retransmits: vec![],
                }
                .into(),
                _ => break,
            };
            if write_msg(&mut c, &reply).is_err() {
                break;
            }
        }
    });
    (addr, h)
}

/// The client prints nothing from a hostile server raw: its software name,
/// drivers and errors come out escaped in every output, a congestion
/// control that is no algorithm's name is dropped, and a usage no machine
/// can have is left out with a warning that says so.
#[test]
fn a_hostile_servers_strings_and_numbers_are_not_printed_raw() {
    for json in [false, true] {
        let (addr, h) = hostile_server();
        let mut run = Thrum::run("udp_rr").host(&addr).len("1s").arg("-v");
        if json {
            run = run.arg("--json");
        }
        let o = run.output();
        h.join().unwrap();
        let all = [o.stdout.as_slice(), o.stderr.as_slice()].concat();
        let text = String::from_utf8_lossy(&all);
        assert!(
            !all.contains(&0x1b) && !all.contains(&0),
            "json={json}: an escape or NUL from the server reached the output: {text}"
        );
        assert!(
            !text.lines().any(|l| l.starts_with("thrum: all good")),
            "json={json}: a forged line: {text}"
        );
        assert!(
            text.contains("impossible max_rss_kb"),
            "json={json}: {text}"
        );
        if json {
            let v: Value = serde_json::from_slice(&o.stdout).unwrap();
            assert!(
                v["environment"]["server_software"]
                    .as_str()
                    .unwrap()
                    .contains("\\u{1b}"),
                "{v}"
            );
            // Not a congestion control's name: not kept at all.
            assert!(v["summary"]["remote"].get("congestion_control").is_none());
        }
    }
}

/// SIGHUP (the terminal the server was started from closing) does not end
/// the server: it is logged and the server goes on serving. A key file
/// others can read, or one reached through a link, is warned about.
#[test]
fn sighup_is_logged_and_survived_and_a_loose_key_file_is_warned_about() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("psk");
    std::fs::write(&key, "a key of at least sixteen bytes").unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let link = dir.path().join("psk-link");
    std::os::unix::fs::symlink(&key, &link).unwrap();
    let log = dir.path().join("log");
    let mut server = ServerProc::start_logged(&["--psk-file", link.to_str().unwrap()], &log);
    // SAFETY: a signal to our own child.
    assert_eq!(unsafe { libc::kill(server.pid() as i32, libc::SIGHUP) }, 0);
    let t0 = Instant::now();
    while !std::fs::read_to_string(&log).unwrap().contains("SIGHUP")
        && t0.elapsed() < Duration::from_secs(10)
    {
        thread::sleep(Duration::from_millis(50));
    }
    assert!(
        server.child.try_wait().unwrap().is_none(),
        "SIGHUP ended the server"
    );
    // Still serving: a hello is answered.
    let mut s = connect(&server.addr);
    s.write_all(&hello()).unwrap();
    assert_eq!(next_frame(&mut s).unwrap()["type"], "hello");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("SIGHUP received and ignored"), "{text}");
    assert!(text.contains("is a symbolic link"), "{text}");
    assert!(text.contains("has mode 644"), "{text}");
}

/// A server may name other addresses for its UDP sockets only as the
/// server checks a client's: its own, or loopback ones when it is on
/// loopback. One that names a third host is refused before the client
/// opens a socket to it: a server cannot aim a client's datagrams anywhere.
#[test]
fn a_server_naming_a_third_host_for_its_udp_sockets_is_refused() {
    let third = thrum::io::spread::AddrRun {
        addr: "192.0.2.1".parse().unwrap(),
        flows: 1,
    };
    let (addr, h) = hostile_server_naming(vec![third]);
    let o = Thrum::run("udp_rr")
        .host(&addr)
        .len("1s")
        .arg("--json")
        .output();
    h.join().unwrap();
    let doc = o.fails().json();
    let e = doc["summary"]["error"].as_str().unwrap_or_default();
    assert!(e.contains("192.0.2.1") && e.contains("UDP address"), "{e}");
}
