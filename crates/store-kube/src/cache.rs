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
    pub(crate) state: Mutex<KindState>,
    pub(crate) notify: watch::Sender<u64>,
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
    /// Listings served: their revision and what each kind had shown then, so that a wait
    /// from that revision is not woken by what the listing already showed (a kind's `rev`
    /// may be well past the listing's revision while the other kind waits for a bookmark).
    served: Mutex<Vec<Served>>,
}

/// Listings served at one revision: each kind's `rev` in the earliest (smallest) and in
/// the latest of them.
struct Served {
    revision: u64,
    earliest: Vec<u64>,
    latest: Vec<u64>,
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
    fn remember(&self, revision: u64, revs: Vec<u64>) {
        let mut served = self.served.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(known) = served.iter_mut().find(|s| s.revision == revision) {
            for (k, r) in known.earliest.iter_mut().zip(&revs) {
                *k = (*k).min(*r);
            }
            known.latest = revs;
            return;
        }
        if served.len() >= SERVED_MEMORY {
            served.remove(0);
        }
        served.push(Served {
            revision,
            earliest: revs.clone(),
            latest: revs,
        });
    }

    /// Whether something under `prefix` changed after `since`, as a listing at `since`
    /// showed it. Several listings may have had that revision: a change the latest of them
    /// showed but an earlier one may not have wakes only from `late` on — a caller holding
    /// the earlier listing still learns of it, and one holding the latest (the runner,
    /// waiting from the listing it just got) does not spin on what it has seen.
    pub(crate) fn changed(
        &self,
        prefix: &str,
        since: u64,
        freshness: Duration,
        late: Instant,
    ) -> Waited {
        let (earliest, latest) = self
            .served
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|s| s.revision == since)
            .map(|s| (s.earliest.clone(), s.latest.clone()))
            .unwrap_or_default();
        let from = |revs: &[u64], i: usize| revs.get(i).map_or(since, |r| since.max(*r));
        let now = Instant::now();
        let states: Vec<_> = self.kinds.iter().map(|k| k.lock()).collect();
        let revision = states.iter().map(|s| s.rev).min().unwrap_or_default();
        let mut certain = None;
        let mut maybe = None;
        for (i, s) in states.iter().enumerate() {
            certain = certain.max(s.changed_after(prefix, from(&latest, i)));
            maybe = maybe.max(s.changed_after(prefix, from(&earliest, i)));
        }
        if let Some(rv) = certain.or(maybe.filter(|_| now >= late)) {
            return Waited::Changed(rv.max(revision));
        }
        if let Some(s) = states.iter().find(|s| s.gave_up(now, freshness)) {
            return Waited::Stale(s.staleness(freshness));
        }
        let mut until = states
            .iter()
            .map(|s| s.fresh_until(freshness))
            .min()
            .unwrap_or(now + freshness);
        if maybe.is_some() {
            until = until.min(late);
        }
        Waited::Pending(until)
    }
}

/// Every scope of one store, and the tasks that feed them (stopped when the store goes).
#[derive(Default)]
pub(crate) struct Cache {
    /// Each scope with its tasks.
    scopes: Mutex<Vec<(Arc<Scope>, Vec<AbortHandle>)>>,
    /// Counts this store's completed deletes: a LIST sent after a delete returned reflects
    /// it (see the tombstones in [`KindState`]).
    pub(crate) deletes: Arc<AtomicU64>,
}

impl Drop for Cache {
    fn drop(&mut self) {
        let scopes = self.scopes.get_mut().unwrap_or_else(|e| e.into_inner());
        for (_, tasks) in scopes.drain(..) {
            tasks.iter().for_each(AbortHandle::abort);
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
        if let Some((s, _)) = scopes.iter().find(|(s, _)| s.plan == *plan) {
            return Some(s.clone());
        }
        if scopes.len() >= MAX_SCOPES {
            return None;
        }
        let (notify, _) = watch::channel(0u64);
        let started = Instant::now();
        let mut kinds = Vec::new();
        let mut tasks = Vec::new();
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
        scopes.push((scope.clone(), tasks));
        Some(scope)
    }

    /// Every scope started so far.
    pub(crate) fn scopes(&self) -> Vec<Arc<Scope>> {
        let scopes = self.scopes.lock().unwrap_or_else(|e| e.into_inner());
        scopes.iter().map(|(s, _)| s.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::state::{Obj, Snapshot};
    use super::*;

    fn kind(name: KindName, objects: &[(&str, u64)], rev: u64) -> Arc<KindCache> {
        let k = KindCache {
            kind: name,
            selectors: (None, None),
            shared: false,
            state: Mutex::new(KindState::new(Instant::now())),
            notify: watch::channel(0).0,
        };
        let objects = objects
            .iter()
            .map(|(key, rv)| (key.to_string(), obj(key, *rv)))
            .collect();
        let mut st = k.lock();
        st.replace(Snapshot { rev, objects }, 0);
        st.heard(Instant::now());
        drop(st);
        Arc::new(k)
    }

    fn obj(key: &str, rv: u64) -> Obj {
        Obj {
            rv,
            entries: Ok(vec![Entry {
                key: key.into(),
                value: Vec::new(),
                version: rv,
            }]),
        }
    }

    fn listing(scope: &Scope) -> Listing {
        match scope.read("f/", 0, Duration::from_secs(10)) {
            Read::Listing(l) => l,
            _ => panic!("not served from the cache"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_change_only_an_earlier_listing_at_the_revision_missed_wakes_late() {
        let leases = kind(KindName::Lease, &[("f/a", 3)], 5);
        let configmaps = kind(KindName::ConfigMap, &[], 5);
        let scope = Scope {
            plan: Plan::of("f/"),
            kinds: vec![leases.clone(), configmaps],
            notify: watch::channel(0).0,
            served: Mutex::new(Vec::new()),
        };
        let fresh = Duration::from_secs(10);
        assert_eq!(listing(&scope).revision, 5);
        // Another client's lease write: the Lease watch shows it, the ConfigMap watch has
        // no reason to move, so the next listing has the same revision but shows more.
        leases.lock().apply("f/b", 6, Some(obj("f/b", 6)));
        let l = listing(&scope);
        assert_eq!(l.revision, 5);
        assert_eq!(l.entries.len(), 2);
        let late = Instant::now() + Duration::from_millis(200);
        match scope.changed("f/", 5, fresh, late) {
            Waited::Pending(until) => assert_eq!(until, late),
            _ => panic!("the latest listing at 5 showed the change: no wake-up at once"),
        }
        tokio::time::advance(Duration::from_millis(200)).await;
        assert!(
            matches!(scope.changed("f/", 5, fresh, late), Waited::Changed(6)),
            "a holder of the earlier listing still learns of it"
        );
        // A change past what the latest listing showed wakes at once.
        leases.lock().apply("f/c", 7, Some(obj("f/c", 7)));
        let late = Instant::now() + Duration::from_millis(200);
        assert!(matches!(
            scope.changed("f/", 5, fresh, late),
            Waited::Changed(7)
        ));
        // Nothing heard for the freshness bound: stale.
        tokio::time::advance(fresh + Duration::from_secs(1)).await;
        assert!(matches!(
            scope.changed("g/", 7, fresh, late),
            Waited::Stale(_)
        ));
        assert!(matches!(scope.read("f/", 0, fresh), Read::Stale));
    }
}
