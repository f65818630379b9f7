//! The store when the API server misbehaves: errors map to `Unavailable` or `Backend`,
//! a partitioned server costs at most the call timeout (the cache's freshness bound for
//! cached reads), and everything works again after. The timing tests run under paused
//! time (the fake API server is in-process): a call held by a partition ends exactly when
//! its timeout fires, whatever the machine's load.

use crate::support;

use std::time::Duration;

use fleetshard_coord::store::{Precondition, Store, StoreError};
use fleetshard_testsupport::kube_api::{FaultAction, Verb};

#[tokio::test]
async fn server_errors_are_unavailable_and_refusals_are_backend_errors() {
    let server = support::fake().await;
    // Without the cache, every listing and wait is a request the faults can hit: the
    // paths a cached store falls back to.
    let store = support::store_with(&server, "default", support::uncached());
    let k = "fleetshard/assignment";
    let v = store
        .put(k, b"1".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    for code in [500, 503, 429] {
        server.fail_next(1, code, |r| r.is(Verb::Get, "configmaps"));
        let e = store.get(k).await.unwrap_err();
        assert!(
            matches!(&e, StoreError::Unavailable(m) if m.contains(k) && m.contains(&code.to_string())),
            "{code}: {e}"
        );
    }
    server.fail_next(1, 503, |r| r.is(Verb::Update, "configmaps"));
    assert!(matches!(
        store.put(k, b"2".to_vec(), Precondition::Version(v)).await,
        Err(StoreError::Unavailable(_))
    ));
    server.fail_next(1, 500, |r| r.is(Verb::Create, "leases"));
    assert!(matches!(
        store
            .put("fleetshard/shards/0", b"{}".to_vec(), Precondition::Any)
            .await,
        Err(StoreError::Unavailable(_))
    ));
    server.inject(
        Some(1),
        FaultAction::Fail {
            code: 503,
            retry_after: Some(1),
        },
        |r| r.is(Verb::List, "leases"),
    );
    assert!(matches!(
        store.list("fleetshard/").await,
        Err(StoreError::Unavailable(_))
    ));
    server.fail_next(1, 403, |r| r.is(Verb::Delete, "configmaps"));
    let e = store.delete(k, Precondition::Version(v)).await.unwrap_err();
    assert!(
        matches!(&e, StoreError::Backend(m) if m.contains("403")),
        "{e}"
    );
    server.fail_next(1, 500, |r| r.is(Verb::Watch, "configmaps"));
    assert!(matches!(
        store.wait_for_change("fleetshard/", v).await,
        Err(StoreError::Unavailable(_))
    ));
    // The faults were one-shot: the store works and nothing was half-done.
    let e = store.get(k).await.unwrap().unwrap();
    assert_eq!((e.value.as_slice(), e.version), (&b"1"[..], v));
    store.delete(k, Precondition::Version(v)).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_partitioned_server_is_unavailable_within_the_bound_and_the_cache_recovers() {
    let server = support::fake().await;
    let store = support::store(&server, "default");
    let other = support::store_with(&server, "default", support::uncached());
    let options = store.options().clone();
    let timeout = options.call_timeout;
    let v = store
        .put("fleetshard/shards/1", b"{}".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    let listed = store.list("fleetshard/").await.unwrap();
    assert!(listed.revision >= v);
    server.partition(|_| true);
    let started = tokio::time::Instant::now();
    let ops: Vec<(&str, Result<(), StoreError>)> = vec![
        ("get", store.get("fleetshard/shards/1").await.map(|_| ())),
        (
            "put",
            store
                .put(
                    "fleetshard/shards/1",
                    b"{}".to_vec(),
                    Precondition::Version(v),
                )
                .await
                .map(|_| ()),
        ),
        (
            "delete",
            store
                .delete("fleetshard/shards/1", Precondition::Version(v))
                .await,
        ),
    ];
    let elapsed = started.elapsed();
    for (op, result) in &ops {
        assert!(
            matches!(result, Err(StoreError::Unavailable(m)) if m.contains("no answer")),
            "{op}: {result:?}"
        );
    }
    // Three operations, each given up after one call timeout.
    assert!(
        elapsed <= timeout * 3,
        "took {elapsed:?} for 3 operations with a {timeout:?} bound"
    );
    // Listings come from the cache while it is fresh (the state it last knew), then —
    // once it has heard nothing for the freshness bound — go to the API server, which
    // does not answer: Unavailable one call timeout (and one poll) later.
    const POLL: Duration = Duration::from_millis(100);
    let bound = options.cache_freshness.max(elapsed) + timeout + POLL;
    let unavailable_after = loop {
        match store.list("fleetshard/").await {
            Ok(l) => assert_eq!(l, listed, "the last known state"),
            Err(StoreError::Unavailable(_)) => break started.elapsed(),
            Err(other) => panic!("{other}"),
        }
        assert!(
            started.elapsed() < bound,
            "still listing from the cache after {bound:?} of partition"
        );
        tokio::time::sleep(POLL).await;
    };
    assert!(
        unavailable_after <= bound,
        "listings Unavailable only after {unavailable_after:?} of partition (bound {bound:?})"
    );
    let waited = tokio::time::timeout(bound, store.wait_for_change("fleetshard/", v))
        .await
        .expect("wait_for_change returned within the bound");
    assert!(
        matches!(&waited, Err(StoreError::Unavailable(_))),
        "{waited:?}"
    );
    println!(
        "partition: direct calls {elapsed:?} for 3, listings Unavailable after \
         {unavailable_after:?}, bound {bound:?}"
    );
    server.heal();
    assert_eq!(
        store
            .get("fleetshard/shards/1")
            .await
            .unwrap()
            .unwrap()
            .version,
        v,
        "the held write never applied"
    );
    // The cache recovers: another client's write shows, and then listings are served
    // from the cache again (no LIST).
    let v2 = other
        .put("fleetshard/shards/2", b"{}".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + bound;
    loop {
        if let Ok(l) = store.list("fleetshard/").await
            && l.entries.iter().any(|e| e.version == v2)
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the cache never recovered"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let deadline = tokio::time::Instant::now() + bound;
    loop {
        server.reset_request_counts();
        let l = store.list("fleetshard/").await.unwrap();
        assert_eq!(l.entries.len(), 2);
        if server.request_count(Verb::List, "leases") == 0
            && server.request_count(Verb::List, "configmaps") == 0
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "listings never came from the cache again"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_dead_server_is_unavailable_quickly() {
    let server = support::fake().await;
    let store = support::store(&server, "default");
    store
        .put("fleetshard/x", b"1".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    drop(server);
    let started = tokio::time::Instant::now();
    let e = store.get("fleetshard/x").await.unwrap_err();
    assert!(matches!(e, StoreError::Unavailable(_)), "{e}");
    // At most one call timeout (a refused connection ends it sooner): no retrying.
    assert!(
        started.elapsed() <= store.options().call_timeout,
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_watch_stalled_by_a_partition_gives_up() {
    let server = support::fake().await;
    let mut options = support::options();
    options.call_timeout = Duration::from_secs(1);
    options.watch_timeout = Duration::from_secs(1);
    let store = support::store_with(&server, "default", options);
    let since = store.list("fleetshard/").await.unwrap().revision;
    let waiter = tokio::spawn({
        let store = store.clone();
        async move { store.wait_for_change("fleetshard/", since).await }
    });
    // Once both watches are open, stall them.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while server.request_count(Verb::Watch, "configmaps") == 0
        || server.request_count(Verb::Watch, "leases") == 0
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "watches never opened"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    server.partition(|_| true);
    let result = tokio::time::timeout(Duration::from_secs(15), waiter)
        .await
        .expect("wait_for_change returned")
        .unwrap();
    assert!(
        matches!(&result, Err(StoreError::Unavailable(_))),
        "{result:?}"
    );
}

/// "Applied, reply lost": a conditional write the API server applied without answering
/// is reported `Unavailable` — never success, never a conflict — which is how the seeded
/// simulations model a lost reply (`coord::sim`); a read shows it landed, and the same
/// write again is a conflict.
#[tokio::test]
async fn a_write_applied_whose_reply_was_lost_is_unavailable_and_visible_after() {
    let server = support::fake().await;
    let store = support::store_with(&server, "default", support::uncached());
    for (key, resource) in [
        ("fleetshard/assignment", "configmaps"),
        ("fleetshard/shards/0", "leases"),
    ] {
        let v = store
            .put(key, b"1".to_vec(), Precondition::Absent)
            .await
            .unwrap();
        // A conditional replace is a merge patch carrying the resourceVersion, or an update.
        server.inject(Some(1), FaultAction::LoseReply, move |r| {
            (r.is(Verb::Patch, resource) || r.is(Verb::Update, resource)) && !r.dry_run
        });
        let e = store
            .put(key, b"2".to_vec(), Precondition::Version(v))
            .await
            .unwrap_err();
        assert!(matches!(&e, StoreError::Unavailable(_)), "{key}: {e}");
        let now = store.get(key).await.unwrap().unwrap();
        assert_eq!(now.value, b"2", "{key}: the write landed");
        assert_ne!(now.version, v);
        let again = store
            .put(key, b"2".to_vec(), Precondition::Version(v))
            .await;
        assert!(
            matches!(again, Err(StoreError::Conflict { .. })),
            "{key}: {again:?}"
        );
        let lost = server
            .writes()
            .into_iter()
            .filter(|w| w.outcome == fleetshard_testsupport::kube_api::WriteOutcome::ReplyLost(200))
            .count();
        assert_eq!(lost, 1, "{key}: {:#?}", server.writes());
        server.clear_writes();
    }
}
