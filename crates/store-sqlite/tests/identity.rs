//! The store is the store: a handle notices when its path no longer names the file it
//! has open (deleted, re-created, renamed over, its `-wal`/`-shm` deleted), and the open
//! modes for one-shot commands never create a store nor write to one they only read.

use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use fleetshard_coord::store::{Precondition, Store, StoreError, StoreIdentity};
use fleetshard_store_sqlite::{OpenMode, SqliteOptions, SqliteStore};

fn options() -> SqliteOptions {
    SqliteOptions {
        poll_interval: Duration::from_millis(10),
        ..SqliteOptions::default()
    }
}

fn open(path: &Path, mode: OpenMode) -> Result<SqliteStore, StoreError> {
    SqliteStore::open_in(path, options(), mode)
}

fn side(path: &Path, suffix: &str) -> PathBuf {
    PathBuf::from(format!("{}{suffix}", path.display()))
}

fn remove_store_files(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let p = side(path, suffix);
        if p.exists() {
            std::fs::remove_file(p).unwrap();
        }
    }
}

fn replaced<T: std::fmt::Debug>(r: Result<T, StoreError>, says: &str) -> String {
    match r {
        Err(StoreError::Replaced { what }) => {
            assert!(what.contains(says), "{what}");
            what
        }
        other => panic!("expected Replaced ({says}), got {other:?}"),
    }
}

#[tokio::test]
async fn a_deleted_and_re_created_file_is_another_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let first = open(&path, OpenMode::Create).unwrap();
    let before = first.check_identity().await.unwrap();
    let StoreIdentity::Recorded(shown) = &before else {
        panic!("{before:?}")
    };
    assert!(shown.contains(&path.display().to_string()) && shown.contains("inode"));
    first
        .put("fs/k", b"v".to_vec(), Precondition::Absent)
        .await
        .unwrap();

    // `rm s.db s.db-wal s.db-shm`: the handle's descriptor still reaches the old file, but
    // nobody else can; every operation says so instead of going on.
    remove_store_files(&path);
    let what = replaced(first.get("fs/k").await, "no longer exists");
    assert!(what.contains(&path.display().to_string()), "{what}");
    replaced(first.check_identity().await, "no longer exists");

    // What `fleetshard status` used to do: a new, empty store at the same path.
    let second = open(&path, OpenMode::Create).unwrap();
    replaced(
        first.put("fs/k", b"w".to_vec(), Precondition::Any).await,
        "is now another file",
    );
    replaced(first.list("fs/").await, "is now another file");
    assert!(second.list("fs/").await.unwrap().entries.is_empty());
    let after = second.check_identity().await.unwrap();
    assert_ne!(after, before);
}

#[tokio::test]
async fn a_file_renamed_over_the_path_is_another_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let other = dir.path().join("other.db");
    let first = open(&path, OpenMode::Create).unwrap();
    first
        .put("fs/k", b"v".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    drop(open(&other, OpenMode::Create).unwrap());
    std::fs::rename(&other, &path).unwrap();
    replaced(first.get("fs/k").await, "is now another file");
}

#[tokio::test]
async fn a_deleted_wal_is_noticed() {
    // Another process opening the file now would not see what is in the deleted WAL.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let store = open(&path, OpenMode::Create).unwrap();
    store
        .put("fs/k", b"v".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    std::fs::remove_file(side(&path, "-wal")).unwrap();
    std::fs::remove_file(side(&path, "-shm")).unwrap();
    replaced(store.get("fs/k").await, "-wal was deleted or replaced");
}

#[tokio::test]
async fn a_waiting_watcher_learns_within_a_poll() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let store = open(&path, OpenMode::Create).unwrap();
    let since = store.list("fs/").await.unwrap().revision;
    let waiting = tokio::spawn({
        let store = store.clone();
        async move { store.wait_for_change("fs/", since).await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    remove_store_files(&path);
    let r = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("woken")
        .unwrap();
    replaced(r, "no longer exists");
}

#[tokio::test]
async fn stores_nobody_replaced_keep_their_identity() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let a = open(&path, OpenMode::Create).unwrap();
    let b = open(&path, OpenMode::Create).unwrap();
    let id = a.check_identity().await.unwrap();
    for i in 0..20 {
        b.put("fs/k", vec![i], Precondition::Any).await.unwrap();
    }
    assert_eq!(a.check_identity().await.unwrap(), id);
    assert_eq!(b.check_identity().await.unwrap(), id);
    drop(b);
    assert_eq!(a.check_identity().await.unwrap(), id);
    assert_eq!(a.get("fs/k").await.unwrap().unwrap().value, [19]);
}

#[test]
fn existing_and_read_only_modes_never_create_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("typo.db");
    for mode in [OpenMode::Existing, OpenMode::ReadOnly] {
        let err = open(&path, mode).unwrap_err();
        let shown = err.to_string();
        assert!(
            shown.contains(&path.display().to_string()) && shown.contains("no store at"),
            "{mode:?}: {shown}"
        );
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "{mode:?}"
        );
    }
    // An empty file (`touch`) is not a store either, and stays as it was.
    std::fs::write(&path, b"").unwrap();
    for mode in [OpenMode::Existing, OpenMode::ReadOnly] {
        let err = open(&path, mode).unwrap_err().to_string();
        assert!(
            err.contains("not a fleetshard store") && err.contains(&path.display().to_string()),
            "{mode:?}: {err}"
        );
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
    }
    // Existing: an existing store is read and written.
    drop(open(&path, OpenMode::Create).unwrap());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let store = open(&path, OpenMode::Existing).unwrap();
    rt.block_on(store.put("fs/k", b"v".to_vec(), Precondition::Absent))
        .unwrap();
}

/// A file's size and modification time, and whether `-wal`/`-shm` files are next to it.
fn footprint(path: &Path) -> (u64, i64, i64, bool, bool) {
    let m = std::fs::metadata(path).unwrap();
    (
        m.len(),
        m.mtime(),
        m.mtime_nsec(),
        side(path, "-wal").exists(),
        side(path, "-shm").exists(),
    )
}

#[tokio::test]
async fn read_only_reads_a_read_only_store_and_leaves_no_trace() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let writer = open(&path, OpenMode::Create).unwrap();
    writer
        .put("fs/k", b"v".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    let revision = writer.revision().await.unwrap();
    // The last connection to close folds the WAL into the file and removes it.
    drop(writer);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o555)).unwrap();
    let before = footprint(&path);
    assert!(!before.3 && !before.4, "{before:?}");

    let reader = open(&path, OpenMode::ReadOnly).unwrap();
    assert_eq!(reader.mode(), OpenMode::ReadOnly);
    let listing = reader.list("fs/").await.unwrap();
    assert_eq!(listing.entries.len(), 1);
    assert_eq!(listing.revision, revision);
    assert_eq!(reader.revision().await.unwrap(), revision);
    reader.check_identity().await.unwrap();
    // Permissions do not stop root, so SQLite's read-only open is what is tested here.
    let err = reader
        .put("fs/x", b"w".to_vec(), Precondition::Any)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("readonly"), "{err}");
    drop(reader);
    assert_eq!(footprint(&path), before);
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[tokio::test]
async fn read_only_follows_a_store_in_use_and_one_opened_meanwhile() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    drop(open(&path, OpenMode::Create).unwrap());
    // No process has it open: the reader reads the file alone, creating nothing...
    let reader = open(&path, OpenMode::ReadOnly).unwrap();
    assert!(reader.list("fs/").await.unwrap().entries.is_empty());
    assert!(!side(&path, "-wal").exists());
    // ...until a replica opens it and writes (into its WAL): the reader sees that.
    let writer = open(&path, OpenMode::Create).unwrap();
    let v = writer
        .put("fs/k", b"v".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    let listing = reader.list("fs/").await.unwrap();
    assert_eq!(listing.entries.len(), 1);
    assert_eq!(listing.entries[0].version, v);
    // And while it is in use, every new write.
    let v2 = writer
        .put("fs/k", b"w".to_vec(), Precondition::Version(v))
        .await
        .unwrap();
    assert_eq!(reader.get("fs/k").await.unwrap().unwrap().version, v2);
    // A reader opened while the store is in use reads it the usual way.
    let second = open(&path, OpenMode::ReadOnly).unwrap();
    assert_eq!(second.get("fs/k").await.unwrap().unwrap().value, b"w");
}

#[tokio::test]
async fn read_only_opens_any_file_name() {
    // The read-only open goes through a `file:` URI: `?`, `#`, `%` and spaces are escaped.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a b?c#d%20e&mode=rw.db");
    let writer = open(&path, OpenMode::Create).unwrap();
    writer
        .put("fs/k", b"v".to_vec(), Precondition::Absent)
        .await
        .unwrap();
    let reader = open(&path, OpenMode::ReadOnly).unwrap();
    assert_eq!(reader.get("fs/k").await.unwrap().unwrap().value, b"v");
    drop(reader);
    drop(writer);
    let reader = open(&path, OpenMode::ReadOnly).unwrap();
    assert_eq!(reader.get("fs/k").await.unwrap().unwrap().value, b"v");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}
