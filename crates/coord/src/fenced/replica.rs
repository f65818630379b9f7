//! One replica of fenced lease mode, as a state machine: [`Replica::step`] takes what the
//! replica sees of the store and its monotonic time and returns what to do, in order
//! (stop clusters, write records, start clusters); [`Replica::on_write`] takes the outcome
//! of a write. No I/O, no clock, no randomness here.
//!
//! The steps live beside this file, one concept each: `seen` (decoding and judging a
//! listing), `leases` (claiming, renewing and releasing the shard, the role, the
//! presence), `count` (shard count policies), `distribute` (the distributor's round),
//! `handover` (applying a generation, the start barrier), `forget` (dead replicas'
//! presence records), `cold_start` (a new fleet's shards expected while holders start),
//! `slicing` (a costly cluster split into slices), `input` (the fleet placed).

mod action;
mod capacity;
mod cold_start;
mod count;
mod distribute;
mod forget;
mod guard;
mod handoffs;
mod handover;
mod input;
mod leases;
mod peers;
mod publish;
mod role;
mod seen;
mod slicing;
#[cfg(test)]
mod tests;

pub use action::{Action, Ticket, WritePurpose};
pub use capacity::{MAX_CAPACITY, MAX_CAPACITY_RATIO};
pub use count::{MAX_SHARDS, ShardCount, ShardCountError};
pub use distribute::{Placed, PlacementJob};
pub use forget::PRESENCE_GRACE;
pub use guard::{DropGuard, HeldBack};
pub use input::FleetInput;
pub use peers::PeerLease;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use fleetshard_core::ShardSpec;
use fleetshard_core::placement::{PlacementConfig, hysteresis::Hysteresis};

use super::records::{AssignmentDoc, CorruptRecord};
use crate::lease::{HeldLease, LeaseObserver, LeaseTiming, Mono, RenewSent};
use crate::store::{Listing, StoreError};
use handoffs::Handoffs;

/// How one replica is set up.
#[derive(Debug, Clone)]
pub struct ReplicaConfig {
    /// Stable identity (the pod name): a restarted replica prefers its old shard.
    pub identity: String,
    /// This process's incarnation, new at every start (e.g. random).
    pub incarnation: u64,
    /// Key prefix of this fleet's records, ending in `/`.
    pub root: String,
    /// Where the shard count comes from.
    pub shards: ShardCount,
    /// Lease timing (validated by the caller).
    pub timing: LeaseTiming,
    /// How long a shard may lack a live holder before its clusters move to other shards.
    pub grace: Duration,
    /// Placement settings used when this replica is the distributor.
    pub placement: PlacementConfig,
    /// Hysteresis over what costs move (`run --hysteresis`; `None`: the engine's alone).
    pub hysteresis: Option<Hysteresis>,
    /// Split a costly cluster into slices of its apps (`run --split-clusters`, `slicing.rs`).
    pub split_clusters: bool,
    /// This replica's zone, in its shard record (zone-aware placement when all have one).
    pub zone: Option<String>,
    /// This replica's capacity (its CPUs, or `--capacity`), in its shard record (`capacity.rs`).
    pub capacity: u32,
    /// Shard n's capacity (and zone) fixed by the operator (fleet file `shards:`): wins.
    pub shard_specs: Vec<ShardSpec>,
}

#[derive(Debug, Clone)]
struct Held {
    shard: u32,
    lease: HeldLease,
    version: u64,
    beat: u64,
    acked: u64,
    /// When the next renewal is due (`leases::spread_after`).
    renew_at: Mono,
}

#[derive(Debug, Clone)]
struct Distributing {
    /// The separate form's lease (unused while bound).
    lease: HeldLease,
    version: u64,
    beat: u64,
    last_sent: Mono,
    /// The shard the stored record binds the role to (`None`: the separate form).
    bound: Option<u32>,
}

/// The presence record this replica keeps while it holds no shard.
#[derive(Debug, Clone)]
struct Present {
    version: u64,
    beat: u64,
    last_sent: Mono,
}

#[derive(Debug, Clone)]
enum Pending {
    ClaimShard {
        shard: u32,
        sent: RenewSent,
        beat: u64,
        acked: u64,
        /// The shard's last holder let its lease expire (it did not release it).
        takeover: bool,
    },
    RenewShard {
        sent: RenewSent,
        beat: u64,
        acked: u64,
    },
    ClaimDistributor {
        sent: RenewSent,
        beat: u64,
        bound: Option<u32>,
    },
    /// A renew of the separate form, or a change of form (to `bound`).
    RenewDistributor {
        sent: RenewSent,
        beat: u64,
        bound: Option<u32>,
    },
    Presence {
        beat: u64,
        sent: Mono,
        released: bool,
    },
    Commit,
    Inventory,
    ReleaseShard,
    ReleaseDistributor,
    /// Releasing a record of this incarnation on a shard it no longer holds
    /// (`leases.rs`, `release_strays`).
    ReleaseStray {
        shard: u32,
    },
    /// Deleting a dead replica's presence record, or a shard record beyond the count
    /// that nobody will renew again (`forget.rs`).
    Forget {
        key: String,
        sent: Mono,
    },
}

/// What the distributor last found needed no new generation (document version, vacant
/// shards, count, fleet revision, shard specs): the same inputs give the same placement.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Unchanged {
    doc_version: u64,
    vacant: Vec<u32>,
    shards: u32,
    fleet: u64,
    specs: Vec<ShardSpec>,
    /// The drop the guard lets through (it held for the grace).
    allow_drop: Option<u64>,
}

/// One replica's protocol state.
#[derive(Debug)]
pub struct Replica {
    cfg: ReplicaConfig,
    observer: LeaseObserver,
    shard: Option<Held>,
    distributor: Option<Distributing>,
    presence: Option<Present>,
    /// Highest generation applied: everything it took from this replica is stopped.
    applied: u64,
    /// The generations applied in turn, as far as the handover barrier needs (`handoffs.rs`).
    handoffs: Handoffs,
    /// The shard count of the applied generation (or the initial count before one).
    count: u32,
    active: BTreeSet<String>,
    /// Stopped but not yet reported stopped ([`Replica::on_stopped`]): work may still run.
    stopping_clusters: BTreeSet<String>,
    pending: BTreeMap<Ticket, Pending>,
    next_ticket: u64,
    /// Last good assignment seen, with its version: kept when the stored one is
    /// unreadable (G7), and reused without decoding while the version is unchanged.
    last_doc: Option<(u64, Arc<AssignmentDoc>)>,
    /// Last good desired shard count seen: kept when the stored one is unreadable.
    last_desired: Option<u32>,
    /// The distributor's last placement that needed no commit.
    unchanged: Option<Unchanged>,
    /// Placements are handed out ([`Action::Place`]) rather than computed in the step.
    off_step: bool,
    /// The inputs of the placement handed out and not back yet.
    placing: Option<Unchanged>,
    /// The placement inputs the distributor's last step saw.
    wanted: Option<Unchanged>,
    /// Version of our newest confirmed write: listings older than it are stale.
    newest_write: u64,
    /// Shutting down: act on nothing, release what is held.
    stopping: bool,
    /// Shards taken over from a holder whose lease expired.
    takeovers: u64,
    /// When the shard lease lapsed, if it just did: the runner dates the stops with it.
    lapsed: Option<Mono>,
    /// The last listing showed every shard held, live, by someone else.
    spare: bool,
    warnings: Vec<String>,
    /// The records the last listing held that could not be read.
    corrupt: Vec<CorruptRecord>,
    /// The distributor's drop guard (`guard.rs`).
    guard: guard::GuardState,
    /// This replica's inventory as published, and how others' compare (`publish.rs`).
    inventory: publish::InventoryState,
    /// Presence records whose delete the store refused, and when to try again (`forget.rs`).
    refused_deletes: BTreeMap<String, Mono>,
    /// Whether the fleet was starting cold at this replica's first listing (`cold_start.rs`).
    cold_start: cold_start::ColdStart,
    peers: peers::Peers,
}

impl Replica {
    /// A replica that holds nothing yet.
    pub fn new(cfg: ReplicaConfig) -> Self {
        let count = cfg.shards.initial(None, None);
        Replica {
            cfg,
            observer: LeaseObserver::new(),
            shard: None,
            distributor: None,
            presence: None,
            applied: 0,
            handoffs: Handoffs::default(),
            count,
            active: BTreeSet::new(),
            stopping_clusters: BTreeSet::new(),
            pending: BTreeMap::new(),
            next_ticket: 0,
            last_doc: None,
            last_desired: None,
            unchanged: None,
            off_step: false,
            placing: None,
            wanted: None,
            newest_write: 0,
            stopping: false,
            takeovers: 0,
            lapsed: None,
            spare: false,
            warnings: Vec::new(),
            corrupt: Vec::new(),
            guard: guard::GuardState::default(),
            inventory: publish::InventoryState::default(),
            refused_deletes: BTreeMap::new(),
            cold_start: cold_start::ColdStart::default(),
            peers: peers::Peers::default(),
        }
    }

    /// The shard held, if the lease is valid at `now`.
    pub fn shard(&self, now: Mono) -> Option<u32> {
        if self.stopping {
            return None;
        }
        self.shard
            .as_ref()
            .filter(|h| h.lease.is_valid(now))
            .map(|h| h.shard)
    }

    /// When the shard lease lapses unless a renew is confirmed first (`None`: no shard held
    /// at `now`).
    pub fn shard_valid_until(&self, now: Mono) -> Option<Mono> {
        self.shard(now)?;
        self.shard.as_ref()?.lease.valid_until()
    }

    /// Whether this replica holds no shard because the last listing showed every shard
    /// held, live and unreleased, by someone else, and its presence record is written (the
    /// distributor counts it) — a spare by design, as opposed to one that has not claimed
    /// a free shard yet.
    pub fn is_spare(&self) -> bool {
        self.spare
    }

    /// When the distributor role lapses unless a renew (of its record, or of the shard it
    /// is bound to) is confirmed first (`None`: not the distributor at `now`).
    pub fn distributor_valid_until(&self, now: Mono) -> Option<Mono> {
        if !self.is_distributor(now) {
            return None;
        }
        self.role_valid_until()
    }

    /// Whether this replica holds the distributor role at `now`.
    pub fn is_distributor(&self, now: Mono) -> bool {
        !self.stopping && self.role_valid(now)
    }

    /// The shard the held distributor role is bound to (`None`: not the distributor, or
    /// the role is on its separate, renewed record because a live replica has not announced
    /// the bound form).
    pub fn distributor_bound_to(&self, now: Mono) -> Option<u32> {
        self.distributor
            .as_ref()
            .filter(|_| self.is_distributor(now))?
            .bound
    }

    /// The clusters this replica may act on at `now`: those started, while its lease is
    /// valid. A worker checks this before every action on a cluster.
    pub fn acting(&self, now: Mono) -> impl Iterator<Item = &str> {
        let valid = self.shard(now).is_some();
        self.active
            .iter()
            .filter(move |_| valid)
            .map(String::as_str)
    }

    /// The highest assignment generation applied.
    pub fn applied_generation(&self) -> u64 {
        self.applied
    }

    /// When the shard lease lapsed, if the actions just returned stop clusters because it
    /// did (ownership ended then, although the caller may notice later: a process paused
    /// past its deadline). Cleared by the call.
    pub fn take_lapse(&mut self) -> Option<Mono> {
        self.lapsed.take()
    }

    /// How many failovers this replica performed: shards it claimed from a holder whose
    /// lease expired, and holders (each incarnation once) whose clusters it started after
    /// their lease expired and the distributor moved them here (no spare, or none yet).
    pub fn takeovers(&self) -> u64 {
        self.takeovers + self.handoffs.failovers()
    }

    /// The shard count this replica claims among: the applied generation's.
    pub fn shard_count(&self) -> u32 {
        self.count
    }

    /// The records of the last listing that could not be read, with their keys and reasons
    /// (a degraded store: `status`, readiness and metrics show them).
    pub fn corrupt_records(&self) -> &[CorruptRecord] {
        &self.corrupt
    }

    /// Problems seen since the last call (corrupt records, …), one line each.
    pub fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    /// One round: judge leases, apply the committed assignment, claim or renew, distribute
    /// if elected, start what is safe to start. `view` is a listing of `root`, or `None`
    /// when the store cannot be reached (then only local deadlines are enforced).
    pub fn step(
        &mut self,
        now: Mono,
        view: Option<&Listing>,
        fleet: FleetInput<'_>,
    ) -> Vec<Action> {
        self.step_listed(now, now, view, fleet)
    }

    /// [`Replica::step`] with a listing asked for at `asked` (at most `now`): its leases
    /// are judged as of then, so a reply that came back late (delayed, or this process
    /// paused while it was in flight) never makes a record look older than the store
    /// showed it. The runner and the simulation step this way.
    pub fn step_listed(
        &mut self,
        now: Mono,
        asked: Mono,
        view: Option<&Listing>,
        fleet: FleetInput<'_>,
    ) -> Vec<Action> {
        let asked = asked.min(now);
        let mut out = self.tick(now);
        // A listing older than our last confirmed write teaches nothing (stale records).
        let Some(view) = view.filter(|v| v.revision >= self.newest_write) else {
            return out;
        };
        let seen = self.decode(view, asked, now);
        self.note_cold_start(&seen, now);
        self.check_ownership(&seen, &mut out);
        if self.stopping {
            self.send_releases(&mut out);
            return out;
        }
        self.apply(&seen, fleet, &mut out);
        // A spare by design only once its presence record is written: until then the
        // distributor cannot count it, and would not wait for it to take a released shard
        // (a rolling update stops the old pod as soon as its replacement is ready).
        self.spare =
            self.shard.is_none() && self.presence.is_some() && self.all_held_by_others(&seen);
        self.release_strays(&seen, &mut out);
        self.claim_or_renew_shard(&seen, now, &mut out);
        self.keep_presence(&seen, now, &mut out);
        self.claim_or_renew_distributor(&seen, now, &mut out);
        if self.is_distributor(now) {
            self.distribute(&seen, now, fleet, &mut out);
            self.forget_dead_records(&seen, now, &mut out);
        } else {
            self.forget_drop();
        }
        self.publish_inventory(&seen, &mut out);
        self.start(&seen, now, &mut out);
        out
    }

    /// Graceful shutdown (SIGTERM): stop every cluster at once, then mark the shard, the
    /// distributor role and the presence record released so others take over without
    /// waiting for the leases to expire. A release is a compare-and-swap like any write, so
    /// it can meet our own in-flight renew; the runner keeps calling [`Replica::step`]
    /// (which retries with the version it sees) until [`Replica::is_released`], for a
    /// second or two at most, then exits. From this call on the replica acts on nothing.
    pub fn release(&mut self) -> Vec<Action> {
        self.stopping = true;
        let mut out = Vec::new();
        self.stop_all(&mut out);
        self.send_releases(&mut out);
        out
    }

    /// The runner reports that nothing runs on `cluster` any more (see [`Action::Stop`]).
    /// The acknowledgement or release this was holding back goes out at the next
    /// [`Replica::tick`] or [`Replica::step`].
    pub fn on_stopped(&mut self, cluster: &str) {
        self.stopping_clusters.remove(cluster);
    }

    /// Whether every stop has been reported done.
    pub fn all_stopped(&self) -> bool {
        self.stopping_clusters.is_empty()
    }

    /// Whether a stopping replica has given everything up (or lost it anyway). A presence
    /// record is not waited for: it only ever counts a spare, and expires by itself.
    pub fn is_released(&self) -> bool {
        self.stopping && self.shard.is_none() && self.distributor.is_none()
    }

    /// What needs no store listing: enforce our own deadlines, and renew what we hold when
    /// due. A runner calls this on its own timer (every few hundred milliseconds), so
    /// renewing never waits for a slow read.
    pub fn tick(&mut self, now: Mono) -> Vec<Action> {
        let mut out = Vec::new();
        self.check_own_leases(now, &mut out);
        if self.stopping {
            // A release held back by stops still running goes out as soon as they end.
            self.send_releases(&mut out);
        } else {
            self.renew_shard(now, &mut out);
            self.renew_distributor(now, &mut out);
        }
        out
    }

    /// The outcome of a write. A conflict is not acted on here: the next listing says
    /// whose record it is.
    pub fn on_write(&mut self, ticket: Ticket, result: Result<u64, StoreError>) {
        let Some(pending) = self.pending.remove(&ticket) else {
            return;
        };
        let timing = self.cfg.timing;
        let Ok(version) = result else {
            match pending {
                // Re-read the record's version from the next listing.
                Pending::Presence { .. } => self.presence = None,
                // A release of the role may have applied (and been acted on): the role is
                // not taken up again. Only a stopping replica releases it again.
                Pending::ReleaseDistributor if !self.stopping => self.distributor = None,
                _ => {}
            }
            return;
        };
        self.newest_write = self.newest_write.max(version);
        match pending {
            Pending::ClaimShard {
                shard,
                sent,
                beat,
                acked,
                takeover,
            } => {
                self.takeovers += u64::from(takeover);
                let mut lease = HeldLease::new();
                lease.confirmed(sent, &timing);
                self.shard = Some(Held {
                    shard,
                    lease,
                    version,
                    beat,
                    acked,
                    renew_at: leases::spread_after(
                        shard,
                        self.count,
                        timing.renew_every,
                        sent.at(),
                    ),
                });
            }
            Pending::RenewShard { sent, beat, acked } => {
                if let Some(h) = &mut self.shard {
                    h.lease.confirmed(sent, &timing);
                    h.version = h.version.max(version);
                    h.beat = h.beat.max(beat);
                    h.acked = h.acked.max(acked);
                }
            }
            Pending::ClaimDistributor { sent, beat, bound } => {
                self.role_claimed(sent, version, beat, bound);
            }
            Pending::RenewDistributor { sent, beat, bound } => {
                if let Some(d) = &mut self.distributor
                    && version >= d.version
                {
                    d.lease.confirmed(sent, &timing);
                    d.version = version;
                    d.beat = d.beat.max(beat);
                    d.bound = bound;
                }
            }
            Pending::Presence {
                beat,
                sent,
                released,
            } => {
                self.presence = (!released).then_some(Present {
                    version,
                    beat,
                    last_sent: sent,
                });
            }
            Pending::ReleaseShard => self.shard = None,
            Pending::ReleaseDistributor => self.distributor = None,
            Pending::Commit
            | Pending::Inventory
            | Pending::Forget { .. }
            | Pending::ReleaseStray { .. } => {}
        }
    }

    fn ticket(&mut self, pending: Pending) -> Ticket {
        self.next_ticket += 1;
        let t = Ticket(self.next_ticket);
        self.pending.insert(t, pending);
        t
    }

    fn has_pending(&self, f: impl Fn(&Pending) -> bool) -> bool {
        self.pending.values().any(f)
    }

    fn is_me(&self, holder: &str, incarnation: u64) -> bool {
        holder == self.cfg.identity && incarnation == self.cfg.incarnation
    }

    /// A lease past its own deadline is gone: stop everything at once.
    fn check_own_leases(&mut self, now: Mono, out: &mut Vec<Action>) {
        if let Some(h) = self.shard.as_ref().filter(|h| !h.lease.is_valid(now)) {
            self.lapsed = h.lease.valid_until();
            self.lose_shard(out);
        }
        if self.distributor.is_some() && !self.role_held(now) {
            self.distributor = None;
        }
    }

    fn lose_shard(&mut self, out: &mut Vec<Action>) {
        self.shard = None;
        self.stop_all(out);
    }

    /// Stops one cluster; it counts as running until [`Replica::on_stopped`].
    fn stop(&mut self, cluster: String, out: &mut Vec<Action>) {
        if self.active.remove(&cluster) {
            self.stopping_clusters.insert(cluster.clone());
            out.push(Action::Stop(cluster));
        }
    }

    fn stop_all(&mut self, out: &mut Vec<Action>) {
        for c in std::mem::take(&mut self.active) {
            self.stopping_clusters.insert(c.clone());
            out.push(Action::Stop(c));
        }
    }
}
