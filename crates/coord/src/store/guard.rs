//! [`GuardedStore`]: a [`Store`] decorator that makes "the store was replaced" final.
//!
//! A backend notices that another store now stands behind its URL ([`StoreError::Replaced`]:
//! a SQLite file deleted or renamed over, another etcd cluster answering, a namespace
//! re-created) either in an operation's answer or when asked ([`Store::check_identity`]).
//! Either way, from the first such report on, this decorator refuses every operation with
//! that error, whatever the backend would now say: a replica must not go on with a store
//! that holds none of its fleet's records (it would form a second fleet beside the first),
//! nor come back to the first one if it reappears. Its lease then lapses at its deadline
//! and its work stops, exactly as when the store is unreachable; only a restart opens a
//! store again.
//!
//! The identity is also checked before an operation when the last confirmed check is
//! [`GuardedStore::new`]'s `every` old or older (at most once per renew period: a backend
//! whose check costs a request, like Kubernetes', pays one request per period). The
//! decision is here, once, for every backend and both protocols; the reason is published
//! ([`GuardedStore::subscribe`]) for readiness and metrics, and logged once, as an error.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::sync::watch;
use tokio::time::Instant;

use super::{Entry, Listing, Precondition, Put, Store, StoreError, StoreIdentity};

/// How often the identity is checked by default: below the default renew period (1.25 s),
/// so that every renewal is preceded by a check at most one period old.
pub const DEFAULT_CHECK_EVERY: Duration = Duration::from_secs(1);

/// A [`Store`] that refuses everything once its store was found replaced (module docs).
pub struct GuardedStore {
    inner: Arc<dyn Store>,
    every: Duration,
    /// When the identity was last confirmed.
    checked: Mutex<Option<Instant>>,
    /// `Some(what)` from the first report on, forever.
    replaced: watch::Sender<Option<String>>,
}

impl std::fmt::Debug for GuardedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuardedStore")
            .field("inner", &self.inner.describe())
            .field("every", &self.every)
            .field("replaced", &self.replaced())
            .finish_non_exhaustive()
    }
}

impl GuardedStore {
    /// Guards `inner`, checking its identity before an operation whenever the last
    /// confirmed check is `every` old (zero: before every operation).
    pub fn new(inner: Arc<dyn Store>, every: Duration) -> Self {
        GuardedStore {
            inner,
            every,
            checked: Mutex::new(None),
            replaced: watch::channel(None).0,
        }
    }

    /// Why the store is refused (what replaced it), once it is.
    pub fn replaced(&self) -> Option<String> {
        self.replaced.borrow().clone()
    }

    /// Follows [`GuardedStore::replaced`]: `None` until the store is found replaced.
    pub fn subscribe(&self) -> watch::Receiver<Option<String>> {
        self.replaced.subscribe()
    }

    fn refusal(&self) -> Option<StoreError> {
        self.replaced().map(|what| StoreError::Replaced { what })
    }

    /// Records the first report (later ones keep the first reason) and logs it once.
    fn trip(&self, what: &str) {
        let store = self.inner.describe();
        self.replaced.send_if_modified(|r| {
            if r.is_some() {
                return false;
            }
            tracing::error!(
                %store,
                "store replaced: {what}. This process uses the store no more: its leases lapse \
                 at their deadlines and its work stops then; restart it to use the store now \
                 at this address"
            );
            *r = Some(what.to_owned());
            true
        });
    }

    /// Notes an operation's outcome: a `Replaced` answer trips the guard.
    fn seen<T>(&self, r: Result<T, StoreError>) -> Result<T, StoreError> {
        if let Err(StoreError::Replaced { what }) = &r {
            self.trip(what);
        }
        r
    }

    fn due(&self) -> bool {
        let checked = self.checked.lock().unwrap_or_else(|p| p.into_inner());
        checked.is_none_or(|at| at.elapsed() >= self.every)
    }

    /// Refuses once tripped; otherwise checks the identity first when a check is due.
    async fn admit(&self) -> Result<(), StoreError> {
        if let Some(e) = self.refusal() {
            return Err(e);
        }
        if self.due() {
            match self.inner.check_identity().await {
                Ok(_) => {
                    *self.checked.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
                }
                Err(StoreError::Replaced { what }) => {
                    self.trip(&what);
                    return Err(StoreError::Replaced { what });
                }
                // The operation meets the same trouble and reports it; check again next time.
                Err(_) => {}
            }
        }
        Ok(())
    }

    async fn guarded<T>(&self, op: BoxFuture<'_, Result<T, StoreError>>) -> Result<T, StoreError> {
        self.admit().await?;
        let r = op.await;
        self.seen(r)
    }
}

impl Store for GuardedStore {
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Entry>, StoreError>> {
        self.guarded(self.inner.get(key)).boxed()
    }

    fn list<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Listing, StoreError>> {
        self.guarded(self.inner.list(prefix)).boxed()
    }

    fn put<'a>(
        &'a self,
        key: &'a str,
        value: Vec<u8>,
        pre: Precondition,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        self.guarded(self.inner.put(key, value, pre)).boxed()
    }

    fn delete<'a>(
        &'a self,
        key: &'a str,
        pre: Precondition,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.guarded(self.inner.delete(key, pre)).boxed()
    }

    fn put_each(&self, puts: Vec<Put>) -> BoxFuture<'_, Vec<Result<u64, StoreError>>> {
        async move {
            if let Err(e) = self.admit().await {
                return vec![Err(e); puts.len()];
            }
            let outcomes = self.inner.put_each(puts).await;
            outcomes.into_iter().map(|r| self.seen(r)).collect()
        }
        .boxed()
    }

    fn get_each(&self, keys: Vec<String>) -> BoxFuture<'_, Vec<Result<Option<Entry>, StoreError>>> {
        async move {
            if let Err(e) = self.admit().await {
                return vec![Err(e); keys.len()];
            }
            let outcomes = self.inner.get_each(keys).await;
            outcomes.into_iter().map(|r| self.seen(r)).collect()
        }
        .boxed()
    }

    fn wait_for_change<'a>(
        &'a self,
        prefix: &'a str,
        since: u64,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        async move {
            let mut tripped = self.subscribe();
            let wait = self.guarded(self.inner.wait_for_change(prefix, since));
            tokio::select! {
                r = wait => r,
                // Found replaced by another operation meanwhile: end the wait now.
                _ = tripped.wait_for(Option::is_some) => {
                    Err(self.refusal().unwrap_or_else(|| StoreError::Replaced {
                        what: "the store was replaced".into(),
                    }))
                }
            }
        }
        .boxed()
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn check_identity(&self) -> BoxFuture<'_, Result<StoreIdentity, StoreError>> {
        async move {
            if let Some(e) = self.refusal() {
                return Err(e);
            }
            let r = self.inner.check_identity().await;
            if r.is_ok() {
                *self.checked.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
            }
            self.seen(r)
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests;
