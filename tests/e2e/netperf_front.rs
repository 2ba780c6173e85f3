//! thrum reached as `netperf` (a symlink named netperf to the binary), on a
//! shaped three-namespace path, A (client) — R (router) — B (server), each
//! of R's egresses htb 50 Mbit/s over a 16,000-byte FIFO
//! (shared/TESTING.md), against `thrum server -p 12865` (netperf's port)
//! in B:
//!
//! - netperf's default test, `netperf -H B -l 2 -- -m 2048`, prints the
//!   "TCP STREAM TEST" table, and its throughput reads 30–50 (10^6
//!   bits/s): at most the shaped rate, at least what one cubic flow keeps
//!   through a 2.6 ms buffer (47 measured, shared/TESTING.md: 46 with four);
//! - the seeds' TCP_RR line (`-P 0 -T 0,0 -c -C -i 3,2 -- -b 4 -r 1,1`)
//!   prints netperf's two result lines, its rate above zero;
//! - UDP_STREAM prints the "UDP UNIDIRECTIONAL SEND TEST" table, the
//!   receiver's line at most the shaped rate;
//! - flent's own command line (`-P 0 -v 0 -D -0.20 -4 … -- -H B -k …`)
//!   prints at least 10 `NETPERF_INTERIM_RESULT[i]` lines in 4 s (20 are
//!   due), each with its units, interval and ending, and the final
//!   `THROUGHPUT=`, each figure within the shaped rate;
//! - a netperf option thrum cannot honour is refused, naming it, with a
//!   non-zero exit;
//! - `flent rrul -H B -l 15`, with thrum first on PATH as `netperf`, runs
//!   and its data file shows 35–50 Mbit/s of goodput each way and at
//!   least 20 UDP round trips (where flent is installed; skipped with the
//!   reason otherwise, failed when `THRUM_E2E_FLENT=required`).
//!
//! The bulk flows run cubic: this machine's default is bbr, which loses
//! most of a 16 kB buffer's worth (13 Mbit/s measured) and cannot be made
//! a namespace's default (not in the allowed list), so the path's routes
//! carry `congctl cubic`, as a path with a deep enough buffer would not
//! need.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::common::{Path3, ServerProc, TOWARD_A, TOWARD_B, Thrum, bin, ns_exec, run_cmd, run_ok};

/// netperf's control port, where the thrum server listens in B.
const PORT: &str = "12865";

/// The shaped path with a thrum server on port 12865 in B and a directory
/// holding a `netperf` symlink to thrum; the server is killed, the
/// directory removed and the namespaces deleted on drop.
struct NetperfPath {
    _server: ServerProc,
    links: PathBuf,
    path: Path3,
}

impl NetperfPath {
    fn new(subnet: u8) -> Option<NetperfPath> {
        let path = Path3::build(227, subnet)?;
        for dev in [TOWARD_A, TOWARD_B] {
            path.htb_bfifo(dev, "50mbit", "16000");
        }
        // cubic on both ends' routes (module doc).
        for (ns, via) in [
            (&path.a, format!("10.{}.{}.254", path.net, path.subnet)),
            (&path.b, format!("10.{}.{}.254", path.net, path.subnet + 1)),
        ] {
            run_ok(ns_exec(ns, "ip").args([
                "route", "replace", "default", "via", &via, "congctl", "cubic",
            ]));
        }
        let server = path.server_on(PORT.parse().unwrap());
        let links = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("netperf-front-{}-{subnet}", std::process::id()));
        let _ = std::fs::remove_dir_all(&links);
        std::fs::create_dir_all(&links).expect("links directory");
        std::os::unix::fs::symlink(bin(), links.join("netperf")).expect("netperf symlink");
        Some(NetperfPath {
            _server: server,
            links,
            path,
        })
    }

    /// `netperf ARGS..` in A: thrum through its symlink, exactly the words
    /// given.
    fn netperf(&self, args: &[&str]) -> Thrum {
        Thrum::cmd(args)
            .via(self.links.join("netperf"))
            .netns(&self.path.a)
            .timeout(Duration::from_secs(60))
    }

    fn host(&self) -> String {
        self.path.addr_b()
    }
}

impl Drop for NetperfPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.links);
    }
}

/// The numbers of a line, in order.
fn numbers(line: &str) -> Vec<f64> {
    line.split_whitespace()
        .filter_map(|w| w.parse::<f64>().ok())
        .collect()
}

/// flent's command line for one TCP flow, as its netperf runner builds it.
const FLENT_VARS: &str = "THROUGHPUT,LOCAL_CONG_CONTROL,REMOTE_CONG_CONTROL,TRANSPORT_MSS,\
LOCAL_TRANSPORT_RETRANS,REMOTE_TRANSPORT_RETRANS,LOCAL_SOCKET_TOS,REMOTE_SOCKET_TOS,DIRECTION,\
ELAPSED_TIME,PROTOCOL,LOCAL_SEND_SIZE,LOCAL_RECV_SIZE,REMOTE_SEND_SIZE,REMOTE_RECV_SIZE,\
LOCAL_BYTES_SENT,LOCAL_BYTES_RECVD,REMOTE_BYTES_SENT,REMOTE_BYTES_RECVD";

#[test]
fn netperf_command_lines_on_a_shaped_path() {
    let Some(np) = NetperfPath::new(10) else {
        return;
    };
    let host = np.host();

    // netperf's default test and its table.
    let stdout = np
        .netperf(&["-H", &host, "-l", "2", "--", "-m", "2048"])
        .stdout();
    assert!(stdout.starts_with("TCP STREAM TEST from "), "{stdout}");
    assert!(
        stdout.contains("bytes  bytes   bytes    secs.    10^6bits/sec"),
        "{stdout}"
    );
    let row = numbers(stdout.lines().last().unwrap());
    assert_eq!(row.len(), 5, "{stdout}");
    assert_eq!(row[2], 2048.0, "the send size: {stdout}");
    assert!((1.9..3.0).contains(&row[3]), "elapsed: {stdout}");
    assert!((30.0..=50.0).contains(&row[4]), "throughput: {stdout}");

    // The seeds' TCP_RR: -P 0's two lines, with CPU and confidence.
    let stdout = np
        .netperf(&[
            "-P", "0", "-T", "0,0", "-t", "TCP_RR", "-H", &host, "-c", "-C", "-i", "3,2", "-l",
            "1", "--", "-b", "4", "-r", "1,1",
        ])
        .stdout();
    assert!(
        !stdout.contains("TEST from"),
        "-P 0 prints no header: {stdout}"
    );
    let lines: Vec<&str> = stdout
        .lines()
        .filter(|l| !l.starts_with("!!!") && !l.trim().is_empty())
        .collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    let row = numbers(lines[0]);
    assert_eq!(row.len(), 10, "sizes, time, rate, CPU and demand: {stdout}");
    assert_eq!((row[2], row[3]), (1.0, 1.0), "{stdout}");
    assert!(row[5] > 0.0, "transactions/s: {stdout}");
    assert_eq!(numbers(lines[1]).len(), 2, "{stdout}");

    // UDP_STREAM: the sender's line over the receiver's.
    let stdout = np
        .netperf(&[
            "-t",
            "UDP_STREAM",
            "-H",
            &host,
            "-l",
            "2",
            "--",
            "-m",
            "1024",
        ])
        .stdout();
    assert!(
        stdout.starts_with("UDP UNIDIRECTIONAL SEND TEST from "),
        "{stdout}"
    );
    let rows: Vec<Vec<f64>> = stdout
        .lines()
        .map(numbers)
        .filter(|n| n.len() >= 4)
        .collect();
    assert_eq!(rows.len(), 2, "{stdout}");
    assert_eq!(rows[0][1], 1024.0, "{stdout}");
    let received = rows[1][3];
    assert!(received > 0.0 && received <= 50.0, "received: {stdout}");

    // flent's command line: interim results every 0.2 s in -k form.
    let stdout = np
        .netperf(&[
            "-P",
            "0",
            "-v",
            "0",
            "-D",
            "-0.20",
            "-4",
            "-Y",
            "0x0,0x0",
            "-H",
            &host,
            "-p",
            PORT,
            "-t",
            "TCP_STREAM",
            "-l",
            "4",
            "-F",
            "/dev/urandom",
            "-f",
            "m",
            "--",
            "-H",
            &host,
            "-k",
            FLENT_VARS,
        ])
        .stdout();
    let interim: Vec<f64> = stdout
        .lines()
        .filter(|l| l.starts_with("NETPERF_INTERIM_RESULT["))
        .map(|l| l.split_once('=').unwrap().1.parse().unwrap())
        .collect();
    assert!(
        interim.len() >= 10,
        "{} interim results: {stdout}",
        interim.len()
    );
    assert!(
        interim.iter().all(|v| (0.0..=50.5).contains(v)),
        "{interim:?}"
    );
    for key in [
        "NETPERF_UNITS[0]=10^6bits/s",
        "NETPERF_INTERVAL[0]=0.",
        "NETPERF_ENDING[0]=",
    ] {
        assert!(stdout.contains(key), "{key}: {stdout}");
    }
    let throughput: f64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("THROUGHPUT="))
        .expect("THROUGHPUT=")
        .parse()
        .unwrap();
    assert!((30.0..=50.0).contains(&throughput), "{stdout}");
    for key in [
        "PROTOCOL=TCP",
        "DIRECTION=Send",
        "LOCAL_SOCKET_TOS=0x00",
        "TRANSPORT_MSS=-1",
    ] {
        assert!(stdout.lines().any(|l| l == key), "{key}: {stdout}");
    }

    // An option thrum cannot honour: refused, named, non-zero.
    np.netperf(&["-H", &host, "--", "-P", "5000"])
        .refused(&["netperf's -P LPORT,RPORT", "--data-ports"]);
}

/// flent's data file (gzipped JSON): its series by name.
fn flent_results(dir: &Path) -> Value {
    let file = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".flent.gz"))
        .unwrap_or_else(|| panic!("no .flent.gz in {}", dir.display()));
    let out = run_ok(Command::new("gzip").arg("-dc").arg(&file));
    serde_json::from_slice(&out.stdout).expect("flent's data file is JSON")
}

/// The values of one series that are present.
fn series(data: &Value, name: &str) -> Vec<f64> {
    data["results"][name]
        .as_array()
        .unwrap_or_else(|| panic!("no series {name:?}"))
        .iter()
        .filter_map(Value::as_f64)
        .collect()
}

#[test]
fn flent_rrul_runs_over_thrum_as_netperf() {
    let required = std::env::var("THRUM_E2E_FLENT").is_ok_and(|v| v == "required");
    let runs = |cmd: &[&str]| {
        Command::new(cmd[0])
            .args(&cmd[1..])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    // flent as a program on PATH, or as the module pip installed (a
    // pyenv's shims know a new script only after a rehash).
    let flent: &[&str] = if runs(&["flent", "--version"]) {
        &["flent"]
    } else {
        &["python3", "-m", "flent"]
    };
    // flent's ICMP pings need ping; its UDP ones are netperf UDP_RR
    // (without irtt), which is thrum here.
    for (what, cmd) in [
        ("flent", [flent, &["--version"]].concat()),
        ("ping", vec!["ping", "-V"]),
    ] {
        if !runs(&cmd) {
            assert!(
                !required,
                "THRUM_E2E_FLENT=required but {what} is not installed"
            );
            eprintln!("SKIPPED: {what} is not installed (pip install flent==2.3.0; iputils-ping)");
            return;
        }
    }
    let Some(np) = NetperfPath::new(12) else {
        return;
    };
    let dir = np.links.join("flent");
    std::fs::create_dir_all(&dir).unwrap();
    let path = format!(
        "{}:{}",
        np.links.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let ran = run_cmd(
        ns_exec(&np.path.a, "env")
            .arg(format!("PATH={path}"))
            .args(flent)
            .args(["rrul", "-H", &np.host(), "-l", "15", "-D"])
            .arg(&dir),
        Duration::from_secs(120),
    )
    .ok();
    let log = ran.report();
    let data = flent_results(&dir);
    for way in ["TCP upload sum", "TCP download sum"] {
        let v = series(&data, way);
        let mean = v.iter().sum::<f64>() / v.len().max(1) as f64;
        assert!(
            (35.0..=50.0).contains(&mean),
            "{way}: mean {mean:.2} of {v:?}\n{log}"
        );
    }
    let udp: usize = ["Ping (ms) UDP BE", "Ping (ms) UDP BK", "Ping (ms) UDP EF"]
        .iter()
        .map(|s| series(&data, s).len())
        .sum();
    assert!(udp >= 20, "{udp} UDP round trips\n{log}");
}

/// `--wait-server`: a client started before its server waits for it (a
/// script starting both at once); without a server it gives up after the
/// wait, naming the flag.
#[test]
fn a_client_started_before_its_server_waits_for_it() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let client = |wait: &str| {
        Thrum::run("tcp_rr")
            .host(&format!("127.0.0.1:{port}"))
            .len("1")
            .args(["--wait-server", wait])
            .timeout(Duration::from_secs(120))
    };
    let waiting = client("60s").arg("--json").spawn();
    // The client is refused until the server comes up a second later.
    std::thread::sleep(Duration::from_secs(1));
    let server = ServerProc::start_on("127.0.0.1", port);
    let doc = waiting.wait().json_ok();
    assert!(doc["summary"]["transactions"].as_u64().unwrap() > 0);
    drop(server);

    let started = std::time::Instant::now();
    client("1s").refused(&["within --wait-server 1s"]);
    assert!(started.elapsed() >= Duration::from_secs(1));
}

/// LOCAL_CONG_CONTROL and REMOTE_CONG_CONTROL are what each end's data
/// sockets used, as netperf reads them with getsockopt: `-K`'s algorithm on
/// both ends, for a long-lived stream and for TCP_CRR (whose connections
/// are gone at the end: a socket given `-K` reads it back); and, without
/// `-K`, the algorithm a route's `congctl` gives the connection, which the
/// kernel's default does not say. Ground truth we set: the algorithms are
/// chosen unlike this machine's default, and the route is the server's
/// loopback-only namespace's own, so nothing of the host changes.
#[test]
fn congestion_control_fields_are_what_the_sockets_used() {
    let default = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control")
        .expect("tcp_congestion_control")
        .trim()
        .to_string();
    // Both built into every kernel; unlike the default, so a field that
    // printed the default would be seen.
    let others: Vec<&str> = ["reno", "cubic"]
        .into_iter()
        .filter(|cc| *cc != default)
        .collect();
    let server = ServerProc::isolated("netperf-cc", &[]);
    let (ip, port) = server.addr.rsplit_once(':').expect("server address");
    let fields = |test: &str, extra: &[&str]| {
        let mut words = vec!["netperf", "-P", "0", "-H", ip, "-p", port, "-t", test];
        words.extend([
            "-l",
            "1",
            "--",
            "-k",
            "LOCAL_CONG_CONTROL,REMOTE_CONG_CONTROL",
        ]);
        words.extend(extra);
        Thrum::cmd(&words).beside(&server).stdout()
    };
    let shows = |out: &str, cc: &str| {
        for end in ["LOCAL", "REMOTE"] {
            let want = format!("{end}_CONG_CONTROL={cc}");
            assert!(out.lines().any(|l| l == want), "{want}: {out}");
        }
    };
    for test in ["TCP_STREAM", "TCP_CRR"] {
        shows(&fields(test, &["-K", others[0]]), others[0]);
    }
    // A route's congctl: in the server's own namespace only.
    let Some(ns) = &server.ns else {
        eprintln!("skipped the route's congctl: no namespace of its own");
        return;
    };
    let routed = others[others.len() - 1];
    run_ok(ns_exec(ns, "ip").args([
        "route", "replace", "local", ip, "dev", "lo", "table", "local", "proto", "kernel", "scope",
        "host", "src", ip, "congctl", routed,
    ]));
    shows(&fields("TCP_RR", &[]), routed);
}
