//! One kind's watch-backed cache on one cluster: a `kube::runtime::watcher` task keeps a
//! map of every object of the kind (all namespaces), keyed by (namespace, name).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::StreamExt;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use serde_json::Value;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// The app instance an object's tracking annotation names, if any.
fn tracked_app(obj: &Value) -> Option<String> {
    let id = obj
        .pointer("/metadata/annotations")?
        .get(crate::compare::TRACKING_ANNOTATION)?
        .as_str()?;
    crate::compare::TrackingId::parse(id).map(|t| t.app)
}

/// (namespace, name); the namespace is empty for cluster-scoped kinds.
pub(crate) type ObjKey = (String, String);

#[derive(Default)]
struct KindState {
    objects: HashMap<ObjKey, Arc<Value>>,
    /// The re-list in progress (between `Init` and `InitDone`).
    buffer: Option<HashMap<ObjKey, Arc<Value>>>,
    /// The last watch or list error, cleared by the next event.
    error: Option<String>,
}

/// The cache of one kind; its watcher task ends when this is dropped.
pub(crate) struct KindCache {
    state: Arc<Mutex<KindState>>,
    ready: watch::Receiver<bool>,
    task: JoinHandle<()>,
}

impl Drop for KindCache {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl KindCache {
    /// Starts watching `resource` on `client`; `heard` is set at every event, `listener`
    /// told the app of every tracked object that changes after the first list.
    pub(crate) fn start(
        client: Client,
        resource: ApiResource,
        watch_timeout_secs: u32,
        heard: Arc<Mutex<Option<Instant>>>,
        listener: Option<super::ChangeListener>,
    ) -> KindCache {
        let state = Arc::new(Mutex::new(KindState::default()));
        let (ready_tx, ready) = watch::channel(false);
        let task_state = state.clone();
        let task = tokio::spawn(async move {
            let api: Api<DynamicObject> = Api::all_with(client, &resource);
            let config = watcher::Config::default().timeout(watch_timeout_secs);
            let mut events = watcher::watcher(api, config).default_backoff().boxed();
            while let Some(event) = events.next().await {
                let mut changed = None;
                let mut s = lock(&task_state);
                match event {
                    Err(e) => {
                        s.error = Some(e.to_string());
                        continue;
                    }
                    Ok(Event::Init) => s.buffer = Some(HashMap::new()),
                    Ok(Event::InitApply(obj)) => {
                        let (key, value) = to_value(&resource, obj);
                        s.buffer.get_or_insert_with(HashMap::new).insert(key, value);
                    }
                    Ok(Event::InitDone) => {
                        s.objects = s.buffer.take().unwrap_or_default();
                        ready_tx.send_replace(true);
                    }
                    Ok(Event::Apply(obj)) => {
                        let (key, value) = to_value(&resource, obj);
                        changed = tracked_app(&value);
                        insert_if_newer(&mut s.objects, key, value);
                    }
                    Ok(Event::Delete(obj)) => {
                        let (key, value) = to_value(&resource, obj);
                        changed = tracked_app(&value);
                        s.objects.remove(&key);
                    }
                }
                s.error = None;
                drop(s);
                *lock(&heard) = Some(Instant::now());
                // Told outside the cache's lock: the listener takes the controller's.
                if let (Some(app), Some(listener)) = (changed, &listener) {
                    listener(&app);
                }
            }
        });
        KindCache { state, ready, task }
    }

    /// Waits until the first list is complete; `Err` holds the last error seen (or says
    /// that none was) when `timeout` passes first.
    pub(crate) async fn wait_ready(&self, timeout: std::time::Duration) -> Result<(), String> {
        let mut ready = self.ready.clone();
        match tokio::time::timeout(timeout, ready.wait_for(|r| *r)).await {
            Ok(Ok(_)) => Ok(()),
            _ => Err(lock(&self.state)
                .error
                .clone()
                .unwrap_or_else(|| format!("no answer to the initial list within {timeout:?}"))),
        }
    }

    /// The last watch error, if the watcher has not recovered from it.
    pub(crate) fn error(&self) -> Option<String> {
        lock(&self.state).error.clone()
    }

    /// Every cached object, for a scan.
    pub(crate) fn for_each(&self, mut f: impl FnMut(&ObjKey, &Arc<Value>)) {
        let s = lock(&self.state);
        for (k, v) in &s.objects {
            f(k, v);
        }
    }

    /// How many objects are cached.
    pub(crate) fn len(&self) -> usize {
        lock(&self.state).objects.len()
    }

    /// One object.
    pub(crate) fn get(&self, key: &ObjKey) -> Option<Arc<Value>> {
        lock(&self.state).objects.get(key).cloned()
    }

    /// Records an object we just wrote, so that the refresh that follows our own sync sees
    /// it even before the watch delivers it (read-your-writes).
    pub(crate) fn observe(&self, key: ObjKey, value: Value) {
        insert_if_newer(&mut lock(&self.state).objects, key, Arc::new(value));
    }

    /// Forgets an object we just deleted.
    pub(crate) fn forget(&self, key: &ObjKey) {
        lock(&self.state).objects.remove(key);
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The state is consistent after every statement: a panic elsewhere leaves it usable.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The object as JSON with `apiVersion` and `kind` set (list items may omit them).
fn to_value(resource: &ApiResource, obj: DynamicObject) -> (ObjKey, Arc<Value>) {
    let key = (
        obj.metadata.namespace.clone().unwrap_or_default(),
        obj.metadata.name.clone().unwrap_or_default(),
    );
    let mut value = serde_json::to_value(obj).unwrap_or(Value::Null);
    if let Some(map) = value.as_object_mut() {
        map.insert("apiVersion".into(), resource.api_version.clone().into());
        map.insert("kind".into(), resource.kind.clone().into());
    }
    (key, Arc::new(value))
}

/// Keeps the newer of two versions of an object. resourceVersions are opaque to clients,
/// but every API server backed by etcd (and the fake) uses the store revision, so a
/// numeric comparison keeps our own write-through from being replaced by an older watch
/// event; when either does not parse, the incoming version wins.
fn insert_if_newer(map: &mut HashMap<ObjKey, Arc<Value>>, key: ObjKey, value: Arc<Value>) {
    let rv = |v: &Value| {
        v.pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .and_then(|s| s.parse::<u64>().ok())
    };
    if let Some(old) = map.get(&key)
        && let (Some(old_rv), Some(new_rv)) = (rv(old), rv(&value))
        && old_rv > new_rv
    {
        return;
    }
    map.insert(key, value);
}
