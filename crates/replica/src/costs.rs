//! What each owned cluster costs, measured, smoothed and published (issue 30): every
//! `sample_every` the replica reads its clusters' usage (reconcile CPU from the
//! controller's workers, the rest from the reconciler), smooths it into one figure per
//! cluster ([`meter`]), and every `publish_every` writes its figures into its own costs
//! record beside the fleet's root and reads everyone's ([`record`]). The merged figures go
//! to the coordination runner, which places by them once they are trusted (the
//! distributor's loads: `inventory::follow_fleet`), to `/metrics`, and to a cluster this
//! replica acquires, whose figure it carries on.
//!
//! Nothing here can hold up a lease: the task writes one small record a minute with no
//! precondition (only this replica writes its key), a failed read or write is logged once
//! and retried at the next period, and the last good figures are kept.

pub mod meter;
pub mod record;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use fleetshard_controller::inventory::Inventory;
use fleetshard_controller::{ClusterUsage, ShardWork};
use fleetshard_coord::store::{Precondition, Store};
use fleetshard_core::placement::slices::UnitId;
use fleetshard_gitops::reconciler::GitOpsReconciler;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::sync::watch;

pub use meter::{CostMeter, MeterConfig};
pub use record::{
    ClusterCost, CostRecord, Freshness, costs_key, costs_prefix, merge, merge_listing,
    placement_costs,
};

/// How costs are measured and published.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CostSettings {
    /// How often usage is sampled (30 s).
    pub sample_every: Duration,
    /// How often the record is written and everyone's read (60 s).
    pub publish_every: Duration,
    /// The smoothing.
    pub meter: MeterConfig,
    /// The share of a replica's capacity kept free when recommending a replica count
    /// (0.25).
    pub headroom: f64,
    /// What one replica can carry, in millicore-equivalents (`--cost-capacity`: its CPU
    /// request in millicores in a pod; 1,000 by default here).
    pub replica_capacity: f64,
}

impl Default for CostSettings {
    fn default() -> Self {
        CostSettings {
            sample_every: Duration::from_secs(30),
            publish_every: Duration::from_secs(60),
            meter: MeterConfig::default(),
            headroom: 0.25,
            replica_capacity: 1000.0,
        }
    }
}

/// A record unchanged for this many publish periods is stale (its writer is gone).
const STALE_AFTER_PERIODS: u32 = 5;

/// Every cluster's figure as this replica last read the records (the last good reading
/// is kept when a read fails), and the floor below which they place nothing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FleetCosts {
    /// Each cluster's figure, merged from every fresh record.
    pub figures: Arc<BTreeMap<String, ClusterCost>>,
    /// [`placement_costs`]'s floor: [`FLOOR_SHARE`] of one replica's capacity.
    pub floor: f64,
}

impl FleetCosts {
    /// What the distributor places by ([`placement_costs`]).
    pub fn placement(&self) -> BTreeMap<String, f64> {
        placement_costs(&self.figures, self.floor)
    }
}

/// The share of one replica's capacity the trusted figures must add up to before they
/// place the fleet: 5 % (50 millicore-equivalents on a 1-CPU replica).
pub const FLOOR_SHARE: f64 = 0.05;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClusterLabel {
    cluster: String,
}

/// The headroom the recommendation keeps: a family of one series, absent until
/// something is measured.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HeadroomLabel {
    headroom: String,
}

/// `fleetshard_cluster_cost{cluster}` (this replica's clusters), `fleetshard_replica_cost`
/// and `fleetshard_recommended_replicas`.
#[derive(Clone, Default)]
pub struct CostMetrics {
    cluster: Family<ClusterLabel, Gauge<f64, AtomicU64>>,
    replica: Gauge<f64, AtomicU64>,
    recommended: Family<HeadroomLabel, Gauge>,
}

impl CostMetrics {
    /// Registers the three metrics in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "cluster_cost",
            "Smoothed measured cost of each cluster this replica owns, in millicore-equivalents \
             (reconcile CPU plus cache memory at the memory weight)",
            self.cluster.clone(),
        );
        registry.register(
            "replica_cost",
            "Sum of the measured costs of the clusters this replica owns",
            self.replica.clone(),
        );
        registry.register(
            "recommended_replicas",
            "Replicas that keep every replica under its capacity with the configured headroom, \
             from the fleet's measured costs (clusters not measured yet at their estimate)",
            self.recommended.clone(),
        );
    }
}

/// The replica count that carries `total` cost with each replica at most `1 − headroom`
/// of `capacity` (both in millicore-equivalents); at least 1.
pub fn recommended_replicas(total: f64, capacity: f64, headroom: f64) -> u32 {
    let usable = capacity * (1.0 - headroom.clamp(0.0, 0.95));
    if !(total.is_finite() && usable > 0.0) {
        return 1;
    }
    ((total / usable).ceil() as u32).max(1)
}

/// The costs task, built and not running yet: [`CostPublisher::run`] samples, publishes
/// and reads until it is cancelled (with the coordination's feeders, at shutdown).
pub struct CostPublisher {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) root: String,
    pub(crate) identity: String,
    pub(crate) incarnation: u64,
    pub(crate) settings: CostSettings,
    /// The distributor's placement settings: the estimates of clusters not measured yet
    /// are its (`--cluster-base-load`), as in `inventory::follow_fleet`.
    pub(crate) placement: fleetshard_core::placement::PlacementConfig,
    /// Write and read the costs records (fenced mode). Under Argo CD's protocol the
    /// figures are only exported: its algorithms place, and its RBAC grants no other
    /// ConfigMap than the shard map.
    pub(crate) records: bool,
    pub(crate) work: Arc<ShardWork>,
    pub(crate) reconciler: Option<Arc<GitOpsReconciler>>,
    pub(crate) inventory: Inventory,
    pub(crate) metrics: CostMetrics,
    pub(crate) figures: watch::Sender<FleetCosts>,
}

impl CostPublisher {
    /// Samples, publishes and reads until dropped. Without the GitOps reconciler
    /// (`--reconciler none`) nothing is reconciled, so nothing is measured or written;
    /// the others' records are still read (and go stale once nobody writes them).
    pub async fn run(self) {
        let start = tokio::time::Instant::now();
        let mut meter = CostMeter::new(self.settings.meter);
        let mut tick = tokio::time::interval(self.settings.sample_every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let (key, prefix) = (
            costs_key(&self.root, &self.identity),
            costs_prefix(&self.root),
        );
        let mut last_publish: Option<Duration> = None;
        let mut failing = false;
        let mut freshness = Freshness::default();
        loop {
            tick.tick().await;
            let now = start.elapsed();
            let seeds = self.figures.borrow().figures.clone();
            meter.sample(now, &self.usage(), &seeds);
            let due =
                last_publish.is_none_or(|t| now.saturating_sub(t) >= self.settings.publish_every);
            if !due {
                continue;
            }
            last_publish = Some(now);
            let mine = meter.figures();
            if !self.records {
                self.export(&mine);
                continue;
            }
            let result = self
                .publish(&key, &prefix, &mine, now, &mut freshness)
                .await;
            match result {
                Ok(()) if failing => {
                    failing = false;
                    tracing::info!(key, "costs record written and read again");
                }
                Ok(()) => {}
                Err(e) if !failing => {
                    failing = true;
                    tracing::warn!(key, error = %e, "costs record not written or read; the last figures are kept");
                }
                Err(_) => {}
            }
            self.export(&mine);
        }
    }

    /// Each owned cluster's usage: CPU from the workers, the rest from the reconciler.
    fn usage(&self) -> BTreeMap<String, ClusterUsage> {
        let mut usage: BTreeMap<String, ClusterUsage> = self
            .work
            .owned()
            .into_iter()
            .map(|c| (c, ClusterUsage::default()))
            .collect();
        if let Some(r) = &self.reconciler {
            // A slice's share of its cluster's caches and requests: the cluster's, over
            // the units of it held here (one, usually: slices are kept apart).
            let of_cluster = |unit: &str| UnitId::parse(unit).cluster.to_owned();
            let mut held: BTreeMap<String, u64> = BTreeMap::new();
            for unit in usage.keys() {
                *held.entry(of_cluster(unit)).or_default() += 1;
            }
            let by_cluster: BTreeMap<String, ClusterUsage> =
                r.cluster_usage().into_iter().collect();
            for (unit, slot) in usage.iter_mut() {
                let cluster = of_cluster(unit);
                if let Some(u) = by_cluster.get(&cluster) {
                    *slot = u.share(held.get(&cluster).copied().unwrap_or(1));
                }
            }
        }
        for (id, cpu) in self.work.cluster_cpu() {
            if let Some(slot) = usage.get_mut(&id) {
                slot.reconcile_cpu = cpu;
            }
        }
        usage
    }

    /// Writes this replica's record (with the GitOps reconciler) and reads everyone's
    /// still written.
    async fn publish(
        &self,
        key: &str,
        prefix: &str,
        mine: &BTreeMap<String, ClusterCost>,
        now: Duration,
        freshness: &mut Freshness,
    ) -> Result<(), String> {
        let record = CostRecord {
            holder: self.identity.clone(),
            incarnation: fleetshard_coord::fenced::incarnation_text(self.incarnation),
            clusters: mine.clone(),
        };
        if self.reconciler.is_some() {
            let value = serde_json::to_vec(&record).map_err(|e| e.to_string())?;
            self.store
                .put(key, value, Precondition::Any)
                .await
                .map_err(|e| e.to_string())?;
        }
        let listing = self.store.list(prefix).await.map_err(|e| e.to_string())?;
        let stale_after = self.settings.publish_every * STALE_AFTER_PERIODS;
        let fresh = freshness.fresh(
            now,
            stale_after,
            listing
                .entries
                .iter()
                .map(|e| (e.key.as_str(), e.value.as_slice(), e.version)),
        );
        let (merged, bad) = merge(fresh);
        for b in bad {
            tracing::debug!(error = %b, "costs record skipped");
        }
        let floor = self.settings.replica_capacity * FLOOR_SHARE;
        self.figures.send_if_modified(|old| {
            let changed = *old.figures != merged || old.floor != floor;
            if changed {
                *old = FleetCosts {
                    figures: Arc::new(merged),
                    floor,
                };
            }
            changed
        });
        Ok(())
    }

    /// Sets the metrics from this replica's figures and the fleet's.
    fn export(&self, mine: &BTreeMap<String, ClusterCost>) {
        self.metrics.cluster.clear();
        for (id, c) in mine {
            self.metrics
                .cluster
                .get_or_create(&ClusterLabel {
                    cluster: id.clone(),
                })
                .set(c.cost);
        }
        let total = mine.values().fold(0.0, |sum, c| sum + c.cost);
        self.metrics.replica.set(total);
        let measured = self.figures.borrow().placement();
        self.metrics.recommended.clear();
        if measured.is_empty() {
            // Nothing to recommend from yet: absent, not a figure an autoscaler would follow.
            return;
        }
        let snapshot = self.inventory.snapshot();
        let estimates = self.placement.loads(&snapshot.clusters, &snapshot.apps);
        let ids: Vec<&str> = snapshot.clusters.iter().map(|c| c.id.as_str()).collect();
        let total: f64 =
            fleetshard_core::placement::measured::cluster_costs(&ids, &estimates, &measured)
                .iter()
                .sum();
        let capacity = self.settings.replica_capacity;
        let n = recommended_replicas(total, capacity, self.settings.headroom);
        self.metrics
            .recommended
            .get_or_create(&HeadroomLabel {
                headroom: self.settings.headroom.to_string(),
            })
            .set(i64::from(n));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recommendation_keeps_the_headroom() {
        // 10 CPUs of cost on 2-CPU replicas at 25 % headroom: 1.5 CPUs usable each → 7.
        assert_eq!(recommended_replicas(10_000.0, 2_000.0, 0.25), 7);
        assert_eq!(recommended_replicas(3_000.0, 2_000.0, 0.25), 2);
        assert_eq!(recommended_replicas(0.0, 2_000.0, 0.25), 1);
        assert_eq!(recommended_replicas(f64::NAN, 2_000.0, 0.25), 1);
    }
}
