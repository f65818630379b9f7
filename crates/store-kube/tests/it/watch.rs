//! `wait_for_change`: woken by writes and deletes under the prefix (not elsewhere), from
//! the watch cache; without the cache (a fresh watch per call), also by a compacted
//! history (410) and by the server ending the watch.

use crate::support;

use std::time::Duration;

use fleetshard_coord::store::{Precondition, Store};
use fleetshard_testsupport::kube_api::Verb;

const LIMIT: Duration = Duration::from_secs(10);

#[tokio::test]
async fn woken_by_the_first_change_under_the_prefix_only() {
    let server = support::fake().await;
    let store = support::store(&server, "default");
    let since = store.list("fleetshard/").await.unwrap().revision;
    // Changes elsewhere come first; the wait must not return for them.
    store
        .put("other/shards/0", b"{}".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    store
        .put("other/assignment", b"{}".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    let waiter = tokio::spawn({
        let store = store.clone();
        async move { store.wait_for_change("fleetshard/shards/", since).await }
    });
    store
        .put(
            "fleetshard/assignment",
            b"{}".to_vec(),
            Precondition::Absent,
        )
        .await
        .unwrap();
    let v = store
        .put("fleetshard/shards/3", b"{}".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    let rev = tokio::time::timeout(LIMIT, waiter)
        .await
        .expect("woken")
        .unwrap()
        .unwrap();
    assert_eq!(
        rev, v,
        "woken by the shard record, not by the earlier writes"
    );
    // A delete wakes too, with the deletion's revision.
    let waiter = tokio::spawn({
        let store = store.clone();
        async move { store.wait_for_change("fleetshard/shards/", rev).await }
    });
    store
        .delete("fleetshard/shards/3", Precondition::Version(v))
        .await
        .unwrap();
    let rev2 = tokio::time::timeout(LIMIT, waiter)
        .await
        .expect("woken by a delete")
        .unwrap()
        .unwrap();
    assert_eq!(rev2, server.revision());
}

#[tokio::test]
async fn a_change_that_came_before_the_wait_wakes_it_at_once() {
    let server = support::fake().await;
    let store = support::store(&server, "default");
    let since = store.list("fleetshard/").await.unwrap().revision;
    let v = store
        .put(
            "fleetshard/distributor",
            b"{}".to_vec(),
            Precondition::Absent,
        )
        .await
        .unwrap();
    let rev = tokio::time::timeout(LIMIT, store.wait_for_change("fleetshard/", since))
        .await
        .expect("woken")
        .unwrap();
    assert_eq!(rev, v);
}

#[tokio::test]
async fn argocd_configmap_changes_wake_a_waiter_on_its_key() {
    let server = support::fake().await;
    let store = support::store(&server, "default");
    let key = "configmap/argocd-app-controller-shard-cm/shardControllerMapping";
    let v = store
        .put(key, b"[]".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    let waiter = tokio::spawn({
        let store = store.clone();
        async move { store.wait_for_change(key, v).await }
    });
    // Argo CD writes the ConfigMap itself.
    let cm = server
        .modify(
            "v1",
            "ConfigMap",
            "default",
            "argocd-app-controller-shard-cm",
            |cm| cm["data"]["shardControllerMapping"] = serde_json::json!("[{}]"),
        )
        .unwrap();
    let rev = tokio::time::timeout(LIMIT, waiter)
        .await
        .expect("woken")
        .unwrap()
        .unwrap();
    assert_eq!(
        rev.to_string(),
        cm["metadata"]["resourceVersion"].as_str().unwrap()
    );
}

#[tokio::test]
async fn uncached_compacted_history_wakes_the_waiter_with_the_current_revision() {
    let server = support::fake().await;
    let store = support::store_with(&server, "default", support::uncached());
    let since = store.list("fleetshard/").await.unwrap().revision;
    store
        .put(
            "fleetshard/assignment",
            b"{}".to_vec(),
            Precondition::Absent,
        )
        .await
        .unwrap();
    store
        .put("elsewhere/x", b"{}".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    server.compact();
    // The watch from `since` is answered 410 Expired: a spurious (here also a true)
    // wake-up with the store's revision now, from which the caller re-lists.
    let rev = tokio::time::timeout(LIMIT, store.wait_for_change("nothing-here/", since))
        .await
        .expect("woken by 410")
        .unwrap();
    assert_eq!(rev, server.revision());
    let rev = tokio::time::timeout(LIMIT, store.wait_for_change("fleetshard/", since))
        .await
        .expect("woken by 410")
        .unwrap();
    assert_eq!(rev, server.revision());
    // From the current revision, watching works again.
    let waiter = tokio::spawn({
        let store = store.clone();
        async move { store.wait_for_change("fleetshard/", rev).await }
    });
    let v = store
        .put("fleetshard/shards/0", b"{}".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    assert_eq!(
        tokio::time::timeout(LIMIT, waiter)
            .await
            .expect("woken")
            .unwrap()
            .unwrap(),
        v
    );
}

#[tokio::test]
async fn uncached_a_watch_ended_by_the_server_is_a_spurious_wake_up() {
    let server = support::fake().await;
    let store = support::store_with(&server, "default", support::uncached());
    let since = store.list("fleetshard/").await.unwrap().revision;
    let waiter = tokio::spawn({
        let store = store.clone();
        async move { store.wait_for_change("fleetshard/", since).await }
    });
    let deadline = tokio::time::Instant::now() + LIMIT;
    while server.request_count(Verb::Watch, "configmaps") == 0
        || server.request_count(Verb::Watch, "leases") == 0
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "watches never opened"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Bookmarks alone do not wake the waiter; the end of the streams does.
    server.send_bookmarks();
    store
        .put("elsewhere/x", b"{}".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    server.close_watches();
    let rev = tokio::time::timeout(LIMIT, waiter)
        .await
        .expect("woken")
        .unwrap()
        .unwrap();
    assert_eq!(rev, server.revision());
    // One list for the current revision, no retry loop.
    assert_eq!(server.request_count(Verb::Watch, "configmaps"), 1);
}
