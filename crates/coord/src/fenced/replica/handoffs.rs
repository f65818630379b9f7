//! Which holders a cluster's start waits for: the handover barrier, cluster by cluster.
//!
//! A replica may start a cluster the applied generation gives its shard only once nobody
//! else can still act on it. Any holder that has acknowledged a generation has stopped
//! every cluster that generation did not give it, and starts only what the generations it
//! applies give it. So if this replica applied generations `base..=G` one after another
//! (each committed generation is above the one it replaced, so consecutive numbers mean
//! nothing was committed between them), a cluster that sat on this shard throughout them
//! is safe to start once every holder acknowledged `base`; and a cluster that moved within
//! them waits, beyond that, only for the holders of the shards it left to acknowledge the
//! generation that took it from each (or to have released, or let expire, their lease).
//!
//! The rule used to be that every live holder acknowledge `G` itself. That made a crashed
//! holder's orphaned clusters, which no one acts on, wait for every other cluster moved in
//! the same generation, or in a later one committed before they started, to stop — a whole
//! drain of work in flight, twice over when the crashed replica came back and took its
//! clusters home (simulation seed 779,547,789,007 of the scaling configuration: 7.8 s
//! without an owner against a 7.75 s bound).
//!
//! Once a holder lets a cluster go, it never acts on it again under an older generation: a
//! holder whose lease lapsed stopped everything at its deadline, and whatever it writes to
//! come back is newer than the listing that judged it gone, so the listings it acts on
//! carry the newer generation too. An entry satisfied once is therefore dropped.
//!
//! A split cluster's slices (`slicing.rs`) count as their cluster here: a slice that
//! moves, or a slice of a new count, waits for every shard any unit of its cluster left,
//! so the owner of an app's old unit has let it go before the owner of its new unit starts.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use fleetshard_core::placement::slices::UnitId;

use super::seen::View;
use crate::fenced::records::AssignmentDoc;

/// The cluster a unit is (part of): the barrier's key.
pub(super) fn cluster_of(unit: &str) -> &str {
    UnitId::parse(unit).cluster
}

/// The handover barrier's memory of the generations this replica applied.
#[derive(Debug, Default)]
pub(super) struct Handoffs {
    /// The last generation applied, which the next one is compared with.
    applied: Option<Arc<AssignmentDoc>>,
    /// The first generation of the unbroken run that ends with `applied`: every holder
    /// acknowledges it before anything starts.
    base: u64,
    /// Per cluster that moved within the run (any of its units): the shards it left, each with the generation
    /// that took it from there (the latest, when it left one twice).
    left: BTreeMap<String, Vec<(u32, u64)>>,
    /// Per cluster still waiting: the holders (identity, incarnation) of shards it left
    /// that let it go only by losing their lease (dead, paused, cut off).
    orphaned_by: BTreeMap<String, BTreeSet<(String, u64)>>,
    /// Holders whose clusters this replica started after their lease expired: the
    /// failovers it performed without taking their shard.
    failed_over: BTreeSet<(String, u64)>,
}

impl Handoffs {
    /// This replica applied `doc`, a generation above the last one it applied.
    pub(super) fn applied(&mut self, doc: &Arc<AssignmentDoc>) {
        match self.applied.as_deref() {
            Some(previous) if doc.generation == previous.generation + 1 => {
                for (unit, &was) in &previous.clusters {
                    if doc.clusters.get(unit) == Some(&was) {
                        continue;
                    }
                    let left = self.left.entry(cluster_of(unit).to_owned()).or_default();
                    match left.iter_mut().find(|(shard, _)| *shard == was) {
                        Some(entry) => entry.1 = doc.generation,
                        None => left.push((was, doc.generation)),
                    }
                }
            }
            _ => {
                self.base = doc.generation;
                self.left.clear();
                self.orphaned_by.clear();
            }
        }
        self.applied = Some(doc.clone());
    }

    /// Whether every holder but `me`'s (shard) has acknowledged the run's first generation.
    pub(super) fn base_acknowledged(&self, view: &View, me: u32) -> bool {
        view.acknowledged(self.base, Some(me))
    }

    /// Whether every shard `cluster` left within the run has let it go: its holder
    /// acknowledged the generation that took it away, released its lease or lost it (by
    /// this replica's observation). Entries found so are forgotten. The caller checks
    /// [`Handoffs::base_acknowledged`] too.
    pub(super) fn let_go(&mut self, view: &View, unit: &str, me: u32) -> bool {
        let cluster = cluster_of(unit);
        let Some(left) = self.left.get_mut(cluster) else {
            return true;
        };
        let mut orphaned = Vec::new();
        left.retain(|&(shard, generation)| {
            if shard == me || !view.shard_let_go(shard, generation) {
                return shard != me;
            }
            if let Some(s) = view.shards.get(&shard)
                && !s.record.released
                && !s.verdict.is_live()
                && s.record.acked < generation
            {
                orphaned.push((s.record.holder.clone(), s.record.incarnation));
            }
            false
        });
        let done = left.is_empty();
        let mut orphaned_by = self.orphaned_by.remove(cluster).unwrap_or_default();
        orphaned_by.extend(orphaned);
        if done {
            self.left.remove(cluster);
            self.failed_over.extend(orphaned_by);
        } else if !orphaned_by.is_empty() {
            self.orphaned_by.insert(cluster.to_owned(), orphaned_by);
        }
        done
    }

    /// How many holders' clusters this replica started after their lease expired (each
    /// holder incarnation counted once): failovers it performed by receiving a dead
    /// holder's clusters rather than its shard.
    pub(super) fn failovers(&self) -> u64 {
        self.failed_over.len() as u64
    }
}

#[cfg(test)]
mod tests;
