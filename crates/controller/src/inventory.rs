//! The inventory: the clusters and applications this replica knows (with each
//! application's GitOps spec beside it), kept current from a source, with a revision that
//! moves only when the content does.
//!
//! - [`Inventory`] publishes an [`InventorySnapshot`] through a `tokio::sync::watch`, so
//!   every consumer (the shard filter through [`follow_inventory`], the distributor through
//!   `FleetInput::revision`) sees the latest state and can skip what it has already seen;
//! - [`DirectorySource`] reads a directory of manifests and polls it for changes;
//! - [`KubernetesSource`] watches Argo CD's cluster Secrets and Applications through kube-rs.
//!
//! Bad input never empties the inventory: a source keeps the last good version of an object
//! (or of a file) that stops parsing, and lists a [`Problem`] naming the object and field.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::Arc;

use fleetshard_core::{App, Cluster};
use fleetshard_manifest::{
    AppProject, AppSpec, ClusterCredentials, DEFAULT_PROJECT_NAME, RepoSettings,
};
use tokio::sync::watch;

use crate::{AppKey, ShardWork};

mod directory;
mod kubernetes;
mod project_finalizer;
mod stored_spec;

pub use directory::{DirectoryConfig, DirectorySource, FileStamp, Files, MemoryFiles, RealFiles};
pub use kubernetes::{
    KubernetesConfig, KubernetesSource, KubernetesSourceError, app_project_resource,
    application_resource, secret_resource,
};
pub use project_finalizer::KubernetesProjectFinalizer;
pub use stored_spec::StoredSpec;

/// How serious a [`Problem`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Input the loader worked around (as Argo CD would); the object is in the inventory.
    Warning,
    /// Input that could not be used: the object's last good version (if any) is kept.
    Error,
}

/// Something wrong with one object (or file, or connection) of a source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Warning or error.
    pub severity: Severity,
    /// Where the object comes from: a file path, or `kubernetes`.
    pub source: String,
    /// The object, e.g. `Application argocd/guestbook`, `document 2`, or the watch.
    pub object: String,
    /// The field inside the object, when the problem is about one.
    pub field: Option<String>,
    /// The whole message, naming source, object and field.
    pub message: String,
}

impl Problem {
    /// An error or warning from the manifest loader (its message already names the file,
    /// the object and the field).
    pub fn from_load_error(error: &fleetshard_manifest::LoadError) -> Self {
        use fleetshard_manifest::LoadError as E;
        let object = match error {
            E::UnknownKind { object, .. }
            | E::Document { object, .. }
            | E::Field { object, .. } => object.clone(),
            E::Read { .. } | E::NotUtf8 { .. } | E::Syntax { .. } => "file".to_owned(),
        };
        Problem {
            severity: Severity::Error,
            source: error.file(),
            object,
            field: error.field().map(str::to_owned),
            message: error.to_string(),
        }
    }

    /// A loader warning.
    pub fn from_warning(warning: &fleetshard_manifest::LoadWarning) -> Self {
        Problem {
            severity: Severity::Warning,
            source: warning.file.clone(),
            object: warning.object.clone(),
            field: warning.field.clone(),
            message: warning.to_string(),
        }
    }

    /// An error about `object` (and `field`) of `source`, described by `what`.
    pub fn error(source: &str, object: &str, field: Option<&str>, what: &str) -> Self {
        Self::new(Severity::Error, source, object, field, what)
    }

    /// A warning about `object` (and `field`) of `source`, described by `what`.
    pub fn warning(source: &str, object: &str, field: Option<&str>, what: &str) -> Self {
        Self::new(Severity::Warning, source, object, field, what)
    }

    fn new(
        severity: Severity,
        source: &str,
        object: &str,
        field: Option<&str>,
        what: &str,
    ) -> Self {
        let message = match field {
            Some(f) => format!("{source}: {object}: {f}: {what}"),
            None => format!("{source}: {object}: {what}"),
        };
        Problem {
            severity,
            source: source.to_owned(),
            object: object.to_owned(),
            field: field.map(str::to_owned),
            message,
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let level = match self.severity {
            Severity::Warning => "warning",
            Severity::Error => "error",
        };
        write!(f, "{level}: {}", self.message)
    }
}

/// What every inventory is checked for, whatever its source (files read once, a watched
/// directory, Kubernetes): two clusters with one id (the later is not placed: it would
/// have no owner) or with one server (Argo CD keys its distribution by server, so one of
/// them shadows the other). Warnings, naming the cluster and the field; the same rules
/// `plan` reports.
pub fn cluster_problems(clusters: &[Cluster]) -> Vec<Problem> {
    let mut out = Vec::new();
    let mut ids: BTreeMap<&str, usize> = BTreeMap::new();
    let mut servers: BTreeMap<&str, &str> = BTreeMap::new();
    for (i, c) in clusters.iter().enumerate() {
        let object = format!("cluster {}", c.id);
        let first = *ids.entry(&c.id).or_insert(i);
        if first != i {
            out.push(Problem::warning(
                "inventory",
                &object,
                Some("id"),
                &format!(
                    "used by clusters #{first} and #{i} (server {}); the later one is not placed",
                    c.server
                ),
            ));
        }
        let other = *servers.entry(&c.server).or_insert(&c.id);
        if other != c.id {
            out.push(Problem::warning(
                "inventory",
                &object,
                Some("server"),
                &format!(
                    "{} is also the server of cluster {other}; Argo CD keys clusters by \
                     server, so one shadows the other",
                    c.server
                ),
            ));
        }
    }
    out
}

/// Checks what the manifest loader accepts but an inventory cannot use: an application
/// whose destination names neither a server nor a cluster (Argo CD's validation refuses
/// it too). The error names `source`, the application and the field.
pub fn check_app(app: &App, source: &str) -> Result<(), Problem> {
    let empty = |s: &Option<String>| s.as_deref().is_none_or(str::is_empty);
    if empty(&app.destination.server) && empty(&app.destination.name) {
        return Err(Problem::error(
            source,
            &format!("Application {}/{}", app.namespace, app.name),
            Some("spec.destination"),
            "neither server nor name is set; the application deploys nowhere",
        ));
    }
    Ok(())
}

/// What the inventory holds at one revision. Cheap to clone (shared vectors).
#[derive(Debug, Clone, Default)]
pub struct InventorySnapshot {
    /// Counts content changes: it moves when, and only when, the clusters, the
    /// applications, their specs, the credentials (of clusters or repositories), the projects or `argocd-cm` change (problems and `ready` alone do
    /// not move it). 0 is the empty inventory before any load.
    pub revision: u64,
    /// The source has loaded everything once (first scan, or first complete listing of
    /// both kinds): before that, an empty inventory means "not known yet", not "no
    /// clusters".
    pub ready: bool,
    /// Clusters, in the source's order (file path then position, or namespace and name).
    pub clusters: Arc<Vec<Cluster>>,
    /// Applications, keyed (and ordered) by namespace and name, without duplicates.
    pub apps: Arc<Vec<App>>,
    /// Each application's GitOps spec (source, sync policy, operation), by key, compact
    /// ([`InventorySnapshot::spec`] gives it as an [`AppSpec`]); an application without an
    /// entry has the default spec (no source, no sync policy).
    pub specs: Arc<BTreeMap<AppKey, StoredSpec>>,
    /// How to reach each cluster, by cluster id (from the cluster Secret's `config`); a
    /// cluster without an entry is reached anonymously with verified TLS.
    pub credentials: Arc<BTreeMap<String, ClusterCredentials>>,
    /// How to reach private Git repositories (repository Secrets, credential templates,
    /// known hosts, TLS certificates); empty: every repository is read anonymously.
    pub repositories: Arc<RepoSettings>,
    /// Current problems of the source; objects named here keep their last good version.
    pub problems: Arc<Vec<Problem>>,
    /// Argo CD AppProjects, by name.
    pub projects: Arc<BTreeMap<String, Arc<AppProject>>>,
    /// `argocd-cm`'s `data` (Argo CD's settings: what a render request carries), empty
    /// when the source has none (fleet files, directories).
    pub argocd_cm: Arc<BTreeMap<String, String>>,
}

impl InventorySnapshot {
    /// The project an application naming `name` belongs to (`default` when empty):
    /// the AppProject of that name, or, for `default` when none exists, the permissive
    /// project Argo CD creates in that case. `None`: the project does not exist.
    pub fn project(&self, name: &str) -> Option<Arc<AppProject>> {
        let name = effective_project(name);
        if let Some(p) = self.projects.get(name) {
            return Some(p.clone());
        }
        (name == DEFAULT_PROJECT_NAME).then(|| builtin_default().clone())
    }

    /// The GitOps spec of the application `key` (the default one when it has none).
    pub fn spec(&self, key: &AppKey) -> AppSpec {
        self.specs
            .get(key)
            .map(StoredSpec::to_spec)
            .unwrap_or_default()
    }

    /// Problems of severity [`Severity::Error`].
    pub fn errors(&self) -> impl Iterator<Item = &Problem> {
        self.problems
            .iter()
            .filter(|p| p.severity == Severity::Error)
    }
}

/// What a source publishes: the inventory's content at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InventoryContent {
    /// Clusters, in the source's order.
    pub clusters: Vec<Cluster>,
    /// Applications, keyed by namespace and name, without duplicates.
    pub apps: Vec<App>,
    /// Each application's GitOps spec, by key, compact (see [`InventorySnapshot::specs`];
    /// [`specs_by_app_key`] makes them from the loaders' specs).
    pub specs: BTreeMap<AppKey, StoredSpec>,
    /// How to reach each cluster, by cluster id.
    pub credentials: BTreeMap<String, ClusterCredentials>,
    /// How to reach private Git repositories (see [`InventorySnapshot::repositories`]).
    pub repositories: RepoSettings,
    /// Argo CD AppProjects, by name.
    pub projects: BTreeMap<String, Arc<AppProject>>,
    /// `argocd-cm`'s `data` (see [`InventorySnapshot::argocd_cm`]).
    pub argocd_cm: BTreeMap<String, String>,
}

/// The project name an application's `spec.project` stands for: `default` when empty.
pub fn effective_project(name: &str) -> &str {
    if name.is_empty() {
        DEFAULT_PROJECT_NAME
    } else {
        name
    }
}

/// The `default` project Argo CD creates when none exists, shared.
fn builtin_default() -> &'static Arc<AppProject> {
    static DEFAULT: std::sync::OnceLock<Arc<AppProject>> = std::sync::OnceLock::new();
    DEFAULT.get_or_init(|| Arc::new(AppProject::builtin_default("")))
}

/// AppProjects as the loaders return them, shared as the inventory keeps them.
pub fn shared_projects(
    projects: impl IntoIterator<Item = (String, AppProject)>,
) -> BTreeMap<String, Arc<AppProject>> {
    projects
        .into_iter()
        .map(|(name, p)| (name, Arc::new(p)))
        .collect()
}

impl InventoryContent {
    /// Completes clusters read from Argo CD's objects into Argo CD's cluster list
    /// ([`ArgoClusterList`]): the built-in in-cluster entry, reached with the pod's service
    /// account, when no Secret names the in-cluster server; or, with the in-cluster
    /// destination disabled, such Secrets left out with a warning from `source` each.
    pub fn complete_argo_cluster_list(
        &mut self,
        in_cluster_enabled: bool,
        source: &str,
        problems: &mut Vec<Problem>,
    ) {
        let list = fleetshard_manifest::complete_argo_cluster_list(
            std::mem::take(&mut self.clusters),
            &mut self.credentials,
            in_cluster_enabled,
        );
        for c in &list.disabled {
            problems.push(Problem::warning(
                source,
                &format!("cluster {:?} (id {:?})", c.name, c.id),
                Some("server"),
                fleetshard_manifest::IN_CLUSTER_DISABLED,
            ));
        }
        self.clusters = list.clusters;
    }
}

/// GitOps specs keyed as the manifest loaders key them (`(namespace, name)`, see
/// [`FleetFile::specs`](fleetshard_manifest::FleetFile::specs)), keyed and kept as the
/// inventory keeps them (compact, their repository URLs and revisions shared).
pub fn specs_by_app_key(
    specs: impl IntoIterator<Item = ((String, String), AppSpec)>,
) -> BTreeMap<AppKey, StoredSpec> {
    let mut strings = stored_spec::Interner::default();
    specs
        .into_iter()
        .map(|((namespace, name), spec)| {
            (
                AppKey::new(&namespace, &name),
                StoredSpec::new(spec, &mut strings),
            )
        })
        .collect()
}

/// The published inventory. Clones share the same channel; one source writes it.
#[derive(Debug, Clone)]
pub struct Inventory {
    tx: Arc<watch::Sender<InventorySnapshot>>,
}

impl Default for Inventory {
    fn default() -> Self {
        Self::new()
    }
}

impl Inventory {
    /// An empty inventory at revision 0, not ready.
    pub fn new() -> Self {
        let (tx, _) = watch::channel(InventorySnapshot::default());
        Inventory { tx: Arc::new(tx) }
    }

    /// A receiver that sees every later publication (and the current one as seen).
    pub fn subscribe(&self) -> watch::Receiver<InventorySnapshot> {
        self.tx.subscribe()
    }

    /// The current snapshot.
    pub fn snapshot(&self) -> InventorySnapshot {
        self.tx.borrow().clone()
    }

    /// Replaces the content. The revision moves only if the clusters, the apps, their
    /// specs or the credentials differ from the current ones; subscribers are woken only if
    /// anything (content, problems, readiness) changed. Returns whether the revision moved.
    /// The clusters are checked here, for every source ([`cluster_problems`]): what is
    /// found is added to `problems`.
    pub fn publish(&self, content: InventoryContent, problems: Vec<Problem>, ready: bool) -> bool {
        let mut problems = problems;
        problems.extend(cluster_problems(&content.clusters));
        let InventoryContent {
            clusters,
            apps,
            specs,
            credentials,
            projects,
            repositories,
            argocd_cm,
        } = content;
        let mut moved = false;
        self.tx.send_if_modified(|snap| {
            let content = *snap.clusters != clusters
                || *snap.apps != apps
                || *snap.specs != specs
                || *snap.credentials != credentials
                || *snap.projects != projects
                || *snap.repositories != repositories
                || *snap.argocd_cm != argocd_cm;
            if content {
                snap.revision += 1;
                // Kept until the next change: without the room the loaders grew them by.
                let (mut clusters, mut apps) = (clusters, apps);
                clusters.shrink_to_fit();
                apps.shrink_to_fit();
                snap.clusters = Arc::new(clusters);
                snap.apps = Arc::new(apps);
                snap.specs = Arc::new(specs);
                snap.credentials = Arc::new(credentials);
                snap.projects = Arc::new(projects);
                snap.repositories = Arc::new(repositories);
                snap.argocd_cm = Arc::new(argocd_cm);
                moved = true;
            }
            let others = *snap.problems != problems || snap.ready != ready;
            if others {
                snap.problems = Arc::new(problems);
                snap.ready = ready;
            }
            content || others
        });
        moved
    }
}

/// Feeds `filter` from the inventory: [`ShardWork::set_inventory`] with the current
/// content now, then again whenever the revision moves. A project that changed goes to
/// the project queue ([`ShardWork::project_queue`]), which re-queues its applications. An app whose definition (the app
/// or its GitOps spec) changed, and every app of a cluster whose address or credentials
/// changed, is queued for refresh if this replica owns it (Argo CD refreshes an app on
/// every change of its object); a change of `argocd-cm` queues every owned app (its
/// resource customizations apply to all).
/// Returns when the inventory is dropped (every [`Inventory`] clone gone).
pub async fn follow_inventory(filter: Arc<ShardWork>, mut rx: watch::Receiver<InventorySnapshot>) {
    let mut seen: Option<InventorySnapshot> = None;
    loop {
        let snap = rx.borrow_and_update().clone();
        if seen.as_ref().map(|s| s.revision) != Some(snap.revision) {
            filter.set_inventory_sharing(&snap.clusters, &snap.apps, &snap.specs);
            if let Some(old) = &seen {
                if old.argocd_cm != snap.argocd_cm {
                    // argocd-cm's settings (resource customizations, render settings) apply
                    // to every app: each owned app is compared again with them.
                    filter.refresh_apps(snap.apps.iter().map(AppKey::of));
                }
                filter.refresh_apps(changed_apps(old, &snap));
                filter.refresh_clusters(changed_clusters(old, &snap));
                filter
                    .project_queue()
                    .add_many(changed_projects(old, &snap));
            }
            // A project being deleted waits for its last application to go: any change
            // may be that one.
            filter.project_queue().add_many(
                snap.projects
                    .values()
                    .filter(|p| p.deleting)
                    .map(|p| p.name.clone()),
            );
            seen = Some(snap);
        }
        if rx.changed().await.is_err() {
            return;
        }
    }
}

/// Keys of apps that are new or whose definition — the app or its GitOps spec — differs
/// in `new` (apps sorted by namespace and name, as a snapshot keeps them). Removed apps
/// are not listed: the filter forgets them.
fn changed_apps(old: &InventorySnapshot, new: &InventorySnapshot) -> BTreeSet<AppKey> {
    let before: HashMap<(&str, &str), &App> = old
        .apps
        .iter()
        .map(|a| ((a.namespace.as_str(), a.name.as_str()), a))
        .collect();
    let mut changed: BTreeSet<AppKey> = new
        .apps
        .iter()
        .filter(|a| before.get(&(a.namespace.as_str(), a.name.as_str())) != Some(a))
        .map(AppKey::of)
        .collect();
    if old.specs != new.specs {
        // A spec that is new, changed or gone (the app keeps the default spec).
        let specs = |from: &InventorySnapshot, to: &InventorySnapshot| -> Vec<AppKey> {
            from.specs
                .iter()
                .filter(|(key, spec)| to.specs.get(*key) != Some(*spec))
                .map(|(key, _)| key.clone())
                .collect()
        };
        changed.extend(specs(new, old));
        changed.extend(specs(old, new));
    }
    changed
}

/// Names of projects that are new, changed or gone between the snapshots: the project
/// queue re-checks their applications.
fn changed_projects(old: &InventorySnapshot, new: &InventorySnapshot) -> Vec<String> {
    if old.projects == new.projects {
        return Vec::new();
    }
    let mut names: BTreeSet<&String> = BTreeSet::new();
    for (a, b) in [
        (&old.projects, &new.projects),
        (&new.projects, &old.projects),
    ] {
        names.extend(
            a.iter()
                .filter(|(n, p)| b.get(*n) != Some(*p))
                .map(|(n, _)| n),
        );
    }
    names.into_iter().cloned().collect()
}

/// Ids of clusters whose definition or credentials differ between the snapshots.
fn changed_clusters<'a>(old: &InventorySnapshot, new: &'a InventorySnapshot) -> Vec<&'a str> {
    let before: HashMap<&str, &Cluster> = old.clusters.iter().map(|c| (c.id.as_str(), c)).collect();
    new.clusters
        .iter()
        .filter(|c| {
            before.get(c.id.as_str()).is_some_and(|b| *b != *c)
                || old.credentials.get(&c.id) != new.credentials.get(&c.id)
        })
        .map(|c| c.id.as_str())
        .collect()
}
