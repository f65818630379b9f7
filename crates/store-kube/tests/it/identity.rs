//! The store is the store: the namespace's uid is recorded at first contact, and the
//! namespace deleted, or deleted and created again, is `StoreError::Replaced`, which the
//! store guard makes final.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use fleetshard_coord::store::guard::GuardedStore;
use fleetshard_coord::store::{Precondition, Store, StoreError, StoreIdentity};
use fleetshard_testsupport::kube_api::Verb;

fn uid(server: &fleetshard_testsupport::kube_api::FakeApiServer, ns: &str) -> String {
    server.get("v1", "Namespace", "", ns).unwrap()["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn replaced<T: std::fmt::Debug>(r: Result<T, StoreError>, says: &str) {
    match r {
        Err(StoreError::Replaced { what }) => assert!(what.contains(says), "{what}"),
        other => panic!("expected Replaced ({says}), got {other:?}"),
    }
}

#[tokio::test]
async fn a_namespace_created_again_is_another_store() {
    let server = support::fake().await;
    server.create_namespace("fleet").unwrap();
    let first_uid = uid(&server, "fleet");
    let store = support::store(&server, "fleet");
    let id = store.check_identity().await.unwrap();
    assert_eq!(
        id,
        StoreIdentity::Recorded(format!(
            "kubernetes://fleet: namespace fleet (uid {first_uid})"
        ))
    );
    store
        .put("fs/shards/0", b"{}".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    assert_eq!(store.check_identity().await.unwrap(), id);
    assert_eq!(server.request_count(Verb::Get, "namespaces"), 2);

    server.delete("v1", "Namespace", "", "fleet").unwrap();
    replaced(store.check_identity().await, "was deleted");
    server.create_namespace("fleet").unwrap();
    let second_uid = uid(&server, "fleet");
    assert_ne!(second_uid, first_uid);
    replaced(store.check_identity().await, &second_uid);

    // Behind the guard: refused from the first check on, for good; nothing is written.
    let writes = server.write_count();
    let guarded = GuardedStore::new(Arc::new(store), Duration::ZERO);
    replaced(guarded.list("fs/").await, "deleted and created again");
    replaced(
        guarded
            .put("fs/shards/0", b"{}".to_vec(), Precondition::Absent)
            .await,
        "deleted and created again",
    );
    assert_eq!(server.write_count(), writes);
}

#[tokio::test]
async fn a_store_of_an_unchanged_namespace_keeps_its_identity() {
    let server = support::fake().await;
    let a = support::store(&server, "default");
    let b = support::store(&server, "default");
    let id = a.check_identity().await.unwrap();
    b.put("fs/x", b"1".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    assert_eq!(b.check_identity().await.unwrap(), id);
    assert_eq!(a.check_identity().await.unwrap(), id);
    // A namespace that never existed is an error, not a replacement.
    let none = support::store(&server, "nowhere");
    let err = none.check_identity().await.unwrap_err();
    assert!(
        matches!(&err, StoreError::Backend(m) if m.contains("namespace nowhere does not exist")),
        "{err}"
    );
}
