//! Harness shared by the modules: run the real client, start a real
//! `thrum server` process, read what they print, and build the network
//! namespaces the shaped-link and connection-heavy tests run in. Split by
//! purpose; the modules import everything from `crate::common`.
//!
//! A test runs the client through one builder, [`Thrum`]
//! ([`command`]), as ripgrep's tests do through `TestCommand`:
//!
//! ```ignore
//! let server = ServerProc::start(&[]);
//! let doc = Thrum::run("tcp_rr").on(&server).len("1s").flows(4).json();
//! Thrum::cmd(&["run", "udp_rr", "-r", "70000"]).refused(&["--rr-size", "1..=65507"]);
//! ```
//!
//! `Thrum::run`, `suite`, `sweep` and `curve` add `--warmup 0s` unless the
//! test gives its own warm-up or asks for thrum's (`.default_warmup()`);
//! `Thrum::cmd` runs exactly the words given (`agg`, `ping`, `history`, a
//! command line a user typed). `.on(&server)` is `-H` and the server's
//! namespace; `.netns(ns)`, `.under(&["taskset", "-c", "0"])`, `.env(..)`
//! and `.timeout(d)` say where and how it runs. The outcome: `.json()` (a
//! success's result), `.ok()`, `.stdout()`, `.fails()`, `.refused(needles)`,
//! `.json_lines()` (`--json-stream`), or `.output()` to judge it by hand;
//! `.spawn()`, `.command()` and `.pty()` for a test that watches, signals
//! or types at the process. Whatever fails prints the command line, the
//! status, the result's error and the whole stderr ([`Ran::report`]).
//!
//! A test does not ask to run alone: [`serial`] declares the groups that
//! must not run beside others, and the harness takes the group's lock.
//!
//! - [`command`]: the builder, and [`Ran`], what a command did;
//! - [`run`]: checks built on it (a server still serves, a table of
//!   refusals);
//! - [`browser`]: headless Chromium, for the tests of pages;
//! - [`processes`]: the binary, the server process, commands under a time
//!   limit;
//! - [`doc`]: reading a result (numbers, schema, diagnostics, files);
//! - [`netns`]: namespaces, commands inside them, the capability probe;
//! - [`topology`]: the one client–router–server path of the shaped-link
//!   tests, and its two-namespace variant;
//! - [`star`]: many hosts behind one router, and a target (`fleet`,
//!   `mesh`);
//! - [`serial`]: the groups of tests that must not run beside others,
//!   and the lock the harness takes for them;
//! - [`pty`]: thrum on a terminal, and files it streams into.

pub mod browser;
pub mod command;
pub mod doc;
pub mod netns;
pub mod processes;
pub mod pty;
pub mod run;
pub mod serial;
pub mod star;
pub mod topology;

pub use browser::*;
pub use command::*;
pub use doc::*;
pub use netns::*;
pub use processes::*;
pub use pty::*;
pub use run::*;
pub use star::*;
pub use topology::*;
