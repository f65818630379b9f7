//! `list` and `wait_for_change` through the watch cache, and what this client's own writes
//! tell the cache (read-your-writes).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use fleetshard_coord::store::{Listing, Precondition, StoreError};
use tokio::time::Instant;

use crate::cache::{KindCache, KindName, Read, Scope, Waited, fetch};
use crate::list::Plan;
use crate::names::Target;
use crate::objects::record_labels;
use crate::{Ctx, KubeStore};

/// The longest a listing waits for the watch to show this client's newest write before
/// it LISTs that kind instead (bounded further by the call timeout).
const CATCH_UP: Duration = Duration::from_secs(1);
/// How late a wait reports a change that only an earlier of several listings at its
/// revision may have missed (see [`Scope::changed`]): about the runner's poll, so a caller
/// that has seen it re-lists at the pace it would anyway.
const AMBIGUOUS_WAKE: Duration = Duration::from_millis(200);

impl KubeStore {
    /// The cache scope of `plan`, started on first use; `None` when the cache is off or
    /// full.
    fn scope(&self, ctx: &Ctx, plan: &Plan) -> Option<Arc<Scope>> {
        let options = &self.inner.options;
        if !options.cache {
            return None;
        }
        self.inner
            .cache
            .scope(plan, &ctx.leases, &ctx.configmaps, options)
    }

    pub(crate) async fn list_prefix(&self, ctx: &Ctx, prefix: &str) -> Result<Listing, StoreError> {
        if let Some(scope) = self.scope(ctx, &Plan::of(prefix))
            && let Some(listing) = self.list_cached(ctx, &scope, prefix).await?
        {
            return Ok(listing);
        }
        self.list_direct(ctx, prefix).await
    }

    /// The listing from the cache once it reflects this client's newest write: waiting
    /// (bounded) for a watch that will show it, LISTing a kind whose watch will not (a
    /// write of the other kind advances no watch of this one). `None`: the cache is not
    /// fresh; ask the API server.
    async fn list_cached(
        &self,
        ctx: &Ctx,
        scope: &Scope,
        prefix: &str,
    ) -> Result<Option<Listing>, StoreError> {
        let options = &self.inner.options;
        let want = self.inner.newest_write.load(Ordering::SeqCst);
        let deadline = Instant::now() + CATCH_UP.min(options.call_timeout);
        let mut refreshed = vec![false; scope.kinds.len()];
        loop {
            let mut notified = scope.subscribe();
            let behind = match scope.read(prefix, want, options.cache_freshness) {
                Read::Listing(listing) => return Ok(Some(listing)),
                Read::Failed(e) => return Err(e),
                Read::Stale => return Ok(None),
                Read::Behind(kinds) => kinds,
            };
            let now = Instant::now();
            let to_list: Vec<usize> = behind
                .iter()
                .copied()
                .filter(|&i| !refreshed[i])
                .filter(|&i| now >= deadline || scope.kinds[i].lock().awaited < want)
                .collect();
            if to_list.is_empty() {
                if behind.iter().all(|&i| refreshed[i]) {
                    // A LIST after our write did not reach it: the server is odd; go direct.
                    return Ok(None);
                }
                tokio::select! {
                    _ = notified.changed() => {}
                    _ = tokio::time::sleep_until(deadline) => {}
                }
                continue;
            }
            for i in to_list {
                self.refresh(ctx, &scope.kinds[i], prefix).await?;
                refreshed[i] = true;
            }
        }
    }

    /// LISTs one kind of a scope and brings the cache up to that LIST.
    async fn refresh(&self, ctx: &Ctx, kind: &KindCache, prefix: &str) -> Result<(), StoreError> {
        let timeout = self.inner.options.call_timeout;
        let seq = self.inner.cache.deletes.load(Ordering::SeqCst);
        let snap = match kind.kind {
            KindName::Lease => fetch(&ctx.leases, kind, timeout, prefix).await?,
            KindName::ConfigMap => fetch(&ctx.configmaps, kind, timeout, prefix).await?,
        };
        kind.lock().replace(snap, seq);
        kind.wake();
        Ok(())
    }

    pub(crate) async fn wait(
        &self,
        ctx: &Ctx,
        prefix: &str,
        since: u64,
    ) -> Result<u64, StoreError> {
        let Some(scope) = self.scope(ctx, &Plan::of(prefix)) else {
            return self.wait_direct(ctx, prefix, since).await;
        };
        let freshness = self.inner.options.cache_freshness;
        let late = Instant::now() + AMBIGUOUS_WAKE;
        loop {
            let mut notified = scope.subscribe();
            match scope.changed(prefix, since, freshness, late) {
                Waited::Changed(rev) => return Ok(rev),
                Waited::Stale(why) => {
                    return Err(StoreError::Unavailable(format!(
                        "watching {prefix:?}: {why}"
                    )));
                }
                Waited::Pending(until) => {
                    tokio::select! {
                        _ = notified.changed() => {}
                        _ = tokio::time::sleep_until(until) => {}
                    }
                }
            }
        }
    }

    /// This client wrote `key` at version `v`: listings must now reach `v`, and the watches
    /// that select the object will show it.
    pub(crate) fn wrote(&self, target: &Target, key: &str, v: u64) {
        self.inner.newest_write.fetch_max(v, Ordering::SeqCst);
        for scope in self.inner.cache.scopes() {
            for kind in &scope.kinds {
                if selects(kind, target, key) {
                    let mut st = kind.lock();
                    st.awaited = st.awaited.max(v);
                }
            }
        }
    }

    /// This client deleted the object of `key` (a record): gone from cached listings at
    /// once (a delete's answer carries no revision to wait for).
    pub(crate) fn deleted(&self, target: &Target, key: &str, pre: Precondition) {
        let name = match target {
            Target::Lease { name } | Target::Record { name } => name,
            Target::ConfigMapKey { .. } => return,
        };
        let version = match pre {
            Precondition::Version(v) => Some(v),
            _ => None,
        };
        let seq = self.inner.cache.deletes.fetch_add(1, Ordering::SeqCst) + 1;
        for scope in self.inner.cache.scopes() {
            for kind in &scope.kinds {
                if selects(kind, target, key) {
                    kind.lock().deleted(name, version, seq);
                    kind.wake();
                }
            }
        }
    }
}

/// Whether `kind`'s watch sees the object `key` is stored in (a shared ConfigMap's labels
/// are unknown here: assumed not to match a label selector, so a listing LISTs rather than
/// waits for it).
fn selects(kind: &KindCache, target: &Target, key: &str) -> bool {
    let (name, labels, is_lease) = match target {
        Target::Lease { name } => (name, Some(record_labels(key)), true),
        Target::Record { name } => (name, Some(record_labels(key)), false),
        Target::ConfigMapKey { name, .. } => (name, None, false),
    };
    if is_lease != (kind.kind == KindName::Lease) {
        return false;
    }
    let labels_match = match (&kind.selectors.0, &labels) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(selector), Some(labels)) => selector.split(',').all(|term| {
            term.split_once('=')
                .is_some_and(|(k, v)| labels.get(k).is_some_and(|l| l == v))
        }),
    };
    let fields_match = match &kind.selectors.1 {
        None => true,
        Some(selector) => selector.strip_prefix("metadata.name=") == Some(name.as_str()),
    };
    labels_match && fields_match
}

#[cfg(test)]
mod tests {
    use std::sync::Weak;

    use fleetshard_coord::store::Store;
    use fleetshard_testsupport::kube_api::FakeApiServer;

    use super::*;
    use crate::KubeOptions;

    #[tokio::test]
    async fn dropping_the_last_clone_stops_the_watch_tasks() {
        let server = FakeApiServer::start().await.unwrap();
        let config = kube::Config::new(server.url().parse().unwrap());
        let store = KubeStore::from_config(config, Some("default"), KubeOptions::default());
        store.list("fleetshard/").await.unwrap();
        store
            .list("configmap/argocd-app-controller-shard-cm/")
            .await
            .unwrap();
        // Each task holds its kind; once every task has ended, only weak references remain.
        let kinds: Vec<Weak<KindCache>> = store
            .inner
            .cache
            .scopes()
            .iter()
            .flat_map(|s| s.kinds.iter().map(Arc::downgrade).collect::<Vec<_>>())
            .collect();
        assert_eq!(
            kinds.len(),
            3,
            "Leases and ConfigMaps, and the one ConfigMap"
        );
        let clone = store.clone();
        drop(store);
        assert!(
            kinds.iter().all(|k| k.upgrade().is_some()),
            "a clone keeps the cache"
        );
        drop(clone);
        let deadline = Instant::now() + Duration::from_secs(10);
        while kinds.iter().any(|k| k.strong_count() > 0) {
            assert!(Instant::now() < deadline, "watch tasks still running");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    #[test]
    fn own_writes_are_awaited_only_from_watches_that_select_them() {
        let kind = |kind, selectors: (Option<&str>, Option<&str>)| KindCache {
            kind,
            selectors: (
                selectors.0.map(str::to_owned),
                selectors.1.map(str::to_owned),
            ),
            shared: selectors.0.is_none(),
            state: std::sync::Mutex::new(crate::cache::KindState::new(Instant::now())),
            notify: tokio::sync::watch::channel(0).0,
        };
        let records = "app.kubernetes.io/managed-by=fleetshard,fleetshard.io/root=fleetshard";
        let leases = kind(KindName::Lease, (Some(records), None));
        let cms = kind(KindName::ConfigMap, (Some(records), None));
        let argo = kind(
            KindName::ConfigMap,
            (None, Some("metadata.name=argocd-app-controller-shard-cm")),
        );
        let shard = "fleetshard/shards/0";
        let assignment = "fleetshard/assignment";
        let argo_key = "configmap/argocd-app-controller-shard-cm/shardControllerMapping";
        let t = |k| Target::of(k).unwrap();
        assert!(selects(&leases, &t(shard), shard));
        assert!(!selects(&cms, &t(shard), shard));
        assert!(selects(&cms, &t(assignment), assignment));
        assert!(!selects(&leases, &t("other/shards/0"), "other/shards/0"));
        assert!(selects(&argo, &t(argo_key), argo_key));
        assert!(!selects(&cms, &t(argo_key), argo_key));
    }
}
