//! The control plane guarded by what it is (issue 24): the cluster fleetshard runs in is
//! recognised however its cluster Secret registers it — here by another address and with
//! `insecure: true`, so neither its name nor its CA data says so; only its API server's
//! certificate, signed by the replica's own cluster CA, does — and under the permissive
//! default project an app writes nothing of Argo CD's namespace there: not another
//! cluster's Secret (whose `server` it would redirect), not a RoleBinding to
//! fleetshard's Role, not a Pod running as its service account, not an AppProject.

use std::sync::Arc;

use super::support::*;
use fleetshard_controller::{Operated, Reconciler};
use fleetshard_gitops::live::{ClusterAccess, ClusterConnections, ControlPlaneIdentity};
use fleetshard_gitops::reconciler::{
    FixedClock, GitOpsReconciler, MemorySink, ReconcilerConfig, StaticInventory,
};
use fleetshard_manifest::{AutoSync, ClusterCredentials};
use fleetshard_testsupport::git::Git;
use fleetshard_testsupport::kube_api::{FakeApiServer, FakeConfig, TlsOptions};
use serde_json::json;

const AUTO: AutoSync = AutoSync {
    prune: true,
    self_heal: false,
    allow_empty: false,
};

/// What an attacker's app puts in Argo CD's namespace.
const ATTACK: &[(&str, &str)] = &[
    (
        "app/secret.yaml",
        "apiVersion: v1\nkind: Secret\nmetadata: {name: cluster-prod, namespace: argocd}\nstringData: {server: 'https://attacker.example'}\n",
    ),
    (
        "app/binding.yaml",
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: steal, namespace: argocd}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: fleetshard}\nsubjects: [{kind: ServiceAccount, name: tenant, namespace: tenant}]\n",
    ),
    (
        "app/pod.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: borrow, namespace: argocd}\nspec: {serviceAccountName: fleetshard, containers: [{name: c, image: busybox}]}\n",
    ),
];

/// A cluster serving TLS with a CA of its own, with namespace `argocd`.
async fn tls_fake() -> FakeApiServer {
    let fake = FakeApiServer::start_with(FakeConfig {
        tls: Some(TlsOptions::default()),
        ..FakeConfig::default()
    })
    .await
    .expect("fake API server");
    fake.insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "argocd"}}))
        .unwrap();
    fake
}

/// The identity of the cluster `fake` serves, as a replica whose kubeconfig names it
/// `https://localhost:PORT` knows it.
async fn identity_of(fake: &FakeApiServer) -> ControlPlaneIdentity {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&fake.kubeconfig_yaml()).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    config.cluster_url = format!("https://localhost:{}", fake.addr().port())
        .parse()
        .unwrap();
    ControlPlaneIdentity::from_config(&config)
}

struct Env {
    _tmp: tempfile::TempDir,
    sink: Arc<MemorySink>,
    r: Arc<GitOpsReconciler>,
}

/// App `a` (default project, automated) with `files`, to `target` registered by its IP
/// address with `insecure: true`, on a replica whose own cluster is `own`'s.
async fn env(files: &[(&str, &str)], target: &FakeApiServer, own: &FakeApiServer) -> Env {
    let tmp = tempfile::tempdir().unwrap();
    let git = Git::init(&tmp.path().join("repo"));
    for (path, text) in files {
        git.write(path, text);
    }
    git.commit("initial");
    let by_ip = ClusterAccess {
        id: "uid-by-ip".into(),
        server: format!("https://127.0.0.1:{}", target.addr().port()),
        credentials: ClusterCredentials {
            insecure: true,
            ..ClusterCredentials::default()
        },
    };
    let inventory = Arc::new(StaticInventory::default());
    inventory.insert(super::support::target(
        "a",
        &git.path(),
        "main",
        "app",
        by_ip,
        Some(AUTO),
    ));
    let sink = MemorySink::new();
    let r = Arc::new(GitOpsReconciler::new(
        inventory,
        repos(&tmp.path().join("cache")),
        ClusterConnections::new(live_options()).with_control_plane_identity(identity_of(own).await),
        sink.clone(),
        always(),
        Arc::new(FixedClock(NOW.into())),
        ReconcilerConfig::default(),
    ));
    Env { _tmp: tmp, sink, r }
}

impl Env {
    fn conditions(&self) -> Vec<(String, String)> {
        let c = self.sink.get(&key("a")).unwrap().comparison.unwrap();
        c.conditions
            .into_iter()
            .map(|c| (c.kind, c.message))
            .collect()
    }

    async fn reconcile(&self) -> Operated {
        self.r.refresh(&key("a")).await.unwrap();
        self.r.operate(&key("a")).await.unwrap()
    }
}

/// Another cluster's Secret, as the admin created it.
fn cluster_secret() -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "cluster-prod", "namespace": "argocd",
            "labels": {"argocd.argoproj.io/secret-type": "cluster"}},
        "data": {"server": PROD}})
}

/// `https://prod.example`, base64.
const PROD: &str = "aHR0cHM6Ly9wcm9kLmV4YW1wbGU=";

/// Each attack alone is refused with a condition naming the rule, and nothing is
/// written: the cluster is recognised by its API server's certificate.
#[tokio::test]
async fn the_cluster_fleetshard_runs_in_is_guarded_however_it_is_registered() {
    let cluster = tls_fake().await;
    cluster.insert(cluster_secret()).unwrap();
    for (path, text) in ATTACK {
        let e = env(&[(path, text)], &cluster, &cluster).await;
        let writes = cluster.write_count();
        assert_eq!(e.reconcile().await, Operated::Idle, "{path}");
        let conditions = e.conditions();
        assert!(
            conditions.iter().any(|(k, m)| k == "InvalidSpecError"
                && m.contains("part of the control plane of the cluster fleetshard runs in")),
            "{path}: {conditions:?}"
        );
        assert_eq!(
            cluster.write_count(),
            writes,
            "{path}: something was written"
        );
    }
    let secret = cluster
        .get("v1", "Secret", "argocd", "cluster-prod")
        .unwrap();
    assert_eq!(secret["data"]["server"], PROD, "{secret}");
    assert!(cluster.get("v1", "Pod", "argocd", "borrow").is_none());
}

/// The probe recognises only the replica's own cluster: the same app on a cluster whose
/// CA is another is an ordinary destination (its `argocd` namespace is the app's to
/// write, as in Argo CD).
#[tokio::test]
async fn another_cluster_registered_the_same_way_is_not_the_control_plane() {
    let own = tls_fake().await;
    let other = tls_fake().await;
    let e = env(&[ATTACK[0]], &other, &own).await;
    let outcome = e.reconcile().await;
    let op = e.sink.get(&key("a")).unwrap().operation;
    assert_eq!(outcome, Operated::Finished, "{:?} {op:?}", e.conditions());
    let secret = other.get("v1", "Secret", "argocd", "cluster-prod").unwrap();
    assert_eq!(
        secret["data"]["server"], "aHR0cHM6Ly9hdHRhY2tlci5leGFtcGxl",
        "{secret}"
    );
}
