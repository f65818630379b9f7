//! Fixtures of the reconciler tests: fake clusters, apps, a reconciler wired to them, and
//! polling with a deadline (real HTTP: time cannot be paused).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use fleetshard_controller::AppKey;
use fleetshard_core::{App, Destination};
use fleetshard_gitops::apply::LeaseCheck;
use fleetshard_gitops::live::{ClusterAccess, ClusterConnections, ClusterCredentials, LiveOptions};
use fleetshard_gitops::reconciler::{
    AppTarget, FixedClock, GitOpsReconciler, KubeStatusSink, ReconcilerConfig, StaticInventory,
    StatusSink, StatusUpdate,
};
use fleetshard_gitops::source::{RepoCache, RepoCacheConfig};
use fleetshard_manifest::{AppProject, AppSource, AppSpec, AutoSync};
use fleetshard_testsupport::kube_api::FakeApiServer;
use futures::future::BoxFuture;
use serde_json::{Value, json};

pub const NOW: &str = "2026-11-21T10:00:00Z";

/// How a destination cluster is reached: the fake's URL, no auth.
pub fn access(id: &str, fake: &FakeApiServer) -> ClusterAccess {
    ClusterAccess {
        id: id.to_owned(),
        server: fake.url(),
        credentials: ClusterCredentials::default(),
    }
}

/// App `argocd/name` from `repo` at `revision`, `path`, to namespace `default` of `cluster`.
pub fn target(
    name: &str,
    repo: &str,
    revision: &str,
    path: &str,
    cluster: ClusterAccess,
    auto: Option<AutoSync>,
) -> AppTarget {
    AppTarget {
        app: App {
            namespace: "argocd".into(),
            name: name.into(),
            project: "default".into(),
            destination: Destination {
                server: Some(cluster.server.clone()),
                name: None,
                namespace: Some("default".into()),
            },
        },
        spec: AppSpec {
            source: AppSource {
                repo_url: repo.into(),
                target_revision: revision.into(),
                path: path.into(),
                directory: Default::default(),
                raw: Default::default(),
            },
            auto_sync: auto,
            sync_request: None,
            refusals: Vec::new(),
            refresh: None,
            sources: Vec::new(),
            policy: Default::default(),
            lifecycle: Default::default(),
        },
        cluster_name: cluster.id.clone(),
        cluster,
        project: Some(Arc::new(AppProject::builtin_default("argocd"))),
        repositories: Default::default(),
        argocd_cm: Default::default(),
    }
}

pub fn key(name: &str) -> AppKey {
    AppKey::new("argocd", name)
}

/// Short timeouts: a partitioned fake must show quickly.
pub fn live_options() -> LiveOptions {
    LiveOptions {
        call_timeout: Duration::from_secs(2),
        watch_timeout: Duration::from_secs(30),
        sync_timeout: Duration::from_secs(5),
        probe_after: Duration::from_secs(5),
        refuse_plaintext: false,
        ..LiveOptions::default()
    }
}

/// A repository cache that re-reads references on every request (tests commit often).
pub fn repos(dir: &std::path::Path) -> RepoCache {
    let mut cfg = RepoCacheConfig::new(dir);
    cfg.refresh_interval = Duration::ZERO;
    RepoCache::new(cfg)
}

/// A reconciler over `inventory`, recording in `sink`, writing while `lease` says so.
pub fn reconciler(
    inventory: &Arc<StaticInventory>,
    repos: RepoCache,
    options: LiveOptions,
    sink: Arc<dyn StatusSink>,
    lease: Arc<dyn LeaseCheck>,
) -> Arc<GitOpsReconciler> {
    Arc::new(GitOpsReconciler::new(
        inventory.clone(),
        repos,
        ClusterConnections::new(options),
        sink,
        lease,
        Arc::new(FixedClock(NOW.into())),
        ReconcilerConfig::default(),
    ))
}

pub fn always() -> Arc<dyn LeaseCheck> {
    Arc::new(|| Some(tokio::time::Instant::now() + Duration::from_secs(3600)))
}

/// Polls `check` every 50 ms until it returns Some, or panics with `what` after `limit`.
pub async fn eventually<T, F, Fut>(limit: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {limit:?} waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// An Application object for the control-plane fake.
pub fn application(name: &str) -> Value {
    json!({
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Application",
        "metadata": {"name": name, "namespace": "argocd"},
        "spec": {"project": "default"},
    })
}

/// A sink that counts writes and passes them on.
pub struct CountingSink {
    pub inner: Arc<dyn StatusSink>,
    pub writes: AtomicU64,
}

impl CountingSink {
    pub fn new(inner: Arc<dyn StatusSink>) -> Arc<Self> {
        Arc::new(CountingSink {
            inner,
            writes: AtomicU64::new(0),
        })
    }

    pub fn count(&self) -> u64 {
        self.writes.load(Ordering::SeqCst)
    }
}

impl StatusSink for CountingSink {
    fn write<'a>(
        &'a self,
        app: &'a AppKey,
        update: &'a StatusUpdate,
    ) -> BoxFuture<'a, Result<(), fleetshard_gitops::reconciler::SinkError>> {
        self.writes.fetch_add(1, Ordering::SeqCst);
        self.inner.write(app, update)
    }

    fn last_operation<'a>(
        &'a self,
        app: &'a AppKey,
    ) -> BoxFuture<
        'a,
        Result<
            Option<fleetshard_gitops::reconciler::OperationState>,
            fleetshard_gitops::reconciler::SinkError,
        >,
    > {
        self.inner.last_operation(app)
    }
}

/// A Deployment manifest.
pub fn deployment(name: &str, image: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\nspec:\n  replicas: 2\n  selector:\n    matchLabels:\n      app: {name}\n  template:\n    metadata:\n      labels:\n        app: {name}\n    spec:\n      containers:\n      - name: main\n        image: {image}\n"
    )
}

/// The field managers of a live object.
pub fn managers(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|m| m.get("manager").and_then(Value::as_str).map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The tracking annotation of a live object.
pub fn tracking(obj: &Value) -> Option<String> {
    obj.pointer("/metadata/annotations/argocd.argoproj.io~1tracking-id")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// A client of `fake` that does not retry.
pub fn kube_client(fake: &FakeApiServer) -> kube::Client {
    let mut config = kube::Config::new(fake.url().parse().unwrap());
    config.default_retry = false;
    kube::Client::try_from(config).unwrap()
}

/// The Application `argocd/name`'s status on the control-plane fake.
pub fn app_status(control: &FakeApiServer, name: &str) -> Value {
    control
        .get("argoproj.io/v1alpha1", "Application", "argocd", name)
        .unwrap()["status"]
        .clone()
}

/// A status sink writing to the control-plane fake.
pub fn sink_for(control: &FakeApiServer) -> KubeStatusSink {
    KubeStatusSink::new(kube_client(control), Duration::from_secs(2))
}
