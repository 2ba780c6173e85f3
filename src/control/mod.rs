//! The control protocol and the two ends that speak it.
//!
//! `proto` is the wire format; `server` serves sessions (each its own test);
//! `client` drives one test against one server and gathers the result;
//! `stop` is the request to end early (Ctrl-C) that sessions read.

pub mod admission;
pub(crate) mod analysis;
pub mod auth;
pub mod client;
mod data;
pub mod deadline;
mod dial;
pub mod limits;
pub mod log;
pub mod proto;
pub mod repeat;
pub mod server;
mod session;
pub mod stop;
pub(crate) mod timeline;
