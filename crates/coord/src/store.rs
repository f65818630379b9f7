//! The coordination store: a small versioned key-value space with compare-and-swap and
//! change notification. Every protocol is written against this trait; each backend (memory,
//! SQLite, etcd, Kubernetes) only moves bytes.
//!
//! Keys are `/`-separated strings; values are opaque bytes. Every successful write gives
//! the key a new `version` (strictly increasing per key, never reused, also across a delete
//! and re-create), which is what compare-and-swap compares. Backends also keep a store-wide
//! `revision` that increases on every write, so a watcher can ask "anything new under this
//! prefix since revision R?".
//!
//! A store is also *one* store: the same URL can come to name another one under a running
//! process (a SQLite file deleted and re-created, another etcd cluster behind the same
//! endpoints, a namespace deleted and re-created). Backends record what identifies the
//! store at first contact and report a change as [`StoreError::Replaced`]
//! ([`Store::check_identity`]); [`guard::GuardedStore`] turns the first such report into a
//! permanent refusal, so a process never goes on with a store other than the one it began
//! with.

pub mod batched;
pub mod chunked;
#[cfg(any(test, feature = "test-util"))]
pub mod conformance;
pub mod guard;
pub mod memory;
#[cfg(any(test, feature = "test-util"))]
pub mod throughput;

use futures::FutureExt;
use futures::future::BoxFuture;

/// A stored value and the version it was written at.
///
/// Versions are store revisions: a write's version is the store-wide revision it created,
/// so a [`Listing`] at revision R reflects every write whose version is ≤ R. Protocols use
/// this to recognise a listing older than their own last write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The key.
    pub key: String,
    /// The value bytes.
    pub value: Vec<u8>,
    /// The key's version: changes on every write.
    pub version: u64,
}

/// What must hold for a write to apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precondition {
    /// The key must not exist (create).
    Absent,
    /// The key must exist at exactly this version (compare-and-swap).
    Version(u64),
    /// No condition (used by tests and tools, never by the protocols).
    Any,
}

impl Precondition {
    /// Whether a key currently at `current` (`None`: absent) satisfies the condition. The
    /// one definition every backend uses.
    pub fn admits(self, current: Option<u64>) -> bool {
        match self {
            Precondition::Any => true,
            Precondition::Absent => current.is_none(),
            Precondition::Version(v) => current == Some(v),
        }
    }
}

/// A snapshot of everything under a prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing {
    /// Entries in key order.
    pub entries: Vec<Entry>,
    /// The store-wide revision the snapshot reflects.
    pub revision: u64,
}

/// Why a store operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The precondition did not hold: someone else wrote first.
    #[error("conflict on {key}: it changed since it was read")]
    Conflict {
        /// The key.
        key: String,
    },
    /// The store could not be reached or did not answer in time; the operation may or may
    /// not have applied.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// The store answered something this client cannot use.
    #[error("store error: {0}")]
    Backend(String),
    /// A store URL that names no backend or is malformed.
    #[error("invalid store URL {url:?}: {reason}")]
    InvalidUrl {
        /// The URL.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The store this handle reaches is no longer the one it first reached: the SQLite file
    /// was deleted or replaced, another etcd cluster answers at the endpoints, the
    /// namespace was deleted and re-created. Nothing this handle did before is in it; a
    /// process that goes on with it forms a second fleet beside the first. Permanent.
    #[error("store replaced: {what}")]
    Replaced {
        /// What changed, naming the store (`/var/lib/fleetshard.db is now another file
        /// (device 2049, inode 77; opened: device 2049, inode 12)`).
        what: String,
    },
}

/// What a backend knows its store by (see [`Store::check_identity`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreIdentity {
    /// Nothing can replace the store under this handle: `memory://`, whose data lives in
    /// the handle itself.
    Fixed,
    /// What identifies the store, recorded at first contact and unchanged since: the
    /// SQLite file's device and inode, the etcd cluster id, the namespace's uid.
    Recorded(String),
}

impl StoreIdentity {
    /// Whether another store could come to stand behind the same URL.
    pub fn replaceable(&self) -> bool {
        matches!(self, StoreIdentity::Recorded(_))
    }
}

impl std::fmt::Display for StoreIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreIdentity::Fixed => f.write_str("fixed (cannot be replaced)"),
            StoreIdentity::Recorded(what) => f.write_str(what),
        }
    }
}

/// One write of [`Store::put_each`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Put {
    /// The key.
    pub key: String,
    /// The bytes to write.
    pub value: Vec<u8>,
    /// What must hold for the write to apply.
    pub pre: Precondition,
}

/// A coordination store.
pub trait Store: Send + Sync + 'static {
    /// Reads one key.
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Entry>, StoreError>>;

    /// Reads every key under `prefix`, consistently (one revision).
    fn list<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Listing, StoreError>>;

    /// Writes `value` to `key` if `pre` holds; returns the new version.
    fn put<'a>(
        &'a self,
        key: &'a str,
        value: Vec<u8>,
        pre: Precondition,
    ) -> BoxFuture<'a, Result<u64, StoreError>>;

    /// Writes each of `puts` as [`Store::put`] does (their keys distinct), and returns each
    /// outcome, in order. Not atomic: each write applies, or fails, on its own. A backend
    /// that can carry several writes in one request does (etcd: one transaction, and when
    /// one of its comparisons fails, each write again on its own to learn which); the
    /// default sends them side by side. For bulk writes the protocols do not make (app
    /// statuses, through [`batched::Batched`]).
    fn put_each(&self, puts: Vec<Put>) -> BoxFuture<'_, Vec<Result<u64, StoreError>>> {
        async move {
            let writes = puts
                .iter()
                .map(|p| self.put(&p.key, p.value.clone(), p.pre));
            futures::future::join_all(writes).await
        }
        .boxed()
    }

    /// Reads each of `keys` as [`Store::get`] does, and returns each outcome, in order. A
    /// backend that can carry several reads in one request does (etcd: one transaction);
    /// the default sends them side by side.
    fn get_each(&self, keys: Vec<String>) -> BoxFuture<'_, Vec<Result<Option<Entry>, StoreError>>> {
        async move { futures::future::join_all(keys.iter().map(|k| self.get(k))).await }.boxed()
    }

    /// Deletes `key` if `pre` holds (deleting an absent key with `Any` succeeds).
    fn delete<'a>(
        &'a self,
        key: &'a str,
        pre: Precondition,
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Resolves with the current revision once something under `prefix` changed after
    /// revision `since` — or earlier (spurious wake-ups are allowed; callers re-list).
    /// Backends without push notification may poll.
    fn wait_for_change<'a>(
        &'a self,
        prefix: &'a str,
        since: u64,
    ) -> BoxFuture<'a, Result<u64, StoreError>>;

    /// A short description for logs and status (`sqlite:///var/lib/fleetshard.db`).
    fn describe(&self) -> String;

    /// Checks that this handle still reaches the store it reached first, recording what
    /// identifies it on first contact: `Ok` with the identity, or
    /// [`StoreError::Replaced`] when another store now stands behind the same URL (other
    /// failures as for any call). Cheap enough to call before every renewal: a file's
    /// metadata, a value every answer already carries, or one small read at most once per
    /// renew period. The default is for stores that cannot be replaced ([`MemoryStore`]).
    ///
    /// [`MemoryStore`]: memory::MemoryStore
    fn check_identity(&self) -> BoxFuture<'_, Result<StoreIdentity, StoreError>> {
        futures::future::ready(Ok(StoreIdentity::Fixed)).boxed()
    }
}
