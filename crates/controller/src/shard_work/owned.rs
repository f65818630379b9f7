//! The clusters this replica owns, each with the counter of its apps' reconcile CPU time
//! (`crate::usage`): made when the cluster is started, dropped when it is stopped, so the
//! count is since this acquisition. Items in flight keep the counter they took at their
//! admission; what they spend after their cluster stopped is counted nowhere.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use super::ShardWork;
use crate::usage::{CpuClock, CpuMeter, ThreadCpuClock, cpu_time};

/// The owned clusters and their CPU counters (nanoseconds), and the clock the workers
/// read.
#[derive(Debug)]
pub(super) struct Owned {
    clusters: HashMap<Arc<str>, Arc<AtomicU64>>,
    clock: Arc<dyn CpuClock>,
}

impl Default for Owned {
    fn default() -> Self {
        Owned {
            clusters: HashMap::new(),
            clock: Arc::new(ThreadCpuClock),
        }
    }
}

impl Owned {
    /// Owns `id` from now on, its count at zero; false if it was owned already.
    pub(super) fn insert(&mut self, id: Arc<str>) -> bool {
        match self.clusters.entry(id) {
            Entry::Occupied(_) => false,
            Entry::Vacant(v) => {
                v.insert(Arc::default());
                true
            }
        }
    }

    /// Owns `id` no more, forgetting its count; false if it was not owned.
    pub(super) fn remove(&mut self, id: &str) -> bool {
        self.clusters.remove(id).is_some()
    }

    pub(super) fn contains(&self, id: &str) -> bool {
        self.clusters.contains_key(id)
    }

    pub(super) fn len(&self) -> usize {
        self.clusters.len()
    }

    /// The owned clusters' ids.
    pub(super) fn iter(&self) -> impl Iterator<Item = &Arc<str>> {
        self.clusters.keys()
    }

    /// What an item of `id` counts its polls with; a counter of its own (counted nowhere)
    /// if `id` is not owned.
    pub(super) fn meter(&self, id: &str) -> CpuMeter {
        let nanos = self.clusters.get(id).cloned().unwrap_or_default();
        CpuMeter::new(nanos, self.clock.clone())
    }
}

impl ShardWork {
    /// Reads the workers' CPU time with `clock` from now on (tests; by default the
    /// thread's CPU clock, [`ThreadCpuClock`]). Items already admitted keep the clock
    /// they took.
    pub fn set_cpu_clock(&self, clock: Arc<dyn CpuClock>) {
        self.lock().owned.clock = clock;
    }

    /// Each owned cluster's reconcile CPU time since it was started, sorted by id.
    pub(crate) fn owned_cpu(&self) -> Vec<(String, Duration)> {
        let mut cpu: Vec<(String, Duration)> = self
            .lock()
            .owned
            .clusters
            .iter()
            .map(|(id, nanos)| (id.to_string(), cpu_time(nanos)))
            .collect();
        cpu.sort();
        cpu
    }
}
