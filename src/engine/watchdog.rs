//! The watchdog that wakes workers blocked under the blocking driver.
//!
//! A blocking worker's socket has no receive timeout (arming one costs a
//! kernel timer per transaction, see [`crate::io::blocking`]). Instead each
//! worker publishes a count of its loop iterations, and this thread looks at
//! them every half of the workers' shortest blocking timeout: a worker whose
//! count has not moved since the last look, or any worker once the engine is
//! stopping, gets the wake-up signal, so its blocked call returns and it
//! checks its phase, stop flag and (udp_rr) deadlines. A worker that moves
//! data is never signalled; a blocked one wakes within one timeout, as it did
//! with SO_RCVTIMEO.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::io::blocking::interrupt;

/// What the watchdog looks at: the workers' slots, whether any still
/// runs, and whether the engine is stopping (the engine's shared state,
/// `worker::Shared`, which in turn holds the slots).
pub trait Watched: Send + Sync + 'static {
    fn slots(&self) -> &[WatchSlot];
    fn running(&self) -> bool;
    fn stopping(&self) -> bool;
}

/// One worker's entry: its thread while it runs the blocking driver, and its
/// loop count (single writer: the worker).
#[derive(Default)]
pub struct WatchSlot {
    /// Held by the watchdog while it signals, and by the worker when it
    /// leaves, so a signal never goes to a thread that has ended.
    thread: Mutex<Option<ThreadId>>,
    loops: AtomicU64,
}

/// A worker's pthread handle. glibc's `pthread_t` is an integer, musl's a
/// pointer, which is neither `Send` nor `Sync`; the handle is only ever
/// passed back to `pthread_kill` while its thread runs (see `thread` above),
/// never dereferenced here, so moving it across threads is sound on both.
#[derive(Clone, Copy)]
struct ThreadId(libc::pthread_t);

// SAFETY: an opaque handle used only as an argument to pthread_kill, under
// the slot's lock, while the thread it names is alive.
unsafe impl Send for ThreadId {}

impl WatchSlot {
    /// The calling thread runs the blocking driver from now on.
    pub fn enter(&self) {
        // SAFETY: pthread_self has no preconditions.
        let me = unsafe { libc::pthread_self() };
        *self.thread.lock().unwrap_or_else(|p| p.into_inner()) = Some(ThreadId(me));
    }

    /// The calling thread is about to end.
    pub fn leave(&self) {
        *self.thread.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// One more turn of the worker loop (a relaxed store: a plain store on x86).
    #[inline]
    pub fn tick(&self, n: u64) {
        self.loops.store(n, Relaxed);
    }
}

/// Start the watchdog (the wake-up handler is installed); it ends once no worker runs.
pub fn start<W: Watched>(
    shared: Arc<W>,
    blocking_timeout: Duration,
) -> std::io::Result<JoinHandle<()>> {
    let period = (blocking_timeout / 2).max(Duration::from_micros(500));
    std::thread::Builder::new()
        .name("thrum-watchdog".into())
        .spawn(move || {
            let mut last = vec![u64::MAX; shared.slots().len()];
            while shared.running() {
                std::thread::sleep(period);
                let stopping = shared.stopping();
                for (slot, seen) in shared.slots().iter().zip(last.iter_mut()) {
                    let now = slot.loops.load(Relaxed);
                    if stopping || now == *seen {
                        let t = slot.thread.lock().unwrap_or_else(|p| p.into_inner());
                        if let Some(ThreadId(t)) = *t {
                            // SAFETY: the slot holds the thread only while it
                            // runs; it clears it under this lock before ending.
                            unsafe { interrupt(t) };
                        }
                    }
                    *seen = now;
                }
            }
        })
}
