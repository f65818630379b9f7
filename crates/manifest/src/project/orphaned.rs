//! An AppProject's `spec.orphanedResources`: whether the apps of the project look for
//! orphaned resources in their destination namespace — the top-level namespaced objects no
//! application manages — whether they warn of them (`warn`), and which they never count
//! (`ignore`: group, kind and name globs). The objects every namespace holds by default
//! (its `default` ServiceAccount, its `kube-root-ca.crt` ConfigMap, the `kubernetes`
//! Service of `default`) are never orphans, as in Argo CD.

use serde::Deserialize;

use crate::glob::Glob;

/// `spec.orphanedResources`; present (even empty) means the project's apps look.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(default)]
pub struct OrphanedResources {
    /// `warn`: an app with orphans shows an `OrphanedResourceWarning` condition. Absent
    /// means no warning (Argo CD's `IsWarn`: only an explicit `true` warns).
    pub warn: Option<bool>,
    /// `ignore`: the objects never counted as orphans.
    pub ignore: Vec<OrphanedResourceKey>,
}

/// One `ignore` entry: group, kind and name globs. An empty kind or name matches any; an
/// empty group only the core group.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(default)]
pub struct OrphanedResourceKey {
    /// `group`.
    pub group: Glob,
    /// `kind`.
    pub kind: Glob,
    /// `name`.
    pub name: Glob,
}

impl OrphanedResources {
    /// Whether an app with orphans shows the warning condition.
    pub fn warns(&self) -> bool {
        self.warn == Some(true)
    }

    /// Whether the object `group`/`kind` `namespace`/`name` is never an orphan: one of
    /// the objects every namespace holds by default, or matched by an `ignore` entry.
    pub fn ignores(&self, group: &str, kind: &str, namespace: &str, name: &str) -> bool {
        let core = group.is_empty();
        let by_default =
            (core && namespace == "default" && kind == "Service" && name == "kubernetes")
                || (core && kind == "ServiceAccount" && name == "default")
                || (core && kind == "ConfigMap" && name == "kube-root-ca.crt");
        by_default
            || self.ignore.iter().any(|entry| {
                (entry.kind.is_empty() || entry.kind.is_match(kind))
                    && entry.group.is_match(group)
                    && (entry.name.is_empty() || entry.name.is_match(name))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::{OrphanedResourceKey, OrphanedResources};

    #[test]
    fn default_objects_and_ignore_globs_are_never_orphans() {
        let none = OrphanedResources::default();
        assert!(!none.warns());
        assert!(none.ignores("", "ServiceAccount", "team", "default"));
        assert!(none.ignores("", "ConfigMap", "team", "kube-root-ca.crt"));
        assert!(none.ignores("", "Service", "default", "kubernetes"));
        assert!(!none.ignores("", "Service", "team", "kubernetes"));
        assert!(!none.ignores("", "ConfigMap", "team", "settings"));
        let some = OrphanedResources {
            warn: Some(true),
            ignore: vec![
                OrphanedResourceKey {
                    kind: "ConfigMap".into(),
                    name: "keep-*".into(),
                    ..OrphanedResourceKey::default()
                },
                OrphanedResourceKey {
                    group: "apps".into(),
                    ..OrphanedResourceKey::default()
                },
            ],
        };
        assert!(some.warns());
        assert!(some.ignores("", "ConfigMap", "team", "keep-me"));
        assert!(!some.ignores("", "ConfigMap", "team", "drop-me"));
        assert!(some.ignores("apps", "Deployment", "team", "web"));
        // An empty group is the core group only.
        assert!(!some.ignores("batch", "ConfigMap", "team", "keep-me"));
    }
}
