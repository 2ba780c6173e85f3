//! End-to-end tests: the real `thrum` binary, real server processes, real
//! sockets on loopback and in network namespaces. One test binary, as the
//! conventions ask; the modules group the tests by what they check.

mod agg;
mod buffers;
mod calltimes;
mod capacity;
mod common;
mod container;
mod crafted;
mod curve;
mod failures;
mod fields;
mod habits;
mod hardening;
mod hostile;
mod interrupt;
mod limits;
mod live;
mod loopback;
mod measure;
mod mix;
mod monitor;
mod monitor_http;
mod neper;
mod netns;
mod open_loop;
mod outputs;
mod peers;
mod per_interval;
mod ping;
mod reports;
mod rrul_netns;
mod scale;
mod sensors;
mod server_hardening;
mod ship;
mod soak;
mod stdio;
mod store;
mod store_hardening;
mod sweep;
mod teach;
mod udp;
mod udp_loss;
mod uring;
mod zerocopy;
