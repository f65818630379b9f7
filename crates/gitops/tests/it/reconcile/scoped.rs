//! Namespace-scoped clusters (the cluster Secret's `namespaces` and `clusterResources`)
//! on a fake API server whose token is bound to some namespaces only, as a namespaced
//! service account is: any cluster-wide list or watch is 403 there.

use std::sync::Arc;

use super::support::*;
use fleetshard_controller::{Operated, Reconciler};
use fleetshard_gitops::live::{ClusterAccess, ClusterCredentials, ClusterScope};
use fleetshard_gitops::reconciler::{GitOpsReconciler, MemorySink, StaticInventory};
use fleetshard_manifest::AutoSync;
use fleetshard_testsupport::git::{Git, config_map};
use fleetshard_testsupport::kube_api::{FakeApiServer, FakeConfig, NamespacedToken, Verb};
use serde_json::json;

const AUTO: Option<AutoSync> = Some(AutoSync {
    prune: true,
    self_heal: true,
    allow_empty: false,
});

/// Reaches namespaces `team-a` and `team-b`.
const TEAM: &str = "team-token";
/// Reaches `team-a` and the cluster-scoped kinds.
const TEAM_CLUSTER: &str = "team-cluster-token";

struct Env {
    tmp: tempfile::TempDir,
    git: Git,
    fake: FakeApiServer,
    inventory: Arc<StaticInventory>,
    sink: Arc<MemorySink>,
}

async fn env(files: &[(&str, String)]) -> Env {
    let tmp = tempfile::tempdir().unwrap();
    let git = Git::init(&tmp.path().join("repo"));
    for (path, text) in files {
        git.write(path, text);
    }
    git.commit("initial");
    let token = |token: &str, namespaces: &[&str], cluster_resources| NamespacedToken {
        token: token.to_owned(),
        user: format!("system:serviceaccount:argocd:{token}"),
        namespaces: namespaces.iter().map(|n| n.to_string()).collect(),
        cluster_resources,
    };
    let fake = FakeApiServer::start_with(FakeConfig {
        namespaced_tokens: vec![
            token(TEAM, &["team-a", "team-b"], false),
            token(TEAM_CLUSTER, &["team-a"], true),
        ],
        ..FakeConfig::default()
    })
    .await
    .unwrap();
    for ns in ["team-a", "team-b"] {
        fake.insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
            .unwrap();
    }
    Env {
        tmp,
        git,
        fake,
        inventory: Arc::new(StaticInventory::default()),
        sink: MemorySink::new(),
    }
}

/// The cluster as its Secret describes it: `token`, `namespaces`, `clusterResources`.
fn scoped(fake: &FakeApiServer, token: &str, namespaces: &str, cluster: bool) -> ClusterAccess {
    ClusterAccess {
        credentials: ClusterCredentials {
            bearer_token: Some(token.to_owned()),
            scope: ClusterScope::from_secret(namespaces, cluster),
            ..ClusterCredentials::default()
        },
        ..access("c1", fake)
    }
}

impl Env {
    /// App `a` from path `app`, to namespace `team-a` of `cluster`.
    fn add_app(&self, cluster: ClusterAccess) {
        let mut t = target("a", &self.git.path(), "main", "app", cluster, AUTO);
        t.app.destination.namespace = Some("team-a".into());
        self.inventory.insert(t);
    }

    fn reconciler(&self) -> Arc<GitOpsReconciler> {
        reconciler(
            &self.inventory,
            repos(&self.tmp.path().join("cache")),
            live_options(),
            self.sink.clone(),
            always(),
        )
    }

    /// The app's sync status and its conditions' messages.
    fn status(&self) -> (String, Vec<String>) {
        let c = self.sink.get(&key("a")).unwrap().comparison.unwrap();
        let messages = c
            .conditions
            .iter()
            .map(|c| format!("{}: {}", c.kind, c.message));
        (c.sync.status, messages.collect())
    }

    fn config_map(&self, ns: &str, name: &str) -> Option<serde_json::Value> {
        self.fake.get("v1", "ConfigMap", ns, name)
    }
}

/// A ConfigMap with its own namespace.
fn config_map_in(ns: &str, name: &str) -> String {
    format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: {ns}\n")
}

/// An object the app applied earlier (its tracking annotation), in `ns`.
fn tracked(ns: &str, name: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": ns, "annotations":
               {"argocd.argoproj.io/tracking-id": format!("a:/ConfigMap:{ns}/{name}")}}})
}

#[tokio::test]
async fn an_app_syncs_on_a_namespace_scoped_cluster_and_prunes_only_what_it_sees() {
    let e = env(&[("app/cm.yaml", config_map("settings", "1"))]).await;
    // Left by the app earlier: one in a listed namespace, one in a namespace the Secret
    // does not list (the credentials reach it, the Secret says not to look there).
    e.fake.insert(tracked("team-a", "old")).unwrap();
    e.fake.insert(tracked("team-b", "elsewhere")).unwrap();
    e.add_app(scoped(&e.fake, TEAM, "team-a", false));
    let r = e.reconciler();

    r.refresh(&key("a")).await.unwrap();
    assert_eq!(r.operate(&key("a")).await.unwrap(), Operated::Finished);
    r.refresh(&key("a")).await.unwrap();
    assert_eq!(e.status(), ("Synced".to_owned(), vec![]));
    assert!(e.config_map("team-a", "settings").is_some());
    assert!(e.config_map("team-a", "old").is_none(), "pruned");
    assert!(
        e.config_map("team-b", "elsewhere").is_some(),
        "never seen, never pruned"
    );
    // One watch per listed namespace: nothing was listed or watched cluster-wide (a
    // request the fake would have refused and counted).
    for verb in [Verb::List, Verb::Watch] {
        assert!(e.fake.request_count(verb, "configmaps") > 0, "{verb:?}");
    }
    let status = r.clusters().cached_objects();
    assert_eq!(status, 1, "only team-a's ConfigMaps are cached");
}

#[tokio::test]
async fn an_object_outside_the_listed_namespaces_refuses_the_whole_app() {
    let e = env(&[
        ("app/cm.yaml", config_map("settings", "1")),
        ("app/other.yaml", config_map_in("team-b", "other")),
    ])
    .await;
    e.fake.insert(tracked("team-a", "old")).unwrap();
    e.add_app(scoped(&e.fake, TEAM, "team-a", false));
    let r = e.reconciler();

    // Permanent: recorded, not retried; nothing applied or pruned.
    r.refresh(&key("a")).await.unwrap();
    let (sync, conditions) = e.status();
    assert_eq!(sync, "Unknown");
    assert_eq!(conditions.len(), 1, "{conditions:?}");
    let message = &conditions[0];
    assert!(message.starts_with("ComparisonError: "), "{message}");
    assert!(
        message.contains("namespace \"team-b\" of ConfigMap \"other\" is not managed"),
        "{message}"
    );
    assert_eq!(r.operate(&key("a")).await.unwrap(), Operated::Idle);
    assert!(e.config_map("team-a", "settings").is_none());
    assert!(e.config_map("team-a", "old").is_some());

    // The Secret now lists team-b too: the next refresh uses the new scope (a new
    // connection), with no restart.
    e.inventory.update(&key("a"), |t| {
        t.cluster = scoped(&e.fake, TEAM, "team-a,team-b", false);
    });
    r.refresh(&key("a")).await.unwrap();
    assert_eq!(r.operate(&key("a")).await.unwrap(), Operated::Finished);
    assert!(e.config_map("team-b", "other").is_some());
    assert!(e.config_map("team-a", "settings").is_some());
}

#[tokio::test]
async fn cluster_scoped_objects_need_cluster_resources() {
    let role = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  \
                name: reader\nrules: []\n";
    let e = env(&[
        ("app/cm.yaml", config_map("settings", "1")),
        ("app/role.yaml", role.to_owned()),
    ])
    .await;
    e.add_app(scoped(&e.fake, TEAM, "team-a", false));
    let r = e.reconciler();

    r.refresh(&key("a")).await.unwrap();
    let (sync, conditions) = e.status();
    assert_eq!(sync, "Unknown");
    let message = &conditions[0];
    assert!(message.starts_with("ComparisonError: "), "{message}");
    assert!(
        message.contains("cluster-scoped ClusterRole \"reader\""),
        "{message}"
    );
    assert!(message.contains("clusterResources"), "{message}");
    assert_eq!(r.operate(&key("a")).await.unwrap(), Operated::Idle);
    assert!(e.config_map("team-a", "settings").is_none());
    // Nothing cluster-scoped was listed or watched.
    assert_eq!(e.fake.request_count(Verb::List, "clusterroles"), 0);
    assert_eq!(e.fake.request_count(Verb::Watch, "clusterroles"), 0);

    // With clusterResources (and credentials that reach them), the app syncs.
    e.inventory.update(&key("a"), |t| {
        t.cluster = scoped(&e.fake, TEAM_CLUSTER, "team-a", true);
    });
    r.refresh(&key("a")).await.unwrap();
    assert_eq!(r.operate(&key("a")).await.unwrap(), Operated::Finished);
    r.refresh(&key("a")).await.unwrap();
    assert_eq!(e.status(), ("Synced".to_owned(), vec![]));
    assert!(
        e.fake
            .get("rbac.authorization.k8s.io/v1", "ClusterRole", "", "reader")
            .is_some()
    );
    assert!(e.config_map("team-a", "settings").is_some());
}
