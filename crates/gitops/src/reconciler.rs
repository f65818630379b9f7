//! [`GitOpsReconciler`]: the controller's [`Reconciler`] for GitOps apps.
//!
//! - `refresh(app)`: desired objects from Git ([`RepoCache`]), live objects from the
//!   destination ([`ClusterConnections`]), [`compare_app`], per-resource [`assess`] and
//!   [`app_health`] → a [`ComparisonStatus`] recorded through the [`StatusSink`]. A broken
//!   app is not an error of the replica: the problem is written on the app's status
//!   (`sync.status: Unknown`, a `ComparisonError` condition) and the refresh returns
//!   `Ok` when only a change to the app or its repository can fix it (a bad manifest, a
//!   missing path), `RetryLater` when waiting may (an unreachable cluster or repository, a
//!   revision not there yet, a kind the cluster does not serve yet), so the queue backs
//!   off.
//! - `operate(app)`: with `syncPolicy.automated`, when the last refresh found something to
//!   do — a resource OutOfSync, or to prune with `prune: true` — and either the commit was
//!   not synced successfully before or `selfHeal` is on, server-side apply (+ prune)
//!   ([`apply::sync`](crate::apply::sync)) → `Finished` (the controller refreshes again). Without `selfHeal`,
//!   drift after a successful sync of the same commit is left (OutOfSync), as Argo CD. A
//!   sync with failed resources is recorded (`Failed`) and returns `RetryLater`, so it is
//!   retried with backoff.
//!
//! One operation at a time per app: the controller's operation queue never hands an item
//! to two workers at once (client-go's processing set), and this type keeps no operation
//! state that another app's operation could touch. A refresh of the app may run beside its
//! operation (another queue); it only reads the cluster.
//!
//! Before every write — to the destination cluster and to the status — the lease check is
//! asked; once it says no, the work stops and returns `RetryLater`.
//!
//! Which commit was last synced is remembered per app, and read once from the recorded
//! `operationState` when an app is first operated on (after a restart or a move), so a
//! new owner leaves drift alone without `selfHeal` as the previous one did.
//!
//! Consecutive self-heals of one commit back off as Argo CD's do
//! ([`SelfHealBackoff`]: 2 s, ×3, at most 300 s; `Operated::Wait`).
//!
//! Limits: `ignoreDifferences`, sync waves and hooks and retry policies are not
//! implemented.

mod customize;
mod guard;
mod inventory;
mod memo;
mod operate;
mod place;
mod problem;
mod project;
mod render;
mod self_heal;
mod status;
mod store_sink;
mod takeover;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use fleetshard_controller::{AppKey, Operated, ReconcileError, Reconciler};
use serde_json::Value;

use crate::apply::{DesiredObject, LeaseCheck, PruneTarget, handover_patch};
use crate::compare::{CompareOptions, ResourceKey, SyncStatus, Tracking, compare_app_normalized};
use crate::health::app_health;
use crate::live::{ClusterConnections, KindInfo};
use crate::source::{Refresh, Render, RepoCache, StandaloneRenderer};
use fleetshard_manifest::project::WindowVerdict;
use fleetshard_manifest::{RefreshRequest, RefusalKind};
use memo::{Memo, Refreshed};
use problem::{COMPARISON_ERROR, Problem};

pub use inventory::{AppTarget, Clock, FixedClock, Inventory, InventoryTargets, StaticInventory};
pub use self_heal::SelfHealBackoff;
pub use status::{
    AppStatus, ComparisonStatus, Condition, HealthInfo, Initiator, KubeStatusSink, MemorySink,
    OperationRecord, OperationState, ResourceEntry, SinkError, StatusSink, StatusUpdate, SyncInfo,
    SyncOperation, SyncOperationResource, SyncResult, SyncResultEntry,
};
pub use store_sink::{
    DEFAULT_HEARTBEAT, RecordError, StoreStatusSink, StoredAppStatus, StoredStatusEntry,
    read_statuses, status_key, status_prefix,
};
pub use takeover::{GitOpsStopHook, Warmup};

/// Settings of the reconciler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReconcilerConfig {
    /// Argo CD's control-plane namespace: apps there are tracked by their name alone,
    /// apps elsewhere by `namespace_name` (Argo CD's instance name).
    pub control_plane_namespace: String,
    /// How consecutive self-heals of one commit back off.
    pub self_heal_backoff: SelfHealBackoff,
}

impl ReconcilerConfig {
    /// The name an app's tracking annotations carry: `name` in the control-plane
    /// namespace, `namespace_name` elsewhere (Argo CD's instance name).
    pub fn instance_name(&self, key: &AppKey) -> String {
        let (ns, name) = key.parts();
        if ns.is_empty() || ns == self.control_plane_namespace {
            name.to_owned()
        } else {
            format!("{ns}_{name}")
        }
    }

    /// The apps a tracking annotation's instance name may stand for: the inverse of
    /// [`ReconcilerConfig::instance_name`]. A namespace has no `_`, so `x_y` is app `y` of
    /// namespace `x` — or app `x_y` of the control-plane namespace: Argo CD's format does
    /// not tell, so both are returned (a key that names no app is ignored by its users).
    pub fn apps_of_instance(&self, instance: &str) -> Vec<AppKey> {
        let own = AppKey::new(&self.control_plane_namespace, instance);
        match instance.split_once('_') {
            Some((ns, name)) if ns != self.control_plane_namespace => {
                vec![AppKey::new(ns, name), own]
            }
            _ => vec![own],
        }
    }
}

impl Default for ReconcilerConfig {
    fn default() -> Self {
        ReconcilerConfig {
            control_plane_namespace: "argocd".to_owned(),
            self_heal_backoff: SelfHealBackoff::default(),
        }
    }
}

/// The GitOps reconciler of one replica.
pub struct GitOpsReconciler {
    inventory: Arc<dyn Inventory>,
    renderer: Arc<dyn Render>,
    clusters: ClusterConnections,
    sink: Arc<dyn StatusSink>,
    lease: Arc<dyn LeaseCheck>,
    clock: Arc<dyn Clock>,
    config: ReconcilerConfig,
    apps: Mutex<HashMap<AppKey, Memo>>,
    /// The takeover warm-ups running, by cluster (`takeover.rs`).
    warming: Mutex<HashMap<String, tokio::task::JoinHandle<()>>>,
    /// argocd-cm's resource customizations, compiled (`customize.rs`).
    customizations: customize::Customizations,
}

impl GitOpsReconciler {
    /// A reconciler reading apps from `inventory`, manifests through `repos` (rendered
    /// by a [`StandaloneRenderer`] with the default settings; see
    /// [`GitOpsReconciler::with_renderer`]), live state through `clusters`, recording
    /// statuses in `sink`, writing only while `lease` says so, with timestamps from
    /// `clock`.
    pub fn new(
        inventory: Arc<dyn Inventory>,
        repos: RepoCache,
        clusters: ClusterConnections,
        sink: Arc<dyn StatusSink>,
        lease: Arc<dyn LeaseCheck>,
        clock: Arc<dyn Clock>,
        config: ReconcilerConfig,
    ) -> Self {
        GitOpsReconciler {
            inventory,
            renderer: Arc::new(StandaloneRenderer::new(repos, Default::default())),
            clusters,
            sink,
            lease,
            clock,
            config,
            apps: Mutex::new(HashMap::new()),
            warming: Mutex::new(HashMap::new()),
            customizations: customize::Customizations::new(None, Default::default()),
        }
    }

    /// The same reconciler taking health scripts from `dir` (Argo CD's
    /// `resource_customizations` layout), after argocd-cm's and before the built-in checks.
    #[must_use]
    pub fn with_health_scripts(mut self, dir: Arc<fleetshard_health::ScriptDir>) -> Self {
        self.customizations = customize::Customizations::new(Some(dir), Default::default());
        self
    }

    /// The same reconciler rendering sources with `renderer`.
    #[must_use]
    pub fn with_renderer(mut self, renderer: Arc<dyn Render>) -> Self {
        self.renderer = renderer;
        self
    }

    /// The cluster connections (started by a cluster's warm-up or the first refresh of an
    /// app there).
    pub fn clusters(&self) -> &ClusterConnections {
        &self.clusters
    }

    /// Drops the cluster's connection and caches and what was remembered of its apps.
    /// Call it once no work of the cluster is in flight ([`GitOpsStopHook`] does).
    pub fn stop_cluster(&self, id: &str) {
        if let Some(warmup) = self.warmups().remove(id) {
            warmup.abort();
        }
        self.clusters.stop(id);
        self.memos().retain(|_, m| m.cluster != id);
    }

    /// The name the app's tracking annotations carry.
    pub fn instance_name(&self, key: &AppKey) -> String {
        self.config.instance_name(key)
    }

    fn memos(&self) -> MutexGuard<'_, HashMap<AppKey, Memo>> {
        // Each critical section is one map operation: a poisoned lock is still consistent.
        self.apps.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes `update`. An operation's state that could not be written is kept, if the
    /// operation has ended, and written again first by the app's next refresh or operation
    /// ([`GitOpsReconciler::record_unrecorded`]); any operation state written replaces it.
    async fn record(&self, app: &AppKey, update: StatusUpdate) -> Result<(), ReconcileError> {
        let written = if self.lease.lease_valid() {
            match self.sink.write(app, &update).await {
                // The Application was deleted: nothing to record; the inventory drops it.
                Ok(()) | Err(SinkError::NotFound(_)) => Ok(()),
                Err(e) => Err(ReconcileError::RetryLater(e.to_string())),
            }
        } else {
            Err(ReconcileError::RetryLater("the shard lease lapsed".into()))
        };
        if let StatusUpdate::Operation(state) = &update
            && let Some(m) = self.memos().get_mut(app)
        {
            m.unrecorded = match &written {
                Ok(()) => None,
                Err(_) if state.phase != "Running" => Some(state.clone()),
                Err(_) => m.unrecorded.take(),
            };
        }
        written
    }

    /// Writes the ended operation whose record failed, if any (see [`Memo::unrecorded`]).
    async fn record_unrecorded(&self, app: &AppKey) -> Result<(), ReconcileError> {
        let unrecorded = self.memos().get(app).and_then(|m| m.unrecorded.clone());
        match unrecorded {
            Some(state) => self.record(app, StatusUpdate::Operation(state)).await,
            None => Ok(()),
        }
    }

    /// Reads desired and live state and compares them.
    async fn compare(
        &self,
        key: &AppKey,
        target: &AppTarget,
        refresh: Refresh,
    ) -> Result<(Refreshed, ComparisonStatus), Problem> {
        self.check_refusals(key, target)?;
        // Before anything is read: a repository the project does not permit is not fetched.
        self.check_project(target)?;
        let dest_ns = place::destination_namespace(target);
        let app_name = self.instance_name(key);
        let render::RenderedApp {
            rendered,
            sources: per_source,
        } = self
            .render_source(target, &dest_ns, &app_name, refresh)
            .await?;
        let manifests = &rendered.manifests;
        let revision = Some(manifests.commit.clone());
        let with_rev = |mut p: Problem| {
            p.revision.clone_from(&revision);
            p
        };
        // How this Argo CD instance tracks objects (argocd-cm, followed live).
        let tracking = Tracking::from_argocd_cm(&target.argocd_cm);
        self.clusters.set_instance_label_key(&tracking.label_key);
        let comparison_error =
            |message: String| with_rev(Problem::permanent(COMPARISON_ERROR, message));
        let settings = self
            .customizations
            .settings(&target.argocd_cm)
            .map_err(comparison_error)?;
        let normalizer = settings
            .normalizer(&target.spec.ignore_differences)
            .map_err(comparison_error)?;
        let conn = self
            .clusters
            .start(&target.cluster)
            .await
            .map_err(|e| with_rev(e.into()))?;
        conn.check_reachable()
            .await
            .map_err(|e| with_rev(e.into()))?;
        // Each object's key and kind, and beside them its manifest (the comparison reads
        // the manifests as a slice; they move into `desired` afterwards, not copied).
        let mut placed: Vec<(ResourceKey, KindInfo)> = Vec::with_capacity(manifests.objects.len());
        let mut values: Vec<Value> = Vec::with_capacity(manifests.objects.len());
        let mut kinds: Vec<KindInfo> = Vec::new();
        for m in &manifests.objects {
            let p = self
                .place(&conn, target, m, &dest_ns)
                .await
                .map_err(&with_rev)?;
            if !kinds.contains(&p.kind) {
                kinds.push(p.kind.clone());
            }
            // Stamped as Argo CD stamps them (its repo-server already did for its renders):
            // compared and applied so.
            let mut object = p.object;
            tracking.stamp(&mut object, &app_name, &p.key);
            placed.push((p.key, p.kind));
            values.push(object);
        }
        conn.keep_managers(normalizer.trusted_managers());
        conn.watch_kinds(&kinds)
            .await
            .map_err(|e| with_rev(e.into()))?;
        let keys: HashSet<ResourceKey> = placed.iter().map(|(k, _)| k.clone()).collect();
        let live = conn.live_objects(&app_name, &keys, &tracking);
        let opts = CompareOptions::new(&app_name)
            .with_destination_namespace(&dest_ns)
            .with_tracking(tracking);
        let comparison = compare_app_normalized(&values, &live, &opts, &normalizer)
            .map_err(|e| comparison_error(format!("comparing {key}: {e}")))?;
        let live_by_key: HashMap<ResourceKey, &Value> = live
            .iter()
            .filter_map(|v| ResourceKey::of(v).ok().map(|k| (k, v.as_ref())))
            .collect();
        let desired_version: HashMap<&ResourceKey, &str> = placed
            .iter()
            .map(|(key, kind)| (key, kind.resource.version.as_str()))
            .collect();
        let mut healths = Vec::with_capacity(comparison.resources.len());
        let mut resources = Vec::with_capacity(comparison.resources.len());
        let mut prune = Vec::new();
        for r in &comparison.resources {
            let live = live_by_key.get(&r.key).copied();
            let (health, counted) = customize::resource_health(&settings.health, &r.key, live);
            let live_api = live
                .and_then(|v| v.get("apiVersion"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            let version = desired_version
                .get(&r.key)
                .copied()
                .unwrap_or_else(|| live_api.rsplit_once('/').map_or(live_api, |(_, v)| v));
            if r.requires_pruning {
                // Pruning is a write too: never outside the project.
                self.check_resource(target, &r.key).map_err(&with_rev)?;
                prune.push(PruneTarget {
                    key: r.key.clone(),
                    api_version: live_api.to_owned(),
                    keep: live.and_then(guard::keep_reason),
                });
            }
            resources.push(ResourceEntry {
                group: r.key.group.clone(),
                version: version.to_owned(),
                kind: r.key.kind.clone(),
                namespace: r.key.namespace.clone(),
                name: r.key.name.clone(),
                status: sync_word(r.status).to_owned(),
                health: health
                    .status()
                    .map_or_else(HealthInfo::default, |s| HealthInfo {
                        status: s.to_string(),
                        message: health.message.clone(),
                        last_transition_time: None,
                    }),
                requires_pruning: r.requires_pruning,
            });
            healths.push(counted);
        }
        let mut conditions = Vec::new();
        if let Some(auto) = target.spec.auto_sync
            && manifests.objects.is_empty()
            && !auto.allow_empty
            && !prune.is_empty()
        {
            conditions.push(Condition {
                kind: "SyncError".to_owned(),
                message: format!(
                    "automated sync refused: {} renders no objects and would prune every \
                     resource of the app; set spec.syncPolicy.automated.allowEmpty to allow it",
                    target.spec.source.path
                ),
                last_transition_time: self.clock.now_rfc3339(),
            });
        }
        let status = ComparisonStatus {
            sync: SyncInfo {
                status: sync_word(comparison.status).to_owned(),
                // A multi-source app's revisions are listed one per source.
                revision: revision.filter(|_| per_source.is_empty()),
                revisions: per_source.iter().map(|(r, _)| r.clone()).collect(),
            },
            health: HealthInfo {
                status: app_health(&healths).to_string(),
                message: String::new(),
                last_transition_time: None,
            },
            resources,
            reconciled_at: self.clock.now_rfc3339(),
            conditions,
            source_type: per_source
                .is_empty()
                .then(|| rendered.source_type.as_str().to_owned()),
            source_types: per_source
                .iter()
                .map(|(_, t)| t.as_str().to_owned())
                .collect(),
            refresh_done: false,
        };
        let respect = target.spec.respect_ignore_differences;
        let desired = placed
            .into_iter()
            .zip(values)
            .map(|((key, kind), object)| {
                let live = live_by_key.get(&key).copied();
                DesiredObject {
                    handover: live.and_then(handover_patch),
                    object: match live {
                        Some(live) if respect => {
                            normalizer.respect(key.object_ref(), &object, live)
                        }
                        _ => object,
                    },
                    key,
                    kind,
                }
            })
            .collect();
        let refreshed = Refreshed {
            commit: manifests.commit.clone(),
            revisions: per_source.iter().map(|(r, _)| r.clone()).collect(),
            cluster: target.cluster.id.clone(),
            desired,
            prune,
            comparison,
        };
        Ok((refreshed, status))
    }

    async fn do_refresh(&self, key: &AppKey) -> Result<(), ReconcileError> {
        let Some(target) = self.inventory.target(key) else {
            self.memos().remove(key);
            return Ok(());
        };
        self.record_unrecorded(key).await?;
        // A hard refresh asked for by the annotation is served once per request: the status
        // write removes the annotation (Kubernetes), but a fleet file keeps it, and a watch
        // may still show it on the next refresh.
        // As Argo CD: a refresh annotation, or the first comparison after the source
        // changed, resolves the revision again; a hard one renders again too.
        let source_now = serde_json::json!([
            target.spec.source.raw,
            target
                .spec
                .sources
                .iter()
                .map(|s| &s.raw)
                .collect::<Vec<_>>()
        ]);
        let refresh = {
            let mut memos = self.memos();
            let m = memos.entry(key.clone()).or_default();
            let asked = target.spec.refresh.filter(|_| !m.hard_refresh_served);
            m.hard_refresh_served = target.spec.refresh.is_some();
            let changed = m
                .compared_source
                .as_ref()
                .is_some_and(|before| *before != source_now);
            m.compared_source = Some(source_now);
            match asked {
                Some(RefreshRequest::Hard) => Refresh::Hard,
                Some(RefreshRequest::Normal) => Refresh::Resolve,
                None if changed => Refresh::Resolve,
                None => Refresh::Normal,
            }
        };
        let (last, mut status, problem) = match self.compare(key, &target, refresh).await {
            Ok((refreshed, status)) => (Some(Arc::new(refreshed)), status, None),
            Err(problem) => (
                None,
                problem.status(self.clock.now_rfc3339()),
                Some(problem),
            ),
        };
        let sync_error = {
            let mut memos = self.memos();
            let m = memos.entry(key.clone()).or_default();
            m.cluster.clone_from(&target.cluster.id);
            m.last = last;
            status.health.last_transition_time = memo::health_transition(
                &mut m.health_since,
                &status.health.status,
                &status.reconciled_at,
            );
            m.sync_error.clone()
        };
        status.refresh_done = target.spec.refresh.is_some();
        if let Some(message) = sync_error {
            status.conditions.push(Condition {
                kind: RefusalKind::Sync.condition_type().to_owned(),
                message,
                last_transition_time: status.reconciled_at.clone(),
            });
        }
        self.record(key, StatusUpdate::Comparison(status)).await?;
        match problem {
            Some(Problem {
                retry_after: Some(after),
                message,
                ..
            }) => Err(ReconcileError::RetryAfter {
                reason: message,
                after,
            }),
            _ => Ok(()),
        }
    }

    async fn do_operate(&self, key: &AppKey) -> Result<Operated, ReconcileError> {
        let Some(target) = self.inventory.target(key) else {
            return Ok(Operated::Idle);
        };
        self.record_unrecorded(key).await?;
        if let Some(done) = self.manual_sync(key, &target).await? {
            return Ok(done);
        }
        let Some(auto) = target.spec.auto_sync else {
            return Ok(Operated::Idle);
        };
        let (last, mut synced, recorded_read) = {
            let memos = self.memos();
            let Some(m) = memos.get(key) else {
                return Ok(Operated::Idle);
            };
            let Some(last) = m.last.clone() else {
                return Ok(Operated::Idle);
            };
            (last, m.synced.clone(), m.recorded_read)
        };
        if synced.is_none() && !recorded_read {
            synced = self.recorded_sync(key).await?;
            if let Some(m) = self.memos().get_mut(key) {
                m.recorded_read = true;
                m.synced.clone_from(&synced);
            }
        }
        // Never prune to an empty render unless allowed (refused with a SyncError
        // condition by the refresh); a protected object to prune is nothing to do.
        if last.desired.is_empty() && !auto.allow_empty {
            return Ok(Operated::Idle);
        }
        let protected: HashSet<&ResourceKey> = last
            .prune
            .iter()
            .filter(|p| p.keep.is_some())
            .map(|p| &p.key)
            .collect();
        let to_do = last.comparison.resources.iter().any(|r| {
            r.status == SyncStatus::OutOfSync
                && !r.extraneous_ignored
                && (!r.requires_pruning || (auto.prune && !protected.contains(&r.key)))
        });
        let already = synced.as_deref() == Some(last.commit.as_str());
        if !to_do || (already && !auto.self_heal) || last.cluster != target.cluster.id {
            return Ok(Operated::Idle);
        }
        if let WindowVerdict::Blocked(why) = self.window_verdict(&target, false) {
            // Tried again at the next refresh (events, the periodic resync).
            tracing::info!(app = %key, %why, "automated sync not run");
            return Ok(Operated::Idle);
        }
        // Healing drift of a commit already synced: consecutive heals back off.
        let healing = already;
        let now = tokio::time::Instant::now();
        if healing {
            let policy = self.config.self_heal_backoff;
            let wait = self
                .memos()
                .get_mut(key)
                .and_then(|m| m.heals.wait(&last.commit, now, &policy));
            if let Some(wait) = wait {
                return Ok(Operated::Wait(wait));
            }
        }
        let message = if healing {
            format!("self-heal: automated sync to {}", last.commit)
        } else {
            format!("automated sync to {}", last.commit)
        };
        let request = operate::Request::automated(auto.prune);
        match self.sync(key, &target, &last, &request, message).await? {
            Ok(()) => {
                if healing && let Some(m) = self.memos().get_mut(key) {
                    m.heals.healed(&last.commit, now);
                }
                Ok(Operated::Finished)
            }
            // Retried with backoff until it succeeds (Argo CD's automated retries).
            Err(failed) => Err(ReconcileError::RetryLater(failed)),
        }
    }
}

fn sync_word(s: SyncStatus) -> &'static str {
    match s {
        SyncStatus::Synced => "Synced",
        SyncStatus::OutOfSync => "OutOfSync",
    }
}

impl Reconciler for GitOpsReconciler {
    async fn refresh(&self, app: &AppKey) -> Result<(), ReconcileError> {
        self.do_refresh(app).await
    }

    async fn operate(&self, app: &AppKey) -> Result<Operated, ReconcileError> {
        self.do_operate(app).await
    }

    /// Starts the cluster's warm-up ([`GitOpsReconciler::cluster_acquired`]).
    fn cluster_started(self: &Arc<Self>, cluster: &str, still_owned: &dyn Fn() -> bool) {
        self.cluster_acquired(cluster, still_owned);
    }
}

#[cfg(test)]
mod tests;
