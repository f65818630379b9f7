//! One replica of fenced lease mode, as a state machine: [`Replica::step`] takes what the
//! replica sees of the store and its monotonic time and returns what to do, in order
//! (stop clusters, write records, start clusters); [`Replica::on_write`] takes the outcome
//! of a write. No I/O, no clock, no randomness here.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use fleetshard_core::placement::{BalancedPlacer, PlacementConfig, PreviousPlacement};
use fleetshard_core::{Assignment, Cluster, ShardSpec};

use super::records::{
    AssignmentDoc, CorruptRecord, DistributorRecord, ShardRecord, assignment_key, decode,
    distributor_key, encode, shard_key,
};
use crate::lease::{HeldLease, LeaseObserver, LeaseTiming, Mono, RenewSent, Verdict};

use crate::store::{Listing, Precondition, StoreError};

/// How one replica is set up.
#[derive(Debug, Clone)]
pub struct ReplicaConfig {
    /// Stable identity (the pod name): a restarted replica prefers its old shard.
    pub identity: String,
    /// This process's incarnation, new at every start (e.g. random).
    pub incarnation: u64,
    /// Key prefix of this fleet's records, ending in `/`.
    pub root: String,
    /// Shard count.
    pub shards: u32,
    /// Lease timing (validated by the caller).
    pub timing: LeaseTiming,
    /// How long a shard must have been without a live holder before its clusters move to
    /// other shards (a replica back within it moves nothing).
    pub grace: Duration,
    /// Placement settings used when this replica is the distributor.
    pub placement: PlacementConfig,
}

/// The inventory the distributor places.
#[derive(Debug, Clone, Copy)]
pub struct FleetInput<'a> {
    /// Clusters.
    pub clusters: &'a [Cluster],
    /// Their loads.
    pub loads: &'a [u64],
}

/// Identifies a write whose outcome [`Replica::on_write`] must be told.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ticket(pub u64);

/// What the runner must do, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Stop reconciling this cluster now (before any later action).
    Stop(String),
    /// Write a record; report the outcome with the ticket.
    Write {
        /// For [`Replica::on_write`].
        ticket: Ticket,
        /// Key.
        key: String,
        /// Value.
        value: Vec<u8>,
        /// Compare-and-swap condition.
        pre: Precondition,
    },
    /// Start reconciling this cluster.
    Start(String),
}

#[derive(Debug, Clone)]
struct Held {
    shard: u32,
    lease: HeldLease,
    version: u64,
    beat: u64,
    acked: u64,
    last_sent: Mono,
}

#[derive(Debug, Clone)]
struct Distributing {
    lease: HeldLease,
    version: u64,
    beat: u64,
    last_sent: Mono,
}

#[derive(Debug, Clone)]
enum Pending {
    ClaimShard {
        shard: u32,
        sent: RenewSent,
        record: ShardRecord,
    },
    RenewShard {
        sent: RenewSent,
        record: ShardRecord,
    },
    ClaimDistributor {
        sent: RenewSent,
        beat: u64,
    },
    RenewDistributor {
        sent: RenewSent,
        beat: u64,
    },
    Commit,
    ReleaseShard,
    ReleaseDistributor,
}

/// What a store listing says, decoded.
#[derive(Debug, Default)]
struct Seen {
    shards: Vec<Option<(u64, ShardRecord)>>,
    distributor: Option<(u64, DistributorRecord)>,
    assignment: Option<(u64, AssignmentDoc)>,
    corrupt: Vec<CorruptRecord>,
}

/// One replica's protocol state.
#[derive(Debug)]
pub struct Replica {
    cfg: ReplicaConfig,
    observer: LeaseObserver,
    shard: Option<Held>,
    distributor: Option<Distributing>,
    /// Highest generation applied: everything it took from this replica is stopped.
    applied: u64,
    active: BTreeSet<String>,
    pending: BTreeMap<Ticket, Pending>,
    next_ticket: u64,
    /// Last good assignment seen (kept when the stored one is unreadable).
    last_doc: Option<(u64, AssignmentDoc)>,
    /// Version of our newest confirmed write: listings older than it are stale.
    newest_write: u64,
    /// Shutting down: act on nothing, release what is held.
    stopping: bool,
    /// The last listing showed every shard held, live, by someone else.
    spare: bool,
    warnings: Vec<String>,
}

impl Replica {
    /// A replica that holds nothing yet.
    pub fn new(cfg: ReplicaConfig) -> Self {
        Replica {
            cfg,
            observer: LeaseObserver::new(),
            shard: None,
            distributor: None,
            applied: 0,
            active: BTreeSet::new(),
            pending: BTreeMap::new(),
            next_ticket: 0,
            last_doc: None,
            newest_write: 0,
            stopping: false,
            spare: false,
            warnings: Vec::new(),
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
    /// held, live and unreleased, by someone else — a spare by design, as opposed to one
    /// that has not claimed a free shard yet.
    pub fn is_spare(&self) -> bool {
        self.spare
    }

    /// Whether this replica holds the distributor lease at `now`.
    pub fn is_distributor(&self, now: Mono) -> bool {
        !self.stopping
            && self
                .distributor
                .as_ref()
                .is_some_and(|d| d.lease.is_valid(now))
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
        let mut out = self.tick(now);
        // A listing older than our own last confirmed write would show records as they were
        // before it (a shard we just won as someone else's): it can teach us nothing.
        let Some(view) = view.filter(|v| v.revision >= self.newest_write) else {
            return out;
        };
        let seen = self.decode(view);
        let verdicts = self.observe(&seen, now);
        self.check_ownership(&seen, &mut out);
        self.spare = self.shard.is_none()
            && seen
                .shards
                .iter()
                .zip(&verdicts)
                .all(|(s, v)| match (s, v) {
                    (Some((_, r)), Some(v)) => {
                        !r.released && v.is_live() && !self.is_me(&r.holder, r.incarnation)
                    }
                    _ => false,
                });
        if self.stopping {
            self.send_releases(&mut out);
            return out;
        }
        self.apply(&seen, &mut out);
        self.claim_or_renew_shard(&seen, &verdicts, now, &mut out);
        self.claim_or_renew_distributor(&seen, now, &mut out);
        if self.is_distributor(now) {
            self.distribute(&seen, &verdicts, now, fleet, &mut out);
        }
        self.start(&seen, &verdicts, now, &mut out);
        out
    }

    /// Graceful shutdown (SIGTERM): stop every cluster at once, then mark the shard and the
    /// distributor role released so others take over without waiting for the leases to
    /// expire. A release is a compare-and-swap like any write, so it can meet our own
    /// in-flight renew; the runner keeps calling [`Replica::step`] (which retries with the
    /// version it sees) until [`Replica::is_released`], for a second or two at most, then
    /// exits. From this call on the replica acts on nothing.
    pub fn release(&mut self) -> Vec<Action> {
        self.stopping = true;
        let mut out: Vec<Action> = std::mem::take(&mut self.active)
            .into_iter()
            .map(Action::Stop)
            .collect();
        self.send_releases(&mut out);
        out
    }

    /// Whether a stopping replica has given everything up (or lost it anyway).
    pub fn is_released(&self) -> bool {
        self.stopping && self.shard.is_none() && self.distributor.is_none()
    }

    fn send_releases(&mut self, out: &mut Vec<Action>) {
        let root = self.cfg.root.clone();
        let pending_shard = self
            .pending
            .values()
            .any(|p| matches!(p, Pending::ReleaseShard));
        if let (Some(h), false) = (&self.shard, pending_shard) {
            let record = ShardRecord {
                holder: self.cfg.identity.clone(),
                incarnation: self.cfg.incarnation,
                beat: h.beat + 1,
                acked: self.applied,
                released: true,
            };
            let (key, pre) = (shard_key(&root, h.shard), Precondition::Version(h.version));
            let ticket = self.ticket(Pending::ReleaseShard);
            out.push(Action::Write {
                ticket,
                key,
                value: encode(&record),
                pre,
            });
        }
        let pending_dist = self
            .pending
            .values()
            .any(|p| matches!(p, Pending::ReleaseDistributor));
        if let (Some(d), false) = (&self.distributor, pending_dist) {
            let record = DistributorRecord {
                holder: self.cfg.identity.clone(),
                incarnation: self.cfg.incarnation,
                beat: d.beat + 1,
                released: true,
            };
            let pre = Precondition::Version(d.version);
            let ticket = self.ticket(Pending::ReleaseDistributor);
            out.push(Action::Write {
                ticket,
                key: distributor_key(&root),
                value: encode(&record),
                pre,
            });
        }
    }

    /// What needs no store listing: enforce our own deadlines, and renew what we hold when
    /// due. A runner calls this on its own timer (every few hundred milliseconds), so
    /// renewing never waits for a slow read.
    pub fn tick(&mut self, now: Mono) -> Vec<Action> {
        let mut out = Vec::new();
        self.check_own_leases(now, &mut out);
        if !self.stopping {
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
        let Ok(version) = result else { return };
        self.newest_write = self.newest_write.max(version);
        match pending {
            Pending::ClaimShard {
                shard,
                sent,
                record,
            } => {
                let mut lease = HeldLease::new();
                lease.confirmed(sent, &timing);
                self.shard = Some(Held {
                    shard,
                    lease,
                    version,
                    beat: record.beat,
                    acked: record.acked,
                    last_sent: sent.at(),
                });
            }
            Pending::RenewShard { sent, record } => {
                if let Some(h) = &mut self.shard {
                    h.lease.confirmed(sent, &timing);
                    h.version = h.version.max(version);
                    h.beat = h.beat.max(record.beat);
                    h.acked = h.acked.max(record.acked);
                }
            }
            Pending::ClaimDistributor { sent, beat } => {
                let mut lease = HeldLease::new();
                lease.confirmed(sent, &timing);
                self.distributor = Some(Distributing {
                    lease,
                    version,
                    beat,
                    last_sent: sent.at(),
                });
            }
            Pending::RenewDistributor { sent, beat } => {
                if let Some(d) = &mut self.distributor {
                    d.lease.confirmed(sent, &timing);
                    d.version = d.version.max(version);
                    d.beat = d.beat.max(beat);
                }
            }
            Pending::ReleaseShard => self.shard = None,
            Pending::ReleaseDistributor => self.distributor = None,
            Pending::Commit => {}
        }
    }

    // === the steps ===

    /// A lease past its own deadline is gone: stop everything at once.
    fn check_own_leases(&mut self, now: Mono, out: &mut Vec<Action>) {
        if self.shard.as_ref().is_some_and(|h| !h.lease.is_valid(now)) {
            self.lose_shard(out);
        }
        if self
            .distributor
            .as_ref()
            .is_some_and(|d| !d.lease.is_valid(now))
        {
            self.distributor = None;
        }
    }

    fn lose_shard(&mut self, out: &mut Vec<Action>) {
        self.shard = None;
        out.extend(
            std::mem::take(&mut self.active)
                .into_iter()
                .map(Action::Stop),
        );
    }

    fn decode(&mut self, view: &Listing) -> Seen {
        let root = &self.cfg.root;
        let mut seen = Seen {
            shards: vec![None; self.cfg.shards as usize],
            ..Seen::default()
        };
        let dist_key = distributor_key(root);
        let assign_key = assignment_key(root);
        let shard_prefix = format!("{root}shards/");
        for e in &view.entries {
            if e.key == dist_key {
                match decode(&e.key, &e.value) {
                    Ok(r) => seen.distributor = Some((e.version, r)),
                    Err(c) => seen.corrupt.push(c),
                }
            } else if e.key == assign_key {
                match decode(&e.key, &e.value) {
                    Ok(d) => seen.assignment = Some((e.version, d)),
                    Err(c) => seen.corrupt.push(c),
                }
            } else if let Some(n) = e
                .key
                .strip_prefix(&shard_prefix)
                .and_then(|n| n.parse::<usize>().ok())
            {
                match decode(&e.key, &e.value) {
                    Ok(r) if n < seen.shards.len() => seen.shards[n] = Some((e.version, r)),
                    Ok(_) => {}
                    Err(c) => seen.corrupt.push(c),
                }
            }
        }
        // An unreadable assignment is not obeyed: the last good one stays (G7).
        match &seen.assignment {
            Some(doc) => self.last_doc = Some(doc.clone()),
            None if seen.corrupt.iter().any(|c| c.key == assign_key) => {
                seen.assignment = self.last_doc.clone()
            }
            None => {}
        }
        self.warnings
            .extend(seen.corrupt.iter().map(ToString::to_string));
        seen
    }

    fn observe(&mut self, seen: &Seen, now: Mono) -> Vec<Option<Verdict>> {
        let timing = self.cfg.timing;
        let root = self.cfg.root.clone();
        if let Some((v, _)) = &seen.distributor {
            self.observer
                .observe(&distributor_key(&root), *v, now, &timing);
        }
        (0..self.cfg.shards)
            .map(|n| {
                let key = shard_key(&root, n);
                match &seen.shards[n as usize] {
                    Some((v, _)) => Some(self.observer.observe(&key, *v, now, &timing)),
                    None => {
                        self.observer.forget(&key);
                        None
                    }
                }
            })
            .collect()
    }

    fn is_me(&self, holder: &str, incarnation: u64) -> bool {
        holder == self.cfg.identity && incarnation == self.cfg.incarnation
    }

    /// Our records must still name us. A write whose reply was lost may have applied: the
    /// record is still ours, at a newer version, which we adopt (without extending the
    /// lease: we do not know when it applied).
    fn check_ownership(&mut self, seen: &Seen, out: &mut Vec<Action>) {
        if let Some(h) = &self.shard {
            match &seen.shards[h.shard as usize] {
                Some((v, r)) if self.is_me(&r.holder, r.incarnation) && !r.released => {
                    let v = *v;
                    if let Some(h) = &mut self.shard {
                        h.version = h.version.max(v);
                    }
                }
                _ => self.lose_shard(out),
            }
        }
        if self.distributor.is_some() {
            match &seen.distributor {
                Some((v, r)) if self.is_me(&r.holder, r.incarnation) => {
                    let v = *v;
                    if let Some(d) = &mut self.distributor {
                        d.version = d.version.max(v);
                    }
                }
                _ => self.distributor = None,
            }
        }
    }

    /// Applies a newer generation: stop what it took from us. Only then may we acknowledge
    /// it (the renew that follows carries `applied`).
    fn apply(&mut self, seen: &Seen, out: &mut Vec<Action>) {
        let Some((_, doc)) = &seen.assignment else {
            return;
        };
        if doc.generation <= self.applied {
            return;
        }
        let mine = self.shard.as_ref().map(|h| h.shard);
        let lost: Vec<String> = self
            .active
            .iter()
            .filter(|c| doc.clusters.get(*c).copied() != mine || mine.is_none())
            .cloned()
            .collect();
        for c in lost {
            self.active.remove(&c);
            out.push(Action::Stop(c));
        }
        self.applied = doc.generation;
    }

    fn ticket(&mut self, pending: Pending) -> Ticket {
        self.next_ticket += 1;
        let t = Ticket(self.next_ticket);
        self.pending.insert(t, pending);
        t
    }

    fn claim_or_renew_shard(
        &mut self,
        seen: &Seen,
        verdicts: &[Option<Verdict>],
        now: Mono,
        out: &mut Vec<Action>,
    ) {
        if self.shard.is_some() {
            self.renew_shard(now, out);
            return;
        }
        if self
            .pending
            .values()
            .any(|p| matches!(p, Pending::ClaimShard { .. }))
        {
            return;
        }
        let root = self.cfg.root.clone();
        self.claim_shard(seen, verdicts, now, &root, out);
    }

    /// Renews the held shard when due: every `renew_every`, and at once when there is a
    /// generation to acknowledge. A renew does not wait for a stalled one: both carry the
    /// same compare-and-swap version, so at most one applies, and each confirmed send
    /// extends the lease from its own send time.
    fn renew_shard(&mut self, now: Mono, out: &mut Vec<Action>) {
        let root = self.cfg.root.clone();
        let applied = self.applied;
        let ack_in_flight = self
            .pending
            .values()
            .any(|p| matches!(p, Pending::RenewShard { record, .. } if record.acked >= applied));
        if let Some(h) = &self.shard {
            let due = now.since(h.last_sent) >= self.cfg.timing.renew_every
                || (applied > h.acked && !ack_in_flight);
            if !due {
                return;
            }
            let record = ShardRecord {
                holder: self.cfg.identity.clone(),
                incarnation: self.cfg.incarnation,
                beat: h.beat + 1,
                acked: self.applied,
                released: false,
            };
            let (key, pre) = (shard_key(&root, h.shard), Precondition::Version(h.version));
            if let Some(h) = &mut self.shard {
                h.last_sent = now;
            }
            let ticket = self.ticket(Pending::RenewShard {
                sent: HeldLease::sending(now),
                record: record.clone(),
            });
            out.push(Action::Write {
                ticket,
                key,
                value: encode(&record),
                pre,
            });
        }
    }

    fn claim_shard(
        &mut self,
        seen: &Seen,
        verdicts: &[Option<Verdict>],
        now: Mono,
        root: &str,
        out: &mut Vec<Action>,
    ) {
        // Free shards: never held, released, expired by our own observation, or still naming
        // this very incarnation (our deadline passed but nobody took it: the compare-and-swap
        // on that version proves it, so re-acquiring at once is safe). Our own identity's
        // shard first (a restart keeps its clusters), then the lowest number.
        let free = (0..self.cfg.shards).filter_map(|n| {
            match (&seen.shards[n as usize], verdicts[n as usize]) {
                (None, _) => Some((n, Precondition::Absent, 0, false)),
                (Some((v, r)), Some(verdict))
                    if r.released || !verdict.is_live() || self.is_me(&r.holder, r.incarnation) =>
                {
                    Some((
                        n,
                        Precondition::Version(*v),
                        r.beat,
                        r.holder == self.cfg.identity,
                    ))
                }
                _ => None,
            }
        });
        let Some((n, pre, beat, _)) =
            free.max_by_key(|&(n, _, _, mine)| (mine, std::cmp::Reverse(n)))
        else {
            return;
        };
        let record = ShardRecord {
            holder: self.cfg.identity.clone(),
            incarnation: self.cfg.incarnation,
            beat: beat + 1,
            acked: self.applied,
            released: false,
        };
        let ticket = self.ticket(Pending::ClaimShard {
            shard: n,
            sent: HeldLease::sending(now),
            record: record.clone(),
        });
        out.push(Action::Write {
            ticket,
            key: shard_key(root, n),
            value: encode(&record),
            pre,
        });
    }

    fn claim_or_renew_distributor(&mut self, seen: &Seen, now: Mono, out: &mut Vec<Action>) {
        if self.distributor.is_some() {
            self.renew_distributor(now, out);
            return;
        }
        if self
            .pending
            .values()
            .any(|p| matches!(p, Pending::ClaimDistributor { .. }))
        {
            return;
        }
        let key = distributor_key(&self.cfg.root);
        let (beat, pre) = match &seen.distributor {
            None => (1, Precondition::Absent),
            Some((v, r)) => {
                // Ours already (a claim whose reply was lost): take it back at once, as for
                // shards; otherwise only once expired by our own observation.
                let mine = self.is_me(&r.holder, r.incarnation);
                let live = self
                    .observer
                    .observe(&key, *v, now, &self.cfg.timing)
                    .is_live();
                if live && !mine && !r.released {
                    return;
                }
                (r.beat + 1, Precondition::Version(*v))
            }
        };
        let record = DistributorRecord {
            holder: self.cfg.identity.clone(),
            incarnation: self.cfg.incarnation,
            beat,
            released: false,
        };
        let ticket = self.ticket(Pending::ClaimDistributor {
            sent: HeldLease::sending(now),
            beat,
        });
        out.push(Action::Write {
            ticket,
            key,
            value: encode(&record),
            pre,
        });
    }

    /// Renews the distributor lease when due (not waiting for a stalled renew, as for shards).
    fn renew_distributor(&mut self, now: Mono, out: &mut Vec<Action>) {
        let Some(d) = &mut self.distributor else {
            return;
        };
        if now.since(d.last_sent) < self.cfg.timing.renew_every {
            return;
        }
        d.last_sent = now;
        let (beat, pre) = (d.beat + 1, Precondition::Version(d.version));
        let record = DistributorRecord {
            holder: self.cfg.identity.clone(),
            incarnation: self.cfg.incarnation,
            beat,
            released: false,
        };
        let ticket = self.ticket(Pending::RenewDistributor {
            sent: HeldLease::sending(now),
            beat,
        });
        out.push(Action::Write {
            ticket,
            key: distributor_key(&self.cfg.root),
            value: encode(&record),
            pre,
        });
    }

    /// The elected distributor's round: which shards are held, where clusters go, and a new
    /// generation if anything changed.
    fn distribute(
        &mut self,
        seen: &Seen,
        verdicts: &[Option<Verdict>],
        now: Mono,
        fleet: FleetInput<'_>,
        out: &mut Vec<Action>,
    ) {
        if self.pending.values().any(|p| matches!(p, Pending::Commit)) {
            return;
        }
        let mine = self.shard(now);
        // A shard never held, or given up, is vacant at once; a silent one once this
        // replica has seen it unchanged for the lease duration plus the grace. That is a
        // function of the observation alone, so a newly elected distributor judges exactly
        // as the previous one would have (no grace restarted on election).
        let silent_for = self.cfg.timing.duration + self.cfg.grace;
        let vacant: Vec<u32> = (0..self.cfg.shards)
            .filter(|&n| Some(n) != mine)
            .filter(
                |&n| match (&seen.shards[n as usize], verdicts[n as usize]) {
                    (None, _) => true,
                    (Some((_, r)), _) if r.released => true,
                    (Some(_), Some(Verdict::Expired { unchanged_for })) => {
                        unchanged_for >= silent_for
                    }
                    _ => false,
                },
            )
            .collect();
        let (version, doc) = seen.assignment.clone().unwrap_or_default();
        let previous = PreviousPlacement {
            assignment: doc.clusters.iter().map(|(k, &v)| (k.clone(), v)).collect(),
            homes: doc.homes.iter().map(|(k, &v)| (k.clone(), v)).collect(),
            local_zones: Default::default(),
        };
        let shards = vec![ShardSpec::default(); self.cfg.shards as usize];
        let placement = BalancedPlacer::new(self.cfg.placement.clone(), shards)
            .with_vacant(vacant)
            .place(fleet.clusters, fleet.loads, Some(&previous));
        let clusters: BTreeMap<String, u32> = to_map(&placement.assignment(fleet.clusters));
        let homes: BTreeMap<String, u32> = to_map(&placement.as_previous(fleet.clusters).homes);
        if clusters == doc.clusters && homes == doc.homes && doc.shards == self.cfg.shards {
            return;
        }
        let next = AssignmentDoc {
            generation: doc.generation + 1,
            shards: self.cfg.shards,
            clusters,
            homes,
        };
        let pre = if seen.assignment.is_some() {
            Precondition::Version(version)
        } else {
            Precondition::Absent
        };
        let ticket = self.ticket(Pending::Commit);
        out.push(Action::Write {
            ticket,
            key: assignment_key(&self.cfg.root),
            value: encode(&next),
            pre,
        });
    }

    /// Starts the clusters the applied generation gives us, once every other live holder
    /// has acknowledged it (their old clusters are stopped) — the handover barrier.
    fn start(
        &mut self,
        seen: &Seen,
        verdicts: &[Option<Verdict>],
        now: Mono,
        out: &mut Vec<Action>,
    ) {
        let (Some(me), Some((_, doc))) = (self.shard(now), &seen.assignment) else {
            return;
        };
        if doc.generation != self.applied {
            return;
        }
        let barrier = (0..self.cfg.shards).filter(|&n| n != me).all(|n| {
            match (&seen.shards[n as usize], verdicts[n as usize]) {
                (Some((_, r)), Some(v)) if !r.released && v.is_live() => r.acked >= doc.generation,
                _ => true,
            }
        });
        if !barrier {
            return;
        }
        for (c, _) in doc.clusters.iter().filter(|&(_, &s)| s == me) {
            if self.active.insert(c.clone()) {
                out.push(Action::Start(c.clone()));
            }
        }
    }
}

fn to_map(a: &Assignment) -> BTreeMap<String, u32> {
    a.iter().map(|(k, v)| (k.to_owned(), v)).collect()
}
