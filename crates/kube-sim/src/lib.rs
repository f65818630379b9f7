//! Simulated Kubernetes API servers for tests and demos: a fake API server over real HTTP
//! on 127.0.0.1, faithful where fleetshard depends on it, generic over the kinds it serves.
//! Tests reach it as `fleetshard_testsupport::kube_api`; `fleetshard simulate` serves it
//! as stand-in clusters.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use fleetshard_kube_sim::FakeApiServer;
//! let server = FakeApiServer::start().await?;
//! server.write_kubeconfig("/tmp/kubeconfig")?; // KUBECONFIG=/tmp/kubeconfig kubectl get cm
//! println!("{}", server.url()); // http://127.0.0.1:PORT, no auth
//! # Ok(()) }
//! ```
//!
//! What is faithful:
//! - ONE store-wide revision counter, as etcd's: every write takes the next integer as its
//!   `resourceVersion`; list and watch revisions are that counter, so resourceVersions
//!   compare across kinds like etcd revisions;
//! - strict compare-and-swap: PUT (and patches, apply, DELETE preconditions) with a stale
//!   `resourceVersion` → 409 Conflict, worded as the real server words it; a write that
//!   changes nothing keeps the resourceVersion and notifies no watcher (as etcd);
//! - watches from a revision see exactly the later events in order; bookmarks; 410 Expired
//!   (an ERROR event in the stream, or HTTP 410 for an exact LIST or a continue token)
//!   once the history after the revision is dropped (history window or [`FakeApiServer::compact`]);
//! - status and scale subresources, generation, finalizers, `generateName`, Secrets'
//!   `stringData`, namespaces that must exist, PUT creating a missing Lease (and only a
//!   Lease), `dryRun=All`, the size limits (1 MiB ConfigMap/Secret data, 3 MiB bodies),
//!   discovery (plain and aggregated);
//! - every error is a `Status` object with the real reason and code;
//! - with [`FakeConfig::bearer_token`], every request needs that token (401 otherwise);
//! - with [`FakeConfig::namespaced_tokens`], RBAC for a namespace-scoped identity: outside
//!   its namespaces (a cluster-wide list or watch included) a request answers the real
//!   authorizer's 403 Forbidden (see the `rbac` module);
//! - with [`FakeConfig::tls`], HTTPS with a CA generated for the server (see the `tls`
//!   module), optionally requiring a client certificate signed by it; the kubeconfig it
//!   writes carries the CA and the client certificate;
//! - a CustomResourceDefinition written to it makes its custom resource servable at once,
//!   with discovery, the CRD's status conditions, and deletion of the custom resources
//!   with the CRD (see the `crd` module for what is simplified);
//! - a CRD's structural schema prunes unknown fields and validates every write of its
//!   custom resources (required, types, enums, date-times; 422 Invalid with a cause per
//!   field; see the `schema` module); Argo CD's Application and AppProject CRDs, with a
//!   schema written from Argo CD's, are one call away
//!   ([`FakeApiServer::install_argocd_crds`]).
//!
//! Faults ([`FakeApiServer::inject`], [`FaultAction`]): failures with a code, latency,
//! partitions, a reply lost after the write was applied, and a write held until its client
//! gave up and served after that; every write is logged with its sender, arrival and end
//! ([`WriteRecord`], [`overlaps`]).
//!
//! What is simplified: strategic merge patch is a JSON merge patch (lists replaced);
//! server-side apply deep-merges maps and replaces lists (no associative list keys) and
//! tracks only Apply managers' fields (no `Update` entries, so no conflicts with fields
//! set by PUT or patches); no admission but the mutating webhooks a test adds
//! ([`FakeApiServer::add_mutating_webhook`]), no defaulting, validation of built-in kinds beyond names and sizes,
//! owner references or garbage collection; deleting a namespace deletes its contents at
//! once; LIST/WATCH do not serve protobuf or Table; watches without `timeoutSeconds` stay
//! open until closed; a partition holds new requests and stalls open watches that match.

mod admission;
mod apply;
mod argocd;
mod config;
mod crd;
mod discovery;
mod faults;
mod list;
mod meta;
mod ops;
mod patch;
pub mod ports;
mod rbac;
mod registry;
mod routes;
mod schema;
mod selectors;
mod state;
mod status;
mod store;
mod tls;
mod watch;
mod writes;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

pub use admission::{AdmissionRequest, MutatingWebhook};
pub use argocd::{APPLICATION_CRD_YAML, APPPROJECT_CRD_YAML, argocd_crds};
pub use config::{FakeApiError, FakeConfig};
pub use faults::{FaultAction, FaultId, RequestInfo, ScopedCounts, Verb};
pub use patch::merge_patch;
pub use ports::free_port;
pub use rbac::NamespacedToken;
pub use registry::{DEFAULT_RESOURCES, ResourceKind};
pub use status::{ApiError, Cause};
pub use tls::{Pki, TlsMaterial, TlsOptions, generate_pki};
pub use writes::{WriteOutcome, WriteRecord, overlaps};

use state::Shared;
use store::Store;

/// Serves `app` on `listener` (plain TCP or TLS) until `stopped`, in a task of its own.
fn serve<L>(
    listener: L,
    app: axum::Router,
    stopped: impl std::future::Future<Output = ()> + Send + 'static,
) where
    L: axum::serve::Listener,
    L::Addr: std::fmt::Debug,
{
    tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(stopped)
            .await;
        if let Err(e) = served {
            tracing::warn!(error = %e, "fake API server stopped with an error");
        }
    });
}

/// A running fake API server; shut down when dropped.
#[derive(Debug)]
pub struct FakeApiServer {
    shared: Arc<Shared>,
    addr: SocketAddr,
    tls: Option<TlsMaterial>,
}

impl FakeApiServer {
    /// Starts a server with the default kinds on a free loopback port. Needs a tokio
    /// runtime; the server runs on it until dropped.
    pub async fn start() -> Result<Self, FakeApiError> {
        Self::start_with(FakeConfig::default()).await
    }

    /// Starts a server with these settings.
    pub async fn start_with(config: FakeConfig) -> Result<Self, FakeApiError> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(FakeApiError::Bind)?;
        let addr = listener.local_addr().map_err(FakeApiError::Bind)?;
        let mut store = Store::new(1, config.history_limit);
        let ns_kind = config
            .resources
            .iter()
            .find(|k| (k.group, k.version, k.kind) == ("", "v1", "Namespace"));
        if let Some(ns_kind) = ns_kind {
            for ns in ops::INITIAL_NAMESPACES {
                // Cannot fail: fresh store, valid names.
                let _ = ops::create(&mut store, ns_kind, "", json!({"metadata": {"name": ns}}));
            }
        }
        let shared = Arc::new(Shared::new(
            &config.resources,
            store,
            config.bookmark_interval,
            addr.to_string(),
            config.bearer_token.filter(|t| !t.is_empty()),
            config.namespaced_tokens,
            config.write_log_limit,
        ));
        let app = routes::router(shared.clone());
        let mut stop = shared.shutdown.subscribe();
        let stopped = async move {
            let _ = stop.wait_for(|s| *s).await;
        };
        let tls = match &config.tls {
            None => {
                serve(listener, app, stopped);
                None
            }
            Some(options) => {
                let tls = tls::generate(options, addr)?;
                serve(tls::TlsListener::new(listener, addr, &tls), app, stopped);
                Some(tls.material)
            }
        };
        Ok(Self { shared, addr, tls })
    }

    /// The token requests must carry ([`FakeConfig::bearer_token`]), if any.
    pub fn bearer_token(&self) -> Option<&str> {
        self.shared.bearer_token.as_deref()
    }

    /// `http://127.0.0.1:PORT`, or `https://…` when serving TLS.
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// The CA and client certificate of a TLS server ([`FakeConfig::tls`]).
    pub fn tls(&self) -> Option<&TlsMaterial> {
        self.tls.as_ref()
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A kubeconfig (YAML) for this server: cluster (with the CA when serving TLS), user
    /// (with the bearer token when the server requires one, and the client certificate
    /// when serving TLS; else without credentials), and a current context with namespace
    /// "default".
    pub fn kubeconfig_yaml(&self) -> String {
        use base64::Engine as _;
        let b64 = |pem: &str| base64::engine::general_purpose::STANDARD.encode(pem);
        // JSON is YAML: the values need no escaping rules of their own.
        let mut cluster = json!({"server": self.url()});
        let mut user = json!({});
        if let Some(t) = self.bearer_token() {
            user["token"] = json!(t);
        }
        if let Some(tls) = &self.tls {
            cluster["certificate-authority-data"] = json!(b64(&tls.ca_pem));
            user["client-certificate-data"] = json!(b64(&tls.client_cert_pem));
            user["client-key-data"] = json!(b64(&tls.client_key_pem));
        }
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster: {cluster}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n    namespace: default\ncurrent-context: fake\nusers:\n- name: fake\n  user: {user}\npreferences: {{}}\n"
        )
    }

    /// Writes [`FakeApiServer::kubeconfig_yaml`] to `path`.
    pub fn write_kubeconfig(&self, path: impl AsRef<Path>) -> Result<(), FakeApiError> {
        let path = path.as_ref();
        std::fs::write(path, self.kubeconfig_yaml()).map_err(|source| FakeApiError::Kubeconfig {
            path: path.display().to_string(),
            source,
        })
    }

    // ----- direct access (no HTTP) -----

    fn kind(&self, api_version: &str, kind: &str) -> Result<ResourceKind, ApiError> {
        self.shared
            .registry()
            .by_kind(api_version, kind)
            .copied()
            .ok_or_else(|| {
                ApiError::new(
                    404,
                    "NotFound",
                    format!("the fake serves no kind {kind} in {api_version}"),
                )
            })
    }

    /// The current store revision.
    pub fn revision(&self) -> u64 {
        self.shared.read().revision()
    }

    /// The oldest revision watches and exact reads may start from (older ones get 410).
    pub fn compacted_revision(&self) -> u64 {
        self.shared.read().compacted()
    }

    /// The kinds served.
    pub fn resources(&self) -> Vec<ResourceKind> {
        self.shared.registry().kinds().to_vec()
    }

    /// Writes an object directly (create, or unconditional replace keeping uid and
    /// creationTimestamp), status included, as the next revision. The kind comes from
    /// `apiVersion`/`kind`, the namespace from `metadata.namespace` ("default" when absent
    /// for namespaced kinds; created if missing). Returns the stored object.
    pub fn insert(&self, obj: Value) -> Result<Value, ApiError> {
        let api_version = obj["apiVersion"].as_str().unwrap_or_default().to_string();
        let kind_name = obj["kind"].as_str().unwrap_or_default().to_string();
        let kind = self.kind(&api_version, &kind_name)?;
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        meta::validate_name(kind.group, kind.kind, &name, kind.kind == "Namespace")?;
        let ns = if kind.namespaced {
            obj.pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .unwrap_or("default")
                .to_string()
        } else {
            String::new()
        };
        if kind.namespaced {
            self.create_namespace(&ns)?;
        }
        let key = ops::key(&kind, &ns, &name);
        Ok(self.shared.write(|s| {
            let mut obj = obj;
            let old_meta = s.get(&key).map(|o| o["metadata"].clone());
            let m = obj["metadata"]
                .as_object_mut()
                .expect("metadata checked by name");
            if kind.namespaced {
                m.insert("namespace".into(), json!(ns));
            }
            let old = |f: &str| old_meta.as_ref().and_then(|o| o.get(f).cloned());
            m.entry("uid")
                .or_insert_with(|| old("uid").unwrap_or_else(|| json!(meta::new_uid())));
            m.entry("creationTimestamp").or_insert_with(|| {
                old("creationTimestamp").unwrap_or_else(|| json!(meta::now_rfc3339()))
            });
            m.entry("generation")
                .or_insert_with(|| old("generation").unwrap_or(json!(1)));
            (*s.commit(key, Some(obj)).object).clone()
        }))
    }

    /// Adds mutating admission webhook `name` (see the `admission` module): it changes or
    /// refuses every later create and update of a main resource, dry runs included.
    pub fn add_mutating_webhook(
        &self,
        name: &str,
        webhook: impl Fn(&AdmissionRequest<'_>, &mut Value) -> Result<(), String>
        + Send
        + Sync
        + 'static,
    ) {
        self.shared.read().admission.add(name, Arc::new(webhook));
    }

    /// Removes the mutating admission webhooks named `name`.
    pub fn remove_mutating_webhook(&self, name: &str) {
        self.shared.read().admission.remove(name);
    }

    /// Creates a namespace if it does not exist.
    pub fn create_namespace(&self, name: &str) -> Result<(), ApiError> {
        let kind = self.kind("v1", "Namespace")?;
        self.shared.write(|s| {
            match ops::create(s, &kind, "", json!({"metadata": {"name": name}})) {
                Ok(_) => Ok(()),
                Err(e) if e.reason == "AlreadyExists" => Ok(()),
                Err(e) => Err(e),
            }
        })
    }

    /// The current object, if any (`namespace` ignored for cluster-scoped kinds).
    pub fn get(&self, api_version: &str, kind: &str, namespace: &str, name: &str) -> Option<Value> {
        let kind = self.kind(api_version, kind).ok()?;
        self.shared
            .read()
            .get(&ops::key(&kind, namespace, name))
            .map(|o| (**o).clone())
    }

    /// The current objects of a kind, in one namespace or all (None), ordered by
    /// namespace and name.
    pub fn list(&self, api_version: &str, kind: &str, namespace: Option<&str>) -> Vec<Value> {
        let Ok(kind) = self.kind(api_version, kind) else {
            return Vec::new();
        };
        self.shared
            .read()
            .objects_of((kind.group, kind.plural), namespace)
            .map(|(_, o)| (**o).clone())
            .collect()
    }

    /// Deletes an object at once (finalizers ignored); returns its last state.
    pub fn delete(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Option<Value> {
        let kind = self.kind(api_version, kind).ok()?;
        let key = ops::key(&kind, namespace, name);
        self.shared.write(|s| {
            s.get(&key)?;
            Some((*s.commit(key, None).object).clone())
        })
    }

    /// Acts as a controller: changes the stored object with `f` (anything, status
    /// included) and writes it as the next revision (unless `f` changed nothing).
    pub fn modify(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
        f: impl FnOnce(&mut Value),
    ) -> Result<Value, ApiError> {
        let kind = self.kind(api_version, kind)?;
        let key = ops::key(&kind, namespace, name);
        self.shared.write(|s| {
            let existing = s
                .get(&key)
                .cloned()
                .ok_or_else(|| ApiError::not_found(kind.group, kind.plural, name))?;
            let mut obj = (*existing).clone();
            f(&mut obj);
            if obj == *existing {
                return Ok(obj);
            }
            Ok((*s.commit(key, Some(obj)).object).clone())
        })
    }

    /// Acts as the Deployment controller: sets `status` to `ready` ready, available and
    /// updated replicas out of `spec.replicas`, observing the current generation.
    pub fn set_deployment_ready(
        &self,
        namespace: &str,
        name: &str,
        ready: u64,
    ) -> Result<Value, ApiError> {
        self.modify("apps/v1", "Deployment", namespace, name, |d| {
            let replicas = d.pointer("/spec/replicas").cloned().unwrap_or(json!(1));
            let generation = d
                .pointer("/metadata/generation")
                .cloned()
                .unwrap_or(json!(1));
            d["status"] = json!({
                "observedGeneration": generation,
                "replicas": replicas,
                "updatedReplicas": ready,
                "readyReplicas": ready,
                "availableReplicas": ready,
            });
        })
    }

    // ----- watch and history controls -----

    /// Drops all history: watches and exact reads from any older revision answer 410.
    pub fn compact(&self) {
        self.shared.write(Store::compact);
    }

    /// Changes how many events are retained.
    pub fn set_history_limit(&self, events: usize) {
        self.shared.write(|s| s.set_history_limit(events));
    }

    /// Changes how often watches that allow bookmarks get one.
    pub fn set_bookmark_interval(&self, every: Duration) {
        self.shared.bookmark_interval.send_replace(every);
    }

    /// Makes every open watch that allows bookmarks send one now.
    pub fn send_bookmarks(&self) {
        self.shared.bookmark_now.send_modify(|n| *n += 1);
    }

    /// Ends every open watch stream (clients reconnect from their last revision).
    pub fn close_watches(&self) {
        self.shared.close_watches.send_modify(|n| *n += 1);
    }

    // ----- faults -----

    /// Fails the next `n` requests matching `when` with HTTP `code` (and a matching
    /// `Status`).
    pub fn fail_next(
        &self,
        n: u64,
        code: u16,
        when: impl Fn(&RequestInfo) -> bool + Send + Sync + 'static,
    ) -> FaultId {
        self.inject(
            Some(n),
            FaultAction::Fail {
                code,
                retry_after: None,
            },
            when,
        )
    }

    /// Adds a fault rule: `times` None = until removed.
    pub fn inject(
        &self,
        times: Option<u64>,
        action: FaultAction,
        when: impl Fn(&RequestInfo) -> bool + Send + Sync + 'static,
    ) -> FaultId {
        self.shared.faults.add(times, action, when)
    }

    /// Delays every request matching `when` by `delay` until removed.
    pub fn add_latency(
        &self,
        delay: Duration,
        when: impl Fn(&RequestInfo) -> bool + Send + Sync + 'static,
    ) -> FaultId {
        self.inject(None, FaultAction::Delay(delay), when)
    }

    /// Holds every request matching `when` (and stalls open watches matching it) until
    /// [`FakeApiServer::heal`] or the fault is removed.
    pub fn partition(
        &self,
        when: impl Fn(&RequestInfo) -> bool + Send + Sync + 'static,
    ) -> FaultId {
        self.inject(None, FaultAction::Hang, when)
    }

    /// Ends every partition.
    pub fn heal(&self) {
        self.shared.faults.heal();
    }

    /// Removes one fault.
    pub fn remove_fault(&self, id: FaultId) {
        self.shared.faults.remove(id);
    }

    /// Removes every fault.
    pub fn clear_faults(&self) {
        self.shared.faults.clear();
    }

    // ----- counters -----

    /// Requests received so far by (verb, plural resource); discovery under resource "".
    pub fn request_counts(&self) -> BTreeMap<(Verb, String), u64> {
        self.shared.faults.counts()
    }

    /// Requests received so far by (verb, plural resource, namespace of the path: `None`
    /// for a cluster-wide list or watch).
    pub fn request_counts_by_namespace(&self) -> ScopedCounts {
        self.shared.faults.counts_by_namespace()
    }

    /// Objects served by lists so far, by plural resource (every page's items).
    pub fn listed_objects(&self) -> BTreeMap<String, u64> {
        self.shared.faults.listed()
    }

    /// Requests received with this verb on this plural resource.
    pub fn request_count(&self, verb: Verb, resource: &str) -> u64 {
        self.request_counts()
            .get(&(verb, resource.to_string()))
            .copied()
            .unwrap_or(0)
    }

    /// Write requests (create, update, patch, delete) received, all resources.
    pub fn write_count(&self) -> u64 {
        self.request_counts()
            .iter()
            .filter(|((v, _), _)| v.is_write())
            .map(|(_, n)| n)
            .sum()
    }

    /// Zeroes the counters.
    pub fn reset_request_counts(&self) {
        self.shared.faults.reset_counts();
    }

    // ----- the write log -----

    /// Every write request received over HTTP (direct access is not a request), oldest
    /// first: who sent it, what, when it arrived and how and when it ended (the newest
    /// [`FakeConfig::write_log_limit`] kept).
    pub fn writes(&self) -> Vec<WriteRecord> {
        self.shared.writes.snapshot()
    }

    /// Pairs of writes from different User-Agents that were on this server at one instant
    /// ([`overlaps`]: G1 judged from the cluster's side). Empty when writers never
    /// interleave.
    pub fn write_overlaps(&self) -> Vec<(WriteRecord, WriteRecord)> {
        overlaps(&self.writes(), |w| w.user_agent.clone())
    }

    /// Forgets the write log.
    pub fn clear_writes(&self) {
        self.shared.writes.clear();
    }
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        // Release held requests and end watches so the server's connections close.
        self.shared.faults.clear();
        self.shared.shutdown.send_replace(true);
    }
}
