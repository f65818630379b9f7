//! Several processes on one file: the claim `sqlite://` makes. The test binary re-runs
//! itself as the child processes: with `CHILD_DB` set, the `child` test increments the
//! shared counter (and without it does nothing, so it passes in a normal run).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fleetshard_coord::store::{Precondition, Store, StoreError};
use fleetshard_store_sqlite::SqliteStore;

const CHILD_DB: &str = "FLEETSHARD_SQLITE_TEST_CHILD_DB";
/// How many increments the child makes; `forever` for the crash test.
const CHILD_INCREMENTS: &str = "FLEETSHARD_SQLITE_TEST_CHILD_INCREMENTS";
const COUNTER: &str = "test/counter";

fn block_on<F: Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
        .block_on(f)
}

/// One compare-and-swap increment, retried on conflict; returns the conflicts met.
async fn increment(store: &SqliteStore) -> u32 {
    let mut conflicts = 0;
    loop {
        let e = store.get(COUNTER).await.unwrap().expect("counter exists");
        let n: u64 = std::str::from_utf8(&e.value).unwrap().parse().unwrap();
        let next = (n + 1).to_string().into_bytes();
        match store
            .put(COUNTER, next, Precondition::Version(e.version))
            .await
        {
            Ok(_) => return conflicts,
            Err(StoreError::Conflict { .. }) => conflicts += 1,
            Err(other) => panic!("{other}"),
        }
    }
}

/// The child process's work. Not a test of its own: does nothing unless `CHILD_DB` is set.
#[test]
fn child() {
    let Ok(path) = std::env::var(CHILD_DB) else {
        return;
    };
    let increments = std::env::var(CHILD_INCREMENTS).unwrap();
    block_on(async {
        let store = SqliteStore::open(&path).unwrap();
        // The parent creates the counter once every child is started, so they all begin
        // together and actually contend.
        while store.get(COUNTER).await.unwrap().is_none() {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let mut conflicts = 0;
        if increments == "forever" {
            loop {
                increment(&store).await;
            }
        }
        for _ in 0..increments.parse::<u32>().unwrap() {
            conflicts += increment(&store).await;
        }
        eprintln!("child {}: {conflicts} conflicts", std::process::id());
    });
}

fn spawn_child(path: &Path, increments: &str) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["child", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_DB, path)
        .env(CHILD_INCREMENTS, increments)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn counter(store: &SqliteStore) -> (u64, u64) {
    block_on(async {
        let e = store.get(COUNTER).await.unwrap().unwrap();
        let n = std::str::from_utf8(&e.value).unwrap().parse().unwrap();
        (n, store.revision().await.unwrap())
    })
}

#[test]
fn no_lost_update_across_processes() {
    if std::env::var_os(CHILD_DB).is_some() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    let store = SqliteStore::open(&path).unwrap();
    let (processes, each) = (4, 100);
    let children: Vec<Child> = (0..processes)
        .map(|_| spawn_child(&path, &each.to_string()))
        .collect();
    block_on(store.put(COUNTER, b"0".to_vec(), Precondition::Absent)).unwrap();
    for child in children {
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "child failed: {}\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        eprint!("{}", String::from_utf8_lossy(&out.stderr));
    }
    // Every committed write is one increment, and nothing else wrote.
    let (n, revision) = counter(&store);
    assert_eq!(n, processes * each);
    assert_eq!(revision, n + 1);
}

/// A process killed with SIGKILL in the middle of writing leaves a consistent file whose
/// lock the others get back at once.
#[test]
fn a_killed_writer_leaves_a_consistent_store() {
    if std::env::var_os(CHILD_DB).is_some() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    let store = SqliteStore::open(&path).unwrap();
    let mut children: Vec<Child> = (0..2).map(|_| spawn_child(&path, "forever")).collect();
    block_on(store.put(COUNTER, b"0".to_vec(), Precondition::Absent)).unwrap();
    block_on(async {
        loop {
            let revision = store.revision().await.unwrap();
            if revision > 200 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    for child in &mut children {
        child.kill().unwrap(); // SIGKILL: no destructor, no rollback, maybe mid-commit
        child.wait().unwrap();
    }
    let (n, revision) = counter(&store);
    assert_eq!(
        revision,
        n + 1,
        "every committed write is a whole increment"
    );
    // The dead processes' locks are gone (a lock still held would end in `Unavailable`,
    // which `increment` turns into a panic).
    block_on(async {
        for _ in 0..10 {
            increment(&store).await;
        }
    });
    assert_eq!(counter(&store).0, n + 10);
    let raw = rusqlite::Connection::open(&path).unwrap();
    let check: String = raw
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
}
