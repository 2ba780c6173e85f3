//! `thrum agg`: the aggregate method end to end. It checks that every
//! load generator answers, finds the burst when asked, runs the ramp of
//! each test and writes the output directory after every test. Everything
//! it computes lives in [`crate::agg`].

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};

use super::find_burst::BURST_MIN_GAIN;
use super::out::{finish, say_test, write_dir};
use crate::agg::kinds::AggTest;
use crate::agg::model::{self, AggResult, AggSpec};
use crate::agg::progress::RampProgress;
use crate::agg::run::{self, RampConfig};
use crate::cli::{AggArgs, BurstChoice, target_for};
use crate::control::client::{self, Quiet, Target};
use crate::plan::{TestKind, TestPlan};
use crate::result::Environment;

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

fn provenance() -> serde_json::Value {
    serde_json::to_value(Environment::gather()).unwrap_or_default()
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
    crate::control::stop::on_signals().context("installing signal handlers")?;
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
        say_test(&t, &args.output)?;
        result.tests.push(t);
        // After every test, so a later failure keeps what was gathered.
        write_dir(&out, &result, args.output.individual)?;
        if crate::control::stop::requested() {
            break;
        }
    }
    finish(&result, &args.output, Some(&out))?;
    if crate::control::stop::requested() {
        eprintln!("error: {}", crate::control::stop::INTERRUPTED);
        return Ok(ExitCode::from(crate::control::stop::EXIT_INTERRUPTED));
    }
    Ok(if failed {
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
