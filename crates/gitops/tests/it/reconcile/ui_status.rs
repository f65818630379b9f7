//! The status fields Argo CD's UI and CLI read beyond sync and health, written on an
//! Application that Argo CD's CRD validates: `sync.comparedTo`, `controllerNamespace`,
//! `summary` (the tree's images and external URLs, the app's own links),
//! `resources[].syncWave`, `health.lastTransitionTime` and an automated sync's
//! `initiatedBy`.

use std::sync::Arc;
use std::time::Duration;

use super::support::*;
use fleetshard_appstate::{AppStateCache, RedisSettings};
use fleetshard_controller::{Operated, Reconciler};
use fleetshard_gitops::live::ClusterConnections;
use fleetshard_gitops::reconciler::{FixedClock, GitOpsReconciler, StaticInventory};
use fleetshard_manifest::AutoSync;
use fleetshard_manifest::customizations::IgnoreDifference;
use fleetshard_testsupport::git::Git;
use fleetshard_testsupport::kube_api::FakeApiServer;
use serde_json::{Value, json};

/// A ConfigMap of an earlier wave (its wave shows on its resource entry).
const SETTINGS: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  annotations:\n    argocd.argoproj.io/sync-wave: \"-1\"\ndata:\n  a: \"1\"\n";

const INGRESS: &str = "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: web\nspec:\n  rules:\n  - host: shop.example\n    http:\n      paths:\n      - path: /\n        pathType: Prefix\n        backend:\n          service:\n            name: web\n            port:\n              number: 80\n";

/// A Pod of the Deployment `web` (owned through a ReplicaSet, as its controller makes it).
fn pod_of(deployment_uid: &str) -> [Value; 2] {
    [
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
               "metadata": {"name": "web-1", "namespace": "default", "uid": "rs-web-1",
                            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                                 "name": "web", "uid": deployment_uid}]}}),
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "web-1-x", "namespace": "default", "uid": "pod-web-1",
                            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                                 "name": "web-1", "uid": "rs-web-1"}]},
               "spec": {"initContainers": [{"name": "init", "image": "busybox:1.36"}],
                        "containers": [{"name": "main", "image": "nginx:1.27"}]},
               "status": {"phase": "Running"}}),
    ]
}

#[tokio::test]
async fn the_ui_fields_are_written_and_valid_against_argo_cds_crd() {
    let tmp = tempfile::tempdir().unwrap();
    let git = Git::init(&tmp.path().join("repo"));
    git.write("app/web.yaml", &deployment("web", "nginx:1.27"));
    git.write("app/ingress.yaml", INGRESS);
    git.write("app/settings.yaml", SETTINGS);
    git.commit("web");
    let cluster = FakeApiServer::start().await.unwrap();
    let control = FakeApiServer::start().await.unwrap();
    control.install_argocd_crds().unwrap();
    control.insert(application("web")).unwrap();
    let inventory = Arc::new(StaticInventory::default());
    let auto = Some(AutoSync {
        prune: true,
        self_heal: true,
        allow_empty: false,
    });
    let mut t = target(
        "web",
        &git.path(),
        "main",
        "app",
        access("c1", &cluster),
        auto,
    );
    t.spec.source.raw = json!({"repoURL": git.path(), "path": "app", "targetRevision": "main"});
    t.spec.links = vec!["https://grafana.example/d/web".to_owned()];
    t.spec.ignore_differences = vec![IgnoreDifference {
        group: "apps".into(),
        kind: "Deployment".into(),
        rules: serde_json::from_value(json!({"jsonPointers": ["/spec/replicas"]})).unwrap(),
        ..IgnoreDifference::default()
    }];
    inventory.insert(t.clone());
    // The tree (and so the summary) is built for the app-state cache; Redis need not be
    // up: its writer keeps the values and never blocks the refresh.
    let cache = AppStateCache::start(RedisSettings::new("127.0.0.1:9")).unwrap();
    let r = Arc::new(
        GitOpsReconciler::new(
            inventory.clone(),
            repos(&tmp.path().join("cache")),
            ClusterConnections::new(live_options()),
            Arc::new(sink_for(&control)),
            always(),
            Arc::new(FixedClock(NOW.into())),
            sync_config(),
        )
        .with_app_state(Arc::new(cache)),
    );
    r.refresh(&key("web")).await.unwrap();
    loop {
        match r.operate(&key("web")).await.unwrap() {
            Operated::Finished => break,
            Operated::Wait(d) => tokio::time::sleep(d).await,
            other => panic!("the sync stopped: {other:?}"),
        }
    }
    let uid = cluster
        .get("apps/v1", "Deployment", "default", "web")
        .unwrap()["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_owned();
    for object in pod_of(&uid) {
        cluster.insert(object).unwrap();
    }
    // The tree's kinds are watched from the first tree on: a later refresh sees the Pod.
    let status = eventually(
        Duration::from_secs(10),
        "the Pod's images in the summary",
        || {
            let (r, control) = (r.clone(), &control);
            async move {
                r.refresh(&key("web")).await.unwrap();
                let s = app_status(control, "web");
                // An empty list is a summary written before the watch saw the Pod.
                let images = s["summary"]["images"].as_array();
                images.is_some_and(|i| !i.is_empty()).then_some(s)
            }
        },
    )
    .await;
    assert_eq!(
        status["summary"],
        json!({"externalURLs": ["http://shop.example/", "https://grafana.example/d/web"],
               "images": ["busybox:1.36", "nginx:1.27"], "isAppOfApps": false}),
        "{status:#}"
    );
    assert_eq!(
        status["sync"]["comparedTo"],
        json!({"source": {"repoURL": git.path(), "path": "app", "targetRevision": "main"},
               "destination": {"server": cluster.url(), "namespace": "default"},
               "ignoreDifferences": [{"group": "apps", "kind": "Deployment",
                                      "jsonPointers": ["/spec/replicas"]}]}),
        "{status:#}"
    );
    assert_eq!(status["controllerNamespace"], "argocd");
    assert_eq!(status["health"]["lastTransitionTime"], NOW);
    let wave = |kind: &str| {
        status["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["kind"] == kind)
            .map(|e| e.get("syncWave").cloned())
    };
    assert_eq!(wave("ConfigMap"), Some(Some(json!(-1))), "{status:#}");
    assert_eq!(wave("Deployment"), Some(None), "wave 0 is left out");
    let op = &status["operationState"];
    assert_eq!(op["operation"]["initiatedBy"], json!({"automated": true}));
    assert_eq!(op["syncResult"]["source"]["repoURL"], git.path());

    // A spec change replaces what was compared: a field removed is gone.
    t.spec.ignore_differences.clear();
    t.spec.source.raw = json!({"repoURL": git.path(), "path": "app"});
    inventory.insert(t.clone());
    r.refresh(&key("web")).await.unwrap();
    let status = app_status(&control, "web");
    assert_eq!(
        status["sync"]["comparedTo"],
        json!({"source": {"repoURL": git.path(), "path": "app"},
               "destination": {"server": cluster.url(), "namespace": "default"}}),
        "{status:#}"
    );

    // A key removed inside a free-form map of the source goes too (the UI compares
    // `comparedTo` with the spec to tell a changed spec).
    let labels =
        |l: Value| json!({"repoURL": git.path(), "path": "app", "kustomize": {"commonLabels": l}});
    for l in [
        json!({"team": "shop", "tier": "web"}),
        json!({"team": "shop"}),
    ] {
        t.spec.source.raw = labels(l);
        inventory.insert(t.clone());
        r.refresh(&key("web")).await.unwrap();
    }
    let status = app_status(&control, "web");
    assert_eq!(
        status["sync"]["comparedTo"]["source"],
        labels(json!({"team": "shop"})),
        "{status:#}"
    );
}
