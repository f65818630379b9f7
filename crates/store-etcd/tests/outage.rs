//! The etcd store while etcd is frozen (SIGSTOP: connections stay open, nothing answers)
//! or dead (SIGKILL: connections refused): every call fails with `Unavailable`, none hangs,
//! and the same store works again once etcd is back. How long each call took is printed,
//! not asserted (a loaded machine makes any call later); a call still running after
//! [`HANG`] — many times what its timeout allows — fails the test.
//!
//! These need an etcd the fixture started (an external `FLEETSHARD_TEST_ETCD` cannot be
//! paused); against an external one they only say so and return.

use std::time::Duration;

use fleetshard_coord::store::{Precondition, Store, StoreError};
use fleetshard_store_etcd::{EtcdOptions, EtcdStore};
use fleetshard_testsupport::etcd::EtcdServer;
use tokio::time::Instant;

/// The store's per-call timeout in these tests.
const TIMEOUT: Duration = Duration::from_millis(500);
/// A call that has not ended after this hangs: the test gives up on it. Ten times the
/// longest a call here may take by its timeouts (a connect with the default 2 s timeout;
/// with [`TIMEOUT`], a connect and then the request).
const HANG: Duration = Duration::from_secs(20);
/// How long etcd may take to serve again after it returns.
const RECOVERY: Duration = Duration::from_secs(20);

fn local_etcd() -> Option<EtcdServer> {
    let etcd = EtcdServer::start().unwrap();
    if etcd.is_local() {
        Some(etcd)
    } else {
        eprintln!("skipped: an external etcd cannot be paused or killed");
        None
    }
}

fn store(etcd: &EtcdServer) -> EtcdStore {
    let options = EtcdOptions {
        timeout: TIMEOUT,
        watch_check: TIMEOUT,
        ..EtcdOptions::default()
    };
    EtcdStore::from_url_with(&etcd.url(), options).unwrap()
}

/// Runs `call` and checks it failed with `Unavailable` (giving up on it after [`HANG`]).
async fn unavailable_without_hanging<T: std::fmt::Debug>(
    what: &str,
    call: impl std::future::Future<Output = Result<T, StoreError>>,
) {
    let start = Instant::now();
    let result = tokio::time::timeout(HANG, call)
        .await
        .unwrap_or_else(|_| panic!("{what} hung"));
    let took = start.elapsed();
    assert!(
        matches!(result, Err(StoreError::Unavailable(_))),
        "{what}: {result:?}"
    );
    eprintln!("{what}: Unavailable after {took:?} (timeout {TIMEOUT:?})");
}

/// Polls `get` until it succeeds; panics after [`RECOVERY`].
async fn wait_until_served(s: &EtcdStore) -> Duration {
    let start = Instant::now();
    loop {
        match s.get("o/k").await {
            Ok(_) => return start.elapsed(),
            Err(StoreError::Unavailable(m)) => {
                assert!(start.elapsed() < RECOVERY, "still unavailable: {m}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(other) => panic!("{other}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_etcd_fails_every_call_and_is_used_again_after() {
    let Some(etcd) = local_etcd() else { return };
    let s = store(&etcd);
    let v = s
        .put("o/k", b"1".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    let since = s.list("o/").await.unwrap().revision;
    // A watch already waiting when etcd freezes must not wait forever either.
    let waiting = tokio::spawn({
        let s = s.clone();
        async move {
            let start = Instant::now();
            (s.wait_for_change("o/", since).await, start.elapsed())
        }
    });
    etcd.pause().unwrap();
    unavailable_without_hanging("get", s.get("o/k")).await;
    unavailable_without_hanging("list", s.list("o/")).await;
    unavailable_without_hanging("put", s.put("o/k", b"2".to_vec(), Precondition::Version(v))).await;
    unavailable_without_hanging("delete", s.delete("o/x", Precondition::Any)).await;
    unavailable_without_hanging("a new wait", s.wait_for_change("o/", since)).await;
    let (result, took) = tokio::time::timeout(HANG, waiting)
        .await
        .expect("a waiting watch hung")
        .unwrap();
    assert!(
        matches!(result, Err(StoreError::Unavailable(_))),
        "{result:?}"
    );
    // An idle check interval, then one bounded read.
    eprintln!("the waiting watch: Unavailable after {took:?}");

    etcd.resume().unwrap();
    let recovered = wait_until_served(&s).await;
    eprintln!("served again {recovered:?} after SIGCONT");
    // The put that timed out was already sent: etcd may apply it on resuming (the trait's
    // "may or may not have applied"), and nothing else may happen. Either the key is still
    // at v with the old value, or at a newer version with the new one.
    let e = s.get("o/k").await.unwrap().unwrap();
    assert!(
        (e.version == v && e.value == b"1") || (e.version > v && e.value == b"2"),
        "{e:?} (was version {v})"
    );
    let v2 = s
        .put("o/k", b"3".to_vec(), Precondition::Version(e.version))
        .await
        .unwrap();
    let rev = tokio::time::timeout(HANG, s.wait_for_change("o/", since))
        .await
        .expect("watches work again")
        .unwrap();
    assert!(rev >= v2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_etcd_fails_every_call_and_a_restarted_one_is_reconnected() {
    let Some(mut etcd) = local_etcd() else { return };
    let s = store(&etcd);
    let v = s
        .put("o/k", b"1".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    etcd.kill().unwrap();
    unavailable_without_hanging("get", s.get("o/k")).await;
    unavailable_without_hanging("list", s.list("o/")).await;
    unavailable_without_hanging("put", s.put("o/k", b"2".to_vec(), Precondition::Version(v))).await;
    unavailable_without_hanging("wait", s.wait_for_change("o/", v)).await;

    // Same ports, same data: the store reconnects by itself and nothing was lost.
    etcd.restart().unwrap();
    let recovered = wait_until_served(&s).await;
    eprintln!("served again {recovered:?} after the restart was healthy");
    let e = s.get("o/k").await.unwrap().unwrap();
    assert_eq!((e.value.as_slice(), e.version), (&b"1"[..], v));
    assert!(matches!(
        s.put("o/k", b"x".to_vec(), Precondition::Absent).await,
        Err(StoreError::Conflict { .. })
    ));
    let v2 = s
        .put("o/k", b"2".to_vec(), Precondition::Version(v))
        .await
        .unwrap();
    assert!(v2 > v);
}

#[tokio::test]
async fn connect_to_a_frozen_etcd_is_unavailable() {
    let Some(etcd) = local_etcd() else { return };
    etcd.pause().unwrap();
    unavailable_without_hanging("connect", async {
        EtcdStore::connect([etcd.endpoint()]).await.map(|_| ())
    })
    .await;
    etcd.resume().unwrap();
    EtcdStore::connect([etcd.endpoint()]).await.unwrap();
}
