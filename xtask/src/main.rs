//! Release tooling for thrum, run as `cargo xtask COMMAND` (the alias is in
//! .cargo/config.toml): a workspace member, so that shipping needs nothing
//! beyond the Rust toolchain and the tar, gzip and dpkg-deb every Debian has.
//!
//! - `dist`: the static musl binary (profile `release-lto`: release with
//!   whole-program LTO; a profile named `dist` would share target/dist; the
//!   target's standard library added by `rustup target add` if missing),
//!   stripped with its debug info kept beside it, and the tarball
//!   `target/dist/thrum-VERSION-TARGET.tar.gz` holding it with the man pages,
//!   completions, systemd unit, README and the two licence files.
//! - `deb`: the same files as a Debian package, built with `dpkg-deb` from the
//!   tree `dist` stages (no cargo-deb to compile in CI); the unit is installed,
//!   not enabled, and the licence is in `/usr/share/doc/thrum/copyright`.
//! - `man DIR`, `completions DIR`: only those files, for a packager.
//!
//! Man pages and completions come from the CLI's own clap definition
//! (`thrum::cli::Cli`), so they cannot drift from `--help`; generating them
//! here keeps clap_mangen and clap_complete out of the shipped binary.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use clap::CommandFactory;
use clap_complete::Shell;

/// The target `dist` builds when `--target` is not given: static, any Linux.
const DEFAULT_TARGET: &str = "x86_64-unknown-linux-musl";
const USAGE: &str = "usage: cargo xtask dist [--target TRIPLE]
       cargo xtask deb [--target TRIPLE]
       cargo xtask man DIR
       cargo xtask completions DIR";

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let target = match args.iter().position(|a| a == "--target") {
        Some(i) => args
            .get(i + 1)
            .cloned()
            .context("--target needs a value, e.g. x86_64-unknown-linux-musl")?,
        None => DEFAULT_TARGET.to_string(),
    };
    match args.first().map(String::as_str) {
        Some("dist") => {
            let d = dist(&target)?;
            println!("{}", d.tarball.display());
            println!("{}", d.debug.display());
        }
        Some("deb") => {
            let d = dist(&target)?;
            println!("{}", deb(&d)?.display());
        }
        Some("man") => man_pages(Path::new(args.get(1).context(USAGE)?))?,
        Some("completions") => completions(Path::new(args.get(1).context(USAGE)?))?,
        _ => bail!("{USAGE}"),
    }
    Ok(())
}

/// The workspace root (xtask lives one level below it).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask sits inside the workspace")
        .to_path_buf()
}

/// Run a command, failing with its command line when it fails. Its
/// output goes to stderr: stdout carries only the paths this tool prints.
fn run(cmd: &mut Command) -> Result<()> {
    let shown = format!("{cmd:?}");
    let st = cmd
        .stdout(std::io::stderr())
        .status()
        .with_context(|| format!("cannot start {shown}"))?;
    if !st.success() {
        bail!("{shown} failed ({st})");
    }
    Ok(())
}

/// What `dist` produced.
struct Dist {
    target: String,
    /// The staged tree the tarball was made of (binary at `thrum`).
    stage: PathBuf,
    tarball: PathBuf,
    debug: PathBuf,
}

fn dist(target: &str) -> Result<Dist> {
    let root = root();
    ensure_target(target)?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    run(Command::new(cargo)
        .current_dir(&root)
        .args(["build", "--locked", "--package", "thrum", "--bin", "thrum"])
        .args(["--profile", "release-lto", "--target", target]))?;
    let built = root.join("target").join(target).join("release-lto/thrum");
    let out = root.join("target/dist");
    let name = format!("thrum-{}-{target}", version());
    let stage = out.join(&name);
    if stage.exists() {
        fs::remove_dir_all(&stage).with_context(|| format!("clearing {}", stage.display()))?;
    }
    fs::create_dir_all(&stage)?;

    // The debug info goes beside the tarball; the shipped binary points at it
    // by name (.gnu_debuglink), so gdb and perf find it when it is placed
    // next to the binary or under /usr/lib/debug.
    let debug = out.join(format!("{name}.debug"));
    let objcopy = objcopy()?;
    run(Command::new(&objcopy)
        .arg("--only-keep-debug")
        .arg(&built)
        .arg(&debug))?;
    run(Command::new(&objcopy)
        .arg("--strip-all")
        .arg(format!("--add-gnu-debuglink={}", debug.display()))
        .arg(&built)
        .arg(stage.join("thrum")))?;

    man_pages(&stage.join("man"))?;
    completions(&stage.join("completions"))?;
    fs::create_dir_all(stage.join("systemd"))?;
    fs::copy(
        root.join("packaging/systemd/thrum-server.service"),
        stage.join("systemd/thrum-server.service"),
    )
    .context("copying packaging/systemd/thrum-server.service")?;
    for doc in LICENSES.iter().chain(&["README.md"]) {
        fs::copy(root.join(doc), stage.join(doc)).with_context(|| format!("copying {doc}"))?;
    }

    let tarball = out.join(format!("{name}.tar.gz"));
    run(Command::new("tar")
        .current_dir(&out)
        .args(["--owner=0", "--group=0", "--numeric-owner", "--sort=name"])
        .arg("-czf")
        .arg(&tarball)
        .arg(&name))?;
    Ok(Dist {
        target: target.to_string(),
        stage,
        tarball,
        debug,
    })
}

/// The target's standard library, which a fresh toolchain lacks (cargo
/// would fail on "can't find crate for `core`"): added with rustup when
/// rustup is there; otherwise, or when that fails, one line saying what to
/// run.
fn ensure_target(target: &str) -> Result<()> {
    let out = Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .context("cannot run rustc")?;
    let sysroot = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    if sysroot
        .join("lib/rustlib")
        .join(target)
        .join("lib")
        .is_dir()
    {
        return Ok(());
    }
    let fix = format!("rustup target add {target}");
    eprintln!("xtask: the standard library for {target} is missing: running `{fix}`");
    match Command::new("rustup")
        .args(["target", "add", target])
        .stdout(std::io::stderr())
        .status()
    {
        Ok(st) if st.success() => Ok(()),
        Ok(st) => bail!("`{fix}` failed ({st}): run it yourself, then cargo xtask dist again"),
        Err(_) => bail!(
            "the standard library for {target} is missing and rustup is not installed: \
             run `{fix}` with rustup, or install your toolchain's {target} standard library"
        ),
    }
}

/// The toolchain's own objcopy (LLVM's, which reads every target's ELF;
/// the system's binutils often knows only the host's), else the system's.
fn objcopy() -> Result<PathBuf> {
    let out = Command::new("rustc")
        .args(["--print", "target-libdir"])
        .output()
        .context("cannot run rustc")?;
    let libdir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let ours = libdir.parent().map(|d| d.join("bin/rust-objcopy"));
    Ok(ours
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("objcopy")))
}

/// The licence files in the root, one per licence of Cargo.toml's
/// `MIT OR Apache-2.0`: every tarball and package ships both.
const LICENSES: [&str; 2] = ["LICENSE-MIT", "LICENSE-APACHE"];

/// thrum's version (not this crate's), as its CLI states it.
fn version() -> String {
    thrum::cli::Cli::command()
        .get_version()
        .expect("thrum's CLI has a version")
        .to_string()
}

/// The CLI as shipped: the root command with every subcommand built, so
/// that each carries its display name (`thrum-run`) for its own page.
fn cli() -> clap::Command {
    let mut cmd = thrum::cli::Cli::command();
    cmd.build();
    cmd
}

/// `thrum.1` and one page per subcommand (`thrum-run.1`, ...), in section 1.
fn man_pages(dir: &Path) -> Result<()> {
    fs::create_dir_all(dir)?;
    let cmd = cli();
    let mut pages = vec![cmd.clone()];
    // clap's own `help` subcommand gets no page: thrum(1) covers it.
    pages.extend(
        cmd.get_subcommands()
            .filter(|s| !s.is_hide_set() && s.get_name() != "help")
            .cloned(),
    );
    for page in pages {
        let man = clap_mangen::Man::new(page);
        let path = dir.join(man.get_filename());
        let mut buf = Vec::new();
        man.render(&mut buf)?;
        fs::write(&path, buf).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// bash (`thrum.bash`), zsh (`_thrum`) and fish (`thrum.fish`) completions.
fn completions(dir: &Path) -> Result<()> {
    fs::create_dir_all(dir)?;
    for (shell, file) in [
        (Shell::Bash, "thrum.bash"),
        (Shell::Zsh, "_thrum"),
        (Shell::Fish, "thrum.fish"),
    ] {
        let mut cmd = cli();
        let mut buf = Vec::new();
        clap_complete::generate(shell, &mut cmd, "thrum", &mut buf);
        if shell == Shell::Fish {
            buf.extend(fish_positional_values(&cmd).into_bytes());
        }
        fs::write(dir.join(file), buf)?;
    }
    Ok(())
}

/// clap_complete's fish script offers the values of flags but not of
/// positional arguments (bash's and zsh's do): add a line per subcommand
/// whose positional has possible values, so `thrum run <TAB>` lists the
/// tests in fish too.
fn fish_positional_values(cmd: &clap::Command) -> String {
    let mut out = String::new();
    for sub in cmd.get_subcommands() {
        for arg in sub.get_positionals() {
            let values: Vec<String> = arg
                .get_possible_values()
                .iter()
                .filter(|v| !v.is_hide_set())
                .map(|v| v.get_name().to_string())
                .collect();
            if !values.is_empty() {
                out += &format!(
                    "complete -c thrum -n \"__fish_thrum_using_subcommand {}\" -f -a \"{}\"\n",
                    sub.get_name(),
                    values.join(" ")
                );
            }
        }
    }
    out
}

/// Debian's name for the target's architecture.
fn deb_arch(target: &str) -> Result<&'static str> {
    match target.split('-').next() {
        Some("x86_64") => Ok("amd64"),
        Some("aarch64") => Ok("arm64"),
        _ => {
            bail!("--target {target}: no Debian architecture known (accepted: x86_64-*, aarch64-*)")
        }
    }
}

/// Copy `from` to `to` compressed with gzip -9n (Debian's man and doc form).
fn gzip_to(from: &Path, to: &Path) -> Result<()> {
    let out = Command::new("gzip")
        .args(["-9n", "-c"])
        .arg(from)
        .output()
        .context("cannot run gzip")?;
    if !out.status.success() {
        bail!("gzip {} failed", from.display());
    }
    fs::write(to, out.stdout)?;
    Ok(())
}

/// `target/dist/thrum_VERSION_ARCH.deb` from the staged tree.
fn deb(d: &Dist) -> Result<PathBuf> {
    let arch = deb_arch(&d.target)?;
    let out = d.stage.parent().expect("stage is under target/dist");
    let tree = out.join(format!("deb-{arch}"));
    if tree.exists() {
        fs::remove_dir_all(&tree)?;
    }
    let put = |rel: &str| -> Result<PathBuf> {
        let p = tree.join(rel);
        fs::create_dir_all(p.parent().expect("a parent"))?;
        Ok(p)
    };
    fs::copy(d.stage.join("thrum"), put("usr/bin/thrum")?)?;
    for page in fs::read_dir(d.stage.join("man"))? {
        let page = page?.path();
        let name = page.file_name().expect("a file name").to_string_lossy();
        gzip_to(&page, &put(&format!("usr/share/man/man1/{name}.gz"))?)?;
    }
    let comp = d.stage.join("completions");
    fs::copy(
        comp.join("thrum.bash"),
        put("usr/share/bash-completion/completions/thrum")?,
    )?;
    fs::copy(
        comp.join("_thrum"),
        put("usr/share/zsh/vendor-completions/_thrum")?,
    )?;
    fs::copy(
        comp.join("thrum.fish"),
        put("usr/share/fish/vendor_completions.d/thrum.fish")?,
    )?;
    // Installed, not enabled: there is no maintainer script, so nothing
    // starts a server (and opens a port) until the operator has written
    // /etc/thrum/psk and run `systemctl enable --now thrum-server`.
    fs::copy(
        d.stage.join("systemd/thrum-server.service"),
        put("lib/systemd/system/thrum-server.service")?,
    )?;
    gzip_to(
        &d.stage.join("README.md"),
        &put("usr/share/doc/thrum/README.md.gz")?,
    )?;
    fs::write(
        put("usr/share/doc/thrum/copyright")?,
        copyright(&fs::read_to_string(d.stage.join("LICENSE-MIT"))?),
    )?;
    let size_kb = dir_size(&tree)? / 1024 + 1;
    let version = version();
    fs::write(
        put("DEBIAN/control")?,
        format!(
            "Package: thrum\n\
             Version: {version}\n\
             Architecture: {arch}\n\
             Maintainer: thrum developers <thrum@localhost>\n\
             Installed-Size: {size_kb}\n\
             Section: net\n\
             Priority: optional\n\
             Description: network performance measurement\n \
             Bulk throughput, request/response rate and latency, connection rate,\n \
             packet rate and datagram loss, on many flows and threads. One static\n \
             binary: client, server (with a systemd unit, not enabled) and the\n \
             netperf-style aggregate runs.\n"
        ),
    )?;
    let deb = out.join(format!("thrum_{version}_{arch}.deb"));
    run(Command::new("dpkg-deb")
        .args(["--build", "--root-owner-group", "-Zgzip"])
        .arg(&tree)
        .arg(&deb))?;
    Ok(deb)
}

/// Debian's machine-readable copyright file: the MIT text in full, and
/// Apache-2.0 by the copy every Debian system has (Debian Policy 12.5).
fn copyright(mit: &str) -> String {
    // A paragraph's continuation lines start with a space; an empty one is " .".
    let mit: String = mit
        .lines()
        .map(|l| {
            if l.trim().is_empty() {
                " .\n".to_string()
            } else {
                format!(" {l}\n")
            }
        })
        .collect();
    format!(
        "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\
         Upstream-Name: thrum\n\
         \n\
         Files: *\n\
         Copyright: 2026 the thrum developers\n\
         License: MIT or Apache-2.0\n\
         \n\
         License: MIT\n\
         {mit}\
         \n\
         License: Apache-2.0\n \
         On Debian systems, the full text of the Apache License, Version 2.0\n \
         is in /usr/share/common-licenses/Apache-2.0.\n"
    )
}

fn dir_size(p: &Path) -> Result<u64> {
    let mut n = 0;
    for e in fs::read_dir(p)? {
        let e = e?;
        let m = e.metadata()?;
        n += if m.is_dir() {
            dir_size(&e.path())?
        } else {
            m.len()
        };
    }
    Ok(n)
}
