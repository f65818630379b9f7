//! Orphaned resources and repeated resources end to end, on a fake API server with a real
//! Git repository: the top-level objects of the destination namespace no app manages,
//! looked for only while the app's AppProject sets `orphanedResources`, shown as Argo CD
//! shows them (the tree's `orphanedNodes` in Redis, the `OrphanedResourceWarning`
//! condition on an Application Argo CD's CRD validates, the count behind
//! `argocd_app_orphaned_resources_count`); and an object the manifests define twice, of
//! which the last wins with a `RepeatedResourceWarning`.

use std::sync::Arc;
use std::time::Duration;

use super::support::*;
use fleetshard_appstate::{AppStateCache, Compression, RedisSettings};
use fleetshard_controller::{Operated, Reconciler};
use fleetshard_gitops::live::ClusterConnections;
use fleetshard_gitops::reconciler::{
    FixedClock, GitOpsReconciler, ORPHANED_RESOURCE_WARNING, REPEATED_RESOURCE_WARNING,
};
use fleetshard_manifest::project::{OrphanedResourceKey, OrphanedResources};
use fleetshard_manifest::{AppProject, AutoSync};
use fleetshard_testsupport::kube_api::{FakeApiServer, Verb};
use fleetshard_testsupport::redis::RedisServer;
use serde_json::{Value, json};

const AUTO: Option<AutoSync> = Some(AutoSync {
    prune: false,
    self_heal: false,
    allow_empty: false,
});

/// Argo CD's default project with `orphanedResources` set to `settings`.
fn project(settings: Option<OrphanedResources>) -> Arc<AppProject> {
    Arc::new(AppProject {
        orphaned_resources: settings,
        ..AppProject::builtin_default("argocd")
    })
}

fn config_map(name: &str, namespace: &str, annotations: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
           "data": {"a": "b"}})
}

/// What the cluster holds beside app `a`'s Deployment: orphans, objects that are never
/// orphans, another app's object, and an object of another namespace.
fn seed(fake: &FakeApiServer) {
    let none = json!({});
    for obj in [
        config_map("stray", "default", none.clone()),
        // Ignored by the project, and present in every namespace.
        config_map("keep-me", "default", none.clone()),
        config_map("kube-root-ca.crt", "default", none.clone()),
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": "default", "namespace": "default"}}),
        // Tracked by app `b`, which exists; and by an app that does not (an orphan).
        config_map(
            "of-b",
            "default",
            json!({"argocd.argoproj.io/tracking-id": "b:/ConfigMap:default/of-b"}),
        ),
        config_map(
            "ghost",
            "default",
            json!({"argocd.argoproj.io/tracking-id": "gone:/ConfigMap:default/ghost"}),
        ),
        config_map("elsewhere", "other", none.clone()),
    ] {
        fake.insert(obj).unwrap();
    }
    // An orphaned Deployment and its ReplicaSet (counted as Argo CD counts descendants).
    let old = fake
        .insert(json!({"apiVersion": "apps/v1", "kind": "Deployment",
                       "metadata": {"name": "old", "namespace": "default"},
                       "spec": {"selector": {"matchLabels": {"app": "old"}},
                                "template": {"metadata": {"labels": {"app": "old"}},
                                             "spec": {"containers": [{"name": "c", "image": "x"}]}}}}))
        .unwrap();
    fake.insert(json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                       "metadata": {"name": "old-1", "namespace": "default",
                                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                                         "name": "old", "uid": old["metadata"]["uid"]}]}}))
        .unwrap();
}

fn with_warning() -> OrphanedResources {
    OrphanedResources {
        warn: Some(true),
        ignore: vec![OrphanedResourceKey {
            kind: "ConfigMap".into(),
            name: "keep-*".into(),
            ..OrphanedResourceKey::default()
        }],
    }
}

fn conditions_of(status: &Value, kind: &str) -> Vec<String> {
    status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["type"] == kind)
        .map(|c| c["message"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn orphan_count(r: &GitOpsReconciler) -> usize {
    r.app_reports()
        .iter()
        .find(|a| a.key == key("a"))
        .map(|a| a.orphaned_resources)
        .unwrap()
}

#[tokio::test]
async fn orphans_show_in_the_tree_the_condition_and_the_count() {
    let e = sync_env(&[("app/web.yaml", deployment("web", "nginx:1.27"))], AUTO).await;
    seed(&e.fake);
    let mut b = target(
        "b",
        &e.git.path(),
        "main",
        "app",
        access("c1", &e.fake),
        None,
    );
    b.app.destination.namespace = Some("other".into());
    e.inventory.insert(b);
    e.update(|t| t.project = Some(project(Some(with_warning()))));
    let control = FakeApiServer::start().await.unwrap();
    control.install_argocd_crds().unwrap();
    control.insert(application("a")).unwrap();
    let redis = RedisServer::start().unwrap();
    let mut settings = RedisSettings::new(redis.address());
    settings.compression = Compression::None;
    let r = Arc::new(
        GitOpsReconciler::new(
            e.inventory.clone(),
            repos(&e.tmp.path().join("cache")),
            ClusterConnections::new(live_options()),
            Arc::new(sink_for(&control)),
            always(),
            Arc::new(FixedClock(NOW.into())),
            sync_config(),
        )
        .with_app_state(Arc::new(AppStateCache::start(settings).unwrap())),
    );
    r.refresh(&key("a")).await.unwrap();
    loop {
        match r.operate(&key("a")).await.unwrap() {
            Operated::Finished => break,
            Operated::Wait(d) => tokio::time::sleep(d).await,
            other => panic!("the sync stopped: {other:?}"),
        }
    }
    r.refresh(&key("a")).await.unwrap();
    let status = app_status(&control, "a");
    assert_eq!(status["sync"]["status"], "Synced", "{status:#}");
    // The app's own Deployment is not an orphan; ghost, stray, old and its ReplicaSet are.
    assert_eq!(
        conditions_of(&status, ORPHANED_RESOURCE_WARNING),
        ["Application has 4 orphaned resources"],
        "{status:#}"
    );
    assert_eq!(orphan_count(&r), 4);
    let tree = eventually(Duration::from_secs(10), "the tree in Redis", || {
        let redis = &redis;
        async move {
            let bytes = redis.get("app|resources-tree|a|1.8.3").unwrap()?;
            Some(serde_json::from_slice::<Value>(&bytes).unwrap())
        }
    })
    .await;
    let orphaned: Vec<String> = tree["orphanedNodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            format!(
                "{}/{}",
                n["kind"].as_str().unwrap(),
                n["name"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        orphaned,
        [
            "ConfigMap/ghost",
            "ConfigMap/stray",
            "Deployment/old",
            "ReplicaSet/old-1"
        ],
        "{tree:#}"
    );
    let replica_set = &tree["orphanedNodes"][3];
    assert_eq!(replica_set["parentRefs"][0]["name"], "old", "{tree:#}");
    assert!(
        tree["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["name"] == "web"),
        "{tree:#}"
    );

    // A new orphan shows at the next refresh (the namespace is watched now).
    e.fake
        .insert(config_map("late", "default", json!({})))
        .unwrap();
    eventually(Duration::from_secs(10), "the new orphan counted", || {
        let r = r.clone();
        async move {
            r.refresh(&key("a")).await.unwrap();
            (orphan_count(&r) == 5).then_some(())
        }
    })
    .await;
    let status = app_status(&control, "a");
    assert_eq!(
        conditions_of(&status, ORPHANED_RESOURCE_WARNING),
        ["Application has 5 orphaned resources"]
    );
}

#[tokio::test]
async fn orphans_are_looked_for_only_while_the_project_asks() {
    let e = sync_env(&[("app/web.yaml", deployment("web", "nginx:1.27"))], None).await;
    seed(&e.fake);
    let r = e.owner();
    let lists = |fake: &FakeApiServer| {
        fake.request_count(Verb::List, "configmaps") + fake.request_count(Verb::Watch, "configmaps")
    };
    r.refresh(&key("a")).await.unwrap();
    let status = serde_json::to_value(e.sink.get(&key("a")).unwrap().comparison.unwrap()).unwrap();
    assert!(conditions_of(&status, ORPHANED_RESOURCE_WARNING).is_empty());
    assert_eq!(orphan_count(&r), 0);
    assert_eq!(lists(&e.fake), 0, "no ConfigMap is listed or watched");

    // `orphanedResources: {}`: looked for and counted, not warned of (`warn` unset).
    e.update(|t| t.project = Some(project(Some(OrphanedResources::default()))));
    r.refresh(&key("a")).await.unwrap();
    let status = serde_json::to_value(e.sink.get(&key("a")).unwrap().comparison.unwrap()).unwrap();
    assert!(
        conditions_of(&status, ORPHANED_RESOURCE_WARNING).is_empty(),
        "{status:#}"
    );
    // keep-me counts now (no ignore entry); app b does not exist here, so of-b does too.
    assert_eq!(orphan_count(&r), 6);
    assert!(lists(&e.fake) > 0);
    let conn = r.clusters().start(&access("c1", &e.fake)).await.unwrap();
    assert!(conn.orphan_watches() > 0);

    // The setting removed: the namespace's watches end, nothing is counted.
    e.update(|t| t.project = Some(project(None)));
    r.refresh(&key("a")).await.unwrap();
    assert_eq!(conn.orphan_watches(), 0);
    assert_eq!(orphan_count(&r), 0);

    // Asked again, then the app deleted: its watches end with it.
    e.update(|t| t.project = Some(project(Some(OrphanedResources::default()))));
    r.refresh(&key("a")).await.unwrap();
    assert!(conn.orphan_watches() > 0);
    e.inventory.remove(&key("a"));
    r.refresh(&key("a")).await.unwrap();
    assert_eq!(conn.orphan_watches(), 0);
}

#[tokio::test]
async fn the_last_of_repeated_objects_wins_with_a_warning() {
    let settings = |value: &str| {
        object(
            "v1",
            "ConfigMap",
            "settings",
            &[],
            &format!("data:\n  value: \"{value}\"\n"),
        )
    };
    let e = sync_env(
        &[
            ("app/a.yaml", settings("first")),
            ("app/b.yaml", settings("last")),
        ],
        AUTO,
    )
    .await;
    assert_eq!(e.sync_to(&e.first).await, "Succeeded");
    let live = e.live("v1", "ConfigMap", "settings").unwrap();
    assert_eq!(live["data"]["value"], "last");
    e.r.refresh(&key("a")).await.unwrap();
    let status = e.sink.get(&key("a")).unwrap().comparison.unwrap();
    assert_eq!(status.sync.status, "Synced");
    let repeated: Vec<&str> = status
        .conditions
        .iter()
        .filter(|c| c.kind == REPEATED_RESOURCE_WARNING)
        .map(|c| c.message.as_str())
        .collect();
    assert_eq!(
        repeated,
        ["Resource /ConfigMap/default/settings appeared 2 times among application resources."]
    );
    assert_eq!(status.resources.len(), 1);
}
