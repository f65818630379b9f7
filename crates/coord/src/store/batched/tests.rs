use std::time::Duration;

use futures::FutureExt;
use tokio::sync::watch;

use super::*;
use crate::store::memory::MemoryStore;
use crate::store::{Listing, StoreIdentity};

/// A memory store whose many-key calls record their sizes and wait while the gate is shut.
struct Gated {
    inner: MemoryStore,
    open: watch::Sender<bool>,
    puts: Mutex<Vec<Vec<String>>>,
    gets: Mutex<Vec<usize>>,
}

impl Gated {
    fn new(open: bool) -> Arc<Self> {
        Arc::new(Gated {
            inner: MemoryStore::new(),
            open: watch::Sender::new(open),
            puts: Mutex::default(),
            gets: Mutex::default(),
        })
    }

    async fn gate(&self) {
        let mut open = self.open.subscribe();
        let _ = open.wait_for(|o| *o).await;
    }

    fn put_batches(&self) -> Vec<Vec<String>> {
        self.puts.lock().unwrap().clone()
    }
}

impl Store for Gated {
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Entry>, StoreError>> {
        self.inner.get(key)
    }
    fn list<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Listing, StoreError>> {
        self.inner.list(prefix)
    }
    fn put<'a>(
        &'a self,
        key: &'a str,
        value: Vec<u8>,
        pre: Precondition,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        self.inner.put(key, value, pre)
    }
    fn delete<'a>(
        &'a self,
        key: &'a str,
        pre: Precondition,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.inner.delete(key, pre)
    }
    fn wait_for_change<'a>(
        &'a self,
        prefix: &'a str,
        since: u64,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        self.inner.wait_for_change(prefix, since)
    }
    fn describe(&self) -> String {
        "gated".into()
    }
    fn check_identity(&self) -> BoxFuture<'_, Result<StoreIdentity, StoreError>> {
        self.inner.check_identity()
    }
    fn put_each(&self, puts: Vec<Put>) -> BoxFuture<'_, Vec<Result<u64, StoreError>>> {
        async move {
            self.puts
                .lock()
                .unwrap()
                .push(puts.iter().map(|p| p.key.clone()).collect());
            self.gate().await;
            self.inner.put_each(puts).await
        }
        .boxed()
    }
    fn get_each(&self, keys: Vec<String>) -> BoxFuture<'_, Vec<Result<Option<Entry>, StoreError>>> {
        async move {
            self.gets.lock().unwrap().push(keys.len());
            self.gate().await;
            self.inner.get_each(keys).await
        }
        .boxed()
    }
}

/// Spawns a write of `key` through `batched`.
fn spawn_put(
    batched: &Arc<Batched>,
    key: String,
    pre: Precondition,
) -> tokio::task::JoinHandle<Result<u64, StoreError>> {
    let batched = Arc::clone(batched);
    tokio::spawn(async move { batched.put(&key, key.as_bytes().to_vec(), pre).await })
}

/// Takes every slot with a write that waits at the (shut) gate, so the next calls queue.
async fn fill_slots(
    batched: &Arc<Batched>,
) -> Vec<tokio::task::JoinHandle<Result<u64, StoreError>>> {
    let busy = (0..IN_FLIGHT)
        .map(|i| spawn_put(batched, format!("busy{i}"), Precondition::Any))
        .collect();
    settle().await;
    busy
}

/// Lets spawned tasks run until they wait (time is paused: nothing else advances).
async fn settle() {
    tokio::time::sleep(Duration::from_millis(1)).await;
}

#[tokio::test(start_paused = true)]
async fn a_call_to_an_idle_store_goes_out_alone_at_once() {
    let store = Gated::new(true);
    let batched = Batched::new(store.clone());
    let version = batched.put("a", b"1".to_vec(), Precondition::Absent).await;
    assert_eq!(version, Ok(1));
    assert_eq!(store.put_batches(), vec![vec!["a".to_owned()]]);
    let got = batched.get("a").await.unwrap().unwrap();
    assert_eq!((got.value, got.version), (b"1".to_vec(), 1));
    assert_eq!(*store.gets.lock().unwrap(), vec![1]);
}

#[tokio::test(start_paused = true)]
async fn calls_made_while_the_store_is_busy_go_out_together_each_with_its_outcome() {
    let store = Gated::new(false);
    let batched = Arc::new(Batched::new(store.clone()));
    // Four calls take the four slots and wait at the gate...
    let mut calls: Vec<_> = (0..IN_FLIGHT)
        .map(|i| spawn_put(&batched, format!("k{i:03}"), Precondition::Absent))
        .collect();
    settle().await;
    // ...so the next 100 queue: 64 and 36 once slots free, in the order they came.
    calls.extend(
        (IN_FLIGHT..IN_FLIGHT + 100)
            .map(|i| spawn_put(&batched, format!("k{i:03}"), Precondition::Absent)),
    );
    settle().await;
    assert_eq!(store.put_batches().len(), IN_FLIGHT);
    store.open.send_replace(true);
    let mut versions = Vec::new();
    for c in calls {
        versions.push(c.await.unwrap().unwrap());
    }
    let sizes: Vec<usize> = store.put_batches().iter().map(Vec::len).collect();
    assert_eq!(sizes, [1, 1, 1, 1, 64, 36]);
    let batches = store.put_batches();
    let queued: Vec<String> = batches[IN_FLIGHT..].concat();
    let expected: Vec<String> = (IN_FLIGHT..IN_FLIGHT + 100)
        .map(|i| format!("k{i:03}"))
        .collect();
    assert_eq!(queued, expected);
    // Each caller got the version its own key was written at.
    for (i, v) in versions.iter().enumerate() {
        let e = store.inner.get(&format!("k{i:03}")).await.unwrap().unwrap();
        assert_eq!(e.version, *v, "k{i:03}");
    }
}

#[tokio::test(start_paused = true)]
async fn one_batch_never_writes_a_key_twice_and_a_failed_precondition_fails_alone() {
    let store = Gated::new(false);
    let batched = Arc::new(Batched::new(store.clone()));
    let busy = fill_slots(&batched).await;
    let first = spawn_put(&batched, "same".into(), Precondition::Absent);
    settle().await;
    let second = spawn_put(&batched, "same".into(), Precondition::Absent);
    settle().await;
    let stale = spawn_put(&batched, "other".into(), Precondition::Version(99));
    settle().await;
    store.open.send_replace(true);
    for b in busy {
        b.await.unwrap().unwrap();
    }
    assert!(first.await.unwrap().is_ok());
    assert!(matches!(
        second.await.unwrap(),
        Err(StoreError::Conflict { .. })
    ));
    assert!(matches!(
        stale.await.unwrap(),
        Err(StoreError::Conflict { .. })
    ));
    let batches = store.put_batches();
    assert_eq!(batches[IN_FLIGHT], ["same", "other"], "{batches:?}");
    assert_eq!(batches[IN_FLIGHT + 1], ["same"], "{batches:?}");
}

#[tokio::test(start_paused = true)]
async fn a_write_larger_than_a_batch_goes_alone() {
    let store = Gated::new(false);
    let batched = Arc::new(Batched::new(store.clone()));
    let busy = fill_slots(&batched).await;
    let big = {
        let batched = Arc::clone(&batched);
        tokio::spawn(async move {
            let value = vec![b'x'; MAX_BATCH_BYTES];
            batched.put("big", value, Precondition::Absent).await
        })
    };
    settle().await;
    let small = spawn_put(&batched, "small".into(), Precondition::Absent);
    settle().await;
    store.open.send_replace(true);
    for b in busy {
        b.await.unwrap().unwrap();
    }
    big.await.unwrap().unwrap();
    small.await.unwrap().unwrap();
    let batches = store.put_batches();
    assert_eq!(
        &batches[IN_FLIGHT..],
        [vec!["big"], vec!["small"]],
        "{batches:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_caller_dropped_while_sending_leaves_its_batch_unavailable_not_hanging() {
    let store = Gated::new(false);
    let batched = Arc::new(Batched::new(store.clone()));
    let busy = fill_slots(&batched).await;
    let queued: Vec<_> = (0..3)
        .map(|i| spawn_put(&batched, format!("q{i}"), Precondition::Any))
        .collect();
    settle().await;
    // The slot holders are dropped mid-call; a queued caller takes a slot and sends the
    // three, and is dropped too while they wait at the gate.
    for b in &busy {
        b.abort();
    }
    settle().await;
    assert_eq!(store.put_batches().len(), IN_FLIGHT + 1);
    let sender = store.put_batches()[IN_FLIGHT].clone();
    assert_eq!(sender, ["q0", "q1", "q2"]);
    queued[0].abort();
    settle().await;
    for q in queued.into_iter().skip(1) {
        let e = q.await.unwrap().unwrap_err();
        assert!(matches!(e, StoreError::Unavailable(_)), "{e:?}");
    }
}
