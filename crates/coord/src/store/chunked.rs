//! Values larger than a backend accepts, split into parts: a [`Store`] decorator.
//!
//! etcd refuses requests over 1.5 MiB and a Kubernetes ConfigMap holds at most 1 MiB, while
//! the committed assignment of a 50,000-cluster fleet is about 2 MB of JSON. So a value
//! above [`ChunkedStore::limit`] is written as *parts* under [`PARTS_PREFIX`] (outside any
//! fleet root, so listings never carry them) and the key itself gets a small *manifest*:
//! a magic line and `{"id", "parts", "len"}`, where `id` is the content's hash.
//!
//! - **Atomic for readers.** Parts are content-addressed and written first; the manifest
//!   is then written with the caller's compare-and-swap, and that one write is the commit.
//!   A reader sees either the old manifest or the new one, each naming parts that exist.
//! - **Read once.** A listing returns the manifest; its parts are fetched and checked (the
//!   hash) only the first time that version is seen, then served from a cache keyed by
//!   (key, version). A replica listing every 200 ms re-reads megabytes only when the
//!   assignment actually changed.
//! - **Collected.** After a successful write the parts of every other content but the new
//!   one and the one it replaced are deleted, so a reader one generation behind still
//!   finds its parts. A reader two generations behind gets `Unavailable` and reads again.
//!
//! Small values are stored as they are, byte for byte (Argo CD reads our ConfigMap).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use futures::FutureExt;
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

use super::{Entry, Listing, Precondition, Put, Store, StoreError, StoreIdentity};

/// Where parts live: `~parts/<hash of the key>/<id>/<n>` (the key's hash keeps one key's
/// parts apart from another's whatever characters keys hold).
pub const PARTS_PREFIX: &str = "~parts/";

/// The default largest value stored whole: 512 KiB, half of the smallest backend limit.
pub const DEFAULT_LIMIT: usize = 512 * 1024;

/// First line of a manifest; no JSON value starts with a NUL byte.
const MAGIC: &[u8] = b"\0fleetshard-parts\n";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    /// Hex hash of the whole value: names its parts and checks them.
    id: String,
    /// How many parts.
    parts: u32,
    /// Total length in bytes.
    len: u64,
}

/// A [`Store`] that splits large values into parts (see the module docs).
pub struct ChunkedStore {
    inner: Arc<dyn Store>,
    limit: usize,
    /// Key → the last value assembled for it.
    cache: Mutex<HashMap<String, Assembled>>,
}

/// A large value read (or written) once, kept for the next listings.
#[derive(Debug, Clone)]
struct Assembled {
    /// The manifest's version.
    version: u64,
    value: Arc<Vec<u8>>,
    /// The content id its parts are stored under.
    id: String,
}

impl std::fmt::Debug for ChunkedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkedStore")
            .field("inner", &self.inner.describe())
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

fn hash_hex(bytes: &[u8]) -> String {
    let h = blake2b_simd::Params::new().hash_length(16).hash(bytes);
    h.to_hex().to_string()
}

fn manifest_of(value: &[u8]) -> Option<Result<Manifest, String>> {
    let body = value.strip_prefix(MAGIC)?;
    Some(serde_json::from_slice(body).map_err(|e| e.to_string()))
}

/// The prefix of `key`'s parts.
fn parts_of(key: &str) -> String {
    format!("{PARTS_PREFIX}{}/", hash_hex(key.as_bytes()))
}

fn part_key(key: &str, id: &str, n: u32) -> String {
    format!("{}{id}/{n:06}", parts_of(key))
}

impl ChunkedStore {
    /// Wraps `inner`, storing values above `limit` bytes (at least 1) in parts.
    pub fn new(inner: Arc<dyn Store>, limit: usize) -> Self {
        ChunkedStore {
            inner,
            limit: limit.max(1),
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The largest value stored whole.
    pub fn limit(&self) -> usize {
        self.limit
    }

    fn cached(&self, key: &str, version: u64) -> Option<Arc<Vec<u8>>> {
        let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache
            .get(key)
            .filter(|a| a.version == version)
            .map(|a| a.value.clone())
    }

    fn cached_id(&self, key: &str) -> Option<String> {
        let cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache.get(key).map(|a| a.id.clone())
    }

    fn remember(&self, key: &str, version: u64, value: Arc<Vec<u8>>, id: String) {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache.insert(key.to_owned(), Assembled { version, value, id });
    }

    /// The entry as callers see it: a manifest replaced by the value it names.
    async fn resolve(&self, mut entry: Entry) -> Result<Entry, StoreError> {
        let Some(manifest) = manifest_of(&entry.value) else {
            return Ok(entry);
        };
        if let Some(v) = self.cached(&entry.key, entry.version) {
            entry.value = v.as_ref().clone();
            return Ok(entry);
        }
        let m = manifest.map_err(|e| {
            StoreError::Backend(format!("{}: unreadable parts manifest: {e}", entry.key))
        })?;
        let prefix = format!("{}{}/", parts_of(&entry.key), m.id);
        let parts = self.inner.list(&prefix).await?;
        let mut value = Vec::with_capacity(m.len as usize);
        for p in &parts.entries {
            value.extend_from_slice(&p.value);
        }
        if parts.entries.len() != m.parts as usize
            || value.len() as u64 != m.len
            || hash_hex(&value) != m.id
        {
            // Collected after two newer writes, or not all there: read the key again.
            return Err(StoreError::Unavailable(format!(
                "{}: version {} names parts that are gone or incomplete; read again",
                entry.key, entry.version
            )));
        }
        let value = Arc::new(value);
        self.remember(&entry.key, entry.version, value.clone(), m.id);
        entry.value = value.as_ref().clone();
        Ok(entry)
    }

    async fn put_parts(
        &self,
        key: &str,
        value: Vec<u8>,
        pre: Precondition,
    ) -> Result<u64, StoreError> {
        let id = hash_hex(&value);
        let chunks: Vec<&[u8]> = value.chunks(self.limit).collect();
        for (n, chunk) in chunks.iter().enumerate() {
            // Content-addressed: rewriting the same part is harmless.
            self.inner
                .put(
                    &part_key(key, &id, n as u32),
                    chunk.to_vec(),
                    Precondition::Any,
                )
                .await?;
        }
        let manifest = Manifest {
            id: id.clone(),
            parts: chunks.len() as u32,
            len: value.len() as u64,
        };
        let mut head = MAGIC.to_vec();
        head.extend(serde_json::to_vec(&manifest).unwrap_or_default());
        let previous = self.cached_id(key);
        let version = self.inner.put(key, head, pre).await?;
        self.remember(key, version, Arc::new(value), id.clone());
        let keep: BTreeSet<String> = [Some(id), previous].into_iter().flatten().collect();
        self.collect(key, &keep).await;
        Ok(version)
    }

    /// Deletes parts of `key` whose id is not in `keep` (best effort: a failure leaves
    /// garbage for the next write to collect, never a broken value).
    async fn collect(&self, key: &str, keep: &BTreeSet<String>) {
        let prefix = parts_of(key);
        let Ok(listing) = self.inner.list(&prefix).await else {
            return;
        };
        for e in listing.entries {
            let id = e.key[prefix.len()..].split('/').next().unwrap_or_default();
            if !keep.contains(id) {
                let _ = self.inner.delete(&e.key, Precondition::Any).await;
            }
        }
    }
}

impl Store for ChunkedStore {
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Entry>, StoreError>> {
        async move {
            match self.inner.get(key).await? {
                Some(e) => Ok(Some(self.resolve(e).await?)),
                None => Ok(None),
            }
        }
        .boxed()
    }

    fn list<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Listing, StoreError>> {
        async move {
            let listing = self.inner.list(prefix).await?;
            let mut entries = Vec::with_capacity(listing.entries.len());
            for e in listing.entries {
                if !e.key.starts_with(PARTS_PREFIX) {
                    entries.push(self.resolve(e).await?);
                }
            }
            Ok(Listing {
                entries,
                revision: listing.revision,
            })
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
            if key.starts_with(PARTS_PREFIX) {
                return Err(StoreError::Backend(format!(
                    "{key}: keys under {PARTS_PREFIX} are reserved for parts of large values"
                )));
            }
            if value.len() > self.limit || value.starts_with(MAGIC) {
                self.put_parts(key, value, pre).await
            } else {
                self.inner.put(key, value, pre).await
            }
        }
        .boxed()
    }

    /// Small values go to the inner store's [`Store::put_each`] together; a value written
    /// as parts, and a reserved key, go through [`Store::put`] alone.
    fn put_each(&self, puts: Vec<Put>) -> BoxFuture<'_, Vec<Result<u64, StoreError>>> {
        async move {
            let plain = |p: &Put| {
                !p.key.starts_with(PARTS_PREFIX)
                    && p.value.len() <= self.limit
                    && !p.value.starts_with(MAGIC)
            };
            let mut outcomes: Vec<Option<Result<u64, StoreError>>> = vec![None; puts.len()];
            let (mut together, mut at) = (Vec::new(), Vec::new());
            for (i, p) in puts.into_iter().enumerate() {
                if plain(&p) {
                    together.push(p);
                    at.push(i);
                } else {
                    outcomes[i] = Some(self.put(&p.key, p.value, p.pre).await);
                }
            }
            for (i, r) in at.into_iter().zip(self.inner.put_each(together).await) {
                outcomes[i] = Some(r);
            }
            outcomes
                .into_iter()
                .map(|r| r.unwrap_or_else(|| Err(StoreError::Backend("no outcome".into()))))
                .collect()
        }
        .boxed()
    }

    fn get_each(&self, keys: Vec<String>) -> BoxFuture<'_, Vec<Result<Option<Entry>, StoreError>>> {
        async move {
            let mut outcomes = Vec::with_capacity(keys.len());
            for r in self.inner.get_each(keys).await {
                outcomes.push(match r {
                    Ok(Some(e)) => self.resolve(e).await.map(Some),
                    other => other,
                });
            }
            outcomes
        }
        .boxed()
    }

    fn delete<'a>(
        &'a self,
        key: &'a str,
        pre: Precondition,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        async move {
            self.inner.delete(key, pre).await?;
            self.collect(key, &BTreeSet::new()).await;
            Ok(())
        }
        .boxed()
    }

    fn wait_for_change<'a>(
        &'a self,
        prefix: &'a str,
        since: u64,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        self.inner.wait_for_change(prefix, since)
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn check_identity(&self) -> BoxFuture<'_, Result<StoreIdentity, StoreError>> {
        self.inner.check_identity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::conformance;
    use crate::store::memory::MemoryStore;

    fn chunked(limit: usize) -> (ChunkedStore, MemoryStore) {
        let mem = MemoryStore::new();
        (ChunkedStore::new(Arc::new(mem.clone()), limit), mem)
    }

    #[tokio::test]
    async fn conforms_when_every_value_is_split() {
        // 4 bytes: every value of the suite is stored in parts.
        conformance::run_all(&chunked(4).0).await;
    }

    #[tokio::test]
    async fn conforms_with_the_default_limit() {
        conformance::run_all(&chunked(DEFAULT_LIMIT).0).await;
    }

    #[tokio::test]
    async fn small_values_are_stored_byte_for_byte_and_large_ones_in_parts() {
        let (store, mem) = chunked(10);
        store
            .put("fs/small", b"0123456789".to_vec(), Precondition::Absent)
            .await
            .unwrap();
        assert_eq!(
            mem.get("fs/small").await.unwrap().unwrap().value,
            b"0123456789"
        );
        let big: Vec<u8> = (0..=255u8).cycle().take(95).collect();
        let v = store
            .put("fs/big", big.clone(), Precondition::Absent)
            .await
            .unwrap();
        let raw = mem.get("fs/big").await.unwrap().unwrap();
        assert!(raw.value.starts_with(MAGIC) && raw.value.len() < 100);
        assert_eq!(raw.version, v);
        let parts = mem.list(PARTS_PREFIX).await.unwrap();
        assert_eq!(parts.entries.len(), 10);
        assert_eq!(store.get("fs/big").await.unwrap().unwrap().value, big);
        // Listings show values, never parts, even for the empty prefix.
        let all = store.list("").await.unwrap();
        assert_eq!(
            all.entries
                .iter()
                .map(|e| e.key.as_str())
                .collect::<Vec<_>>(),
            ["fs/big", "fs/small"]
        );
        assert_eq!(all.entries[0].value, big);
        // A value that looks like a manifest is split too, so it reads back as written.
        let tricky = [MAGIC, b"{}"].concat();
        store
            .put("fs/tricky", tricky.clone(), Precondition::Absent)
            .await
            .unwrap();
        assert_eq!(store.get("fs/tricky").await.unwrap().unwrap().value, tricky);
        assert!(
            store
                .put("~parts/x", vec![1], Precondition::Any)
                .await
                .is_err()
        );
    }

    #[tokio::test]
    async fn a_reader_sees_old_or_new_and_parts_are_collected() {
        let (writer, mem) = chunked(8);
        let reader = ChunkedStore::new(Arc::new(mem.clone()), 8);
        let value_of = |g: u8| vec![g; 50];
        let mut version = writer
            .put("k", value_of(1), Precondition::Absent)
            .await
            .unwrap();
        let stale = mem.get("k").await.unwrap().unwrap();
        for g in 2..=4 {
            version = writer
                .put("k", value_of(g), Precondition::Version(version))
                .await
                .unwrap();
            assert_eq!(reader.get("k").await.unwrap().unwrap().value, value_of(g));
        }
        // Only the newest content and the one it replaced keep parts.
        let ids: BTreeSet<String> = mem
            .list(PARTS_PREFIX)
            .await
            .unwrap()
            .entries
            .iter()
            .map(|e| e.key.split('/').nth(2).unwrap().to_owned())
            .collect();
        assert_eq!(ids.len(), 2);
        // Another key's parts are apart, whatever the key (here: `k` followed by `/`).
        writer
            .put("k/x", value_of(5), Precondition::Absent)
            .await
            .unwrap();
        writer
            .put("k", value_of(6), Precondition::Any)
            .await
            .unwrap();
        assert_eq!(reader.get("k/x").await.unwrap().unwrap().value, value_of(5));
        version = mem.get("k").await.unwrap().unwrap().version;
        // A manifest whose parts were collected is an error to retry, not garbage.
        let fresh = ChunkedStore::new(Arc::new(mem.clone()), 8);
        let err = fresh.resolve(stale).await.unwrap_err();
        assert!(matches!(err, StoreError::Unavailable(_)), "{err}");
        // A conflicting write changes nothing visible.
        let err = writer
            .put("k", value_of(9), Precondition::Version(version - 1))
            .await;
        assert!(matches!(err, Err(StoreError::Conflict { .. })));
        assert_eq!(reader.get("k").await.unwrap().unwrap().value, value_of(6));
        // Deleting the keys deletes their parts.
        writer.delete("k", Precondition::Any).await.unwrap();
        writer.delete("k/x", Precondition::Any).await.unwrap();
        assert!(mem.list(PARTS_PREFIX).await.unwrap().entries.is_empty());
    }

    #[tokio::test]
    async fn a_corrupted_part_is_detected() {
        let (store, mem) = chunked(8);
        store
            .put("k", vec![7; 30], Precondition::Absent)
            .await
            .unwrap();
        let part = mem.list(PARTS_PREFIX).await.unwrap().entries[1].key.clone();
        mem.put(&part, vec![0; 8], Precondition::Any).await.unwrap();
        let fresh = ChunkedStore::new(Arc::new(mem), 8);
        assert!(matches!(
            fresh.get("k").await,
            Err(StoreError::Unavailable(_))
        ));
    }
}
