//! The store a scenario runs over: a SQLite file, or (with the `etcd` feature) a real etcd
//! server. Scenarios take a [`StoreUnderTest`] so that each runs over every backend.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use fleetshard_coord::fenced::AssignmentDoc;
use fleetshard_coord::store::{Precondition, Store, StoreError};
use fleetshard_store_sqlite::SqliteStore;

/// The key prefix `fleetshard run` uses by default; a shared store adds its own prefix.
pub const ROOT: &str = "fleetshard/";

/// A store for one scenario.
pub enum StoreUnderTest {
    /// One SQLite file shared by every process.
    Sqlite {
        /// The database file.
        path: PathBuf,
    },
}

impl StoreUnderTest {
    /// A fresh SQLite file in `dir`.
    pub fn sqlite(dir: &Path) -> Self {
        StoreUnderTest::Sqlite {
            path: dir.join("fleetshard.db"),
        }
    }

    /// The backend's name, for messages and figures.
    pub fn name(&self) -> &'static str {
        match self {
            StoreUnderTest::Sqlite { .. } => "sqlite",
        }
    }

    /// The `--store` URL.
    pub fn url(&self) -> String {
        match self {
            StoreUnderTest::Sqlite { path } => format!("sqlite://{}", path.display()),
        }
    }

    /// The `--root` key prefix of the fleet's records.
    pub fn root(&self) -> String {
        match self {
            StoreUnderTest::Sqlite { .. } => ROOT.to_owned(),
        }
    }

    /// Opens the store in this process (for revisions, the assignment, probes).
    pub fn open(&self) -> Arc<dyn Store> {
        match self {
            StoreUnderTest::Sqlite { path } => {
                Arc::new(SqliteStore::open(path).expect("opening the SQLite store"))
            }
        }
    }

    /// Whether a process paused inside a write transaction can block every other writer
    /// (SQLite's file lock; see docs/reliability.md).
    pub fn pause_can_hold_write_lock(&self) -> bool {
        matches!(self, StoreUnderTest::Sqlite { .. })
    }
}

/// A small runtime for the harness's own store calls.
fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime")
        .block_on(f)
}

/// The store-wide revision (every write bumps it) and the committed assignment under `root`.
pub fn read_root(
    store: &dyn Store,
    root: &str,
) -> Result<(u64, Option<AssignmentDoc>), StoreError> {
    block_on(async {
        let listing = store.list(root).await?;
        let key = fleetshard_coord::fenced::assignment_key(root);
        let doc = listing
            .entries
            .iter()
            .find(|e| e.key == key)
            .and_then(|e| serde_json::from_slice(&e.value).ok());
        Ok((listing.revision, doc))
    })
}

/// Whether a write outside the fleet's prefix gets through within `patience`: false means
/// somebody holds the store's write lock (a process paused inside a transaction).
pub fn write_probe(store: Arc<dyn Store>, patience: Duration) -> bool {
    block_on(async move {
        let put = store.put(
            "fleetshard-harness/probe",
            b"probe".to_vec(),
            Precondition::Any,
        );
        matches!(tokio::time::timeout(patience, put).await, Ok(Ok(_)))
    })
}
