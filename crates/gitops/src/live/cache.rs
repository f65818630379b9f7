//! One kind's watch-backed cache on one cluster: a `kube::runtime::watcher` task keeps a
//! map of every object of the kind, keyed by (namespace, name) — one task for all
//! namespaces, or one per namespace of a namespace-scoped cluster. The cluster's first
//! lists run at most [`LiveOptions::list_concurrency`](super::LiveOptions) at a time,
//! each paged by the watcher (500 objects a page, `limit`/`continue`), and every object
//! is slimmed (`slim.rs`) before it is kept, as compact JSON text (`compact.rs`) parsed
//! again by its readers.
//!
//! **Never stale unseen.** A watch can miss what a server fails to send (a stream that
//! stalls, a server that skips events), and nothing in the stream says so. So, as Argo
//! CD's cluster cache restarts every kind's watch with a new list every 10 minutes
//! (`ARGOCD_CLUSTER_CACHE_WATCH_RESYNC_DURATION`), each watch here lists its kind again
//! once [`LiveOptions::relist_every`](super::LiveOptions) has passed since its last
//! complete list: an object the watch missed is current again within that period plus
//! one list (a list that fails is retried with the watcher's backoff, and the cache's
//! age, [`KindCache::listed_at`], shows it). Every list after the first — this one, and
//! the watcher's own after a `410 Gone` — tells the listener the apps whose objects it
//! found changed, added or gone, as a watch event would have.
//!
//! A change the cluster's update filter ignores (`updates.rs`: only ignored fields and the
//! same health) is stored without telling the listener, from a watch event or a list.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use serde_json::Value;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::compact::{Compact, Shared};
use super::footprint::entry_bytes;
use super::{UpdateFilter, live_value, lock};

/// The instance names a kept object is indexed under (its tracking id's app, its instance
/// label: `compare::candidate_apps`), owned.
fn kept_apps(obj: &Compact) -> impl Iterator<Item = String> + '_ {
    obj.apps().map(str::to_owned)
}

/// (namespace, name); the namespace is empty for cluster-scoped kinds.
pub(crate) type ObjKey = (String, String);

/// The update filter in force for one kind's group, if any (`updates.rs`).
struct Filter<'a> {
    group: &'a str,
    filter: Option<Arc<UpdateFilter>>,
}

impl Filter<'_> {
    /// Whether the change from `old` to `new` is not told to the listener (the kept
    /// objects are parsed only when a filter is in force).
    fn ignores(&self, old: &Compact, new: &Value) -> bool {
        self.filter
            .as_ref()
            .is_some_and(|f| f.ignores(self.group, &old.value(), new))
    }
}

/// The cached objects, indexed by every instance name they could be tracked under (their
/// tracking id's app, their instance label), so that one app's refresh reads its own
/// objects instead of scanning the cluster's.
struct Objects {
    by_key: HashMap<ObjKey, Compact>,
    by_app: HashMap<String, HashSet<ObjKey>>,
    /// The estimated heap of `by_key`'s entries (`footprint.rs`), kept as they come and go.
    bytes: u64,
    /// The instance label's key (argocd-cm's `application.instanceLabelKey`).
    label_key: Arc<str>,
}

impl Objects {
    fn new(label_key: Arc<str>) -> Self {
        Objects {
            by_key: HashMap::new(),
            by_app: HashMap::new(),
            bytes: 0,
            label_key,
        }
    }

    fn from_map(by_key: HashMap<ObjKey, Compact>, label_key: Arc<str>) -> Self {
        let mut objects = Objects::new(label_key);
        for (key, value) in &by_key {
            objects.bytes += entry_bytes(key, value);
            for app in kept_apps(value) {
                objects.by_app.entry(app).or_default().insert(key.clone());
            }
        }
        objects.by_key = by_key;
        objects
    }

    fn unindex(&mut self, key: &ObjKey, old: &Compact) {
        for app in old.apps() {
            if let Some(keys) = self.by_app.get_mut(app) {
                keys.remove(key);
                if keys.is_empty() {
                    self.by_app.remove(app);
                }
            }
        }
    }

    /// Keeps the newer of two versions of an object. resourceVersions are opaque to
    /// clients, but every API server backed by etcd (and the fake) uses the store
    /// revision, so a numeric comparison keeps our own write-through from being replaced
    /// by an older watch event; when either does not parse, the incoming version wins.
    fn insert_if_newer(&mut self, key: ObjKey, value: Compact) {
        if let Some(old) = self.by_key.get(&key) {
            if old.newer_than(&value) {
                return;
            }
            let old = old.clone();
            self.bytes = self.bytes.saturating_sub(entry_bytes(&key, &old));
            self.unindex(&key, &old);
        }
        self.bytes += entry_bytes(&key, &value);
        for app in kept_apps(&value) {
            self.by_app.entry(app).or_default().insert(key.clone());
        }
        self.by_key.insert(key, value);
    }

    fn remove(&mut self, key: &ObjKey) {
        if let Some(old) = self.by_key.remove(key) {
            self.bytes = self.bytes.saturating_sub(entry_bytes(key, &old));
            self.unindex(key, &old);
        }
    }

    /// The apps whose objects differ between `self` and `next` (by resourceVersion, or
    /// present in one only) in a way `filter` does not ignore: what a list tells that the
    /// watch may not have.
    fn changed_apps(
        &self,
        next: &HashMap<ObjKey, Compact>,
        filter: &Filter<'_>,
    ) -> HashSet<String> {
        let mut apps = HashSet::new();
        for (key, new) in next {
            match self.by_key.get(key) {
                Some(old)
                    if old.same_version(new)
                        || (filter.filter.is_some() && filter.ignores(old, &new.value())) => {}
                old => {
                    if let Some(old) = old {
                        apps.extend(kept_apps(old));
                    }
                    apps.extend(kept_apps(new));
                }
            }
        }
        for (key, old) in &self.by_key {
            if !next.contains_key(key) {
                apps.extend(kept_apps(old));
            }
        }
        apps
    }
}

struct KindState {
    objects: Objects,
    /// The re-list in progress (between `Init` and `InitDone`).
    buffer: Option<HashMap<ObjKey, Compact>>,
    /// The last watch or list error, cleared by the next event.
    error: Option<String>,
    /// When the last complete list ended.
    listed_at: Option<Instant>,
}

/// One watch of a kind: in one namespace, or in all (or of a cluster-scoped kind).
struct Watched {
    /// The namespace watched; `None`: the whole cluster.
    namespace: Option<String>,
    state: Arc<Mutex<KindState>>,
    ready: watch::Receiver<bool>,
    task: JoinHandle<()>,
}

/// The cache of one kind: one watch cluster-wide, or one per namespace of a
/// namespace-scoped cluster or of a slice owner's apps (never a cluster-wide list then;
/// more namespaces can be added, [`KindCache::reach`]); their watcher tasks end when this
/// is dropped.
pub(crate) struct KindCache {
    watches: Mutex<Vec<Arc<Watched>>>,
    /// What a watch added later starts from.
    ctx: WatchContext,
    resource: ApiResource,
}

impl Drop for KindCache {
    fn drop(&mut self) {
        for w in lock(&self.watches).iter() {
            w.task.abort();
        }
    }
}

/// What every watch of a cache shares.
#[derive(Clone)]
pub(crate) struct WatchContext {
    pub(crate) client: Client,
    pub(crate) watch_timeout_secs: u32,
    /// Set at every event.
    pub(crate) heard: Arc<Mutex<Option<Instant>>>,
    /// The instance label's key the objects are indexed by, beside their tracking ids.
    pub(crate) label_key: Arc<str>,
    /// How long after a complete list the watch is restarted with a new one.
    pub(crate) relist_every: std::time::Duration,
    /// Told the app of every tracked object that changes after the first list.
    pub(crate) listener: Option<super::ChangeListener>,
    /// Bounds the cluster's first lists in flight (a permit is held from a watch's start
    /// to its first complete list).
    pub(crate) lists: Arc<Semaphore>,
    /// The managers whose `managedFields` entries are kept (`slim.rs`).
    pub(crate) kept: super::slim::KeptManagers,
    /// Which changes are not told to the listener (`updates.rs`).
    pub(crate) update_filter: super::updates::SharedUpdateFilter,
    /// Counts the kind's watch events (Argo CD's `argocd_cluster_events_total`).
    pub(crate) events: Arc<std::sync::atomic::AtomicU64>,
    /// Objects are kept parsed, not as text (one of [`super::TREE_KINDS`]: `compact.rs`).
    pub(crate) keep_parsed: bool,
}

impl KindCache {
    /// Starts watching `resource`: cluster-wide when `namespaces` is `None`, else once in
    /// each of them.
    pub(crate) fn start(
        ctx: &WatchContext,
        resource: &ApiResource,
        namespaces: Option<&[String]>,
    ) -> KindCache {
        let start = |ns: Option<&String>| {
            Arc::new(Watched::start(ctx.clone(), resource.clone(), ns.cloned()))
        };
        let watches = match namespaces {
            None => vec![start(None)],
            Some(list) => list.iter().map(|ns| start(Some(ns))).collect(),
        };
        KindCache {
            watches: Mutex::new(watches),
            ctx: ctx.clone(),
            resource: resource.clone(),
        }
    }

    /// The watches now (shared with the cache; one added later is not in it).
    fn watches(&self) -> Vec<Arc<Watched>> {
        lock(&self.watches).clone()
    }

    /// Whether one watch sees the whole cluster (every namespace).
    pub(crate) fn is_cluster_wide(&self) -> bool {
        lock(&self.watches).iter().any(|w| w.namespace.is_none())
    }

    /// Whether the objects of `namespace` are watched (empty: cluster-scoped objects,
    /// seen by a cluster-wide watch only).
    pub(crate) fn covers(&self, namespace: &str) -> bool {
        lock(&self.watches)
            .iter()
            .any(|w| w.namespace.as_ref().is_none_or(|ns| ns == namespace))
    }

    /// The namespaces watched one by one, sorted (none for a cluster-wide watch).
    pub(crate) fn namespaces(&self) -> Vec<String> {
        let mut list: Vec<String> = lock(&self.watches)
            .iter()
            .filter_map(|w| w.namespace.clone())
            .collect();
        list.sort();
        list
    }

    /// Starts a watch in each of `namespaces` not watched yet (nothing on a cluster-wide
    /// cache): its first list then counts in [`KindCache::wait_ready`] and
    /// [`KindCache::listed_at`] like the others'.
    pub(crate) fn reach(&self, namespaces: &[String]) {
        let mut watches = lock(&self.watches);
        if watches.iter().any(|w| w.namespace.is_none()) {
            return;
        }
        for ns in namespaces {
            if !watches.iter().any(|w| w.namespace.as_ref() == Some(ns)) {
                let w = Watched::start(self.ctx.clone(), self.resource.clone(), Some(ns.clone()));
                watches.push(Arc::new(w));
            }
        }
    }

    /// Waits until every watch's first list is complete; `Err` holds the last error seen
    /// (or says that none was) when `timeout` passes first.
    pub(crate) async fn wait_ready(&self, timeout: std::time::Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        for w in self.watches() {
            let mut ready = w.ready.clone();
            if let Ok(Ok(_)) = tokio::time::timeout_at(deadline, ready.wait_for(|r| *r)).await {
                continue;
            }
            let error = lock(&w.state)
                .error
                .clone()
                .unwrap_or_else(|| format!("no answer to the initial list within {timeout:?}"));
            return Err(match &w.namespace {
                Some(ns) => format!("in namespace {ns}: {error}"),
                None => error,
            });
        }
        Ok(())
    }

    /// The cached objects among `keys`, and those whose tracking annotation names `app`
    /// (each once): one app's live objects, without a scan of the cluster's. Each is
    /// parsed from its kept text, outside the cache's lock.
    pub(crate) fn of_app<'k>(
        &self,
        app: &str,
        keys: impl IntoIterator<Item = &'k ObjKey>,
    ) -> Vec<(ObjKey, Arc<Value>)> {
        let keys: Vec<&ObjKey> = keys.into_iter().collect();
        let mut out: HashMap<ObjKey, Shared> = HashMap::new();
        for w in self.watches() {
            let s = lock(&w.state);
            for key in &keys {
                if let Some((k, v)) = s.objects.by_key.get_key_value(*key) {
                    out.insert(k.clone(), v.shared());
                }
            }
            for key in s.objects.by_app.get(app).into_iter().flatten() {
                if let Some((k, v)) = s.objects.by_key.get_key_value(key) {
                    out.insert(k.clone(), v.shared());
                }
            }
        }
        out.into_iter().map(|(k, v)| (k, v.value())).collect()
    }

    /// When the oldest of this cache's last complete lists ended: everything the cache
    /// holds is at least that current. `None` while a watch has not completed its first.
    pub(crate) fn listed_at(&self) -> Option<Instant> {
        self.watches()
            .iter()
            .map(|w| lock(&w.state).listed_at)
            .try_fold(None, |oldest: Option<Instant>, at| {
                at.map(|at| Some(oldest.map_or(at, |o| o.min(at))))
            })
            .flatten()
    }

    /// The last watch or list error of any of this cache's watches, if the watch has not
    /// heard anything since.
    pub(crate) fn last_error(&self) -> Option<String> {
        self.watches()
            .iter()
            .find_map(|w| lock(&w.state).error.clone())
    }

    /// The cached objects of `namespace` (`None`: every one), parsed outside the cache's
    /// lock: an orphaned-resources scan reads one namespace.
    pub(crate) fn values_in(&self, namespace: Option<&str>) -> Vec<Arc<Value>> {
        let taken = self.gather(|(ns, _), v| namespace.is_none_or(|n| n == ns).then(|| v.shared()));
        taken.into_iter().map(Shared::value).collect()
    }

    /// What `pick` takes of each cached object, under each watch's lock in turn (the
    /// taking is cheap; parsing what was taken is the caller's, outside the locks).
    fn gather<T>(&self, mut pick: impl FnMut(&ObjKey, &Compact) -> Option<T>) -> Vec<T> {
        let mut taken = Vec::new();
        for w in self.watches() {
            let s = lock(&w.state);
            taken.extend(s.objects.by_key.iter().filter_map(|(k, v)| pick(k, v)));
        }
        taken
    }

    /// Every cached object as the resource tree reads them (outside the cache's lock):
    /// one kept parsed is shared, one kept as text is parsed if it names an owner (it may
    /// be a node's child), else stands as a stub of its `apiVersion`, `kind`, name and
    /// namespace (all the tree reads of an object that is no one's child, and none of
    /// `TREE_KINDS`: which objects exist).
    pub(crate) fn tree_values(&self) -> Vec<Arc<Value>> {
        let taken = self.gather(|k, v| Some((k.clone(), v.in_tree().then(|| v.shared()))));
        let api_version = self.resource.api_version.as_str();
        let kind = self.resource.kind.as_str();
        taken
            .into_iter()
            .map(|((namespace, name), v)| match v {
                Some(v) => v.value(),
                None => Arc::new(serde_json::json!({
                    "apiVersion": api_version,
                    "kind": kind,
                    "metadata": {"namespace": namespace, "name": name},
                })),
            })
            .collect()
    }

    /// How many objects are cached.
    pub(crate) fn len(&self) -> usize {
        self.watches()
            .iter()
            .map(|w| lock(&w.state).objects.by_key.len())
            .sum()
    }

    /// The estimated heap of the cached objects (`footprint.rs`).
    pub(crate) fn bytes(&self) -> u64 {
        self.watches()
            .iter()
            .map(|w| lock(&w.state).objects.bytes)
            .sum()
    }

    /// The watch that sees the object `key`, if any does.
    fn watch_of(&self, key: &ObjKey) -> Option<Arc<Watched>> {
        lock(&self.watches)
            .iter()
            .find(|w| w.namespace.as_ref().is_none_or(|ns| *ns == key.0))
            .cloned()
    }

    /// Records an object we just wrote, so that the refresh that follows our own sync sees
    /// it even before the watch delivers it (read-your-writes). An object no watch sees
    /// is not kept.
    pub(crate) fn observe(&self, key: ObjKey, mut value: Value) {
        let kept = lock(&self.ctx.kept).clone();
        super::slim::slim(&mut value, &kept);
        if let Some(w) = self.watch_of(&key) {
            let mut s = lock(&w.state);
            let value = Compact::keep(value, &s.objects.label_key, self.ctx.keep_parsed);
            s.objects.insert_if_newer(key, value);
        }
    }

    /// Forgets an object we just deleted.
    pub(crate) fn forget(&self, key: &ObjKey) {
        if let Some(w) = self.watch_of(key) {
            lock(&w.state).objects.remove(key);
        }
    }
}

impl Watched {
    fn start(ctx: WatchContext, resource: ApiResource, namespace: Option<String>) -> Watched {
        let state = Arc::new(Mutex::new(KindState {
            objects: Objects::new(ctx.label_key.clone()),
            buffer: None,
            error: None,
            listed_at: None,
        }));
        let label_key = ctx.label_key.clone();
        let (ready_tx, ready) = watch::channel(false);
        let task_state = state.clone();
        let api: Api<DynamicObject> = match &namespace {
            Some(ns) => Api::namespaced_with(ctx.client, ns, &resource),
            None => Api::all_with(ctx.client, &resource),
        };
        let (heard, listener, lists, kept) = (ctx.heard, ctx.listener, ctx.lists, ctx.kept);
        let (update_filter, events_seen) = (ctx.update_filter, ctx.events);
        let (relist_every, keep_parsed) = (ctx.relist_every, ctx.keep_parsed);
        let task = tokio::spawn(async move {
            // Held until the first list is complete or fails (never closed).
            let mut permit = lists.acquire_owned().await.ok();
            let mut first_list = true;
            loop {
                let config = watcher::Config::default().timeout(ctx.watch_timeout_secs);
                let mut events = watcher::watcher(api.clone(), config)
                    .default_backoff()
                    .boxed();
                // Restarted with a new list once `relist_every` has passed since the last
                // complete one (none yet: not before this watch's first list completes).
                let mut relist_at = None;
                loop {
                    let event = tokio::select! {
                        event = events.next() => match event {
                            Some(event) => event,
                            None => break,
                        },
                        () = fleetshard_coord::select::sleep_until_opt(relist_at) => break,
                    };
                    let mut changed = HashSet::new();
                    let filter = Filter {
                        group: &resource.group,
                        filter: lock(&update_filter).clone(),
                    };
                    let mut s = lock(&task_state);
                    match event {
                        Err(e) => {
                            s.error = Some(e.to_string());
                            // A list that keeps failing (403, a kind gone) must not hold a
                            // permit the cluster's other kinds wait for.
                            drop(permit.take());
                            continue;
                        }
                        Ok(Event::Init) => s.buffer = Some(HashMap::new()),
                        Ok(Event::InitApply(obj)) => {
                            let (key, value) = to_value(&resource, obj, &kept);
                            let value = Compact::keep(value, &label_key, keep_parsed);
                            s.buffer.get_or_insert_with(HashMap::new).insert(key, value);
                        }
                        Ok(Event::InitDone) => {
                            let listed = s.buffer.take().unwrap_or_default();
                            if !first_list {
                                changed = s.objects.changed_apps(&listed, &filter);
                            }
                            first_list = false;
                            s.objects = Objects::from_map(listed, label_key.clone());
                            let now = Instant::now();
                            s.listed_at = Some(now);
                            relist_at = Some(now + relist_every);
                            ready_tx.send_replace(true);
                            drop(permit.take());
                        }
                        Ok(Event::Apply(obj)) => {
                            events_seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            let (key, value) = to_value(&resource, obj, &kept);
                            let ignored = s
                                .objects
                                .by_key
                                .get(&key)
                                .is_some_and(|old| filter.ignores(old, &value));
                            let value = Compact::keep(value, &label_key, keep_parsed);
                            if !ignored {
                                changed.extend(kept_apps(&value));
                            }
                            s.objects.insert_if_newer(key, value);
                        }
                        Ok(Event::Delete(obj)) => {
                            events_seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            let (key, value) = to_value(&resource, obj, &kept);
                            changed.extend(crate::compare::candidate_apps(&value, &label_key));
                            s.objects.remove(&key);
                        }
                    }
                    s.error = None;
                    drop(s);
                    *lock(&heard) = Some(Instant::now());
                    // Told outside the cache's lock: the listener takes the controller's.
                    if let Some(listener) = &listener {
                        for app in &changed {
                            listener(app);
                        }
                    }
                }
            }
        });
        Watched {
            namespace,
            state,
            ready,
            task,
        }
    }
}

/// The object's key and its JSON, slimmed (list items may omit `apiVersion` and `kind`).
fn to_value(
    resource: &ApiResource,
    obj: DynamicObject,
    kept: &super::slim::KeptManagers,
) -> (ObjKey, Value) {
    let key = (
        obj.metadata.namespace.clone().unwrap_or_default(),
        obj.metadata.name.clone().unwrap_or_default(),
    );
    let mut value = live_value(resource, obj);
    let kept = lock(kept).clone();
    super::slim::slim(&mut value, &kept);
    (key, value)
}

#[cfg(test)]
mod tests;
