//! `fleetshard run`: one replica (what a pod runs). The flags and Argo CD's environment
//! are mapped to `fleetshard_replica::ReplicaSettings` here; the replica itself — built,
//! spawned, drained — is `fleetshard_replica::Replica`. SIGTERM or Ctrl-C hands the shard
//! over (others take over at once) and exits 0.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, bail};
use fleetshard_controller::inventory::{
    DirectoryConfig, InventoryContent, KubernetesConfig, shared_projects, specs_by_app_key,
};
use fleetshard_coord::fenced::{DropGuard, MAX_CAPACITY};
use fleetshard_core::ShardSpec;
use fleetshard_core::placement::PlacementConfig;
use fleetshard_replica::{
    ControllerSettings, FencedSettings, FleetSource, ProtocolSettings, ReconcilerKind, Replica,
    ReplicaSettings,
};
use fleetshard_util::boolean::go_bool;
use fleetshard_util::duration::parse_go_duration;

use super::input::{self, FleetArgs};
use super::plan::LoadArgs;
use super::protocol::{Protocol, ProtocolArgs, argo_settings, env_settings, protocol};
use super::shards::{Deployment, ShardsArg};
use super::store::StoreArgs;

/// `fleetshard run` options.
#[derive(Debug, clap::Args)]
#[command(
    group(clap::ArgGroup::new("input").required(true).args(["fleet", "clusters", "fleet_dir", "argocd_namespace"])),
    after_help = "Examples:\n  \
        fleetshard run --store sqlite://fleetshard.db --fleet fleet.yaml --identity r1 --listen 127.0.0.1:8081\n  \
        fleetshard status --store sqlite://fleetshard.db"
)]
pub struct RunArgs {
    /// The store.
    #[command(flatten)]
    pub store: StoreArgs,
    /// The fleet.
    #[command(flatten)]
    pub input: FleetArgs,
    /// A directory of Argo CD cluster Secrets and Applications (or native fleet files),
    /// watched: changes are placed without a restart (instead of --fleet/--clusters).
    #[arg(long, value_name = "DIR", env = "FLEETSHARD_FLEET_DIR")]
    pub fleet_dir: Option<PathBuf>,
    /// Watch Argo CD's own objects through the Kubernetes API (in-cluster, else
    /// KUBECONFIG): the cluster Secrets in NAMESPACE and the Applications (see
    /// --application-namespace); app statuses are written on the Applications.
    #[arg(long, value_name = "NAMESPACE", env = "FLEETSHARD_ARGOCD_NAMESPACE")]
    pub argocd_namespace: Option<String>,
    /// With --argocd-namespace: the namespace whose Applications are watched, or `*` for
    /// every namespace (Argo CD's apps in any namespace). Default: --argocd-namespace.
    #[arg(
        long,
        value_name = "NAMESPACE|*",
        requires = "argocd_namespace",
        env = "FLEETSHARD_APPLICATION_NAMESPACE"
    )]
    pub application_namespace: Option<String>,
    /// What a cluster costs, for balanced placement as distributor.
    #[command(flatten)]
    pub load: LoadArgs,
    /// Where the shard count comes from: `N` (exactly N), `stored[:N]` (what `fleetshard
    /// scale` wrote; N until then), `auto[:MIN-MAX]` (one shard per live replica), or
    /// `deployment[:[NAMESPACE/]NAME]` (a Deployment's `spec.replicas`, followed as `kubectl
    /// scale` or an HPA changes it; NAME defaults to `ARGOCD_APPLICATION_CONTROLLER_NAME`,
    /// NAMESPACE to the `kubernetes://` store's). The elected distributor's setting
    /// decides; give every replica the same.
    #[arg(
        long,
        value_name = "N|stored[:N]|auto[:MIN-MAX]|deployment[:[NAMESPACE/]NAME]",
        default_value = "stored:3",
        env = "FLEETSHARD_SHARDS"
    )]
    pub shards: ShardsArg,
    /// This replica's stable identity (a restarted replica gets its shard back). Default:
    /// the host name.
    #[arg(long, value_name = "NAME", env = "FLEETSHARD_IDENTITY")]
    pub identity: Option<String>,
    /// Address of the HTTP server (`/healthz`, `/readyz`, `/metrics`; the dashboard too
    /// with `--dashboard`).
    #[arg(
        long,
        value_name = "ADDR",
        default_value = "127.0.0.1:8080",
        env = "FLEETSHARD_LISTEN"
    )]
    pub listen: SocketAddr,
    /// Serve the read-only dashboard on `--listen` too (`/dashboard`, `/api/dashboard`:
    /// cluster names, servers and zones, app names and statuses, to whoever reaches the
    /// address; no authentication). Off by default.
    #[arg(long, env = "FLEETSHARD_DASHBOARD")]
    pub dashboard: bool,
    /// This replica's zone (its node's `topology.kubernetes.io/zone`): with every
    /// replica's and every cluster's zone known, clusters are placed in their own zone
    /// while that zone is not overloaded.
    #[arg(long, value_name = "ZONE", env = "FLEETSHARD_ZONE")]
    pub zone: Option<String>,
    /// This replica's capacity relative to the others' (e.g. its CPU cores), advertised in
    /// its shard record: the distributor gives each shard, and each zone, load in
    /// proportion to its holders' capacities. Default: the CPUs this process may use (the
    /// pod's CPU limit). A fleet file's `shards:` capacities, when given, win.
    #[arg(
        long,
        value_name = "1-1024",
        value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_CAPACITY)),
        env = "FLEETSHARD_CAPACITY"
    )]
    pub capacity: Option<u32>,
    /// The controller: reconciler, workers, resync.
    #[command(flatten)]
    pub reconcile: ReconcileArgs,
    /// Start even when the fleet has no clusters. Refused otherwise: an empty fleet (an
    /// empty or truncated file, a wrong directory) placed by the distributor would leave
    /// every cluster unowned.
    #[arg(long, env = "FLEETSHARD_ALLOW_EMPTY_FLEET")]
    pub allow_empty_fleet: bool,
    /// Append one JSON line per ownership change to this file.
    #[arg(long, value_name = "FILE", env = "FLEETSHARD_AUDIT_LOG")]
    pub audit_log: Option<PathBuf>,
    /// How long a shard may have no live holder before the distributor gives its clusters
    /// to other shards, in milliseconds.
    #[arg(
        long,
        value_name = "MS",
        default_value_t = 500,
        env = "FLEETSHARD_GRACE_MS"
    )]
    pub grace_ms: u64,
    /// The largest share of the committed clusters, in percent, that the distributor drops
    /// at once when the inventory shrinks (100: no limit). A larger drop (an emptied or
    /// truncated fleet file) keeps the clusters assigned until the smaller inventory has
    /// held for `--fleet-drop-grace-ms`.
    #[arg(
        long,
        value_name = "PERCENT",
        default_value_t = 50,
        value_parser = clap::value_parser!(u32).range(0..=100),
        env = "FLEETSHARD_MAX_FLEET_DROP_PERCENT"
    )]
    pub max_fleet_drop_percent: u32,
    /// How long an inventory that drops more than `--max-fleet-drop-percent` of the
    /// committed clusters must hold, unchanged, before the distributor commits it, in
    /// milliseconds.
    #[arg(
        long,
        value_name = "MS",
        default_value_t = 12_000,
        env = "FLEETSHARD_FLEET_DROP_GRACE_MS"
    )]
    pub fleet_drop_grace_ms: u64,
    /// The protocol, and the argocd protocol's options (`protocol.rs`).
    #[command(flatten)]
    pub protocol: ProtocolArgs,
}

/// Which reconciler the workers run (`--reconciler`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReconcilerArg {
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
    pub reconciler: ReconcilerArg,
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
        value_parser = parse_go_duration
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
        value_parser = parse_go_duration
    )]
    pub resync_jitter: Duration,
    /// Every app is refreshed hard (caches bypassed, the repository fetched again) at
    /// least this often: Argo CD's `timeout.hard.reconciliation`. `0`: never.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "0",
        env = "ARGOCD_HARD_RECONCILIATION_TIMEOUT",
        value_parser = parse_go_duration
    )]
    pub app_hard_resync: Duration,
    /// A sync operation running longer than this (as the replica stepping it counts) is
    /// terminated: Argo CD's `controller.sync.timeout.seconds`. `0`: no timeout.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "0",
        env = "ARGOCD_APPLICATION_CONTROLLER_SYNC_TIMEOUT",
        value_parser = parse_go_duration
    )]
    pub sync_timeout: Duration,
    /// Compare every app server-side (a server-side apply dry run per resource; Argo CD's
    /// `controller.diff.server.side`) unless its `compare-options` say
    /// `ServerSideDiff=false`; without it, only apps that say `ServerSideDiff=true`.
    #[arg(
        long,
        value_name = "BOOL",
        default_value = "false",
        env = "ARGOCD_APPLICATION_CONTROLLER_SERVER_SIDE_DIFF",
        action = clap::ArgAction::Set,
        value_parser = go_bool
    )]
    pub server_side_diff_enabled: bool,
    /// The pause after each sync wave but the last, before its health is judged (Argo CD's
    /// `ARGOCD_SYNC_WAVE_DELAY`, in seconds).
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "2",
        env = "ARGOCD_SYNC_WAVE_DELAY",
        value_parser = parse_go_duration
    )]
    pub sync_wave_delay: Duration,
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
    /// Whether apps may read `file://` URLs and local paths. Default: refused with
    /// --argocd-namespace (a tenant's Application could read the replica's own files),
    /// allowed with local fleet files and directories.
    #[arg(
        long,
        value_name = "BOOL",
        env = "FLEETSHARD_ALLOW_LOCAL_REPOSITORIES",
        action = clap::ArgAction::Set
    )]
    pub allow_local_repositories: Option<bool>,
    /// Bytes of manifest files one app may read (Argo CD's repo-server bounds a
    /// directory's combined manifests at 10 MiB by default).
    #[arg(
        long,
        value_name = "BYTES",
        default_value_t = 10 * 1024 * 1024,
        env = "FLEETSHARD_MAX_MANIFEST_BYTES"
    )]
    pub max_manifest_bytes: u64,
    /// Objects one app may render to.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 10_000,
        env = "FLEETSHARD_MAX_OBJECTS"
    )]
    pub max_objects: usize,
    /// Refuse plaintext `http://` destination clusters and plaintext `http://` and
    /// `git://` repositories: their credentials and content would cross the network in
    /// clear. Without it, each is warned about once.
    #[arg(long, env = "FLEETSHARD_REFUSE_PLAINTEXT_HTTP")]
    pub refuse_plaintext_http: bool,
    /// The longest one fetch of a repository may take (Go duration): a server that
    /// trickles data or never answers (a `git://` tarpit) costs an app a condition and its
    /// worker this long, no more. A replica told to stop waits for a fetch in flight at
    /// most this long (its cluster's work ends before the cluster is handed over).
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "5m",
        value_parser = parse_go_duration,
        env = "FLEETSHARD_REPO_FETCH_TIMEOUT"
    )]
    pub repo_fetch_timeout: Duration,
    /// A credential template (`repo-creds` Secret) matches a `repoURL` only at a path
    /// boundary: `https://git.example.com` then matches `https://git.example.com/…` but
    /// not `https://git.example.com.evil.net/…`. Without it, Argo CD's string prefix
    /// rule applies and such a match is logged and shown on the app
    /// (`RepoCredentialsWarning`).
    #[arg(long, env = "FLEETSHARD_REFUSE_LOOSE_CREDENTIAL_TEMPLATES")]
    pub refuse_loose_credential_templates: bool,
    /// How long after a kind's last complete list its watch on a cluster is restarted with
    /// a new list (Argo CD's watch resync): what a watch missed shows within this period
    /// plus one list. Units: `ms`, `s`, `m`, `h`.
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "10m",
        env = "ARGOCD_CLUSTER_CACHE_WATCH_RESYNC_DURATION",
        value_parser = parse_go_duration
    )]
    pub cluster_cache_relist: Duration,
    /// A directory of health scripts in Argo CD's resource_customizations layout
    /// (`<group>/<kind>/health.lua`, `_` for a wildcard segment; e.g. a checkout of Argo
    /// CD's own): checked after argocd-cm's scripts, before the built-in checks.
    #[arg(long, value_name = "DIR", env = "FLEETSHARD_RESOURCE_CUSTOMIZATIONS")]
    pub resource_customizations: Option<PathBuf>,
    /// Where sources are rendered.
    #[command(flatten)]
    pub render: super::repo_server::RepoServerArgs,
    /// Argo CD's app-state cache in Redis.
    #[command(flatten)]
    pub redis: super::redis::RedisArgs,
    /// The Kubernetes Events recorded on Applications (with `--argocd-namespace`), as
    /// Argo CD's `--enable-k8s-event`: `all`, `none`, or reasons (`OperationStarted`,
    /// `OperationCompleted`, `ResourceUpdated`, `StatusRefreshed`), comma-separated.
    #[arg(
        long = "enable-k8s-event",
        value_name = "REASONS",
        default_value = "all",
        value_delimiter = ',',
        env = "ARGOCD_ENABLE_K8S_EVENT"
    )]
    pub enable_k8s_event: Vec<String>,
}

impl ReconcileArgs {
    fn settings(&self) -> anyhow::Result<ControllerSettings> {
        Ok(ControllerSettings {
            reconciler: match self.reconciler {
                ReconcilerArg::Gitops => ReconcilerKind::Gitops,
                ReconcilerArg::None => ReconcilerKind::None,
            },
            status_processors: self.status_processors,
            operation_processors: self.operation_processors,
            resync: self.resync,
            resync_jitter: self.resync_jitter,
            hard_resync: (!self.app_hard_resync.is_zero()).then_some(self.app_hard_resync),
            sync_timeout: (!self.sync_timeout.is_zero()).then_some(self.sync_timeout),
            server_side_diff: self.server_side_diff_enabled,
            sync_wave_delay: self.sync_wave_delay,
            repo_cache: self.repo_cache.clone(),
            manifest_cache: self.manifest_cache,
            control_plane_namespace: self.control_plane_namespace.clone(),
            allow_local_repositories: self.allow_local_repositories,
            read_limits: fleetshard_gitops::source::ReadLimits {
                max_manifest_bytes: self.max_manifest_bytes,
                max_objects: self.max_objects,
                ..Default::default()
            },
            refuse_plaintext_http: self.refuse_plaintext_http,
            fetch_timeout: self.repo_fetch_timeout,
            refuse_loose_credential_templates: self.refuse_loose_credential_templates,
            cluster_cache_relist: self.cluster_cache_relist,
            repo_server: self.render.setting()?,
            render: self.render.standalone()?,
            resource_customizations: self.resource_customizations.clone(),
            app_state: self.redis.settings()?,
            events: fleetshard_gitops::events::EnabledEvents::from_list(&self.enable_k8s_event),
        })
    }
}

/// The host name: `/proc/sys/kernel/hostname`, else `$HOSTNAME`.
fn hostname() -> Option<String> {
    let from_proc = std::fs::read_to_string("/proc/sys/kernel/hostname").ok();
    from_proc
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// The replica's settings from the command line and the environment; files named by
/// `--fleet`/`--clusters`/`--apps` are read now (errors name file, object and field).
pub fn settings(args: &RunArgs) -> anyhow::Result<ReplicaSettings> {
    let identity = match args.identity.clone().or_else(hostname) {
        Some(i) if !i.trim().is_empty() => i.trim().to_owned(),
        _ => bail!("no identity: give --identity (or FLEETSHARD_IDENTITY); the host name is empty"),
    };
    let incarnation = fleetshard_replica::fresh_incarnation()?;
    let env = env_settings();
    let protocol_kind = protocol(&args.protocol, &env);
    let (fleet, shard_specs) = fleet_source(args, protocol_kind)?;
    let protocol = match protocol_kind {
        Protocol::Fenced => ProtocolSettings::Fenced(FencedSettings {
            shards: args.shards.0,
            deployment: args.shards.1.as_ref().map(Deployment::resolve),
            grace: Duration::from_millis(args.grace_ms),
            placement: PlacementConfig {
                cluster_base_load: args.load.cluster_base_load,
                ..PlacementConfig::default()
            },
            drop_guard: DropGuard {
                max_drop_percent: args.max_fleet_drop_percent,
                grace: Duration::from_millis(args.fleet_drop_grace_ms),
                allow_empty: args.allow_empty_fleet,
            },
            shard_specs,
            ..FencedSettings::default()
        }),
        Protocol::Argocd => ProtocolSettings::Argocd(argo_settings(
            &args.protocol,
            &args.shards,
            &env,
            &identity,
            incarnation,
        )?),
    };
    Ok(ReplicaSettings {
        identity,
        incarnation,
        store: args.store.url()?,
        root: args.store.root()?.to_owned(),
        listen: args.listen,
        dashboard: args.dashboard,
        zone: args.zone.clone(),
        capacity: capacity(args.capacity, super::available_cpus()),
        audit_log: args.audit_log.clone(),
        allow_empty_fleet: args.allow_empty_fleet,
        fleet,
        controller: args.reconcile.settings()?,
        protocol,
    })
}

/// This replica's capacity: `--capacity` when given (clap checked its range), else the
/// CPUs it may use, clamped to the range.
pub fn capacity(configured: Option<u32>, cpus: Option<usize>) -> u32 {
    configured.unwrap_or_else(|| {
        let cpus = cpus.map_or(1, |n| u32::try_from(n).unwrap_or(MAX_CAPACITY));
        cpus.clamp(1, MAX_CAPACITY)
    })
}

/// Where the inventory comes from, and the shards whose capacity and zone a fleet file
/// fixes (its `shards:` section, fenced mode only).
fn fleet_source(
    args: &RunArgs,
    protocol: Protocol,
) -> anyhow::Result<(FleetSource, Vec<ShardSpec>)> {
    let source = |s| Ok((s, Vec::new()));
    if let Some(dir) = &args.fleet_dir {
        return source(FleetSource::Directory(DirectoryConfig {
            in_cluster_enabled: args.input.in_cluster.in_cluster_enabled,
            ..DirectoryConfig::new(dir.clone())
        }));
    }
    if let Some(ns) = &args.argocd_namespace {
        let apps = match args.application_namespace.as_deref() {
            None => Some(ns.clone()),
            Some("*") => None,
            Some(other) => Some(other.to_owned()),
        };
        return source(FleetSource::Kubernetes(KubernetesConfig {
            secrets_namespace: ns.clone(),
            apps_namespace: apps,
            in_cluster_enabled: args.input.in_cluster.in_cluster_enabled,
        }));
    }
    let loaded = input::load(&args.input.source()?, input::Specs::Keep)?;
    for w in &loaded.warnings {
        tracing::warn!(source = %w.source, "{}", w.message);
    }
    let shard_specs = match protocol {
        // Entry n fixes shard n's capacity (and zone, when named), over what its holder
        // advertises; the count still comes from --shards.
        Protocol::Fenced => loaded.shards,
        Protocol::Argocd if !loaded.shards.is_empty() => {
            tracing::warn!(
                listed = loaded.shards.len(),
                "the fleet file's shards: section (zones, capacities) is not used by the argocd protocol: Argo CD's algorithms place by shard count only"
            );
            Vec::new()
        }
        Protocol::Argocd => Vec::new(),
    };
    let fleet = FleetSource::Fixed(InventoryContent {
        clusters: loaded.fleet.clusters,
        apps: loaded.fleet.apps,
        specs: specs_by_app_key(loaded.specs),
        credentials: loaded.credentials,
        projects: shared_projects(loaded.projects),
        repositories: loaded.repositories,
        // A fleet file's argocd-cm is not read (warned about as an unrelated object):
        // renders use Argo CD's default settings.
        argocd_cm: Default::default(),
    });
    Ok((fleet, shard_specs))
}

/// Runs one replica until SIGTERM or Ctrl-C.
pub fn run(args: RunArgs) -> anyhow::Result<()> {
    // Not dumpable: the programs a tenant's render runs (same user) cannot read this
    // process's memory or environment through /proc, nor trace it.
    if let Err(e) =
        rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
    {
        tracing::warn!(error = %e, "cannot make the replica undumpable");
    }
    let settings = settings(&args)?;
    // Its size is the fleet's, unknown until loaded and changing: raised, not checked.
    let open_files = super::limits::raise_open_files();
    tracing::debug!(open_files, "open-file limit");
    let runtime = super::runtime(super::Runtime::Replica)?;
    let outcome = runtime.block_on(async move {
        let replica = Replica::build(settings).await?.spawn()?;
        wait_for_signal().await?;
        tracing::info!("signal received: handing the shard over");
        replica.shutdown().await?;
        Ok(())
    });
    // Work still on a blocking thread after the handover (a fetch from a server that
    // never answers) is abandoned, not waited for: the process exits, and the programs it
    // started die with it (the render sandbox's parent-death signal).
    runtime.shutdown_timeout(ABANDON_BLOCKING_AFTER);
    outcome
}

/// How long a stopping replica waits, after its handover, for work still running on
/// blocking threads.
const ABANDON_BLOCKING_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// Set to `1` by `fleetshard up` on the processes it starts (`run`, `simulate`), whose
/// standard input is a pipe `up` holds open and never writes: end of file on it means `up`
/// is gone, SIGKILL included, and the process stops as on SIGTERM instead of running on
/// as an orphan.
pub(super) const STOP_WITH_PARENT_ENV: &str = "FLEETSHARD_STOP_ON_STDIN_EOF";

/// Returns on SIGTERM or Ctrl-C (every long-running command: `run`, `simulate`, `up`,
/// `pin --watch`), or once standard input ends when [`STOP_WITH_PARENT_ENV`] says so.
pub(super) async fn wait_for_signal() -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let parent_gone =
        stdin_closed(std::env::var_os(STOP_WITH_PARENT_ENV).is_some_and(|v| v == "1"));
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.context("waiting for Ctrl-C")?,
        _ = term.recv() => {}
        _ = parent_gone => tracing::warn!(
            "standard input closed: the `fleetshard up` that started this process is gone; \
             stopping as on SIGTERM"
        ),
    }
    Ok(())
}

/// Resolves once standard input reaches its end (if `watch`; never otherwise). Read on a
/// detached thread of its own: tokio's stdin would hold the runtime's shutdown until the
/// read returned.
async fn stdin_closed(watch: bool) {
    if !watch {
        return std::future::pending().await;
    }
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let spawned = std::thread::Builder::new()
        .name("fleetshard-stdin".into())
        .spawn(move || {
            let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
            let _ = tx.send(());
        });
    match spawned {
        Ok(_) => {
            let _ = rx.await;
        }
        Err(e) => {
            tracing::warn!("cannot watch standard input for the parent's exit: {e}");
            std::future::pending::<()>().await;
        }
    }
}
