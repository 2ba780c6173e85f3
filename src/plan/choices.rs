//! The plan's named choices: the values its options take that are words,
//! not numbers. The readiness driver (`--driver`), how a connection test's
//! client ends each connection (`--close`), how an open-loop schedule
//! spaces a flow's transactions (`--arrivals`) and which way a test's
//! payload goes (`--reverse`, `--both`). Each parses from the word its flag
//! takes (`FromStr`, for `sweep --vary` and the mix grammar); `cli` gives
//! them clap's `ValueEnum` on its side, so `plan` stays free of clap.

use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::PlanError;

/// Which I/O driver the worker threads use (`--driver`).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum DriverChoice {
    /// The blocking driver for a thread with one flow that allows it, epoll otherwise.
    #[default]
    Auto,
    Epoll,
    /// io_uring where the kernel allows it (a completion driver for tcp_rr and
    /// udp_rr, readiness for the rest), epoll otherwise.
    Uring,
}

impl FromStr for DriverChoice {
    type Err = PlanError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(DriverChoice::Auto),
            "epoll" => Ok(DriverChoice::Epoll),
            "uring" => Ok(DriverChoice::Uring),
            _ => Err(PlanError::UnknownDriver(s.to_string())),
        }
    }
}

/// How a tcp_crr/tcp_cc client ends each connection (`--close`).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum CloseMode {
    /// The server closes first after answering, the client closes on its
    /// FIN: a graceful close, TIME_WAIT on the server (netperf's TCP_CRR).
    #[default]
    Fin,
    /// The client aborts (SO_LINGER 0: a reset) once it has the response
    /// (crr) or the server's FIN (cc): no TIME_WAIT on either end (neper's
    /// tcp_crr default).
    Rst,
}

impl FromStr for CloseMode {
    type Err = PlanError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "fin" => Ok(CloseMode::Fin),
            "rst" => Ok(CloseMode::Rst),
            _ => Err(PlanError::Invalid(format!(
                "--close {s} is not a close mode (accepted: fin, rst)"
            ))),
        }
    }
}

/// How an open-loop schedule spaces a flow's transactions.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Arrivals {
    /// Evenly, one every flows/R seconds.
    #[default]
    Fixed,
    /// A Poisson process of the same mean rate (exponential gaps).
    Poisson,
}

impl FromStr for Arrivals {
    type Err = PlanError;
    fn from_str(s: &str) -> Result<Arrivals, PlanError> {
        match s {
            "fixed" => Ok(Arrivals::Fixed),
            "poisson" => Ok(Arrivals::Poisson),
            _ => Err(PlanError::Invalid(format!(
                "--arrivals {s} is not known (accepted: fixed, poisson)"
            ))),
        }
    }
}

/// Which way a test's payload goes (`--reverse`, `--both`): its row's
/// way, the other, or both at once on alternate flows.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// As the test's row says (capacity: the client sends the trains).
    #[default]
    Forward,
    /// The ends swap roles on every flow (capacity: the server sends).
    Reverse,
    /// Even flows forward, odd flows reversed, in one session.
    Both,
}

impl Direction {
    /// Does flow `flow` run the other way from its test's row?
    pub fn crosses(self, flow: u32) -> bool {
        match self {
            Direction::Forward => false,
            Direction::Reverse => true,
            Direction::Both => flow % 2 == 1,
        }
    }

    /// Left out of the plan on the wire: an older peer reads no field.
    pub(super) fn is_forward(&self) -> bool {
        *self == Direction::Forward
    }
}
