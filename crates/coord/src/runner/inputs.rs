//! What a runner is built from: its timing, the fleet it places, and why building fails.

use std::sync::Arc;
use std::time::Duration;

use fleetshard_core::{App, Cluster};
use tokio::sync::watch;

use crate::fenced::{InventorySummary, ShardCountError};
use crate::lease::TimingError;

/// How often the runner lists and ticks, and how long it may spend releasing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunnerTiming {
    /// Listing interval when the store reports no change (200 ms).
    pub poll: Duration,
    /// Renew/deadline timer (250 ms): renews never wait for a listing.
    pub tick: Duration,
    /// Longest graceful release before giving up (2 s); stops still running then are
    /// waited for as long again, and reported in any case, before returning.
    pub release_timeout: Duration,
}

impl Default for RunnerTiming {
    fn default() -> Self {
        RunnerTiming {
            poll: Duration::from_millis(200),
            tick: Duration::from_millis(250),
            release_timeout: Duration::from_secs(2),
        }
    }
}

/// Why a runner cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunnerError {
    /// The lease timing is unsafe.
    #[error(transparent)]
    Timing(#[from] TimingError),
    /// The shard count policy is unusable.
    #[error(transparent)]
    Shards(#[from] ShardCountError),
}

/// The fleet the distributor places, as the inventory last published it.
#[derive(Debug, Clone, Default)]
pub struct RunnerFleet {
    /// Clusters.
    pub clusters: Arc<Vec<Cluster>>,
    /// Their loads, in the same order.
    pub loads: Arc<Vec<u64>>,
    /// The applications: which slice of a split cluster holds each (`run
    /// --split-clusters`); a distributor that does not split never reads them.
    pub apps: Arc<Vec<App>>,
    /// Moves whenever the clusters or loads change.
    pub revision: u64,
    /// The loads are measured costs ([`crate::fenced::FleetInput::measured`]).
    pub measured: bool,
    /// The inventory's digest, cluster count and problems, published for other replicas
    /// to compare with (computed where the fleet is built, not on the runner's task).
    pub inventory: InventorySummary,
}

impl RunnerFleet {
    /// A fleet that never changes: `clusters` with their `loads` (same order).
    pub fn fixed(clusters: Vec<Cluster>, loads: Vec<u64>) -> watch::Receiver<RunnerFleet> {
        watch::channel(RunnerFleet {
            inventory: InventorySummary::of(&clusters, 0),
            clusters: Arc::new(clusters),
            loads: Arc::new(loads),
            apps: Arc::default(),
            revision: 0,
            measured: false,
        })
        .1
    }
}
