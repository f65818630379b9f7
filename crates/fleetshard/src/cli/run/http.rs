//! The HTTP server both protocols share: `/healthz`, `/readyz` (with a reason) and
//! `/metrics`. A protocol supplies a function that turns its current status into a
//! protocol-neutral [`View`] at request time (readiness depends on the time of the request,
//! e.g. whether a lease is still valid).

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;

use super::metrics::Metrics;

/// What the HTTP endpoints need to know about a replica, whatever its protocol.
#[derive(Debug, Clone)]
pub struct View {
    /// Ready (`Ok`) or not (`Err`), with the reason `/readyz` prints.
    pub ready: Result<String, String>,
    /// Shard held.
    pub shard: Option<u32>,
    /// Whether this replica is the distributor (fenced mode; false otherwise).
    pub is_distributor: bool,
    /// The generation applied (fenced: the assignment's; Argo CD mode: see its docs).
    pub generation: u64,
    /// How many clusters this replica reconciles.
    pub acting: usize,
    /// Seconds until this replica's hold on its shard lapses unless renewed (0 if none).
    pub lease_valid_secs: f64,
    /// Store operations that failed.
    pub store_errors: u64,
    /// Clusters started by this replica.
    pub handovers: u64,
    /// Shards this replica took over from a holder that had stopped renewing.
    pub failovers: u64,
    /// The shard count in force (fenced: the applied generation's; Argo CD: replicas).
    pub shard_count: u32,
}

impl Default for View {
    /// Not ready, nothing held.
    fn default() -> Self {
        View {
            ready: Err("starting".into()),
            shard: None,
            is_distributor: false,
            generation: 0,
            acting: 0,
            lease_valid_secs: 0.0,
            store_errors: 0,
            handovers: 0,
            failovers: 0,
            shard_count: 0,
        }
    }
}

/// Computes the view at request time.
pub type ViewFn = Arc<dyn Fn(tokio::time::Instant) -> View + Send + Sync>;

#[derive(Clone)]
struct AppState {
    view: ViewFn,
    metrics: Arc<Mutex<Metrics>>,
}

/// The router: `/healthz`, `/readyz` over `view`, and `/metrics` from a registry the
/// caller feeds (store latencies, queues).
pub fn router(view: ViewFn, registry: Metrics) -> Router {
    let state = AppState {
        view,
        metrics: Arc::new(Mutex::new(registry)),
    };
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(state)
}

async fn readyz(State(state): State<AppState>) -> (StatusCode, String) {
    let v = (state.view)(tokio::time::Instant::now());
    match v.ready {
        Ok(why) => (StatusCode::OK, format!("{why}\n")),
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")),
    }
}

async fn metrics(
    State(state): State<AppState>,
) -> (StatusCode, [(&'static str, &'static str); 1], String) {
    let v = (state.view)(tokio::time::Instant::now());
    let body = state
        .metrics
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .render(&v);
    (
        StatusCode::OK,
        [(
            "content-type",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        body,
    )
}
