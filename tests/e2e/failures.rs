//! Failures end cleanly: a clear error naming the cause, a non-zero exit,
//! every sample gathered so far still written, and a server that goes on
//! serving.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{ServerProc, assert_rejected, assert_serves, bin, json, run_client, u};

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
    // Nothing listens on port 1 of loopback.
    let t = Instant::now();
    let out = run_client(
        &["run", "tcp_rr", "-H", "127.0.0.1:1", "--json"],
        Duration::from_secs(10),
    );
    assert!(t.elapsed() < Duration::from_secs(5));
    assert!(!out.status.success());
    let doc = json(&out);
    let e = doc["summary"]["error"].as_str().unwrap();
    assert!(
        e.contains("cannot reach") && e.contains("127.0.0.1:1"),
        "{e}"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot reach"));
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
    assert!(m.contains("v1") && m.contains("v99"), "{m}");
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
    let out = run_client(
        &["run", "tcp_rr", "-H", &addr, "--json"],
        Duration::from_secs(10),
    );
    assert!(!out.status.success());
    let doc = json(&out);
    let e = doc["summary"]["error"].as_str().unwrap();
    assert!(
        e.contains("protocol version mismatch") && e.contains("v1") && e.contains("v7"),
        "{e}"
    );
    h.join().unwrap();
}

#[test]
fn server_killed_mid_test_keeps_samples() {
    let mut server = ServerProc::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("s.csv");
    let res = dir.path().join("r.json");
    let mut client = Command::new(bin())
        .args([
            "run",
            "tcp_stream",
            "-H",
            &server.addr,
            "-l",
            "20s",
            "--warmup",
            "0s",
            "-i",
            "200ms",
            "--json",
        ])
        .args([
            "-o",
            res.to_str().unwrap(),
            "--samples",
            csv.to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    server.child.kill().unwrap();
    let killed = Instant::now();
    let status = loop {
        if let Some(s) = client.try_wait().unwrap() {
            break s;
        }
        assert!(
            killed.elapsed() < Duration::from_secs(5),
            "client still running 5 s after the server died"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(!status.success());
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&res).unwrap()).unwrap();
    let e = doc["summary"]["error"].as_str().unwrap();
    assert!(!e.is_empty());
    let n = doc["intervals"].as_array().unwrap().len();
    assert!(n >= 5, "only {n} intervals kept");
    let rows = std::fs::read_to_string(&csv).unwrap().lines().count() - 1;
    assert_eq!(rows, n, "one CSV row per interval for one flow");
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

#[test]
fn client_killed_mid_test_frees_the_session() {
    let server = ServerProc::start(&[]);
    let baseline = open_fds(server.pid());
    let mut client = Command::new(bin())
        .args(["run", "tcp_rr", "-H", &server.addr, "-F", "4", "-l", "20s"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1200));
    assert!(
        open_fds(server.pid()) > baseline,
        "the test holds sockets on the server"
    );
    client.kill().unwrap();
    client.wait().unwrap();
    let t = Instant::now();
    while open_fds(server.pid()) > baseline {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "server still holds {} fds (baseline {baseline})",
            open_fds(server.pid())
        );
        std::thread::sleep(Duration::from_millis(50));
    }
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
    ];
    assert_rejected(cases);
}
