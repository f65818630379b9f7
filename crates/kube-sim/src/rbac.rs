//! The smallest faithful RBAC: a bearer token bound to some namespaces, as a service
//! account with a RoleBinding in each (and, optionally, a ClusterRoleBinding for
//! cluster-scoped kinds). Anything else that names a resource is refused with the real
//! API server's 403 `Status` (`reason: Forbidden`, the authorizer's message); discovery
//! and `/version` stay open to it, as `system:discovery` grants them to every
//! authenticated user.

use super::faults::{RequestInfo, Verb};
use super::status::{ApiError, qualified};

/// A bearer token whose holder may only reach some namespaces ([`crate::FakeConfig::namespaced_tokens`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespacedToken {
    /// The token (`Authorization: Bearer TOKEN`).
    pub token: String,
    /// The user the server names in its refusals (`system:serviceaccount:NS:NAME`).
    pub user: String,
    /// Every verb on every namespaced kind, in these namespaces only.
    pub namespaces: Vec<String>,
    /// Every verb on every cluster-scoped kind too.
    pub cluster_resources: bool,
}

impl NamespacedToken {
    /// Ok if the holder may make the request `info` on a kind that is `namespaced` (or
    /// not); else 403 as the real server words it:
    /// `configmaps is forbidden: User "u" cannot list resource "configmaps" in API group
    /// "" at the cluster scope`.
    pub(crate) fn authorize(&self, info: &RequestInfo, namespaced: bool) -> Result<(), ApiError> {
        let Some(verb) = info.verb.and_then(Verb::rbac_name) else {
            return Ok(());
        };
        let allowed = match (&info.namespace, namespaced) {
            (Some(ns), true) => self.namespaces.iter().any(|n| n == ns),
            (None, true) => false,
            (_, false) => self.cluster_resources,
        };
        if allowed {
            return Ok(());
        }
        let mut resource = info.resource.clone();
        if let Some(sub) = &info.subresource {
            resource = format!("{resource}/{sub}");
        }
        let scope = match &info.namespace {
            Some(ns) => format!("in the namespace {ns:?}"),
            None => "at the cluster scope".to_owned(),
        };
        let why = format!(
            "User {:?} cannot {} resource {resource:?} in API group {:?} {scope}",
            self.user, verb, info.group
        );
        let qualified = qualified(&info.group, &info.resource);
        let message = match &info.name {
            Some(name) => format!("{qualified} {name:?} is forbidden: {why}"),
            None => format!("{qualified} is forbidden: {why}"),
        };
        let mut e = ApiError::new(403, "Forbidden", message);
        // The real `Status` leaves out an empty group (the core API).
        e.details.group = Some(info.group.clone()).filter(|g| !g.is_empty());
        e.details.kind = Some(info.resource.clone());
        e.details.name = info.name.clone();
        Err(e)
    }
}
