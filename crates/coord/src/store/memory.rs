//! `memory://`: the store in one process's memory, for tests and single-process runs.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::sync::watch;

use super::{Entry, Listing, Precondition, Store, StoreError};

/// An in-memory [`Store`]. Clones share the same data.
#[derive(Debug, Clone)]
pub struct MemoryStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    data: Mutex<Data>,
    revision: watch::Sender<u64>,
}

#[derive(Debug, Default)]
struct Data {
    revision: u64,
    /// key → (value, version); the version is the revision of the last write.
    entries: BTreeMap<String, (Vec<u8>, u64)>,
    /// key → revision of its deletion, so watchers see deletes too.
    deleted: BTreeMap<String, u64>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        MemoryStore {
            inner: Arc::new(Inner {
                data: Mutex::new(Data::default()),
                revision: watch::channel(0).0,
            }),
        }
    }

    fn data(&self) -> MutexGuard<'_, Data> {
        // A panic while holding the lock cannot leave the map half-written (every update is
        // a single insert or remove), so a poisoned lock is still consistent.
        self.inner.data.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn check(data: &Data, key: &str, pre: Precondition) -> Result<(), StoreError> {
        if pre.admits(data.entries.get(key).map(|e| e.1)) {
            Ok(())
        } else {
            Err(StoreError::Conflict {
                key: key.to_owned(),
            })
        }
    }

    fn changed_since(data: &Data, prefix: &str, since: u64) -> bool {
        let range = |m: &BTreeMap<String, u64>| {
            m.range(prefix.to_owned()..)
                .take_while(|(k, _)| k.starts_with(prefix))
                .any(|(_, &r)| r > since)
        };
        range(&data.deleted)
            || data
                .entries
                .range(prefix.to_owned()..)
                .take_while(|(k, _)| k.starts_with(prefix))
                .any(|(_, e)| e.1 > since)
    }
}

impl Store for MemoryStore {
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Entry>, StoreError>> {
        let entry = self.data().entries.get(key).map(|(v, ver)| Entry {
            key: key.to_owned(),
            value: v.clone(),
            version: *ver,
        });
        futures::future::ready(Ok(entry)).boxed()
    }

    fn list<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Listing, StoreError>> {
        let data = self.data();
        let entries = data
            .entries
            .range(prefix.to_owned()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, (v, ver))| Entry {
                key: k.clone(),
                value: v.clone(),
                version: *ver,
            })
            .collect();
        let listing = Listing {
            entries,
            revision: data.revision,
        };
        futures::future::ready(Ok(listing)).boxed()
    }

    fn put<'a>(
        &'a self,
        key: &'a str,
        value: Vec<u8>,
        pre: Precondition,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        let result = {
            let mut data = self.data();
            Self::check(&data, key, pre).map(|()| {
                data.revision += 1;
                let version = data.revision;
                data.entries.insert(key.to_owned(), (value, version));
                data.deleted.remove(key);
                version
            })
        };
        if let Ok(rev) = result {
            self.inner.revision.send_replace(rev);
        }
        futures::future::ready(result).boxed()
    }

    fn delete<'a>(
        &'a self,
        key: &'a str,
        pre: Precondition,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let result = {
            let mut data = self.data();
            Self::check(&data, key, pre).map(|()| {
                if data.entries.remove(key).is_some() {
                    data.revision += 1;
                    let rev = data.revision;
                    data.deleted.insert(key.to_owned(), rev);
                    Some(rev)
                } else {
                    None
                }
            })
        };
        if let Ok(Some(rev)) = result {
            self.inner.revision.send_replace(rev);
        }
        futures::future::ready(result.map(|_| ())).boxed()
    }

    fn wait_for_change<'a>(
        &'a self,
        prefix: &'a str,
        since: u64,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        async move {
            let mut rx = self.inner.revision.subscribe();
            loop {
                {
                    let data = self.data();
                    if Self::changed_since(&data, prefix, since) {
                        return Ok(data.revision);
                    }
                }
                if rx.changed().await.is_err() {
                    return Err(StoreError::Unavailable("memory store dropped".into()));
                }
            }
        }
        .boxed()
    }

    fn describe(&self) -> String {
        "memory://".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn conforms() {
        super::super::conformance::run_all(&MemoryStore::new()).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn no_lost_update_across_handles() {
        let store = MemoryStore::new();
        let handles = (0..8).map(|_| std::sync::Arc::new(store.clone())).collect();
        super::super::conformance::no_lost_update(handles, 200).await;
    }
}
