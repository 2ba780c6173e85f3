//! `sweep --nic`'s journal against a real device: a veth in a namespace
//! of the test's own, whose channels (the one NIC setting veth lets a
//! sweep change; it has no coalescing or rings) are read from sysfs, the
//! kernel's word, not through thrum. A sweep killed with SIGKILL mid-cell
//! leaves the device changed and its originals in the journal; the next
//! sweep refuses to start, naming `--restore`; `--restore` puts the
//! originals back and removes the journal; a sweep that ends cleanly
//! leaves neither a change nor a journal. The refusals for a missing
//! device and an unprivileged user say what is wrong, not the hint about
//! lo and veth. The offloads (tso, gso, gro) are set per cell, read back,
//! and put back as they were, each against ethtool's `-k`, a reader of
//! its own.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::{Netns, Thrum, ip, ns_exec, run_ok};

/// The queues of `dev` in `ns` of a kind (`rx`, `tx`), as sysfs lists them.
fn queues(ns: &str, dev: &str, kind: &str) -> usize {
    run_ok(ns_exec(ns, "ls").arg(format!("/sys/class/net/{dev}/queues")))
        .stdout()
        .split_whitespace()
        .filter(|q| q.starts_with(&format!("{kind}-")))
        .count()
}

/// `thrum` in `ns` with its journals kept in `state`.
fn journaled(thrum: Thrum, ns: &str, state: &Path) -> Thrum {
    thrum.netns(ns).env("XDG_STATE_HOME", state)
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

/// A sweep of the rx channels of `dev`, without its cells' length.
fn sweep(dev: &str) -> Thrum {
    Thrum::sweep("tcp_rr").args(["--nic", dev, "--no-save", "--vary", "channels-rx=1,2"])
}

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
    let mut running = journaled(sweep("nj0"), ns, state).len("20s").spawn();
    let start = Instant::now();
    while queues(ns, "nj0", "rx") != 1 {
        if running.child.try_wait().unwrap().is_some() || start.elapsed() > Duration::from_secs(15)
        {
            let _ = running.child.kill();
            panic!(
                "the first cell's channels-rx=1 never showed in sysfs while the sweep ran\n{}",
                running.wait().report()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        running.child.try_wait().unwrap().is_none(),
        "killed mid-cell"
    );
    running.child.kill().unwrap();
    running.wait();
    // What a destructor would have undone is still there, and the
    // originals are on disk.
    assert_eq!(queues(ns, "nj0", "rx"), 1);
    assert_eq!(journals(state).len(), 1, "{:?}", journals(state));

    // The next sweep refuses before any cell, naming --restore, and
    // changes nothing.
    let ran = journaled(sweep("nj0"), ns, state).len("200ms").fails();
    let err = ran.stderr();
    assert!(
        err.contains("ended without putting the device's settings back")
            && err.contains("Run `thrum sweep --nic nj0 --restore` first"),
        "{}",
        ran.report()
    );
    assert!(ran.stdout.is_empty(), "no cell ran\n{}", ran.report());
    assert_eq!(queues(ns, "nj0", "rx"), 1);

    // --restore: the originals back, the journal gone.
    let ran = journaled(
        Thrum::cmd(&["sweep", "--nic", "nj0", "--restore"]),
        ns,
        state,
    )
    .ok();
    assert!(
        ran.stderr()
            .contains("channels (rx 4, tx 4, combined 0) put back"),
        "{}",
        ran.report()
    );
    assert_eq!(
        (queues(ns, "nj0", "rx"), queues(ns, "nj0", "tx")),
        (rx0, tx0)
    );
    assert!(journals(state).is_empty(), "{:?}", journals(state));

    // A sweep that ends: both cells ran, the device as it was, no journal.
    let doc = journaled(sweep("nj0"), ns, state)
        .len("200ms")
        .timeout(Duration::from_secs(60))
        .json();
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
    let ran = journaled(sweep("nosuch0"), ns, state.path())
        .len("200ms")
        .fails();
    assert_eq!(
        ran.stderr().trim_end(),
        "error: --nic nosuch0: no such interface in this network namespace (`ip link` lists them)",
        "{}",
        ran.report()
    );
    // As nobody (setpriv drops every capability with the uid).
    if Command::new("setpriv").arg("--version").output().is_err() {
        eprintln!("NOTE: no setpriv: the unprivileged refusal is not checked");
        return;
    }
    let ran = sweep("nr0")
        .len("200ms")
        .netns(ns)
        .under(&[
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ])
        .env("XDG_STATE_HOME", "/nonexistent")
        .fails();
    let err = ran.stderr();
    assert!(
        err.trim_end()
            .ends_with("setting a NIC needs CAP_NET_ADMIN (run the sweep as root)")
            && err.contains("--nic nr0: ETHTOOL_SCHANNELS"),
        "{}",
        ran.report()
    );
    assert!(!err.contains("veth"), "{}", ran.report());
}

/// An offload of `dev` in `ns` as `ethtool -k` shows it (`tcp-segmentation-offload`, ...).
fn ethtool_k(ns: &str, dev: &str, feature: &str) -> bool {
    let out = run_ok(ns_exec(ns, "ethtool").args(["-k", dev])).stdout();
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{feature}: ")))
        .unwrap_or_else(|| panic!("ethtool -k {dev} lists no {feature}:\n{out}"));
    line.starts_with("on")
}

/// `--vary tso=off,on --vary gro=on,off` on a veth: each cell's offloads
/// are what it asked for, as the device reads them back and as `ethtool
/// -k` shows while the cell runs (tso off is every `tx-tcp*-segmentation`
/// feature off, as `ethtool -K tso off` makes it); the sweep puts both
/// back as they were (veth: tso on, gro off) and leaves no journal; a
/// sweep killed mid-cell leaves them changed until `--restore` puts them
/// back; a value that is not on or off is refused naming the dimension.
#[test]
fn offloads_are_sweep_dimensions_put_back_after() {
    if Command::new("ethtool").arg("--version").output().is_err() {
        eprintln!("SKIPPED: no ethtool, the offloads' reference (apt-get install ethtool)");
        return;
    }
    let Some(ns) = Netns::loopback_only("nico") else {
        return;
    };
    let ns = ns.0.as_str();
    ip(&[
        "-n", ns, "link", "add", "no0", "type", "veth", "peer", "name", "no1",
    ]);
    let tso = "tcp-segmentation-offload";
    let gro = "generic-receive-offload";
    let before = (ethtool_k(ns, "no0", tso), ethtool_k(ns, "no0", gro));
    assert_eq!(before, (true, false), "veth's defaults");
    let state = tempfile::tempdir().unwrap();
    let state = state.path();
    let grid = || {
        Thrum::sweep("tcp_rr").args([
            "--nic",
            "no0",
            "--no-save",
            "--vary",
            "tso=off,on",
            "--vary",
            "gro=on,off",
        ])
    };

    // While the first cell (tso off, gro on) runs, ethtool sees it.
    let running = journaled(grid(), ns, state).len("3s").arg("--json").spawn();
    let start = Instant::now();
    while (ethtool_k(ns, "no0", tso), ethtool_k(ns, "no0", gro)) != (false, true) {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the first cell's tso off, gro on never showed in ethtool -k"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let doc = running.wait().json_ok();
    let cells = doc["cells"].as_array().unwrap();
    let took: Vec<(u64, u64)> = cells
        .iter()
        .map(|c| {
            (
                c["nic"]["tso"].as_u64().unwrap(),
                c["nic"]["gro"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(took, [(0, 1), (0, 0), (1, 1), (1, 0)], "read back per cell");
    assert_eq!(cells[0]["params"]["tso"], "off", "{}", cells[0]["params"]);
    assert_eq!(
        (ethtool_k(ns, "no0", tso), ethtool_k(ns, "no0", gro)),
        before,
        "put back as they were"
    );
    assert!(journals(state).is_empty(), "{:?}", journals(state));

    // Killed mid-cell: changed, journaled, then put back by --restore.
    let mut running = journaled(grid(), ns, state).len("20s").spawn();
    let start = Instant::now();
    while !ethtool_k(ns, "no0", gro) {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "gro on never showed in ethtool -k"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    running.child.kill().unwrap();
    running.wait();
    assert_eq!(journals(state).len(), 1, "{:?}", journals(state));
    assert!(ethtool_k(ns, "no0", gro) && !ethtool_k(ns, "no0", tso));
    let ran = journaled(
        Thrum::cmd(&["sweep", "--nic", "no0", "--restore"]),
        ns,
        state,
    )
    .ok();
    assert!(
        ran.stderr().contains("rx-gro off") && ran.stderr().contains("tx-tcp-segmentation on"),
        "{}",
        ran.report()
    );
    assert_eq!(
        (ethtool_k(ns, "no0", tso), ethtool_k(ns, "no0", gro)),
        before,
        "put back by --restore"
    );
    assert!(journals(state).is_empty(), "{:?}", journals(state));

    Thrum::cmd(&["sweep", "tcp_rr", "--nic", "no0", "--vary", "gro=maybe"]).refused(&[
        "gro: 'maybe' is not on or off",
        "on or off (ethtool -K gro)",
    ]);
}
