//! `--driver uring` (and `--busy-poll`, the other engine option): every test
//! kind runs on io_uring workers (connection tests with connect, accept,
//! receive, send and close as ring operations) and its counts add up on
//! both ends exactly as under epoll; with `--busy-poll` both ends' rings
//! register NAPI busy polling and read it back, on loopback and across a
//! veth, and a sweep over busy-poll values runs on them.

use std::time::Duration;

use serde_json::Value;

use crate::common::{Pair, ServerProc, Thrum, diagnostics, drivers, read_json, u};
use crate::loopback::run_and_check_with;

const URING: [&str; 2] = ["--driver", "uring"];

/// Both ends' two workers ran io_uring.
fn assert_uring_on_both_ends(doc: &Value, what: &str) {
    for key in ["local_drivers", "remote_drivers"] {
        assert_eq!(drivers(doc, key), vec!["uring"; 2], "{what}: {key}");
    }
}

/// False (with a printed reason) where the kernel does not allow io_uring.
fn uring_available(server: &ServerProc) -> bool {
    let doc = Thrum::run("tcp_rr")
        .on(server)
        .len("300ms")
        .args(URING)
        .json();
    let unavailable = diagnostics(&doc, "uring_fallback")
        .into_iter()
        .find(|w| w.contains("io_uring is unavailable"));
    if let Some(w) = unavailable {
        eprintln!("SKIPPED: {w}");
        return false;
    }
    true
}

#[test]
fn every_tcp_test_runs_and_adds_up_on_uring() {
    // tcp_crr and tcp_cc: thousands of connections, their TIME_WAIT in a
    // namespace of their own (`ServerProc::isolated`).
    let server = ServerProc::isolated("uring-tcp", &[]);
    if !uring_available(&server) {
        return;
    }
    for test in [
        "tcp_stream",
        "tcp_maerts",
        "tcp_bidir",
        "tcp_rr",
        "tcp_crr",
        "tcp_cc",
    ] {
        // Conservation, intervals adding up, the schema: as under epoll.
        let doc = run_and_check_with(&server, test, 4, 2, &URING);
        assert_eq!(
            diagnostics(&doc, "uring_fallback"),
            Vec::<String>::new(),
            "{test}"
        );
        assert_uring_on_both_ends(&doc, test);
    }
}

#[test]
fn udp_tests_run_and_add_up_on_uring() {
    let server = ServerProc::start(&[]);
    if !uring_available(&server) {
        return;
    }
    for args in [
        // A 2 s timeout: a response held up by a busy CPU is not lost.
        &[
            "udp_rr",
            "-F",
            "4",
            "-T",
            "2",
            "-b",
            "3",
            "--rr-timeout",
            "2s",
        ][..],
        // Paced far below what loopback carries: lossless.
        &[
            "udp_stream",
            "-m",
            "1400",
            "--rate",
            "20M",
            "-F",
            "4",
            "-T",
            "2",
        ][..],
    ] {
        let doc = run_uring(&server, args);
        let total = |end: &str, f: &str| u(&doc["summary"][end]["total"][f]);
        let what = args[0];
        if what == "udp_rr" {
            let (done, lost) = (total("local", "transactions"), total("local", "lost"));
            assert_eq!(total("local", "datagrams_sent"), done + lost, "{what}");
            assert_eq!(lost, 0, "{what}: nothing is lost on loopback");
            assert_eq!(
                done,
                total("remote", "transactions"),
                "{what}: each answered"
            );
        } else {
            assert_eq!(
                total("local", "datagrams_sent"),
                total("remote", "datagrams_received"),
                "{what}: every datagram arrived"
            );
        }
        assert_uring_on_both_ends(&doc, what);
    }
}

/// `--busy-poll` reaches both ends' TCP and UDP data sockets (as root the
/// kernel takes any value; loopback has no NAPI, so it changes no figure).
#[test]
fn busy_poll_is_applied_on_both_ends() {
    let server = ServerProc::start(&[]);
    for test in ["tcp_rr", "udp_rr"] {
        let doc = Thrum::run(test)
            .on(&server)
            .len("300ms")
            .args(["--busy-poll", "50", "--rr-timeout", "2s"])
            .json();
        assert_eq!(doc["spec"]["busy_poll_us"], 50, "{test}");
        assert!(u(&doc["summary"]["transactions"]) > 0, "{test}");
    }
}

/// `--driver uring --busy-poll 50 --prefer-busy-poll` against `server`
/// from `client` (a builder aimed at it): both ends' workers ran io_uring,
/// registered their rings for NAPI busy polling and read back what was
/// asked, kept SO_BUSY_POLL on their sockets too, and counted the same
/// transactions. Neither loopback nor a veth gives the sockets a NAPI
/// instance (veth has one only with XDP or GRO on), so the registration
/// takes and nothing is faster: no figure is asserted beyond the counts.
fn napi_reads_back_on_both_ends(client: Thrum, what: &str) {
    let doc = client
        .len("1s")
        .args(URING)
        .args([
            "--busy-poll",
            "50",
            "--prefer-busy-poll",
            "--rr-timeout",
            "2s",
        ])
        .json();
    let want = serde_json::json!({"busy_poll_us": 50, "prefer_busy_poll": true});
    for end in ["local", "remote"] {
        assert_eq!(doc["summary"][end]["uring_napi"], want, "{what}: {end}");
        assert_eq!(doc["summary"][end]["busy_poll"], want, "{what}: {end}");
    }
    for key in ["local_drivers", "remote_drivers"] {
        assert_eq!(drivers(&doc, key), ["uring"], "{what}: {key}");
    }
    let total = |end: &str| u(&doc["summary"][end]["total"]["transactions"]);
    assert!(total("local") > 0, "{what}: no transaction completed");
    assert_eq!(total("local"), total("remote"), "{what}: both ends' counts");
}

/// io_uring's NAPI busy polling on loopback, with the human line saying
/// it for both ends; without `--busy-poll` no ring registers and nothing
/// is claimed; `--driver auto`'s io_uring workers register as well.
#[test]
fn uring_napi_busy_poll_is_read_back_on_both_ends() {
    let server = ServerProc::start(&[]);
    if !uring_available(&server) {
        return;
    }
    napi_reads_back_on_both_ends(Thrum::run("tcp_rr").on(&server), "loopback");
    let human = Thrum::run("tcp_rr")
        .on(&server)
        .len("300ms")
        .args(URING)
        .args(["--busy-poll", "50", "--prefer-busy-poll"])
        .stdout();
    assert!(
        human.contains("client 50 µs (preferred), io_uring NAPI 50 µs (preferred); server 50 µs (preferred), io_uring NAPI 50 µs (preferred)"),
        "{human}"
    );
    let doc = Thrum::run("tcp_rr")
        .on(&server)
        .len("300ms")
        .args(URING)
        .json();
    for end in ["local", "remote"] {
        assert!(doc["summary"][end].get("uring_napi").is_none(), "{end}");
    }
    // `--driver auto` picks io_uring for four rr flows on a worker, and
    // those rings register too.
    let doc = Thrum::run("tcp_rr")
        .on(&server)
        .len("300ms")
        .flows(4)
        .args(["--busy-poll", "50"])
        .json();
    let want = serde_json::json!({"busy_poll_us": 50, "prefer_busy_poll": false});
    for (end, key) in [("local", "local_drivers"), ("remote", "remote_drivers")] {
        assert_eq!(drivers(&doc, key), ["uring"], "auto: {key}");
        assert_eq!(doc["summary"][end]["uring_napi"], want, "auto: {end}");
    }
    // The busy-poll study's sweep on io_uring: a cell without and one with.
    let doc = Thrum::sweep("tcp_rr")
        .on(&server)
        .len("300ms")
        .args(URING)
        .args(["--vary", "busy-poll=0,50"])
        .json();
    let cells = doc["cells"].as_array().expect("cells");
    assert_eq!(cells.len(), 2, "{doc}");
    // Not `valid`: that compares the transactions with loopback's packet
    // counters, which other tests' traffic on lo moves in a full run.
    for c in cells {
        assert!(c["error"].is_null(), "{c}");
        assert!(c["transactions_per_s"].as_f64().expect("rate") > 0.0, "{c}");
    }
}

/// The same across a veth pair between two namespaces, the server in its
/// own.
#[test]
fn uring_napi_busy_poll_is_read_back_across_a_veth() {
    let Some(pair) = Pair::build(233, 12) else {
        return;
    };
    let server = pair.server();
    if !uring_available(&server) {
        return;
    }
    napi_reads_back_on_both_ends(pair.client(&server, "tcp_rr"), "veth");
}

/// `thrum run ARGS --driver uring` against `server`, failing on a non-zero exit.
fn run_uring(server: &ServerProc, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend_from_slice(&URING);
    crate::udp::run(server, &all)
}

/// The completion path (multishot receive into provided buffers, sends
/// queued with the ring) on many flows per thread, the aggregate rows of
/// the benchmark: both ends run io_uring and count the same transactions;
/// for udp_rr each transaction is one datagram each way and none is lost.
#[test]
fn aggregate_rr_runs_on_the_completion_path_and_adds_up() {
    let server = ServerProc::start(&[]);
    if !uring_available(&server) {
        return;
    }
    for args in [
        &["tcp_rr", "-F", "16", "-T", "2"][..],
        &[
            "udp_rr",
            "-F",
            "16",
            "-T",
            "2",
            "-b",
            "16",
            "--rr-timeout",
            "2s",
        ][..],
    ] {
        let doc = run_uring(&server, args);
        let total = |end: &str, f: &str| u(&doc["summary"][end]["total"][f]);
        let what = args[0];
        let done = total("local", "transactions");
        assert!(done > 0, "{what}");
        assert_eq!(done, total("remote", "transactions"), "{what}: both ends");
        if what == "udp_rr" {
            assert_eq!(total("local", "lost"), 0, "{what}: loopback loses nothing");
            for end in ["local", "remote"] {
                assert_eq!(total(end, "datagrams_sent"), done, "{what}: {end}");
                assert_eq!(total(end, "datagrams_received"), done, "{what}: {end}");
            }
        }
        assert_uring_on_both_ends(&doc, what);
    }
}

/// Data neither lost nor duplicated on the completion path: with requests
/// and responses of several kilobytes (TCP: split over many receive
/// completions and partial sends) and with sequence-numbered datagrams
/// (UDP: each response matched to its own request), every byte total is
/// the transaction count times the message size, on both ends.
#[test]
fn completion_path_moves_exactly_the_bytes_of_its_transactions() {
    let server = ServerProc::start(&[]);
    if !uring_available(&server) {
        return;
    }
    for (args, req, resp) in [
        (
            &["tcp_rr", "-F", "4", "-T", "2", "-b", "3", "-r", "3000,5000"][..],
            3000,
            5000,
        ),
        (
            &["tcp_rr", "-F", "2", "-T", "1", "-r", "100000,70000"][..],
            100_000,
            70_000,
        ),
        (
            &[
                "udp_rr",
                "-F",
                "4",
                "-T",
                "2",
                "-b",
                "7",
                "-r",
                "100,1200",
                "--rr-timeout",
                "2s",
            ][..],
            100,
            1200,
        ),
    ] {
        let doc = run_uring(&server, args);
        let total = |end: &str, f: &str| u(&doc["summary"][end]["total"][f]);
        let what = format!("{args:?}");
        let done = total("local", "transactions");
        assert!(done > 0, "{what}");
        assert_eq!(done, total("remote", "transactions"), "{what}");
        assert_eq!(total("local", "bytes_sent"), done * req, "{what}");
        assert_eq!(total("remote", "bytes_received"), done * req, "{what}");
        assert_eq!(total("remote", "bytes_sent"), done * resp, "{what}");
        assert_eq!(total("local", "bytes_received"), done * resp, "{what}");
    }
}

/// `--driver auto` (the default) gives a worker of 4 or more tcp_rr flows
/// (`engine::AUTO_URING_FLOWS`) to io_uring where the kernel has it, a
/// worker of fewer to epoll and a worker of one flow to the blocking
/// driver, on both ends; and one run says what ran alike in its JSON, its
/// human table (the `drivers` line) and its key=value (`LOCAL_DRIVER`,
/// `REMOTE_DRIVER`).
#[test]
fn auto_runs_uring_from_four_rr_flows_per_worker_and_says_so() {
    let server = ServerProc::start(&[]);
    if !uring_available(&server) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (js, kv) = (dir.path().join("r.json"), dir.path().join("r.kv"));
    // 8 flows on 2 threads is 4 per worker (the threshold), 6 on 2 is 3.
    for (flows, threads, want, line) in [
        (
            "8",
            "2",
            "uring",
            "client uring (2 threads), server uring (2 threads)",
        ),
        (
            "6",
            "2",
            "epoll",
            "client epoll (2 threads), server epoll (2 threads)",
        ),
        (
            "1",
            "1",
            "blocking",
            "client blocking (1 thread), server blocking (1 thread)",
        ),
    ] {
        let what = format!("-F {flows} -T {threads}");
        // Human on stdout, the same result as JSON and key=value in files.
        let human = Thrum::run("tcp_rr")
            .host(&server.addr)
            .args(["-F", flows, "-T", threads])
            .len("300ms")
            .arg("--export-json")
            .arg(&js)
            .arg("--export-keyval")
            .arg(&kv)
            .stdout();
        let doc = read_json(&js);
        assert_eq!(doc["spec"]["driver"], "auto", "{what}");
        let workers: usize = threads.parse().unwrap();
        for key in ["local_drivers", "remote_drivers"] {
            assert_eq!(drivers(&doc, key), vec![want; workers], "{what}: {key}");
        }
        let said = human
            .lines()
            .find_map(|l| l.trim_start().strip_prefix("drivers"))
            .unwrap_or_else(|| panic!("{what}: no drivers line in\n{human}"));
        assert_eq!(said.trim(), line, "{what}");
        let kvs = std::fs::read_to_string(&kv).unwrap();
        for key in ["LOCAL_DRIVER", "REMOTE_DRIVER"] {
            assert!(
                kvs.lines().any(|l| l == format!("{key}={want}")),
                "{what}: {key} in\n{kvs}"
            );
        }
    }
}

/// The drivers of one end, each checked to be io_uring.
fn assert_all_uring(doc: &Value, what: &str) {
    for key in ["local_drivers", "remote_drivers"] {
        let d = drivers(doc, key);
        assert!(
            !d.is_empty() && d.iter().all(|x| x == "uring"),
            "{what}: {key} {d:?}"
        );
    }
}

/// tcp_crr and tcp_cc on io_uring (connect, accept, receive, send and
/// close as ring operations), 1 flow and 16 flows on 2 threads, against a
/// server process and an embedded one: both ends ran io_uring, said no
/// fallback, and count the same transactions; a count-limited run does
/// exactly its count.
#[test]
fn connection_tests_run_on_uring_and_add_up() {
    let server = ServerProc::isolated("uring-crr", &[]);
    if !uring_available(&server) {
        return;
    }
    for test in ["tcp_crr", "tcp_cc"] {
        for flows in [&["-F", "1", "-T", "1"][..], &["-F", "16", "-T", "2"][..]] {
            for host in [Some(server.addr.as_str()), None] {
                for counted in [false, true] {
                    let mut run = Thrum::run(test).beside(&server).args(flows);
                    run = if counted {
                        run.args(["-n", "2001"])
                    } else {
                        run.len("1s").warmup("200ms")
                    };
                    run = run.args(URING);
                    if let Some(h) = host {
                        run = run.host(h);
                    }
                    let what = &run.to_string();
                    let doc = run.timeout(Duration::from_secs(60)).json();
                    assert_all_uring(&doc, what);
                    assert_eq!(
                        diagnostics(&doc, "uring_fallback"),
                        Vec::<String>::new(),
                        "{what}"
                    );
                    let total = |end: &str| u(&doc["summary"][end]["total"]["transactions"]);
                    assert!(total("local") > 0, "{what}");
                    assert_eq!(total("local"), total("remote"), "{what}");
                    if counted {
                        let s = &doc["summary"];
                        assert_eq!(u(&s["transactions"]), 2001, "{what}");
                        assert_eq!(u(&s["latency_ns"]["count"]), 2001, "{what}");
                        assert_eq!(total("local"), 2001, "{what}: nothing beyond the quota");
                    }
                }
            }
        }
    }
}

/// TIME_WAIT sockets whose local address is `ip`, in namespace `ns`.
fn time_wait_on(ns: &str, ip: &str) -> usize {
    // /proc/net/tcp prints the address as a little-endian hex word; the
    // local address is the second field.
    let o: Vec<u8> = ip.split('.').map(|x| x.parse().unwrap()).collect();
    let hex = format!("{:02X}{:02X}{:02X}{:02X}:", o[3], o[2], o[1], o[0]);
    let out = crate::common::run_ok(crate::common::ns_exec(ns, "cat").arg("/proc/net/tcp"));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .skip(1)
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 3 && f[3] == "06" && f[1].starts_with(&hex)
        })
        .count()
}

/// `--close rst` on io_uring (SO_LINGER 0, then a ring close) leaves no
/// TIME_WAIT anywhere, where the default close (the server's FIN first,
/// the client's close once it has read it) leaves TIME_WAIT on the server
/// only. In a namespace of its own: the kernel's TIME_WAIT table is per
/// namespace, and on the host other tests' connections fill it
/// (net.ipv4.tcp_max_tw_buckets), after which no close leaves one and
/// neither case could fail.
#[test]
fn close_rst_on_uring_leaves_no_time_wait() {
    let Some(ns) = crate::common::Netns::loopback_only("tw") else {
        return;
    };
    let (srv, cli) = ("127.0.0.1", "127.0.0.2");
    if let Err(why) = thrum::io::uring::probe() {
        eprintln!("SKIPPED: io_uring unavailable: {why}");
        return;
    }
    let server = ServerProc::start_with(
        crate::common::ns_exec(&ns.0, crate::common::bin()),
        srv,
        &[],
    );
    for (test, close) in [("tcp_crr", "rst"), ("tcp_cc", "rst"), ("tcp_crr", "fin")] {
        let (srv_before, cli_before) = (time_wait_on(&ns.0, srv), time_wait_on(&ns.0, cli));
        let what = &format!("{test} --close {close}");
        let doc = Thrum::run(test)
            .netns(&ns.0)
            .host(&server.addr)
            .args(["--bind", cli, "-n", "1000", "-F", "4", "-T", "2"])
            .args(["--close", close, "--driver", "uring"])
            .timeout(Duration::from_secs(60))
            .json();
        assert_all_uring(&doc, what);
        let trans = u(&doc["summary"]["local"]["total"]["transactions"]) as usize;
        assert_eq!(trans, 1000, "{what}");
        let srv_tw = time_wait_on(&ns.0, srv).saturating_sub(srv_before);
        let cli_tw = time_wait_on(&ns.0, cli).saturating_sub(cli_before);
        // The control connection's close may leave one.
        assert!(cli_tw <= 1, "{what}: {cli_tw} TIME_WAIT on the client");
        if close == "rst" {
            assert!(srv_tw <= 1, "{what}: {srv_tw} TIME_WAIT on the server");
        } else {
            // One per connection, less the few whose 4-tuple a later
            // connection took over (loopback reuses TIME_WAIT ports:
            // net.ipv4.tcp_tw_reuse 2), rare in 1,000 connections over a
            // range of 28,232 ports searched in order.
            assert!(
                srv_tw >= trans / 2,
                "{what}: {srv_tw} TIME_WAIT on the server, {cli_tw} on the client, for {trans} connections"
            );
        }
    }
}
