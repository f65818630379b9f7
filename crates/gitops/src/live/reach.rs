//! Where a replica's watches of one cluster reach. A replica that holds the cluster whole
//! (or every slice of it) watches each kind its apps use cluster-wide, as Argo CD does.
//! A replica that holds only some slices of a split cluster (`cluster#slice-N-of-K`)
//! watches each namespaced kind only in the namespaces its own apps' objects of that kind
//! use (their destination namespace included), one watch per namespace, so the K owners
//! of a split cluster list and watch about what one whole owner would, instead of K
//! times as much. Cluster-scoped kinds cannot be narrowed and are watched cluster-wide
//! by every owner. A kind needed in more than [`LiveOptions::narrow_watch_limit`]
//! namespaces is watched cluster-wide too (one connection instead of hundreds).
//!
//! Namespaces are added as apps need them and never dropped while the connection lives:
//! an app whose objects leave a namespace still sees (and prunes) what it left there. An
//! object of a slice's app in a namespace none of its current manifests names is not
//! seen by that slice's owner (documented in `docs/argocd-compatibility.md`).
//!
//! [`LiveOptions::narrow_watch_limit`]: super::LiveOptions

use std::collections::{BTreeSet, HashMap};

use super::{ClusterConn, ClusterConnections, KindInfo, lock};

/// Where one kind is watched on a cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchReach {
    /// The kind's API group ("" for core).
    pub group: String,
    /// The kind.
    pub kind: String,
    /// `None`: cluster-wide; else the namespaces it is watched in, one watch each.
    pub namespaces: Option<Vec<String>>,
}

/// The namespaces a slice owner's apps use, by kind; `None` while the replica holds the
/// whole cluster.
#[derive(Debug, Default)]
pub(crate) struct Reach {
    narrow: Option<Needs>,
}

#[derive(Debug, Default)]
struct Needs {
    /// (group, kind) → the namespaces of the apps' objects of that kind.
    by_kind: HashMap<(String, String), BTreeSet<String>>,
    /// Every namespace any app needs: where a kind no app deploys (the resource tree's
    /// Pods and ReplicaSets) is watched.
    all: BTreeSet<String>,
}

impl ClusterConn {
    /// Whether this replica holds the whole cluster (`true`, the default: watches are
    /// cluster-wide) or only some slices of it (watches reach their apps' namespaces). A
    /// change drops the caches (their watches end), so the next refresh or warm-up lists
    /// again what it needs, as an acquisition would.
    pub fn set_whole(&self, whole: bool) {
        let mut reach = lock(&self.reach);
        if reach.narrow.is_none() == whole {
            return;
        }
        reach.narrow = (!whole).then(Needs::default);
        drop(reach);
        lock(&self.caches).clear();
    }

    /// An app's object of `info`'s kind lives in `namespace`: a slice owner watches the
    /// kind there from its next [`ClusterConn::watch_kinds`] or
    /// [`ClusterConn::start_watch`] on.
    pub fn need(&self, info: &KindInfo, namespace: &str) {
        if !info.namespaced || namespace.is_empty() {
            return;
        }
        if let Some(needs) = &mut lock(&self.reach).narrow {
            let key = (info.resource.group.clone(), info.resource.kind.clone());
            needs
                .by_kind
                .entry(key)
                .or_default()
                .insert(namespace.to_owned());
            needs.all.insert(namespace.to_owned());
        }
    }

    /// Where `info`'s kind is watched: `None` cluster-wide, else once in each namespace
    /// (a namespace-scoped cluster's own, or a slice owner's apps').
    pub(super) fn wanted_namespaces(&self, info: &KindInfo) -> Option<Vec<String>> {
        if let Some(scoped) = self.scope().watched_namespaces(info.namespaced) {
            return Some(scoped.to_vec());
        }
        if !info.namespaced {
            return None;
        }
        let reach = lock(&self.reach);
        let needs = reach.narrow.as_ref()?;
        let key = (info.resource.group.clone(), info.resource.kind.clone());
        let list = needs.by_kind.get(&key).unwrap_or(&needs.all);
        if list.is_empty() || list.len() > self.options.narrow_watch_limit {
            return None;
        }
        Some(list.iter().cloned().collect())
    }

    /// Each watched kind's reach, sorted by group and kind.
    pub fn watch_reach(&self) -> Vec<WatchReach> {
        let mut out: Vec<_> = lock(&self.caches)
            .iter()
            .map(|((group, kind), c)| WatchReach {
                group: group.clone(),
                kind: kind.clone(),
                namespaces: (!c.is_cluster_wide()).then(|| c.namespaces()),
            })
            .collect();
        out.sort_by(|a, b| (&a.group, &a.kind).cmp(&(&b.group, &b.kind)));
        out
    }
}

impl ClusterConnections {
    /// [`ClusterConn::watch_reach`] of the started cluster `id` (empty if not started).
    pub fn watch_reach(&self, id: &str) -> Vec<WatchReach> {
        let conn = lock(&self.clusters).get(id).cloned();
        conn.map(|c| c.watch_reach()).unwrap_or_default()
    }
}
