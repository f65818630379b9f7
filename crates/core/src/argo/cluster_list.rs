//! Argo CD's cluster list: the clusters its sharding code sees, built from the cluster
//! Secrets the way its settings database lists them (argo-compat §1).
//!
//! Two rules beyond "one cluster per Secret":
//! - When no Secret names the in-cluster API server ([`IN_CLUSTER_SERVER`]) and the
//!   in-cluster destination is enabled (argocd-cm `cluster.inClusterEnabled`, default
//!   true), the list carries a built-in entry for it: id `""`, name `in-cluster`, no pin.
//!   Every default install has it, so every plan of a real fleet must have it: with id
//!   `""` it ranks first under round-robin and hashes like any id under the others.
//! - When the in-cluster destination is disabled, a Secret that names that server is left
//!   out of the list (Argo CD logs an error and skips it).
//!
//! A Secret Argo CD cannot read (its `config` is not valid JSON, say) is skipped before
//! this step, by the loader that reads Secrets.

use crate::model::Cluster;

/// The in-cluster API server's address as Argo CD spells it.
pub const IN_CLUSTER_SERVER: &str = "https://kubernetes.default.svc";

/// The built-in in-cluster entry's name.
pub const IN_CLUSTER_NAME: &str = "in-cluster";

/// Argo CD's cluster list built from its cluster Secrets.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ArgoClusterList {
    /// The clusters, Secrets' clusters first (in input order), then the built-in in-cluster
    /// entry when there is one.
    pub clusters: Vec<Cluster>,
    /// True when the built-in in-cluster entry was added.
    pub built_in: bool,
    /// Secrets' clusters left out because they name the in-cluster server while the
    /// in-cluster destination is disabled.
    pub disabled: Vec<Cluster>,
}

impl ArgoClusterList {
    /// The list Argo CD builds from `secrets` (clusters read from cluster Secrets), with
    /// the in-cluster destination enabled or not.
    pub fn from_secrets(secrets: Vec<Cluster>, in_cluster_enabled: bool) -> Self {
        let (disabled, mut clusters): (Vec<Cluster>, Vec<Cluster>) = secrets
            .into_iter()
            .partition(|c| !in_cluster_enabled && c.server == IN_CLUSTER_SERVER);
        let built_in =
            in_cluster_enabled && !clusters.iter().any(|c| c.server == IN_CLUSTER_SERVER);
        if built_in {
            clusters.push(in_cluster_entry());
        }
        ArgoClusterList {
            clusters,
            built_in,
            disabled,
        }
    }
}

/// The built-in in-cluster entry: id `""`, name `in-cluster`, server
/// [`IN_CLUSTER_SERVER`], no pin, no labels.
pub fn in_cluster_entry() -> Cluster {
    Cluster {
        name: IN_CLUSTER_NAME.to_owned(),
        ..Cluster::new("", IN_CLUSTER_SERVER)
    }
}

/// True for the built-in in-cluster entry (id `""` at the in-cluster server): the one
/// cluster Argo CD reaches with its own pod's service account rather than a Secret.
pub fn is_built_in_in_cluster(c: &Cluster) -> bool {
    c.id.is_empty() && c.server == IN_CLUSTER_SERVER
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(id: &str, server: &str) -> Cluster {
        Cluster::new(id, server)
    }

    #[test]
    fn built_in_entry_is_added_when_no_secret_names_the_in_cluster_server() {
        let list = ArgoClusterList::from_secrets(vec![named("b", "https://b")], true);
        assert!(list.built_in);
        assert_eq!(list.clusters.len(), 2);
        assert_eq!(list.clusters[1], in_cluster_entry());
        assert_eq!(list.clusters[1].id, "");
        assert_eq!(list.clusters[1].name, "in-cluster");
        assert!(is_built_in_in_cluster(&list.clusters[1]));
    }

    #[test]
    fn an_empty_export_is_the_built_in_entry_alone() {
        let list = ArgoClusterList::from_secrets(Vec::new(), true);
        assert_eq!(list.clusters, vec![in_cluster_entry()]);
    }

    #[test]
    fn a_secret_for_the_in_cluster_server_replaces_the_built_in_entry() {
        let secret = named("uid-1", IN_CLUSTER_SERVER);
        let list = ArgoClusterList::from_secrets(vec![secret.clone()], true);
        assert!(!list.built_in);
        assert_eq!(list.clusters, vec![secret]);
    }

    #[test]
    fn disabled_in_cluster_drops_its_secret_and_adds_nothing() {
        let secret = named("uid-1", IN_CLUSTER_SERVER);
        let other = named("b", "https://b");
        let list = ArgoClusterList::from_secrets(vec![secret.clone(), other.clone()], false);
        assert!(!list.built_in);
        assert_eq!(list.clusters, vec![other]);
        assert_eq!(list.disabled, vec![secret]);
    }
}
