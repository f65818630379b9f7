//! "Start my coordination runner": the one place where the two protocols differ. Each
//! builds its runner into a [`Coordination`] — ownership events, a status the replica
//! reads through `fleetshard_coord::ownership::ReplicaStatus`, how stops reach the work,
//! the runner's future and the helper tasks it needs — and nothing else of the replica
//! knows which protocol runs.

use std::sync::Arc;
use std::time::Duration;

use fleetshard_controller::StopMode;
use fleetshard_controller::inventory::Inventory;
use fleetshard_coord::argocd_runner::{ArgoRunner, ArgoStatus, WallClock};
use fleetshard_coord::fenced::{ReplicaConfig, ShardCount};
use fleetshard_coord::ownership::{OwnershipChange, ReplicaStatus, RunnerMetrics, StopHook};
use fleetshard_coord::runner::{Runner, Status};
use fleetshard_coord::store::Store;
use fleetshard_store_kube::KubeStore;
use futures::future::BoxFuture;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::clock::SystemClock;
use crate::deployment::{DeploymentReplicas, ReplicasWatch};
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
        zone: inputs.zone,
    };
    let (events_tx, events) = mpsc::unbounded_channel();
    let (fleet, follower) = follow_fleet(inputs.inventory);
    let (runner, status) = Runner::new(inputs.store, cfg, settings.runner, fleet, events_tx)
        .map_err(|e| ReplicaError::Start {
            part: "the coordination runner",
            reason: e.to_string(),
        })?;
    let mut runner = runner
        .with_metrics(inputs.metrics)
        .with_stop_hook(inputs.stop_hook);
    let deployment = match (&settings.deployment, settings.shards) {
        (Some(name), ShardCount::External { .. }) => {
            let watch = watch_deployment(inputs.kube, name).await?;
            runner = runner.with_external_shards(watch.receiver());
            Some(watch)
        }
        _ => None,
    };
    Ok(Coordination {
        events,
        status,
        stops: StopMode::Gated,
        run: Box::new(move |shutdown| Box::pin(runner.run(shutdown))),
        feeders: vec![follower],
        deployment,
    })
}

/// Argo CD's heartbeat protocol: stops go through the controller's hook (work in flight
/// ends) before the machine frees anything or the stop reaches the audit log. Argo CD's
/// distribution is computed over the clusters known at start; apps (and their
/// destinations) are followed by the controller. A cluster added later is placed after a
/// restart (`docs/argocd-compatibility.md`).
pub async fn argocd(
    settings: &ArgoSettings,
    inputs: CoordinationInputs<'_>,
) -> Result<Coordination<ArgoStatus>, ReplicaError> {
    let fleet = inputs.inventory.snapshot();
    let mut cfg = settings.config.clone();
    cfg.identity = inputs.identity.to_owned();
    // A fixed count, or the Deployment's replicas (Argo CD's source) forwarded as they
    // change; a deleted Deployment keeps the last count.
    let (count_tx, count_rx) = watch::channel(settings.replicas);
    let mut feeders = Vec::new();
    let deployment = match &settings.deployment {
        Some(name) => {
            let replicas = watch_deployment(inputs.kube, name).await?;
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
    })
}

/// Keeps a Deployment's replica count current, through the Kubernetes store's client.
async fn watch_deployment(
    kube: Option<&KubeStore>,
    name: &str,
) -> Result<ReplicasWatch, ReplicaError> {
    let failed = |reason: String| ReplicaError::Start {
        part: "the Deployment watch",
        reason,
    };
    let store = kube.ok_or_else(|| {
        failed("a Deployment's replicas are read through the kubernetes:// store".into())
    })?;
    let client = store.client().await.map_err(|e| failed(e.to_string()))?;
    let namespace = store.namespace().await.map_err(|e| failed(e.to_string()))?;
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
