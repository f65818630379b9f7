//! The blocking side: the schema, opening a connection, and every store operation as one
//! SQLite transaction. Nothing here is async; `lib.rs` runs these functions on tokio's
//! blocking pool and retries the ones that found the database busy.

use std::path::Path;
use std::time::Duration;

use fleetshard_coord::store::{Entry, Precondition, Put};
use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension, TransactionBehavior, params};

/// `PRAGMA application_id` of a fleetshard store ("FLSH"): tells our files from other
/// applications' SQLite databases without guessing from table names.
pub(crate) const APPLICATION_ID: i32 = 0x464C_5348;

/// `PRAGMA user_version`: the schema below. A file with a newer one is refused rather
/// than misread.
pub(crate) const SCHEMA_VERSION: i32 = 1;

/// The schema. Every write bumps `meta.revision` and stamps the written key with it, so
/// versions are never reused (also across delete and re-create), like etcd's mod_revision.
const SCHEMA: &str = "
CREATE TABLE meta (
    id INTEGER PRIMARY KEY CHECK (id = 0),
    -- The store-wide revision: the number of writes ever applied.
    revision INTEGER NOT NULL,
    -- Deletions at or below this revision may have been pruned from `deletions`; a watcher
    -- asking about older revisions is woken at once and re-lists.
    compacted INTEGER NOT NULL
);
INSERT INTO meta (id, revision, compacted) VALUES (0, 0, 0);
CREATE TABLE entries (
    key TEXT PRIMARY KEY NOT NULL,
    value BLOB NOT NULL,
    version INTEGER NOT NULL
);
CREATE INDEX entries_by_version ON entries (version);
-- Deleted keys and the revision of their deletion, so that wait_for_change sees deletes.
-- A key's row goes when it is re-created (its new version supersedes it) or is pruned.
CREATE TABLE deletions (
    key TEXT PRIMARY KEY NOT NULL,
    revision INTEGER NOT NULL
);
CREATE INDEX deletions_by_revision ON deletions (revision);
";

/// Why a blocking operation failed, before it is mapped to a `StoreError`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DbError {
    /// The precondition did not hold.
    #[error("conflict on {0}")]
    Conflict(String),
    /// SQLite said no.
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    /// The file is a database, but not one of ours (or of a schema this build cannot read).
    #[error("{0}")]
    Foreign(String),
    /// The path no longer names the file this connection has open (see `file.rs`).
    #[error("{0}")]
    Replaced(String),
    /// The file system could not be asked about the path.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// A read-only connection kept finding the file changed under it.
    #[error("the file kept changing while it was read")]
    Changing,
}

impl DbError {
    /// The database was locked by another connection: worth retrying.
    pub(crate) fn is_busy(&self) -> bool {
        matches!(self, DbError::Changing)
            || matches!(
                self.code(),
                Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
            )
    }

    /// SQLite's primary result code, if SQLite produced this error.
    pub(crate) fn code(&self) -> Option<ErrorCode> {
        match self {
            DbError::Sqlite(e) => e.sqlite_error_code(),
            _ => None,
        }
    }
}

/// How hard each commit is pushed to disk (`PRAGMA synchronous`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// `synchronous = FULL`: every commit is fsynced before it returns, so a commit survives
    /// power loss. The default: a claimed lease or committed generation must not vanish.
    #[default]
    Full,
    /// `synchronous = NORMAL`: commits survive a process crash, but the last ones before a
    /// power loss or OS crash may be rolled back. Faster; for tests and demos.
    Normal,
}

/// Opens a fleetshard store file for reading and writing — creating the file and the
/// schema if `create`, else only an existing store — switches it to WAL mode and checks
/// or creates the schema.
pub(crate) fn open(
    path: &Path,
    busy_timeout: Duration,
    durability: Durability,
    create: bool,
) -> Result<Connection, DbError> {
    // No SQLITE_OPEN_URI: the path is a file name, never a `file:` URI with options.
    let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    if create {
        flags |= OpenFlags::SQLITE_OPEN_CREATE;
    }
    let mut conn = Connection::open_with_flags(path, flags)?;
    conn.busy_timeout(busy_timeout)?;
    // Reading the header first makes a file that is not a database fail here (NOTADB),
    // before anything is written to it.
    conn.pragma_query_value(None, "application_id", |r| r.get::<_, i32>(0))?;
    if !create {
        // Only an existing store: refuse anything else before writing a byte.
        let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred)?;
        if !schema_is_ours(&tx)? {
            return Err(not_a_store());
        }
    }
    // WAL: readers never block the writer nor the writer readers, so several processes
    // polling and one writing do not queue behind each other. It is persistent in the file.
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        // WAL needs shared memory between processes; when SQLite refuses it, the file is
        // most likely on a network filesystem, where SQLite's locking is not reliable either.
        return Err(DbError::Foreign(format!(
            "SQLite could not switch it to WAL mode (journal mode is {mode:?}); \
             put the store on a local filesystem"
        )));
    }
    let sync = match durability {
        Durability::Full => "FULL",
        Durability::Normal => "NORMAL",
    };
    conn.pragma_update(None, "synchronous", sync)?;
    init_schema(&mut conn, create)?;
    Ok(conn)
}

/// Opens an existing store file read-only: SQLite writes nothing to it. `immutable`: also
/// no locks and no `-wal`/`-shm` files, for a file no process has open (the caller checks
/// that it did not change while it was read; `conn.rs`). Checks the schema.
pub(crate) fn open_read_only(
    path: &Path,
    busy_timeout: Duration,
    immutable: bool,
) -> Result<Connection, DbError> {
    let uri = format!(
        "file://{}?mode=ro{}",
        uri_path(path),
        if immutable { "&immutable=1" } else { "" }
    );
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let mut conn = Connection::open_with_flags(uri, flags)?;
    conn.busy_timeout(busy_timeout)?;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred)?;
    if !schema_is_ours(&tx)? {
        return Err(not_a_store());
    }
    drop(tx);
    Ok(conn)
}

/// An empty database where an existing store was expected.
fn not_a_store() -> DbError {
    DbError::Foreign(
        "an empty file, not a fleetshard store (a replica creates the store: is the path right?)"
            .into(),
    )
}

/// An absolute path as the path of a `file:` URI: every byte but unreserved ones and `/`
/// escaped, so `?`, `#` and `%` in a file name stay part of it.
fn uri_path(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt as _;
    let mut out = String::new();
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Creates the schema in an empty file (if `create`), or checks that an existing one is
/// ours. In one write transaction, so two processes creating the same file at once do not
/// both create.
fn init_schema(conn: &mut Connection, create: bool) -> Result<(), DbError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    if !schema_is_ours(&tx)? {
        if !create {
            return Err(not_a_store());
        }
        tx.execute_batch(SCHEMA)?;
        tx.pragma_update(None, "application_id", APPLICATION_ID)?;
        tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
    }
    tx.commit()?;
    Ok(())
}

/// Whether the database holds our schema (`true`) or nothing at all (`false`); anything
/// else is an error saying what it is.
fn schema_is_ours(tx: &Connection) -> Result<bool, DbError> {
    let app_id: i32 = tx.pragma_query_value(None, "application_id", |r| r.get(0))?;
    let user_version: i32 = tx.pragma_query_value(None, "user_version", |r| r.get(0))?;
    let tables: Vec<String> = tx
        .prepare("SELECT name FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%' ORDER BY name")?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    match app_id {
        APPLICATION_ID if user_version == SCHEMA_VERSION => {
            // Ours: a missing meta row would mean someone edited the file by hand.
            tx.query_row("SELECT revision FROM meta WHERE id = 0", [], |r| {
                r.get::<_, i64>(0)
            })
            .optional()?
            .ok_or_else(|| DbError::Foreign("a fleetshard store without its meta row".into()))?;
            Ok(true)
        }
        APPLICATION_ID => Err(DbError::Foreign(format!(
            "a fleetshard store with schema version {user_version}; this build reads \
                 version {SCHEMA_VERSION}"
        ))),
        0 if tables.is_empty() => Ok(false),
        0 => {
            let shown: Vec<&str> = tables.iter().take(5).map(String::as_str).collect();
            Err(DbError::Foreign(format!(
                "a SQLite database of something else (tables: {}{}), not a fleetshard store",
                shown.join(", "),
                if tables.len() > 5 { ", …" } else { "" }
            )))
        }
        other => Err(DbError::Foreign(format!(
            "a SQLite database of another application (application_id {other:#x}), \
             not a fleetshard store"
        ))),
    }
}

/// The smallest string greater than every string that starts with `prefix`, or `None` when
/// there is none (empty prefix, or only U+10FFFF). SQLite compares TEXT with memcmp, and
/// UTF-8 byte order is code point order, so `prefix <= key < prefix_end(prefix)` is exactly
/// "key starts with prefix" and uses the primary-key index (`LIKE` would need escaping and
/// a case-sensitivity pragma, and `substr` would scan the table).
pub(crate) fn prefix_end(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(c) = chars.pop() {
        let next = match c as u32 + 1 {
            0xD800 => Some('\u{E000}'), // skip the surrogates, which are not chars
            n => char::from_u32(n),
        };
        if let Some(n) = next {
            chars.push(n);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

/// A `WHERE` condition for keys under the prefix `?1`, below `?2` if `bounded`.
pub(crate) fn under_prefix(bounded: bool) -> &'static str {
    if bounded {
        "key >= ?1 AND key < ?2"
    } else {
        "key >= ?1"
    }
}

fn check(key: &str, current: Option<u64>, pre: Precondition) -> Result<(), DbError> {
    if pre.admits(current) {
        Ok(())
    } else {
        Err(DbError::Conflict(key.to_owned()))
    }
}

fn current_version(conn: &Connection, key: &str) -> Result<Option<u64>, DbError> {
    Ok(conn
        .prepare_cached("SELECT version FROM entries WHERE key = ?1")?
        .query_row([key], |r| r.get(0))
        .optional()?)
}

/// Bumps the store-wide revision and returns the new one.
fn bump(conn: &Connection) -> Result<u64, DbError> {
    Ok(conn
        .prepare_cached("UPDATE meta SET revision = revision + 1 WHERE id = 0 RETURNING revision")?
        .query_row([], |r| r.get(0))?)
}

/// Reads one key (a single statement is its own consistent snapshot).
pub(crate) fn get(conn: &Connection, key: &str) -> Result<Option<Entry>, DbError> {
    Ok(conn
        .prepare_cached("SELECT value, version FROM entries WHERE key = ?1")?
        .query_row([key], |r| {
            Ok(Entry {
                key: key.to_owned(),
                value: r.get(0)?,
                version: r.get(1)?,
            })
        })
        .optional()?)
}

/// Writes `key` if `pre` holds, in one `BEGIN IMMEDIATE` transaction: the write lock is
/// taken before the precondition is read, so no other connection or process can write
/// between the check and the write (and SQLite never has to upgrade a reader, which could
/// fail with SQLITE_BUSY_SNAPSHOT without calling the busy handler).
pub(crate) fn put(
    conn: &mut Connection,
    key: &str,
    value: &[u8],
    pre: Precondition,
) -> Result<u64, DbError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    check(key, current_version(&tx, key)?, pre)?;
    let version = write(&tx, key, value)?;
    tx.commit()?;
    Ok(version)
}

/// Writes each of `puts` whose precondition holds, in one `BEGIN IMMEDIATE` transaction
/// (each with its own new version, as [`put`] writes one): `None` for a write whose
/// precondition failed. One lock and one commit for all.
pub(crate) fn put_each(conn: &mut Connection, puts: &[Put]) -> Result<Vec<Option<u64>>, DbError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let mut versions = Vec::with_capacity(puts.len());
    for p in puts {
        let version = if p.pre.admits(current_version(&tx, &p.key)?) {
            Some(write(&tx, &p.key, &p.value)?)
        } else {
            None
        };
        versions.push(version);
    }
    tx.commit()?;
    Ok(versions)
}

/// Writes `key` at a new version, inside the caller's write transaction.
fn write(tx: &Connection, key: &str, value: &[u8]) -> Result<u64, DbError> {
    let version = bump(tx)?;
    tx.prepare_cached(
        "INSERT INTO entries (key, value, version) VALUES (?1, ?2, ?3)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value, version = excluded.version",
    )?
    .execute(params![key, value, version])?;
    tx.prepare_cached("DELETE FROM deletions WHERE key = ?1")?
        .execute([key])?;
    Ok(version)
}

/// Deletes `key` if `pre` holds; records the deletion for watchers and prunes deletion
/// records more than `retention` revisions old. Deleting an absent key is not a write.
pub(crate) fn delete(
    conn: &mut Connection,
    key: &str,
    pre: Precondition,
    retention: u64,
) -> Result<(), DbError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let current = current_version(&tx, key)?;
    check(key, current, pre)?;
    if current.is_some() {
        let revision = bump(&tx)?;
        tx.prepare_cached("DELETE FROM entries WHERE key = ?1")?
            .execute([key])?;
        tx.prepare_cached(
            "INSERT INTO deletions (key, revision) VALUES (?1, ?2)
             ON CONFLICT (key) DO UPDATE SET revision = excluded.revision",
        )?
        .execute(params![key, revision])?;
        prune(&tx, revision.saturating_sub(retention))?;
    }
    tx.commit()?;
    Ok(())
}

/// Drops deletion records at or below `cutoff` and remembers how far it went. Only
/// deletions add records, so pruning there keeps the table bounded by the number of keys
/// deleted in the last `retention` revisions.
fn prune(conn: &Connection, cutoff: u64) -> Result<(), DbError> {
    let pruned: Option<u64> = conn
        .prepare_cached("SELECT max(revision) FROM deletions WHERE revision <= ?1")?
        .query_row([cutoff], |r| r.get(0))?;
    if let Some(pruned) = pruned {
        conn.prepare_cached("DELETE FROM deletions WHERE revision <= ?1")?
            .execute([cutoff])?;
        conn.prepare_cached("UPDATE meta SET compacted = max(compacted, ?1) WHERE id = 0")?
            .execute([pruned])?;
    }
    Ok(())
}

/// What one poll of `wait_for_change` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Poll {
    /// Something under the prefix changed after `since` (or may have): the revision.
    Changed(u64),
    /// Nothing did, as of this revision.
    Unchanged(u64),
}

/// One poll: has anything under `prefix` changed after `since`? `checked` is the revision
/// the previous poll already examined: if the store-wide revision has not moved, the
/// answer cannot have changed, and only the one-row `meta` read is paid.
pub(crate) fn poll(
    conn: &mut Connection,
    prefix: &str,
    since: u64,
    checked: Option<u64>,
) -> Result<Poll, DbError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Deferred)?;
    let (revision, compacted): (u64, u64) = tx
        .prepare_cached("SELECT revision, compacted FROM meta WHERE id = 0")?
        .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    if revision == since || checked == Some(revision) {
        return Ok(Poll::Unchanged(revision));
    }
    // A revision below `since` means the file was replaced by an older or new one: wake the
    // caller so it re-lists (and resumes from the real revision) instead of waiting for a
    // revision that may never come. Pruned deletions may hide a change: wake too.
    if revision < since || since < compacted {
        return Ok(Poll::Changed(revision));
    }
    let end = prefix_end(prefix);
    let mut changed = false;
    for (table, column) in [("entries", "version"), ("deletions", "revision")] {
        let sql = format!(
            "SELECT EXISTS (SELECT 1 FROM {table} WHERE {} AND {column} > ?3)",
            under_prefix(end.is_some())
        );
        let mut stmt = tx.prepare_cached(&sql)?;
        changed |= match &end {
            Some(end) => stmt.query_row(params![prefix, end, since], |r| r.get::<_, bool>(0))?,
            None => stmt.query_row(params![prefix, None::<String>, since], |r| r.get(0))?,
        };
        if changed {
            break;
        }
    }
    drop(tx);
    Ok(if changed {
        Poll::Changed(revision)
    } else {
        Poll::Unchanged(revision)
    })
}

/// The store-wide revision.
pub(crate) fn revision(conn: &Connection) -> Result<u64, DbError> {
    Ok(conn
        .prepare_cached("SELECT revision FROM meta WHERE id = 0")?
        .query_row([], |r| r.get(0))?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn prefix_end_examples() {
        assert_eq!(prefix_end(""), None);
        assert_eq!(prefix_end("a/"), Some("a0".into()));
        assert_eq!(prefix_end("a\u{10FFFF}"), Some("b".into()));
        assert_eq!(prefix_end("\u{10FFFF}\u{10FFFF}"), None);
        assert_eq!(prefix_end("x\u{D7FF}"), Some("x\u{E000}".into()));
    }

    fn text() -> impl Strategy<Value = String> {
        let c = prop::sample::select(vec![
            '\0',
            'a',
            'b',
            '/',
            '%',
            '_',
            'é',
            '\u{D7FF}',
            '\u{E000}',
            '\u{FFFF}',
            '\u{10FFFF}',
        ]);
        prop::collection::vec(c, 0..5).prop_map(|v| v.into_iter().collect())
    }

    proptest! {
        /// The SQL range is exactly `starts_with`, under byte-wise (memcmp) order, which is
        /// both Rust's `str` order and SQLite's BINARY collation.
        #[test]
        fn prefix_range_is_starts_with(key in text(), prefix in text()) {
            let end = prefix_end(&prefix);
            let in_range = key >= prefix && end.as_ref().is_none_or(|e| key < *e);
            prop_assert_eq!(in_range, key.starts_with(&prefix));
        }
    }
}
