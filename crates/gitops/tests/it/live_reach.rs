//! Where a connection's watches reach (`live/reach.rs`): cluster-wide while the replica
//! holds the cluster whole; a slice owner's namespaced kinds only in the namespaces its
//! apps need, growing as they need more, cluster-wide past the limit, and everywhere
//! again once the replica holds the whole cluster.

use std::collections::HashSet;

use crate::reconcile::support::access;
use fleetshard_gitops::compare::ResourceKey;
use fleetshard_gitops::live::{ClusterConn, ClusterConnections, KindInfo, LiveOptions};
use fleetshard_testsupport::kube_api::{FakeApiServer, Verb};
use serde_json::json;

fn config_map(namespace: &str, name: &str) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {
            "name": name, "namespace": namespace,
            "annotations": {"argocd.argoproj.io/tracking-id": format!("{name}:/ConfigMap:{namespace}/{name}")},
        },
    })
}

/// The ConfigMap cache's reach: `None` cluster-wide, else its namespaces.
fn reach(conn: &ClusterConn) -> Option<Option<Vec<String>>> {
    conn.watch_reach()
        .into_iter()
        .find(|r| r.kind == "ConfigMap")
        .map(|r| r.namespaces)
}

/// Whether the cache holds the app `name`'s ConfigMap (tracked under its own name).
fn sees(conn: &ClusterConn, name: &str) -> bool {
    !conn
        .live_objects(name, &HashSet::<ResourceKey>::new(), &Default::default())
        .is_empty()
}

async fn watch(conn: &ClusterConn, info: &KindInfo, namespaces: &[&str]) {
    for ns in namespaces {
        conn.need(info, ns);
    }
    conn.watch_kinds(std::slice::from_ref(info)).await.unwrap();
}

#[tokio::test]
async fn a_slice_owner_watches_its_apps_namespaces_and_grows_to_the_whole_cluster() {
    let fake = FakeApiServer::start().await.unwrap();
    for ns in ["a", "b", "c", "d"] {
        fake.insert(config_map(ns, &format!("app-{ns}"))).unwrap();
    }
    let conns = ClusterConnections::new(LiveOptions {
        narrow_watch_limit: 3,
        ..LiveOptions::default()
    });
    let conn = conns.start(&access("c1", &fake)).await.unwrap();
    let info = conn.kind_info("v1", "ConfigMap").await.unwrap();
    let lists = |ns: Option<&str>| {
        fake.request_counts_by_namespace()
            .get(&(Verb::List, "configmaps".to_owned(), ns.map(str::to_owned)))
            .copied()
            .unwrap_or(0)
    };

    // A slice owner: namespace "a" only, then "b" too (one more list, "a" not again).
    conn.set_whole(false);
    watch(&conn, &info, &["a"]).await;
    assert_eq!(reach(&conn), Some(Some(vec!["a".to_owned()])));
    assert!(sees(&conn, "app-a") && !sees(&conn, "app-b"));
    watch(&conn, &info, &["b"]).await;
    assert_eq!(reach(&conn), Some(Some(vec!["a".into(), "b".into()])));
    assert!(sees(&conn, "app-b") && !sees(&conn, "app-c"));
    assert_eq!((lists(Some("a")), lists(Some("b")), lists(None)), (1, 1, 0));
    // Orphaned resources of a namespace the app caches do not reach: watched there.
    let orphans = conn.namespace_objects("app-a", "c").await.unwrap();
    let names: Vec<_> = orphans
        .objects
        .iter()
        .filter(|o| o["kind"] == "ConfigMap")
        .map(|o| o["metadata"]["name"].clone())
        .collect();
    assert_eq!(names, [json!("app-c")], "the ConfigMaps of namespace c");

    // Past the limit (3): one cluster-wide watch instead.
    watch(&conn, &info, &["c", "d"]).await;
    assert_eq!(reach(&conn), Some(None), "cluster-wide past the limit");
    assert!(
        ["app-a", "app-b", "app-c", "app-d"]
            .iter()
            .all(|n| sees(&conn, n))
    );
    assert_eq!(lists(None), 1);

    // Narrow again (the caches go), then the whole cluster held: cluster-wide, listed anew.
    conn.set_whole(true);
    conn.set_whole(false);
    assert_eq!(reach(&conn), None, "caches dropped when the reach changes");
    watch(&conn, &info, &["d"]).await;
    assert_eq!(reach(&conn), Some(Some(vec!["d".to_owned()])));
    conn.set_whole(true);
    watch(&conn, &info, &[]).await;
    assert_eq!(reach(&conn), Some(None), "whole: cluster-wide");
    assert_eq!(lists(None), 2);
    assert!(sees(&conn, "app-a"));
}
