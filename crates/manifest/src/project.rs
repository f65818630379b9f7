//! Argo CD AppProjects (`argoproj.io/v1alpha1` `AppProject`): what an application of the
//! project may deploy, from where, to where, and when.
//!
//! Read as `kubectl get appprojects -o yaml` exports them, and from the Kubernetes API (the
//! inventory watches them in Argo CD's namespace). Only the fields the controller enforces
//! are read ([`AppProject`]); fields that change what Argo CD's controller would apply and
//! that fleetshard does not implement (`signatureKeys`, `destinationServiceAccounts`,
//! `permitOnlyProjectScopedClusters`, a window's `syncOverrun`, unknown fields) become
//! [`Refusal`]s: every application of the project is then refused, naming the field. What
//! only Argo CD's API server reads (`roles`, `description`) are accepted and not used;
//! `orphanedResources` says whether the project's apps look for orphaned resources
//! (`project/orphaned.rs`).
//!
//! The rules themselves are in `project/rules.rs` (repositories, destinations, source
//! namespaces, resource lists, Argo CD's control plane) and `project/window.rs` (sync
//! windows, evaluated at a time the caller passes in).

mod orphaned;
mod pattern;
mod rules;
mod window;

#[cfg(test)]
mod tests;

use serde::Deserialize;
use serde_json::Value;

use crate::app_spec::{Refusal, RefusalKind};
use crate::document::{meta_names, typed};
use crate::error::{Ctx, LoadError, object_name};
use crate::glob::Glob;
use crate::implemented::{is_zero, walk};

pub use orphaned::{OrphanedResourceKey, OrphanedResources};
pub use pattern::{Pattern, RepoPattern};
pub use rules::{ControlPlane, ProjectCheck, ResourceRef, Violation};
pub use window::{SyncWindow, WindowKind, WindowVerdict, sync_windows_verdict};

/// The finalizer Argo CD puts on an AppProject so that it is not deleted while an
/// application still references it; the controller removes it once none does.
pub const PROJECT_FINALIZER: &str = "resources-finalizer.argocd.argoproj.io";

/// The project an application with an empty `spec.project` belongs to, and the one Argo
/// CD creates, permissive, when it does not exist.
pub const DEFAULT_PROJECT_NAME: &str = "default";

/// One `destinations` entry: patterns for the cluster's server and name and the
/// namespace (globs; a leading `!` denies), compiled when the project is read. An empty
/// pattern matches only an empty value.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(default)]
pub struct ProjectDestination {
    /// `server`.
    pub server: Pattern,
    /// `name`.
    pub name: Pattern,
    /// `namespace`.
    pub namespace: Pattern,
}

/// One entry of a resource allow or deny list: group and kind patterns (globs), and for
/// the cluster-scoped lists an optional name pattern; compiled when the project is read.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(default)]
pub struct ResourceRule {
    /// `group` (`""` is the core group).
    pub group: Glob,
    /// `kind`.
    pub kind: Glob,
    /// `name` (empty: any name).
    pub name: Glob,
}

/// An AppProject as the controller enforces it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AppProject {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`.
    pub namespace: String,
    /// `spec.sourceRepos`: repository URL patterns (a leading `!` denies).
    pub source_repos: Vec<RepoPattern>,
    /// `spec.destinations`.
    pub destinations: Vec<ProjectDestination>,
    /// `spec.sourceNamespaces`: namespaces outside Argo CD's whose Applications may use
    /// the project (globs).
    pub source_namespaces: Vec<Glob>,
    /// `spec.clusterResourceWhitelist` (none set: no cluster-scoped kind is allowed).
    pub cluster_allow: Vec<ResourceRule>,
    /// `spec.clusterResourceBlacklist`.
    pub cluster_deny: Vec<ResourceRule>,
    /// `spec.namespaceResourceWhitelist`: `None` (absent) allows every namespaced kind,
    /// an empty list none.
    pub namespace_allow: Option<Vec<ResourceRule>>,
    /// `spec.namespaceResourceBlacklist`.
    pub namespace_deny: Vec<ResourceRule>,
    /// `spec.syncWindows`.
    pub sync_windows: Vec<SyncWindow>,
    /// `spec.orphanedResources` (`None`: the project's apps do not look for orphans).
    pub orphaned_resources: Option<OrphanedResources>,
    /// `metadata.deletionTimestamp` is set: the project is being deleted.
    pub deleting: bool,
    /// `metadata.finalizers` holds [`PROJECT_FINALIZER`].
    pub has_finalizer: bool,
    /// What the project sets that fleetshard does not implement: every application of
    /// the project is refused while there is one.
    pub refusals: Vec<Refusal>,
}

impl AppProject {
    /// The `default` project as Argo CD creates it when it is missing: any repository,
    /// any destination, every kind.
    pub fn builtin_default(namespace: &str) -> Self {
        let any = ResourceRule {
            group: "*".into(),
            kind: "*".into(),
            name: Glob::default(),
        };
        AppProject {
            name: DEFAULT_PROJECT_NAME.to_owned(),
            namespace: namespace.to_owned(),
            source_repos: vec!["*".into()],
            destinations: vec![ProjectDestination {
                server: "*".into(),
                name: Pattern::default(),
                namespace: "*".into(),
            }],
            cluster_allow: vec![any],
            ..AppProject::default()
        }
    }
}

/// The spec fields the controller enforces, or accepts knowing it need not read them.
const SPEC_FIELDS: &[&str] = &[
    "sourceRepos",
    "destinations",
    "sourceNamespaces",
    "clusterResourceWhitelist",
    "clusterResourceBlacklist",
    "namespaceResourceWhitelist",
    "namespaceResourceBlacklist",
    "syncWindows",
    // Read by Argo CD's API server only (its RBAC and UI), never by the controller.
    "description",
    "roles",
    // Monitoring only (orphaned nodes, a warning condition, a metric); nothing is
    // applied by it.
    "orphanedResources",
];

/// The fields of one sync window fleetshard implements.
const WINDOW_FIELDS: &[&str] = &[
    "kind",
    "schedule",
    "duration",
    "applications",
    "namespaces",
    "clusters",
    "manualSync",
    "timeZone",
    "andOperator",
    "description",
];

#[derive(Debug, Default, Deserialize)]
struct ProjectObject {
    #[serde(default)]
    metadata: Option<ProjectMeta>,
    #[serde(default)]
    spec: Option<ProjectSpec>,
}

#[derive(Debug, Default, Deserialize)]
struct ProjectMeta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default, rename = "deletionTimestamp")]
    deletion_timestamp: Option<String>,
    #[serde(default)]
    finalizers: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ProjectSpec {
    #[serde(rename = "sourceRepos")]
    source_repos: Option<Vec<RepoPattern>>,
    destinations: Option<Vec<ProjectDestination>>,
    #[serde(rename = "sourceNamespaces")]
    source_namespaces: Option<Vec<Glob>>,
    #[serde(rename = "clusterResourceWhitelist")]
    cluster_allow: Option<Vec<ResourceRule>>,
    #[serde(rename = "clusterResourceBlacklist")]
    cluster_deny: Option<Vec<ResourceRule>>,
    #[serde(rename = "namespaceResourceWhitelist")]
    namespace_allow: Option<Vec<ResourceRule>>,
    #[serde(rename = "namespaceResourceBlacklist")]
    namespace_deny: Option<Vec<ResourceRule>>,
    #[serde(rename = "syncWindows")]
    sync_windows: Option<Vec<window::RawWindow>>,
    #[serde(rename = "orphanedResources")]
    orphaned_resources: Option<OrphanedResources>,
}

/// Reads one AppProject; `locator` names it when it has no name.
pub(crate) fn to_project(
    ctx: &mut Ctx,
    value: &Value,
    locator: &str,
) -> Result<AppProject, LoadError> {
    let (ns, name) = meta_names(value);
    let object = object_name("AppProject", ns, name, locator);
    let obj: ProjectObject = typed(ctx, value, &object)?;
    let meta = obj.metadata.unwrap_or_default();
    let name = meta.name.filter(|n| !n.is_empty()).ok_or_else(|| {
        ctx.field_error(
            &object,
            "metadata.name",
            "missing; an AppProject needs a name".to_owned(),
        )
    })?;
    let spec = obj.spec.unwrap_or_default();
    let mut refusals = unimplemented(value);
    let mut sync_windows = Vec::new();
    for (i, raw) in spec
        .sync_windows
        .unwrap_or_default()
        .into_iter()
        .enumerate()
    {
        match SyncWindow::from_raw(raw) {
            Ok(w) => sync_windows.push(w),
            Err((field, message)) => refusals.push(Refusal {
                kind: RefusalKind::InvalidSpec,
                field: format!("spec.syncWindows[{i}].{field}"),
                message,
            }),
        }
    }
    let source_namespaces = spec.source_namespaces.unwrap_or_default();
    for (i, ns) in source_namespaces.iter().map(Glob::as_str).enumerate() {
        if ns.len() > 1 && ns.starts_with('/') && ns.ends_with('/') {
            refusals.push(Refusal {
                kind: RefusalKind::InvalidSpec,
                field: format!("spec.sourceNamespaces[{i}]"),
                message: format!(
                    "{ns:?}: regular expressions are not implemented by fleetshard (globs \
                     are); no application of the project is synced"
                ),
            });
        }
    }
    Ok(AppProject {
        name,
        namespace: meta.namespace.unwrap_or_default(),
        source_repos: spec.source_repos.unwrap_or_default(),
        destinations: spec.destinations.unwrap_or_default(),
        source_namespaces,
        cluster_allow: spec.cluster_allow.unwrap_or_default(),
        cluster_deny: spec.cluster_deny.unwrap_or_default(),
        namespace_allow: spec.namespace_allow,
        namespace_deny: spec.namespace_deny.unwrap_or_default(),
        sync_windows,
        orphaned_resources: spec.orphaned_resources,
        deleting: meta.deletion_timestamp.is_some_and(|t| !t.is_empty()),
        has_finalizer: meta
            .finalizers
            .unwrap_or_default()
            .iter()
            .any(|f| f == PROJECT_FINALIZER),
        refusals,
    })
}

/// The project's fields set but not implemented, each a refusal naming it.
fn unimplemented(value: &Value) -> Vec<Refusal> {
    let mut fields = Vec::new();
    if let Some(Value::Object(spec)) = value.get("spec") {
        for (key, v) in spec {
            walk(SPEC_FIELDS, key, v, &mut fields);
        }
        if let Some(Value::Array(windows)) = spec.get("syncWindows") {
            for (i, w) in windows.iter().enumerate() {
                let Value::Object(w) = w else { continue };
                for (key, v) in w {
                    if !WINDOW_FIELDS.contains(&key.as_str()) && !is_zero(v) {
                        fields.push(format!("syncWindows[{i}].{key}"));
                    }
                }
            }
        }
    }
    fields
        .into_iter()
        .map(|f| Refusal {
            kind: RefusalKind::InvalidSpec,
            field: format!("spec.{f}"),
            message: "is not implemented by fleetshard; no application of the project is synced"
                .to_owned(),
        })
        .collect()
}
