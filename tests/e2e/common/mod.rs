//! Harness shared by the modules: start a real `thrum server` process, run
//! the real client, parse its JSON, and build the network namespaces the
//! shaped-link and connection-heavy tests run in. Split by purpose; the
//! modules import everything from `crate::common`.
//!
//! - [`browser`]: headless Chromium, for the tests of pages;
//! - [`processes`]: the binary, the server process, commands under a time
//!   limit;
//! - [`run`]: running thrum with `--json` and reading its result;
//! - [`doc`]: reading a result (numbers, schema, diagnostics);
//! - [`netns`]: namespaces, commands inside them, the capability probe;
//! - [`topology`]: the one client–router–server path of the shaped-link
//!   tests;
//! - [`serial`]: the lock that keeps floods apart;
//! - [`pty`]: thrum on a terminal, and files it streams into.

pub mod browser;
pub mod doc;
pub mod netns;
pub mod processes;
pub mod pty;
pub mod run;
pub mod serial;
pub mod topology;

pub use browser::*;
pub use doc::*;
pub use netns::*;
pub use processes::*;
pub use pty::*;
pub use run::*;
pub use serial::*;
pub use topology::*;
