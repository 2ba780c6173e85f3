//! The results store against what a user, an older thrum or a hand-edited
//! file can put in it: labels and names bounded and printable on the way
//! in, and any stored value listed, shown and compared escaped and cut
//! without a panic. Every test runs the real binary with the embedded
//! server on loopback and a store file of its own (`--db`).

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;

use crate::common::{bin, json, run_cmd};

const LIMIT: Duration = Duration::from_secs(60);

/// `thrum ARGS.. --db DB`, to completion.
fn thrum(db: &Path, args: &[&str]) -> Output {
    run_cmd(Command::new(bin()).args(args).arg("--db").arg(db), LIMIT)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A 200 ms tcp_rr against the embedded server, saved in `db` with
/// `extra` flags; it must succeed.
fn save_run(db: &Path, extra: &[&str]) {
    let mut args = vec!["run", "tcp_rr", "-l", "200ms", "--warmup", "0s", "--json"];
    args.extend_from_slice(extra);
    let out = thrum(db, &args);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
}

/// The stored runs, newest first (`history --json`).
fn rows(db: &Path) -> Vec<Value> {
    let out = thrum(db, &["history", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    json(&out).as_array().expect("an array").clone()
}

/// Give the newest run of `db`, by hand as another program could, the
/// label `k` = `value` and the name `name`, which no thrum would save.
fn forge(db: &Path, value: &str, name: &str) -> String {
    let id = rows(db)[0]["id"].as_str().unwrap().to_string();
    let c = rusqlite::Connection::open(db).expect("the store opens");
    let labels = serde_json::json!({ "k": value }).to_string();
    c.execute(
        "UPDATE runs SET labels = ?1, name = ?2 WHERE id = ?3",
        rusqlite::params![labels, name, id],
    )
    .unwrap();
    c.execute(
        "INSERT INTO labels (run_id, key, value) VALUES (?1, 'k', ?2)",
        rusqlite::params![id, value],
    )
    .unwrap();
    id
}

/// No control character but the line ends.
fn printable(s: &str) -> bool {
    !s.chars().any(|c| c.is_control() && c != '\n')
}

/// A label of 120,000 characters, a key of 65 and a name holding a newline
/// are refused before the run, naming the flag and the accepted range
/// (without echoing the value whole); the longest accepted are saved. A
/// store holding such values anyway (an older thrum, a hand) lists with
/// exit 0, each run on one line, the long value cut with an ellipsis; the
/// JSON keeps it whole.
#[test]
fn long_labels_are_refused_and_a_stored_one_lists() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.db");
    let long = format!("big={}", "x".repeat(120_000));
    let key = format!("{}=v", "k".repeat(65));
    for (flag, value, want) in [
        ("--label", long.as_str(), "0 to 256"),
        ("--label", key.as_str(), "1 to 64"),
        ("--label", "k=two\nlines", "control character"),
        ("--name", "a\u{1b}[2Jname", "control character"),
        ("--name", &"n".repeat(257), "0 to 256"),
    ] {
        let out = thrum(&db, &["run", "tcp_rr", "-l", "200ms", flag, value]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{flag}: {err}");
        assert!(err.contains(flag) && err.contains(want), "{flag}: {err}");
        assert!(err.len() < 1000 && printable(&err), "{flag}: {err:?}");
    }
    assert!(!db.exists(), "nothing ran, nothing was saved");

    let longest = format!("k={}", "v".repeat(256));
    save_run(&db, &["--label", &longest, "--name", &"n".repeat(256)]);
    assert_eq!(rows(&db)[0]["labels"]["k"].as_str().unwrap().len(), 256);

    save_run(&db, &[]);
    forge(&db, &"x".repeat(120_000), "second\nid  time  forged");
    let out = thrum(&db, &["history"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(text.contains("…(+119936 chars)"), "{text}");
    assert!(text.contains("second\\nid  time  forged"), "{text}");
    assert!(text.lines().all(|l| l.chars().count() < 1000));
    assert_eq!(
        rows(&db)[0]["labels"]["k"].as_str().unwrap().len(),
        120_000,
        "--json carries the value whole"
    );
    let csv = thrum(&db, &["history", "--csv"]);
    assert!(csv.status.success(), "{}", stderr(&csv));
    assert_eq!(stdout(&csv).lines().count(), 3);
}

/// A label and a name holding escape sequences, stored by hand: `history`,
/// `show ID` and `compare ID label:…` print them escaped (`\u{1b}`), never
/// raw.
#[test]
fn stored_escapes_print_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.db");
    save_run(&db, &[]);
    let red = "v\u{1b}[31mRED";
    let id = forge(&db, red, "n\u{1b}]0;title\u{7}");

    let list = thrum(&db, &["history"]);
    assert!(list.status.success(), "{}", stderr(&list));
    let text = stdout(&list);
    assert!(printable(&text), "{text:?}");
    assert!(text.contains("k=v\\u{1b}[31mRED"), "{text}");
    assert!(text.contains("n\\u{1b}]0;title\\u{7}"), "{text}");

    let show = thrum(&db, &["show", &id]);
    assert!(show.status.success(), "{}", stderr(&show));
    let (out, err) = (stdout(&show), stderr(&show));
    assert!(printable(&out) && printable(&err), "{out:?}\n{err:?}");
    assert!(err.contains("(k=v\\u{1b}[31mRED)"), "{err}");

    let cmp = thrum(&db, &["compare", &id, &format!("label:k={red}")]);
    assert!(cmp.status.success(), "{}", stderr(&cmp));
    let out = stdout(&cmp);
    assert!(printable(&out), "{out:?}");
    assert!(out.contains("(k=v\\u{1b}[31mRED)"), "{out}");
}
