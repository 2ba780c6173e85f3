//! The options that place and shape sockets, checked from the kernel's
//! and the server's side: `--mark` (policy routing sends marked packets
//! another way), `--tcp-tx-delay` (read back on both ends), `--num-ports`,
//! `--server-threads`, `--listen-backlog` and `--max-events` (ss in the
//! server's namespace), `--epoll-trigger` (the kernel's list of epoll
//! registrations) and `--local-hosts` (the sources the server sees); and
//! neper's `--delay`, a pause between a response and the next request,
//! counted against the clock.

use std::time::Duration;

use crate::common::{
    Pair, ServerProc, Thrum, assert_rejected, bin, f, ip, ns_exec, run_cmd, run_ok, u,
};

/// The tbf rate of the marked path, bits/s, and its spelling for tc.
const MARKED_RATE_BPS: f64 = 20e6;

/// `--mark 7` is seen by the kernel's policy routing: in the client's
/// namespace an `ip rule fwmark 7` sends marked packets to the server over
/// a second veth shaped to 20 Mbit/s, unmarked ones over the first,
/// unshaped. The marked tcp_stream reads the shaped rate less headers
/// (0.957 of it, shared/TESTING.md; a tbf on the sender's own interface
/// holds the socket back rather than dropping), the unmarked one far more;
/// and each end reads its mark back from a data socket.
#[test]
fn mark_is_routed_by_an_fwmark_rule() {
    let Some(pair) = Pair::build(213, 232) else {
        return;
    };
    let (a, b) = (pair.a.clone(), pair.b.clone());
    // The second link: A's `wa` 10.213.233.1, B's `wb` 10.213.233.2.
    ip(&[
        "link", "add", "wa", "netns", &a, "type", "veth", "peer", "name", "wb", "netns", &b,
    ]);
    for (ns, dev, cidr) in [(&a, "wa", "10.213.233.1/24"), (&b, "wb", "10.213.233.2/24")] {
        ip(&["-n", ns, "addr", "add", cidr, "dev", dev]);
        ip(&["-n", ns, "link", "set", dev, "up"]);
    }
    // B takes packets for its first address on its second link.
    run_ok(ns_exec(&b, "sysctl").args([
        "-qw",
        "net.ipv4.conf.all.rp_filter=0",
        "net.ipv4.conf.wb.rp_filter=0",
    ]));
    // Marked packets to the server: over wa, from A's first address (the
    // server takes data connections only from the control connection's).
    let server_ip = pair.addr_b();
    let dst = format!("{server_ip}/32");
    ip(&["-n", &a, "rule", "add", "fwmark", "7", "lookup", "100"]);
    ip(&[
        "-n",
        &a,
        "route",
        "add",
        &dst,
        "via",
        "10.213.233.2",
        "dev",
        "wa",
        "src",
        &pair.addr_a(),
        "onlink",
        "table",
        "100",
    ]);
    pair.tc(
        &a,
        &[
            "qdisc", "add", "dev", "wa", "root", "tbf", "rate", "20mbit", "burst", "32kb",
            "latency", "50ms",
        ],
    );
    // A server puts a mark on its sockets only as its operator allows.
    let mut server = ServerProc::start_with(ns_exec(&b, bin()), &server_ip, &["--allow-mark", "7"]);
    server.ns = Some(b.clone());
    let run = |extra: &[&str]| {
        pair.client(&server, "tcp_stream")
            .len("2s")
            .warmup("500ms")
            .args(extra)
            .json()
    };
    let marked = run(&["--mark", "7"]);
    let s = &marked["summary"];
    assert_eq!(u(&s["local"]["socket_options"]["mark"]), 7, "{s}");
    assert_eq!(u(&s["remote"]["socket_options"]["mark"]), 7, "{s}");
    let rate = f(&s["throughput_bps"]);
    // 0.957 of the tbf rate on a quiet path; a busy host only lowers it.
    assert!(
        rate > 0.80 * MARKED_RATE_BPS && rate < 1.0 * MARKED_RATE_BPS,
        "marked flow at {rate} bit/s, the shaped path is {MARKED_RATE_BPS}"
    );
    let unmarked = run(&[]);
    let s = &unmarked["summary"];
    assert!(s["local"]["socket_options"].is_null(), "{s}");
    let free = f(&s["throughput_bps"]);
    eprintln!("--mark 7: {rate} bit/s over the 20 Mbit/s path; unmarked: {free} bit/s");
    assert!(
        free > 3.0 * MARKED_RATE_BPS,
        "the unmarked flow takes the unshaped path: {free} bit/s"
    );
}

/// `--tcp-tx-delay`: both ends set TCP_TX_DELAY and read it back; a UDP
/// test or a delay under 1 µs is refused naming the flag. The kernel
/// applies the delay by departure time (EDT), which only an EDT-aware
/// qdisc (fq) honours: where a namespace's loopback takes fq, tcp_rr's
/// median rises by the delay on each end's sends (request and response:
/// twice it), within 1 ms; this machine's kernel has no fq, and there the
/// option changes no timing (measured: p50 14.0 µs without, 13.8 µs with
/// 10 ms), which is said and not asserted.
#[test]
fn tcp_tx_delay_is_set_on_both_ends() {
    let server = ServerProc::isolated("txdelay", &["--allow-tx-delay", "10ms"]);
    let p50 = |extra: &[&str]| -> (f64, serde_json::Value) {
        let doc = Thrum::run("tcp_rr")
            .on(&server)
            .len("1s")
            .warmup("200ms")
            .args(extra)
            .json();
        (f(&doc["summary"]["latency_ns"]["p50"]), doc)
    };
    let (plain, _) = p50(&[]);
    let (delayed, doc) = p50(&["--tcp-tx-delay", "10ms"]);
    let s = &doc["summary"];
    assert_eq!(
        u(&s["local"]["socket_options"]["tcp_tx_delay_us"]),
        10_000,
        "{s}"
    );
    assert_eq!(
        u(&s["remote"]["socket_options"]["tcp_tx_delay_us"]),
        10_000,
        "{s}"
    );
    let fq = server.ns.as_ref().is_some_and(|ns| {
        ns_exec(ns, "tc")
            .args(["qdisc", "add", "dev", "lo", "root", "fq"])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if fq {
        let (with_fq, _) = p50(&["--tcp-tx-delay", "10ms"]);
        let added = with_fq - plain;
        assert!(
            (added - 20e6).abs() < 1e6,
            "10 ms on each end's sends adds 20 ms to the round trip: +{added} ns"
        );
    } else {
        eprintln!(
            "no fq qdisc here: TCP_TX_DELAY set and read back, timing unchanged (p50 {plain} -> {delayed} ns)"
        );
    }
    assert_rejected(&[
        (
            &["run", "udp_rr", "--tcp-tx-delay", "1ms"],
            &["--tcp-tx-delay", "tcp_rr"],
        ),
        (
            &["run", "tcp_rr", "--tcp-tx-delay", "100ns"],
            &["--tcp-tx-delay", "accepted"],
        ),
    ]);
}

/// `ss ARGS..` where the server runs (its own namespace, so only this
/// test's sockets), as lines.
fn ss(server: &ServerProc, args: &[&str]) -> Vec<String> {
    let mut cmd = match &server.ns {
        Some(ns) => ns_exec(ns, "ss"),
        None => std::process::Command::new("ss"),
    };
    let out = run_cmd(cmd.args(args), Duration::from_secs(10));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// Run `run` with `--json`, look at the sockets with `look` half a second
/// in, and return the run's JSON.
fn while_running(run: Thrum, look: impl FnOnce()) -> serde_json::Value {
    let child = run.arg("--json").spawn();
    std::thread::sleep(Duration::from_millis(500));
    look();
    child.wait().json_ok()
}

/// `--num-ports 2`: the server's sockets of 4 tcp_rr flows sit on two data
/// ports, two each (ss in the server's namespace); `--server-threads 2`
/// runs two server workers for the client's one; `--listen-backlog 77` is
/// the backlog ss shows on tcp_crr's data listener (it stays open, where a
/// long-lived test's closes once its flows are in); `--max-events` runs.
#[test]
fn num_ports_server_threads_and_backlog_reach_the_server() {
    let server = ServerProc::isolated("spread", &[]);
    let doc = while_running(
        Thrum::run("tcp_rr")
            .on(&server)
            .flows(4)
            .args(["--num-ports", "2", "--server-threads", "2"])
            .args(["--max-events", "8", "--driver", "epoll"])
            .len("1500ms"),
        || {
            // Local address:port of every established socket: the server's
            // data ports appear once per flow on them, every client port once.
            let mut per_port = std::collections::BTreeMap::<String, usize>::new();
            for l in ss(&server, &["-Htn", "state", "established"]) {
                if let Some(local) = l.split_whitespace().nth(2) {
                    *per_port.entry(local.to_string()).or_default() += 1;
                }
            }
            let shared: Vec<_> = per_port.values().filter(|&&n| n > 1).collect();
            assert_eq!(shared, [&2, &2], "4 flows on 2 server ports: {per_port:?}");
        },
    );
    let env = &doc["environment"];
    assert_eq!(env["remote_drivers"].as_array().unwrap().len(), 2, "{env}");
    assert_eq!(env["local_drivers"].as_array().unwrap().len(), 1, "{env}");
    assert_eq!(u(&doc["spec"]["num_ports"]), 2);
    while_running(
        Thrum::run("tcp_crr")
            .on(&server)
            .args(["--listen-backlog", "77"])
            .len("1s"),
        || {
            // Send-Q of a listener is its backlog.
            let backlogs: Vec<String> = ss(&server, &["-Hltn"])
                .iter()
                .filter_map(|l| l.split_whitespace().nth(2).map(str::to_string))
                .collect();
            assert!(backlogs.iter().any(|b| b == "77"), "{backlogs:?}");
        },
    );
    assert_rejected(&[
        (
            &["run", "tcp_rr", "-F", "2", "--num-ports", "3"],
            &["--num-ports", "accepted"],
        ),
        (&["run", "udp_rr", "--num-ports", "1"], &["--num-ports"]),
        (
            &["run", "tcp_rr", "--server-threads", "2"],
            &["--server-threads", "accepted"],
        ),
        (
            &["run", "tcp_rr", "--listen-backlog", "0"],
            &["--listen-backlog", "accepted"],
        ),
        (
            &["run", "tcp_rr", "--max-events", "0"],
            &["--max-events", "accepted"],
        ),
    ]);
}

/// The epoll registrations of the server's data sockets, as the kernel
/// lists them (`tfd: … events: MASK` in the fdinfo of every epoll
/// descriptor of every thread: a worker may hold a descriptor table of its
/// own): the masks that ask for EPOLLOUT.
fn server_epoll_masks(server: &ServerProc) -> Vec<u32> {
    let mut masks = Vec::new();
    let tasks = std::fs::read_dir(format!("/proc/{}/task", server.pid())).unwrap();
    for task in tasks.flatten() {
        let Ok(fds) = std::fs::read_dir(task.path().join("fdinfo")) else {
            continue;
        };
        for fd in fds.flatten() {
            let text = std::fs::read_to_string(fd.path()).unwrap_or_default();
            for l in text.lines().filter(|l| l.starts_with("tfd:")) {
                let mask = l
                    .split_whitespace()
                    .skip_while(|w| *w != "events:")
                    .nth(1)
                    .and_then(|m| u32::from_str_radix(m, 16).ok());
                if let Some(m) = mask.filter(|m| m & libc::EPOLLOUT as u32 != 0) {
                    masks.push(m);
                }
            }
        }
    }
    masks
}

/// `--epoll-trigger level`: the server's epoll workers register their data
/// sockets without EPOLLET, as the kernel's own list of the registrations
/// shows; by default (edge) with it.
#[test]
fn epoll_trigger_reaches_the_kernels_registrations() {
    let server = ServerProc::isolated("trigger", &[]);
    let et = libc::EPOLLET as u32;
    for (trigger, edge) in [("level", false), ("edge", true)] {
        let doc = while_running(
            Thrum::run("tcp_rr")
                .on(&server)
                .flows(2)
                .args(["--driver", "epoll", "--epoll-trigger", trigger])
                .len("1s"),
            || {
                let masks = server_epoll_masks(&server);
                assert!(masks.len() >= 2, "the server's 2 data sockets: {masks:x?}");
                assert!(
                    masks.iter().all(|m| (m & et != 0) == edge),
                    "--epoll-trigger {trigger}: {masks:x?}"
                );
            },
        );
        assert!(u(&doc["summary"]["transactions"]) > 0);
    }
}

/// `--local-hosts 127.0.0.2,127.0.0.3`: two tcp_rr flows leave from the two
/// addresses, one each, and the server's own sockets see them as their
/// peers (ss in the server's namespace).
#[test]
fn local_hosts_are_the_sources_the_server_sees() {
    let server = ServerProc::isolated("lhosts", &[]);
    let doc = while_running(
        Thrum::run("tcp_rr")
            .on(&server)
            .flows(2)
            .args(["--local-hosts", "127.0.0.2,127.0.0.3"])
            .len("1s"),
        || {
            // The server's sockets: its own address local, the client's as peer.
            let mut peers: Vec<String> = ss(&server, &["-Htn", "state", "established"])
                .iter()
                .filter_map(|l| {
                    let w: Vec<&str> = l.split_whitespace().collect();
                    let (local, peer) = (w.get(2)?, w.get(3)?);
                    let ip = peer.rsplit_once(':')?.0;
                    (local.starts_with("127.0.0.1:") && ip != "127.0.0.1").then(|| ip.to_string())
                })
                .collect();
            peers.sort();
            assert_eq!(
                peers,
                ["127.0.0.2", "127.0.0.3"],
                "the server's data sockets' peers"
            );
        },
    );
    assert!(u(&doc["summary"]["transactions"]) > 0);
    assert!(
        doc["summary"]["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|w| !w.as_str().unwrap().contains("refused"))
    );
}

/// `--local-hosts 127.0.0.2,127.0.0.3` for the UDP tests and the connection
/// tests: two flows send (udp_stream, udp_rr) or dial every connection
/// (tcp_crr, tcp_cc) from the two addresses, one each. The sockets in the
/// server's namespace (ss) pair the server's address with both, the server
/// refused nothing, and the work got done. capacity is refused the flag.
#[test]
fn local_hosts_apply_to_udp_and_connection_tests() {
    let server = ServerProc::isolated("lhosts2", &[]);
    for (test, proto) in [
        ("udp_stream", "-Hun"),
        ("udp_rr", "-Hun"),
        ("tcp_crr", "-Htan"),
        ("tcp_cc", "-Htan"),
    ] {
        let doc = while_running(
            Thrum::run(test)
                .on(&server)
                .flows(2)
                .args(["--local-hosts", "127.0.0.2,127.0.0.3"])
                .len("1s"),
            || {
                // Every socket between the server's address and another:
                // the other address (connection tests' TIME-WAITs included).
                let mut seen: Vec<String> = ss(&server, &[proto])
                    .iter()
                    .filter_map(|l| {
                        let w: Vec<&str> = l.split_whitespace().collect();
                        let n = w.len();
                        let (a, b) = (w.get(n.checked_sub(2)?)?, w.get(n - 1)?);
                        let (a, b) = (a.rsplit_once(':')?.0, b.rsplit_once(':')?.0);
                        match (a, b) {
                            // Not a listener's wildcard peer.
                            ("127.0.0.1", o) | (o, "127.0.0.1")
                                if o != "127.0.0.1" && o != "0.0.0.0" && o != "*" =>
                            {
                                Some(o.to_string())
                            }
                            _ => None,
                        }
                    })
                    .collect();
                seen.sort();
                seen.dedup();
                assert_eq!(seen, ["127.0.0.2", "127.0.0.3"], "{test}: the data sources");
            },
        );
        let s = &doc["summary"];
        let work = if test == "udp_stream" {
            u(&s["remote"]["total"]["datagrams_received"])
        } else {
            u(&s["transactions"])
        };
        assert!(work > 0, "{test}: {s}");
        assert!(
            s["warnings"]
                .as_array()
                .unwrap()
                .iter()
                .all(|w| !w.as_str().unwrap().contains("refused")),
            "{test}: {}",
            s["warnings"]
        );
    }
    // capacity's server may send trains unasked (--reverse): not to
    // addresses nothing proves are the client's.
    assert_rejected(&[(
        &["run", "capacity", "--local-hosts", "127.0.0.2"],
        &["--local-hosts", "not to capacity"],
    )]);
}

/// neper's `--delay`: a slot waits the pause between a response and the
/// request it frees, so in a window of W seconds a slot completes at most
/// 1 + W / delay transactions (the first goes at once), each of N slots
/// as many; loopback answers in well under a millisecond, so most of
/// them come (a busy machine wakes the flow late, never early). Latency
/// runs from the send: the pause is not in it. Refused where it cannot
/// apply, naming the flag and the range.
#[test]
fn delay_pauses_between_a_response_and_the_next_request() {
    let server = ServerProc::isolated("delay", &[]);
    let delay_s = 0.020;
    for slots in [1u64, 4] {
        let burst = (slots - 1).to_string();
        let doc = Thrum::run("tcp_rr")
            .on(&server)
            .len("1s")
            .args(["--delay", "20ms", "-b", &burst])
            .json();
        let s = &doc["summary"];
        let n = u(&s["transactions"]);
        let most = slots * (1 + (f(&s["duration_s"]) / delay_s) as u64);
        assert!(n <= most, "{slots} slots: {n} > {most}: {s}");
        assert!(n >= most / 4, "{slots} slots: {n} of at most {most}: {s}");
        let p50_s = u(&s["latency_ns"]["p50"]) as f64 / 1e9;
        assert!(p50_s < delay_s / 2.0, "the pause in the latency: {s}");
    }
    assert_rejected(&[
        (
            &["run", "tcp_rr", "--delay", "20s"],
            &["--delay 20s is out of range", "1us..=10s"],
        ),
        (
            &["run", "udp_rr", "--delay", "1ms"],
            &["--delay applies only to tcp_rr"],
        ),
        (
            &["run", "tcp_rr", "--delay", "1ms", "--rate", "100"],
            &["--delay and --rate do not combine"],
        ),
    ]);
}
