//! What each started cluster costs the reconciler beyond CPU time (which the controller's
//! workers measure): its live caches, its watch events, the API requests made for its
//! apps and the sync operations run on them, for the replica's cost figures (issue 30).
//!
//! The caches and watch events are the cluster connection's (`live/footprint.rs`): kept
//! while the cluster is started, so counted since this replica connected to it. The
//! requests and operations are the apps' own counts (`report.rs`, the memo's), summed over
//! the apps whose memo names the cluster: a memo goes when its cluster stops, so these too
//! are since this replica acquired the cluster. An app whose destination moves to another
//! cluster this replica owns takes its counts along (its memo is kept and names the new
//! cluster from its next refresh or operation); apps whose destination resolves to no
//! cluster are counted for none.

use std::collections::BTreeMap;

use fleetshard_controller::ClusterUsage;

use super::GitOpsReconciler;

impl GitOpsReconciler {
    /// Each started cluster's usage, by cluster id (sorted); `reconcile_cpu` is left zero
    /// (the controller's workers measure it). `sync_operations` counts the operations
    /// that ended (as `argocd_app_sync_total`, dry runs included); one in progress counts
    /// once it ends, for the owner that ends it.
    pub fn cluster_usage(&self) -> Vec<(String, ClusterUsage)> {
        let mut usage: BTreeMap<String, ClusterUsage> = self
            .clusters()
            .cache_usage()
            .into_iter()
            .map(|(id, cache)| {
                let u = ClusterUsage {
                    cache_objects: cache.objects,
                    cache_bytes: cache.bytes,
                    watch_events: cache.watch_events,
                    ..ClusterUsage::default()
                };
                (id, u)
            })
            .collect();
        for m in self.memos().values() {
            if m.unresolved {
                continue;
            }
            if let Some(u) = usage.get_mut(&m.cluster) {
                u.api_requests += m.requests.total();
                u.sync_operations += m.activity.syncs.values().sum::<u64>();
            }
        }
        usage.into_iter().collect()
    }
}
