//! The objects of a destination namespace, for the orphaned resources of the apps whose
//! AppProject sets `orphanedResources`: every namespaced kind the cluster serves that can
//! be listed and watched (discovery, [`ServedVersions::namespaced_kinds`]), not excluded
//! by argocd-cm. A kind the cluster's caches already watch is read from them; any other
//! is watched in that namespace only, from the first app that looks there until the last
//! stops looking ([`ClusterConn::stop_looking`]) or the cluster stops. Nothing is listed
//! or watched for a namespace no app looks in.
//!
//! **API cost**, per cluster and namespace looked in: one list and one open watch per
//! namespaced kind not otherwise watched (a relist every `relist_every`, as the other
//! caches); discovery is the one already made for rendering ([`VERSIONS_TTL`]).
//!
//! [`ServedVersions::namespaced_kinds`]: super::ServedVersions::namespaced_kinds
//! [`VERSIONS_TTL`]: super::VERSIONS_TTL

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::Value;
use tokio::time::Instant;

use super::cache::KindCache;
use super::{ClusterConn, ClusterConnections, LiveError, lock};

/// The namespaces looked in for orphans on one cluster, and their own watches.
#[derive(Default)]
pub(crate) struct OrphanWatch {
    /// Namespace → the apps (instance names) that look in it.
    looking: HashMap<String, HashSet<String>>,
    /// (namespace, group, kind) → the watch of a kind the cluster's caches do not hold.
    caches: HashMap<(String, String, String), Arc<KindCache>>,
}

impl OrphanWatch {
    /// `app` looks in `namespace` (`None`: nowhere); drops the watches of namespaces no
    /// app looks in any more.
    fn set_looking(&mut self, app: &str, namespace: Option<&str>) {
        for (ns, apps) in &mut self.looking {
            if Some(ns.as_str()) != namespace {
                apps.remove(app);
            }
        }
        if let Some(ns) = namespace {
            self.looking
                .entry(ns.to_owned())
                .or_default()
                .insert(app.to_owned());
        }
        self.looking.retain(|_, apps| !apps.is_empty());
        let looking = &self.looking;
        self.caches.retain(|(ns, _, _), _| looking.contains_key(ns));
    }
}

/// What [`ClusterConn::namespace_objects`] found.
#[derive(Debug, Default)]
pub struct NamespaceObjects {
    /// The cached objects of the namespace (shared with the caches, not copied).
    pub objects: Vec<Arc<Value>>,
    /// The kinds whose first list has not completed (left out), as `group/kind: why`.
    pub unlisted: Vec<String>,
}

impl ClusterConn {
    /// Every object in `namespace` of the namespaced kinds the cluster serves, for the
    /// orphaned resources of `app` (its instance name), which looks there from now on.
    /// Kinds not watched yet are watched in this namespace, and their first lists waited
    /// for up to [`LiveOptions::sync_timeout`](super::LiveOptions) in all; a kind whose
    /// list has not completed then is left out and named in
    /// [`NamespaceObjects::unlisted`]. A namespace outside a namespace-scoped cluster's
    /// `namespaces` holds nothing fleetshard may see.
    pub async fn namespace_objects(
        &self,
        app: &str,
        namespace: &str,
    ) -> Result<NamespaceObjects, LiveError> {
        self.set_looking(app, Some(namespace));
        if self
            .scope()
            .refusal("ConfigMap", namespace, "(any)")
            .is_some()
        {
            return Ok(NamespaceObjects::default());
        }
        let served = self.served_versions().await?;
        let mut sources = Vec::new();
        {
            let mut watch = lock(&self.orphan_watch);
            for info in &served.namespaced_kinds {
                let (group, kind) = (&info.resource.group, &info.resource.kind);
                let key = (namespace.to_owned(), group.clone(), kind.clone());
                if self.is_excluded(info) {
                    watch.caches.remove(&key);
                    continue;
                }
                if let Some(cache) = self
                    .watched_cache(group, kind)
                    .filter(|c| c.covers(namespace))
                {
                    // Watched for an app's resources (cluster-wide, or in the scope's
                    // namespaces): a watch of its own is not needed any more.
                    watch.caches.remove(&key);
                    sources.push((format!("{group}/{kind}"), cache, true));
                    continue;
                }
                let cache = watch
                    .caches
                    .entry(key)
                    .or_insert_with(|| {
                        Arc::new(KindCache::start(
                            &self.watch_context(group, kind),
                            &info.resource,
                            Some(&[namespace.to_owned()]),
                        ))
                    })
                    .clone();
                sources.push((format!("{group}/{kind}"), cache, false));
            }
        }
        let deadline = Instant::now() + self.options.sync_timeout;
        let mut found = NamespaceObjects::default();
        for (kind, cache, shared) in sources {
            let left = deadline.saturating_duration_since(Instant::now());
            if let Err(why) = cache.wait_ready(left).await {
                found.unlisted.push(format!("{kind}: {why}"));
                continue;
            }
            // A cache shared with the apps' resources holds other namespaces too.
            found
                .objects
                .extend(cache.values_in(shared.then_some(namespace)));
        }
        Ok(found)
    }

    /// `app` (its instance name) no longer looks for orphaned resources: the watches of
    /// namespaces no app looks in any more end.
    pub fn stop_looking(&self, app: &str) {
        self.set_looking(app, None);
    }

    /// [`OrphanWatch::set_looking`], and whether any app still looks on this cluster.
    fn set_looking(&self, app: &str, namespace: Option<&str>) {
        let mut watch = lock(&self.orphan_watch);
        watch.set_looking(app, namespace);
        self.orphans_looked_for
            .store(!watch.looking.is_empty(), Ordering::Release);
    }

    /// How many kinds are watched for orphaned resources only, counted once per
    /// namespace they are watched in.
    pub fn orphan_watches(&self) -> usize {
        lock(&self.orphan_watch).caches.len()
    }

    /// The (group, kind) of the kinds watched for orphaned resources only.
    pub(super) fn orphan_watched_kinds(&self) -> Vec<(String, String)> {
        let watch = lock(&self.orphan_watch);
        watch
            .caches
            .keys()
            .map(|(_, group, kind)| (group.clone(), kind.clone()))
            .collect()
    }

    /// How many objects the watches for orphaned resources hold.
    pub(super) fn orphan_cached_objects(&self) -> usize {
        self.orphan_caches().iter().map(|c| c.len()).sum()
    }

    /// The caches of the watches for orphaned resources.
    pub(super) fn orphan_caches(&self) -> Vec<Arc<KindCache>> {
        lock(&self.orphan_watch).caches.values().cloned().collect()
    }
}

impl ClusterConnections {
    /// `app` (its instance name) no longer looks for orphaned resources on any started
    /// cluster but `except` (its destination now, if it still looks): an app deleted,
    /// or moved to another cluster, leaves no watch behind.
    pub fn stop_looking(&self, app: &str, except: Option<&str>) {
        // Only the clusters some app looks on, the flag read first: every refresh calls
        // this, and a replica has a thousand clusters, most looked on by none (comparing
        // every cluster's id with `except` was most of this call's cost).
        let conns: Vec<_> = lock(&self.clusters)
            .iter()
            .filter(|(id, c)| {
                c.orphans_looked_for.load(Ordering::Acquire) && Some(id.as_str()) != except
            })
            .map(|(_, c)| c.clone())
            .collect();
        for conn in conns {
            conn.stop_looking(app);
        }
    }
}
