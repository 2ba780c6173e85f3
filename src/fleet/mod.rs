//! Many hosts, one test: `thrum run TEST -H TARGET --from A,B,…` runs the
//! test from every agent (a `thrum server --agent`) toward one target,
//! all started at one instant, and reads the agents' runs as one result.
//!
//! The controller is where the user types; it holds the plan and the
//! clock. `controller` talks to the agents (one thread and one control
//! connection each) and the target; `barrier` chooses the start instant
//! and translates it onto each agent's clock; `merge` turns what was
//! gathered into one result, a pure function. The agents' end is
//! `control::agent`, the clock exchange's wire `control::clocks`, its
//! arithmetic `stats::offset`. `mesh` runs a test over every ordered pair
//! of hosts, each pair a run from one agent through the same controller.
//! docs/fleet.md has the method and the security model.

pub mod barrier;
pub mod controller;
pub mod merge;
pub mod mesh;

pub use controller::{Fleet, MAX_AGENTS, run};
