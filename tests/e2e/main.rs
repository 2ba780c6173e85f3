//! End-to-end tests: the real `thrum` binary, real server processes, real
//! sockets on loopback and in network namespaces. One test binary, as the
//! conventions ask; the modules group the tests by what they check.

mod agg;
mod common;
mod curve;
mod failures;
mod hostile;
mod limits;
mod loopback;
mod measure;
mod netns;
mod open_loop;
mod outputs;
mod scale;
mod sensors;
mod soak;
mod udp;
mod udp_loss;
mod uring;
mod zerocopy;
