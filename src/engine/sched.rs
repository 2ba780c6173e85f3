//! A latency probe's claim on the CPU: the scheduler slice its worker
//! thread asks for, so that a probe that wakes for its next send does not
//! wait for a bulk worker's slice to run out.
//!
//! A mix already runs every part on threads of its own (one engine per
//! part, [`super::parts`]), on both ends. What kept a probe waiting on a
//! machine with fewer CPUs than busy workers was the scheduler: a bulk
//! worker that keeps its CPU busy with sends runs out its slice (EEVDF's
//! base slice, scaled by the log of the CPU count: 1.4 ms on the 2-CPU
//! test machine, `se.slice` in /proc/PID/task/TID/sched), and a probe
//! woken meanwhile waited for it — its generator lag (measured before
//! the slice: p99 2.4–3.1 ms, max 48–61 ms with rrul on that machine,
//! both ends' workers, the router and the server on the same two CPUs).
//!
//! Since Linux 6.12 a SCHED_OTHER thread may ask for a shorter slice of its
//! own with `sched_setattr(2)`'s `sched_runtime` (clamped to 0.1–100 ms; no
//! privilege needed), and a waking task with a shorter slice than the
//! running one preempts it (the PREEMPT_SHORT scheduler feature). So the
//! probe workers ask for the shortest slice, [`PROBE_SLICE`]; nothing
//! changes for the bulk workers. An older kernel refuses the attribute or
//! ignores it: the probe then runs as before, which the result's
//! `generator_lag_ns` shows. No real-time policy: a busy loop under
//! SCHED_FIFO would starve the rest of the machine.

use std::io;

/// The slice a probe worker asks for: the kernel's shortest (0.1 ms).
pub const PROBE_SLICE: std::time::Duration = std::time::Duration::from_micros(100);

/// `struct sched_attr` as `sched_setattr(2)` takes it (SCHED_ATTR_SIZE_VER0,
/// 48 bytes); the libc crate does not define it.
#[repr(C)]
#[derive(Default)]
struct SchedAttr {
    size: u32,
    sched_policy: u32,
    sched_flags: u64,
    sched_nice: i32,
    sched_priority: u32,
    sched_runtime: u64,
    sched_deadline: u64,
    sched_period: u64,
}

/// Ask for a SCHED_OTHER slice of `slice` for the calling thread, keeping
/// its nice value. An error says the kernel refused (the thread was not
/// SCHED_OTHER, or the kernel predates `sched_setattr`); a kernel before
/// 6.12 accepts and ignores the runtime.
pub fn set_slice(slice: std::time::Duration) -> io::Result<()> {
    let mut attr = get()?;
    if attr.sched_policy != libc::SCHED_OTHER as u32 {
        return Err(io::Error::other("not a SCHED_OTHER thread"));
    }
    attr.size = std::mem::size_of::<SchedAttr>() as u32;
    attr.sched_flags = 0;
    attr.sched_runtime = slice.as_nanos() as u64;
    // SAFETY: sched_setattr(pid 0 = this thread, a valid attr of the size it
    // declares, flags 0) reads the struct and writes nothing of ours.
    let r = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0u32) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The calling thread's slice as the kernel reports it (`sched_runtime`
/// of `sched_getattr(2)`: the slice from 6.12 on, 0 before).
pub fn slice() -> io::Result<std::time::Duration> {
    get().map(|a| std::time::Duration::from_nanos(a.sched_runtime))
}

fn get() -> io::Result<SchedAttr> {
    let mut attr = SchedAttr::default();
    // SAFETY: sched_getattr writes at most `size` bytes into attr.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            0,
            &mut attr as *mut SchedAttr,
            std::mem::size_of::<SchedAttr>() as u32,
            0u32,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(attr)
}

#[cfg(test)]
mod tests {
    use super::{PROBE_SLICE, set_slice, slice};

    /// A thread that asks for the probe slice gets it where the kernel
    /// keeps custom slices (6.12 on); elsewhere the refusal is an error,
    /// not a crash. Run on a thread of its own: the test harness's threads
    /// keep their slice.
    #[test]
    fn a_probe_thread_gets_a_short_slice_or_a_clean_refusal() {
        std::thread::spawn(|| match set_slice(PROBE_SLICE) {
            Ok(()) => {
                let s = slice().expect("sched_getattr");
                assert!(s == PROBE_SLICE || s.is_zero(), "slice {s:?}");
            }
            Err(e) => assert!(e.raw_os_error().is_some(), "{e}"),
        })
        .join()
        .unwrap();
    }
}
