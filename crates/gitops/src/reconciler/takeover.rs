//! What the reconciler does as ownership of a cluster comes and goes.
//!
//! - Acquired ([`GitOpsReconciler::cluster_acquired`]): the cluster's warm-up starts at
//!   once, beside the refreshes the controller queues: connect, then place the objects of
//!   every app no refresh has reached yet (rendering it as its refresh would; the rendered
//!   manifests are cached for that refresh) and start watching each kind the moment an
//!   app names it, so the kinds' first lists run in parallel with the renders and with
//!   each other (within [`LiveOptions::list_concurrency`](crate::live::LiveOptions)) —
//!   before any refresh waits for them. Only the kinds the
//!   cluster's apps use are watched; an app the refresh would refuse (a refused object, a
//!   kind or namespace outside its project or the cluster's scope, a refused spec or
//!   repository) contributes none. A warm-up that fails is only logged: the refreshes
//!   report the cluster's problems on the apps.
//! - Stopped ([`GitOpsStopHook`]): the controller's work on the cluster ends, then the
//!   warm-up (ended and awaited), then the connection and caches are dropped, so caches
//!   exist exactly while the cluster is owned.

use std::collections::HashMap;
use std::sync::{Arc, MutexGuard, PoisonError};

use fleetshard_controller::AppKey;
use fleetshard_coord::runner::StopHook;
use futures::future::BoxFuture;
use tokio::task::JoinHandle;

use super::{GitOpsReconciler, place, units};
use crate::live::{ClusterConn, KindInfo, LiveError};
use crate::source::Refresh;

/// What a warm-up did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Warmup {
    /// The cluster's apps whose objects the warm-up placed (those no refresh had
    /// reached first: a refresh watches its app's kinds itself).
    pub apps: usize,
    /// The kinds watched, as (group, kind), in the order they were started.
    pub kinds: Vec<(String, String)>,
}

impl GitOpsReconciler {
    /// This replica acquired `cluster`: starts its warm-up (see the module's
    /// documentation) unless `still_owned` says it was stopped meanwhile. `still_owned`
    /// is asked under the lock [`GitOpsStopHook`] takes after the controller's work
    /// stopped, so a warm-up is never left running on a cluster no longer owned.
    pub fn cluster_acquired(self: &Arc<Self>, cluster: &str, still_owned: &dyn Fn() -> bool) {
        // One pass over the inventory for the acquisition's clock and its warm-up, made
        // before the warm-ups' lock is taken.
        let id = fleetshard_core::placement::slices::UnitId::parse(cluster).cluster;
        let mut apps = self.inventory.apps_of_cluster(id);
        apps.retain(|a| units::unit_holds(cluster, id, a));
        let mut warming = self.warmups();
        if !still_owned() {
            return;
        }
        self.units.started(cluster);
        self.owned_since(cluster);
        self.acquisitions.started(cluster, &apps);
        let this = self.clone();
        let id = cluster.to_owned();
        let task = tokio::spawn(async move {
            match this.warm_apps(&id, apps).await {
                Ok(w) => {
                    tracing::debug!(cluster = %id, apps = w.apps, kinds = w.kinds.len(), "cluster warmed up")
                }
                Err(e) => tracing::debug!(cluster = %id, "warm-up stopped: {e}"),
            }
        });
        if let Some(old) = warming.insert(cluster.to_owned(), task) {
            old.abort();
        }
    }

    /// Warms `cluster` now (see the module's documentation) and returns once every kind
    /// it started has completed its first list.
    pub async fn warm_cluster(&self, cluster: &str) -> Result<Warmup, LiveError> {
        self.warm_apps(cluster, self.inventory.apps_of_cluster(cluster))
            .await
    }

    /// [`GitOpsReconciler::warm_cluster`] with the unit's `apps` already listed (`unit`:
    /// the cluster, or the slice of it acquired).
    async fn warm_apps(&self, unit: &str, apps: Vec<AppKey>) -> Result<Warmup, LiveError> {
        let cluster = unit;
        let Some(access) = apps
            .iter()
            .find_map(|k| self.inventory.target(k))
            .map(|t| t.cluster)
        else {
            return Ok(Warmup::default());
        };
        let conn = self.clusters.start(&access).await?;
        conn.check_reachable().await?;
        self.acquisitions.reached(cluster, "connect");
        conn.recognise_control_plane().await;
        let mut warm = Warmup::default();
        let mut started: Vec<KindInfo> = Vec::new();
        for key in &apps {
            if let Some(kinds) = self.kinds_of(&conn, key).await {
                warm.apps += 1;
                for kind in kinds {
                    if !started.contains(&kind) && conn.start_watch(&kind) {
                        let r = &kind.resource;
                        warm.kinds.push((r.group.clone(), r.kind.clone()));
                        started.push(kind);
                    }
                }
            }
        }
        self.acquisitions.reached(cluster, "render");
        conn.watch_kinds(&started).await?;
        self.acquisitions.reached(cluster, "list");
        // The new owner's cluster info (its apps' trees follow their refreshes).
        self.write_cluster_info(&conn, &access.server, Ok(())).await;
        Ok(warm)
    }

    /// The kinds of the app's objects, if its refresh would read them (`None`: the app
    /// is refused, not on this cluster any more, or a refresh reached it first).
    async fn kinds_of(&self, conn: &ClusterConn, key: &AppKey) -> Option<Vec<KindInfo>> {
        // A refresh got there first: it watches the app's kinds itself.
        if self.memos().contains_key(key) {
            return None;
        }
        let target = self.inventory.target(key)?;
        if target.cluster.id != conn.cluster_id() {
            return None;
        }
        // The refresh's own order: nothing is fetched for a refused spec or repository.
        self.check_refusals(key, &target).ok()?;
        self.check_project(&target).ok()?;
        let dest_ns = place::destination_namespace(&target);
        let app_name = self.instance_name(key);
        let rendered = self
            .render_source(
                &target,
                &dest_ns,
                &app_name,
                Refresh::ResolvedSince(self.owned_since(&self.unit_of(key, &target.cluster.id))),
            )
            .await
            .ok()?;
        let objects = &rendered.rendered.manifests.objects;
        // Kinds argocd-cm excludes are not warmed up (the connection skips them).
        if let Ok(settings) = self.customizations.settings(&target.argocd_cm) {
            conn.set_resource_filter(Arc::new(settings.customizations.resource_filter.clone()));
        }
        let defined = place::defined_kinds(objects);
        let mut kinds = Vec::new();
        let mut placed = Vec::with_capacity(objects.len());
        for m in objects {
            let p = self
                .place(conn, &target, m, &dest_ns, &defined)
                .await
                .ok()?;
            if p.served && !kinds.contains(&p.kind) {
                kinds.push(p.kind.clone());
            }
            placed.push(p);
        }
        self.reach(conn, &target.cluster.id, &dest_ns, &kinds, &placed);
        Some(kinds)
    }

    /// The clusters whose warm-up is running, sorted.
    pub fn warming(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .warmups()
            .iter()
            .filter(|(_, task)| !task.is_finished())
            .map(|(id, _)| id.clone())
            .collect();
        ids.sort();
        ids
    }

    /// Ends the cluster's warm-up, if one runs, and waits until it has.
    pub async fn stop_warmup(&self, cluster: &str) {
        let task = self.warmups().remove(cluster);
        if let Some(task) = task {
            task.abort();
            let _ = task.await;
        }
    }

    /// The warm-ups running, by cluster.
    pub(super) fn warmups(&self) -> MutexGuard<'_, HashMap<String, JoinHandle<()>>> {
        // One map operation per critical section: a poisoned lock is still consistent.
        self.warming.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Stops a cluster in the controller (the inner hook, e.g. the shard filter's, which
/// returns once none of its work is in flight), then its warm-up, and then drops the
/// reconciler's connection and caches of it, so caches live exactly while the cluster is
/// owned.
pub struct GitOpsStopHook {
    /// The controller's hook.
    pub inner: Arc<dyn StopHook>,
    /// The reconciler whose caches follow ownership.
    pub reconciler: Arc<GitOpsReconciler>,
}

impl StopHook for GitOpsStopHook {
    fn stop(&self, cluster: String) -> BoxFuture<'static, ()> {
        let inner = self.inner.stop(cluster.clone());
        let reconciler = self.reconciler.clone();
        Box::pin(async move {
            inner.await;
            reconciler.stop_warmup(&cluster).await;
            reconciler.stop_cluster(&cluster);
        })
    }
}
