//! Where a replica's inventory comes from — files read once, a watched directory, or Argo
//! CD's objects in Kubernetes — and the fleet the distributor places, following it.
//!
//! Every source ends up as one [`Inventory`]: the shard filter, the reconciler and the
//! distributor all read it, so there is one path from input to work whatever the source.

use std::sync::Arc;

use fleetshard_controller::ProjectFinalizer;
use fleetshard_controller::inventory::{
    DirectorySource, Inventory, InventorySnapshot, KubernetesProjectFinalizer, KubernetesSource,
    Problem, Severity,
};
use fleetshard_coord::fenced::InventorySummary;
use fleetshard_coord::runner::RunnerFleet;
use fleetshard_core::placement::PlacementConfig;
use fleetshard_core::placement::measured::{cluster_costs, engine_loads};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::costs::FleetCosts;
use crate::metrics::ProblemGauges;
use crate::{FleetSource, ReplicaError};

/// A started inventory: published and complete (its first full load done).
pub struct StartedInventory {
    /// The inventory.
    pub inventory: Inventory,
    /// The Kubernetes client the source watches through (its retries off), for writing
    /// app statuses on the Applications.
    pub kube: Option<kube::Client>,
    /// The configuration `kube` was built from: which cluster it reaches (its API server
    /// and CA), so the reconciler recognises that cluster among the destinations.
    pub kube_config: Option<kube::Config>,
    /// Removes Argo CD's finalizer from an AppProject being deleted once no app
    /// references it (the Kubernetes source only).
    pub project_finalizer: Option<Arc<dyn ProjectFinalizer>>,
    /// The source's task (a watched directory or Kubernetes watches); `None` for a fixed
    /// fleet.
    pub source: Option<JoinHandle<()>>,
    /// Logs the inventory's problems and counts them ([`report_problems`]).
    pub reporter: JoinHandle<()>,
}

impl StartedInventory {
    /// Ends the inventory's tasks (a replica that did not start).
    pub fn abort(&self) {
        self.reporter.abort();
        if let Some(source) = &self.source {
            source.abort();
        }
    }
}

/// Logs the inventory's problems whenever they change (once per change, not per read) and
/// keeps `gauges` at their count by severity, until the inventory is dropped.
pub fn report_problems(inventory: &Inventory, gauges: ProblemGauges) -> JoinHandle<()> {
    let mut rx = inventory.subscribe();
    tokio::spawn(async move {
        let mut seen: Option<std::sync::Arc<Vec<Problem>>> = None;
        loop {
            let problems = rx.borrow_and_update().problems.clone();
            if seen.as_deref() != Some(&*problems) {
                for p in problems.iter() {
                    match p.severity {
                        Severity::Warning => tracing::warn!("fleet: {p}"),
                        Severity::Error => tracing::error!("fleet: {p}"),
                    }
                }
                gauges.set(&problems);
                seen = Some(problems);
            }
            if rx.changed().await.is_err() {
                return;
            }
        }
    })
}

/// Starts the source and waits for its first complete load: until then an empty
/// inventory means "not known yet", and placing it would move every cluster away.
pub async fn start(
    input: FleetSource,
    problems: ProblemGauges,
    user_agent: &str,
) -> Result<StartedInventory, ReplicaError> {
    let inventory = Inventory::new();
    let mut finalizer: Option<Arc<dyn ProjectFinalizer>> = None;
    let mut kube_config_used = None;
    let (mut source, kube) = match input {
        FleetSource::Fixed(content) => {
            inventory.publish(content, Vec::new(), true);
            let reporter = report_problems(&inventory, problems);
            return Ok(StartedInventory {
                inventory,
                kube: None,
                kube_config: None,
                project_finalizer: None,
                source: None,
                reporter,
            });
        }
        FleetSource::Directory(config) => {
            if !config.dir.is_dir() {
                return Err(ReplicaError::Inventory(format!(
                    "--fleet-dir {}: not a directory",
                    config.dir.display()
                )));
            }
            let source = DirectorySource::new(config);
            (tokio::spawn(source.run(inventory.clone())), None)
        }
        FleetSource::Kubernetes(config) => {
            let mut kube_config = kube::Config::infer().await.map_err(|e| {
                ReplicaError::Inventory(format!(
                    "--argocd-namespace: no Kubernetes configuration (in-cluster service \
                     account, KUBECONFIG or ~/.kube/config): {e}"
                ))
            })?;
            // kube's default retry can hold a call for minutes; the watchers retry with
            // backoff themselves and a status write is retried by the queue.
            kube_config.default_retry = false;
            let agent = http::HeaderValue::from_str(user_agent)
                .map_err(|e| ReplicaError::Inventory(format!("User-Agent {user_agent:?}: {e}")))?;
            kube_config.headers.push((http::header::USER_AGENT, agent));
            kube_config_used = Some(kube_config.clone());
            let client = kube::Client::try_from(kube_config).map_err(|e| {
                ReplicaError::Inventory(format!(
                    "--argocd-namespace: cannot build a Kubernetes client: {e}"
                ))
            })?;
            tracing::info!(
                secrets = %config.secrets_namespace,
                applications = config.apps_namespace.as_deref().unwrap_or("*"),
                "watching Argo CD's cluster Secrets, AppProjects and Applications"
            );
            finalizer = Some(Arc::new(KubernetesProjectFinalizer::new(
                client.clone(),
                &config.secrets_namespace,
            )) as Arc<dyn ProjectFinalizer>);
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
                return Err(ReplicaError::Inventory(format!(
                    "the inventory's source stopped before its first load: {why}"
                )));
            }
        }
    }
    let reporter = report_problems(&inventory, problems);
    Ok(StartedInventory {
        inventory,
        kube,
        kube_config: kube_config_used,
        project_finalizer: finalizer,
        source: Some(source),
        reporter,
    })
}

/// The fleet the distributor places, kept current from the inventory and the measured
/// costs by the returned task: each cluster's load is its trusted measured cost, or its
/// estimate (the base plus apps `placement` gives it) scaled by the median ratio of the
/// measured ones (`placement::measured`); with nothing measured, the estimates alone. New
/// figures re-place the fleet at most once per `rebalance_every` (the first at once): a
/// smoothed figure still wobbles a little from sample to sample, and the distributor's
/// hysteresis is the second damper, not the only one.
pub fn follow_fleet(
    inventory: &Inventory,
    placement: &PlacementConfig,
    costs: watch::Receiver<FleetCosts>,
    rebalance_every: std::time::Duration,
) -> (watch::Receiver<RunnerFleet>, JoinHandle<()>) {
    let mut rx = inventory.subscribe();
    let mut costs = costs;
    let placement = placement.clone();
    // The inventory's vectors are shared, not copied: only the loads are computed.
    // The digest is O(N log N): computed here, never on the runner's task.
    let to_fleet = move |s: &InventorySnapshot, costs: &FleetCosts, revision: u64| {
        let estimates = placement.loads(&s.clusters, &s.apps);
        let measured = costs.placement();
        let by_cost = !measured.is_empty();
        let loads = if by_cost {
            let ids: Vec<&str> = s.clusters.iter().map(|c| c.id.as_str()).collect();
            engine_loads(&cluster_costs(&ids, &estimates, &measured))
        } else {
            estimates
        };
        RunnerFleet {
            loads: Arc::new(loads),
            clusters: s.clusters.clone(),
            apps: s.apps.clone(),
            revision,
            measured: by_cost,
            inventory: InventorySummary::of(&s.clusters, s.problems.len()),
        }
    };
    let first = rx.borrow_and_update().clone();
    let first_costs = costs.borrow_and_update().clone();
    // The fleet's revision moves with the inventory's and with each new reading of the
    // costs: a local count, so both can move it.
    let mut revision = 0;
    let (tx, fleet_rx) = watch::channel(to_fleet(&first, &first_costs, revision));
    let task = tokio::spawn(async move {
        let mut seen = (first.revision, first.problems.len());
        // `figures`: what placement reads now; `pending`: newer figures waiting for the
        // next re-placement.
        let (mut snap, mut figures) = (first, first_costs);
        let mut pending: Option<FleetCosts> = None;
        let mut applied_at: Option<tokio::time::Instant> = None;
        let mut costs_open = true;
        loop {
            let due = applied_at.map(|t| t + rebalance_every);
            tokio::select! {
                changed = rx.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    snap = rx.borrow_and_update().clone();
                    // Readiness alone moves nothing; problems alone change only what the
                    // replica publishes (the revision, and so the placement, stays).
                    let now = (snap.revision, snap.problems.len());
                    if now == seen {
                        continue;
                    }
                    seen = now;
                }
                changed = costs.changed(), if costs_open => {
                    if changed.is_err() {
                        // No more readings: the last ones stand.
                        costs_open = false;
                        continue;
                    }
                    let next = costs.borrow_and_update().clone();
                    // Only what placement reads counts: untrusted figures move nothing.
                    if next.placement() == figures.placement() {
                        pending = None;
                        continue;
                    }
                    if due.is_some_and(|d| tokio::time::Instant::now() < d) {
                        pending = Some(next);
                        continue;
                    }
                    figures = next;
                    applied_at = Some(tokio::time::Instant::now());
                }
                () = fleetshard_coord::select::sleep_until_opt(due), if pending.is_some() => {
                    figures = pending.take().unwrap_or(figures);
                    applied_at = Some(tokio::time::Instant::now());
                }
            }
            revision += 1;
            if tx.send(to_fleet(&snap, &figures, revision)).is_err() {
                return;
            }
        }
    });
    (fleet_rx, task)
}

/// A fixed inventory of `clusters` with one app each, `argocd/app-ID` (the crate's tests).
#[cfg(test)]
pub(crate) fn one_app_each(
    clusters: Vec<fleetshard_core::Cluster>,
) -> fleetshard_controller::inventory::InventoryContent {
    let apps = clusters
        .iter()
        .map(|c| fleetshard_core::App::to_server("argocd", &format!("app-{}", c.id), &c.server))
        .collect();
    fleetshard_controller::inventory::InventoryContent {
        clusters,
        apps,
        specs: Default::default(),
        credentials: Default::default(),
        projects: Default::default(),
        repositories: Default::default(),
        argocd_cm: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use fleetshard_core::Cluster;

    use super::*;
    use crate::costs::{ClusterCost, FleetCosts};

    fn inventory() -> Inventory {
        let inventory = Inventory::new();
        let clusters: Vec<Cluster> = (0..3)
            .map(|i| Cluster::new(format!("c{i}"), format!("https://c{i}")))
            .collect();
        inventory.publish(one_app_each(clusters), Vec::new(), true);
        inventory
    }

    fn figures(of: &[(&str, f64, u64)], floor: f64) -> FleetCosts {
        let map = of
            .iter()
            .map(|&(id, cost, measured_seconds)| {
                let c = ClusterCost {
                    cost,
                    measured_seconds,
                    ..ClusterCost::default()
                };
                (id.to_owned(), c)
            })
            .collect();
        FleetCosts {
            figures: Arc::new(map),
            floor,
        }
    }

    /// Estimates until the trusted figures add up to the floor; then every load is a cost
    /// (c2 unmeasured at its estimate times the median ratio); a figure too new to trust,
    /// or figures below the floor, move nothing.
    #[tokio::test(start_paused = true)]
    async fn the_fleet_is_placed_by_trusted_costs_and_only_their_changes_move_it() {
        let inventory = inventory();
        let (tx, rx) = watch::channel(FleetCosts::default());
        let every = std::time::Duration::from_secs(600);
        let (mut fleet, task) = follow_fleet(&inventory, &PlacementConfig::default(), rx, every);
        let first = fleet.borrow_and_update().clone();
        assert!(!first.measured);
        // Base 5 plus one app each.
        assert_eq!(*first.loads, vec![6, 6, 6]);
        tx.send(figures(&[("c0", 100.0, 30)], 50.0)).unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        assert!(
            !fleet.has_changed().unwrap(),
            "not trusted yet: nothing moves"
        );
        tx.send(figures(&[("c0", 10.0, 600), ("c1", 30.0, 600)], 50.0))
            .unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        assert!(
            !fleet.has_changed().unwrap(),
            "40 in all, below the floor of 50"
        );
        tx.send(figures(&[("c0", 100.0, 600), ("c1", 300.0, 600)], 50.0))
            .unwrap();
        fleet.changed().await.unwrap();
        let placed = fleet.borrow_and_update().clone();
        assert!(placed.measured);
        assert!(placed.revision > first.revision);
        // c2: its estimate 6 × the median of 100/6 and 300/6 = 200.
        let (a, b, c) = (placed.loads[0], placed.loads[1], placed.loads[2]);
        let ratio = |x: u64| x as f64 / a as f64;
        assert!(
            (ratio(b) - 3.0).abs() < 1e-6 && (ratio(c) - 2.0).abs() < 1e-6,
            "{:?}",
            placed.loads
        );
        // New figures a minute later wait for the next re-placement, ten minutes after
        // the last; the newest then stand.
        tokio::time::sleep(std::time::Duration::from_secs(60)).await;
        tx.send(figures(&[("c0", 100.0, 660), ("c1", 100.0, 660)], 50.0))
            .unwrap();
        tx.send(figures(&[("c0", 100.0, 690), ("c1", 200.0, 690)], 50.0))
            .unwrap();
        tokio::time::sleep(std::time::Duration::from_secs(530)).await;
        assert!(
            !fleet.has_changed().unwrap(),
            "within ten minutes of the last"
        );
        tokio::time::sleep(std::time::Duration::from_secs(20)).await;
        assert!(fleet.has_changed().unwrap(), "ten minutes after the last");
        let later = fleet.borrow_and_update().clone();
        let ratio = |x: u64| x as f64 / later.loads[0] as f64;
        assert!(
            (ratio(later.loads[1]) - 2.0).abs() < 1e-6,
            "{:?}",
            later.loads
        );
        task.abort();
    }
}
