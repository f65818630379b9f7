//! Where a replica's inventory comes from — files read once, a watched directory, or Argo
//! CD's objects in Kubernetes — and the fleet the distributor places, following it.
//!
//! Every source ends up as one [`Inventory`]: the shard filter, the reconciler and the
//! distributor all read it, so there is one path from input to work whatever the source.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use fleetshard_controller::inventory::{
    DirectoryConfig, DirectorySource, Inventory, InventoryContent, InventorySnapshot,
    KubernetesConfig, KubernetesSource,
};
use fleetshard_coord::runner::RunnerFleet;
use tokio::sync::watch;

use super::RunArgs;
use crate::cli::input::{self, LoadedFleet};

/// Where the inventory comes from.
pub enum FleetInput {
    /// Loaded once from files (`--fleet`, `--clusters`, `--apps`).
    Fixed(LoadedFleet),
    /// A directory, watched (`--fleet-dir`).
    Watched(PathBuf),
    /// Argo CD's cluster Secrets and Applications (`--argocd-namespace`).
    Kubernetes(KubernetesConfig),
}

impl FleetInput {
    /// The input the arguments name; files are read now (errors name file, object and
    /// field).
    pub fn from_args(args: &RunArgs) -> anyhow::Result<Self> {
        if let Some(dir) = &args.fleet_dir {
            return Ok(FleetInput::Watched(dir.clone()));
        }
        if let Some(ns) = &args.argocd_namespace {
            let apps = match args.application_namespace.as_deref() {
                None => Some(ns.clone()),
                Some("*") => None,
                Some(other) => Some(other.to_owned()),
            };
            return Ok(FleetInput::Kubernetes(KubernetesConfig {
                secrets_namespace: ns.clone(),
                apps_namespace: apps,
            }));
        }
        let loaded = input::load(&args.input.source()?)?;
        for w in &loaded.warnings {
            tracing::warn!(source = %w.source, "{}", w.message);
        }
        if !loaded.shards.is_empty() {
            // ReplicaConfig takes a shard count only: zones and capacities are not placed.
            tracing::warn!(
                listed = loaded.shards.len(),
                shards = %args.shards,
                "the fleet file's shards: section (zones, capacities) is not used by run; --shards sets the count"
            );
        }
        Ok(FleetInput::Fixed(loaded))
    }
}

/// A started inventory: published and complete (its first full load done).
pub struct StartedInventory {
    /// The inventory.
    pub inventory: Inventory,
    /// The Kubernetes client the source watches through (its retries off), for writing
    /// app statuses on the Applications.
    pub kube: Option<kube::Client>,
}

/// Starts the source and waits for its first complete load: until then an empty
/// inventory means "not known yet", and placing it would move every cluster away.
pub async fn start(input: FleetInput) -> anyhow::Result<StartedInventory> {
    let inventory = Inventory::new();
    let (mut source, kube) = match input {
        FleetInput::Fixed(loaded) => {
            let content = InventoryContent {
                clusters: loaded.fleet.clusters,
                apps: loaded.fleet.apps,
                credentials: loaded.credentials,
            };
            inventory.publish(content, Vec::new(), true);
            return Ok(StartedInventory {
                inventory,
                kube: None,
            });
        }
        FleetInput::Watched(dir) => {
            if !dir.is_dir() {
                bail!("--fleet-dir {}: not a directory", dir.display());
            }
            let source = DirectorySource::new(DirectoryConfig::new(dir));
            (tokio::spawn(source.run(inventory.clone())), None)
        }
        FleetInput::Kubernetes(config) => {
            let mut kube_config = kube::Config::infer().await.context(
                "--argocd-namespace: no Kubernetes configuration (in-cluster service account, \
                 KUBECONFIG or ~/.kube/config)",
            )?;
            // kube's default retry can hold a call for minutes; the watchers retry with
            // backoff themselves and a status write is retried by the queue.
            kube_config.default_retry = false;
            let client = kube::Client::try_from(kube_config)
                .context("--argocd-namespace: cannot build a Kubernetes client")?;
            tracing::info!(
                secrets = %config.secrets_namespace,
                applications = config.apps_namespace.as_deref().unwrap_or("*"),
                "watching Argo CD's cluster Secrets and Applications"
            );
            let source = KubernetesSource::new(client.clone(), config);
            (tokio::spawn(source.run(inventory.clone())), Some(client))
        }
    };
    // Nothing is served before the first load, so say what holds it up (the source's
    // problems: a refused watch, an unreadable directory), and fail if the source ends
    // (the watch channel cannot tell: `inventory` here keeps its sender open).
    let mut rx = inventory.subscribe();
    loop {
        {
            let snap = rx.borrow_and_update();
            if snap.ready {
                break;
            }
            for p in snap.problems.iter() {
                tracing::warn!("fleet, not loaded yet: {p}");
            }
        }
        tokio::select! {
            _ = rx.changed() => {}
            end = &mut source => {
                let why = end.err().map_or_else(|| "it returned".to_owned(), |e| e.to_string());
                bail!("the inventory's source stopped before its first load: {why}");
            }
        }
    }
    Ok(StartedInventory { inventory, kube })
}

/// The fleet the distributor places, kept current from the inventory; problems logged.
pub fn follow_fleet(inventory: &Inventory) -> watch::Receiver<RunnerFleet> {
    let mut rx = inventory.subscribe();
    let log_problems = |s: &InventorySnapshot| {
        for p in s.problems.iter() {
            tracing::warn!("fleet: {p}");
        }
    };
    // The inventory's vectors are shared, not copied: only the loads are computed.
    let to_fleet = |s: &InventorySnapshot| RunnerFleet {
        loads: Arc::new(fleetshard_core::model::loads(&s.clusters, &s.apps)),
        clusters: s.clusters.clone(),
        revision: s.revision,
    };
    let first = rx.borrow_and_update().clone();
    log_problems(&first);
    let (tx, fleet_rx) = watch::channel(to_fleet(&first));
    tokio::spawn(async move {
        let mut seen = first.revision;
        while rx.changed().await.is_ok() {
            let snap = rx.borrow_and_update().clone();
            log_problems(&snap);
            // Problems and readiness alone do not move the revision: nothing to place.
            if snap.revision != seen {
                seen = snap.revision;
                if tx.send(to_fleet(&snap)).is_err() {
                    return;
                }
            }
        }
    });
    fleet_rx
}
