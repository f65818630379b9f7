//! The behaviour every [`Store`] backend must show. Each backend's tests call
//! [`run_all`] on a fresh, empty store (it writes under the prefix `conformance/`).
//!
//! These are plain functions that panic on a violation, so a backend's test is one line;
//! [`run_chunked`] runs them through the [`ChunkedStore`] that wraps every backend.

use std::sync::Arc;
use std::time::Duration;

use super::chunked::{self, ChunkedStore};
use super::{Precondition, Put, Store, StoreError};

/// Every check below, in order.
pub async fn run_all<S: Store + ?Sized>(store: &S) {
    create_and_compare_and_swap(store).await;
    delete_with_preconditions(store).await;
    list_is_prefixed_sorted_and_consistent(store).await;
    wait_for_change_sees_writes_and_deletes(store).await;
    identity_is_stable(store).await;
    many_keys_at_once(store).await;
}

/// The backend under [`ChunkedStore`], as every replica runs it: the checks above with
/// every value split into parts (a 4-byte limit), then one value larger than any
/// backend takes in one request (2 MiB and a bit, at the default limit) written, read back
/// by a reader with no cache, compared-and-swapped, listed and deleted with its parts.
pub async fn run_chunked(inner: Arc<dyn Store>) {
    run_all(&ChunkedStore::new(inner.clone(), 4)).await;
    let parts = || async {
        let listing = inner.list(chunked::PARTS_PREFIX).await.unwrap();
        listing
            .entries
            .into_iter()
            .map(|e| e.key)
            .collect::<Vec<_>>()
    };
    // The parts of the values the checks above left.
    let before = parts().await;
    let store = ChunkedStore::new(inner.clone(), chunked::DEFAULT_LIMIT);
    let fresh = || ChunkedStore::new(inner.clone(), chunked::DEFAULT_LIMIT);
    let k = "conformance/chunked/assignment";
    let big: Vec<u8> = (0..=255u8).cycle().take(2 * 1024 * 1024 + 17).collect();
    let v1 = store
        .put(k, big.clone(), Precondition::Absent)
        .await
        .unwrap();
    assert_eq!(fresh().get(k).await.unwrap().unwrap().value, big);
    let mut changed = big.clone();
    changed[big.len() / 2] ^= 1;
    let v2 = store
        .put(k, changed.clone(), Precondition::Version(v1))
        .await
        .unwrap();
    assert!(v2 > v1);
    assert!(matches!(
        store.put(k, big.clone(), Precondition::Version(v1)).await,
        Err(StoreError::Conflict { .. })
    ));
    let listing = fresh().list("conformance/chunked/").await.unwrap();
    assert_eq!(listing.entries.len(), 1);
    assert_eq!(listing.entries[0].value, changed);
    assert!(parts().await.len() > before.len(), "stored in parts");
    store.delete(k, Precondition::Version(v2)).await.unwrap();
    assert_eq!(fresh().get(k).await.unwrap(), None);
    assert_eq!(parts().await, before, "its parts deleted with it");
}

/// Checking the identity of a store nobody replaced succeeds and finds the same identity
/// every time.
pub async fn identity_is_stable<S: Store + ?Sized>(store: &S) {
    let first = store.check_identity().await.unwrap();
    store
        .put("conformance/identity", b"x".to_vec(), Precondition::Any)
        .await
        .unwrap();
    assert_eq!(store.check_identity().await.unwrap(), first);
}

/// [`Store::put_each`] and [`Store::get_each`]: each outcome on its own, in order — a
/// failed precondition fails that write alone, whether or not the backend sent them
/// together; reads find each key as written, and an absent key absent.
pub async fn many_keys_at_once<S: Store + ?Sized>(store: &S) {
    let put = |key: &str, value: &[u8], pre| Put {
        key: key.to_owned(),
        value: value.to_vec(),
        pre,
    };
    let keys = [
        "conformance/many/a",
        "conformance/many/b",
        "conformance/many/c",
    ];
    let first = store
        .put_each(
            keys.iter()
                .map(|k| put(k, b"1", Precondition::Absent))
                .collect(),
        )
        .await;
    let versions: Vec<u64> = first.into_iter().map(Result::unwrap).collect();
    // One write meets a stale version: it alone fails, the others apply.
    let second = store
        .put_each(vec![
            put(keys[0], b"2", Precondition::Version(versions[0])),
            put(keys[1], b"2", Precondition::Absent),
            put(keys[2], b"2", Precondition::Version(versions[2])),
        ])
        .await;
    assert!(
        second[0].as_ref().is_ok_and(|v| *v > versions[0]),
        "{second:?}"
    );
    assert!(
        matches!(second[1], Err(StoreError::Conflict { .. })),
        "{second:?}"
    );
    assert!(
        second[2].as_ref().is_ok_and(|v| *v > versions[2]),
        "{second:?}"
    );
    let mut wanted: Vec<String> = keys.iter().map(|k| (*k).to_owned()).collect();
    wanted.insert(1, "conformance/many/absent".to_owned());
    let read = store.get_each(wanted).await;
    let read: Vec<Option<(Vec<u8>, u64)>> = read
        .into_iter()
        .map(|r| r.unwrap().map(|e| (e.value, e.version)))
        .collect();
    let at = |r: &Result<u64, StoreError>| r.clone().unwrap();
    assert_eq!(
        read,
        vec![
            Some((b"2".to_vec(), at(&second[0]))),
            None,
            Some((b"1".to_vec(), versions[1])),
            Some((b"2".to_vec(), at(&second[2]))),
        ]
    );
}

/// Create-if-absent, compare-and-swap on the exact version, versions strictly increase.
pub async fn create_and_compare_and_swap<S: Store + ?Sized>(store: &S) {
    let k = "conformance/cas";
    assert_eq!(store.get(k).await.unwrap(), None);
    let v1 = store
        .put(k, b"one".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    assert!(matches!(
        store.put(k, b"x".to_vec(), Precondition::Absent).await,
        Err(StoreError::Conflict { .. })
    ));
    let got = store.get(k).await.unwrap().unwrap();
    assert_eq!((got.value.as_slice(), got.version), (&b"one"[..], v1));
    let v2 = store
        .put(k, b"two".to_vec(), Precondition::Version(v1))
        .await
        .unwrap();
    assert!(v2 > v1, "versions increase");
    assert!(matches!(
        store
            .put(k, b"stale".to_vec(), Precondition::Version(v1))
            .await,
        Err(StoreError::Conflict { .. })
    ));
    assert_eq!(store.get(k).await.unwrap().unwrap().value, b"two");
    let v3 = store
        .put(k, b"three".to_vec(), Precondition::Any)
        .await
        .unwrap();
    assert!(v3 > v2);
}

/// Deletes obey preconditions, and a re-created key never reuses an old version.
pub async fn delete_with_preconditions<S: Store + ?Sized>(store: &S) {
    let k = "conformance/delete";
    let v1 = store
        .put(k, b"a".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    assert!(matches!(
        store.delete(k, Precondition::Version(v1 + 1000)).await,
        Err(StoreError::Conflict { .. })
    ));
    store.delete(k, Precondition::Version(v1)).await.unwrap();
    assert_eq!(store.get(k).await.unwrap(), None);
    store.delete(k, Precondition::Any).await.unwrap();
    assert!(matches!(
        store.delete(k, Precondition::Version(v1)).await,
        Err(StoreError::Conflict { .. })
    ));
    let v2 = store
        .put(k, b"b".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    assert!(v2 > v1, "a re-created key gets a new version");
    assert!(matches!(
        store.put(k, b"c".to_vec(), Precondition::Version(v1)).await,
        Err(StoreError::Conflict { .. })
    ));
}

/// Listings hold exactly the prefix, in key order, at one revision.
pub async fn list_is_prefixed_sorted_and_consistent<S: Store + ?Sized>(store: &S) {
    for k in [
        "conformance/list/b",
        "conformance/list/a",
        "conformance/list/c/d",
        "conformance/listx",
    ] {
        store
            .put(k, k.as_bytes().to_vec(), Precondition::Any)
            .await
            .unwrap();
    }
    let listing = store.list("conformance/list/").await.unwrap();
    let keys: Vec<&str> = listing.entries.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "conformance/list/a",
            "conformance/list/b",
            "conformance/list/c/d"
        ]
    );
    assert!(
        listing
            .entries
            .iter()
            .all(|e| e.version <= listing.revision)
    );
    assert!(listing.entries.iter().all(|e| e.value == e.key.as_bytes()));
}

/// `wait_for_change` returns after a write or delete under the prefix.
pub async fn wait_for_change_sees_writes_and_deletes<S: Store + ?Sized>(store: &S) {
    let limit = Duration::from_secs(10);
    let k = "conformance/watch/key";
    let since = store.list("conformance/watch/").await.unwrap().revision;
    let v = store
        .put(k, b"x".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    let rev = tokio::time::timeout(limit, store.wait_for_change("conformance/watch/", since))
        .await
        .expect("woken by a put")
        .unwrap();
    assert!(rev >= v);
    store.delete(k, Precondition::Version(v)).await.unwrap();
    let rev2 = tokio::time::timeout(limit, store.wait_for_change("conformance/watch/", rev))
        .await
        .expect("woken by a delete")
        .unwrap();
    assert!(rev2 > rev);
}

/// Many writers incrementing one counter with compare-and-swap retries lose no update.
/// `spawn` clones of the store must share its data (a process-local handle or a second
/// connection to the same database).
pub async fn no_lost_update<S: Store>(stores: Vec<Arc<S>>, increments_each: u32) {
    let k = "conformance/counter";
    stores[0]
        .put(k, b"0".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    let tasks: Vec<_> = stores
        .iter()
        .cloned()
        .map(|s| {
            tokio::spawn(async move {
                for _ in 0..increments_each {
                    loop {
                        let e = s.get(k).await.unwrap().unwrap();
                        let n: u64 = std::str::from_utf8(&e.value).unwrap().parse().unwrap();
                        match s
                            .put(
                                k,
                                (n + 1).to_string().into_bytes(),
                                Precondition::Version(e.version),
                            )
                            .await
                        {
                            Ok(_) => break,
                            Err(StoreError::Conflict { .. }) => continue,
                            Err(other) => panic!("{other}"),
                        }
                    }
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let e = stores[0].get(k).await.unwrap().unwrap();
    assert_eq!(
        std::str::from_utf8(&e.value).unwrap(),
        (stores.len() as u32 * increments_each).to_string()
    );
}
