//! `thrum agg`: the aggregate method end to end. It checks that every
//! load generator answers, finds the burst when asked, runs the ramp of
//! each test and writes the output directory after every test. Everything
//! it computes lives in [`crate::agg`].

use std::process::ExitCode;

use anyhow::{Context, Result, bail};

use super::find_burst::BURST_MIN_GAIN;
use super::out::{finish, say_test, write_dir};
use crate::agg::kinds::AggTest;
use crate::agg::model::{self, AggResult, AggSpec};
use crate::agg::progress::RampProgress;
use crate::agg::run::{self, RampConfig};
use crate::cli::{AggArgs, BurstChoice};
use crate::control::client::{self, Quiet, Target};
use crate::plan::{TestKind, TestPlan};
use crate::result::Environment;
use crate::term::StatusLine;

/// bidir's burst under `--burst auto`: runemomniaggdemo.sh's `-b 12`, whose
/// 13 transactions of 64K in flight fit the 1M socket buffers.
const BIDIR_AUTO_BURST: u32 = 12;

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
    let req = args.to_request()?;
    crate::control::stop::on_signals().context("installing signal handlers")?;
    let (targets, out) = (&req.targets, &req.dir);
    let mut result = AggResult {
        schema: model::SCHEMA.into(),
        source: "thrum agg".into(),
        spec: AggSpec {
            hosts: req.hosts.clone(),
            tests: req.tests.iter().map(|t| t.name().to_string()).collect(),
            max_streams: req.max_streams,
            step_s: req.step.as_secs_f64(),
            interval_s: req.interval.as_secs_f64(),
            burst: match req.burst {
                BurstChoice::Auto => "auto".into(),
                BurstChoice::Fixed(n) => n.to_string(),
            },
            trim_s: 1.0,
            title: req.output.title.clone(),
            annotation: req.output.annotation.clone(),
        },
        provenance: provenance(),
        tests: Vec::new(),
    };
    let cfg = RampConfig {
        targets: targets.clone(),
        max_streams: req.max_streams,
        step: req.step,
        interval: req.interval,
        trim: std::time::Duration::from_secs(1),
    };
    preflight(targets)?;
    let search = match req.burst {
        BurstChoice::Auto if req.tests.contains(&AggTest::Tps) => {
            let status = StatusLine::stderr();
            status.draw(&format!(
                "finding the burst against {} ...",
                targets[0].label
            ));
            let s = run::find_burst(&targets[0], req.burst_probe, BURST_MIN_GAIN)
                .context("--burst auto: the burst search failed")?;
            Some(s)
        }
        _ => None,
    };
    // As runemomniaggdemo.sh: the search is for tps; bidir keeps 13 × 64K in
    // flight, inside its 1M socket buffers, unless a burst is given.
    let burst_of = |t: AggTest| match (req.burst, &search, t) {
        (BurstChoice::Fixed(n), _, _) => n,
        (BurstChoice::Auto, Some(s), AggTest::Tps) => s.burst,
        (BurstChoice::Auto, _, AggTest::Bidir) => BIDIR_AUTO_BURST,
        (BurstChoice::Auto, _, _) => 0,
    };
    let mut progress = RampProgress::new();
    let mut failed = false;
    for &test in &req.tests {
        let mut t = run::run_ramp(test, burst_of(test), &cfg, &mut progress);
        if test == AggTest::Tps {
            t.burst_search = search.clone();
        }
        failed |= model::failed(&t);
        say_test(&t, &req.output)?;
        result.tests.push(t);
        // After every test, so a later failure keeps what was gathered.
        write_dir(out, &result, req.output.individual)?;
        if crate::control::stop::requested() {
            break;
        }
    }
    finish(&result, &req.output, Some(out))?;
    let doc = serde_json::to_value(&result).context("the result as JSON")?;
    super::save::save(
        &req.store,
        "agg",
        &result.spec.tests.join(","),
        &req.hosts.join(","),
        &doc,
    );
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
