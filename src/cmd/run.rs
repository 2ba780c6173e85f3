//! `thrum run TEST`: one test (or `--iterations` of it) against a server
//! or an embedded one, with a progress line on a terminal, each interval's
//! row as it completes (human output), live samples or JSON lines while it
//! runs, and the result in the chosen format.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use anyhow::{Context, Result};

use super::out::target_or_embedded;
use super::progress::Ticker;
use crate::cli::{Format, Outputs, RunArgs, RunRequest};
use crate::control;
use crate::control::client::{Observer, Target};
use crate::export::{self, Exporter};
use crate::result::{Interval, TestResult};
use crate::units::BitsPerSec;
use crate::warning::{Code, Warning};

/// What the terminal shows while the test runs: the progress line on
/// stderr, and in the human output each interval's row on stdout as it
/// completes (iperf3's habit), the summary after.
struct Watch<'a> {
    ticker: &'a Ticker,
    /// Print rows live: the human output goes to stdout.
    rows: bool,
    /// The head line, printed before the first row.
    head: Option<String>,
    printed: usize,
    /// How rows are drawn (`--format`, `--timestamps`).
    human: &'a export::human::Human,
}

impl Observer for Watch<'_> {
    fn on_interval(&mut self, iv: &Interval) {
        let figure = match iv.sum.throughput_bps {
            Some(t) => BitsPerSec(t).to_string(),
            None => format!(
                "{} trans/s",
                crate::units::fmt_si(iv.sum.transactions_per_s.unwrap_or(0.0))
            ),
        };
        self.ticker.set(format!("{:<8} {figure}", iv.phase.name()));
        if !self.rows {
            return;
        }
        let mut text = self.head.take().unwrap_or_default().into_bytes();
        let _ = self.human.row(&mut text, iv);
        self.printed += 1;
        self.ticker.above(|| {
            let _ = super::out::print(&text);
        });
    }
}

/// netperf's default for `-o` without a list.
const DEFAULT_FIELDS: [&str; 2] = ["THROUGHPUT", "THROUGHPUT_UNITS"];

fn exporter(out: &Outputs, human: &export::human::Human) -> Box<dyn Exporter> {
    use export::fields::{Fields, Style};
    let fields = |style| -> Box<dyn Exporter> {
        let names = match &out.fields {
            Some(f) => f.clone(),
            None => DEFAULT_FIELDS.map(str::to_string).to_vec(),
        };
        Box::new(Fields {
            names,
            style,
            units: out.units,
        })
    };
    match (out.format, out.fields.is_some()) {
        (Format::Human, false) => Box::new(human.clone()),
        (Format::Human, true) => fields(Style::Human),
        (Format::Json, _) => Box::new(export::json::Json),
        (Format::Keyval, false) => Box::new(export::keyval::Keyval { units: out.units }),
        (Format::Keyval, true) => fields(Style::Keyval),
        (Format::Csv, _) => fields(Style::Csv),
    }
}

/// Write every requested output; called on success and on failure alike.
fn write_outputs(
    result: &TestResult,
    out: &Outputs,
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
        export::render(exporter(out, human).as_ref(), result)
    };
    // hyperfine's --export-*: files beside what the terminal shows.
    let keyval = export::keyval::Keyval { units: out.units };
    let exports: [(&[std::path::PathBuf], &dyn Exporter, &str); 3] = [
        (&out.export_json, &export::json::Json, "--export-json"),
        (&out.export_csv, &export::csv::Csv, "--export-csv"),
        (&out.export_keyval, &keyval, "--export-keyval"),
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
        None => super::out::print(&bytes)?,
    }
    Ok(())
}

/// `--dry-run`: the SPEC a preset or `--mix` stands for, one line per part,
/// on stdout; nothing is run.
fn dry_run(req: &RunRequest) -> Result<()> {
    let plan = &req.plan;
    let mut out = String::new();
    match &req.mix_spec {
        Some(spec) => {
            let spec: String = spec.split_whitespace().collect();
            out.push_str(&format!("--mix {spec}\n"));
            for p in &plan.parts {
                let rate = p
                    .offered_per_s
                    .map(|r| format!(" at {r}/s"))
                    .unwrap_or_default();
                let tos = p
                    .tos
                    .map(|t| format!(" tos 0x{t:02x} (dscp {})", t >> 2))
                    .unwrap_or_default();
                out.push_str(&format!(
                    "  {:<14} {:<10} {} flow(s){rate}{tos}\n",
                    p.name,
                    p.test.name(),
                    p.flows
                ));
            }
        }
        None => out.push_str(&format!(
            "{} with {} flow(s)\n",
            plan.test.name(),
            plan.flows
        )),
    }
    out.push_str(&plan_lines(plan));
    out.push_str(&run_time_line(req));
    super::out::print(&out)
}

/// The checked plan, one `key=value` per field as its JSON spells it
/// (nested values as JSON), the way neper's dry run lists its options.
fn plan_lines(plan: &crate::plan::TestPlan) -> String {
    let mut out = String::new();
    if let Ok(serde_json::Value::Object(fields)) = serde_json::to_value(plan) {
        for (k, v) in fields {
            let v = match v {
                serde_json::Value::String(s) => s,
                serde_json::Value::Null => "none".into(),
                v => v.to_string(),
            };
            out.push_str(&format!("{k}={v}\n"));
        }
    }
    out
}

/// `total_run_time`, as neper's dry run prints it: warm-up, measurement and
/// cool-down, times the runs `--iterations` may make (a range when they
/// may stop early), and the `--timeout` that would cut it; unbounded for a
/// count-limited run (`--transactions`).
fn run_time_line(req: &RunRequest) -> String {
    let plan = &req.plan;
    let fmt = |ns: u64| crate::units::fmt_duration_ns(ns);
    let parts = format!(
        "warm-up {} + measurement {} + cool-down {}",
        fmt(plan.warmup_ns),
        match plan.transactions {
            Some(n) => format!("until {n} transactions"),
            None => fmt(plan.duration_ns),
        },
        fmt(plan.cooldown_ns)
    );
    let one = plan.warmup_ns + plan.duration_ns + plan.cooldown_ns;
    let (min, max) = req.repeat.map_or((1, 1), |r| (r.min, r.max));
    let total = if plan.transactions.is_some() {
        "unbounded (--transactions)".to_string()
    } else if min == max {
        fmt(one * u64::from(min))
    } else {
        format!(
            "{} to {}",
            fmt(one * u64::from(min)),
            fmt(one * u64::from(max))
        )
    };
    let runs = if min == max {
        format!("{min} run(s)")
    } else {
        format!("{min} to {max} runs")
    };
    let limit = req
        .timeout
        .map(|t| format!("; --timeout {}", fmt(t.as_nanos() as u64)))
        .unwrap_or_default();
    format!("total_run_time={total} ({parts}, {runs}; set-up and drain not counted{limit})\n")
}

/// `thrum run`: turn the flags into the request, measure, then write the
/// result where it was asked for and say on stderr what a reader should
/// know.
pub fn run(args: &RunArgs) -> Result<ExitCode> {
    let mut req = args.to_request()?;
    for tip in &req.tips {
        eprintln!("tip: {tip}");
    }
    if req.dry_run {
        dry_run(&req)?;
        return Ok(ExitCode::SUCCESS);
    }
    let store = &req.store;
    // The baseline is found before the run (a typo fails now, not after
    // it), and before this run is saved (which may carry its label).
    let baseline = match &req.baseline {
        Some(b) => {
            let target = req
                .target
                .as_ref()
                .map_or("embedded".into(), |t| t.label.clone());
            let found = super::compare::find_baseline(store, b, &req.stored_test, &target)?;
            Some((found, b))
        }
        None => None,
    };
    control::stop::on_signals().context("installing signal handlers")?;
    let (target, _server) = target_or_embedded(req.target.take(), req.bind)?;
    if req.fill_path_mtu {
        // capacity's packets fill the path MTU by default: the frame whose
        // spacing the narrow link sets is then the one the path carries.
        req.plan.send_bytes =
            crate::workload::capacity::packet_size_toward(target.addr, target.bind);
    }
    let limit = super::limit::Limit::arm(req.timeout);
    let (mut result, rows_shown, live) = measure(&req, &target)?;
    result.environment.uuid = req.uuid.clone();
    result.environment.brand = req.brand.clone();
    let timed_out = limit.as_ref().is_some_and(|l| l.fired());
    drop(limit);
    let interrupted = control::stop::requested() && !timed_out;
    if interrupted {
        mark_interrupted(&mut result.summary.error);
    }
    if let (true, Some(t)) = (timed_out, req.timeout) {
        result.summary.error = Some(timed_out_error(t, &result));
    }
    // Results to standard output (or -o); everything else to stderr.
    // A human table of a run that measured nothing would be zeros.
    let measured = !result.intervals.is_empty() || result.summary.error.is_none();
    let main = measured || !req.outputs.is_human();
    let mut human = req.human.clone();
    human.rows_shown = rows_shown;
    write_outputs(&result, &req.outputs, &human, main)?;
    write_drawings(&req, &result)?;
    let code = say_on_stderr(&req, &result, live.error.as_deref(), interrupted);
    let doc = serde_json::to_value(&result).context("the result as JSON")?;
    let target = super::save::target_name(&target);
    let id = super::save::save(store, "run", &req.stored_test, &target, &doc);
    match baseline {
        Some((found, b)) if result.summary.error.is_none() => {
            let b = super::compare::after_run(store, found, id, doc, b)?;
            Ok(if b {
                ExitCode::from(super::compare::EXIT_REGRESSED)
            } else {
                code
            })
        }
        _ => Ok(code),
    }
}

/// Run the test (or its `--iterations`) with the progress line, the rows
/// as they complete and the live samples. Returns the result, whether the
/// rows were shown live, and the samples' writer, which stays open until
/// `run` ends.
fn measure(req: &RunRequest, target: &Target) -> Result<(TestResult, bool, export::live::Live)> {
    let plan = &req.plan;
    let total = (!plan.count_limited()).then(|| {
        std::time::Duration::from_nanos(plan.warmup_ns + plan.duration_ns + plan.cooldown_ns)
    });
    let repeat = req.repeat;
    let ticker = Ticker::start(
        std::io::stderr().is_terminal(),
        plan.test.name(),
        total.filter(|_| repeat.is_none()),
    );
    // Rows live only for one run of the human output on stdout; the rows
    // of --iterations would interleave runs.
    let out = &req.outputs;
    let rows = out.is_human() && out.fields.is_none() && out.output.is_none() && repeat.is_none();
    let mut head = Vec::new();
    let server = if target.embedded {
        "embedded"
    } else {
        target.label.as_str()
    };
    req.human.head(&mut head, plan.test, server, plan)?;
    let mut watch = Watch {
        ticker: &ticker,
        rows,
        head: Some(String::from_utf8_lossy(&head).into_owned()),
        printed: 0,
        human: &req.human,
    };
    let mut live = export::live::Live::new(
        plan.test,
        &plan.percentiles,
        out.json_stream,
        out.samples.as_deref(),
        export::csv::PartCols::of_plan(plan),
        plan.offered_per_s.is_some(),
    )
    .with_context(|| "opening --samples for writing")?;
    let result = {
        let mut observer = export::live::Both(&mut watch, &mut live);
        match (repeat, &req.agents) {
            (_, Some(agents)) => crate::fleet::run(
                &crate::fleet::Fleet {
                    agents: agents.clone(),
                    target: target.clone(),
                    plan: plan.clone(),
                },
                &mut observer,
            ),
            (Some(rep), None) => {
                control::client::run_repeated(target, plan, rep, &mut observer, &mut |it| {
                    ticker.above(|| {
                        eprintln!(
                            "iteration {}: {}",
                            it.index,
                            export::human::figure(it.figure, it.unit)
                        )
                    });
                })
            }
            (None, None) => control::client::run(target, plan, &mut observer),
        }
    };
    let (printed, rows_shown) = (watch.printed, rows && watch.head.is_none());
    drop(watch);
    drop(ticker);
    // Rows whose figures came after the run's last report (a late server
    // sample), before the summary.
    if rows_shown {
        let mut late = Vec::new();
        for iv in result.intervals.iter().skip(printed) {
            req.human.row(&mut late, iv)?;
        }
        super::out::print(&late)?;
    }
    Ok((result, rows_shown, live))
}

/// A run stopped by a signal: what was measured stands, and the error
/// says the run did not end as planned.
/// What a run stopped by `--timeout` says: the flag, and what it measured
/// before (the intervals, written as usual).
fn timed_out_error(t: std::time::Duration, r: &TestResult) -> String {
    let measured = r
        .intervals
        .iter()
        .filter(|iv| iv.phase == crate::plan::Phase::Measure)
        .count();
    format!(
        "{}; measured until then: {} interval(s) of the window ({:.3}s), {} in all",
        super::limit::message(t),
        measured,
        r.summary.duration_s,
        r.intervals.len()
    )
}

fn mark_interrupted(error: &mut Option<String>) {
    *error = Some(match error.take() {
        Some(e) if e != control::stop::INTERRUPTED => {
            format!("{}: {e}", control::stop::INTERRUPTED)
        }
        _ => control::stop::INTERRUPTED.to_string(),
    });
}

/// `--chart` (a mix's time series, or the single test's chart: capacity's
/// histogram) and `--html`.
fn write_drawings(req: &RunRequest, result: &TestResult) -> Result<()> {
    if let Some(path) = &req.drawings.chart {
        let svg = if req.plan.parts.is_empty() {
            // `to_request` refused --chart for a test whose row has none.
            super::out::test_chart(result)
                .with_context(|| format!("--chart: {} has no chart", result.test))?
        } else {
            export::draw::mix::svg(result)
        };
        export::write_atomic(path, svg.as_bytes())
            .with_context(|| format!("writing --chart {}", path.display()))?;
    }
    if let Some(path) = &req.drawings.html {
        export::write_atomic(path, export::page::mix::report(result).as_bytes())
            .with_context(|| format!("writing --html {}", path.display()))?;
    }
    Ok(())
}

/// What stderr says after the result: a failed samples write, the
/// warnings a reader asked for, the error; and the exit code it gives.
fn say_on_stderr(
    req: &RunRequest,
    result: &TestResult,
    live_error: Option<&str>,
    interrupted: bool,
) -> ExitCode {
    let mut err = std::io::stderr().lock();
    if let Some(e) = live_error {
        let _ = writeln!(err, "warning: writing samples while the test ran: {e}");
    }
    // JSON and key=value carry every warning; the human output says on
    // stderr those a reader asked for (see `shown`).
    if req.outputs.is_human() {
        let h = &req.human;
        let detail = h.local_cpu || h.remote_cpu || h.verbose;
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
        if let Some(tip) = &req.error_tip {
            let _ = writeln!(err, "  tip: {tip}");
        }
        if interrupted {
            return ExitCode::from(control::stop::EXIT_INTERRUPTED);
        }
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

/// Whether the human output says a warning without -c, -C, --cpu or -v:
/// how the CPU was read (the two sources of service demand disagree, other
/// work on the host) and packets that are not one per message qualify the
/// CPU and per-transaction figures, which a default run does not show;
/// JSON and key=value keep them all.
fn shown(w: &Warning) -> bool {
    !matches!(
        w.code,
        Code::ServiceDemandDisagrees | Code::CpuBusyElsewhere | Code::PacketsPartFromTransactions
    )
}
