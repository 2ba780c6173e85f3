//! What one server allows a session, and the check of a spec against it.
//!
//! The plan's own validation bounds every field to what thrum can run at
//! all (`plan::limits`); these are the tighter bounds a server operator sets
//! (`--max-flows`, `--max-duration`, `--max-session-memory`, and for all
//! sessions together `--max-memory`, `--max-threads`, `--max-ports` and
//! `--max-spin-threads`; per client `--max-sessions-per-client`,
//! `--max-ports-per-client` and `--max-spin-threads-per-client`), stated
//! in the server's hello so a client can see them, and checked again here
//! because a client need not be thrum. A refused spec names the limit and
//! its value. So do the options a client may put on the server's own
//! sockets only as its operator allows: a TOS byte outside the ordinary
//! classes (`--allow-tos-any`), a firewall mark (`--allow-mark`), a
//! transmit delay (`--allow-tx-delay`).
//!
//! [`memory_estimate`] is the bound that keeps a peer from sizing an
//! allocation the server cannot make: every buffer a spec sizes (per flow,
//! per worker, the open-loop window's slots, io_uring's receive ring) is in
//! it, from the test's row (`server_buffers`), and it is checked before the
//! first is allocated.

use std::time::Duration;

use crate::io::spread::listeners_for;
use crate::plan::{TestPlan, Transport, limits};

use super::admission::{ClientShare, Reservation};
use super::proto::{MAX_FRAME, ServerLimits};

/// Defaults of the server's flags.
pub const DEFAULT_MAX_SESSIONS: u32 = 64;
pub const DEFAULT_MAX_FLOWS: u32 = 1024;
pub const DEFAULT_MAX_DURATION_NS: u64 = 3600 * 1_000_000_000;
pub const DEFAULT_MAX_SESSION_MEMORY: u64 = 1 << 30;
/// `--max-threads`: enough for four sessions of 1,024 worker threads.
pub const DEFAULT_MAX_THREADS: u64 = 4200;
/// `--max-sessions-per-client` by default: this fraction of `--max-sessions`
/// (16 of 64), so that one host never takes every slot.
pub const PER_CLIENT_SHARE: u32 = 4;
/// `--max-ports` by default: this fraction of the ephemeral range, so that
/// sessions held open cannot leave the host without ports of its own.
pub const PORTS_SHARE: u64 = 4;
/// The client must send `start` within this after `accepted` (and
/// [`START_TIMEOUT_PER_FLOW`] more per flow, for connecting them). Until
/// then the session holds its data ports and listeners while proving
/// nothing: short, so that a client cannot hold them by repeating.
pub const START_TIMEOUT: Duration = Duration::from_secs(5);
/// What each flow adds to [`START_TIMEOUT`]: 1,024 flows get 6 s, 10,000 get 15 s.
pub const START_TIMEOUT_PER_FLOW: Duration = Duration::from_millis(1);

/// `--max-sessions-per-client` for `max_sessions` sessions: a quarter, at least one.
pub fn default_max_sessions_per_client(max_sessions: u32) -> u32 {
    (max_sessions / PER_CLIENT_SHARE).max(1)
}

/// The ephemeral port range (`net.ipv4.ip_local_port_range`) of this
/// network namespace, inclusive; Linux's default where it cannot be read.
pub fn ephemeral_range() -> (u16, u16) {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| {
            let mut it = s.split_whitespace().map(|x| x.parse::<u16>().ok());
            Some((it.next()??, it.next()??))
        })
        .filter(|(lo, hi)| lo <= hi)
        .unwrap_or((32768, 60999))
}

/// `--max-ports` by default: a quarter of the ephemeral range (7,058 of
/// Linux's default 28,232), at least 16.
pub fn default_max_ports() -> u64 {
    let (lo, hi) = ephemeral_range();
    (((hi - lo) as u64 + 1) / PORTS_SHARE).max(16)
}

/// `--max-ports-per-client` by default: a client's share of `--max-ports`
/// as its share of the sessions (`--max-ports` × `--max-sessions-per-client`
/// / `--max-sessions`: a quarter, 1,764 of 7,058), at least one. The
/// sessions of one address, started or not, then leave the rest of the
/// ports to others as they leave them the rest of the slots.
pub fn default_max_ports_per_client(
    max_ports: u64,
    max_sessions_per_client: u32,
    max_sessions: u32,
) -> u64 {
    let share = u128::from(max_ports) * u128::from(max_sessions_per_client)
        / u128::from(max_sessions.max(1));
    share.clamp(1, u128::from(max_ports.max(1))) as u64
}

/// Resident memory of one session thread: the stack pages it touches and
/// its share of malloc's per-thread arenas. Measured with tcp_crr sessions
/// of 64 and 256 one-flow threads: 563 and 568 KiB per thread over the idle
/// server (debug and release alike: it is stacks and arenas, not code).
pub const PER_THREAD_BYTES: u64 = 640 << 10;

/// `--max-memory` by default: half of the machine's memory (MemTotal), or
/// 1 GiB where /proc/meminfo cannot be read.
pub fn default_max_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(1 << 30, |kb| kb * 1024 / 2)
}

/// Threads a session runs: its workers and its own control thread.
pub fn session_threads(plan: &TestPlan) -> u64 {
    // A mix runs each part's workers (one thread per part).
    plan.part_plans()
        .iter()
        .map(|p| p.most_threads() as u64)
        .sum::<u64>()
        + 1
}

/// Bookkeeping per flow besides its buffers (the flow, its counters' cache
/// line, its socket's entry in the driver): a generous round figure.
const PER_FLOW_OVERHEAD: u64 = 4096;

/// The limits a server enforces on each session.
#[derive(Clone, Debug, PartialEq)]
pub struct SessionLimits {
    pub max_sessions: u32,
    pub max_flows: u32,
    /// Warm-up + measurement + cool-down, ns.
    pub max_duration_ns: u64,
    pub max_session_memory_bytes: u64,
    /// All sessions' [`memory_estimate`]s together.
    pub max_memory_bytes: u64,
    /// All sessions' [`session_threads`] together.
    pub max_threads: u64,
    /// Sessions one client (an IPv4 address, an IPv6 /64) may hold at once,
    /// from its key (or its accepted spec) to their end.
    pub max_sessions_per_client: u32,
    /// All sessions' [`data_ports`] together.
    pub max_ports: u64,
    /// One client's sessions' [`data_ports`] together
    /// ([`default_max_ports_per_client`] unless the operator says).
    pub max_ports_per_client: u64,
    /// How long after `accepted` a session waits for `start`
    /// ([`SessionLimits::start_timeout_for`] adds a share per flow).
    pub start_timeout: Duration,
    /// Accept any TOS byte from a client (`--allow-tos-any`); otherwise
    /// only [`tos_allowed`] ones.
    pub allow_tos_any: bool,
    /// The firewall marks (SO_MARK) a client may put on the server's data
    /// sockets (`--allow-mark`); none by default.
    pub allowed_marks: AllowedMarks,
    /// The longest TCP_TX_DELAY a client may put on the server's data
    /// sockets, µs (`--allow-tx-delay`); 0, none, by default.
    pub max_tx_delay_us: u32,
    /// The most worker threads all sessions together may make the server
    /// spin (`--spin`; `--max-spin-threads`): each takes a whole CPU for
    /// its test's length, so by default as many as the host has CPUs.
    pub max_spin_threads: u32,
    /// The most of them one client's sessions may hold together
    /// (`--max-spin-threads-per-client`; [`default_max_spin_threads_per_client`]).
    pub max_spin_threads_per_client: u32,
}

/// `--max-spin-threads-per-client` by default: half of `--max-spin-threads`
/// (at least one), so that one client spinning all it may leaves the other
/// half to others and the host. A quarter, as the ports are shared out,
/// would refuse a lone tester `--spin -T 2` on a four-CPU server.
pub fn default_max_spin_threads_per_client(max_spin_threads: u32) -> u32 {
    (max_spin_threads / 2).max(1)
}

/// The worker threads a session of `plan` makes the server spin: its
/// workers for the spec (`--server-threads`, else `--threads`) with
/// `--spin`, none without.
pub fn server_spinning(plan: &TestPlan) -> u64 {
    match plan.spin {
        true => plan.spreading.server_threads.unwrap_or(plan.threads) as u64,
        false => 0,
    }
}

/// `--max-spin-threads` by default: the CPUs this process may run on, so
/// that spinning workers never outnumber the CPUs they each take whole.
pub fn default_max_spin_threads() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
}

/// The SO_MARK values a server applies for its clients (`--allow-mark`).
/// A mark steers the host's policy routing and netfilter (kube-proxy
/// masquerades what carries 0x4000, Cilium and Calico keep their own
/// bits), and a server runs as root to set one: so none unless its
/// operator names them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum AllowedMarks {
    /// No mark (the default).
    #[default]
    None,
    /// These marks.
    These(Vec<u32>),
    /// Any mark (`--allow-mark any`; the embedded server).
    Any,
}

impl AllowedMarks {
    pub fn allows(&self, mark: u32) -> bool {
        match self {
            AllowedMarks::None => false,
            AllowedMarks::These(m) => m.contains(&mark),
            AllowedMarks::Any => true,
        }
    }
}

impl std::fmt::Display for AllowedMarks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AllowedMarks::None => f.write_str("none"),
            AllowedMarks::These(m) => {
                let shown: Vec<String> = m.iter().map(|m| format!("0x{m:x}")).collect();
                f.write_str(&shown.join(","))
            }
            AllowedMarks::Any => f.write_str("any"),
        }
    }
}

/// A transmit delay as `--allow-tx-delay` takes it: in the largest unit
/// that keeps it whole.
fn delay_flag(us: u32) -> String {
    match us {
        us if us % 1_000_000 == 0 => format!("{}s", us / 1_000_000),
        us if us % 1_000 == 0 => format!("{}ms", us / 1_000),
        us => format!("{us}us"),
    }
}

/// The TOS bytes a server accepts from a client without
/// `--allow-tos-any`: DSCP classes below CS6 (TOS < 0xC0) with the ECN
/// bits clear. CS6 and CS7 are network control (RFC 4594: routing
/// protocols ride them, and a test's bulk there starves them), and ECN
/// bits set by a sender claim ECT or CE on the server's replies (RFC 3168:
/// CE marks congestion the path never had).
pub fn tos_allowed(tos: u8) -> bool {
    tos < 0xC0 && tos & 0x3 == 0
}

/// The refusal of a TOS byte, naming the field it came from.
fn tos_refused(field: &str, tos: u8) -> String {
    format!(
        "{field} 0x{tos:02x} (DSCP {}, ECN {}) is refused: this server accepts DSCP classes below CS6 (TOS below 0xc0) with the ECN bits clear (its operator can allow any with --allow-tos-any)",
        tos >> 2,
        tos & 3
    )
}

impl Default for SessionLimits {
    fn default() -> Self {
        SessionLimits {
            max_sessions: DEFAULT_MAX_SESSIONS,
            max_flows: DEFAULT_MAX_FLOWS,
            max_duration_ns: DEFAULT_MAX_DURATION_NS,
            max_session_memory_bytes: DEFAULT_MAX_SESSION_MEMORY,
            max_memory_bytes: default_max_memory(),
            max_threads: DEFAULT_MAX_THREADS,
            max_sessions_per_client: default_max_sessions_per_client(DEFAULT_MAX_SESSIONS),
            max_ports: default_max_ports(),
            max_ports_per_client: default_max_ports_per_client(
                default_max_ports(),
                default_max_sessions_per_client(DEFAULT_MAX_SESSIONS),
                DEFAULT_MAX_SESSIONS,
            ),
            start_timeout: START_TIMEOUT,
            allow_tos_any: false,
            allowed_marks: AllowedMarks::None,
            max_tx_delay_us: 0,
            max_spin_threads: default_max_spin_threads(),
            max_spin_threads_per_client: default_max_spin_threads_per_client(
                default_max_spin_threads(),
            ),
        }
    }
}

impl SessionLimits {
    /// As stated in the hello.
    pub fn stated(&self) -> ServerLimits {
        ServerLimits {
            max_sessions: self.max_sessions,
            max_flows: self.max_flows,
            max_duration_ns: self.max_duration_ns,
            max_frame_bytes: MAX_FRAME as u64,
            max_io_bytes: limits::MAX_IO_BYTES,
            max_socket_buffer_bytes: limits::MAX_BUFFER_BYTES,
            max_session_memory_bytes: self.max_session_memory_bytes,
            max_memory_bytes: self.max_memory_bytes,
            max_threads: self.max_threads,
            max_sessions_per_client: self.max_sessions_per_client,
            max_ports: self.max_ports,
            max_ports_per_client: self.ports_per_client(),
            start_timeout_ns: self.start_timeout.as_nanos() as u64,
            start_timeout_per_flow_ns: START_TIMEOUT_PER_FLOW.as_nanos() as u64,
            max_spin_threads: self.max_spin_threads,
            max_spin_threads_per_client: self.spin_per_client() as u32,
        }
    }

    /// How long a session of `flows` flows waits for `start` after `accepted`.
    pub fn start_timeout_for(&self, flows: u32) -> Duration {
        self.start_timeout
            .saturating_add(START_TIMEOUT_PER_FLOW.saturating_mul(flows))
    }

    /// Refuse a (validated) spec over a limit, naming the limit.
    pub fn check(&self, plan: &TestPlan) -> Result<(), String> {
        if plan.flows > self.max_flows {
            return Err(format!(
                "--flows {} is over this server's limit of {} flows per session (--max-flows)",
                plan.flows, self.max_flows
            ));
        }
        if plan.threads > self.max_flows {
            return Err(format!(
                "--threads {} is over this server's limit of {} (--max-flows bounds threads too)",
                plan.threads, self.max_flows
            ));
        }
        let total = total_duration_ns(plan);
        if total > self.max_duration_ns {
            return Err(format!(
                "the test lasts {} s (warm-up + duration + cool-down), over this server's limit of {} s (--max-duration)",
                total as f64 / 1e9,
                self.max_duration_ns as f64 / 1e9
            ));
        }
        // The session's idle timeout is one interval plus slack: a long
        // interval would let a client hold a silent session for as long.
        if plan.interval_ns > self.max_duration_ns {
            return Err(format!(
                "--interval {} s is over this server's limit of {} s (--max-duration)",
                plan.interval_ns as f64 / 1e9,
                self.max_duration_ns as f64 / 1e9
            ));
        }
        if !self.allow_tos_any {
            if let Some(t) = plan.tos.filter(|&t| !tos_allowed(t)) {
                return Err(tos_refused("--tos", t));
            }
            for p in &plan.parts {
                if let Some(t) = p.tos.filter(|&t| !tos_allowed(t)) {
                    return Err(tos_refused(
                        &format!("part '{}' tos", crate::text::echo(&p.name)),
                        t,
                    ));
                }
            }
        }
        self.check_marks(plan)?;
        let mem = memory_estimate(plan);
        if mem > self.max_session_memory_bytes {
            return Err(format!(
                "{}the test needs about {} of buffers and threads on the server, over its --max-session-memory {}; use fewer flows, threads or smaller sizes",
                window_flags(plan).map_or(String::new(), |f| f + ": "),
                bytes(mem),
                bytes(self.max_session_memory_bytes)
            ));
        }
        Ok(())
    }

    /// Refuse `spinning` workers of one session (`--spin`) that could
    /// never run here, whatever the other sessions hold: more than the
    /// server's total or one client's share (what the other sessions hold
    /// is [`super::admission`]'s to check). `whose` names the workers and
    /// the flags that set their number.
    pub fn check_spin(&self, spinning: u64, whose: &str) -> Result<(), String> {
        if spinning > u64::from(self.max_spin_threads) {
            return Err(format!(
                "--spin with {spinning} {whose} is over this server's limit of {} spinning workers, its total for all sessions together (--max-spin-threads; each takes a whole CPU)",
                self.max_spin_threads
            ));
        }
        let share = self.spin_per_client();
        if spinning > share {
            return Err(format!(
                "--spin with {spinning} {whose} is over this server's limit of {share} spinning workers per client (--max-spin-threads-per-client; its total is --max-spin-threads {})",
                self.max_spin_threads
            ));
        }
        Ok(())
    }

    /// The spinning workers one client's sessions may hold together,
    /// never more than `--max-spin-threads`.
    pub fn spin_per_client(&self) -> u64 {
        u64::from(self.max_spin_threads_per_client.min(self.max_spin_threads))
    }

    /// The server's totals, that all sessions' reservations share.
    pub fn totals(&self) -> Reservation {
        Reservation {
            bytes: self.max_memory_bytes,
            threads: self.max_threads,
            ports: self.max_ports,
            spin: u64::from(self.max_spin_threads),
        }
    }

    /// What one client's sessions may hold together, of the totals shared
    /// out per client.
    pub fn client_share(&self) -> ClientShare {
        ClientShare {
            ports: self.ports_per_client(),
            spin: self.spin_per_client(),
        }
    }

    /// SO_MARK and TCP_TX_DELAY on the server's sockets only as its
    /// operator allowed them (`--allow-mark`, `--allow-tx-delay`).
    fn check_marks(&self, plan: &TestPlan) -> Result<(), String> {
        if let Some(m) = plan.sockets.mark
            && !self.allowed_marks.allows(m)
        {
            return Err(format!(
                "--mark {m} (0x{m:x}) is refused: this server puts on its sockets only the firewall marks its operator allows (--allow-mark; allowed: {})",
                self.allowed_marks
            ));
        }
        if let Some(us) = plan.sockets.tcp_tx_delay_us
            && us > self.max_tx_delay_us
        {
            return Err(match self.max_tx_delay_us {
                0 => format!(
                    "--tcp-tx-delay {us}us is refused: this server delays its packets only as far as its operator allows (--allow-tx-delay; none allowed)"
                ),
                max => format!(
                    "--tcp-tx-delay {us}us is over this server's limit of {max}us (--allow-tx-delay {})",
                    delay_flag(max)
                ),
            });
        }
        Ok(())
    }

    /// The data ports one client's sessions may hold together
    /// (`--max-ports-per-client`), never more than `--max-ports`.
    pub fn ports_per_client(&self) -> u64 {
        self.max_ports_per_client.min(self.max_ports)
    }

    /// Refuse a spec whose data ports alone pass `--max-ports`, or one
    /// client's share of it (what the other sessions hold is
    /// [`super::admission`]'s to check).
    pub fn check_ports(&self, plan: &TestPlan, per_listener: u32) -> Result<(), String> {
        let n = data_ports(plan, per_listener);
        if n > self.max_ports {
            return Err(format!(
                "the test needs {n} data ports on the server (a UDP socket per flow, or its data listeners), over its --max-ports {}",
                self.max_ports
            ));
        }
        let share = self.ports_per_client();
        if n > share {
            return Err(format!(
                "the test needs {n} data ports on the server (a UDP socket per flow, or its data listeners), over its limit per client (--max-ports-per-client {share})"
            ));
        }
        Ok(())
    }
}

/// A size for a refusal: the unit that reads best (B, KiB, MiB, GiB).
fn bytes(b: u64) -> String {
    match b {
        b if b >= 1 << 30 => format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64),
        b if b >= 10 << 20 => format!("{} MiB", b >> 20),
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64),
        b if b >= 10 << 10 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

/// The flags of an open-loop spec whose server holds a buffer per request
/// its window allows (`--max-inflight`; udp_rr), each the size of a
/// request or a response, when the window is most of the estimate: named,
/// since they are what to lower.
fn window_flags(plan: &TestPlan) -> Option<String> {
    let p = plan
        .part_plans()
        .into_iter()
        .filter(|p| p.offered_per_s.is_some() && p.test.traits().max_inflight)
        .max_by_key(memory_estimate)?;
    let mut one = p.clone();
    one.max_inflight = 1;
    if memory_estimate(&p) < memory_estimate(&one).saturating_mul(2) {
        return None;
    }
    Some(format!(
        "--max-inflight {} with -r {},{}{} ({} flow{})",
        p.max_inflight,
        p.request_bytes,
        p.response_bytes,
        if p.driver == crate::plan::DriverChoice::Uring {
            " and --driver uring"
        } else {
            ""
        },
        p.flows,
        if p.flows == 1 { "" } else { "s" }
    ))
}

/// The data ports a session holds on the server: a UDP socket per flow, or
/// its data listeners (one per `per_listener` flows for long-lived TCP
/// flows, one for the connection tests), for every part of a mix.
pub fn data_ports(plan: &TestPlan, per_listener: u32) -> u64 {
    plan.part_plans()
        .iter()
        .map(|p| match p.test.traits().transport {
            Transport::Udp => p.flows as u64,
            Transport::Tcp => listeners_for(p.flows, per_listener) as u64,
            Transport::TcpPerTransaction => 1,
        })
        .sum()
}

/// Warm-up + measure + cool-down. A count-limited run (-n, --bytes) has no set
/// length; it counts as its warm-up and cool-down only, and the server's
/// idle timeout ends it if it stalls.
pub fn total_duration_ns(plan: &TestPlan) -> u64 {
    let measure = if plan.count_limited() {
        0
    } else {
        plan.duration_ns
    };
    plan.warmup_ns
        .saturating_add(measure)
        .saturating_add(plan.idle_ns)
        .saturating_add(plan.recovery_ns)
        .saturating_add(plan.cooldown_ns)
}

/// The memory a session makes the server allocate for its flows, an upper
/// bound: user-space buffers per flow (or per worker for connection tests),
/// socket buffers the spec sets explicitly (the kernel doubles them), and
/// [`PER_THREAD_BYTES`] for each of its [`session_threads`].
pub fn memory_estimate(plan: &TestPlan) -> u64 {
    if !plan.parts.is_empty() {
        // A mix: each part's flows as its test would have them alone.
        return plan
            .part_plans()
            .iter()
            .map(memory_estimate)
            .fold(0u64, u64::saturating_add);
    }
    // What the test's server flows allocate, from its row.
    let (per_flow, per_worker) = (plan.test.desc().server_buffers)(plan);
    // The server's side of the plan is `remote` (before for_server swaps it).
    let sock = plan
        .remote
        .send_buffer_bytes
        .unwrap_or(0)
        .saturating_add(plan.remote.recv_buffer_bytes.unwrap_or(0))
        .saturating_mul(2);
    let flows = plan.flows as u64;
    flows
        .saturating_mul(
            per_flow
                .saturating_add(PER_FLOW_OVERHEAD)
                .saturating_add(sock),
        )
        .saturating_add((plan.most_threads() as u64).saturating_mul(per_worker))
        .saturating_add(session_threads(plan).saturating_mul(PER_THREAD_BYTES))
}

/// How long a session may run past the length its spec states: the last
/// interval's tick, the client's drain (`client::DRAIN_TIMEOUT`, 5 s), the
/// final report, and slack for a loaded machine. The same slack as the
/// control idle timeout.
pub const DRAIN_ALLOWANCE: Duration = Duration::from_secs(15);

/// When a running session must end whatever its client sends: its stated
/// length (warm-up + duration + cool-down; for a count-limited `-n` run, the
/// server's `--max-duration`), one interval, and [`DRAIN_ALLOWANCE`]; a
/// phased mix also the client's wait for its bulk parts to drain before
/// the recovery phase ([`super::timeline::DRAIN_TIMEOUT`]).
pub fn session_bound(plan: &TestPlan, limits: &SessionLimits) -> Duration {
    let stated = if plan.count_limited() {
        limits.max_duration_ns
    } else {
        total_duration_ns(plan)
    };
    let load_drain = if plan.load_phases() {
        super::timeline::DRAIN_TIMEOUT
    } else {
        Duration::ZERO
    };
    Duration::from_nanos(stated)
        .saturating_add(Duration::from_nanos(plan.interval_ns))
        .saturating_add(DRAIN_ALLOWANCE)
        .saturating_add(load_drain)
}

/// Why a session was ended at its bound, naming the limit.
pub(super) fn overran(plan: &TestPlan, limits: &SessionLimits, bound: Duration) -> String {
    let allowance = bound.as_secs_f64() - total_duration_ns(plan) as f64 / 1e9;
    if plan.count_limited() {
        format!(
            "session ended after {:.1} s: a count-limited (-n, --bytes) run may last this server's --max-duration of {} s plus {allowance:.1} s for the drain",
            bound.as_secs_f64(),
            limits.max_duration_ns as f64 / 1e9
        )
    } else {
        format!(
            "session ended after {:.1} s: its spec states {} s (warm-up + duration + cool-down), and a session may outlast that by {allowance:.1} s for the drain (--max-duration bounds the stated length)",
            bound.as_secs_f64(),
            total_duration_ns(plan) as f64 / 1e9
        )
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn tos_below_cs6_with_ecn_clear_is_allowed() {
        for ok in [0x00, 0x20, 0xb8, 0xa0, 0x88] {
            assert!(tos_allowed(ok), "{ok:#x}");
        }
        for bad in [0xc0, 0xe0, 0xff, 0x01, 0x02, 0xbb] {
            assert!(!tos_allowed(bad), "{bad:#x}");
        }
        let mut plan = TestPlan::new(crate::plan::TestKind::TcpRr);
        plan.tos = Some(0xc0);
        let l = SessionLimits::default();
        assert!(l.check(&plan).unwrap_err().starts_with("--tos 0xc0"));
        let any = SessionLimits {
            allow_tos_any: true,
            ..SessionLimits::default()
        };
        assert_eq!(any.check(&plan), Ok(()));
    }
    use super::*;
    use crate::plan::TestKind;

    #[test]
    fn a_mix_counts_every_part() {
        let mut plan = TestPlan::new(TestKind::TcpStream);
        plan.parts =
            crate::plan::mix::parse_spec("tcp_stream*4,tcp_maerts*4,tcp_rr@rate=10").unwrap();
        plan.flows = 9;
        plan.idle_ns = 5_000_000_000;
        plan.recovery_ns = 5_000_000_000;
        assert_eq!(session_threads(&plan), 4);
        let alone: u64 = plan.part_plans().iter().map(memory_estimate).sum();
        assert_eq!(memory_estimate(&plan), alone);
        assert!(memory_estimate(&plan) > memory_estimate(&plan.part_plans()[0]));
        // The phases are part of the session's stated length.
        assert_eq!(
            total_duration_ns(&plan),
            plan.warmup_ns + plan.duration_ns + 10_000_000_000 + plan.cooldown_ns
        );
    }

    #[test]
    fn each_limit_is_named() {
        let l = SessionLimits {
            max_sessions: 4,
            max_flows: 8,
            max_duration_ns: 10_000_000_000,
            max_session_memory_bytes: 64 << 20,
            ..SessionLimits::default()
        };
        let mut p = TestPlan::new(TestKind::TcpStream);
        p.warmup_ns = 0;
        assert_eq!(l.check(&p), Ok(()));
        p.flows = 9;
        assert!(l.check(&p).unwrap_err().contains("--max-flows"));
        p.flows = 8;
        p.duration_ns = 10_000_000_001;
        assert!(l.check(&p).unwrap_err().contains("--max-duration"));
        p.duration_ns = 1_000_000_000;
        p.interval_ns = 10_000_000_001;
        assert!(l.check(&p).unwrap_err().contains("--interval"));
        p.interval_ns = 1_000_000_000;
        p.recv_bytes = 16 << 20;
        assert!(l.check(&p).unwrap_err().contains("--max-session-memory"));
        p.recv_bytes = 128 << 10;
        p.remote.recv_buffer_bytes = Some(8 << 20);
        assert!(l.check(&p).unwrap_err().contains("--max-session-memory"));
    }

    /// A spinning session is counted by the server's workers for it, and
    /// one that could never run here is refused at once, naming the total
    /// or the share per client (half the total unless the operator says).
    #[test]
    fn spinning_workers_are_checked_against_the_total_and_the_share() {
        let mut p = TestPlan::new(TestKind::TcpRr);
        p.threads = 2;
        assert_eq!(server_spinning(&p), 0);
        p.spin = true;
        assert_eq!(server_spinning(&p), 2);
        p.spreading.server_threads = Some(3);
        assert_eq!(server_spinning(&p), 3);
        let l = SessionLimits {
            max_spin_threads: 4,
            max_spin_threads_per_client: default_max_spin_threads_per_client(4),
            ..SessionLimits::default()
        };
        assert_eq!(l.client_share().spin, 2);
        assert_eq!(l.totals().spin, 4);
        assert_eq!(l.check_spin(2, "workers"), Ok(()));
        let e = l.check_spin(5, "workers").unwrap_err();
        assert!(
            e.contains("limit of 4") && e.contains("all sessions together (--max-spin-threads"),
            "{e}"
        );
        let e = l.check_spin(3, "workers").unwrap_err();
        assert!(
            e.contains("limit of 2 spinning workers per client (--max-spin-threads-per-client"),
            "{e}"
        );
        // A share above the total is the total.
        let wide = SessionLimits {
            max_spin_threads_per_client: 64,
            ..l
        };
        assert_eq!(wide.spin_per_client(), 4);
        assert_eq!(default_max_spin_threads_per_client(1), 1);
    }

    #[test]
    fn zerocopy_senders_count_their_ring() {
        let mut p = TestPlan::new(TestKind::TcpMaerts);
        let plain = memory_estimate(&p);
        p.zerocopy = true;
        let ring = crate::io::zerocopy::RING_SLOTS as u64;
        assert_eq!(memory_estimate(&p) - plain, (ring - 1) * p.send_bytes);
    }

    /// 100,000 1-byte rr flows on 2 threads (the scale thrum is built for)
    /// are admitted by a server with the default --max-session-memory:
    /// they hold about 5.0 (tcp_rr) and 1.2 KB (udp_rr) each there
    /// (bench/flows.sh), and the estimate stays above that.
    #[test]
    fn a_hundred_thousand_small_rr_flows_fit_the_default_memory() {
        for (kind, held) in [(TestKind::TcpRr, 5_000), (TestKind::UdpRr, 1_200)] {
            let mut p = TestPlan::new(kind);
            p.flows = 100_000;
            p.threads = 2;
            let m = memory_estimate(&p);
            assert!(m <= DEFAULT_MAX_SESSION_MEMORY, "{kind:?}: {m}");
            assert!(m >= 100_000 * held, "{kind:?}: {m}");
        }
    }

    /// The case the estimate missed: 1,024 tcp_crr flows on 1,024 threads
    /// hold about 570 MiB of thread stacks and arenas, not 4 MiB.
    #[test]
    fn threads_count_in_the_estimate() {
        let mut p = TestPlan::new(TestKind::TcpCrr);
        p.flows = 1024;
        p.threads = 1024;
        assert!(
            memory_estimate(&p) > (1024 * 563) << 10,
            "{}",
            memory_estimate(&p)
        );
        let l = SessionLimits {
            max_session_memory_bytes: 8 << 20,
            ..SessionLimits::default()
        };
        assert!(l.check(&p).unwrap_err().contains("--max-session-memory"));
    }

    /// A crafted spec: a udp_rr open-loop window of 65,536 responses
    /// of 65,507 bytes under io_uring made the server allocate 8.6 GB for
    /// one flow and 2.1 GB of receive ring per worker at `start`. The
    /// estimate counts both, and the refusal names the flags.
    #[test]
    fn an_open_loop_window_is_in_the_estimate() {
        let mut p = TestPlan::new(TestKind::UdpRr);
        p.offered_per_s = Some(1000);
        p.max_inflight = 65_536;
        p.response_bytes = 65_507;
        p.driver = crate::plan::DriverChoice::Uring;
        assert_eq!(p.validate().map_err(|e| e.to_string()), Ok(()));
        let slab = (2 * 65_536 + 2) * 65_507u64;
        assert!(memory_estimate(&p) > slab, "{}", memory_estimate(&p));
        let l = SessionLimits {
            max_session_memory_bytes: 64 << 20,
            ..SessionLimits::default()
        };
        let e = l.check(&p).unwrap_err();
        assert!(
            e.contains("--max-inflight 65536 with -r 1,65507 and --driver uring")
                && e.contains("8.0 GiB")
                && e.contains("--max-session-memory 64 MiB"),
            "{e}"
        );
        // A request of 64 KB per buffer of the receive ring: counted (per
        // worker), and the ring itself capped at 64 MiB.
        p.response_bytes = 1;
        p.request_bytes = 65_507;
        let ring = (*desc_of(&p))(&p).1;
        assert_eq!(ring, 1024 * 65_508);
        // The default open loop (1,024 in flight, 1-byte messages) is small.
        let mut d = TestPlan::new(TestKind::UdpRr);
        d.offered_per_s = Some(1000);
        d.driver = crate::plan::DriverChoice::Uring;
        assert!(memory_estimate(&d) < 4 << 20, "{}", memory_estimate(&d));
        // tcp_rr's server does not size by the window: not named.
        let mut t = TestPlan::new(TestKind::TcpRr);
        t.offered_per_s = Some(1000);
        t.max_inflight = 65_536;
        t.flows = 100;
        t.threads = 100;
        let e = l.check(&t).unwrap_err();
        assert!(
            !e.contains("--max-inflight") && e.contains("--max-session-memory"),
            "{e}"
        );
        // Epoll allocates neither the send slab nor the ring.
        p.driver = crate::plan::DriverChoice::Epoll;
        assert_eq!((*desc_of(&p))(&p).1, 0);
    }

    fn desc_of(p: &TestPlan) -> &'static fn(&TestPlan) -> (u64, u64) {
        &p.test.desc().server_buffers
    }

    /// A mark or a transmit delay reaches the server's sockets only as
    /// its operator allows; the refusal names the flag.
    #[test]
    fn marks_and_delays_need_the_operators_opt_in() {
        let mut p = TestPlan::new(TestKind::TcpStream);
        p.sockets.mark = Some(0x4000);
        let l = SessionLimits::default();
        let e = l.check(&p).unwrap_err();
        assert!(
            e.starts_with("--mark 16384 (0x4000) is refused")
                && e.contains("--allow-mark; allowed: none"),
            "{e}"
        );
        let some = SessionLimits {
            allowed_marks: AllowedMarks::These(vec![0x4000, 7]),
            max_tx_delay_us: 5000,
            ..SessionLimits::default()
        };
        assert_eq!(some.check(&p), Ok(()));
        p.sockets.mark = Some(8);
        assert!(some.check(&p).unwrap_err().contains("allowed: 0x4000,0x7"));
        p.sockets.mark = None;
        p.sockets.tcp_tx_delay_us = Some(1_000_000);
        let e = l.check(&p).unwrap_err();
        assert!(e.contains("--allow-tx-delay; none allowed"), "{e}");
        let e = some.check(&p).unwrap_err();
        assert!(
            e.contains("over this server's limit of 5000us (--allow-tx-delay 5ms)"),
            "{e}"
        );
        p.sockets.tcp_tx_delay_us = Some(5000);
        assert_eq!(some.check(&p), Ok(()));
        let any = SessionLimits {
            allowed_marks: AllowedMarks::Any,
            ..SessionLimits::default()
        };
        p.sockets = Default::default();
        p.sockets.mark = Some(u32::MAX);
        assert_eq!(any.check(&p), Ok(()));
    }

    /// One client's share of the ports is by default its share of the
    /// sessions; a spec over it alone is refused naming the flag.
    #[test]
    fn a_client_holds_its_share_of_the_ports() {
        assert_eq!(default_max_ports_per_client(2048, 16, 64), 512);
        assert_eq!(default_max_ports_per_client(2048, 64, 64), 2048);
        assert_eq!(default_max_ports_per_client(3, 1, 64), 1);
        // The embedded server's: no bound to overflow.
        assert_eq!(
            default_max_ports_per_client(u64::MAX, u32::MAX, 64),
            u64::MAX
        );
        let d = SessionLimits::default();
        assert_eq!(d.ports_per_client(), d.max_ports / 4);
        let l = SessionLimits {
            max_ports: 2048,
            max_ports_per_client: 512,
            ..SessionLimits::default()
        };
        let mut p = TestPlan::new(TestKind::UdpStream);
        p.flows = 513;
        let e = l.check_ports(&p, 0).unwrap_err();
        assert!(
            e.contains("513 data ports") && e.contains("(--max-ports-per-client 512)"),
            "{e}"
        );
        p.flows = 512;
        assert_eq!(l.check_ports(&p, 0), Ok(()));
        // Never more than all of them.
        let over = SessionLimits {
            max_ports_per_client: 5000,
            ..l
        };
        assert_eq!(over.ports_per_client(), 2048);
    }

    #[test]
    fn ports_are_counted_per_socket_and_listener() {
        let mut p = TestPlan::new(TestKind::UdpStream);
        p.flows = 1024;
        assert_eq!(data_ports(&p, 0), 1024);
        let l = SessionLimits {
            max_ports: 1000,
            ..SessionLimits::default()
        };
        let e = l.check_ports(&p, 0).unwrap_err();
        assert!(
            e.contains("1024 data ports") && e.contains("--max-ports 1000"),
            "{e}"
        );
        let mut t = TestPlan::new(TestKind::TcpStream);
        t.flows = 1024;
        assert_eq!(data_ports(&t, 1), 1024);
        assert_eq!(data_ports(&t, 0), 1);
        assert_eq!(data_ports(&TestPlan::new(TestKind::TcpCrr), 1), 1);
    }

    #[test]
    fn the_start_deadline_is_short_and_grows_with_flows() {
        let l = SessionLimits::default();
        assert_eq!(l.start_timeout_for(1), Duration::from_millis(5001));
        assert_eq!(l.start_timeout_for(1024), Duration::from_millis(6024));
        let stated = l.stated();
        assert_eq!(stated.start_timeout_ns, 5_000_000_000);
        assert_eq!(stated.max_sessions_per_client, 16);
        assert!(stated.max_ports >= 16);
        assert_eq!(stated.max_ports_per_client, stated.max_ports / 4);
    }

    #[test]
    fn defaults_admit_the_default_plans() {
        let l = SessionLimits::default();
        for t in TestKind::ALL {
            assert_eq!(l.check(&TestPlan::new(t)), Ok(()), "{t}");
        }
    }
}
