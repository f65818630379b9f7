//! The etcd store against a real etcd (the test-support fixture): the conformance suite,
//! contention across clients, versions as revisions, consistent paged listings, watches and
//! compaction.

use std::sync::Arc;
use std::time::Duration;

use fleetshard_coord::store::{Precondition, Put, Store, StoreError, conformance};
use fleetshard_store_etcd::{EtcdOptions, EtcdStore};
use fleetshard_testsupport::etcd::EtcdServer;

/// Every wait on etcd is bounded by this, so a broken build fails instead of hanging.
const LIMIT: Duration = Duration::from_secs(10);

fn options(etcd: &EtcdServer) -> EtcdOptions {
    EtcdOptions {
        key_prefix: etcd.key_prefix().to_owned(),
        ..EtcdOptions::default()
    }
}

fn store(etcd: &EtcdServer) -> EtcdStore {
    EtcdStore::from_url_with(&etcd.url(), options(etcd)).unwrap()
}

/// A raw client, to look at etcd behind the store's back.
async fn raw(etcd: &EtcdServer) -> etcd_client::Client {
    etcd_client::Client::connect([etcd.endpoint()], None)
        .await
        .unwrap()
}

#[tokio::test]
async fn conforms() {
    let etcd = EtcdServer::start().unwrap();
    conformance::run_all(&store(&etcd)).await;
}

/// Under the chunked store every replica wraps it with: values in parts, and one of
/// 2 MiB (more than etcd takes in one request).
#[tokio::test]
async fn conforms_under_the_chunked_store() {
    let etcd = EtcdServer::start().unwrap();
    conformance::run_chunked(std::sync::Arc::new(store(&etcd))).await;
}

/// Many keys go in one transaction: one revision for all, one more for the next batch;
/// a batch with a stale comparison writes each key on its own (each its own revision),
/// the stale one not at all.
#[tokio::test]
async fn many_writes_are_one_transaction_until_a_comparison_fails() {
    let etcd = EtcdServer::start().unwrap();
    let s = store(&etcd);
    let put = |k: &str, pre| Put {
        key: format!("many/{k}"),
        value: k.as_bytes().to_vec(),
        pre,
    };
    let start = s.revision().await.unwrap();
    let keys = ["a", "b", "c", "d"];
    let first: Vec<u64> = s
        .put_each(keys.iter().map(|k| put(k, Precondition::Absent)).collect())
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(first, [start + 1; 4], "one transaction, one revision");
    let reads = s
        .get_each(keys.iter().map(|k| format!("many/{k}")).collect())
        .await;
    assert!(
        reads
            .iter()
            .all(|r| r.as_ref().unwrap().as_ref().unwrap().version == start + 1)
    );
    let second = s
        .put_each(vec![
            put("a", Precondition::Version(start + 1)),
            put("b", Precondition::Absent),
            put("c", Precondition::Version(start + 1)),
        ])
        .await;
    assert!(
        matches!(second[1], Err(StoreError::Conflict { .. })),
        "{second:?}"
    );
    let (a, c) = (second[0].clone().unwrap(), second[2].clone().unwrap());
    assert!(
        a > start + 1 && c > start + 1 && a != c,
        "{second:?}: written alone"
    );
    assert_eq!(s.revision().await.unwrap(), start + 3, "a and c only");
}

#[tokio::test]
async fn connect_checks_that_etcd_answers() {
    let etcd = EtcdServer::start().unwrap();
    let s = EtcdStore::connect([etcd.endpoint()]).await.unwrap();
    assert_eq!(s.describe(), etcd.url());
    assert!(s.revision().await.unwrap() >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_lost_update_across_clients() {
    let etcd = EtcdServer::start().unwrap();
    // Six stores, six clients and connections: contention is decided by etcd's transactions.
    let stores = (0..6).map(|_| Arc::new(store(&etcd))).collect();
    conformance::no_lost_update(stores, 40).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_lost_update_across_clones() {
    let etcd = EtcdServer::start().unwrap();
    let s = store(&etcd);
    let stores = (0..4).map(|_| Arc::new(s.clone())).collect();
    conformance::no_lost_update(stores, 40).await;
}

#[tokio::test]
async fn versions_are_etcd_mod_revisions_and_listings_carry_the_header_revision() {
    let etcd = EtcdServer::start().unwrap();
    let s = store(&etcd);
    let v1 = s
        .put("r/a", b"1".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    let v2 = s
        .put("r/a", b"2".to_vec(), Precondition::Version(v1))
        .await
        .unwrap();
    assert!(v2 > v1);
    assert_eq!(s.get("r/a").await.unwrap().unwrap().version, v2);
    // etcd's own view of the key: mod_revision is the version, and a write is a revision.
    let mut c = raw(&etcd).await;
    let full = format!("{}r/a", etcd.key_prefix());
    let resp = c.get(full.as_str(), None).await.unwrap();
    let kv = &resp.kvs()[0];
    assert_eq!(kv.mod_revision() as u64, v2);
    assert_eq!(kv.value(), b"2");
    assert!(resp.header().unwrap().revision() as u64 >= v2);
    let listing = s.list("r/").await.unwrap();
    assert!(listing.revision >= v2);
    assert!(s.revision().await.unwrap() >= listing.revision);
    if etcd.is_local() {
        // Nobody else writes to this etcd: the last write is the store's revision.
        assert_eq!(listing.revision, v2);
        assert_eq!(s.revision().await.unwrap(), v2);
    }
    // A key written behind the store's back is read with its mod_revision too.
    let put = c
        .put(format!("{}r/b", etcd.key_prefix()), "x", None)
        .await
        .unwrap();
    let vb = put.header().unwrap().revision() as u64;
    assert_eq!(s.get("r/b").await.unwrap().unwrap().version, vb);
    // A delete is a revision as well: re-creating gets a version above it.
    s.delete("r/b", Precondition::Version(vb)).await.unwrap();
    let after_delete = s.revision().await.unwrap();
    assert!(after_delete > vb);
    let again = s
        .put("r/b", b"y".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    assert!(again > after_delete);
}

#[tokio::test]
async fn key_prefixes_keep_stores_apart() {
    let etcd = EtcdServer::start().unwrap();
    let with = |p: &str| {
        EtcdStore::from_url_with(
            &etcd.url(),
            EtcdOptions {
                key_prefix: format!("{}{p}", etcd.key_prefix()),
                ..EtcdOptions::default()
            },
        )
        .unwrap()
    };
    let (a, b) = (with("a/"), with("b/"));
    a.put("k", b"a".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    assert_eq!(b.get("k").await.unwrap(), None);
    b.put("k", b"b".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    let listed = a.list("").await.unwrap();
    assert_eq!(listed.entries.len(), 1);
    assert_eq!(
        (
            listed.entries[0].key.as_str(),
            listed.entries[0].value.as_slice()
        ),
        ("k", &b"a"[..])
    );
    assert!(a.describe().contains("a/"), "{}", a.describe());
}

/// A writer rewrites keys `c/0`..`c/9` in order, round after round, each with its round
/// number. A listing at one revision therefore shows rounds `[g+1, …, g+1, g, …, g]`; a
/// listing stitched from pages at different revisions can show a later key ahead of an
/// earlier one. Pages of 3 keys make every listing take four requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paged_listings_are_one_revision_under_concurrent_writes() {
    let etcd = EtcdServer::start().unwrap();
    let paged = EtcdStore::from_url_with(
        &etcd.url(),
        EtcdOptions {
            page_size: 3,
            ..options(&etcd)
        },
    )
    .unwrap();
    let writer_store = store(&etcd);
    for i in 0..10 {
        writer_store
            .put(&format!("c/{i}"), b"0".to_vec(), Precondition::Any)
            .await
            .unwrap();
    }
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = tokio::spawn({
        let stop = Arc::clone(&stop);
        async move {
            let mut round = 1u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for i in 0..10 {
                    writer_store
                        .put(
                            &format!("c/{i}"),
                            round.to_string().into_bytes(),
                            Precondition::Any,
                        )
                        .await
                        .unwrap();
                }
                round += 1;
            }
            round
        }
    });
    let mut distinct_revisions = std::collections::BTreeSet::new();
    for _ in 0..150 {
        let listing = paged.list("c/").await.unwrap();
        let rounds: Vec<u64> = listing
            .entries
            .iter()
            .map(|e| std::str::from_utf8(&e.value).unwrap().parse().unwrap())
            .collect();
        assert_eq!(rounds.len(), 10);
        let g = rounds[9];
        assert!(
            rounds.iter().all(|&r| r == g || r == g + 1) && rounds.windows(2).all(|w| w[0] >= w[1]),
            "a torn listing at revision {}: {rounds:?}",
            listing.revision
        );
        assert!(
            listing
                .entries
                .iter()
                .all(|e| e.version <= listing.revision)
        );
        distinct_revisions.insert(listing.revision);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let rounds = writer.await.unwrap();
    // The check means something only if writes happened between listings.
    assert!(
        rounds > 2 && distinct_revisions.len() > 10,
        "{rounds} rounds, {} revisions",
        distinct_revisions.len()
    );
}

#[tokio::test]
async fn wait_for_change_wakes_on_the_prefix_only_and_respects_since() {
    let etcd = EtcdServer::start().unwrap();
    let s = store(&etcd);
    let since = s.list("w/").await.unwrap().revision;
    // A write elsewhere does not wake a watcher of w/.
    let waiter = tokio::spawn({
        let s = s.clone();
        async move { s.wait_for_change("w/", since).await }
    });
    s.put("wx", b"1".to_vec(), Precondition::Any).await.unwrap();
    s.put("v/1", b"1".to_vec(), Precondition::Any)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "woken by a write outside the prefix");
    let v = s
        .put("w/1", b"1".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    let rev = tokio::time::timeout(LIMIT, waiter)
        .await
        .expect("woken by a write under the prefix")
        .unwrap()
        .unwrap();
    assert!(rev >= v);
    // A change before the call but after `since` is not missed: it resolves at once.
    let rev_again = tokio::time::timeout(LIMIT, s.wait_for_change("w/", since))
        .await
        .expect("a past change wakes at once")
        .unwrap();
    assert!(rev_again >= v);
    // Waiting from the write's own revision waits for the next change: a delete.
    let waiter = tokio::spawn({
        let s = s.clone();
        async move { s.wait_for_change("w/", v).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "woken with nothing new since {v}");
    s.delete("w/1", Precondition::Version(v)).await.unwrap();
    let rev2 = tokio::time::timeout(LIMIT, waiter)
        .await
        .expect("woken by a delete")
        .unwrap()
        .unwrap();
    assert!(rev2 > v);
}

#[tokio::test]
async fn a_compacted_since_wakes_at_once_with_the_current_revision() {
    let etcd = EtcdServer::start().unwrap();
    let s = store(&etcd);
    let first = s
        .put("z/k", b"0".to_vec(), Precondition::Any)
        .await
        .unwrap();
    let mut last = first;
    for i in 1..20 {
        last = s
            .put(
                "z/k",
                i.to_string().into_bytes(),
                Precondition::Version(last),
            )
            .await
            .unwrap();
    }
    // Nothing changes under z/ after `last`; compacting makes `first` unwatchable.
    let mut c = raw(&etcd).await;
    c.compact(last as i64, None).await.unwrap();
    let rev = tokio::time::timeout(LIMIT, s.wait_for_change("z/", first))
        .await
        .expect("a compacted start revision wakes at once")
        .unwrap();
    assert!(rev >= last, "{rev} < {last}");
    // The store keeps working after a compaction.
    assert_eq!(s.get("z/k").await.unwrap().unwrap().version, last);
    assert_eq!(s.list("z/").await.unwrap().entries.len(), 1);
    // A wait from the compaction point is an ordinary wait again.
    let waiter = tokio::spawn({
        let s = s.clone();
        async move { s.wait_for_change("z/", last).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished());
    let v = s
        .put("z/k", b"new".to_vec(), Precondition::Version(last))
        .await
        .unwrap();
    let rev = tokio::time::timeout(LIMIT, waiter)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(rev >= v);
}

#[tokio::test]
async fn a_request_etcd_refuses_is_a_backend_error() {
    let etcd = EtcdServer::start().unwrap();
    let s = store(&etcd);
    // etcd refuses requests above 1.5 MiB (--max-request-bytes): that does not pass.
    let big = vec![b'x'; 1_700_000];
    match s.put("big", big, Precondition::Any).await {
        Err(StoreError::Backend(m)) => assert!(m.contains("too large"), "{m}"),
        other => panic!("{other:?}"),
    }
    // And the store is still fine.
    s.put("small", b"1".to_vec(), Precondition::Absent)
        .await
        .unwrap();
}
