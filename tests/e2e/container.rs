//! The container image, built and run: podman builds the repository's
//! `Dockerfile` around the static binary of the `cargo xtask dist` tarball
//! (`THRUM_DIST`, as in tests/e2e/ship.rs), runs `thrum server` in it as
//! the image's user (uid 65534) with a key mounted as docs/install.md says,
//! and this build's client on the host runs tcp_rr and udp_rr against it
//! over loopback. The container is removed afterwards, and podman's storage
//! is a temporary folder of the test's own.
//!
//! Podman runs as root, its storage and state in the test's folder, with
//! the settings a bare machine allows: `vfs` storage (no overlay mount
//! needed; the image is 4 MB), cgroupfs, runc (crun refuses hybrid cgroup
//! hierarchies), no event log, and explicit limits on open
//! files and processes (podman's defaults are above what a root without
//! CAP_SYS_RESOURCE may set). The image is `FROM scratch`: nothing is
//! pulled. Without the tarball, podman, runc or root the test prints why
//! and returns, unless `THRUM_E2E_CONTAINER=required` (as .ci/run sets as
//! root), which turns the skip into a failure.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::{Thrum, run_cmd};

/// Skip with a printed reason, or fail where CI requires the test.
fn skip(why: &str) {
    if std::env::var("THRUM_E2E_CONTAINER").as_deref() == Ok("required") {
        panic!("{why}");
    }
    eprintln!("SKIPPED: {why}");
}

fn has(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Podman with its storage under `dir` and the settings above.
struct Podman<'a> {
    dir: &'a Path,
}

impl Podman<'_> {
    fn cmd(&self) -> Command {
        let mut c = Command::new("podman");
        c.arg("--root")
            .arg(self.dir.join("root"))
            .arg("--runroot")
            .arg(self.dir.join("run"))
            .arg("--tmpdir")
            .arg(self.dir.join("tmp"))
            .args([
                "--events-backend",
                "none",
                "--storage-driver",
                "vfs",
                "--cgroup-manager",
                "cgroupfs",
                "--runtime",
                "runc",
            ]);
        c
    }

    /// Run podman with `args`; it must succeed. Returns stdout and stderr.
    fn ok(&self, args: &[&str], limit: Duration) -> (String, String) {
        let mut c = self.cmd();
        c.args(args);
        let out = run_cmd(&mut c, limit).ok();
        (out.stdout(), out.stderr())
    }

    /// The container's log (the server writes it on stderr).
    fn logs(&self, name: &str) -> String {
        let (o, e) = self.ok(&["logs", name], Duration::from_secs(20));
        o + &e
    }
}

/// Removes the container, whatever the test did.
struct Removed<'a>(&'a Podman<'a>, String);

impl Drop for Removed<'_> {
    fn drop(&mut self) {
        let _ = run_cmd(
            self.0.cmd().args(["rm", "--force", "--time", "0", &self.1]),
            Duration::from_secs(30),
        );
    }
}

#[test]
fn image_builds_and_serves_tcp_rr_and_udp_rr_to_the_host() {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        skip("not root: rootless podman needs subordinate ids this test does not set up");
        return;
    }
    for (tool, from) in [
        ("podman", "apt-get install podman"),
        ("runc", "apt-get install runc"),
    ] {
        if !has(tool) {
            skip(&format!("{tool} not found ({from})"));
            return;
        }
    }
    let Ok(tarball) = std::env::var("THRUM_DIST") else {
        skip(
            "THRUM_DIST is not set: run `cargo xtask dist` (see .ci/run) and set it to the tarball's path",
        );
        return;
    };
    let began = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    // The build context as the repository's would be after `cargo xtask
    // dist` (the recipe, its .dockerignore, the tree in target/dist/),
    // without the gigabytes of target/ for podman to walk past.
    let context = tmp.path().join("context");
    let dist = context.join("target/dist");
    std::fs::create_dir_all(&dist).unwrap();
    let root = env!("CARGO_MANIFEST_DIR");
    for f in ["Dockerfile", ".dockerignore"] {
        std::fs::copy(format!("{root}/{f}"), context.join(f)).unwrap();
    }
    run_cmd(
        Command::new("tar")
            .arg("-xzf")
            .arg(&tarball)
            .arg("-C")
            .arg(&dist),
        Duration::from_secs(30),
    )
    .ok();
    let tree = Path::new(&tarball)
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix(".tar.gz"))
        .expect("a .tar.gz")
        .to_string();

    // The key, and the copy the container's user may read (docs/install.md:
    // `install -m 0400 -o 65534`); the key itself stays root's, 0600.
    let psk = tmp.path().join("psk");
    std::fs::write(
        &psk,
        "c29tZSBrZXkgb2YgdGhpcnR5LXR3byBieXRlcyBmb3IgdGVzdHM=\n",
    )
    .unwrap();
    std::fs::set_permissions(&psk, std::fs::Permissions::from_mode(0o600)).unwrap();
    let theirs = tmp.path().join("psk.65534");
    std::fs::copy(&psk, &theirs).unwrap();
    std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o400)).unwrap();
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();

    let podman = Podman { dir: tmp.path() };
    let image = "localhost/thrum-e2e:test";
    podman.ok(
        &[
            "build",
            "--quiet",
            "--tag",
            image,
            "--build-arg",
            &format!("THRUM_DIST=target/dist/{tree}"),
            context.to_str().unwrap(),
        ],
        Duration::from_secs(60),
    );

    let name = format!("thrum-e2e-{}", std::process::id());
    let _removed = Removed(&podman, name.clone());
    let mount = format!("{}:/etc/thrum/psk:ro", theirs.display());
    podman.ok(
        &[
            "run",
            "--detach",
            "--name",
            &name,
            "--network",
            "host",
            "--ulimit",
            "nofile=4096:4096",
            "--ulimit",
            "nproc=4096:4096",
            "--volume",
            &mount,
            image,
            "server",
            "--psk-file",
            "/etc/thrum/psk",
            "--listen",
            "127.0.0.1",
            "--port",
            "0",
        ],
        Duration::from_secs(30),
    );
    // The ready line names the port the kernel chose.
    let ready = "thrum server listening on 127.0.0.1:";
    let deadline = Instant::now() + Duration::from_secs(20);
    let port: u16 = loop {
        let log = podman.logs(&name);
        if let Some(p) = log.lines().find_map(|l| l.strip_prefix(ready)) {
            break p.split_whitespace().next().unwrap().parse().unwrap();
        }
        assert!(Instant::now() < deadline, "no ready line:\n{log}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let server = format!("127.0.0.1:{port}");

    for test in ["tcp_rr", "udp_rr"] {
        let doc = Thrum::run(test)
            .host(&server)
            .arg("--psk-file")
            .arg(&psk)
            .len("1s")
            .json();
        let tps = doc["summary"]["transactions_per_s"].as_f64().unwrap_or(0.0);
        assert!(tps > 100.0, "{test}: {tps} transactions/s:\n{doc}");
    }
    // A TCP probe (connect, close: Kubernetes' tcpSocket) leaves no line.
    drop(std::net::TcpStream::connect(&server).unwrap());
    std::thread::sleep(Duration::from_millis(300));
    let log = podman.logs(&name);
    for test in ["tcp_rr", "udp_rr"] {
        assert!(
            log.lines()
                .any(|l| l.contains(&format!(" {test}: ok after "))),
            "the container's server ran no {test}:\n{log}"
        );
    }
    assert!(!log.contains("refused"), "{log}");
    assert!(
        began.elapsed() < Duration::from_secs(120),
        "over the CI budget: {:?}",
        began.elapsed()
    );
}

/// The Dockerfile's header and docs/install.md give the same recipe: a copy
/// of the key that uid 65534 may read, mounted where `--psk-file` names it
/// (the root-only key itself is "Permission denied" to the image's user).
#[test]
fn dockerfile_and_install_md_mount_the_same_readable_key() {
    let root = env!("CARGO_MANIFEST_DIR");
    let recipe = std::fs::read_to_string(format!("{root}/Dockerfile")).unwrap();
    let install = std::fs::read_to_string(format!("{root}/docs/install.md")).unwrap();
    for line in [
        "sudo install -m 0400 -o 65534 /etc/thrum/psk /etc/thrum/psk.65534",
        "-v /etc/thrum/psk.65534:/etc/thrum/psk:ro",
        "server --psk-file /etc/thrum/psk --data-ports 20000-20999",
    ] {
        assert!(recipe.contains(line), "the Dockerfile lacks {line:?}");
        assert!(install.contains(line), "docs/install.md lacks {line:?}");
    }
    assert!(
        !recipe.contains("-v /etc/thrum/psk:/etc/thrum/psk"),
        "the Dockerfile mounts the root-only key"
    );
}
