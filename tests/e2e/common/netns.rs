//! Network namespaces: the capability probe (with its skip), a
//! loopback-only namespace of a test's own, commands run inside one, and
//! the setup commands' time bound.

use std::process::Command;
use std::time::Duration;

use super::command::Ran;
use super::processes::{ServerProc, bin, run_cmd};

/// A `thrum server` inside network namespace `ns`, listening on `addr`.
pub fn ns_server(ns: &str, addr: &str) -> ServerProc {
    let mut server = ServerProc::start_with(ns_exec(ns, bin()), addr, &[]);
    server.ns = Some(ns.to_string());
    server
}

/// Setup commands (ip, tc, sysctl, cat) finish in milliseconds; this only
/// bounds a wedged one.
pub const SETUP_LIMIT: Duration = Duration::from_secs(10);

/// Create network namespace `name`, doubling as the capability probe:
/// without root or without iproute2's netns support this is what fails.
/// Then it explains on stderr and returns false so the caller skips, unless
/// `THRUM_E2E_NETNS=required` is set: a root CI job sets it, so that losing
/// the capability fails instead of passing silently.
pub fn netns_add_or_skip(name: &str) -> bool {
    match netns_add(name) {
        Ok(()) => true,
        Err(why) => {
            eprintln!("SKIPPED: {why}; shaped-link tests need root and iproute2");
            false
        }
    }
}

/// `ip netns add NAME`, or why not (and a panic under
/// `THRUM_E2E_NETNS=required`). The running test joins its group first
/// ([`enter`](super::serial::enter)): a namespace is where its floods go.
fn netns_add(name: &str) -> Result<(), String> {
    super::serial::enter();
    match Command::new("ip").args(["netns", "add", name]).output() {
        Ok(out) if out.status.success() => Ok(()),
        other => {
            let why = match other {
                Ok(out) => String::from_utf8_lossy(&out.stderr).trim().to_string(),
                Err(e) => format!("cannot run ip: {e}"),
            };
            let msg = format!("`ip netns add` failed ({why})");
            if std::env::var("THRUM_E2E_NETNS").as_deref() == Ok("required") {
                panic!("{msg}; shaped-link tests need root and iproute2");
            }
            Err(msg)
        }
    }
}

/// A network namespace with only its loopback up, deleted on drop: a
/// kernel of its own for a test (its port range, its TIME_WAIT table).
pub struct Netns(pub String);

impl Netns {
    /// `thrum-TAG-PID`, or None (skipped, see [`netns_add_or_skip`]).
    pub fn loopback_only(tag: &str) -> Option<Netns> {
        let ns = Netns(format!("thrum-{tag}-{}", std::process::id()));
        if !netns_add_or_skip(&ns.0) {
            return None;
        }
        run_ok(Command::new("ip").args(["-n", &ns.0, "link", "set", "lo", "up"]));
        Some(ns)
    }

    /// As [`Netns::loopback_only`], but where namespaces are unavailable
    /// the caller runs on the host instead of skipping (None, with a note).
    pub fn loopback_only_or_host(tag: &str) -> Option<Netns> {
        let ns = Netns(format!("thrum-{tag}-{}", std::process::id()));
        if let Err(why) = netns_add(&ns.0) {
            eprintln!("NOTE: {why}; running on the host's loopback");
            return None;
        }
        run_ok(Command::new("ip").args(["-n", &ns.0, "link", "set", "lo", "up"]));
        Some(ns)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Best effort and never a panic: this also runs while unwinding.
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

/// `program` run inside namespace `ns`; `ip netns exec` execs it, so the
/// child's pid is the program's own and killing the child kills it.
pub fn ns_exec(ns: &str, program: &str) -> Command {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", ns, program]);
    cmd
}

/// `thrum` run inside namespace `ns` after `pre` (a `nice`, or nothing),
/// in a time namespace of its own whose CLOCK_MONOTONIC runs `secs`
/// seconds ahead of the host's: a clock offset known exactly.
pub fn ns_exec_ahead(ns: &str, pre: &[&str], secs: u32) -> Command {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", ns]).args(pre);
    cmd.args(["unshare", "--fork", "--kill-child", "--time", "--monotonic"]);
    cmd.arg(secs.to_string()).arg(bin());
    cmd
}

pub fn ip(args: &[&str]) -> Ran {
    run_ok(Command::new("ip").args(args))
}

/// Run a setup command under the time bound and fail loudly if it fails.
pub fn run_ok(cmd: &mut Command) -> Ran {
    super::serial::enter();
    run_cmd(cmd, SETUP_LIMIT).ok()
}
