//! `thrum report PATH`: the analysis of a saved aggregate run again, from
//! its results.json or from netperf's demo-mode logs, with the same
//! summary and, with `--out`, the same output directory as `thrum agg`.
//! A saved `thrum curve` (schema `thrum.curve.v1`) is re-analysed from its
//! steps and re-rendered the same way, with `thrum curve`'s outputs.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};

use super::out::{finish, say_test, write_dir};
use crate::agg::curve::{self, Curve};
use crate::agg::input;
use crate::agg::model::{self, AggResult, AggSpec, Coverage, TestAgg};
use crate::agg::netperf;
use crate::cli::ReportArgs;

/// Load what `thrum report PATH` names.
pub fn load(path: &Path) -> Result<AggResult> {
    let is_log = |p: &Path| {
        p.extension().is_some_and(|e| e == "log")
            && p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("netperf_"))
    };
    if input::is_link(path) && path.is_dir() {
        bail!(
            "{} is a symbolic link to a directory: {}",
            path.display(),
            input::NO_LINKS
        );
    }
    if input::is_real_dir(path) {
        let json = path.join("results.json");
        if json.is_file() || input::is_link(&json) {
            return load(&json);
        }
        let mut logs: Vec<PathBuf> = std::fs::read_dir(path)
            .with_context(|| format!("reading {}", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| is_log(p))
            .collect();
        logs.sort();
        if logs.is_empty() {
            bail!(
                "{}: no results.json and no netperf_TEST.log in this directory",
                path.display()
            );
        }
        return from_logs(&logs);
    }
    if is_log(path) {
        return from_logs(&[path.to_path_buf()]);
    }
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
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

fn from_logs(logs: &[PathBuf]) -> Result<AggResult> {
    let tests: Vec<TestAgg> = logs
        .iter()
        .map(|l| netperf::read(l))
        .collect::<Result<_, _>>()?;
    Ok(AggResult {
        schema: model::SCHEMA.into(),
        source: "netperf demo-mode logs".into(),
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
    let json = if input::is_real_dir(path) {
        path.join("results.json")
    } else {
        path.to_path_buf()
    };
    if !json.is_file() || json.extension().is_none_or(|e| e != "json") {
        return Ok(None);
    }
    let text =
        input::read_to_string(&json).with_context(|| format!("reading {}", json.display()))?;
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
    let out = &req.output;
    if let Some(c) = load_curve(&req.path)? {
        super::curve::say(&c, out.json, out.out.as_deref())?;
        return Ok(super::curve::verdict(&c));
    }
    let r = load(&req.path)?;
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
