//! argocd-cm's `resource.exclusions` and `resource.inclusions`: which kinds the live cache
//! of a cluster never watches, as Argo CD's resources filter decides it. Each entry is
//! `apiGroups` (globs), `kinds` (exact names, or `*`) and `clusters` (globs over the
//! cluster's server URL); an empty list matches everything. Argo CD's core exclusions
//! (the `events.k8s.io` and `metrics.k8s.io` groups, core `Event`s,
//! `coordination.k8s.io` `Lease`s) always apply, before argocd-cm's own list (Argo CD's
//! install manifests ship an argocd-cm whose `resource.exclusions` lists Endpoints,
//! EndpointSlices, authorization reviews, Cilium and Kyverno internals, …: it applies
//! when argocd-cm carries it).
//!
//! An excluded kind is never allowed. Otherwise a kind an inclusion matches is allowed; a
//! kind no inclusion matches is excluded when some inclusion names the cluster, and
//! allowed when none does.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{CustomizationError, first_line};
use crate::glob::Glob;

/// The argocd-cm key of the exclusions.
pub const EXCLUSIONS_KEY: &str = "resource.exclusions";

/// The argocd-cm key of the inclusions.
pub const INCLUSIONS_KEY: &str = "resource.inclusions";

/// One entry of `resource.exclusions` or `resource.inclusions`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FilteredResource {
    /// API groups (globs; `""` is the core group); empty: every group.
    #[serde(default)]
    pub api_groups: Vec<Glob>,
    /// Kinds (exact, or `*`); empty: every kind.
    #[serde(default)]
    pub kinds: Vec<String>,
    /// Cluster server URLs (globs); empty: every cluster.
    #[serde(default)]
    pub clusters: Vec<Glob>,
}

impl FilteredResource {
    fn entry(groups: &[&str], kinds: &[&str]) -> FilteredResource {
        FilteredResource {
            api_groups: groups.iter().map(|g| Glob::new(g)).collect(),
            kinds: kinds.iter().map(|k| (*k).to_owned()).collect(),
            clusters: Vec::new(),
        }
    }

    /// Whether the entry names `cluster` (a server URL).
    pub fn matches_cluster(&self, cluster: &str) -> bool {
        self.clusters.is_empty() || self.clusters.iter().any(|c| c.is_match(cluster))
    }

    /// Whether the entry names `group`/`kind` on `cluster`.
    pub fn matches(&self, group: &str, kind: &str, cluster: &str) -> bool {
        (self.api_groups.is_empty() || self.api_groups.iter().any(|g| g.is_match(group)))
            && (self.kinds.is_empty() || self.kinds.iter().any(|k| k == "*" || k == kind))
            && self.matches_cluster(cluster)
    }
}

/// The exclusions and inclusions of one argocd-cm.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceFilter {
    /// Argo CD's core exclusions, then argocd-cm's `resource.exclusions`.
    pub exclusions: Vec<FilteredResource>,
    /// argocd-cm's `resource.inclusions`.
    pub inclusions: Vec<FilteredResource>,
}

impl Default for ResourceFilter {
    /// The core exclusions only.
    fn default() -> Self {
        ResourceFilter {
            exclusions: vec![
                FilteredResource::entry(&["events.k8s.io", "metrics.k8s.io"], &[]),
                FilteredResource::entry(&[""], &["Event"]),
                FilteredResource::entry(&["coordination.k8s.io"], &["Lease"]),
            ],
            inclusions: Vec::new(),
        }
    }
}

impl ResourceFilter {
    /// Reads argocd-cm's `data`; `Err` names the key whose YAML does not read as a list
    /// of entries.
    pub fn from_argocd_cm(data: &BTreeMap<String, String>) -> Result<Self, CustomizationError> {
        let read = |key: &str| -> Result<Vec<FilteredResource>, CustomizationError> {
            match data.get(key).filter(|t| !t.trim().is_empty()) {
                None => Ok(Vec::new()),
                Some(text) => serde_saphyr::from_str(text).map_err(|e| CustomizationError {
                    key: key.to_owned(),
                    message: first_line(&e.to_string()),
                }),
            }
        };
        let mut filter = ResourceFilter::default();
        filter.exclusions.extend(read(EXCLUSIONS_KEY)?);
        filter.inclusions = read(INCLUSIONS_KEY)?;
        Ok(filter)
    }

    /// Whether `group`/`kind` is excluded on the cluster served at `cluster`.
    pub fn is_excluded(&self, group: &str, kind: &str, cluster: &str) -> bool {
        if self
            .exclusions
            .iter()
            .any(|e| e.matches(group, kind, cluster))
        {
            return true;
        }
        if self
            .inclusions
            .iter()
            .any(|i| i.matches(group, kind, cluster))
        {
            return false;
        }
        self.inclusions.iter().any(|i| i.matches_cluster(cluster))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(exclusions: &str, inclusions: &str) -> ResourceFilter {
        let mut data = BTreeMap::new();
        data.insert(EXCLUSIONS_KEY.to_owned(), exclusions.to_owned());
        data.insert(INCLUSIONS_KEY.to_owned(), inclusions.to_owned());
        ResourceFilter::from_argocd_cm(&data).unwrap()
    }

    const PROD: &str = "https://prod.example.com";
    const DEV: &str = "https://dev.example.com";

    #[test]
    fn the_core_exclusions_always_apply() {
        let f = ResourceFilter::default();
        assert!(f.is_excluded("", "Event", PROD));
        assert!(f.is_excluded("events.k8s.io", "Event", PROD));
        assert!(f.is_excluded("metrics.k8s.io", "PodMetrics", PROD));
        assert!(f.is_excluded("coordination.k8s.io", "Lease", PROD));
        assert!(!f.is_excluded("", "ConfigMap", PROD));
        assert!(
            !f.is_excluded("apps", "Event", PROD),
            "Event of the core group only"
        );
    }

    #[test]
    fn api_groups_are_globs() {
        let f = filter("- apiGroups: ['*.cilium.io', 'cilium.io']\n", "");
        assert!(f.is_excluded("cilium.io", "CiliumIdentity", PROD));
        assert!(f.is_excluded("x.cilium.io", "Anything", PROD));
        assert!(!f.is_excluded("cilium.example.io", "CiliumIdentity", PROD));
    }

    #[test]
    fn kinds_are_exact_or_a_star() {
        let f = filter(
            "- apiGroups: ['']\n  kinds: [Endpoints]\n- apiGroups: [kyverno.io]\n  kinds: ['*']\n",
            "",
        );
        assert!(f.is_excluded("", "Endpoints", PROD));
        assert!(!f.is_excluded("", "EndpointSlice", PROD), "not a glob");
        assert!(f.is_excluded("kyverno.io", "PolicyReport", PROD));
        let globbed = filter("- kinds: ['Endpoint*']\n", "");
        assert!(!globbed.is_excluded("", "Endpoints", PROD));
    }

    #[test]
    fn clusters_are_globs_over_the_server_url() {
        let f = filter("- kinds: [Secret]\n  clusters: ['https://prod.*']\n", "");
        assert!(f.is_excluded("", "Secret", PROD));
        assert!(!f.is_excluded("", "Secret", DEV));
    }

    #[test]
    fn inclusions_allow_only_what_they_name_on_the_clusters_they_name() {
        let f = filter(
            "- kinds: [Secret]\n",
            "- apiGroups: ['', apps]\n  clusters: ['https://prod.*']\n",
        );
        assert!(!f.is_excluded("apps", "Deployment", PROD));
        assert!(f.is_excluded("batch", "Job", PROD), "prod has inclusions");
        assert!(!f.is_excluded("batch", "Job", DEV), "dev has none");
        assert!(f.is_excluded("", "Secret", PROD), "an exclusion wins");
    }

    #[test]
    fn yaml_that_is_not_a_list_of_entries_names_its_key() {
        let mut data = BTreeMap::new();
        data.insert(INCLUSIONS_KEY.to_owned(), "apiGroups: x".to_owned());
        let e = ResourceFilter::from_argocd_cm(&data).unwrap_err();
        assert_eq!(e.key, INCLUSIONS_KEY);
    }
}
