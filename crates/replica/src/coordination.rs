//! "Start my coordination runner": the one place where the two protocols differ. Each
//! builds its runner into a [`Coordination`] — ownership events, a status the replica
//! reads through `fleetshard_coord::ownership::ReplicaStatus`, how stops reach the work,
//! the runner's future and the helper tasks it needs — and nothing else of the replica
//! knows which protocol runs.
//!
//! # A fresh start holds off on a store that can be replaced
//! A fenced-mode replica starting on a store that another one can replace under the same
//! URL (SQLite, etcd, Kubernetes: anything but `memory://`) claims nothing for one lease
//! `duration` after it started ([`hold_before_claiming`]). The store it opened may have
//! just replaced the one a running fleet uses (`rm fleetshard.db` and a restart): those
//! replicas notice at their next store call, renew no more, and stop by their renew
//! deadline, which is shorter than `duration`, however empty or stale the new store looks.
//! Without the hold, a newcomer finding no lease records would start every cluster at
//! once, beside them. The price: a replica starts acting `duration` (4 s) later.
//!
//! # The runner has a thread of its own
//! The runner renews the leases; the controller's workers share the replica's runtime and
//! run CPU-heavy work (decoding, rendering, comparing) that does not yield for many
//! milliseconds at a time. With the runner as one more task among them, a fleet that kept
//! every worker busy delayed renewals past their deadline and the replica lost its shard
//! (seen with `fleetshard up --replicas 5 --clusters 200 --apps 5000`). So the runner runs
//! on a dedicated OS thread with a single-threaded runtime of its own
//! ([`run_on_own_thread`]): its renew timer, its writes (tasks on that runtime) and its
//! store calls (SQLite's blocking calls go to that runtime's own blocking pool) never
//! queue behind reconciles. Stops still reach the controller through the hook, whose
//! futures wait on the controller's work from that thread.
//!
//! A store whose client keeps its connection on tasks (etcd's and Kubernetes' clients:
//! a request queue's worker and the connections, spawned on the runtime that first
//! connects) would still need the replica's runtime to make progress if that runtime made
//! first contact. So the thread is started before the runner is built, and the store's
//! first contact is made from it ([`CoordinationThread::first_contact`]). Seen without:
//! with the Kubernetes store, starting a few clusters on a busy 2-core machine delayed
//! heartbeat confirmations past a 2 s validity.

use std::sync::Arc;
use std::time::Duration;

use fleetshard_controller::StopMode;
use fleetshard_controller::inventory::{Inventory, InventorySnapshot};
use fleetshard_coord::argocd_runner::{ArgoRunner, ArgoStatus, WallClock};
use fleetshard_coord::fenced::{ReplicaConfig, ShardCount};
use fleetshard_coord::ownership::{OwnershipChange, ReplicaStatus, RunnerMetrics, StopHook};
use fleetshard_coord::runner::{Runner, Status};
use fleetshard_coord::store::{Store, StoreIdentity};
use fleetshard_store_kube::KubeStore;
use futures::future::BoxFuture;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use crate::clock::SystemClock;
use crate::deployment::{DeploymentRef, DeploymentReplicas, ReplicasWatch};
use crate::inventory::follow_fleet;
use crate::{ArgoSettings, FencedSettings, ReplicaError};

/// A coordination runner, built and not yet running.
pub struct Coordination<S> {
    /// Its ownership changes, in order.
    pub events: mpsc::UnboundedReceiver<OwnershipChange>,
    /// Its status.
    pub status: watch::Receiver<S>,
    /// How a stop reaches the controller's work.
    pub stops: StopMode,
    /// Runs the runner until the shutdown signal; returns whether it released its hold
    /// cleanly.
    pub run: Box<dyn FnOnce(watch::Receiver<bool>) -> BoxFuture<'static, bool> + Send>,
    /// Tasks that feed the runner (the fleet it places, a Deployment's replica count);
    /// cancelled once the runner has returned.
    pub feeders: Vec<JoinHandle<()>>,
    /// Kept alive while the replica runs (a Deployment watch).
    pub deployment: Option<ReplicasWatch>,
    /// The thread [`Coordination::run`] runs on, already running its runtime.
    pub thread: CoordinationThread,
}

/// Either protocol's runner.
pub enum CoordinationRunner {
    /// Fenced lease mode.
    Fenced(Coordination<Status>),
    /// Argo CD's heartbeat protocol.
    Argocd(Coordination<ArgoStatus>),
}

impl<S: ReplicaStatus> std::fmt::Debug for Coordination<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coordination")
            .field("stops", &self.stops)
            .finish_non_exhaustive()
    }
}

/// What both protocols' runners are built from.
pub struct CoordinationInputs<'a> {
    /// The replica's identity.
    pub identity: &'a str,
    /// Its incarnation.
    pub incarnation: u64,
    /// The fleet's key prefix (fenced).
    pub root: &'a str,
    /// Its zone.
    pub zone: Option<String>,
    /// Its capacity.
    pub capacity: u32,
    /// The store.
    pub store: Arc<dyn Store>,
    /// The Kubernetes backend, when the store is one (a Deployment's replicas).
    pub kube: Option<&'a KubeStore>,
    /// The inventory the distributor places.
    pub inventory: &'a Inventory,
    /// The controller's stop hook.
    pub stop_hook: Arc<dyn StopHook>,
    /// Where store latencies go.
    pub metrics: Arc<dyn RunnerMetrics>,
    /// The fleet's measured costs, as the replica last read them (the distributor's loads).
    pub costs: watch::Receiver<crate::costs::FleetCosts>,
    /// New figures re-place the fleet at most this often (twice the cost window).
    pub cost_rebalance_every: std::time::Duration,
}

/// Fenced lease mode: the runner stops clusters through the hook before acknowledging a
/// handover (the stop gate), and places the inventory as it changes.
pub async fn fenced(
    settings: &FencedSettings,
    inputs: CoordinationInputs<'_>,
) -> Result<Coordination<Status>, ReplicaError> {
    let cfg = ReplicaConfig {
        identity: inputs.identity.to_owned(),
        incarnation: inputs.incarnation,
        root: inputs.root.to_owned(),
        shards: settings.shards,
        timing: settings.timing,
        grace: settings.grace,
        placement: settings.placement.clone(),
        hysteresis: settings.hysteresis,
        split_clusters: settings.split_clusters,
        zone: inputs.zone,
        capacity: inputs.capacity,
        shard_specs: settings.shard_specs.clone(),
    };
    let thread = CoordinationThread::start()?;
    thread.first_contact(&inputs.store).await;
    let (events_tx, events) = mpsc::unbounded_channel();
    let (fleet, follower) = follow_fleet(
        inputs.inventory,
        &settings.placement,
        inputs.costs,
        inputs.cost_rebalance_every,
    );
    let (store, hold) = (inputs.store.clone(), settings.timing.duration);
    let (runner, status) = Runner::new(inputs.store, cfg, settings.runner, fleet, events_tx)
        .map_err(|e| ReplicaError::Start {
            part: "the coordination runner",
            reason: e.to_string(),
        })?;
    let mut runner = runner
        .with_drop_guard(settings.drop_guard)
        .with_metrics(inputs.metrics)
        .with_stop_hook(inputs.stop_hook);
    let deployment = match (&settings.deployment, settings.shards) {
        (Some(deployment), ShardCount::External { .. }) => {
            let watch = watch_deployment(inputs.kube, deployment).await?;
            runner = runner.with_external_shards(watch.receiver());
            Some(watch)
        }
        _ => None,
    };
    Ok(Coordination {
        events,
        status,
        stops: StopMode::Gated,
        run: Box::new(move |mut shutdown| {
            Box::pin(async move {
                if !hold_before_claiming(store.as_ref(), hold, &mut shutdown).await {
                    // Asked to stop while holding off: nothing was claimed.
                    return true;
                }
                runner.run(shutdown).await
            })
        }),
        feeders: vec![follower],
        deployment,
        thread,
    })
}

/// Argo CD's heartbeat protocol: stops go through the controller's hook (work in flight
/// ends) before the machine frees anything or the stop reaches the audit log. Argo CD's
/// distribution is computed over the clusters of `fleet`, the inventory as known at start
/// (the dashboard places the same ones); apps (and their destinations) are followed by the
/// controller. A cluster added later is placed after a restart
/// (`docs/argocd-compatibility.md`).
pub async fn argocd(
    settings: &ArgoSettings,
    inputs: CoordinationInputs<'_>,
    fleet: &InventorySnapshot,
) -> Result<Coordination<ArgoStatus>, ReplicaError> {
    let thread = CoordinationThread::start()?;
    thread.first_contact(&inputs.store).await;
    let mut cfg = settings.config.clone();
    cfg.identity = inputs.identity.to_owned();
    // A fixed count, or the Deployment's replicas (Argo CD's source) forwarded as they
    // change; a deleted Deployment keeps the last count.
    let (count_tx, count_rx) = watch::channel(settings.replicas);
    let mut feeders = Vec::new();
    let deployment = match &settings.deployment {
        Some(deployment) => {
            let replicas = watch_deployment(inputs.kube, deployment).await?;
            let mut rx = replicas.receiver();
            if let Some(n) = *rx.borrow_and_update() {
                count_tx.send_replace(n.max(1));
            }
            feeders.push(tokio::spawn(async move {
                while rx.changed().await.is_ok() {
                    if let Some(n) = *rx.borrow_and_update() {
                        count_tx.send_replace(n.max(1));
                    }
                }
            }));
            Some(replicas)
        }
        None => None,
    };
    let wall: WallClock = Arc::new(SystemClock::now);
    let (events_tx, events) = mpsc::unbounded_channel();
    let (runner, status) = ArgoRunner::new(
        inputs.store,
        cfg,
        fleet.clusters.to_vec(),
        &fleet.apps,
        count_rx,
        wall,
        events_tx,
    )
    .map_err(|e| ReplicaError::Start {
        part: "the coordination runner",
        reason: e.to_string(),
    })?;
    // Stops go through the controller's hook before the machine hears of them: the entry
    // is freed, and a stop reported, only once the cluster's work has ended.
    let runner = runner.with_stop_hook(inputs.stop_hook);
    Ok(Coordination {
        events,
        status,
        stops: StopMode::Gated,
        run: Box::new(move |shutdown| Box::pin(runner.run(shutdown))),
        feeders,
        deployment,
        thread,
    })
}

/// Waits `hold` before a fenced-mode replica may claim anything, unless its store cannot
/// be replaced (see the module docs). Returns false if `shutdown` came first.
pub async fn hold_before_claiming(
    store: &dyn Store,
    hold: Duration,
    shutdown: &mut watch::Receiver<bool>,
) -> bool {
    match store.check_identity().await {
        Ok(StoreIdentity::Fixed) => return true,
        Ok(identity) => tracing::info!(store = %store.describe(), %identity, "store identity"),
        // Holding off is the safe side whatever failed; the runner reports store trouble.
        Err(e) => tracing::warn!(store = %store.describe(), "checking the store's identity: {e}"),
    }
    tracing::info!(
        ?hold,
        "claiming nothing for one lease duration: replicas of a store this one may have \
         replaced stop by then"
    );
    tokio::select! {
        _ = tokio::time::sleep(hold) => true,
        _ = shutdown.wait_for(|stop| *stop) => false,
    }
}

/// The coordination runner's dedicated OS thread, with a single-threaded tokio runtime of
/// its own (see the module docs). It runs its runtime from the start, so that tasks can be
/// spawned on it before the runner itself is given ([`CoordinationThread::run`]); dropped
/// without a runner, the thread ends.
pub struct CoordinationThread {
    runtime: tokio::runtime::Handle,
    runner: oneshot::Sender<BoxFuture<'static, bool>>,
    released: oneshot::Receiver<bool>,
}

impl std::fmt::Debug for CoordinationThread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CoordinationThread").finish_non_exhaustive()
    }
}

impl CoordinationThread {
    /// Starts the thread and its runtime.
    pub fn start() -> Result<CoordinationThread, ReplicaError> {
        let failed = |e: std::io::Error| ReplicaError::Start {
            part: "the coordination runner's thread",
            reason: e.to_string(),
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .thread_name("fleetshard-coordination-blocking")
            .build()
            .map_err(failed)?;
        let handle = runtime.handle().clone();
        let (runner, given) = oneshot::channel::<BoxFuture<'static, bool>>();
        let (tx, released) = oneshot::channel();
        std::thread::Builder::new()
            .name("fleetshard-coordination".into())
            .spawn(move || {
                // Tasks spawned on the runtime (first contact) run while this waits.
                let result = runtime.block_on(async move {
                    match given.await {
                        Ok(run) => Some(run.await),
                        Err(_) => None,
                    }
                });
                if let Some(released) = result {
                    let _ = tx.send(released);
                }
                // Writes whose outcome nobody awaits any more, a placement still computing:
                // the runner is done; nothing waits for them.
                runtime.shutdown_background();
            })
            .map_err(failed)?;
        Ok(CoordinationThread {
            runtime: handle,
            runner,
            released,
        })
    }

    /// Makes the store's first contact (its identity check) from a task of this thread's
    /// runtime, so that a client connecting on first use keeps its connection tasks here.
    /// A failure is only logged: the runner meets and reports store trouble itself.
    pub async fn first_contact(&self, store: &Arc<dyn Store>) {
        let store = store.clone();
        let contact = self
            .runtime
            .spawn(async move { store.check_identity().await.map(drop) });
        match contact.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::debug!("the store's first contact failed: {e}"),
            Err(e) => tracing::debug!("the store's first contact did not finish: {e}"),
        }
    }

    /// Runs the runner's future on the thread; the receiver gets its result (closed without
    /// one: the thread panicked). Tasks it spawned and still running when it returns are
    /// dropped with the runtime; blocking calls in flight are left to finish.
    pub fn run(
        self,
        run: impl std::future::Future<Output = bool> + Send + 'static,
    ) -> oneshot::Receiver<bool> {
        // The thread waits for the runner until this is sent; it has not ended.
        let _ = self.runner.send(Box::pin(run));
        self.released
    }
}

/// Keeps a Deployment's replica count current, through the Kubernetes store's client (in
/// the Deployment's namespace, else the store's).
async fn watch_deployment(
    kube: Option<&KubeStore>,
    deployment: &DeploymentRef,
) -> Result<ReplicasWatch, ReplicaError> {
    let failed = |reason: String| ReplicaError::Start {
        part: "the Deployment watch",
        reason,
    };
    let store = kube.ok_or_else(|| {
        failed("a Deployment's replicas are read through the kubernetes:// store".into())
    })?;
    let client = store.client().await.map_err(|e| failed(e.to_string()))?;
    let namespace = match &deployment.namespace {
        Some(ns) => ns.clone(),
        None => store.namespace().await.map_err(|e| failed(e.to_string()))?,
    };
    let name = &deployment.name;
    let replicas = DeploymentReplicas::new(client, &namespace, name, Duration::from_secs(3));
    let watch = replicas
        .watch()
        .await
        .map_err(|e| failed(format!("watching Deployment {namespace}/{name}: {e}")))?;
    if watch.current().is_none() {
        tracing::warn!(%namespace, %name, "no such Deployment: the shard count stays as committed until it exists");
    }
    Ok(watch)
}

#[cfg(test)]
mod tests {
    use fleetshard_coord::store::memory::MemoryStore;
    use fleetshard_store_sqlite::SqliteStore;
    use tokio::time::Instant;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_store_that_can_be_replaced_is_held_off_for_the_duration() {
        let (_tx, mut shutdown) = watch::channel(false);
        let hold = Duration::from_secs(4);
        let start = Instant::now();
        assert!(hold_before_claiming(&MemoryStore::new(), hold, &mut shutdown).await);
        assert_eq!(
            start.elapsed(),
            Duration::ZERO,
            "memory:// cannot be replaced"
        );

        let dir = tempfile::tempdir().unwrap();
        let sqlite = SqliteStore::open(dir.path().join("s.db")).unwrap();
        let start = Instant::now();
        assert!(hold_before_claiming(&sqlite, hold, &mut shutdown).await);
        assert!(start.elapsed() >= hold, "{:?}", start.elapsed());
    }

    #[tokio::test(start_paused = true)]
    async fn a_shutdown_ends_the_hold() {
        let dir = tempfile::tempdir().unwrap();
        let sqlite = SqliteStore::open(dir.path().join("s.db")).unwrap();
        let (tx, mut shutdown) = watch::channel(false);
        let stop = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            tx.send(true).unwrap();
        });
        let start = Instant::now();
        assert!(!hold_before_claiming(&sqlite, Duration::from_secs(60), &mut shutdown).await);
        assert!(start.elapsed() < Duration::from_secs(2));
        stop.await.unwrap();
    }
}
