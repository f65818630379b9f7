//! The fleet as the distribution engine sees it: clusters, applications, and how an
//! application's destination resolves to a cluster.

use std::collections::BTreeMap;

use rustc_hash::{FxHashMap, FxHashSet};

/// Label that carries a cluster's (or a replica's) availability zone, as in Kubernetes.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
/// Label that carries a cluster's region, as in Kubernetes.
pub const REGION_LABEL: &str = "topology.kubernetes.io/region";

/// One managed Kubernetes cluster.
///
/// Mirrors what Argo CD reads from a cluster Secret: `id` is the Secret's `metadata.uid`
/// (empty for the built-in in-cluster entry), `server` is `data.server` with every trailing
/// `/` removed (see [`normalize_server`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Cluster {
    /// Stable identity: the cluster Secret's `metadata.uid`.
    pub id: String,
    /// Human name (`data.name`).
    pub name: String,
    /// API server URL, normalised with [`normalize_server`].
    pub server: String,
    /// Pinned shard (`data.shard`), as parsed; may be out of range or negative, which the
    /// algorithms handle (Argo CD) or report (fleetshard placement).
    pub shard: Option<i64>,
    /// Labels, including [`ZONE_LABEL`] and [`REGION_LABEL`] when known.
    pub labels: BTreeMap<String, String>,
    /// `argocd.argoproj.io/skip-reconcile` is true: no shard manages this cluster.
    pub skip_reconcile: bool,
    /// Configured load weight; overrides the application count when set.
    pub weight: Option<u64>,
}

impl Cluster {
    /// A cluster with the given id and server and nothing else set.
    pub fn new(id: impl Into<String>, server: impl Into<String>) -> Self {
        let server = server.into();
        Cluster {
            id: id.into(),
            name: String::new(),
            server: normalize_server(&server).to_owned(),
            ..Cluster::default()
        }
    }

    /// The cluster's zone label, if any.
    pub fn zone(&self) -> Option<&str> {
        self.labels.get(ZONE_LABEL).map(String::as_str)
    }
}

/// Normalises a server URL the way Argo CD does: every trailing `/` is removed.
pub fn normalize_server(server: &str) -> &str {
    server.trim_end_matches('/')
}

/// Where an application deploys to: a cluster by server URL or by name, and a namespace.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Destination {
    /// `spec.destination.server`, exactly as written (Argo CD compares it raw).
    pub server: Option<String>,
    /// `spec.destination.name`.
    pub name: Option<String>,
    /// `spec.destination.namespace`.
    pub namespace: Option<String>,
}

/// One Argo CD Application as the distribution engine sees it: its identity and where it
/// deploys. What GitOps reads of it (source, sync policy, operation) is not part of the
/// model: the layers that read it keep it beside, keyed by namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct App {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `spec.project`.
    pub project: String,
    /// `spec.destination`.
    pub destination: Destination,
}

impl App {
    /// An application in `namespace/name` deploying to `server`.
    pub fn to_server(namespace: &str, name: &str, server: &str) -> Self {
        App {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            destination: Destination {
                server: Some(server.to_owned()),
                ..Destination::default()
            },
            ..App::default()
        }
    }
}

/// A set of clusters and the applications that target them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Fleet {
    /// Clusters, in input order.
    pub clusters: Vec<Cluster>,
    /// Applications, in input order.
    pub apps: Vec<App>,
}

/// A shard (one replica's slot) as placement sees it: where it runs and how much it can take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardSpec {
    /// The replica's zone ([`ZONE_LABEL`] of its node), when known.
    pub zone: Option<String>,
    /// Relative capacity (e.g. CPU cores); a shard's fair share of the load is proportional
    /// to it. At least 1.
    pub capacity: u32,
}

impl Default for ShardSpec {
    fn default() -> Self {
        ShardSpec {
            zone: None,
            capacity: 1,
        }
    }
}

/// Resolves application destinations to clusters, by normalised server or by name.
///
/// This is fleetshard's resolution (Argo CD's load counting compares the raw
/// `destination.server` and ignores `destination.name`; see W5 in `docs/glossary.md`).
#[derive(Debug)]
pub struct DestinationIndex<'a> {
    by_server: FxHashMap<&'a str, usize>,
    by_name: FxHashMap<&'a str, usize>,
}

impl<'a> DestinationIndex<'a> {
    /// Indexes `clusters`; on duplicates the first cluster wins (duplicates are reported by
    /// [`Fleet::problems`]).
    pub fn new(clusters: &'a [Cluster]) -> Self {
        let mut by_server = FxHashMap::with_capacity_and_hasher(clusters.len(), Default::default());
        let mut by_name = FxHashMap::with_capacity_and_hasher(clusters.len(), Default::default());
        for (i, c) in clusters.iter().enumerate() {
            by_server.entry(c.server.as_str()).or_insert(i);
            if !c.name.is_empty() {
                by_name.entry(c.name.as_str()).or_insert(i);
            }
        }
        DestinationIndex { by_server, by_name }
    }

    /// The index of the cluster `dest` points at: the server wins when both are set, as in
    /// Argo CD.
    pub fn resolve(&self, dest: &Destination) -> Option<usize> {
        match (&dest.server, &dest.name) {
            (Some(server), _) => self.by_server.get(normalize_server(server)).copied(),
            (None, Some(name)) => self.by_name.get(name.as_str()).copied(),
            (None, None) => None,
        }
    }
}

/// Something wrong with a fleet that the engine works around but the operator must see.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FleetProblem {
    /// Two clusters share a `metadata.uid`.
    #[error("clusters #{first} and #{second} share id {id:?}")]
    DuplicateClusterId {
        /// The shared id.
        id: String,
        /// Index of the first cluster.
        first: usize,
        /// Index of the later cluster.
        second: usize,
    },
    /// Two clusters share a server URL (Argo CD keeps only the later one).
    #[error("clusters #{first} and #{second} share server {server:?}")]
    DuplicateServer {
        /// The shared normalised server.
        server: String,
        /// Index of the first cluster.
        first: usize,
        /// Index of the later cluster.
        second: usize,
    },
    /// Two applications share namespace and name.
    #[error("applications #{first} and #{second} are both {namespace}/{name}")]
    DuplicateApp {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// Index of the first app.
        first: usize,
        /// Index of the later app.
        second: usize,
    },
    /// An application's destination matches no cluster.
    #[error("application {namespace}/{name}: destination matches no cluster")]
    UnresolvedDestination {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
    },
}

impl Fleet {
    /// Problems the operator should see: duplicates and unresolved destinations.
    pub fn problems(&self) -> Vec<FleetProblem> {
        let mut out = Vec::new();
        let mut ids: FxHashMap<&str, usize> = FxHashMap::default();
        let mut servers: FxHashMap<&str, usize> = FxHashMap::default();
        for (i, c) in self.clusters.iter().enumerate() {
            if let Some(&first) = ids.get(c.id.as_str()) {
                out.push(FleetProblem::DuplicateClusterId {
                    id: c.id.clone(),
                    first,
                    second: i,
                });
            } else {
                ids.insert(&c.id, i);
            }
            if let Some(&first) = servers.get(c.server.as_str()) {
                out.push(FleetProblem::DuplicateServer {
                    server: c.server.clone(),
                    first,
                    second: i,
                });
            } else {
                servers.insert(&c.server, i);
            }
        }
        let mut apps: FxHashMap<(&str, &str), usize> = FxHashMap::default();
        let index = DestinationIndex::new(&self.clusters);
        for (i, a) in self.apps.iter().enumerate() {
            let key = (a.namespace.as_str(), a.name.as_str());
            if let Some(&first) = apps.get(&key) {
                out.push(FleetProblem::DuplicateApp {
                    namespace: a.namespace.clone(),
                    name: a.name.clone(),
                    first,
                    second: i,
                });
            } else {
                apps.insert(key, i);
            }
            if index.resolve(&a.destination).is_none() {
                out.push(FleetProblem::UnresolvedDestination {
                    namespace: a.namespace.clone(),
                    name: a.name.clone(),
                });
            }
        }
        out
    }

    /// Number of applications per cluster (same order as `clusters`), resolving
    /// destinations by normalised server or name. Apps are keyed by namespace and name; a
    /// duplicate key counts once.
    pub fn app_counts(&self) -> Vec<u64> {
        app_counts(&self.clusters, &self.apps)
    }

    /// The load of each cluster: its configured weight, or else its application count.
    pub fn loads(&self) -> Vec<u64> {
        loads(&self.clusters, &self.apps)
    }
}

/// [`Fleet::app_counts`] for clusters and apps held apart (e.g. shared by an inventory).
pub fn app_counts(clusters: &[Cluster], apps: &[App]) -> Vec<u64> {
    let mut counts = vec![0u64; clusters.len()];
    for_each_resolved_app(clusters, apps, |i, _| counts[i] += 1);
    counts
}

/// Calls `f(cluster index, app)` for every application that resolves to a cluster, by
/// normalised server or name; a duplicate namespace/name key is seen once (the first).
pub fn for_each_resolved_app<'a>(
    clusters: &[Cluster],
    apps: &'a [App],
    mut f: impl FnMut(usize, &'a App),
) {
    let index = DestinationIndex::new(clusters);
    let mut seen = FxHashSet::with_capacity_and_hasher(apps.len(), Default::default());
    for a in apps {
        if !seen.insert((a.namespace.as_str(), a.name.as_str())) {
            continue;
        }
        if let Some(i) = index.resolve(&a.destination) {
            f(i, a);
        }
    }
}

/// [`Fleet::loads`] for clusters and apps held apart.
pub fn loads(clusters: &[Cluster], apps: &[App]) -> Vec<u64> {
    app_counts(clusters, apps)
        .into_iter()
        .zip(clusters)
        .map(|(apps, c)| c.weight.unwrap_or(apps))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_normalisation_strips_every_trailing_slash() {
        assert_eq!(normalize_server("https://a.example//"), "https://a.example");
        assert_eq!(Cluster::new("1", "https://a/").server, "https://a");
    }

    #[test]
    fn destinations_resolve_by_server_then_name() {
        let mut a = Cluster::new("1", "https://a");
        a.name = "alpha".into();
        let b = Cluster::new("2", "https://b");
        let fleet = Fleet {
            clusters: vec![a, b],
            apps: vec![
                App::to_server("ns", "x", "https://a/"),
                App {
                    name: "y".into(),
                    destination: Destination {
                        name: Some("alpha".into()),
                        ..Default::default()
                    },
                    ..Default::default()
                },
                App::to_server("ns", "z", "https://nowhere"),
                App::to_server("ns", "x", "https://b"),
            ],
        };
        assert_eq!(fleet.app_counts(), vec![2, 0], "duplicate ns/x counts once");
        let problems = fleet.problems();
        assert!(
            problems.iter().any(
                |p| matches!(p, FleetProblem::UnresolvedDestination { name, .. } if name == "z")
            )
        );
        assert!(
            problems
                .iter()
                .any(|p| matches!(p, FleetProblem::DuplicateApp { name, .. } if name == "x"))
        );
    }

    #[test]
    fn weight_overrides_app_count() {
        let mut c = Cluster::new("1", "https://a");
        c.weight = Some(7);
        let fleet = Fleet {
            clusters: vec![c],
            apps: vec![App::to_server("n", "a", "https://a")],
        };
        assert_eq!(fleet.loads(), vec![7]);
    }
}
