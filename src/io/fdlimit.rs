//! The open-file limit (RLIMIT_NOFILE), raised so that many flows fit.
//!
//! Every flow is a socket on each end, so 10,000 flows need 10,000 file
//! descriptors per process (20,000 with the embedded server in the same
//! process), while the usual soft limit is 1024. At start-up the soft limit
//! is raised to the hard limit, as any unprivileged process may; before a test
//! the end that opens the sockets asks for what the test needs, and if that is
//! above the hard limit a privileged process (CAP_SYS_RESOURCE) raises the
//! hard limit too, up to `fs.nr_open`. When even that fails the test still
//! runs (it may need fewer than the estimate) and the result says why
//! sockets may run out.

use std::io;

/// Descriptors beyond the flows' own: control connections, listeners,
/// epoll instances, stdio, files the process reads for its environment.
pub const SPARE_FDS: u64 = 256;

fn get() -> io::Result<libc::rlimit> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r)
}

fn set(cur: u64, max: u64) -> io::Result<()> {
    let r = libc::rlimit {
        rlim_cur: cur,
        rlim_max: max,
    };
    // SAFETY: plain syscall on a struct we own.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The current soft limit, or 0 if it cannot be read.
pub fn soft_limit() -> u64 {
    get().map_or(0, |r| r.rlim_cur)
}

/// At start-up: soft limit up to the hard limit. Errors are left to
/// [`ensure`], which reports them where a test needs the descriptors.
pub fn raise_to_hard() {
    if let Ok(r) = get()
        && r.rlim_cur < r.rlim_max
    {
        let _ = set(r.rlim_max, r.rlim_max);
    }
}

/// Can this process open `n` more descriptors under its soft limit now?
pub fn fits(n: u64) -> bool {
    n <= soft_limit().saturating_sub(open_fds())
}

/// Descriptors open in this process now.
pub fn open_fds() -> u64 {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as u64)
}

/// Make room for `more` descriptors beyond those open now (plus
/// [`SPARE_FDS`]). `Ok(None)`: there is room; `Ok(Some(note))`: the limit was
/// raised (what to say about it is in the note, for logs); `Err(warning)`:
/// there may not be room, and the warning names the limit and what to do.
pub fn ensure(more: u64) -> Result<Option<String>, String> {
    let need = open_fds() + more + SPARE_FDS;
    let r = get().map_err(|e| format!("cannot read RLIMIT_NOFILE: {e}"))?;
    let (cur, max) = (r.rlim_cur, r.rlim_max);
    if cur >= need {
        return Ok(None);
    }
    if need <= max {
        return match set(need, max) {
            Ok(()) => Ok(Some(format!("RLIMIT_NOFILE raised from {cur} to {need}"))),
            Err(e) => Err(format!(
                "{need} file descriptors needed, RLIMIT_NOFILE is {cur} and raising it failed: {e}"
            )),
        };
    }
    let nr_open = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(1 << 20);
    if need > nr_open {
        return Err(format!(
            "{need} file descriptors needed, more than fs.nr_open ({nr_open}); RLIMIT_NOFILE stays at {cur}"
        ));
    }
    match set(need, need) {
        Ok(()) => Ok(Some(format!(
            "RLIMIT_NOFILE raised from {cur} (hard {max}) to {need}"
        ))),
        Err(e) => {
            // Unprivileged: take what the hard limit allows.
            let _ = set(max, max);
            Err(format!(
                "{need} file descriptors needed, RLIMIT_NOFILE hard limit is {max} and raising it failed ({e}): run as root or raise `ulimit -Hn`"
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_needs_fit_without_change() {
        raise_to_hard();
        let before = soft_limit();
        assert!(matches!(ensure(1), Ok(None)), "{:?}", ensure(1));
        assert_eq!(soft_limit(), before);
    }
}
