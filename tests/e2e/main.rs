//! End-to-end tests: the real `thrum` binary, real server processes, real
//! sockets on loopback and in network namespaces. One test binary, as the
//! conventions ask; the modules group the tests by what they check.

mod agg;
mod buffers;
mod byte_limit;
mod calltimes;
mod capacity;
mod common;
mod container;
mod crafted;
mod curve;
mod error_messages;
mod failures;
mod fields;
mod hardening;
mod hostile;
mod interrupt;
mod limits;
mod live;
mod loopback;
mod measure;
mod mix;
mod monitor;
mod netns;
mod open_loop;
mod outputs;
mod per_interval;
mod ping;
mod reports;
mod rrul_netns;
mod run_time;
mod scale;
mod sensors;
mod ship;
mod soak;
mod socket_options;
mod stdio;
mod store;
mod sweep;
mod udp;
mod udp_loss;
mod untrusted_clients;
mod uring;
mod zerocopy;
