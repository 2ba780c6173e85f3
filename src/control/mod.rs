//! The control protocol and the two ends that speak it.
//!
//! `proto` is the wire format; `server` serves sessions (each its own test);
//! `client` drives one test against one server and gathers the result.

pub mod admission;
pub(crate) mod analysis;
pub mod auth;
pub mod client;
pub mod deadline;
pub mod limits;
pub mod log;
pub mod proto;
pub mod repeat;
pub mod server;
/// The window moved to [`crate::sensors::window`]; `proto`'s message types
/// still name it by this path until the protocol rewrite of issue 15.
pub(crate) use crate::sensors::window;
