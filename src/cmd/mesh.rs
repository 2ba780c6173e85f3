//! `thrum mesh`: the test over every ordered pair of hosts, each pair a
//! run from one agent (`crate::fleet::mesh`), with a progress line naming
//! the pair, then the matrix (or `--json`), the heat map, and every
//! pair's result and the mesh saved in the results store. A failed pair
//! keeps its error in its cell and makes the exit status 1; the other
//! pairs run on.

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::{Context, Result};

use super::out::print;
use super::progress::Ticker;
use crate::cli::MeshArgs;
use crate::export::write_atomic;
use crate::fleet::mesh;

/// `thrum mesh`.
pub fn mesh(args: &MeshArgs) -> Result<ExitCode> {
    let req = args.to_request()?;
    crate::control::stop::on_signals().context("installing signal handlers")?;
    let m = &req.mesh;
    let n = m.hosts.len();
    let pairs = n * (n - 1);
    let per_pair = m.plan.warmup_ns + m.plan.duration_ns;
    let rounds = pairs.div_ceil(m.parallel) as u64;
    let ticker = Ticker::start(
        std::io::stderr().is_terminal(),
        "mesh",
        Some(std::time::Duration::from_nanos(per_pair * rounds)),
    );
    let mut ended = 0;
    let mesh = mesh::run(m, &mut |_, _, p| {
        ended += 1;
        ticker.set(format!(
            "{ended}/{pairs} pairs: {} -> {}",
            p.sender, p.receiver
        ));
        if let Some(e) = &p.error {
            ticker.above(|| eprintln!("{} -> {}: {e}", p.sender, p.receiver));
        }
        // Each pair is a run of its own in the store, filed as `run
        // --from SENDER -H RECEIVER` files it, so `history` and `compare`
        // find it beside single runs of the same path.
        if let Ok(doc) = serde_json::to_value(&p.result) {
            super::save::save(&req.store, "run", p.result.test.name(), &p.receiver, &doc);
        }
    });
    drop(ticker);
    if req.json {
        print(&format!("{}\n", serde_json::to_string_pretty(&mesh)?))?;
    } else {
        print(&crate::export::mesh::table(&mesh))?;
    }
    for p in &req.export_json {
        write_atomic(p, &serde_json::to_vec_pretty(&mesh)?)
            .with_context(|| format!("writing --export-json {}", p.display()))?;
    }
    if let Some(p) = &req.chart {
        write_atomic(p, crate::export::draw::mesh::svg(&mesh).as_bytes())
            .with_context(|| format!("writing --chart {}", p.display()))?;
    }
    let doc = serde_json::to_value(&mesh).context("the mesh as JSON")?;
    super::save::save(&req.store, "mesh", &mesh.test, &mesh.hosts.join(","), &doc);
    if mesh.interrupted {
        eprintln!("error: {}", crate::control::stop::INTERRUPTED);
        return Ok(ExitCode::from(crate::control::stop::EXIT_INTERRUPTED));
    }
    if !mesh.ok() {
        eprintln!(
            "error: {} of {} pair(s) failed (their cells name why)",
            mesh.failed(),
            pairs
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
