//! fleetshard's own placement, `balanced`: weighted bounded-load placement with minimal
//! movement, pins, and zone-aware placement after Kubernetes Topology Aware Hints.
//!
//! How it decides, in order (see `ARCHITECTURE.md` for the why):
//! 1. **Targets.** Every shard gets a target load proportional to its capacity: of the whole
//!    fleet, or, in zone-aware mode, of its zone's share (see [`ZonePlan`]). A shard may
//!    carry up to `(1 + tolerance) × target` and should carry at least
//!    `(1 − tolerance) × target`.
//! 2. **Stay.** A valid pin is obeyed. Every other cluster that has a previous shard which
//!    still exists and is still allowed (zone) stays there.
//! 3. **Place.** Clusters without a shard (new ones, or those of a removed shard) are placed
//!    heaviest first, each on the shard it prefers most (rendezvous hashing: a fixed,
//!    per-cluster ranking of shards) among those still below target, then below the bound.
//! 4. **Shed.** A shard above its bound hands off the fewest, smallest clusters that fix it.
//! 5. **Fill.** A shard below its floor (a new replica) takes clusters from shards above
//!    their target, those that prefer it most first, up to its target.
//! 6. **Small fleets.** A shard still above its bound, with at most 12 movable clusters:
//!    the placement within every bound that moves the fewest, if one exists.
//!
//! Because clusters only move in 3–6, and only as much as needed, scaling N→N+1 moves about
//! 1/(N+1) of the load, N→N−1 moves what the removed shard held, and one more or one fewer
//! cluster moves at most a few others. The result is a pure function of the input.

mod engine;
pub mod hysteresis;
pub mod measured;
mod rendezvous;
pub mod slices;
pub mod slicing;
pub mod vacated;
mod zones;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_cost;
#[cfg(test)]
mod tests_targets;
#[cfg(test)]
mod tests_zones;

use std::collections::BTreeSet;

use crate::assignment::Assignment;
use crate::model::{App, Cluster, ShardSpec, app_counts};

pub use engine::BalancedPlacer;
pub use rendezvous::stable_hash;
pub use zones::{ZoneFallback, ZonePlan, ZoneReport};

/// Name of this algorithm on the command line and in reports.
pub const BALANCED: &str = "balanced";

/// What owning a cluster costs a replica beyond its apps, in apps: the default of
/// [`PlacementConfig::cluster_base_load`]. Chosen from measurement; `docs/performance.md`,
/// "What a cluster costs", explains the figure.
pub const DEFAULT_CLUSTER_BASE_LOAD: u64 = 5;

/// Knobs of the balanced placement.
#[derive(Debug, Clone, PartialEq)]
pub struct PlacementConfig {
    /// ε: a shard may carry up to `(1 + ε) × target`; 0.10 by default (G5).
    pub tolerance: f64,
    /// Zone-aware placement settings.
    pub zones: ZonePolicy,
    /// The load of a cluster without a `weight` is this base plus its app count
    /// ([`PlacementConfig::loads`]), so that clusters spread as well as apps: an owned
    /// cluster costs a replica something even without apps. Argo CD's algorithms do not
    /// use it (they count apps, as Argo CD does).
    pub cluster_base_load: u64,
}

impl Default for PlacementConfig {
    fn default() -> Self {
        PlacementConfig {
            tolerance: 0.10,
            zones: ZonePolicy::default(),
            cluster_base_load: DEFAULT_CLUSTER_BASE_LOAD,
        }
    }
}

impl PlacementConfig {
    /// The load balanced placement gives each cluster (same order as `clusters`): its
    /// `weight` when set, else [`PlacementConfig::cluster_base_load`] plus its app count.
    pub fn loads(&self, clusters: &[Cluster], apps: &[App]) -> Vec<u64> {
        app_counts(clusters, apps)
            .into_iter()
            .zip(clusters)
            .map(|(apps, c)| {
                c.weight
                    .unwrap_or(apps.saturating_add(self.cluster_base_load))
            })
            .collect()
    }
}

/// When and how zones shape placement (after Topology Aware Hints).
#[derive(Debug, Clone, PartialEq)]
pub struct ZonePolicy {
    /// Use zones when every shard and cluster has one; `false` ignores zones.
    pub enabled: bool,
    /// A zone keeps all its clusters on its own shards while its expected overload (demand
    /// over capacity share, minus one) is below this (0.20)...
    pub engage_overload: f64,
    /// ...and, once local, until it reaches this (0.30). Hysteresis needs the previous plan.
    pub disengage_overload: f64,
    /// A zone with clusters needs at least this many shards (1), otherwise zones are
    /// ignored. Set 2 so that a replica failure can always fail over within the zone.
    pub min_shards_per_zone: usize,
}

impl Default for ZonePolicy {
    fn default() -> Self {
        ZonePolicy {
            enabled: true,
            engage_overload: 0.20,
            disengage_overload: 0.30,
            min_shards_per_zone: 1,
        }
    }
}

/// The state of an earlier placement that the next one should stay close to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PreviousPlacement {
    /// Where each cluster was.
    pub assignment: Assignment,
    /// Zones that kept their clusters local (for hysteresis).
    pub local_zones: BTreeSet<String>,
    /// Clusters displaced from a vacant shard, and that shard: they go back to it as soon
    /// as it is held again.
    pub homes: Assignment,
}

/// Something the operator should know about a placement.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlacementWarning {
    /// A `shard` pin outside `0..replicas`; the cluster was placed as if unpinned.
    #[error(
        "cluster {cluster}: pinned shard {shard} is outside 0..{replicas}; placed automatically"
    )]
    PinOutOfRange {
        /// Cluster id.
        cluster: String,
        /// The pin.
        shard: i64,
        /// Shard count.
        replicas: u32,
    },
    /// A cluster heavier than its shard's bound: it cannot be balanced, only isolated on
    /// a shard of its own.
    #[error(
        "cluster {cluster}: load {load} exceeds its shard's bound ({bound:.1}); isolated on its shard"
    )]
    HotCluster {
        /// Cluster id.
        cluster: String,
        /// Its load.
        load: u64,
        /// The bound of the shard it is on.
        bound: f64,
    },
    /// A shard stayed above its bound after shedding, though it holds no hot cluster
    /// (pins, or zone constraints).
    #[error("shard {shard}: load {load} stays above its bound {bound:.1}")]
    ShardOverBound {
        /// The shard.
        shard: u32,
        /// Its load.
        load: u64,
        /// Its bound.
        bound: f64,
    },
    /// Two clusters share an id; the later one was left unplaced.
    #[error("cluster id {cluster} appears more than once; later duplicates are not placed")]
    DuplicateId {
        /// The id.
        cluster: String,
    },
    /// A cluster is pinned to a shard that has no live holder; it was placed elsewhere
    /// until the shard is held again.
    #[error("cluster {cluster}: pinned shard {shard} is vacant; placed elsewhere meanwhile")]
    PinnedShardVacant {
        /// Cluster id.
        cluster: String,
        /// The pin.
        shard: u32,
    },
    /// There are clusters but no shards.
    #[error("no shards: {clusters} clusters have no owner")]
    NoShards {
        /// Managed clusters left without a shard.
        clusters: usize,
    },
}

/// The outcome of a placement.
#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    /// Per input cluster, its shard; `None` for skip-reconcile clusters and duplicates.
    pub shards: Vec<Option<u32>>,
    /// Target load per shard.
    pub targets: Vec<f64>,
    /// How zones shaped the placement.
    pub zones: ZonePlan,
    /// Per input cluster, the vacant shard it was displaced from (it returns there when the
    /// shard is held again), if any.
    pub homes: Vec<Option<u32>>,
    /// Load (and clusters) placed on a shard of another zone than the cluster's.
    pub cross_zone: CrossZone,
    /// What the operator should know.
    pub warnings: Vec<PlacementWarning>,
}

/// Load and clusters placed outside their own zone (both sides must have a zone).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CrossZone {
    /// Clusters on a shard in another zone.
    pub clusters: usize,
    /// Their load.
    pub load: u64,
    /// All load with a zone on both sides.
    pub zoned_load: u64,
}

impl CrossZone {
    /// Cross-zone load as a fraction of the zoned load.
    pub fn fraction(&self) -> f64 {
        if self.zoned_load == 0 {
            0.0
        } else {
            self.load as f64 / self.zoned_load as f64
        }
    }
}

impl Placement {
    /// The placement as an [`Assignment`] keyed by cluster id.
    pub fn assignment(&self, clusters: &[Cluster]) -> Assignment {
        clusters
            .iter()
            .zip(&self.shards)
            .filter_map(|(c, s)| s.map(|s| (c.id.clone(), s)))
            .collect()
    }

    /// What the next placement should stay close to.
    pub fn as_previous(&self, clusters: &[Cluster]) -> PreviousPlacement {
        let local_zones = match &self.zones {
            ZonePlan::Aware(zones) => zones
                .iter()
                .filter(|z| z.local)
                .map(|z| z.zone.clone())
                .collect(),
            _ => BTreeSet::new(),
        };
        let homes = clusters
            .iter()
            .zip(&self.homes)
            .filter_map(|(c, h)| h.map(|h| (c.id.clone(), h)))
            .collect();
        PreviousPlacement {
            assignment: self.assignment(clusters),
            local_zones,
            homes,
        }
    }
}

/// Places `clusters` (with `loads[i]` each) on `shards`, staying close to `previous`.
/// Deterministic: the same arguments give the same placement, whatever the input order.
pub fn place(
    clusters: &[Cluster],
    loads: &[u64],
    shards: &[ShardSpec],
    previous: Option<&PreviousPlacement>,
    config: &PlacementConfig,
) -> Placement {
    BalancedPlacer::new(config.clone(), shards.to_vec()).place(clusters, loads, previous)
}
