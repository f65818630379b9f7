//! The project rules an application and each of its resources must pass, as Argo CD's
//! controller applies them: source repositories, destinations, source namespaces, the
//! resource allow and deny lists, and (fleetshard's own rule) the control plane of the cluster
//! fleetshard runs in.
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

/// The control plane: what no application writes or prunes unless its project grants it
/// explicitly, on the cluster fleetshard runs in only — every namespaced kind in Argo CD's
/// namespace and in fleetshard's own (AppProjects, Applications, RBAC, workloads,
/// ServiceAccounts, Secrets, ConfigMaps, Leases, …), those namespaces themselves, and the
/// `argoproj.io` CustomResourceDefinitions and APIServices (cluster RBAC and webhooks are
/// the project's allow list's business, as in Argo CD).
///
/// Whether a destination *is* that cluster is decided by the caller from what the cluster
/// is, not how it is named (gitops' `live::ControlPlaneIdentity`: the built-in in-cluster
/// entry, the in-cluster service's name, the replica's own API server address or CA
/// certificate, or an API server whose certificate the replica's cluster CA signed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControlPlane<'a> {
    /// Argo CD's namespace (`argocd`).
    pub namespace: &'a str,
    /// fleetshard's own namespaces (the replica's, the coordination store's), guarded as
    /// Argo CD's is.
    pub fleetshard_namespaces: &'a [String],
    /// The destination is the cluster fleetshard runs in.
    pub local: bool,
}

impl<'a> ControlPlane<'a> {
    /// The control plane in Argo CD's `namespace` and fleetshard's own `fleetshard_namespaces`;
    /// `local`: the destination is the cluster fleetshard runs in.
    pub fn new(namespace: &'a str, fleetshard_namespaces: &'a [String], local: bool) -> Self {
        ControlPlane {
            namespace,
            fleetshard_namespaces,
            local,
        }
    }

    /// Whether a cluster is named as the one Argo CD runs in: the built-in in-cluster
    /// entry (id `""`) or a server that is the in-cluster service
    /// (`https://kubernetes.default.svc`, with or without the cluster domain or a port).
    /// Only the names: an address or a CA says more (gitops' `ControlPlaneIdentity`).
    pub fn named_in_cluster(cluster_id: &str, server: &str) -> bool {
        if cluster_id.is_empty() {
            return true;
        }
        let Some(rest) = server.trim_end_matches('/').strip_prefix("https://") else {
            return false;
        };
        let host = rest.split(['/', ':']).next().unwrap_or_default();
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let default_svc = IN_CLUSTER_SERVER.trim_start_matches("https://");
        host == default_svc
            || host == "kubernetes.default"
            || host == "kubernetes"
            || host
                .strip_prefix(default_svc)
                .is_some_and(|domain| domain.starts_with('.'))
    }

    /// Whether `namespace` is Argo CD's or fleetshard's.
    fn is_namespace(&self, namespace: &str) -> bool {
        namespace == self.namespace || self.fleetshard_namespaces.iter().any(|n| n == namespace)
    }

    /// Whether `r` is part of the control plane. Of the cluster-scoped kinds, only these
    /// Namespaces and what serves or defines `argoproj.io`: RBAC cluster roles and bindings,
    /// admission webhooks and policies are left to the project's `clusterResourceWhitelist`,
    /// as in Argo CD — a project granting them grants power on every cluster it reaches,
    /// which no rule about this one cluster makes safe, and refusing them here would refuse
    /// most charts (cert-manager, ingress-nginx, monitoring) on the cluster Argo CD runs in.
    fn guards(&self, r: &ResourceRef<'_>) -> bool {
        if !self.local {
            return false;
        }
        if !r.namespace.is_empty() {
            return self.is_namespace(r.namespace);
        }
        match (r.group, r.kind) {
            ("", "Namespace") => self.is_namespace(r.name),
            ("apiextensions.k8s.io", "CustomResourceDefinition")
            | ("apiregistration.k8s.io", "APIService") => r.name.ends_with(".argoproj.io"),
            _ => false,
        }
    }
}

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
    /// namespace may use it ([`ProjectCheck::check_app_namespace`]), its repository and
    /// its destination are permitted.
    pub fn check_app(
        &self,
        app_namespace: &str,
        app_name: &str,
        repo_url: &str,
        dest_namespace: &str,
    ) -> Result<(), Violation> {
        let p = self.project()?;
        self.check_app_namespace(app_namespace, app_name)?;
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

    /// The application's namespace may use the project: the control plane's namespace, or
    /// one of its `sourceNamespaces` (nothing to check when the project does not exist:
    /// [`ProjectCheck::check_app`] says so).
    pub fn check_app_namespace(
        &self,
        app_namespace: &str,
        app_name: &str,
    ) -> Result<(), Violation> {
        let Some(p) = self.project else {
            return Ok(());
        };
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
        Ok(())
    }

    /// The resource-level rules: its kind is allowed (cluster-scoped or namespaced list),
    /// its own namespace is a permitted destination (a manifest's namespace does not escape
    /// the project), and it is not part of the control plane ([`ControlPlane`]) unless the
    /// project grants it explicitly.
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
        if self.control_plane.guards(r) && !self.explicitly_allows(p, r) {
            let grant = if r.namespace.is_empty() {
                format!("{}:{} in clusterResourceWhitelist", r.group, r.kind)
            } else {
                format!(
                    "namespace {} in a destination and {}:{} in namespaceResourceWhitelist",
                    r.namespace, r.group, r.kind
                )
            };
            return Err(Violation(format!(
                "{} is part of the control plane of the cluster fleetshard runs in (Argo \
                 CD's and fleetshard's namespaces, and the cluster-scoped kinds that grant \
                 power over them); project {} must name {grant}, without wildcards, to let \
                 an application write it",
                what(),
                self.name,
            )));
        }
        Ok(())
    }

    /// An explicit grant of a control-plane resource: for a namespaced one, a destination
    /// naming its namespace literally and a `namespaceResourceWhitelist` entry naming its
    /// group and kind literally; for a cluster-scoped one, a `clusterResourceWhitelist`
    /// entry naming its group and kind literally. (The deny lists were checked before.)
    fn explicitly_allows(&self, p: &AppProject, r: &ResourceRef<'_>) -> bool {
        // Equal to the resource's own group and kind, so written without wildcards.
        let names_kind =
            |rule: &ResourceRule| rule.group.as_str() == r.group && rule.kind.as_str() == r.kind;
        if r.namespace.is_empty() {
            return p.cluster_allow.iter().any(names_kind);
        }
        let destination = p.destinations.iter().any(|d| {
            // A deny (`!…`) names no cluster.
            let names =
                |p: &Pattern, value: &str| !p.is_empty() && !p.is_deny() && p.allows(value, None);
            d.namespace.as_str() == r.namespace
                && (names(&d.server, self.cluster_server) || names(&d.name, self.cluster_name))
        });
        destination && p.namespace_allow.iter().flatten().any(names_kind)
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

    /// Whether the project's namespaced resource lists permit the kind of `r` (a
    /// namespaced resource; its namespace is not checked), as Argo CD's
    /// `IsGroupKindNamePermitted` for namespaced kinds.
    pub fn permits_namespaced_kind(&self, r: &ResourceRef<'_>) -> bool {
        let allowed = self
            .namespace_allow
            .as_deref()
            .is_none_or(|rules| rules.iter().any(|rule| rule_matches(rule, r)));
        allowed && !self.namespace_deny.iter().any(|rule| rule_matches(rule, r))
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
        p.permits_namespaced_kind(r)
    }
}
