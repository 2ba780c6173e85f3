//! `thrum sweep`: one test over a grid (the product of its dimensions:
//! bursts, flows, sizes, any load option, CPU pinning pairs), each cell
//! run once or to a confidence interval, checked against the packet rate
//! it should show. Ctrl-C keeps the cells measured and marks the cut one.

use std::process::ExitCode;

use anyhow::{Context, Result};

use super::out::print;
use super::progress::Ticker;
use crate::cli::SweepArgs;
use crate::control::client::{self, Quiet, Target};
use crate::control::server::EmbeddedServer;
use crate::export::write_atomic;
use crate::sweep::{Cell, SCHEMA, Sweep};
use crate::sweep::{journal, nic, spread};

/// `thrum sweep`.
pub fn sweep(args: &SweepArgs) -> Result<ExitCode> {
    if let Some(dev) = args.restore_nic() {
        eprintln!("{}", nic::restore(dev, &journal::Journals::locate()?)?);
        return Ok(ExitCode::SUCCESS);
    }
    let req = args.to_request()?;
    let (target, _server) = match &req.target {
        Some(t) => (t.clone(), None),
        // Several servers: the first stands for them where one is named.
        None if !req.hosts.is_empty() => {
            let mut t = req.hosts[0].clone();
            t.label = req
                .hosts
                .iter()
                .map(|h| h.label.as_str())
                .collect::<Vec<_>>()
                .join(",");
            (t, None)
        }
        None => {
            let s = EmbeddedServer::start().context("starting the embedded server")?;
            let t = Target {
                addr: s.addr,
                label: "embedded".into(),
                bind: None,
                embedded: true,
                psk: None,
                wait: None,
            };
            (t, Some(s))
        }
    };
    crate::control::stop::on_signals().context("installing signal handlers")?;
    // NIC dimensions: the device is checked (and refused by name) before
    // any cell runs; its settings are put back when `nic` drops, however
    // the sweep ends, and from their journal by `--restore` when it was
    // killed.
    let mut knobs: Vec<nic::Knob> = req
        .cells
        .iter()
        .flat_map(|c| c.nic.iter().map(|(k, _)| *k))
        .collect();
    knobs.dedup();
    let nic = match (&req.nic, knobs.is_empty()) {
        (Some(dev), false) => Some(nic::NicGuard::open(
            dev,
            &knobs,
            &journal::Journals::locate()?,
        )?),
        _ => None,
    };
    // Each cell runs its warm-up and window (per iteration), plus set-up
    // the line cannot know.
    let runs = req.repeat.map_or(1, |r| r.min as u64);
    let per_cell: u64 = req
        .cells
        .iter()
        .map(|c| runs * (c.plan.warmup_ns + c.plan.duration_ns))
        .sum();
    let ticker = Ticker::start(
        std::io::IsTerminal::is_terminal(&std::io::stderr()),
        "sweep",
        Some(std::time::Duration::from_nanos(per_cell)),
    );
    let mut cells = Vec::new();
    let mut nic_failed = false;
    let n = req.cells.len();
    for (i, c) in req.cells.iter().enumerate() {
        // Ctrl-C: the cells measured so far are the sweep ("-" for the rest).
        if crate::control::stop::requested() {
            break;
        }
        ticker.set(format!("cell {}/{n}: {}", i + 1, c.label));
        let p = &c.plan;
        // A device that takes the first cell's values and refuses a later
        // one's ends the sweep there; the cells measured are still written.
        let nic_now = match nic.as_ref().map(|g| g.apply(&c.nic)) {
            Some(Err(e)) => {
                ticker.above(|| eprintln!("cell {}: {e:#}", c.label));
                nic_failed = true;
                break;
            }
            Some(Ok(m)) => m,
            None => Default::default(),
        };
        let mut on_iteration = |it: &crate::result::Iteration| {
            ticker.above(|| {
                eprintln!(
                    "cell {}: iteration {}: {}",
                    c.label,
                    it.index,
                    crate::export::human::figure(it.figure, it.unit)
                )
            })
        };
        let r = match (req.repeat, req.hosts.is_empty()) {
            (Some(rep), true) => {
                client::run_repeated(&target, p, rep, &mut Quiet, &mut on_iteration)
            }
            (None, true) => client::run(&target, p, &mut Quiet),
            // Several servers: the cell's flows spread over them, at once.
            (Some(rep), false) => crate::control::repeat::repeat(
                p,
                rep,
                &mut || spread::run(&req.hosts, p),
                &mut on_iteration,
            ),
            (None, false) => spread::run(&req.hosts, p),
        };
        let mut cell = Cell::of(p, &r, c.params.clone());
        cell.nic = nic_now;
        // A cell Ctrl-C cut short is kept, marked, not passed off as whole.
        if crate::control::stop::requested() {
            cell.interrupted = true;
            cell.error = Some(crate::control::stop::INTERRUPTED.to_string());
        } else if let Some(e) = &r.summary.error {
            ticker.above(|| eprintln!("cell {}: {e}", c.label));
        }
        cells.push(cell);
    }
    drop(ticker);
    // The NIC as it was before the sweep, before anything is written.
    drop(nic);
    let sw = Sweep {
        schema: SCHEMA.into(),
        test: req.test.name().into(),
        server: target.label.clone(),
        rr_sizes: req.rr_sizes.clone(),
        bursts: req.bursts.clone(),
        flows: req.flows.clone(),
        cells,
        dims: req.dims.clone(),
        rows: req.rows.clone(),
        cols: req.cols.clone(),
        cell_figures: req.cell_figures.clone(),
        hosts: req.hosts.iter().map(|h| h.label.clone()).collect(),
        interrupted: crate::control::stop::requested(),
    };
    if req.json {
        print(&format!("{}\n", serde_json::to_string_pretty(&sw)?))?;
    } else {
        print(&crate::export::sweep::table(&sw))?;
    }
    for p in &req.export_csv {
        write_atomic(p, crate::export::sweep::csv(&sw).as_bytes())
            .with_context(|| format!("writing --export-csv {}", p.display()))?;
    }
    for p in &req.export_json {
        write_atomic(p, &serde_json::to_vec_pretty(&sw)?)
            .with_context(|| format!("writing --export-json {}", p.display()))?;
    }
    let doc = serde_json::to_value(&sw).context("the sweep as JSON")?;
    super::save::save(&req.store, "sweep", &sw.test, &sw.server, &doc);
    if crate::control::stop::requested() {
        eprintln!("error: {}", crate::control::stop::INTERRUPTED);
        return Ok(ExitCode::from(crate::control::stop::EXIT_INTERRUPTED));
    }
    Ok(
        if nic_failed || sw.cells.iter().any(|c| c.error.is_some()) {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        },
    )
}
