//! netperf's omni output selectors: `--output-fields` picks fields by
//! netperf's names for the CSV line (`-o`), key=value (`-k`) and one human
//! line (`-O`), with the key=value figures; every key a result carries is
//! a field; and the omni fields beyond the figures (the confidence, the
//! UUID, any percentile asked for, uname's, the brand) say what the JSON
//! result of the same run says.

use std::time::Duration;

use serde_json::Value;

use crate::common::{Thrum, assert_rejected, keyval, read_json};

const FIELDS: &str =
    "THROUGHPUT,THROUGHPUT_UNITS,MEAN_LATENCY,P99_LATENCY,LOCAL_CPU_UTIL,REMOTE_SD";

#[test]
fn output_fields_choose_what_csv_keyval_and_one_line_show() {
    let dir = tempfile::tempdir().unwrap();
    let all = dir.path().join("all.kv");
    let names: Vec<&str> = FIELDS.split(',').collect();
    for (style, extra) in [
        ("csv", &["--csv"][..]),
        ("keyval", &["--keyval"]),
        ("human", &[]),
    ] {
        let text = Thrum::run("tcp_rr")
            .len("0.5s")
            .args(["--output-fields", FIELDS, "--export-keyval"])
            .arg(&all)
            .args(extra)
            .stdout();
        let full = keyval(&std::fs::read_to_string(&all).unwrap());
        let want: Vec<&str> = names.iter().map(|n| full[*n].as_str()).collect();
        assert_eq!(want[1], "Trans/s");
        let lines: Vec<&str> = text.lines().collect();
        match style {
            "csv" => {
                assert_eq!(lines, vec![FIELDS.to_string(), want.join(",")], "{text}");
            }
            "keyval" => {
                let got: Vec<String> = names
                    .iter()
                    .zip(&want)
                    .map(|(n, v)| format!("{n}={v}"))
                    .collect();
                assert_eq!(lines, got, "{text}");
            }
            _ => {
                assert_eq!(lines.len(), 2, "{text}");
                assert_eq!(lines[0].split_whitespace().collect::<Vec<_>>(), names);
                assert_eq!(lines[1].split_whitespace().collect::<Vec<_>>(), want);
            }
        }
    }
    // Every key a result carries is a field one can ask for.
    for (test, extra) in [
        ("tcp_rr", &["-c", "-C", "-s", "64K", "-S", "64K"][..]),
        ("udp_stream", &[]),
        ("tcp_bidir", &[]),
    ] {
        let short = Thrum::run(test).len("0.3s").arg("--keyval");
        let out = short.clone().args(extra).output();
        let keys: Vec<String> = keyval(&out.stdout()).into_keys().collect();
        let list = keys.join(",");
        short.args(["--output-fields", &list]).ok();
    }
    assert_rejected(&[(
        &["run", "tcp_rr", "--output-fields", "THROUGHPUT,THROUGPUT"],
        &["'THROUGPUT' is not a field", "MEAN_LATENCY", "REMOTE_SD"],
    )]);
}

/// The fields of one CSV line, quoted ones ("a,b", "say ""x""") whole.
fn csv_line(line: &str) -> Vec<String> {
    let (mut out, mut cell, mut quoted) = (Vec::new(), String::new(), false);
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cell.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(std::mem::take(&mut cell)),
            _ => cell.push(c),
        }
    }
    out.push(cell);
    out
}

/// `--csv --output-fields all` (netperf's `-o all`): a header of every
/// field, then each --percentiles entry's, and one line with as many
/// values, each the one key=value gives it in the same run; a field the
/// test does not carry is empty.
#[test]
fn csv_with_all_shows_every_field() {
    let dir = tempfile::tempdir().unwrap();
    let kv = dir.path().join("all.kv");
    let text = Thrum::run("tcp_rr")
        .len("0.5s")
        .args(["--csv", "--output-fields", "all", "--percentiles", "99.99"])
        .arg("--export-keyval")
        .arg(&kv)
        .stdout();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    let (head, row) = (csv_line(lines[0]), csv_line(lines[1]));
    assert_eq!(head.len(), row.len(), "{text}");
    for must in [
        "TEST",
        "THROUGHPUT",
        "P99_LATENCY",
        "REMOTE_SD",
        "P9999_LATENCY",
    ] {
        assert_eq!(
            head.iter().filter(|h| *h == must).count(),
            1,
            "{must}: {text}"
        );
    }
    let full = keyval(&std::fs::read_to_string(&kv).unwrap());
    for (name, value) in head.iter().zip(&row) {
        match full.get(name) {
            Some(v) => assert_eq!(value, v, "{name}: {text}"),
            None => assert_eq!(value, "", "{name} is not the test's: {text}"),
        }
    }
    assert!(full.keys().all(|k| head.contains(k)), "{text}");
}

/// `--keyval` and `--output-fields` read one table, so
/// every key an open-loop run prints (OFFERED_RATE, LATE,
/// P99_SERVICE_LATENCY, ... were refused while the two lists were apart)
/// is a field one can ask for, with the value key=value gives it in the
/// same run.
#[test]
fn every_open_loop_keyval_key_is_an_output_field() {
    let base = Thrum::run("udp_rr")
        .args(["--rate", "500"])
        .len("1s")
        .arg("--keyval")
        .default_warmup();
    let text = base.stdout();
    let keys: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .collect();
    for k in [
        "OFFERED_RATE",
        "ACHIEVED_RATE",
        "LATE",
        "P99_SERVICE_LATENCY",
    ] {
        assert!(keys.contains(&k), "{k} missing from {text}");
    }
    let list = keys.join(",");
    let dir = tempfile::tempdir().unwrap();
    let all = dir.path().join("all.kv");
    let got = base
        .args(["--output-fields", &list, "--export-keyval"])
        .arg(&all)
        .stdout();
    let full = keyval(&std::fs::read_to_string(&all).unwrap());
    let want: Vec<String> = keys
        .iter()
        .map(|k| format!("{k}={}", full.get(*k).map_or("", String::as_str)))
        .collect();
    assert_eq!(got.lines().collect::<Vec<_>>(), want, "{got}");
}

/// A version 4 UUID in its text form.
fn is_uuid_v4(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    let lens: Vec<usize> = parts.iter().map(|p| p.len()).collect();
    lens == [8, 4, 4, 4, 12]
        && s.chars().all(|c| c == '-' || c.is_ascii_hexdigit())
        && parts[2].starts_with('4')
        && parts[3].starts_with(['8', '9', 'a', 'b'])
}

/// netperf's omni fields beyond the figures, with `--iterations 2,3`:
/// each value what the JSON result of the same run says (the confidence,
/// the percentile, the UUID), or what the machine says (uname's sysname).
/// The flags they lean on are checked, with tips for netperf's and
/// iperf3's spellings.
#[test]
fn omni_fields_confidence_uuid_percentiles_and_uname() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let fields = "COMMAND_LINE,UUID,CONFIDENCE_LEVEL,THROUGHPUT_CONFID,P50_LATENCY,P9999_LATENCY,\
CONFIDENCE_ITERATION,LOCAL_SYSNAME,LOCAL_RELEASE,REMOTE_SYSNAME,RESULT_BRAND";
    let out = Thrum::run("tcp_rr")
        .len("300ms")
        .interval("100ms")
        .args(["--iterations", "2,3", "--percentiles", "99.99"])
        .args(["--brand", "rack 4", "--keyval", "--output-fields", fields])
        .arg("--export-json")
        .arg(&json)
        .timeout(Duration::from_secs(60))
        .stdout();
    let got = keyval(&out);
    let r = read_json(&json);
    let c = &r["confidence"];
    assert_eq!(got["CONFIDENCE_LEVEL"], "99");
    let runs = c["iterations_run"].as_u64().unwrap();
    assert!((2..=3).contains(&runs), "{c}");
    assert_eq!(got["CONFIDENCE_ITERATION"], runs.to_string());
    assert_eq!(r["iterations"].as_array().unwrap().len() as u64, runs);
    let width = c["width_percent_achieved"].as_f64().unwrap();
    assert_eq!(got["THROUGHPUT_CONFID"], format!("{width:.3}"));
    let lat = &r["summary"]["latency_ns"];
    let us = |ns: &Value| format!("{:.3}", ns.as_u64().unwrap() as f64 / 1e3);
    assert_eq!(got["P50_LATENCY"], us(&lat["p50"]));
    let p9999 = &lat["percentiles"][0];
    assert_eq!(p9999["percentile"].as_f64(), Some(99.99));
    assert_eq!(got["P9999_LATENCY"], us(&p9999["ns"]));
    // One UUID for the run, in the field and the JSON alike.
    let uuid = &got["UUID"];
    assert!(is_uuid_v4(uuid), "{uuid}");
    assert_eq!(r["environment"]["uuid"], uuid.as_str());
    assert_eq!(got["RESULT_BRAND"], "rack 4");
    assert!(
        got["COMMAND_LINE"].contains("--iterations 2,3 --percentiles 99.99 --brand 'rack 4'"),
        "{}",
        got["COMMAND_LINE"]
    );
    let ostype = std::fs::read_to_string("/proc/sys/kernel/ostype").unwrap();
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert_eq!(got["LOCAL_SYSNAME"], ostype.trim());
    assert_eq!(got["LOCAL_RELEASE"], release.trim());
    // The embedded server shares its provenance: the same machine.
    assert_eq!(got["REMOTE_SYSNAME"], ostype.trim());

    // Refused before anything runs: a percentile not asked for, and
    // --bytes where it means nothing or with a duration.
    assert_rejected(&[
        (
            &["run", "tcp_rr", "--output-fields", "P95_LATENCY"],
            &["P95_LATENCY", "--percentiles"],
        ),
        (
            &["run", "tcp_rr", "--bytes", "1M"],
            &["--bytes", "tcp_stream"],
        ),
        (
            &["run", "tcp_crr", "--bytes", "1M"],
            &["--bytes", "tcp_crr"],
        ),
        (
            &["run", "--bytes", "1M", "-l", "2s"],
            &["--bytes", "--duration"],
        ),
        (&["run", "-f", "x"], &["--format", "K, M, G"]),
        // iperf3's -n SIZE is --bytes here.
        (&["run", "-n", "200M"], &["tip:", "--bytes 200M"]),
    ]);
    // netperf's -i MAX,MIN: taken the other way round, with a tip.
    let out = Thrum::cmd(&["run", "--iterations", "3,2", "--dry-run"]).ok();
    let err = out.stderr();
    assert!(
        err.contains("tip:") && err.contains("--iterations 2,3"),
        "{err}"
    );
    assert!(out.stdout().starts_with("tcp_stream"));
}
