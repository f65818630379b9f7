//! The shard count from the Argo CD controller Deployment's `spec.replicas`, read once and
//! kept current, against the fake API server.

use std::time::Duration;

use fleetshard_replica::deployment::{DEFAULT_CONTROLLER_NAME, DeploymentReplicas, ReplicasError};
use fleetshard_store_kube::{KubeOptions, KubeStore};
use fleetshard_testsupport::kube_api::FakeApiServer;
use serde_json::json;

fn deployment(replicas: Option<i64>) -> serde_json::Value {
    let mut spec = json!({
        "selector": {"matchLabels": {"app": "c"}},
        "template": {"metadata": {"labels": {"app": "c"}},
                     "spec": {"containers": [{"name": "c", "image": "c"}]}},
    });
    if let Some(r) = replicas {
        spec["replicas"] = json!(r);
    }
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": DEFAULT_CONTROLLER_NAME, "namespace": "argocd"},
           "spec": spec})
}

async fn replicas(server: &FakeApiServer) -> DeploymentReplicas {
    server.create_namespace("argocd").unwrap();
    let config = kube::Config::new(server.url().parse().expect("the fake's URL"));
    let store = KubeStore::from_config(config, Some("argocd"), KubeOptions::default());
    DeploymentReplicas::new(
        store.client().await.unwrap(),
        "argocd",
        DEFAULT_CONTROLLER_NAME,
        Duration::from_secs(2),
    )
}

fn set_replicas(server: &FakeApiServer, n: i64) {
    server
        .modify(
            "apps/v1",
            "Deployment",
            "argocd",
            DEFAULT_CONTROLLER_NAME,
            |d| d["spec"]["replicas"] = json!(n),
        )
        .unwrap();
}

#[tokio::test]
async fn read_once() {
    let server = FakeApiServer::start().await.expect("fake API server");
    let r = replicas(&server).await;
    assert_eq!(r.get().await.unwrap(), None, "no Deployment");
    server.insert(deployment(Some(3))).unwrap();
    assert_eq!(r.get().await.unwrap(), Some(3));
    server.insert(deployment(None)).unwrap();
    assert_eq!(r.get().await.unwrap(), Some(1), "Kubernetes' default");
    set_replicas(&server, -2);
    assert!(matches!(
        r.get().await,
        Err(ReplicasError::Negative { value: -2, .. })
    ));
    server.fail_next(1, 503, |i| i.resource == "deployments");
    assert!(matches!(
        r.get().await,
        Err(ReplicasError::Unavailable { .. })
    ));
    server.fail_next(1, 403, |i| i.resource == "deployments");
    let e = r.get().await.unwrap_err();
    assert!(matches!(&e, ReplicasError::Refused { name, .. } if name == DEFAULT_CONTROLLER_NAME));
}

/// Waits until the receiver holds `want`.
async fn until(rx: &mut tokio::sync::watch::Receiver<Option<u32>>, want: Option<u32>) {
    let seen = tokio::time::timeout(Duration::from_secs(10), rx.wait_for(|v| *v == want))
        .await
        .map(|r| r.is_ok());
    assert_eq!(
        seen,
        Ok(true),
        "never saw {want:?}, last {:?}",
        *rx.borrow()
    );
}

#[tokio::test]
async fn kept_current_through_scaling_deletion_and_a_compacted_watch() {
    let server = FakeApiServer::start().await.expect("fake API server");
    let r = replicas(&server).await;
    server.insert(deployment(Some(2))).unwrap();
    let watch = r.watch().await.unwrap();
    assert_eq!(
        watch.current(),
        Some(2),
        "the first value is read before returning"
    );
    let mut rx = watch.receiver();
    set_replicas(&server, 5);
    until(&mut rx, Some(5)).await;
    // Other Deployments do not matter.
    server
        .insert(json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "other", "namespace": "argocd"},
            "spec": {"replicas": 9, "selector": {}, "template": {}}}))
        .unwrap();
    set_replicas(&server, 4);
    until(&mut rx, Some(4)).await;
    // A negative count is ignored: the last good one stays, later ones apply.
    set_replicas(&server, -1);
    set_replicas(&server, 6);
    until(&mut rx, Some(6)).await;
    // The watch breaks (history gone): the watcher re-lists and catches up.
    server.close_watches();
    server.compact();
    set_replicas(&server, 7);
    until(&mut rx, Some(7)).await;
    server.delete("apps/v1", "Deployment", "argocd", DEFAULT_CONTROLLER_NAME);
    until(&mut rx, None).await;
    server.insert(deployment(Some(3))).unwrap();
    until(&mut rx, Some(3)).await;
    drop(watch);
    assert!(rx.changed().await.is_err(), "dropping the watch stops it");
}
