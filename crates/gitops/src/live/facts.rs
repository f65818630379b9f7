//! What the started clusters' caches hold and what their connections learned, read at a
//! metrics scrape (Argo CD's `argocd_cluster_*` metrics): objects and kinds cached, the
//! cache's age, the server's version, whether the cluster answers, and the watch events
//! received per kind.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{ClusterConn, ClusterConnections, lock};

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
    /// The server's version as gitops-engine reports it (`v1.31.2`; empty until the
    /// server answered `/version`).
    pub k8s_version: String,
    /// Whether the cluster answers: no kind's last list or watch failed and the last
    /// reachability probe succeeded (Argo CD's cache without a sync error).
    pub connected: bool,
    /// Watch events received (added, modified, deleted; not the objects of a list) per
    /// (group, kind), since this replica connected to the cluster.
    pub events: BTreeMap<(String, String), u64>,
}

/// What a cluster's connection learned beyond its caches, shared with its watches.
#[derive(Debug, Default)]
pub(crate) struct Observed {
    /// The server's normalised version, once it answered `/version`.
    version: Mutex<Option<String>>,
    /// Watch events per (group, kind): one counter per kind, kept across the kind's
    /// caches (a restarted watch counts on).
    events: Mutex<HashMap<(String, String), Arc<AtomicU64>>>,
    /// The last reachability probe failed.
    unreachable: AtomicBool,
}

impl Observed {
    /// The counter of `group`/`kind`'s watch events (taken once per watch, counted
    /// without a lock).
    pub(crate) fn events_of(&self, group: &str, kind: &str) -> Arc<AtomicU64> {
        lock(&self.events)
            .entry((group.to_owned(), kind.to_owned()))
            .or_default()
            .clone()
    }

    /// Watch events received so far, every kind's together.
    pub(crate) fn events_total(&self) -> u64 {
        lock(&self.events)
            .values()
            .map(|n| n.load(Ordering::Relaxed))
            .sum()
    }

    /// Notes the server's `gitVersion`, normalised as gitops-engine reports it.
    pub(crate) fn saw_version(&self, git_version: &str) {
        let version = fleetshard_reposerver::normalize_kube_version(git_version)
            .unwrap_or_else(|_| git_version.to_owned());
        *lock(&self.version) = Some(version);
    }

    /// Notes how the last reachability probe ended.
    pub(crate) fn probed(&self, reached: bool) {
        self.unreachable.store(!reached, Ordering::Relaxed);
    }
}

impl ClusterConn {
    /// Asks the server's version once, in the background (bounded by the call timeout),
    /// unless a probe or a discovery already told it: Argo CD's cluster metrics label the
    /// cluster with it. Nothing waits for it; a failure leaves it unknown until a probe
    /// or a discovery succeeds.
    pub(crate) fn read_version_in_background(self: &Arc<Self>) {
        // Only the client and what it learns are held: a cluster stopped meanwhile drops
        // its caches at once.
        let (client, observed) = (self.client.clone(), Arc::clone(&self.observed));
        let timeout = self.options.call_timeout;
        tokio::spawn(async move {
            if lock(&observed.version).is_some() {
                return;
            }
            if let Ok(Ok(info)) = tokio::time::timeout(timeout, client.apiserver_version()).await {
                observed.saw_version(&info.git_version);
            }
        });
    }

    /// This cluster's figures for Argo CD's cluster metrics.
    fn facts(&self) -> ClusterCacheFacts {
        let caches: Vec<_> = lock(&self.caches).values().cloned().collect();
        let failing = caches.iter().any(|c| c.last_error().is_some());
        let events = lock(&self.observed.events)
            .iter()
            .map(|(k, n)| (k.clone(), n.load(Ordering::Relaxed)))
            .collect();
        ClusterCacheFacts {
            id: self.access.id.clone(),
            server: self.access.server.clone(),
            kinds: caches.len(),
            objects: self.cached_objects(),
            age: self.cache_age(),
            k8s_version: lock(&self.observed.version).clone().unwrap_or_default(),
            connected: !failing && !self.observed.unreachable.load(Ordering::Relaxed),
            events,
        }
    }
}

impl ClusterConnections {
    /// Each started cluster's cache, sorted by id.
    pub fn cache_facts(&self) -> Vec<ClusterCacheFacts> {
        self.each_started(ClusterConn::facts)
            .into_iter()
            .map(|(_, facts)| facts)
            .collect()
    }
}
