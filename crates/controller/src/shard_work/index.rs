//! The shard's one index of apps: which cluster each app deploys to, and each cluster's
//! apps, with one entry per app in each direction and no set per cluster.
//!
//! Clusters that have apps get a slot; every resolved app is kept once in a vector grouped
//! by slot (a cluster's apps are a slice of it, in inventory order) and once in a map from
//! the app's key to its cluster's slot. The keys are the inventory's shared [`AppKey`]s
//! (one allocation per app, shared with the queues).

use std::collections::HashMap;
use std::sync::Arc;

use crate::AppKey;

/// Apps by cluster and cluster by app (see the module documentation).
#[derive(Debug, Default)]
pub(super) struct AppIndex {
    /// Cluster id of each slot.
    clusters: Vec<Arc<str>>,
    /// Slot of each cluster id.
    slots: HashMap<Arc<str>, usize>,
    /// Every app, grouped by slot: slot `s`'s apps are `apps[starts[s]..starts[s + 1]]`.
    apps: Vec<AppKey>,
    /// Where each slot's apps start in `apps`, and `apps.len()` last.
    starts: Vec<usize>,
    /// App → the slot of the cluster it deploys to.
    app_slot: HashMap<AppKey, usize>,
}

impl AppIndex {
    /// Indexes `apps`, each with the id of the cluster it deploys to. Of entries that share
    /// a key, the last one says where the app deploys (as a map insert would); each entry
    /// is listed among its cluster's apps.
    pub(super) fn new(apps: Vec<(AppKey, Arc<str>)>) -> Self {
        let mut clusters: Vec<Arc<str>> = Vec::new();
        let mut slots: HashMap<Arc<str>, usize> = HashMap::new();
        let mut counts: Vec<usize> = Vec::new();
        let mut slotted = Vec::with_capacity(apps.len());
        for (key, cluster) in apps {
            let slot = *slots.entry(cluster).or_insert_with_key(|id| {
                clusters.push(id.clone());
                counts.push(0);
                clusters.len() - 1
            });
            counts[slot] += 1;
            slotted.push((key, slot));
        }
        // Counting sort by slot, stable: a cluster's apps keep the input order.
        let mut starts = Vec::with_capacity(counts.len() + 1);
        let mut at = 0;
        for n in &counts {
            starts.push(at);
            at += n;
        }
        starts.push(at);
        let mut next = starts.clone();
        let mut placed: Vec<Option<AppKey>> = vec![None; slotted.len()];
        let mut app_slot = HashMap::with_capacity(slotted.len());
        for (key, slot) in slotted {
            app_slot.insert(key.clone(), slot);
            placed[next[slot]] = Some(key);
            next[slot] += 1;
        }
        AppIndex {
            clusters,
            slots,
            apps: placed.into_iter().flatten().collect(),
            starts,
            app_slot,
        }
    }

    /// The id of the cluster `app` deploys to.
    pub(super) fn cluster_of(&self, app: &AppKey) -> Option<&Arc<str>> {
        self.app_slot.get(app).map(|&s| &self.clusters[s])
    }

    /// The apps deploying to `cluster`, in inventory order (none for an unknown cluster).
    pub(super) fn apps_of(&self, cluster: &str) -> &[AppKey] {
        match self.slots.get(cluster) {
            Some(&s) => &self.apps[self.starts[s]..self.starts[s + 1]],
            None => &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> AppKey {
        AppKey::new("ns", name)
    }

    #[test]
    fn each_cluster_lists_its_apps_in_order_and_each_app_its_cluster() {
        let (c1, c2): (Arc<str>, Arc<str>) = ("c1".into(), "c2".into());
        let index = AppIndex::new(vec![
            (key("a"), c1.clone()),
            (key("z"), c2.clone()),
            (key("b"), c1.clone()),
            (key("y"), c2.clone()),
            (key("c"), c1.clone()),
        ]);
        assert_eq!(index.apps_of("c1"), [key("a"), key("b"), key("c")]);
        assert_eq!(index.apps_of("c2"), [key("z"), key("y")]);
        assert_eq!(index.apps_of("c3"), []);
        assert_eq!(index.cluster_of(&key("y")).map(|c| &**c), Some("c2"));
        assert_eq!(index.cluster_of(&key("c")).map(|c| &**c), Some("c1"));
        assert_eq!(index.cluster_of(&key("nope")), None);
    }

    #[test]
    fn a_key_given_twice_deploys_where_the_last_says() {
        let index = AppIndex::new(vec![(key("a"), "c1".into()), (key("a"), "c2".into())]);
        assert_eq!(index.cluster_of(&key("a")).map(|c| &**c), Some("c2"));
        assert_eq!(index.apps_of("c2"), [key("a")]);
    }

    #[test]
    fn empty() {
        let index = AppIndex::default();
        assert_eq!(index.apps_of("c1"), []);
        assert_eq!(index.cluster_of(&key("a")), None);
    }
}
