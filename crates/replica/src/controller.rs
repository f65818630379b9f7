//! What a replica does with the apps of the clusters it owns: the controller's work and
//! its reconciler — the GitOps reconciler, or none (`--reconciler none`: coordination
//! only) — built before the runtime starts them.

use std::sync::Arc;
use std::time::Duration;

use fleetshard_controller::inventory::Inventory;
use fleetshard_controller::{
    PoolConfig, RateLimiterConfig, RuntimeConfig, ShardWork, WorkStopHook,
};
use fleetshard_coord::ownership::StopHook;
use fleetshard_gitops::live::eks::{AwsEnv, EksTokens};
use fleetshard_gitops::live::{ClusterConnections, ControlPlaneIdentity, LiveOptions};
use fleetshard_gitops::reconciler::{
    DEFAULT_HEARTBEAT, GitOpsReconciler, GitOpsStopHook, InventoryTargets, KubeStatusSink,
    MemorySink, ReconcilerConfig, StatusSink, StoreStatusSink,
};
use fleetshard_gitops::source::{
    RepoCache, RepoCacheConfig, RepoServerRenderer, StandaloneRenderer, TemplateMatch,
};
use fleetshard_reposerver::RepoServerClient;
use prometheus_client::registry::Registry;

use crate::clock::SystemClock;
use crate::store::{OpenedStore, StoreUrl};
use crate::{ControllerSettings, ReconcilerKind, ReplicaError};

/// Where app statuses are recorded: on the Applications when they come from Kubernetes;
/// else in the store beside the coordination records (`fleetshard apps` reads them) —
/// except in the Kubernetes store, where that would be one ConfigMap per app: there they
/// stay in this replica's memory (and the log says how to get them on Applications).
/// In SQLite, statuses go through a connection of their own
/// ([`StoreUrl::open_for_statuses`]): lease renewals never wait behind them.
pub(crate) fn status_sink(
    applications: Option<kube::Client>,
    store: &OpenedStore,
    url: &StoreUrl,
    root: &str,
) -> Result<Arc<dyn StatusSink>, ReplicaError> {
    Ok(match (applications, url) {
        (Some(client), _) => Arc::new(KubeStatusSink::new(client, Duration::from_secs(5))),
        (None, StoreUrl::Kubernetes { .. }) => {
            tracing::warn!(
                store = %url,
                "app statuses are kept in memory: the Kubernetes store would need one \
                 ConfigMap per app; with --argocd-namespace they are written on the \
                 Applications"
            );
            MemorySink::new()
        }
        (None, StoreUrl::Memory | StoreUrl::Sqlite(_) | StoreUrl::Etcd { .. }) => Arc::new(
            StoreStatusSink::new(url.open_for_statuses(store)?, root, DEFAULT_HEARTBEAT),
        ),
    })
}

/// The reconciler the workers run.
#[derive(Clone)]
pub enum ReconcilerPart {
    /// `--reconciler none`.
    Noop,
    /// The GitOps reconciler.
    GitOps(Arc<GitOpsReconciler>),
}

/// One replica's controller before it runs: the work (queues, owned clusters, lease gate),
/// the reconciler built on it, and the hook the coordination runner stops clusters
/// through (the work's, then the reconciler's caches).
pub struct ControllerPart {
    /// The work the workers take from.
    pub work: Arc<ShardWork>,
    /// The reconciler.
    pub reconciler: ReconcilerPart,
    /// Stops a cluster's work, then drops the reconciler's caches of it.
    pub stop_hook: Arc<dyn StopHook>,
    /// The runtime's settings.
    pub config: RuntimeConfig,
}

/// Builds the controller: the work first, then the reconciler with it as an ordinary
/// argument (its lease check and its refresh trigger), metrics in `registry`.
#[allow(clippy::too_many_arguments)] // Each a part of the replica, named at the one call.
pub(crate) fn build(
    settings: &ControllerSettings,
    inventory: &Inventory,
    sink: Arc<dyn StatusSink>,
    applications: Option<kube::Client>,
    registry: &mut Registry,
    user_agent: &str,
    argo_objects: bool,
    own_cluster: OwnCluster,
) -> Result<ControllerPart, ReplicaError> {
    let config = runtime_config(settings);
    let work = ShardWork::registered(config.limits, registry).map_err(|e| ReplicaError::Start {
        part: "the controller's work queues",
        reason: e.to_string(),
    })?;
    let work_stop: Arc<dyn StopHook> = Arc::new(WorkStopHook(work.clone()));
    let (reconciler, stop_hook) = match settings.reconciler {
        ReconcilerKind::None => (ReconcilerPart::Noop, work_stop),
        ReconcilerKind::Gitops => {
            let reconciler = gitops(
                settings,
                inventory,
                sink,
                applications,
                registry,
                &work,
                user_agent,
                argo_objects,
                own_cluster,
            )?;
            registry.register_collector(Box::new(crate::live_metrics::LiveStateCollector(
                reconciler.clone(),
            )));
            registry.register(
                "acquisition_phase_seconds",
                "Seconds from a cluster's acquisition to each phase of its takeover: connect \
                 (its API server reached), render (its apps rendered and placed), list (every \
                 kind watched listed once), compare (every app compared and recorded)",
                reconciler.acquisition_phases(),
            );
            let stop_hook = Arc::new(GitOpsStopHook {
                inner: work_stop,
                reconciler: reconciler.clone(),
            });
            (
                ReconcilerPart::GitOps(reconciler),
                stop_hook as Arc<dyn StopHook>,
            )
        }
    };
    Ok(ControllerPart {
        work,
        reconciler,
        stop_hook,
        config,
    })
}

/// The runtime's settings. A failing app (an unreachable repository, a refused write) is
/// retried with a per-item backoff that grows up to the resync period (Argo CD's 180 s
/// when resync is off), so it is retried — and logged — once per step, not every second.
fn runtime_config(settings: &ControllerSettings) -> RuntimeConfig {
    let resync = Some(settings.resync).filter(|d| !d.is_zero());
    let defaults = RuntimeConfig::default();
    RuntimeConfig {
        pools: PoolConfig {
            status_processors: settings.status_processors,
            operation_processors: settings.operation_processors,
            ..PoolConfig::default()
        },
        limits: RateLimiterConfig {
            max_delay: resync.unwrap_or(fleetshard_controller::DEFAULT_RESYNC),
            ..defaults.limits
        },
        resync,
        resync_jitter: settings.resync_jitter,
    }
}

/// The cluster this replica runs in, as far as it knows: how it is recognised among the
/// destinations, and fleetshard's own namespaces there (guarded as Argo CD's is).
#[derive(Debug, Default)]
pub(crate) struct OwnCluster {
    /// Its API server and CA, when the replica has an in-cluster configuration or a
    /// kubeconfig for its inventory.
    pub identity: ControlPlaneIdentity,
    /// The pod's namespace and the Kubernetes store's.
    pub namespaces: Vec<String>,
}

impl OwnCluster {
    /// From the pod's in-cluster configuration when there is one, else from the
    /// inventory's kubeconfig (`inventory_config`); with a Kubernetes `store`, its
    /// namespace too (the configuration's when the URL names none).
    pub fn find(inventory_config: Option<&kube::Config>, store: &StoreUrl) -> Self {
        let in_pod = kube::Config::incluster().ok();
        let config = in_pod.as_ref().or(inventory_config);
        let mut own = OwnCluster::default();
        if let Some(pod) = in_pod.as_ref() {
            own.namespaces.push(pod.default_namespace.clone());
        }
        if let Some(config) = config {
            own.identity = ControlPlaneIdentity::from_config(config);
        }
        let store_namespace = match store {
            StoreUrl::Kubernetes { namespace } => namespace
                .clone()
                .or_else(|| config.map(|c| c.default_namespace.clone())),
            _ => None,
        };
        if let Some(ns) = store_namespace.filter(|ns| !own.namespaces.contains(ns)) {
            own.namespaces.push(ns);
        }
        own
    }
}

#[allow(clippy::too_many_arguments)] // Each a part of the replica, named at the one call.
fn gitops(
    settings: &ControllerSettings,
    inventory: &Inventory,
    sink: Arc<dyn StatusSink>,
    applications: Option<kube::Client>,
    registry: &mut Registry,
    work: &Arc<ShardWork>,
    user_agent: &str,
    argo_objects: bool,
    own_cluster: OwnCluster,
) -> Result<Arc<GitOpsReconciler>, ReplicaError> {
    let cache = settings
        .repo_cache
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join("fleetshard-repos"));
    let mut repo_config = RepoCacheConfig::new(cache.clone());
    repo_config.max_cached_reads = settings.manifest_cache.max(1);
    repo_config.limits = settings.read_limits;
    repo_config.allow_local = settings.allow_local_repositories.unwrap_or(!argo_objects);
    repo_config.refuse_plaintext = settings.refuse_plaintext_http;
    repo_config.fetch_timeout = settings.fetch_timeout;
    if !settings.resync.is_zero() {
        // A resync must see a new commit on a branch: the resolved commit is trusted for
        // one period.
        repo_config.refresh_interval = settings.resync;
    }
    let config = ReconcilerConfig {
        control_plane_namespace: settings.control_plane_namespace.clone(),
        fleetshard_namespaces: own_cluster.namespaces,
        wave_delay: settings.sync_wave_delay,
        sync_timeout: settings.sync_timeout,
        hard_refresh: settings.hard_resync,
        server_side_diff: settings.server_side_diff,
        template_match: if settings.refuse_loose_credential_templates {
            TemplateMatch::PathBoundary
        } else {
            TemplateMatch::Prefix
        },
        ..ReconcilerConfig::default()
    };
    // A change of an app's object on its cluster queues the app's refresh (drift is seen,
    // and healed with selfHeal, within seconds).
    let listener = {
        let (work, config) = (work.clone(), config.clone());
        Arc::new(move |instance: &str| {
            work.refresh_apps(config.apps_of_instance(instance));
        })
    };
    // Every write to a cluster or a status first asks the work's lease gate, which closes
    // at the lease deadline.
    let lease: Arc<dyn fleetshard_gitops::apply::LeaseCheck> = {
        let work = work.clone();
        Arc::new(move || work.write_deadline())
    };
    let live_options = LiveOptions {
        refuse_plaintext: settings.refuse_plaintext_http,
        relist_every: settings.cluster_cache_relist,
        ..LiveOptions::default()
    };
    // EKS clusters (awsAuthConfig): tokens from the pod's AWS credentials, as the AWS SDK
    // finds them in the environment; the wall clock signs them.
    let eks = Arc::new(
        EksTokens::new(
            AwsEnv::from_process(),
            Arc::new(SystemClock::since_epoch),
            live_options.call_timeout,
        )
        .map_err(|e| ReplicaError::Start {
            part: "the EKS token source",
            reason: e.to_string(),
        })?,
    );
    let repos = RepoCache::new(repo_config);
    let reconciler = GitOpsReconciler::new(
        Arc::new(InventoryTargets::new(inventory.subscribe())),
        repos.clone(),
        ClusterConnections::new(live_options)
            .with_eks(eks)
            .with_control_plane_identity(own_cluster.identity)
            .with_listener(listener)
            .with_user_agent(user_agent)
            .map_err(|e| ReplicaError::Start {
                part: "the connections to the clusters",
                reason: e.to_string(),
            })?,
        sink,
        lease.clone(),
        Arc::new(SystemClock),
        config,
    );
    let reconciler = events(settings, applications, lease, registry, reconciler);
    let reconciler = match &settings.resource_customizations {
        None => reconciler,
        Some(dir) => {
            let scripts =
                fleetshard_health::ScriptDir::load(dir, Default::default()).map_err(|e| {
                    ReplicaError::Start {
                        part: "the health scripts of --resource-customizations",
                        reason: e.to_string(),
                    }
                })?;
            tracing::info!(
                dir = %dir.display(),
                scripts = scripts.len(),
                "health scripts read"
            );
            reconciler.with_health_scripts(Arc::new(scripts))
        }
    };
    let reconciler = match &settings.app_state {
        None => reconciler,
        Some(redis) => {
            let cache = fleetshard_appstate::AppStateCache::start(redis.clone()).map_err(|e| {
                ReplicaError::Start {
                    part: "Argo CD's app-state cache (--redis)",
                    reason: e.to_string(),
                }
            })?;
            tracing::info!(
                redis = %redis.address,
                "Argo CD's app-state cache is written to Redis"
            );
            reconciler.with_app_state(Arc::new(cache))
        }
    };
    let Some(client) = settings.repo_server.client(argo_objects) else {
        let mut render = settings.render.clone();
        if let Some(sandbox) = &mut render.sandbox {
            // Other tenants' repositories are no tool's business.
            sandbox.hide.push(cache.clone());
        }
        let renderer = StandaloneRenderer::new(repos, render);
        return Ok(Arc::new(reconciler.with_renderer(Arc::new(renderer))));
    };
    let client = RepoServerClient::new(client).map_err(|e| ReplicaError::Start {
        part: "the repo-server client",
        reason: e.to_string(),
    })?;
    tracing::info!(
        repo_server = client.addr(),
        "sources are rendered by Argo CD's repo-server"
    );
    let renderer = RepoServerRenderer::new(client);
    Ok(Arc::new(reconciler.with_renderer(Arc::new(renderer))))
}

/// Kubernetes Events on the Applications, where they are Kubernetes objects (the client
/// the statuses are written with) and `--enable-k8s-event` does not say `none`; counted
/// in `fleetshard_app_events_total`. Elsewhere (fleet files, `up`) there is no object to
/// put them on: none are recorded.
fn events(
    settings: &ControllerSettings,
    applications: Option<kube::Client>,
    lease: Arc<dyn fleetshard_gitops::apply::LeaseCheck>,
    registry: &mut Registry,
    reconciler: GitOpsReconciler,
) -> GitOpsReconciler {
    use fleetshard_gitops::events::{AppEvents, EnabledEvents, EventSettings};
    let Some(client) = applications else {
        return reconciler;
    };
    if settings.events == EnabledEvents::None {
        return reconciler;
    }
    let events = AppEvents::start(
        client,
        EventSettings {
            enabled: settings.events.clone(),
            ..EventSettings::default()
        },
        lease,
        Arc::new(SystemClock),
    );
    registry.register_collector(Box::new(crate::live_metrics::AppEventsCollector(
        events.clone(),
    )));
    reconciler.with_events(events)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_app_backs_off_up_to_the_resync_period() {
        let settings = ControllerSettings {
            resync: Duration::from_secs(90),
            ..ControllerSettings::default()
        };
        let cfg = runtime_config(&settings);
        assert_eq!(cfg.limits.max_delay, Duration::from_secs(90));
        assert_eq!(
            cfg.limits.cooldown, None,
            "the backoff grows until forgotten"
        );
        let off = runtime_config(&ControllerSettings {
            resync: Duration::ZERO,
            ..settings
        });
        assert_eq!(off.resync, None);
        assert_eq!(off.limits.max_delay, fleetshard_controller::DEFAULT_RESYNC);
    }
}
