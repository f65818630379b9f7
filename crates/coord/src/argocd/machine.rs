//! One replica of Argo CD-compatible heartbeat mode, as a state machine shaped like fenced
//! mode's [`crate::fenced::Replica`]: [`ArgoReplica`] takes what the replica reads of the
//! mapping ([`ArgoReplica::step`]), its own timers ([`ArgoReplica::tick`]), the outcome of
//! its writes ([`ArgoReplica::on_write`]), the replica count
//! ([`ArgoReplica::on_replicas`]), the end of a cluster's work
//! ([`ArgoReplica::on_stopped`]) and shutdown ([`ArgoReplica::shutdown`]), each with this
//! process's monotonic time ([`Mono`]), and returns what to do, in order ([`Action`]: stop
//! clusters, write the map with compare-and-swap, read it, start clusters). No I/O, no clock,
//! no channel, no randomness but a seeded jitter: [`crate::argocd_runner`] reads the clocks
//! and the store and carries the actions out, and the deterministic simulation drives the
//! same machine over a simulated store.
//!
//! The wall clock appears only as a value passed to [`ArgoReplica::step`], written as
//! `HeartbeatTime` for Argo CD's readers; it is never compared with anything (G6).
//!
//! # Cadence
//!
//! Every heartbeat `H` (never from a probe: W14) a tick asks for a read ([`Action::Read`])
//! and the read that follows runs one claim round, whose result is written with
//! compare-and-swap on the version read (`Absent` when the map does not exist: W19). One
//! write is in flight at a time. Conflicts and store errors are retried after a capped,
//! jittered, exponential backoff (W17). A replica that holds nothing also claims as soon as a
//! read shows a free entry, and asks for a read exactly when an entry it watches turns stale.
//!
//! # Which clusters a replica acts on
//!
//! The replica count `r` comes from the caller ([`ArgoReplica::on_replicas`]; W10: a change
//! redistributes at once). Holding shard `s`, the replica acts on the clusters Argo CD's
//! controller-level distribution
//! ([`ArgoControllerAssignment`](fleetshard_core::argo::ArgoControllerAssignment), the
//! configured algorithm)
//! gives `s` among `r` — and, while the map it last read has another length `m` (a replica
//! with another count wrote it), only on those that `m` gives `s` too. Stops never wait.
//!
//! # Safety without a barrier (what Argo CD's format allows)
//!
//! Argo CD's map has no fencing token and no acknowledgement, so "nobody else acts on a
//! cluster I start" can only rest on timing. With `S` = stale-after (3H):
//!
//! - **Holder validity.** A holder acts only until `V = S − H` (2H) after *sending* its last
//!   heartbeat write that the store confirmed (like [`crate::lease::HeldLease`]). Observers
//!   take an entry over only after seeing its content unchanged for more than `S` on their
//!   own monotonic clock ([`ChangeObserver`]), and they cannot have seen the content before
//!   it was sent. So a crashed, partitioned or paused holder has stopped `H` before anyone may
//!   take over, as long as every clock's rate is within `ρ = (S − V)/(S + V)` (20 %) of real
//!   time ([`ArgoConfig::drift_tolerance`]). A paused process finds its deadline passed on
//!   waking and stops before anything else; its stops carry `lapsed_at`.
//! - **Start delay.** A cluster this replica gains is started at once only on the two paths
//!   where the previous owner is known to have stopped: a *stale takeover* (by the argument
//!   above) and a *graceful release* this replica saw happen (the entry went from held to
//!   free: a replica frees its entry only after its stops are reported done,
//!   [`ArgoReplica::on_stopped`]) — and only if the count and the map's length have been
//!   stable for `D` on this replica's clock, so that the shard's clusters are the same set
//!   the previous holder had. Every other gain (a fresh or just-extended map, a count change,
//!   a regained entry after a lapse) waits `D = S`: any previous owner either re-read the map
//!   and stopped (it reads at least every `H`), or could not confirm a heartbeat since the
//!   change (a write confirmed after the change was based on a read that showed it) and so
//!   lapsed `V < D` after it.
//!
//! What this does not guarantee: clock *rates* off by more than 20 %; a previous owner that
//! is not this machine (an Argo CD controller sharing the map applies its own rules,
//! W11/W12; mixing is unsafe); replicas given different counts for longer than `D` (their
//! maps disagree, each acts only on clusters both counts give it, and gained clusters wait
//! until the counts agree, so liveness suffers, not safety). `docs/argocd-compatibility.md`
//! states the same. Length changes that come and go between two reads of one replica are
//! covered: replicas learn a new count at different moments, so one shrinks the map and
//! another, still at the old count, extends it again, and a replica that missed the shorter
//! map sees a free entry where its holder was. A release therefore frees the entry keeping
//! the holder's last heartbeat, and only a free entry with a heartbeat counts as a release
//! seen; one the map gained (or a repair freed) has none, and its clusters wait `D` (the
//! simulation saw the overlap this prevents in about one run in 200 with count changes).
//!
//! # Coverage
//!
//! A holder that crashes, pauses or loses the store is replaced by a live replica without a
//! shard once its entry has been unchanged for `S` on that replica's clock, counted from
//! when it saw the last change (at most `H` late: it reads on every heartbeat); a replica
//! that comes back under its own identity before that refreshes its entry and waits `D = S`;
//! a count change delays the moved clusters by `D`. So while a replica without a shard is
//! live, every cluster has an acting owner again within `(2S + H)/(1 − ρ)` of real time plus
//! a few store round trips after any single failure or count change; a graceful shutdown
//! hands over at once when the taker has seen the shape stable for `D`. The simulation
//! checks the bound and no overlap at every event (`sim/argocd.rs`).
//!
//! The steps live beside this file: `map` (reading a listing: decoding, ages, graceful
//! releases and shape changes seen), `round` (the claim round, the release, and the
//! outcomes of their writes), `work` (which clusters the held shard means, starts and
//! stops).

mod config;
mod map;
mod round;
mod work;

use self::round::Backoff;

pub use config::{ArgoConfig, ArgoConfigError};

use std::collections::{BTreeMap, BTreeSet};

use fleetshard_core::argo::{ArgoPrepared, ArgoShard};
use fleetshard_core::{App, Cluster};

use super::{ChangeObserver, ClaimStatus, ShardEntry, WallTime};
use crate::lease::Mono;
use crate::store::{Listing, Precondition, StoreError};

/// Identifies a write whose outcome [`ArgoReplica::on_write`] must be told.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ticket(pub u64);

/// What the driver must do, in the order given: stops, then writes, then a read, then starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Stop acting on this cluster now, and report with [`ArgoReplica::on_stopped`] once
    /// nothing runs on it any more: until then this replica does not give its entry up.
    Stop {
        /// The cluster.
        cluster: String,
        /// The shard held when it stopped (for a stop after a lapse or a lost entry: the
        /// shard last held).
        shard: Option<u32>,
        /// For a stop because the holder's validity ended: when it ended, which is when
        /// ownership ended although the driver hears of it now (a process paused past its
        /// deadline). `None`: the stop happens now.
        lapsed_at: Option<Mono>,
    },
    /// Write the map; report the outcome with the ticket.
    Write {
        /// For [`ArgoReplica::on_write`].
        ticket: Ticket,
        /// The store key ([`ArgoConfig::key`]).
        key: String,
        /// The map in Argo CD's format.
        value: Vec<u8>,
        /// Compare-and-swap on the version read (`Absent`: the map did not exist).
        pre: Precondition,
    },
    /// Read the map now (once a read already under way has returned) and pass the result
    /// to [`ArgoReplica::step`].
    Read,
    /// Start acting on this cluster.
    Start {
        /// The cluster.
        cluster: String,
        /// The shard it belongs to.
        shard: u32,
    },
}

/// The mapping as last read (or written by us), at its version (`None`: absent).
#[derive(Debug, Clone)]
struct MapView {
    entries: Vec<ShardEntry>,
    version: Option<u64>,
}

/// What a write in flight is for.
#[derive(Debug, Clone)]
enum Purpose {
    /// A claim round's result: a claim or a heartbeat.
    Claim {
        shard: Option<u32>,
        entries: Vec<ShardEntry>,
        /// The claim took a stale entry, or one this replica saw released gracefully.
        known_stopped: bool,
        /// The claim took a stale entry: a failover, once confirmed.
        stale_takeover: bool,
    },
    /// Shutdown: this replica's entry freed.
    Release,
}

/// The one write this replica has out (or holds back until its stops are done).
#[derive(Debug, Clone)]
struct InFlight {
    ticket: Ticket,
    /// When it was sent; `None` while it is held back because it gives our entry up and a
    /// stopped cluster's work has not ended yet.
    sent: Option<Mono>,
    purpose: Purpose,
    value: Vec<u8>,
    pre: Precondition,
}

/// When this replica must do something by itself.
#[derive(Debug, Clone)]
struct Timers {
    /// The next heartbeat: a read and a claim round.
    next_heartbeat: Mono,
    /// The next read runs a claim round even while holding.
    heartbeat_due: bool,
    /// A read is due at (backoff after a conflict or a store error).
    read_at: Option<Mono>,
    /// An entry held by someone else turns stale then (a replica without a shard).
    stale_check: Option<Mono>,
}

/// What the status page shows besides the protocol state.
#[derive(Debug, Clone, Default)]
struct Stats {
    claim: Option<ClaimStatus>,
    map_error: Option<String>,
    last_store_error: Option<String>,
    store_errors: u64,
    handovers: u64,
    failovers: u64,
    writes: u64,
    listed: bool,
}

/// The actions of one input, collected in the order they must be carried out.
#[derive(Debug, Default)]
struct Out {
    stops: Vec<Action>,
    writes: Vec<Action>,
    read: bool,
    starts: Vec<Action>,
}

impl Out {
    fn into_actions(self) -> Vec<Action> {
        let mut v = self.stops;
        v.extend(self.writes);
        if self.read {
            v.push(Action::Read);
        }
        v.extend(self.starts);
        v
    }
}

/// One replica's protocol state (module docs for the rules).
#[derive(Debug)]
pub struct ArgoReplica {
    cfg: ArgoConfig,
    clusters: Vec<Cluster>,
    prepared: ArgoPrepared,
    /// Replica count → Argo CD's shard for each cluster.
    assignments: BTreeMap<u32, Vec<ArgoShard>>,
    /// The clusters of the last (shard, count, map length) asked for.
    owned: Option<((u32, u32, u32), BTreeSet<String>)>,
    count: u32,
    observer: ChangeObserver,
    map: Option<MapView>,
    /// The last map decoded, by version: an unchanged map is not decoded again.
    decoded: Option<(u64, Vec<ShardEntry>)>,
    /// When the count or the map's length last changed.
    stable_since: Mono,
    /// Entries this replica saw go from held (by another) to free: graceful releases.
    freed: BTreeSet<u32>,
    held: Option<u32>,
    valid_until: Option<Mono>,
    last_shard: Option<u32>,
    /// The next recompute may start the held shard's clusters at once (fast path).
    fast_start: bool,
    write: Option<InFlight>,
    next_ticket: u64,
    /// Version of our newest confirmed write: older reads are ignored.
    newest: u64,
    acting: BTreeSet<String>,
    pending: BTreeMap<String, Mono>,
    /// Stopped but not reported done ([`ArgoReplica::on_stopped`]): work may still run.
    draining: BTreeSet<String>,
    timers: Timers,
    backoff: Backoff,
    stats: Stats,
    stopping: bool,
    warnings: Vec<String>,
    last_warnings: Vec<String>,
}

impl ArgoReplica {
    /// A replica that has read nothing yet, acting on its share of `clusters` (`apps` weigh
    /// them for consistent hashing) among `replicas`, created at `now`. Its first
    /// [`ArgoReplica::tick`] asks for a read. The caller validates `cfg`
    /// ([`ArgoConfig::validate`]).
    pub fn new(
        cfg: ArgoConfig,
        clusters: Vec<Cluster>,
        apps: &[App],
        replicas: u32,
        now: Mono,
    ) -> Self {
        ArgoReplica {
            backoff: Backoff {
                conflicts: 0,
                failures: 0,
                rng: fleetshard_util::rng::SplitMix64::new(cfg.jitter_seed),
            },
            cfg,
            clusters,
            prepared: ArgoPrepared::new(apps),
            assignments: BTreeMap::new(),
            owned: None,
            count: replicas,
            observer: ChangeObserver::new(),
            map: None,
            decoded: None,
            stable_since: now,
            freed: BTreeSet::new(),
            held: None,
            valid_until: None,
            last_shard: None,
            fast_start: false,
            write: None,
            next_ticket: 0,
            newest: 0,
            acting: BTreeSet::new(),
            pending: BTreeMap::new(),
            draining: BTreeSet::new(),
            timers: Timers {
                next_heartbeat: now,
                heartbeat_due: false,
                read_at: None,
                stale_check: None,
            },
            stats: Stats::default(),
            stopping: false,
            warnings: Vec::new(),
            last_warnings: Vec::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &ArgoConfig {
        &self.cfg
    }

    /// The shard whose entry carries this identity, as last confirmed or read (its validity
    /// may have ended: [`ArgoReplica::valid_until`]).
    pub fn shard(&self) -> Option<u32> {
        self.held
    }

    /// Until when this replica may act on its shard unless a heartbeat is confirmed (may be
    /// in the past).
    pub fn valid_until(&self) -> Option<Mono> {
        self.held.and(self.valid_until)
    }

    /// Whether this replica holds a shard whose validity has not ended at `now`.
    pub fn is_valid(&self, now: Mono) -> bool {
        self.valid_until().is_some_and(|u| now < u)
    }

    /// The clusters this replica may act on at `now`: those started, while its validity
    /// lasts. A worker checks this before every action on a cluster.
    pub fn acting(&self, now: Mono) -> impl Iterator<Item = &str> {
        let valid = self.is_valid(now);
        self.acting
            .iter()
            .filter(move |_| valid)
            .map(String::as_str)
    }

    /// The clusters started and not stopped (whatever the validity).
    pub fn started(&self) -> impl Iterator<Item = &str> {
        self.acting.iter().map(String::as_str)
    }

    /// How many gained clusters wait for the start delay.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// The replica count in use.
    pub fn replicas(&self) -> u32 {
        self.count
    }

    /// The last claim round's answer.
    pub fn claim_status(&self) -> Option<&ClaimStatus> {
        self.stats.claim.as_ref()
    }

    /// Why the map could not be decoded (naming the key), while it cannot.
    pub fn map_error(&self) -> Option<&str> {
        self.stats.map_error.as_deref()
    }

    /// The last store error (conflicts excluded).
    pub fn last_store_error(&self) -> Option<&str> {
        self.stats.last_store_error.as_deref()
    }

    /// Store errors so far (reads, writes, watches).
    pub fn store_errors(&self) -> u64 {
        self.stats.store_errors
    }

    /// Clusters started so far.
    pub fn handovers(&self) -> u64 {
        self.stats.handovers
    }

    /// Claim and heartbeat writes the store confirmed.
    pub fn writes(&self) -> u64 {
        self.stats.writes
    }

    /// Whether a read has been stepped at least once.
    pub fn listed(&self) -> bool {
        self.stats.listed
    }

    /// Whether [`ArgoReplica::shutdown`] was called.
    pub fn is_stopping(&self) -> bool {
        self.stopping
    }

    /// Whether every stop has been reported done.
    pub fn all_stopped(&self) -> bool {
        self.draining.is_empty()
    }

    /// The clusters whose stops have not been reported done.
    pub fn draining(&self) -> impl Iterator<Item = &String> {
        self.draining.iter()
    }

    /// Whether a stopping replica is done: every stop reported done, nothing in flight, and
    /// no entry of its own left in the map it knows (freed, lost, or never held). A replica
    /// that lost its entry still waits for its stops: its work may be running.
    pub fn is_released(&self) -> bool {
        self.stopping
            && self.draining.is_empty()
            && self.write.is_none()
            && self.release_entries().is_none()
    }

    /// Problems seen since the last call (claim warnings, an undecodable map, a lost entry),
    /// one line each.
    pub fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    /// The next instant at which [`ArgoReplica::tick`] has something to do without any
    /// input: the heartbeat, a retry, a delayed start, the validity ending while acting, an
    /// entry turning stale.
    pub fn next_wake(&self) -> Option<Mono> {
        let deadline = self
            .valid_until
            .filter(|_| !self.acting.is_empty() || !self.pending.is_empty());
        let heartbeat = (!self.stopping).then_some(self.timers.next_heartbeat);
        [
            heartbeat,
            deadline,
            self.pending.values().min().copied(),
            self.timers.stale_check,
            self.timers.read_at,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// The timers: the heartbeat (a read, then a claim round), retries after backoff, an
    /// entry turning stale, the validity ending, delayed starts. A driver calls this at
    /// [`ArgoReplica::next_wake`] (calling it earlier does no harm).
    pub fn tick(&mut self, now: Mono) -> Vec<Action> {
        let mut out = Out::default();
        self.expire(now, &mut out);
        if !self.stopping && now >= self.timers.next_heartbeat {
            self.timers.heartbeat_due = true;
            self.timers.next_heartbeat = now.after(self.cfg.heartbeat);
            out.read = true;
        }
        if self.timers.stale_check.is_some_and(|t| t <= now) {
            self.timers.stale_check = None;
            out.read = true;
        }
        if self.timers.read_at.is_some_and(|t| t <= now) {
            self.timers.read_at = None;
            out.read = true;
        }
        self.recompute(now, &mut out);
        out.into_actions()
    }

    /// A read of the map (the listing of [`ArgoConfig::key`]) or why it failed: the ages of
    /// the entries, graceful releases and shape changes seen, whether our entry is still
    /// ours, and a claim round if one is due. `wall` is written as `HeartbeatTime` if the
    /// round writes; it is never compared with anything.
    pub fn step(
        &mut self,
        now: Mono,
        wall: WallTime,
        read: Result<Listing, StoreError>,
    ) -> Vec<Action> {
        let mut out = Out::default();
        self.expire(now, &mut out);
        match read {
            Ok(listing) => {
                self.on_listing(listing, now, wall, &mut out);
                // While stopping, a read (after a conflict or an error) retries the release.
                self.send_release(now, &mut out);
            }
            Err(e) => self.store_error(&e, now),
        }
        self.recompute(now, &mut out);
        out.into_actions()
    }

    /// A store error outside a read or a write (the change notification failed): counted,
    /// and a read follows after the backoff.
    pub fn on_store_error(&mut self, error: &StoreError, now: Mono) -> Vec<Action> {
        let mut out = Out::default();
        self.expire(now, &mut out);
        self.store_error(error, now);
        self.recompute(now, &mut out);
        out.into_actions()
    }

    /// The replica count changed (W10): stop what the new count takes away at once, and
    /// claim with the new count at the next read (asked for now), not at the next heartbeat.
    pub fn on_replicas(&mut self, replicas: u32, now: Mono) -> Vec<Action> {
        let mut out = Out::default();
        self.expire(now, &mut out);
        if replicas != self.count {
            self.count = replicas;
            self.changed_shape(now);
            self.timers.heartbeat_due = true;
            out.read = true;
        }
        self.recompute(now, &mut out);
        out.into_actions()
    }

    /// The driver reports that nothing runs on `cluster` any more (see [`Action::Stop`]). A
    /// write that gives our entry up and was held back for it goes out now.
    pub fn on_stopped(&mut self, cluster: &str, now: Mono) -> Vec<Action> {
        let mut out = Out::default();
        self.draining.remove(cluster);
        if self.draining.is_empty() {
            if self.stopping {
                self.send_release(now, &mut out);
            } else {
                self.send_held_back(now, &mut out);
            }
        }
        out.into_actions()
    }

    /// Graceful shutdown (SIGTERM): stop every cluster at once, then, once the stops are
    /// reported done and no write is in flight, free our entry with compare-and-swap
    /// (re-reading after a conflict) so that a replica that sees the release takes the entry
    /// and starts at once. The driver keeps feeding inputs until
    /// [`ArgoReplica::is_released`] (or its own timeout). From this call on the replica acts
    /// on nothing and claims nothing.
    pub fn shutdown(&mut self, now: Mono) -> Vec<Action> {
        let mut out = Out::default();
        self.expire(now, &mut out);
        self.stopping = true;
        if self.write.as_ref().is_some_and(|w| w.sent.is_none()) {
            // A held-back write gave our entry up: the release does it instead.
            self.write = None;
        }
        self.recompute(now, &mut out);
        self.send_release(now, &mut out);
        out.into_actions()
    }

    fn store_error(&mut self, e: &StoreError, now: Mono) {
        self.stats.store_errors += 1;
        self.backoff.failures += 1;
        self.stats.last_store_error = Some(e.to_string());
        self.read_after_backoff(now);
    }

    fn read_after_backoff(&mut self, now: Mono) {
        let at = now.after(self.backoff.next(self.cfg.heartbeat / 4));
        self.timers.read_at = Some(self.timers.read_at.map_or(at, |t| t.min(at)));
    }

    /// The count or the map's length changed: every gain waits the start delay from now,
    /// and releases seen before mean nothing about the new shards.
    fn changed_shape(&mut self, now: Mono) {
        self.stable_since = now;
        self.freed.clear();
    }

    fn ticket(&mut self) -> Ticket {
        self.next_ticket += 1;
        Ticket(self.next_ticket)
    }

    fn warn_once(&mut self, warnings: Vec<String>) {
        if warnings != self.last_warnings {
            self.warnings.extend(warnings.iter().cloned());
            self.last_warnings = warnings;
        }
    }
}

#[cfg(test)]
mod tests;
