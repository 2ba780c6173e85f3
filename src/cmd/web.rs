//! `thrum web`: the results store served read-only as pages
//! ([`crate::web`]) until SIGTERM or SIGINT, which end it with status 0,
//! as they end `thrum monitor`.

use std::net::TcpListener;
use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::cli::WebArgs;
use crate::store::Store;
use crate::web::{self, Site};

/// `thrum web`.
pub fn web(args: &WebArgs) -> Result<ExitCode> {
    let req = args.to_request()?;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handlers")?;
    }
    for w in &req.warnings {
        eprintln!("warning: {w}");
    }
    let store = Store::open_existing(&req.db).map_err(anyhow::Error::msg)?;
    let listener = TcpListener::bind(req.listen)
        .with_context(|| format!("--listen {}: cannot listen there", req.listen))?;
    let addr = listener.local_addr().context("--listen: its address")?;
    let guarded = req.token.is_some();
    web::spawn(
        listener,
        Site::new(store, req.db.display().to_string(), req.token),
    )
    .context("starting the web server")?;
    eprintln!(
        "thrum web: the results store {} read-only at http://{addr}/ ({})",
        req.db.display(),
        if guarded {
            "every request needs the token of --token-file: open a page once with ?token=TOKEN, or send Authorization: Bearer TOKEN"
        } else {
            "loopback, no token: anyone on this host can read it"
        }
    );
    // The server runs on its own thread; this one waits for the signal.
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    Ok(ExitCode::SUCCESS)
}
