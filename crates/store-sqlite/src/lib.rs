//! `sqlite://PATH`: fleetshard's embedded default coordination store. One SQLite file,
//! shared safely by several `fleetshard` processes on one machine.
//!
//! # How it is safe
//! - The file is in WAL mode, so readers (listing, polling) never block the writer.
//! - Every write is one `BEGIN IMMEDIATE` transaction: it takes the database's write lock
//!   *before* reading the precondition, so check-and-write is atomic across connections and
//!   processes, and no update is lost. [`Store::put_each`] checks and writes each of its
//!   keys inside one such transaction (one lock and one commit for a batch of app statuses;
//!   a failed precondition fails that key alone).
//! - Every write bumps the store-wide revision and stamps the key with it, so versions are
//!   never reused (etcd's mod_revision), also across delete and re-create.
//! - A locked database is waited for (SQLite's busy timeout), then retried with a bounded
//!   backoff; if it stays locked the operation fails with [`StoreError::Unavailable`].
//! - A file that is not a fleetshard store (not SQLite, corrupt, another application's
//!   database, a newer schema) is refused with [`StoreError::Backend`] naming the path.
//!
//! # Paths
//! `sqlite:///var/lib/fleetshard.db` is absolute; `sqlite://fleetshard.db` and
//! `sqlite://./data/x.db` are relative to the working directory when the store is opened
//! (the store remembers the absolute path, which [`Store::describe`] shows). The default
//! store is [`DEFAULT_URL`]. `%XX` escapes are decoded; `?`, `#`, `~` and `:memory:` are
//! refused. The file is created if missing ([`OpenMode::Create`], for replicas); its
//! directory must exist. [`OpenMode::Existing`] and [`OpenMode::ReadOnly`] (for one-shot
//! commands) never create a store: a missing file is an error naming the path.
//!
//! # The store is the store
//! The device and inode of the file (and of its `-wal` and `-shm`) are recorded when it is
//! opened and checked before every operation: once the path names another file (deleted
//! and re-created, renamed over) or none, every operation fails with
//! [`StoreError::Replaced`] instead of going on with a file nobody else can reach
//! ([`Store::check_identity`] checks the same; details in `conn.rs`).
//!
//! # Watching
//! SQLite cannot notify other processes, so [`Store::wait_for_change`] polls every
//! [`SqliteOptions::poll_interval`]: one read of the revision row while nothing changed,
//! an indexed look-up under the prefix when something did.
//!
//! # Listing
//! A listing reads each value of 16 KiB or more only when its version
//! changed since this handle last listed it, and copies it from the handle's own copy
//! otherwise: the coordination listing runs several times a second on every replica, and
//! its one large value (the assignment, hundreds of KB at 10,000 clusters) is rewritten
//! only when the assignment changes.
//!
//! # Threads
//! rusqlite is blocking, so every call runs on tokio's blocking pool. Each handle owns one
//! connection behind a mutex; clones share it. Open one store per process (or per handle
//! that should have its own connection). Opening is synchronous (it may wait up to the
//! busy timeout for a lock): call it before starting work, or from a blocking task.
//!
//! A dropped future does not cancel its SQLite call: a write already handed to the
//! blocking pool still commits or fails, as a request already sent to a server would.

mod conn;
mod db;
mod listing;
mod url;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use fleetshard_coord::store::StoreIdentity;
use fleetshard_coord::store::{Entry, Listing, Precondition, Put, Store, StoreError};
use futures::FutureExt;
use futures::future::BoxFuture;
use rusqlite::{Connection, ErrorCode};

pub use conn::OpenMode;
use conn::Slot;
pub use db::Durability;
use db::{DbError, Poll};

/// The store file used when none is configured, relative to the working directory.
pub const DEFAULT_PATH: &str = "fleetshard.db";

/// The store URL used when none is configured: [`DEFAULT_PATH`] as a URL.
pub const DEFAULT_URL: &str = "sqlite://fleetshard.db";

/// The longest pause between two attempts, however many attempts are configured.
const MAX_BACKOFF: Duration = Duration::from_millis(500);

/// Tuning for a [`SqliteStore`]. The defaults suit a handful of replicas on one machine.
///
/// A write transaction lasts well under a millisecond, so a lock held for long means a
/// stuck or paused process; the defaults give up after about 1.1 s in all (4 × 250 ms of
/// waiting plus the backoffs), so that a lease holder learns of the failure while it can
/// still retry before its renew deadline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqliteOptions {
    /// How often [`Store::wait_for_change`] looks for changes (default 100 ms). Other
    /// processes' writes are seen within this interval.
    pub poll_interval: Duration,
    /// How long SQLite itself waits for another connection's lock before reporting the
    /// database busy (default 250 ms).
    pub busy_timeout: Duration,
    /// How many times an operation is tried in all when the database stays busy (default 4).
    /// SQLite skips its busy handler in some cases (a read transaction that meets a WAL
    /// being recovered or restarted), so waiting alone is not enough.
    pub attempts: u32,
    /// The pause before the first retry, doubled for each next one up to 500 ms
    /// (default 20 ms).
    pub retry_backoff: Duration,
    /// How hard commits are pushed to disk (default [`Durability::Full`]).
    pub durability: Durability,
    /// How many revisions a deletion is remembered for `wait_for_change` (default 10 000).
    /// A watcher further behind than this is woken at once and re-lists.
    pub deletion_retention: u64,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            poll_interval: Duration::from_millis(100),
            busy_timeout: Duration::from_millis(250),
            attempts: 4,
            retry_backoff: Duration::from_millis(20),
            durability: Durability::Full,
            deletion_retention: 10_000,
        }
    }
}

/// A [`Store`] in one SQLite file. Clones share one connection; separately opened stores
/// (in this process or others) on the same file share the data through SQLite's locking.
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

struct Inner {
    slot: Mutex<Slot>,
    /// Absolute, for messages and `describe`.
    path: PathBuf,
    options: SqliteOptions,
    mode: OpenMode,
    /// The file opened, for `check_identity`.
    identity: String,
    /// The large values listed last (`listing::ListedValues`): shared by clones, as the
    /// connection is.
    listed: Arc<Mutex<listing::ListedValues>>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.inner.path)
            .field("options", &self.inner.options)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Opens the store at `path` with the default options, creating the file and schema if
    /// needed. Blocks the calling thread (up to the busy timeout per attempt).
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_with(path, SqliteOptions::default())
    }

    /// Opens the store at `path` with `options`, creating it if needed.
    pub fn open_with(path: impl AsRef<Path>, options: SqliteOptions) -> Result<Self, StoreError> {
        Self::open_in(path, options, OpenMode::Create)
    }

    /// Opens the store at `path` with `options` in `mode`: [`OpenMode::Existing`] and
    /// [`OpenMode::ReadOnly`] fail naming the path when there is no store there.
    pub fn open_in(
        path: impl AsRef<Path>,
        options: SqliteOptions,
        mode: OpenMode,
    ) -> Result<Self, StoreError> {
        let path = path.as_ref();
        // Resolved once, so that messages name the file even if the working directory
        // changes, and every later open of the same URL from here means the same file.
        let path = std::path::absolute(path)
            .map_err(|e| StoreError::Backend(format!("cannot resolve {}: {e}", path.display())))?;
        if mode != OpenMode::Create {
            match conn::file_id(&path) {
                Ok(Some(_)) => {}
                Ok(None) => {
                    return Err(StoreError::Backend(format!(
                        "no store at {}: the file does not exist (a replica creates it: is \
                         the path right?)",
                        path.display()
                    )));
                }
                Err(e) => return Err(store_error(&path, e, 1)),
            }
        }
        let mut backoff = options.retry_backoff;
        let mut attempt = 1;
        let slot = loop {
            match Slot::open(&path, mode, options.busy_timeout, options.durability) {
                Ok(slot) => break slot,
                Err(e) if e.is_busy() && attempt < options.attempts.max(1) => {
                    // Opening is synchronous, so this pause is too (see the crate docs).
                    std::thread::sleep(backoff);
                    backoff = backoff.saturating_mul(2).min(MAX_BACKOFF);
                    attempt += 1;
                }
                Err(e) => return Err(store_error(&path, e, attempt)),
            }
        };
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                identity: slot.identity().describe(&path),
                slot: Mutex::new(slot),
                path,
                options,
                mode,
                listed: Arc::default(),
            }),
        })
    }

    /// [`SqliteStore::open_with`] on tokio's blocking pool, for callers already in async
    /// code (opening may wait for another process's lock).
    pub async fn open_async(
        path: impl AsRef<Path>,
        options: SqliteOptions,
    ) -> Result<Self, StoreError> {
        let path = path.as_ref().to_owned();
        let shown = path.display().to_string();
        tokio::task::spawn_blocking(move || Self::open_with(path, options))
            .await
            .map_err(|e| StoreError::Backend(format!("{shown}: opening did not finish: {e}")))?
    }

    /// Opens the store a `sqlite://PATH` URL names (see the crate docs for the forms).
    pub fn from_url(url: &str) -> Result<Self, StoreError> {
        Self::from_url_with(url, SqliteOptions::default())
    }

    /// Opens the store a `sqlite://PATH` URL names, with `options`.
    pub fn from_url_with(url: &str, options: SqliteOptions) -> Result<Self, StoreError> {
        Self::open_with(url::parse(url)?, options)
    }

    /// The path a `sqlite://PATH` URL names, without opening anything (as written: a
    /// relative path stays relative).
    pub fn path_from_url(url: &str) -> Result<PathBuf, StoreError> {
        url::parse(url)
    }

    /// The absolute path of the database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The options this store was opened with.
    pub fn options(&self) -> &SqliteOptions {
        &self.inner.options
    }

    /// How this store was opened.
    pub fn mode(&self) -> OpenMode {
        self.inner.mode
    }

    /// The store-wide revision (the number of writes ever applied to the file).
    pub async fn revision(&self) -> Result<u64, StoreError> {
        self.run(|c| db::revision(c)).await
    }

    /// Runs `op` on the connection in tokio's blocking pool, retrying with a doubling
    /// backoff while the database is busy. The backoff sleeps on tokio time, outside the
    /// connection lock, so clones of this handle are not held up by it.
    async fn run<T, F>(&self, op: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: Fn(&mut Connection) -> Result<T, DbError> + Send + Sync + 'static,
    {
        let op = Arc::new(op);
        let attempts = self.inner.options.attempts.max(1);
        let mut backoff = self.inner.options.retry_backoff;
        let mut attempt = 1;
        loop {
            let inner = Arc::clone(&self.inner);
            let op = Arc::clone(&op);
            let result = tokio::task::spawn_blocking(move || inner.lock().call(&*op)).await;
            match result {
                Ok(Ok(value)) => return Ok(value),
                Ok(Err(e)) if e.is_busy() && attempt < attempts => {
                    tokio::time::sleep(backoff).await;
                    backoff = backoff.saturating_mul(2).min(MAX_BACKOFF);
                    attempt += 1;
                }
                Ok(Err(e)) => return Err(store_error(&self.inner.path, e, attempt)),
                Err(join) => {
                    return Err(StoreError::Backend(format!(
                        "{}: the SQLite call did not finish: {join}",
                        self.inner.path.display()
                    )));
                }
            }
        }
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, Slot> {
        // A panic inside an operation poisons the lock; rusqlite's `Transaction` rolls back
        // when dropped, also while unwinding, so the connection itself is still usable.
        let slot = self.slot.lock().unwrap_or_else(|e| e.into_inner());
        if !slot.conn.is_autocommit() {
            // Belt and braces for the case above: never start on someone's half transaction.
            let _ = slot.conn.execute_batch("ROLLBACK");
        }
        slot
    }
}

/// Maps a blocking-side error to the trait's error, naming the file.
fn store_error(path: &Path, e: DbError, attempts: u32) -> StoreError {
    let path = path.display();
    match e {
        DbError::Conflict(key) => return StoreError::Conflict { key },
        DbError::Replaced(what) => return StoreError::Replaced { what },
        DbError::Changing => {
            return StoreError::Unavailable(format!(
                "{path} kept changing while it was read ({attempts} attempts); read again"
            ));
        }
        DbError::Io { .. } => {
            return StoreError::Unavailable(format!(
                "{path}: cannot check that it is still the file this process opened: {e}"
            ));
        }
        _ => {}
    }
    if e.is_busy() {
        return StoreError::Unavailable(format!(
            "{path} stayed locked by another connection ({attempts} attempts): {e}"
        ));
    }
    match e.code() {
        // The operation may or may not have reached the disk; the condition may pass.
        Some(ErrorCode::SystemIoFailure | ErrorCode::DiskFull | ErrorCode::OutOfMemory) => {
            StoreError::Unavailable(format!("{path}: {e}"))
        }
        Some(ErrorCode::NotADatabase) => StoreError::Backend(format!(
            "{path} is not a SQLite database (or is encrypted): {e}"
        )),
        Some(ErrorCode::DatabaseCorrupt) => StoreError::Backend(format!("{path} is corrupt: {e}")),
        Some(ErrorCode::CannotOpen) => StoreError::Backend(format!(
            "cannot open {path} (does its directory exist and is it writable?): {e}"
        )),
        _ => StoreError::Backend(format!("{path}: {e}")),
    }
}

impl Store for SqliteStore {
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Entry>, StoreError>> {
        let key = key.to_owned();
        self.run(move |c| db::get(c, &key)).boxed()
    }

    fn list<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Listing, StoreError>> {
        let prefix = prefix.to_owned();
        let listed = Arc::clone(&self.inner.listed);
        self.run(move |c| {
            let mut listed = listed.lock().unwrap_or_else(PoisonError::into_inner);
            listing::list(c, &prefix, &mut listed)
        })
        .boxed()
    }

    fn put<'a>(
        &'a self,
        key: &'a str,
        value: Vec<u8>,
        pre: Precondition,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        let key = key.to_owned();
        self.run(move |c| db::put(c, &key, &value, pre)).boxed()
    }

    /// One write transaction for all (`db::put_each`).
    fn put_each(&self, puts: Vec<Put>) -> BoxFuture<'_, Vec<Result<u64, StoreError>>> {
        async move {
            let puts = Arc::new(puts);
            let shared = Arc::clone(&puts);
            match self.run(move |c| db::put_each(c, &shared)).await {
                Ok(versions) => puts
                    .iter()
                    .zip(versions)
                    .map(|(p, v)| v.ok_or_else(|| StoreError::Conflict { key: p.key.clone() }))
                    .collect(),
                Err(e) => vec![Err(e); puts.len()],
            }
        }
        .boxed()
    }

    fn delete<'a>(
        &'a self,
        key: &'a str,
        pre: Precondition,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let key = key.to_owned();
        let retention = self.inner.options.deletion_retention;
        self.run(move |c| db::delete(c, &key, pre, retention))
            .boxed()
    }

    fn wait_for_change<'a>(
        &'a self,
        prefix: &'a str,
        since: u64,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        async move {
            let mut checked = None;
            loop {
                let p = prefix.to_owned();
                match self.run(move |c| db::poll(c, &p, since, checked)).await? {
                    Poll::Changed(revision) => return Ok(revision),
                    Poll::Unchanged(revision) => checked = Some(revision),
                }
                tokio::time::sleep(self.inner.options.poll_interval).await;
            }
        }
        .boxed()
    }

    fn describe(&self) -> String {
        format!("{}{}", url::SCHEME, self.inner.path.display())
    }

    fn check_identity(&self) -> BoxFuture<'_, Result<StoreIdentity, StoreError>> {
        async move {
            // Every call checks first; this one does nothing else.
            self.run(|_| Ok(())).await?;
            Ok(StoreIdentity::Recorded(self.inner.identity.clone()))
        }
        .boxed()
    }
}
