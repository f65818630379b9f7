//! A cluster's kinds: discovery (cached per cluster) and the watch-backed cache of each
//! kind its applications deploy.

use std::sync::Arc;

use kube::api::GroupVersionKind;
use kube::discovery::Scope;

use super::cache::{KindCache, WatchContext};
use super::{ClusterConn, KindInfo, LiveError, lock};

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
    /// cluster without `clusterResources` is [`LiveError::NotManaged`], and not watched.
    pub async fn watch_kinds(&self, kinds: &[KindInfo]) -> Result<(), LiveError> {
        for info in kinds.iter().filter(|i| !i.namespaced) {
            self.check_managed(&info.resource.kind, "", "(any)")?;
        }
        let caches: Vec<_> = kinds.iter().map(|info| (info, self.cache(info))).collect();
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

    /// Every object the cluster's caches hold (shared with the caches, not copied).
    pub fn cached_values(&self) -> Vec<std::sync::Arc<serde_json::Value>> {
        let caches: Vec<_> = lock(&self.caches).values().cloned().collect();
        caches.iter().flat_map(|c| c.values()).collect()
    }

    /// How many kinds are watched.
    pub fn watched_kinds(&self) -> usize {
        lock(&self.caches).len()
    }

    /// Starts watching `info`'s kind, if it is not watched yet and inside the cluster's
    /// scope, without waiting for its first list (a warm-up); false if out of scope.
    pub fn start_watch(&self, info: &KindInfo) -> bool {
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

    fn cache(&self, info: &KindInfo) -> Arc<KindCache> {
        let key = (info.resource.group.clone(), info.resource.kind.clone());
        let mut caches = lock(&self.caches);
        caches
            .entry(key)
            .or_insert_with(|| {
                let ctx = WatchContext {
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
                };
                let namespaces = self.scope().watched_namespaces(info.namespaced);
                Arc::new(KindCache::start(&ctx, &info.resource, namespaces))
            })
            .clone()
    }
}
