//! `thrum suite`: every test once against a server (`-H`) or an embedded
//! one, as a table or as JSON.

use std::process::ExitCode;

use anyhow::Result;

use super::out::target_or_embedded;
use crate::cli::SuiteArgs;
use crate::control;
use crate::control::client::Quiet;
use crate::result::TestResult;
use crate::term::StatusLine;
use crate::units::{self, BitsPerSec};

/// `thrum suite`.
pub fn suite(args: &SuiteArgs) -> Result<ExitCode> {
    let req = args.to_request()?;
    let (target, _server) = target_or_embedded(req.target, req.bind)?;
    let mut results = Vec::new();
    let status = StatusLine::stderr();
    for plan in &req.plans {
        status.draw(&format!("running {} ...", plan.test));
        let r = control::client::run(&target, plan, &mut Quiet);
        results.push(r);
    }
    status.clear();
    if req.json {
        println!("{}", serde_json::to_string_pretty(&results)?);
    } else {
        print_suite_table(&results, target.embedded);
    }
    Ok(if results.iter().all(|r| r.ok()) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn print_suite_table(results: &[TestResult], embedded: bool) {
    println!(
        "{:<11} {:>5} {:>18} {:>12} {:>12} {:>12}",
        "test", "flows", "result", "p50", "p99", "CPU s (c+s)"
    );
    for r in results {
        let s = &r.summary;
        let head = match (s.throughput_bps, &s.error) {
            (_, Some(_)) => "failed".to_string(),
            (Some(t), None) => BitsPerSec(t).to_string(),
            (None, None) => format!("{:.0} trans/s", s.transactions_per_s.unwrap_or(0.0)),
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
        // Results on stdout, the error on stderr (the row says "failed").
        if let Some(e) = &s.error {
            eprintln!("error: {}: {e}", r.test.name());
        }
    }
    if embedded {
        println!(
            "(loopback, embedded server in this process: CPU is the whole process, both ends)"
        );
    } else {
        println!("(CPU is this client's process)");
    }
}
