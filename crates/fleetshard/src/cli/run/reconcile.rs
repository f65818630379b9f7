//! What a replica does with the apps of the clusters it owns: the controller runtime
//! (queues, shard filter, workers) around the GitOps reconciler, or around a no-op one
//! (`--reconciler none`: coordination only), fed from the inventory.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use fleetshard_controller::inventory::{Inventory, follow_inventory};
use fleetshard_controller::{
    ControllerRuntime, NoopReconciler, PoolConfig, Reconciler, RuntimeConfig,
};
use fleetshard_coord::runner::StopHook;
use fleetshard_coord::store::Store;
use fleetshard_gitops::live::{ClusterConnections, LiveOptions};
use fleetshard_gitops::reconciler::{
    DEFAULT_HEARTBEAT, GitOpsReconciler, GitOpsStopHook, InventoryTargets, KubeStatusSink,
    MemorySink, ReconcilerConfig, StatusSink, StoreStatusSink, SystemClock,
};
use fleetshard_gitops::source::{RepoCache, RepoCacheConfig};
use prometheus_client::registry::Registry;

/// Which reconciler the workers run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReconcilerKind {
    /// Compare each owned app with Git and its cluster, record its status, auto-sync.
    Gitops,
    /// Touch nothing: coordination, queues and the handover gate only.
    None,
}

/// `fleetshard run`'s reconciler options.
#[derive(Debug, Clone, clap::Args)]
pub struct ReconcileArgs {
    /// What the refresh and operation workers do with an owned app.
    #[arg(
        long,
        value_enum,
        default_value = "gitops",
        env = "FLEETSHARD_RECONCILER"
    )]
    pub reconciler: ReconcilerKind,
    /// Refresh workers (Argo CD's `--status-processors`).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 20,
        env = "ARGOCD_APPLICATION_CONTROLLER_STATUS_PROCESSORS"
    )]
    pub status_processors: usize,
    /// Operation (sync) workers (Argo CD's `--operation-processors`).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 10,
        env = "ARGOCD_APPLICATION_CONTROLLER_OPERATION_PROCESSORS"
    )]
    pub operation_processors: usize,
    /// How often every owned app is refreshed even when nothing reported a change (drift
    /// on the cluster, a new commit on a branch): Argo CD's `timeout.reconciliation`.
    /// Also how long a branch's resolved commit is trusted. `0` refreshes on events only.
    /// Units: `ms`, `s`, `m`, `h`.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "180s",
        env = "ARGOCD_RECONCILIATION_TIMEOUT",
        value_parser = parse_duration
    )]
    pub resync: Duration,
    /// Each app's periodic refresh is delayed by its own fixed part of this (at most the
    /// resync period), so a large fleet's refreshes are spread, not queued at once (Argo
    /// CD's `timeout.reconciliation.jitter`).
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "60s",
        env = "ARGOCD_RECONCILIATION_JITTER",
        value_parser = parse_duration
    )]
    pub resync_jitter: Duration,
    /// Where remote Git repositories are mirrored. Local paths and `file://` URLs are
    /// read in place. Default: `fleetshard-repos` in the system's temporary directory.
    #[arg(long, value_name = "DIR", env = "FLEETSHARD_REPO_CACHE")]
    pub repo_cache: Option<PathBuf>,
    /// How many parsed manifest sets (one per repository, commit and path) are kept: at
    /// least the apps a replica owns, or each refresh reads Git again.
    #[arg(
        long,
        value_name = "N",
        default_value_t = fleetshard_gitops::source::DEFAULT_MAX_CACHED_READS,
        env = "FLEETSHARD_MANIFEST_CACHE"
    )]
    pub manifest_cache: usize,
    /// Argo CD's control-plane namespace: its apps' resources are tracked by the app's
    /// name alone, other namespaces' by `NAMESPACE_NAME` (Argo CD's instance name).
    #[arg(
        long,
        value_name = "NAMESPACE",
        default_value = "argocd",
        env = "FLEETSHARD_CONTROL_PLANE_NAMESPACE"
    )]
    pub control_plane_namespace: String,
}

/// A Go duration (`time.ParseDuration`, as Argo CD reads its settings): `180s`, `3m`,
/// `1m30s`, `1h0m0s`, `500ms`; or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if let Ok(secs) = s.parse::<u64>() {
        return Ok(Duration::from_secs(secs));
    }
    if s.is_empty() {
        return Err("empty duration: give e.g. 180s, 3m or 1m30s".to_owned());
    }
    let too_long = || format!("{s:?}: too long");
    let mut rest = s;
    let mut total = Duration::ZERO;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let n: u64 = rest[..digits].parse().map_err(|_| {
            format!("{s:?}: expected whole numbers with units, e.g. 180s, 3m or 1m30s")
        })?;
        rest = &rest[digits..];
        let unit = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let per = match &rest[..unit] {
            "ms" => Duration::from_millis(1),
            "s" => Duration::from_secs(1),
            "m" => Duration::from_secs(60),
            "h" => Duration::from_secs(3600),
            other => return Err(format!("{s:?}: unknown unit {other:?} (ms, s, m, h)")),
        };
        rest = &rest[unit..];
        let part = u32::try_from(n)
            .ok()
            .and_then(|n| per.checked_mul(n))
            .ok_or_else(too_long)?;
        total = total.checked_add(part).ok_or_else(too_long)?;
    }
    Ok(total)
}

/// Where app statuses are recorded: on the Applications when they come from Kubernetes;
/// else in the store beside the coordination records (`fleetshard apps` reads them) —
/// except in the Kubernetes store, where that would be one ConfigMap per app: there they
/// stay in this replica's memory (and the log says how to get them on Applications).
pub fn status_sink(
    kube: Option<kube::Client>,
    store: &Arc<dyn Store>,
    root: &str,
) -> Arc<dyn StatusSink> {
    match kube {
        Some(client) => Arc::new(KubeStatusSink::new(client, Duration::from_secs(5))),
        None if store.describe().starts_with(fleetshard_store_kube::SCHEME) => {
            tracing::warn!(
                store = %store.describe(),
                "app statuses are kept in memory: the Kubernetes store would need one \
                 ConfigMap per app; with --argocd-namespace they are written on the \
                 Applications"
            );
            MemorySink::new()
        }
        None => Arc::new(StoreStatusSink::new(store.clone(), root, DEFAULT_HEARTBEAT)),
    }
}

/// The running controller of one replica, and the hook the coordination runner stops
/// clusters through (the controller's, then the reconciler's caches).
pub struct Controller {
    /// The runtime.
    pub runtime: ControllerRuntime,
    /// The stop hook.
    pub stop_hook: Arc<dyn StopHook>,
}

/// Starts the controller on `inventory` (the shard filter follows it: each revision is
/// re-indexed, changed apps re-queued), recording statuses in `sink`.
pub fn start(
    args: &ReconcileArgs,
    inventory: &Inventory,
    sink: Arc<dyn StatusSink>,
    registry: &mut Registry,
) -> anyhow::Result<Controller> {
    let cfg = RuntimeConfig {
        pools: PoolConfig {
            status_processors: args.status_processors,
            operation_processors: args.operation_processors,
            ..PoolConfig::default()
        },
        resync: Some(args.resync).filter(|d| !d.is_zero()),
        resync_jitter: args.resync_jitter,
        ..RuntimeConfig::default()
    };
    let controller = start_reconciler(args, cfg, inventory, sink, registry)?;
    tokio::spawn(follow_inventory(
        controller.runtime.filter().clone(),
        inventory.subscribe(),
    ));
    Ok(controller)
}

fn start_reconciler(
    args: &ReconcileArgs,
    cfg: RuntimeConfig,
    inventory: &Inventory,
    sink: Arc<dyn StatusSink>,
    registry: &mut Registry,
) -> anyhow::Result<Controller> {
    match args.reconciler {
        ReconcilerKind::None => {
            let runtime = start_runtime(cfg, registry, |_| Arc::new(NoopReconciler))?;
            let stop_hook = runtime.stop_hook();
            Ok(Controller { runtime, stop_hook })
        }
        ReconcilerKind::Gitops => {
            let cache = args
                .repo_cache
                .clone()
                .unwrap_or_else(|| std::env::temp_dir().join("fleetshard-repos"));
            let mut repo_config = RepoCacheConfig::new(cache);
            repo_config.max_cached_reads = args.manifest_cache.max(1);
            if !args.resync.is_zero() {
                // A resync must see a new commit on a branch: the resolved commit is
                // trusted for one period.
                repo_config.refresh_interval = args.resync;
            }
            let repos = RepoCache::new(repo_config);
            let targets = Arc::new(InventoryTargets::new(inventory.subscribe()));
            let config = ReconcilerConfig {
                control_plane_namespace: args.control_plane_namespace.clone(),
            };
            let mut reconciler = None;
            let runtime = start_runtime(cfg, registry, |filter| {
                // A change of an app's object on its cluster queues the app's refresh
                // (drift is seen, and healed with selfHeal, within seconds).
                let listener = {
                    let (filter, config) = (filter.clone(), config.clone());
                    Arc::new(move |instance: &str| {
                        filter.refresh_apps(config.apps_of_instance(instance));
                    })
                };
                let clusters =
                    ClusterConnections::new(LiveOptions::default()).with_listener(listener);
                let filter = filter.clone();
                let r = Arc::new(GitOpsReconciler::new(
                    targets,
                    repos,
                    clusters,
                    sink,
                    // Every write to a cluster or a status first asks the shard filter,
                    // which closes at the lease deadline.
                    Arc::new(move || filter.lease_valid()),
                    Arc::new(SystemClock),
                    config,
                ));
                reconciler = Some(r.clone());
                r
            })?;
            let stop_hook = Arc::new(GitOpsStopHook {
                inner: runtime.stop_hook(),
                reconciler: reconciler.context("the reconciler was not built")?,
            });
            Ok(Controller { runtime, stop_hook })
        }
    }
}

fn start_runtime<R: Reconciler>(
    cfg: RuntimeConfig,
    registry: &mut Registry,
    make: impl FnOnce(&Arc<fleetshard_controller::ShardFilter>) -> Arc<R>,
) -> anyhow::Result<ControllerRuntime> {
    ControllerRuntime::start_with(cfg, registry, make).context("starting the controller runtime")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_argo_cds() {
        assert_eq!(parse_duration("180s"), Ok(Duration::from_secs(180)));
        assert_eq!(parse_duration("3m"), Ok(Duration::from_secs(180)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1h0m0s"), Ok(Duration::from_secs(3600)));
        assert!(parse_duration("").is_err());
        assert!(parse_duration("1m30").unwrap_err().contains("unknown unit"));
        assert!(
            parse_duration("3 days")
                .unwrap_err()
                .contains("unknown unit")
        );
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("99999999999999999999h").is_err());
    }
}
