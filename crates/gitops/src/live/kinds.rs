//! A cluster's kinds: discovery (cached per cluster) and the watch-backed cache of each
//! kind its applications deploy, what the caches are told of this replica's own writes
//! and of the settings they apply, and what is read from them (an app's live objects,
//! the caches' age and size).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use kube::api::GroupVersionKind;
use kube::discovery::Scope;
use serde_json::Value;
use tokio::time::Instant;

use fleetshard_manifest::customizations::ResourceFilter;

use super::cache::{KindCache, WatchContext};
use super::{ClusterConn, KindInfo, LiveError, UpdateFilter, lock};
use crate::compare::{ResourceKey, Tracking};

impl ClusterConn {
    /// What the cluster serves as `kind` in `api_version` (discovery, cached; a kind not
    /// found is asked again next time, as a CRD may be installed meanwhile).
    pub async fn kind_info(&self, api_version: &str, kind: &str) -> Result<KindInfo, LiveError> {
        let key = (api_version.to_owned(), kind.to_owned());
        if let Some(info) = lock(&self.kinds).get(&key) {
            return Ok(info.clone());
        }
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let found = tokio::time::timeout(
            self.options.call_timeout,
            kube::discovery::pinned_kind(&self.client, &gvk),
        )
        .await
        .map_err(|_| self.unreachable("discovery: no answer in time"))?;
        let (resource, caps) = match found {
            Ok(found) => found,
            Err(kube::Error::Api(status)) if status.code == 404 => {
                return Err(self.unknown_kind(api_version, kind, status.message));
            }
            Err(kube::Error::Discovery(e)) => {
                return Err(self.unknown_kind(api_version, kind, e.to_string()));
            }
            Err(e) => return Err(self.unreachable(format!("discovery: {e}"))),
        };
        self.heard_now();
        let info = KindInfo {
            resource,
            namespaced: caps.scope == Scope::Namespaced,
        };
        lock(&self.kinds).insert(key, info.clone());
        Ok(info)
    }

    fn unknown_kind(&self, api_version: &str, kind: &str, message: String) -> LiveError {
        LiveError::UnknownKind {
            cluster: self.access.server.clone(),
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
            message,
        }
    }

    /// Makes sure every kind in `kinds` is watched and its first list is complete: every
    /// kind's watch is started first, so their lists run in parallel (within
    /// [`LiveOptions::list_concurrency`]). A cluster-scoped kind on a namespace-scoped
    /// cluster without `clusterResources` is [`LiveError::NotManaged`], and not watched; a
    /// kind the resource filter excludes is skipped ([`ClusterConn::set_resource_filter`]).
    pub async fn watch_kinds(&self, kinds: &[KindInfo]) -> Result<(), LiveError> {
        let kinds: Vec<&KindInfo> = kinds.iter().filter(|i| !self.is_excluded(i)).collect();
        for info in kinds.iter().filter(|i| !i.namespaced) {
            self.check_managed(&info.resource.kind, "", "(any)")?;
        }
        let caches: Vec<_> = kinds
            .into_iter()
            .map(|info| (info, self.cache(info)))
            .collect();
        let not_ready = |info: &KindInfo, message: String| LiveError::NotReady {
            cluster: self.access.server.clone(),
            kind: info.resource.kind.clone(),
            message,
        };
        for (info, cache) in caches {
            cache
                .wait_ready(self.options.sync_timeout)
                .await
                .map_err(|message| not_ready(info, message))?;
            // Lists that keep failing leave the cache as old as its last good one: past
            // the bound it is not trusted.
            let age = cache.listed_at().map(|at| at.elapsed());
            if let Some(age) = age.filter(|age| *age > self.options.stale_after()) {
                let why = cache
                    .last_error()
                    .unwrap_or_else(|| "its new list has not completed".to_owned());
                return Err(not_ready(
                    info,
                    format!(
                        "last listed {}s ago, beyond the {}s bound (a new list every {}s): {why}",
                        age.as_secs(),
                        self.options.stale_after().as_secs(),
                        self.options.relist_every.as_secs()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Makes the caches keep the `managedFields` entries of `managers` (an application's
    /// `managedFieldsManagers`) from now on. A manager not kept before drops the cluster's
    /// caches, so the next [`ClusterConn::watch_kinds`] lists their objects again with its
    /// entries (once per new manager while the cluster is started).
    pub fn keep_managers<'m>(&self, managers: impl IntoIterator<Item = &'m str>) {
        let mut kept = lock(&self.kept_managers);
        let new: Vec<&str> = managers
            .into_iter()
            .filter(|m| !kept.iter().any(|k| k == m))
            .collect();
        if new.is_empty() {
            return;
        }
        let mut all: Vec<String> = kept.as_ref().clone();
        all.extend(new.iter().map(|m| (*m).to_owned()));
        all.sort();
        all.dedup();
        *kept = Arc::new(all);
        drop(kept);
        lock(&self.caches).clear();
    }

    /// Every object the cluster's caches hold, as the app-state cache's resource tree
    /// reads them: the tree's kinds and every object naming an owner whole, the others as
    /// stubs of their kind, namespace and name (`KindCache::tree_values`).
    pub fn tree_objects(&self) -> Vec<std::sync::Arc<serde_json::Value>> {
        let caches: Vec<_> = lock(&self.caches).values().cloned().collect();
        caches.iter().flat_map(|c| c.tree_values()).collect()
    }

    /// How many kinds are watched (for apps' resources, the tree, or orphaned resources).
    pub fn watched_kinds(&self) -> usize {
        let mut kinds: std::collections::HashSet<(String, String)> =
            lock(&self.caches).keys().cloned().collect();
        kinds.extend(self.orphan_watched_kinds());
        kinds.len()
    }

    /// Starts watching `info`'s kind, if it is not watched yet, inside the cluster's scope
    /// and not excluded, without waiting for its first list (a warm-up); false if out of
    /// scope or excluded.
    pub fn start_watch(&self, info: &KindInfo) -> bool {
        if self.is_excluded(info) {
            return false;
        }
        if !info.namespaced
            && self
                .check_managed(&info.resource.kind, "", "(any)")
                .is_err()
        {
            return false;
        }
        self.cache(info);
        true
    }

    /// The kind's cache, started if it is not yet, and reaching every namespace it is
    /// wanted in (`reach.rs`): a cache watching namespaces one by one gets a watch in
    /// each new one, or is replaced by a cluster-wide one once it is wanted everywhere.
    fn cache(&self, info: &KindInfo) -> Arc<KindCache> {
        let key = (info.resource.group.clone(), info.resource.kind.clone());
        let wanted = self.wanted_namespaces(info);
        let mut caches = lock(&self.caches);
        if let Some(cache) = caches.get(&key) {
            match &wanted {
                None if cache.is_cluster_wide() => return cache.clone(),
                Some(namespaces) if !cache.is_cluster_wide() => {
                    cache.reach(namespaces);
                    return cache.clone();
                }
                // Cluster-wide where namespaces are wanted now (started by a refresh
                // whose needs a change of reach dropped), or the reverse: replaced.
                _ => {}
            }
        }
        let cache = Arc::new(KindCache::start(
            &self.watch_context(&info.resource.group, &info.resource.kind),
            &info.resource,
            wanted.as_deref(),
        ));
        caches.insert(key, cache.clone());
        cache
    }

    /// What a new watch of this cluster's `group`/`kind` shares with the others (its watch
    /// events counted with the kind's other watches).
    pub(super) fn watch_context(&self, group: &str, kind: &str) -> WatchContext {
        WatchContext {
            client: self.client.clone(),
            watch_timeout_secs: u32::try_from(self.options.watch_timeout.as_secs())
                .unwrap_or(u32::MAX)
                .max(1),
            heard: self.heard.clone(),
            label_key: self.label_key.clone(),
            relist_every: self.options.relist_every,
            listener: self.listener.clone(),
            lists: self.lists.clone(),
            kept: self.kept_managers.clone(),
            update_filter: self.update_filter.clone(),
            events: self.observed.events_of(group, kind),
            keep_parsed: super::TREE_KINDS.iter().any(|(api_version, k)| {
                *k == kind && api_version.rsplit_once('/').map_or("", |(g, _)| g) == group
            }),
        }
    }

    /// The cache of `group`/`kind`, if the cluster's caches watch it.
    pub(super) fn watched_cache(&self, group: &str, kind: &str) -> Option<Arc<KindCache>> {
        lock(&self.caches)
            .get(&(group.to_owned(), kind.to_owned()))
            .cloned()
    }

    /// The cache of `key`'s kind, if it is watched.
    fn cache_of(&self, key: &ResourceKey) -> Option<Arc<KindCache>> {
        lock(&self.caches)
            .get(&(key.group.clone(), key.kind.clone()))
            .cloned()
    }

    /// Records an object this replica just wrote (read-your-writes for the next refresh).
    pub(crate) fn observe(&self, key: &ResourceKey, object: Value) {
        if let Some(cache) = self.cache_of(key) {
            cache.observe((key.namespace.clone(), key.name.clone()), object);
        }
    }

    /// Forgets an object this replica just deleted.
    pub(crate) fn forget(&self, key: &ResourceKey) {
        if let Some(cache) = self.cache_of(key) {
            cache.forget(&(key.namespace.clone(), key.name.clone()));
        }
    }

    /// Whether argocd-cm's resource filter excludes `info`'s kind on this cluster.
    pub fn is_excluded(&self, info: &KindInfo) -> bool {
        let (group, kind) = (&info.resource.group, &info.resource.kind);
        lock(&self.resource_filter).is_excluded(group, kind, &self.access.server)
    }

    /// Installs argocd-cm's resource filter: the caches of kinds it excludes on this
    /// cluster are dropped (their watches end), and such kinds are not watched again.
    pub fn set_resource_filter(&self, filter: Arc<ResourceFilter>) {
        let server = &self.access.server;
        lock(&self.caches).retain(|(group, kind), _| !filter.is_excluded(group, kind, server));
        *lock(&self.resource_filter) = filter;
    }

    /// Installs the filter of the live changes that do not refresh their application
    /// (`None`: every change does), for the caches running and those started later.
    pub fn set_update_filter(&self, filter: Option<Arc<UpdateFilter>>) {
        *lock(&self.update_filter) = filter;
    }
}

impl ClusterConn {
    /// How long ago the oldest of this cluster's last complete lists ended (every kind
    /// watched): the cache holds everything at least that current. `None` before every
    /// kind's first list. Kept at most [`LiveOptions::relist_every`] plus one list while
    /// lists succeed.
    pub fn cache_age(&self) -> Option<Duration> {
        let caches: Vec<_> = lock(&self.caches).values().cloned().collect();
        let mut oldest: Option<Instant> = None;
        for cache in caches {
            let at = cache.listed_at()?;
            oldest = Some(oldest.map_or(at, |o| o.min(at)));
        }
        oldest.map(|at| at.elapsed())
    }

    /// How many objects this cluster's caches hold (every watched kind).
    pub fn cached_objects(&self) -> usize {
        let caches: Vec<_> = lock(&self.caches).values().cloned().collect();
        caches.iter().map(|c| c.len()).sum::<usize>() + self.orphan_cached_objects()
    }

    /// The cached objects of the watched kinds that `desired` names or that `tracking`
    /// says are `app_name`'s, shared with the cache (not copied).
    pub fn live_objects(
        &self,
        app_name: &str,
        desired: &HashSet<ResourceKey>,
        tracking: &Tracking,
    ) -> Vec<Arc<Value>> {
        let caches: Vec<_> = lock(&self.caches)
            .iter()
            .map(|(k, c)| (k.clone(), c.clone()))
            .collect();
        let mut out = Vec::new();
        for ((group, kind), cache) in caches {
            // The desired objects of this kind, by key; the tracked ones come from the
            // cache's index by app (no scan of the cluster's objects).
            let keys: Vec<(String, String)> = desired
                .iter()
                .filter(|k| k.group == group && k.kind == kind)
                .map(|k| (k.namespace.clone(), k.name.clone()))
                .collect();
            let mut probe = ResourceKey::new(&group, &kind, "", "");
            for ((ns, name), obj) in cache.of_app(app_name, &keys) {
                probe.namespace = ns;
                probe.name = name;
                if desired.contains(&probe) || tracking.is_tracked_by(&obj, app_name) {
                    out.push(obj);
                }
            }
        }
        out
    }
}
