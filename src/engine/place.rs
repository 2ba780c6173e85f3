//! Where one part's flows run and on what: the worker options both ends
//! read from the plan ([`WorkerOpts::from_plan`]), the spread of the flows
//! over the workers ([`place`]), and the driver each worker runs
//! ([`choose_driver`], with the warnings for a driver that is not what
//! was asked for or cannot wait to the microsecond).
//!
//! The workers run one part's flows only: a mix gives every part an
//! engine of its own ([`super::parts`]), so a latency probe never shares a
//! worker with a bulk flow, and its workers ask for a short scheduler slice
//! ([`super::sched`]) so that they do not wait behind the bulk workers for
//! a CPU either.

use super::pacer::{PACER_SPIN, pacer_spin};
use crate::io::DriverKind;
use crate::io::napi::NapiSet;
use crate::plan::sockets::EpollTrigger;
use crate::plan::{DriverChoice, TestPlan};
use crate::workload::Flow;

/// Which end of a test a part's workers run on: the client keeps the
/// open-loop schedule and each flow's latency, the server neither.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Client,
    Server,
}

/// How one part's workers are set up, read from the plan in one place for
/// both ends ([`WorkerOpts::from_plan`]) and applied by [`place`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WorkerOpts {
    /// Worker threads for the part (at least one).
    pub threads: usize,
    /// CPUs the workers are pinned to, round-robin; empty: unpinned.
    pub cpus: Vec<usize>,
    /// A latency probe's workers ([`WorkerSpec::probe`]).
    pub probe: bool,
    /// Keep each flow's latency per interval ([`WorkerSpec::flow_latency`]).
    pub flow_latency: bool,
    /// `--max-events` ([`WorkerSpec::max_events`]).
    pub max_events: Option<u32>,
    /// `--epoll-trigger level` ([`WorkerSpec::epoll_level`]).
    pub epoll_level: bool,
    /// Open loop: the part's transactions/s in all, of which each worker
    /// spins for its flows' share ([`pacer_spin`]); None: no schedule.
    pub offered_per_s: Option<u64>,
    /// The part's flows, the whole the share is of.
    pub part_flows: u32,
    /// `--spin` ([`WorkerSpec::spin`]).
    pub spin: bool,
    /// `--busy-poll` ([`WorkerSpec::napi`]).
    pub napi: Option<NapiSet>,
}

impl WorkerOpts {
    /// The options of part `index`'s workers on `side`: `plan` is the
    /// session's plan as that end holds it (the server's from
    /// `TestPlan::for_server`, its `local` the server's own), `part` its
    /// `part_plans()[index]`. Both ends pin their workers to their own CPU
    /// list, mark a mix's probe parts, and set `--max-events` and
    /// `--epoll-trigger`. Only the client runs a schedule (the server
    /// answers whatever arrives) and keeps each flow's latency (for
    /// `--samples`, a single test's only).
    pub fn from_plan(plan: &TestPlan, side: Side, index: usize, part: &TestPlan) -> WorkerOpts {
        let client = side == Side::Client;
        WorkerOpts {
            threads: part.threads as usize,
            cpus: part.local.cpu_pin.clone(),
            probe: plan.parts.get(index).is_some_and(|p| p.is_probe()),
            flow_latency: client && plan.flow_latency && plan.parts.is_empty(),
            max_events: part.spreading.max_events,
            epoll_level: part.spreading.epoll_trigger == Some(EpollTrigger::Level),
            offered_per_s: part.offered_per_s.filter(|_| client),
            part_flows: part.flows,
            spin: part.spin,
            napi: NapiSet::asked(part.busy_poll_us, part.prefer_busy_poll),
        }
    }
}

/// What one worker thread runs.
pub struct WorkerSpec {
    pub flows: Vec<Box<dyn Flow>>,
    /// Global ids of `flows`, for error messages.
    pub flow_ids: Vec<u32>,
    pub cpu: Option<usize>,
    /// Open loop: how long before each intended start the worker stops
    /// sleeping and polls ([`pacer_spin`] of its flows' share of the
    /// part's rate; [`PACER_SPIN`] without a rate, and then unused).
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
    /// `--spin`: the worker polls its sockets and never sleeps
    /// ([`crate::io::spin`]), whatever the driver choice.
    pub spin: bool,
    /// `--busy-poll` (with `--prefer-busy-poll`): what an io_uring worker
    /// registers its ring for ([`crate::io::napi`]); other drivers ignore it.
    pub napi: Option<NapiSet>,
}

/// Spread one part's flows over its workers as `opts` says: flow i runs on
/// worker i mod T, and worker w is pinned to `cpus[w mod len]` when a CPU
/// list is given. The workers run this part's flows only (each part of a
/// mix has an engine of its own), so a probe part's workers carry no bulk
/// flow; they also ask for a short scheduler slice ([`super::sched`]). An
/// open-loop part's workers spin before each send for their flows' share
/// of its rate ([`pacer_spin`]).
pub fn place(flows: Vec<Box<dyn Flow>>, opts: &WorkerOpts) -> Vec<WorkerSpec> {
    let (threads, cpus) = (opts.threads, &opts.cpus);
    let mut workers: Vec<WorkerSpec> = (0..threads)
        .map(|w| WorkerSpec {
            flows: Vec::new(),
            flow_ids: Vec::new(),
            cpu: (!cpus.is_empty()).then(|| cpus[w % cpus.len()]),
            pacer_spin: PACER_SPIN,
            probe: opts.probe,
            flow_latency: opts.flow_latency,
            max_events: opts.max_events,
            epoll_level: opts.epoll_level,
            spin: opts.spin,
            napi: opts.napi,
        })
        .collect();
    for (i, f) in flows.into_iter().enumerate() {
        workers[i % threads].flows.push(f);
        workers[i % threads].flow_ids.push(i as u32);
    }
    if let Some(r) = opts.offered_per_s {
        for w in &mut workers {
            let share = w.flows.len() as f64 / f64::from(opts.part_flows.max(1));
            w.pacer_spin = pacer_spin(r as f64 * share);
        }
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
/// `spin` (`--spin`, which the plan allows with `auto` and `epoll` only):
/// the spinning driver. `napi` (`--busy-poll`): `auto` picks io_uring only
/// where the kernel also takes the ring's NAPI registration, so that it
/// never refuses a run for a driver nobody asked for; `uring` registers
/// or is refused ([`uring_napi_refusal`]).
pub fn choose_driver(
    flows: &[Box<dyn Flow>],
    choice: DriverChoice,
    spin: bool,
    napi: Option<NapiSet>,
) -> DriverKind {
    match choice {
        _ if spin => DriverKind::Spin,
        DriverChoice::Auto if flows.len() == 1 && flows[0].blocking_ok() => DriverKind::Blocking,
        DriverChoice::Auto
            if flows.len() >= AUTO_URING_FLOWS
                && flows
                    .iter()
                    .all(|f| f.recv_buffers().is_some() && !f.closes_sockets())
                && crate::io::uring::probe().is_ok()
                && (napi.is_none() || crate::io::napi::available()) =>
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

/// Why `--driver uring` with `--busy-poll` cannot run here, if it cannot:
/// the kernel refuses the ring's NAPI registration. Asked by each end
/// before it opens a data socket (the server's refusal travels back as its
/// other refusals do). None where the ring would not be io_uring anyway
/// (it is unavailable: epoll runs, and the fallback is warned).
pub fn uring_napi_refusal(plan: &TestPlan) -> Option<String> {
    let ask = NapiSet::asked(plan.busy_poll_us, plan.prefer_busy_poll)?;
    if plan.driver != DriverChoice::Uring || plan.spin || crate::io::uring::probe().is_err() {
        return None;
    }
    crate::io::napi::probe(ask).err().map(|e| e.to_string())
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
    use std::time::Duration;

    use super::{
        NapiSet, PACER_SPIN, Side, WorkerOpts, WorkerSpec, choose_driver, pacing_resolution, place,
        uring_napi_refusal,
    };
    use crate::io::{DriverKind, Event};
    use crate::plan::sockets::EpollTrigger;
    use crate::plan::{CloseMode, DriverChoice, TestKind, TestPlan, mix};
    use crate::workload::crr::{ConnectClient, ConnectMode, TOKEN_LEN};
    use crate::workload::{Flow, FlowCtx, Progress};

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
            assert_eq!(
                choose_driver(&flows, DriverChoice::Auto, false, None),
                DriverKind::Epoll
            );
            assert_eq!(
                choose_driver(&flows, DriverChoice::Uring, true, None),
                DriverKind::Spin
            );
            let uring = if crate::io::uring::probe().is_ok() {
                DriverKind::Uring
            } else {
                DriverKind::Epoll
            };
            assert_eq!(
                choose_driver(&flows, DriverChoice::Uring, false, None),
                uring
            );
        }
    }

    /// A part's workers carry that part's flows only, and a probe part's
    /// are marked so: they never share a thread with a bulk flow.
    #[test]
    fn a_probe_part_gets_workers_of_its_own() {
        let opts = |threads, probe| WorkerOpts {
            threads,
            probe,
            ..WorkerOpts::default()
        };
        let bulk = place(unrun(3), &opts(2, false));
        let probe = place(unrun(1), &opts(1, true));
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

    /// A flow that is never run: [`place`] only counts and hands them out.
    struct Unrun;

    impl Flow for Unrun {
        fn start(&mut self, _: &mut dyn crate::io::Driver, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn on_event(&mut self, _: Event, _: &mut FlowCtx<'_>) -> std::io::Result<Progress> {
            Ok(Progress::Done)
        }
        fn blocking_ok(&self) -> bool {
            false
        }
    }

    fn unrun(n: u32) -> Vec<Box<dyn Flow>> {
        (0..n).map(|_| Box::new(Unrun) as Box<dyn Flow>).collect()
    }

    /// `--busy-poll` reaches every worker of both ends as its ring's NAPI
    /// ask, the preference with it, and nothing without it; the refusal is
    /// asked only of a `--driver uring` run, and a kernel with the
    /// registration (6.9 on) gives none.
    #[test]
    fn busy_poll_asks_every_worker_for_napi_and_only_uring_is_refused() {
        let mut plan = TestPlan::new(TestKind::TcpRr);
        (plan.flows, plan.threads) = (3, 2);
        (plan.busy_poll_us, plan.prefer_busy_poll) = (Some(50), true);
        let napi = |plan: &TestPlan, side| {
            place(unrun(3), &WorkerOpts::from_plan(plan, side, 0, plan))
                .iter()
                .map(|w| w.napi)
                .collect::<Vec<_>>()
        };
        let want = Some(NapiSet {
            busy_poll_us: 50,
            prefer_busy_poll: true,
        });
        for side in [Side::Client, Side::Server] {
            assert_eq!(napi(&plan, side), [want; 2]);
        }
        assert_eq!(uring_napi_refusal(&plan), None, "auto is never refused");
        plan.driver = DriverChoice::Uring;
        match uring_napi_refusal(&plan) {
            None => assert!(crate::io::uring::probe().is_err() || crate::io::napi::available()),
            Some(e) => assert!(e.starts_with("--busy-poll 50 with --driver uring"), "{e}"),
        }
        plan.busy_poll_us = None;
        assert_eq!(uring_napi_refusal(&plan), None);
        assert_eq!(napi(&plan, Side::Client), [None; 2]);
    }

    /// A worker's settings as the loop reads them: its flows' ids, CPU,
    /// spin, probe, per-flow latency, `--max-events` and level trigger.
    type Seen = (
        Vec<u32>,
        Option<usize>,
        Duration,
        bool,
        bool,
        Option<u32>,
        bool,
    );

    /// Every part's workers on one side, as `client.rs` or `session.rs`
    /// places them (`plan` as that side holds it).
    fn placed(plan: &TestPlan, side: Side) -> Vec<Vec<Seen>> {
        plan.part_plans()
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let flows = (0..p.flows)
                    .map(|_| Box::new(Unrun) as Box<dyn Flow>)
                    .collect();
                place(flows, &WorkerOpts::from_plan(plan, side, i, p))
                    .iter()
                    .map(|w: &WorkerSpec| {
                        let ids = w.flow_ids.clone();
                        (
                            ids,
                            w.cpu,
                            w.pacer_spin,
                            w.probe,
                            w.flow_latency,
                            w.max_events,
                            w.epoll_level,
                        )
                    })
                    .collect()
            })
            .collect()
    }

    /// The one constructor gives each side what it got when the client
    /// and the server each copied the plan's fields after placing: the
    /// client its own CPUs, a spin for each worker's share of the rate and
    /// each flow's latency (a single test's), the server its own CPUs
    /// (`--remote-cpu-pin`, its `--server-threads`) and neither; both the
    /// probe mark and `--max-events`/`--epoll-trigger`.
    #[test]
    fn both_ends_read_their_workers_from_the_plan() {
        let us = Duration::from_micros;
        let mut plan = TestPlan::new(TestKind::TcpRr);
        plan.flows = 5;
        plan.threads = 2;
        plan.offered_per_s = Some(1_000);
        plan.flow_latency = true;
        plan.local.cpu_pin = vec![3, 5, 7];
        plan.remote.cpu_pin = vec![1];
        plan.spreading.server_threads = Some(1);
        plan.spreading.max_events = Some(64);
        plan.spreading.epoll_trigger = Some(EpollTrigger::Level);
        // Worker 0 has 3 of the 5 flows: 600/s, a 1,667 µs gap, 83 µs of spin.
        let share = |flows: f64| super::pacer_spin(1_000.0 * flows / 5.0);
        assert_eq!(share(3.0), Duration::from_nanos(83_333));
        assert_eq!(
            placed(&plan, Side::Client),
            [[
                (
                    vec![0, 2, 4],
                    Some(3),
                    share(3.0),
                    false,
                    true,
                    Some(64),
                    true
                ),
                (vec![1, 3], Some(5), share(2.0), false, true, Some(64), true),
            ]]
        );
        assert_eq!(
            placed(&plan.for_server(), Side::Server),
            [[(
                vec![0, 1, 2, 3, 4],
                Some(1),
                PACER_SPIN,
                false,
                false,
                Some(64),
                true
            )]]
        );

        // Closed loop, nothing asked for: the defaults on both ends.
        let plan = TestPlan::new(TestKind::TcpRr);
        let plain = [[(vec![0], None, PACER_SPIN, false, false, None, false)]];
        assert_eq!(placed(&plan, Side::Client), plain);
        assert_eq!(placed(&plan.for_server(), Side::Server), plain);

        // A mix: the probe part's workers are marked on both ends and spin
        // on the client for the part's rate (90/s: the 500 µs ceiling);
        // no per-flow latency, which is a single test's.
        let mut plan = TestPlan::new(TestKind::TcpStream);
        plan.parts = mix::parse_spec("tcp_stream*2,udp_rr*3@rate=90").unwrap();
        plan.flows = 5;
        plan.flow_latency = true;
        plan.local.cpu_pin = vec![2];
        assert_eq!(
            placed(&plan, Side::Client),
            [
                vec![(vec![0, 1], Some(2), PACER_SPIN, false, false, None, false)],
                vec![(vec![0, 1, 2], Some(2), us(500), true, false, None, false)],
            ]
        );
        assert_eq!(
            placed(&plan.for_server(), Side::Server),
            [
                vec![(vec![0, 1], None, PACER_SPIN, false, false, None, false)],
                vec![(vec![0, 1, 2], None, PACER_SPIN, true, false, None, false)],
            ]
        );
    }
}
