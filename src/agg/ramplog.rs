//! The ramp as a plain-text log in runemomniaggdemo.sh's words, written as
//! `TEST_ramp.log` beside results.json and read back by `thrum report`.
//!
//! The lines are the script's (`Starting netperfs at T`, `Starting
//! netperfs on HOST targeting LG`, `Pausing for D seconds at T with N
//! netperfs running`, `Resuming at T`, `Netperfs stopping T`, `Netperfs
//! stopped T`, each ending `for TEST`; T in unix seconds), so that the
//! reader of netperf's logs ([`super::netperf::parse_log`]) and
//! post_proc.py's habits read it as they read the script's. A step's
//! `Pausing` is when its last stream started and its `Resuming` when the
//! next step began (the last step's, when the ramp ended), to the
//! millisecond; `thrum report` reads the times as written
//! ([`super::netperf::parse_log_exact`]), so the windows are thrum's own
//! (one second trimmed at each end). Read as post_proc.py does (whole
//! seconds), they lie within a second of them.
//!
//! `thrum report` reads it two ways: beside a results.json, it checks that
//! the saved steps are the logged ones (a warning names the first step
//! that differs); in a directory without results.json, the log and
//! `TEST_streams.csv` are the run, and the report marks the logged steps.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::model::{self, Coverage, StreamSeries, TestAgg};
use super::netperf::{self, NetperfError, Ramp};
use super::series::Sample;

/// The file name of a test's ramp log.
pub fn file_name(test_file_part: &str) -> String {
    format!("{test_file_part}_ramp.log")
}

/// Whether `p` names a ramp log thrum wrote.
pub fn is_ramp_log(p: &Path) -> bool {
    p.file_name()
        .is_some_and(|n| n.to_string_lossy().ends_with("_ramp.log"))
}

/// The test's ramp in runemomniaggdemo.sh's words. `trim_s` is the
/// seconds each window was trimmed after its last stream started.
pub fn write(t: &TestAgg, trim_s: f64) -> String {
    let mut s = String::new();
    let name = &t.name;
    let _ = writeln!(s, "Starting netperfs at {:.3} for {name}", t.start);
    let mut begun = 0u32;
    for (i, st) in t.steps.iter().enumerate() {
        // The streams this step added: a ramp's new ones, or the sync
        // test's one stream of the step.
        let added = if st.first_stream > 0 || st.streams <= begun {
            st.first_stream..st.first_stream + st.streams
        } else {
            begun..st.first_stream + st.streams
        };
        for k in added.clone() {
            let lg = t
                .streams
                .iter()
                .find(|x| x.index == k)
                .map_or("?", |x| x.server.as_str());
            let _ = writeln!(
                s,
                "Starting netperfs on localhost targeting {lg} for {name}"
            );
        }
        begun = begun.max(added.end);
        let last_start = st.start - trim_s;
        let next = t.steps.get(i + 1).map_or(t.end, |n| n.started);
        let _ = writeln!(
            s,
            "Pausing for {:.0} seconds at {last_start:.3} with {} netperfs running for {name}",
            (next - last_start).max(0.0),
            st.streams
        );
        let _ = writeln!(s, "Resuming at {next:.3} for {name}");
    }
    let _ = writeln!(s, "Netperfs stopping {:.3} for {name}", t.end);
    let stopped = t
        .streams
        .iter()
        .filter_map(|x| x.samples.last().map(|l| l.end))
        .fold(t.end, f64::max);
    let _ = writeln!(s, "Netperfs stopped {stopped:.3} for {name}");
    s
}

/// Where the saved steps and the logged ramp differ, if they do: the
/// number of steps, a step's stream count, or a window more than 2 ms
/// from the logged one (the log's times are to the millisecond).
pub fn disagreement(t: &TestAgg, ramp: &Ramp) -> Option<String> {
    if t.steps.len() != ramp.steps.len() {
        return Some(format!(
            "results.json has {} step(s), the ramp log {}",
            t.steps.len(),
            ramp.steps.len()
        ));
    }
    for (st, sp) in t.steps.iter().zip(&ramp.steps) {
        if st.streams != sp.streams {
            return Some(format!(
                "step {}: {} stream(s) in results.json, {} in the ramp log",
                st.index, st.streams, sp.streams
            ));
        }
        let off = (st.start - sp.window.0)
            .abs()
            .max((st.end - sp.window.1).abs());
        // The log's times are written to the millisecond.
        if off > 0.002 {
            return Some(format!(
                "step {}: window {:.3}..{:.3} in results.json, {:.0}..{:.0} in the ramp log",
                st.index, st.start, st.end, sp.window.0, sp.window.1
            ));
        }
    }
    None
}

/// Read the ramp of `log`.
pub fn read_ramp(log: &Path) -> Result<Ramp, NetperfError> {
    let text =
        crate::nofollow::read_to_string(log, &crate::nofollow::NETPERF_LOG).map_err(|source| {
            NetperfError::Io {
                path: log.to_path_buf(),
                source,
            }
        })?;
    let ramp = netperf::parse_log_exact(log, &text)?;
    model::check_span((ramp.start, ramp.end), &ramp.steps, 0)
        .map_err(|e| NetperfError::Span(log.to_path_buf(), format!("ramp {e}")))?;
    Ok(ramp)
}

/// The streams of a `TEST_streams.csv` (`stream,server,start_unix_s,
/// end_unix_s,interval_s,value,unit`), and the unit; rows that do not
/// parse are skipped.
pub fn parse_streams_csv(text: &str) -> (Vec<StreamSeries>, Option<String>) {
    let mut streams: Vec<StreamSeries> = Vec::new();
    let mut unit = None;
    for l in text.lines().skip(1) {
        let f: Vec<&str> = l.rsplitn(6, ',').collect();
        // From the right: unit, value, interval, end, start, "stream,server".
        let [u, value, interval, end, _start, head] = f[..] else {
            continue;
        };
        let Some((id, server)) = head.split_once(',') else {
            continue;
        };
        let (Ok(id), Ok(value), Ok(interval_s), Ok(end)) = (
            id.parse::<u32>(),
            value.parse::<f64>(),
            interval.parse::<f64>(),
            end.parse::<f64>(),
        ) else {
            continue;
        };
        if !(value.is_finite() && end.is_finite() && interval_s > 0.0) {
            continue;
        }
        unit.get_or_insert_with(|| crate::text::echo(u.trim_matches('"')));
        let x = Sample {
            end,
            interval_s,
            value,
        };
        match streams.iter_mut().find(|s| s.index == id) {
            Some(s) => s.samples.push(x),
            None => streams.push(StreamSeries {
                index: id,
                server: crate::text::echo(server.trim_matches('"')),
                started: Some(x.start()),
                error: None,
                samples: vec![x],
                summary: None,
            }),
        }
    }
    streams.sort_by_key(|s| s.index);
    (streams, unit)
}

/// A test from its ramp log and the `TEST_streams.csv` beside it (a
/// directory that lost its results.json): the logged steps over the
/// streams' samples.
pub fn read(log: &Path) -> Result<TestAgg, NetperfError> {
    let ramp = read_ramp(log)?;
    let name = log
        .file_name()
        .map(|n| {
            n.to_string_lossy()
                .trim_end_matches("_ramp.log")
                .to_string()
        })
        .unwrap_or_default();
    let csv: PathBuf = log.with_file_name(format!("{name}_streams.csv"));
    let (streams, unit) = match crate::nofollow::read_to_string(&csv, &crate::nofollow::NETPERF_LOG)
    {
        Ok(text) => parse_streams_csv(&text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Vec::new(), None),
        Err(source) => return Err(NetperfError::Io { path: csv, source }),
    };
    let samples = streams.iter().map(|s| s.samples.len()).sum();
    model::check_span((ramp.start, ramp.end), &ramp.steps, samples)
        .map_err(|e| NetperfError::Span(log.to_path_buf(), e))?;
    let no_csv = streams.is_empty();
    let mut t = model::analyse(
        &crate::text::echo(&name),
        &unit.unwrap_or_else(|| "units/s".into()),
        (ramp.start, ramp.end),
        &ramp.steps,
        streams,
        Coverage::Assumed,
    );
    if no_csv {
        t.warnings.push(format!(
            "no streams in {} beside {}: the steps have no figures",
            csv.display(),
            log.display()
        ));
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agg::model::{StepSpan, analyse};

    use crate::agg::model::fixtures::stream;

    /// A ramp written in the script's words reads back, with the netperf
    /// reader, to the same steps, stream counts and windows within a
    /// second (whole seconds); the streams CSV brings back the figures.
    #[test]
    fn the_log_reads_back_to_the_ramp() {
        let streams = vec![
            stream(0, "lg1", 1000.2, 1012.0, 100.0),
            stream(1, "lg2", 1006.3, 1012.0, 50.0),
        ];
        let spans = [
            StepSpan {
                streams: 1,
                first_stream: 0,
                started: 1000.0,
                window: (1001.2, 1005.0),
            },
            StepSpan {
                streams: 2,
                first_stream: 0,
                started: 1006.0,
                window: (1007.3, 1011.0),
            },
        ];
        let t = analyse(
            "tps",
            "Trans/s",
            (1000.0, 1012.0),
            &spans,
            streams,
            Coverage::Required { slack_s: 0.05 },
        );
        let text = write(&t, 1.0);
        assert!(text.starts_with("Starting netperfs at 1000.000 for tps\n"));
        assert!(text.contains("Starting netperfs on localhost targeting lg2 for tps"));
        assert!(text.contains("Pausing for 6 seconds at 1006.300 with 2 netperfs running for tps"));
        assert!(text.contains("Netperfs stopping 1012.000 for tps"));
        let ramp = netperf::parse_log(Path::new("tps_ramp.log"), &text).unwrap();
        assert_eq!(ramp.steps.len(), 2);
        // Exact, as `report` reads it: thrum's windows.
        let exact = netperf::parse_log_exact(Path::new("tps_ramp.log"), &text).unwrap();
        assert_eq!(disagreement(&t, &exact), None);
        for (st, sp) in t.steps.iter().zip(&exact.steps) {
            assert!((sp.window.0 - st.start).abs() < 1e-3 && (sp.window.1 - st.end).abs() < 1e-3);
        }
        for (st, sp) in t.steps.iter().zip(&ramp.steps) {
            assert_eq!(st.streams, sp.streams);
            assert!((sp.window.0 - st.start).abs() < 1.0);
            assert!((sp.window.1 - st.end).abs() < 1.0);
        }
        // A saved result whose steps differ from the log is named.
        let mut other = t.clone();
        other.steps[1].streams = 3;
        assert!(
            disagreement(&other, &exact)
                .unwrap()
                .starts_with("step 1: 3 stream(s)")
        );
        // The streams CSV as `agg` writes it, read back.
        let csv = "stream,server,start_unix_s,end_unix_s,interval_s,value,unit\n\
                   0,lg1,1000.2,1000.7,0.5,100,Trans/s\n\
                   1,\"lg,2\",1000.2,1000.7,0.5,50,Trans/s\nbad\n";
        let (s, unit) = parse_streams_csv(csv);
        assert_eq!(unit.as_deref(), Some("Trans/s"));
        assert_eq!(s.len(), 2);
        assert_eq!(s[1].server, "lg,2");
        assert_eq!(s[1].samples[0].value, 50.0);
    }
}
