//! `sweep --nic`'s journal against a real device: a veth in a namespace
//! of the test's own, whose channels (the one NIC setting veth lets a
//! sweep change; it has no coalescing or rings) are read from sysfs, the
//! kernel's word, not through thrum. A sweep killed with SIGKILL mid-cell
//! leaves the device changed and its originals in the journal; the next
//! sweep refuses to start, naming `--restore`; `--restore` puts the
//! originals back and removes the journal; a sweep that ends cleanly
//! leaves neither a change nor a journal. The refusals for a missing
//! device and an unprivileged user say what is wrong, not the hint about
//! lo and veth.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{Netns, bin, ip, ns_exec, run_cmd};

/// The queues of `dev` in `ns` of a kind (`rx`, `tx`), as sysfs lists them.
fn queues(ns: &str, dev: &str, kind: &str) -> usize {
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            ns,
            "ls",
            &format!("/sys/class/net/{dev}/queues"),
        ])
        .output()
        .expect("ls the queues");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter(|q| q.starts_with(&format!("{kind}-")))
        .count()
}

/// thrum in `ns` with its journals kept in `state`.
fn thrum(ns: &str, state: &Path) -> Command {
    let mut c = ns_exec(ns, bin());
    c.env("XDG_STATE_HOME", state);
    c
}

/// The journals in `state`.
fn journals(state: &Path) -> Vec<String> {
    std::fs::read_dir(state.join("thrum"))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// A sweep of the rx channels of `nj0`, without its cells' length.
const SWEEP: [&str; 9] = [
    "sweep",
    "tcp_rr",
    "--nic",
    "nj0",
    "--warmup",
    "0s",
    "--no-save",
    "--vary",
    "channels-rx=1,2",
];

#[test]
fn a_killed_sweep_is_refused_then_restored_from_its_journal() {
    let Some(ns) = Netns::loopback_only("nicj") else {
        return;
    };
    let ns = ns.0.as_str();
    // Four queues each way, whatever the CPUs: the first cell's one rx
    // channel is a change sysfs shows.
    ip(&[
        "-n",
        ns,
        "link",
        "add",
        "nj0",
        "numrxqueues",
        "4",
        "numtxqueues",
        "4",
        "type",
        "veth",
        "peer",
        "name",
        "nj1",
    ]);
    ip(&["-n", ns, "link", "set", "nj0", "up"]);
    let (rx0, tx0) = (queues(ns, "nj0", "rx"), queues(ns, "nj0", "tx"));
    assert_eq!((rx0, tx0), (4, 4));
    let state = tempfile::tempdir().unwrap();
    let state = state.path();

    // Cells of 20 s: the first is still running when its change shows.
    let mut child = thrum(ns, state)
        .args(SWEEP)
        .args(["-l", "20s"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the sweep");
    let start = Instant::now();
    while queues(ns, "nj0", "rx") != 1 {
        if child.try_wait().unwrap().is_some() || start.elapsed() > Duration::from_secs(15) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the first cell's channels-rx=1 never showed in sysfs while the sweep ran");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(child.try_wait().unwrap().is_none(), "killed mid-cell");
    child.kill().unwrap();
    child.wait().unwrap();
    // What a destructor would have undone is still there, and the
    // originals are on disk.
    assert_eq!(queues(ns, "nj0", "rx"), 1);
    assert_eq!(journals(state).len(), 1, "{:?}", journals(state));

    // The next sweep refuses before any cell, naming --restore, and
    // changes nothing.
    let out = run_cmd(
        thrum(ns, state).args(SWEEP).args(["-l", "200ms"]),
        Duration::from_secs(30),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("ended without putting the device's settings back")
            && err.contains("Run `thrum sweep --nic nj0 --restore` first"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "no cell ran");
    assert_eq!(queues(ns, "nj0", "rx"), 1);

    // --restore: the originals back, the journal gone.
    let out = run_cmd(
        thrum(ns, state).args(["sweep", "--nic", "nj0", "--restore"]),
        Duration::from_secs(30),
    );
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("channels (rx 4, tx 4, combined 0) put back"),
        "{said}"
    );
    assert_eq!(
        (queues(ns, "nj0", "rx"), queues(ns, "nj0", "tx")),
        (rx0, tx0)
    );
    assert!(journals(state).is_empty(), "{:?}", journals(state));

    // A sweep that ends: both cells ran, the device as it was, no journal.
    let out = run_cmd(
        thrum(ns, state).args(SWEEP).args(["-l", "200ms", "--json"]),
        Duration::from_secs(60),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let doc: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    assert!(out.status.success(), "{stderr}");
    let took: Vec<u64> = doc["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["nic"]["channels-rx"].as_u64().unwrap())
        .collect();
    assert_eq!(took, [1, 2], "what the device took, read back per cell");
    assert_eq!(
        (queues(ns, "nj0", "rx"), queues(ns, "nj0", "tx")),
        (rx0, tx0)
    );
    assert!(journals(state).is_empty(), "{:?}", journals(state));
}

/// A device that does not exist, and a user without CAP_NET_ADMIN: each
/// refusal says what is wrong and ends without the lo/veth hint.
#[test]
fn refusals_name_the_cause() {
    let Some(ns) = Netns::loopback_only("nicr") else {
        return;
    };
    let ns = ns.0.as_str();
    ip(&[
        "-n", ns, "link", "add", "nr0", "type", "veth", "peer", "name", "nr1",
    ]);
    let state = tempfile::tempdir().unwrap();
    let sweep = |dev: &str| {
        let mut a: Vec<String> = SWEEP.iter().map(|s| s.to_string()).collect();
        a[3] = dev.to_string();
        a.extend(["-l".into(), "200ms".into()]);
        a
    };
    let out = run_cmd(
        thrum(ns, state.path()).args(sweep("nosuch0")),
        Duration::from_secs(30),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(
        err.trim_end(),
        "error: --nic nosuch0: no such interface in this network namespace (`ip link` lists them)"
    );
    // As nobody (setpriv drops every capability with the uid).
    if Command::new("setpriv").arg("--version").output().is_err() {
        eprintln!("NOTE: no setpriv: the unprivileged refusal is not checked");
        return;
    }
    let mut c = Command::new("ip");
    c.args([
        "netns",
        "exec",
        ns,
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
    ])
    .arg(bin())
    .args(sweep("nr0"))
    .env("XDG_STATE_HOME", "/nonexistent");
    let out = run_cmd(&mut c, Duration::from_secs(30));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.trim_end()
            .ends_with("setting a NIC needs CAP_NET_ADMIN (run the sweep as root)")
            && err.contains("--nic nr0: ETHTOOL_SCHANNELS"),
        "{err}"
    );
    assert!(!err.contains("veth"), "{err}");
}
