#![doc = include_str!("../README.md")]

mod app_spec;
mod application;
mod cluster_scope;
mod credentials;
pub mod customizations;
mod document;
mod error;
mod fast_yaml;
pub mod glob;
pub mod implemented;
mod native;
mod placement_app;
mod placement_secret;
pub mod project;
mod repository;
mod secret;
mod stream;
mod typed;
mod write;

#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::Path;

use fleetshard_core::argo::ArgoClusterList;
use fleetshard_core::{App, Cluster, Fleet, ShardSpec};

pub use app_spec::{
    AppCompareOptions, AppDefinition, AppSource, AppSpec, AutoSync, DirectoryOptions, InitiatedBy,
    Lifecycle, ManagedNamespaceMetadata, RefreshRequest, Refusal, RefusalKind, RetryPolicy,
    SyncPolicy, SyncRequest, SyncResource, SyncStrategy, spec_key,
};
pub use application::DEFAULT_REVISION;
pub use cluster_scope::ClusterScope;
pub use credentials::{AwsAuth, ClusterCredentials, ConfigProblem, ExecProvider};
use document::Accept;
pub use document::yaml_options;
pub use error::{LoadError, LoadWarning, Loaded};
pub use native::{DEFAULT_APP_NAMESPACE, DEFAULT_PROJECT, MAX_PLACEHOLDER_APPS};
pub use project::{AppProject, DEFAULT_PROJECT_NAME, PROJECT_FINALIZER};
pub use repository::{
    KNOWN_HOSTS_CONFIG_MAP, KNOWN_HOSTS_KEY, RepoCredentials, RepoSecret, RepoSecretKind,
    RepoSettings, TLS_CERTS_CONFIG_MAP,
};
pub use secret::{
    IN_CLUSTER_SERVER, SECRET_TYPE_LABEL, SKIP_RECONCILE_ANNOTATION, WEIGHT_ANNOTATION,
    decode_secret_data,
};
pub use write::{to_application_list_yaml, to_fleet_json, to_fleet_yaml, to_secret_list_yaml};

/// Completes clusters read from Argo CD's cluster Secrets into Argo CD's cluster list
/// ([`ArgoClusterList`]), keeping `credentials` in step: the built-in in-cluster entry is
/// reached with the pod's service account, and a Secret left out (the in-cluster
/// destination disabled) loses its credentials. The one place both `plan`'s inputs and the
/// replicas' inventories do it; callers report `disabled` with [`IN_CLUSTER_DISABLED`].
pub fn complete_argo_cluster_list(
    clusters: Vec<Cluster>,
    credentials: &mut BTreeMap<String, ClusterCredentials>,
    in_cluster_enabled: bool,
) -> ArgoClusterList {
    let list = ArgoClusterList::from_secrets(clusters, in_cluster_enabled);
    if list.built_in {
        credentials.insert(String::new(), ClusterCredentials::pod_service_account());
    }
    for c in &list.disabled {
        credentials.remove(&c.id);
    }
    list
}

/// Why a Secret naming the in-cluster server is left out of the cluster list.
pub const IN_CLUSTER_DISABLED: &str = "names the in-cluster server \
     https://kubernetes.default.svc while the in-cluster destination is disabled \
     (--in-cluster-enabled=false, or argocd-cm's cluster.inClusterEnabled); left out, as Argo \
     CD leaves it out";

/// What a cluster Secret gives: the cluster, and how to reach it when the Secret has a
/// `config` or `namespaces` (`None`: anonymously, with verified TLS, the whole cluster).
pub type ClusterSecret = (Cluster, Option<ClusterCredentials>);

/// Everything one input can describe: the fleet, the applications' GitOps specs and,
/// from a native fleet file, the shards (replicas) that will manage it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FleetFile {
    /// Clusters and applications, in input order.
    pub fleet: Fleet,
    /// The GitOps spec of each application, by `(namespace, name)` ([`spec_key`]). The
    /// loaders give every application one (a placeholder's: no repository, at `HEAD`); of
    /// applications that share a key, the first one's.
    pub specs: BTreeMap<(String, String), AppSpec>,
    /// The shards' zones and capacities, in order; empty unless the file lists them.
    pub shards: Vec<ShardSpec>,
    /// How to reach each cluster whose Secret has a `config`, by cluster id.
    pub credentials: BTreeMap<String, ClusterCredentials>,
    /// Argo CD AppProjects, by name (of projects that share a name, the first one).
    pub projects: BTreeMap<String, AppProject>,
    /// How to reach private Git repositories: repository Secrets, credential templates,
    /// known hosts and TLS certificates (Argo CD's objects only).
    pub repositories: RepoSettings,
    /// What the input was: a native fleet file, or Argo CD's Kubernetes objects (whose
    /// clusters Argo CD would complete into its cluster list with the built-in in-cluster
    /// entry, [`fleetshard_core::argo::ArgoClusterList`]).
    pub format: InputFormat,
}

/// The two kinds of input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InputFormat {
    /// A fleetshard fleet file: its clusters are the whole fleet.
    #[default]
    Native,
    /// Argo CD's objects (cluster Secrets, Applications), as `kubectl get -o yaml` prints
    /// them, even an empty list.
    Kubernetes,
}

/// Reads any supported input: cluster Secrets, Applications (alone, in `List`s, mixed as
/// `kubectl get secret,applications -o yaml` prints them, or as several YAML documents), or
/// a native fleet file. `source` names the input in messages (a path, or `<stdin>`).
pub fn parse_input(text: &str, source: &str) -> Result<Loaded<FleetFile>, LoadError> {
    input(Cow::Borrowed(text), source)
}

fn input(text: Cow<'_, str>, source: &str) -> Result<Loaded<FleetFile>, LoadError> {
    parse(text, source, Accept::ANY)
}

/// Reads clusters from Argo CD cluster Secrets or a native fleet file. Applications in the
/// input are an error (a swapped argument, most likely); applications and shards of a
/// fleet file are dropped with a warning.
/// Repository Secrets and ConfigMaps are skipped (with a warning, or refused as an
/// unknown kind).
pub fn parse_clusters(text: &str, source: &str) -> Result<Loaded<Vec<Cluster>>, LoadError> {
    clusters(Cow::Borrowed(text), source)
}

fn clusters(text: Cow<'_, str>, source: &str) -> Result<Loaded<Vec<Cluster>>, LoadError> {
    Ok(parse_clusters_as(text, source, Accept::CLUSTERS)?.map(|f| f.fleet.clusters))
}

/// [`parse_clusters`], keeping the Secrets' credentials, and reading repository Secrets,
/// credential templates and the repository ConfigMaps too: a [`FleetFile`] with clusters,
/// credentials and repositories only.
pub fn parse_clusters_with_credentials(
    text: &str,
    source: &str,
) -> Result<Loaded<FleetFile>, LoadError> {
    clusters_with_credentials(Cow::Borrowed(text), source)
}

fn clusters_with_credentials(
    text: Cow<'_, str>,
    source: &str,
) -> Result<Loaded<FleetFile>, LoadError> {
    parse_clusters_as(text, source, Accept::CLUSTERS_AND_REPOSITORIES)
}

fn parse_clusters_as(
    text: Cow<'_, str>,
    source: &str,
    accept: Accept,
) -> Result<Loaded<FleetFile>, LoadError> {
    let mut loaded = parse(text, source, accept)?;
    let apps = loaded.value.fleet.apps.len();
    drop_with_shards(&mut loaded, source, apps, "applications", |file| {
        file.fleet.apps.clear();
        file.specs.clear();
    });
    Ok(loaded)
}

/// Drops `count` objects of the kind this entry point does not read (`what`, cleared by
/// `clear`) and the fleet file's shards, with one warning saying so.
fn drop_with_shards(
    loaded: &mut Loaded<FleetFile>,
    source: &str,
    count: usize,
    what: &str,
    clear: impl FnOnce(&mut FleetFile),
) {
    let shards = loaded.value.shards.len();
    if count > 0 || shards > 0 {
        let warning = dropped(source, count, what, shards, "shards");
        clear(&mut loaded.value);
        loaded.value.shards.clear();
        loaded.warnings.push(warning);
    }
}

/// Reads applications from Argo CD Applications or a native fleet file (its listed and
/// placeholder applications). Secrets in the input are an error; clusters and shards of a
/// fleet file are dropped with a warning. The applications' GitOps specs are dropped too
/// (see [`parse_apps_with_specs`]).
pub fn parse_apps(text: &str, source: &str) -> Result<Loaded<Vec<App>>, LoadError> {
    apps(Cow::Borrowed(text), source)
}

fn apps(text: Cow<'_, str>, source: &str) -> Result<Loaded<Vec<App>>, LoadError> {
    let accept = Accept {
        specs: false,
        ..Accept::APPS
    };
    Ok(apps_as(text, source, accept)?.map(|f| f.fleet.apps))
}

/// [`parse_apps`], keeping the applications' GitOps specs: a [`FleetFile`] with
/// applications and specs only.
pub fn parse_apps_with_specs(text: &str, source: &str) -> Result<Loaded<FleetFile>, LoadError> {
    apps_with_specs(Cow::Borrowed(text), source)
}

fn apps_with_specs(text: Cow<'_, str>, source: &str) -> Result<Loaded<FleetFile>, LoadError> {
    apps_as(text, source, Accept::APPS)
}

fn apps_as(
    text: Cow<'_, str>,
    source: &str,
    accept: Accept,
) -> Result<Loaded<FleetFile>, LoadError> {
    let mut loaded = parse(text, source, accept)?;
    let clusters = loaded.value.fleet.clusters.len();
    drop_with_shards(&mut loaded, source, clusters, "clusters", |file| {
        file.fleet.clusters.clear();
    });
    Ok(loaded)
}

/// Reads a native fleet file; Kubernetes objects are an error.
pub fn parse_fleet_file(text: &str, source: &str) -> Result<Loaded<FleetFile>, LoadError> {
    fleet_file(Cow::Borrowed(text), source)
}

fn fleet_file(text: Cow<'_, str>, source: &str) -> Result<Loaded<FleetFile>, LoadError> {
    parse(text, source, Accept::NATIVE)
}

/// Reads one Argo CD cluster Secret already decoded into JSON (as a Kubernetes client
/// returns it). `source` names where it came from in messages (e.g. `kubernetes`).
/// Returns the cluster and its credentials (when the Secret has a `config` or
/// `namespaces`); `Ok(None)`
/// (with a warning) when the Secret lacks the label `argocd.argoproj.io/secret-type: cluster`.
pub fn cluster_from_value(
    value: &serde_json::Value,
    source: &str,
) -> Result<Loaded<Option<ClusterSecret>>, LoadError> {
    let mut ctx = error::Ctx::new(source);
    let cluster = secret::to_cluster(&mut ctx, value, "Secret", secret::UnreadableConfig::Error)?;
    Ok(ctx.finish(cluster))
}

/// Reads one Argo CD AppProject already decoded into JSON (as a Kubernetes client returns
/// it). `source` names where it came from in messages.
pub fn project_from_value(
    value: &serde_json::Value,
    source: &str,
) -> Result<Loaded<AppProject>, LoadError> {
    let mut ctx = error::Ctx::new(source);
    let project = project::to_project(&mut ctx, value, "AppProject")?;
    Ok(ctx.finish(project))
}

/// Reads one repository Secret or credential template already decoded into JSON (label
/// `argocd.argoproj.io/secret-type` `repository` or `repo-creds`). `Ok(None)` (with a
/// warning) for a Secret of another type, or a repository that is not Git.
pub fn repo_secret_from_value(
    value: &serde_json::Value,
    source: &str,
) -> Result<Loaded<Option<RepoSecret>>, LoadError> {
    let mut ctx = error::Ctx::new(source);
    if !repository::is_repo_secret(value) {
        let (ns, name) = document::meta_names(value);
        let object = error::object_name("Secret", ns, name, "Secret");
        ctx.warn(
            &object,
            None,
            "not a repository Secret or credential template; skipped".to_owned(),
        );
        return Ok(ctx.finish(None));
    }
    let repo = repository::to_repo_secret(&mut ctx, value, "Secret")?;
    Ok(ctx.finish(repo))
}

/// Reads `argocd-ssh-known-hosts-cm` or `argocd-tls-certs-cm` already decoded into JSON:
/// the settings holding only what it says (another ConfigMap: empty, with a warning).
pub fn repo_config_map_from_value(
    value: &serde_json::Value,
    source: &str,
) -> Result<Loaded<RepoSettings>, LoadError> {
    let mut ctx = error::Ctx::new(source);
    let mut settings = RepoSettings::default();
    repository::read_config_map(&mut ctx, value, "ConfigMap", &mut settings)?;
    Ok(ctx.finish(settings))
}

/// Reads one Argo CD Application already decoded into JSON (as a Kubernetes client returns
/// it): the application and its GitOps spec. `source` names where it came from in messages.
pub fn app_from_value(
    value: &serde_json::Value,
    source: &str,
) -> Result<Loaded<AppDefinition>, LoadError> {
    let mut ctx = error::Ctx::new(source);
    let app = application::to_app(&mut ctx, value, "Application")?;
    Ok(ctx.finish(app))
}

/// [`parse_input`] on bytes the caller has read: bytes that are not UTF-8 are an error
/// naming `source`.
pub fn parse_input_bytes(bytes: &[u8], source: &str) -> Result<Loaded<FleetFile>, LoadError> {
    let text = std::str::from_utf8(bytes).map_err(|e| not_utf8(source, &e))?;
    parse_input(text, source)
}

/// [`parse_input`] on a file.
pub fn load_input(path: &Path) -> Result<Loaded<FleetFile>, LoadError> {
    load(path, input)
}

/// [`parse_clusters`] on a file.
pub fn load_clusters(path: &Path) -> Result<Loaded<Vec<Cluster>>, LoadError> {
    load(path, clusters)
}

/// [`parse_clusters_with_credentials`] on a file.
pub fn load_clusters_with_credentials(path: &Path) -> Result<Loaded<FleetFile>, LoadError> {
    load(path, clusters_with_credentials)
}

/// [`parse_apps`] on a file.
pub fn load_apps(path: &Path) -> Result<Loaded<Vec<App>>, LoadError> {
    load(path, apps)
}

/// [`parse_apps_with_specs`] on a file.
pub fn load_apps_with_specs(path: &Path) -> Result<Loaded<FleetFile>, LoadError> {
    load(path, apps_with_specs)
}

/// [`parse_fleet_file`] on a file.
pub fn load_fleet_file(path: &Path) -> Result<Loaded<FleetFile>, LoadError> {
    load(path, fleet_file)
}

fn parse(text: Cow<'_, str>, source: &str, accept: Accept) -> Result<Loaded<FleetFile>, LoadError> {
    let mut ctx = error::Ctx::new(source);
    let file = document::parse(text, &mut ctx, accept)?;
    Ok(ctx.finish(file))
}

/// Reads a file and parses it, handing the parser the text to free once read.
fn load<T>(
    path: &Path,
    parse: fn(Cow<'_, str>, &str) -> Result<Loaded<T>, LoadError>,
) -> Result<Loaded<T>, LoadError> {
    let bytes = std::fs::read(path).map_err(|source| LoadError::Read {
        path: path.to_owned(),
        source,
    })?;
    let source = path.display().to_string();
    let text = String::from_utf8(bytes).map_err(|e| not_utf8(&source, &e.utf8_error()))?;
    parse(Cow::Owned(text), &source)
}

fn not_utf8(source: &str, e: &std::str::Utf8Error) -> LoadError {
    LoadError::NotUtf8 {
        file: source.to_owned(),
        offset: e.valid_up_to(),
    }
}

fn dropped(source: &str, a: usize, a_what: &str, b: usize, b_what: &str) -> LoadWarning {
    LoadWarning {
        file: source.to_owned(),
        object: "fleet file".to_owned(),
        field: None,
        message: format!("{a} {a_what} and {b} {b_what} are not read by this input; ignored"),
    }
}
