//! What a file of the directory source holds of what it read, once the inventory holds
//! it too: each application, cluster and set of cluster credentials is kept whole only
//! until it is published, then by its key or id alone, and taken back from the published
//! inventory (whose only writer is the source) at the next assembly. What is not
//! published as the file read it stays whole: an application another file's shadows, a
//! cluster whose id the fleet names twice or that Argo CD's cluster list leaves out, and
//! credentials a later file replaces.

use std::collections::{BTreeMap, HashMap};

use fleetshard_core::{App, Cluster};
use fleetshard_manifest::ClusterCredentials;

use super::super::{InventoryContent, InventorySnapshot, StoredSpec};
use crate::AppKey;

/// One of a file's applications.
#[derive(Debug)]
pub(super) enum FileApp {
    /// Held here: read and not published yet, or shadowed by an earlier file's (boxed:
    /// a published one costs only its key).
    Whole(Box<(App, Option<StoredSpec>)>),
    /// In the published inventory under this key, with its spec if it has one.
    Published(AppKey),
}

/// One of a file's clusters.
#[derive(Debug)]
pub(super) enum FileCluster {
    /// Held here (boxed: a published one costs only its id).
    Whole(Box<Cluster>),
    /// In the published inventory, the only cluster with this id.
    Published(Box<str>),
}

/// One of a file's cluster credentials (keyed by cluster id in the file's map).
#[derive(Debug)]
pub(super) enum FileCredentials {
    /// Held here.
    Whole(Box<ClusterCredentials>),
    /// In the published inventory under the same id, equal.
    Published,
}

/// The published inventory's applications, clusters and credentials, by key or id, to
/// take a file's back from.
pub(super) struct Published<'a> {
    last: &'a InventorySnapshot,
    apps: HashMap<(&'a str, &'a str), &'a App>,
    clusters: HashMap<&'a str, &'a Cluster>,
}

impl<'a> Published<'a> {
    /// What `last` published.
    pub(super) fn of(last: &'a InventorySnapshot) -> Self {
        Published {
            last,
            apps: (last.apps.iter())
                .map(|a| ((a.namespace.as_str(), a.name.as_str()), a))
                .collect(),
            clusters: last.clusters.iter().map(|c| (c.id.as_str(), c)).collect(),
        }
    }

    /// The published application `key` and its spec ([`FileApp::Published`]).
    pub(super) fn app(&self, key: &AppKey) -> Option<(App, Option<StoredSpec>)> {
        // Published by this source, the inventory's only writer.
        let found = (key.as_str().split_once('/')).and_then(|name| self.apps.get(&name));
        debug_assert!(found.is_some(), "{key} was published and is not");
        Some(((*found?).clone(), self.last.specs.get(key).cloned()))
    }

    /// Makes every cluster and credentials of a file whole again, from the published
    /// inventory (to be assembled, then marked again by [`mark_published`]).
    pub(super) fn take_back(
        &self,
        clusters: &mut [FileCluster],
        credentials: &mut BTreeMap<String, FileCredentials>,
    ) {
        for held in clusters {
            if let FileCluster::Published(id) = held {
                // Published by this source, the inventory's only writer.
                let found = self.clusters.get(&**id);
                debug_assert!(found.is_some(), "cluster {id} was published and is not");
                if let Some(cluster) = found {
                    *held = FileCluster::Whole(Box::new((*cluster).clone()));
                }
            }
        }
        credentials.retain(|id, held| {
            if let FileCredentials::Published = held {
                let found = self.last.credentials.get(id);
                debug_assert!(
                    found.is_some(),
                    "credentials of {id} were published and are not"
                );
                match found {
                    Some(c) => *held = FileCredentials::Whole(Box::new(c.clone())),
                    None => return false,
                }
            }
            true
        });
    }
}

/// The whole clusters of a file, in its order.
pub(super) fn whole_clusters(clusters: &[FileCluster]) -> impl Iterator<Item = &Cluster> {
    clusters.iter().filter_map(|c| match c {
        FileCluster::Whole(c) => Some(&**c),
        FileCluster::Published(_) => None,
    })
}

/// The whole credentials of a file, by cluster id.
pub(super) fn whole_credentials(
    credentials: &BTreeMap<String, FileCredentials>,
) -> impl Iterator<Item = (&String, &ClusterCredentials)> {
    credentials.iter().filter_map(|(id, c)| match c {
        FileCredentials::Whole(c) => Some((id, &**c)),
        FileCredentials::Published => None,
    })
}

/// The clusters of `content` by id, `None` for an id named more than once.
pub(super) fn unique_clusters(content: &InventoryContent) -> HashMap<&str, Option<&Cluster>> {
    let mut by_id: HashMap<&str, Option<&Cluster>> = HashMap::new();
    for c in &content.clusters {
        by_id
            .entry(c.id.as_str())
            .and_modify(|seen| *seen = None)
            .or_insert(Some(c));
    }
    by_id
}

/// Marks a file's clusters and credentials that `content` (about to be published) holds
/// exactly as the file does, keeping only their ids.
pub(super) fn mark_published(
    unique: &HashMap<&str, Option<&Cluster>>,
    content: &InventoryContent,
    clusters: &mut Vec<FileCluster>,
    credentials: &mut BTreeMap<String, FileCredentials>,
) {
    for held in clusters.iter_mut() {
        if let FileCluster::Whole(c) = held
            && unique.get(c.id.as_str()) == Some(&Some(&**c))
        {
            *held = FileCluster::Published(c.id.as_str().into());
        }
    }
    clusters.shrink_to_fit();
    for (id, held) in credentials.iter_mut() {
        if let FileCredentials::Whole(c) = held
            && content.credentials.get(id) == Some(&**c)
        {
            *held = FileCredentials::Published;
        }
    }
}
