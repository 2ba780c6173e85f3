//! The engines of one session, one per part of a mix (one alone for a
//! single test), driven as one: the same phase, interval and stop for all,
//! counters snapshotted in the parts' order.
//!
//! Each part runs its own [`Engine`] so that it keeps its own latency
//! histograms, interval table and flows: a probe's response times are never
//! merged with another part's, and every figure a test has alone it has in
//! a mix. The counter snapshot is the parts' blocks one after another, so a
//! part's flows sit at the offsets `TestPlan::part_offsets` gives.

use std::io;
use std::sync::Arc;

use super::{Engine, EngineOutcome, WorkerSpec};
use crate::plan::{DriverChoice, Phase};
use crate::stats::counters::{Counts, FlowCounters};

/// The engines of a session, one per part.
pub struct Engines {
    parts: Vec<Engine>,
}

impl Engines {
    /// Start each part's workers; on a failure the parts already started are stopped.
    pub fn start(
        parts: Vec<(Arc<[FlowCounters]>, Vec<WorkerSpec>)>,
        initial: Phase,
        choice: DriverChoice,
        percentiles: &[f64],
    ) -> io::Result<Engines> {
        let mut started = Vec::with_capacity(parts.len());
        for (counters, workers) in parts {
            match Engine::start(counters, workers, initial, choice, percentiles) {
                Ok(e) => started.push(e),
                Err(e) => {
                    for s in started {
                        s.join();
                    }
                    return Err(e);
                }
            }
        }
        Ok(Engines { parts: started })
    }

    /// The driver of every worker, parts in order.
    pub fn drivers(&self) -> Vec<&'static str> {
        self.parts
            .iter()
            .flat_map(|e| e.drivers().iter().copied())
            .collect()
    }

    pub fn set_phase(&self, p: Phase) {
        for e in &self.parts {
            e.set_phase(p);
        }
    }

    pub fn set_interval(&self, index: u32) {
        for e in &self.parts {
            e.set_interval(index);
        }
    }

    /// Every part's counters, one block after another.
    pub fn snapshot(&self) -> Vec<Counts> {
        self.parts.iter().flat_map(|e| e.snapshot()).collect()
    }

    pub fn quota_done(&self) -> u32 {
        self.parts.iter().map(|e| e.quota_done()).sum()
    }

    pub fn running(&self) -> u32 {
        self.parts.iter().map(|e| e.running()).sum()
    }

    /// Workers of part `i` still running.
    pub fn running_of(&self, i: usize) -> u32 {
        self.parts.get(i).map_or(0, |e| e.running())
    }

    /// The first part's error, if any part has one.
    pub fn error(&self) -> Option<String> {
        self.parts.iter().find_map(|e| e.error())
    }

    /// Stop every part, wait for its workers, and give each part's outcome.
    pub fn join(self) -> Vec<EngineOutcome> {
        for e in &self.parts {
            e.stop();
        }
        self.parts.into_iter().map(Engine::join).collect()
    }
}
