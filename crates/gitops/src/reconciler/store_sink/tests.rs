use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use fleetshard_coord::store::memory::MemoryStore;
use fleetshard_coord::store::{Listing, Precondition};

use super::*;
use crate::reconciler::status::{HealthInfo, SyncInfo};

const ROOT: &str = "fleetshard/";

fn app() -> AppKey {
    AppKey::new("team-a", "guestbook")
}

fn comparison(sync: &str, at: &str, conditions: &[&str]) -> ComparisonStatus {
    ComparisonStatus {
        sync: SyncInfo {
            status: sync.to_owned(),
            revision: Some("0123456789abcdef".to_owned()),
            revisions: Vec::new(),
            compared_to: None,
            compared_before: None,
        },
        health: HealthInfo {
            status: "Healthy".to_owned(),
            message: String::new(),
            // As the reconciler gives it once it knows the app (kept as given).
            last_transition_time: Some("t0".to_owned()),
        },
        resources: Vec::new(),
        source_type: None,
        source_types: Vec::new(),
        summary: None,
        controller_namespace: String::new(),
        refresh_done: false,
        reconciled_at: at.to_owned(),
        conditions: conditions
            .iter()
            .map(|m| Condition {
                kind: "ComparisonError".to_owned(),
                message: (*m).to_owned(),
                last_transition_time: at.to_owned(),
            })
            .collect(),
    }
}

fn operation(phase: &str, started: &str, finished: Option<&str>) -> OperationState {
    OperationState {
        operation: Default::default(),
        phase: phase.to_owned(),
        message: format!("sync {phase}"),
        started_at: started.to_owned(),
        finished_at: finished.map(str::to_owned),
        sync_result: None,
        retry_count: 0,
    }
}

fn sink(store: Arc<dyn Store>) -> StoreStatusSink {
    StoreStatusSink::new(store, ROOT, DEFAULT_HEARTBEAT)
}

async fn stored(store: &dyn Store) -> (StoredAppStatus, u64) {
    let key = status_key(ROOT, &app());
    let e = store.get(&key).await.unwrap().expect("a record");
    (StoredAppStatus::decode(&key, &e.value).unwrap(), e.version)
}

async fn write(sink: &StoreStatusSink, update: StatusUpdate) -> Result<(), SinkError> {
    sink.write(&app(), &update).await
}

#[test]
fn statuses_live_beside_the_root_never_under_it() {
    assert_eq!(status_prefix("fleetshard/"), "fleetshard-status/apps/");
    assert_eq!(
        status_key("fleetshard/", &app()),
        "fleetshard-status/apps/team-a/guestbook"
    );
    // The first segment changes, so the Kubernetes store keeps them in a scope of their own.
    assert_eq!(status_prefix("fleets/prod/"), "fleets-status/prod/apps/");
    for root in ["fleetshard/", "fleets/prod/", "a/", "/"] {
        let key = status_key(root, &app());
        assert!(!key.starts_with(root), "{key} is under {root}");
        assert!(!root.starts_with(&status_prefix(root)));
    }
}

#[tokio::test(start_paused = true)]
async fn the_first_write_creates_the_record_and_readers_decode_it() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let sink = sink(store.clone());
    let c = comparison("Synced", "2026-11-21T10:00:00Z", &[]);
    write(&sink, StatusUpdate::Comparison(Box::new(c.clone())))
        .await
        .unwrap();
    let entries = read_statuses(store.as_ref(), ROOT).await.unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].app, "team-a/guestbook");
    assert_eq!(entries[0].key, "fleetshard-status/apps/team-a/guestbook");
    let s = entries[0].status.clone().unwrap();
    assert_eq!(s.comparison, Some(c));
    assert_eq!(s.operation, None);
    // Argo CD's field names, as the Application's status has them.
    let raw: serde_json::Value = serde_json::from_slice(&entries[0].raw).unwrap();
    assert_eq!(raw["comparison"]["sync"]["status"], "Synced");
    assert_eq!(raw["comparison"]["reconciledAt"], "2026-11-21T10:00:00Z");
}

#[tokio::test(start_paused = true)]
async fn timestamps_alone_are_not_written_until_the_heartbeat() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let sink = StoreStatusSink::new(store.clone(), ROOT, Duration::from_secs(600));
    let first = comparison("Synced", "2026-11-21T10:00:00Z", &["repo unreachable"]);
    write(&sink, StatusUpdate::Comparison(Box::new(first)))
        .await
        .unwrap();
    let (_, v1) = stored(store.as_ref()).await;

    // Three minutes later, the same result: no write.
    tokio::time::advance(Duration::from_secs(180)).await;
    let again = comparison("Synced", "2026-11-21T10:03:00Z", &["repo unreachable"]);
    write(&sink, StatusUpdate::Comparison(Box::new(again)))
        .await
        .unwrap();
    let (s, v) = stored(store.as_ref()).await;
    assert_eq!(v, v1, "an unchanged refresh was written");
    assert_eq!(s.comparison.unwrap().reconciled_at, "2026-11-21T10:00:00Z");

    // A heartbeat after the write: written, the condition keeping when it appeared.
    tokio::time::advance(Duration::from_secs(420)).await;
    let later = comparison("Synced", "2026-11-21T10:10:00Z", &["repo unreachable"]);
    write(&sink, StatusUpdate::Comparison(Box::new(later)))
        .await
        .unwrap();
    let (s, v2) = stored(store.as_ref()).await;
    assert!(v2 > v1, "the heartbeat was not written");
    let c = s.comparison.unwrap();
    assert_eq!(c.reconciled_at, "2026-11-21T10:10:00Z");
    assert_eq!(c.conditions[0].last_transition_time, "2026-11-21T10:00:00Z");

    // A real change is written at once; a new condition gets its own time.
    tokio::time::advance(Duration::from_secs(1)).await;
    let changed = comparison(
        "OutOfSync",
        "2026-11-21T10:10:01Z",
        &["repo unreachable", "cluster unreachable"],
    );
    write(&sink, StatusUpdate::Comparison(Box::new(changed)))
        .await
        .unwrap();
    let (s, v3) = stored(store.as_ref()).await;
    assert!(v3 > v2);
    let c = s.comparison.unwrap();
    assert_eq!(c.sync.status, "OutOfSync");
    assert_eq!(c.conditions[0].last_transition_time, "2026-11-21T10:00:00Z");
    assert_eq!(c.conditions[1].last_transition_time, "2026-11-21T10:10:01Z");
}

#[tokio::test(start_paused = true)]
async fn operation_phases_are_written_and_the_halves_kept_apart() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let sink = sink(store.clone());
    let c = comparison("OutOfSync", "2026-11-21T10:00:00Z", &[]);
    write(&sink, StatusUpdate::Comparison(Box::new(c.clone())))
        .await
        .unwrap();
    let running = operation("Running", "2026-11-21T10:00:01Z", None);
    write(&sink, StatusUpdate::Operation(Box::new(running.clone())))
        .await
        .unwrap();
    let (s, v1) = stored(store.as_ref()).await;
    assert_eq!(s.operation, Some(running.clone()));
    assert_eq!(
        s.comparison,
        Some(c.clone()),
        "the operation dropped the comparison"
    );

    // The same state again is not rewritten; its end is.
    write(&sink, StatusUpdate::Operation(Box::new(running)))
        .await
        .unwrap();
    assert_eq!(stored(store.as_ref()).await.1, v1);
    let done = operation(
        "Succeeded",
        "2026-11-21T10:00:01Z",
        Some("2026-11-21T10:00:02Z"),
    );
    write(&sink, StatusUpdate::Operation(Box::new(done.clone())))
        .await
        .unwrap();
    let (s, v2) = stored(store.as_ref()).await;
    assert!(v2 > v1);
    assert_eq!(s.operation, Some(done.clone()));

    // The next refresh keeps the operation.
    let synced = comparison("Synced", "2026-11-21T10:00:03Z", &[]);
    write(&sink, StatusUpdate::Comparison(Box::new(synced.clone())))
        .await
        .unwrap();
    let (s, _) = stored(store.as_ref()).await;
    assert_eq!(s.comparison, Some(synced));
    assert_eq!(s.operation, Some(done));
}

#[tokio::test(start_paused = true)]
async fn a_conflict_is_read_again_and_retried_keeping_the_other_writer_half() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let a = sink(store.clone());
    let b = sink(store.clone());
    write(
        &a,
        StatusUpdate::Comparison(Box::new(comparison("Synced", "t1", &[]))),
    )
    .await
    .unwrap();
    // Another replica (the app moved) records an operation: a's memory is now stale.
    let op = operation("Succeeded", "t2", Some("t3"));
    write(&b, StatusUpdate::Operation(Box::new(op.clone())))
        .await
        .unwrap();
    let (_, vb) = stored(store.as_ref()).await;

    let out = comparison("OutOfSync", "t4", &[]);
    write(&a, StatusUpdate::Comparison(Box::new(out.clone())))
        .await
        .unwrap();
    let (s, va) = stored(store.as_ref()).await;
    assert!(va > vb);
    assert_eq!(s.comparison, Some(out));
    assert_eq!(
        s.operation,
        Some(op),
        "the other replica's operation was lost"
    );
}

#[tokio::test(start_paused = true)]
async fn an_app_first_seen_is_read_and_written_whatever_is_stored() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let op = operation("Failed", "t0", Some("t1"));
    write(
        &sink(store.clone()),
        StatusUpdate::Operation(Box::new(op.clone())),
    )
    .await
    .unwrap();
    let (_, v1) = stored(store.as_ref()).await;
    // A restarted replica: same content, but how old the stored reconciledAt is is unknown.
    let fresh = sink(store.clone());
    let c = comparison("Synced", "t2", &[]);
    write(&fresh, StatusUpdate::Comparison(Box::new(c.clone())))
        .await
        .unwrap();
    let (s, v2) = stored(store.as_ref()).await;
    assert!(v2 > v1);
    assert_eq!(s.comparison, Some(c));
    assert_eq!(s.operation, Some(op));
}

#[tokio::test(start_paused = true)]
async fn apps_not_written_for_two_heartbeats_are_forgotten() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let sink = sink(store.clone());
    let op = operation("Succeeded", "t0", Some("t1"));
    write(&sink, StatusUpdate::Operation(Box::new(op.clone())))
        .await
        .unwrap();
    let (_, v1) = stored(store.as_ref()).await;
    write(&sink, StatusUpdate::Operation(Box::new(op.clone())))
        .await
        .unwrap();
    assert_eq!(
        stored(store.as_ref()).await.1,
        v1,
        "remembered: not written"
    );

    // Two heartbeats without a write of the app; another app's write sweeps the memory.
    tokio::time::advance(DEFAULT_HEARTBEAT * 2).await;
    let other = AppKey::new("team-b", "other");
    sink.write(&other, &StatusUpdate::Operation(Box::new(op.clone())))
        .await
        .unwrap();
    // Forgotten: the same operation is read and written again, then remembered again.
    write(&sink, StatusUpdate::Operation(Box::new(op.clone())))
        .await
        .unwrap();
    let (s, v2) = stored(store.as_ref()).await;
    assert!(v2 > v1, "the app was not forgotten");
    assert_eq!(s.operation, Some(op.clone()));
    write(&sink, StatusUpdate::Operation(Box::new(op)))
        .await
        .unwrap();
    assert_eq!(stored(store.as_ref()).await.1, v2);
}

/// A memory store whose writes fail while `failing` is set, and before whose next
/// `interleaved` writes another writer gets there first (another record written at the key).
struct Flaky {
    inner: MemoryStore,
    failing: AtomicBool,
    interleaved: AtomicU32,
}

impl Store for Flaky {
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
        if self.failing.load(Ordering::SeqCst) {
            return Box::pin(async { Err(StoreError::Unavailable("no answer".into())) });
        }
        let interleave = self
            .interleaved
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        Box::pin(async move {
            if interleave {
                let theirs = StoredAppStatus {
                    comparison: Some(comparison("Synced", "theirs", &[])),
                    operation: None,
                    history: Vec::new(),
                };
                self.inner
                    .put(key, theirs.encode(), Precondition::Any)
                    .await?;
            }
            self.inner.put(key, value, pre).await
        })
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
        "flaky://".into()
    }
}

#[tokio::test(start_paused = true)]
async fn a_store_failure_is_unavailable_and_the_next_write_starts_over() {
    let flaky = Arc::new(Flaky {
        inner: MemoryStore::new(),
        failing: AtomicBool::new(false),
        interleaved: AtomicU32::new(0),
    });
    let sink = sink(flaky.clone());
    write(
        &sink,
        StatusUpdate::Comparison(Box::new(comparison("Synced", "t1", &[]))),
    )
    .await
    .unwrap();
    flaky.failing.store(true, Ordering::SeqCst);
    let out = comparison("OutOfSync", "t2", &[]);
    let err = write(&sink, StatusUpdate::Comparison(Box::new(out.clone())))
        .await
        .unwrap_err();
    match &err {
        SinkError::Unavailable { app, message } => {
            assert_eq!(app, "team-a/guestbook");
            assert!(
                message.contains("fleetshard-status/apps/team-a/guestbook"),
                "{message}"
            );
            assert!(message.contains("no answer"), "{message}");
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
    // The reconciler retries: once the store answers, the status is recorded.
    flaky.failing.store(false, Ordering::SeqCst);
    write(&sink, StatusUpdate::Comparison(Box::new(out.clone())))
        .await
        .unwrap();
    assert_eq!(stored(flaky.as_ref()).await.0.comparison, Some(out));
}

#[tokio::test(start_paused = true)]
async fn a_malformed_record_is_reported_by_readers_and_overwritten_by_the_owner() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let key = status_key(ROOT, &app());
    let bad = br#"{"comparison":{"sync":{"status":3}}}"#.to_vec();
    store.put(&key, bad, Precondition::Absent).await.unwrap();
    let other = status_key(ROOT, &AppKey::new("team-b", "x"));
    store
        .put(&other, b"not json".to_vec(), Precondition::Absent)
        .await
        .unwrap();

    let entries = read_statuses(store.as_ref(), ROOT).await.unwrap();
    let err = entries[0].status.clone().unwrap_err();
    assert_eq!(err.key, key);
    assert_eq!(err.field, "comparison.sync.status");
    assert!(err.to_string().contains(&key), "{err}");
    let err = entries[1].status.clone().unwrap_err();
    assert_eq!(err.key, other);
    assert!(err.message.contains("expected"), "{err}");

    let c = comparison("Synced", "t1", &[]);
    write(
        &sink(store.clone()),
        StatusUpdate::Comparison(Box::new(c.clone())),
    )
    .await
    .unwrap();
    assert_eq!(stored(store.as_ref()).await.0.comparison, Some(c));
}

/// Writes statuses for 50 apps, then checks that a waiter on the coordination root that
/// last saw revision `since` has nothing to wake for — and wakes for a root write.
async fn status_writes_do_not_wake_the_root(store: Arc<dyn Store>, patience: Duration) {
    let since = store.list(ROOT).await.unwrap().revision;
    let sink = sink(store.clone());
    for i in 0..50 {
        let app = AppKey::new("ns", &format!("app-{i}"));
        let c = comparison("Synced", "t", &[]);
        sink.write(&app, &StatusUpdate::Comparison(Box::new(c)))
            .await
            .unwrap();
    }
    assert_eq!(read_statuses(store.as_ref(), ROOT).await.unwrap().len(), 50);
    let waited = tokio::time::timeout(patience, store.wait_for_change(ROOT, since)).await;
    assert!(
        waited.is_err(),
        "status writes woke the root's waiter: {waited:?}"
    );

    let key = format!("{ROOT}distributor");
    let waiter = {
        let store = store.clone();
        tokio::spawn(async move { store.wait_for_change(ROOT, since).await })
    };
    store
        .put(&key, b"x".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    let woke = tokio::time::timeout(Duration::from_secs(30), waiter).await;
    assert!(
        matches!(woke, Ok(Ok(Ok(_)))),
        "a root write did not wake: {woke:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn memory_store_status_writes_do_not_wake_the_root() {
    status_writes_do_not_wake_the_root(Arc::new(MemoryStore::new()), Duration::from_secs(60)).await;
}

// Real time: SQLite runs on the blocking pool, which paused time does not wait for. The
// store polls every 10 ms here and looks at once, so a wrong layout would wake within
// milliseconds; 300 ms is 30 polls.
#[tokio::test]
async fn sqlite_store_status_writes_do_not_wake_the_root() {
    use fleetshard_store_sqlite::{SqliteOptions, SqliteStore};
    let dir = tempfile::tempdir().unwrap();
    let options = SqliteOptions {
        poll_interval: Duration::from_millis(10),
        ..SqliteOptions::default()
    };
    let store = SqliteStore::open_async(dir.path().join("s.db"), options)
        .await
        .unwrap();
    status_writes_do_not_wake_the_root(Arc::new(store), Duration::from_millis(300)).await;
}

/// A refresh and an operation of one app write at once, again and again (the demo's 7 of
/// 300 apps whose operation stayed Running: the write retried once, met the other pool's
/// write again, and was dropped). Every conflict is read again and merged, so the
/// operation's end is written.
#[tokio::test(start_paused = true)]
async fn an_operation_end_meeting_conflicts_again_and_again_is_written() {
    let flaky = Arc::new(Flaky {
        inner: MemoryStore::new(),
        failing: AtomicBool::new(false),
        interleaved: AtomicU32::new(0),
    });
    let sink = sink(flaky.clone());
    write(
        &sink,
        StatusUpdate::Operation(Box::new(operation("Running", "t0", None))),
    )
    .await
    .unwrap();
    flaky.interleaved.store(5, Ordering::SeqCst);
    let done = operation("Succeeded", "t0", Some("t1"));
    write(&sink, StatusUpdate::Operation(Box::new(done.clone())))
        .await
        .unwrap();
    let (s, _) = stored(&flaky.inner).await;
    assert_eq!(s.operation, Some(done));
    assert_eq!(
        s.comparison.map(|c| c.reconciled_at).as_deref(),
        Some("theirs"),
        "the other writer's half is kept"
    );
}
