//! The Kubernetes source against the fake API server (real HTTP, real time): each
//! condition is polled for with a generous deadline.

use fleetshard_controller::AppKey;
use fleetshard_controller::inventory::{
    Inventory, InventorySnapshot, KubernetesConfig, KubernetesSource, Severity,
};
use fleetshard_testsupport::kube_api::{FakeApiServer, Verb};
use serde_json::{Value, json};

const APPS: &str = "argoproj.io/v1alpha1";

use crate::support::wait_for;

fn secret(name: &str, server: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": "argocd",
                     "labels": {"argocd.argoproj.io/secret-type": "cluster", "env": "prod"}},
        "stringData": {"name": name, "server": server, "config": "{}"},
    })
}

fn app(ns: &str, name: &str, destination: Value) -> Value {
    json!({
        "apiVersion": APPS, "kind": "Application",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"project": "default", "destination": destination,
                 "source": {"repoURL": "https://git.example/repo", "path": name},
                 "syncPolicy": {"automated": {"prune": true}}},
    })
}

/// These tests' fleets model no in-cluster destination: the built-in entry is off
/// (`built_in_in_cluster_entry_completes_argo_cds_list` covers it).
fn without_in_cluster() -> KubernetesConfig {
    KubernetesConfig {
        in_cluster_enabled: false,
        ..KubernetesConfig::default()
    }
}

fn start(
    server: &FakeApiServer,
    config: KubernetesConfig,
) -> (Inventory, tokio::task::JoinHandle<()>) {
    let kube_config = kube::Config::new(server.url().parse().expect("the fake's URL"));
    let source = KubernetesSource::from_config(kube_config, config).expect("client");
    let inventory = Inventory::new();
    let task = tokio::spawn(source.run(inventory.clone()));
    (inventory, task)
}

fn servers(snap: &InventorySnapshot) -> Vec<&str> {
    snap.clusters.iter().map(|c| c.server.as_str()).collect()
}

fn app_keys(snap: &InventorySnapshot) -> Vec<String> {
    snap.apps
        .iter()
        .map(|a| format!("{}/{}", a.namespace, a.name))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_secrets_and_applications() {
    let server = FakeApiServer::start().await.expect("fake");
    // Argo CD's CRDs: every Application and status written is checked against their schema.
    server.install_argocd_crds().unwrap();
    server.insert(secret("a", "https://a/")).expect("insert");
    server.insert(secret("b", "https://b")).expect("insert");
    // Not a cluster Secret: no label (a repository credential, say).
    server
        .insert(json!({"apiVersion": "v1", "kind": "Secret",
                       "metadata": {"name": "repo", "namespace": "argocd"},
                       "stringData": {"server": "https://repo"}}))
        .expect("insert");
    // A cluster Secret in another namespace: not watched.
    let mut other = secret("c", "https://c");
    other["metadata"]["namespace"] = json!("elsewhere");
    server.insert(other).expect("insert");
    server
        .insert(app("argocd", "one", json!({"server": "https://a"})))
        .expect("insert");
    server
        .insert(app("team", "two", json!({"name": "b", "namespace": "x"})))
        .expect("insert");

    let (inventory, task) = start(&server, without_in_cluster());
    let mut rx = inventory.subscribe();
    let snap = wait_for(&mut rx, "initial listing", |s| s.ready).await;
    assert_eq!(servers(&snap), ["https://a", "https://b"]);
    assert_eq!(app_keys(&snap), ["argocd/one", "team/two"]);
    assert!(snap.problems.is_empty(), "{:?}", snap.problems);
    let a = &snap.clusters[0];
    assert!(!a.id.is_empty(), "the Secret's uid is the cluster id");
    assert_eq!(a.labels.get("env").map(String::as_str), Some("prod"));
    assert!(!a.labels.contains_key("argocd.argoproj.io/secret-type"));
    let one = &snap.spec(&AppKey::of(&snap.apps[0]));
    assert_eq!(one.source.path, "one");
    assert_eq!(one.auto_sync.map(|s| s.prune), Some(true));
    assert_eq!(snap.specs.len(), 2, "one spec per app");
    let rev = snap.revision;

    // Create, modify, delete.
    server.insert(secret("d", "https://d")).expect("insert");
    let snap = wait_for(&mut rx, "new Secret", |s| s.clusters.len() == 3).await;
    assert_eq!(snap.revision, rev + 1);
    assert!(snap.credentials.is_empty(), "config {{}} is the default");
    // A token in the Secret's config reaches the inventory, keyed by the cluster id.
    server
        .modify("v1", "Secret", "argocd", "d", |o| {
            o["stringData"]["config"] = json!(r#"{"bearerToken":"tok-d"}"#);
        })
        .expect("modify");
    let snap = wait_for(&mut rx, "credentials", |s| !s.credentials.is_empty()).await;
    let d = snap
        .clusters
        .iter()
        .find(|c| c.server == "https://d")
        .expect("d");
    assert_eq!(
        snap.credentials[&d.id].bearer_token.as_deref(),
        Some("tok-d")
    );
    let rev = snap.revision - 1;
    server
        .modify(APPS, "Application", "team", "two", |o| {
            o["spec"]["destination"] = json!({"server": "https://d"});
        })
        .expect("modify");
    let snap = wait_for(&mut rx, "modified app", |s| {
        s.apps[1].destination.server.as_deref() == Some("https://d")
    })
    .await;
    assert_eq!(snap.revision, rev + 2);
    server
        .delete("v1", "Secret", "argocd", "a")
        .expect("delete");
    let snap = wait_for(&mut rx, "deleted Secret", |s| s.clusters.len() == 2).await;
    assert_eq!(servers(&snap), ["https://b", "https://d"]);

    // A change that touches nothing the inventory reads (status) moves no revision: the
    // next real change moves it by exactly one.
    let before = snap.revision;
    server
        .modify(APPS, "Application", "argocd", "one", |o| {
            o["status"] = json!({"sync": {"status": "Synced"}});
        })
        .expect("modify");
    server
        .insert(app("argocd", "three", json!({"server": "https://b"})))
        .expect("insert");
    let snap = wait_for(&mut rx, "third app", |s| s.apps.len() == 3).await;
    assert_eq!(snap.revision, before + 1);

    // A sync asked for by hand changes the app's spec, not the app: the revision moves.
    server
        .modify(APPS, "Application", "argocd", "one", |o| {
            o["operation"] = json!({"sync": {"revision": "abc", "prune": true}});
        })
        .expect("modify");
    let one = AppKey::new("argocd", "one");
    let snap = wait_for(&mut rx, "operation", |s| {
        s.specs
            .get(&one)
            .is_some_and(|s| s.to_spec().sync_request.is_some())
    })
    .await;
    assert_eq!(snap.revision, before + 2);
    let spec = snap.spec(&one);
    let request = spec.sync_request.as_ref().expect("requested");
    assert_eq!(
        (request.revision.as_deref(), request.prune),
        (Some("abc"), true)
    );
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_objects_are_reported_and_the_last_good_version_kept() {
    let server = FakeApiServer::start().await.expect("fake");
    // Argo CD's CRDs: every Application and status written is checked against their schema.
    server.install_argocd_crds().unwrap();
    server.insert(secret("a", "https://a")).expect("insert");
    server
        .insert(app("argocd", "good", json!({"server": "https://a"})))
        .expect("insert");
    server
        .insert(app("argocd", "nowhere", json!({"namespace": "x"})))
        .expect("insert");
    let (inventory, task) = start(&server, without_in_cluster());
    let mut rx = inventory.subscribe();
    let snap = wait_for(&mut rx, "initial listing", |s| s.ready).await;
    assert_eq!(app_keys(&snap), ["argocd/good"]);
    let p: Vec<_> = snap.errors().collect();
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0].object, "Application argocd/nowhere");
    assert_eq!(p[0].field.as_deref(), Some("spec.destination"));
    assert_eq!(p[0].source, "kubernetes");

    // A good app turned bad keeps its last good version; so does a Secret.
    server
        .modify(APPS, "Application", "argocd", "good", |o| {
            o["spec"]["destination"] = json!({"namespace": "y"});
        })
        .expect("modify");
    server
        .modify("v1", "Secret", "argocd", "a", |o| {
            o["metadata"]["annotations"] = json!({"fleetshard.io/weight": "heavy"});
        })
        .expect("modify");
    let snap = wait_for(&mut rx, "two more problems", |s| s.errors().count() == 3).await;
    assert_eq!(app_keys(&snap), ["argocd/good"]);
    assert_eq!(
        snap.apps[0].destination.server.as_deref(),
        Some("https://a")
    );
    assert_eq!(servers(&snap), ["https://a"]);
    assert!(
        snap.errors().any(|p| p.object == "Secret argocd/a"
            && p.field.as_deref() == Some("metadata.annotations[fleetshard.io/weight]")),
        "{:?}",
        snap.problems
    );

    // Fixed: the problem goes and the new version is used.
    server
        .modify(APPS, "Application", "argocd", "nowhere", |o| {
            o["spec"]["destination"] = json!({"name": "a"});
        })
        .expect("modify");
    let snap = wait_for(&mut rx, "fixed app", |s| s.apps.len() == 2).await;
    assert_eq!(snap.errors().count(), 2);
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovers_after_compaction_and_closed_watches() {
    let server = FakeApiServer::start().await.expect("fake");
    // Argo CD's CRDs: every Application and status written is checked against their schema.
    server.install_argocd_crds().unwrap();
    server.insert(secret("a", "https://a")).expect("insert");
    server
        .insert(app("argocd", "one", json!({"server": "https://a"})))
        .expect("insert");
    let config = KubernetesConfig {
        apps_namespace: Some("argocd".to_owned()),
        ..without_in_cluster()
    };
    let (inventory, task) = start(&server, config);
    let mut rx = inventory.subscribe();
    let snap = wait_for(&mut rx, "initial listing", |s| s.ready).await;
    assert_eq!(app_keys(&snap), ["argocd/one"]);

    // Changes made while the watches are down, with the history gone: the watcher gets
    // 410 on resuming and re-lists. The watches are stalled first, so that none of the
    // changes reaches the watcher before the history goes (else it could resume past it).
    let lists = server.request_count(Verb::List, "applications");
    let stalled = server.partition(|r| r.verb == Some(Verb::Watch));
    server.compact();
    server
        .insert(app("argocd", "two", json!({"server": "https://a"})))
        .expect("insert");
    server
        .insert(app("other", "ignored", json!({"server": "https://a"})))
        .expect("insert");
    server
        .delete("v1", "Secret", "argocd", "a")
        .expect("delete");
    server.insert(secret("b", "https://b")).expect("insert");
    server.compact();
    server.close_watches();
    server.remove_fault(stalled);
    let snap = wait_for(&mut rx, "re-listed", |s| {
        s.apps.len() == 2 && s.clusters.len() == 1 && s.clusters[0].server == "https://b"
    })
    .await;
    assert_eq!(app_keys(&snap), ["argocd/one", "argocd/two"]);
    assert!(snap.ready);
    assert!(
        server.request_count(Verb::List, "applications") > lists,
        "recovered by a re-list"
    );
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connectivity_problems_are_reported_and_cleared() {
    let server = FakeApiServer::start().await.expect("fake");
    // Argo CD's CRDs: every Application and status written is checked against their schema.
    server.install_argocd_crds().unwrap();
    server.insert(secret("a", "https://a")).expect("insert");
    // The first listings of Applications fail: the source reports it and keeps trying.
    server.fail_next(2, 503, |r| r.is(Verb::List, "applications"));
    let (inventory, task) = start(&server, without_in_cluster());
    let mut rx = inventory.subscribe();
    let snap = wait_for(&mut rx, "connectivity problem", |s| {
        s.problems.iter().any(|p| p.object.contains("Applications"))
    })
    .await;
    assert!(!snap.ready, "not every kind is listed yet");
    let p = snap
        .problems
        .iter()
        .find(|p| p.object.contains("Applications"))
        .expect("found");
    assert_eq!(p.severity, Severity::Error);
    let snap = wait_for(&mut rx, "recovered", |s| s.ready && s.problems.is_empty()).await;
    assert_eq!(servers(&snap), ["https://a"]);
    task.abort();
}

/// Argo CD's cluster list carries a built-in in-cluster entry (id "", the pod's service
/// account) while no Secret names `https://kubernetes.default.svc`; a Secret for that server
/// replaces it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn built_in_in_cluster_entry_completes_argo_cds_list() {
    let server = FakeApiServer::start().await.expect("fake");
    // Argo CD's CRDs: every Application and status written is checked against their schema.
    server.install_argocd_crds().unwrap();
    server.insert(secret("a", "https://a")).expect("insert");
    let (inventory, task) = start(&server, KubernetesConfig::default());
    let mut rx = inventory.subscribe();
    let snap = wait_for(&mut rx, "initial listing", |s| s.ready).await;
    assert_eq!(
        servers(&snap),
        ["https://a", "https://kubernetes.default.svc"]
    );
    let entry = &snap.clusters[1];
    assert_eq!((entry.id.as_str(), entry.name.as_str()), ("", "in-cluster"));
    assert!(snap.credentials[""].pod_service_account);

    server
        .insert(secret("local", "https://kubernetes.default.svc"))
        .expect("insert");
    let snap = wait_for(&mut rx, "a Secret for the in-cluster server", |s| {
        s.clusters.iter().all(|c| !c.id.is_empty()) && s.clusters.len() == 2
    })
    .await;
    assert_eq!(snap.clusters[1].name, "local");
    assert!(!snap.credentials.contains_key(""));
    task.abort();
}

/// argocd-cm's `cluster.inClusterEnabled: "false"` turns the built-in in-cluster entry off,
/// as in Argo CD; any other value, or no argocd-cm, leaves it on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argocd_cm_turns_the_in_cluster_entry_off() {
    let server = FakeApiServer::start().await.expect("fake");
    server.insert(secret("a", "https://a")).expect("insert");
    let argocd_cm = |value: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "argocd-cm", "namespace": "argocd"},
               "data": {"cluster.inClusterEnabled": value}})
    };
    server.insert(argocd_cm("false")).expect("insert");
    let (inventory, task) = start(&server, KubernetesConfig::default());
    let mut rx = inventory.subscribe();
    let snap = wait_for(&mut rx, "initial listing", |s| s.ready).await;
    assert_eq!(servers(&snap), ["https://a"], "off in argocd-cm");

    server
        .modify("v1", "ConfigMap", "argocd", "argocd-cm", |cm| {
            cm["data"]["cluster.inClusterEnabled"] = json!("true");
        })
        .expect("modify");
    let snap = wait_for(&mut rx, "the entry back", |s| s.clusters.len() == 2).await;
    assert_eq!(snap.clusters[1].server, "https://kubernetes.default.svc");
    // The whole data is published (render requests carry it), and follows changes.
    assert_eq!(
        snap.argocd_cm
            .get("cluster.inClusterEnabled")
            .map(String::as_str),
        Some("true")
    );
    let revision = snap.revision;
    server
        .modify("v1", "ConfigMap", "argocd", "argocd-cm", |cm| {
            cm["data"]["kustomize.buildOptions"] = json!("--enable-helm");
        })
        .expect("modify");
    let snap = wait_for(&mut rx, "the new setting", |s| {
        s.argocd_cm.contains_key("kustomize.buildOptions")
    })
    .await;
    assert!(
        snap.revision > revision,
        "a settings change moves the revision"
    );
    task.abort();
}
