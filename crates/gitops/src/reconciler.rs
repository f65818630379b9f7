//! [`GitOpsReconciler`]: the controller's [`Reconciler`] for GitOps apps.
//!
//! - `refresh(app)`: desired objects from Git ([`RepoCache`]), live objects from the
//!   destination ([`ClusterConnections`]), compared without what `ignoreDifferences` and
//!   argocd-cm's customizations leave out ([`crate::compare::compare_app_normalized`]),
//!   each resource's health (built-in or Lua, `reconciler/customize.rs`) and the app's →
//!   a [`ComparisonStatus`] recorded through the [`StatusSink`]. A broken
//!   app is not an error of the replica: the problem is written on the app's status
//!   (`sync.status: Unknown`, a `ComparisonError` condition) and the refresh returns
//!   `Ok` when only a change to the app or its repository can fix it (a bad manifest, a
//!   missing path), `RetryLater` when waiting may (an unreachable cluster or repository, a
//!   revision not there yet, a kind the cluster does not serve yet), so the queue backs
//!   off.
//! - `operate(app)`: runs the app's operation, step by step, as Argo CD's controller
//!   does: a sync asked for by hand (`operation.sync`), or an automated sync when the last
//!   refresh found something to do and Argo CD's rules allow it (the same revision is not
//!   synced again after a success without `selfHeal`, nor retried past its retries after a
//!   failure); then each step of the operation in progress (`reconciler/operation.rs`):
//!   the sync engine ([`fleetshard_sync`]) fed with the desired objects at the operation's
//!   revision, the live ones and their health, its writes made here (lease checked before
//!   each), its record persisted as `operationState` — so a new owner resumes the
//!   operation from the Application alone. A step that waits (a hook, a wave's health, the
//!   wave delay) returns `Operated::Wait`; a finished operation `Finished` (the controller
//!   refreshes again). Failed operations are retried with Argo CD's backoff
//!   (`syncPolicy.retry`, 5 retries for automated syncs); a `Terminating` operation is
//!   terminated; a sync timeout terminates it too. A successful sync is added to
//!   `status.history`; an Application being deleted with a resources finalizer has its
//!   resources deleted, then the finalizer removed (`reconciler/lifecycle.rs`).
//!
//! One operation at a time per app: the controller's operation queue never hands an item
//! to two workers at once (client-go's processing set), and this type keeps no operation
//! state that another app's operation could touch. A refresh of the app may run beside its
//! operation (another queue); it only reads the cluster.
//!
//! Before every write — to the destination cluster and to the status — the lease check is
//! asked; once it says no, the work stops and returns `RetryLater`.
//!
//! The operation last recorded is read once per owner (after a restart or a move) from
//! the status sink, then kept in memory and written through; an operation in progress is
//! resumed from it.
//!
//! Consecutive self-heals of one commit back off as Argo CD's do
//! ([`SelfHealBackoff`]: 2 s, ×3, at most 300 s; `Operated::Wait`).

mod acquisition;
mod app_events;
mod app_state;
mod compared;
mod customize;
mod guard;
mod history;
mod inventory;
mod lifecycle;
mod memo;
mod operate;
mod operation;
mod orphans;
mod packed;
mod place;
mod problem;
mod project;
mod refresh;
mod render;
mod report;
mod role;
mod self_heal;
mod server_side;
mod status;
mod step;
mod store_sink;
mod takeover;
mod units;
mod unresolved;
mod usage;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use fleetshard_controller::{AppKey, Operated, ReconcileError, Reconciler};

use crate::apply::LeaseCheck;
use crate::compare::SyncStatus;
use crate::live::ClusterConnections;
use crate::source::{Render, RepoCache, StandaloneRenderer};
use memo::{KeptOperation, Memo, Refreshed};

pub use acquisition::PhaseHistogram;
pub use history::RevisionHistory;
pub use inventory::{
    AppTarget, Clock, FixedClock, Inventory, InventoryTargets, StaticInventory, UnresolvedTarget,
    unresolved_reason,
};
pub use lifecycle::DELETION_ERROR;
pub use orphans::ORPHANED_RESOURCE_WARNING;
pub use place::REPEATED_RESOURCE_WARNING;
pub use project::UNKNOWN_ERROR;
pub use report::{AppActivity, AppReport, RECONCILE_BUCKETS};
pub use self_heal::SelfHealBackoff;
pub use status::{
    AppStatus, BackoffRecord, ComparisonStatus, Condition, HealthInfo, Initiator, KubeStatusSink,
    MemorySink, OperationRecord, OperationState, Recorded, RecordedStatuses, ResourceEntry,
    RetryRecord, SinkError, StatusSink, StatusUpdate, SyncInfo, SyncOperation,
    SyncOperationResource, SyncResult, SyncResultEntry,
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
    /// fleetshard's own namespaces (the replica's, the coordination store's): guarded on
    /// the cluster fleetshard runs in as Argo CD's namespace is
    /// ([`fleetshard_manifest::project::ControlPlane`]).
    pub fleetshard_namespaces: Vec<String>,
    /// How consecutive self-heals of one commit back off.
    pub self_heal_backoff: SelfHealBackoff,
    /// Argo CD's delay after each wave of a sync but the last (`ARGOCD_SYNC_WAVE_DELAY`,
    /// 2 s): other controllers get a chance to act on what was applied before its health
    /// is judged.
    pub wave_delay: std::time::Duration,
    /// How long an operation in progress waits for a change before its next step anyway
    /// (Argo CD's 30 s; a change of one of the app's objects steps it at once).
    pub operation_poll: std::time::Duration,
    /// Argo CD's `controller.sync.timeout.seconds`: an operation running longer (as this
    /// replica counts it) is terminated. `None`: no timeout (Argo CD's default).
    pub sync_timeout: Option<std::time::Duration>,
    /// Argo CD's `timeout.hard.reconciliation`: an app refreshed hard (caches bypassed)
    /// at least this often. `None`: never (Argo CD's default).
    pub hard_refresh: Option<std::time::Duration>,
    /// How credential templates match a `repoURL` (Argo CD's string prefix, or only at a
    /// path boundary: `--refuse-loose-credential-templates`).
    pub template_match: crate::source::TemplateMatch,
    /// Argo CD's `controller.diff.server.side`: every app is compared server-side unless
    /// its own `compare-options` say `ServerSideDiff=false` (`reconciler/server_side.rs`).
    pub server_side_diff: bool,
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
            fleetshard_namespaces: Vec::new(),
            self_heal_backoff: SelfHealBackoff::default(),
            wave_delay: std::time::Duration::from_secs(2),
            operation_poll: std::time::Duration::from_secs(30),
            sync_timeout: None,
            hard_refresh: None,
            template_match: crate::source::TemplateMatch::Prefix,
            server_side_diff: false,
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
    /// What is remembered per app; boxed, so that the map's empty slots (up to half of
    /// them after it grows) cost a pointer, not a whole memo.
    apps: Mutex<HashMap<AppKey, Box<Memo>>>,
    /// The takeover warm-ups running, by cluster (`takeover.rs`).
    warming: Mutex<HashMap<String, tokio::task::JoinHandle<()>>>,
    /// When this owner first touched each cluster it owns (its acquisition, or the first
    /// refresh of an app there if that came first): a first comparison resolves
    /// revisions from data fetched since (`Refresh::ResolvedSince`).
    owned_since: Mutex<HashMap<String, tokio::time::Instant>>,
    /// argocd-cm's resource customizations, compiled (`customize.rs`).
    customizations: customize::Customizations,
    /// Argo CD's app-state cache in Redis, when configured (`app_state.rs`).
    app_state: Option<Arc<fleetshard_appstate::AppStateCache>>,
    /// Kubernetes Events on the Applications, when configured (`app_events.rs`).
    events: Option<Arc<crate::events::AppEvents>>,
    /// The acquisitions in progress and their phases' times (`acquisition.rs`).
    acquisitions: acquisition::Acquisitions,
    /// The units (clusters, or slices of them) held here (`units.rs`).
    units: units::OwnedUnits,
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
            owned_since: Mutex::new(HashMap::new()),
            customizations: customize::Customizations::new(None, Default::default()),
            app_state: None,
            events: None,
            acquisitions: acquisition::Acquisitions::default(),
            units: units::OwnedUnits::default(),
        }
    }

    /// How long acquisitions took to reach each phase (`connect`, `render`, `list`,
    /// `compare`), from the acquisition, for `/metrics`: a histogram labelled by `phase`.
    pub fn acquisition_phases(&self) -> PhaseHistogram {
        self.acquisitions.histogram()
    }

    /// The same reconciler recording Kubernetes Events on the Applications it owns, as
    /// Argo CD's controller does, through `events`.
    #[must_use]
    pub fn with_events(mut self, events: Arc<crate::events::AppEvents>) -> Self {
        self.events = Some(events);
        self
    }

    /// The same reconciler writing Argo CD's app-state cache (resource trees, managed
    /// resources, cluster info) of the apps and clusters it owns to `cache`.
    #[must_use]
    pub fn with_app_state(mut self, cache: Arc<fleetshard_appstate::AppStateCache>) -> Self {
        self.app_state = Some(cache);
        self
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

    /// Each known cluster's name by id (Argo CD's `argocd_cluster_info{name}`).
    pub fn cluster_names(&self) -> HashMap<String, String> {
        self.inventory.cluster_names()
    }

    /// Drops what was remembered of the unit's apps (a cluster's, or a slice's of it:
    /// `units.rs`), and once no unit of its cluster is held here any more, the cluster's
    /// connection and caches. Call it once no work of the unit is in flight
    /// ([`GitOpsStopHook`] does).
    pub fn stop_cluster(&self, id: &str) {
        if let Some(warmup) = self.warmups().remove(id) {
            warmup.abort();
        }
        let cluster = fleetshard_core::placement::slices::UnitId::parse(id).cluster;
        let last = self.units.stopped(id);
        if last {
            self.clusters.stop(cluster);
            if let Some(events) = &self.events {
                events.stop_cluster(cluster);
            }
        }
        self.memos().retain(|k, m| {
            !(m.unresolved || (m.cluster == cluster && units::unit_holds(id, cluster, k)))
        });
        self.acquisitions.stopped(id);
        let mut since = self
            .owned_since
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        since.remove(id);
        if last {
            // Stamps made under the cluster's id before a slice's start was told.
            since.retain(|u, _| {
                fleetshard_core::placement::slices::UnitId::parse(u).cluster != cluster
            });
        }
    }

    /// The unit `app` of `cluster` is held under here (`units.rs`).
    fn unit_of(&self, app: &AppKey, cluster: &str) -> String {
        self.units.unit_of(app, cluster)
    }

    /// When this owner took `cluster` over: stamped the first time it is asked (at the
    /// acquisition, or at the first refresh of an app there if that comes first). An
    /// owner's first comparison of an app resolves its revision from Git data fetched
    /// since (`Refresh::ResolvedSince`): its own resolutions may predate its
    /// predecessor's last sync, and comparing at one would sync the app back to an older
    /// commit.
    fn owned_since(&self, cluster: &str) -> tokio::time::Instant {
        *self
            .owned_since
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(cluster.to_owned())
            .or_insert_with(tokio::time::Instant::now)
    }

    /// The name the app's tracking annotations carry.
    pub fn instance_name(&self, key: &AppKey) -> String {
        self.config.instance_name(key)
    }

    fn memos(&self) -> MutexGuard<'_, HashMap<AppKey, Box<Memo>>> {
        // Each critical section is one map operation: a poisoned lock is still consistent.
        self.apps.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes `update`. An operation's state written is remembered as the app's last
    /// ([`Memo::op`]); one that could not be written is kept, if the operation has ended,
    /// and written again first by the app's next refresh or operation
    /// ([`GitOpsReconciler::record_unrecorded`]); any operation state written replaces it.
    async fn record(&self, app: &AppKey, update: StatusUpdate) -> Result<(), ReconcileError> {
        // The operation recorded before, to tell a start or an end (events).
        let before = self.events.as_ref().and_then(|_| {
            self.memos()
                .get(app)
                .map(|m| m.op.as_ref().and_then(KeptOperation::state))
        });
        let mut stored = false;
        let written = if self.lease.lease_valid() {
            match self.sink.write(app, &update).await {
                Ok(()) => {
                    stored = true;
                    Ok(())
                }
                // The Application was deleted: nothing to record; the inventory drops it.
                Err(SinkError::NotFound(_)) => Ok(()),
                Err(e) => Err(ReconcileError::RetryLater(e.to_string())),
            }
        } else {
            Err(ReconcileError::RetryLater("the shard lease lapsed".into()))
        };
        if let StatusUpdate::Operation(state) = &update
            && let Some(m) = self.memos().get_mut(app)
        {
            m.unrecorded = match &written {
                Ok(()) => {
                    m.op = Some(KeptOperation::new(state));
                    None
                }
                Err(_) if state.phase != "Running" => Some(state.clone()),
                Err(_) => m.unrecorded.take(),
            };
        }
        if stored && let Some(before) = before {
            self.status_events(app, &update, before);
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
