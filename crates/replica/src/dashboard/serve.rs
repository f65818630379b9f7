//! The dashboard's driver and HTTP routes: a task reads the store every interval, steps
//! the protocol's observer ([`Observer`] on fenced mode's records, [`ArgoObserver`] on
//! Argo CD's shard map) and publishes the page's JSON — a replica's dashboard (no controls)
//! only while someone looks: a page's event stream is open, or the page or its JSON was
//! asked for in the last [`IDLE_AFTER`] (every replica reading the whole store each
//! second for nobody would multiply the store's load by the replica count); one with
//! controls always, until [`Dashboard::read_on_demand`] (`up`, once ready: a reading at
//! 100,000 apps parses every app's status, about a core's worth at a 5 s interval); the routes
//! serve the page (assets
//! embedded in the binary), the JSON, a Server-Sent Events stream of it, and — only when
//! the dashboard was started with [`Controls`] — a POST endpoint that needs the token the
//! page carries.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use fleetshard_coord::store::Store;
use fleetshard_core::argo::ArgoAlgorithm;
use fleetshard_core::{App, Cluster};
use fleetshard_gitops::reconciler::read_statuses;
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::observe::{AppStatus, AppStatuses, ArgoObserver, Clusters, Observer, Snapshot};

const PAGE: &str = include_str!("assets/index.html");
const SCRIPT: &str = include_str!("assets/app.js");
const STYLE: &str = include_str!("assets/app.css");

/// The header a control request carries the page's token in.
pub const TOKEN_HEADER: &str = "x-fleetshard-token";

/// A process `fleetshard up` runs, as the page shows it.
#[derive(Debug, Clone, Serialize)]
pub struct ProcessView {
    /// The replica's identity.
    pub identity: String,
    /// Its process id (absent once it exited).
    pub pid: Option<u32>,
    /// `running`, `paused`, `exited`.
    pub state: String,
    /// Its own (read-only) dashboard.
    pub url: String,
}

/// What the page asks `fleetshard up` to do.
#[derive(Debug, Clone, Deserialize)]
pub struct Action {
    /// `kill`, `pause`, `resume`, `restart`, `add` or `scale`.
    pub action: String,
    /// The replica (`kill`, `pause`, `resume`, `restart`).
    #[serde(default)]
    pub replica: Option<String>,
    /// The shard count (`scale`).
    #[serde(default)]
    pub shards: Option<u32>,
}

/// What can be done from the page: only `fleetshard up` provides it.
pub trait Controls: Send + Sync + 'static {
    /// The processes, for the page.
    fn processes(&self) -> Vec<ProcessView>;
    /// Carries out `action`: what was done, or why not.
    fn act(&self, action: Action) -> BoxFuture<'_, Result<String, String>>;
}

/// Where the dashboard reads from.
pub struct Source {
    /// The coordination store.
    pub store: Arc<dyn Store>,
    /// The fleet's root in it.
    pub root: String,
    /// The clusters and their apps, as the inventory knows them.
    pub clusters: Arc<dyn Fn() -> Clusters + Send + Sync>,
    /// How often the store is read.
    pub interval: Duration,
    /// A record unchanged this long is expired: fenced mode's lease duration, or Argo CD's
    /// stale-after (3H) under its protocol.
    pub lease: Duration,
    /// How often a live holder rewrites its record: fenced mode's renew period, or Argo
    /// CD's heartbeat (H). A record unchanged for longer than that, the read interval and a
    /// margin ([`RENEW_MARGIN`]) missed a renewal: its clusters are shown at risk.
    pub renew: Duration,
    /// Argo CD's heartbeat protocol: its shard map is read instead of fenced mode's
    /// records under `root` (`None`: fenced mode).
    pub argocd: Option<ArgoSource>,
}

/// What the dashboard of a replica running Argo CD's heartbeat protocol reads and places.
pub struct ArgoSource {
    /// The store key of the shard map.
    pub key: String,
    /// Argo CD's distribution algorithm the replicas use.
    pub algorithm: ArgoAlgorithm,
    /// The replica count in use now.
    pub replicas: Arc<dyn Fn() -> u32 + Send + Sync>,
    /// The clusters the replicas place (those known when they started), in order.
    pub fleet: Vec<Cluster>,
    /// The apps known then (they weigh clusters for consistent hashing).
    pub apps: Vec<App>,
}

/// The step machine of the protocol the dashboard shows.
enum Machine {
    Fenced(Box<Observer>),
    Argocd {
        observer: Box<ArgoObserver>,
        key: String,
        replicas: Arc<dyn Fn() -> u32 + Send + Sync>,
    },
}

/// Beyond a renew period and a read interval, how long a record is watched before it
/// counts as not renewed (a renew's write and a late timer under load).
pub const RENEW_MARGIN: Duration = Duration::from_millis(100);

impl Machine {
    fn new(source: &Source, now: tokio::time::Instant) -> Machine {
        let at_risk_after = source.renew + source.interval + RENEW_MARGIN;
        match &source.argocd {
            None => Machine::Fenced(Box::new(Observer::new(source.lease, at_risk_after, now))),
            Some(a) => Machine::Argocd {
                observer: Box::new(ArgoObserver::new(
                    source.lease,
                    at_risk_after,
                    a.algorithm,
                    a.fleet.clone(),
                    &a.apps,
                    now,
                )),
                key: a.key.clone(),
                replicas: Arc::clone(&a.replicas),
            },
        }
    }

    /// Reads the protocol's records and the statuses, and steps (`None`: the store could
    /// not be read).
    async fn step(&mut self, source: &Source) -> Option<Snapshot> {
        let store = source.store.as_ref();
        let failed = |e: fleetshard_coord::store::StoreError| {
            tracing::debug!("dashboard: reading the store failed: {e}");
        };
        match self {
            Machine::Fenced(observer) => {
                let listing = store.list(&source.root).await.map_err(failed).ok()?;
                let statuses = app_statuses(store, &source.root).await;
                let clusters = (source.clusters)();
                Some(observer.step(
                    tokio::time::Instant::now(),
                    &source.root,
                    &listing,
                    &clusters,
                    &statuses,
                ))
            }
            Machine::Argocd {
                observer,
                key,
                replicas,
            } => {
                let map = store.get(key).await.map_err(failed).ok()?;
                let statuses = app_statuses(store, &source.root).await;
                let clusters = (source.clusters)();
                Some(observer.step(
                    tokio::time::Instant::now(),
                    key,
                    map.as_ref(),
                    replicas(),
                    &clusters,
                    &statuses,
                ))
            }
        }
    }
}

/// How long a replica's dashboard keeps reading the store after the last request for
/// its page or JSON, with no event stream open.
pub const IDLE_AFTER: Duration = Duration::from_secs(60);

/// Who is looking: open event streams, and when the page or its JSON was last asked for;
/// or read whoever looks (`always`).
#[derive(Default)]
struct Demand {
    always: AtomicBool,
    streams: AtomicUsize,
    last: Mutex<Option<tokio::time::Instant>>,
}

impl Demand {
    fn touch(&self) {
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) =
            Some(tokio::time::Instant::now());
    }

    fn active(&self, now: tokio::time::Instant) -> bool {
        self.always.load(Ordering::SeqCst)
            || self.streams.load(Ordering::SeqCst) > 0
            || self
                .last
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_some_and(|t| now.duration_since(t) < IDLE_AFTER)
    }
}

/// An open event stream, counted while it lives.
struct Watching(Arc<Demand>);

impl Watching {
    fn new(demand: &Arc<Demand>) -> Self {
        demand.streams.fetch_add(1, Ordering::SeqCst);
        demand.touch();
        Watching(Arc::clone(demand))
    }
}

impl Drop for Watching {
    fn drop(&mut self) {
        self.0.streams.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One published step: the snapshot and the page's JSON of it.
#[derive(Debug)]
pub struct Published {
    /// The snapshot.
    pub snapshot: Snapshot,
    /// `{"fleet": snapshot, "processes": [...], "controls": bool}`.
    pub json: String,
}

#[derive(Serialize)]
struct PageJson<'a> {
    fleet: &'a Snapshot,
    processes: Vec<ProcessView>,
    controls: bool,
}

/// A running dashboard.
pub struct Dashboard {
    rx: watch::Receiver<Option<Arc<Published>>>,
    controls: Option<(Arc<dyn Controls>, Arc<str>)>,
    demand: Arc<Demand>,
    task: JoinHandle<()>,
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Dashboard {
    /// Starts reading `source`: always with `controls` (the page gets buttons and the
    /// POST endpoint accepts requests carrying `token`) until
    /// [`Dashboard::read_on_demand`], else only while someone looks.
    pub fn start(source: Source, controls: Option<(Arc<dyn Controls>, String)>) -> Dashboard {
        let (tx, rx) = watch::channel(None);
        let controls: Option<(Arc<dyn Controls>, Arc<str>)> =
            controls.map(|(c, t)| (c, Arc::from(t)));
        let procs = controls.as_ref().map(|(c, _)| c.clone());
        let demand = Arc::new(Demand::default());
        demand.always.store(controls.is_some(), Ordering::SeqCst);
        let task = tokio::spawn(drive(source, procs, Arc::clone(&demand), tx));
        Dashboard {
            rx,
            controls,
            demand,
            task,
        }
    }

    /// From now on the store is read only while someone looks, as a replica's dashboard
    /// reads it (see the module's documentation): [`Dashboard::next`] waits until then.
    pub fn read_on_demand(&self) {
        self.demand.always.store(false, Ordering::SeqCst);
    }

    /// Waits for the next published step.
    pub async fn next(&mut self) -> Option<Arc<Published>> {
        self.rx.changed().await.ok()?;
        self.rx.borrow_and_update().clone()
    }

    /// The routes: `/dashboard` (the page, its script and style), `/api/dashboard`
    /// (JSON), `/api/dashboard/events` (Server-Sent Events), and with controls
    /// `POST /api/dashboard/control`.
    pub fn router(&self) -> Router {
        let state = RouteState {
            rx: self.rx.clone(),
            controls: self.controls.clone(),
            demand: Arc::clone(&self.demand),
        };
        let mut router = Router::new()
            .route("/dashboard", get(page))
            .route(
                "/dashboard/app.js",
                get(|| async { asset(SCRIPT, "text/javascript") }),
            )
            .route(
                "/dashboard/app.css",
                get(|| async { asset(STYLE, "text/css") }),
            )
            .route("/api/dashboard", get(snapshot))
            .route("/api/dashboard/events", get(events));
        if self.controls.is_some() {
            router = router.route("/api/dashboard/control", post(control));
        }
        router.with_state(state)
    }
}

async fn drive(
    source: Source,
    controls: Option<Arc<dyn Controls>>,
    demand: Arc<Demand>,
    tx: watch::Sender<Option<Arc<Published>>>,
) {
    let mut machine = Machine::new(&source, tokio::time::Instant::now());
    let mut costs = CostsRead::default();
    let mut tick = tokio::time::interval(source.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if !demand.active(tokio::time::Instant::now()) {
            continue;
        }
        let Some(mut snapshot) = machine.step(&source).await else {
            continue;
        };
        costs.refresh(&source).await;
        super::observe::add_costs(&mut snapshot, &costs.merged);
        let page = PageJson {
            fleet: &snapshot,
            processes: controls.as_ref().map(|c| c.processes()).unwrap_or_default(),
            controls: controls.is_some(),
        };
        let json =
            serde_json::to_string(&page).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
        if tx
            .send(Some(Arc::new(Published { snapshot, json })))
            .is_err()
        {
            return;
        }
    }
}

/// How often the dashboard reads the replicas' costs records (they change once a minute).
const COSTS_EVERY: Duration = Duration::from_secs(15);

/// The replicas' measured costs as last read (the last good reading kept).
#[derive(Default)]
struct CostsRead {
    at: Option<tokio::time::Instant>,
    merged: BTreeMap<String, f64>,
}

impl CostsRead {
    async fn refresh(&mut self, source: &Source) {
        let now = tokio::time::Instant::now();
        if self
            .at
            .is_some_and(|at| now.duration_since(at) < COSTS_EVERY)
        {
            return;
        }
        self.at = Some(now);
        let prefix = crate::costs::costs_prefix(&source.root);
        if let Ok(listing) = source.store.list(&prefix).await {
            let (merged, _) = crate::costs::merge_listing(&listing);
            self.merged = merged.into_iter().map(|(id, c)| (id, c.cost)).collect();
        }
    }
}

/// The statuses replicas in local mode record in the store (empty when there are none,
/// as with Argo CD's Applications, whose statuses live on the objects).
async fn app_statuses(store: &dyn Store, root: &str) -> AppStatuses {
    let Ok(entries) = read_statuses(store, root).await else {
        return AppStatuses::new();
    };
    entries
        .into_iter()
        .filter_map(|e| {
            let c = e.status.ok()?.comparison?;
            Some((
                e.app,
                AppStatus {
                    sync: c.sync.status,
                    health: c.health.status,
                    condition: c
                        .conditions
                        .first()
                        .map(|k| format!("{}: {}", k.kind, k.message)),
                },
            ))
        })
        .collect()
}

#[derive(Clone)]
struct RouteState {
    rx: watch::Receiver<Option<Arc<Published>>>,
    controls: Option<(Arc<dyn Controls>, Arc<str>)>,
    demand: Arc<Demand>,
}

fn asset(body: &'static str, kind: &'static str) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
}

async fn page(State(state): State<RouteState>) -> impl IntoResponse {
    state.demand.touch();
    let token = state.controls.as_ref().map_or("", |(_, t)| t);
    let body = PAGE.replace("__TOKEN__", token).replace(
        "__CONTROLS__",
        if state.controls.is_some() { "1" } else { "0" },
    );
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        body,
    )
}

async fn snapshot(State(state): State<RouteState>) -> Response {
    state.demand.touch();
    let current = state.rx.borrow().clone();
    match current {
        Some(p) => ([(header::CONTENT_TYPE, "application/json")], p.json.clone()).into_response(),
        None => (StatusCode::SERVICE_UNAVAILABLE, "no snapshot yet\n").into_response(),
    }
}

async fn events(State(state): State<RouteState>) -> impl IntoResponse {
    let mut rx = state.rx.clone();
    rx.mark_changed();
    // Counted while the stream lives: the store is read for it.
    let watching = Watching::new(&state.demand);
    let stream = futures::stream::unfold((rx, watching), |(mut rx, watching)| async move {
        loop {
            rx.changed().await.ok()?;
            let current = rx.borrow_and_update().clone();
            if let Some(p) = current {
                let event = SseEvent::default().data(p.json.clone());
                return Some((Ok::<_, Infallible>(event), (rx, watching)));
            }
        }
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

/// Whether `given` equals `token`, in time independent of where they differ.
fn token_matches(given: &str, token: &str) -> bool {
    given.len() == token.len()
        && !token.is_empty()
        && given
            .bytes()
            .zip(token.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

async fn control(
    State(state): State<RouteState>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> (StatusCode, String) {
    let Some((controls, token)) = &state.controls else {
        return (StatusCode::NOT_FOUND, "no controls here\n".into());
    };
    let given = headers
        .get(TOKEN_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !token_matches(given, token) {
        return (
            StatusCode::FORBIDDEN,
            format!("missing or wrong {TOKEN_HEADER}\n"),
        );
    }
    let action: Action = match serde_json::from_slice(&body) {
        Ok(a) => a,
        Err(e) => return (StatusCode::BAD_REQUEST, format!("bad request body: {e}\n")),
    };
    match controls.act(action).await {
        Ok(done) => (StatusCode::OK, format!("{done}\n")),
        Err(why) => (StatusCode::CONFLICT, format!("{why}\n")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A replica's dashboard reads only while looked at: an open stream, or a request in
    /// the last minute.
    #[tokio::test(start_paused = true)]
    async fn demand_is_an_open_stream_or_a_recent_request() {
        let demand = Arc::new(Demand::default());
        let now = tokio::time::Instant::now;
        assert!(!demand.active(now()), "nobody yet");
        demand.touch();
        assert!(demand.active(now()));
        tokio::time::advance(IDLE_AFTER).await;
        assert!(!demand.active(now()), "idle after a minute");
        let stream = Watching::new(&demand);
        tokio::time::advance(IDLE_AFTER * 3).await;
        assert!(demand.active(now()), "an open stream keeps it reading");
        drop(stream);
        assert!(
            !demand.active(now()),
            "closed, and the last request long ago"
        );
        demand.always.store(true, Ordering::SeqCst);
        assert!(demand.active(now()), "read whoever looks");
    }

    #[test]
    fn tokens_must_match_exactly() {
        assert!(token_matches("abc", "abc"));
        assert!(!token_matches("abd", "abc"));
        assert!(!token_matches("ab", "abc"));
        assert!(!token_matches("", ""));
    }
}
