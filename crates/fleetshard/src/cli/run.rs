//! `fleetshard run`: one replica (what a pod runs). It claims a shard through the store in
//! fenced lease mode, reports which clusters it owns (log, audit log, `/metrics`) and
//! serves `/healthz`, `/readyz` and `/metrics`. SIGTERM or Ctrl-C releases the shard
//! (others take over at once) and exits 0.

use std::fs::File;
use std::io::{Read as _, Write as _};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, bail};
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use fleetshard_coord::fenced::ReplicaConfig;
use fleetshard_coord::lease::LeaseTiming;
use fleetshard_coord::runner::{Ownership, OwnershipChange, Runner, RunnerTiming, Status};
use fleetshard_core::placement::PlacementConfig;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::sync::{mpsc, watch};

use super::input::{self, FleetArgs};
use super::store::StoreArgs;

/// `fleetshard run` options.
#[derive(Debug, clap::Args)]
#[command(
    group(clap::ArgGroup::new("input").required(true).args(["fleet", "clusters"])),
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
    /// Shard count: every replica of one fleet must use the same.
    #[arg(long, value_name = "N", default_value_t = 3, env = "FLEETSHARD_SHARDS")]
    pub shards: u32,
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
}

/// The host name: `/proc/sys/kernel/hostname`, else `$HOSTNAME`.
fn hostname() -> Option<String> {
    let from_proc = std::fs::read_to_string("/proc/sys/kernel/hostname").ok();
    from_proc
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// A fresh incarnation: random, so a restart is told apart from the process before it.
fn incarnation() -> anyhow::Result<u64> {
    let mut b = [0u8; 8];
    File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .context("reading /dev/urandom for the incarnation")?;
    Ok(u64::from_le_bytes(b))
}

/// Wall-clock milliseconds since the Unix epoch, for the audit log only: it is read by
/// people and tests, never by the protocol (G6), which is why `SystemTime` is allowed here.
#[allow(clippy::disallowed_types)]
fn unix_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default()
}

/// Runs one replica until SIGTERM or Ctrl-C.
pub fn run(args: RunArgs) -> anyhow::Result<()> {
    let source = args.input.source()?;
    let loaded = input::load(&source)?;
    for w in &loaded.warnings {
        tracing::warn!(source = %w.source, "{}", w.message);
    }
    let identity = match args.identity.clone().or_else(hostname) {
        Some(i) if !i.trim().is_empty() => i.trim().to_owned(),
        _ => bail!("no identity: give --identity (or FLEETSHARD_IDENTITY); the host name is empty"),
    };
    if !loaded.shards.is_empty() {
        // ReplicaConfig takes a shard count only: zones and capacities are not placed yet.
        tracing::warn!(
            listed = loaded.shards.len(),
            shards = args.shards,
            "the fleet file's shards: section (zones, capacities) is not used by run; --shards sets the count"
        );
    }
    if args.shards == 0 {
        bail!("--shards must be at least 1");
    }
    // Checked before anything starts; used by `serve`.
    args.store.root()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(serve(args, identity, loaded.fleet))
}

async fn serve(
    args: RunArgs,
    identity: String,
    fleet: fleetshard_core::Fleet,
) -> anyhow::Result<()> {
    let store = args.store.open()?;
    let cfg = ReplicaConfig {
        identity: identity.clone(),
        incarnation: incarnation()?,
        root: args.store.root()?.to_owned(),
        shards: args.shards,
        timing: LeaseTiming::default(),
        grace: Duration::from_millis(args.grace_ms),
        placement: PlacementConfig::default(),
    };
    let loads = fleet.loads();
    let (events_tx, events_rx) = mpsc::unbounded_channel();
    let (runner, status) = Runner::new(
        store.clone(),
        cfg.clone(),
        RunnerTiming::default(),
        fleet.clusters,
        loads,
        events_tx,
    )?;
    let audit = match &args.audit_log {
        Some(path) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("{}: cannot open the audit log", path.display()))?,
        ),
        None => None,
    };
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    tracing::info!(
        %identity,
        incarnation = cfg.incarnation,
        store = %store.describe(),
        listen = %args.listen,
        shards = args.shards,
        "replica starting"
    );
    let http = tokio::spawn({
        let app = router(status.clone());
        async move { axum::serve(listener, app).await }
    });
    let audit_task = tokio::spawn(audit_loop(events_rx, audit, identity));
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let runner_task = tokio::spawn(runner.run(shutdown_rx));
    wait_for_signal().await?;
    tracing::info!("signal received: releasing the shard");
    let _ = shutdown_tx.send(true);
    let released = runner_task.await.context("the runner task failed")?;
    // The runner is gone, so the event channel closes and the audit log is complete.
    audit_task.await.context("the audit task failed")??;
    http.abort();
    tracing::info!(released, "replica stopped");
    Ok(())
}

async fn wait_for_signal() -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.context("waiting for Ctrl-C")?,
        _ = term.recv() => {}
    }
    Ok(())
}

/// Logs every ownership change, and appends it to the audit log as one JSON line.
async fn audit_loop(
    mut events: mpsc::UnboundedReceiver<OwnershipChange>,
    mut file: Option<File>,
    identity: String,
) -> anyhow::Result<()> {
    while let Some(e) = events.recv().await {
        let (event, cluster) = match &e.change {
            Ownership::Started(c) => ("acquire", c),
            Ownership::Stopped(c) => ("release", c),
        };
        tracing::info!(cluster = %cluster, shard = ?e.shard, generation = e.generation, "{event}");
        if let Some(f) = &mut file {
            let line = serde_json::json!({
                "ts_ms": unix_ms() as u64,
                "identity": identity,
                "event": event,
                "cluster": cluster,
                "shard": e.shard,
                "generation": e.generation,
            });
            // One write per line, unbuffered: a SIGKILL loses no line already reported.
            f.write_all(format!("{line}\n").as_bytes())
                .context("writing the audit log")?;
        }
    }
    Ok(())
}

/// The metrics, refreshed from the status snapshot at every scrape.
struct Metrics {
    registry: Registry,
    shard: Gauge,
    distributor: Gauge,
    generation: Gauge,
    acting: Gauge,
    lease_remaining: Gauge<f64, std::sync::atomic::AtomicU64>,
    store_errors: Counter,
    handovers: Counter,
}

impl Metrics {
    fn new() -> Self {
        let mut m = Metrics {
            registry: Registry::with_prefix("fleetshard"),
            shard: Gauge::default(),
            distributor: Gauge::default(),
            generation: Gauge::default(),
            acting: Gauge::default(),
            lease_remaining: Gauge::default(),
            store_errors: Counter::default(),
            handovers: Counter::default(),
        };
        let r = &mut m.registry;
        r.register("shard", "Shard held (-1: none)", m.shard.clone());
        r.register(
            "is_distributor",
            "1 while this replica is the distributor",
            m.distributor.clone(),
        );
        r.register(
            "generation",
            "Assignment generation applied",
            m.generation.clone(),
        );
        r.register(
            "clusters_acting",
            "Clusters this replica reconciles",
            m.acting.clone(),
        );
        r.register(
            "lease_valid_seconds",
            "Seconds until the shard lease lapses unless renewed",
            m.lease_remaining.clone(),
        );
        r.register(
            "store_errors",
            "Store operations that failed (conflicts excluded)",
            m.store_errors.clone(),
        );
        r.register(
            "handovers",
            "Clusters started by this replica",
            m.handovers.clone(),
        );
        m
    }

    fn render(&self, s: &Status) -> String {
        self.shard.set(s.shard.map_or(-1, i64::from));
        self.distributor.set(i64::from(s.is_distributor));
        self.generation.set(s.generation as i64);
        self.acting.set(s.acting.len() as i64);
        self.lease_remaining
            .set(s.lease_valid_until.map_or(0.0, |u| {
                u.saturating_duration_since(tokio::time::Instant::now())
                    .as_secs_f64()
            }));
        // Counters only go up: add what the snapshot has beyond what they show.
        self.store_errors
            .inc_by(s.store_errors.saturating_sub(self.store_errors.get()));
        self.handovers
            .inc_by(s.handovers.saturating_sub(self.handovers.get()));
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

#[derive(Clone)]
struct AppState {
    status: watch::Receiver<Status>,
    metrics: Arc<Mutex<Metrics>>,
}

fn router(status: watch::Receiver<Status>) -> Router {
    let state = AppState {
        status,
        metrics: Arc::new(Mutex::new(Metrics::new())),
    };
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(state)
}

/// Ready: holding a shard with a valid lease, or a spare because every shard is held.
async fn readyz(State(state): State<AppState>) -> (StatusCode, String) {
    let s = state.status.borrow().clone();
    readiness(&s, tokio::time::Instant::now())
}

fn readiness(s: &Status, now: tokio::time::Instant) -> (StatusCode, String) {
    let unavailable = |why: &str| (StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n"));
    if s.stopping {
        return unavailable("stopping");
    }
    match (s.shard, s.lease_valid_until) {
        (Some(n), Some(until)) if until > now => (StatusCode::OK, format!("holding shard {n}\n")),
        (Some(n), _) => unavailable(&format!("shard {n}: lease not renewed in time")),
        (None, _) if s.spare => (StatusCode::OK, "spare: every shard is held\n".into()),
        (None, _) if !s.listed => unavailable("store not read yet"),
        (None, _) => match &s.last_store_error {
            Some(e) => unavailable(&format!("no shard held; last store error: {e}")),
            None => unavailable("no shard held yet (claiming)"),
        },
    }
}

async fn metrics(
    State(state): State<AppState>,
) -> (StatusCode, [(&'static str, &'static str); 1], String) {
    let s = state.status.borrow().clone();
    let body = state
        .metrics
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .render(&s);
    (
        StatusCode::OK,
        [(
            "content-type",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        body,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsupported_stores_say_so() {
        let e = super::super::store::open_store("etcd://localhost:2379")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("not yet supported in this build"), "{e}");
        assert!(super::super::store::open_store("kubernetes://argocd").is_err());
        assert!(super::super::store::open_store("ftp://x").is_err());
        assert!(super::super::store::open_store("memory://").is_ok());
    }

    #[test]
    fn readiness_reasons() {
        let now = tokio::time::Instant::now();
        let mut s = Status::default();
        assert_eq!(readiness(&s, now).0, StatusCode::SERVICE_UNAVAILABLE);
        s.listed = true;
        s.spare = true;
        assert_eq!(readiness(&s, now).0, StatusCode::OK);
        s.spare = false;
        s.shard = Some(1);
        s.lease_valid_until = Some(now + Duration::from_secs(1));
        assert_eq!(readiness(&s, now).0, StatusCode::OK);
        assert!(
            readiness(&s, now + Duration::from_secs(2))
                .1
                .contains("lease")
        );
    }

    #[test]
    fn metrics_render() {
        let m = Metrics::new();
        let s = Status {
            shard: Some(2),
            store_errors: 3,
            handovers: 4,
            ..Status::default()
        };
        let text = m.render(&s);
        assert!(text.contains("fleetshard_shard 2"), "{text}");
        assert!(text.contains("fleetshard_store_errors_total 3"), "{text}");
        assert!(m.render(&s).contains("fleetshard_handovers_total 4"));
    }
}
