//! `thrum server`: serve sessions until a signal, logging each one.

use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::Ordering::Relaxed;

use anyhow::{Context, Result};

use crate::cli::{ServeRequest, ServerArgs};
use crate::control;
use crate::control::server::Server;

/// `thrum server`.
pub fn serve(args: &ServerArgs) -> Result<ExitCode> {
    let ServeRequest {
        config: cfg,
        warnings,
    } = args.to_request()?;
    for warning in warnings {
        control::log::server_event(cfg.log_format, &format!("warning: {warning}"));
    }
    let (log_format, quiet) = (cfg.log_format, !cfg.log);
    let server = Server::bind(cfg)?;
    let flag = server.shutdown_flag();
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, flag.clone()).context("installing signal handlers")?;
    }
    // Closing the terminal the server was started from must not end it.
    signal_hook::flag::register(signal_hook::consts::SIGHUP, server.hangup_flag())
        .context("installing signal handlers")?;
    let addr = server.local_addr()?;
    println!(
        "thrum server listening on {addr} (protocol v{})",
        control::proto::PROTOCOL_VERSION
    );
    let _ = std::io::stdout().flush();
    server.serve()?;
    if flag.load(Relaxed) && !quiet {
        control::log::server_event(log_format, "stopped by signal");
    }
    Ok(ExitCode::SUCCESS)
}
