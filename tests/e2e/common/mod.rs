//! Harness shared by the modules: start a real `thrum server` process, run
//! the real client, parse its JSON, and build the network namespaces the
//! shaped-link and connection-heavy tests run in. Split by purpose; the
//! modules import everything from `crate::common`.
//!
//! - [`processes`]: the binary, the server process, commands under a time
//!   limit;
//! - [`run`]: running thrum with `--json` and reading its result;
//! - [`doc`]: reading a result (numbers, schema, diagnostics);
//! - [`netns`]: namespaces, commands inside them, the capability probe;
//! - [`topology`]: the one client–router–server path of the shaped-link
//!   tests;
//! - [`serial`]: the groups of tests that must not run beside others,
//!   and the lock the harness takes for them;
//! - [`pty`]: thrum on a terminal, and files it streams into.

pub mod command;
pub mod doc;
pub mod netns;
pub mod processes;
pub mod pty;
pub mod run;
pub mod serial;
pub mod topology;

pub use command::*;
pub use doc::*;
pub use netns::*;
pub use processes::*;
pub use pty::*;
pub use run::*;
pub use topology::*;
