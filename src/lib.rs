//! thrum: network performance measurement.
//!
//! The library holds everything; `main.rs` only parses arguments and maps
//! errors to an exit code. Layers, top to bottom (every import points down):
//! `export` → `control` (protocol, client and server sessions) and `result` →
//! `engine` (worker threads) and `cli` → `workload` (flow state machines) and
//! `plan` → `io` (drivers, sockets), `stats` (counters, histograms), `units`.

pub mod agg;
pub mod agg_commands;
pub mod cli;
pub mod control;
pub mod engine;
pub mod export;
pub mod io;
pub mod plan;
pub mod result;
pub mod sensors;
pub mod stats;
pub mod text;
pub mod units;
pub mod workload;

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::atomic::Ordering::Relaxed;

use anyhow::{Context, Result};

use cli::{Cli, Command, Format, OutputArgs, RunArgs, ServerArgs, SuiteArgs};
use control::client::{Observer, Quiet, Target};
use control::server::{EmbeddedServer, Server, ServerConfig};
use export::Exporter;
use plan::{TestKind, TestPlan};
use result::{Interval, TestResult};
use units::BitsPerSec;

/// Run a parsed command line; the exit code says whether the test succeeded.
pub fn run(cli: Cli) -> Result<ExitCode> {
    // Every flow is a socket: start with all the descriptors allowed.
    io::fdlimit::raise_to_hard();
    match cli.command {
        Command::Run(args) => run_test(&args),
        Command::Server(args) => serve(&args),
        Command::Suite(args) => suite(&args),
        Command::Agg(args) => agg_commands::agg(&args),
        Command::FindBurst(args) => agg_commands::find_burst(&args),
        Command::Sweep(args) => agg_commands::sweep(&args),
        Command::Report(args) => agg_commands::report(&args),
    }
}

/// A one-line progress report on stderr, only when stderr is a terminal.
struct Progress {
    on: bool,
    test: TestKind,
}

impl Observer for Progress {
    fn on_interval(&mut self, iv: &Interval) {
        if !self.on {
            return;
        }
        let v = match iv.sum.throughput_bps {
            Some(t) => BitsPerSec(t).to_string(),
            None => format!("{:.0} trans/s", iv.sum.transactions_per_s.unwrap_or(0.0)),
        };
        let mut e = std::io::stderr().lock();
        let _ = write!(
            e,
            "\r\x1b[2K{} {:>7.1}s {:<8} {}",
            self.test,
            iv.end_s,
            iv.phase.name(),
            v
        );
        let _ = e.flush();
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if self.on {
            let _ = write!(std::io::stderr(), "\r\x1b[2K");
        }
    }
}

/// Start an embedded server unless a target was given.
fn target_or_embedded(
    target: Option<Target>,
    bind: Option<std::net::IpAddr>,
) -> Result<(Target, Option<EmbeddedServer>)> {
    if let Some(t) = target {
        return Ok((t, None));
    }
    let server = EmbeddedServer::start().context("starting the embedded server")?;
    let t = Target {
        addr: server.addr,
        label: server.addr.to_string(),
        bind,
        embedded: true,
        psk: None,
    };
    Ok((t, Some(server)))
}

fn exporter(f: Format, human: &export::human::Human) -> Box<dyn Exporter> {
    match f {
        Format::Human => Box::new(human.clone()),
        Format::Json => Box::new(export::json::Json),
        Format::Keyval => Box::new(export::keyval::Keyval),
    }
}

/// Write every requested output; called on success and on failure alike.
fn write_outputs(
    result: &TestResult,
    out: &OutputArgs,
    human: &export::human::Human,
) -> Result<()> {
    // A stream (stdout, a FIFO) got its rows live; only a file is replaced
    // by the whole CSV at the end.
    if let Some(path) = out
        .samples
        .as_ref()
        .filter(|p| export::Target::of(p) == export::Target::File)
    {
        export::write_atomic(path, &export::render(&export::csv::Csv, result))
            .with_context(|| format!("writing --samples {}", path.display()))?;
    }
    let bytes = if out.json_stream {
        export::live::StreamLine::Result { result }.to_line()
    } else {
        export::render(exporter(out.format(), human).as_ref(), result)
    };
    match &out.output {
        Some(path) => export::write_atomic(path, &bytes)
            .with_context(|| format!("writing --output {}", path.display()))?,
        None => {
            let mut so = std::io::stdout().lock();
            match so.write_all(&bytes).and_then(|_| so.flush()) {
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
                r => r.context("writing to standard output")?,
            }
        }
    }
    Ok(())
}

fn run_test(args: &RunArgs) -> Result<ExitCode> {
    let plan = args.to_plan()?;
    let (target, _server) = target_or_embedded(args.target()?, args.bind)?;
    let mut progress = Progress {
        on: std::io::stderr().is_terminal(),
        test: plan.test,
    };
    let mut live = export::live::Live::new(
        plan.test,
        &plan.percentiles,
        args.out.json_stream,
        args.out.samples.as_deref(),
    )
    .with_context(|| "opening --samples for writing")?;
    let mut result = {
        let mut observer = export::live::Both(&mut progress, &mut live);
        match args.repeat() {
            Some(rep) => {
                let terminal = std::io::stderr().is_terminal();
                control::client::run_repeated(&target, &plan, rep, &mut observer, &mut |it| {
                    if terminal {
                        eprintln!(
                            "\r\x1b[2Kiteration {}: {}",
                            it.index,
                            export::human::figure(it.figure, it.unit)
                        );
                    }
                })
            }
            None => control::client::run(&target, &plan, &mut observer),
        }
    };
    result.note_socket_buffers();
    drop(progress);
    if let Some(e) = &live.error {
        eprintln!("warning: writing samples while the test ran: {e}");
    }
    if let Some(c) = &result.confidence
        && !c.achieved
        && result.summary.error.is_none()
    {
        // Loud on the terminal too, whatever the output format.
        eprintln!("warning: {}", result.summary.warnings[0]);
    }
    write_outputs(&result, &args.out, &args.human_options())?;
    if let Some(e) = &result.summary.error {
        if args.out.format() != Format::Human || args.out.output.is_some() || args.out.json_stream {
            eprintln!("Error: {e}");
        }
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

fn serve(args: &ServerArgs) -> Result<ExitCode> {
    let mut cfg = ServerConfig::new(std::net::SocketAddr::new(args.listen, args.port));
    cfg.data_ports = args.data_ports;
    cfg.once = args.once;
    cfg.limits.max_sessions = args.max_sessions;
    for warning in args.hardening.apply(&mut cfg)? {
        control::log::server_event(cfg.log_format, &format!("warning: {warning}"));
    }
    cfg.log = !args.quiet;
    let log_format = cfg.log_format;
    let server = Server::bind(cfg)?;
    let flag = server.shutdown_flag();
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, flag.clone()).context("installing signal handlers")?;
    }
    // Closing the terminal the server was started from must not end it.
    signal_hook::flag::register(signal_hook::consts::SIGHUP, server.hangup_flag())
        .context("installing signal handlers")?;
    let addr = server.local_addr()?;
    println!(
        "thrum server listening on {addr} (protocol v{})",
        control::proto::PROTOCOL_VERSION
    );
    let _ = std::io::stdout().flush();
    server.serve()?;
    if flag.load(Relaxed) && !args.quiet {
        control::log::server_event(log_format, "stopped by signal");
    }
    Ok(ExitCode::SUCCESS)
}

fn suite(args: &SuiteArgs) -> Result<ExitCode> {
    let (target, _server) = target_or_embedded(None, None)?;
    let mut results = Vec::new();
    let terminal = std::io::stderr().is_terminal();
    for test in TestKind::ALL {
        let mut plan = TestPlan::new(test);
        plan.duration_ns = args.duration.as_nanos() as u64;
        plan.flows = args.flows;
        plan.threads = args.threads;
        plan.validate()?;
        if terminal {
            eprint!("\rrunning {test} ...");
        }
        let r = control::client::run(&target, &plan, &mut Quiet);
        results.push(r);
    }
    if terminal {
        eprint!("\r\x1b[2K");
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&results)?);
    } else {
        print_suite_table(&results);
    }
    Ok(if results.iter().all(|r| r.ok()) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn print_suite_table(results: &[TestResult]) {
    println!(
        "{:<11} {:>5} {:>18} {:>12} {:>12} {:>12}",
        "test", "flows", "result", "p50", "p99", "CPU s (c+s)"
    );
    for r in results {
        let s = &r.summary;
        let head = match s.throughput_bps {
            Some(t) => BitsPerSec(t).to_string(),
            None => format!("{:.0} trans/s", s.transactions_per_s.unwrap_or(0.0)),
        };
        let (p50, p99) = s
            .latency_ns
            .as_ref()
            .map(|l| (units::fmt_ns(l.p50 as f64), units::fmt_ns(l.p99 as f64)))
            .unwrap_or_default();
        let cpu = s.local.rusage.map_or(0.0, |u| u.user_s + u.system_s);
        println!(
            "{:<11} {:>5} {:>18} {:>12} {:>12} {:>12.2}",
            r.test.name(),
            r.spec.plan.flows,
            head,
            p50,
            p99,
            cpu
        );
        if let Some(e) = &s.error {
            println!("  error: {e}");
        }
    }
    println!("(loopback, embedded server in this process: CPU is the whole process, both ends)");
}
