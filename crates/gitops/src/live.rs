//! Live state from the destination clusters, with kube-rs.
//!
//! [`ClusterConnections`] holds one [`ClusterConn`] per destination cluster this replica
//! owns: a kube `Client` (from the cluster's server URL, plus a bearer token and TLS
//! settings when the cluster Secret has them, or an EKS token from [`eks`]), the kinds it serves (discovery, cached per
//! cluster), and one watch-backed cache per kind that some application on the cluster
//! deploys (`kube::runtime::watcher`, all namespaces). A cluster's caches exist exactly
//! while it is started: [`ClusterConnections::stop`] drops them and their watches.
//!
//! A namespace-scoped cluster (its Secret's `namespaces`, [`ClusterScope`]) is never
//! listed or watched cluster-wide: each namespaced kind is watched once per listed
//! namespace, and cluster-scoped kinds only with `clusterResources`. An object outside
//! that scope is [`LiveError::NotManaged`] ([`ClusterConn::check_managed`]), and what the
//! caches do not see is neither shown nor pruned. The scope is part of the credentials, so
//! a change to it in the Secret restarts the cluster's connection and caches.
//!
//! An application's live objects ([`ClusterConn::live_objects`]) are the cached objects
//! that are desired by it (by group, kind, namespace and name) or carry its tracking
//! annotation. Only kinds some application on the cluster desires (now or earlier while
//! the cluster was owned) are watched, so an object of a kind no desired manifest names
//! any more is not seen again after a restart — it is then neither shown nor pruned.
//!
//! A kind argocd-cm's `resource.exclusions`/`resource.inclusions` exclude on the cluster
//! (Argo CD's core exclusions included) is never watched ([`ClusterConn::set_resource_filter`]).
//!
//! Apps whose AppProject sets `orphanedResources` also see every namespaced kind of their
//! destination namespace ([`ClusterConn::namespace_objects`], `orphans.rs`), watched in
//! that namespace only while an app looks there.
//!
//! A watch that stalls (a partitioned cluster) serves a stale cache; so when the cluster
//! has not been heard from for [`LiveOptions::probe_after`], [`ClusterConn::check_reachable`]
//! asks the API server for its version before the cache is trusted.

mod cache;
mod compact;
mod connector;
pub mod eks;
mod error;
mod facts;
mod footprint;
mod identity;
mod kinds;
mod kubeconfig;
mod orphans;
mod reach;
pub use reach::WatchReach;
mod requests;
mod slim;
mod tls_configs;
mod updates;
mod versions;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use http::HeaderValue;
use kube::api::{ApiResource, DynamicObject};
use kube::{Client, Config};
use serde_json::Value;
use tokio::time::Instant;

pub use fleetshard_manifest::{ClusterCredentials, ClusterScope};

use cache::KindCache;
use eks::{BearerLayer, EksTokens};
pub use error::LiveError;
use error::with_causes;
pub use facts::ClusterCacheFacts;
pub use footprint::CacheUsage;
pub use identity::{ControlPlaneIdentity, Recognition};
use kubeconfig::kubeconfig_config;
pub use orphans::NamespaceObjects;
pub use requests::{AppConn, AppRequests, RequestLabels};
pub(crate) use slim::as_served;
use tls_configs::TlsConfigs;
pub use updates::UpdateFilter;
pub use versions::{ServedVersions, VERSIONS_TTL};

/// A destination cluster as the reconciler reaches it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterAccess {
    /// The cluster's id (as the shard filter knows it).
    pub id: String,
    /// The API server URL.
    pub server: String,
    /// How to authenticate.
    pub credentials: ClusterCredentials,
}

/// Timeouts of the live-state layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveOptions {
    /// Bound of every request that is not a watch (discovery, probe, apply, delete).
    pub call_timeout: Duration,
    /// How long a watch lasts before the server ends it and it is re-opened.
    pub watch_timeout: Duration,
    /// How long a refresh waits for a new kind's first list.
    pub sync_timeout: Duration,
    /// How many first lists (of a kind, or of a kind in one namespace) run at once on
    /// one cluster: the kinds of a cluster are listed in parallel, within this bound.
    pub list_concurrency: usize,
    /// After this long without hearing from a cluster, its reachability is probed before
    /// its cache is trusted.
    pub probe_after: Duration,
    /// Refuse clusters whose server is plaintext `http://` (their token would cross the
    /// network in clear); otherwise such a connection is warned about once.
    pub refuse_plaintext: bool,
    /// How long after a kind's last complete list its watch is restarted with a new list
    /// (Argo CD's `ARGOCD_CLUSTER_CACHE_WATCH_RESYNC_DURATION`, 10 minutes): what a
    /// watch missed is current again within this period plus one list.
    pub relist_every: Duration,
    /// A slice owner (`reach.rs`) watches a namespaced kind in each namespace its apps
    /// use, one watch per namespace, up to this many; beyond, cluster-wide.
    pub narrow_watch_limit: usize,
}

impl LiveOptions {
    /// How old a kind's cache may be (since its last complete list) before comparisons
    /// on it fail with [`LiveError::NotReady`]: the relist period and two minutes for the
    /// new list (and its retries) to complete.
    pub fn stale_after(&self) -> Duration {
        self.relist_every + STALE_MARGIN
    }
}

/// What [`LiveOptions::stale_after`] allows beyond the relist period.
const STALE_MARGIN: Duration = Duration::from_secs(120);

impl Default for LiveOptions {
    fn default() -> Self {
        LiveOptions {
            call_timeout: Duration::from_secs(5),
            watch_timeout: Duration::from_secs(60),
            sync_timeout: Duration::from_secs(10),
            list_concurrency: DEFAULT_LIST_CONCURRENCY,
            probe_after: Duration::from_secs(5),
            refuse_plaintext: false,
            relist_every: DEFAULT_RELIST_EVERY,
            narrow_watch_limit: DEFAULT_NARROW_WATCH_LIMIT,
        }
    }
}

/// The default of [`LiveOptions::relist_every`]: Argo CD's watch resync, 10 minutes.
pub const DEFAULT_RELIST_EVERY: Duration = Duration::from_secs(600);

/// The kinds watched for the app-state cache's resource tree beyond the apps' own:
/// (apiVersion, kind). Their objects are kept parsed (`compact.rs`): the tree scans them
/// whole at every app's write.
pub const TREE_KINDS: [(&str, &str); 4] = [
    ("apps/v1", "ReplicaSet"),
    ("v1", "Pod"),
    ("discovery.k8s.io/v1", "EndpointSlice"),
    ("v1", "Node"),
];

/// The default of [`LiveOptions::narrow_watch_limit`].
pub const DEFAULT_NARROW_WATCH_LIMIT: usize = 64;

/// The default of [`LiveOptions::list_concurrency`] (Argo CD's cluster cache lists
/// kinds in parallel too, through a semaphore of its own).
pub const DEFAULT_LIST_CONCURRENCY: usize = 8;

/// A kind as a cluster serves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindInfo {
    /// Group, version, kind and plural.
    pub resource: ApiResource,
    /// Whether its objects live in namespaces.
    pub namespaced: bool,
}

/// Told the app instance name in the tracking annotation of every object that changes (or
/// goes) on a started cluster's watched kinds, after the kind's first list: how the
/// controller refreshes an app when its live objects change, as Argo CD does.
pub type ChangeListener = Arc<dyn Fn(&str) + Send + Sync>;

/// The connections to the clusters this replica owns.
pub struct ClusterConnections {
    options: LiveOptions,
    clusters: Mutex<HashMap<String, Arc<ClusterConn>>>,
    listener: Option<ChangeListener>,
    user_agent: Option<HeaderValue>,
    eks: Option<Arc<EksTokens>>,
    /// The rustls configurations the clients share, one per TLS setting.
    tls: TlsConfigs,
    /// The instance label key the caches index objects by (argocd-cm's
    /// `application.instanceLabelKey`).
    label_key: Mutex<Arc<str>>,
    /// The cluster this replica runs in, to recognise it among the destinations.
    identity: Arc<ControlPlaneIdentity>,
    /// Where the pod's own service account comes from (the built-in in-cluster entry).
    pod_config: PodConfig,
}

/// Reads the pod's service account configuration: kube's `Config::incluster` (the
/// environment and the projected token), or a stand-in in tests.
pub type PodConfig = fn() -> Result<Config, String>;

fn pod_config_from_environment() -> Result<Config, String> {
    Config::incluster().map_err(|e| e.to_string())
}

impl ClusterConnections {
    /// No cluster started yet.
    pub fn new(options: LiveOptions) -> Self {
        ClusterConnections {
            options,
            clusters: Mutex::new(HashMap::new()),
            listener: None,
            user_agent: None,
            eks: None,
            tls: TlsConfigs::default(),
            label_key: Mutex::new(Arc::from(crate::compare::DEFAULT_APP_LABEL_KEY)),
            identity: Arc::default(),
            pod_config: pod_config_from_environment,
        }
    }

    /// Reads the pod's service account with `read` instead of from the environment.
    pub fn with_pod_config(mut self, read: PodConfig) -> Self {
        self.pod_config = read;
        self
    }

    /// Indexes the caches' objects by the instance label `key` (argocd-cm's
    /// `application.instanceLabelKey`): when it changes, every started cluster is
    /// stopped, and its caches are made again, so indexed by the new key, at its next use.
    pub fn set_instance_label_key(&self, key: &str) {
        let mut current = lock(&self.label_key);
        if &**current == key {
            return;
        }
        *current = Arc::from(key);
        drop(current);
        lock(&self.clusters).clear();
    }

    /// Reaches clusters whose Secret has `awsAuthConfig` with tokens from `tokens` (shared
    /// by every connection, so one cache serves them all). Without it such clusters are
    /// refused at connect.
    pub fn with_eks(mut self, tokens: Arc<EksTokens>) -> Self {
        self.eks = Some(tokens);
        self
    }

    /// Sends `agent` as the `User-Agent` of every request to the clusters (which replica
    /// wrote shows in each cluster's audit log). An agent a header cannot carry is an
    /// error naming it.
    pub fn with_user_agent(mut self, agent: &str) -> Result<Self, LiveError> {
        let value = HeaderValue::from_str(agent).map_err(|e| LiveError::Config {
            cluster: "(every cluster)".to_owned(),
            message: format!("User-Agent {agent:?}: {e}"),
        })?;
        self.user_agent = Some(value);
        Ok(self)
    }

    /// Tells `listener` about every change of a tracked object on the started clusters.
    pub fn with_listener(mut self, listener: ChangeListener) -> Self {
        self.listener = Some(listener);
        self
    }

    /// The connection to `access.id`, made now if the cluster is not started or its
    /// server or credentials (scope included) changed (the old caches are dropped then).
    pub async fn start(&self, access: &ClusterAccess) -> Result<Arc<ClusterConn>, LiveError> {
        if let Some(conn) = lock(&self.clusters).get(&access.id)
            && conn.access == *access
        {
            return Ok(conn.clone());
        }
        let label_key = lock(&self.label_key).clone();
        let conn = Arc::new(ClusterConn::connect(access.clone(), self, label_key).await?);
        let mut clusters = lock(&self.clusters);
        // Another task may have connected meanwhile: keep the first, so one cache exists.
        match clusters.get(&access.id) {
            Some(existing) if existing.access == *access => Ok(existing.clone()),
            _ => {
                clusters.insert(access.id.clone(), conn.clone());
                conn.read_version_in_background();
                Ok(conn)
            }
        }
    }

    /// Drops the cluster's connection and caches (their watches end); true if it was
    /// started. Work still holding the connection keeps it until it finishes.
    pub fn stop(&self, id: &str) -> bool {
        lock(&self.clusters).remove(id).is_some()
    }

    /// The started clusters' ids, sorted.
    pub fn started(&self) -> Vec<String> {
        let mut ids: Vec<String> = lock(&self.clusters).keys().cloned().collect();
        ids.sort();
        ids
    }

    /// How many objects the started clusters' caches hold in all (what this replica keeps
    /// in memory of its clusters' live state).
    pub fn cached_objects(&self) -> usize {
        let conns: Vec<_> = lock(&self.clusters).values().cloned().collect();
        conns.iter().map(|c| c.cached_objects()).sum()
    }

    /// Each started cluster's id and the age of its cache ([`ClusterConn::cache_age`]),
    /// sorted by id.
    pub fn cache_ages(&self) -> Vec<(String, Option<Duration>)> {
        self.each_started(ClusterConn::cache_age)
    }

    /// `read` of each started cluster, with its id, sorted by id. The connections' lock is
    /// released before `read` takes each cluster's own.
    pub(crate) fn each_started<T>(&self, read: impl Fn(&ClusterConn) -> T) -> Vec<(String, T)> {
        let conns: Vec<_> = lock(&self.clusters)
            .iter()
            .map(|(id, c)| (id.clone(), c.clone()))
            .collect();
        let mut out: Vec<_> = conns.into_iter().map(|(id, c)| (id, read(&c))).collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// How many distinct rustls configurations the clusters' clients share (one per TLS
    /// setting in use: CA, client certificate, `insecure`).
    pub fn tls_configs(&self) -> usize {
        self.tls.live()
    }
}

/// One cluster: client, discovery cache, and object caches.
pub struct ClusterConn {
    access: ClusterAccess,
    client: Client,
    options: LiveOptions,
    /// (apiVersion, kind) → what discovery said.
    kinds: Mutex<HashMap<(String, String), KindInfo>>,
    /// (group, kind) → its cache; one version per kind is watched.
    caches: Mutex<HashMap<(String, String), Arc<KindCache>>>,
    heard: Arc<Mutex<Option<Instant>>>,
    probe: tokio::sync::Mutex<()>,
    listener: Option<ChangeListener>,
    /// Bounds the first lists in flight ([`LiveOptions::list_concurrency`]).
    lists: Arc<tokio::sync::Semaphore>,
    /// The instance label key the caches index by.
    label_key: Arc<str>,
    /// The last discovery of the server's versions, for rendering.
    versions: versions::VersionsSlot,
    /// The managers whose `managedFields` entries the caches keep (`slim.rs`).
    kept_managers: slim::KeptManagers,
    /// Which changes are not told to the listener (`updates.rs`).
    update_filter: updates::SharedUpdateFilter,
    /// The kinds never watched (argocd-cm's exclusions and inclusions, `kinds.rs`).
    resource_filter: Mutex<Arc<fleetshard_manifest::customizations::ResourceFilter>>,
    /// The cluster this replica runs in, and whether this one is it (`identity.rs`).
    identity: Arc<ControlPlaneIdentity>,
    control_plane: Mutex<Recognition>,
    /// The server's version, watch events, the last probe (`facts.rs`).
    observed: Arc<facts::Observed>,
    /// The namespaces looked in for orphaned resources, and their watches (`orphans.rs`).
    orphan_watch: Mutex<orphans::OrphanWatch>,
    /// Whether any app looks in a namespace of this cluster for orphaned resources (kept
    /// with `orphan_watch`, read without its lock: an app's refresh tells every started
    /// cluster it stopped looking, and this spares the clusters no app looks in).
    orphans_looked_for: std::sync::atomic::AtomicBool,
    /// Where the namespaced kinds' watches reach: everywhere, or a slice owner's apps'
    /// namespaces only (`reach.rs`).
    reach: Mutex<reach::Reach>,
}

impl ClusterConn {
    /// Connects to `access` with what `from` shares among its clusters (options, listener,
    /// User-Agent, EKS tokens, TLS configurations, the replica's own cluster's identity).
    async fn connect(
        access: ClusterAccess,
        from: &ClusterConnections,
        label_key: Arc<str>,
    ) -> Result<Self, LiveError> {
        let options = from.options;
        let (listener, user_agent, eks) = (
            from.listener.clone(),
            from.user_agent.clone(),
            from.eks.clone(),
        );
        let (tls, identity) = (&from.tls, &from.identity);
        let config_err = |message: String| LiveError::Config {
            cluster: access.server.clone(),
            message,
        };
        if access.server.starts_with("http://") {
            if options.refuse_plaintext {
                return Err(config_err(
                    "the server is plaintext http://, refused by --refuse-plaintext-http: its \
                     credentials would cross the network in clear"
                        .to_owned(),
                ));
            }
            tracing::warn!(
                cluster = %access.id,
                server = %access.server,
                "plaintext http:// cluster: its credentials cross the network in clear \
                 (--refuse-plaintext-http refuses such clusters)"
            );
        }
        let mut config = if access.credentials.pod_service_account {
            // Argo CD's built-in in-cluster entry: the pod's own service account. kube
            // re-reads the projected token as the kubelet rotates it.
            (from.pod_config)().map_err(|e| {
                config_err(format!(
                    "the built-in in-cluster destination uses this pod's service account, \
                     and none is usable here ({e}); run in a pod, add a cluster Secret for \
                     {}, or disable the in-cluster destination (--in-cluster-enabled=false)",
                    access.server
                ))
            })?
        } else {
            kubeconfig_config(&access).await.map_err(config_err)?
        };
        let control_plane = identity.before_probe(&access, config.root_cert.as_deref());
        config.connect_timeout = Some(options.call_timeout);
        // Watches stay open up to `watch_timeout`; other calls are bounded by
        // `call_timeout` around them.
        config.read_timeout = Some(options.watch_timeout + options.call_timeout);
        config.write_timeout = Some(options.call_timeout);
        // kube retries 429/503/504 by default for minutes: an unreachable cluster must
        // show on the app quickly, and the controller's queue owns the backoff.
        config.default_retry = false;
        if let Some(agent) = user_agent {
            config.headers.push((http::header::USER_AGENT, agent));
        }
        let client_err = |e: kube::Error| match &access.credentials.exec {
            // The credential plugin runs while the client is built: name it.
            Some(exec) if access.credentials.aws.is_none() => config_err(format!(
                "credential plugin {:?} (execProviderConfig): {e}{}",
                exec.command,
                exec.install_hint
                    .as_deref()
                    .map(|hint| format!("; {hint}"))
                    .unwrap_or_default()
            )),
            _ => config_err(e.to_string()),
        };
        let bearer = match &access.credentials.aws {
            None => None,
            Some(aws) => {
                let tokens = eks.ok_or_else(|| {
                    config_err(
                        "config.awsAuthConfig: this process was given no AWS credentials \
                         source for EKS tokens; nothing is sent to the cluster"
                            .to_owned(),
                    )
                })?;
                // A first token now: a missing credential or a refused role shows at
                // connect, naming what to fix, rather than as 401s on every request.
                tokens.token(aws).await.map_err(|e| {
                    config_err(format!(
                        "config.awsAuthConfig (EKS cluster {}): {e}",
                        aws.cluster_name
                    ))
                })?;
                Some(BearerLayer {
                    tokens,
                    auth: aws.clone(),
                })
            }
        };
        let builder = tls.client_builder(config).map_err(client_err)?;
        let client = match bearer {
            None => builder.build(),
            Some(layer) => builder.with_layer(&layer).build(),
        };
        Ok(ClusterConn {
            access,
            client,
            options,
            kinds: Mutex::new(HashMap::new()),
            caches: Mutex::new(HashMap::new()),
            heard: Arc::new(Mutex::new(None)),
            probe: tokio::sync::Mutex::new(()),
            listener,
            lists: Arc::new(tokio::sync::Semaphore::new(options.list_concurrency.max(1))),
            label_key,
            versions: Default::default(),
            kept_managers: Default::default(),
            update_filter: Default::default(),
            resource_filter: Default::default(),
            identity: Arc::clone(identity),
            control_plane: Mutex::new(control_plane),
            observed: Arc::default(),
            orphan_watch: Mutex::default(),
            orphans_looked_for: Default::default(),
            reach: Mutex::default(),
        })
    }

    /// The cluster's id.
    pub fn cluster_id(&self) -> &str {
        &self.access.id
    }

    /// The cluster's client (retries off).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The timeouts in force.
    pub fn options(&self) -> LiveOptions {
        self.options
    }

    fn unreachable(&self, message: impl Into<String>) -> LiveError {
        LiveError::Unreachable {
            cluster: self.access.server.clone(),
            message: message.into(),
        }
    }

    /// Notes that the cluster answered.
    pub(crate) fn heard_now(&self) {
        *lock(&self.heard) = Some(Instant::now());
    }

    /// Ok if the cluster was heard from within `probe_after`, else if it answers a
    /// version request within `call_timeout` (one probe at a time).
    pub async fn check_reachable(&self) -> Result<(), LiveError> {
        let recent =
            |c: &ClusterConn| lock(&c.heard).is_some_and(|t| t.elapsed() < c.options.probe_after);
        if recent(self) {
            return Ok(());
        }
        let _one = self.probe.lock().await;
        if recent(self) {
            return Ok(());
        }
        let call = self.client.apiserver_version();
        let answer = tokio::time::timeout(self.options.call_timeout, call).await;
        self.observed.probed(matches!(answer, Ok(Ok(_))));
        match answer {
            Ok(Ok(info)) => {
                self.observed.saw_version(&info.git_version);
                self.heard_now();
                Ok(())
            }
            Ok(Err(e)) => Err(self.unreachable(with_causes(&e))),
            Err(_) => {
                Err(self.unreachable(format!("no answer within {:?}", self.options.call_timeout)))
            }
        }
    }

    /// The part of the cluster its Secret lets fleetshard reach (`namespaces`,
    /// `clusterResources`).
    pub fn scope(&self) -> &ClusterScope {
        &self.access.credentials.scope
    }

    /// Ok if the object `kind` `name` in `namespace` (empty: cluster-scoped) is inside the
    /// cluster's scope; else [`LiveError::NotManaged`], and nothing of the app is to be
    /// read, applied or pruned.
    pub fn check_managed(&self, kind: &str, namespace: &str, name: &str) -> Result<(), LiveError> {
        match self.scope().refusal(kind, namespace, name) {
            None => Ok(()),
            Some(message) => Err(LiveError::NotManaged {
                cluster: self.access.server.clone(),
                message,
            }),
        }
    }
}

/// `obj` as JSON with `apiVersion` and `kind` set from `resource` (list items and some
/// answers omit them; the comparison needs them).
pub(crate) fn live_value(resource: &ApiResource, obj: DynamicObject) -> Value {
    let mut value = serde_json::to_value(obj).unwrap_or(Value::Null);
    if let Some(map) = value.as_object_mut() {
        map.insert("apiVersion".into(), resource.api_version.clone().into());
        map.insert("kind".into(), resource.kind.clone().into());
    }
    value
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section leaves its map consistent: a poisoned lock is still usable.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests;
