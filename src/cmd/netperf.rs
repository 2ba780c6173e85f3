//! `thrum netperf ARGS`, and thrum run as `netperf`: netperf's command
//! line turned into thrum's request ([`crate::netperf::parse`]), the test
//! run against the thrum server it names (`thrum server -p 12865`), and
//! the result printed as netperf prints it ([`crate::export::netperf`]):
//! the header line before the test, demo mode's interim lines as each
//! interval completes, then the table or the selected fields; `--json`
//! writes the document `thrum run --json` does instead.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::control;
use crate::control::client::Observer;
use crate::export::netperf::{InterimLines, Netperf, Print, header};
use crate::export::{self, Exporter};
use crate::netperf::{Request, RunRequest};
use crate::plan::TestPlan;
use crate::result::Interval;

/// Demo mode: each interval's interim line on stdout as it completes.
struct DemoLines<'a> {
    print: &'a Print,
    plan: &'a TestPlan,
    lines: InterimLines,
}

impl Observer for DemoLines<'_> {
    fn on_interval(&mut self, iv: &Interval) {
        if let Some(line) = self.lines.line(self.print, iv, self.plan) {
            let _ = super::out::print(&line);
            let _ = std::io::stdout().flush();
        }
    }
}

/// Run one netperf command line; the exit code is netperf's habit: 0 when
/// the test ran, non-zero when it could not.
pub fn netperf(args: &[String]) -> Result<ExitCode> {
    let req = match crate::netperf::parse(args)? {
        Request::Help => {
            super::out::print(crate::netperf::HELP)?;
            return Ok(ExitCode::SUCCESS);
        }
        Request::Version => {
            super::out::print(&format!(
                "thrum {} taking netperf 2.7's command line (thrum netperf --help)\n",
                env!("CARGO_PKG_VERSION")
            ))?;
            return Ok(ExitCode::SUCCESS);
        }
        Request::Run(r) => r,
    };
    run(&req)
}

fn run(req: &RunRequest) -> Result<ExitCode> {
    for n in &req.notes {
        eprintln!("note: {n}");
    }
    control::stop::on_signals().context("installing signal handlers")?;
    let print = &req.print;
    let target = &req.target;
    if print.headers && !req.json {
        let local = target.bind.unwrap_or(if target.addr.is_ipv4() {
            std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED)
        } else {
            std::net::IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED)
        });
        super::out::print(&header(print, &req.plan, local, &target.label, target.addr))?;
        let _ = std::io::stdout().flush();
    }
    if !req.wait.is_zero() {
        std::thread::sleep(req.wait);
    }
    let mut demo = DemoLines {
        print,
        plan: &req.plan,
        lines: InterimLines::default(),
    };
    let mut quiet = control::client::Quiet;
    let observer: &mut dyn Observer = if req.demo.is_some() && !req.json {
        &mut demo
    } else {
        &mut quiet
    };
    let mut result = match req.repeat {
        Some(rep) => control::client::run_repeated(target, &req.plan, rep, observer, &mut |_| {}),
        None => control::client::run(target, &req.plan, observer),
    };
    if let Some(u) = &req.uuid {
        result.environment.uuid = u.clone();
    }
    result.environment.brand = req.brand.clone();
    let measured = !result.intervals.is_empty() || result.summary.error.is_none();
    if req.json {
        super::out::print(&export::render(&export::json::Json, &result))?;
    } else if measured {
        let exporter: &dyn Exporter = &Netperf {
            print: print.clone(),
        };
        super::out::print(&export::render(exporter, &result))?;
    }
    if let Some(e) = &result.summary.error {
        eprintln!("error: {e}");
        if control::stop::requested() {
            return Ok(ExitCode::from(control::stop::EXIT_INTERRUPTED));
        }
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
