//! A namespace-scoped cluster: the `namespaces` and `clusterResources` keys of an Argo CD
//! cluster Secret.
//!
//! A Secret whose credentials may only reach some namespaces lists them in `namespaces`
//! (comma-separated; blanks around names and empty entries ignored, as Argo CD splits
//! it). Argo CD then watches each kind once per listed namespace, never cluster-wide,
//! and watches cluster-scoped kinds only when `clusterResources` is `"true"` (that exact
//! string). An app whose desired object is outside the listed namespaces,
//! or cluster-scoped without `clusterResources`, fails its comparison. Without
//! `namespaces`, `clusterResources` means nothing: the whole cluster is watched.

/// What part of a cluster its credentials may reach. The default: all of it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClusterScope {
    /// `namespaces`: the only namespaces watched and written, in the Secret's order
    /// without repeats; empty: every namespace.
    pub namespaces: Vec<String>,
    /// `clusterResources`: with `namespaces`, whether cluster-scoped kinds are watched
    /// and written too.
    pub cluster_resources: bool,
}

impl ClusterScope {
    /// The scope from the Secret's `namespaces` text (comma-separated) and whether
    /// `clusterResources` is true (kept only with namespaces).
    pub fn from_secret(namespaces: &str, cluster_resources: bool) -> Self {
        let mut list: Vec<String> = Vec::new();
        for ns in namespaces.split(',').map(str::trim) {
            if !ns.is_empty() && !list.iter().any(|n| n == ns) {
                list.push(ns.to_owned());
            }
        }
        // Meaningless without namespaces: one scope, the whole cluster.
        ClusterScope {
            cluster_resources: cluster_resources && !list.is_empty(),
            namespaces: list,
        }
    }

    /// Whether only the listed namespaces are reached.
    pub fn is_namespaced(&self) -> bool {
        !self.namespaces.is_empty()
    }

    /// Where a kind is watched: `None` cluster-wide, else once in each of these
    /// namespaces (none at all: a cluster-scoped kind the scope does not reach).
    pub fn watched_namespaces(&self, namespaced_kind: bool) -> Option<&[String]> {
        match (self.is_namespaced(), namespaced_kind) {
            (false, _) => None,
            (true, true) => Some(&self.namespaces),
            (true, false) if self.cluster_resources => None,
            (true, false) => Some(&[]),
        }
    }

    /// Why the object `kind` `name` in `namespace` (empty: cluster-scoped) is outside the
    /// scope, or `None` when it is inside.
    pub fn refusal(&self, kind: &str, namespace: &str, name: &str) -> Option<String> {
        if !self.is_namespaced() {
            return None;
        }
        let listed = self.namespaces.join(",");
        if namespace.is_empty() {
            (!self.cluster_resources).then(|| {
                format!(
                    "cluster-scoped {kind} {name:?} cannot be managed: the cluster Secret \
                     limits this cluster to namespaces {listed:?} and its clusterResources \
                     is not \"true\""
                )
            })
        } else {
            (!self.namespaces.iter().any(|n| n == namespace)).then(|| {
                format!(
                    "namespace {namespace:?} of {kind} {name:?} is not managed: the cluster \
                     Secret limits this cluster to namespaces {listed:?}"
                )
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_split_as_argo_cd_splits_them() {
        let s = ClusterScope::from_secret(" team-a, ,team-b,team-a,", false);
        assert_eq!(s.namespaces, ["team-a", "team-b"]);
        assert!(s.is_namespaced());
        assert_eq!(
            ClusterScope::from_secret(" , ", true),
            ClusterScope::default()
        );
    }

    #[test]
    fn what_is_watched_and_what_is_refused() {
        let all = ClusterScope::default();
        assert_eq!(all.watched_namespaces(true), None);
        assert_eq!(all.watched_namespaces(false), None);
        assert_eq!(all.refusal("ClusterRole", "", "x"), None);

        let ns = ClusterScope::from_secret("a,b", false);
        assert_eq!(
            ns.watched_namespaces(true),
            Some(&["a".to_owned(), "b".to_owned()][..])
        );
        assert_eq!(ns.watched_namespaces(false), Some(&[][..]));
        assert_eq!(ns.refusal("ConfigMap", "b", "x"), None);
        let other = ns.refusal("ConfigMap", "c", "x").unwrap();
        assert!(
            other.contains("namespace \"c\" of ConfigMap \"x\" is not managed"),
            "{other}"
        );
        assert!(other.contains("\"a,b\""), "{other}");
        let cluster = ns.refusal("ClusterRole", "", "admin").unwrap();
        assert!(
            cluster.contains("cluster-scoped ClusterRole \"admin\""),
            "{cluster}"
        );
        assert!(cluster.contains("clusterResources"), "{cluster}");

        let with_cluster = ClusterScope::from_secret("a", true);
        assert_eq!(with_cluster.watched_namespaces(false), None);
        assert_eq!(with_cluster.refusal("ClusterRole", "", "admin"), None);
        assert!(with_cluster.refusal("ConfigMap", "b", "x").is_some());
    }
}
