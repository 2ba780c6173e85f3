//! The engines of one session, one per part of a mix (one alone for a
//! single test), driven as one: the same phase, interval and stop for all,
//! counters snapshotted in the parts' order.
//!
//! Each part runs its own [`Engine`] so that it keeps its own latency
//! histograms, interval table and flows: a probe's response times are never
//! merged with another part's, and every figure a test has alone it has in
//! a mix. The counter snapshot is the parts' blocks one after another, so a
//! part's flows sit at the offsets `TestPlan::part_offsets` gives.
//!
//! A part may be held: its flows are built and connected but its workers
//! start only at [`Engines::start_load`] (the bulk parts of a mix with an
//! idle phase), and [`Engines::stop_load`] drains them early, while the
//! probes run on into the recovery phase.

use std::collections::BTreeMap;
use std::io;
use std::sync::Arc;

use super::handle::{Engine, EngineOutcome};
use super::place::WorkerSpec;
use crate::plan::{DriverChoice, LoadStep, Phase};
use crate::stats::counters::{Counts, FlowCounters};
use crate::stats::latency::LatencyHistogram;

enum Slot {
    /// Not started yet: its counters (all zero) and its workers.
    Held(Arc<[FlowCounters]>, Vec<WorkerSpec>, bool),
    Running(Engine),
}

/// The engines of a session, one per part.
pub struct Engines {
    slots: Vec<Slot>,
    /// The parts held at the start: the load that `start_load` starts.
    load: Vec<bool>,
    /// The load has been drained: its parts stay in the drain whatever
    /// phase the session enters.
    load_stopped: bool,
    choice: DriverChoice,
    percentiles: Vec<f64>,
}

impl Engines {
    /// Start each part's workers except the `held` ones; on a failure the
    /// parts already started are stopped. Each part says whether it runs
    /// open loop (its engine then records service time and lag).
    pub fn start(
        parts: Vec<(Arc<[FlowCounters]>, Vec<WorkerSpec>, bool)>,
        held: &[bool],
        initial: Phase,
        choice: DriverChoice,
        percentiles: &[f64],
    ) -> io::Result<Engines> {
        let mut slots = Vec::with_capacity(parts.len());
        for (i, (counters, workers, open_loop)) in parts.into_iter().enumerate() {
            if held.get(i).copied().unwrap_or(false) {
                slots.push(Slot::Held(counters, workers, open_loop));
                continue;
            }
            match Engine::start(counters, workers, initial, choice, percentiles, open_loop) {
                Ok(e) => slots.push(Slot::Running(e)),
                Err(e) => {
                    for s in slots {
                        if let Slot::Running(r) = s {
                            r.join();
                        }
                    }
                    return Err(e);
                }
            }
        }
        Ok(Engines {
            slots,
            load: held.to_vec(),
            load_stopped: false,
            choice,
            percentiles: percentiles.to_vec(),
        })
    }

    fn running_engines(&self) -> impl Iterator<Item = &Engine> {
        self.slots.iter().filter_map(|s| match s {
            Slot::Running(e) => Some(e),
            Slot::Held(..) => None,
        })
    }

    /// Keep part `i`'s per-interval latency histograms (its probe phases
    /// merge them); a held part is asked when it starts.
    pub fn keep_interval_histograms(&self, i: usize) {
        if let Some(Slot::Running(e)) = self.slots.get(i) {
            e.keep_interval_histograms();
        }
    }

    /// The driver of every running worker, parts in order.
    pub fn drivers(&self) -> Vec<&'static str> {
        self.running_engines()
            .flat_map(|e| e.drivers().iter().copied())
            .collect()
    }

    pub fn set_phase(&self, p: Phase) {
        for (s, &load) in self.slots.iter().zip(&self.load) {
            if let Slot::Running(e) = s {
                e.set_phase(if load && self.load_stopped {
                    Phase::Drain
                } else {
                    p
                });
            }
        }
    }

    /// Start the held parts in `phase` (idle to loaded), or drain them
    /// (loaded to recovery).
    pub fn step(&mut self, step: LoadStep, phase: Phase, interval: u32) -> io::Result<()> {
        match step {
            LoadStep::Start => {
                for s in &mut self.slots {
                    if let Slot::Held(..) = s {
                        let Slot::Held(counters, workers, open_loop) =
                            std::mem::replace(s, Slot::Held(Arc::from([]), Vec::new(), false))
                        else {
                            unreachable!("matched Held above")
                        };
                        let e = Engine::start(
                            counters,
                            workers,
                            phase,
                            self.choice,
                            &self.percentiles,
                            open_loop,
                        )?;
                        e.set_interval(interval);
                        *s = Slot::Running(e);
                    }
                }
            }
            LoadStep::Stop => {
                self.load_stopped = true;
                self.set_phase(phase);
            }
        }
        Ok(())
    }

    pub fn set_interval(&self, index: u32) {
        for e in self.running_engines() {
            e.set_interval(index);
        }
    }

    /// Every part's counters, one block after another.
    pub fn snapshot(&self) -> Vec<Counts> {
        self.slots
            .iter()
            .flat_map(|s| match s {
                Slot::Running(e) => e.snapshot(),
                Slot::Held(c, _, _) => c.iter().map(|c| c.snapshot()).collect(),
            })
            .collect()
    }

    pub fn quota_done(&self) -> u32 {
        self.running_engines().map(|e| e.quota_done()).sum()
    }

    pub fn running(&self) -> u32 {
        self.running_engines().map(|e| e.running()).sum()
    }

    /// Workers of the load parts (a mix's bulk parts) still running: after
    /// `stop_load`, those that have not yet read their peer's EOF.
    pub fn load_running(&self) -> u32 {
        self.slots
            .iter()
            .zip(&self.load)
            .map(|(s, &load)| match s {
                Slot::Running(e) if load => e.running(),
                _ => 0,
            })
            .sum()
    }

    /// Workers of part `i` still running.
    pub fn running_of(&self, i: usize) -> u32 {
        match self.slots.get(i) {
            Some(Slot::Running(e)) => e.running(),
            _ => 0,
        }
    }

    /// Each part's TCP retransmissions so far (None for a part without
    /// long-lived TCP sockets); a held part has sent nothing yet.
    pub fn tcp_retransmits(&self) -> Vec<Option<u64>> {
        self.slots
            .iter()
            .map(|s| match s {
                Slot::Running(e) => e.tcp_retransmits(),
                Slot::Held(_, workers, _) => workers
                    .iter()
                    .any(|w| w.flows.iter().any(|f| f.tcp_socket().is_some()))
                    .then_some(0),
            })
            .collect()
    }

    /// TCP_INFO of the running parts' long-lived TCP sockets, one part
    /// after another (a single test: its one engine's, `Engine::tcp_infos`).
    pub fn tcp_infos(&self) -> Vec<Option<crate::sensors::TcpInfo>> {
        self.running_engines().flat_map(|e| e.tcp_infos()).collect()
    }

    /// Part `i`'s latency in interval `index` so far: settled (every worker
    /// handed it in), and the summary. A part not started has none, settled.
    pub fn interval_latency(
        &self,
        i: usize,
        index: u32,
    ) -> (bool, Option<crate::stats::latency::LatencySummary>) {
        match self.slots.get(i) {
            Some(Slot::Running(e)) => e.interval_latency(index),
            _ => (true, None),
        }
    }

    /// Part `i`'s one-way record of interval `index` (`--one-way`):
    /// settled, and the record. A part not started has none, settled.
    pub fn interval_one_way(
        &self,
        i: usize,
        index: u32,
    ) -> (bool, Option<crate::stats::latency::OneWayInterval>) {
        match self.slots.get(i) {
            Some(Slot::Running(e)) => e.interval_one_way(index),
            _ => (true, None),
        }
    }

    /// The first part's error, if any part has one.
    pub fn error(&self) -> Option<String> {
        self.running_engines().find_map(|e| e.error())
    }

    /// Stop every part, wait for its workers, and give each part's outcome
    /// (a part never started: its flows, zero counts and no latency).
    pub fn join(self) -> Vec<EngineOutcome> {
        for e in self.running_engines() {
            e.stop();
        }
        self.slots
            .into_iter()
            .map(|s| match s {
                Slot::Running(e) => e.join(),
                Slot::Held(counters, workers, _) => EngineOutcome {
                    latency: LatencyHistogram::new(),
                    interval_latency: BTreeMap::new(),
                    service_latency: LatencyHistogram::new(),
                    service_interval_latency: BTreeMap::new(),
                    interval_histograms: BTreeMap::new(),
                    flow_interval_latency: BTreeMap::new(),
                    interval_one_way: BTreeMap::new(),
                    generator_lag: LatencyHistogram::new(),
                    flows: workers.into_iter().flat_map(|w| w.flows).collect(),
                    drivers: Vec::new(),
                    napi: None,
                    error: None,
                    counts: counters.iter().map(|c| c.snapshot()).collect(),
                },
            })
            .collect()
    }
}
