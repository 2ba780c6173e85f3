//! `thrum sweep`: one test over a grid of request/response sizes, bursts
//! and flows, each cell checked against the packet rate it should show.

use std::process::ExitCode;

use anyhow::{Context, Result, bail};

use super::out::print;
use super::progress::Ticker;
use crate::agg::sweep::{Cell, Sweep};
use crate::cli::{SweepArgs, target_for};
use crate::control::client::{self, Quiet, Target};
use crate::control::server::EmbeddedServer;
use crate::export::write_atomic;
use crate::plan::{TestKind, TestPlan};

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
    crate::control::stop::on_signals().context("installing signal handlers")?;
    // Each cell runs its warm-up and window, plus set-up the line cannot know.
    let per_cell: u64 = plans.iter().map(|p| p.warmup_ns + p.duration_ns).sum();
    let ticker = Ticker::start(
        std::io::IsTerminal::is_terminal(&std::io::stderr()),
        "sweep",
        Some(std::time::Duration::from_nanos(per_cell)),
    );
    let mut cells = Vec::new();
    for (i, p) in plans.iter().enumerate() {
        // Ctrl-C: the cells measured so far are the sweep ("-" for the rest).
        if crate::control::stop::requested() {
            break;
        }
        ticker.set(format!(
            "cell {}/{}: burst {}, {} flow(s)",
            i + 1,
            plans.len(),
            p.burst,
            p.flows
        ));
        let r = client::run(&target, p, &mut Quiet);
        let s = &r.summary;
        if let Some(e) = &s.error {
            ticker.above(|| eprintln!("cell burst {}, flows {}: {e}", p.burst, p.flows));
        }
        cells.push(Cell::of(p, s));
    }
    drop(ticker);
    let sw = Sweep {
        schema: "thrum.sweep.v1".into(),
        test: kind.name().into(),
        server: target.label.clone(),
        rr_sizes: sizes,
        bursts,
        flows,
        cells,
    };
    if args.json {
        print(&format!("{}\n", serde_json::to_string_pretty(&sw)?))?;
    } else {
        print(&sw.table())?;
    }
    for p in &args.export_csv {
        write_atomic(p, sw.csv().as_bytes())
            .with_context(|| format!("writing --export-csv {}", p.display()))?;
    }
    for p in &args.export_json {
        write_atomic(p, &serde_json::to_vec_pretty(&sw)?)
            .with_context(|| format!("writing --export-json {}", p.display()))?;
    }
    if crate::control::stop::requested() {
        eprintln!("error: {}", crate::control::stop::INTERRUPTED);
        return Ok(ExitCode::from(crate::control::stop::EXIT_INTERRUPTED));
    }
    Ok(if sw.cells.iter().any(|c| c.error.is_some()) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
