//! The results store against what a user, an older thrum or a hand-edited
//! file can put in it: labels and names bounded and printable on the way
//! in, and any stored value listed, shown and compared escaped and cut
//! without a panic. Every test runs the real binary with the embedded
//! server on loopback and a store file of its own (`--db`).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::common::{Ran, Thrum, run_cmd};
use crate::store::{history as rows, thrum_db as thrum};

/// Bounds a wedged command that is not thrum's (unshare, sh).
const LIMIT: Duration = Duration::from_secs(60);

/// A 200 ms tcp_rr against the embedded server, with the short-run
/// defaults.
fn short_rr() -> Thrum {
    Thrum::run("tcp_rr").len("200ms")
}

/// A short tcp_rr, saved in `db` with `extra` flags; it must succeed,
/// without a warning.
fn save_run(db: &Path, extra: &[&str]) {
    let ran = short_rr().args(["--json", "--db"]).arg(db).args(extra).ok();
    assert!(!ran.stderr().contains("warning"), "{}", ran.report());
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

/// The first control character of `s` but the line ends, if any.
fn control(s: &str) -> Option<char> {
    s.chars().find(|&c| c.is_control() && c != '\n')
}

/// `ran` ended with `code` and its stderr says every one of `words`: its
/// stderr.
#[track_caller]
fn said(ran: &Ran, code: Option<i32>, words: &[&str]) -> String {
    assert_eq!(ran.code(), code, "{}", ran.report());
    let err = ran.stderr();
    for w in words {
        assert!(err.contains(w), "stderr lacks {w:?}\n{}", ran.report());
    }
    err
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
        let ran = short_rr().args([flag, value]).arg("--db").arg(&db).output();
        let err = said(&ran, Some(2), &[flag, want]);
        assert!(err.len() < 1000, "{}", ran.report());
        assert_eq!(control(&err), None, "{}", ran.report());
    }
    assert!(!db.exists(), "nothing ran, nothing was saved");

    let longest = format!("k={}", "v".repeat(256));
    save_run(&db, &["--label", &longest, "--name", &"n".repeat(256)]);
    assert_eq!(rows(&db)[0]["labels"]["k"].as_str().unwrap().len(), 256);

    save_run(&db, &[]);
    forge(&db, &"x".repeat(120_000), "second\nid  time  forged");
    let text = thrum(&db, &["history"]).ok().stdout();
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(text.contains("…(+119936 chars)"), "{text}");
    assert!(text.contains("second\\nid  time  forged"), "{text}");
    assert!(text.lines().all(|l| l.chars().count() < 1000));
    assert_eq!(
        rows(&db)[0]["labels"]["k"].as_str().unwrap().len(),
        120_000,
        "--json carries the value whole"
    );
    let csv = thrum(&db, &["history", "--csv"]).ok().stdout();
    assert_eq!(csv.lines().count(), 3, "{csv}");
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

    let text = thrum(&db, &["history"]).ok().stdout();
    assert_eq!(control(&text), None, "{text:?}");
    assert!(text.contains("k=v\\u{1b}[31mRED"), "{text}");
    assert!(text.contains("n\\u{1b}]0;title\\u{7}"), "{text}");

    let show = thrum(&db, &["show", &id]).ok();
    let (out, err) = (show.stdout(), show.stderr());
    assert_eq!(control(&out), None, "{out:?}");
    assert_eq!(control(&err), None, "{}", show.report());
    assert!(err.contains("(k=v\\u{1b}[31mRED)"), "{}", show.report());

    let out = thrum(&db, &["compare", &id, &format!("label:k={red}")])
        .ok()
        .stdout();
    assert_eq!(control(&out), None, "{out:?}");
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
    let backup_to = ["history", "--backup", backup.to_str().unwrap()];
    thrum(&db, &backup_to).ok();
    assert_eq!(rows(&backup).len(), 3);
    said(&thrum(&db, &backup_to), Some(2), &["exists"]);
}

/// What runs thrum in a mount namespace of its own where `dir` is a
/// read-only bind mount (for [`Thrum::under`]); None (with the reason)
/// where that cannot be made: not root, or no unshare/mount. chmod would
/// not do: it does not stop root.
fn read_only(dir: &Path) -> Option<Vec<String>> {
    let d = dir.to_str().unwrap();
    let mount = format!("mount --bind -o ro '{d}' '{d}'");
    let probe = Command::new("unshare")
        .args(["-m", "sh", "-c"])
        .arg(format!("{mount} && ! touch '{d}/probe' 2>/dev/null"))
        .output();
    match probe {
        Ok(o) if o.status.success() => {}
        other => {
            eprintln!("skipped: no read-only bind mount in a mount namespace here ({other:?})");
            return None;
        }
    }
    // sh execs thrum, its $0, with the arguments that follow.
    let then_thrum = format!("{mount} && exec \"$0\" \"$@\"");
    Some(
        ["unshare", "-m", "sh", "-c", &then_thrum]
            .map(String::from)
            .to_vec(),
    )
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
    let Some(ro) = read_only(dir.path()) else {
        return;
    };
    let under: Vec<&str> = ro.iter().map(String::as_str).collect();
    let on_ro = |cmd: Thrum| cmd.arg("--db").arg(&db).under(&under).timeout(LIMIT);
    let listed = on_ro(Thrum::cmd(&["history"])).json();
    assert_eq!(listed.as_array().map(Vec::len), Some(2), "{listed}");
    on_ro(Thrum::cmd(&["show", &id, "--json"])).ok();
    on_ro(Thrum::cmd(&["compare", "label:cfg=a", &id])).ok();
    let saving = on_ro(short_rr()).ok();
    assert!(
        saving.stderr().contains("the run is not saved"),
        "{}",
        saving.report()
    );
    assert_eq!(rows(&db).len(), 2);
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
    let on = |db: &Path| short_rr().arg("--db").arg(db).output();

    said(&on(&link), Some(2), &["--db", "symbolic link"]);
    let by_env = short_rr().env("THRUM_DB", &link).output();
    said(&by_env, Some(0), &["symbolic link", "not saved"]);
    said(&thrum(&link, &["history"]), Some(2), &["symbolic link"]);
    assert_eq!(std::fs::metadata(&target).unwrap().len(), 0);

    let deep = dir.path().join("no/such/dir/x.db");
    said(&on(&deep), Some(2), &["--db", "does not exist"]);
    assert!(!dir.path().join("no").exists());

    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    // Not the harness's store ($THRUM_DB): the default one.
    let out = run_cmd(
        short_rr()
            .command()
            .env_remove("THRUM_DB")
            .env_remove("XDG_DATA_HOME")
            .env("HOME", &home),
        LIMIT,
    )
    .ok();
    assert!(!out.stderr().contains("warning"), "{}", out.report());
    assert!(home.join(".local/share/thrum/results.db").exists());
}
