//! Release tooling for thrum, run as `cargo xtask COMMAND` (the alias is in
//! .cargo/config.toml): a workspace member, so that shipping needs nothing
//! beyond the Rust toolchain and the tar, gzip and dpkg-deb every Debian has.
//!
//! - `dist`: the static musl binary (profile `release-lto`: release with
//!   whole-program LTO, or `$THRUM_DIST_PROFILE` (CI's `ci-dist` skips the
//!   LTO pass); a profile named `dist` would share target/dist; the
//!   target's standard library added by `rustup target add` if missing),
//!   stripped with its debug info kept beside it, and the tarball
//!   `target/dist/thrum-VERSION-TARGET.tar.gz` holding it with the man pages,
//!   completions, systemd units, README, the documents it links to
//!   (`docs/*.md`, BENCHMARKS.md) and the two licence files. Each man page
//!   ends with its EXAMPLES (checked against the CLI), the EXIT STATUS and
//!   SEE ALSO. The bundled SQLite is C: `dist` compiles it with the musl C
//!   compiler of the target (`musl-gcc`, `ARCH-linux-musl-gcc`), else with
//!   Zig's (`pip install ziglang`), through a wrapper it writes.
//! - `deb`: the same files as a Debian package, built with `dpkg-deb` from the
//!   tree `dist` stages (no cargo-deb to compile in CI); the units are installed,
//!   not enabled, and the licence is in `/usr/share/doc/thrum/copyright`,
//!   beside the documents and the changelog (`changelog.gz`: a native
//!   package's name) Debian asks for.
//! - `man DIR`, `completions DIR`: only those files, for a packager.
//! - `schema`: the JSON Schemas in schema/ (`thrum::cmd::schema::SCHEMAS`),
//!   generated from the types of the documents; run it after changing what
//!   a document holds, and commit what it writes.
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
       cargo xtask completions DIR
       cargo xtask schema";

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
        Some("schema") => schemas()?,
        _ => bail!("{USAGE}"),
    }
    Ok(())
}

/// `schema`: schema/*.json from the types they describe
/// (`thrum::export::schema`); a test fails while a committed one differs.
fn schemas() -> Result<()> {
    let dir = root().join("schema");
    for (name, generate) in thrum::cmd::schema::SCHEMAS {
        let path = dir.join(name);
        fs::write(&path, thrum::export::schema::text(&generate()))
            .with_context(|| format!("writing {}", path.display()))?;
        println!("{}", path.display());
    }
    let paths = root().join(thrum::export::schema::PATHS_FILE);
    let committed = fs::read_to_string(&paths).unwrap_or_default();
    fs::write(&paths, thrum::export::schema::promised_paths(&committed))
        .with_context(|| format!("writing {}", paths.display()))?;
    println!("{}", paths.display());
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
    // CI checks what ships (files, static linking, man pages), not what
    // whole-program LTO buys; THRUM_DIST_PROFILE=ci-dist skips the LTO pass
    // there (minutes per target on two CPUs). Releases use the default.
    let profile = std::env::var("THRUM_DIST_PROFILE").unwrap_or_else(|_| "release-lto".into());
    let mut build = Command::new(cargo);
    build
        .current_dir(&root)
        .args(["build", "--locked", "--package", "thrum", "--bin", "thrum"])
        .args(["--profile", &profile, "--target", target]);
    c_compiler(&root, target, &mut build)?;
    run(&mut build)?;
    let built = root
        .join("target")
        .join(target)
        .join(&profile)
        .join("thrum");
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
    for unit in UNITS {
        fs::copy(
            root.join("packaging/systemd").join(unit),
            stage.join("systemd").join(unit),
        )
        .with_context(|| format!("copying packaging/systemd/{unit}"))?;
    }
    for doc in LICENSES.iter().chain(&["README.md"]) {
        fs::copy(root.join(doc), stage.join(doc)).with_context(|| format!("copying {doc}"))?;
    }
    // What the README links to, at the same relative paths, so that its
    // links work in the unpacked tarball: docs/*.md and BENCHMARKS.md.
    for doc in docs(&root)? {
        let to = stage.join(&doc);
        fs::create_dir_all(to.parent().expect("a parent"))?;
        fs::copy(root.join(&doc), &to).with_context(|| format!("copying {}", doc.display()))?;
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

/// A C compiler for `target`, which the bundled SQLite (rusqlite's
/// `bundled`) needs: the one `CC_<target>` names, else the musl one the cc
/// crate looks for (`musl-gcc` from Debian's musl-tools for x86_64,
/// `ARCH-linux-musl-gcc` otherwise), else Zig's clang (`pip install
/// ziglang`), which cross-compiles to every musl target with its own
/// headers: a wrapper under target/xtask/ runs `python3 -m ziglang cc`.
fn c_compiler(root: &Path, target: &str, build: &mut Command) -> Result<()> {
    let var = format!("CC_{}", target.replace('-', "_"));
    if std::env::var_os(&var).is_some() || !target.contains("-linux-musl") {
        return Ok(());
    }
    let arch = target.split('-').next().expect("a triple has an arch");
    let native = if arch == "x86_64" {
        "musl-gcc".to_string()
    } else {
        format!("{arch}-linux-musl-gcc")
    };
    if on_path(&native) {
        return Ok(());
    }
    let zig = Command::new("python3")
        .args(["-m", "ziglang", "version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !zig {
        bail!(
            "--target {target}: the bundled SQLite needs a C compiler for it: install `{native}` \
             (Debian: musl-tools for x86_64), or Zig (`pip install ziglang`), or set {var}"
        );
    }
    let dir = root.join("target/xtask");
    fs::create_dir_all(&dir)?;
    let cc = dir.join(format!("zig-cc-{target}"));
    // cc-rs adds `--target=<Rust triple>`, which Zig does not read: dropped.
    let script = format!(
        "#!/bin/sh\n\
         for a do shift; case \"$a\" in --target=*) ;; *) set -- \"$@\" \"$a\";; esac; done\n\
         exec python3 -m ziglang cc -target {arch}-linux-musl \"$@\"\n"
    );
    let ar = dir.join("zig-ar");
    fs::write(&cc, script)?;
    fs::write(&ar, "#!/bin/sh\nexec python3 -m ziglang ar \"$@\"\n")?;
    for f in [&cc, &ar] {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(f, fs::Permissions::from_mode(0o755))?;
    }
    eprintln!(
        "xtask: no {native}: compiling C for {target} with Zig ({})",
        cc.display()
    );
    build
        .env(&var, &cc)
        .env(format!("AR_{}", target.replace('-', "_")), &ar);
    Ok(())
}

/// Whether `prog` is an executable file in a directory of `$PATH`.
fn on_path(prog: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(prog).is_file()))
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

/// The documents shipped beside the README, relative to the root:
/// `BENCHMARKS.md` and every `docs/*.md`, sorted.
fn docs(root: &Path) -> Result<Vec<PathBuf>> {
    let mut out = vec![PathBuf::from("BENCHMARKS.md")];
    let mut md: Vec<PathBuf> = fs::read_dir(root.join("docs"))
        .context("reading docs/")?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    md.retain(|p| p.extension().is_some_and(|e| e == "md"));
    md.sort();
    out.extend(
        md.into_iter()
            .map(|p| Path::new("docs").join(p.file_name().expect("a file name"))),
    );
    Ok(out)
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

/// `thrum.1` and one page per subcommand (`thrum-run.1`, ...), in section
/// 1, each with its EXAMPLES, the EXIT STATUS and SEE ALSO after clap's
/// sections. clap's own `help` subcommand is left out (`thrum help run` is
/// `thrum run --help`), so that thrum(1) names no thrum-help(1) it lacks.
fn man_pages(dir: &Path) -> Result<()> {
    fs::create_dir_all(dir)?;
    let mut cmd = thrum::cli::Cli::command().disable_help_subcommand(true);
    cmd.build();
    let mut pages = vec![cmd.clone()];
    pages.extend(cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned());
    let names: Vec<String> = pages.iter().map(page_name).collect();
    for page in pages {
        let name = page_name(&page);
        let sub = name.strip_prefix("thrum-").unwrap_or("");
        let man = clap_mangen::Man::new(page);
        let path = dir.join(man.get_filename());
        let mut buf = Vec::new();
        man.render(&mut buf)?;
        buf.extend(examples_section(sub)?.into_bytes());
        buf.extend(EXIT_STATUS.as_bytes());
        let others: Vec<String> = names
            .iter()
            .filter(|n| **n != name)
            .map(|n| format!("\\fB{}\\fR(1)", n.replace('-', "\\-")))
            .collect();
        buf.extend(format!(".SH \"SEE ALSO\"\n{}\n", others.join(", ")).into_bytes());
        fs::write(&path, buf).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// A page's name as clap_mangen names its file: `thrum`, `thrum-run`.
fn page_name(cmd: &clap::Command) -> String {
    cmd.get_display_name()
        .unwrap_or_else(|| cmd.get_name())
        .to_string()
}

/// Each page's examples (`""` is thrum(1)'s): the command and what it does.
/// Every one is parsed by thrum's own CLI when the pages are made, so an
/// example cannot name a flag that is gone.
const EXAMPLES: &[(&str, &[(&str, &str)])] = &[
    (
        "",
        &[
            ("thrum server", "Serve tests on port 12880 (IPv6 and IPv4)."),
            (
                "thrum run tcp_rr -H lg",
                "Measure request/response latency and rate against the server on host lg.",
            ),
            (
                "thrum suite",
                "Run every test for a few seconds on loopback and print one table.",
            ),
        ],
    ),
    (
        "run",
        &[
            (
                "thrum run tcp_stream -H lg -F 4 -l 30s",
                "Bulk throughput to lg on 4 flows for 30 seconds.",
            ),
            (
                "thrum run tcp_rr -H lg -b 3 --json",
                "Request/response with 4 transactions in flight, as one JSON document.",
            ),
            (
                "thrum run udp_rr -H lg --rate 10k",
                "Open loop: 10,000 transactions/s, latency from each one's intended start.",
            ),
            (
                "thrum run udp_stream -H lg --rate 100M",
                "UDP at 100 Mbit/s of payload, with the datagrams lost.",
            ),
            (
                "thrum run rrul -H lg --html rrul.html",
                "Latency under load (a preset mix), with a report to open in a browser.",
            ),
        ],
    ),
    (
        "server",
        &[
            (
                "thrum server",
                "Serve on port 12880, logging each session to stderr.",
            ),
            (
                "thrum server --psk-file /etc/thrum/psk --data-ports 20000-20100",
                "Serve only clients that hold the key, on data ports a firewall can open.",
            ),
            (
                "thrum server --once -p 12881",
                "Serve one test on port 12881, then exit.",
            ),
        ],
    ),
    (
        "suite",
        &[
            (
                "thrum suite",
                "Every test for 3 seconds against an embedded server.",
            ),
            (
                "thrum suite -l 1s --json",
                "One second each, as a JSON array.",
            ),
        ],
    ),
    (
        "agg",
        &[
            (
                "thrum agg --hosts lg1,lg2 --out results",
                "Ramp streams over two load generators and write results.json, CSV and charts to results/.",
            ),
            (
                "thrum agg --hosts lg1 --tests rr,outbound --step 10s",
                "Only the rr and outbound tests, 10 seconds a step.",
            ),
        ],
    ),
    (
        "find-burst",
        &[(
            "thrum find-burst -H lg",
            "Find the burst that maximises one udp_rr flow's transactions/s to lg.",
        )],
    ),
    (
        "sweep",
        &[
            (
                "thrum sweep tcp_rr -H lg --burst 0,1,3 --flows 1,2,4",
                "tcp_rr over every burst × flows combination, as a matrix.",
            ),
            (
                "thrum sweep tcp_rr -H lg --vary cpu-pin=0:0,0:1 --nodelay --iterations 3,10 --cell tps,p50,p99,cpu,sd",
                "A pinning pair per row, each cell to a 99 % confidence interval, with latency, CPU and service demand.",
            ),
        ],
    ),
    (
        "curve",
        &[
            (
                "thrum curve tcp_rr -H lg --slo p99=1ms --out curve",
                "Latency against offered rate, the knee under a 1 ms p99, written to curve/.",
            ),
            (
                "thrum curve udp_rr --rates 1000,5k,20k",
                "Three chosen rates on loopback.",
            ),
        ],
    ),
    (
        "report",
        &[(
            "thrum report results/results.json --out again",
            "Re-analyse an agg run's record and draw its charts again.",
        )],
    ),
    (
        "ping",
        &[
            ("thrum ping -c 5 lg", "Five ICMP echoes per size to lg."),
            (
                "thrum ping --tcp 12880 lg",
                "TCP connect times to lg's port 12880 instead.",
            ),
        ],
    ),
    (
        "monitor",
        &[
            (
                "thrum monitor --config /etc/thrum/monitor.toml --metrics-listen 0.0.0.0:12881",
                "Run the file's probes on their schedule and serve their figures to Prometheus at /metrics.",
            ),
            (
                "thrum monitor --config monitor.toml --dry-run",
                "Check the file and print each probe's command line.",
            ),
        ],
    ),
    (
        "history",
        &[
            (
                "thrum history --test tcp_rr --last 10",
                "The ten newest tcp_rr runs in the results store.",
            ),
            (
                "thrum history --label host=lg1 --chart latency --out lat.svg",
                "Latency of the runs labelled host=lg1 over time: the median and its bands.",
            ),
        ],
    ),
    (
        "show",
        &[(
            "thrum show 3fa2c1d0 --out again",
            "Print stored run 3fa2c1d0 as it printed, and draw its page into again/.",
        )],
    ),
    (
        "compare",
        &[
            (
                "thrum compare label:cfg=old label:cfg=new",
                "Every run labelled cfg=old against every run labelled cfg=new, as sets, figure by figure, with verdicts.",
            ),
            (
                "thrum compare a.json b.json --json --fail-on regression",
                "Two result files; exit 3 when a gated (headline) figure regressed.",
            ),
        ],
    ),
    (
        "mesh",
        &[
            (
                "thrum mesh --hosts a,b,c --psk-file /etc/thrum/psk",
                "tcp_stream over every ordered pair of three agents, one pair at a time, as a matrix (rows send, columns receive).",
            ),
            (
                "thrum mesh tcp_rr --hosts-dns thrum-agents --psk-file /etc/thrum/psk --json --chart mesh.svg",
                "Every pod of a headless Service in pairs, the results as one JSON document and a heat map.",
            ),
        ],
    ),
    (
        "netperf",
        &[
            (
                "thrum netperf -H lg -l 30 -t TCP_RR -- -r 1,1",
                "netperf's command line and output, against a thrum server on netperf's port (thrum server -p 12865).",
            ),
            (
                "thrum netperf -P 0 -v 0 -D -0.20 -4 -H lg -t TCP_STREAM -l 60 -f m -- -k THROUGHPUT",
                "What flent runs: demo mode's interim lines and the KEY=VALUE result (or link thrum as netperf and run flent unchanged).",
            ),
        ],
    ),
    (
        "web",
        &[
            (
                "thrum web",
                "The default results store as pages at http://127.0.0.1:12882/ (loopback, no token).",
            ),
            (
                "thrum web --db /var/lib/thrum/results.db --listen 0.0.0.0:12882 --token-file /etc/thrum/web.token",
                "A monitor's store for the network, every request carrying the token (docs/web.md).",
            ),
        ],
    ),
];

/// A page's EXAMPLES section, each example checked against the CLI.
fn examples_section(sub: &str) -> Result<String> {
    let (_, list) = EXAMPLES
        .iter()
        .find(|(name, _)| *name == sub)
        .with_context(|| format!("no man page examples for `thrum {sub}`: add them to EXAMPLES"))?;
    let mut out = String::from(".SH EXAMPLES\n");
    for (line, what) in *list {
        thrum::cli::Cli::command()
            .try_get_matches_from(line.split_whitespace())
            .with_context(|| format!("the man page example `{line}` does not parse"))?;
        out += &format!(
            ".TP\n\\fB{}\\fR\n{}\n",
            line.replace('-', "\\-"),
            what.replace('-', "\\-")
        );
    }
    Ok(out)
}

/// The exit status, as `main` and the commands map them.
const EXIT_STATUS: &str = r#".SH "EXIT STATUS"
.TP
0
Success; also \fB\-\-help\fR and \fB\-\-version\fR, and \fBmonitor\fR and \fBweb\fR stopped by SIGTERM or SIGINT.
.TP
1
The measurement ran and failed: the test reported an error (\fBrun\fR, \fBping\fR), or a test, step or cell failed (\fBsuite\fR, \fBagg\fR, \fBsweep\fR, \fBcurve\fR, and \fBreport\fR of a failed run). What was measured is still written.
.TP
2
A usage error (an unknown flag or a value out of range, said with what is accepted), or an error that stopped the command before or outside the measurement: a server that cannot be reached or refuses the test, a file that cannot be read or written.
.TP
3
A gated figure regressed under \fB\-\-fail\-on regression\fR (\fBcompare\fR, and \fBrun \-\-baseline\fR).
.TP
130
Interrupted by SIGINT or SIGTERM (\fBrun\fR, \fBagg\fR, \fBsweep\fR, \fBcurve\fR): what was measured until then is written first.
"#;

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

/// The systemd units that ship (packaging/systemd/), installed, not enabled.
const UNITS: [&str; 2] = ["thrum-server.service", "thrum-monitor.service"];

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
    // /etc/thrum/psk and run `systemctl enable --now thrum-server`, nor a
    // monitor before /etc/thrum/monitor.toml and its `enable`.
    for unit in UNITS {
        fs::copy(
            d.stage.join("systemd").join(unit),
            put(&format!("lib/systemd/system/{unit}"))?,
        )?;
    }
    gzip_to(
        &d.stage.join("README.md"),
        &put("usr/share/doc/thrum/README.md.gz")?,
    )?;
    // The documents the README links to, at the same relative paths.
    for doc in docs(&root())? {
        let to = format!("usr/share/doc/thrum/{}.gz", doc.display());
        gzip_to(&d.stage.join(&doc), &put(&to)?)?;
    }
    let version = version();
    // A version without a Debian revision (0.1.0, not 0.1.0-1) makes this
    // a native package, whose changelog Debian names changelog.gz (the
    // .Debian.gz name is a non-native package's; lintian refuses either
    // in the other's place).
    let changelog = put("usr/share/doc/thrum/changelog")?;
    fs::write(&changelog, debian_changelog(&version))?;
    gzip_to(&changelog, &put("usr/share/doc/thrum/changelog.gz")?)?;
    fs::remove_file(&changelog)?;
    fs::write(
        put("usr/share/doc/thrum/copyright")?,
        copyright(&fs::read_to_string(d.stage.join("LICENSE-MIT"))?),
    )?;
    let size_kb = dir_size(&tree)? / 1024 + 1;
    fs::write(
        put("DEBIAN/control")?,
        format!(
            "Package: thrum\n\
             Version: {version}\n\
             Architecture: {arch}\n\
             Maintainer: {MAINTAINER}\n\
             Installed-Size: {size_kb}\n\
             Section: net\n\
             Priority: optional\n\
             Description: network performance measurement\n \
             Bulk throughput, request/response rate and latency, connection rate,\n \
             packet rate and datagram loss, on many flows and threads. One static\n \
             binary: client, server and monitor (with systemd units, not enabled), the\n \
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

/// The package's maintainer, in the control file and the changelog: an
/// address of the project's (lintian refuses a made-up host).
const MAINTAINER: &str = "thrum maintainers <thrum@users.noreply.github.com>";

/// The package's Debian changelog: one entry for this version, dated by
/// the commit it is built from (so that a rebuild is the same package).
fn debian_changelog(version: &str) -> String {
    let date = Command::new("git")
        .args(["log", "-1", "--format=%aD"])
        .current_dir(root())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| "Thu, 01 Jan 2026 00:00:00 +0000".into());
    format!(
        "thrum ({version}) unstable; urgency=medium\n\n  \
         * Release {version}: see README.md and docs/ in /usr/share/doc/thrum.\n\n \
         -- {MAINTAINER}  {date}\n"
    )
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
