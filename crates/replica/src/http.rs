//! The HTTP server both protocols share: `/healthz` (failing only once the store was found
//! replaced), `/readyz` (with a reason) and
//! `/metrics`. Each request turns the runner's current status into a protocol-neutral
//! [`View`] ([`View::of`]) at request time (readiness depends on the time of the request,
//! e.g. whether a lease is still valid).

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;

use fleetshard_coord::ownership::ReplicaStatus;

use crate::metrics::Metrics;

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
    /// The store was found replaced (what replaced it): fenced until restarted.
    pub store_replaced: Option<String>,
    /// Records of the last listing that could not be read.
    pub corrupt_records: u64,
    /// Other live replicas whose inventory digest differs from this one's.
    pub inventory_disagreement: u64,
    /// Clusters the distributor keeps assigned although its inventory dropped them.
    pub held_back_clusters: u64,
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
            store_replaced: None,
            corrupt_records: 0,
            inventory_disagreement: 0,
            held_back_clusters: 0,
        }
    }
}

impl View {
    /// The view of any protocol's status at `now`.
    pub fn of<S: ReplicaStatus>(status: &S, now: tokio::time::Instant) -> View {
        let v = status.shard_view();
        View {
            ready: status.readiness(now),
            shard: v.shard,
            is_distributor: v.is_distributor,
            generation: v.generation,
            acting: v.acting,
            lease_valid_secs: status
                .lease_deadline()
                .map_or(0.0, |u| u.saturating_duration_since(now).as_secs_f64()),
            store_errors: v.store_errors,
            handovers: v.handovers,
            failovers: v.failovers,
            shard_count: v.shard_count,
            store_replaced: None,
            corrupt_records: v.corrupt_records,
            inventory_disagreement: v.inventory_disagreement,
            held_back_clusters: v.held_back_clusters,
        }
    }

    /// The view of a replica whose store guard says `replaced`: once the store was found
    /// replaced the replica is fenced, whatever its protocol's status says, and not ready.
    pub fn with_store_replaced(mut self, replaced: Option<String>) -> View {
        if let Some(what) = &replaced {
            self.ready = Err(format!("fenced: store replaced ({what})"));
        }
        self.store_replaced = replaced;
        self
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
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(state)
}

/// Live unless the store was found replaced: a fenced replica never acts again, so it
/// fails its liveness probe and Kubernetes restarts it, and the new process joins the
/// store that is there now (`docs/reliability.md`, "A replaced store").
async fn healthz(State(state): State<AppState>) -> (StatusCode, String) {
    let v = (state.view)(tokio::time::Instant::now());
    match v.store_replaced {
        None => (StatusCode::OK, "ok\n".to_owned()),
        Some(what) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("fenced: store replaced ({what}); restart to join the store there now\n"),
        ),
    }
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use fleetshard_coord::argocd_runner::ArgoStatus;

    use super::*;

    #[test]
    fn the_view_of_argo_cds_status_counts_replicas_as_the_generation() {
        let now = tokio::time::Instant::now();
        let s = ArgoStatus {
            listed: true,
            replicas: 3,
            shard: Some(2),
            valid_until: Some(now + Duration::from_secs(5)),
            acting: vec!["a".into(), "b".into()],
            ..ArgoStatus::default()
        };
        let v = View::of(&s, now);
        assert_eq!(v.ready.unwrap(), "holding shard 2");
        assert_eq!((v.generation, v.acting, v.lease_valid_secs), (3, 2, 5.0));
        assert!(View::of(&s, now + Duration::from_secs(6)).ready.is_err());
    }

    #[test]
    fn a_replaced_store_makes_any_protocol_unready() {
        let now = tokio::time::Instant::now();
        let s = ArgoStatus {
            listed: true,
            replicas: 1,
            shard: Some(0),
            valid_until: Some(now + Duration::from_secs(5)),
            ..ArgoStatus::default()
        };
        let v = View::of(&s, now).with_store_replaced(None);
        assert!(v.ready.is_ok() && v.store_replaced.is_none());
        let v = View::of(&s, now).with_store_replaced(Some("/x/s.db no longer exists".into()));
        assert_eq!(
            v.ready.unwrap_err(),
            "fenced: store replaced (/x/s.db no longer exists)"
        );
        assert_eq!(
            v.store_replaced.as_deref(),
            Some("/x/s.db no longer exists")
        );
    }
}
