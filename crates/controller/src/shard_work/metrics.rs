//! The work's counters, as the status page and `/metrics` show them (under the
//! `shard_filter_` prefix they were published under).

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Counters the status page and `/metrics` show.
#[derive(Debug, Clone, Default)]
pub struct WorkMetrics {
    /// Items dropped at get time because their cluster is not owned, or the shard lease
    /// has lapsed (ownership ends at its deadline).
    pub not_owned: Counter,
    /// Items dropped at get time because their destination is unresolved and the
    /// inventory has no cluster to anchor them to.
    pub unresolved_dropped: Counter,
    /// Apps whose destination resolves to no cluster, now.
    pub unresolved_apps: Gauge,
    /// Clusters owned now.
    pub owned_clusters: Gauge,
}

impl WorkMetrics {
    /// Registers the metrics under `shard_filter_`.
    pub fn register(&self, registry: &mut Registry) {
        let r = registry.sub_registry_with_prefix("shard_filter");
        r.register(
            "not_owned_dropped",
            "Items dropped because their cluster is not owned by this replica (or its lease lapsed)",
            self.not_owned.clone(),
        );
        r.register(
            "unresolved_dropped",
            "Items dropped because their destination resolves to no cluster and the inventory has none",
            self.unresolved_dropped.clone(),
        );
        r.register(
            "unresolved_apps",
            "Apps whose destination resolves to no cluster",
            self.unresolved_apps.clone(),
        );
        r.register(
            "owned_clusters",
            "Clusters this replica owns",
            self.owned_clusters.clone(),
        );
    }
}
