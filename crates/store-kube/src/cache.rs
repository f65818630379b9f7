//! The watch cache: per scope (the Leases and ConfigMaps a prefix's listing reads), one
//! LIST then one long-lived WATCH per kind, the objects kept in memory. `list` and
//! `wait_for_change` answer from it while it is fresh, so a replica costs the API server a
//! re-watch per kind every [`KubeOptions::watch_timeout`] instead of two LISTs and two
//! WATCHes per protocol step.
//!
//! # What a kind's state means
//! `rev` is the newest resourceVersion the kind's watch (or a LIST) has shown: every write
//! of that kind in the scope with a version ≤ `rev` is reflected in `objects`. Watch events
//! at or below `rev` are therefore old news and ignored, which makes a LIST that replaced
//! the objects (a relist, or a read-your-writes refresh) and the watch behind it agree.
//! A listing's revision is the smallest `rev` of the scope's kinds, so it never claims a
//! write it may not reflect.
//!
//! # Fresh
//! A kind is fresh while it has heard from the API server (a LIST, a watch opening, an
//! event or a bookmark) within [`KubeOptions::cache_freshness`]. A watch that is open but
//! silent is not enough: a stalled connection looks the same. The watch's `timeoutSeconds`
//! is kept below that bound so a quiet server still ends the watch, and its re-opening is
//! the sign of life.
//!
//! [`KubeOptions::watch_timeout`]: crate::KubeOptions::watch_timeout
//! [`KubeOptions::cache_freshness`]: crate::KubeOptions::cache_freshness

mod state;
mod watcher;

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use fleetshard_coord::store::{Entry, Listing, StoreError};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use tokio::sync::watch;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use crate::list::Plan;

pub(crate) use state::KindState;
pub(crate) use watcher::fetch;

/// The most scopes one store caches; listings of further prefixes go to the API server
/// directly (each scope holds two watches open, so an unbounded number would cost more
/// than it saves).
const MAX_SCOPES: usize = 8;
/// How many listings' per-kind revisions are remembered for `wait_for_change`.
const SERVED_MEMORY: usize = 32;

/// The two kinds a scope may watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KindName {
    /// `coordination.k8s.io/v1` Leases.
    Lease,
    /// `v1` ConfigMaps.
    ConfigMap,
}

impl KindName {
    pub(crate) fn plural(self) -> &'static str {
        match self {
            KindName::Lease => "Leases",
            KindName::ConfigMap => "ConfigMaps",
        }
    }
}

/// One kind of one scope: what to watch and what has been seen.
pub(crate) struct KindCache {
    pub(crate) kind: KindName,
    /// Label and field selectors.
    pub(crate) selectors: (Option<String>, Option<String>),
    /// Whether ConfigMaps that are not fleetshard records count, by their data keys.
    pub(crate) shared: bool,
    state: Mutex<KindState>,
    notify: watch::Sender<u64>,
}

impl KindCache {
    pub(crate) fn lock(&self) -> MutexGuard<'_, KindState> {
        // A panic while holding the lock leaves plain data behind; keep serving it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wakes everyone waiting on the scope (after a change of state).
    pub(crate) fn wake(&self) {
        self.notify.send_modify(|n| *n = n.wrapping_add(1));
    }
}

/// The cached kinds behind one [`Plan`].
pub(crate) struct Scope {
    plan: Plan,
    pub(crate) kinds: Vec<Arc<KindCache>>,
    notify: watch::Sender<u64>,
    /// Listings served: their revision and each kind's `rev` then (the smallest, if two
    /// listings had one revision), so that a wait from that revision is not woken by what
    /// the listing already showed.
    served: Mutex<Vec<(u64, Vec<u64>)>>,
}

/// What a read of the cache found.
pub(crate) enum Read {
    /// The listing.
    Listing(Listing),
    /// Some kind is not synced or not fresh: ask the API server.
    Stale,
    /// Fresh, but these kinds (indices) have not reached the caller's newest write yet.
    Behind(Vec<usize>),
    /// An object in the scope cannot be read (as a direct LIST would fail).
    Failed(StoreError),
}

/// What a wait found.
pub(crate) enum Waited {
    /// A change (or a reason to re-list) at this revision.
    Changed(u64),
    /// Nothing yet; look again on a notification or at this instant (a kind goes stale).
    Pending(Instant),
    /// A kind has heard nothing for too long.
    Stale(String),
}

impl Scope {
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.notify.subscribe()
    }

    /// The listing of `prefix` if every kind is fresh and has reached `want`.
    pub(crate) fn read(&self, prefix: &str, want: u64, freshness: Duration) -> Read {
        let now = Instant::now();
        let states: Vec<_> = self.kinds.iter().map(|k| k.lock()).collect();
        if states.iter().any(|s| !s.is_fresh(now, freshness)) {
            return Read::Stale;
        }
        let behind: Vec<usize> = (0..states.len())
            .filter(|&i| states[i].rev < want)
            .collect();
        if !behind.is_empty() {
            return Read::Behind(behind);
        }
        let revs: Vec<u64> = states.iter().map(|s| s.rev).collect();
        let revision = revs.iter().copied().min().unwrap_or_default();
        let mut entries: Vec<Entry> = Vec::new();
        for s in &states {
            match s.entries() {
                Ok(all) => entries.extend(
                    all.into_iter()
                        .filter(|e| e.key.starts_with(prefix))
                        .cloned(),
                ),
                Err(err) => return Read::Failed(err),
            }
        }
        drop(states);
        entries.sort_by(|a, b| a.key.cmp(&b.key));
        self.remember(revision, revs);
        Read::Listing(Listing { entries, revision })
    }

    /// Records that a listing at `revision` showed each kind at `revs`.
    pub(crate) fn remember(&self, revision: u64, revs: Vec<u64>) {
        let mut served = self.served.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((_, known)) = served.iter_mut().find(|(r, _)| *r == revision) {
            for (k, r) in known.iter_mut().zip(revs) {
                *k = (*k).min(r);
            }
            return;
        }
        if served.len() >= SERVED_MEMORY {
            served.remove(0);
        }
        served.push((revision, revs));
    }

    /// Whether something under `prefix` changed after `since` (as a listing at `since`
    /// showed it).
    pub(crate) fn changed(&self, prefix: &str, since: u64, freshness: Duration) -> Waited {
        let seen: Option<Vec<u64>> = self
            .served
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|(r, _)| *r == since)
            .map(|(_, revs)| revs.clone());
        let now = Instant::now();
        let states: Vec<_> = self.kinds.iter().map(|k| k.lock()).collect();
        let revision = states.iter().map(|s| s.rev).min().unwrap_or_default();
        let mut change = None;
        for (i, s) in states.iter().enumerate() {
            let from = seen
                .as_ref()
                .and_then(|revs| revs.get(i))
                .map_or(since, |r| since.max(*r));
            if let Some(rv) = s.changed_after(prefix, from) {
                change = change.max(Some(rv));
            }
        }
        if let Some(rv) = change {
            return Waited::Changed(rv.max(revision));
        }
        if let Some(s) = states.iter().find(|s| s.gave_up(now, freshness)) {
            return Waited::Stale(s.staleness(freshness));
        }
        let until = states
            .iter()
            .map(|s| s.fresh_until(freshness))
            .min()
            .unwrap_or(now + freshness);
        Waited::Pending(until)
    }
}

/// Every scope of one store, and the tasks that feed them (stopped when the store goes).
#[derive(Default)]
pub(crate) struct Cache {
    scopes: Mutex<Vec<Arc<Scope>>>,
    tasks: Mutex<Vec<AbortHandle>>,
    /// Counts this store's completed deletes: a LIST sent after a delete returned reflects
    /// it (see the tombstones in [`KindState`]).
    pub(crate) deletes: Arc<AtomicU64>,
}

impl Drop for Cache {
    fn drop(&mut self) {
        for t in self
            .tasks
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
        {
            t.abort();
        }
    }
}

impl Cache {
    /// The scope of `plan`, started (one LIST and WATCH task per kind) on first use;
    /// `None` when the store already caches its most scopes.
    pub(crate) fn scope(
        &self,
        plan: &Plan,
        leases: &Api<Lease>,
        configmaps: &Api<ConfigMap>,
        options: &crate::KubeOptions,
    ) -> Option<Arc<Scope>> {
        let mut scopes = self.scopes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = scopes.iter().find(|s| s.plan == *plan) {
            return Some(s.clone());
        }
        if scopes.len() >= MAX_SCOPES {
            return None;
        }
        let (notify, _) = watch::channel(0u64);
        let started = Instant::now();
        let mut kinds = Vec::new();
        let mut tasks = self.tasks.lock().unwrap_or_else(|e| e.into_inner());
        let new_kind = |kind, selectors, shared| {
            Arc::new(KindCache {
                kind,
                selectors,
                shared,
                state: Mutex::new(KindState::new(started)),
                notify: notify.clone(),
            })
        };
        if let Some(selector) = &plan.leases {
            kinds.push(new_kind(
                KindName::Lease,
                (Some(selector.clone()), None),
                false,
            ));
        }
        let shared = plan.configmaps.0.is_none();
        kinds.push(new_kind(
            KindName::ConfigMap,
            plan.configmaps.clone(),
            shared,
        ));
        for k in &kinds {
            tasks.push(watcher::spawn(
                k,
                leases,
                configmaps,
                options,
                &self.deletes,
            ));
        }
        let scope = Arc::new(Scope {
            plan: plan.clone(),
            kinds,
            notify,
            served: Mutex::new(Vec::new()),
        });
        scopes.push(scope.clone());
        Some(scope)
    }

    /// Every scope started so far.
    pub(crate) fn scopes(&self) -> Vec<Arc<Scope>> {
        self.scopes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}
