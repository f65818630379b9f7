//! `fleetshard run --protocol argocd`: one replica in Argo CD-compatible heartbeat mode
//! (`fleetshard_coord::argocd_runner`). The map lives at the store key
//! `configmap/argocd-app-controller-shard-cm/shardControllerMapping` (Argo CD's own
//! ConfigMap with the Kubernetes backend); `--root` is not used.
//!
//! Settings are Argo CD's variables, read as Argo CD reads them (`Settings::from_env`,
//! warnings logged): `ARGOCD_CONTROLLER_SHARD` pins, `ARGOCD_CONTROLLER_HEARTBEAT_TIME` is
//! H (10–60 s; stale after 3H), `ARGOCD_CONTROLLER_SHARDING_ALGORITHM` picks the
//! distribution. The replica count: `--shards N` (or `FLEETSHARD_SHARDS=N`) if given as a
//! number, else `ARGOCD_CONTROLLER_REPLICAS` if above 0, else the `stored:N` default's N.
//!
//! The audit log's `generation` is the replica count the ownership was computed with (the
//! distribution is a function of it), so lines of different replicas compare.
//!
//! `--heartbeat-ms` (hidden) is for tests only: it sets H below Argo CD's 10 s minimum so
//! that a process test runs in seconds. It has no environment variable (so a deployment
//! cannot pick it up by accident), is refused below 50 ms, and logs a warning.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::ValueEnum;
use fleetshard_coord::argocd::{ENV_REPLICAS, STALE_AFTER_HEARTBEATS, Settings, WallTime};
use fleetshard_coord::argocd_runner::{ArgoConfig, ArgoRunner, ArgoStatus, WallClock};
use fleetshard_coord::fenced::ShardCount;
use fleetshard_coord::runner::{Ownership, OwnershipChange};
use fleetshard_core::argo::ArgoAlgorithm;
use tokio::sync::{mpsc, watch};

use super::run::audit::{self, AuditEvent};
use super::run::http::{self, View};
use super::run::inventory::{self, FleetInput, StartedInventory};
use super::run::metrics::Metrics;
use super::run::reconcile;
use super::run::{RunArgs, hostname, incarnation, wait_for_signal};

/// The environment variable of `--sharding-algorithm` (Argo CD's).
pub const ENV_ALGORITHM: &str = "ARGOCD_CONTROLLER_SHARDING_ALGORITHM";

/// The coordination protocol of `run` and `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Protocol {
    /// fleetshard's fenced lease mode (records under `--root`).
    Fenced,
    /// Argo CD's heartbeat map (`argocd-app-controller-shard-cm`).
    Argocd,
}

/// The options of `run` that choose and configure the protocol.
#[derive(Debug, Clone, clap::Args)]
pub struct ProtocolArgs {
    /// Coordination protocol. Default: `argocd` when
    /// `ARGOCD_ENABLE_DYNAMIC_CLUSTER_DISTRIBUTION=true`, else `fenced`.
    #[arg(long, value_enum, env = "FLEETSHARD_PROTOCOL")]
    pub protocol: Option<Protocol>,
    /// argocd protocol: Argo CD's distribution of clusters over shards (`legacy`,
    /// `round-robin`, `consistent-hashing`; default legacy). From the environment, an
    /// unknown name falls back to legacy with a warning, as in Argo CD.
    #[arg(long, value_name = "NAME", env = ENV_ALGORITHM)]
    pub sharding_algorithm: Option<String>,
    /// TEST ONLY: the heartbeat period in milliseconds, below Argo CD's 10 s minimum.
    #[arg(long, value_name = "MS", hide = true)]
    pub heartbeat_ms: Option<u64>,
}

/// The protocol chosen: the flag (or `FLEETSHARD_PROTOCOL`), else Argo CD's switch.
pub fn protocol(args: &ProtocolArgs, settings: &Settings) -> Protocol {
    args.protocol
        .unwrap_or(if settings.dynamic_cluster_distribution {
            Protocol::Argocd
        } else {
            Protocol::Fenced
        })
}

/// The process environment, as `Settings::from_env` reads it.
pub fn env_settings() -> Settings {
    Settings::from_env(|k| std::env::var(k).ok())
}

/// The algorithm: an unknown name from `--sharding-algorithm` is an error; from
/// `ARGOCD_CONTROLLER_SHARDING_ALGORITHM` it falls back to legacy with a warning (Argo CD).
pub fn algorithm(flag: Option<&str>) -> anyhow::Result<ArgoAlgorithm> {
    let Some(name) = flag else {
        return Ok(ArgoAlgorithm::Legacy);
    };
    let from_env = std::env::var(ENV_ALGORITHM).ok().as_deref() == Some(name);
    match ArgoAlgorithm::parse(name) {
        Ok(a) => Ok(a),
        Err(e) if from_env => {
            tracing::warn!("{ENV_ALGORITHM}: {e}; using legacy");
            Ok(ArgoAlgorithm::Legacy)
        }
        Err(e) => bail!("--sharding-algorithm: {e}"),
    }
}

/// The replica count (module docs).
fn replicas(shards: ShardCount, settings: &Settings) -> anyhow::Result<u32> {
    let from_argo = u32::try_from(settings.replicas).ok().filter(|n| *n > 0);
    match (shards, from_argo) {
        (ShardCount::Fixed(n), _) => Ok(n),
        // `deployment`: the Deployment's replicas, read when serving starts.
        (ShardCount::External { default }, _) => Ok(default),
        (_, Some(n)) => Ok(n),
        (ShardCount::Desired { default }, None) => Ok(default),
        (other, None) => bail!(
            "--shards {other:?}: the argocd protocol needs a fixed replica count (--shards N or {ENV_REPLICAS})"
        ),
    }
}

/// The heartbeat and stale-after durations: Argo CD's, or the test-only override.
fn timing(args: &ProtocolArgs, settings: &Settings) -> anyhow::Result<(Duration, Duration)> {
    match args.heartbeat_ms {
        None => Ok((settings.heartbeat(), settings.stale_after())),
        Some(ms) if ms < 50 => bail!("--heartbeat-ms {ms}: at least 50 ms"),
        Some(ms) => {
            tracing::warn!(
                ms,
                "--heartbeat-ms is for tests only: Argo CD requires at least 10 s"
            );
            let h = Duration::from_millis(ms);
            Ok((h, h * STALE_AFTER_HEARTBEATS))
        }
    }
}

/// Runs one heartbeat-mode replica until SIGTERM or Ctrl-C.
pub fn run(args: RunArgs, settings: Settings) -> anyhow::Result<()> {
    for w in &settings.warnings {
        tracing::warn!("{w}");
    }
    let input = FleetInput::from_args(&args)?;
    let identity = match args.identity.clone().or_else(hostname) {
        Some(i) if !i.trim().is_empty() => i.trim().to_owned(),
        _ => bail!("no identity: give --identity (or FLEETSHARD_IDENTITY); the host name is empty"),
    };
    let count = replicas(args.shards.0, &settings)?;
    let (heartbeat, stale_after) = timing(&args.protocol, &settings)?;
    let cfg = ArgoConfig {
        pin: settings.pin(),
        heartbeat,
        stale_after,
        algorithm: algorithm(args.protocol.sharding_algorithm.as_deref())?,
        jitter_seed: incarnation()?,
        ..ArgoConfig::new(identity)
    };
    super::runtime(super::Runtime::Replica)?.block_on(serve(args, cfg, count, input))
}

async fn serve(
    args: RunArgs,
    cfg: ArgoConfig,
    count: u32,
    input: FleetInput,
) -> anyhow::Result<()> {
    let StartedInventory { inventory, kube } = inventory::start(input).await?;
    // Argo CD's distribution is computed over the clusters known at start; apps (and
    // their destinations) are followed by the shard filter. A cluster added later is
    // placed after a restart (`docs/argocd-compatibility.md`).
    let fleet = inventory.snapshot();
    let store = args.store.open()?;
    let identity = cfg.identity.clone();
    let mut metrics = Metrics::new();
    let reconcile::Controller {
        runtime: mut controller,
        stop_hook,
    } = reconcile::start(
        &args.reconcile,
        &inventory,
        // `--root` names where local-mode statuses go (the map itself is at Argo CD's key).
        reconcile::status_sink(kube, &store, args.store.root()?),
        metrics.registry_mut(),
    )?;
    let (events_tx, runner_events) = mpsc::unbounded_channel();
    // The heartbeat protocol has no stop gate: a stop event is carried out by the
    // controller (work in flight ends) before it reaches the audit log.
    let events_rx = controller.follow_stopping(runner_events, stop_hook);
    // A fixed count, or the Deployment's replicas (Argo CD's source) forwarded as they
    // change; a deleted Deployment keeps the last count.
    let (count_tx, count_rx) = watch::channel(count);
    let _replicas = match &args.shards.1 {
        Some(deployment) => {
            let replicas = super::shards::watch_deployment(&args.store.store, deployment).await?;
            let mut rx = replicas.receiver();
            if let Some(n) = *rx.borrow_and_update() {
                count_tx.send_replace(n.max(1));
            }
            tokio::spawn(async move {
                while rx.changed().await.is_ok() {
                    if let Some(n) = *rx.borrow_and_update() {
                        count_tx.send_replace(n.max(1));
                    }
                }
            });
            Some(replicas)
        }
        None => None,
    };
    let wall: WallClock = Arc::new(WallTime::now);
    let (runner, status) = ArgoRunner::new(
        store.clone(),
        cfg.clone(),
        fleet.clusters.to_vec(),
        &fleet.apps,
        count_rx,
        wall,
        events_tx,
    )?;
    let audit_file = audit::open(args.audit_log.as_deref())?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    tracing::info!(
        %identity,
        store = %store.describe(),
        key = %cfg.key,
        listen = %args.listen,
        replicas = count,
        pin = ?cfg.pin,
        algorithm = cfg.algorithm.name(),
        heartbeat = ?cfg.heartbeat,
        "replica starting (argocd protocol)"
    );
    let http = tokio::spawn({
        let status = status.clone();
        let app = http::router(Arc::new(move |now| view(&status.borrow(), now)), metrics);
        async move { axum::serve(listener, app).await }
    });
    let audit_task = tokio::spawn(audit::audit_loop(
        events_rx,
        audit_file,
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
    // Nothing is admitted past the time the entry is known to be ours (2H after the last
    // confirmed heartbeat).
    controller.follow_lease(status.clone(), |s: &ArgoStatus| s.valid_until);
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let runner_task = tokio::spawn(runner.run(shutdown_rx));
    wait_for_signal().await?;
    tracing::info!("signal received: freeing the entry");
    let _ = shutdown_tx.send(true);
    let freed = runner_task.await.context("the runner task failed")?;
    // The runner is gone, so the event channel closes: the controller's feed ends, its
    // workers drain, and the audit log is complete.
    controller.shutdown().await;
    audit_task.await.context("the audit task failed")??;
    http.abort();
    tracing::info!(freed, "replica stopped");
    Ok(())
}

/// The heartbeat-mode status as the HTTP server sees it at `now`.
fn view(s: &ArgoStatus, now: tokio::time::Instant) -> View {
    View {
        ready: s.readiness(now),
        shard: s.shard,
        is_distributor: false,
        generation: u64::from(s.replicas),
        acting: s.acting.len(),
        lease_valid_secs: s
            .valid_until
            .map_or(0.0, |u| u.saturating_duration_since(now).as_secs_f64()),
        store_errors: s.store_errors,
        handovers: s.handovers,
        failovers: 0,
        shard_count: s.replicas,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(vars: &[(&str, &str)]) -> Settings {
        Settings::from_env(|k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    #[test]
    fn the_protocol_follows_argo_cds_switch_unless_given() {
        let args = |p| ProtocolArgs {
            protocol: p,
            sharding_algorithm: None,
            heartbeat_ms: None,
        };
        let dynamic = settings(&[("ARGOCD_ENABLE_DYNAMIC_CLUSTER_DISTRIBUTION", "TRUE")]);
        assert_eq!(protocol(&args(None), &dynamic), Protocol::Argocd);
        assert_eq!(protocol(&args(None), &settings(&[])), Protocol::Fenced);
        assert_eq!(
            protocol(&args(Some(Protocol::Fenced)), &dynamic),
            Protocol::Fenced
        );
    }

    #[test]
    fn the_replica_count_prefers_a_given_number_then_argo_cds_variable() {
        let argo = settings(&[(ENV_REPLICAS, "4")]);
        assert_eq!(replicas(ShardCount::Fixed(2), &argo).unwrap(), 2);
        assert_eq!(
            replicas(ShardCount::Desired { default: 3 }, &argo).unwrap(),
            4
        );
        assert_eq!(
            replicas(ShardCount::Desired { default: 3 }, &settings(&[])).unwrap(),
            3
        );
        let e = replicas(ShardCount::Auto { min: 1, max: 5 }, &settings(&[]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("fixed replica count"), "{e}");
    }

    #[test]
    fn heartbeat_comes_from_argo_cd_unless_the_test_override_is_given() {
        let s = settings(&[("ARGOCD_CONTROLLER_HEARTBEAT_TIME", "20")]);
        let mut args = ProtocolArgs {
            protocol: None,
            sharding_algorithm: None,
            heartbeat_ms: None,
        };
        assert_eq!(
            timing(&args, &s).unwrap(),
            (Duration::from_secs(20), Duration::from_secs(60))
        );
        args.heartbeat_ms = Some(200);
        assert_eq!(
            timing(&args, &s).unwrap(),
            (Duration::from_millis(200), Duration::from_millis(600))
        );
        args.heartbeat_ms = Some(10);
        assert!(timing(&args, &s).is_err());
    }

    #[test]
    fn an_unknown_algorithm_on_the_command_line_is_an_error() {
        assert_eq!(algorithm(None).unwrap(), ArgoAlgorithm::Legacy);
        assert_eq!(
            algorithm(Some("round-robin")).unwrap(),
            ArgoAlgorithm::RoundRobin
        );
        let e = algorithm(Some("fastest")).unwrap_err().to_string();
        assert!(
            e.contains("--sharding-algorithm") && e.contains("fastest"),
            "{e}"
        );
    }

    #[test]
    fn readiness_and_metrics_view() {
        let now = tokio::time::Instant::now();
        let s = ArgoStatus {
            listed: true,
            replicas: 3,
            shard: Some(2),
            valid_until: Some(now + Duration::from_secs(5)),
            acting: vec!["a".into(), "b".into()],
            ..ArgoStatus::default()
        };
        let v = view(&s, now);
        assert_eq!(v.ready.unwrap(), "holding shard 2");
        assert_eq!((v.generation, v.acting, v.lease_valid_secs), (3, 2, 5.0));
        assert!(view(&s, now + Duration::from_secs(6)).ready.is_err());
    }
}
