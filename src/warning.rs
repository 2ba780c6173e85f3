//! Warnings as values: a stable code and the sentence a reader sees.
//!
//! A warning is raised where the figure it qualifies is computed, so its
//! sentence is built there with that figure in it; what must not change
//! from release to release is its [`Code`], which scripts and tests match
//! (hyperfine's `output/warnings.rs` is the model). The JSON result keeps
//! `warnings` (the sentences, as always) and adds `diagnostics`
//! (`[{code, message}]`).

use std::fmt;
use std::ops::{Deref, DerefMut};

use serde::ser::SerializeStruct;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What a warning is about; [`Code::as_str`] is the stable code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Code {
    /// Some of the server's samples never arrived.
    ServerSamplesMissing,
    /// `--rate` asked for more than the senders reached.
    RateNotReached,
    /// The figure trends across the window: no steady state.
    Trend,
    /// A flow moved nothing for intervals while others moved.
    FlowStalled,
    /// The hypervisor stole CPU time in the window.
    CpuStolen,
    /// /proc/stat and thrum's own CPU time give different service demands.
    ServiceDemandDisagrees,
    /// Other processes or interrupt work kept the CPUs busy.
    CpuBusyElsewhere,
    /// `--zerocopy`: the sending server reported no zero-copy sends.
    ZerocopyNotReported,
    /// `--zerocopy`: the kernel copied most sends anyway.
    ZerocopyCopied,
    /// RR packets/s and transactions/s part.
    PacketsPartFromTransactions,
    /// `--driver uring` was asked for and epoll ran.
    UringFallback,
    /// The descriptor limit is below what the flows need.
    DescriptorLimit,
    /// Datagrams larger than the path MTU are sent as IP fragments.
    DatagramsFragmented,
    /// The server reported a usage no machine can have.
    ServerUsageImplausible,
    /// The server reported an error of its own.
    ServerError,
    /// The server refused data connections or datagrams.
    ServerRefused,
    /// Workers had not drained in time; the ends' totals may differ.
    DrainTimeout,
    /// `--iterations`: the confidence interval is wider than asked.
    ConfidenceNotReached,
    /// capacity: too few trains arrived whole for an estimate.
    CapacityNoEstimate,
    /// capacity: the trains arrived as fast as the sender sent them, so
    /// the estimate is the sender's limit or a bucket deeper than a train.
    CapacitySenderLimited,
    /// `--rate` on epoll without epoll_pwait2: waits of whole milliseconds.
    TimerMilliseconds,
    /// The measurement window ran far longer than asked (an overloaded host).
    WindowOverran,
    /// capacity over loopback: no link on the path, the figure is the
    /// host's own limit.
    CapacityLoopback,
    /// The server reported a figure no receiver can produce (a count near
    /// 2^64, a capacity histogram outside its bins); it is left out.
    ServerFigureImplausible,
    /// udp_stream lost datagrams with the client's send buffer larger
    /// than the server's receive buffer.
    UdpSendBufferExceedsReceiver,
    /// udp_rr matched, or may have matched, responses to requests oldest
    /// first (a server that echoes no short sequence number, a burst wider
    /// than the number tells apart, or open loop with more in flight):
    /// after a loss, latencies may be another transaction's.
    RrMatchedInOrder,
    /// A run from many agents: an agent died, stalled or failed; its
    /// figures are left out of the sum.
    AgentFailed,
    /// A run from many agents: they started further apart than 1 % of the
    /// measurement window.
    StartSkew,
}

impl Code {
    /// Every code, for the schema check.
    pub const ALL: [Code; 28] = [
        Code::ServerSamplesMissing,
        Code::RateNotReached,
        Code::Trend,
        Code::FlowStalled,
        Code::CpuStolen,
        Code::ServiceDemandDisagrees,
        Code::CpuBusyElsewhere,
        Code::ZerocopyNotReported,
        Code::ZerocopyCopied,
        Code::PacketsPartFromTransactions,
        Code::UringFallback,
        Code::DescriptorLimit,
        Code::DatagramsFragmented,
        Code::ServerUsageImplausible,
        Code::ServerError,
        Code::ServerRefused,
        Code::DrainTimeout,
        Code::ConfidenceNotReached,
        Code::CapacityNoEstimate,
        Code::CapacitySenderLimited,
        Code::TimerMilliseconds,
        Code::WindowOverran,
        Code::CapacityLoopback,
        Code::ServerFigureImplausible,
        Code::UdpSendBufferExceedsReceiver,
        Code::RrMatchedInOrder,
        Code::AgentFailed,
        Code::StartSkew,
    ];

    /// The stable code, as JSON carries it.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::ServerSamplesMissing => "server_samples_missing",
            Code::RateNotReached => "rate_not_reached",
            Code::Trend => "trend",
            Code::FlowStalled => "flow_stalled",
            Code::CpuStolen => "cpu_stolen",
            Code::ServiceDemandDisagrees => "service_demand_disagrees",
            Code::CpuBusyElsewhere => "cpu_busy_elsewhere",
            Code::ZerocopyNotReported => "zerocopy_not_reported",
            Code::ZerocopyCopied => "zerocopy_copied",
            Code::PacketsPartFromTransactions => "packets_part_from_transactions",
            Code::UringFallback => "uring_fallback",
            Code::DescriptorLimit => "descriptor_limit",
            Code::DatagramsFragmented => "datagrams_fragmented",
            Code::ServerUsageImplausible => "server_usage_implausible",
            Code::ServerError => "server_error",
            Code::ServerRefused => "server_refused",
            Code::DrainTimeout => "drain_timeout",
            Code::ConfidenceNotReached => "confidence_not_reached",
            Code::CapacityNoEstimate => "capacity_no_estimate",
            Code::CapacitySenderLimited => "capacity_sender_limited",
            Code::TimerMilliseconds => "timer_milliseconds",
            Code::WindowOverran => "window_overran",
            Code::CapacityLoopback => "capacity_loopback",
            Code::ServerFigureImplausible => "server_figure_implausible",
            Code::UdpSendBufferExceedsReceiver => "udp_send_buffer_exceeds_receiver",
            Code::RrMatchedInOrder => "rr_matched_in_order",
            Code::AgentFailed => "agent_failed",
            Code::StartSkew => "start_skew",
        }
    }
}

impl Serialize for Code {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// A saved result read back (`thrum report`): a code this build does not
/// know is refused by name.
impl<'de> Deserialize<'de> for Code {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Code, D::Error> {
        let s = String::deserialize(d)?;
        Code::ALL
            .iter()
            .copied()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown warning code '{s}'")))
    }
}

/// The schema says what [`Serialize`] writes: one of the stable codes.
impl schemars::JsonSchema for Code {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Code".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let codes: Vec<&str> = Code::ALL.iter().map(|c| c.as_str()).collect();
        schemars::json_schema!({
            "description": "The warning's stable code (docs/json.md lists them).",
            "type": "string",
            "enum": codes,
        })
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One warning: its code and its sentence.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Warning {
    pub code: Code,
    pub message: String,
}

impl Warning {
    pub fn new(code: Code, message: impl Into<String>) -> Warning {
        Warning {
            code,
            message: message.into(),
        }
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// A result's warnings. In JSON they are two fields of the object that
/// holds them (flattened): `warnings`, the sentences as the schema always
/// had them, and `diagnostics`, each with its code.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Warnings(pub Vec<Warning>);

impl Warnings {
    /// Is there a warning of this code?
    pub fn has(&self, code: Code) -> bool {
        self.0.iter().any(|w| w.code == code)
    }
}

impl Deref for Warnings {
    type Target = Vec<Warning>;
    fn deref(&self) -> &Vec<Warning> {
        &self.0
    }
}

impl DerefMut for Warnings {
    fn deref_mut(&mut self) -> &mut Vec<Warning> {
        &mut self.0
    }
}

impl<'a> IntoIterator for &'a Warnings {
    type Item = &'a Warning;
    type IntoIter = std::slice::Iter<'a, Warning>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl Extend<Warning> for Warnings {
    fn extend<I: IntoIterator<Item = Warning>>(&mut self, iter: I) {
        self.0.extend(iter)
    }
}

/// The schema of the two fields [`Serialize`] writes into the object that
/// holds the warnings (flattened there).
impl schemars::JsonSchema for Warnings {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Warnings".into()
    }

    // Always flattened into its holder, never a definition of its own.
    fn inline_schema() -> bool {
        true
    }

    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let mut diagnostics = g.subschema_for::<Vec<Warning>>();
        diagnostics.insert(
            "description".into(),
            "The warnings with their stable codes, in the order of warnings.".into(),
        );
        schemars::json_schema!({
            "type": "object",
            "required": ["warnings", "diagnostics"],
            "properties": {
                "warnings": {
                    "description": "Every warning's sentence: a figure that cannot be taken at face value, and why.",
                    "type": "array",
                    "items": { "type": "string" },
                },
                "diagnostics": diagnostics,
            },
        })
    }
}

impl Serialize for Warnings {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Warnings", 2)?;
        let sentences: Vec<&str> = self.0.iter().map(|w| w.message.as_str()).collect();
        st.serialize_field("warnings", &sentences)?;
        st.serialize_field("diagnostics", &self.0)?;
        st.end()
    }
}

/// Read back from `diagnostics`, which carries every sentence with its
/// code (`warnings` repeats the sentences alone).
impl<'de> Deserialize<'de> for Warnings {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Warnings, D::Error> {
        #[derive(Deserialize)]
        struct Both {
            #[serde(default)]
            diagnostics: Vec<Warning>,
        }
        Ok(Warnings(Both::deserialize(d)?.diagnostics))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Holder {
        before: u8,
        #[serde(flatten)]
        w: Warnings,
    }

    #[test]
    fn json_keeps_the_sentences_and_adds_the_codes() {
        let h = Holder {
            before: 1,
            w: Warnings(vec![Warning::new(Code::Trend, "it trends")]),
        };
        let v = serde_json::to_value(&h).unwrap();
        assert_eq!(v["before"], 1);
        assert_eq!(v["warnings"], serde_json::json!(["it trends"]));
        assert_eq!(
            v["diagnostics"],
            serde_json::json!([{"code": "trend", "message": "it trends"}])
        );
    }

    /// The committed schema names every code, so a result that carries a
    /// new one still validates.
    #[test]
    fn the_schema_lists_every_code() {
        let schema: serde_json::Value =
            serde_json::from_str(include_str!("../schema/thrum.result.v1.json")).unwrap();
        let listed = schema["$defs"]["Code"]["enum"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for c in Code::ALL {
            assert!(
                listed.iter().any(|v| v == c.as_str()),
                "{c} not in the schema"
            );
        }
        assert_eq!(listed.len(), Code::ALL.len());
    }

    #[test]
    fn codes_are_stable_names() {
        assert_eq!(
            serde_json::to_value(Code::PacketsPartFromTransactions).unwrap(),
            "packets_part_from_transactions"
        );
        assert_eq!(Code::UringFallback.to_string(), "uring_fallback");
    }
}
