//! Control protocol v1: length-prefixed JSON messages.
//!
//! A frame is a 4-byte big-endian length followed by that many bytes of JSON.
//! The length is checked against a hard limit before anything is allocated,
//! so a hostile length prefix (say 4 GiB) costs nothing; every read runs under
//! the socket's read timeout. An unknown or malformed message is an error for
//! that session only.
//!
//! Session: hello (both ways, versions checked) → spec → accepted (data port
//! and token) → data connections, each presenting the token → start → started
//! → ticks (client) answered by samples (server) → finish → final. A tick
//! says when it was due, and the server's sample counts up to that moment
//! on its own clock (see `ticks`), however late the tick arrived.
//!
//! Two other requests may come where the spec does. A clock exchange
//! (`clock_ping`, answered by `clock_pong` with the server's two
//! CLOCK_MONOTONIC readings), any number of times up to a bound, lets the
//! peer estimate the server's clock offset (`stats::offset`). An agent
//! request (`agent_run`, only to a server started with `--agent`, and
//! only after the key) asks the server to run a test as a client toward
//! another server: it answers `agent_ready` once its flows are up, takes
//! clock pings while it waits, starts at the instant `agent_start` names
//! on its own clock, sends each interval as an `agent_sample` and its
//! whole result as `agent_final`, then answers clock pings again until the
//! controller closes.

use std::io::{self, Read, Write};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::io::spread::AddrRun;
use crate::plan::Phase;
use crate::plan::TestPlan;
use crate::result::{Interval, TestResult};
use crate::stats::counters::Counts;

/// The protocol version this build speaks.
/// v2: a spec may carry `parts` (a mix) and `tos`; a v1 server would run
/// only the first field's test and ignore the rest, so the versions refuse
/// each other with the mismatch message.
pub const PROTOCOL_VERSION: u32 = 2;

/// The largest frame either end accepts.
pub const MAX_FRAME: usize = 16 << 20;

/// What a server allows, stated in its hello.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServerLimits {
    pub max_sessions: u32,
    pub max_flows: u32,
    pub max_duration_ns: u64,
    pub max_frame_bytes: u64,
    /// The largest send/receive call, request or response (bytes).
    #[serde(default)]
    pub max_io_bytes: u64,
    /// The largest SO_SNDBUF/SO_RCVBUF a spec may ask for (bytes).
    #[serde(default)]
    pub max_socket_buffer_bytes: u64,
    /// The most buffer memory one session may make the server allocate.
    #[serde(default)]
    pub max_session_memory_bytes: u64,
    /// The most memory all sessions together may make it allocate.
    #[serde(default)]
    pub max_memory_bytes: u64,
    /// The most threads all sessions together may make it run.
    #[serde(default)]
    pub max_threads: u64,
    /// The most sessions (from the key, or an accepted spec, to their
    /// end) one client may hold: one IPv4 address, or one IPv6 /64.
    #[serde(default)]
    pub max_sessions_per_client: u32,
    /// The most data ports (listeners and UDP sockets) all sessions
    /// together may hold.
    #[serde(default)]
    pub max_ports: u64,
    /// The most data ports one client's sessions may hold together.
    #[serde(default)]
    pub max_ports_per_client: u64,
    /// How long the server waits for `start` after `accepted`: this much,
    /// plus [`ServerLimits::start_timeout_per_flow_ns`] per flow.
    #[serde(default)]
    pub start_timeout_ns: u64,
    /// What each flow adds to the wait for `start` (connecting it).
    #[serde(default)]
    pub start_timeout_per_flow_ns: u64,
    /// The most worker threads all sessions together may make the server
    /// spin (`--spin`); 0 from a server that does not state it.
    #[serde(default)]
    pub max_spin_threads: u32,
    /// The most of them one client's sessions may hold together.
    #[serde(default)]
    pub max_spin_threads_per_client: u32,
}

/// Process resource usage of one end (the same wire names as always).
pub use crate::sensors::Rusage;

/// A message of one direction: its wire name, and how to take it out of
/// that direction's enum (for [`expect`]-style reads).
pub trait Message<M>: Sized {
    /// The wire name (`"type"`).
    const KIND: &'static str;
    /// This message, or the one that came instead.
    fn take(m: M) -> Result<Self, M>;
}

/// Declares one direction's enum: a newtype variant per message struct,
/// tagged on the wire by `"type"` as protocol v1 always was, plus
/// [`Message`] and `From` for each struct.
macro_rules! direction {
    ($(#[$meta:meta])* $dir:ident { $($variant:ident = $kind:literal),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
        // Unknown fields are ignored on purpose: a newer peer's hello must
        // still parse, so that the answer is "version mismatch", not
        // "malformed".
        #[serde(tag = "type", rename_all = "snake_case")]
        pub enum $dir {
            $($variant($variant)),*
        }

        impl $dir {
            /// The wire name of this message.
            pub fn kind(&self) -> &'static str {
                match self {
                    $($dir::$variant(_) => $kind),*
                }
            }
        }

        $(
            impl From<$variant> for $dir {
                fn from(m: $variant) -> $dir {
                    $dir::$variant(m)
                }
            }

            impl Message<$dir> for $variant {
                const KIND: &'static str = $kind;
                fn take(m: $dir) -> Result<$variant, $dir> {
                    match m {
                        $dir::$variant(x) => Ok(x),
                        #[allow(unreachable_patterns)]
                        other => Err(other),
                    }
                }
            }
        )*
    };
}

direction! {
    /// What a client sends: hello → (auth) → spec → start → ticks → finish.
    ClientMsg {
        Hello = "hello",
        Auth = "auth",
        Spec = "spec",
        Start = "start",
        Tick = "tick",
        Finish = "finish",
        ClockPing = "clock_ping",
        AgentRun = "agent_run",
        AgentStart = "agent_start",
    }
}

direction! {
    /// What a server sends: hello → (auth_ok) → accepted → started →
    /// samples → final; `error` at any point ends the session.
    ServerMsg {
        Hello = "hello",
        AuthOk = "auth_ok",
        Accepted = "accepted",
        Started = "started",
        Sample = "sample",
        Final = "final",
        Error = "error",
        ClockPong = "clock_pong",
        AgentReady = "agent_ready",
        AgentSample = "agent_sample",
        AgentFinal = "agent_final",
    }
}

/// Both ends open with it: versions, and from the server its limits and,
/// when it requires a key, the challenge.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    pub protocol: u32,
    pub software: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<ServerLimits>,
    /// Server only: the authentication challenge (hex), present when the
    /// server requires a pre-shared key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nonce: Option<String>,
    /// What this end applies beyond its protocol version
    /// (`features::features`): a client refuses a spec field the server's
    /// hello does not name a feature for instead of having it ignored.
    /// Absent from an older peer: none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub features: Vec<String>,
    /// Which CLOCK_MONOTONIC this end reads (its boot and time namespace):
    /// a client on the same kernel as its server knows their offset
    /// exactly (`--one-way`). Absent from an older peer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_id: Option<crate::clock::MonotonicId>,
}

impl Hello {
    /// This build's hello; a server adds its limits and nonce.
    pub fn ours() -> Hello {
        Hello {
            protocol: PROTOCOL_VERSION,
            software: format!("thrum {}", env!("CARGO_PKG_VERSION")),
            limits: None,
            nonce: None,
            features: super::features::features()
                .into_iter()
                .map(str::to_string)
                .collect(),
            clock_id: crate::clock::monotonic_id(),
        }
    }

    /// Does the peer's hello name `feature`?
    pub fn names(&self, feature: &str) -> bool {
        self.features.iter().any(|f| f == feature)
    }

    /// The first feature a spec with `plan` needs (`features::needed`)
    /// that the peer's hello does not name, with the flag that asked for it.
    pub fn lacks(&self, plan: &TestPlan) -> Option<super::features::Need> {
        super::features::needed(plan)
            .into_iter()
            .find(|n| !self.names(n.feature))
    }

    /// The one version check, for both ends: `None` when the peer speaks
    /// ours, else the message that names both versions (`we` is "client"
    /// or "server", `peer` how to name the other end).
    pub fn mismatch(&self, we: &str, peer: &str) -> Option<String> {
        (self.protocol != PROTOCOL_VERSION).then(|| {
            format!(
                "protocol version mismatch: this {we} speaks v{PROTOCOL_VERSION}, {peer} ({}) speaks v{}",
                crate::text::echo(&self.software),
                self.protocol
            )
        })
    }
}

/// The client's answer to the hello's nonce: HMAC-SHA256, hex.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Auth {
    pub answer: String,
}

/// The server accepted the answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AuthOk {}

/// The test to run. Which of its fields need a feature of the server is
/// `features`' table, checked against this type's schema.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Spec {
    pub plan: Box<TestPlan>,
    /// Open one data listener per this many long-lived TCP flows (0: one
    /// listener): the client's connections to one server port all need
    /// ports of its own ephemeral range (see [`crate::io::spread`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub flows_per_listener: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The server took the spec: where to connect, and the session token.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Accepted {
    pub data_port: u16,
    /// The session token, hex.
    pub token: String,
    /// UDP tests: the server's socket port of each flow.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub udp_ports: Vec<u16>,
    /// The listeners after `data_port`, when the client asked for several.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub more_data_ports: Vec<u16>,
    /// UDP tests: the server's socket address of each flow, in runs; empty
    /// when every one is on the address the client reached it at.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub udp_addrs: Vec<AddrRun>,
    /// A mix: each part's data port and UDP ports, in the plan's order
    /// (the two fields above then stay empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<PartPorts>,
}

/// Where one part of a mix connects.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PartPorts {
    /// The part's TCP listener; 0 for a UDP part.
    pub data_port: u16,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub udp_ports: Vec<u16>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub more_data_ports: Vec<u16>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub udp_addrs: Vec<AddrRun>,
}

/// Every data flow is up: start the workers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Start {
    /// UDP tests: the client's socket port of each flow; the server
    /// connects its sockets to them, so it receives from and sends to
    /// nothing else.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub udp_ports: Vec<u16>,
    /// A mix: each part's client UDP ports, in the plan's order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts_udp_ports: Vec<Vec<u16>>,
    /// UDP tests: the client's socket address of each flow, in runs; empty
    /// when every one is on the address of the control connection.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub udp_addrs: Vec<AddrRun>,
    /// A mix: each part's `udp_addrs`, in the plan's order (or none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts_udp_addrs: Vec<Vec<AddrRun>>,
}

/// The server's workers run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Started {
    pub threads: u32,
    pub drivers: Vec<String>,
}

/// Sample, then enter `phase`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tick {
    pub seq: u32,
    pub phase: Phase,
    /// A phased mix: start or drain the bulk parts with this tick.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<crate::plan::LoadStep>,
    /// When the client took its sample of this tick, ns on its clock since
    /// its first tick (added in v2, optional both ways). The server samples
    /// its counters at that moment on its own clock, so a tick held up on
    /// a congested path delays the sample, not what it counts; without it
    /// (an older client) the server samples on receipt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub due_ns: Option<u64>,
}

/// The server's counters at a tick.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub seq: u32,
    /// Server's monotonic time since it started its workers.
    pub elapsed_ns: u64,
    pub unix_ns: u64,
    pub counts: Vec<Counts>,
    /// A mix: each part's TCP retransmissions so far, at this tick.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub part_retransmits: Vec<Option<u64>>,
    /// A TCP stream test: TCP_INFO of each of the server's data sockets at
    /// this tick, in one order for the session (`intervals[].tcp_info`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tcp_info: Vec<Option<crate::sensors::TcpInfo>>,
    /// The server host's CPU ticks at this tick (/proc/stat), so that the
    /// client has the server's utilisation per interval (absent from older
    /// servers and where /proc/stat cannot be read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<crate::sensors::cpu::CpuTotals>,
    /// The server process's resource usage so far, at this tick: the
    /// client takes each interval's change from two ticks' readings (the
    /// running total, so a sample that never arrives loses no usage).
    /// Absent from an older server: the samples' remote usage columns stay
    /// empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rusage: Option<Rusage>,
}

/// The client's workers have drained; stop and report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Finish {
    /// udp_stream: datagrams each flow sent in all, so the server's final
    /// loss is the exact sent - received.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub datagrams_sent: Vec<u64>,
}

/// The server's final report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Final {
    pub counts: Vec<Counts>,
    pub rusage: Rusage,
    pub errors: Vec<String>,
    /// Data connections refused (wrong peer or token) during the session.
    pub refused: u64,
    /// The server's readings over its measurement window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<Box<crate::sensors::window::WindowStats>>,
    /// Where the server ran: versions, kernel, interface, sysctls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Box<crate::sensors::Provenance>>,
    /// TCP retransmissions of the server's long-lived data connections.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_retransmits: Option<u64>,
    /// `--mark`, `--tcp-tx-delay`: what the server's kernel read back from
    /// a data socket of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket_options: Option<crate::plan::sockets::SocketMarks>,
    /// TCP tests: the congestion control the server's data sockets used
    /// (read back from one of them). Absent from an older server: the
    /// result then falls back to `--cc` or the server's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion_control: Option<String>,
    /// `--zerocopy`: the server's MSG_ZEROCOPY sends and completions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zerocopy: Option<crate::io::zerocopy::ZeroCopyCounts>,
    /// The socket buffers the server's kernel gave its data sockets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket_buffers: Option<crate::io::socket::SocketBuffers>,
    /// `--busy-poll`, `--prefer-busy-poll`: what the server's kernel read
    /// back from a data socket given them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_poll: Option<crate::io::busypoll::BusyPollSet>,
    /// `--driver uring` with `--busy-poll`: the NAPI busy polling the
    /// server's rings read back (absent from a server too old to register it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uring_napi: Option<crate::io::napi::NapiSet>,
    /// `--call-times`: the server's send and receive call times.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_times: Option<Box<crate::stats::calltime::SendRecvTimes>>,
    /// capacity: the gaps of the packet trains the server's receivers saw
    /// (absent from older servers and from other tests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub train_gaps: Option<crate::stats::dispersion::TrainGaps>,
    /// A mix: the server's TCP retransmissions of each part.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub part_retransmits: Vec<Option<u64>>,
}

/// One clock exchange's ping: the server answers with its clock's readings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClockPing {
    pub seq: u32,
}

/// The answer to a [`ClockPing`]: the server's CLOCK_MONOTONIC when the
/// ping arrived and when this pong left, ns (`stats::offset`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClockPong {
    pub seq: u32,
    pub rx_ns: u64,
    pub tx_ns: u64,
    /// CLOCK_REALTIME at `tx_ns`, ns since the epoch: labels only (it may
    /// step), and the wall clocks' offset beside the monotonic one.
    pub unix_ns: u64,
    /// The server's kernel on its own clock's synchronisation (adjtimex).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync: Option<crate::clock::SyncState>,
}

/// To an agent (`thrum server --agent`): run `plan` as a client toward
/// the thrum server at `target`, and hold before its start.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentRun {
    pub plan: Box<TestPlan>,
    /// The target as the controller resolved it.
    pub target: std::net::SocketAddr,
    /// The target as the user wrote it, for messages and the result.
    pub target_label: String,
    /// The target asks for a key (its hello carried a challenge): the
    /// agent proves its own, the fleet's one key. The key never crosses
    /// the wire.
    pub target_keyed: bool,
}

/// The agent's flows toward the target are connected: it waits for
/// [`AgentStart`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentReady {}

/// Start at this instant of the agent's own CLOCK_MONOTONIC, ns.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentStart {
    pub at_ns: u64,
}

/// One interval of the agent's run, on the agent's clock: its workers
/// started at `t0_ns` (CLOCK_MONOTONIC, ns), and the interval's bounds
/// are seconds after that. Per-flow counts are left out (the final result
/// has them).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AgentSample {
    pub t0_ns: u64,
    pub interval: Box<Interval>,
}

/// The agent's run is over: its whole result (an error in it when the run
/// failed, before or after its start), and when its workers started.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AgentFinal {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t0_ns: Option<u64>,
    pub result: Box<TestResult>,
}

/// The agent's messages compared as their JSON: the result types carry
/// floats and have no equality of their own.
macro_rules! eq_as_json {
    ($($t:ty),*) => {
        $(impl PartialEq for $t {
            fn eq(&self, other: &$t) -> bool {
                serde_json::to_value(self).ok() == serde_json::to_value(other).ok()
            }
        })*
    };
}
eq_as_json!(AgentSample, AgentFinal);

/// The server ends the session, and says why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Error {
    pub message: String,
}

/// Either direction's enum, for the codec.
pub trait Wire: Serialize + serde::de::DeserializeOwned {}
impl Wire for ClientMsg {}
impl Wire for ServerMsg {}

#[derive(Debug, Error)]
pub enum FrameError {
    #[error("control connection closed by the peer")]
    Closed,
    #[error("control frame of {0} bytes is over the limit of {1} bytes")]
    TooLarge(u64, u64),
    #[error("malformed control message: {0}")]
    Malformed(String),
    #[error("timed out waiting for a control message")]
    Timeout,
    #[error("control connection: {0}")]
    Io(io::Error),
}

impl From<io::Error> for FrameError {
    fn from(e: io::Error) -> Self {
        match e.kind() {
            io::ErrorKind::UnexpectedEof => FrameError::Closed,
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => FrameError::Timeout,
            io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe => FrameError::Closed,
            _ => FrameError::Io(e),
        }
    }
}

/// Encode one message as a frame.
pub fn encode<M: Wire>(msg: &M) -> Vec<u8> {
    let body = serde_json::to_vec(msg).expect("control messages always serialise");
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

pub fn write_msg<M: Wire>(w: &mut impl Write, msg: &M) -> Result<(), FrameError> {
    w.write_all(&encode(msg))?;
    w.flush()?;
    Ok(())
}

/// Decode one frame's body.
pub fn decode<M: Wire>(body: &[u8]) -> Result<M, FrameError> {
    serde_json::from_slice(body).map_err(|e| FrameError::Malformed(e.to_string()))
}

pub fn read_msg<M: Wire>(r: &mut impl Read) -> Result<M, FrameError> {
    read_msg_limited(r, MAX_FRAME)
}

/// Read one message whose frame may be at most `max` bytes (at most
/// [`MAX_FRAME`]): the server reads a not yet authenticated client's frames
/// with a small limit, so a connection that has proved nothing cannot make
/// it allocate much.
pub fn read_msg_limited<M: Wire>(r: &mut impl Read, max: usize) -> Result<M, FrameError> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let len = u32::from_be_bytes(len) as u64;
    if len > max.min(MAX_FRAME) as u64 {
        return Err(FrameError::TooLarge(len, max.min(MAX_FRAME) as u64));
    }
    let mut body = vec![0u8; len as usize];
    r.read_exact(&mut body)?;
    decode(&body)
}

/// Decode every complete frame at the front of `buf` (for tests and fuzzing).
pub fn decode_stream<M: Wire>(mut buf: &[u8]) -> Vec<Result<M, FrameError>> {
    let mut out = Vec::new();
    while buf.len() >= 4 {
        let len = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as u64;
        if len as usize > MAX_FRAME {
            out.push(Err(FrameError::TooLarge(len, MAX_FRAME as u64)));
            break;
        }
        if buf.len() < 4 + len as usize {
            break;
        }
        out.push(decode(&buf[4..4 + len as usize]));
        buf = &buf[4 + len as usize..];
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::plan::{TestKind, TestPlan};
    use proptest::prelude::*;
    use serde_json::Value;

    fn client_samples() -> Vec<ClientMsg> {
        vec![
            Hello {
                protocol: 1,
                software: "thrum 0.1.0".into(),
                limits: None,
                nonce: Some("00ff".into()),
                features: vec!["socket_marks".into()],
                clock_id: None,
            }
            .into(),
            Auth {
                answer: "ab".repeat(32),
            }
            .into(),
            Spec {
                plan: Box::new(TestPlan::new(TestKind::TcpRr)),
                flows_per_listener: 0,
            }
            .into(),
            Tick {
                seq: 3,
                phase: Phase::Measure,
                load: None,
                due_ns: Some(1_000_000),
            }
            .into(),
            Finish {
                datagrams_sent: vec![3],
            }
            .into(),
            ClockPing { seq: 9 }.into(),
            AgentRun {
                plan: Box::new(TestPlan::new(TestKind::TcpStream)),
                target: "10.0.0.1:12880".parse().unwrap(),
                target_label: "lg1".into(),
                target_keyed: true,
            }
            .into(),
            AgentStart { at_ns: 7 }.into(),
        ]
    }

    fn server_samples() -> Vec<ServerMsg> {
        vec![
            Hello::ours().into(),
            AuthOk {}.into(),
            Sample {
                seq: 3,
                elapsed_ns: 5,
                unix_ns: 6,
                counts: vec![Counts::default()],
                part_retransmits: vec![Some(3), None],
                tcp_info: Vec::new(),
                cpu: Some(crate::sensors::cpu::CpuTotals {
                    busy: 7,
                    total: 20,
                    cpus: 2,
                }),
                rusage: Some(Rusage::default()),
            }
            .into(),
            Error {
                message: "no".into(),
            }
            .into(),
            ClockPong {
                seq: 9,
                rx_ns: 10,
                tx_ns: 11,
                unix_ns: 12,
                sync: crate::clock::sync_state(),
            }
            .into(),
            AgentReady {}.into(),
            AgentSample {
                t0_ns: 13,
                interval: Box::new(crate::result::fixtures::interval(1, 1.0, 1.0)),
            }
            .into(),
            AgentFinal {
                t0_ns: Some(13),
                result: Box::new(crate::result::fixtures::result(TestKind::UdpRr)),
            }
            .into(),
        ]
    }

    /// Every sample message of both directions, framed.
    fn samples() -> Vec<Vec<u8>> {
        let mut v: Vec<Vec<u8>> = client_samples().iter().map(encode).collect();
        v.extend(server_samples().iter().map(encode));
        v
    }

    #[test]
    fn round_trip() {
        for m in client_samples() {
            let f = encode(&m);
            assert_eq!(read_msg::<ClientMsg>(&mut &f[..]).unwrap(), m);
        }
        for m in server_samples() {
            let f = encode(&m);
            assert_eq!(read_msg::<ServerMsg>(&mut &f[..]).unwrap(), m);
        }
    }

    /// The wire format of protocol v1 is kept: a tagged object per message,
    /// `auth_ok` with no fields.
    #[test]
    fn the_wire_format_is_protocol_v1() {
        let tick = encode(&ClientMsg::from(Tick {
            seq: 7,
            phase: Phase::Measure,
            load: None,
            due_ns: None,
        }));
        assert_eq!(&tick[4..], br#"{"type":"tick","seq":7,"phase":"measure"}"#);
        let ok = encode(&ServerMsg::from(AuthOk {}));
        assert_eq!(&ok[4..], br#"{"type":"auth_ok"}"#);
        let err = encode(&ServerMsg::from(Error {
            message: "x".into(),
        }));
        assert_eq!(&err[4..], br#"{"type":"error","message":"x"}"#);
    }

    /// A message of the other direction is refused by the decoder, not
    /// matched by name and then found impossible.
    #[test]
    fn a_message_of_the_wrong_direction_does_not_decode() {
        let sample = encode(&server_samples()[2]);
        assert!(read_msg::<ClientMsg>(&mut &sample[..]).is_err());
        let tick = encode(&client_samples()[3]);
        assert!(read_msg::<ServerMsg>(&mut &tick[..]).is_err());
        // Hello goes both ways.
        let hello = encode(&ClientMsg::from(Hello::ours()));
        assert!(read_msg::<ServerMsg>(&mut &hello[..]).is_ok());
    }

    #[test]
    fn take_gives_the_message_or_hands_back_what_came() {
        let m: ServerMsg = AuthOk {}.into();
        assert_eq!(
            <AuthOk as Message<ServerMsg>>::take(m.clone()),
            Ok(AuthOk {})
        );
        assert_eq!(<Started as Message<ServerMsg>>::take(m.clone()), Err(m));
        assert_eq!(<Started as Message<ServerMsg>>::KIND, "started");
    }

    #[test]
    fn one_version_check_names_both_versions() {
        assert_eq!(Hello::ours().mismatch("client", "the server"), None);
        // A server without the socket_marks feature is refused --mark and
        // --tcp-tx-delay before the spec goes out; ours takes both.
        let lacks = |h: &Hello, plan: &TestPlan| h.lacks(plan).map(|n| n.flag);
        let mut plan = TestPlan::new(TestKind::TcpRr);
        plan.sockets.mark = Some(7);
        assert_eq!(lacks(&Hello::ours(), &plan), None);
        let old = Hello {
            features: Vec::new(),
            ..Hello::ours()
        };
        assert_eq!(lacks(&old, &plan), Some("--mark"));
        plan.sockets.mark = None;
        plan.sockets.tcp_tx_delay_us = Some(10);
        assert_eq!(lacks(&old, &plan), Some("--tcp-tx-delay"));
        assert_eq!(lacks(&old, &TestPlan::new(TestKind::TcpRr)), None);
        plan.sockets.tcp_tx_delay_us = None;
        plan.spreading.listen_backlog = Some(8);
        let no_spreading = Hello {
            features: vec!["socket_marks".into()],
            ..Hello::ours()
        };
        assert_eq!(lacks(&no_spreading, &plan), Some("--listen-backlog"));
        plan.spreading = Default::default();
        plan.spreading.num_ports = Some(2);
        assert_eq!(lacks(&old, &plan), None, "num_ports is flows_per_listener");
        // A server that takes --local-hosts for long-lived TCP flows only.
        let tcp_only = Hello {
            features: vec!["socket_marks".into(), "spreading".into()],
            ..Hello::ours()
        };
        for (kind, refused) in [
            (TestKind::TcpRr, None),
            (TestKind::TcpCrr, Some("--local-hosts")),
            (TestKind::UdpRr, Some("--local-hosts")),
        ] {
            let mut p = TestPlan::new(kind);
            p.spreading.local_hosts = vec!["127.0.0.2".parse().unwrap()];
            assert_eq!(lacks(&tcp_only, &p), refused, "{kind}");
            assert_eq!(lacks(&Hello::ours(), &p), None, "{kind}");
        }
        // A server from before `bytes` was announced is refused --bytes
        // (it would run tcp_maerts until its --max-duration).
        let mut p = TestPlan::new(TestKind::TcpMaerts);
        p.bytes = Some(1 << 20);
        assert_eq!(lacks(&tcp_only, &p), Some("--bytes"));
        assert_eq!(lacks(&Hello::ours(), &p), None);
        let mut h = Hello::ours();
        h.protocol = 9;
        h.software = "thrum 9\x1b[31m".into();
        let m = h.mismatch("client", "the server at x").unwrap();
        assert!(m.contains("speaks v2") && m.contains("speaks v9"), "{m}");
    }

    /// Every field path of the spec, as its schema describes it: objects'
    /// properties (their own and those of groups they flatten), an array's
    /// items' fields under the array's path.
    fn schema_paths() -> BTreeSet<String> {
        fn walk(v: &Value, defs: &Value, at: &str, out: &mut BTreeSet<String>) {
            let v = match v.get("$ref").and_then(Value::as_str) {
                Some(r) => &defs[r.trim_start_matches("#/$defs/")],
                None => v,
            };
            if let Some(items) = v.get("items") {
                return walk(items, defs, at, out);
            }
            for any in ["anyOf", "oneOf", "allOf"] {
                for alt in v.get(any).and_then(Value::as_array).into_iter().flatten() {
                    walk(alt, defs, at, out);
                }
            }
            if let Some(props) = v.get("properties").and_then(Value::as_object) {
                for (k, p) in props {
                    let path = if at.is_empty() {
                        k.clone()
                    } else {
                        format!("{at}.{k}")
                    };
                    out.insert(path.clone());
                    walk(p, defs, &path, out);
                }
            }
        }
        let schema = schemars::schema_for!(Spec);
        let v = schema.as_value();
        let mut out = BTreeSet::new();
        walk(v, &v["$defs"], "", &mut out);
        out
    }

    /// Every field of the spec is in one list of `features`: a gate, the
    /// protocol's or the client's. A field added without a row fails here.
    #[test]
    fn every_field_of_the_spec_is_in_one_list_of_features() {
        let paths = schema_paths();
        assert!(paths.contains("plan.bytes") && paths.contains("plan.parts.tos"));
        use crate::control::features::{CLIENT_ONLY, GATES, PROTOCOL};
        for g in GATES {
            assert!(
                g.field.starts_with("plan."),
                "{}: `needed` reads the plan",
                g.field
            );
        }
        let mut listed = BTreeSet::new();
        for f in GATES
            .iter()
            .map(|g| g.field)
            .chain(PROTOCOL.iter().copied())
            .chain(CLIENT_ONLY.iter().copied())
        {
            assert!(listed.insert(f.to_string()), "{f} is listed twice");
        }
        let unlisted: Vec<_> = paths.difference(&listed).collect();
        assert!(
            unlisted.is_empty(),
            "spec fields in no list of control::features (a field a server applies needs a Gate and a feature): {unlisted:?}"
        );
        let stale: Vec<_> = listed.difference(&paths).collect();
        assert!(
            stale.is_empty(),
            "listed fields the spec has not: {stale:?}"
        );
        // The protocol's fields are those a server of its version has
        // always applied; a new one is a gate.
        assert_eq!(
            PROTOCOL.len(),
            49,
            "PROTOCOL is closed: a field added since needs a feature, or an older server drops it without a word"
        );
    }

    #[test]
    fn huge_length_is_refused_before_allocating() {
        let f = [0xff, 0xff, 0xff, 0xff, b'{'];
        assert!(matches!(
            read_msg::<ClientMsg>(&mut &f[..]),
            Err(FrameError::TooLarge(4294967295, _))
        ));
    }

    #[test]
    fn unknown_types_are_errors_unknown_fields_are_not() {
        assert!(decode::<ClientMsg>(br#"{"type":"launch"}"#).is_err());
        assert!(decode::<ClientMsg>(br#"{"type":"tick","seq":1}"#).is_err());
        let v2 = br#"{"type":"hello","protocol":2,"software":"thrum 9","new_field":[1]}"#;
        assert!(matches!(
            decode::<ServerMsg>(v2),
            Ok(ServerMsg::Hello(Hello { protocol: 2, .. }))
        ));
        assert!(matches!(
            decode::<ClientMsg>(v2),
            Ok(ClientMsg::Hello(Hello { protocol: 2, .. }))
        ));
        assert!(matches!(
            read_msg::<ClientMsg>(&mut &b"\0\0"[..]),
            Err(FrameError::Closed)
        ));
    }

    /// Frames fed to the decoder per proptest case, and cases: the mutation
    /// test decodes 1000 × 100 = 100,000 frames; the generated-message test,
    /// whose inputs cost more to build, 250 × 40 = 10,000 more.
    const FRAMES_PER_CASE: usize = 100;
    const CASES: u32 = 1000;
    const GENERATED_PER_CASE: usize = 40;
    const GENERATED_CASES: u32 = 250;

    /// Message types and field names the decoder knows, so that generated
    /// frames reach deep into it instead of failing at the first byte.
    const KINDS: &[&str] = &[
        "hello",
        "auth",
        "auth_ok",
        "spec",
        "accepted",
        "start",
        "started",
        "tick",
        "sample",
        "finish",
        "final",
        "error",
        "launch",
        "clock_ping",
        "clock_pong",
        "agent_run",
        "agent_ready",
        "agent_start",
        "agent_sample",
        "agent_final",
    ];
    const FIELDS: &[&str] = &[
        "protocol",
        "software",
        "limits",
        "nonce",
        "answer",
        "plan",
        "data_port",
        "token",
        "udp_ports",
        "threads",
        "drivers",
        "seq",
        "phase",
        "elapsed_ns",
        "unix_ns",
        "counts",
        "datagrams_sent",
        "rusage",
        "errors",
        "refused",
        "message",
        "rx_ns",
        "tx_ns",
        "target",
        "target_keyed",
        "at_ns",
        "t0_ns",
        "interval",
        "result",
    ];

    /// One mutation of a valid frame: flip, cut, insert, delete, repeat a
    /// slice, or rewrite the length prefix.
    fn mutate(f: &mut Vec<u8>, op: u8, pos: usize, byte: u8) {
        let p = pos % f.len().max(1);
        match op % 6 {
            0 if !f.is_empty() => f[p] = byte,
            1 => f.truncate(p),
            2 => f.insert(p.min(f.len()), byte),
            3 if !f.is_empty() => {
                f.remove(p);
            }
            4 => {
                let tail: Vec<u8> = f[p.min(f.len())..]
                    .iter()
                    .take(byte as usize)
                    .copied()
                    .collect();
                f.extend(tail);
            }
            _ if f.len() >= 4 => f[..4].copy_from_slice(&(pos as u32).to_be_bytes()),
            _ => {}
        }
    }

    fn feed(f: &[u8]) {
        let _ = decode_stream::<ClientMsg>(f);
        let _ = decode_stream::<ServerMsg>(f);
        let _ = read_msg::<ClientMsg>(&mut &f[..]);
        let _ = read_msg::<ServerMsg>(&mut &f[..]);
        let _ = read_msg_limited::<ClientMsg>(&mut &f[..], 64);
    }

    /// A JSON value of some depth, for generated field values.
    fn json_value() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            any::<u64>().prop_map(serde_json::Value::from),
            any::<f64>().prop_map(serde_json::Value::from),
            "[a-z_0-9]{0,12}".prop_map(serde_json::Value::from),
        ];
        leaf.prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
                proptest::collection::vec((proptest::sample::select(FIELDS), inner), 0..4)
                    .prop_map(|kv| serde_json::Value::Object(
                        kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
                    )),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(CASES))]
        /// Valid frames with up to four mutations each (bytes flipped, cut,
        /// inserted, deleted, repeated, the length rewritten) never panic
        /// the decoder, and neither do arbitrary bytes.
        #[test]
        fn mutated_frames_never_panic(
            muts in proptest::collection::vec(
                (0usize..7, proptest::collection::vec((any::<u8>(), any::<usize>(), any::<u8>()), 0..4)),
                FRAMES_PER_CASE - 1,
            ),
            noise in proptest::collection::vec(any::<u8>(), 0..256),
        ) {
            let samples = samples();
            for (which, ops) in muts {
                let mut f = samples[which % samples.len()].clone();
                for (op, pos, byte) in ops {
                    mutate(&mut f, op, pos, byte);
                }
                feed(&f);
            }
            feed(&noise);
        }

    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(GENERATED_CASES))]
        /// Generated messages: a known (or unknown) type with known field
        /// names holding arbitrary JSON, framed, then possibly mutated once.
        #[test]
        fn generated_frames_never_panic(
            frames in proptest::collection::vec(
                (
                    proptest::sample::select(KINDS),
                    proptest::collection::vec((proptest::sample::select(FIELDS), json_value()), 0..5),
                    (any::<u8>(), any::<usize>(), any::<u8>(), any::<bool>()),
                ),
                GENERATED_PER_CASE,
            ),
        ) {
            for (kind, fields, (op, pos, byte, mutated)) in frames {
                let mut obj = serde_json::Map::new();
                obj.insert("type".into(), kind.into());
                for (k, v) in fields {
                    obj.insert(k.to_string(), v);
                }
                let body = serde_json::to_vec(&obj).unwrap();
                let mut f = (body.len() as u32).to_be_bytes().to_vec();
                f.extend(body);
                if mutated {
                    mutate(&mut f, op, pos, byte);
                }
                feed(&f);
            }
        }
    }
}
