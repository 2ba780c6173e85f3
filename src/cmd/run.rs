//! `thrum run TEST`: one test (or `--iterations` of it) against a server
//! or an embedded one, with a live progress line on a terminal, live
//! samples or JSON lines while it runs, and the result in the chosen format.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use anyhow::{Context, Result};

use super::out::target_or_embedded;
use crate::cli::{Format, OutputArgs, RunArgs};
use crate::control;
use crate::control::client::Observer;
use crate::export::{self, Exporter};
use crate::plan::TestKind;
use crate::result::{Interval, TestResult};
use crate::units::BitsPerSec;

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
    main: bool,
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
    // hyperfine's --export-*: files beside what the terminal shows.
    let exports: [(&[std::path::PathBuf], &dyn Exporter, &str); 3] = [
        (&out.export_json, &export::json::Json, "--export-json"),
        (&out.export_csv, &export::csv::Csv, "--export-csv"),
        (
            &out.export_keyval,
            &export::keyval::Keyval,
            "--export-keyval",
        ),
    ];
    for (paths, exporter, flag) in exports {
        for path in paths {
            export::write_atomic(path, &export::render(exporter, result))
                .with_context(|| format!("writing {flag} {}", path.display()))?;
        }
    }
    if !main {
        return Ok(());
    }
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

/// `thrum run`.
pub fn run(args: &RunArgs) -> Result<ExitCode> {
    let plan = args.to_plan()?;
    control::stop::on_signals().context("installing signal handlers")?;
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
    let interrupted = control::stop::requested();
    if interrupted {
        // What was measured stands; the run did not end as planned.
        result.summary.error = Some(match result.summary.error.take() {
            Some(e) if e != control::stop::INTERRUPTED => {
                format!("{}: {e}", control::stop::INTERRUPTED)
            }
            _ => control::stop::INTERRUPTED.to_string(),
        });
    }
    drop(progress);
    // Results to standard output (or -o); everything else to stderr.
    // A human table of a run that measured nothing would be zeros.
    let measured = !result.intervals.is_empty() || result.summary.error.is_none();
    let main = measured || args.out.format() != Format::Human || args.out.json_stream;
    write_outputs(&result, &args.out, &args.human_options(), main)?;
    let mut err = std::io::stderr().lock();
    if let Some(e) = &live.error {
        let _ = writeln!(err, "warning: writing samples while the test ran: {e}");
    }
    // JSON and key=value carry every warning; the human output says on
    // stderr those a reader asked for (see `shown`).
    if args.out.format() == Format::Human && !args.out.json_stream {
        let detail = args.local_cpu || args.remote_cpu || args.cpu || args.verbose;
        for w in result
            .summary
            .warnings
            .iter()
            .filter(|w| detail || shown(w))
        {
            let _ = writeln!(err, "warning: {w}");
        }
    } else if let Some(c) = &result.confidence
        && !c.achieved
        && result.summary.error.is_none()
    {
        // Loud on the terminal too, whatever the output format.
        let _ = writeln!(err, "warning: {}", result.summary.warnings[0]);
    }
    if let Some(e) = &result.summary.error {
        let _ = writeln!(err, "error: {e}");
        if let Some(tip) = args.host.as_deref().and_then(crate::cli::ipv6_port_hint) {
            let _ = writeln!(err, "  tip: {tip}");
        }
        if interrupted {
            return Ok(ExitCode::from(control::stop::EXIT_INTERRUPTED));
        }
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// Whether the human output says a warning without -c, -C, --cpu or -v:
/// how the CPU was read (the two sources of service demand disagree, other
/// work on the host) and packets that are not one per message qualify the
/// CPU and per-transaction figures, which a default run does not show;
/// JSON and key=value keep them all.
// Matched on text until warnings carry codes (issue 15, item 4).
fn shown(w: &str) -> bool {
    const DETAIL: [&str; 3] = [
        " service demand: /proc/stat gives ",
        " host: CPUs were busy beyond thrum's own use",
        "packets/s on ",
    ];
    !DETAIL.iter().any(|d| w.contains(d))
}
