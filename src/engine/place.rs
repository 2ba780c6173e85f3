//! Where one part's flows run and on what: the spread of the flows over
//! the workers ([`place`]), and the driver each worker runs
//! ([`choose_driver`], with the warnings for a driver that is not what
//! was asked for or cannot wait to the microsecond).
//!
//! The workers run one part's flows only: a mix gives every part an
//! engine of its own ([`super::parts`]), so a latency probe never shares a
//! worker with a bulk flow, and its workers ask for a short scheduler slice
//! ([`super::sched`]) so that they do not wait behind the bulk workers for
//! a CPU either.

use super::pacer::PACER_SPIN;
use crate::io::DriverKind;
use crate::plan::{DriverChoice, TestPlan};
use crate::workload::Flow;

/// What one worker thread runs.
pub struct WorkerSpec {
    pub flows: Vec<Box<dyn Flow>>,
    /// Global ids of `flows`, for error messages.
    pub flow_ids: Vec<u32>,
    pub cpu: Option<usize>,
    /// Open loop: how long before each intended start the worker stops
    /// sleeping and polls ([`super::pacer_spin`] of its flows' share of
    /// the part's rate; [`place`] gives [`PACER_SPIN`]).
    pub pacer_spin: std::time::Duration,
    /// A latency probe's worker: it asks the scheduler for a short slice
    /// ([`super::sched::PROBE_SLICE`]), so that it is not kept waiting behind
    /// the bulk workers sharing its CPU.
    pub probe: bool,
    /// Keep each flow's latency per interval too (`--samples`): a coarse
    /// histogram per flow, handed in at the ticks with the worker's own.
    pub flow_latency: bool,
    /// `--max-events`: an epoll worker's most events per wait (None: 256).
    pub max_events: Option<u32>,
    /// `--epoll-trigger level`: an epoll worker registers its sockets
    /// level-triggered.
    pub epoll_level: bool,
}

/// Spread one part's flows over `threads` workers: flow i runs on worker
/// i mod T, and worker w is pinned to `cpus[w mod len]` when a CPU list is
/// given. The workers run this part's flows only (each part of a mix has
/// an engine of its own), so a `probe` part's workers carry no bulk flow;
/// they also ask for a short scheduler slice ([`super::sched`]).
pub fn place(
    flows: Vec<Box<dyn Flow>>,
    threads: usize,
    cpus: &[usize],
    probe: bool,
) -> Vec<WorkerSpec> {
    let mut workers: Vec<WorkerSpec> = (0..threads)
        .map(|w| WorkerSpec {
            flows: Vec::new(),
            flow_ids: Vec::new(),
            cpu: (!cpus.is_empty()).then(|| cpus[w % cpus.len()]),
            pacer_spin: PACER_SPIN,
            probe,
            flow_latency: false,
            max_events: None,
            epoll_level: false,
        })
        .collect();
    for (i, f) in flows.into_iter().enumerate() {
        workers[i % threads].flows.push(f);
        workers[i % threads].flow_ids.push(i as u32);
    }
    workers
}

/// From this many flows on one worker, `auto` gives a worker of
/// request/response flows (those that take their data from the completion
/// path, [`Flow::recv_buffers`]) to io_uring: one multishot receive per
/// socket and queued sends replace a readiness wait plus a recv and a send
/// per transaction, which pays once several flows share a wake-up.
/// Measured on loopback (BENCHMARKS.md, "--driver auto"; medians of 3):
/// at 1 flow per worker epoll is ahead (tcp_rr 334k vs 288k/s), at 4 uring
/// is (tcp_rr 391k vs 324k, udp_rr 565k vs 420k), at 8 more so (527k vs
/// 383k, 611k vs 457k); 2 per worker was mixed.
pub const AUTO_URING_FLOWS: usize = 4;

/// The driver a worker runs. `auto`: the blocking driver for a worker with
/// one flow that allows it; io_uring for a worker of at least
/// [`AUTO_URING_FLOWS`] request/response flows where the kernel allows it
/// (not for connection tests, tcp_crr and tcp_cc: see docs/performance.md);
/// epoll otherwise. `uring`: io_uring for every test where the kernel
/// allows it (connection tests with their connects, accepts and closes as
/// ring operations, see [`crate::io::uring`]), and epoll otherwise.
pub fn choose_driver(flows: &[Box<dyn Flow>], choice: DriverChoice) -> DriverKind {
    match choice {
        DriverChoice::Auto if flows.len() == 1 && flows[0].blocking_ok() => DriverKind::Blocking,
        DriverChoice::Auto
            if flows.len() >= AUTO_URING_FLOWS
                && flows
                    .iter()
                    .all(|f| f.recv_buffers().is_some() && !f.closes_sockets())
                && crate::io::uring::probe().is_ok() =>
        {
            DriverKind::Uring
        }
        DriverChoice::Uring if crate::io::uring::probe().is_ok() => DriverKind::Uring,
        _ => DriverKind::Epoll,
    }
}

/// Why `--driver uring` runs epoll for this test here, if it does.
pub fn uring_fallback(plan: &TestPlan) -> Option<String> {
    if plan.driver != DriverChoice::Uring {
        return None;
    }
    crate::io::uring::probe()
        .err()
        .map(|why| format!("--driver uring: io_uring is unavailable ({why}); workers ran epoll"))
}

/// The warning for an open-loop run whose epoll workers could not wait to
/// the microsecond: without epoll_pwait2 (Linux 5.11) their waits round up
/// to whole milliseconds, so the requests due within one go out together,
/// the 1 ms bursts a schedule must not make. `open_loop`: some part runs on
/// a schedule; `drivers`: what the workers ran; `pwait2`: the kernel's
/// answer (`io::epoll::pwait2_available`).
pub fn pacing_resolution(open_loop: bool, drivers: &[&str], pwait2: bool) -> Option<String> {
    (open_loop && !pwait2 && drivers.contains(&DriverKind::Epoll.name())).then(|| {
        "--rate: this kernel has no epoll_pwait2 (Linux 5.11), so the epoll workers waited in whole milliseconds: requests due within one went out together, up to 1 ms late (generator_lag_ns shows it); --driver uring waits to the microsecond where io_uring is available".to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::{choose_driver, pacing_resolution, place};
    use crate::io::DriverKind;
    use crate::plan::{CloseMode, DriverChoice};
    use crate::workload::Flow;
    use crate::workload::crr::{ConnectClient, ConnectMode, TOKEN_LEN};

    /// `auto` keeps tcp_crr and tcp_cc off io_uring at any number of flows
    /// per worker (docs/performance.md: it was not ahead), where `uring`
    /// runs them on it wherever the kernel allows.
    #[test]
    fn auto_keeps_connection_tests_off_io_uring() {
        let block: std::sync::Arc<[crate::stats::counters::FlowCounters]> =
            (0..8).map(|_| Default::default()).collect();
        for mode in [ConnectMode::Crr, ConnectMode::Cc] {
            let flows: Vec<Box<dyn Flow>> = (0..8)
                .map(|i| {
                    Box::new(ConnectClient::new(
                        mode,
                        "127.0.0.1:9".parse().unwrap(),
                        None,
                        Default::default(),
                        crate::workload::CounterRef::new(block.clone(), i),
                        [0; TOKEN_LEN],
                        1,
                        1,
                        None,
                        CloseMode::Fin,
                    )) as Box<dyn Flow>
                })
                .collect();
            assert_eq!(choose_driver(&flows, DriverChoice::Auto), DriverKind::Epoll);
            let uring = if crate::io::uring::probe().is_ok() {
                DriverKind::Uring
            } else {
                DriverKind::Epoll
            };
            assert_eq!(choose_driver(&flows, DriverChoice::Uring), uring);
        }
    }

    /// A part's workers carry that part's flows only, and a probe part's
    /// are marked so: they never share a thread with a bulk flow.
    #[test]
    fn a_probe_part_gets_workers_of_its_own() {
        let block: std::sync::Arc<[crate::stats::counters::FlowCounters]> =
            (0..3).map(|_| Default::default()).collect();
        let flows = |n: usize| -> Vec<Box<dyn Flow>> {
            (0..n)
                .map(|i| {
                    Box::new(ConnectClient::new(
                        ConnectMode::Crr,
                        "127.0.0.1:9".parse().unwrap(),
                        None,
                        Default::default(),
                        crate::workload::CounterRef::new(block.clone(), i),
                        [0; TOKEN_LEN],
                        1,
                        1,
                        None,
                        CloseMode::Fin,
                    )) as Box<dyn Flow>
                })
                .collect()
        };
        let bulk = place(flows(3), 2, &[], false);
        let probe = place(flows(1), 1, &[], true);
        assert!(bulk.iter().all(|w| !w.probe));
        assert_eq!(bulk.iter().map(|w| w.flows.len()).sum::<usize>(), 3);
        assert_eq!(probe.len(), 1);
        assert!(probe[0].probe && probe[0].flows.len() == 1);
    }

    /// Only an open-loop run on epoll without epoll_pwait2 is warned: a
    /// closed loop has no deadlines, io_uring waits to its timespec.
    #[test]
    fn millisecond_waits_are_warned_only_where_they_pace_a_schedule() {
        let w = pacing_resolution(true, &["epoll", "epoll"], false).expect("warned");
        assert!(w.contains("--rate") && w.contains("epoll_pwait2"), "{w}");
        assert_eq!(pacing_resolution(true, &["epoll"], true), None);
        assert_eq!(pacing_resolution(false, &["epoll"], false), None);
        assert_eq!(pacing_resolution(true, &["uring"], false), None);
    }
}
