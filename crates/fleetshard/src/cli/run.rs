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
    ControllerSettings, FencedSettings, FleetSource, ProtocolSettings, Replica, ReplicaSettings,
};

use super::input::{self, FleetArgs};
use super::plan::LoadArgs;
use super::protocol::{Protocol, ProtocolArgs, argo_settings, env_settings, protocol};
use super::shards::{Deployment, ShardsArg};
use super::store::StoreArgs;

mod costs;
mod reconcile;

pub use reconcile::{ReconcileArgs, ReconcilerArg};

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
    /// Measured costs: smoothing, weight, headroom, hysteresis (`run/costs.rs`).
    #[command(flatten)]
    pub costs: costs::CostArgs,
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
            hysteresis: args.costs.hysteresis()?,
            split_clusters: args.costs.split_clusters,
            ..FencedSettings::default()
        }),
        Protocol::Argocd if args.costs.split_clusters => {
            return Err(crate::cli::exit::BadValue(
                "--split-clusters: Argo CD's protocol places whole clusters (its shard ConfigMap has no place for slices); use --protocol fenced".into(),
            )
            .into());
        }
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
        controller: ControllerSettings {
            costs: args.costs.settings(super::available_cpus())?,
            ..args.reconcile.settings()?
        },
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
