//! The control protocol and the two ends that speak it.
//!
//! - The wire: `proto` (frames and the messages typed by direction),
//!   `features` (which spec fields need the server to name a feature in
//!   its hello), `deadline` (a whole message's read bounded in time),
//!   `auth` (the pre-shared key's challenge and answer).
//! - The server's end: `config` is its configuration (listen address,
//!   limits, key, log); `server` listens and admits, with `admission` (who
//!   gets a session), `limits` (what a session may ask for) and `log` (one
//!   line per session); `session` runs one session step by step, `data`
//!   opens its data sockets and builds its flows, and `report` is its
//!   final report; `ticks` ties the
//!   client's ticks to the server's clock, so that each sample counts up to
//!   when its tick was due, however late the tick arrived.
//! - The client's end: `client` holds one test's conversation with one
//!   server, `dial` opens its data flows, `timeline` runs the ticks and
//!   the drain and gathers the record (`analysis` below turns it into the
//!   result, a pure function), and `repeat` is the `--iterations` loop;
//!   `foreign` names a peer that answered in another protocol.
//! - Many hosts: `clocks` is the clock exchange, both ends (any server
//!   answers pings), and `agent` a server's run of a test as a client on
//!   a controller's behalf (`--agent`; the controller is `fleet`).
//! - `stop` is the request to end early (Ctrl-C) that both ends read.

pub mod admission;
pub(crate) mod agent;
pub mod auth;
pub mod client;
pub mod clocks;
mod config;
mod data;
pub mod deadline;
mod dial;
pub mod features;
mod foreign;
pub mod limits;
pub mod log;
mod one_way;
pub mod proto;
pub mod repeat;
mod reply;
mod report;
pub mod server;
mod session;
pub mod stop;
mod ticks;
pub(crate) mod timeline;
