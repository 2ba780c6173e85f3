//! Checks built on the command builder that several modules share: a
//! server still serves, and a table of command lines each refused.

use serde_json::Value;

use super::command::Thrum;
use super::processes::ServerProc;

/// A short tcp_rr (300 ms) against `server` must succeed: it is still
/// serving. Its result.
pub fn assert_serves(server: &ServerProc) -> Value {
    Thrum::run("tcp_rr").on(server).len("300ms").json()
}

/// Each command line must be refused before running anything, with every
/// needle in its error message (the flag and the accepted range) and
/// nothing on stdout ([`Thrum::refused`], each as typed).
pub fn assert_rejected(cases: &[(&[&str], &[&str])]) {
    for (args, needles) in cases {
        Thrum::cmd(args).refused(needles);
    }
}
