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
use fleetshard_manifest::{
    AppProject, AppSource, AppSpec, AutoSync, RepoCredentials, RepoSecret, RepoSecretKind,
};
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
            manifest_generate_paths: None,
            sources: Vec::new(),
            ..AppSpec::default()
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

/// Repository Secret (or credential template) `argocd/name` for `url`, of `repo_type`,
/// for `project` (empty: every project), user `charts-reader` with `password`.
pub fn repo_secret(
    kind: RepoSecretKind,
    name: &str,
    url: &str,
    repo_type: &str,
    project: &str,
    password: &str,
) -> RepoSecret {
    RepoSecret {
        kind,
        secret: format!("Secret argocd/{name}"),
        url: url.into(),
        repo_type: repo_type.into(),
        project: project.into(),
        name: format!("{name}-repo"),
        credentials: RepoCredentials {
            username: Some("charts-reader".into()),
            password: Some(password.into()),
            ..RepoCredentials::default()
        },
        insecure: false,
        force_http_basic_auth: false,
        proxy: None,
        no_proxy: None,
        unsupported: Vec::new(),
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

/// Self-heal without prune: the policy of the diffing and server-side diff tests.
pub const SELF_HEAL: Option<AutoSync> = Some(AutoSync {
    prune: false,
    self_heal: true,
    allow_empty: false,
});

/// A repository with `files` committed, a fake cluster, an inventory and a status sink,
/// for tests that make their own reconcilers (diffing, server-side diff).
pub struct AppEnv {
    pub tmp: tempfile::TempDir,
    pub git: fleetshard_testsupport::git::Git,
    pub fake: FakeApiServer,
    pub inventory: Arc<StaticInventory>,
    pub sink: Arc<fleetshard_gitops::reconciler::MemorySink>,
}

/// `files` committed; no app yet ([`AppEnv::add_app`]).
pub async fn app_env(files: &[(&str, String)]) -> AppEnv {
    let tmp = tempfile::tempdir().unwrap();
    let git = fleetshard_testsupport::git::Git::init(&tmp.path().join("repo"));
    for (path, text) in files {
        git.write(path, text);
    }
    git.commit("initial");
    AppEnv {
        git,
        fake: FakeApiServer::start().await.unwrap(),
        inventory: Arc::new(StaticInventory::default()),
        sink: fleetshard_gitops::reconciler::MemorySink::new(),
        tmp,
    }
}

impl AppEnv {
    /// Adds app `a` (path `app`, [`SELF_HEAL`], to `default` of cluster `c1`) as `edit`
    /// changes it.
    pub fn add_app(&self, edit: impl FnOnce(&mut AppTarget)) {
        let mut t = target(
            "a",
            &self.git.path(),
            "main",
            "app",
            access("c1", &self.fake),
            SELF_HEAL,
        );
        edit(&mut t);
        self.inventory.insert(t);
    }

    /// A reconciler of the inventory with `config`, recording in the sink.
    pub fn reconciler_with(&self, config: ReconcilerConfig) -> Arc<GitOpsReconciler> {
        Arc::new(self.reconciler_built(config))
    }

    /// [`AppEnv::reconciler_with`], not shared yet (to be given more parts).
    pub fn reconciler_built(&self, config: ReconcilerConfig) -> GitOpsReconciler {
        GitOpsReconciler::new(
            self.inventory.clone(),
            repos(&self.tmp.path().join("cache")),
            ClusterConnections::new(live_options()),
            self.sink.clone(),
            always(),
            Arc::new(FixedClock(NOW.into())),
            config,
        )
    }

    /// App `a`'s last comparison.
    pub fn status(&self) -> fleetshard_gitops::reconciler::ComparisonStatus {
        self.sink.get(&key("a")).unwrap().comparison.unwrap()
    }
}

/// A repository, a fake cluster, app `a` on path `app`, and a reconciler with a short
/// wave delay and poll: the environment of the sync tests (hooks, waves, options,
/// lifecycle).
pub struct SyncEnv {
    /// The first commit.
    pub first: String,
    pub tmp: tempfile::TempDir,
    pub git: fleetshard_testsupport::git::Git,
    pub fake: FakeApiServer,
    pub inventory: Arc<StaticInventory>,
    pub sink: Arc<fleetshard_gitops::reconciler::MemorySink>,
    pub r: Arc<GitOpsReconciler>,
}

/// The reconciler settings of the sync tests: Argo CD's wave delay and operation poll
/// shortened.
pub fn sync_config() -> ReconcilerConfig {
    ReconcilerConfig {
        wave_delay: Duration::from_millis(20),
        operation_poll: Duration::from_millis(50),
        ..ReconcilerConfig::default()
    }
}

/// `files` committed, app `a` syncing `app` with `auto`.
pub async fn sync_env(files: &[(&str, String)], auto: Option<AutoSync>) -> SyncEnv {
    let tmp = tempfile::tempdir().unwrap();
    let git = fleetshard_testsupport::git::Git::init(&tmp.path().join("repo"));
    for (path, text) in files {
        git.write(path, text);
    }
    let first = git.commit("initial");
    let fake = FakeApiServer::start().await.unwrap();
    let inventory = Arc::new(StaticInventory::default());
    inventory.insert(target(
        "a",
        &git.path(),
        "main",
        "app",
        access("c1", &fake),
        auto,
    ));
    let sink = fleetshard_gitops::reconciler::MemorySink::new();
    let r = sync_reconciler(&inventory, tmp.path(), sink.clone(), always());
    SyncEnv {
        first,
        tmp,
        git,
        fake,
        inventory,
        sink,
        r,
    }
}

/// A reconciler of the sync tests over `inventory`, its repository cache under `dir`.
fn sync_reconciler(
    inventory: &Arc<StaticInventory>,
    dir: &std::path::Path,
    sink: Arc<fleetshard_gitops::reconciler::MemorySink>,
    lease: Arc<dyn LeaseCheck>,
) -> Arc<GitOpsReconciler> {
    Arc::new(GitOpsReconciler::new(
        inventory.clone(),
        repos(&dir.join("cache")),
        ClusterConnections::new(live_options()),
        sink,
        lease,
        Arc::new(FixedClock(NOW.into())),
        sync_config(),
    ))
}

impl SyncEnv {
    /// A new owner of the app: a reconciler with nothing in memory (a replica that took
    /// the app over), on the same cluster and status.
    pub fn owner(&self) -> Arc<GitOpsReconciler> {
        self.owner_with(always())
    }

    /// A new owner writing while `lease` says so.
    pub fn owner_with(&self, lease: Arc<dyn LeaseCheck>) -> Arc<GitOpsReconciler> {
        sync_reconciler(&self.inventory, self.tmp.path(), self.sink.clone(), lease)
    }

    /// One refresh and one operation of `r`.
    pub async fn step(&self, r: &GitOpsReconciler) -> fleetshard_controller::Operated {
        use fleetshard_controller::Reconciler;
        r.refresh(&key("a")).await.unwrap();
        r.operate(&key("a")).await.unwrap()
    }

    /// Steps `r` until `check` holds (a few seconds at most: the cache follows the
    /// cluster by watch).
    pub async fn until(&self, r: &GitOpsReconciler, what: &str, check: impl Fn(&SyncEnv) -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
        loop {
            if check(self) {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for: {what}; operation: {:?}",
                self.op().map(|o| (o.phase, o.message))
            );
            self.step(r).await;
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
    }

    /// The recorded operation.
    pub fn op(&self) -> Option<fleetshard_gitops::reconciler::OperationState> {
        self.sink.get(&key("a")).and_then(|s| s.operation)
    }

    /// The recorded operation's phase.
    pub fn phase(&self) -> String {
        self.op().map(|o| o.phase).unwrap_or_default()
    }

    /// Steps the reconciler until an operation at `revision` ended (retries over); its
    /// phase.
    pub async fn sync_to(&self, revision: &str) -> String {
        let r = self.r.clone();
        self.until(&r, &format!("an operation at {revision} ended"), |e| {
            e.op().is_some_and(|o| {
                o.phase != "Running"
                    && o.phase != "Terminating"
                    && o.sync_result.is_some_and(|s| s.revision == revision)
            })
        })
        .await;
        self.phase()
    }

    /// No retries of a failed sync (an automated sync retries 5 times by default).
    pub fn no_retries(&self) {
        self.update(|t| {
            t.spec.policy.retry = Some(fleetshard_manifest::RetryPolicy::default());
        });
    }

    /// The live object of `kind` `name` in namespace `default`.
    pub fn live(&self, api_version: &str, kind: &str, name: &str) -> Option<Value> {
        self.fake.get(api_version, kind, "default", name)
    }

    /// Changes app `a`'s spec.
    pub fn update(&self, f: impl FnOnce(&mut AppTarget)) {
        assert!(self.inventory.update(&key("a"), f));
    }

    /// Asks for a sync by hand.
    pub fn request(&self, r: fleetshard_manifest::SyncRequest) {
        self.update(|t| t.spec.sync_request = Some(r));
    }

    /// Acts as the Job controller: the Job `name` completed (or failed).
    pub fn finish_job(&self, name: &str, ok: bool) {
        let condition = if ok { "Complete" } else { "Failed" };
        self.fake
            .modify("batch/v1", "Job", "default", name, |j| {
                j["status"] = json!({"conditions": [{"type": condition, "status": "True"}]});
            })
            .unwrap();
    }

    /// The names of the live objects of `kind` (`api_version`) in `default`.
    pub fn names(&self, api_version: &str, kind: &str) -> Vec<String> {
        self.fake
            .list(api_version, kind, Some("default"))
            .iter()
            .filter_map(|o| {
                o.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
            .collect()
    }
}

/// A manifest of `kind` (`api_version`) `name` with `annotations` (`key: value` lines)
/// and `rest` (more top-level YAML).
pub fn object(
    api_version: &str,
    kind: &str,
    name: &str,
    annotations: &[(&str, &str)],
    rest: &str,
) -> String {
    let mut text = format!("apiVersion: {api_version}\nkind: {kind}\nmetadata:\n");
    if let Some(prefix) = name.strip_suffix('-') {
        text.push_str(&format!("  generateName: {prefix}-\n"));
    } else {
        text.push_str(&format!("  name: {name}\n"));
    }
    if !annotations.is_empty() {
        text.push_str("  annotations:\n");
        for (k, v) in annotations {
            text.push_str(&format!("    {k}: \"{v}\"\n"));
        }
    }
    text.push_str(rest);
    text
}

/// A Job manifest (a hook when `annotations` say so).
pub fn job(name: &str, annotations: &[(&str, &str)]) -> String {
    object(
        "batch/v1",
        "Job",
        name,
        annotations,
        "spec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: main\n        image: busybox\n",
    )
}
