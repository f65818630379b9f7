//! Argo CD's own objects as an inventory source: cluster Secrets (label
//! `argocd.argoproj.io/secret-type=cluster`, in one namespace, `argocd` by default),
//! AppProjects (in that namespace) and `argoproj.io/v1alpha1` Applications (all namespaces
//! or one), through kube-rs watchers, so fleetshard can run beside or instead of Argo CD's
//! controller on the same objects. In the same namespace, what the Git source needs for
//! private repositories: repository Secrets and credential templates (`secret-type in
//! (repository, repo-creds)`) and the ConfigMaps `argocd-ssh-known-hosts-cm` and
//! `argocd-tls-certs-cm` (each watched by name, a field selector, so RBAC can grant exactly
//! those two).
//!
//! Objects are converted with the manifest crate's Argo CD semantics
//! ([`cluster_from_value`](fleetshard_manifest::cluster_from_value),
//! [`app_from_value`](fleetshard_manifest::app_from_value)). An object that fails to
//! convert keeps its last good version and is reported. The watchers re-list after a 410
//! or a dropped watch; a re-list replaces the objects only once it is complete (`InitDone`),
//! so the inventory never shows a half-listed fleet. Watch errors (connectivity) are
//! reported as problems, retried with kube's default backoff, and cleared by the next event.
//!
//! Events that arrive together are applied as one batch and published once, so a burst of
//! changes (or a re-list of 100k Applications) costs one publication, not one per object.

use std::collections::BTreeMap;

use std::sync::Arc;

use fleetshard_core::App;
use fleetshard_manifest::{
    AppProject, ClusterSecret, KNOWN_HOSTS_CONFIG_MAP, RepoSecret, RepoSettings,
    TLS_CERTS_CONFIG_MAP,
};
use futures::StreamExt as _;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher::{self, Event};

use super::{Inventory, InventoryContent, Problem, StoredSpec, check_app};
use crate::AppKey;

/// The `source` of every problem this source reports.
const SOURCE: &str = "kubernetes";

/// Where to watch.
#[derive(Debug, Clone)]
pub struct KubernetesConfig {
    /// Namespace of the cluster Secrets (Argo CD's namespace; default `argocd`).
    pub secrets_namespace: String,
    /// Namespace of the Applications; `None` watches all namespaces (apps in any
    /// namespace).
    pub apps_namespace: Option<String>,
    /// Argo CD's in-cluster destination (argocd-cm `cluster.inClusterEnabled`, default
    /// true): the inventory carries the built-in in-cluster entry when no Secret names the
    /// in-cluster server, as Argo CD's cluster list does
    /// ([`InventoryContent::complete_argo_cluster_list`]).
    pub in_cluster_enabled: bool,
}

impl Default for KubernetesConfig {
    fn default() -> Self {
        KubernetesConfig {
            secrets_namespace: "argocd".to_owned(),
            apps_namespace: None,
            in_cluster_enabled: true,
        }
    }
}

/// Watches cluster Secrets and Applications into an [`Inventory`].
#[derive(Clone)]
pub struct KubernetesSource {
    client: kube::Client,
    config: KubernetesConfig,
}

impl std::fmt::Debug for KubernetesSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubernetesSource")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Why a Kubernetes source could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum KubernetesSourceError {
    /// The client could not be built from the configuration.
    #[error("cannot build a Kubernetes client: {0}")]
    Client(#[source] kube::Error),
}

impl KubernetesSource {
    /// A source over an existing client. The caller should have turned kube's built-in
    /// retries off (see [`KubernetesSource::from_config`]).
    pub fn new(client: kube::Client, config: KubernetesConfig) -> Self {
        KubernetesSource { client, config }
    }

    /// A source with its own client. kube's default retry of 429/503/504 is turned off:
    /// it can hold a request for minutes, hiding the outage from the problem list, while
    /// the watcher already retries with backoff.
    pub fn from_config(
        mut kube_config: kube::Config,
        config: KubernetesConfig,
    ) -> Result<Self, KubernetesSourceError> {
        kube_config.default_retry = false;
        let client = kube::Client::try_from(kube_config).map_err(KubernetesSourceError::Client)?;
        Ok(Self::new(client, config))
    }

    /// Watches until aborted, publishing after every batch of events that changed
    /// something.
    pub async fn run(self, inventory: Inventory) {
        let secrets_api: Api<DynamicObject> = Api::namespaced_with(
            self.client.clone(),
            &self.config.secrets_namespace,
            &secret_resource(),
        );
        let apps_api: Api<DynamicObject> = match &self.config.apps_namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &application_resource()),
            None => Api::all_with(self.client.clone(), &application_resource()),
        };
        let selector = format!("{}=cluster", fleetshard_manifest::SECRET_TYPE_LABEL);
        let repo_selector = format!(
            "{} in (repository,repo-creds)",
            fleetshard_manifest::SECRET_TYPE_LABEL
        );
        let secrets = watcher::watcher(
            secrets_api.clone(),
            watcher::Config::default().labels(&selector),
        )
        .default_backoff()
        .map(|e| (Kind::Secret, e))
        .boxed();
        let repos = watcher::watcher(
            secrets_api,
            watcher::Config::default().labels(&repo_selector),
        )
        .default_backoff()
        .map(|e| (Kind::Repo, e))
        .boxed();
        let config_maps_api: Api<DynamicObject> = Api::namespaced_with(
            self.client.clone(),
            &self.config.secrets_namespace,
            &config_map_resource(),
        );
        let config_map = |name: &str, kind: Kind| {
            let fields = format!("metadata.name={name}");
            watcher::watcher(
                config_maps_api.clone(),
                watcher::Config::default().fields(&fields),
            )
            .default_backoff()
            .map(move |e| (kind, e))
            .boxed()
        };
        let known_hosts = config_map(KNOWN_HOSTS_CONFIG_MAP, Kind::KnownHosts);
        let tls_certs = config_map(TLS_CERTS_CONFIG_MAP, Kind::TlsCerts);
        // argocd-cm: `cluster.inClusterEnabled`, and the settings render requests carry.
        let argocd_cm = config_map(ARGOCD_CM, Kind::ArgocdCm);
        let apps = watcher::watcher(apps_api, watcher::Config::default())
            .default_backoff()
            .map(|e| (Kind::App, e))
            .boxed();
        // AppProjects live in Argo CD's namespace, beside the cluster Secrets.
        let projects_api: Api<DynamicObject> = Api::namespaced_with(
            self.client.clone(),
            &self.config.secrets_namespace,
            &app_project_resource(),
        );
        let projects = watcher::watcher(projects_api, watcher::Config::default())
            .default_backoff()
            .map(|e| (Kind::Project, e))
            .boxed();
        let mut events = futures::stream::select_all([
            secrets,
            repos,
            known_hosts,
            tls_certs,
            argocd_cm,
            apps,
            projects,
        ])
        .ready_chunks(4096);

        let mut state = State {
            secrets: Objects::new(format!(
                "watch of Secrets in namespace {} ({selector})",
                self.config.secrets_namespace
            )),
            apps: Objects::new(match &self.config.apps_namespace {
                Some(ns) => format!("watch of Applications in namespace {ns}"),
                None => "watch of Applications in all namespaces".to_owned(),
            }),
            repos: Objects::new(format!(
                "watch of Secrets in namespace {} ({repo_selector})",
                self.config.secrets_namespace
            )),
            argocd_cm: Objects::new(format!(
                "watch of ConfigMap {}/{ARGOCD_CM}",
                self.config.secrets_namespace
            )),
            known_hosts: Objects::new(format!(
                "watch of ConfigMap {}/{KNOWN_HOSTS_CONFIG_MAP}",
                self.config.secrets_namespace
            )),
            tls_certs: Objects::new(format!(
                "watch of ConfigMap {}/{TLS_CERTS_CONFIG_MAP}",
                self.config.secrets_namespace
            )),
            projects: Objects::new(format!(
                "watch of AppProjects in namespace {}",
                self.config.secrets_namespace
            )),
        };
        while let Some(batch) = events.next().await {
            let mut changed = false;
            for (kind, event) in batch {
                changed |= match kind {
                    Kind::Secret => state.secrets.handle(event, convert_secret),
                    Kind::App => state.apps.handle(event, convert_app),
                    Kind::Project => state.projects.handle(event, convert_project),
                    Kind::Repo => state.repos.handle(event, convert_repo),
                    Kind::KnownHosts => state.known_hosts.handle(event, convert_config_map),
                    Kind::ArgocdCm => state.argocd_cm.handle(event, convert_argocd_cm),
                    Kind::TlsCerts => state.tls_certs.handle(event, convert_config_map),
                };
            }
            if changed {
                let (content, problems) = state.assemble(self.config.in_cluster_enabled);
                // Until the projects are listed, no app can be checked against its project.
                let ready = state.secrets.synced
                    && state.apps.synced
                    && state.repos.synced
                    && state.known_hosts.synced
                    && state.argocd_cm.synced
                    && state.tls_certs.synced
                    && state.projects.synced;
                inventory.publish(content, problems, ready);
            }
        }
    }
}

/// The core `v1` Secret, for dynamic API calls.
pub fn secret_resource() -> ApiResource {
    ApiResource {
        group: String::new(),
        version: "v1".to_owned(),
        api_version: "v1".to_owned(),
        kind: "Secret".to_owned(),
        plural: "secrets".to_owned(),
    }
}

fn config_map_resource() -> ApiResource {
    ApiResource {
        group: String::new(),
        version: "v1".to_owned(),
        api_version: "v1".to_owned(),
        kind: "ConfigMap".to_owned(),
        plural: "configmaps".to_owned(),
    }
}

/// Argo CD's `argoproj.io/v1alpha1` Application, for dynamic API calls.
pub fn application_resource() -> ApiResource {
    ApiResource {
        group: "argoproj.io".to_owned(),
        version: "v1alpha1".to_owned(),
        api_version: "argoproj.io/v1alpha1".to_owned(),
        kind: "Application".to_owned(),
        plural: "applications".to_owned(),
    }
}

/// Argo CD's `argoproj.io/v1alpha1` AppProject, for dynamic API calls.
pub fn app_project_resource() -> ApiResource {
    ApiResource {
        group: "argoproj.io".to_owned(),
        version: "v1alpha1".to_owned(),
        api_version: "argoproj.io/v1alpha1".to_owned(),
        kind: "AppProject".to_owned(),
        plural: "appprojects".to_owned(),
    }
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Secret,
    App,
    Project,
    Repo,
    KnownHosts,
    TlsCerts,
    ArgocdCm,
}

/// Namespace and name.
type Key = (String, String);

/// The result of converting one object: its value (`None`: not ours, e.g. a Secret that
/// lost its label) and warnings; or the error that keeps the last good version.
type Converted<T> = Result<(Option<T>, Vec<Problem>), Problem>;

#[derive(Debug, PartialEq)]
struct Entry<T> {
    good: Option<T>,
    problems: Vec<Problem>,
}

/// One watched kind: the objects as last converted, and the re-list in progress.
#[derive(Debug)]
struct Objects<T> {
    what: String,
    live: BTreeMap<Key, Entry<T>>,
    relist: Option<BTreeMap<Key, Entry<T>>>,
    synced: bool,
    connection: Option<Problem>,
}

impl<T: Clone + PartialEq> Objects<T> {
    fn new(what: String) -> Self {
        Objects {
            what,
            live: BTreeMap::new(),
            relist: None,
            synced: false,
            connection: None,
        }
    }

    /// Applies one watcher event; returns whether the published view may have changed.
    fn handle(
        &mut self,
        event: Result<Event<DynamicObject>, watcher::Error>,
        convert: fn(&DynamicObject) -> Converted<T>,
    ) -> bool {
        let event = match event {
            Ok(event) => event,
            Err(e) => {
                tracing::warn!(watch = %self.what, error = %e, "inventory watch failed; retrying");
                let problem = Problem::error(
                    SOURCE,
                    &self.what,
                    None,
                    &format!("{e}; retrying, the last listed objects are kept"),
                );
                self.connection = Some(problem);
                return true;
            }
        };
        let mut changed = self.connection.take().is_some();
        match event {
            Event::Init => self.relist = Some(BTreeMap::new()),
            Event::InitApply(obj) => {
                let key = key_of(&obj);
                // The live version is cloned only when the new one fails to convert: a
                // re-list of a large fleet would otherwise copy every object once more.
                let entry = entry(convert(&obj), || {
                    self.live.get(&key).and_then(|e| e.good.clone())
                });
                if let (Some(relist), Some(entry)) = (self.relist.as_mut(), entry) {
                    relist.insert(key, entry);
                }
            }
            Event::InitDone => {
                if let Some(relist) = self.relist.take() {
                    self.live = relist;
                }
                self.synced = true;
                changed = true;
            }
            Event::Apply(obj) => {
                let key = key_of(&obj);
                let old = self.live.remove(&key);
                let new = entry(convert(&obj), || old.as_ref().and_then(|e| e.good.clone()));
                // Most updates touch nothing the inventory reads (Argo CD writes each
                // Application's status): they must not cost a re-assembly of the fleet.
                changed |= new != old;
                if let Some(new) = new {
                    self.live.insert(key, new);
                }
            }
            Event::Delete(obj) => {
                changed |= self.live.remove(&key_of(&obj)).is_some();
            }
        }
        changed
    }

    fn values(&self) -> impl Iterator<Item = &T> {
        self.live.values().filter_map(|e| e.good.as_ref())
    }

    fn problems(&self) -> impl Iterator<Item = &Problem> {
        self.connection
            .iter()
            .chain(self.live.values().flat_map(|e| e.problems.iter()))
    }
}

/// The entry for a converted object; `None` when it is not one of ours. `previous` gives
/// the last good version, kept when the conversion failed.
fn entry<T>(converted: Converted<T>, previous: impl FnOnce() -> Option<T>) -> Option<Entry<T>> {
    match converted {
        Ok((Some(value), problems)) => Some(Entry {
            good: Some(value),
            problems,
        }),
        Ok((None, _)) => None,
        Err(problem) => Some(Entry {
            good: previous(),
            problems: vec![problem],
        }),
    }
}

fn key_of(obj: &DynamicObject) -> Key {
    (
        obj.metadata.namespace.clone().unwrap_or_default(),
        obj.metadata.name.clone().unwrap_or_default(),
    )
}

struct State {
    secrets: Objects<ClusterSecret>,
    apps: Objects<StoredApp>,
    projects: Objects<Arc<AppProject>>,
    repos: Objects<RepoSecret>,
    known_hosts: Objects<RepoSettings>,
    tls_certs: Objects<RepoSettings>,
    /// argocd-cm's `data`.
    argocd_cm: Objects<ArgocdCm>,
}

impl State {
    fn assemble(&self, in_cluster_enabled: bool) -> (InventoryContent, Vec<Problem>) {
        let mut content = InventoryContent::default();
        for (cluster, credentials) in self.secrets.values() {
            if let Some(c) = credentials {
                content.credentials.insert(cluster.id.clone(), c.clone());
            }
            content.clusters.push(cluster.clone());
        }
        for (app, spec) in self.apps.values() {
            content.specs.insert(AppKey::of(app), spec.clone());
            content.apps.push(app.clone());
        }
        for project in self.projects.values() {
            content
                .projects
                .insert(project.name.clone(), project.clone());
        }
        for repo in self.repos.values() {
            content.repositories.secrets.push(repo.clone());
        }
        for settings in self.known_hosts.values().chain(self.tls_certs.values()) {
            content.repositories.merge(settings.clone());
        }
        let mut problems = self
            .secrets
            .problems()
            .chain(self.apps.problems())
            .chain(self.projects.problems())
            .chain(self.repos.problems())
            .chain(self.known_hosts.problems())
            .chain(self.tls_certs.problems())
            .chain(self.argocd_cm.problems())
            .cloned()
            .collect();
        // Off when the flag says so, or when argocd-cm does (as Argo CD reads it).
        let enabled = in_cluster_enabled
            && self
                .argocd_cm
                .values()
                .all(|cm| cm.data.get(IN_CLUSTER_ENABLED).map(String::as_str) != Some("false"));
        if let Some(cm) = self.argocd_cm.values().next() {
            content.argocd_cm = cm.data.clone();
        }
        content.complete_argo_cluster_list(enabled, SOURCE, &mut problems);
        (content, problems)
    }
}

fn to_value(obj: &DynamicObject, kind: &str) -> Result<serde_json::Value, Problem> {
    serde_json::to_value(obj).map_err(|e| {
        let (ns, name) = key_of(obj);
        Problem::error(
            SOURCE,
            &format!("{kind} {ns}/{name}"),
            None,
            &format!("cannot be read as JSON: {e}"),
        )
    })
}

fn convert_secret(obj: &DynamicObject) -> Converted<ClusterSecret> {
    let value = to_value(obj, "Secret")?;
    let loaded = fleetshard_manifest::cluster_from_value(&value, SOURCE)
        .map_err(|e| Problem::from_load_error(&e))?;
    let warnings = loaded.warnings.iter().map(Problem::from_warning).collect();
    Ok((loaded.value, warnings))
}

/// An Application as the source keeps it: the app, and its spec compact.
type StoredApp = (App, StoredSpec);

fn convert_app(obj: &DynamicObject) -> Converted<StoredApp> {
    let value = to_value(obj, "Application")?;
    let loaded = fleetshard_manifest::app_from_value(&value, SOURCE)
        .map_err(|e| Problem::from_load_error(&e))?;
    let (app, spec) = loaded.value;
    check_app(&app, SOURCE)?;
    let warnings = loaded.warnings.iter().map(Problem::from_warning).collect();
    Ok((Some((app, StoredSpec::from(spec))), warnings))
}

fn convert_project(obj: &DynamicObject) -> Converted<Arc<AppProject>> {
    let value = to_value(obj, "AppProject")?;
    let loaded = fleetshard_manifest::project_from_value(&value, SOURCE)
        .map_err(|e| Problem::from_load_error(&e))?;
    let warnings = loaded.warnings.iter().map(Problem::from_warning).collect();
    Ok((Some(Arc::new(loaded.value)), warnings))
}

fn convert_repo(obj: &DynamicObject) -> Converted<RepoSecret> {
    let value = to_value(obj, "Secret")?;
    let loaded = fleetshard_manifest::repo_secret_from_value(&value, SOURCE)
        .map_err(|e| Problem::from_load_error(&e))?;
    let warnings = loaded.warnings.iter().map(Problem::from_warning).collect();
    Ok((loaded.value, warnings))
}

/// Argo CD's settings ConfigMap.
const ARGOCD_CM: &str = "argocd-cm";

/// argocd-cm's key turning the in-cluster destination off: only when it is exactly
/// `"false"`, as Argo CD reads it.
const IN_CLUSTER_ENABLED: &str = "cluster.inClusterEnabled";

/// argocd-cm's `data`, as a ConfigMap's string values.
#[derive(Debug, Clone, PartialEq)]
struct ArgocdCm {
    data: BTreeMap<String, String>,
}

fn convert_argocd_cm(obj: &DynamicObject) -> Converted<ArgocdCm> {
    let value = to_value(obj, "ConfigMap")?;
    let data = match value.get("data") {
        None | Some(serde_json::Value::Null) => BTreeMap::new(),
        Some(data) => serde_json::from_value(data.clone()).map_err(|e| {
            let (ns, name) = key_of(obj);
            Problem::error(
                SOURCE,
                &format!("ConfigMap {ns}/{name}"),
                Some("data"),
                &format!("is not a map of strings: {e}"),
            )
        })?,
    };
    Ok((Some(ArgocdCm { data }), Vec::new()))
}

fn convert_config_map(obj: &DynamicObject) -> Converted<RepoSettings> {
    let value = to_value(obj, "ConfigMap")?;
    let loaded = fleetshard_manifest::repo_config_map_from_value(&value, SOURCE)
        .map_err(|e| Problem::from_load_error(&e))?;
    let warnings = loaded.warnings.iter().map(Problem::from_warning).collect();
    Ok((Some(loaded.value), warnings))
}
