//! `thrum report PATH`: any result thrum wrote, read back and drawn again
//! (flent's `-i FILE -p PLOT`), dispatched on the document's `schema`.
//! A saved aggregate run (`thrum.agg.v1`, or netperf's demo-mode logs) is
//! analysed again, with the same summary and, with `--out`, the same
//! output directory as `thrum agg`; a saved `thrum curve`
//! (`thrum.curve.v1`) is re-analysed from its steps, with `thrum curve`'s
//! outputs. A saved `thrum run --json` (`thrum.result.v1`) prints as the
//! run did and, with `--out`, draws what `run --html`/`--chart` would
//! (a mix's page and time series, capacity's histogram; other tests get
//! one page of their own); `thrum ping --json` (`thrum.ping.v1`) and
//! `thrum sweep --json` (`thrum.sweep.v1`) print their tables again, the
//! sweep's CSV in `--out`, and `thrum mesh --json` (`thrum.mesh.v1`) its
//! matrix, its heat map in `--out`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};

use super::out::{finish, say_test, write_dir};
use crate::agg::model::{self, AggResult, AggSpec, Coverage, TestAgg};
use crate::agg::netperf;
use crate::agg::ramplog;
use crate::cli::{AggOutput, ReportArgs, ReportRequest};
use crate::curve::{self, Curve};
use crate::export::{self, write_atomic};
use crate::nofollow;
use crate::result::TestResult;
use crate::sweep::Sweep;

/// The schema of `thrum sweep --json`.
const SWEEP_SCHEMA: &str = "thrum.sweep.v1";

/// Every schema `thrum report` reads, for the error that names them.
const ACCEPTED: [&str; 6] = [
    crate::result::SCHEMA,
    model::SCHEMA,
    curve::SCHEMA,
    super::ping::PING_SCHEMA,
    SWEEP_SCHEMA,
    crate::fleet::mesh::SCHEMA,
];

/// A saved document that is neither an aggregate nor a curve (those keep
/// their own loaders, [`load`] and [`load_curve`]).
enum Other {
    Run(Box<TestResult>),
    Ping(super::ping::PingResult),
    Sweep(Sweep),
    Mesh(Box<crate::fleet::mesh::Mesh>),
}

/// The JSON document `path` names (a file, or a directory's
/// results.json), when it is one; None for netperf logs and directories
/// of them, which [`load`] reads.
fn document(path: &Path) -> Result<Option<(PathBuf, serde_json::Value)>> {
    // Read as every report input is, as untrusted input: no symbolic link
    // followed, and every string's control characters escaped before
    // anything prints.
    let json = if nofollow::is_real_dir(path) {
        path.join("results.json")
    } else if nofollow::is_link(path) && path.is_dir() {
        bail!(
            "{} is a symbolic link to a directory: {}",
            path.display(),
            nofollow::NO_LINKS
        );
    } else {
        path.to_path_buf()
    };
    if !json.is_file() || json.extension().is_some_and(|e| e == "log") {
        return Ok(None);
    }
    let text = nofollow::read_to_string(&json, &nofollow::RESULT_DOCUMENT)
        .with_context(|| format!("reading {}", json.display()))?;
    let mut doc = serde_json::from_str(&text).with_context(|| {
        format!(
            "{}: not a JSON document thrum wrote (schemas accepted: {}), nor a netperf_TEST.log",
            json.display(),
            ACCEPTED.join(", ")
        )
    })?;
    crate::text::escape_json_strings(&mut doc);
    Ok(Some((json, doc)))
}

/// The JSON document of a result file thrum wrote, read as `report`
/// reads one (no symbolic link followed, control characters escaped):
/// `thrum compare`'s result files.
pub fn read_document(path: &Path) -> Result<serde_json::Value> {
    match document(path)? {
        Some((_, doc)) => Ok(doc),
        None => bail!(
            "{}: not a JSON document thrum wrote (schemas accepted: {})",
            path.display(),
            ACCEPTED.join(", ")
        ),
    }
}

/// Print a stored document as `thrum report` prints the file holding it
/// (`thrum show`): a run, ping, sweep, aggregate or curve.
pub fn report_document(doc: serde_json::Value, out: &AggOutput) -> Result<ExitCode> {
    let dir = tempfile::tempdir().context("a temporary directory")?;
    let path = dir.path().join("results.json");
    write_atomic(&path, &serde_json::to_vec(&doc)?)?;
    report_path(&path, out)
}

/// The run, ping, sweep or mesh `doc` holds, by its `schema`; None for an
/// aggregate or a curve; an error naming the accepted schemas otherwise.
fn other(json: &Path, doc: serde_json::Value) -> Result<Option<Other>> {
    let schema = doc["schema"].as_str().unwrap_or_default().to_string();
    let read = |what: &str| format!("{}: not a valid {what} document", json.display());
    Ok(Some(match schema.as_str() {
        crate::result::SCHEMA => Other::Run(Box::new(
            serde_json::from_value(doc).with_context(|| read(&schema))?,
        )),
        super::ping::PING_SCHEMA => {
            Other::Ping(serde_json::from_value(doc).with_context(|| read(&schema))?)
        }
        SWEEP_SCHEMA => Other::Sweep(serde_json::from_value(doc).with_context(|| read(&schema))?),
        crate::fleet::mesh::SCHEMA => {
            Other::Mesh(serde_json::from_value(doc).with_context(|| read(&schema))?)
        }
        s if s == model::SCHEMA || s == curve::SCHEMA => return Ok(None),
        "" => bail!(
            "{}: no \"schema\" field (schemas accepted: {})",
            json.display(),
            ACCEPTED.join(", ")
        ),
        s => bail!(
            "{}: schema '{s}' (schemas accepted: {})",
            json.display(),
            ACCEPTED.join(", ")
        ),
    }))
}

/// Print a saved run, ping, sweep or mesh as its command did, and with `--out`
/// write what that command draws.
fn say_other(doc: &Other, out: &AggOutput) -> Result<ExitCode> {
    let (text, failed) = match doc {
        Other::Run(r) => {
            let human = export::render(&export::human::Human::default(), r);
            (String::from_utf8_lossy(&human).into_owned(), !r.ok())
        }
        Other::Ping(p) => (super::ping::human(p), p.failed()),
        Other::Sweep(sw) => (
            export::sweep::table(sw),
            sw.cells.iter().any(|c| c.error.is_some()),
        ),
        Other::Mesh(m) => (export::mesh::table(m), !m.ok()),
    };
    let json = || -> Result<Vec<u8>> {
        let mut v = match doc {
            Other::Run(r) => serde_json::to_vec_pretty(r)?,
            Other::Ping(p) => serde_json::to_vec_pretty(p)?,
            Other::Sweep(sw) => serde_json::to_vec_pretty(sw)?,
            Other::Mesh(m) => serde_json::to_vec_pretty(m)?,
        };
        v.push(b'\n');
        Ok(v)
    };
    // A saved failure fails again, as the command did.
    let verdict = if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    };
    if out.json {
        super::out::print(&json()?)?;
    } else {
        super::out::print(&text)?;
    }
    for p in &out.export_json {
        write_atomic(p, &json()?)
            .with_context(|| format!("writing --export-json {}", p.display()))?;
    }
    if let Some(dir) = &out.out {
        let files = drawings(doc);
        if files.is_empty() {
            eprintln!(
                "thrum ping draws no chart: nothing written in {}",
                dir.display()
            );
            return Ok(verdict);
        }
        std::fs::create_dir_all(dir)
            .with_context(|| format!("--out: creating {}", dir.display()))?;
        for (name, bytes) in files {
            let p = dir.join(name);
            write_atomic(&p, &bytes).with_context(|| format!("writing {}", p.display()))?;
        }
        eprintln!("results in {}", dir.display());
    }
    Ok(verdict)
}

/// The files `--out` holds for a saved run, ping or sweep: what the
/// command itself draws, by the same functions. A mix: report.html and
/// chart.svg as `run --html`/`--chart` write them; a test whose row has a
/// chart (capacity): chart.svg as `--chart` writes it, and a page with it;
/// any other test: its page.
/// A sweep: sweep.csv as `--export-csv` writes it, sweep.html (its tables
/// and heat maps) and each table's heat map as SVG; a mesh: its matrix's
/// heat map (heatmap.svg, as `--chart` draws it); a ping draws nothing.
fn drawings(doc: &Other) -> Vec<(String, Vec<u8>)> {
    match doc {
        Other::Run(r) if !r.spec.plan.parts.is_empty() => vec![
            (
                "report.html".into(),
                export::page::mix::report(r).into_bytes(),
            ),
            ("chart.svg".into(), export::draw::mix::svg(r).into_bytes()),
        ],
        Other::Run(r) => match super::out::test_chart(r) {
            Some(svg) => vec![
                (
                    "report.html".into(),
                    export::page::result::report(r, Some(&svg)).into_bytes(),
                ),
                ("chart.svg".into(), svg.into_bytes()),
            ],
            None => vec![(
                "report.html".into(),
                export::page::result::report(r, None).into_bytes(),
            )],
        },
        Other::Sweep(sw) => {
            let mut v = vec![
                ("sweep.csv".to_string(), export::sweep::csv(sw).into_bytes()),
                (
                    "sweep.html".to_string(),
                    export::page::sweep::report(sw).into_bytes(),
                ),
            ];
            // A heat map per table: heatmap.svg, or heatmap-1.svg … when
            // other dimensions make several tables.
            let tables = export::sweep::tables(sw);
            let several = tables.len() > 1;
            for (i, t) in tables.iter().enumerate() {
                let name = if several {
                    format!("heatmap-{}.svg", i + 1)
                } else {
                    "heatmap.svg".to_string()
                };
                v.push((name, export::draw::sweep::svg(t).into_bytes()));
            }
            v
        }
        Other::Mesh(m) => vec![(
            "heatmap.svg".into(),
            export::draw::mesh::svg(m).into_bytes(),
        )],
        Other::Ping(_) => Vec::new(),
    }
}

/// Load what `thrum report PATH` names.
pub fn load(path: &Path) -> Result<AggResult> {
    let is_log = |p: &Path| {
        p.extension().is_some_and(|e| e == "log")
            && p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("netperf_"))
    };
    if nofollow::is_link(path) && path.is_dir() {
        bail!(
            "{} is a symbolic link to a directory: {}",
            path.display(),
            nofollow::NO_LINKS
        );
    }
    if nofollow::is_real_dir(path) {
        let json = path.join("results.json");
        if json.is_file() || nofollow::is_link(&json) {
            let mut r = load(&json)?;
            check_ramp_logs(path, &mut r);
            return Ok(r);
        }
        let mut ramps: Vec<PathBuf> = std::fs::read_dir(path)
            .with_context(|| format!("reading {}", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| ramplog::is_ramp_log(p))
            .collect();
        if !ramps.is_empty() {
            ramps.sort();
            return from_ramp_logs(&ramps);
        }
        let mut logs: Vec<PathBuf> = std::fs::read_dir(path)
            .with_context(|| format!("reading {}", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| is_log(p))
            .collect();
        logs.sort();
        if logs.is_empty() {
            bail!(
                "{}: no results.json, no TEST_ramp.log and no netperf_TEST.log in this directory",
                path.display()
            );
        }
        return from_logs(&logs);
    }
    if is_log(path) {
        return from_logs(&[path.to_path_buf()]);
    }
    if ramplog::is_ramp_log(path) {
        return from_ramp_logs(&[path.to_path_buf()]);
    }
    let text = nofollow::read_to_string(path, &nofollow::RESULT_DOCUMENT)
        .with_context(|| format!("reading {}", path.display()))?;
    // Every string a file carries (names, units, servers, errors) with its
    // control characters escaped before anything prints or writes it.
    let saved: AggResult = serde_json::from_str(&text)
        .and_then(|mut v| {
            crate::text::escape_json_strings(&mut v);
            serde_json::from_value(v)
        })
        .with_context(|| {
            format!(
                "{}: not a results.json of schema {} (nor a netperf_TEST.log)",
                path.display(),
                model::SCHEMA
            )
        })?;
    if saved.schema != model::SCHEMA {
        bail!(
            "{}: schema '{}' (accepted: {})",
            path.display(),
            saved.schema,
            model::SCHEMA
        );
    }
    for t in &saved.tests {
        let spans: Vec<model::StepSpan> = t
            .steps
            .iter()
            .map(|s| model::StepSpan {
                streams: s.streams,
                first_stream: s.first_stream,
                started: s.started,
                window: (s.start, s.end),
            })
            .collect();
        let samples = t.streams.iter().map(|s| s.samples.len()).sum();
        model::check_span((t.start, t.end), &spans, samples).map_err(|e| {
            anyhow::anyhow!(
                "{}: test {}: {e}; refused (a crafted or corrupt file)",
                path.display(),
                crate::text::echo(&t.name)
            )
        })?;
    }
    let coverage = if saved.source == "thrum agg" {
        Coverage::Required { slack_s: 0.05 }
    } else {
        Coverage::Assumed
    };
    let tests = saved
        .tests
        .iter()
        .map(|t| model::reanalyse(t, coverage))
        .collect();
    Ok(AggResult { tests, ..saved })
}

/// A saved run's ramp logs (`TEST_ramp.log`) beside its results.json:
/// each one read and held to the saved steps; a log that disagrees, or
/// cannot be read, is a warning of its test's, and one that agrees is
/// said on stderr.
fn check_ramp_logs(dir: &Path, r: &mut AggResult) {
    for t in &mut r.tests {
        let log = dir.join(ramplog::file_name(&super::out::file_part(&t.name)));
        if !log.exists() && !nofollow::is_link(&log) {
            continue;
        }
        match ramplog::read_ramp(&log) {
            Ok(ramp) => match ramplog::disagreement(t, &ramp) {
                None => eprintln!(
                    "{}: {} step(s), as results.json has them",
                    log.display(),
                    ramp.steps.len()
                ),
                Some(d) => t.warnings.push(format!(
                    "{} does not match results.json: {d}",
                    log.display()
                )),
            },
            Err(e) => t.warnings.push(format!("ramp log: {e}")),
        }
    }
}

/// A directory of thrum's ramp logs and streams CSVs without its
/// results.json: the logged steps over the streams' samples.
fn from_ramp_logs(logs: &[PathBuf]) -> Result<AggResult> {
    from_read(
        logs,
        |l| ramplog::read(l),
        "thrum agg ramp logs and streams CSV",
    )
}

fn from_logs(logs: &[PathBuf]) -> Result<AggResult> {
    from_read(logs, |l| netperf::read(l), "netperf demo-mode logs")
}

/// An agg document of the tests `read` finds in `logs`, one per log.
fn from_read<E>(
    logs: &[PathBuf],
    read: impl Fn(&PathBuf) -> Result<TestAgg, E>,
    source: &str,
) -> Result<AggResult>
where
    anyhow::Error: From<E>,
{
    let tests: Vec<TestAgg> = logs.iter().map(read).collect::<Result<_, _>>()?;
    Ok(AggResult {
        schema: model::SCHEMA.into(),
        source: source.into(),
        spec: AggSpec {
            tests: tests.iter().map(|t| t.name.clone()).collect(),
            max_streams: tests
                .iter()
                .filter_map(|t| t.steps.last().map(|s| s.streams))
                .max()
                .unwrap_or(0),
            trim_s: 1.0,
            burst: String::new(),
            ..AggSpec::default()
        },
        provenance: serde_json::json!({ "files": logs }),
        tests,
    })
}

/// The saved curve `path` names (a results.json of schema
/// `thrum.curve.v1`, or a directory holding one), re-analysed; None when it
/// names something else.
pub fn load_curve(path: &Path) -> Result<Option<Curve>> {
    let json = if nofollow::is_real_dir(path) {
        path.join("results.json")
    } else {
        path.to_path_buf()
    };
    if !json.is_file() || json.extension().is_none_or(|e| e != "json") {
        return Ok(None);
    }
    let text = nofollow::read_to_string(&json, &nofollow::RESULT_DOCUMENT)
        .with_context(|| format!("reading {}", json.display()))?;
    let mut doc: serde_json::Value = match serde_json::from_str(&text) {
        Ok(d) => d,
        Err(_) => return Ok(None),
    };
    crate::text::escape_json_strings(&mut doc);
    if doc["schema"] != curve::SCHEMA {
        return Ok(None);
    }
    let mut c: Curve = serde_json::from_value(doc)
        .with_context(|| format!("{}: not a valid {} document", json.display(), curve::SCHEMA))?;
    curve::analyse(&mut c);
    Ok(Some(c))
}

/// `thrum report`.
pub fn report(args: &ReportArgs) -> Result<ExitCode> {
    let req = args.to_request();
    report_path(&req.path, &req.output)
}

/// `thrum report PATH`, with its outputs.
fn report_path(path: &Path, out: &AggOutput) -> Result<ExitCode> {
    let req = ReportRequest {
        path: path.to_path_buf(),
        output: out.clone(),
    };
    let out = &req.output;
    if let Some((json, doc)) = document(&req.path)?
        && let Some(o) = other(&json, doc)?
    {
        return say_other(&o, out);
    }
    if let Some(c) = load_curve(&req.path)? {
        super::curve::say(&c, out.json, out.out.as_deref())?;
        return Ok(super::curve::verdict(&c));
    }
    let mut r = load(&req.path)?;
    if out.title.is_some() {
        r.spec.title = out.title.clone();
    }
    if out.annotation.is_some() {
        r.spec.annotation = out.annotation.clone();
    }
    for t in &r.tests {
        say_test(t, out)?;
    }
    if let Some(dir) = &out.out {
        write_dir(dir, &r, out.individual)?;
    }
    finish(&r, out, out.out.as_deref())?;
    // The run's verdict: a report of a failed run fails as `agg` did.
    Ok(if r.tests.iter().any(model::failed) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
