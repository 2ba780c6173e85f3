//! `run --timeout`: the client's hard limit on a whole run (neper's -s).
//!
//! A thread waits out the limit; past it, it asks the session to stop as
//! the first Ctrl-C does (`control::stop::request`), so the run drains and
//! writes what it measured, and `run` then reports the error naming the
//! flag. A run that has not ended [`GRACE`] later (a peer that holds the
//! drain, a connect that hangs) is ended at once with the same words.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

/// How long a run past its `--timeout` may take to stop and write what it
/// measured before the process exits without it: the drain's own limit
/// (`control::client::DRAIN_TIMEOUT`, 5 s) and as much again.
pub const GRACE: Duration = Duration::from_secs(10);

/// The armed limit; disarmed when dropped.
pub struct Limit {
    fired: Arc<AtomicBool>,
    _disarm: mpsc::Sender<()>,
}

impl Limit {
    /// Arm `timeout` for the run now starting (None: no limit).
    pub fn arm(timeout: Option<Duration>) -> Option<Limit> {
        let t = timeout?;
        let fired = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel::<()>();
        let f = fired.clone();
        std::thread::Builder::new()
            .name("thrum-timeout".into())
            .spawn(move || {
                // Disconnected: the run ended (the sender was dropped).
                if rx.recv_timeout(t) != Err(mpsc::RecvTimeoutError::Timeout) {
                    return;
                }
                f.store(true, Ordering::Relaxed);
                crate::control::stop::request();
                if rx.recv_timeout(GRACE) == Err(mpsc::RecvTimeoutError::Timeout) {
                    eprintln!(
                        "error: {}; it did not stop within {GRACE:?} more, so nothing was written",
                        message(t)
                    );
                    std::process::exit(1);
                }
            })
            .ok()?;
        Some(Limit { fired, _disarm: tx })
    }

    /// Did the limit pass before the run ended?
    pub fn fired(&self) -> bool {
        self.fired.load(Ordering::Relaxed)
    }
}

/// What the error says: the flag, its value.
pub fn message(t: Duration) -> String {
    format!(
        "--timeout {}: the run outlasted its limit and was stopped",
        crate::units::fmt_duration_ns(t.as_nanos() as u64)
    )
}
