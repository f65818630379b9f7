//! `etcd://HOST:PORT[,HOST:PORT…]`: the etcd coordination store, for replicas on several
//! machines (etcd v3 API over gRPC); `etcds://…` over TLS, with a client certificate and an
//! etcd user if etcd asks for them ([`EtcdSecurity`], `security.rs`).
//!
//! # Mapping
//! etcd already has the trait's model, so the mapping is direct:
//! - a key's version is its `mod_revision`, a [`Listing`]'s revision is the response
//!   header's revision: versions *are* store revisions, never reused (also across delete
//!   and re-create), exactly as [`fleetshard_coord::store`] requires;
//! - [`Store::put`] and [`Store::delete`] are one transaction each: `If(mod_revision(k) ==
//!   v)` for [`Precondition::Version`], `If(create_revision(k) == 0)` (the key does not
//!   exist) for [`Precondition::Absent`], no comparison for [`Precondition::Any`]; a failed
//!   comparison is [`StoreError::Conflict`];
//! - [`Store::put_each`] is one transaction of every comparison and every put (one
//!   revision for all); when a comparison fails etcd applies none, and each write is sent
//!   again on its own to learn which failed. [`Store::get_each`] is one read-only
//!   transaction (`many.rs`);
//! - [`Store::list`] is one range request over the prefix (pages of
//!   [`EtcdOptions::page_size`] keys, every page after the first read at the first page's
//!   revision, so the listing is one revision);
//! - [`Store::wait_for_change`] is a watch on the prefix from `since + 1`, so changes made
//!   between the caller's listing and the watch are not missed. A `since` already
//!   compacted away resolves at once with the current revision (the caller re-lists).
//!
//! # Failures
//! Every request is bounded by [`EtcdOptions::timeout`] (default 2 s): an etcd that is down,
//! partitioned or frozen gives [`StoreError::Unavailable`] within it, never a hang. A watch
//! may legitimately wait for long, so while it is idle the store checks every
//! [`EtcdOptions::watch_check`] that etcd still answers a read, and fails the wait with
//! `Unavailable` if it does not. Failures that pass (connection refused or reset, no leader,
//! leader changed, timeouts, out of space until compaction) are `Unavailable`; a request
//! etcd refuses (too large, permission) is [`StoreError::Backend`]. After an `Unavailable`
//! the client is rebuilt on the next call, so a restarted etcd is reconnected to
//! transparently. A write that timed out may have applied: the protocol reads before it
//! trusts (the trait's contract).
//!
//! # Compaction
//! etcd keeps every revision until it is compacted. Run etcd with automatic compaction
//! (`--auto-compaction-mode=periodic --auto-compaction-retention=5m`, as Kubernetes does):
//! every replica rewrites its lease record every second, so history grows by about one
//! revision per replica per second. A watcher behind the compaction is simply woken.
//!
//! # Why no etcd leases
//! etcd leases (server-side TTLs that delete keys) would not make fenced lease mode simpler
//! or safer, so records are plain keys and leases are not used:
//! - *Safety does not need them.* An observer judges another replica's lease expired when
//!   it has seen the record unchanged for `duration` on its own monotonic clock, and the
//!   holder stops `renew_deadline` after *sending* its last confirmed renew (ARCHITECTURE,
//!   `lease.rs`). Both sides use their own clocks from events they saw; no clock is compared
//!   across machines. A server TTL would be a second, independent expiry, measured from when
//!   etcd *received* a keep-alive, on etcd's clock, and etcd extends every lease on a leader
//!   change: it cannot make a holder stop sooner, so it cannot replace the holder's deadline.
//! - *It would lose information the protocol uses.* An expired lease deletes the record, and
//!   with it the last holder's identity (a restarted pod prefers the shard it held, and its
//!   clusters do not move), the `acked` generation, and the `released` flag. A keep-alive
//!   does not change `mod_revision`, so renews would be invisible to observers' version
//!   comparison, and holding a shard would depend on a second stream (keep-alives) that can
//!   succeed while record writes fail, or the other way round.
//! - *Transactions are what make it safe*, and they are used: every write is a
//!   compare-and-swap on the `mod_revision` the writer observed.
//!
//! Presence records (`replicas/<identity>`) of spares that died are not left to an etcd
//! lease either: the distributor deletes one it has seen unchanged for a grace, with
//! compare-and-swap on that version (`fleetshard_coord`, `fenced/replica/forget.rs`), the
//! same way on every backend.
//!
//! # The store is the store
//! Every answer names the etcd cluster that sent it; the first is recorded, and an answer
//! from another cluster (etcd re-created, or restored as a new cluster, or another one
//! behind the same endpoints) is [`StoreError::Replaced`] (`identity.rs`), which is also
//! what [`Store::check_identity`] reports. A new cluster has a new id even when restored
//! from a snapshot of the old one.
//!
//! # Namespaces
//! [`EtcdOptions::key_prefix`] puts every key of this store under a prefix (and strips it
//! from what it returns), so several fleets or test runs can share one etcd. Normally the
//! fleet's `--root` is enough and the prefix is empty.

mod client;
mod error;
mod identity;
mod many;
mod security;
mod url;
mod watch;

pub use security::{ClientCert, EtcdSecurity, EtcdTls, EtcdUser, Password};

use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, GetOptions, KeyValue, Txn, TxnOp};
use fleetshard_coord::store::{
    Entry, Listing, Precondition, Put, Store, StoreError, StoreIdentity,
};
use futures::FutureExt;
use futures::future::BoxFuture;

use error::Kind;

/// Tuning for an [`EtcdStore`]. The defaults suit a fleet's replicas next to an etcd on
/// the same network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdOptions {
    /// The longest any one request (and connecting) may take before it fails with
    /// [`StoreError::Unavailable`] (default 2 s: well inside a lease's renew deadline, so a
    /// holder learns of a failure while it can still retry).
    pub timeout: Duration,
    /// How long a watch may be idle before the store checks that etcd still answers
    /// (default 5 s). A check that times out fails the wait with `Unavailable`.
    pub watch_check: Duration,
    /// Keys per page of a listing (default 1000).
    pub page_size: u32,
    /// Prefix of every key this store reads or writes (default empty; see the crate docs).
    pub key_prefix: String,
    /// TLS and authentication (default: neither).
    pub security: EtcdSecurity,
}

impl Default for EtcdOptions {
    fn default() -> Self {
        EtcdOptions {
            timeout: Duration::from_secs(2),
            watch_check: Duration::from_secs(5),
            page_size: 1000,
            key_prefix: String::new(),
            security: EtcdSecurity::default(),
        }
    }
}

/// A [`Store`] on an etcd cluster. Clones share one client (one HTTP/2 connection per
/// endpoint); the connection is made on first use and remade after a failure.
#[derive(Clone)]
pub struct EtcdStore {
    inner: Arc<Inner>,
}

struct Inner {
    /// `HOST:PORT` each.
    endpoints: Vec<String>,
    /// `etcd://HOST:PORT,…` (or `etcds://`) for messages.
    url: String,
    options: EtcdOptions,
    /// `None` until first use and after a failure that may have broken the connection.
    client: Mutex<Option<Client>>,
    /// The clusters that answered (`identity.rs`).
    clusters: Mutex<identity::Clusters>,
}

impl std::fmt::Debug for EtcdStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdStore")
            .field("endpoints", &self.inner.endpoints)
            .field("options", &self.inner.options)
            .finish_non_exhaustive()
    }
}

/// Largest page size: etcd answers at most this many keys per range request we make.
const MAX_PAGE: u32 = 100_000;

/// A listing is retried from scratch this many times if its pinned revision is compacted
/// between pages.
const LIST_ATTEMPTS: u32 = 3;

impl EtcdStore {
    /// A store on `endpoints` (`HOST:PORT` each) with `options`; TLS when
    /// [`EtcdOptions::security`] says so. Makes no connection: the first call does (see
    /// [`EtcdStore::connect`] to check at once), but the TLS files are read now, so a
    /// missing one is reported here.
    pub fn new<I, S>(endpoints: I, options: EtcdOptions) -> Result<Self, StoreError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let endpoints: Vec<String> = endpoints.into_iter().map(Into::into).collect();
        let scheme = if options.security.tls.is_some() {
            url::TLS_SCHEME
        } else {
            url::SCHEME
        };
        let url = format!("{scheme}{}", endpoints.join(","));
        // The same checks as a URL's, so both ways in accept the same endpoints.
        let (endpoints, _) = url::parse(&url)?;
        options.security.check(&url)?;
        options
            .security
            .apply(etcd_client::ConnectOptions::new(), &url)?;
        if options.page_size == 0 || options.page_size > MAX_PAGE {
            return Err(StoreError::Backend(format!(
                "{url}: page_size {} is out of range (1–{MAX_PAGE})",
                options.page_size
            )));
        }
        if options.timeout.is_zero() || options.watch_check.is_zero() {
            return Err(StoreError::Backend(format!(
                "{url}: timeout and watch_check must be positive"
            )));
        }
        Ok(EtcdStore {
            inner: Arc::new(Inner {
                url: format!("{scheme}{}", endpoints.join(",")),
                endpoints,
                options,
                client: Mutex::new(None),
                clusters: Mutex::default(),
            }),
        })
    }

    /// Connects to `endpoints` with the default options and checks that etcd answers,
    /// failing with [`StoreError::Unavailable`] within the timeout if it does not.
    pub async fn connect<I, S>(endpoints: I) -> Result<Self, StoreError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let store = Self::new(endpoints, EtcdOptions::default())?;
        store.revision().await?;
        Ok(store)
    }

    /// The store an `etcd://HOST:PORT[,HOST:PORT…]` URL names, with the default options.
    /// Makes no connection.
    pub fn from_url(url: &str) -> Result<Self, StoreError> {
        Self::from_url_with(url, EtcdOptions::default())
    }

    /// The store an `etcd://` or `etcds://` URL names, with `options`. Makes no
    /// connection. `etcds://` needs [`EtcdSecurity::tls`] (its CA file) and `etcd://`
    /// refuses it: the URL and the options must agree.
    pub fn from_url_with(url: &str, options: EtcdOptions) -> Result<Self, StoreError> {
        let (endpoints, tls) = url::parse(url)?;
        let reason = match (tls, options.security.tls.is_some()) {
            (true, false) => Some(
                "etcds:// needs the CA certificate that signed etcd's server certificate \
                 (a CA file)",
            ),
            (false, true) => Some("TLS files were given for a plain etcd:// URL; write etcds://"),
            _ => None,
        };
        if let Some(reason) = reason {
            return Err(StoreError::InvalidUrl {
                url: url.to_owned(),
                reason: reason.into(),
            });
        }
        Self::new(endpoints, options)
    }

    /// The endpoints, `HOST:PORT` each.
    pub fn endpoints(&self) -> &[String] {
        &self.inner.endpoints
    }

    /// The options this store was made with.
    pub fn options(&self) -> &EtcdOptions {
        &self.inner.options
    }

    /// etcd's current store-wide revision.
    pub async fn revision(&self) -> Result<u64, StoreError> {
        let what = "read the revision";
        // A point read of the key "\0" (which no fleetshard key is): O(log n) for etcd, and
        // the answer's header carries the revision.
        let resp = self
            .call(what, |mut kv| async move {
                kv.get(vec![0], Some(GetOptions::new().with_count_only()))
                    .await
            })
            .await?;
        self.header_revision(resp.header().map(|h| h.revision()), what)
    }

    fn full_key(&self, key: &str) -> String {
        format!("{}{key}", self.inner.options.key_prefix)
    }

    /// An etcd key-value as an [`Entry`], without the store's key prefix.
    fn entry(&self, kv: &KeyValue) -> Result<Entry, StoreError> {
        let key = std::str::from_utf8(kv.key())
            .ok()
            .and_then(|k| k.strip_prefix(self.inner.options.key_prefix.as_str()))
            .ok_or_else(|| {
                StoreError::Backend(format!(
                    "{}: etcd returned the key {:?}, which is not UTF-8 under the prefix {:?}",
                    self.inner.url,
                    String::from_utf8_lossy(kv.key()),
                    self.inner.options.key_prefix
                ))
            })?;
        Ok(Entry {
            key: key.to_owned(),
            value: kv.value().to_vec(),
            version: self.revision_of(kv.mod_revision(), key)?,
        })
    }

    fn revision_of(&self, rev: i64, what: &str) -> Result<u64, StoreError> {
        u64::try_from(rev).ok().filter(|&r| r > 0).ok_or_else(|| {
            StoreError::Backend(format!(
                "{}: etcd returned revision {rev} for {what}",
                self.inner.url
            ))
        })
    }

    fn header_revision(&self, rev: Option<i64>, what: &str) -> Result<u64, StoreError> {
        let rev = rev.ok_or_else(|| {
            StoreError::Backend(format!(
                "{}: {what}: etcd's answer has no header",
                self.inner.url
            ))
        })?;
        self.revision_of(rev, what)
    }

    /// The comparison a precondition needs, or a conflict decided without asking etcd
    /// (a version that no key can have).
    fn compare(
        &self,
        key: &str,
        full: &str,
        pre: Precondition,
    ) -> Result<Vec<Compare>, StoreError> {
        Ok(match pre {
            Precondition::Any => Vec::new(),
            // A key that does not exist has create_revision 0 in etcd's comparisons.
            Precondition::Absent => vec![Compare::create_revision(full, CompareOp::Equal, 0)],
            Precondition::Version(v) => match i64::try_from(v) {
                // An absent key compares as mod_revision 0, so 0 must not reach etcd.
                Ok(v) if v > 0 => vec![Compare::mod_revision(full, CompareOp::Equal, v)],
                _ => {
                    return Err(StoreError::Conflict {
                        key: key.to_owned(),
                    });
                }
            },
        })
    }

    async fn list_once(&self, prefix: &str) -> Result<Listing, (Kind, StoreError)> {
        let full = self.full_key(prefix);
        let (mut start, end) = range_of(&full);
        let what = format!("list {prefix:?}");
        let mut revision: Option<i64> = None;
        let mut entries = Vec::new();
        loop {
            let mut opts = GetOptions::new()
                .with_range(end.clone())
                .with_limit(i64::from(self.inner.options.page_size));
            if let Some(r) = revision {
                opts = opts.with_revision(r);
            }
            let key = start.clone();
            let resp = self
                .call_kind(&what, |mut kv| async move { kv.get(key, Some(opts)).await })
                .await?;
            let backend = |e| (Kind::Backend, e);
            if revision.is_none() {
                let r = self
                    .header_revision(resp.header().map(|h| h.revision()), &what)
                    .map_err(backend)?;
                revision = Some(r as i64);
            }
            for kv in resp.kvs() {
                entries.push(self.entry(kv).map_err(backend)?);
            }
            match resp.kvs().last() {
                Some(last) if resp.more() => {
                    // The next page starts just after the last key.
                    start = last.key().to_vec();
                    start.push(0);
                }
                _ => break,
            }
        }
        let revision = revision.map_or(0, |r| r as u64);
        Ok(Listing { entries, revision })
    }
}

/// The etcd key range `[start, end)` of every key starting with `prefix`.
pub(crate) fn range_of(prefix: &str) -> (Vec<u8>, Vec<u8>) {
    let start = prefix.as_bytes().to_vec();
    let mut end = start.clone();
    // The end is the prefix with its last byte below 0xff incremented, and what follows
    // dropped; a prefix of only 0xff bytes (or none) has no end: `\0` means "to the last
    // key" in etcd.
    while let Some(&last) = end.last() {
        if last < 0xff {
            *end.last_mut().expect("not empty") += 1;
            break;
        }
        end.pop();
    }
    if end.is_empty() {
        end = vec![0];
    }
    // etcd refuses an empty key; `\0` with end `\0` means every key.
    let start = if start.is_empty() { vec![0] } else { start };
    (start, end)
}

impl Store for EtcdStore {
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Entry>, StoreError>> {
        async move {
            let full = self.full_key(key);
            let resp = self
                .call(&format!("get {key:?}"), |mut kv| async move {
                    kv.get(full, None).await
                })
                .await?;
            resp.kvs().first().map(|kv| self.entry(kv)).transpose()
        }
        .boxed()
    }

    fn list<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Listing, StoreError>> {
        async move {
            let mut attempt = 1;
            loop {
                match self.list_once(prefix).await {
                    Ok(listing) => return Ok(listing),
                    // A later page's pinned revision was compacted meanwhile: start over.
                    Err((Kind::Compacted, _)) if attempt < LIST_ATTEMPTS => attempt += 1,
                    Err((_, e)) => return Err(e),
                }
            }
        }
        .boxed()
    }

    fn put<'a>(
        &'a self,
        key: &'a str,
        value: Vec<u8>,
        pre: Precondition,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        async move {
            let full = self.full_key(key);
            let txn = Txn::new()
                .when(self.compare(key, &full, pre)?)
                .and_then(vec![TxnOp::put(full, value, None)]);
            let what = format!("put {key:?}");
            let resp = self
                .call(&what, |mut kv| async move { kv.txn(txn).await })
                .await?;
            if !resp.succeeded() {
                return Err(StoreError::Conflict {
                    key: key.to_owned(),
                });
            }
            // A transaction that wrote made exactly one new revision: the key's mod_revision.
            self.header_revision(resp.header().map(|h| h.revision()), &what)
        }
        .boxed()
    }

    /// One transaction: every comparison, then every write (`many.rs`).
    fn put_each(&self, puts: Vec<Put>) -> BoxFuture<'_, Vec<Result<u64, StoreError>>> {
        self.put_many(puts).boxed()
    }

    /// One read-only transaction of every read (`many.rs`).
    fn get_each(&self, keys: Vec<String>) -> BoxFuture<'_, Vec<Result<Option<Entry>, StoreError>>> {
        self.get_many(keys).boxed()
    }

    fn delete<'a>(
        &'a self,
        key: &'a str,
        pre: Precondition,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        async move {
            let full = self.full_key(key);
            let ops = match pre {
                // "Delete it if it does not exist" has nothing to delete.
                Precondition::Absent => Vec::new(),
                _ => vec![TxnOp::delete(full.clone(), None)],
            };
            let txn = Txn::new()
                .when(self.compare(key, &full, pre)?)
                .and_then(ops);
            let resp = self
                .call(&format!("delete {key:?}"), |mut kv| async move {
                    kv.txn(txn).await
                })
                .await?;
            if resp.succeeded() {
                Ok(())
            } else {
                Err(StoreError::Conflict {
                    key: key.to_owned(),
                })
            }
        }
        .boxed()
    }

    fn wait_for_change<'a>(
        &'a self,
        prefix: &'a str,
        since: u64,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        watch::wait_for_change(self, prefix, since).boxed()
    }

    fn describe(&self) -> String {
        match self.inner.options.key_prefix.as_str() {
            "" => self.inner.url.clone(),
            p => format!("{} (key prefix {p:?})", self.inner.url),
        }
    }

    fn check_identity(&self) -> BoxFuture<'_, Result<StoreIdentity, StoreError>> {
        self.identity().boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cover_exactly_the_prefix() {
        assert_eq!(range_of("a/"), (b"a/".to_vec(), b"a0".to_vec()));
        assert_eq!(range_of(""), (vec![0], vec![0]));
        assert_eq!(range_of("a\u{7f}"), (b"a\x7f".to_vec(), b"a\x80".to_vec()));
        // "ÿ" is 0xc3 0xbf in UTF-8: the last byte is incremented.
        assert_eq!(range_of("ÿ").1, vec![0xc3, 0xc0]);
    }

    #[test]
    fn bad_options_and_endpoints_are_refused() {
        let bad_page = EtcdOptions {
            page_size: 0,
            ..EtcdOptions::default()
        };
        assert!(EtcdStore::new(["a:1"], bad_page).is_err());
        assert!(matches!(
            EtcdStore::new(["a:1", ""], EtcdOptions::default()),
            Err(StoreError::InvalidUrl { .. })
        ));
        let s = EtcdStore::from_url("etcd://a:1,b").unwrap();
        assert_eq!(s.endpoints(), ["a:1", "b:2379"]);
        assert_eq!(s.describe(), "etcd://a:1,b:2379");
    }

    #[tokio::test]
    async fn impossible_versions_conflict_without_asking() {
        // Nothing listens on port 1: a request would fail as Unavailable, not Conflict.
        let s = EtcdStore::from_url("etcd://127.0.0.1:1").unwrap();
        for v in [0, u64::MAX] {
            assert!(matches!(
                s.put("k", vec![], Precondition::Version(v)).await,
                Err(StoreError::Conflict { .. })
            ));
            assert!(matches!(
                s.delete("k", Precondition::Version(v)).await,
                Err(StoreError::Conflict { .. })
            ));
        }
    }

    #[tokio::test]
    async fn nothing_listening_is_unavailable_within_the_timeout() {
        let options = EtcdOptions {
            timeout: Duration::from_millis(300),
            ..EtcdOptions::default()
        };
        let s = EtcdStore::from_url_with("etcd://127.0.0.1:1", options).unwrap();
        let limit = Duration::from_secs(5);
        let r = tokio::time::timeout(limit, s.get("k"))
            .await
            .expect("bounded");
        assert!(
            matches!(r, Err(StoreError::Unavailable(ref m)) if m.contains("127.0.0.1:1")),
            "{r:?}"
        );
        let r = tokio::time::timeout(limit, s.wait_for_change("p/", 0))
            .await
            .expect("bounded");
        assert!(matches!(r, Err(StoreError::Unavailable(_))), "{r:?}");
    }
}
