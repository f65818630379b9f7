//! The state one server shares between its HTTP handlers, its watch streams and the test
//! handle.

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::watch;

use super::faults::Faults;
use super::registry::Registry;
use super::store::Store;

/// Shared server state.
#[derive(Debug)]
pub struct Shared {
    /// The served kinds.
    pub registry: Registry,
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
}

impl Shared {
    /// State over `store`.
    pub fn new(
        registry: Registry,
        store: Store,
        bookmark_interval: Duration,
        address: String,
    ) -> Self {
        let rev = store.revision();
        Self {
            registry,
            store: Mutex::new(store),
            revision: watch::Sender::new(rev),
            bookmark_interval: watch::Sender::new(bookmark_interval),
            bookmark_now: watch::Sender::new(0),
            close_watches: watch::Sender::new(0),
            shutdown: watch::Sender::new(false),
            faults: Faults::default(),
            address,
        }
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

    /// Runs a write against the store, then wakes watch streams.
    pub fn write<R>(&self, f: impl FnOnce(&mut Store) -> R) -> R {
        let (r, rev) = {
            let mut s = self.read();
            let r = f(&mut s);
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
