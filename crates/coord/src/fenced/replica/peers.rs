//! What this replica saw of the other holders' renewals, for metrics: for every shard
//! another holder has not released, when this replica first saw its record's current
//! version (on its own clock: the same reading its [`crate::lease::LeaseObserver`]
//! judges the lease by) and how many clusters the assignment in force gives it. A reader
//! compares that with its own time to tell a holder that missed a renewal — its clusters
//! at risk, acted on by nobody — long before the lease expires.
//!
//! Clusters are counted per shard once per assignment version (the assignment may hold
//! tens of thousands of clusters; listings come several times a second).

use std::collections::BTreeMap;

use super::Replica;
use super::seen::View;
use crate::lease::{Mono, Verdict};

/// Another holder's shard lease as last seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerLease {
    /// The shard.
    pub shard: u32,
    /// When this replica first saw the record's current version.
    pub changed: Mono,
    /// Clusters the assignment in force gives the shard.
    pub clusters: u64,
}

/// The peers' leases of the last listing, and the cluster counts of the assignment.
#[derive(Debug, Default)]
pub(super) struct Peers {
    leases: Vec<PeerLease>,
    /// Assignment version → clusters per shard.
    counts: Option<(u64, BTreeMap<u32, u64>)>,
}

impl Peers {
    /// Notes a decoded listing asked for at `asked`; `own` is this replica's shard.
    pub(super) fn note(&mut self, view: &View, own: Option<u32>, asked: Mono) {
        if let Some((version, doc)) = &view.assignment
            && self.counts.as_ref().is_none_or(|(v, _)| v != version)
        {
            let mut counts = BTreeMap::new();
            for shard in doc.clusters.values() {
                *counts.entry(*shard).or_insert(0) += 1;
            }
            self.counts = Some((*version, counts));
        }
        let counts = self.counts.as_ref().map(|(_, c)| c);
        self.leases = view
            .shards
            .iter()
            .filter(|(n, s)| Some(**n) != own && !s.record.released)
            .map(|(&shard, s)| {
                let (Verdict::Live { unchanged_for } | Verdict::Expired { unchanged_for }) =
                    s.verdict;
                PeerLease {
                    shard,
                    changed: Mono(asked.0.saturating_sub(unchanged_for)),
                    clusters: counts.and_then(|c| c.get(&shard)).copied().unwrap_or(0),
                }
            })
            .collect();
    }
}

impl Replica {
    /// The other holders' unreleased shard leases as of the last listing.
    pub fn peer_leases(&self) -> &[PeerLease] {
        &self.peers.leases
    }
}
