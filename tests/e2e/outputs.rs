//! Where results go: `-o FILE` never follows a planted link, `-`,
//! `/dev/stdout` and FIFOs receive the result directly.

use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, symlink};
use std::path::Path;

use crate::common::{Ran, Thrum};

/// A short tcp_rr run against the embedded server, its JSON result to `out`.
fn run_to(out: &str) -> Ran {
    short().args(["-o", out]).output()
}

/// The same run, for other output flags.
fn short() -> Thrum {
    Thrum::run("tcp_rr").len("0.3s").arg("--json")
}

/// Run with `-o out --samples samples`; the run must succeed.
fn run_ok_to(out: &Path, samples: &Path) {
    short()
        .arg("-o")
        .arg(out)
        .arg("--samples")
        .arg(samples)
        .ok();
}

fn assert_result_json(bytes: &[u8], what: &str) {
    let v: serde_json::Value = serde_json::from_slice(bytes)
        .unwrap_or_else(|e| panic!("{what} is not one JSON result ({e}): {bytes:?}"));
    assert!(
        v["summary"]["transactions_per_s"].as_f64().unwrap_or(0.0) > 0.0,
        "{what} carries no measured rate: {v}"
    );
}

/// The old scheme wrote `.NAME.tmpPID` beside the target with a plain
/// create, so a link planted there for the writer's PID was followed. Plant
/// one for every PID the run can get (the next few hundred, as the kernel
/// hands them out in order) and check that none is touched.
#[test]
fn output_file_never_follows_a_planted_temp_link() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    let last: u32 = std::fs::read_to_string("/proc/sys/kernel/ns_last_pid")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1);
    let planted = (last + 1..last + 400)
        .map(|pid| {
            ["out.json", "samples.csv"].map(|name| {
                let link = dir.path().join(format!(".{name}.tmp{pid}"));
                symlink(&victim, &link).unwrap();
                link
            })
        })
        .collect::<Vec<_>>()
        .concat();
    let out = dir.path().join("out.json");
    let samples = dir.path().join("samples.csv");
    run_ok_to(&out, &samples);
    assert_eq!(
        std::fs::read(&victim).unwrap(),
        b"precious",
        "a planted link was followed"
    );
    for link in &planted {
        let meta = std::fs::symlink_metadata(link).expect("a planted link was removed");
        assert!(
            meta.file_type().is_symlink(),
            "{} was replaced",
            link.display()
        );
    }
    assert!(
        !std::fs::symlink_metadata(&out)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_result_json(&std::fs::read(&out).unwrap(), "out.json");
    // Nothing else left behind: the planted links, the victim, the result
    // and the samples.
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        planted.len() + 3
    );
}

/// A link at the target itself is replaced by the result, not written
/// through: the file it pointed to keeps its content. `--samples`, which is
/// written row by row while the test runs, does not open it either.
#[test]
fn output_and_samples_replace_a_link_at_the_target() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    let out = dir.path().join("out.json");
    let samples = dir.path().join("samples.csv");
    symlink(&victim, &out).unwrap();
    symlink(&victim, &samples).unwrap();
    run_ok_to(&out, &samples);
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    assert_result_json(&std::fs::read(&out).unwrap(), "out.json");
    let csv = std::fs::read_to_string(&samples).unwrap();
    assert!(csv.lines().count() >= 2, "samples.csv has no rows: {csv:?}");
}

#[test]
fn output_dash_and_dev_stdout_print_the_result() {
    for target in ["-", "/dev/stdout"] {
        let o = run_to(target);
        assert!(
            !o.stdout.contains(&0),
            "-o {target}: stdout holds NUL bytes"
        );
        let o = o.ok();
        assert_result_json(&o.stdout, &format!("stdout of -o {target}"));
    }
    assert!(!Path::new("-").exists(), "-o - wrote a file named -");
    let devnull = std::fs::metadata("/dev/stdout");
    assert!(devnull.is_ok(), "/dev/stdout is gone");
}

#[test]
fn output_fifo_receives_the_result() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("result.fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    // Held open for reading, so the FIFO stays reachable through
    // /proc/self/fd even if thrum replaces its name.
    let keep = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo)
        .unwrap();
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).expect("read the FIFO"))
    };
    let o = run_to(fifo.to_str().unwrap());
    // If thrum never wrote to the FIFO, the reader still waits in open():
    // open the FIFO itself for writing once and close it, so the reader sees
    // an empty stream and the test fails instead of hanging.
    let _ = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(format!("/proc/self/fd/{}", keep.as_raw_fd()));
    o.ok();
    assert_result_json(&reader.join().unwrap(), "what the FIFO received");
    assert!(
        std::fs::metadata(&fifo).unwrap().file_type().is_fifo(),
        "the FIFO was replaced"
    );
}
