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

use crate::plan::TestPlan;
use crate::stats::counters::Counts;
use crate::workload::Phase;

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
    },
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
    },
    Error {
        message: String,
    },
}

impl Msg {
    pub fn kind(&self) -> &'static str {
        match self {
            Msg::Hello { .. } => "hello",
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
    #[error("control frame of {0} bytes is over the limit of {MAX_FRAME} bytes")]
    TooLarge(u64),
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
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let len = u32::from_be_bytes(len) as u64;
    if len as usize > MAX_FRAME {
        return Err(FrameError::TooLarge(len));
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
            out.push(Err(FrameError::TooLarge(len)));
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
            Err(FrameError::TooLarge(4294967295))
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

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// Arbitrary bytes never panic the decoder.
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = decode_stream(&bytes);
            let _ = read_msg(&mut &bytes[..]);
        }

        /// Valid frames with bytes flipped, cut or inserted never panic the decoder.
        #[test]
        fn mutated_frames_never_panic(which in 0usize..5, pos in any::<usize>(), byte in any::<u8>(), cut in any::<bool>()) {
            let mut f = encode(&samples()[which]);
            let p = pos % f.len();
            if cut { f.truncate(p); } else { f[p] = byte; }
            let _ = decode_stream(&f);
            let _ = read_msg(&mut &f[..]);
        }
    }
}
