//! The SQLite store against the conformance suite, across separate connections, and on
//! files that are not fleetshard stores.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use fleetshard_coord::store::{Precondition, Store, StoreError, conformance};
use fleetshard_store_sqlite::{SqliteOptions, SqliteStore};

fn fast_poll() -> SqliteOptions {
    SqliteOptions {
        poll_interval: Duration::from_millis(10),
        ..SqliteOptions::default()
    }
}

fn open(path: &Path) -> SqliteStore {
    SqliteStore::open_with(path, fast_poll()).unwrap()
}

#[tokio::test]
async fn conforms() {
    let dir = tempfile::tempdir().unwrap();
    conformance::run_all(&open(&dir.path().join("s.db"))).await;
}

/// Under the chunked store every replica wraps it with: values in parts, and one of 2 MiB.
#[tokio::test]
async fn conforms_under_the_chunked_store() {
    let dir = tempfile::tempdir().unwrap();
    conformance::run_chunked(std::sync::Arc::new(open(&dir.path().join("s.db")))).await;
}

#[tokio::test]
async fn conforms_again_after_reopening() {
    // The second pass starts from a non-empty file: revisions continue, nothing is reused.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let first = open(&path);
    conformance::run_all(&first).await;
    let before = first.revision().await.unwrap();
    drop(first);
    let second = open(&path);
    assert_eq!(second.revision().await.unwrap(), before);
    for k in [
        "conformance/cas",
        "conformance/delete",
        "conformance/list/a",
        "conformance/list/b",
        "conformance/list/c/d",
        "conformance/listx",
        "conformance/many/a",
        "conformance/many/b",
        "conformance/many/c",
    ] {
        second.delete(k, Precondition::Any).await.unwrap();
    }
    conformance::run_all(&second).await;
    assert!(second.revision().await.unwrap() > before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_lost_update_across_connections() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    // Six stores, six connections: contention goes through SQLite's file locks.
    let stores = (0..6).map(|_| Arc::new(open(&path))).collect();
    conformance::no_lost_update(stores, 50).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_lost_update_across_clones() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir.path().join("s.db"));
    let stores = (0..4).map(|_| Arc::new(store.clone())).collect();
    conformance::no_lost_update(stores, 50).await;
}

#[tokio::test]
async fn file_is_in_wal_mode_with_our_schema() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let store = open(&path);
    store
        .put("k", b"v".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    let raw = rusqlite::Connection::open(&path).unwrap();
    let mode: String = raw
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let app_id: i32 = raw
        .query_row("PRAGMA application_id", [], |r| r.get(0))
        .unwrap();
    assert_eq!(app_id, 0x464C_5348);
    let (value, version): (Vec<u8>, i64) = raw
        .query_row(
            "SELECT value, version FROM entries WHERE key = 'k'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let revision: i64 = raw
        .query_row("SELECT revision FROM meta", [], |r| r.get(0))
        .unwrap();
    assert_eq!((value.as_slice(), version, revision), (&b"v"[..], 1, 1));
}

#[tokio::test]
async fn writes_on_one_connection_are_seen_by_another() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let (a, b) = (open(&path), open(&path));
    let since = a.list("p/").await.unwrap().revision;
    let waiter = tokio::spawn({
        let a = a.clone();
        async move { a.wait_for_change("p/", since).await }
    });
    let v = b
        .put("p/x", b"1".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    let rev = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("woken by another connection's write")
        .unwrap()
        .unwrap();
    assert!(rev >= v);
    assert_eq!(a.get("p/x").await.unwrap().unwrap().version, v);
    // Versions are revisions: a listing after the write reflects it (ARCHITECTURE: a
    // listing at revision R holds every write whose version is ≤ R).
    assert!(a.list("p/").await.unwrap().revision >= v);
    b.delete("p/x", Precondition::Version(v)).await.unwrap();
    let rev2 = tokio::time::timeout(Duration::from_secs(10), a.wait_for_change("p/", rev))
        .await
        .expect("woken by another connection's delete")
        .unwrap();
    assert!(rev2 > rev);
    assert_eq!(a.get("p/x").await.unwrap(), None);
}

/// A listing keeps the large values it listed and copies an unchanged one from there:
/// whatever another connection does to them (rewrite with the same length, shrink, delete,
/// re-create), every listing still shows the file's bytes, as a `get` does.
#[tokio::test]
async fn large_values_listed_again_are_the_files_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let (reader, writer) = (open(&path), open(&path));
    let large = |fill: u8| vec![fill; 200 * 1024];
    let check = |what: &'static str| {
        let reader = reader.clone();
        async move {
            let listed = reader.list("p/").await.unwrap();
            for e in &listed.entries {
                let got = reader.get(&e.key).await.unwrap().unwrap();
                assert_eq!(
                    (e.version, &e.value),
                    (got.version, &got.value),
                    "{what}: {}",
                    e.key
                );
            }
            listed
                .entries
                .iter()
                .map(|e| (e.key.clone(), e.value.len(), e.value.first().copied()))
                .collect::<Vec<_>>()
        }
    };
    writer
        .put("p/a", large(1), Precondition::Any)
        .await
        .unwrap();
    writer
        .put("p/b", b"small".to_vec(), Precondition::Any)
        .await
        .unwrap();
    writer
        .put("q/c", large(9), Precondition::Any)
        .await
        .unwrap();
    let first = check("first").await;
    assert_eq!(
        first,
        [
            ("p/a".into(), 200 * 1024, Some(1)),
            ("p/b".into(), 5, Some(b's'))
        ]
    );
    assert_eq!(check("unchanged").await, first);
    // Rewritten with the same length by another connection: its new bytes.
    writer
        .put("p/a", large(2), Precondition::Any)
        .await
        .unwrap();
    assert_eq!(
        check("rewritten").await[0],
        ("p/a".into(), 200 * 1024, Some(2))
    );
    // Another prefix listed in between keeps this prefix's values right.
    assert_eq!(reader.list("q/").await.unwrap().entries[0].value, large(9));
    assert_eq!(check("after another prefix").await[0].2, Some(2));
    // Shrunk, grown again, deleted and re-created.
    writer
        .put("p/a", b"tiny".to_vec(), Precondition::Any)
        .await
        .unwrap();
    assert_eq!(check("shrunk").await[0], ("p/a".into(), 4, Some(b't')));
    writer
        .put("p/a", large(3), Precondition::Any)
        .await
        .unwrap();
    assert_eq!(check("grown").await[0].2, Some(3));
    writer.delete("p/a", Precondition::Any).await.unwrap();
    assert_eq!(check("deleted").await, [("p/b".into(), 5, Some(b's'))]);
    writer
        .put("p/a", large(4), Precondition::Any)
        .await
        .unwrap();
    assert_eq!(
        check("re-created").await[0],
        ("p/a".into(), 200 * 1024, Some(4))
    );
}
#[tokio::test(start_paused = true)]
async fn wait_ignores_writes_outside_the_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir.path().join("s.db"));
    let since = store.list("p/").await.unwrap().revision;
    store
        .put("q/x", b"1".to_vec(), Precondition::Any)
        .await
        .unwrap();
    store
        .put("p", b"1".to_vec(), Precondition::Any)
        .await
        .unwrap();
    let waited = tokio::time::timeout(Duration::from_secs(60), store.wait_for_change("p/", since));
    assert!(waited.await.is_err(), "no change under p/");
    // A write under the prefix after that wakes it.
    let waiter = tokio::spawn({
        let store = store.clone();
        async move { store.wait_for_change("p/", since).await }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    let v = store
        .put("p/y", b"1".to_vec(), Precondition::Any)
        .await
        .unwrap();
    assert!(waiter.await.unwrap().unwrap() >= v);
}

#[tokio::test]
async fn prefixes_are_exact_with_awkward_keys() {
    // `%` and `_` would be wildcards to LIKE; U+10FFFF is the largest char, so a prefix
    // ending in it has no simple upper bound.
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir.path().join("s.db"));
    let keys = [
        "a%",
        "a%b",
        "a_",
        "aXb",
        "a\u{10FFFF}",
        "a\u{10FFFF}x",
        "\u{10FFFF}z",
        "b",
        "é",
        "a\0z",
        "",
    ];
    for k in keys {
        store
            .put(k, k.as_bytes().to_vec(), Precondition::Absent)
            .await
            .unwrap();
    }
    for prefix in ["", "a", "a%", "a_", "a\u{10FFFF}", "é", "a\0", "\u{10FFFF}"] {
        let listing = store.list(prefix).await.unwrap();
        let got: Vec<&str> = listing.entries.iter().map(|e| e.key.as_str()).collect();
        let mut want: Vec<&str> = keys
            .iter()
            .copied()
            .filter(|k| k.starts_with(prefix))
            .collect();
        want.sort_unstable();
        assert_eq!(got, want, "prefix {prefix:?}");
        assert!(listing.entries.iter().all(|e| e.value == e.key.as_bytes()));
        if !want.is_empty() {
            // The watch query uses the same bounds (unbounded above for "" and U+10FFFF).
            let woken =
                tokio::time::timeout(Duration::from_secs(10), store.wait_for_change(prefix, 0));
            assert_eq!(
                woken.await.unwrap().unwrap(),
                listing.revision,
                "{prefix:?}"
            );
        }
    }
}

#[tokio::test]
async fn old_deletions_are_pruned_and_old_watchers_woken() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let options = SqliteOptions {
        deletion_retention: 10,
        ..fast_poll()
    };
    let store = SqliteStore::open_with(&path, options).unwrap();
    let start = store.revision().await.unwrap();
    for i in 0..100 {
        let k = format!("gone/{i}");
        store
            .put(&k, b"x".to_vec(), Precondition::Absent)
            .await
            .unwrap();
        store.delete(&k, Precondition::Any).await.unwrap();
    }
    let raw = rusqlite::Connection::open(&path).unwrap();
    let (kept, compacted): (i64, i64) = raw
        .query_row(
            "SELECT (SELECT count(*) FROM deletions), compacted FROM meta",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert!(kept <= 6, "{kept} deletion records kept");
    assert!(compacted > 150, "compacted through {compacted}");
    // Nothing is left under `gone/`, but a watcher that far behind cannot know what it
    // missed: it is woken at once.
    let rev = tokio::time::timeout(
        Duration::from_secs(10),
        store.wait_for_change("gone/", start),
    )
    .await
    .expect("an old watcher is woken")
    .unwrap();
    assert_eq!(rev, store.revision().await.unwrap());
}

#[test]
fn urls() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("u.db");
    let url = format!("sqlite://{}", path.display());
    let store = SqliteStore::from_url(&url).unwrap();
    assert_eq!(store.path(), path);
    assert_eq!(store.describe(), url);
    assert!(path.exists());

    for (url, reason) in [
        ("sqlite://", "no path"),
        ("sqlite:/x.db", "two slashes"),
        ("etcd://127.0.0.1:2379", "not a sqlite"),
        ("sqlite://x.db?cache=shared", "query"),
        ("sqlite://:memory:", "in-memory"),
    ] {
        match SqliteStore::from_url(url) {
            Err(StoreError::InvalidUrl { url: u, reason: r }) => {
                assert_eq!(u, url);
                assert!(r.contains(reason), "{url}: {r}");
            }
            other => panic!("{url}: {other:?}"),
        }
    }
    assert_eq!(
        SqliteStore::path_from_url("sqlite://./x.db").unwrap(),
        Path::new("./x.db")
    );
    assert_eq!(
        SqliteStore::path_from_url(fleetshard_store_sqlite::DEFAULT_URL).unwrap(),
        Path::new(fleetshard_store_sqlite::DEFAULT_PATH)
    );
}

#[test]
fn missing_directory_is_a_backend_error_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("no/such/dir/s.db");
    let err = SqliteStore::open(&path).unwrap_err();
    assert!(
        matches!(&err, StoreError::Backend(m) if m.contains(&path.display().to_string())),
        "{err}"
    );
}

fn backend_error_naming(path: &Path, what: &str) {
    let err = SqliteStore::open(path).unwrap_err();
    eprintln!("{err}");
    match &err {
        StoreError::Backend(m) => {
            assert!(m.contains(&path.display().to_string()), "{m}");
            assert!(m.contains(what), "{m}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_file_that_is_not_sqlite_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.txt");
    let text = "these are my notes, not a database\n".repeat(200);
    std::fs::write(&path, &text).unwrap();
    backend_error_naming(&path, "not a SQLite database");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
}

#[test]
fn another_applications_database_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.db");
    let raw = rusqlite::Connection::open(&path).unwrap();
    raw.execute_batch("CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT);")
        .unwrap();
    drop(raw);
    backend_error_naming(&path, "tables: photos");

    let path = dir.path().join("tagged.db");
    let raw = rusqlite::Connection::open(&path).unwrap();
    raw.execute_batch("PRAGMA application_id = 42; CREATE TABLE t (x);")
        .unwrap();
    drop(raw);
    backend_error_naming(&path, "application_id 0x2a");
}

#[test]
fn a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    drop(SqliteStore::open(&path).unwrap());
    let raw = rusqlite::Connection::open(&path).unwrap();
    raw.execute_batch("PRAGMA user_version = 99;").unwrap();
    drop(raw);
    backend_error_naming(&path, "schema version 99");
}

#[tokio::test]
async fn a_corrupted_store_gives_errors_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let store = open(&path);
    for i in 0..200 {
        store
            .put(&format!("k/{i:04}"), vec![7; 500], Precondition::Any)
            .await
            .unwrap();
    }
    // Closing the last connection checkpoints the WAL into the main file.
    drop(store);
    let mut bytes = std::fs::read(&path).unwrap();
    assert!(bytes.len() > 8192);
    // Keep the header page, scribble over every page after it.
    for (i, b) in bytes.iter_mut().enumerate().skip(4096) {
        *b = (i * 31 % 251) as u8;
    }
    std::fs::write(&path, &bytes).unwrap();
    let outcome = match SqliteStore::open_with(&path, fast_poll()) {
        Err(e) => e,
        Ok(store) => match store.list("k/").await {
            Err(e) => e,
            Ok(l) => panic!("read a corrupted store: {} entries", l.entries.len()),
        },
    };
    eprintln!("{outcome}");
    match &outcome {
        StoreError::Backend(m) => assert!(m.contains(&path.display().to_string()), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_empty_file_becomes_a_store() {
    // `touch fleetshard.db` before the first start is harmless.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    std::fs::write(&path, b"").unwrap();
    SqliteStore::open(&path).unwrap();
}

/// Holds the database's write lock from a raw connection, with an uncommitted write.
fn hold_write_lock(path: &Path) -> rusqlite::Connection {
    let raw = rusqlite::Connection::open(path).unwrap();
    raw.execute_batch("BEGIN IMMEDIATE; UPDATE entries SET value = x'00' WHERE key = 'k';")
        .unwrap();
    raw
}

#[tokio::test]
async fn a_lock_held_too_long_is_unavailable_and_readers_are_not_blocked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let options = SqliteOptions {
        busy_timeout: Duration::from_millis(30),
        attempts: 2,
        retry_backoff: Duration::from_millis(5),
        ..fast_poll()
    };
    let store = SqliteStore::open_with(&path, options).unwrap();
    let v = store
        .put("k", b"v".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    let raw = hold_write_lock(&path);
    match store
        .put("k", b"w".to_vec(), Precondition::Version(v))
        .await
    {
        Err(StoreError::Unavailable(m)) => {
            assert!(m.contains(&path.display().to_string()), "{m}");
            assert!(m.contains("2 attempts"), "{m}");
        }
        other => panic!("{other:?}"),
    }
    // WAL: reads go on, and see the last committed state, not the open transaction's.
    assert_eq!(store.get("k").await.unwrap().unwrap().value, b"v");
    assert_eq!(store.list("").await.unwrap().entries.len(), 1);
    drop(raw); // rolls back
    store
        .put("k", b"w".to_vec(), Precondition::Version(v))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_write_waits_for_a_lock_that_is_released() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let options = SqliteOptions {
        busy_timeout: Duration::from_millis(20),
        attempts: 50,
        retry_backoff: Duration::from_millis(5),
        ..fast_poll()
    };
    let store = SqliteStore::open_with(&path, options).unwrap();
    let v = store
        .put("k", b"v".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    let raw = hold_write_lock(&path);
    // Released by another thread while the write is waiting or backing off.
    let releaser = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        raw.execute_batch("COMMIT").unwrap();
    });
    let v2 = store
        .put("k", b"w".to_vec(), Precondition::Any)
        .await
        .unwrap();
    releaser.join().unwrap();
    assert!(v2 > v);
    assert_eq!(store.get("k").await.unwrap().unwrap().value, b"w");
}

#[test]
fn processes_creating_the_same_file_at_once_agree() {
    let dir = tempfile::tempdir().unwrap();
    let path = Arc::new(dir.path().join("s.db"));
    let barrier = Arc::new(std::sync::Barrier::new(4));
    let openers: Vec<_> = (0..4)
        .map(|_| {
            let (path, barrier) = (Arc::clone(&path), Arc::clone(&barrier));
            std::thread::spawn(move || {
                barrier.wait();
                SqliteStore::open(&*path).unwrap()
            })
        })
        .collect();
    let stores: Vec<SqliteStore> = openers.into_iter().map(|t| t.join().unwrap()).collect();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let v = stores[0]
            .put("k", b"v".to_vec(), Precondition::Absent)
            .await
            .unwrap();
        for s in &stores {
            assert_eq!(s.get("k").await.unwrap().unwrap().version, v);
        }
    });
}
