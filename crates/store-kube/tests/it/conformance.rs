//! The Kubernetes store against the conformance suite and under contention, over real HTTP
//! to the fake API server.

use crate::support;

use std::sync::Arc;

use fleetshard_coord::store::{Precondition, Store, StoreError, conformance};
use fleetshard_testsupport::kube_api::Verb;

#[tokio::test]
async fn conforms() {
    let server = support::fake().await;
    conformance::run_all(&support::store(&server, "default")).await;
}

/// Under the chunked store every replica wraps it with: values in parts, and one of
/// 2 MiB (more than a ConfigMap holds).
#[tokio::test]
async fn conforms_under_the_chunked_store() {
    let server = support::fake().await;
    conformance::run_chunked(Arc::new(support::store(&server, "default"))).await;
}

#[tokio::test]
async fn conforms_in_another_namespace_and_stays_there() {
    let server = support::fake().await;
    server.create_namespace("fleet").unwrap();
    conformance::run_all(&support::store(&server, "fleet")).await;
    assert!(
        support::store(&server, "default")
            .list("")
            .await
            .unwrap()
            .entries
            .is_empty(),
        "nothing leaks into another namespace"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_lost_update_across_clients() {
    let server = support::fake().await;
    // Six stores, six clients: contention goes through the API server's resourceVersion
    // checks.
    let stores = (0..6)
        .map(|_| Arc::new(support::store(&server, "default")))
        .collect();
    conformance::no_lost_update(stores, 25).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_lost_update_on_a_lease_record() {
    // Lease records are written with a merge patch, not a PUT: the same guarantee.
    let server = support::fake().await;
    let stores: Vec<_> = (0..4)
        .map(|_| Arc::new(support::store(&server, "default")))
        .collect();
    let k = "fleetshard/distributor";
    stores[0]
        .put(k, b"0".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    let tasks: Vec<_> = stores
        .iter()
        .cloned()
        .map(|s| {
            tokio::spawn(async move {
                let mut conflicts = 0;
                for _ in 0..25 {
                    loop {
                        let e = s.get(k).await.unwrap().unwrap();
                        let n: u64 = std::str::from_utf8(&e.value).unwrap().parse().unwrap();
                        let next = (n + 1).to_string().into_bytes();
                        match s.put(k, next, Precondition::Version(e.version)).await {
                            Ok(_) => break,
                            Err(StoreError::Conflict { .. }) => conflicts += 1,
                            Err(other) => panic!("{other}"),
                        }
                    }
                }
                conflicts
            })
        })
        .collect();
    let mut conflicts = 0;
    for t in tasks {
        conflicts += t.await.unwrap();
    }
    let e = stores[0].get(k).await.unwrap().unwrap();
    assert_eq!(e.value, b"100");
    println!("lease counter: 100 increments, {conflicts} conflicts");
}

#[tokio::test]
async fn concurrent_writers_of_one_version_one_wins_the_rest_conflict() {
    let server = support::fake().await;
    let stores: Vec<_> = (0..5).map(|_| support::store(&server, "default")).collect();
    for key in ["fleetshard/assignment", "fleetshard/shards/0"] {
        let v = stores[0]
            .put(key, b"start".to_vec(), Precondition::Absent)
            .await
            .unwrap();
        let writes = stores
            .iter()
            .enumerate()
            .map(|(i, s)| s.put(key, format!("w{i}").into_bytes(), Precondition::Version(v)));
        let results = futures::future::join_all(writes).await;
        let won: Vec<_> = results.iter().filter(|r| r.is_ok()).collect();
        assert_eq!(won.len(), 1, "{key}: {results:?}");
        assert!(
            results
                .iter()
                .filter(|r| r.is_err())
                .all(|r| matches!(r, Err(StoreError::Conflict { key: k }) if k == key)),
            "{results:?}"
        );
        let e = stores[0].get(key).await.unwrap().unwrap();
        assert_eq!(Some(&Ok(e.version)), won.first().copied().cloned().as_ref());
    }
    // Creates race the same way: exactly one AlreadyExists winner.
    let creates = stores
        .iter()
        .map(|s| s.put("fleetshard/new", b"x".to_vec(), Precondition::Absent));
    let results = futures::future::join_all(creates).await;
    assert_eq!(
        results.iter().filter(|r| r.is_ok()).count(),
        1,
        "{results:?}"
    );
}

#[tokio::test]
async fn a_compare_and_swap_on_a_deleted_lease_does_not_recreate_it() {
    // A real API server lets a PUT create a missing Lease; the store must not use one.
    let server = support::fake().await;
    let store = support::store(&server, "default");
    let k = "fleetshard/shards/4";
    let v = store
        .put(k, br#"{"holder":"a"}"#.to_vec(), Precondition::Absent)
        .await
        .unwrap();
    store.delete(k, Precondition::Version(v)).await.unwrap();
    server.reset_request_counts();
    assert!(matches!(
        store.put(k, b"{}".to_vec(), Precondition::Version(v)).await,
        Err(StoreError::Conflict { .. })
    ));
    assert_eq!(store.get(k).await.unwrap(), None);
    assert_eq!(server.request_count(Verb::Update, "leases"), 0, "no PUT");
    assert_eq!(server.request_count(Verb::Patch, "leases"), 1);
}

#[tokio::test]
async fn listings_cover_every_kind_in_key_order_at_a_revision_no_newer_than_the_store() {
    let server = support::fake().await;
    let store = support::store(&server, "default");
    let mut versions = Vec::new();
    for k in [
        "fleetshard/shards/1",
        "fleetshard/assignment",
        "fleetshard/distributor",
        "fleetshard/replicas/pod-b",
        "fleetshard/desired-shards",
        "other/assignment",
    ] {
        versions.push(
            store
                .put(
                    k,
                    format!("{{\"holder\":\"{k}\"}}").into_bytes(),
                    Precondition::Absent,
                )
                .await
                .unwrap(),
        );
    }
    let listing = store.list("fleetshard/").await.unwrap();
    let keys: Vec<_> = listing.entries.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "fleetshard/assignment",
            "fleetshard/desired-shards",
            "fleetshard/distributor",
            "fleetshard/replicas/pod-b",
            "fleetshard/shards/1",
        ]
    );
    assert_eq!(listing.revision, server.revision());
    assert!(listing.revision >= *versions.iter().max().unwrap());
    // A prefix that does not end at a segment still selects correctly.
    let keys: Vec<_> = store
        .list("fleetshard/d")
        .await
        .unwrap()
        .entries
        .into_iter()
        .map(|e| e.key)
        .collect();
    assert_eq!(
        keys,
        ["fleetshard/desired-shards", "fleetshard/distributor"]
    );
    assert_eq!(store.list("").await.unwrap().entries.len(), 6);
}
