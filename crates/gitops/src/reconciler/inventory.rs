//! What the reconciler needs to know about an app, supplied by its caller: the app
//! (destination), its GitOps spec (source, sync policy, a sync asked for by hand) and how
//! to reach its destination cluster ([`InventoryTargets`] answers from the controller's
//! inventory, [`StaticInventory`] from a map kept by hand); and the wall clock for status
//! timestamps.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use fleetshard_controller::AppKey;
use fleetshard_controller::inventory::InventorySnapshot;
use fleetshard_core::model::DestinationIndex;
use fleetshard_core::{App, Destination};
use fleetshard_manifest::{AppProject, AppSpec, RepoSettings};
use tokio::sync::watch;

use crate::live::ClusterAccess;

/// An app, its GitOps spec and its resolved destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppTarget {
    /// The app: its identity and destination.
    pub app: App,
    /// Its source, sync policy and the sync asked for by hand, if any.
    pub spec: AppSpec,
    /// Its destination cluster.
    pub cluster: ClusterAccess,
    /// The destination cluster's name (Argo CD's `name`, matched by project destinations
    /// and sync windows).
    pub cluster_name: String,
    /// Its AppProject (`None`: the project does not exist, and the app is refused).
    pub project: Option<Arc<AppProject>>,
    /// Argo CD's repository Secrets, credential templates, known hosts and TLS
    /// certificates, which say how its repository is fetched (empty: anonymously).
    pub repositories: Arc<RepoSettings>,
    /// `argocd-cm`'s `data`: the settings a render request carries (enabled source types,
    /// Kustomize build options and versions, Helm value file schemes, installation id);
    /// empty: Argo CD's defaults.
    pub argocd_cm: Arc<BTreeMap<String, String>>,
}

/// An app whose destination resolves to no cluster (none has that server, or that
/// name): the reconciler records Argo CD's status for it and lets it be deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnresolvedTarget {
    /// The app: its identity and destination.
    pub app: App,
    /// Its GitOps spec (a sync asked for, its finalizers and deletion).
    pub spec: AppSpec,
    /// Why it resolves to no cluster, in Argo CD's words (its `InvalidSpecError`).
    pub reason: String,
}

impl UnresolvedTarget {
    /// `app`, whose destination resolves to no cluster, with its spec.
    pub fn new(app: App, spec: AppSpec) -> Self {
        let reason = unresolved_reason(&app.destination);
        UnresolvedTarget { app, spec, reason }
    }
}

/// Argo CD's message for a destination that names no known cluster
/// (`util/argo.GetDestinationCluster`): by server when one is set, else by name.
pub fn unresolved_reason(destination: &Destination) -> String {
    match (&destination.server, &destination.name) {
        (Some(server), _) => format!(
            "error getting cluster by server {server:?}: rpc error: code = NotFound desc = \
             cluster {server:?} not found"
        ),
        (None, Some(name)) => format!("there are no clusters with this name: {name}"),
        (None, None) => "application destination server and/or name not present".to_owned(),
    }
}

/// The app inventory as the reconciler reads it: `None` for an app that does not exist
/// (deleted) or whose destination resolves to no cluster. Called once per refresh and
/// per operation, so it should answer from memory.
pub trait Inventory: Send + Sync + 'static {
    /// The app `key`, if it exists and resolves.
    fn target(&self, key: &AppKey) -> Option<AppTarget>;

    /// The app `key`, if it exists and its destination resolves to no cluster. An
    /// inventory that cannot tell answers none (such apps are then forgotten as deleted).
    fn unresolved(&self, key: &AppKey) -> Option<UnresolvedTarget> {
        let _ = key;
        None
    }

    /// The apps whose destination is the cluster `cluster` (its id), in a stable order;
    /// what a takeover warms. An inventory that cannot tell answers none.
    fn apps_of_cluster(&self, cluster: &str) -> Vec<AppKey> {
        let _ = cluster;
        Vec::new()
    }

    /// Each known cluster's name (its Secret's `name`), by id; what Argo CD's
    /// `argocd_cluster_info` labels a cluster with. An inventory that cannot tell answers
    /// none.
    fn cluster_names(&self) -> HashMap<String, String> {
        HashMap::new()
    }
}

impl<F: Fn(&AppKey) -> Option<AppTarget> + Send + Sync + 'static> Inventory for F {
    fn target(&self, key: &AppKey) -> Option<AppTarget> {
        self(key)
    }
}

/// An inventory kept by hand (tests, benchmarks, a caller that pushes changes).
#[derive(Debug, Default)]
pub struct StaticInventory {
    targets: Mutex<HashMap<AppKey, AppTarget>>,
    unresolved: Mutex<HashMap<AppKey, UnresolvedTarget>>,
}

impl StaticInventory {
    /// Adds or replaces an app.
    pub fn insert(&self, target: AppTarget) {
        let key = AppKey::of(&target.app);
        self.lock().insert(key, target);
    }

    /// Removes an app.
    pub fn remove(&self, key: &AppKey) {
        self.lock().remove(key);
        self.lock_unresolved().remove(key);
    }

    /// Adds or replaces an app whose destination resolves to no cluster (it is no longer a
    /// resolved one).
    pub fn insert_unresolved(&self, target: UnresolvedTarget) {
        let key = AppKey::of(&target.app);
        self.lock().remove(&key);
        self.lock_unresolved().insert(key, target);
    }

    fn lock_unresolved(&self) -> MutexGuard<'_, HashMap<AppKey, UnresolvedTarget>> {
        self.unresolved
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Changes an app in place; false if it is not there.
    pub fn update(&self, key: &AppKey, f: impl FnOnce(&mut AppTarget)) -> bool {
        match self.lock().get_mut(key) {
            Some(t) => {
                f(t);
                true
            }
            None => false,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<AppKey, AppTarget>> {
        self.targets.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Inventory for StaticInventory {
    fn target(&self, key: &AppKey) -> Option<AppTarget> {
        self.lock().get(key).cloned()
    }

    fn unresolved(&self, key: &AppKey) -> Option<UnresolvedTarget> {
        self.lock_unresolved().get(key).cloned()
    }

    fn cluster_names(&self) -> HashMap<String, String> {
        let targets = self.lock();
        let names = targets.values();
        names
            .map(|t| (t.cluster.id.clone(), t.cluster_name.clone()))
            .collect()
    }

    fn apps_of_cluster(&self, cluster: &str) -> Vec<AppKey> {
        let mut apps: Vec<AppKey> = self
            .lock()
            .iter()
            .filter(|(_, t)| t.cluster.id == cluster)
            .map(|(k, _)| k.clone())
            .collect();
        apps.sort();
        apps
    }
}

/// The wall clock, for status timestamps only (no decision reads it). The replica gives
/// the system's (`fleetshard_replica::clock::SystemClock`); tests a fixed one.
pub trait Clock: Send + Sync {
    /// Now, as RFC 3339 UTC (`2026-11-21T10:00:00Z`).
    fn now_rfc3339(&self) -> String;

    /// Now, in nanoseconds since the Unix epoch (what Argo CD names its events by); by
    /// default [`Clock::now_rfc3339`] read back (0 if it does not read).
    fn now_unix_nanos(&self) -> i128 {
        self.now_rfc3339()
            .parse::<jiff::Timestamp>()
            .map_or(0, jiff::Timestamp::as_nanosecond)
    }
}

/// A clock that always says the same time.
#[derive(Debug, Clone)]
pub struct FixedClock(pub String);

impl Clock for FixedClock {
    fn now_rfc3339(&self) -> String {
        self.0.clone()
    }
}

/// The controller's inventory as the reconciler reads it: apps by key, each with its
/// spec (the default one when the inventory has none), its destination resolved (by
/// server, else by name, as the shard filter resolves it) and the cluster's credentials.
/// The index is rebuilt on the first lookup after the inventory's revision moves, so a
/// lookup is a hash probe and a clone.
#[derive(Debug)]
pub struct InventoryTargets {
    rx: watch::Receiver<InventorySnapshot>,
    index: Mutex<TargetIndex>,
}

/// The inventory at one revision, indexed.
#[derive(Debug, Default)]
struct TargetIndex {
    snapshot: InventorySnapshot,
    /// App key → (index into the snapshot's apps, index into its clusters).
    apps: HashMap<AppKey, (usize, usize)>,
    /// App key → index into the snapshot's apps, of apps that resolve to no cluster.
    unresolved: HashMap<AppKey, usize>,
    /// Index into the snapshot's clusters → the indexes into its apps of the apps that
    /// resolve to it (4 bytes an app): a takeover acquires hundreds of clusters at once,
    /// and one pass over every app for each, under this index's lock, held up every
    /// refresh's lookup behind it.
    by_cluster: Vec<Vec<u32>>,
}

impl TargetIndex {
    fn new(snapshot: InventorySnapshot) -> Self {
        let clusters = DestinationIndex::new(&snapshot.clusters);
        let mut apps = HashMap::with_capacity(snapshot.apps.len());
        let mut unresolved = HashMap::new();
        let mut by_cluster = vec![Vec::new(); snapshot.clusters.len()];
        for (i, app) in snapshot.apps.iter().enumerate() {
            // The inventory's key of the app, shared, when it has a spec.
            let key = AppKey::of(app);
            let key = snapshot
                .specs
                .get_key_value(&key)
                .map_or(key, |(k, _)| k.clone());
            match clusters.resolve(&app.destination) {
                Some(c) => {
                    apps.insert(key, (i, c));
                    by_cluster[c].push(u32::try_from(i).unwrap_or(u32::MAX));
                }
                None => {
                    unresolved.insert(key, i);
                }
            }
        }
        TargetIndex {
            snapshot,
            apps,
            unresolved,
            by_cluster,
        }
    }
}

impl InventoryTargets {
    /// Answers from the inventory `rx` follows.
    pub fn new(rx: watch::Receiver<InventorySnapshot>) -> Self {
        InventoryTargets {
            rx,
            index: Mutex::new(TargetIndex::default()),
        }
    }
}

impl InventoryTargets {
    /// The index of the latest inventory revision.
    fn latest(&self) -> MutexGuard<'_, TargetIndex> {
        let mut index = self.index.lock().unwrap_or_else(PoisonError::into_inner);
        let latest = self.rx.borrow().revision;
        if index.snapshot.revision != latest || index.snapshot.revision == 0 {
            *index = TargetIndex::new(self.rx.borrow().clone());
        }
        index
    }
}

impl Inventory for InventoryTargets {
    fn cluster_names(&self) -> HashMap<String, String> {
        let index = self.latest();
        let clusters = index.snapshot.clusters.iter();
        clusters.map(|c| (c.id.clone(), c.name.clone())).collect()
    }

    /// From the index by cluster: one pass over the clusters, none over the apps.
    fn apps_of_cluster(&self, cluster: &str) -> Vec<AppKey> {
        let index = self.latest();
        let snap = &index.snapshot;
        let mut apps: Vec<AppKey> = (snap.clusters.iter().enumerate())
            .filter(|(_, c)| c.id == cluster)
            .flat_map(|(c, _)| &index.by_cluster[c])
            .map(|&a| a as usize)
            .filter_map(|a| Some((a, AppKey::of(snap.apps.get(a)?))))
            // An app listed twice under one key is the last one, as for `target`.
            .filter(|(a, key)| index.apps.get(key).is_some_and(|&(i, _)| i == *a))
            .map(|(_, key)| key)
            .collect();
        apps.sort();
        apps
    }

    fn unresolved(&self, key: &AppKey) -> Option<UnresolvedTarget> {
        let index = self.latest();
        let &a = index.unresolved.get(key)?;
        let snap = &index.snapshot;
        Some(UnresolvedTarget::new(snap.apps[a].clone(), snap.spec(key)))
    }

    fn target(&self, key: &AppKey) -> Option<AppTarget> {
        let index = self.latest();
        let &(a, c) = index.apps.get(key)?;
        let snap = &index.snapshot;
        let cluster = &snap.clusters[c];
        let app = &snap.apps[a];
        Some(AppTarget {
            project: snap.project(&app.project),
            cluster_name: cluster.name.clone(),
            app: app.clone(),
            spec: snap.spec(key),
            cluster: ClusterAccess {
                id: cluster.id.clone(),
                server: cluster.server.clone(),
                credentials: snap
                    .credentials
                    .get(&cluster.id)
                    .cloned()
                    .unwrap_or_default(),
            },
            repositories: Arc::clone(&snap.repositories),
            argocd_cm: Arc::clone(&snap.argocd_cm),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fleetshard_controller::inventory::{Inventory as Published, InventoryContent};
    use fleetshard_core::{App, Cluster};
    use fleetshard_manifest::{AppSource, AppSpec, AutoSync, ClusterCredentials};

    #[test]
    fn resolves_apps_with_credentials_and_follows_revisions() {
        let published = Published::new();
        let targets = InventoryTargets::new(published.subscribe());
        let key = AppKey::new("argocd", "guestbook");
        assert_eq!(targets.target(&key), None, "empty inventory");

        let mut by_name = App::to_server("argocd", "guestbook", "https://ignored");
        by_name.destination.server = None;
        by_name.destination.name = Some("prod".into());
        let cluster = Cluster {
            name: "prod".into(),
            ..Cluster::new("uid-1", "https://prod.example/")
        };
        let token = ClusterCredentials {
            bearer_token: Some("t".into()),
            ..ClusterCredentials::default()
        };
        let mut content = InventoryContent {
            clusters: vec![cluster],
            apps: vec![by_name, App::to_server("argocd", "lost", "https://nowhere")],
            ..InventoryContent::default()
        };
        content.credentials.insert("uid-1".into(), token.clone());
        let spec = AppSpec {
            source: AppSource {
                repo_url: "https://git.example/apps".into(),
                target_revision: "v1".into(),
                path: "guestbook".into(),
                directory: Default::default(),
                raw: Default::default(),
            },
            auto_sync: Some(AutoSync::default()),
            sync_request: None,
            refusals: Vec::new(),
            refresh: None,
            manifest_generate_paths: None,
            sources: Vec::new(),
            ..AppSpec::default()
        };
        content.specs.insert(key.clone(), spec.clone().into());
        published.publish(content.clone(), vec![], true);
        let t = targets.target(&key).expect("resolved by name");
        assert_eq!(t.spec, spec, "the app's spec, by key");
        assert_eq!(t.cluster.id, "uid-1");
        assert_eq!(t.cluster.server, "https://prod.example");
        assert_eq!(t.cluster.credentials, token);
        assert_eq!(
            targets.target(&AppKey::new("argocd", "lost")),
            None,
            "unresolved"
        );
        let lost = targets
            .unresolved(&AppKey::new("argocd", "lost"))
            .expect("known, and resolving to no cluster");
        assert_eq!(lost.app.name, "lost");
        assert_eq!(
            lost.reason,
            "error getting cluster by server \"https://nowhere\": rpc error: code = NotFound \
             desc = cluster \"https://nowhere\" not found"
        );
        assert_eq!(targets.unresolved(&key), None, "it resolves");

        // A new spec is seen at the next revision; without one, the default spec.
        let v2 = AppSpec {
            source: AppSource {
                target_revision: "v2".into(),
                ..spec.source.clone()
            },
            ..spec
        };
        content.specs.insert(key.clone(), v2.clone().into());
        published.publish(content.clone(), vec![], true);
        assert_eq!(targets.target(&key).expect("still there").spec, v2);
        content.specs.clear();
        published.publish(content.clone(), vec![], true);
        assert_eq!(
            targets.target(&key).expect("still there").spec,
            AppSpec::default()
        );

        // The next revision is seen: the app is gone.
        content.apps.remove(0);
        published.publish(content, vec![], true);
        assert_eq!(targets.target(&key), None);
    }

    #[test]
    fn a_clusters_apps_come_from_the_index_by_cluster_and_follow_revisions() {
        let published = Published::new();
        let targets = InventoryTargets::new(published.subscribe());
        assert!(
            targets.apps_of_cluster("uid-1").is_empty(),
            "empty inventory"
        );
        let mut content = InventoryContent {
            clusters: vec![
                Cluster::new("uid-1", "https://one.example"),
                Cluster::new("uid-2", "https://two.example"),
            ],
            apps: vec![
                App::to_server("argocd", "b", "https://one.example"),
                App::to_server("argocd", "c", "https://two.example"),
                App::to_server("argocd", "a", "https://one.example"),
                App::to_server("argocd", "lost", "https://nowhere"),
            ],
            ..InventoryContent::default()
        };
        published.publish(content.clone(), vec![], true);
        let keys = |names: &[&str]| -> Vec<AppKey> {
            names.iter().map(|n| AppKey::new("argocd", n)).collect()
        };
        assert_eq!(
            targets.apps_of_cluster("uid-1"),
            keys(&["a", "b"]),
            "sorted"
        );
        assert_eq!(targets.apps_of_cluster("uid-2"), keys(&["c"]));
        assert!(targets.apps_of_cluster("nowhere").is_empty());
        // An app moved to the other cluster is listed there from the next revision on.
        content.apps[0] = App::to_server("argocd", "b", "https://two.example");
        published.publish(content, vec![], true);
        assert_eq!(targets.apps_of_cluster("uid-1"), keys(&["a"]));
        assert_eq!(targets.apps_of_cluster("uid-2"), keys(&["b", "c"]));
    }
}
