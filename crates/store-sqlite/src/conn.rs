//! The connection of a store handle and the file it has open: how it is opened
//! ([`OpenMode`]), which file that is (its [`Identity`], checked before every operation),
//! and, for a read-only handle on a file no process had open, that the file does not
//! change while it is read.
//!
//! # The store is the store
//! A process keeps its connection (a file descriptor) for its whole life. If the path is
//! then deleted, renamed over, or its `-wal`/`-shm` deleted, the connection goes on
//! reading and writing the file it has open, which nobody else can reach any more, while a
//! process opening the path now gets another file: two stores, two fleets. So the device
//! and inode of the database file, and of its `-wal` and `-shm`, are recorded when the
//! connection is opened, and every operation first checks that the path still names
//! them (three `stat` calls, a few microseconds): a missing or different file is
//! [`DbError::Replaced`], which the store reports as `StoreError::Replaced`.
//!
//! While any connection has the store open in WAL mode, SQLite keeps its `-wal` and
//! `-shm` files (only the last connection to close removes them), so they keep their
//! inodes for as long as this connection lives.

use std::fmt;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::Connection;

use crate::db::{self, DbError, Durability};

/// How a store is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OpenMode {
    /// Reads and writes; the file and schema are created when missing (a replica: the
    /// fleet's first replica makes its store).
    #[default]
    Create,
    /// Reads and writes an existing store only: a missing file, or one without
    /// fleetshard's schema, is an error naming the path (`fleetshard scale`).
    Existing,
    /// Reads an existing store only, writing nothing (`fleetshard status`, `apps`): SQLite
    /// opens it read-only, so a read-only file can be read; while no process has it open
    /// (no `-wal` file), not even `-wal`/`-shm` files are created next to it.
    ReadOnly,
}

/// A file as the file system identifies it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileId {
    dev: u64,
    ino: u64,
}

impl fmt::Display for FileId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "device {}, inode {}", self.dev, self.ino)
    }
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> DbError {
    move |source| DbError::Io { what, source }
}

/// The file `path` names now, if any.
fn metadata(path: &Path) -> Result<Option<std::fs::Metadata>, DbError> {
    match std::fs::metadata(path) {
        Ok(m) => Ok(Some(m)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io(format!("cannot stat {}", path.display()))(e)),
    }
}

pub(crate) fn file_id(path: &Path) -> Result<Option<FileId>, DbError> {
    Ok(metadata(path)?.map(|m| FileId {
        dev: m.dev(),
        ino: m.ino(),
    }))
}

/// `PATH-wal` or `PATH-shm`.
pub(crate) fn side_file(path: &Path, suffix: &str) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(suffix);
    PathBuf::from(p)
}

/// The files a connection has open, as recorded when it was opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Identity {
    db: FileId,
    /// `-wal` and `-shm` (absent for a read-only connection, which may have none).
    side: Vec<(&'static str, FileId)>,
}

impl Identity {
    /// What `path` (and, with `side_files`, its `-wal` and `-shm`) names now.
    fn record(path: &Path, side_files: bool) -> Result<Identity, DbError> {
        let db = file_id(path)?.ok_or_else(|| {
            DbError::Replaced(format!(
                "{} disappeared while it was being opened",
                path.display()
            ))
        })?;
        let mut side = Vec::new();
        if side_files {
            for suffix in ["-wal", "-shm"] {
                if let Some(id) = file_id(&side_file(path, suffix))? {
                    side.push((suffix, id));
                }
            }
        }
        Ok(Identity { db, side })
    }

    /// Ok while `path` still names the recorded files; else what changed.
    pub(crate) fn check(&self, path: &Path) -> Result<(), DbError> {
        let shown = path.display();
        match file_id(path)? {
            Some(id) if id == self.db => {}
            None => {
                return Err(DbError::Replaced(format!(
                    "{shown} no longer exists (deleted or moved away; this process has \
                     {} open)",
                    self.db
                )));
            }
            Some(id) => {
                return Err(DbError::Replaced(format!(
                    "{shown} is now another file ({id}; this process has {} open)",
                    self.db
                )));
            }
        }
        for (suffix, recorded) in &self.side {
            let p = side_file(path, suffix);
            if file_id(&p)? != Some(*recorded) {
                return Err(DbError::Replaced(format!(
                    "{} was deleted or replaced while this process had {shown} open: a \
                     process opening {shown} now would not see what this one wrote",
                    p.display()
                )));
            }
        }
        Ok(())
    }

    /// For `StoreIdentity`: the path and the file it names.
    pub(crate) fn describe(&self, path: &Path) -> String {
        format!("{} ({})", path.display(), self.db)
    }
}

/// Enough of a file's metadata to tell that it changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Snapshot {
    id: FileId,
    len: u64,
    mtime: (i64, i64),
}

fn snapshot(path: &Path) -> Result<Option<Snapshot>, DbError> {
    Ok(metadata(path)?.map(|m| Snapshot {
        id: FileId {
            dev: m.dev(),
            ino: m.ino(),
        },
        len: m.len(),
        mtime: (m.mtime(), m.mtime_nsec()),
    }))
}

/// How many times a read-only read is tried on a file that keeps changing under it.
const READ_ONLY_ATTEMPTS: u32 = 3;

/// A handle's connection and what it needs to check before and after each operation.
pub(crate) struct Slot {
    pub(crate) conn: Connection,
    path: PathBuf,
    mode: OpenMode,
    busy_timeout: Duration,
    identity: Identity,
    /// A read-only connection opened `immutable` (no process had the file open: no
    /// `-wal`): the file as it was then. SQLite neither locks nor watches such a file, so
    /// it must be unchanged, and still without a `-wal`, after every read; else the
    /// connection is opened again and the read repeated.
    frozen: Option<Snapshot>,
}

impl Slot {
    /// Opens `path` (absolute) in `mode`. Blocking.
    pub(crate) fn open(
        path: &Path,
        mode: OpenMode,
        busy_timeout: Duration,
        durability: Durability,
    ) -> Result<Slot, DbError> {
        let (conn, frozen) = match mode {
            OpenMode::Create => (db::open(path, busy_timeout, durability, true)?, None),
            OpenMode::Existing => (db::open(path, busy_timeout, durability, false)?, None),
            OpenMode::ReadOnly => read_only(path, busy_timeout)?,
        };
        let identity = Identity::record(path, mode != OpenMode::ReadOnly)?;
        Ok(Slot {
            conn,
            path: path.to_owned(),
            mode,
            busy_timeout,
            identity,
            frozen,
        })
    }

    pub(crate) fn identity(&self) -> &Identity {
        &self.identity
    }

    /// Whether a frozen (immutable) connection may no longer show the file as it is.
    fn stale(&self) -> Result<bool, DbError> {
        let Some(frozen) = self.frozen else {
            return Ok(false);
        };
        Ok(file_id(&side_file(&self.path, "-wal"))?.is_some()
            || snapshot(&self.path)? != Some(frozen))
    }

    /// Runs `op` on the connection once the path is known to still name its file.
    pub(crate) fn call<T>(
        &mut self,
        op: &dyn Fn(&mut Connection) -> Result<T, DbError>,
    ) -> Result<T, DbError> {
        self.identity.check(&self.path)?;
        if self.mode != OpenMode::ReadOnly {
            return op(&mut self.conn);
        }
        for _ in 0..READ_ONLY_ATTEMPTS {
            if self.stale()? {
                (self.conn, self.frozen) = read_only(&self.path, self.busy_timeout)?;
            }
            let r = op(&mut self.conn);
            if !self.stale()? {
                return r;
            }
        }
        Err(DbError::Changing)
    }
}

/// A read-only connection: SQLite's usual reader (locks, `-shm`) while a `-wal` shows that
/// a process has the store open; else an immutable one, which creates no file, with the
/// file's snapshot to check it against.
fn read_only(
    path: &Path,
    busy_timeout: Duration,
) -> Result<(Connection, Option<Snapshot>), DbError> {
    if file_id(&side_file(path, "-wal"))?.is_some() {
        return Ok((db::open_read_only(path, busy_timeout, false)?, None));
    }
    let before = snapshot(path)?.ok_or_else(|| {
        DbError::Replaced(format!(
            "{} disappeared while it was being opened",
            path.display()
        ))
    })?;
    let conn = db::open_read_only(path, busy_timeout, true)?;
    Ok((conn, Some(before)))
}
