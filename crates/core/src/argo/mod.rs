//! Argo CD's three cluster distribution algorithms, bit for bit (argo-compat §3–§4; the
//! codes used here are explained in `docs/glossary.md`).
//!
//! Two levels, as upstream:
//! - [`ArgoDistribution`] is the *distribution function* (`GetDistributionFunction`): given a
//!   cluster (or nil, or a cluster that is not in the list) it answers a shard or `-1`.
//!   Unlike upstream, the whole table is computed once, not once per call (W1).
//! - [`ArgoControllerAssignment`] is what the controller actually uses (`ClusterSharding`):
//!   clusters keyed by server, explicit shards `>= replicas` collapsing to 0, and no
//!   function at all for one replica or fewer.
//!
//! The quirks are reproduced on purpose because users compare our numbers with their Argo
//! CD: ring-key collisions, apps keyed by name only, load keyed by the raw destination
//! server, running-total bounds. fleetshard's own placement lives in `crate::placement`.

mod cluster_list;
mod consistent;
mod controller;
mod counts;
mod keys;
mod legacy;
mod ring_table;
mod round_robin;

use rustc_hash::FxHashMap;

use crate::model::{App, Cluster};
use counts::ServerCounts;

pub use cluster_list::{
    ArgoClusterList, IN_CLUSTER_NAME, IN_CLUSTER_SERVER, in_cluster_entry, is_built_in_in_cluster,
};
pub use consistent::{ConsistentHashRing, argo_hash};

pub use controller::ArgoControllerAssignment;
pub use legacy::fnv1a32;

/// A shard number as Argo CD computes it: `-1` means unassigned, and a negative pinned
/// shard passes through unchanged.
pub type ArgoShard = i64;

/// One of Argo CD's distribution algorithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArgoAlgorithm {
    /// FNV-1a 32 of the cluster id modulo replicas.
    Legacy,
    /// Rank in the id-sorted cluster list modulo replicas.
    RoundRobin,
    /// Consistent hashing with bounded loads, weighted by application count.
    ConsistentHashing,
}

/// An algorithm name Argo CD does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown Argo CD sharding algorithm {0:?} (expected legacy, round-robin or consistent-hashing)"
)]
pub struct UnknownAlgorithm(pub String);

impl ArgoAlgorithm {
    /// All three, in upstream's documentation order.
    pub const ALL: [ArgoAlgorithm; 3] = [
        ArgoAlgorithm::Legacy,
        ArgoAlgorithm::RoundRobin,
        ArgoAlgorithm::ConsistentHashing,
    ];

    /// The exact name Argo CD uses (`--sharding-method`).
    pub const fn name(self) -> &'static str {
        match self {
            ArgoAlgorithm::Legacy => "legacy",
            ArgoAlgorithm::RoundRobin => "round-robin",
            ArgoAlgorithm::ConsistentHashing => "consistent-hashing",
        }
    }

    /// Parses an exact, case-sensitive name.
    pub fn parse(name: &str) -> Result<Self, UnknownAlgorithm> {
        Self::ALL
            .into_iter()
            .find(|a| a.name() == name)
            .ok_or_else(|| UnknownAlgorithm(name.to_owned()))
    }

    /// Argo CD's reading of `ARGOCD_CONTROLLER_SHARDING_ALGORITHM`: anything unknown,
    /// including `""`, falls back to legacy, and the caller should warn.
    pub fn from_setting(name: &str) -> (Self, Option<UnknownAlgorithm>) {
        match Self::parse(name) {
            Ok(a) => (a, None),
            Err(e) => (ArgoAlgorithm::Legacy, Some(e)),
        }
    }
}

/// What is handed to a distribution function: Argo passes a `*Cluster`, which may be nil,
/// one of the listed clusters, or another object (a "probe").
#[derive(Debug, Clone, Copy)]
pub enum Probe<'a> {
    /// A nil cluster (an app whose destination could not be resolved).
    Nil,
    /// The cluster at this index of the list the distribution was built from.
    Member(usize),
    /// A cluster object that is not in the list (membership is by identity upstream).
    Stranger(&'a Cluster),
}

/// Argo CD's distribution function for one algorithm and replica count, precomputed for a
/// whole cluster list.
#[derive(Debug)]
pub struct ArgoDistribution<'a> {
    algorithm: ArgoAlgorithm,
    replicas: u32,
    clusters: Vec<&'a Cluster>,
    table: Table<'a>,
}

#[derive(Debug)]
enum Table<'a> {
    /// Legacy needs no table.
    None,
    /// Round-robin: position in the sorted list; the last of equal ids wins.
    Rank(FxHashMap<&'a str, usize>),
    /// Consistent hashing: the shard per position in the list; clusters of equal ids all
    /// have the shard of the last processed of them.
    Shard(Vec<u32>),
}

impl<'a> ArgoDistribution<'a> {
    /// Computes the function for `clusters` (in the order the accessor returns them) and
    /// `apps` (the load source of consistent hashing).
    pub fn new(
        algorithm: ArgoAlgorithm,
        replicas: u32,
        clusters: impl IntoIterator<Item = &'a Cluster>,
        apps: &[App],
    ) -> Self {
        Self::prepared(algorithm, replicas, clusters, &mut ArgoPrepared::new(apps))
    }

    /// As [`ArgoDistribution::new`], with the apps' counts and the rings prepared once for
    /// many computations.
    pub fn prepared(
        algorithm: ArgoAlgorithm,
        replicas: u32,
        clusters: impl IntoIterator<Item = &'a Cluster>,
        prepared: &mut ArgoPrepared,
    ) -> Self {
        let clusters: Vec<&'a Cluster> = clusters.into_iter().collect();
        let table = if replicas == 0 {
            Table::None
        } else {
            match algorithm {
                ArgoAlgorithm::Legacy => Table::None,
                ArgoAlgorithm::RoundRobin => Table::Rank(round_robin::ranks(&clusters)),
                ArgoAlgorithm::ConsistentHashing => {
                    let (ring, app_counts) = prepared.ring_and_counts(replicas);
                    Table::Shard(consistent::place(ring, &clusters, app_counts))
                }
            }
        };
        ArgoDistribution {
            algorithm,
            replicas,
            clusters,
            table,
        }
    }

    /// The algorithm.
    pub fn algorithm(&self) -> ArgoAlgorithm {
        self.algorithm
    }

    /// The replica count the function was built for.
    pub fn replicas(&self) -> u32 {
        self.replicas
    }

    /// The shard the function answers for `probe` (`sharding.go` semantics).
    pub fn shard(&self, probe: Probe<'_>) -> ArgoShard {
        let replicas = i64::from(self.replicas);
        if replicas == 0 {
            return -1;
        }
        let cluster = match probe {
            Probe::Nil => return 0,
            Probe::Member(i) => self.clusters[i],
            Probe::Stranger(c) => c,
        };
        if let Some(pin) = cluster.shard
            && pin < replicas
        {
            return pin;
        }
        match &self.table {
            Table::None => legacy::shard(&cluster.id, self.replicas),
            Table::Rank(ranks) => match ranks.get(cluster.id.as_str()) {
                Some(&rank) => (rank % self.replicas as usize) as i64,
                None => -1,
            },
            Table::Shard(shards) => match probe {
                Probe::Member(i) => i64::from(shards[i]),
                _ => -1,
            },
        }
    }
}

/// Positions in `clusters` sorted by id, bytewise, as upstream's `getSortedClustersList`.
/// Equal ids keep their list order (upstream's sort is unstable; see W28 in
/// `docs/glossary.md`), so they are adjacent, in list order.
fn sorted_by_id(clusters: &[&Cluster]) -> Vec<usize> {
    // The first 8 bytes as a big-endian integer decide almost every comparison of UUIDs
    // without touching the strings; equal prefixes fall back to the full bytes.
    let prefix = |id: &str| {
        let mut word = [0u8; 8];
        let n = id.len().min(8);
        word[..n].copy_from_slice(&id.as_bytes()[..n]);
        u64::from_be_bytes(word)
    };
    let mut keyed: Vec<(u64, usize)> = clusters
        .iter()
        .enumerate()
        .map(|(i, c)| (prefix(&c.id), i))
        .collect();
    keyed.sort_unstable_by(|a, b| {
        a.0.cmp(&b.0)
            .then_with(|| clusters[a.1].id.as_bytes().cmp(clusters[b.1].id.as_bytes()))
            .then(a.1.cmp(&b.1))
    });
    keyed.into_iter().map(|(_, i)| i).collect()
}

/// Application count per raw `spec.destination.server`, over apps keyed by *name only*
/// (the later of two same-named apps wins), exactly as Argo CD counts load (W4, W5).
/// Apps with no server count under `""`.
pub fn argo_app_counts(apps: &[App]) -> FxHashMap<String, u64> {
    ServerCounts::new(apps)
        .iter()
        .map(|(s, n)| (s.to_owned(), n))
        .collect()
}

/// What Argo CD's algorithms need besides the cluster list, prepared once and reused across
/// algorithms and replica counts: the application count per server (Argo CD's counting,
/// [`argo_app_counts`]) and the consistent-hashing ring of each replica count, built on
/// first use.
///
/// Counting apps walks every Application and the ring hashes 1000 keys per shard; both
/// dominate one consistent-hashing computation. A caller that plans many replica counts,
/// or a controller that keeps app counts current from events, should not redo them
/// (upstream redoes both for every cluster, W1/W2).
#[derive(Debug, Clone, Default)]
pub struct ArgoPrepared {
    app_counts: ServerCounts,
    rings: FxHashMap<u32, ConsistentHashRing>,
}

impl ArgoPrepared {
    /// Counts `apps`; rings come later, as needed.
    pub fn new(apps: &[App]) -> Self {
        ArgoPrepared {
            app_counts: ServerCounts::new(apps),
            rings: FxHashMap::default(),
        }
    }

    /// Applications counted for `server` (raw `destination.server`).
    pub fn app_count(&self, server: &str) -> u64 {
        self.app_counts.get(server)
    }

    /// The ring for `replicas`, built on first use.
    pub fn ring(&mut self, replicas: u32) -> &ConsistentHashRing {
        self.ring_and_counts(replicas).0
    }

    fn ring_and_counts(&mut self, replicas: u32) -> (&ConsistentHashRing, &ServerCounts) {
        let ring = self
            .rings
            .entry(replicas)
            .or_insert_with(|| ConsistentHashRing::new(replicas));
        (ring, &self.app_counts)
    }
}

#[cfg(test)]
mod tests;

/// Upstream's `hasShardingUpdates(old, new)`: whether a cluster change makes the controller
/// recompute the distribution.
pub fn has_sharding_updates(old: Option<&Cluster>, new: Option<&Cluster>) -> bool {
    let (Some(old), Some(new)) = (old, new) else {
        return false;
    };
    old.id != new.id || old.server != new.server || old.shard != new.shard
}
