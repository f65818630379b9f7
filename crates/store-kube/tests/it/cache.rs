//! The watch cache: listings reflect this client's writes at once and other clients'
//! changes after `wait_for_change` wakes; it recovers from ended watches and compacted
//! history; and in steady state it costs the API server re-watches only, not requests per
//! listing.

use crate::support;

use std::time::Duration;

use fleetshard_coord::store::{Precondition, Store};
use fleetshard_testsupport::kube_api::{FakeApiServer, Verb};

const LIMIT: Duration = Duration::from_secs(10);

fn lists(server: &FakeApiServer) -> u64 {
    server.request_count(Verb::List, "leases") + server.request_count(Verb::List, "configmaps")
}

fn watches(server: &FakeApiServer) -> u64 {
    server.request_count(Verb::Watch, "leases") + server.request_count(Verb::Watch, "configmaps")
}

/// Lists until a listing is served from the cache (no LIST request): the first ones go to
/// the API server while the cache's own LISTs and WATCHes start.
async fn warm(store: &impl Store, server: &FakeApiServer, prefix: &str) {
    let deadline = tokio::time::Instant::now() + LIMIT;
    loop {
        server.reset_request_counts();
        store.list(prefix).await.unwrap();
        if lists(server) == 0 {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the cache never synced"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Polls `list(prefix)` until `ok` holds of it.
async fn list_until(
    store: &impl Store,
    prefix: &str,
    what: &str,
    ok: impl Fn(&fleetshard_coord::store::Listing) -> bool,
) -> fleetshard_coord::store::Listing {
    let deadline = tokio::time::Instant::now() + LIMIT;
    loop {
        if let Ok(l) = store.list(prefix).await
            && ok(&l)
        {
            return l;
        }
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn listings_reflect_own_writes_at_once() {
    let server = support::fake().await;
    let store = support::store(&server, "default");
    store.list("fleetshard/").await.unwrap();
    let mut expected = std::collections::BTreeMap::new();
    for i in 0..10u32 {
        // A lease record, a ConfigMap record, an update of each and a delete, each
        // followed at once by a listing that must show it at a revision covering it.
        let lease = format!("fleetshard/shards/{}", i % 3);
        let cm = format!("fleetshard/config/{}", i % 2);
        for key in [&lease, &cm] {
            let current: Option<u64> = expected.get(key).copied();
            let pre = current.map_or(Precondition::Absent, Precondition::Version);
            let v = store
                .put(key, format!("{i}").into_bytes(), pre)
                .await
                .unwrap();
            expected.insert(key.clone(), v);
            let l = store.list("fleetshard/").await.unwrap();
            assert!(l.revision >= v, "{key}: revision {} < {v}", l.revision);
            let got: std::collections::BTreeMap<_, _> = l
                .entries
                .iter()
                .map(|e| (e.key.clone(), e.version))
                .collect();
            assert_eq!(got, expected, "after writing {key} at {v}");
        }
        if i % 4 == 3 {
            let v = expected.remove(&lease).unwrap();
            store
                .delete(&lease, Precondition::Version(v))
                .await
                .unwrap();
            let l = store.list("fleetshard/").await.unwrap();
            let got: std::collections::BTreeMap<_, _> = l
                .entries
                .iter()
                .map(|e| (e.key.clone(), e.version))
                .collect();
            assert_eq!(got, expected, "after deleting {lease}");
        }
    }
}

#[tokio::test]
async fn another_clients_change_wakes_the_waiter_then_shows_in_the_listing() {
    let server = support::fake().await;
    let store = support::store(&server, "default");
    let other = support::store_with(&server, "default", support::uncached());
    warm(&store, &server, "fleetshard/").await;
    let since = store.list("fleetshard/").await.unwrap().revision;
    let waiter = tokio::spawn({
        let store = store.clone();
        async move { store.wait_for_change("fleetshard/", since).await }
    });
    let v = other
        .put(
            "fleetshard/distributor",
            br#"{"holder":"b"}"#.to_vec(),
            Precondition::Absent,
        )
        .await
        .unwrap();
    let rev = tokio::time::timeout(LIMIT, waiter)
        .await
        .expect("woken")
        .unwrap()
        .unwrap();
    assert!(rev >= v);
    server.reset_request_counts();
    let l = store.list("fleetshard/").await.unwrap();
    assert_eq!(
        l.entries
            .iter()
            .map(|e| (e.key.as_str(), e.version))
            .collect::<Vec<_>>(),
        [("fleetshard/distributor", v)]
    );
    assert_eq!(lists(&server), 0, "served from the cache");
    // Once the ConfigMap watch's bookmark has carried the revision past the write, a wait
    // from a listing's revision is not woken again by what that listing showed.
    let l = list_until(
        &store,
        "fleetshard/",
        "the revision to pass the write",
        |l| l.revision >= v,
    )
    .await;
    let again = tokio::time::timeout(
        Duration::from_millis(500),
        store.wait_for_change("fleetshard/", l.revision),
    )
    .await;
    assert!(
        again.is_err(),
        "woken again by a change already listed: {again:?}"
    );
    // A delete by the other client wakes and disappears too.
    let since = l.revision;
    other
        .delete("fleetshard/distributor", Precondition::Version(v))
        .await
        .unwrap();
    let rev = tokio::time::timeout(LIMIT, store.wait_for_change("fleetshard/", since))
        .await
        .expect("woken by the delete")
        .unwrap();
    assert!(rev > v);
    assert!(store.list("fleetshard/").await.unwrap().entries.is_empty());
}

#[tokio::test]
async fn ended_watches_are_reopened_from_where_they_were() {
    let server = support::fake().await;
    let store = support::store(&server, "default");
    let other = support::store_with(&server, "default", support::uncached());
    warm(&store, &server, "fleetshard/").await;
    server.reset_request_counts();
    server.close_watches();
    let v = other
        .put("fleetshard/shards/0", b"{}".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    let l = list_until(
        &store,
        "fleetshard/",
        "the write after close_watches",
        |l| l.entries.iter().any(|e| e.version == v),
    )
    .await;
    assert_eq!(l.entries.len(), 1);
    assert!(watches(&server) >= 2, "both kinds re-watched");
    assert_eq!(
        server.request_count(Verb::List, "leases"),
        0,
        "re-opened from the last resourceVersion, not relisted"
    );
}

#[tokio::test]
async fn compacted_history_is_relisted_and_deletions_in_the_gap_are_seen() {
    let server = support::fake().await;
    let store = support::store(&server, "default");
    let other = support::store_with(&server, "default", support::uncached());
    let gone = other
        .put("fleetshard/shards/0", b"{}".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    let since = store.list("fleetshard/").await.unwrap().revision;
    assert!(since >= gone);
    // Stall this store's watches, change things behind them, and drop the history.
    server.partition(|r| r.verb == Some(Verb::Watch));
    other
        .delete("fleetshard/shards/0", Precondition::Version(gone))
        .await
        .unwrap();
    let v = other
        .put("fleetshard/shards/1", b"{}".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    server.compact();
    server.reset_request_counts();
    server.heal();
    let rev = tokio::time::timeout(LIMIT, store.wait_for_change("fleetshard/shards/0", since))
        .await
        .expect("woken: the deletion happened in the compacted gap")
        .unwrap();
    assert!(rev >= v);
    let l = list_until(&store, "fleetshard/", "the state after the gap", |l| {
        l.revision >= v
    })
    .await;
    assert_eq!(
        l.entries
            .iter()
            .map(|e| (e.key.as_str(), e.version))
            .collect::<Vec<_>>(),
        [("fleetshard/shards/1", v)]
    );
    assert!(
        server.request_count(Verb::List, "leases") >= 1,
        "the 410 was answered with a LIST"
    );
}

#[tokio::test]
async fn argocd_configmap_scope_is_cached_too() {
    let server = support::fake().await;
    let store = support::store(&server, "default");
    let key = "configmap/argocd-app-controller-shard-cm/shardControllerMapping";
    let prefix = "configmap/argocd-app-controller-shard-cm/";
    let v = store
        .put(key, b"[]".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    warm(&store, &server, prefix).await;
    let l = store.list(prefix).await.unwrap();
    assert!(l.revision >= v);
    // Argo CD writes the ConfigMap itself.
    server
        .modify(
            "v1",
            "ConfigMap",
            "default",
            "argocd-app-controller-shard-cm",
            |cm| cm["data"]["shardControllerMapping"] = serde_json::json!("[{}]"),
        )
        .unwrap();
    tokio::time::timeout(LIMIT, store.wait_for_change(prefix, l.revision))
        .await
        .expect("woken")
        .unwrap();
    server.reset_request_counts();
    let l = store.list(prefix).await.unwrap();
    assert_eq!(l.entries.len(), 1);
    assert_eq!(l.entries[0].value, b"[{}]");
    assert_eq!(lists(&server), 0, "served from the cache");
}

/// What the fenced runner does: list every 200 ms, and wait for a change from each
/// listing's revision. Over 50 listings (10 s), the API server sees re-watches only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steady_state_costs_rewatches_not_requests_per_listing() {
    let server = support::fake().await;
    let options = fleetshard_store_kube::KubeOptions {
        call_timeout: Duration::from_secs(2),
        ..fleetshard_store_kube::KubeOptions::default()
    };
    let store = support::store_with(&server, "default", options.clone());
    for k in ["fleetshard/shards/0", "fleetshard/assignment"] {
        store
            .put(k, b"{}".to_vec(), Precondition::Absent)
            .await
            .unwrap();
    }
    warm(&store, &server, "fleetshard/").await;
    server.reset_request_counts();
    // A fixed number of listings, not as many as fit in a window: a loaded machine slows
    // the loop down, and the re-watch allowance below follows the time it really took.
    let listings = 50u32;
    let start = tokio::time::Instant::now();
    let mut wakes = 0u32;
    let mut next = start;
    for _ in 0..listings {
        let l = store.list("fleetshard/").await.unwrap();
        assert_eq!(l.entries.len(), 2);
        next += Duration::from_millis(200);
        let waited =
            tokio::time::timeout_at(next, store.wait_for_change("fleetshard/", l.revision)).await;
        if let Ok(r) = waited {
            r.unwrap();
            wakes += 1;
        }
        tokio::time::sleep_until(next).await;
    }
    let window = start.elapsed();
    let total: u64 = server.request_counts().values().sum();
    println!(
        "steady state, {window:?}: {listings} listings, {wakes} wake-ups, {total} requests \
         ({:?})",
        server.request_counts()
    );
    assert_eq!(lists(&server), 0, "no LIST in steady state");
    assert_eq!(wakes, 0, "nothing changed: no wake-up");
    // One re-watch per kind per watch timeout (8 s), plus slack for timing.
    let per_kind = window.as_secs() / options.watch_timeout.as_secs() + 2;
    assert!(
        total <= 2 * per_kind,
        "{total} requests in {window:?}: more than re-watches"
    );
}
