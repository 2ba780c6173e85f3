//! netperf's omni output selectors (issue 20, item 8): `--output-fields`
//! picks fields by netperf's names for the CSV line (`-o`), key=value
//! (`-k`) and one human line (`-O`), with the key=value figures.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::common::{assert_rejected, run_client};

const FIELDS: &str =
    "THROUGHPUT,THROUGHPUT_UNITS,MEAN_LATENCY,P99_LATENCY,LOCAL_CPU_UTIL,REMOTE_SD";

fn kv(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

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
        let mut args = vec![
            "run",
            "tcp_rr",
            "-l",
            "0.5s",
            "--warmup",
            "0s",
            "--output-fields",
            FIELDS,
            "--export-keyval",
            all.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let out = run_client(&args, Duration::from_secs(30));
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let full = kv(&std::fs::read_to_string(&all).unwrap());
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
        let mut args = vec!["run", test, "-l", "0.3s", "--warmup", "0s", "--keyval"];
        args.extend_from_slice(extra);
        let out = run_client(&args, Duration::from_secs(30));
        let keys: Vec<String> = kv(&String::from_utf8_lossy(&out.stdout))
            .into_keys()
            .collect();
        let list = keys.join(",");
        let again = run_client(
            &[
                "run",
                test,
                "-l",
                "0.3s",
                "--warmup",
                "0s",
                "--keyval",
                "--output-fields",
                &list,
            ],
            Duration::from_secs(30),
        );
        assert!(
            again.status.success(),
            "{test}: {}",
            String::from_utf8_lossy(&again.stderr)
        );
    }
    assert_rejected(&[(
        &["run", "tcp_rr", "--output-fields", "THROUGHPUT,THROUGPUT"],
        &["'THROUGPUT' is not a field", "MEAN_LATENCY", "REMOTE_SD"],
    )]);
}

/// Issue 27, item 5: `--keyval` and `--output-fields` read one table, so
/// every key an open-loop run prints (OFFERED_RATE, LATE,
/// P99_SERVICE_LATENCY, ... were refused while the two lists were apart)
/// is a field one can ask for, with the value key=value gives it in the
/// same run.
#[test]
fn every_open_loop_keyval_key_is_an_output_field() {
    let base = ["run", "udp_rr", "--rate", "500", "-l", "1s", "--keyval"];
    let out = run_client(&base, Duration::from_secs(30));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
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
    let mut args = base.to_vec();
    args.extend_from_slice(&["--output-fields", &list, "--export-keyval"]);
    args.push(all.to_str().unwrap());
    let again = run_client(&args, Duration::from_secs(30));
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    let full = kv(&std::fs::read_to_string(&all).unwrap());
    let want: Vec<String> = keys
        .iter()
        .map(|k| format!("{k}={}", full.get(*k).map_or("", String::as_str)))
        .collect();
    let got = String::from_utf8_lossy(&again.stdout).into_owned();
    assert_eq!(got.lines().collect::<Vec<_>>(), want, "{got}");
}
