//! The phases both ends step through, in the same order on both: warm-up,
//! the measurement window, cool-down and the drain (docs/design.md,
//! "Phases, and the drain"), and what a tick does to a mix's bulk parts
//! besides (`LoadStep`). The session's ticks carry them, the engine's
//! workers read them from one atomic, so they are numbered.

use serde::{Deserialize, Serialize};

/// The phases of a test (docs/design.md, "Phases, and the drain"). Only
/// `Measure` counts.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum Phase {
    Warmup = 0,
    Measure = 1,
    Cooldown = 2,
    /// Stop generating, half-close, read until EOF.
    Drain = 3,
}

impl Phase {
    pub fn from_u8(v: u8) -> Phase {
        match v {
            0 => Phase::Warmup,
            1 => Phase::Measure,
            2 => Phase::Cooldown,
            _ => Phase::Drain,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Phase::Warmup => "warmup",
            Phase::Measure => "measure",
            Phase::Cooldown => "cooldown",
            Phase::Drain => "drain",
        }
    }
}

/// What a tick does to a mix's bulk parts besides its phase: start them
/// (idle to loaded) or drain them (loaded to recovery).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LoadStep {
    Start,
    Stop,
}
