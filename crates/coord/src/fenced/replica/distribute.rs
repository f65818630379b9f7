//! The elected distributor's round: decide the shard count, judge which shards are
//! vacant, place the fleet with the balanced engine, and commit a new generation when
//! anything changed.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use fleetshard_core::placement::{BalancedPlacer, PreviousPlacement};
use fleetshard_core::{Assignment, ShardSpec};

use super::seen::View;
use super::{
    Action, FleetInput, MAX_SHARDS, Pending, Replica, ShardCount, Unchanged, WritePurpose,
};
use crate::fenced::records::{AssignmentDoc, assignment_key, encode};
use crate::lease::{Mono, Verdict};
use crate::store::Precondition;

impl Replica {
    /// Places the fleet and commits the next generation if the placement, the homes or the
    /// shard count changed. The same inputs as last time (document version, vacant shards,
    /// count, fleet revision) are known to need nothing and are not recomputed.
    pub(super) fn distribute(
        &mut self,
        view: &View,
        now: Mono,
        fleet: FleetInput<'_>,
        out: &mut Vec<Action>,
    ) {
        if self.has_pending(|p| matches!(p, Pending::Commit)) {
            return;
        }
        // An unreadable assignment is overwritten at its stored version, from the last good
        // one (or from scratch): never with "must not exist", which would conflict forever.
        // One that vanished (a replaced store) is rebuilt from the last good one too.
        let version = view.assignment_version.unwrap_or(0);
        let doc = view
            .assignment
            .as_ref()
            .or(self.last_doc.as_ref())
            .map_or_else(|| Arc::new(AssignmentDoc::default()), |(_, d)| d.clone());
        let shards = self.target_count(view, fleet);
        let mine = self.shard(now);
        let vacant: Vec<u32> = (0..shards)
            .filter(|&n| Some(n) != mine && self.is_vacant(view, n))
            .collect();
        // Each shard's zone is its holder's (the last one's, for a vacant shard).
        let zones: Vec<Option<String>> = (0..shards)
            .map(|n| view.shards.get(&n).and_then(|s| s.record.zone.clone()))
            .collect();
        let inputs = Unchanged {
            doc_version: version,
            vacant: vacant.clone(),
            shards,
            fleet: fleet.revision,
            zones: zones.clone(),
        };
        if self.unchanged.as_ref() == Some(&inputs) {
            return;
        }
        let previous = PreviousPlacement {
            assignment: doc.clusters.iter().map(|(k, &v)| (k.clone(), v)).collect(),
            homes: doc.homes.iter().map(|(k, &v)| (k.clone(), v)).collect(),
            local_zones: Default::default(),
        };
        let specs: Vec<ShardSpec> = zones
            .into_iter()
            .map(|zone| ShardSpec {
                zone,
                ..ShardSpec::default()
            })
            .collect();
        let placement = BalancedPlacer::new(self.cfg.placement.clone(), specs)
            .with_vacant(vacant)
            .place(fleet.clusters, fleet.loads, Some(&previous));
        let clusters = to_map(&placement.assignment(fleet.clusters));
        let homes = to_map(&placement.as_previous(fleet.clusters).homes);
        if view.assignment.is_some()
            && !view.assignment_corrupt
            && clusters == doc.clusters
            && homes == doc.homes
            && doc.shards == shards
        {
            self.unchanged = Some(inputs);
            return;
        }
        // Generations only go up, also when the stored one was lost or unreadable: above
        // the last good one, what this replica applied, and what every holder acknowledged.
        let acked = view.shards.values().map(|s| s.record.acked).max();
        let floor = doc.generation.max(self.applied).max(acked.unwrap_or(0));
        let next = AssignmentDoc {
            generation: floor + 1,
            shards,
            clusters,
            homes,
        };
        let pre = view
            .assignment_version
            .map_or(Precondition::Absent, Precondition::Version);
        let ticket = self.ticket(Pending::Commit);
        out.push(Action::Write {
            ticket,
            purpose: WritePurpose::Commit,
            key: assignment_key(&self.cfg.root),
            value: encode(&next),
            pre,
        });
    }

    /// A shard never held, or given up, is vacant at once; a silent one once this replica
    /// has seen it unchanged for the lease duration plus the grace. That is a function of
    /// the observation alone, so a newly elected distributor judges exactly as the
    /// previous one would have (no grace restarted on election).
    fn is_vacant(&self, view: &View, n: u32) -> bool {
        let silent_for = self.cfg.timing.duration + self.cfg.grace;
        match view.shards.get(&n) {
            None => true,
            Some(s) if s.record.released => true,
            Some(s) => matches!(
                s.verdict,
                Verdict::Expired { unchanged_for } if unchanged_for >= silent_for
            ),
        }
    }

    /// The shard count this generation should have, by the configured policy.
    fn target_count(&self, view: &View, fleet: FleetInput<'_>) -> u32 {
        let committed = view.assignment.as_ref().map(|(_, d)| d.shards);
        let n = match self.cfg.shards {
            ShardCount::Fixed(n) => n,
            ShardCount::Desired { default } => view.desired.unwrap_or(default),
            ShardCount::External { default } => {
                fleet.external_shards.or(committed).unwrap_or(default)
            }
            ShardCount::Auto { min, max } => {
                // Replicas: holders of shards that are not vacant (a silent one may come
                // back within the grace), and live spares.
                let occupied: Vec<(u32, &str)> = view
                    .shards
                    .iter()
                    .filter(|&(&n, _)| !self.is_vacant(view, n))
                    .map(|(&n, s)| (n, s.record.holder.as_str()))
                    .collect();
                let mut replicas: BTreeSet<&str> = occupied.iter().map(|&(_, h)| h).collect();
                replicas.extend(
                    view.presence
                        .values()
                        .filter(|s| !s.record.released && s.verdict.is_live())
                        .map(|s| s.record.holder.as_str()),
                );
                let highest = occupied.iter().map(|&(n, _)| n + 1).max().unwrap_or(0);
                (replicas.len() as u32).max(highest).clamp(min, max)
            }
        };
        n.clamp(1, MAX_SHARDS)
    }
}

fn to_map(a: &Assignment) -> BTreeMap<String, u32> {
    a.iter().map(|(k, v)| (k.to_owned(), v)).collect()
}
