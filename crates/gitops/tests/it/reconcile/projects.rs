//! H8: AppProjects enforced. Each rule refuses the app with an `InvalidSpecError`
//! condition and nothing is written; sync windows are read at the injected clock's time.

use std::sync::{Arc, Mutex};

use super::support::*;
use fleetshard_controller::{Operated, Reconciler};
use fleetshard_gitops::live::ClusterConnections;
use fleetshard_gitops::reconciler::{
    Clock, GitOpsReconciler, MemorySink, ReconcilerConfig, StaticInventory,
};
use fleetshard_manifest::{AppProject, AutoSync, SyncRequest, parse_input};
use fleetshard_testsupport::git::{Git, config_map};
use fleetshard_testsupport::kube_api::FakeApiServer;

/// A clock a test moves.
struct TestClock(Mutex<String>);

impl Clock for TestClock {
    fn now_rfc3339(&self) -> String {
        self.0.lock().unwrap().clone()
    }
}

const AUTO: AutoSync = AutoSync {
    prune: true,
    self_heal: true,
    allow_empty: false,
};

struct Env {
    _tmp: tempfile::TempDir,
    fake: FakeApiServer,
    inventory: Arc<StaticInventory>,
    sink: Arc<MemorySink>,
    clock: Arc<TestClock>,
    r: Arc<GitOpsReconciler>,
    repo: String,
    git: Git,
}

/// App `a` (automated, prune) on path `app` of a repository with `files`, in project
/// `spec` (YAML lines under `spec:`; `None`: a project that does not exist).
async fn env(files: &[(&str, String)], spec: Option<&str>) -> Env {
    let tmp = tempfile::tempdir().unwrap();
    let git = Git::init(&tmp.path().join("repo"));
    for (path, text) in files {
        git.write(path, text);
    }
    git.commit("initial");
    let fake = FakeApiServer::start().await.unwrap();
    let inventory = Arc::new(StaticInventory::default());
    let mut t = target(
        "a",
        &git.path(),
        "main",
        "app",
        access("c1", &fake),
        Some(AUTO),
    );
    t.app.project = "team".into();
    t.project = spec.map(|s| Arc::new(project(s)));
    inventory.insert(t);
    let sink = MemorySink::new();
    let clock = Arc::new(TestClock(Mutex::new("2026-03-02T10:00:00Z".into())));
    let r = Arc::new(GitOpsReconciler::new(
        inventory.clone(),
        repos(&tmp.path().join("cache")),
        ClusterConnections::new(live_options()),
        sink.clone(),
        always(),
        clock.clone(),
        ReconcilerConfig::default(),
    ));
    Env {
        _tmp: tmp,
        fake,
        inventory,
        sink,
        clock,
        r,
        repo: git.path(),
        git,
    }
}

fn project(spec: &str) -> AppProject {
    let text = format!(
        "apiVersion: argoproj.io/v1alpha1\nkind: AppProject\nmetadata: {{name: team, namespace: argocd}}\nspec:\n{spec}"
    );
    parse_input(&text, "team.yaml").unwrap().value.projects["team"].clone()
}

impl Env {
    fn conditions(&self) -> Vec<(String, String)> {
        let c = self.sink.get(&key("a")).unwrap().comparison.unwrap();
        c.conditions
            .into_iter()
            .map(|c| (c.kind, c.message))
            .collect()
    }

    /// Refresh and operate once.
    async fn reconcile(&self) -> Operated {
        self.r.refresh(&key("a")).await.unwrap();
        self.r.operate(&key("a")).await.unwrap()
    }

    /// The app is refused with an `InvalidSpecError` containing `what`, nothing synced.
    async fn assert_refused(&self, what: &str) {
        assert_eq!(self.reconcile().await, Operated::Idle);
        let conditions = self.conditions();
        assert!(
            conditions
                .iter()
                .any(|(k, m)| k == "InvalidSpecError" && m.contains(what)),
            "{conditions:?}"
        );
    }

    fn cm(&self, ns: &str, name: &str) -> Option<serde_json::Value> {
        self.fake.get("v1", "ConfigMap", ns, name)
    }
}

const OPEN: &str = "  sourceRepos: ['*']\n  destinations: [{server: '*', namespace: '*'}]\n";

#[tokio::test]
async fn a_destination_outside_the_project_is_refused() {
    let e = env(
        &[("app/cm.yaml", config_map("web", "1"))],
        Some("  sourceRepos: ['*']\n  destinations: [{server: '*', namespace: team-a}]\n"),
    )
    .await;
    e.assert_refused("do not match any of the allowed destinations in project team")
        .await;
    assert!(e.cm("default", "web").is_none(), "nothing applied");
}

#[tokio::test]
async fn a_repository_outside_the_project_is_refused() {
    let e = env(
        &[("app/cm.yaml", config_map("web", "1"))],
        Some("  sourceRepos: ['https://git.example/team/*']\n  destinations: [{server: '*', namespace: '*'}]\n"),
    )
    .await;
    e.assert_refused(&format!("application repo {} is not permitted", e.repo))
        .await;
    assert!(e.cm("default", "web").is_none());
}

#[tokio::test]
async fn an_app_whose_project_does_not_exist_is_refused() {
    let e = env(&[("app/cm.yaml", config_map("web", "1"))], None).await;
    e.assert_refused("references project team which does not exist")
        .await;
    assert!(e.cm("default", "web").is_none());
}

#[tokio::test]
async fn an_app_outside_argo_cds_namespace_needs_source_namespaces() {
    let e = env(&[("app/cm.yaml", config_map("web", "1"))], Some(OPEN)).await;
    e.inventory.remove(&key("a"));
    let mut t = target(
        "a",
        &e.repo,
        "main",
        "app",
        access("c1", &e.fake),
        Some(AUTO),
    );
    t.app.namespace = "tenant".into();
    t.app.project = "team".into();
    t.project = Some(Arc::new(project(OPEN)));
    e.inventory.insert(t.clone());
    let tenant = fleetshard_controller::AppKey::new("tenant", "a");
    e.r.refresh(&tenant).await.unwrap();
    assert_eq!(e.r.operate(&tenant).await.unwrap(), Operated::Idle);
    let c = e.sink.get(&tenant).unwrap().comparison.unwrap();
    assert!(
        c.conditions[0]
            .message
            .contains("not permitted to use project team")
    );
    // Argo CD's type for it: its project lookup fails.
    assert_eq!(c.conditions[0].kind, "UnknownError");
    assert!(e.cm("default", "web").is_none());
    // Admitted by sourceNamespaces, it syncs.
    t.project = Some(Arc::new(project(&format!(
        "{OPEN}  sourceNamespaces: [tenant]\n"
    ))));
    e.inventory.insert(t);
    e.r.refresh(&tenant).await.unwrap();
    assert_eq!(e.r.operate(&tenant).await.unwrap(), Operated::Finished);
    assert!(e.cm("default", "web").is_some());
}

/// The attack of issue 11: an app creates a ClusterRoleBinding to cluster-admin.
#[tokio::test]
async fn a_cluster_scoped_kind_needs_the_projects_allow_list() {
    let binding = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: pwn}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\nsubjects: [{kind: ServiceAccount, name: default, namespace: default}]\n";
    let e = env(
        &[
            ("app/crb.yaml", binding.to_owned()),
            ("app/cm.yaml", config_map("web", "1")),
        ],
        Some(OPEN),
    )
    .await;
    e.assert_refused("ClusterRoleBinding pwn is not permitted in project team")
        .await;
    assert!(
        e.fake
            .get(
                "rbac.authorization.k8s.io/v1",
                "ClusterRoleBinding",
                "",
                "pwn"
            )
            .is_none()
    );
    assert!(
        e.cm("default", "web").is_none(),
        "nothing of the app applied"
    );
}

#[tokio::test]
async fn a_namespaced_kind_on_the_deny_list_is_refused() {
    let e = env(
        &[("app/cm.yaml", config_map("web", "1"))],
        Some(&format!(
            "{OPEN}  namespaceResourceBlacklist: [{{group: '', kind: ConfigMap}}]\n"
        )),
    )
    .await;
    e.assert_refused("resource :ConfigMap default/web is not permitted in project team")
        .await;
    assert!(e.cm("default", "web").is_none());
}

/// The attack of issue 11: a manifest's own namespace escapes the destination.
#[tokio::test]
async fn a_manifests_namespace_cannot_escape_the_project() {
    let escape = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: kube-system}\ndata: {a: b}\n";
    let e = env(
        &[
            ("app/x.yaml", escape.to_owned()),
            ("app/cm.yaml", config_map("web", "1")),
        ],
        Some("  sourceRepos: ['*']\n  destinations: [{server: '*', namespace: default}]\n"),
    )
    .await;
    e.assert_refused("namespace kube-system on server").await;
    assert!(e.cm("kube-system", "x").is_none());
    assert!(e.cm("default", "web").is_none());
}

/// The attack of issue 11: an app rewrites a cluster Secret in Argo CD's namespace of the
/// cluster Argo CD runs on, even in the permissive default project.
#[tokio::test]
async fn argo_cds_control_plane_is_not_written_without_an_explicit_grant() {
    let secret = "apiVersion: v1\nkind: Secret\nmetadata: {name: cluster-prod, namespace: argocd}\nstringData: {server: 'https://attacker.example'}\n";
    let e = env(&[("app/s.yaml", secret.to_owned())], Some(OPEN)).await;
    // The destination is the in-cluster entry (id "").
    e.inventory.update(&key("a"), |t| {
        t.cluster.id = String::new();
        t.project = Some(Arc::new(AppProject::builtin_default("argocd")));
    });
    e.assert_refused("part of the control plane").await;
    assert!(
        e.fake
            .get("v1", "Secret", "argocd", "cluster-prod")
            .is_none()
    );
}

#[tokio::test]
async fn pruning_outside_the_project_is_refused() {
    let e = env(&[("app/cm.yaml", config_map("web", "1"))], Some(OPEN)).await;
    assert_eq!(e.reconcile().await, Operated::Finished);
    assert!(e.cm("default", "web").is_some());
    // The project is narrowed and the object leaves Git: pruning it would write outside.
    let narrowed = project(
        "  sourceRepos: ['*']\n  destinations: [{server: '*', namespace: default}]\n  namespaceResourceBlacklist: [{group: '', kind: ConfigMap}]\n",
    );
    e.inventory
        .update(&key("a"), |t| t.project = Some(Arc::new(narrowed)));
    e.git.run(&["rm", "-q", "app/cm.yaml"]);
    e.git.write("app/other.yaml", &config_map("other", "1"));
    e.git.commit("move");
    e.assert_refused("ConfigMap default/other is not permitted")
        .await;
    assert!(e.cm("default", "web").is_some(), "not pruned");
}

#[tokio::test]
async fn deny_windows_hold_automated_syncs_until_they_close() {
    let e = env(
        &[("app/cm.yaml", config_map("web", "1"))],
        Some(&format!(
            "{OPEN}  syncWindows: [{{kind: deny, schedule: '0 9 * * *', duration: 2h, applications: ['*']}}]\n"
        )),
    )
    .await;
    assert_eq!(
        e.reconcile().await,
        Operated::Idle,
        "10:00, inside the window"
    );
    assert!(e.cm("default", "web").is_none());
    *e.clock.0.lock().unwrap() = "2026-03-02T11:00:01Z".into();
    assert_eq!(e.reconcile().await, Operated::Finished, "the window closed");
    assert!(e.cm("default", "web").is_some());
}

#[tokio::test]
async fn a_manual_sync_waits_for_the_window_unless_manual_sync_is_allowed() {
    let windows = |manual: bool| {
        project(&format!(
            "{OPEN}  syncWindows: [{{kind: allow, schedule: '0 22 * * *', duration: 1h, applications: ['a'], manualSync: {manual}}}]\n"
        ))
    };
    let e = env(&[("app/cm.yaml", config_map("web", "1"))], None).await;
    e.inventory.update(&key("a"), |t| {
        t.spec.auto_sync = None;
        t.project = Some(Arc::new(windows(false)));
        t.spec.sync_request = Some(SyncRequest::default());
    });
    assert_eq!(
        e.reconcile().await,
        Operated::Idle,
        "outside the allow window"
    );
    assert!(e.cm("default", "web").is_none());
    e.r.refresh(&key("a")).await.unwrap();
    assert!(
        e.conditions()
            .iter()
            .any(|(k, m)| k == "SyncError" && m.contains("no allow window is active")),
        "{:?}",
        e.conditions()
    );
    e.inventory
        .update(&key("a"), |t| t.project = Some(Arc::new(windows(true))));
    assert_eq!(e.reconcile().await, Operated::Finished, "manualSync");
    assert!(e.cm("default", "web").is_some());
}
