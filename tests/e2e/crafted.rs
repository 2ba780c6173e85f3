//! Crafted input against the client and the report tools: a server whose final report carries figures no
//! receiver can produce, results files and netperf logs with spans and
//! strings no run writes, and report inputs that are symlinks. Each must
//! end in bounded time and memory, with the crafted field named, and
//! nothing from a file may reach the terminal as an escape sequence.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{ServerProc, Thrum, diagnostics, read_json};

/// A proxy in front of the real server's control port that passes every
/// frame through and hands the server's `final` to `rewrite` on its way
/// to the client: a hostile server, with a real one doing the test. The
/// data connections go to the server's own ports, as the server names
/// them. Returns the proxy's address.
pub(crate) fn rewriting_proxy(server: &str, rewrite: fn(&mut Value)) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let server = server.to_string();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(mut client) = client else { return };
            let Ok(mut up) = TcpStream::connect(&server) else {
                return;
            };
            let (mut c2, mut u2) = (client.try_clone().unwrap(), up.try_clone().unwrap());
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut c2, &mut u2);
                let _ = u2.shutdown(std::net::Shutdown::Write);
            });
            std::thread::spawn(move || {
                loop {
                    let mut len = [0u8; 4];
                    if up.read_exact(&mut len).is_err() {
                        break;
                    }
                    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
                    if up.read_exact(&mut body).is_err() {
                        break;
                    }
                    let mut frame: Value = serde_json::from_slice(&body).unwrap();
                    if frame["type"] == "final" {
                        rewrite(&mut frame);
                        body = serde_json::to_vec(&frame).unwrap();
                    }
                    let mut out = (body.len() as u32).to_be_bytes().to_vec();
                    out.extend_from_slice(&body);
                    if client.write_all(&out).is_err() {
                        break;
                    }
                }
                let _ = client.shutdown(std::net::Shutdown::Both);
            });
        }
    });
    addr
}

/// Any number of `v` that no measurement gives: 2^64 − 1 or NaN.
fn has_crafted_number(v: &Value) -> bool {
    match v {
        Value::Number(n) => n.as_u64() == Some(u64::MAX),
        Value::Array(a) => a.iter().any(has_crafted_number),
        Value::Object(o) => o.values().any(has_crafted_number),
        _ => false,
    }
}

/// `[[1, b, 1]]` for every u16 `b` once made the estimate walk
/// its bins for ever (a u16 wrapped), and counts of 2^64 − 1 were printed
/// as measurements ("18446744073709551615 lost", "probe load NaN %").
#[test]
fn a_hostile_servers_final_report_is_bounded_and_named() {
    let server = ServerProc::start(&[]);
    let proxy = rewriting_proxy(&server.addr, |f| {
        let gaps: Vec<Value> = (0..=u64::from(u16::MAX))
            .map(|b| serde_json::json!([1, b, 1]))
            .collect();
        f["train_gaps"]["gaps"] = Value::Array(gaps);
        f["refused"] = serde_json::json!(u64::MAX);
    });
    let t = Instant::now();
    let out = Thrum::run("capacity")
        .host(&proxy)
        .len("1s")
        .arg("--json")
        .output();
    let took = t.elapsed();
    eprintln!("hostile final: client ended in {took:?}");
    assert!(took < Duration::from_secs(20), "{took:?}");
    let doc = out.json();
    let named = diagnostics(&doc, "server_figure_implausible");
    eprintln!("{named:?}");
    assert!(
        named
            .iter()
            .any(|m| m.contains("train_gaps.gaps [1, 512, 1]")),
        "{named:?}"
    );
    assert!(
        named.iter().any(|m| m.contains("final.refused")),
        "{named:?}"
    );
    assert!(!has_crafted_number(&doc["summary"]), "{}", doc["summary"]);
    assert!(
        doc["summary"]["capacity_bps"].is_null(),
        "{}",
        doc["summary"]
    );

    // Counts of 2^64 − 1: the human output names the field once and
    // prints no figure from it.
    let proxy = rewriting_proxy(&server.addr, |f| {
        f["train_gaps"]["lost"] = serde_json::json!(u64::MAX);
        f["train_gaps"]["frame_bytes"] = serde_json::json!(0);
    });
    let out = Thrum::run("capacity").host(&proxy).len("1s").output();
    let human = out.stdout() + &out.stderr();
    eprintln!("{human}");
    assert!(human.contains("train_gaps.frame_bytes 0"), "{human}");
    for bad in ["18446744073709551615", "NaN", "0.00 bit/s"] {
        assert!(!human.contains(bad), "{bad}: {human}");
    }
}

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/netperf");

/// A copy of the netperf tps fixture in a fresh directory, with `edit`
/// applied to the log's text.
fn netperf_copy(tag: &str, edit: impl Fn(&str) -> String) -> std::path::PathBuf {
    netperf_copy_each(tag, |name, text| {
        if name.ends_with(".log") {
            edit(text)
        } else {
            text.to_string()
        }
    })
}

/// A copy of the netperf tps fixture, each file's text through `edit`
/// (given its name).
fn netperf_copy_each(tag: &str, edit: impl Fn(&str, &str) -> String) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("thrum-crafted-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for e in std::fs::read_dir(FIXTURES).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_str().unwrap().to_string();
        if name.starts_with("netperf_tps") {
            let text = std::fs::read_to_string(&p).unwrap();
            std::fs::write(dir.join(&name), edit(&name, &text)).unwrap();
        }
    }
    dir
}

/// Bytes under `dir`, recursively.
fn bytes_under(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir).map_or(0, |d| {
        d.filter_map(Result::ok)
            .map(|e| {
                let m = e.metadata().unwrap();
                if m.is_dir() {
                    bytes_under(&e.path())
                } else {
                    m.len()
                }
            })
            .sum()
    })
}

/// A step that ends 10^12 s after it starts once aborted the
/// process ("memory allocation of 8000000000000 bytes failed"); 2·10^7 s
/// made a 2 KB input write 580 MB. Both are refused, the field named.
#[test]
fn report_refuses_spans_no_run_has() {
    // The netperf log: its stopping time 10^12 s on.
    let dir = netperf_copy("span-log", |t| {
        t.replace(
            "Netperfs stopping 1013.60",
            "Netperfs stopping 1000000001000",
        )
    });
    let t = Instant::now();
    let out = Thrum::report(dir.join("netperf_tps.log")).output();
    let err = out.stderr();
    eprintln!("log: {:?} in {:?}: {err}", out.code(), t.elapsed());
    out.fails();
    assert!(
        err.contains("step 1: end") && err.contains("refused"),
        "{err}"
    );

    // A results.json (from the same fixture), its test's end moved on.
    let good = netperf_copy("span-json", |t| t.to_string());
    let saved = good.join("saved");
    Thrum::report(good.join("netperf_tps.log"))
        .arg("--out")
        .arg(&saved)
        .ok();
    let doc = read_json(&saved.join("results.json"));
    for (later, field) in [(1e12, "end"), (2e7, "end")] {
        let mut d = doc.clone();
        let start = d["tests"][0]["start"].as_f64().unwrap();
        d["tests"][0]["end"] = serde_json::json!(start + later);
        let crafted = good.join("crafted.json");
        std::fs::write(&crafted, d.to_string()).unwrap();
        let outdir = good.join("out");
        let t = Instant::now();
        let out = Thrum::report(&crafted).arg("--out").arg(&outdir).output();
        let err = out.stderr();
        let written = bytes_under(&outdir);
        eprintln!(
            "json +{later} s: {:?} in {:?}, {written} bytes written: {err}",
            out.code(),
            t.elapsed()
        );
        out.fails();
        assert!(err.contains(field) && err.contains("refused"), "{err}");
        assert!(written < 20 << 20, "{written}");
    }
    // The last step's window a day and a second on.
    let mut d = doc.clone();
    let start = d["tests"][0]["start"].as_f64().unwrap();
    d["tests"][0]["steps"][0]["end"] = serde_json::json!(start + 86_401.0);
    let crafted = good.join("crafted.json");
    std::fs::write(&crafted, d.to_string()).unwrap();
    let err = Thrum::report(&crafted).output().stderr();
    assert!(err.contains("step 0: end"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&good);
}

/// What a terminal would obey: ESC, BEL, CSI (C1) anywhere in `b`.
fn raw_escapes(b: &[u8]) -> bool {
    b.contains(&0x1b) || b.contains(&0x07) || String::from_utf8_lossy(b).contains('\u{9b}')
}

/// `report` once printed names, units, sources, servers and
/// step errors from results.json, and a netperf `.out`'s NETPERF_UNITS,
/// as they were (`ESC ]0;…BEL ESC [2J` cleared the terminal), and
/// `_streams.csv` wrote server and unit strings unescaped.
#[test]
fn report_escapes_every_string_from_a_file() {
    const EVIL: &str = "\u{1b}]0;pwned\u{7}\u{1b}[2J";
    // A netperf run whose units and server name are escape sequences.
    let dir = netperf_copy_each("escapes", |name, text| {
        if name.ends_with(".out") {
            text.replace("Trans/s", EVIL)
        } else {
            text.to_string()
        }
    });
    let evil_out = dir.join(format!("netperf_tps_00002_to_{EVIL},x.out"));
    std::fs::write(
        &evil_out,
        std::fs::read_to_string(dir.join("netperf_tps_00000_to_lg1.out")).unwrap(),
    )
    .unwrap();
    let saved = dir.join("saved");
    let out = Thrum::report(dir.join("netperf_tps.log"))
        .arg("--out")
        .arg(&saved)
        .arg("--intervals")
        .ok();
    assert!(!raw_escapes(&out.stdout), "{}", out.stdout());
    assert!(!raw_escapes(&out.stderr), "{}", out.stderr());
    let csv = std::fs::read(saved.join("tps_streams.csv")).unwrap();
    assert!(!raw_escapes(&csv));
    let csv = String::from_utf8(csv).unwrap();
    assert!(csv.contains("\\u{1b}]0;pwned\\u{7}"), "{csv}");
    // The server name with a comma is one quoted cell.
    assert!(
        csv.lines()
            .skip(1)
            .all(|l| l.matches(',').count() == 6 || l.contains('"')),
        "{csv}"
    );

    // A results.json whose strings are escape sequences everywhere.
    let mut doc = read_json(&saved.join("results.json"));
    doc["source"] = serde_json::json!(format!("thrum agg{EVIL}"));
    doc["tests"][0]["name"] = serde_json::json!(format!("tps{EVIL}"));
    doc["tests"][0]["unit"] = serde_json::json!(EVIL);
    doc["tests"][0]["streams"][0]["server"] = serde_json::json!(EVIL);
    doc["tests"][0]["streams"][0]["error"] = serde_json::json!(format!("failed {EVIL}"));
    doc["tests"][0]["warnings"] = serde_json::json!([format!("step 0: {EVIL}"), EVIL]);
    let crafted = dir.join("crafted.json");
    std::fs::write(&crafted, doc.to_string()).unwrap();
    for extra in [&[][..], &["--intervals"][..], &["--json"][..]] {
        let out = Thrum::report(&crafted).args(extra).output();
        let all = [out.stdout.as_slice(), out.stderr.as_slice()].concat();
        eprintln!(
            "{extra:?}: {}",
            String::from_utf8_lossy(&all)
                .lines()
                .take(3)
                .collect::<Vec<_>>()
                .join(" | ")
        );
        assert!(
            !raw_escapes(&all),
            "{extra:?}: {}",
            String::from_utf8_lossy(&all)
        );
        assert!(
            String::from_utf8_lossy(&all).contains("\\u{1b}"),
            "{extra:?}"
        );
    }
    let outdir = dir.join("again");
    let out = Thrum::report(&crafted).arg("--out").arg(&outdir).output();
    for e in std::fs::read_dir(&outdir).unwrap() {
        let p = e.unwrap().path();
        assert!(!raw_escapes(&std::fs::read(&p).unwrap()), "{}", p.display());
    }
    let _ = out;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `.out` that links to /etc/os-release once had its
/// KEY=value lines copied into results.json. Report inputs are opened
/// with O_NOFOLLOW, a linked directory is not entered, and the error
/// names the link and says why.
#[test]
fn report_follows_no_symbolic_link() {
    let dir = netperf_copy("links", |t| t.to_string());
    let out_file = dir.join("netperf_tps_00001_to_lg2.out");
    std::fs::remove_file(&out_file).unwrap();
    std::os::unix::fs::symlink("/etc/os-release", &out_file).unwrap();
    let log = dir.join("netperf_tps.log");
    let out = Thrum::report(&log).arg("--json").output();
    let err = out.stderr();
    eprintln!("linked .out: {:?}: {err}", out.code());
    let out = out.fails();
    assert!(!out.stdout().contains("PRETTY_NAME"));
    assert!(
        err.contains("netperf_tps_00001_to_lg2.out is a symbolic link")
            && err.contains("O_NOFOLLOW"),
        "{err}"
    );

    // A results.json, and a directory, reached through links.
    let good = netperf_copy("links-json", |t| t.to_string());
    let saved = good.join("saved");
    Thrum::report(good.join("netperf_tps.log"))
        .arg("--out")
        .arg(&saved)
        .ok();
    let linked = good.join("linked.json");
    std::os::unix::fs::symlink(saved.join("results.json"), &linked).unwrap();
    let linked_dir = good.join("linked-dir");
    std::os::unix::fs::symlink(&saved, &linked_dir).unwrap();
    for (p, says) in [
        (&linked, "linked.json is a symbolic link"),
        (&linked_dir, "linked-dir is a symbolic link to a directory"),
    ] {
        let out = Thrum::report(p).output();
        let err = out.stderr();
        assert!(!out.success() && err.contains(says), "{err}");
    }
    // The real file still reads.
    Thrum::report(&saved).ok();
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&good);
}
