//! The sensors on a real, non-loopback interface: a veth between two network
//! namespaces. A thread of this test process enters one namespace
//! (setns(2) moves only the calling thread), and from there the route lookup
//! must name the veth, the ethtool ioctls must describe the veth driver, and
//! the packet counters must move with datagrams sent over it. Only a handful
//! of datagrams to the other namespace: nothing load-sensitive.
//!
//! Needs root and `ip netns`; skips like the other namespace tests.

use std::net::{IpAddr, UdpSocket};
use std::os::fd::AsRawFd;

use thrum::sensors::provenance::Interface;
use thrum::sensors::{IfCounters, Provenance, human_lines, route_interface};

use crate::common::Pair;

/// Unique among the namespace tests of this binary (see netns.rs).
const SUBNET: u8 = 31;

/// Move the calling thread into namespace `ns`.
fn enter(ns: &str) {
    let f = std::fs::File::open(format!("/run/netns/{ns}")).expect("namespace file");
    // SAFETY: f is an open namespace file; setns changes only this thread.
    let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
}

#[test]
fn sensors_see_the_veth_of_their_namespace() {
    // A and B joined by veth `va`–`vb` on 10.213.31.0/24; dropping it
    // deletes both, and the veth with them.
    let Some(pair) = Pair::build(213, SUBNET) else {
        return;
    };
    let ns = pair.a.clone();
    let peer: IpAddr = format!("10.213.{SUBNET}.2").parse().unwrap();
    let own: IpAddr = format!("10.213.{SUBNET}.1").parse().unwrap();
    let seen = std::thread::spawn(move || {
        enter(&ns);
        assert_eq!(route_interface(peer).as_deref(), Some("va"));
        assert_eq!(route_interface(own).as_deref(), Some("lo"));
        assert_eq!(
            route_interface("127.0.0.1".parse().unwrap()).as_deref(),
            Some("lo")
        );
        // A has no default route.
        assert_eq!(route_interface("10.213.250.1".parse().unwrap()), None);

        let i = Interface::gather("va");
        assert_eq!(i.driver.as_deref(), Some("veth"), "{i:?}");
        assert_eq!(i.mtu, Some(1500));
        let features = i.features.as_ref().expect("veth lists its features");
        assert!(
            features.contains_key("tx-generic-segmentation"),
            "{features:?}"
        );
        let o = i.offloads.expect("veth answers the legacy offload ioctls");
        assert!(o.gso.is_some() && o.tso.is_some(), "{o:?}");

        let before = IfCounters::read("va").unwrap();
        let s = UdpSocket::bind((own, 0)).unwrap();
        for _ in 0..10 {
            s.send_to(b"x", (peer, 9)).unwrap();
        }
        let d = IfCounters::read("va").unwrap().since(&before);
        // Ten datagrams, plus ARP on a fresh link.
        assert!(d.tx_packets >= 10, "{d:?}");
        assert!(d.tx_bytes >= 10 * 43, "{d:?}");

        let p = Provenance::for_peer(peer);
        assert_eq!(p.interface.as_ref().map(|i| i.name.as_str()), Some("va"));
        (serde_json::to_string_pretty(&p).unwrap(), human_lines(&p))
    })
    .join()
    .expect("the namespaced thread's checks");
    // Shown with --nocapture: what the veth driver offers on this kernel.
    eprintln!("{}\n{}", seen.0, seen.1.join("\n"));
    drop(pair);
}
