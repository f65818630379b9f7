use std::sync::atomic::{AtomicU32, Ordering};

use super::*;
use crate::store::memory::MemoryStore;

/// A memory store whose identity the test changes, counting identity checks.
#[derive(Default)]
struct Switchable {
    data: MemoryStore,
    /// `Some(what)`: the backend now reports the store replaced.
    replaced: Mutex<Option<String>>,
    /// The backend's answers also say so (as etcd's response headers do).
    answers_say_so: std::sync::atomic::AtomicBool,
    checks: AtomicU32,
}

impl Switchable {
    fn replace(&self, what: &str, in_answers: bool) {
        *self.replaced.lock().unwrap() = Some(what.to_owned());
        self.answers_say_so.store(in_answers, Ordering::SeqCst);
    }

    fn restore(&self) {
        *self.replaced.lock().unwrap() = None;
        self.answers_say_so.store(false, Ordering::SeqCst);
    }

    fn answer<T>(&self, r: Result<T, StoreError>) -> Result<T, StoreError> {
        match self.replaced.lock().unwrap().clone() {
            Some(what) if self.answers_say_so.load(Ordering::SeqCst) => {
                Err(StoreError::Replaced { what })
            }
            _ => r,
        }
    }
}

impl Store for Switchable {
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Entry>, StoreError>> {
        async move { self.answer(self.data.get(key).await) }.boxed()
    }
    fn list<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Listing, StoreError>> {
        async move { self.answer(self.data.list(prefix).await) }.boxed()
    }
    fn put<'a>(
        &'a self,
        key: &'a str,
        value: Vec<u8>,
        pre: Precondition,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        async move { self.answer(self.data.put(key, value, pre).await) }.boxed()
    }
    fn delete<'a>(
        &'a self,
        key: &'a str,
        pre: Precondition,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        async move { self.answer(self.data.delete(key, pre).await) }.boxed()
    }
    fn wait_for_change<'a>(
        &'a self,
        prefix: &'a str,
        since: u64,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        self.data.wait_for_change(prefix, since)
    }
    fn describe(&self) -> String {
        "switchable://".into()
    }
    fn check_identity(&self) -> BoxFuture<'_, Result<StoreIdentity, StoreError>> {
        self.checks.fetch_add(1, Ordering::SeqCst);
        let r = match self.replaced.lock().unwrap().clone() {
            Some(what) => Err(StoreError::Replaced { what }),
            None => Ok(StoreIdentity::Recorded("one".into())),
        };
        futures::future::ready(r).boxed()
    }
}

fn guarded(every: Duration) -> (Arc<Switchable>, GuardedStore) {
    let inner = Arc::new(Switchable::default());
    let guard = GuardedStore::new(inner.clone(), every);
    (inner, guard)
}

fn is_replaced<T: std::fmt::Debug>(r: Result<T, StoreError>, what: &str) {
    match r {
        Err(StoreError::Replaced { what: w }) => assert_eq!(w, what),
        other => panic!("expected Replaced({what}), got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn conforms_while_the_store_stays_the_same() {
    let (_, guard) = guarded(Duration::ZERO);
    crate::store::conformance::run_all(&guard).await;
    assert_eq!(guard.replaced(), None);
}

#[tokio::test(start_paused = true)]
async fn a_replaced_store_is_refused_for_good() {
    let (inner, guard) = guarded(Duration::ZERO);
    guard
        .put("k", b"v".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    let mut rx = guard.subscribe();
    assert_eq!(*rx.borrow_and_update(), None);
    inner.replace("s.db is now another file", false);
    // The check before the write finds it; the write is not sent.
    is_replaced(
        guard.put("k", b"w".to_vec(), Precondition::Any).await,
        "s.db is now another file",
    );
    assert_eq!(inner.data.get("k").await.unwrap().unwrap().value, b"v");
    assert!(rx.has_changed().unwrap());
    assert_eq!(
        guard.replaced().as_deref(),
        Some("s.db is now another file")
    );
    // The old store coming back changes nothing: only a restart opens a store again.
    inner.restore();
    is_replaced(guard.get("k").await, "s.db is now another file");
    is_replaced(guard.list("").await, "s.db is now another file");
    is_replaced(
        guard.delete("k", Precondition::Any).await,
        "s.db is now another file",
    );
    is_replaced(
        guard.wait_for_change("", 0).await,
        "s.db is now another file",
    );
    is_replaced(guard.check_identity().await, "s.db is now another file");
    assert_eq!(guard.describe(), "switchable://");
}

#[tokio::test(start_paused = true)]
async fn an_answer_saying_replaced_trips_it_between_checks() {
    let (inner, guard) = guarded(Duration::from_secs(3600));
    guard.list("").await.unwrap();
    let checks = inner.checks.load(Ordering::SeqCst);
    inner.replace("etcd cluster 0x2 answers, not 0x1", true);
    is_replaced(guard.list("").await, "etcd cluster 0x2 answers, not 0x1");
    // No identity check was due: the answer itself told.
    assert_eq!(inner.checks.load(Ordering::SeqCst), checks);
    inner.restore();
    is_replaced(guard.list("").await, "etcd cluster 0x2 answers, not 0x1");
}

#[tokio::test(start_paused = true)]
async fn the_identity_is_checked_at_most_once_per_period() {
    let (inner, guard) = guarded(Duration::from_secs(1));
    for _ in 0..10 {
        guard.list("").await.unwrap();
    }
    assert_eq!(inner.checks.load(Ordering::SeqCst), 1);
    tokio::time::advance(Duration::from_millis(999)).await;
    guard.list("").await.unwrap();
    assert_eq!(inner.checks.load(Ordering::SeqCst), 1);
    tokio::time::advance(Duration::from_millis(1)).await;
    guard.list("").await.unwrap();
    assert_eq!(inner.checks.load(Ordering::SeqCst), 2);
    // Replaced between checks (and not in answers): refused from the next due check on.
    inner.replace("namespace argocd has another uid", false);
    guard.list("").await.unwrap();
    tokio::time::advance(Duration::from_secs(1)).await;
    is_replaced(guard.list("").await, "namespace argocd has another uid");
}

#[tokio::test(start_paused = true)]
async fn a_failed_check_is_not_a_refusal() {
    struct Down;
    impl Store for Down {
        fn get<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<Option<Entry>, StoreError>> {
            futures::future::ready(Ok(None)).boxed()
        }
        fn list<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<Listing, StoreError>> {
            futures::future::ready(Err(StoreError::Unavailable("down".into()))).boxed()
        }
        fn put<'a>(
            &'a self,
            _: &'a str,
            _: Vec<u8>,
            _: Precondition,
        ) -> BoxFuture<'a, Result<u64, StoreError>> {
            futures::future::ready(Ok(1)).boxed()
        }
        fn delete<'a>(
            &'a self,
            _: &'a str,
            _: Precondition,
        ) -> BoxFuture<'a, Result<(), StoreError>> {
            futures::future::ready(Ok(())).boxed()
        }
        fn wait_for_change<'a>(
            &'a self,
            _: &'a str,
            _: u64,
        ) -> BoxFuture<'a, Result<u64, StoreError>> {
            futures::future::pending().boxed()
        }
        fn describe(&self) -> String {
            "down://".into()
        }
        fn check_identity(&self) -> BoxFuture<'_, Result<StoreIdentity, StoreError>> {
            futures::future::ready(Err(StoreError::Unavailable("down".into()))).boxed()
        }
    }
    let guard = GuardedStore::new(Arc::new(Down), Duration::ZERO);
    // The operation runs and reports its own trouble.
    assert!(matches!(
        guard.list("").await,
        Err(StoreError::Unavailable(_))
    ));
    assert_eq!(guard.put("k", vec![], Precondition::Any).await, Ok(1));
    assert_eq!(guard.replaced(), None);
}

#[tokio::test(start_paused = true)]
async fn a_wait_ends_when_another_operation_finds_the_store_replaced() {
    let (inner, guard) = guarded(Duration::ZERO);
    let guard = Arc::new(guard);
    let since = guard.list("p/").await.unwrap().revision;
    let waiting = tokio::spawn({
        let guard = guard.clone();
        async move { guard.wait_for_change("p/", since).await }
    });
    tokio::time::advance(Duration::from_millis(10)).await;
    inner.replace("gone", false);
    is_replaced(guard.get("x").await, "gone");
    is_replaced(waiting.await.unwrap(), "gone");
}
