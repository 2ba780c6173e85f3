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

/// After a command ends the main file alone holds every run it saved: a
/// copy of results.db made right after three runs (no -wal beside it)
/// holds the three. `history --backup FILE` writes a consistent copy into
/// a new file, and refuses one that exists.
#[test]
fn a_copy_of_the_main_file_holds_every_run() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.db");
    for i in 0..3 {
        save_run(&db, &["--label", &format!("i={i}")]);
    }
    let copy = dir.path().join("copy.db");
    std::fs::copy(&db, &copy).unwrap();
    let wal = dir.path().join("results.db-wal");
    assert!(!wal.exists(), "the last close removed the WAL");
    assert_eq!(rows(&copy).len(), 3);

    let backup = dir.path().join("backup.db");
    let out = thrum(&db, &["history", "--backup", backup.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(rows(&backup).len(), 3);
    let again = thrum(&db, &["history", "--backup", backup.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(2));
    assert!(stderr(&again).contains("exists"), "{}", stderr(&again));
}

/// `sh -c SCRIPT` in a mount namespace of its own where `dir` is a
/// read-only bind mount; None (with the reason) where that cannot be
/// made: not root, or no unshare/mount. chmod would not do: it does not
/// stop root.
fn in_read_only(dir: &Path, script: &str) -> Option<Output> {
    let d = dir.to_str().unwrap();
    let probe = Command::new("unshare")
        .args(["-m", "sh", "-c"])
        .arg(format!(
            "mount --bind -o ro '{d}' '{d}' && ! touch '{d}/probe' 2>/dev/null"
        ))
        .output();
    match probe {
        Ok(o) if o.status.success() => {}
        other => {
            eprintln!("skipped: no read-only bind mount in a mount namespace here ({other:?})");
            return None;
        }
    }
    let full = format!("mount --bind -o ro '{d}' '{d}' && {script}");
    Some(run_cmd(
        Command::new("unshare").args(["-m", "sh", "-c", &full]),
        LIMIT,
    ))
}

/// A store on a read-only mount, as the last save left it (no -wal, no
/// -shm): `history`, `show` and `compare` read it; a run saving to it
/// warns that it is not saved and exits 0.
#[test]
fn a_store_on_a_read_only_mount_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("results.db");
    save_run(&db, &["--label", "cfg=a"]);
    save_run(&db, &["--label", "cfg=b"]);
    let id = rows(&db)[0]["id"].as_str().unwrap().to_string();
    for ext in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(dir.path().join(format!("results.db{ext}")));
    }
    let t = bin();
    let d = db.to_str().unwrap();
    let script = format!(
        "'{t}' history --db '{d}' --json && '{t}' show {id} --db '{d}' --json >/dev/null \
         && '{t}' compare label:cfg=a {id} --db '{d}' >/dev/null && echo read-ok \
         && '{t}' run tcp_rr -l 200ms --warmup 0s --db '{d}' >/dev/null"
    );
    let Some(out) = in_read_only(dir.path(), &script) else {
        return;
    };
    let (text, err) = (stdout(&out), stderr(&out));
    assert!(out.status.success(), "{err}");
    assert!(text.contains("read-ok"), "{text}\n{err}");
    let listed: Vec<Value> = serde_json::from_str(text.split("read-ok").next().unwrap().trim())
        .unwrap_or_else(|e| {
            panic!("history --json: {e}\n{text}");
        });
    assert_eq!(listed.len(), 2);
    assert!(err.contains("the run is not saved"), "{err}");
    assert_eq!(rows(&db).len(), 2);
}

/// `out` ended with `code` and its stderr says every one of `words`.
fn said(out: &Output, code: Option<i32>, words: &[&str]) {
    let err = stderr(out);
    assert_eq!(out.status.code(), code, "{err}");
    assert!(words.iter().all(|w| err.contains(w)), "{words:?}: {err}");
}

/// `--db` through a symbolic link to an empty file is refused naming
/// `--db`, and the file stays empty (it became a database before); the
/// same link as $THRUM_DB costs the run only a warning. An explicit `--db`
/// in a directory that does not exist is refused before the run, and no
/// directory is made; the default store's directory is still created.
#[test]
fn links_and_missing_directories_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("empty");
    std::fs::write(&target, b"").unwrap();
    let link = dir.path().join("link.db");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let run = ["run", "tcp_rr", "-l", "200ms", "--warmup", "0s"];

    said(&thrum(&link, &run), Some(2), &["--db", "symbolic link"]);
    let by_env = run_cmd(Command::new(bin()).args(run).env("THRUM_DB", &link), LIMIT);
    said(&by_env, Some(0), &["symbolic link", "not saved"]);
    said(&thrum(&link, &["history"]), Some(2), &["symbolic link"]);
    assert_eq!(std::fs::metadata(&target).unwrap().len(), 0);

    let deep = dir.path().join("no/such/dir/x.db");
    said(&thrum(&deep, &run), Some(2), &["--db", "does not exist"]);
    assert!(!dir.path().join("no").exists());

    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let out = run_cmd(
        Command::new(bin())
            .args(run)
            .env_remove("THRUM_DB")
            .env_remove("XDG_DATA_HOME")
            .env("HOME", &home),
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
    assert!(home.join(".local/share/thrum/results.db").exists());
}
