//! `thrum monitor`: check the configuration, bind the metrics address,
//! then run the probes on their schedule until SIGTERM or SIGINT. A signal
//! starts no new probe; the running ones finish (or are ended after
//! `monitor::schedule::STOP_GRACE`) and the monitor exits 0. SIGHUP reads
//! the configuration file again and, if the whole of it is good, puts its
//! probes in force; a bad file is reported and the probes in force go on.
//! One line per finished run, and per reload, goes to stderr (the journal,
//! under systemd).

use std::io::Write;
use std::net::TcpListener;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{Context, Result};

use crate::cli::{MonitorArgs, MonitorRequest};
use crate::monitor::metrics::{self, ProbeState};
use crate::monitor::probe::{self, Outcome};
use crate::monitor::schedule::{self, same_series};
use crate::monitor::{Probe, http};

pub fn monitor(args: &MonitorArgs) -> Result<ExitCode> {
    let req = args.to_request()?;
    let probes = req.config.probes.clone();
    if req.dry_run {
        for p in &probes {
            println!(
                "{} (every {:?}, timeout {:?}): thrum {}",
                p.name,
                p.every,
                p.timeout,
                probe::command_args(p).join(" ")
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    let exe = std::env::current_exe().context("finding the thrum executable the probes run")?;
    let ctx = probe::Context {
        exe,
        db: req.db.clone(),
    };
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handlers")?;
    }
    let hangup = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGHUP, hangup.clone())
        .context("installing signal handlers")?;
    let state = Arc::new(Mutex::new(
        probes.iter().map(ProbeState::new).collect::<Vec<_>>(),
    ));
    let up = Instant::now();
    let mut ready = format!("thrum monitor: {} probes", probes.len());
    if let Some(addr) = req.metrics_listen {
        let listener = TcpListener::bind(addr)
            .with_context(|| format!("--metrics-listen {addr}: cannot listen there"))?;
        let bound = listener.local_addr()?;
        let shared = state.clone();
        http::spawn(listener, move || {
            let s = shared.lock().unwrap_or_else(|e| e.into_inner()).clone();
            metrics::render(&s, up.elapsed())
        })
        .context("starting the metrics server")?;
        ready.push_str(&format!(", metrics on http://{bound}/metrics"));
    }
    // The ready line, on stdout as `thrum server`'s: a script or a test waits for it.
    let mut out = std::io::stdout();
    let _ = writeln!(out, "{ready}");
    let _ = out.flush();
    let mut in_force = probes.clone();
    let mut reload = || {
        if !hangup.swap(false, Ordering::Relaxed) {
            return None;
        }
        let new = reload_config(&req, &in_force)?;
        in_force = new.clone();
        Some(new)
    };
    schedule::run(&probes, &ctx, &state, &stop, &log, &mut reload);
    eprintln!("thrum monitor: stopped by signal");
    Ok(ExitCode::SUCCESS)
}

/// The probes of the configuration file, read again on SIGHUP, with a line
/// on stderr that says what changed; or, when the file is bad, none and a
/// line that says why and that the probes in force (`old`) go on.
fn reload_config(req: &MonitorRequest, old: &[Probe]) -> Option<Vec<Probe>> {
    match req.reread_config() {
        Err(e) => {
            eprintln!(
                "thrum monitor: SIGHUP: {e:#}; the {} in force go on",
                probes(old.len())
            );
            None
        }
        Ok(config) => {
            let new = config.probes;
            let kept = new
                .iter()
                .filter(|p| old.iter().any(|o| same_series(o, p)))
                .count();
            eprintln!(
                "thrum monitor: SIGHUP: read {} again: {} ({} kept, {} added, {} removed)",
                req.config_path.display(),
                probes(new.len()),
                kept,
                new.len() - kept,
                old.len() - kept
            );
            Some(new)
        }
    }
}

/// `n` probes, in words.
fn probes(n: usize) -> String {
    format!("{n} probe{}", if n == 1 { "" } else { "s" })
}

/// One line per finished run.
fn log(p: &Probe, o: &Outcome) {
    let f = &o.figures;
    let mut figs = Vec::new();
    if let Some(b) = f.throughput_bps {
        figs.push(format!("{:.4} Gbit/s", b / 1e9));
    }
    if let Some(t) = f.transactions_per_s {
        figs.push(format!("{t:.0} trans/s"));
    }
    if let Some(l) = f.latency_p50_s {
        figs.push(format!("p50 {:.1} us", l * 1e6));
    }
    if let Some(l) = f.loss_ratio {
        figs.push(format!("loss {:.1} %", l * 100.0));
    }
    for (way, b) in [("up", f.goodput_up_bps), ("down", f.goodput_down_bps)] {
        if let Some(b) = b {
            figs.push(format!("{way} {:.4} Gbit/s", b / 1e9));
        }
    }
    if let Some(l) = f.under_load_p99_s {
        figs.push(format!("p99 under load {:.1} ms", l * 1e3));
    }
    match (&o.error, o.reason()) {
        (Some(e), Some(r)) => eprintln!(
            "probe {}: failed in {:.1}s ({}): {e}",
            p.name,
            o.elapsed.as_secs_f64(),
            r.name()
        ),
        _ => eprintln!(
            "probe {}: ok in {:.1}s: {}",
            p.name,
            o.elapsed.as_secs_f64(),
            figs.join(", ")
        ),
    }
}
