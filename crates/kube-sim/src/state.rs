//! The state one server shares between its HTTP handlers, its watch streams and the test
//! handle.

use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Duration;

use tokio::sync::watch;

use super::crd;
use super::faults::Faults;
use super::rbac::NamespacedToken;
use super::registry::{Registry, ResourceKind};
use super::store::Store;
use super::writes::WriteLog;

/// Shared server state.
#[derive(Debug)]
pub struct Shared {
    /// The kinds served without any CRD (the configuration's).
    base: Vec<ResourceKind>,
    /// The served kinds: `base` and those of the stored CRDs.
    registry: RwLock<Arc<Registry>>,
    store: Mutex<Store>,
    /// The store revision after the latest write; watch streams wake on it.
    pub revision: watch::Sender<u64>,
    /// How often watch streams that allow bookmarks send one.
    pub bookmark_interval: watch::Sender<Duration>,
    /// Bumped to make every bookmark-allowing watch send a bookmark now.
    pub bookmark_now: watch::Sender<u64>,
    /// Bumped to end every open watch stream (clients reconnect).
    pub close_watches: watch::Sender<u64>,
    /// Set when the server shuts down.
    pub shutdown: watch::Sender<bool>,
    /// Fault rules and request counters.
    pub faults: Faults,
    /// The server's address, for discovery's `serverAddressByClientCIDRs`.
    pub address: String,
    /// The token every request must carry (`Authorization: Bearer …`), if any.
    pub bearer_token: Option<String>,
    /// Tokens that reach only some namespaces (see the `rbac` module).
    pub namespaced_tokens: Vec<NamespacedToken>,
    /// Every write request received (the newest ones).
    pub writes: WriteLog,
}

impl Shared {
    /// State over `store`, serving the kinds `base`.
    pub fn new(
        base: &[ResourceKind],
        store: Store,
        bookmark_interval: Duration,
        address: String,
        bearer_token: Option<String>,
        namespaced_tokens: Vec<NamespacedToken>,
        write_log_limit: usize,
    ) -> Self {
        let rev = store.revision();
        Self {
            base: base.to_vec(),
            registry: RwLock::new(Arc::new(Registry::new(base))),
            store: Mutex::new(store),
            revision: watch::Sender::new(rev),
            bookmark_interval: watch::Sender::new(bookmark_interval),
            bookmark_now: watch::Sender::new(0),
            close_watches: watch::Sender::new(0),
            shutdown: watch::Sender::new(false),
            faults: Faults::default(),
            address,
            bearer_token,
            namespaced_tokens,
            writes: WriteLog::new(write_log_limit),
        }
    }

    /// The kinds served now.
    pub fn registry(&self) -> Arc<Registry> {
        self.registry
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Reads the store.
    pub fn read(&self) -> MutexGuard<'_, Store> {
        // A panic while holding the lock can only come from a bug in the fake; keep
        // serving rather than cascade.
        self.store.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs a write against a copy of the store that is then thrown away (`dryRun=All`).
    pub fn dry_run<R>(&self, f: impl FnOnce(&mut Store) -> R) -> R {
        let mut copy = self.read().clone();
        f(&mut copy)
    }

    /// Runs a write against the store (and, when it touched a CRD, what the real server's
    /// CRD controller would then do: see [`crd::reconcile`]), then wakes watch streams.
    pub fn write<R>(&self, f: impl FnOnce(&mut Store) -> R) -> R {
        let (r, rev) = {
            let mut s = self.read();
            let before = s.revision();
            let r = f(&mut s);
            if s.revision() != before && crd::touched(&s, before) {
                let current = self.registry();
                if let Some(next) = crd::reconcile(&mut s, &self.base, &current) {
                    *self.registry.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(next);
                }
            }
            (r, s.revision())
        };
        self.revision.send_if_modified(|cur| {
            let changed = *cur != rev;
            *cur = rev;
            changed
        });
        r
    }
}
