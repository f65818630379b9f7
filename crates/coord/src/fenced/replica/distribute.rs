//! The elected distributor's round: decide the shard count, judge which shards are
//! vacant, place the fleet with the balanced engine, and commit a new generation when
//! anything changed.
//!
//! The placement itself — whole-fleet work: the previous assignment rebuilt, the balanced
//! placement, the comparison with the committed document and the next one encoded — is a
//! [`PlacementJob`]. By default [`Replica::step`] runs it in place; a replica built with
//! [`Replica::place_off_step`] hands it out as [`Action::Place`] instead, so a runner can
//! compute it on another thread while it keeps renewing leases, and takes the result back
//! with [`Replica::on_placed`]. The protocol's decisions stay here: whether to place,
//! whether the result is still wanted (same inputs, still the distributor, when it comes
//! back), and the commit.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use fleetshard_core::placement::hysteresis::{self, Hysteresis, Proposal};
use fleetshard_core::placement::slicing::Split;
use fleetshard_core::placement::vacated::{self, Spread, Unit};
use fleetshard_core::placement::{BalancedPlacer, Placement, PlacementConfig};
use fleetshard_core::{App, Cluster};

use super::capacity::{Advertised, shard_specs};

use super::guard::{DropCheck, DropGuard, keep_dropped};
use super::seen::View;
use super::{
    Action, FleetInput, MAX_SHARDS, Pending, Replica, ShardCount, Unchanged, WritePurpose,
};
use crate::fenced::records::{AssignmentDoc, assignment_key, encode};
use crate::lease::{Mono, Verdict};
use crate::store::Precondition;

/// The distributor's placement of one set of inputs (the committed document, the vacant
/// shards, the shard count, the fleet revision, the shards' zones and capacities): pure, and the costly
/// part of distributing. [`PlacementJob::run`] it over the fleet of
/// [`PlacementJob::fleet_revision`] and give the result to [`Replica::on_placed`].
#[derive(Clone)]
pub struct PlacementJob {
    pub(super) inputs: Unchanged,
    pub(super) config: PlacementConfig,
    /// Keep clusters where they are while measured costs move inside the band
    /// (`hysteresis.rs`); `None` for estimates, which do not wobble.
    hysteresis: Option<Hysteresis>,
    /// The committed document placed from (empty when there is none).
    pub(super) doc: Arc<AssignmentDoc>,
    /// The commit's compare-and-swap: on the document's version, or its absence.
    pre: Precondition,
    /// The highest generation known (last good, applied, acknowledged): the next is above.
    floor: u64,
    /// Write the next document even if it places as the committed one does (the stored
    /// one is missing or unreadable).
    rewrite: bool,
    /// The drop guard (`guard.rs`).
    guard: DropGuard,
    /// How clusters are split into slices (`slicing.rs`); `None`: never.
    pub(super) split: Option<Split>,
}

impl std::fmt::Debug for PlacementJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlacementJob")
            .field("generation", &self.doc.generation)
            .field("shards", &self.inputs.shards)
            .field("vacant", &self.inputs.vacant)
            .field("fleet_revision", &self.inputs.fleet)
            .finish_non_exhaustive()
    }
}

/// Jobs are told apart by their inputs (the same inputs give the same placement).
impl PartialEq for PlacementJob {
    fn eq(&self, other: &Self) -> bool {
        self.inputs == other.inputs
    }
}

impl Eq for PlacementJob {}

/// A [`PlacementJob`]'s result, for [`Replica::on_placed`].
#[derive(Debug)]
pub struct Placed {
    inputs: Unchanged,
    pre: Precondition,
    /// The next document, encoded; `None` when the committed one already says it all.
    next: Option<Vec<u8>>,
    /// What the drop guard did.
    drop: DropCheck,
    /// How a vacant shard's clusters were spread, when one was vacant.
    spread: Option<Spread>,
}

impl Placed {
    /// How a vacant shard's clusters were spread over the survivors (`placement::vacated`),
    /// when a shard was vacant and held clusters.
    pub fn spread(&self) -> Option<&Spread> {
        self.spread.as_ref()
    }
}

impl PlacementJob {
    /// The fleet revision ([`FleetInput::revision`]) whose clusters and loads the job must
    /// be run on.
    pub fn fleet_revision(&self) -> u64 {
        self.inputs.fleet
    }

    /// Places `clusters` (with `loads` and `apps`, the fleet of
    /// [`PlacementJob::fleet_revision`]), cut into slices first when splitting is on, and
    /// compares the result with the committed document: O(N log N), pure.
    pub fn run(&self, clusters: &[Cluster], loads: &[u64], apps: &[App]) -> Placed {
        let doc = &self.doc;
        let cut = self.cut(clusters, loads, apps);
        // What taking each unit over costs, for a failover's spread (estimates: base plus
        // apps), computed only when a shard is vacant.
        let estimates = match &cut {
            None if !self.inputs.vacant.is_empty() => self.config.loads(clusters, apps),
            _ => Vec::new(),
        };
        let (clusters, loads, work) = match &cut {
            Some(cut) => (&cut.clusters[..], &cut.loads[..], &cut.work[..]),
            None => (clusters, loads, &estimates[..]),
        };
        let previous = self.previous_for(clusters);
        let mut placement = BalancedPlacer::new(self.config.clone(), self.inputs.specs.clone())
            .with_vacant(self.inputs.vacant.iter().copied())
            .place(clusters, loads, Some(&previous));
        if let Some(knobs) = self.hysteresis {
            self.hold_in_place(clusters, loads, &mut placement, knobs);
        }
        let spread = self.spread_vacated(clusters, loads, work, &mut placement);
        if let Some(cut) = &cut {
            self.separate(cut, &mut placement);
        }
        let pairs = |of: &[Option<u32>]| -> BTreeMap<String, u32> {
            clusters
                .iter()
                .zip(of)
                .filter_map(|(c, s)| s.map(|s| (c.id.clone(), s)))
                .collect()
        };
        let (mut assigned, mut homes) = (pairs(&placement.shards), pairs(&placement.homes));
        let shards = self.inputs.shards;
        let drop = keep_dropped(
            &self.guard,
            self.inputs.allow_drop,
            doc,
            shards,
            &self.inputs.vacant,
            &mut assigned,
            &mut homes,
        );
        let same =
            !self.rewrite && assigned == doc.clusters && homes == doc.homes && doc.shards == shards;
        let next = (!same).then(|| {
            encode(&AssignmentDoc {
                generation: self.floor + 1,
                shards,
                clusters: assigned,
                homes,
            })
        });
        Placed {
            inputs: self.inputs.clone(),
            pre: self.pre,
            next,
            drop,
            spread,
        }
    }
}

impl PlacementJob {
    /// Hysteresis over the engine's proposal, for what costs alone move: with the shard
    /// count unchanged, a cluster stays on its committed shard unless that shard is beyond
    /// the band and the move pays for its takeover (`placement::hysteresis`). What the
    /// engine moves for other reasons is kept: a pinned cluster, a new one, one whose shard
    /// is vacant or gone, and one displaced from a vacant shard (it goes home). A count
    /// change is placed by the engine alone (a new replica must fill).
    fn hold_in_place(
        &self,
        clusters: &[Cluster],
        loads: &[u64],
        placement: &mut Placement,
        knobs: Hysteresis,
    ) {
        let doc = &self.doc;
        if doc.shards != self.inputs.shards || doc.clusters.is_empty() {
            return;
        }
        let ids: Vec<String> = clusters.iter().map(|c| c.id.clone()).collect();
        let fixed: Vec<bool> = clusters
            .iter()
            .map(|c| {
                let before = doc.clusters.get(&c.id);
                c.shard.is_some()
                    || before.is_none_or(|s| self.inputs.vacant.contains(s))
                    || doc.homes.contains_key(&c.id)
            })
            .collect();
        let previous = doc.clusters.iter().map(|(k, &v)| (k.clone(), v)).collect();
        let proposal = Proposal {
            ids: &ids,
            loads,
            shards: &placement.shards,
            fixed: &fixed,
            targets: &placement.targets,
        };
        placement.shards = hysteresis::hold(&previous, proposal, knobs);
    }
}

impl PlacementJob {
    /// A failover's burst spread: the clusters leaving a vacant shard now go to no
    /// survivor beyond its share of their `work` (`placement::vacated`). Pinned clusters
    /// stay where placement put them.
    fn spread_vacated(
        &self,
        clusters: &[Cluster],
        loads: &[u64],
        work: &[u64],
        placement: &mut Placement,
    ) -> Option<Spread> {
        if self.inputs.vacant.is_empty() || work.len() != clusters.len() {
            return None;
        }
        let units: Vec<Unit<'_>> = clusters
            .iter()
            .zip(loads.iter().zip(work))
            .map(|(c, (&load, &work))| Unit {
                id: &c.id,
                load,
                work,
                vacated: c.shard.is_none()
                    && self
                        .doc
                        .clusters
                        .get(&c.id)
                        .is_some_and(|s| self.inputs.vacant.contains(s)),
            })
            .collect();
        vacated::spread_vacated(placement, &units, &self.inputs.specs, self.config.tolerance)
    }
}

impl Replica {
    /// Hands every placement out as [`Action::Place`] instead of computing it inside
    /// [`Replica::step`]: a runner computes it where it does not hold up lease renewals and
    /// gives the result back with [`Replica::on_placed`]. One placement is out at a time.
    pub fn place_off_step(mut self) -> Self {
        self.off_step = true;
        self
    }

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
        if self.has_pending(|p| matches!(p, Pending::Commit))
            || self.first_generation_waits(view, now)
        {
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
        let shards = self.target_count(view, fleet, now);
        let mine = self.shard(now);
        let vacant: Vec<u32> = (0..shards)
            .filter(|&n| Some(n) != mine && self.is_vacant(view, n, now))
            .collect();
        // Each shard's zone and capacity are its holder's (the last one's, for a vacant
        // shard), unless the operator fixed them.
        let advertised: Vec<Advertised> = (0..shards)
            .map(|n| {
                let record = view.shards.get(&n).map(|s| &s.record);
                Advertised {
                    zone: record.and_then(|r| r.zone.clone()),
                    capacity: record.and_then(|r| r.capacity),
                    held: !vacant.contains(&n),
                }
            })
            .collect();
        let specs = shard_specs(&advertised, &self.cfg.shard_specs);
        let inputs = Unchanged {
            doc_version: version,
            vacant,
            shards,
            fleet: fleet.revision,
            specs,
            allow_drop: self.drop_allowed(now),
        };
        self.wanted = Some(inputs.clone());
        if self.unchanged.as_ref() == Some(&inputs) {
            return;
        }
        if self.placing.is_some() {
            // One placement out at a time: a result for older inputs is dropped when it
            // comes back, and the next step asks again.
            return;
        }
        // Generations only go up, also when the stored one was lost or unreadable: above
        // the last good one, what this replica applied, and what every holder acknowledged.
        let acked = view.shards.values().map(|s| s.record.acked).max();
        let floor = doc.generation.max(self.applied).max(acked.unwrap_or(0));
        let pre = view
            .assignment_version
            .map_or(Precondition::Absent, Precondition::Version);
        let job = PlacementJob {
            inputs,
            config: self.cfg.placement.clone(),
            hysteresis: self.cfg.hysteresis.filter(|_| fleet.measured),
            doc,
            pre,
            floor,
            // A missing or unreadable document is rewritten even if the placement equals
            // the last good one.
            rewrite: view.assignment.is_none() || view.assignment_corrupt,
            guard: self.guard.config,
            split: super::slicing::split_of(&self.cfg),
        };
        if self.off_step {
            self.placing = Some(job.inputs.clone());
            out.push(Action::Place(Box::new(job)));
        } else {
            let placed = job.run(fleet.clusters, fleet.loads, fleet.apps);
            self.take_placement(placed, now, out);
        }
    }

    /// The result of the [`Action::Place`] given out: committed (or found unchanged) if it
    /// is still wanted at `now` — this replica is still the distributor, and its last step
    /// saw the same inputs; otherwise dropped (the next step asks for a new one).
    pub fn on_placed(&mut self, now: Mono, placed: Placed) -> Vec<Action> {
        let mut out = Vec::new();
        if self.placing.as_ref() != Some(&placed.inputs) {
            return out;
        }
        self.placing = None;
        let wanted = !self.stopping
            && self.is_distributor(now)
            && self.wanted.as_ref() == Some(&placed.inputs)
            && !self.has_pending(|p| matches!(p, Pending::Commit));
        if wanted {
            self.take_placement(placed, now, &mut out);
        }
        out
    }

    /// The [`Action::Place`] given out will not come back (it failed): the next step asks
    /// again.
    pub fn on_placement_failed(&mut self) {
        self.placing = None;
    }

    /// Whether a placement is out ([`Action::Place`] given, no result yet).
    pub fn is_placing(&self) -> bool {
        self.placing.is_some()
    }

    fn take_placement(&mut self, placed: Placed, now: Mono, out: &mut Vec<Action>) {
        self.note_drop(placed.drop, now);
        let Some(value) = placed.next else {
            self.unchanged = Some(placed.inputs);
            return;
        };
        let ticket = self.ticket(Pending::Commit);
        out.push(Action::Write {
            ticket,
            purpose: WritePurpose::Commit,
            key: assignment_key(&self.cfg.root),
            value,
            pre: placed.pre,
        });
    }

    /// A shard never held is vacant at once, except while a new fleet's holders are
    /// expected (`cold_start.rs`); one given up is vacant at once when no spare
    /// is waiting, else once this replica has seen it released for the grace (a live spare
    /// claims a released shard with its clusters within milliseconds: a rolling update's
    /// surge pod takes over the leaving pod's clusters in one move, instead of them moving
    /// to the other shards and back); a silent one once this replica has seen it unchanged
    /// for the lease duration plus the grace. That is a function of the observation alone,
    /// so a newly elected distributor judges exactly as the previous one would have (no
    /// grace restarted on election).
    fn is_vacant(&self, view: &View, n: u32, now: Mono) -> bool {
        let silent_for = self.cfg.timing.duration + self.cfg.grace;
        match view.shards.get(&n) {
            None => !self.expecting_holder(n, now),
            Some(s) if s.record.released => {
                let (Verdict::Live { unchanged_for } | Verdict::Expired { unchanged_for }) =
                    s.verdict;
                unchanged_for >= self.cfg.grace || !spare_waiting(view)
            }
            Some(s) => matches!(
                s.verdict,
                Verdict::Expired { unchanged_for } if unchanged_for >= silent_for
            ),
        }
    }

    /// The shard count this generation should have, by the configured policy.
    fn target_count(&self, view: &View, fleet: FleetInput<'_>, now: Mono) -> u32 {
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
                    .filter(|&(&n, _)| !self.is_vacant(view, n, now))
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

/// Whether a live replica holds no shard (its presence record is live and not released):
/// a spare, which claims a released shard at once.
fn spare_waiting(view: &View) -> bool {
    view.presence
        .values()
        .any(|s| !s.record.released && s.verdict.is_live())
}
