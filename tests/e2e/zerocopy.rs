//! `--zerocopy` on loopback: the sending end(s) of every bulk TCP test send
//! with MSG_ZEROCOPY, under the blocking driver (one flow, one direction) and
//! under epoll (two flows on one thread), and must reap every completion
//! before they report: completions equal sends. Loopback delivers into a
//! local socket, so the kernel copies every send anyway and the result must
//! say so. The byte totals of both ends still agree exactly.

use serde_json::Value;

use crate::common::{ServerProc, Thrum, u};
use crate::loopback::run_and_check_with;

/// One end's zero-copy counts: every send completed; returns (sends, copied).
pub(crate) fn assert_all_reaped(side: &Value, what: &str) -> (u64, u64) {
    let z = &side["zerocopy"];
    let (sends, completions, copied) = (u(&z["sends"]), u(&z["completions"]), u(&z["copied"]));
    eprintln!("{what}: {sends} zero-copy sends, {completions} completed, {copied} copied");
    assert!(sends > 0, "{what}: no zero-copy sends: {side}");
    assert_eq!(completions, sends, "{what}: completions vs sends");
    assert!(copied <= completions, "{what}: {z}");
    (sends, copied)
}

#[test]
fn zerocopy_senders_reap_every_completion() {
    let server = ServerProc::start(&[]);
    for (test, client_sends, server_sends) in [
        ("tcp_stream", true, false),
        ("tcp_maerts", false, true),
        ("tcp_bidir", true, true),
    ] {
        for (flows, driver) in [(1, "auto"), (2, "epoll")] {
            let what = format!("{test} -F {flows} --driver {driver}");
            // Conservation, intervals and the schema are checked inside.
            let doc =
                run_and_check_with(&server, test, flows, 1, &["--zerocopy", "--driver", driver]);
            assert_eq!(doc["spec"]["zerocopy"], true, "{what}");
            let s = &doc["summary"];
            for (end, sends) in [("local", client_sends), ("remote", server_sends)] {
                if !sends {
                    assert!(s[end]["zerocopy"].is_null(), "{what}: {end} does not send");
                    continue;
                }
                let (n, copied) = assert_all_reaped(&s[end], &format!("{what} {end}"));
                // Loopback hands the pages to a local socket: always a copy.
                assert_eq!(copied, n, "{what} {end}: loopback copies every send");
                let bytes = u(&s[end]["total"]["bytes_sent"]);
                assert!(
                    n >= bytes.div_ceil(128 << 10),
                    "{what} {end}: {n} sends for {bytes} bytes"
                );
            }
            let warnings = s["diagnostics"].to_string();
            assert!(
                s["diagnostics"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|d| d["code"] == "zerocopy_copied"
                        && d["message"]
                            .as_str()
                            .unwrap()
                            .contains("--zerocopy: the kernel copied 100 %")),
                "{what}: {warnings}"
            );
        }
    }
}

/// Without the option nothing is reported.
#[test]
fn no_zerocopy_counts_without_the_option() {
    let server = ServerProc::start(&[]);
    let doc = run_and_check_with(&server, "tcp_bidir", 1, 1, &[]);
    assert_eq!(doc["spec"]["zerocopy"], false);
    for end in ["local", "remote"] {
        assert!(doc["summary"][end]["zerocopy"].is_null());
    }
}

/// udp_stream `--zerocopy`: every datagram is one MSG_ZEROCOPY send call
/// from the sender's ring of batches, under the blocking driver (one flow)
/// and epoll (two flows on one thread). Every send completes before the
/// result, the zero-copy sends are exactly the datagrams sent, and the
/// datagrams still add up (sent = received + lost). Loopback delivers into
/// a local socket, so the kernel copies every one and the result says so.
#[test]
fn udp_stream_zerocopy_sends_every_datagram_from_the_ring() {
    let server = ServerProc::start(&[]);
    for extra in [&[][..], &["-F", "2", "-T", "1"][..]] {
        let args = [&["udp_stream", "--zerocopy"][..], extra].concat();
        let what = format!("{args:?}");
        let doc = crate::udp::run(&server, &args);
        assert_eq!(doc["spec"]["zerocopy"], true, "{what}");
        let s = &doc["summary"];
        let total = |end: &str, field: &str| u(&s[end]["total"][field]);
        let sent = total("local", "datagrams_sent");
        let received = total("remote", "datagrams_received");
        assert!(received > 0, "{what}");
        assert_eq!(
            sent,
            received + total("remote", "lost"),
            "{what}: sent = received + lost"
        );
        let (sends, copied) = assert_all_reaped(&s["local"], &what);
        assert_eq!(sends, sent, "{what}: one zero-copy send per datagram");
        assert_eq!(copied, sends, "{what}: loopback copies every send");
        assert!(
            s["remote"]["zerocopy"].is_null(),
            "{what}: the server only receives"
        );
        assert!(
            s["diagnostics"]
                .as_array()
                .unwrap()
                .iter()
                .any(|d| d["code"] == "zerocopy_copied"),
            "{what}: {}",
            s["diagnostics"]
        );
    }
    // GSO and zero-copy do not combine: a clear refusal naming both.
    let err = Thrum::cmd(&["run", "udp_stream", "--gso", "--zerocopy"])
        .on(&server)
        .len("1s")
        .fails()
        .stderr();
    assert!(err.contains("--gso and --zerocopy do not combine"), "{err}");
}
