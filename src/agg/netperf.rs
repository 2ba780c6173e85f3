//! netperf's demo-mode files, read as data: the `netperf_TEST.log` of
//! runemomniaggdemo.sh and the `.out` files of its netperf processes.
//!
//! The log gives the ramp: `Starting netperfs at T`, `Pausing for D seconds
//! at T with N netperfs running`, `Resuming at T`, `Netperfs started by T`,
//! `Netperfs stopping T`, `Netperfs stopped T`. As post_proc.py does, a step
//! runs from its `Pausing` (or `Netperfs started by`) to its `Resuming` (or
//! one second before `Netperfs stopping`), both cut to whole seconds, and
//! its measurement window drops one more second at each end. Each `.out`
//! file holds one netperf's interim results in human, CSV or key=value form;
//! each value covers the interval ending at its timestamp.

use std::path::{Path, PathBuf};

use thiserror::Error;

use super::model::{self, Coverage, StepSpan, StreamSeries, StreamSummary, TestAgg};
use super::series::Sample;

#[derive(Debug, Error)]
pub enum NetperfError {
    #[error("reading {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} line {line}: {msg}")]
    Parse {
        path: PathBuf,
        line: usize,
        msg: String,
    },
    #[error(
        "{0}: no ramp found (expected runemomniaggdemo.sh's 'Starting netperfs at', 'Pausing for', 'Resuming at' and 'Netperfs stopping' lines)"
    )]
    NoRamp(PathBuf),
    #[error("{0}: {1}; refused (a crafted or corrupt log)")]
    Span(PathBuf, String),
}

/// The ramp read from a log.
#[derive(Clone, Debug, PartialEq)]
pub struct Ramp {
    pub start: f64,
    pub end: f64,
    pub steps: Vec<StepSpan>,
}

fn num(path: &Path, line: usize, s: Option<&str>) -> Result<f64, NetperfError> {
    s.and_then(|x| x.parse::<f64>().ok())
        .filter(|v| v.is_finite())
        .ok_or_else(|| NetperfError::Parse {
            path: path.to_path_buf(),
            line,
            msg: format!(
                "expected a number at '{}'",
                crate::text::echo(s.unwrap_or(""))
            ),
        })
}

/// Parse a runemomniaggdemo.sh log.
pub fn parse_log(path: &Path, text: &str) -> Result<Ramp, NetperfError> {
    parse(path, text, f64::trunc)
}

/// Parse a log in the same words whose times are exact (thrum's own
/// `TEST_ramp.log`): no cut to whole seconds, so each window is the
/// step's `Pausing` plus one second to its `Resuming` minus one.
pub fn parse_log_exact(path: &Path, text: &str) -> Result<Ramp, NetperfError> {
    parse(path, text, |t| t)
}

fn parse(path: &Path, text: &str, whole: fn(f64) -> f64) -> Result<Ramp, NetperfError> {
    let mut start = None;
    let mut end = None;
    let mut started = 0u32;
    let mut step_began = None;
    let mut open: Option<(f64, u32)> = None;
    let mut steps = Vec::new();
    for (i, l) in text.lines().enumerate() {
        let n = i + 1;
        let f: Vec<&str> = l.split_whitespace().collect();
        if l.starts_with("Starting netperfs at") {
            let t = num(path, n, f.get(3).copied())?;
            start = Some(t);
            step_began = Some(t);
        } else if l.starts_with("Starting netperfs on") {
            started += 1;
        } else if l.starts_with("Pausing for") {
            // Pausing for D seconds at T with N netperfs running for TEST
            let t = num(path, n, f.get(5).copied())?;
            let k = num(path, n, f.get(7).copied())? as u32;
            open = Some((whole(t), k));
        } else if l.starts_with("Resuming at") {
            let t = num(path, n, f.get(2).copied())?;
            if let Some((a, k)) = open.take() {
                steps.push(span(k, step_began.unwrap_or(a), a, whole(t)));
            }
            step_began = Some(t);
        } else if l.starts_with("Netperfs started by") {
            let t = num(path, n, f.get(3).copied())?;
            open = Some((whole(t), started));
        } else if l.starts_with("Netperfs stopping") {
            let t = num(path, n, f.get(2).copied())?;
            if let Some((a, k)) = open.take() {
                steps.push(span(k, step_began.unwrap_or(a), a, whole(t) - 1.0));
            }
            end.get_or_insert(t);
        } else if l.starts_with("Netperfs stopped") {
            end = Some(num(path, n, f.get(2).copied())?);
        }
    }
    match (start, steps.is_empty()) {
        (Some(s), false) => Ok(Ramp {
            start: whole(s),
            end: end.unwrap_or_else(|| steps.last().map_or(s, |x: &StepSpan| x.window.1 + 1.0)),
            steps,
        }),
        _ => Err(NetperfError::NoRamp(path.to_path_buf())),
    }
}

fn span(streams: u32, began: f64, a: f64, b: f64) -> StepSpan {
    // netperf's logs give counts, not which processes: the first N.
    StepSpan {
        streams,
        first_stream: 0,
        started: began,
        window: (a + 1.0, b - 1.0),
    }
}

/// Interim results of one `.out` file, and their unit.
/// netperf's final `KEY=value` lines at the end of a .out file (the omni
/// output selectors: `THROUGHPUT=2500.00`, `ELAPSED_TIME=…`), as the
/// stream's summary; None when the file has none.
pub fn parse_final(text: &str) -> Option<StreamSummary> {
    let mut fields = std::collections::BTreeMap::new();
    for l in text.lines().map(str::trim) {
        let Some((k, v)) = l.split_once('=') else {
            continue;
        };
        let named = !k.is_empty()
            && k.bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
        if named && !k.starts_with("NETPERF_") && fields.len() < 256 {
            fields.insert(k.to_string(), crate::text::echo(v.trim().trim_matches('"')));
        }
    }
    if fields.is_empty() {
        return None;
    }
    let num = |k: &str| fields.get(k).and_then(|v| v.parse::<f64>().ok());
    Some(StreamSummary {
        duration_s: num("ELAPSED_TIME"),
        value: num("THROUGHPUT"),
        local_cpu_util_percent: num("LOCAL_CPU_UTIL"),
        remote_cpu_util_percent: num("REMOTE_CPU_UTIL"),
        local_service_demand: num("LOCAL_SD"),
        remote_service_demand: num("REMOTE_SD"),
        netperf: fields,
        ..StreamSummary::default()
    })
}

pub fn parse_out(text: &str) -> (Vec<Sample>, Option<String>) {
    let mut out = Vec::new();
    let mut unit = None;
    let (mut kv_value, mut kv_interval) = (None, None);
    for l in text.lines().map(str::trim) {
        if let Some(rest) = l.strip_prefix("Interim result:") {
            // Interim result: 18076.95 Trans/s over 1.000 seconds ending at 1542304520.045
            let f: Vec<&str> = rest.split_whitespace().collect();
            let p = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok());
            if let (Some(v), Some(iv), Some(e)) = (p(0), p(3), p(7)) {
                unit.get_or_insert_with(|| f[1].to_string());
                out.push(Sample {
                    end: e,
                    interval_s: iv,
                    value: v,
                });
            }
        } else if let Some((k, v)) = l.split_once('=') {
            let key = k.split('[').next().unwrap_or(k);
            let v = v.trim().trim_matches('"');
            match key {
                "NETPERF_INTERIM_RESULT" => kv_value = v.parse::<f64>().ok(),
                "NETPERF_UNITS" => {
                    unit.get_or_insert_with(|| v.to_string());
                }
                "NETPERF_INTERVAL" => kv_interval = v.parse::<f64>().ok(),
                "NETPERF_ENDING" => {
                    if let (Some(val), Some(iv), Ok(e)) =
                        (kv_value.take(), kv_interval.take(), v.parse::<f64>())
                    {
                        out.push(Sample {
                            end: e,
                            interval_s: iv,
                            value: val,
                        });
                    }
                }
                _ => {}
            }
        } else {
            // 205738.23,Trans/s,0.504,1543515683.205
            let f: Vec<&str> = l.split(',').collect();
            if f.len() == 4 {
                if let (Ok(v), Ok(iv), Ok(e)) = (
                    f[0].trim().parse::<f64>(),
                    f[2].trim().parse::<f64>(),
                    f[3].trim().parse::<f64>(),
                ) {
                    unit.get_or_insert_with(|| f[1].trim().to_string());
                    out.push(Sample {
                        end: e,
                        interval_s: iv,
                        value: v,
                    });
                }
            }
        }
    }
    out.retain(|s| s.interval_s > 0.0 && s.value.is_finite() && s.end.is_finite());
    // The unit is printed, charted and written to CSV: a file's
    // `NETPERF_UNITS=ESC]0;…` must not reach a terminal as it is.
    (out, unit.map(|u| crate::text::echo(&u)))
}

/// `netperf_tps_00003_to_lg1.out` → (3, "lg1").
fn stream_name(file: &str, prefix: &str) -> Option<(u32, String)> {
    let rest = file.strip_prefix(prefix)?.strip_prefix('_')?;
    let rest = rest.strip_suffix(".out")?;
    let (id, tail) = rest.split_once('_')?;
    let id = id.parse().ok()?;
    let server = tail.rsplit_once("to_").map_or(tail, |(_, h)| h);
    Some((id, crate::text::echo(server)))
}

/// The test name of a log: `netperf_tps.log` → `tps`.
pub fn test_name(log: &Path) -> String {
    let stem = log
        .file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
    crate::text::echo(stem.strip_prefix("netperf_").unwrap_or(&stem))
}

/// Read a log and the `.out` files beside it, and analyse them.
pub fn read(log: &Path) -> Result<TestAgg, NetperfError> {
    let io = |path: &Path| {
        let p = path.to_path_buf();
        move |source| NetperfError::Io { path: p, source }
    };
    let text =
        crate::nofollow::read_to_string(log, &crate::nofollow::NETPERF_LOG).map_err(io(log))?;
    let ramp = parse_log(log, &text)?;
    model::check_span((ramp.start, ramp.end), &ramp.steps, 0)
        .map_err(|e| NetperfError::Span(log.to_path_buf(), format!("ramp {e}")))?;
    let dir = log
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let prefix = log
        .file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
    let mut files: Vec<(u32, String, PathBuf)> = std::fs::read_dir(dir)
        .map_err(io(dir))?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            stream_name(&name, &prefix).map(|(id, srv)| (id, srv, e.path()))
        })
        .collect();
    files.sort();
    let mut unit = None;
    let mut streams = Vec::new();
    for (id, server, path) in files {
        let text = crate::nofollow::read_to_string(&path, &crate::nofollow::NETPERF_LOG)
            .map_err(io(&path))?;
        let (samples, u) = parse_out(&text);
        if unit.is_none() {
            unit = u;
        }
        streams.push(StreamSeries {
            index: id,
            server,
            started: samples.first().map(|s| s.start()),
            error: None,
            summary: parse_final(&text),
            samples,
        });
    }
    let samples = streams.iter().map(|s| s.samples.len()).sum();
    model::check_span((ramp.start, ramp.end), &ramp.steps, samples)
        .map_err(|e| NetperfError::Span(log.to_path_buf(), e))?;
    let name = test_name(log);
    let unit = unit.unwrap_or_else(|| "units/s".into());
    let mut t = model::analyse(
        &name,
        &unit,
        (ramp.start, ramp.end),
        &ramp.steps,
        streams,
        Coverage::Assumed,
    );
    if t.streams.is_empty() {
        t.warnings.push(format!(
            "no {prefix}_NNNNN_to_HOST.out files beside {}",
            log.display()
        ));
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_interim_forms() {
        let (h, u) = parse_out(
            "Interim result: 18076.95 Trans/s over 1.000 seconds ending at 1542304520.045\nnoise\n",
        );
        assert_eq!(
            h,
            vec![Sample {
                end: 1542304520.045,
                interval_s: 1.0,
                value: 18076.95
            }]
        );
        assert_eq!(u.as_deref(), Some("Trans/s"));
        let (c, _) = parse_out("205738.23,Trans/s,0.504,1543515683.205\n");
        assert_eq!(c[0].value, 205738.23);
        assert_eq!(c[0].interval_s, 0.504);
        let (k, u) = parse_out(
            "NETPERF_INTERIM_RESULT[0]=10.5\nNETPERF_UNITS[0]=10^6bits/s\nNETPERF_INTERVAL[0]=0.5\nNETPERF_ENDING[0]=100.5\n",
        );
        assert_eq!(
            k,
            vec![Sample {
                end: 100.5,
                interval_s: 0.5,
                value: 10.5
            }]
        );
        assert_eq!(u.as_deref(), Some("10^6bits/s"));
    }

    #[test]
    fn file_names() {
        assert_eq!(
            stream_name("netperf_tps_00003_to_lg1.out", "netperf_tps"),
            Some((3, "lg1".into()))
        );
        assert_eq!(stream_name("netperf_tps.log", "netperf_tps"), None);
    }

    #[test]
    fn a_log_without_a_ramp_is_an_error() {
        assert!(matches!(
            parse_log(Path::new("x.log"), "hello\n"),
            Err(NetperfError::NoRamp(_))
        ));
    }

    proptest::proptest! {
        /// Whatever the form, every interim line is read back as written.
        #[test]
        fn every_form_reads_back(
            rows in proptest::collection::vec((0.0f64..1e7, 0.001f64..10.0, 1e9f64..2e9, 0u8..3), 1..20)
        ) {
            let mut text = String::from("MIGRATED TCP REQUEST/RESPONSE TEST\n");
            for (v, iv, e, form) in &rows {
                text.push_str(&match form {
                    0 => format!("Interim result: {v:.2} Trans/s over {iv:.3} seconds ending at {e:.3}\n"),
                    1 => format!("{v:.2},Trans/s,{iv:.3},{e:.3}\n"),
                    _ => format!(
                        "NETPERF_INTERIM_RESULT[0]={v:.2}\nNETPERF_UNITS[0]=Trans/s\nNETPERF_INTERVAL[0]={iv:.3}\nNETPERF_ENDING[0]={e:.3}\n"
                    ),
                });
            }
            let (got, unit) = parse_out(&text);
            proptest::prop_assert_eq!(unit.as_deref(), Some("Trans/s"));
            let want: Vec<(String, String, String)> = rows
                .iter()
                .map(|(v, iv, e, _)| (format!("{v:.2}"), format!("{iv:.3}"), format!("{e:.3}")))
                .collect();
            let read: Vec<(String, String, String)> = got
                .iter()
                .map(|s| (format!("{:.2}", s.value), format!("{:.3}", s.interval_s), format!("{:.3}", s.end)))
                .collect();
            proptest::prop_assert_eq!(read, want);
        }
    }
}
