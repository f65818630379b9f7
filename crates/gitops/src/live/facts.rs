//! What the started clusters' caches hold, read at a metrics scrape.

use std::time::Duration;

use super::{ClusterConnections, lock};

/// One started cluster's cache, as Argo CD's cluster metrics show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterCacheFacts {
    /// The cluster's id.
    pub id: String,
    /// Its API server URL (Argo CD's `server` label).
    pub server: String,
    /// The kinds watched (Argo CD's monitored API resources).
    pub kinds: usize,
    /// The objects cached.
    pub objects: usize,
    /// Since the oldest of its kinds was last listed in full (`None`: not every kind yet).
    pub age: Option<Duration>,
}

impl ClusterConnections {
    /// Each started cluster's cache, sorted by id.
    pub fn cache_facts(&self) -> Vec<ClusterCacheFacts> {
        let conns: Vec<_> = lock(&self.clusters).values().cloned().collect();
        let mut facts: Vec<ClusterCacheFacts> = conns
            .iter()
            .map(|c| {
                // The lock is released before the calls below take it again.
                let kinds = lock(&c.caches).len();
                ClusterCacheFacts {
                    id: c.access.id.clone(),
                    server: c.access.server.clone(),
                    kinds,
                    objects: c.cached_objects(),
                    age: c.cache_age(),
                }
            })
            .collect();
        facts.sort_by(|a, b| a.id.cmp(&b.id));
        facts
    }
}
