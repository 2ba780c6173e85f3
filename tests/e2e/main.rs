//! End-to-end tests: the real `thrum` binary, real server processes, real
//! sockets on loopback and in network namespaces. One test binary, as the
//! conventions ask; the modules group the tests by what they check.

mod common;
mod failures;
mod loopback;
mod netns;
mod scale;
mod udp;
mod udp_loss;
mod uring;
