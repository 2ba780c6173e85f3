//! The aggregate commands end to end: `thrum agg`, `find-burst`, `sweep`
//! and `report`. They sit above `export` because they write the charts and
//! the page; everything they compute lives in [`crate::agg`].

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};

use crate::agg::kinds::AggTest;
use crate::agg::model::{self, AggResult, AggSpec, Coverage, TestAgg};
use crate::agg::progress::RampProgress;
use crate::agg::run::{self, RampConfig};
use crate::agg::sweep::{self, Cell, Sweep};
use crate::agg::{burst, netperf};
use crate::cli::{AggArgs, BurstChoice, FindBurstArgs, ReportArgs, SweepArgs, target_for};
use crate::control::client::{self, Quiet, Target};
use crate::control::server::EmbeddedServer;
use crate::export::{chart, html, write_atomic};
use crate::plan::{TestKind, TestPlan};
use crate::result::Environment;

/// A rise of less than this fraction ends the burst search.
const BURST_MIN_GAIN: f64 = 0.01;
/// bidir's burst under `--burst auto`: runemomniaggdemo.sh's `-b 12`, whose
/// 13 transactions of 64K in flight fit the 1M socket buffers.
const BIDIR_AUTO_BURST: u32 = 12;

/// `YYYYmmdd-HHMMSS` (UTC) of a unix time, for the default output directory.
pub fn date_stamp(unix_s: u64) -> String {
    let (days, secs) = ((unix_s / 86_400) as i64, unix_s % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

fn print(text: &str) -> Result<()> {
    let mut so = std::io::stdout().lock();
    match so.write_all(text.as_bytes()).and_then(|_| so.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.context("writing to standard output"),
    }
}

fn provenance() -> serde_json::Value {
    serde_json::to_value(Environment::gather()).unwrap_or_default()
}

/// One row per sample per stream.
pub fn streams_csv(t: &TestAgg) -> String {
    let mut s = String::from("stream,server,start_unix_s,end_unix_s,interval_s,value,unit\n");
    for st in &t.streams {
        for x in &st.samples {
            s.push_str(&format!(
                "{},{},{:.6},{:.6},{:.6},{},{}\n",
                st.index,
                st.server,
                x.start(),
                x.end,
                x.interval_s,
                x.value,
                t.unit
            ));
        }
    }
    s
}

/// File-name form of a test name.
fn file_part(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Write results.json, TEST_streams.csv, TEST_overall.svg, report.html (and per-stream SVGs).
pub fn write_dir(dir: &Path, r: &AggResult, individual: bool) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("--out: creating {}", dir.display()))?;
    let w = |name: String, bytes: &[u8]| {
        let p = dir.join(&name);
        write_atomic(&p, bytes).with_context(|| format!("writing {}", p.display()))
    };
    w("results.json".into(), &serde_json::to_vec_pretty(r)?)?;
    let mut svgs = Vec::new();
    for t in &r.tests {
        let f = file_part(&t.name);
        w(format!("{f}_streams.csv"), streams_csv(t).as_bytes())?;
        let svg = chart::overall_svg(t);
        w(format!("{f}_overall.svg"), svg.as_bytes())?;
        svgs.push(svg);
        if individual {
            for (i, s) in t.streams.iter().enumerate() {
                w(
                    format!("{f}_stream_{}.svg", s.index),
                    chart::stream_svg(t, i).as_bytes(),
                )?;
            }
        }
    }
    w("report.html".into(), html::report(r, &svgs).as_bytes())?;
    Ok(())
}

/// A 50 ms tcp_rr to every load generator before the ramp, so that a
/// server that is down or refuses us is named at once instead of failing
/// every stream sent its way for the length of the ramp.
fn preflight(targets: &[Target]) -> Result<()> {
    for t in targets {
        let mut plan = TestPlan::new(TestKind::TcpRr);
        plan.warmup_ns = 0;
        plan.duration_ns = 50_000_000;
        plan.interval_ns = 50_000_000;
        let r = client::run(t, &plan, &mut Quiet);
        if let Some(e) = r.summary.error {
            bail!("load generator {}: {e}", t.label);
        }
    }
    Ok(())
}

/// `thrum agg`.
pub fn agg(args: &AggArgs) -> Result<ExitCode> {
    args.check()?;
    let hosts = args.host_list()?;
    let tests = args.test_list()?;
    let max_streams = args.max_streams(hosts.len())?;
    let targets: Vec<Target> = hosts
        .iter()
        .map(|h| target_for(h, args.psk_file.as_deref()))
        .collect::<Result<_>>()?;
    let out = args.output.out.clone().unwrap_or_else(|| {
        PathBuf::from(format!("thrum-agg-{}", date_stamp(run::unix_now() as u64)))
    });
    let mut result = AggResult {
        schema: model::SCHEMA.into(),
        source: "thrum agg".into(),
        spec: AggSpec {
            hosts: hosts.clone(),
            tests: tests.iter().map(|t| t.name().to_string()).collect(),
            max_streams,
            step_s: args.step.as_secs_f64(),
            interval_s: args.interval.as_secs_f64(),
            burst: match args.burst {
                BurstChoice::Auto => "auto".into(),
                BurstChoice::Fixed(n) => n.to_string(),
            },
            trim_s: 1.0,
        },
        provenance: provenance(),
        tests: Vec::new(),
    };
    let cfg = RampConfig {
        targets: targets.clone(),
        max_streams,
        step: args.step,
        interval: args.interval,
        trim: std::time::Duration::from_secs(1),
    };
    preflight(&targets)?;
    let search = match args.burst {
        BurstChoice::Auto if tests.contains(&AggTest::Tps) => {
            if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
                eprint!("\rfinding the burst against {} ...", targets[0].label);
            }
            let s = run::find_burst(&targets[0], args.burst_probe, BURST_MIN_GAIN)
                .context("--burst auto: the burst search failed")?;
            Some(s)
        }
        _ => None,
    };
    // As runemomniaggdemo.sh: the search is for tps; bidir keeps 13 × 64K in
    // flight, inside its 1M socket buffers, unless a burst is given.
    let burst_of = |t: AggTest| match (args.burst, &search, t) {
        (BurstChoice::Fixed(n), _, _) => n,
        (BurstChoice::Auto, Some(s), AggTest::Tps) => s.burst,
        (BurstChoice::Auto, _, AggTest::Bidir) => BIDIR_AUTO_BURST,
        (BurstChoice::Auto, _, _) => 0,
    };
    let mut progress = RampProgress::new();
    let mut failed = false;
    for test in tests {
        let mut t = run::run_ramp(test, burst_of(test), &cfg, &mut progress);
        if test == AggTest::Tps {
            t.burst_search = search.clone();
        }
        failed |= model::failed(&t);
        print(&model::summary_text(&t, args.output.intervals))?;
        result.tests.push(t);
        // After every test, so a later failure keeps what was gathered.
        write_dir(&out, &result, args.output.individual)?;
    }
    print(&format!("results in {}\n", out.display()))?;
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// `thrum find-burst`.
pub fn find_burst(args: &FindBurstArgs) -> Result<ExitCode> {
    if args.probe < std::time::Duration::from_millis(100)
        || args.probe > std::time::Duration::from_secs(600)
    {
        bail!(
            "--probe {:?} is out of range (accepted: 100ms..=600s)",
            args.probe
        );
    }
    let target = target_for(&args.host, args.psk_file.as_deref())?;
    let s = run::find_burst(&target, args.probe, BURST_MIN_GAIN)?;
    if args.json {
        print(&format!("{}\n", serde_json::to_string_pretty(&s)?))?;
    } else {
        let mut o = String::from("   burst      trans/s\n");
        for (b, v) in &s.tried {
            o.push_str(&format!("{b:>8} {v:>12.1}\n"));
        }
        o.push_str(&format!(
            "burst {} (the last that raised transactions/s by more than {:.0} %; up to {})\n",
            s.burst,
            BURST_MIN_GAIN * 100.0,
            burst::MAX_BURST
        ));
        print(&o)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `thrum sweep`.
pub fn sweep(args: &SweepArgs) -> Result<ExitCode> {
    let kind: TestKind = args.test.parse()?;
    let (bursts, flows) = (args.burst.0.clone(), args.flows.0.clone());
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let mut sizes = args.rr_size.clone();
    sizes.dedup();
    let mut plans = Vec::new();
    for &rr in &sizes {
        for &b in &bursts {
            for &f in &flows {
                let mut p = TestPlan::new(kind);
                p.burst = b;
                p.flows = f;
                p.threads = f.clamp(1, ncpu);
                p.duration_ns = args.duration.as_nanos() as u64;
                (p.request_bytes, p.response_bytes) = rr;
                p.validate().with_context(|| {
                    format!("sweep cell -r {},{} burst {b}, flows {f}", rr.0, rr.1)
                })?;
                plans.push(p);
            }
        }
    }
    let (target, _server) = match &args.host {
        Some(h) => (target_for(h, args.psk_file.as_deref())?, None),
        None if args.psk_file.is_some() => {
            bail!("--psk-file needs -H: the embedded server asks for no key")
        }
        None => {
            let s = EmbeddedServer::start().context("starting the embedded server")?;
            let t = Target {
                addr: s.addr,
                label: "embedded".into(),
                bind: None,
                embedded: true,
                psk: None,
            };
            (t, Some(s))
        }
    };
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut cells = Vec::new();
    for (i, p) in plans.iter().enumerate() {
        if terminal {
            eprint!(
                "\r\x1b[2Kcell {}/{}: burst {}, flows {}",
                i + 1,
                plans.len(),
                p.burst,
                p.flows
            );
        }
        let r = client::run(&target, p, &mut Quiet);
        let s = &r.summary;
        if let Some(e) = &s.error {
            if terminal {
                eprintln!();
            }
            eprintln!("cell burst {}, flows {}: {e}", p.burst, p.flows);
        }
        cells.push(Cell {
            request_bytes: p.request_bytes,
            response_bytes: p.response_bytes,
            burst: p.burst,
            flows: p.flows,
            transactions_per_s: s.transactions_per_s,
            throughput_bps: s.throughput_bps,
            tx_packets_per_s: s.tx_packets_per_s,
            rx_packets_per_s: s.rx_packets_per_s,
            valid: sweep::packets_match(p, s),
            error: s.error.clone(),
        });
    }
    if terminal {
        eprint!("\r\x1b[2K");
    }
    let sw = Sweep {
        schema: "thrum.sweep.v1".into(),
        test: kind.name().into(),
        server: target.label.clone(),
        rr_sizes: sizes,
        bursts,
        flows,
        cells,
    };
    print(&sw.table())?;
    if let Some(p) = &args.csv {
        write_atomic(p, sw.csv().as_bytes())
            .with_context(|| format!("writing --csv {}", p.display()))?;
    }
    if let Some(p) = &args.json {
        write_atomic(p, &serde_json::to_vec_pretty(&sw)?)
            .with_context(|| format!("writing --json {}", p.display()))?;
    }
    Ok(if sw.cells.iter().any(|c| c.error.is_some()) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Load what `thrum report PATH` names.
pub fn load(path: &Path) -> Result<AggResult> {
    let is_log = |p: &Path| {
        p.extension().is_some_and(|e| e == "log")
            && p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("netperf_"))
    };
    if path.is_dir() {
        let json = path.join("results.json");
        if json.is_file() {
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
    let saved: AggResult = serde_json::from_str(&text).with_context(|| {
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

/// `thrum report`.
pub fn report(args: &ReportArgs) -> Result<ExitCode> {
    let r = load(&args.path)?;
    for t in &r.tests {
        print(&model::summary_text(t, args.output.intervals))?;
    }
    if let Some(dir) = &args.output.out {
        write_dir(dir, &r, args.output.individual)?;
        print(&format!("results in {}\n", dir.display()))?;
    }
    // The run's verdict: a report of a failed run fails as `agg` did.
    Ok(if r.tests.iter().any(model::failed) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn date_stamps() {
        assert_eq!(date_stamp(0), "19700101-000000");
        assert_eq!(date_stamp(1_795_000_000), "20261118-110640");
        assert_eq!(date_stamp(951_782_400), "20000229-000000");
    }
}
