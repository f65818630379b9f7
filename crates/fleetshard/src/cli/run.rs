//! `fleetshard run`: one replica (what a pod runs). It claims a shard through the store in
//! fenced lease mode, reports which clusters it owns (log, audit log, `/metrics`) and
//! serves `/healthz`, `/readyz` and `/metrics`. SIGTERM or Ctrl-C releases the shard
//! (others take over at once) and exits 0.

pub mod audit;
pub mod http;
pub mod inventory;
pub mod metrics;
pub mod reconcile;

use std::fs::File;
use std::io::Read as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use fleetshard_coord::fenced::ReplicaConfig;
use fleetshard_coord::lease::LeaseTiming;
use fleetshard_coord::runner::{Ownership, OwnershipChange, Runner, RunnerTiming, Status};
use fleetshard_core::placement::PlacementConfig;
use tokio::sync::{mpsc, watch};

use self::audit::AuditEvent;
use self::http::View;
use self::inventory::{FleetInput, StartedInventory};
use self::metrics::Metrics;
use super::input::FleetArgs;
use super::shards::ShardsArg;
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
    /// Where the shard count comes from: `N` (exactly N), `stored[:N]` (what `fleetshard
    /// scale` wrote; N until then), or `auto[:MIN-MAX]` (one shard per live replica). The
    /// elected distributor's setting decides; give every replica the same.
    #[arg(
        long,
        value_name = "N|stored[:N]|auto[:MIN-MAX]",
        default_value = "stored:3",
        env = "FLEETSHARD_SHARDS"
    )]
    pub shards: ShardsArg,
    /// This replica's stable identity (a restarted replica gets its shard back). Default:
    /// the host name.
    #[arg(long, value_name = "NAME", env = "FLEETSHARD_IDENTITY")]
    pub identity: Option<String>,
    /// Address of the HTTP server (`/healthz`, `/readyz`, `/metrics`).
    #[arg(
        long,
        value_name = "ADDR",
        default_value = "127.0.0.1:8080",
        env = "FLEETSHARD_LISTEN"
    )]
    pub listen: SocketAddr,
    /// This replica's zone (its node's `topology.kubernetes.io/zone`): with every
    /// replica's and every cluster's zone known, clusters are placed in their own zone
    /// while that zone is not overloaded.
    #[arg(long, value_name = "ZONE", env = "FLEETSHARD_ZONE")]
    pub zone: Option<String>,
    /// The controller: reconciler, workers, resync.
    #[command(flatten)]
    pub reconcile: reconcile::ReconcileArgs,
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
    /// The protocol, and the argocd protocol's options (`run_argocd.rs`).
    #[command(flatten)]
    pub protocol: super::run_argocd::ProtocolArgs,
}

/// The host name: `/proc/sys/kernel/hostname`, else `$HOSTNAME`.
pub(crate) fn hostname() -> Option<String> {
    let from_proc = std::fs::read_to_string("/proc/sys/kernel/hostname").ok();
    from_proc
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// A fresh incarnation: random, so a restart is told apart from the process before it.
pub(crate) fn incarnation() -> anyhow::Result<u64> {
    let mut b = [0u8; 8];
    File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .context("reading /dev/urandom for the incarnation")?;
    Ok(u64::from_le_bytes(b))
}

/// Runs one replica until SIGTERM or Ctrl-C.
pub fn run(args: RunArgs) -> anyhow::Result<()> {
    let settings = super::run_argocd::env_settings();
    if super::run_argocd::protocol(&args.protocol, &settings) == super::run_argocd::Protocol::Argocd
    {
        return super::run_argocd::run(args, settings);
    }
    let identity = match args.identity.clone().or_else(hostname) {
        Some(i) if !i.trim().is_empty() => i.trim().to_owned(),
        _ => bail!("no identity: give --identity (or FLEETSHARD_IDENTITY); the host name is empty"),
    };
    // Checked before anything starts; used by `serve`.
    args.store.root()?;
    let input = FleetInput::from_args(&args)?;
    super::runtime(super::Runtime::Replica)?.block_on(serve(args, identity, input))
}

async fn serve(args: RunArgs, identity: String, input: FleetInput) -> anyhow::Result<()> {
    let StartedInventory { inventory, kube } = inventory::start(input).await?;
    let store = args.store.open()?;
    let cfg = ReplicaConfig {
        identity: identity.clone(),
        incarnation: incarnation()?,
        root: args.store.root()?.to_owned(),
        shards: args.shards.0,
        timing: LeaseTiming::default(),
        grace: Duration::from_millis(args.grace_ms),
        placement: PlacementConfig::default(),
        zone: args.zone.clone(),
    };
    let mut metrics = Metrics::new();
    // The controller: queues, shard filter, workers, reconciler. Clusters are stopped
    // through it, so a handover is acknowledged only once their work has ended.
    let reconcile::Controller {
        runtime: mut controller,
        stop_hook,
    } = reconcile::start(
        &args.reconcile,
        &inventory,
        reconcile::status_sink(kube, &store, args.store.root()?),
        metrics.registry_mut(),
    )?;
    let (events_tx, events_rx) = mpsc::unbounded_channel();
    let events_rx = controller.follow(events_rx);
    // The fleet comes from `with_fleet`, from the inventory's first snapshot on.
    let (runner, status) = Runner::new(
        store.clone(),
        cfg.clone(),
        RunnerTiming::default(),
        Vec::new(),
        Vec::new(),
        events_tx,
    )?;
    let mut runner = runner
        .with_metrics(Arc::new(metrics.store_latency()))
        .with_stop_hook(stop_hook)
        .with_fleet(inventory::follow_fleet(&inventory));
    // Kept alive for the run: dropping it stops the Deployment watch.
    let _replicas = match &args.shards.1 {
        Some(deployment) => {
            let watch = super::shards::watch_deployment(&args.store.store, deployment).await?;
            runner = runner.with_external_shards(watch.receiver());
            Some(watch)
        }
        None => None,
    };
    let audit = audit::open(args.audit_log.as_deref())?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    tracing::info!(
        %identity,
        incarnation = cfg.incarnation,
        store = %store.describe(),
        listen = %args.listen,
        shards = %args.shards,
        "replica starting"
    );
    let http = tokio::spawn({
        let status = status.clone();
        let app = http::router(Arc::new(move |now| view(&status.borrow(), now)), metrics);
        async move { axum::serve(listener, app).await }
    });
    let audit_task = tokio::spawn(audit::audit_loop(
        events_rx,
        audit,
        identity,
        |e: OwnershipChange| AuditEvent {
            acquire: matches!(e.change, Ownership::Started(_)),
            cluster: match e.change {
                Ownership::Started(c) | Ownership::Stopped(c) => c,
            },
            shard: e.shard,
            generation: e.generation,
            lapsed_ago: e.lapsed_at.map(|t| t.elapsed()),
        },
    ));
    controller.follow_lease(status.clone(), |s: &Status| s.lease_valid_until);
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let runner_task = tokio::spawn(runner.run(shutdown_rx));
    wait_for_signal().await?;
    tracing::info!("signal received: releasing the shard");
    let _ = shutdown_tx.send(true);
    let released = runner_task.await.context("the runner task failed")?;
    // The runner is gone, so the event channel closes: the controller's feed ends, its
    // workers drain, and the audit log is complete.
    controller.shutdown().await;
    audit_task.await.context("the audit task failed")??;
    http.abort();
    tracing::info!(released, "replica stopped");
    Ok(())
}

pub(crate) async fn wait_for_signal() -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.context("waiting for Ctrl-C")?,
        _ = term.recv() => {}
    }
    Ok(())
}

/// The fenced status as the HTTP server sees it at `now`.
fn view(s: &Status, now: tokio::time::Instant) -> View {
    View {
        ready: readiness(s, now),
        shard: s.shard,
        is_distributor: s.is_distributor,
        generation: s.generation,
        acting: s.acting.len(),
        lease_valid_secs: s
            .lease_valid_until
            .map_or(0.0, |u| u.saturating_duration_since(now).as_secs_f64()),
        store_errors: s.store_errors,
        handovers: s.handovers,
        failovers: s.failovers,
        shard_count: s.shard_count,
    }
}

/// Ready: holding a shard with a valid lease, or a spare because every shard is held.
fn readiness(s: &Status, now: tokio::time::Instant) -> Result<String, String> {
    if s.stopping {
        return Err("stopping".into());
    }
    match (s.shard, s.lease_valid_until) {
        (Some(n), Some(until)) if until > now => Ok(format!("holding shard {n}")),
        (Some(n), _) => Err(format!("shard {n}: lease not renewed in time")),
        (None, _) if s.spare => Ok("spare: every shard is held".into()),
        (None, _) if !s.listed => Err("store not read yet".into()),
        (None, _) => match &s.last_store_error {
            Some(e) => Err(format!("no shard held; last store error: {e}")),
            None => Err("no shard held yet (claiming)".into()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_urls_are_checked() {
        use super::super::store::open_store;
        assert!(open_store("ftp://x").is_err());
        assert!(open_store("memory://").is_ok());
        #[cfg(not(feature = "etcd"))]
        {
            let e = open_store("etcd://localhost:2379")
                .err()
                .unwrap()
                .to_string();
            assert!(e.contains("--features etcd"), "{e}");
        }
    }

    #[test]
    fn readiness_reasons() {
        let now = tokio::time::Instant::now();
        let mut s = Status::default();
        assert!(readiness(&s, now).is_err());
        s.listed = true;
        s.spare = true;
        assert!(readiness(&s, now).is_ok());
        s.spare = false;
        s.shard = Some(1);
        s.lease_valid_until = Some(now + Duration::from_secs(1));
        assert!(readiness(&s, now).is_ok());
        let later = readiness(&s, now + Duration::from_secs(2));
        assert!(later.unwrap_err().contains("lease"));
        assert_eq!(view(&s, now).lease_valid_secs, 1.0);
    }
}
