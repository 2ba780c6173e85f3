//! `thrum sweep`: one test over a grid of request/response sizes, bursts
//! and flows, each cell checked against the packet rate it should show.

use std::process::ExitCode;

use anyhow::{Context, Result};

use super::out::print;
use super::progress::Ticker;
use crate::agg::sweep::{Cell, Sweep};
use crate::cli::SweepArgs;
use crate::control::client::{self, Quiet, Target};
use crate::control::server::EmbeddedServer;
use crate::export::write_atomic;

/// `thrum sweep`.
pub fn sweep(args: &SweepArgs) -> Result<ExitCode> {
    let req = args.to_request()?;
    let store = args.store.to_request()?;
    let plans = &req.plans;
    let (target, _server) = match &req.target {
        Some(t) => (t.clone(), None),
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
        test: req.test.name().into(),
        server: target.label.clone(),
        rr_sizes: req.rr_sizes.clone(),
        bursts: req.bursts.clone(),
        flows: req.flows.clone(),
        cells,
    };
    if req.json {
        print(&format!("{}\n", serde_json::to_string_pretty(&sw)?))?;
    } else {
        print(&sw.table())?;
    }
    for p in &req.export_csv {
        write_atomic(p, sw.csv().as_bytes())
            .with_context(|| format!("writing --export-csv {}", p.display()))?;
    }
    for p in &req.export_json {
        write_atomic(p, &serde_json::to_vec_pretty(&sw)?)
            .with_context(|| format!("writing --export-json {}", p.display()))?;
    }
    let doc = serde_json::to_value(&sw).context("the sweep as JSON")?;
    super::save::save(&store, "sweep", &sw.test, &sw.server, &doc);
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
