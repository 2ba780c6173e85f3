//! Failures end cleanly: a clear error naming the cause, a non-zero exit,
//! every sample gathered so far still written, and a server that goes on
//! serving.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common::{
    ServerProc, Thrum, assert_rejected, assert_serves, read_json, stream_into_files, u,
    wait_for_lines,
};

/// The client ends on a dead server: at once when the kernel resets its
/// connections, at worst one 200 ms interval plus `SAMPLE_TIMEOUT` after
/// the last sample; the rest is room for a busy machine to schedule it.
const GIVE_UP: Duration =
    Duration::from_millis(200 + thrum::control::client::SAMPLE_TIMEOUT.as_millis() as u64 + 1800);

fn frame(v: serde_json::Value) -> Vec<u8> {
    let body = serde_json::to_vec(&v).unwrap();
    let mut out = (body.len() as u32).to_be_bytes().to_vec();
    out.extend(body);
    out
}

fn read_frame(s: &mut TcpStream) -> serde_json::Value {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).unwrap();
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).unwrap();
    serde_json::from_slice(&body).unwrap()
}

#[test]
fn unreachable_server_fails_fast() {
    // Nothing listens on port 1 of loopback: the kernel answers the SYN
    // with a reset. Fast means on that answer, not after a timeout, and the
    // error says which: "refused" is the reset, a timeout would say it
    // timed out. (A bound on the clock, 5 s before, also passed a client
    // that sat out its 3 s connect timeout.)
    let out = Thrum::cmd(&["run", "tcp_rr", "-H", "127.0.0.1:1", "--json"])
        .timeout(Duration::from_secs(10))
        .fails();
    let doc = out.json();
    let e = doc["summary"]["error"].as_str().unwrap();
    assert!(
        e.contains("cannot reach") && e.contains("127.0.0.1:1") && e.contains("refused"),
        "{e}"
    );
    assert!(out.stderr().contains("cannot reach"));
}

#[test]
fn server_refuses_another_protocol_version() {
    let server = ServerProc::start(&[]);
    let mut s = TcpStream::connect(&server.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(&frame(
        serde_json::json!({"type": "hello", "protocol": 99, "software": "thrum 99"}),
    ))
    .unwrap();
    let reply = read_frame(&mut s);
    assert_eq!(reply["type"], "error");
    let m = reply["message"].as_str().unwrap();
    assert!(m.contains("v2") && m.contains("v99"), "{m}");
    // And it keeps serving.
    assert_serves(&server);
}

#[test]
fn client_refuses_another_protocol_version() {
    let fake = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = fake.local_addr().unwrap().to_string();
    let h = std::thread::spawn(move || {
        let (mut s, _) = fake.accept().unwrap();
        let _hello = read_frame(&mut s);
        s.write_all(&frame(
            serde_json::json!({"type": "hello", "protocol": 7, "software": "thrum 7.0"}),
        ))
        .unwrap();
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
    });
    let doc = Thrum::cmd(&["run", "tcp_rr", "-H", &addr, "--json"])
        .timeout(Duration::from_secs(10))
        .fails()
        .json();
    let e = doc["summary"]["error"].as_str().unwrap();
    assert!(
        e.contains("protocol version mismatch") && e.contains("v2") && e.contains("v7"),
        "{e}"
    );
    h.join().unwrap();
}

/// Pointed at a server of another protocol (here an HTTP
/// server's 400), the client says that the peer is not a thrum server and
/// what it looked like, not "a control frame of 1213486160 bytes".
#[test]
fn a_peer_that_is_not_thrum_is_named_as_such() {
    let fake = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = fake.local_addr().unwrap().to_string();
    let h = std::thread::spawn(move || {
        let (mut s, _) = fake.accept().unwrap();
        let mut hello = [0u8; 64];
        let _ = s.read(&mut hello);
        s.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").unwrap();
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
    });
    let err = Thrum::cmd(&["run", "tcp_rr", "-H", &addr])
        .timeout(Duration::from_secs(10))
        .fails()
        .stderr();
    assert!(
        err.contains(&format!("{addr} is not a thrum server")),
        "{err}"
    );
    assert!(
        err.contains(r#"it answered like HTTP: "HTTP/1.1 400 Bad Request""#),
        "{err}"
    );
    assert!(!err.contains("1213486160"), "{err}");
    h.join().unwrap();
}

#[test]
fn server_killed_mid_test_keeps_samples() {
    let mut server = ServerProc::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("s.csv");
    let res = dir.path().join("r.json");
    let mut client = stream_into_files(Thrum::run("tcp_stream").host(&server.addr), &res, &csv);
    // Five intervals' rows (and the header) in the samples: then the kill.
    wait_for_lines(&csv, 6);
    server.child.kill().unwrap();
    let killed = Instant::now();
    let status = loop {
        if let Some(s) = client.try_wait().unwrap() {
            break s;
        }
        assert!(
            killed.elapsed() < GIVE_UP,
            "client still running {GIVE_UP:?} after the server died"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(!status.success());
    let doc = read_json(&res);
    let e = doc["summary"]["error"].as_str().unwrap();
    // The cause, whichever end noticed first: the control connection (naming
    // the server) or a data connection.
    assert!(e.contains("closed"), "{e}");
    let n = doc["intervals"].as_array().unwrap().len();
    assert!(n >= 5, "only {n} intervals kept");
    let rows = std::fs::read_to_string(&csv).unwrap().lines().count() - 1;
    assert_eq!(rows, n, "one CSV row per interval for one flow");
}

#[test]
fn client_killed_mid_test_frees_the_session() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let server = ServerProc::start_logged(&["--log-format", "json"], &log);
    let baseline = server.open_fds();
    let stream = dir.path().join("stream.jsonl");
    let csv = dir.path().join("s.csv");
    let mut client = Thrum::run("tcp_rr")
        .host(&server.addr)
        .flows(4)
        .len("20s")
        .interval("200ms")
        .args(["--json-stream", "--samples"])
        .arg(&csv)
        .command()
        .stdout(std::fs::File::create(&stream).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Three intervals streamed: then the kill.
    wait_for_lines(&stream, 3);
    assert!(
        server.open_fds() > baseline,
        "the test holds sockets on the server"
    );
    client.kill().unwrap();
    client.wait().unwrap();
    let killed = Instant::now();

    // Every interval that completed before the kill is in the output already.
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&stream)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("whole JSON lines only"))
        .collect();
    assert!(lines.len() >= 3, "only {} streamed intervals", lines.len());
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l["type"], "interval");
        assert_eq!(u(&l["interval"]["index"]), i as u64);
    }
    let rows = std::fs::read_to_string(&csv).unwrap().lines().count() - 1;
    assert_eq!(rows, 4 * lines.len(), "one CSV row per flow per interval");

    // The server ends the session, says why, and lets go of its sockets.
    let failed = loop {
        let lines = ServerProc::log_lines(&log);
        if let Some(l) = lines.into_iter().find(|l| l["outcome"] == "failed") {
            break l;
        }
        assert!(
            killed.elapsed() < Duration::from_secs(5),
            "no log line for the vanished client within 5 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(failed["test"], "tcp_rr");
    assert!(
        failed["error"].as_str().unwrap().contains("disconnected"),
        "{failed}"
    );
    assert!(
        server.fds_return_to(baseline, Duration::from_secs(5)),
        "server still holds {} fds (baseline {baseline})",
        server.open_fds()
    );
    let doc = assert_serves(&server);
    assert!(u(&doc["summary"]["transactions"]) > 0);
}

#[test]
fn bad_flags_name_the_flag_and_range() {
    let cases: &[(&[&str], &[&str])] = &[
        (&["run", "tcp_rr", "-F", "0"], &["--flows 0", "1..=100000"]),
        (
            &["run", "tcp_rr", "--busy-poll", "0"],
            &["--busy-poll", "1..=1000000"],
        ),
        (
            &["run", "udp_stream", "--zerocopy", "--gso"],
            &[
                "--gso and --zerocopy do not combine",
                "accepted: one of them",
            ],
        ),
        (
            &["run", "tcp_stream", "--gso"],
            &["--gso", "applies only to udp_stream"],
        ),
        (
            &["run", "udp_stream", "--gso", "--rate", "1M"],
            &["--gso", "without --rate"],
        ),
        (
            &["run", "tcp_rr", "--zerocopy"],
            &[
                "--zerocopy",
                "tcp_stream, tcp_maerts, tcp_bidir and udp_stream",
            ],
        ),
        (
            &["run", "tcp_rr", "--driver", "kqueue"],
            &["--driver", "uring"],
        ),
        (&["run", "tcp_stream", "-b", "4"], &["--burst", "tcp_rr"]),
        (
            &["run", "tcp_rr", "-r", "1,100M"],
            &["--rr-size (response)", "1..=67108864"],
        ),
        (
            &["run", "tcp_stream", "-m", "1Gb"],
            &["--send-size", "unknown suffix 'Gb'"],
        ),
        (
            &["run", "tcp_stream", "-m", "0"],
            &["--send-size 0", "1..=67108864"],
        ),
        (
            &["run", "tcp_rr", "-F", "2", "-T", "4"],
            &["--threads 4", "--flows 2"],
        ),
        (
            &["run", "tcp_stream", "-n", "10"],
            &["--transactions", "tcp_rr"],
        ),
        (
            &["run", "udp_foo"],
            &["unknown test 'udp_foo'", "tcp_stream"],
        ),
        (
            &["run", "tcp_rr", "-l", "5x"],
            &["--duration", "unknown suffix"],
        ),
        (
            &["run", "tcp_rr", "--cpu-pin", "a"],
            &["--cpu-pin", "CPU number"],
        ),
        (
            &["server", "--data-ports", "9-1"],
            &["--data-ports", "LO-HI"],
        ),
        (
            &["server", "--max-flows", "0"],
            &["--max-flows", "1..=100000"],
        ),
        (
            &["server", "--max-sessions", "0"],
            &["--max-sessions", "1..=4096"],
        ),
        (
            &["server", "--max-duration", "25h"],
            &["--max-duration", "1s..=24h"],
        ),
        (
            &["server", "--max-session-memory", "1k"],
            &["--max-session-memory", "1M..=1T"],
        ),
        (
            &["server", "--psk-file", "/nonexistent/thrum.key"],
            &["--psk-file /nonexistent/thrum.key", "No such file"],
        ),
        (
            &[
                "run",
                "tcp_rr",
                "-H",
                "127.0.0.1:1",
                "--psk-file",
                "/dev/null",
            ],
            &["--psk-file /dev/null", "not a regular file"],
        ),
        (
            &["run", "tcp_rr", "--psk-file", "/dev/null"],
            &["--psk-file needs -H"],
        ),
    ];
    assert_rejected(cases);
}

#[test]
fn max_sessions_refuses_with_the_limit_then_serves_again() {
    let server = ServerProc::start(&["--max-sessions", "1"]);
    // One accepted session that never starts holds the only slot until its
    // start deadline (a connection that has proved nothing holds none).
    let idle = crate::server_hardening::accepted_session(&server.addr);
    let doc = Thrum::cmd(&["run", "tcp_rr", "-H", &server.addr, "--json"])
        .timeout(Duration::from_secs(10))
        .fails()
        .json();
    let e = doc["summary"]["error"].as_str().unwrap().to_string();
    assert!(
        e.contains("server busy") && e.contains("--max-sessions 1"),
        "{e}"
    );
    drop(idle);
    // The slot is free again once that session has ended.
    let t = Instant::now();
    loop {
        let short = Thrum::run("tcp_rr").host(&server.addr).len("300ms");
        if short.arg("--json").output().success() {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(8),
            "the server did not serve again after its only session ended"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A connect that times out while the kernel's TIME_WAIT table is full
/// says so, with the table's figures, instead of suggesting that no server
/// runs there. In a namespace of its own, whose table is capped at 10
/// (net.ipv4.tcp_max_tw_buckets is per namespace) and filled by a short
/// tcp_crr (the server closes first: one TIME_WAIT per connection); the
/// server's address is behind a veth whose far end drops every frame (a
/// static neighbour entry with nobody's MAC), so the SYN goes unanswered.
#[test]
fn a_timeout_with_a_full_time_wait_table_names_the_table() {
    let Some(ns) = crate::common::Netns::loopback_only("twfull") else {
        return;
    };
    let n = ns.0.as_str();
    for args in [
        &[
            "-n", n, "link", "add", "v0", "type", "veth", "peer", "name", "v1",
        ][..],
        &["-n", n, "addr", "add", "10.9.9.1/24", "dev", "v0"],
        &["-n", n, "link", "set", "v0", "up"],
        &["-n", n, "link", "set", "v1", "up"],
        &[
            "-n",
            n,
            "neigh",
            "add",
            "10.9.9.9",
            "lladdr",
            "02:00:00:00:00:09",
            "dev",
            "v0",
        ],
    ] {
        crate::common::ip(args);
    }
    crate::common::run_ok(
        crate::common::ns_exec(n, "sysctl").args(["-qw", "net.ipv4.tcp_max_tw_buckets=10"]),
    );
    let server = crate::common::ns_server(n, "127.0.0.1");
    // tcp_crr filling the table.
    Thrum::run("tcp_crr").on(&server).args(["-n", "50"]).json();
    let t = Instant::now();
    let doc = Thrum::cmd(&["run", "tcp_rr", "-H", "10.9.9.9:5999", "-l", "1s", "--json"])
        .netns(n)
        .fails()
        .json();
    let err = doc["summary"]["error"].as_str().expect("an error");
    assert!(
        err.contains("cannot reach the thrum server at 10.9.9.9:5999: the kernel's TIME_WAIT table is full (10 of 10)"),
        "{err}"
    );
    assert!(!err.contains("is `thrum server` running"), "{err}");
    // Not a loopback address: one attempt, the whole 3 s.
    assert!(t.elapsed() >= Duration::from_secs(3), "{:?}", t.elapsed());
}
