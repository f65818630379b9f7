//! `kubernetes://NAMESPACE`: fleetshard's coordination store in a Kubernetes namespace,
//! over the API server with `resourceVersion` compare-and-swap. No CRD, no extra storage:
//! records are ConfigMaps and `coordination.k8s.io/v1` Leases, and Argo CD's own shard
//! ConfigMap is reachable as a key, so fleetshard and Argo CD can share it.
//!
//! # Versions
//! A store version is the object's `metadata.resourceVersion`, parsed as a number. On a
//! real API server (and the test fake) that is the etcd revision of the object's last
//! write: store-wide, increasing, never reused — exactly the trait's versions. An API
//! server whose resourceVersions are not numbers is refused ([`StoreError::Backend`] naming
//! the object).
//!
//! # Where a key lives
//! - `configmap/NAME/DATAKEY` is data key DATAKEY of ConfigMap NAME, whoever owns it: this
//!   is how Argo CD-compatible mode shares `configmap/argocd-app-controller-shard-cm/
//!   shardControllerMapping` with Argo CD itself. Its version is the ConfigMap's
//!   resourceVersion (so it also changes when another data key changes); a write replaces
//!   the whole ConfigMap with a resourceVersion compare-and-swap, keeping every other key,
//!   label and annotation; a write to an absent ConfigMap creates it (without labels, as
//!   Argo CD does); a delete removes only the data key. ConfigMaps fleetshard made for its
//!   own records cannot be addressed this way (one key, one object).
//! - Lease records ([`is_lease_key`]: `ROOT/shards/N`, `ROOT/distributor`,
//!   `ROOT/replicas/ID`) are Leases: the record in the annotation `fleetshard.io/record`,
//!   the JSON field `holder` mirrored to `spec.holderIdentity` so that `kubectl get leases`
//!   shows who holds what. `renewTime` and `leaseDurationSeconds` are left unset on purpose:
//!   liveness is fleetshard's observers' business, and no other tool should expire these.
//! - Every other key (the assignment, the desired shard count…) is a ConfigMap with the
//!   bytes in `data.value` (UTF-8) or `binaryData.value`, up to Kubernetes' 1 MiB.
//! - Names: a key of lowercase DNS labels separated by `/` is its own name with `/` → `.`
//!   (`fleetshard/shards/0` → Lease `fleetshard.shards.0`); any other key is a readable
//!   prefix, `--` and a hash of the key (`Fleet/X` → `fleet-x--3f…`). The exact key is in the
//!   annotation `fleetshard.io/key`; every record object is labelled
//!   `app.kubernetes.io/managed-by=fleetshard` and `fleetshard.io/root=<first segment of
//!   the key>` (hashed when not a valid label value).
//!
//! # Operations
//! - `put`: `Absent` creates (409 AlreadyExists → [`StoreError::Conflict`]); `Version(v)`
//!   replaces with `metadata.resourceVersion = v` (409 or 404 → `Conflict`): a PUT for a
//!   ConfigMap, a merge patch carrying the resourceVersion for a Lease (a real API server
//!   lets a PUT *create* a missing Lease, which would let a compare-and-swap on a deleted
//!   record succeed; a patch of a missing object is 404); `Any` reads and then writes the
//!   same way, retrying on 409 a bounded number of times. The new version is the written
//!   object's resourceVersion. kube's built-in retry of 429/503/504 is turned off: it
//!   could take minutes and resend a compare-and-swap whose first try applied.
//! - `delete`: with `preconditions.resourceVersion` (409 or 404 → `Conflict`).
//! - `list(prefix)`: from the watch cache (below) while it is fresh; otherwise
//!   label-selected lists of Leases and ConfigMaps, filtered by the key annotation, in key
//!   order. The revision is the smaller of the two kinds' resourceVersions (each list's, or
//!   each watch's last seen): the smaller never claims a write the listing may not reflect
//!   (an entry's version may exceed it when a write landed between the two; a caller just
//!   lists again).
//! - `wait_for_change(prefix, since)`: from the watch cache's notifications; returns on the
//!   first change under the prefix after what a listing at `since` showed (a change older
//!   than the cache's memory wakes it at once: a spurious wake-up, which the trait allows).
//!
//! # The watch cache
//! Per scope (the record labels of a prefix's first segment, or the ConfigMaps a
//! `configmap/` prefix names; at most 8 scopes, beyond which listings go to the API
//! server), one LIST and then one WATCH per kind with bookmarks, started on first use and
//! stopped when the last clone of the store is dropped. A watch the server ends is
//! re-opened from the last seen resourceVersion; 410 Gone (history compacted) starts over
//! with a LIST; an unreachable server is retried with a backoff up to 2 s.
//! - Fresh: a kind that heard from the API server (a LIST, a watch opening, an event, a
//!   bookmark) within [`KubeOptions::cache_freshness`] (10 s). Each watch asks the server
//!   to end it after [`KubeOptions::watch_timeout`] (8 s), so even a quiet server shows it
//!   is alive in time; a stalled connection does not count.
//! - Read-your-writes: after this client's `put` returned version V, a listing waits until
//!   every kind has reached V — up to 1 s for a watch that will show the write itself; a
//!   kind that will not (a Lease write moves no ConfigMap watch) is LISTed at once, and the
//!   LIST refreshes the cache (events at or below a kind's revision are then ignored). A
//!   delete's answer carries no revision: the object leaves cached listings at once and
//!   stays out until the watch shows the deletion (or a re-creation).
//! - Cost: in steady state, re-watches (two kinds per scope per 8 s) and one LIST per own
//!   write of the other kind; no request per listing or wait
//!   (`docs/reliability.md` has the figures).
//!
//! # When the API server is in trouble
//! Every call is bounded by [`KubeOptions::call_timeout`] (3 s): no answer, a refused
//! connection, a 5xx or a 429 is [`StoreError::Unavailable`] (a write may or may not have
//! applied, as with any store); refusals that retrying cannot fix (403, 422, a malformed
//! answer) are [`StoreError::Backend`]. Cached listings go on from the last known state
//! while the cache is fresh; once it has heard nothing for
//! [`KubeOptions::cache_freshness`], listings go to the API server (so `Unavailable` within
//! the freshness bound plus the call timeout) and `wait_for_change` is `Unavailable`.
//!
//! # Connecting
//! [`KubeStore::from_url`] is synchronous and does no I/O: the client is built on first use
//! from `kube::Config::infer()` (in-cluster service account, else `KUBECONFIG` or
//! `~/.kube/config`), so a configuration problem is the first operation's error, named.
//! `kubernetes://` (no namespace) means the configuration's default namespace. The client
//! speaks plain `http://` (tests) and TLS (rustls) to real clusters.
//!
//! # The store is the store
//! A namespace deleted and created again is another store: its `metadata.uid` is recorded
//! at first contact and [`Store::check_identity`] (one GET of the namespace; the store
//! guard calls it at most once per second) reports another uid, or no namespace, as
//! [`StoreError::Replaced`] (`identity.rs`).
//!
//! # Permissions
//! In the namespace: `leases` (coordination.k8s.io) get, list, watch, create, patch, delete;
//! `configmaps` get, list, watch, create, update, delete; `namespaces` get (the namespace's
//! own object, for its uid; a Role in the namespace grants it); for the replica crate's `DeploymentReplicas`,
//! `deployments` (apps) get, list, watch. A refusal (403) is a [`StoreError::Backend`]
//! naming the call. Record names derive from keys, so these grants cannot carry
//! resourceNames: give the store a namespace of its own (the URL's), where nothing else
//! lives, as `deploy/overlays/fenced/store` does; only `configmap/NAME/…` keys (Argo CD's
//! shard map) are meant for a namespace shared with other objects.
//!
//! [`is_lease_key`]: fleetshard_coord::fenced::is_lease_key

mod cache;
mod cached;
mod errors;
mod identity;
mod list;
mod names;
mod objects;
mod ops;

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fleetshard_coord::store::{Entry, Listing, Precondition, Store, StoreError, StoreIdentity};
use futures::FutureExt;
use futures::future::BoxFuture;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use tokio::sync::OnceCell;

pub use names::{
    KEY_ANNOTATION, MANAGED_BY_LABEL, MANAGED_BY_VALUE, RECORD_ANNOTATION,
    RECORD_BASE64_ANNOTATION, ROOT_LABEL, VALUE_KEY, object_name,
};

/// The URL scheme of this store.
pub const SCHEME: &str = "kubernetes://";

/// Tuning for a [`KubeStore`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeOptions {
    /// Bound on each API call, and on connecting (default 3 s). A lease holder renews every
    /// second with two renews per deadline, so a call that takes longer has failed anyway.
    pub call_timeout: Duration,
    /// How long each watch may last before the server ends it (its `timeoutSeconds`,
    /// default 8 s); the watch cache then re-opens it from where it was. Kept below
    /// [`Self::cache_freshness`]: on a quiet server the re-opening is what shows the watch
    /// is alive (a real API server sends a bookmark only about once a minute, or shortly
    /// before the timeout).
    pub watch_timeout: Duration,
    /// Whether `list` and `wait_for_change` are served from the watch cache (default
    /// true). Off: every `list` is two LISTs and every `wait_for_change` two WATCHes.
    pub cache: bool,
    /// How long a cached kind stays usable without hearing from the API server (a LIST,
    /// a watch opening, an event or a bookmark; default 10 s). Past it, `list` asks the
    /// API server directly and `wait_for_change` is [`StoreError::Unavailable`].
    pub cache_freshness: Duration,
    /// How many times a `put` or `delete` with [`Precondition::Any`] (or on a shared
    /// ConfigMap another writer keeps changing) is tried before giving up with a conflict
    /// (default 8).
    pub write_attempts: u32,
    /// Pause before the second attempt, doubled up to 200 ms (default 10 ms).
    pub retry_backoff: Duration,
    /// The `User-Agent` of every request (a replica names itself with it); None: the
    /// client's default.
    pub user_agent: Option<String>,
}

impl Default for KubeOptions {
    fn default() -> Self {
        KubeOptions {
            call_timeout: Duration::from_secs(3),
            watch_timeout: Duration::from_secs(8),
            cache: true,
            cache_freshness: Duration::from_secs(10),
            write_attempts: 8,
            retry_backoff: Duration::from_millis(10),
            user_agent: None,
        }
    }
}

/// A [`Store`] in one Kubernetes namespace. Clones share one client.
#[derive(Clone)]
pub struct KubeStore {
    inner: Arc<Inner>,
}

struct Inner {
    /// From the URL; `None`: the configuration's default namespace.
    namespace: Option<String>,
    /// `None`: infer on first use.
    config: Option<kube::Config>,
    options: KubeOptions,
    ctx: OnceCell<Ctx>,
    /// The watch cache (its tasks stop when the last clone of the store is dropped).
    cache: cache::Cache,
    /// The newest version this client wrote: cached listings wait until they reach it.
    newest_write: AtomicU64,
    /// The namespace's uid at first contact (`identity.rs`).
    uid: Mutex<Option<String>>,
    /// Reading the namespace was refused (403), and that was logged.
    uid_refused: AtomicBool,
}

/// What first use sets up.
struct Ctx {
    client: kube::Client,
    namespace: String,
    configmaps: Api<ConfigMap>,
    leases: Api<Lease>,
}

impl std::fmt::Debug for KubeStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeStore")
            .field("namespace", &self.inner.namespace)
            .field("options", &self.inner.options)
            .finish_non_exhaustive()
    }
}

impl KubeStore {
    /// The store a `kubernetes://NAMESPACE` URL names, with the default options. Does no
    /// I/O; the configuration is inferred on first use.
    pub fn from_url(url: &str) -> Result<Self, StoreError> {
        Self::from_url_with(url, KubeOptions::default())
    }

    /// [`Self::from_url`] with `options`.
    pub fn from_url_with(url: &str, options: KubeOptions) -> Result<Self, StoreError> {
        let invalid = |reason: &str| StoreError::InvalidUrl {
            url: url.to_owned(),
            reason: reason.to_owned(),
        };
        let rest = url
            .get(..SCHEME.len())
            .filter(|s| s.eq_ignore_ascii_case(SCHEME))
            .map(|_| &url[SCHEME.len()..])
            .ok_or_else(|| invalid("expected kubernetes://NAMESPACE"))?;
        let namespace = rest.strip_suffix('/').unwrap_or(rest);
        if !namespace.is_empty() && !names::is_dns_label(namespace) {
            return Err(invalid(
                "the namespace must be a DNS label (lowercase letters, digits, '-'; at most 63)",
            ));
        }
        Ok(Self::new(
            None,
            Some(namespace.to_owned()).filter(|n| !n.is_empty()),
            options,
        ))
    }

    /// A store over an explicit client configuration (tests, or a caller that has one), in
    /// `namespace` or the configuration's default namespace.
    pub fn from_config(
        config: kube::Config,
        namespace: Option<&str>,
        options: KubeOptions,
    ) -> Self {
        Self::new(Some(config), namespace.map(str::to_owned), options)
    }

    fn new(config: Option<kube::Config>, namespace: Option<String>, options: KubeOptions) -> Self {
        KubeStore {
            inner: Arc::new(Inner {
                namespace,
                config,
                options,
                ctx: OnceCell::new(),
                cache: cache::Cache::default(),
                newest_write: AtomicU64::new(0),
                uid: Mutex::new(None),
                uid_refused: AtomicBool::new(false),
            }),
        }
    }

    /// The options in force.
    pub fn options(&self) -> &KubeOptions {
        &self.inner.options
    }

    /// The client, built on first use (for the replica crate's `DeploymentReplicas` and other readers of the
    /// same cluster).
    pub async fn client(&self) -> Result<kube::Client, StoreError> {
        Ok(self.ctx().await?.client.clone())
    }

    /// The namespace in use (resolving the configuration's default on first use).
    pub async fn namespace(&self) -> Result<String, StoreError> {
        Ok(self.ctx().await?.namespace.clone())
    }

    async fn ctx(&self) -> Result<&Ctx, StoreError> {
        self.inner.ctx.get_or_try_init(|| self.connect()).await
    }

    async fn connect(&self) -> Result<Ctx, StoreError> {
        let timeout = self.inner.options.call_timeout;
        let mut config = match &self.inner.config {
            Some(c) => c.clone(),
            None => tokio::time::timeout(timeout, kube::Config::infer())
                .await
                .map_err(|_| {
                    StoreError::Unavailable(format!(
                        "{}: reading the Kubernetes configuration took over {timeout:?}",
                        self.describe()
                    ))
                })?
                .map_err(|e| {
                    StoreError::Backend(format!(
                        "{}: no usable Kubernetes configuration (in-cluster service account, \
                         KUBECONFIG or ~/.kube/config): {e}",
                        self.describe()
                    ))
                })?,
        };
        config.connect_timeout = Some(timeout);
        // kube retries 429/503/504 by default, for up to minutes: that would turn a quick
        // `Unavailable` into a timeout, and could resend a compare-and-swap whose first try
        // applied (then reported as a conflict). The caller (the runner) owns retries.
        config.default_retry = false;
        if let Some(agent) = &self.inner.options.user_agent {
            let value = http::HeaderValue::from_str(agent).map_err(|e| {
                StoreError::Backend(format!("{}: User-Agent {agent:?}: {e}", self.describe()))
            })?;
            config.headers.push((http::header::USER_AGENT, value));
        }
        let namespace = self
            .inner
            .namespace
            .clone()
            .unwrap_or_else(|| config.default_namespace.clone());
        let client = kube::Client::try_from(config).map_err(|e| {
            StoreError::Backend(format!(
                "{}: cannot build a Kubernetes client: {e}",
                self.describe()
            ))
        })?;
        Ok(Ctx {
            configmaps: Api::namespaced(client.clone(), &namespace),
            leases: Api::namespaced(client.clone(), &namespace),
            client,
            namespace,
        })
    }
}

impl Store for KubeStore {
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Entry>, StoreError>> {
        async move { self.get_entry(self.ctx().await?, key).await }.boxed()
    }

    fn list<'a>(&'a self, prefix: &'a str) -> BoxFuture<'a, Result<Listing, StoreError>> {
        async move { self.list_prefix(self.ctx().await?, prefix).await }.boxed()
    }

    fn put<'a>(
        &'a self,
        key: &'a str,
        value: Vec<u8>,
        pre: Precondition,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        async move { self.put_entry(self.ctx().await?, key, value, pre).await }.boxed()
    }

    fn delete<'a>(
        &'a self,
        key: &'a str,
        pre: Precondition,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        async move { self.delete_entry(self.ctx().await?, key, pre).await }.boxed()
    }

    fn wait_for_change<'a>(
        &'a self,
        prefix: &'a str,
        since: u64,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        async move { self.wait(self.ctx().await?, prefix, since).await }.boxed()
    }

    fn describe(&self) -> String {
        format!(
            "{SCHEME}{}",
            self.inner.namespace.as_deref().unwrap_or_default()
        )
    }

    fn check_identity(&self) -> BoxFuture<'_, Result<StoreIdentity, StoreError>> {
        self.identity().boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let s = KubeStore::from_url("kubernetes://argocd").unwrap();
        assert_eq!(s.describe(), "kubernetes://argocd");
        assert_eq!(
            KubeStore::from_url("Kubernetes://argocd/")
                .unwrap()
                .describe(),
            "kubernetes://argocd"
        );
        assert_eq!(
            KubeStore::from_url("kubernetes://").unwrap().describe(),
            "kubernetes://"
        );
        for bad in [
            "kubernetes://Argo",
            "kubernetes://a/b",
            "kubernetes://a?x=1",
            "etcd://x",
            "kube",
        ] {
            assert!(
                matches!(
                    KubeStore::from_url(bad),
                    Err(StoreError::InvalidUrl { ref url, .. }) if url == bad
                ),
                "{bad}"
            );
        }
    }
}
