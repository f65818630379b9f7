//! The task behind one kind of one scope: LIST, then WATCH from the last seen
//! resourceVersion with bookmarks, re-opened when the server ends it, relisted on 410 Gone,
//! retried with a backoff while the API server is unreachable.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use fleetshard_coord::store::{Entry, StoreError};
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::WatchEvent;
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use tokio::time::Instant;

use super::state::{Obj, Snapshot};
use super::{KindCache, KindName};
use crate::KubeOptions;
use crate::errors::{call, parse_version};
use crate::list::{list_params, list_revision, watch_params};
use crate::objects::{configmap_entry, data_entries, describe, is_record, lease_entry};

/// First pause after a failed LIST or WATCH; doubled up to [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_millis(100);
/// Longest pause between two attempts while the API server is unreachable.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// A kind the cache holds.
pub(crate) trait Cached:
    Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static
{
    /// The entries this object holds: its record, or with `shared` the data keys of a
    /// ConfigMap that is not one.
    fn entries(&self, shared: bool) -> Result<Vec<Entry>, StoreError>;
}

impl Cached for Lease {
    fn entries(&self, _shared: bool) -> Result<Vec<Entry>, StoreError> {
        if is_record(&self.metadata) {
            Ok(vec![lease_entry(self)?])
        } else {
            Ok(Vec::new())
        }
    }
}

impl Cached for ConfigMap {
    fn entries(&self, shared: bool) -> Result<Vec<Entry>, StoreError> {
        if is_record(&self.metadata) {
            Ok(vec![configmap_entry(self)?])
        } else if shared {
            data_entries(self, "")
        } else {
            Ok(Vec::new())
        }
    }
}

/// An object's name, resourceVersion and entries.
fn object<K: Cached>(o: &K, shared: bool) -> Result<(String, Obj), StoreError> {
    let meta = o.meta();
    let what = describe(&K::kind(&()), meta);
    let rv = parse_version(meta.resource_version.as_deref(), &what)?;
    let name = meta.name.clone().unwrap_or_default();
    Ok((
        name,
        Obj {
            rv,
            entries: o.entries(shared),
        },
    ))
}

/// One LIST of `kind`'s objects in the scope (`what` names the caller's key or prefix in
/// errors).
pub(crate) async fn fetch<K: Cached>(
    api: &Api<K>,
    kind: &KindCache,
    timeout: Duration,
    what: &str,
) -> Result<Snapshot, StoreError> {
    let list = call(
        || format!("list {}", kind.kind.plural()),
        timeout,
        api.list(&list_params(&kind.selectors)),
    )
    .await
    .map_err(|e| e.into_store(what))?;
    let rev = list_revision(&list, &K::kind(&()))?;
    let mut objects = HashMap::new();
    for o in &list.items {
        let (name, obj) = object(o, kind.shared)?;
        objects.insert(name, obj);
    }
    Ok(Snapshot { rev, objects })
}

/// The label the task's errors carry.
fn scope_label(kind: &KindCache) -> String {
    let (labels, fields) = &kind.selectors;
    format!(
        "cache of {} ({})",
        kind.kind.plural(),
        [labels.as_deref(), fields.as_deref()]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" ")
    )
}

/// Keeps `kind` in sync until aborted (when the store is dropped).
pub(crate) async fn run<K: Cached>(
    api: Api<K>,
    kind: Arc<KindCache>,
    options: KubeOptions,
    deletes: Arc<AtomicU64>,
) {
    let label = scope_label(&kind);
    let freshness = options.cache_freshness;
    // A quiet server must end the watch (and so show it is alive) before the kind goes
    // stale.
    let wp = watch_params(
        &kind.selectors,
        options
            .watch_timeout
            .min(freshness.saturating_sub(Duration::from_secs(1))),
    );
    let mut backoff = MIN_BACKOFF;
    let mut relist = true;
    let failed = |why: String| {
        tracing::debug!(scope = %label, why, "watch cache: retrying");
        kind.lock().last_error = Some(why);
        kind.wake();
    };
    loop {
        if relist {
            let seq = deletes.load(Ordering::SeqCst);
            match fetch(&api, &kind, options.call_timeout, &label).await {
                Ok(snap) => {
                    let mut st = kind.lock();
                    st.replace(snap, seq);
                    st.heard(Instant::now());
                    drop(st);
                    kind.wake();
                    relist = false;
                }
                Err(e) => {
                    failed(e.to_string());
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    continue;
                }
            }
        }
        let from = kind.lock().rev;
        let opened = call(
            || format!("watch {}", kind.kind.plural()),
            options.call_timeout,
            api.watch(&wp, &from.to_string()),
        )
        .await;
        let events = match opened {
            Ok(events) => events,
            Err(e) if e.code() == Some(410) => {
                relist = true;
                continue;
            }
            Err(e) => {
                failed(e.into_store(&label).to_string());
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
        };
        let opened_at = Instant::now();
        kind.lock().heard(opened_at);
        kind.wake();
        let mut events = std::pin::pin!(events);
        let mut any = false;
        loop {
            let next = match tokio::time::timeout(freshness, events.next()).await {
                Ok(Some(next)) => next,
                // The server ended the watch (its timeout): re-open from where it was.
                Ok(None) => break,
                Err(_) => {
                    failed(format!("watch of {label}: nothing for {freshness:?}"));
                    break;
                }
            };
            any = true;
            let now = Instant::now();
            let (o, deleted) = match next {
                Ok(WatchEvent::Added(o) | WatchEvent::Modified(o)) => (o, false),
                Ok(WatchEvent::Deleted(o)) => (o, true),
                Ok(WatchEvent::Bookmark(b)) => match b.metadata.resource_version.parse() {
                    Ok(rv) => {
                        kind.lock().progress(rv, now);
                        kind.wake();
                        continue;
                    }
                    Err(_) => {
                        failed(format!(
                            "bookmark resourceVersion {:?} is not a number",
                            b.metadata.resource_version
                        ));
                        relist = true;
                        break;
                    }
                },
                Ok(WatchEvent::Error(status)) if status.code == 410 => {
                    // History compacted past where we were: start over from a LIST.
                    relist = true;
                    break;
                }
                Ok(WatchEvent::Error(status)) => {
                    failed(format!(
                        "watch of {label}: {} {}: {}",
                        status.code, status.reason, status.message
                    ));
                    break;
                }
                Err(e) => {
                    failed(format!("watch of {label}: {e}"));
                    break;
                }
            };
            match object(&o, kind.shared) {
                Ok((name, obj)) => {
                    let mut st = kind.lock();
                    st.apply(&name, obj.rv, (!deleted).then_some(obj));
                    st.heard(now);
                }
                Err(e) => {
                    failed(e.to_string());
                    relist = true;
                    break;
                }
            }
            kind.wake();
        }
        if any || opened_at.elapsed() >= Duration::from_secs(1) {
            backoff = MIN_BACKOFF;
        } else {
            // A watch that ends without a word: do not spin re-opening it.
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }
}

/// Starts the task for `kind` on the runtime of the caller.
pub(crate) fn spawn(
    kind: &Arc<KindCache>,
    leases: &Api<Lease>,
    configmaps: &Api<ConfigMap>,
    options: &KubeOptions,
    deletes: &Arc<AtomicU64>,
) -> tokio::task::AbortHandle {
    let (kind, options, deletes) = (kind.clone(), options.clone(), deletes.clone());
    match kind.kind {
        KindName::Lease => tokio::spawn(run(leases.clone(), kind, options, deletes)),
        KindName::ConfigMap => tokio::spawn(run(configmaps.clone(), kind, options, deletes)),
    }
    .abort_handle()
}
