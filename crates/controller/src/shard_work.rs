//! The replica's work on its shard: which clusters it owns right now, which cluster each
//! app deploys to, both work queues, the items in flight, and the lease gate. Everything
//! that decides whether an app is worked on meets here.
//!
//! It knows which clusters this replica owns (started and stopped by the controller
//! runtime from the coordination runner's ownership events) and which cluster each app
//! deploys to (resolved with [`DestinationIndex`]: by normalised server, else by name).
//! Workers ask it to [`ShardWork::admit`] every item they get; an admitted item counts as
//! in flight on its cluster until its guard drops. [`ShardWork::stop_cluster`] returns only
//! when no item of the cluster is in flight any more — the coordination layer acknowledges
//! a handover after that, so two replicas never work on one cluster at once (G1). Nothing
//! is admitted past the lease deadline the runtime reports ([`ShardWork::lease_valid`]).
//!
//! An app whose destination resolves to no cluster is listed ([`ShardWork::unresolved`])
//! and processed by one replica: the owner of the inventory's *anchor*, its cluster with
//! the smallest id. Its items count as in flight on the anchor, so the anchor's hand-over
//! waits for them as for the anchor's own apps. The reconciler gives such an app Argo
//! CD's status for a destination that names no cluster (an `InvalidSpecError`), and lets
//! it be deleted. Argo CD instead lets every shard process it (its nil-cluster rule),
//! which writes that status N times. An inventory without clusters has no anchor: its
//! apps are processed by no replica.
//!
//! Each owned cluster carries a counter of the CPU time its items' polls took
//! ([`ShardWork::cluster_cpu`], `usage.rs`): it lives beside the cluster in the owned set,
//! so a stop forgets it and a cluster owned again counts from zero.
//!
//! Its metrics keep the `shard_filter_` prefix they were published under.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use fleetshard_core::placement::stable_hash;
use fleetshard_core::{App, Cluster, Destination, DestinationIndex};
use futures::future::BoxFuture;
use prometheus_client::registry::Registry;
use tokio::sync::Notify;

use crate::AppKey;
use crate::ConfigError;
use crate::queue::{RateLimiterConfig, WorkQueue, WorkQueueMetrics};

mod held;
mod index;
mod metrics;
mod owned;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_slices;
mod units;

pub use held::QueueKind;
use index::AppIndex;
pub use metrics::WorkMetrics;
use owned::Owned;
use units::{Slices, apps_of_unit};

/// An app the filter could not place on a cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnresolvedApp {
    /// The app.
    pub app: AppKey,
    /// Its destination as written.
    pub destination: Destination,
}

/// What a worker may do with an item it got.
#[derive(Debug)]
pub enum Admission {
    /// Process it; the item counts as in flight on its cluster until the guard drops.
    Admitted(InFlight),
    /// Its cluster is not owned by this replica now: drop it.
    NotOwned,
    /// The replica's shard lease is past its deadline (or unknown): drop it. Ownership
    /// ends at the deadline, whatever the clusters' stops are doing (a paused process
    /// resumes past it and must start nothing).
    LeaseLapsed,
    /// Its destination resolves to no cluster and the inventory has no cluster to anchor
    /// it to: drop it (it is listed as unresolved).
    Unresolved,
    /// The app is not in the inventory (deleted): drop it.
    Unknown,
}

/// An admitted item's hold on its unit (its cluster, or its slice of it); dropping it
/// ends the hold.
#[derive(Debug)]
pub struct InFlight {
    filter: Arc<ShardWork>,
    /// The unit held: the cluster's id, or its slice's (`units.rs`).
    unit: Arc<str>,
    /// The cluster's reconcile CPU counter (`crate::usage`).
    pub(crate) cpu: crate::usage::CpuMeter,
}

impl InFlight {
    /// The cluster (id) the item holds: the one its app deploys to, or the anchor for an
    /// app whose destination resolves to no cluster.
    pub fn cluster(&self) -> &str {
        fleetshard_core::placement::slices::UnitId::parse(&self.unit).cluster
    }

    /// The unit the item holds: [`InFlight::cluster`], or the slice of it that holds the
    /// app when the cluster is owned in slices.
    pub fn unit(&self) -> &str {
        &self.unit
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut s = self.filter.lock();
        let now_idle = match s.in_flight.get_mut(&*self.unit) {
            Some(n) => {
                *n -= 1;
                *n == 0
            }
            None => false,
        };
        if now_idle {
            s.in_flight.remove(&*self.unit);
            drop(s);
            self.filter.idle.notify_waiters();
        }
    }
}

/// The lease gate: open until the runner first reports on the lease (a filter used
/// without a runner, in tests and benches, admits freely), then open only before the
/// reported deadline.
#[derive(Debug, Clone, Copy, Default)]
enum LeaseGate {
    #[default]
    Ungated,
    /// The deadline (`None`: no lease held).
    Until(Option<tokio::time::Instant>),
}

impl LeaseGate {
    fn open(self) -> bool {
        self.deadline()
            .is_some_and(|u| tokio::time::Instant::now() < u)
    }

    /// Until when work may run; ungated: a day from now (no runner reports a lease).
    fn deadline(self) -> Option<tokio::time::Instant> {
        match self {
            LeaseGate::Ungated => {
                Some(tokio::time::Instant::now() + std::time::Duration::from_secs(86_400))
            }
            LeaseGate::Until(until) => until,
        }
    }
}

#[derive(Debug, Default)]
struct State {
    /// The owned units (clusters, or slices of them), each with its reconcile CPU
    /// counter (`owned.rs`).
    owned: Owned,
    /// The slice count of each cluster owned in slices (`units.rs`).
    slices: Slices,
    /// Whether work is gated on a shard lease.
    lease: LeaseGate,
    /// Which cluster each app deploys to, and each cluster's apps; an unresolved app is
    /// indexed under the anchor (see the module documentation).
    apps: AppIndex,
    unresolved: BTreeMap<AppKey, Destination>,
    /// Admitted items per unit; absent = 0.
    in_flight: HashMap<Arc<str>, usize>,
    /// Clusters the runner stopped before their announced start was applied
    /// ([`ShardWork::revoke_cluster`]), with how many such starts to skip.
    revoked: HashMap<Arc<str>, u32>,
    /// Items dropped while the lease gate was closed, to queue again when it opens.
    held: HashSet<(QueueKind, AppKey)>,
}

/// The gate (see the module documentation). Shared as `Arc<ShardWork>`.
#[derive(Debug)]
pub struct ShardWork {
    state: Mutex<State>,
    idle: Notify,
    refresh: WorkQueue<AppKey>,
    operation: WorkQueue<AppKey>,
    project: WorkQueue<String>,
    metrics: WorkMetrics,
}

impl ShardWork {
    /// A filter owning nothing, feeding `refresh` and cleaning both queues, with an
    /// unmetered project queue.
    pub fn new(
        refresh: WorkQueue<AppKey>,
        operation: WorkQueue<AppKey>,
        metrics: WorkMetrics,
    ) -> Arc<Self> {
        Self::with_project_queue(
            refresh,
            operation,
            WorkQueue::with_default_limits(),
            metrics,
        )
    }

    /// [`ShardWork::new`] with its project queue.
    pub fn with_project_queue(
        refresh: WorkQueue<AppKey>,
        operation: WorkQueue<AppKey>,
        project: WorkQueue<String>,
        metrics: WorkMetrics,
    ) -> Arc<Self> {
        Arc::new(ShardWork {
            state: Mutex::new(State::default()),
            idle: Notify::new(),
            refresh,
            operation,
            project,
            metrics,
        })
    }

    /// The replica's work with its queues — `app_refresh`, `app_operation` and
    /// `project_refresh` (Argo CD's three) — and its own metrics registered in `registry`. Built first, as a plain
    /// value: the reconciler takes it as an argument (its lease check, its refresh
    /// triggers), then [`crate::ControllerRuntime::start`] runs the workers on it.
    pub fn registered(
        limits: RateLimiterConfig,
        registry: &mut Registry,
    ) -> Result<Arc<Self>, ConfigError> {
        let queue_metrics = WorkQueueMetrics::register(registry);
        let refresh = WorkQueue::new(limits, Some(queue_metrics.queue("app_refresh")))?;
        let operation = WorkQueue::new(limits, Some(queue_metrics.queue("app_operation")))?;
        let project = WorkQueue::new(limits, Some(queue_metrics.queue("project_refresh")))?;
        let metrics = WorkMetrics::default();
        metrics.register(registry);
        Ok(ShardWork::with_project_queue(
            refresh, operation, project, metrics,
        ))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // No user code runs under the lock; its state stays consistent across a panic.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The refresh queue.
    pub fn refresh_queue(&self) -> &WorkQueue<AppKey> {
        &self.refresh
    }

    /// The operation queue.
    pub fn operation_queue(&self) -> &WorkQueue<AppKey> {
        &self.operation
    }

    /// The project queue: names of AppProjects whose applications are to be re-checked
    /// ([`crate::project`]).
    pub fn project_queue(&self) -> &WorkQueue<String> {
        &self.project
    }

    /// The metrics.
    pub fn metrics(&self) -> &WorkMetrics {
        &self.metrics
    }

    /// Replaces the app index with `apps` resolved against `clusters`, an unresolved app
    /// under the anchor (the cluster with the smallest id). Apps that move to an owned
    /// cluster (or are new on one) are queued for refresh; apps of clusters not owned are
    /// not touched (items in flight keep their hold on their old cluster).
    pub fn set_inventory(&self, clusters: &[Cluster], apps: &[App]) {
        self.set_inventory_sharing::<()>(clusters, apps, &BTreeMap::new());
    }

    /// [`ShardWork::set_inventory`], keying each app with the equal key of `keys` when
    /// there is one (the inventory's specs), so the index shares those keys' allocations
    /// instead of making its own.
    pub fn set_inventory_sharing<V>(
        &self,
        clusters: &[Cluster],
        apps: &[App],
        keys: &BTreeMap<AppKey, V>,
    ) {
        let index = DestinationIndex::new(clusters);
        let mut s = self.lock();
        let mut to_refresh = Vec::new();
        let old = std::mem::take(&mut s.apps);
        s.unresolved.clear();
        // One shared id per cluster, made when its first app is seen.
        let mut ids: Vec<Option<Arc<str>>> = vec![None; clusters.len()];
        let anchor = (0..clusters.len()).min_by(|&a, &b| clusters[a].id.cmp(&clusters[b].id));
        let mut resolved = Vec::with_capacity(apps.len());
        for app in apps {
            let key = AppKey::of(app);
            let key = keys
                .get_key_value(&key)
                .map_or(key, |(shared, _)| shared.clone());
            let i = match index.resolve(&app.destination) {
                Some(i) => i,
                None => {
                    s.unresolved.insert(key.clone(), app.destination.clone());
                    match anchor {
                        Some(i) => i,
                        None => continue,
                    }
                }
            };
            let id = ids[i]
                .get_or_insert_with(|| Arc::from(clusters[i].id.as_str()))
                .clone();
            if old.cluster_of(&key) != Some(&id) && s.owned.contains(&s.slices.unit_of(&key, &id)) {
                to_refresh.push(key.clone());
            }
            resolved.push((key, id));
        }
        drop(old);
        s.apps = AppIndex::new(resolved);
        self.metrics.unresolved_apps.set(gauge(s.unresolved.len()));
        drop(s);
        self.refresh.add_many(to_refresh);
    }

    /// This replica owns `cluster` from now on: its apps are queued for refresh.
    pub fn start_cluster(&self, cluster: &str) {
        self.start_locked(self.lock(), cluster);
    }

    /// [`ShardWork::start_cluster`] under the lock `s` already taken (released here).
    fn start_locked(&self, mut s: MutexGuard<'_, State>, cluster: &str) {
        let id: Arc<str> = Arc::from(cluster);
        if !s.owned.insert(id.clone()) {
            return;
        }
        s.slices.started(cluster);
        self.metrics.owned_clusters.set(gauge(s.owned.len()));
        let apps = apps_of_unit(&s.apps, &id).into_owned();
        drop(s);
        self.refresh.add_many(apps);
    }

    /// The runner's announced start of `cluster`, applied in the order of its ownership
    /// events: as [`ShardWork::start_cluster`], unless the runner already stopped this
    /// acquisition through [`ShardWork::revoke_cluster`] (its stop hook runs on the
    /// runner's thread and may overtake the announcement). Returns whether it started.
    pub fn apply_start(&self, cluster: &str) -> bool {
        // One lock for the check and the start: a revoke between them would find the
        // cluster neither owned nor started, and its start would then go ahead.
        let mut s = self.lock();
        if let Some(skips) = s.revoked.get_mut(cluster) {
            *skips -= 1;
            if *skips == 0 {
                s.revoked.remove(cluster);
            }
            return false;
        }
        self.start_locked(s, cluster);
        true
    }

    /// The runner's stop of `cluster` (its stop hook): as [`ShardWork::stop_cluster`] when
    /// the cluster's start was applied; when it was not yet (the announcement is still on
    /// its way), that start is skipped when it arrives, so the cluster is never worked on
    /// after the runner handed it over. The runner stops only what it announced started.
    ///
    /// Which of the two it is, and the cluster's release, are decided here, when the
    /// runner calls it, in order with its announcements; the returned future only waits
    /// for the cluster's work to end. Decided when first polled instead, a stop whose
    /// future ran after the runner had started the cluster again (Argo CD's runner may,
    /// before the stop ended) and after that start was applied would have stopped the new
    /// acquisition, and the next stop would have left a skip that no start pairs with:
    /// every later start of the cluster would have been skipped.
    ///
    /// Either way the future resolves only once no item of the cluster is in flight: a
    /// revoked start has no work of its own, but an earlier acquisition's stop may still
    /// be waiting for its items (the runner started the cluster again meanwhile), and the
    /// runner takes this stop's end as the cluster's.
    pub fn revoke_cluster(self: &Arc<Self>, cluster: String) -> BoxFuture<'static, ()> {
        {
            let mut s = self.lock();
            if !self.disown(&mut s, &cluster) {
                *s.revoked.entry(Arc::from(cluster.as_str())).or_insert(0) += 1;
            }
        }
        self.drop_queued(&cluster);
        let work = self.clone();
        Box::pin(async move { work.wait_stopped(&cluster).await })
    }

    /// Queues for refresh those of `apps` whose cluster this replica owns (an app whose
    /// definition changed, say); the others are not this replica's to refresh.
    pub fn refresh_apps(&self, apps: impl IntoIterator<Item = AppKey>) {
        let s = self.lock();
        let owned: Vec<AppKey> = apps
            .into_iter()
            .filter(|a| {
                s.apps
                    .cluster_of(a)
                    .is_some_and(|c| s.owned.contains(&s.slices.unit_of(a, c)))
            })
            .collect();
        drop(s);
        self.refresh.add_many(owned);
    }

    /// Queues for refresh every app of the clusters in `clusters` that this replica owns
    /// (a cluster whose address or credentials changed).
    pub fn refresh_clusters<'a>(&self, clusters: impl IntoIterator<Item = &'a str>) {
        let s = self.lock();
        let mut apps = Vec::new();
        for c in clusters {
            let c: Arc<str> = Arc::from(c);
            apps.extend(
                (s.apps.apps_of(&c).iter())
                    .filter(|a| s.owned.contains(&s.slices.unit_of(a, &c)))
                    .cloned(),
            );
        }
        drop(s);
        self.refresh.add_many(apps);
    }

    /// Queues every app of every owned cluster for refresh: the periodic resync (Argo CD's
    /// `timeout.reconciliation`), which finds drift no event reported. With a `jitter`,
    /// each app is queued after its own delay below it (Argo CD's
    /// `timeout.reconciliation.jitter`), fixed per app, so a large fleet's refreshes are
    /// spread over the jitter instead of arriving at once. Returns how many.
    pub fn resync(&self, jitter: Duration) -> usize {
        let s = self.lock();
        let apps: Vec<AppKey> = s
            .owned
            .iter()
            .flat_map(|u| apps_of_unit(&s.apps, u).into_owned())
            .collect();
        drop(s);
        let n = apps.len();
        let jitter_ms = u64::try_from(jitter.as_millis()).unwrap_or(u64::MAX);
        if jitter_ms == 0 {
            self.refresh.add_many(apps);
        } else {
            for app in apps {
                let delay = Duration::from_millis(stable_hash(app.as_str()) % jitter_ms);
                self.refresh.add_after(app, delay);
            }
        }
        n
    }

    /// This replica no longer owns `cluster`: no item of it is admitted from now on, its
    /// queued items are dropped, and this returns once no item of it is in flight.
    /// Ownership events are meant to be applied in order, each awaited: a start of the
    /// same cluster while its stop is pending keeps its new items, but the stop then also
    /// waits for them.
    pub async fn stop_cluster(&self, cluster: &str) {
        self.disown(&mut self.lock(), cluster);
        self.drop_queued(cluster);
        self.wait_stopped(cluster).await;
    }

    /// Removes `cluster` from the owned set under the lock `s`; returns whether it was
    /// owned.
    fn disown(&self, s: &mut State, cluster: &str) -> bool {
        let owned = s.owned.remove(cluster);
        if owned {
            s.slices.stopped(cluster, &s.owned);
            self.metrics.owned_clusters.set(gauge(s.owned.len()));
        }
        owned
    }

    /// The end of a stop of `cluster` (no longer owned): returns once no item of it is
    /// in flight.
    async fn wait_stopped(&self, cluster: &str) {
        loop {
            let idle = self.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if !self.lock().in_flight.contains_key(cluster) {
                break;
            }
            idle.await;
        }
        // Items in flight may have handed their app to the other queue before finishing.
        self.drop_queued(cluster);
    }

    /// Drops the queued items of `cluster` unless it is owned (again) by now. Holds the
    /// filter's lock across the queue calls so a concurrent start cannot slip in between
    /// the check and the removal (lock order: filter, then queue; nothing takes them the
    /// other way round).
    fn drop_queued(&self, cluster: &str) {
        let s = self.lock();
        if s.owned.contains(cluster) {
            return;
        }
        let apps = apps_of_unit(&s.apps, cluster);
        if !apps.is_empty() {
            self.refresh.remove_many(apps.iter());
            self.operation.remove_many(apps.iter());
        }
    }

    /// Whether `app` may be processed now; see [`Admission`]. Counts the drops.
    pub fn admit(self: &Arc<Self>, app: &AppKey) -> Admission {
        let mut s = self.lock();
        let Some(cluster) = s.apps.cluster_of(app) else {
            return if s.unresolved.contains_key(app) {
                self.metrics.unresolved_dropped.inc();
                Admission::Unresolved
            } else {
                Admission::Unknown
            };
        };
        let unit = s.slices.unit_of(app, cluster);
        if !s.owned.contains(&unit) {
            self.metrics.not_owned.inc();
            return Admission::NotOwned;
        }
        if !s.lease.open() {
            self.metrics.not_owned.inc();
            return Admission::LeaseLapsed;
        }
        *s.in_flight.entry(unit.clone()).or_default() += 1;
        Admission::Admitted(InFlight {
            filter: self.clone(),
            cpu: s.owned.meter(&unit),
            unit,
        })
    }

    /// The shard lease's deadline as the runner reports it (`None`: no lease). From the
    /// first call on, nothing is admitted at or past the deadline.
    pub fn set_lease_deadline(&self, until: Option<tokio::time::Instant>) {
        self.lock().lease = LeaseGate::Until(until);
        self.requeue_held();
    }

    /// Whether work may run now: the lease is valid (or no deadline was ever reported).
    /// A reconciler checks this before each side effect (an apply), so work in flight
    /// ends at the deadline too.
    pub fn lease_valid(&self) -> bool {
        self.lock().lease.open()
    }

    /// Until when work may run: the lease deadline the runner reported (`None`: no lease).
    /// A reconciler bounds every request to a cluster by it, so no write outlives the
    /// lease.
    pub fn write_deadline(&self) -> Option<tokio::time::Instant> {
        self.lock().lease.deadline()
    }

    /// Whether this replica owns the unit `unit` (a cluster, or a slice of one) now.
    pub fn owns(&self, unit: &str) -> bool {
        self.lock().owned.contains(unit)
    }

    /// Units (clusters, or slices of them) owned now, sorted.
    pub fn owned(&self) -> Vec<String> {
        let mut v: Vec<String> = self.lock().owned.iter().map(|c| c.to_string()).collect();
        v.sort();
        v
    }

    /// Items of the unit `unit` (a cluster, or a slice of one) in flight now.
    pub fn in_flight(&self, unit: &str) -> usize {
        self.lock().in_flight.get(unit).copied().unwrap_or(0)
    }

    /// The id of the cluster `app` deploys to, if resolved.
    pub fn cluster_of(&self, app: &AppKey) -> Option<String> {
        let s = self.lock();
        if s.unresolved.contains_key(app) {
            return None;
        }
        s.apps.cluster_of(app).map(|c| c.to_string())
    }

    /// Apps whose destination resolves to no cluster, sorted by key (for the status page).
    pub fn unresolved(&self) -> Vec<UnresolvedApp> {
        self.lock()
            .unresolved
            .iter()
            .map(|(app, destination)| UnresolvedApp {
                app: app.clone(),
                destination: destination.clone(),
            })
            .collect()
    }
}

fn gauge(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
