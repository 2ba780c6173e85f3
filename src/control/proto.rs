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
//! → ticks (client) answered by samples (server) → finish → final.

use std::io::{self, Read, Write};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::plan::Phase;
use crate::plan::TestPlan;
use crate::stats::counters::Counts;

/// The protocol version this build speaks.
pub const PROTOCOL_VERSION: u32 = 1;

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
}

/// Process resource usage of one end (the same wire names as always).
pub use crate::sensors::Rusage;

/// Every control message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
// Unknown fields are ignored on purpose: a newer peer's hello must still
// parse, so that the answer is "version mismatch", not "malformed".
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Msg {
    Hello {
        protocol: u32,
        software: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limits: Option<ServerLimits>,
        /// Server only: the authentication challenge (hex), present when the
        /// server requires a pre-shared key.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        nonce: Option<String>,
    },
    /// The client's answer to the hello's nonce: HMAC-SHA256, hex.
    Auth {
        answer: String,
    },
    /// The server accepted the answer.
    AuthOk,
    Spec {
        plan: Box<TestPlan>,
    },
    Accepted {
        data_port: u16,
        /// The session token, hex.
        token: String,
        /// UDP tests: the server's socket port of each flow.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        udp_ports: Vec<u16>,
    },
    Start {
        /// UDP tests: the client's socket port of each flow; the server
        /// connects its sockets to them, so it receives from and sends to
        /// nothing else.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        udp_ports: Vec<u16>,
    },
    Started {
        threads: u32,
        drivers: Vec<String>,
    },
    /// Sample now, then enter `phase`.
    Tick {
        seq: u32,
        phase: Phase,
    },
    Sample {
        seq: u32,
        /// Server's monotonic time since it started its workers.
        elapsed_ns: u64,
        unix_ns: u64,
        counts: Vec<Counts>,
    },
    /// The client's workers have drained; stop and report.
    Finish {
        /// udp_stream: datagrams each flow sent in all, so the server's final
        /// loss is the exact sent - received.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        datagrams_sent: Vec<u64>,
    },
    Final {
        counts: Vec<Counts>,
        rusage: Rusage,
        errors: Vec<String>,
        /// Data connections refused (wrong peer or token) during the session.
        refused: u64,
        /// The server's readings over its measurement window.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        window: Option<Box<super::window::WindowStats>>,
        /// Where the server ran: versions, kernel, interface, sysctls.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provenance: Option<Box<crate::sensors::Provenance>>,
        /// TCP retransmissions of the server's long-lived data connections.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tcp_retransmits: Option<u64>,
        /// `--zerocopy`: the server's MSG_ZEROCOPY sends and completions.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        zerocopy: Option<crate::io::zerocopy::ZeroCopyCounts>,
    },
    Error {
        message: String,
    },
}

impl Msg {
    pub fn kind(&self) -> &'static str {
        match self {
            Msg::Hello { .. } => "hello",
            Msg::Auth { .. } => "auth",
            Msg::AuthOk => "auth_ok",
            Msg::Spec { .. } => "spec",
            Msg::Accepted { .. } => "accepted",
            Msg::Start { .. } => "start",
            Msg::Started { .. } => "started",
            Msg::Tick { .. } => "tick",
            Msg::Sample { .. } => "sample",
            Msg::Finish { .. } => "finish",
            Msg::Final { .. } => "final",
            Msg::Error { .. } => "error",
        }
    }
}

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
pub fn encode(msg: &Msg) -> Vec<u8> {
    let body = serde_json::to_vec(msg).expect("control messages always serialise");
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

pub fn write_msg(w: &mut impl Write, msg: &Msg) -> Result<(), FrameError> {
    w.write_all(&encode(msg))?;
    w.flush()?;
    Ok(())
}

/// Decode one frame's body.
pub fn decode(body: &[u8]) -> Result<Msg, FrameError> {
    serde_json::from_slice(body).map_err(|e| FrameError::Malformed(e.to_string()))
}

pub fn read_msg(r: &mut impl Read) -> Result<Msg, FrameError> {
    read_msg_limited(r, MAX_FRAME)
}

/// Read one message whose frame may be at most `max` bytes (at most
/// [`MAX_FRAME`]): the server reads a not yet authenticated client's frames
/// with a small limit, so a connection that has proved nothing cannot make
/// it allocate much.
pub fn read_msg_limited(r: &mut impl Read, max: usize) -> Result<Msg, FrameError> {
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
pub fn decode_stream(mut buf: &[u8]) -> Vec<Result<Msg, FrameError>> {
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
    use super::*;
    use crate::plan::{TestKind, TestPlan};
    use proptest::prelude::*;

    fn samples() -> Vec<Msg> {
        vec![
            Msg::Hello {
                protocol: 1,
                software: "thrum 0.1.0".into(),
                limits: None,
                nonce: Some("00ff".into()),
            },
            Msg::Auth {
                answer: "ab".repeat(32),
            },
            Msg::Spec {
                plan: Box::new(TestPlan::new(TestKind::TcpRr)),
            },
            Msg::Tick {
                seq: 3,
                phase: Phase::Measure,
            },
            Msg::Sample {
                seq: 3,
                elapsed_ns: 5,
                unix_ns: 6,
                counts: vec![Counts::default()],
            },
            Msg::Finish {
                datagrams_sent: vec![3],
            },
        ]
    }

    #[test]
    fn round_trip() {
        for m in samples() {
            let f = encode(&m);
            assert_eq!(read_msg(&mut &f[..]).unwrap(), m);
        }
    }

    #[test]
    fn huge_length_is_refused_before_allocating() {
        let f = [0xff, 0xff, 0xff, 0xff, b'{'];
        assert!(matches!(
            read_msg(&mut &f[..]),
            Err(FrameError::TooLarge(4294967295, _))
        ));
    }

    #[test]
    fn unknown_types_are_errors_unknown_fields_are_not() {
        assert!(decode(br#"{"type":"launch"}"#).is_err());
        assert!(decode(br#"{"type":"tick","seq":1}"#).is_err());
        let v2 = br#"{"type":"hello","protocol":2,"software":"thrum 9","new_field":[1]}"#;
        assert!(matches!(decode(v2), Ok(Msg::Hello { protocol: 2, .. })));
        assert!(matches!(
            read_msg(&mut &b"\0\0"[..]),
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
        "hello", "auth", "spec", "accepted", "start", "started", "tick", "sample", "finish",
        "final", "error", "launch",
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
        let _ = decode_stream(f);
        let _ = read_msg(&mut &f[..]);
        let _ = read_msg_limited(&mut &f[..], 64);
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
                let mut f = encode(&samples[which % samples.len()]);
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
