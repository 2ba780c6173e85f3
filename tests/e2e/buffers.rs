//! Socket buffers are reported as the kernel set them (getsockopt after
//! setsockopt), beside what was asked, as netperf does.

use crate::common::{Thrum, assert_schema, u};

fn sysctl(name: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/sys/net/core/{name}"))
        .expect("read sysctl")
        .trim()
        .parse()
        .expect("sysctl is a number")
}

/// What Linux gives for a request: capped at the sysctl, then doubled
/// (socket(7): the other half is the kernel's bookkeeping).
fn expected(asked: u64, max: u64) -> u64 {
    2 * asked.min(max)
}

#[test]
fn socket_buffers_are_reported_as_the_kernel_set_them() {
    let (wmax, rmax) = (sysctl("wmem_max"), sysctl("rmem_max"));
    // A receive buffer above rmem_max is capped: asked and set part.
    let big = 2 * rmax + 4096;
    let local = format!("64K,{big}");
    let doc = Thrum::run("tcp_stream")
        .len("0.3s")
        .args(["-s", &local, "-S", "32K"])
        .json();
    assert_schema(&doc);
    let l = &doc["summary"]["local"]["socket_buffers"];
    assert_eq!(u(&l["send_requested_bytes"]), 65536, "{l}");
    assert_eq!(u(&l["send_bytes"]), expected(65536, wmax), "{l}");
    assert_eq!(u(&l["recv_requested_bytes"]), big, "{l}");
    assert_eq!(u(&l["recv_bytes"]), expected(big, rmax), "{l}");
    // The embedded server shares this kernel: its figures are known too.
    let r = &doc["summary"]["remote"]["socket_buffers"];
    assert_eq!(u(&r["send_requested_bytes"]), 32768, "{r}");
    assert_eq!(u(&r["send_bytes"]), expected(32768, wmax), "{r}");
    assert_eq!(u(&r["recv_bytes"]), expected(32768, rmax), "{r}");

    // Human output and key=value say both figures.
    let udp_rr = Thrum::run("udp_rr").len("0.3s").args(["-s", "64K"]);
    let text = udp_rr.stdout();
    let want = format!("send {} B (asked 65536 B)", expected(65536, wmax));
    assert!(text.contains(&want), "no {want:?} in:\n{text}");
    let kv = udp_rr.arg("--keyval").stdout();
    for line in [
        format!("LSS_SIZE={}", expected(65536, wmax)),
        "LSS_SIZE_REQ=65536".to_string(),
    ] {
        assert!(kv.lines().any(|l| l == line), "no {line} in:\n{kv}");
    }
}

/// A separate server's buffers come in its final report.
#[test]
fn a_separate_servers_buffers_come_in_its_final_report() {
    let server = crate::common::ServerProc::start(&[]);
    let wmax = sysctl("wmem_max");
    let doc = Thrum::run("tcp_stream")
        .host(&server.addr)
        .len("0.3s")
        .args(["-S", "32K"])
        .json();
    assert_schema(&doc);
    let r = &doc["summary"]["remote"]["socket_buffers"];
    assert_eq!(u(&r["send_requested_bytes"]), 32768, "{r}");
    assert_eq!(u(&r["send_bytes"]), expected(32768, wmax), "{r}");
}
