//! A request to stop early: Ctrl-C (SIGINT) or SIGTERM during `run`,
//! `agg` or `sweep`.
//!
//! The first signal only sets a flag. A session that sees it ends its
//! measurement, drains and reports what it has, so the command can print
//! and write what was measured, marked `interrupted`, and exit 130 (the
//! shell's code for a SIGINT). A second signal exits at once with 130: a
//! user who presses Ctrl-C twice wants out, drained or not. The flag is
//! one per process, so a session reads it without being handed it.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

/// The exit status of a run stopped by a signal (128 + SIGINT).
pub const EXIT_INTERRUPTED: u8 = 130;

/// What `summary.error` says of a run stopped this way.
pub const INTERRUPTED: &str = "interrupted";

static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// Catch SIGINT and SIGTERM for the rest of the process: the first sets the
/// flag, the second exits with [`EXIT_INTERRUPTED`]. Idempotent.
pub fn on_signals() -> io::Result<Arc<AtomicBool>> {
    if let Some(f) = FLAG.get() {
        return Ok(f.clone());
    }
    let flag = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // Registered first, so it sees the flag as the previous signal left it.
        signal_hook::flag::register_conditional_shutdown(
            sig,
            i32::from(EXIT_INTERRUPTED),
            flag.clone(),
        )?;
        signal_hook::flag::register(sig, flag.clone())?;
    }
    Ok(FLAG.get_or_init(|| flag).clone())
}

/// Ask for a stop from within the process (`run --timeout`), as the first
/// signal does; nothing when [`on_signals`] was never called.
pub fn request() {
    if let Some(f) = FLAG.get() {
        f.store(true, Ordering::Relaxed);
    }
}

/// Has a stop been asked for? Cheap (one relaxed load): sessions may ask
/// on every turn of their timeline.
pub fn requested() -> bool {
    FLAG.get().is_some_and(|f| f.load(Ordering::Relaxed))
}
