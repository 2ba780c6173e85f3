//! `thrum mesh`: three hosts, each a `thrum server --agent` in a
//! namespace of its own behind one router, the test over every ordered
//! pair, one pair at a time.
//!
//! Ground truths: the one pair whose packets leave through htb 20 Mbit/s
//! reads what a stream through it reads (0.957 of the rate, the TCP/IP
//! headers' share of a 1514-byte frame), and every other pair, on
//! unshaped veths, reads many times that; a host without `--agent`, or
//! holding another key, fails its row naming the flag and sends no stream
//! (its interface's byte counter stays at the control messages').

use std::time::Duration;

use serde_json::Value;

use crate::common::*;

/// The star's three hosts, each `thrum server EXTRA[i]` on its address.
fn hosts(star: &Star, extra: [&[&str]; 3]) -> Vec<ServerProc> {
    (0..3).map(|i| star.agent_server(i, extra[i])).collect()
}

/// `thrum mesh TEST --hosts H.. --psk-file KEY`, from the first host's
/// namespace.
fn mesh(star: &Star, test: &str, hosts: &[ServerProc], key: &str) -> Thrum {
    let list: Vec<&str> = hosts.iter().map(|h| h.addr.as_str()).collect();
    Thrum::cmd(&["mesh", test]).netns(&star.agents[0]).args([
        "--hosts",
        &list.join(","),
        "--psk-file",
        key,
    ])
}

/// The matrix's cell (sender, receiver).
fn cell(doc: &Value, s: usize, r: usize) -> &Value {
    &doc["matrix"]["cells"][s][r]
}

/// The matrix as `sender -> receiver: figure` lines, for the log.
fn matrix_line(doc: &Value) -> String {
    let mut v = Vec::new();
    for s in 0..3 {
        for r in (0..3).filter(|&r| r != s) {
            let c = cell(doc, s, r);
            v.push(match c["value"].as_f64() {
                Some(x) => format!("{s}->{r} {:.1}", x / 1e6),
                None => format!("{s}->{r} error"),
            });
        }
    }
    v.join(", ")
}

/// Host 0's packets to host 1 through htb 20 Mbit/s: that cell reads the
/// shaped rate, the five others far above it, the diagonal is empty; the
/// heat map is drawn, and every pair and the mesh are in the store.
#[test]
fn the_one_shaped_pair_reads_its_rate_and_the_others_far_above() {
    let Some(star) = Star::build(221, 3) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(&dir, "k", 'k');
    let agent: &[&str] = &["--agent", "--psk-file", &key];
    let hosts = hosts(&star, [agent, agent, agent]);
    // 50 kB: 20 ms at 20 Mbit/s, room for a cubic sender's burst, and
    // little for the window's last interval to count from the queue.
    star.shape_pair(0, &star.agent_addr(1), "20mbit", "50000");
    let chart = dir.path().join("mesh.svg");
    let db = dir.path().join("store.db");
    let doc = mesh(&star, "tcp_stream", &hosts, &key)
        .len("2s")
        .warmup("1s")
        .interval("500ms")
        .args(["--cc", "cubic"])
        .arg("--chart")
        .arg(&chart)
        .arg("--db")
        .arg(&db)
        .timeout(Duration::from_secs(120))
        .json();
    assert_schema_named(&doc, "thrum.mesh.v1.json");
    eprintln!("mesh Mbit/s: {}", matrix_line(&doc));
    assert_eq!(doc["matrix"]["unit"], "bit/s");
    assert_eq!(doc["pairs"].as_array().unwrap().len(), 6);
    for i in 0..3 {
        assert!(cell(&doc, i, i).is_null(), "{}", doc["matrix"]);
    }
    // 0.957 × 20 Mbit/s is 19.1; htb's bucket and a busy host's timers
    // keep it within these.
    let shaped = f(&cell(&doc, 0, 1)["value"]);
    assert!((15e6..=20.5e6).contains(&shaped), "{shaped}");
    for (s, r) in [(0, 2), (1, 0), (1, 2), (2, 0), (2, 1)] {
        let v = f(&cell(&doc, s, r)["value"]);
        assert!(v > 3.0 * 20e6, "{s}->{r}: {v}");
    }
    // Each pair's result is the one-agent run's, from its sender.
    for p in doc["pairs"].as_array().unwrap() {
        let clients = p["result"]["summary"]["clients"].as_array().unwrap();
        assert_eq!(clients.len(), 1, "{p}");
        assert_eq!(
            f(&p["figure"]),
            f(&p["result"]["summary"]["throughput_bps"])
        );
    }
    let svg = std::fs::read_to_string(&chart).unwrap();
    assert!(
        svg.starts_with("<svg") || svg.contains("<svg"),
        "{svg:.200}"
    );
    let stored: Value =
        serde_json::from_str(&Thrum::cmd(&["history", "--json", "--db"]).arg(&db).stdout())
            .unwrap();
    let commands: Vec<&str> = stored
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["command"].as_str().unwrap())
        .collect();
    assert_eq!(
        commands.iter().filter(|c| **c == "run").count(),
        6,
        "{commands:?}"
    );
    assert_eq!(
        commands.iter().filter(|c| **c == "mesh").count(),
        1,
        "{commands:?}"
    );
    // `thrum show` prints the stored mesh's matrix again.
    let id = stored
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["command"] == "mesh")
        .map(|r| r["id"].as_str().unwrap().to_string())
        .unwrap();
    let shown = Thrum::cmd(&["show", &id, "--db"]).arg(&db).stdout();
    assert!(shown.contains("rows send, columns receive"), "{shown}");
    assert!(shown.contains(&hosts[2].addr), "{shown}");
}

/// Host 1 serves without `--agent`, host 2 holds another key: host 1's
/// row fails naming --agent, host 2's row and column naming
/// --psk-file, the one pair between willing hosts runs, the exit status
/// is 1, and neither refusing host sends a stream.
#[test]
fn a_host_without_agent_or_with_another_key_fails_its_row_and_sends_nothing() {
    let Some(star) = Star::build(222, 3) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (key, other) = (key_file(&dir, "k", 'k'), key_file(&dir, "other", 'o'));
    let hosts = hosts(
        &star,
        [
            &["--agent", "--psk-file", &key],
            &["--psk-file", &key],
            &["--agent", "--psk-file", &other],
        ],
    );
    let before = [star.agent_tx_bytes(1), star.agent_tx_bytes(2)];
    // udp_stream: its receiver sends nothing back, so what hosts 1 and 2
    // send is their control messages alone unless they sent a stream.
    let ran = mesh(&star, "udp_stream", &hosts, &key)
        .len("1s")
        .warmup("0s")
        .arg("--json")
        .timeout(Duration::from_secs(60))
        .output();
    assert_eq!(ran.code(), Some(1), "{}", ran.report());
    let doc = ran.json();
    assert_schema_named(&doc, "thrum.mesh.v1.json");
    eprintln!("refusals: {}", matrix_line(&doc));
    assert!(f(&cell(&doc, 0, 1)["value"]) > 0.0, "{}", doc["matrix"]);
    let error = |s: usize, r: usize| cell(&doc, s, r)["error"].as_str().unwrap().to_string();
    let e = error(1, 0);
    assert!(
        e.contains("--agent") && e.contains("nothing was run"),
        "{e}"
    );
    // Host 2's server, asked as the target, refuses the key before host
    // 1 is asked to be an agent.
    for (s, r) in [(2, 0), (2, 1), (0, 2), (1, 2)] {
        let e = error(s, r);
        assert!(
            e.contains("wrong pre-shared key (--psk-file)"),
            "{s}->{r}: {e}"
        );
    }
    for (i, b) in [1, 2].into_iter().zip(before) {
        let sent = star.agent_tx_bytes(i) - b;
        // A second of an unshaped udp_stream is hundreds of MB.
        assert!(sent < 256 << 10, "host {i} sent {sent} bytes");
    }
    assert!(
        ran.stderr().contains("5 of 6 pair(s) failed"),
        "{}",
        ran.report()
    );
}
