//! udp_stream and udp_rr over loopback against a real server process: every
//! datagram is accounted for (sent = received + lost, exactly, from the two
//! ends' own counts), 1-byte and 1400-byte messages work on one flow and on
//! eight flows over two threads, and the JSON matches the schema.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{ServerProc, Thrum, assert_rejected, assert_schema, diagnostics, f, u};

/// `thrum run ARGS -H server -l 1s --json`, failing on a non-zero exit.
pub fn run(server: &ServerProc, args: &[&str]) -> Value {
    let doc = Thrum::run_without_test()
        .args(args)
        .on(server)
        .len("1s")
        .warmup("200ms")
        .interval("250ms")
        .json();
    assert_schema(&doc);
    doc
}

fn total(doc: &Value, end: &str, field: &str) -> u64 {
    u(&doc["summary"][end]["total"][field])
}

/// The window's counts equal the sum of its measure intervals, on both ends.
fn intervals_add_up(doc: &Value) {
    for (end, key) in [("local", "local"), ("remote", "remote")] {
        for field in ["datagrams_sent", "datagrams_received", "transactions"] {
            let sum: u64 = doc["intervals"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|i| i["phase"] == "measure")
                .map(|i| u(&i["sum"][key][field]))
                .sum();
            assert_eq!(sum, u(&doc["summary"][end][field]), "{end}.{field}");
        }
    }
}

#[test]
fn udp_stream_accounts_for_every_datagram() {
    let server = ServerProc::start(&[]);
    for (size, flows, threads) in [
        ("1", "1", "1"),
        ("1400", "1", "1"),
        ("1", "8", "2"),
        ("1400", "8", "2"),
    ] {
        // Paced well below what loopback carries (1400 B: 1.8k datagrams/s
        // per flow; 1 B: 10k/s), so the path is lossless. (At 100k/s of 1-byte
        // datagrams, millisecond pacing bursts overflow the default receive
        // buffer: thrum then reports exactly the kernel's RcvbufErrors.)
        let (rate, rate_bps) = if size == "1" {
            ("80k", 80e3)
        } else {
            ("20M", 20e6)
        };
        let args = [
            "udp_stream",
            "-m",
            size,
            "-F",
            flows,
            "-T",
            threads,
            "--rate",
            rate,
            // A 4 MB receive buffer holds a second of this traffic, so a
            // receiver descheduled by a busy machine still loses nothing.
            "-S",
            "4M,4M",
        ];
        let began = Instant::now();
        let doc = run(&server, &args);
        let lifetime = began.elapsed().as_secs_f64();
        let what = format!("udp_stream -m {size} -F {flows}");
        let sent = total(&doc, "local", "datagrams_sent");
        let received = total(&doc, "remote", "datagrams_received");
        let lost = total(&doc, "remote", "lost");
        assert!(sent > 1000, "{what}: {sent} sent");
        assert_eq!(sent, received + lost, "{what}: sent = received + lost");
        assert_eq!(lost, 0, "{what}: loopback at {rate} per flow loses nothing");
        assert_eq!(total(&doc, "remote", "duplicates"), 0);
        let size: u64 = size.parse().unwrap();
        assert_eq!(
            total(&doc, "remote", "bytes_received"),
            received * size,
            "{what}"
        );
        let s = &doc["summary"];
        let want = rate_bps * flows.parse::<f64>().unwrap();
        // What pacing promises, whatever the machine's load. Never ahead:
        // a flow may have sent at most rate x the time since it started, and
        // it started after the client process did, so over the whole run
        // (warm-up, window and drain) no more than rate x the process's
        // lifetime. (Within the window alone a sender that stalled catches
        // up, so a window may hold a little more than rate x window.)
        let all_sent_bits = total(&doc, "local", "bytes_sent") as f64 * 8.0;
        assert!(
            all_sent_bits <= want * lifetime,
            "{what}: {all_sent_bits} bits sent in a run of {lifetime:.2} s at {want} bit/s"
        );
        // Not behind, or said: a window whose senders fell 5 % short (a
        // sender descheduled on a busy machine) carries rate_not_reached.
        // A bound on the received rate instead held only where no sender or
        // receiver ever waited for a CPU.
        let sent = f(&s["throughput_bps_sent"]);
        assert!(
            sent >= 0.95 * want || !diagnostics(&doc, "rate_not_reached").is_empty(),
            "{what}: senders reached {sent} bit/s of {want} and said nothing"
        );
        assert_eq!(
            u(&s["datagrams_received"]),
            u(&s["remote"]["datagrams_received"])
        );
        intervals_add_up(&doc);
        assert!(
            doc["environment"]["udp_io"]
                .as_str()
                .unwrap()
                .contains("sendmmsg")
        );
    }
}

#[test]
fn udp_stream_unpaced_loss_adds_up() {
    // Unpaced on loopback the receiver falls behind and its socket buffer
    // overflows: real loss, which must still add up exactly.
    let server = ServerProc::start(&[]);
    let doc = run(&server, &["udp_stream", "-m", "1400", "-F", "2", "-T", "2"]);
    let sent = total(&doc, "local", "datagrams_sent");
    let received = total(&doc, "remote", "datagrams_received");
    assert_eq!(sent, received + total(&doc, "remote", "lost"));
    assert!(f(&doc["summary"]["throughput_bps"]) > 1e8);
}

/// `--gso`: the sender's UDP_SEGMENT sends and the receiver's UDP_GRO
/// messages are counted datagram by datagram, each with its own sequence
/// number, so sent = received + lost still holds exactly, under the
/// blocking driver and with two flows on one epoll thread.
#[test]
fn udp_stream_gso_counts_every_datagram() {
    let server = ServerProc::start(&[]);
    for extra in [&[][..], &["-F", "2", "-T", "1"][..]] {
        let args = [&["udp_stream", "--gso"][..], extra].concat();
        let doc = run(&server, &args);
        let what = format!("udp_stream --gso {extra:?}");
        let sent = total(&doc, "local", "datagrams_sent");
        let received = total(&doc, "remote", "datagrams_received");
        assert!(received > 0, "{what}");
        assert_eq!(sent, received + total(&doc, "remote", "lost"), "{what}");
        assert_eq!(total(&doc, "remote", "duplicates"), 0, "{what}");
        // 1472-byte datagrams: every byte received belongs to a counted datagram.
        assert_eq!(
            total(&doc, "remote", "bytes_received"),
            received * 1472,
            "{what}"
        );
        let io = doc["environment"]["udp_io"].as_str().unwrap();
        assert!(io.contains("UDP_SEGMENT") && io.contains("UDP_GRO"), "{io}");
        assert_eq!(doc["spec"]["gso"], true);
    }
}

#[test]
fn udp_rr_one_and_many_flows() {
    let server = ServerProc::start(&[]);
    for (size, flows, threads, burst) in [
        ("1,1", "1", "1", "0"),
        ("1400,1400", "1", "1", "0"),
        ("1,1", "8", "2", "0"),
        ("1400,1400", "8", "2", "3"),
        ("1,1", "2", "1", "16"),
    ] {
        // A 2 s timeout: on loopback nothing is dropped, and a response held
        // up by a busy CPU (beyond the 50 ms default) must not read as lost.
        let args = [
            "udp_rr",
            "-r",
            size,
            "-F",
            flows,
            "-T",
            threads,
            "-b",
            burst,
            "--rr-timeout",
            "2s",
        ];
        let doc = run(&server, &args);
        let what = format!("udp_rr -r {size} -F {flows} -b {burst}");
        let s = &doc["summary"];
        let done = total(&doc, "local", "transactions");
        let lost = total(&doc, "local", "lost");
        // Every request either completed or timed out.
        assert_eq!(
            total(&doc, "local", "datagrams_sent"),
            done + lost,
            "{what}"
        );
        assert_eq!(lost, 0, "{what}: nothing is lost on loopback");
        assert_eq!(
            done,
            total(&doc, "remote", "transactions"),
            "{what}: the server answered each"
        );
        assert!(f(&s["transactions_per_s"]) > 1000.0, "{what}");
        let l = &s["latency_ns"];
        let order = ["min", "p50", "p90", "p99", "p99_9", "max"].map(|k| u(&l[k]));
        assert!(order.windows(2).all(|w| w[0] <= w[1]), "{what}: {order:?}");
        assert!(
            u(&l["count"]).abs_diff(u(&s["transactions"])) <= flows.parse::<u64>().unwrap() * 17
        );
        // One datagram each way per transaction.
        let tps = f(&s["transactions_per_s"]);
        assert!(
            (f(&s["local"]["datagrams_received_per_s"]) / tps - 1.0).abs() < 0.01,
            "{what}"
        );
        intervals_add_up(&doc);
    }
}

#[test]
fn udp_rr_count_limit_is_exact() {
    let server = ServerProc::start(&[]);
    let doc = Thrum::run("udp_rr")
        .host(&server.addr)
        .args(["-n", "5003", "-F", "3", "-b", "2", "--rr-timeout", "2s"])
        .json();
    assert_eq!(u(&doc["summary"]["transactions"]), 5003);
    assert_eq!(total(&doc, "local", "transactions"), 5003);
}

#[test]
fn udp_flags_are_checked() {
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["run", "udp_stream", "-m", "65508"],
            &["--send-size 65508", "1..=65507"],
        ),
        (&["run", "udp_stream", "-b", "4"], &["--burst", "udp_rr"]),
        (
            &["run", "udp_rr", "-r", "70000"],
            &["--rr-size (request)", "1..=65507"],
        ),
        (
            &["run", "tcp_stream", "--rate", "10M"],
            &["--rate", "udp_stream"],
        ),
        (
            &["run", "udp_stream", "--rate", "1Gb"],
            &["--rate", "bits per second"],
        ),
        (
            &["run", "udp_rr", "--rr-timeout", "0s"],
            &["--rr-timeout", "1ms..=1m"],
        ),
    ];
    assert_rejected(cases);
}

#[test]
fn a_rate_the_sender_cannot_reach_is_reported() {
    let server = ServerProc::start(&[]);
    let doc = run(&server, &["udp_stream", "-m", "64", "--rate", "100G"]);
    let w = crate::common::diagnostics(&doc, "rate_not_reached");
    assert!(
        w.iter()
            .any(|w| w.contains("--rate asked for") && w.contains("reached")),
        "{w:?}"
    );
}

#[test]
fn udp_sockets_take_their_ports_from_data_ports() {
    // Three ports for the firewall: three UDP flows fit, four do not.
    let base = 20_000 + (std::process::id() % 20_000) as u16;
    let range = format!("{base}-{}", base + 2);
    let server = ServerProc::start(&["--data-ports", &range]);
    let flows = |n| {
        Thrum::run("udp_rr")
            .host(&server.addr)
            .flows(n)
            .len("300ms")
            .arg("--json")
    };
    flows(3).json();
    let full = flows(4).fails().json();
    let e = full["summary"]["error"].as_str().unwrap().to_string();
    assert!(
        e.contains("no free port left for UDP socket 3") && e.contains(&range),
        "{e}"
    );
}

/// An IPv4 client of a server listening on `::` (dual-stack) shows there as
/// ::ffff:127.0.0.1. The server must open that session's UDP sockets as
/// IPv4 ones: an IPv6 socket sending to a mapped address goes through
/// udpv6_sendmsg, which gives every datagram a route lookup instead of the
/// connected socket's cached route. Checked with `ss` while the test runs.
#[test]
fn an_ipv4_client_of_a_dual_stack_server_gets_ipv4_udp_sockets() {
    let server =
        ServerProc::start_with(std::process::Command::new(crate::common::bin()), "::", &[]);
    let port = server.addr.rsplit(':').next().unwrap().to_string();
    let v4 = format!("127.0.0.1:{port}");
    let mut client = Thrum::run("udp_rr")
        .host(&v4)
        .flows(2)
        .len("2s")
        .arg("--json")
        .spawn();
    // Look while the run holds its data sockets: from its set-up, whenever
    // a busy machine gets to it, to the end of its 2 s window.
    let pid = format!("pid={},", server.pid());
    let t = Instant::now();
    let text = loop {
        let ss = std::process::Command::new("ss")
            .args(["-Huanp"])
            .output()
            .expect("ss");
        let text = String::from_utf8_lossy(&ss.stdout).into_owned();
        if text.lines().filter(|l| l.contains(&pid)).count() >= 2
            || client.child.try_wait().unwrap().is_some()
            || t.elapsed() > Duration::from_secs(30)
        {
            break text;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    client.wait().json_ok();
    let mine: Vec<&str> = text.lines().filter(|l| l.contains(&pid)).collect();
    assert_eq!(
        mine.len(),
        2,
        "the server's two UDP data sockets in:\n{text}"
    );
    for l in mine {
        let local = l.split_whitespace().nth(3).unwrap();
        assert!(
            local.starts_with("127.0.0.1:"),
            "an IPv6 socket for an IPv4 client: {l}"
        );
    }
}
