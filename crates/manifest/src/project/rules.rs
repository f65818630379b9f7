//! The project rules an application and each of its resources must pass, as Argo CD's
//! controller applies them: source repositories, destinations, source namespaces, the
//! resource allow and deny lists, and (fleetshard's own rule) Argo CD's control plane.
//!
//! Patterns are globs ([`crate::glob`]), compiled when the project is read. In `sourceRepos`
//! and `destinations` a leading `!` turns an entry into a deny ([`super::Pattern`]): the
//! entry then matches every value its pattern does not match, and a value its pattern does
//! match is refused outright (even if another entry allows it). A lone `*` matches
//! everything.

use std::fmt;

use super::{AppProject, Pattern, ResourceRule};
use crate::glob::Glob;
use crate::secret::IN_CLUSTER_SERVER;

/// Why an application or one of its resources is refused by its project: a sentence in
/// Argo CD's `InvalidSpecError` style.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation(pub String);

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Argo CD's own objects, which no application writes unless its project names them
/// explicitly: in Argo CD's namespace on the in-cluster destination, Secrets (cluster and
/// repository credentials), ConfigMaps (`argocd-cm`, `argocd-rbac-cm`, the shard map, the
/// coordination store's records) and Leases (the store's lease records).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControlPlane<'a> {
    /// Argo CD's namespace (`argocd`).
    pub namespace: &'a str,
    /// The destination is the cluster Argo CD runs on: the built-in in-cluster entry or a
    /// cluster whose server is the in-cluster address.
    pub local: bool,
}

impl<'a> ControlPlane<'a> {
    /// The control plane in `namespace`, for a destination with cluster id `cluster_id`
    /// and server `server` (local when the id is the built-in entry's, empty, or the
    /// server is the in-cluster address).
    pub fn new(namespace: &'a str, cluster_id: &str, server: &str) -> Self {
        ControlPlane {
            namespace,
            local: cluster_id.is_empty() || server.trim_end_matches('/') == IN_CLUSTER_SERVER,
        }
    }
}

/// The kinds of the control plane, as (group, kind).
const CONTROL_PLANE_KINDS: &[(&str, &str)] = &[
    ("", "Secret"),
    ("", "ConfigMap"),
    ("coordination.k8s.io", "Lease"),
];

/// One resource an application would write or prune.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceRef<'a> {
    /// API group (`""`: core).
    pub group: &'a str,
    /// Kind.
    pub kind: &'a str,
    /// Namespace (`""` for a cluster-scoped resource).
    pub namespace: &'a str,
    /// Name.
    pub name: &'a str,
}

/// An application's project, ready to check the application and its resources.
#[derive(Debug, Clone, Copy)]
pub struct ProjectCheck<'a> {
    /// The project's name as the application gives it (`default` when empty).
    pub name: &'a str,
    /// The project, `None` when it does not exist.
    pub project: Option<&'a AppProject>,
    /// Argo CD's control plane.
    pub control_plane: ControlPlane<'a>,
    /// The destination cluster's server URL.
    pub cluster_server: &'a str,
    /// The destination cluster's name.
    pub cluster_name: &'a str,
}

impl<'a> ProjectCheck<'a> {
    /// The project, or why it cannot be used (missing, or setting what is not
    /// implemented).
    fn project(&self) -> Result<&'a AppProject, Violation> {
        let p = self.project.ok_or_else(|| {
            Violation(format!(
                "application references project {} which does not exist",
                self.name
            ))
        })?;
        if let Some(r) = p.refusals.first() {
            return Err(Violation(format!("project {}: {r}", self.name)));
        }
        Ok(p)
    }

    /// The application-level rules: the project exists and is usable, the application's
    /// namespace may use it, its repository and its destination are permitted.
    pub fn check_app(
        &self,
        app_namespace: &str,
        app_name: &str,
        repo_url: &str,
        dest_namespace: &str,
    ) -> Result<(), Violation> {
        let p = self.project()?;
        if !app_namespace.is_empty()
            && app_namespace != self.control_plane.namespace
            && !p
                .source_namespaces
                .iter()
                .any(|pattern| pattern.is_match(app_namespace))
        {
            return Err(Violation(format!(
                "application {app_name} in namespace {app_namespace} is not permitted to use \
                 project {}: {app_namespace} is not one of its sourceNamespaces",
                self.name
            )));
        }
        if !source_permitted(p, repo_url) {
            return Err(Violation(format!(
                "application repo {repo_url} is not permitted in project {}",
                self.name
            )));
        }
        if !self.destination_permitted(p, dest_namespace) {
            return Err(Violation(format!(
                "application destination server {:?} (name {:?}) and namespace {:?} do not \
                 match any of the allowed destinations in project {}",
                self.cluster_server, self.cluster_name, dest_namespace, self.name
            )));
        }
        Ok(())
    }

    /// The resource-level rules: its kind is allowed (cluster-scoped or namespaced list),
    /// its own namespace is a permitted destination (a manifest's namespace does not escape
    /// the project), and it is not part of Argo CD's control plane unless the project
    /// names that namespace and kind explicitly.
    pub fn check_resource(&self, r: &ResourceRef<'_>) -> Result<(), Violation> {
        let p = self.project()?;
        let what = || {
            if r.namespace.is_empty() {
                format!("resource {}:{} {}", r.group, r.kind, r.name)
            } else {
                format!("resource {}:{} {}/{}", r.group, r.kind, r.namespace, r.name)
            }
        };
        if !kind_permitted(p, r) {
            return Err(Violation(format!(
                "{} is not permitted in project {}",
                what(),
                self.name
            )));
        }
        if !r.namespace.is_empty() && !self.destination_permitted(p, r.namespace) {
            return Err(Violation(format!(
                "{}: namespace {} on server {:?} is not permitted in project {}",
                what(),
                r.namespace,
                self.cluster_server,
                self.name
            )));
        }
        if self.is_control_plane(r) && !self.explicitly_allows(p, r) {
            return Err(Violation(format!(
                "{} is part of Argo CD's control plane; project {} must name namespace {} \
                 in a destination and {}:{} in namespaceResourceWhitelist, without \
                 wildcards, to let an application write it",
                what(),
                self.name,
                r.namespace,
                r.group,
                r.kind
            )));
        }
        Ok(())
    }

    fn is_control_plane(&self, r: &ResourceRef<'_>) -> bool {
        r.namespace == self.control_plane.namespace
            && self.control_plane.local
            && CONTROL_PLANE_KINDS.contains(&(r.group, r.kind))
    }

    /// A destination naming the resource's namespace literally and an allow-list entry
    /// naming its group and kind literally.
    fn explicitly_allows(&self, p: &AppProject, r: &ResourceRef<'_>) -> bool {
        let destination = p.destinations.iter().any(|d| {
            // A deny (`!…`) names no cluster.
            let names =
                |p: &Pattern, value: &str| !p.is_empty() && !p.is_deny() && p.allows(value, None);
            d.namespace.as_str() == r.namespace
                && (names(&d.server, self.cluster_server) || names(&d.name, self.cluster_name))
        });
        // Equal to the resource's own group and kind, so written without wildcards.
        let kind = p
            .namespace_allow
            .iter()
            .flatten()
            .any(|rule| rule.group.as_str() == r.group && rule.kind.as_str() == r.kind);
        destination && kind
    }

    /// Whether (cluster, `namespace`) matches the project's destinations.
    fn destination_permitted(&self, p: &AppProject, namespace: &str) -> bool {
        let mut any = false;
        for d in &p.destinations {
            let server =
                !self.cluster_server.is_empty() && d.server.allows(self.cluster_server, None);
            let name = !self.cluster_name.is_empty() && d.name.allows(self.cluster_name, None);
            let ns = d.namespace.allows(namespace, None);
            if (server || name) && ns {
                any = true;
            } else if ns && ((!name && d.name.is_deny()) || (!server && d.server.is_deny())) {
                // A denied cluster in an entry whose namespace matches.
                return false;
            } else if !ns && d.namespace.is_deny() && server {
                // A denied namespace on a cluster the entry names.
                return false;
            }
        }
        any
    }
}

/// A repository URL as Argo CD compares them: trimmed, lower-case, without a trailing
/// `/` or `.git`, an scp-like SSH address (`git@host:org/repo`) written with a `/`.
pub(crate) fn normalize_repo_url(url: &str) -> String {
    let mut u = url.trim().to_lowercase();
    if !u.contains("://")
        && let Some((host, path)) = u.split_once(':')
        && host.contains('@')
    {
        u = format!("{host}/{path}");
    }
    let u = u.trim_end_matches('/');
    u.strip_suffix(".git").unwrap_or(u).to_owned()
}

/// Whether `repo_url` is permitted by the project's `sourceRepos`.
impl AppProject {
    /// Whether the project's `sourceRepos` permit `repo_url` (globs per path segment, a
    /// `!` entry denying), as Argo CD's `IsSourcePermitted`.
    pub fn permits_source(&self, repo_url: &str) -> bool {
        source_permitted(self, repo_url)
    }
}

fn source_permitted(p: &AppProject, repo_url: &str) -> bool {
    let url = normalize_repo_url(repo_url);
    let mut any = false;
    for pattern in p.source_repos.iter().map(|r| r.pattern()) {
        if pattern.allows(&url, Some('/')) {
            any = true;
        } else if pattern.is_deny() {
            return false;
        }
    }
    any
}

fn rule_matches(rule: &ResourceRule, r: &ResourceRef<'_>) -> bool {
    let m = |pattern: &Glob, value: &str| pattern.as_str() == "*" || pattern.is_match(value);
    m(&rule.group, r.group)
        && m(&rule.kind, r.kind)
        && (rule.name.is_empty() || m(&rule.name, r.name))
}

/// The resource lists: a namespaced kind needs no allow list (an absent one allows all,
/// an empty one none); a cluster-scoped kind must be allowed explicitly. A deny entry
/// wins.
fn kind_permitted(p: &AppProject, r: &ResourceRef<'_>) -> bool {
    let any = |rules: &[ResourceRule]| rules.iter().any(|rule| rule_matches(rule, r));
    if r.namespace.is_empty() {
        any(&p.cluster_allow) && !any(&p.cluster_deny)
    } else {
        let allowed = p.namespace_allow.as_deref().is_none_or(any);
        allowed && !any(&p.namespace_deny)
    }
}
