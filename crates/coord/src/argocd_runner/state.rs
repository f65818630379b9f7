//! The state one [`super::ArgoRunner`] task owns, and every decision it makes: what a read
//! or a write's outcome means, when to run a claim round, and which clusters to start and
//! stop (module docs of [`super`] for the rules and why they are safe).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use fleetshard_core::argo::{ArgoControllerAssignment, ArgoPrepared, ArgoShard};
use fleetshard_core::{App, Cluster};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::{ArgoConfig, ArgoStatus, WallClock};
use crate::argocd::{
    ChangeObserver, ClaimRequest, ShardEntry, Warning, decode, encode, get_or_update_shard,
};
use crate::lease::Mono;
use crate::runner::{Ownership, OwnershipChange};
use crate::store::{Listing, Precondition, StoreError};

/// A write for the runner to send.
pub(super) struct Write {
    pub(super) value: Vec<u8>,
    pub(super) pre: Precondition,
}

/// The mapping as last read (or written by us), at its version (`None`: absent).
struct MapView {
    entries: Vec<ShardEntry>,
    version: Option<u64>,
}

/// A write on its way: what it claims and when it was sent.
struct InFlight {
    sent: Instant,
    shard: Option<u32>,
    entries: Vec<ShardEntry>,
    /// The claim took a stale entry, or one this replica saw released gracefully.
    known_stopped: bool,
}

pub(super) struct State {
    pub(super) cfg: ArgoConfig,
    clusters: Vec<Cluster>,
    prepared: ArgoPrepared,
    /// Replica count → Argo CD's shard for each cluster.
    assignments: BTreeMap<u32, Vec<ArgoShard>>,
    count: u32,
    wall: WallClock,
    events: mpsc::UnboundedSender<OwnershipChange>,
    start: Instant,
    observer: ChangeObserver,
    map: Option<MapView>,
    /// When the count or the map's length last changed (this replica's clock).
    stable_since: Instant,
    /// Entries this replica saw go from held (by another) to free: graceful releases.
    freed: BTreeSet<u32>,
    held: Option<u32>,
    valid_until: Option<Instant>,
    last_shard: Option<u32>,
    /// The next recompute may start the held shard's clusters at once (fast path).
    fast_start: bool,
    in_flight: Option<InFlight>,
    outgoing: Option<Write>,
    /// Version of our newest confirmed write: older reads are ignored.
    newest: u64,
    acting: BTreeSet<String>,
    pending: BTreeMap<String, Instant>,
    stale_check: Option<Instant>,
    read_request: Option<Instant>,
    conflicts: u32,
    /// Store errors in a row (reads or writes), for the backoff.
    failures: u32,
    rng: u64,
    last_warnings: Vec<String>,
    pub(super) heartbeat_due: bool,
    pub(super) stats: ArgoStatus,
}

impl State {
    pub(super) fn new(
        cfg: ArgoConfig,
        clusters: Vec<Cluster>,
        apps: &[App],
        count: u32,
        wall: WallClock,
        events: mpsc::UnboundedSender<OwnershipChange>,
    ) -> State {
        let now = Instant::now();
        State {
            rng: cfg.jitter_seed | 1,
            cfg,
            clusters,
            prepared: ArgoPrepared::new(apps),
            assignments: BTreeMap::new(),
            count,
            wall,
            events,
            start: now,
            observer: ChangeObserver::new(),
            map: None,
            stable_since: now,
            freed: BTreeSet::new(),
            held: None,
            valid_until: None,
            last_shard: None,
            fast_start: false,
            in_flight: None,
            outgoing: None,
            newest: 0,
            acting: BTreeSet::new(),
            pending: BTreeMap::new(),
            stale_check: None,
            read_request: None,
            conflicts: 0,
            failures: 0,
            last_warnings: Vec::new(),
            heartbeat_due: false,
            stats: ArgoStatus::default(),
        }
    }

    fn mono(&self) -> Mono {
        Mono(self.start.elapsed())
    }

    pub(super) fn write_in_flight(&self) -> bool {
        self.in_flight.is_some()
    }

    pub(super) fn take_write(&mut self) -> Option<Write> {
        self.outgoing.take()
    }

    pub(super) fn take_read_request(&mut self) -> Option<Instant> {
        self.read_request.take()
    }

    /// Capped exponential backoff with jitter: 25 ms doubling per conflict or store error in
    /// a row, at most H/4, times a factor in [0.5, 1).
    pub(super) fn backoff(&mut self) -> Duration {
        // xorshift64: jitter only, no quality needed.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let streak = (self.conflicts + self.failures).min(8);
        let base = Duration::from_millis(25) * (1u32 << streak);
        let capped = base.min(self.cfg.heartbeat / 4);
        capped.mul_f64(0.5 + (self.rng % 1000) as f64 / 2000.0)
    }

    pub(super) fn store_error(&mut self, e: &StoreError) {
        tracing::warn!(identity = %self.cfg.identity, "{e}");
        self.stats.store_errors += 1;
        self.failures += 1;
        self.stats.last_store_error = Some(e.to_string());
        let at = Instant::now() + self.backoff();
        self.read_request = Some(at);
    }

    /// The next instant something must happen without any input: our validity ending
    /// while acting, a delayed start, an entry turning stale.
    pub(super) fn next_wake(&self) -> Option<Instant> {
        let deadline = self
            .valid_until
            .filter(|_| !self.acting.is_empty() || !self.pending.is_empty());
        [
            deadline,
            self.pending.values().min().copied(),
            self.stale_check,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    pub(super) fn on_wake(&mut self) {
        if self.stale_check.is_some_and(|t| t <= Instant::now()) {
            self.stale_check = None;
            self.read_request = Some(Instant::now());
        }
    }

    pub(super) fn on_replicas(&mut self, n: u32) {
        if n == self.count {
            return;
        }
        tracing::info!(identity = %self.cfg.identity, from = self.count, to = n, "replica count changed");
        self.count = n;
        self.changed_shape();
        // Claim with the new count now (the repaired map is written), not at the next beat.
        self.heartbeat_due = true;
        self.read_request = Some(Instant::now());
    }

    /// The count or the map's length changed: every gain waits the start delay from now,
    /// and releases seen before mean nothing about the new shards.
    fn changed_shape(&mut self) {
        self.stable_since = Instant::now();
        self.freed.clear();
    }

    pub(super) fn on_read(&mut self, r: Result<Listing, StoreError>) {
        let listing = match r {
            Ok(l) => l,
            Err(e) => return self.store_error(&e),
        };
        self.stats.listed = true;
        self.failures = 0;
        if listing.revision < self.newest {
            // Older than our own confirmed write: worthless; read again shortly.
            let at = Instant::now() + self.backoff();
            self.read_request = Some(at);
            return;
        }
        let found = listing.entries.into_iter().find(|e| e.key == self.cfg.key);
        let (entries, version) = match found {
            None => (Vec::new(), None),
            Some(e) => {
                let decoded = std::str::from_utf8(&e.value)
                    .map_err(|err| err.to_string())
                    .and_then(|text| decode(text).map_err(|err| err.to_string()));
                match decoded {
                    Ok(entries) => (entries, Some(e.version)),
                    Err(err) => {
                        // Not overwritten: a person or another tool must look at it. Our
                        // hold runs out with its validity, since no heartbeat is confirmed.
                        let text = format!("{}: cannot decode the shard mapping: {err}", e.key);
                        if self.stats.map_error.as_deref() != Some(&text) {
                            tracing::error!(identity = %self.cfg.identity, "{text}");
                        }
                        self.stats.map_error = Some(text);
                        self.map = None;
                        return;
                    }
                }
            }
        };
        self.stats.map_error = None;
        self.apply_map(entries, version);
        self.maybe_claim();
    }

    /// Takes in a map read (or our own confirmed write): staleness ages, graceful releases
    /// seen, shape changes, and whether our entry is still ours.
    fn apply_map(&mut self, entries: Vec<ShardEntry>, version: Option<u64>) {
        let now = self.mono();
        self.observer.observe(&entries, now);
        let me = self.cfg.identity.clone();
        if let Some(prev) = self.map.take() {
            if prev.entries.len() != entries.len() && version.is_some() {
                self.changed_shape();
            }
            for e in &entries {
                let Ok(n) = u32::try_from(e.shard_number) else {
                    continue;
                };
                // A release is graceful only if its holder left the map: a holder moved
                // by a repair (a duplicate identity) may still be acting.
                let was_held_by_other = prev.entries.iter().any(|p| {
                    p.shard_number == e.shard_number
                        && !p.is_free()
                        && p.controller_name != me
                        && !entries
                            .iter()
                            .any(|n| n.controller_name == p.controller_name)
                });
                if !e.is_free() {
                    self.freed.remove(&n);
                } else if was_held_by_other {
                    self.freed.insert(n);
                }
            }
        }
        if let Some(s) = self.held {
            let mine = entries
                .iter()
                .any(|e| e.shard_number == i64::from(s) && e.controller_name == me);
            if !mine {
                tracing::warn!(identity = %self.cfg.identity, shard = s, "our entry is gone or someone else's: stopping");
                self.held = None;
                self.valid_until = None;
            }
        }
        self.map = Some(MapView { entries, version });
    }

    /// One claim round if due: on the heartbeat (holders), or whenever a replica without a
    /// shard reads the map (it claims a free or stale entry at once).
    fn maybe_claim(&mut self) {
        if self.in_flight.is_some() || self.count == 0 || self.stats.stopping {
            return;
        }
        let Some((entries, version)) = self.map.as_ref().map(|m| (m.entries.clone(), m.version))
        else {
            return;
        };
        if self.held.is_some() && !self.heartbeat_due {
            return;
        }
        let now = self.mono();
        let request = ClaimRequest {
            identity: &self.cfg.identity,
            replicas: self.count,
            pin: self.cfg.pin,
            now: (self.wall)(),
            stale_after: self.cfg.stale_after,
        };
        let observer = &self.observer;
        let outcome =
            match get_or_update_shard(&entries, &request, |e| observer.unchanged_for(e, now)) {
                Ok(o) => o,
                Err(e) => {
                    self.warn_once(vec![e.to_string()]);
                    self.stats.claim = None;
                    self.heartbeat_due = false;
                    return;
                }
            };
        let warnings: Vec<String> = outcome.warnings.iter().map(ToString::to_string).collect();
        self.warn_once(warnings);
        let shard = outcome.shard();
        if self.held.is_some() && shard != self.held {
            // The round gave our entry up (a pinned replica moving to its pin): stop first.
            self.held = None;
            self.valid_until = None;
        }
        let known_stopped = shard.is_some_and(|s| {
            self.freed.contains(&s)
                || outcome
                    .warnings
                    .iter()
                    .any(|w| matches!(w, Warning::StaleTakeover { shard, .. } if *shard == s))
        });
        self.stats.claim = Some(outcome.status);
        self.stale_check = None;
        if shard.is_none() {
            // Wake up exactly when the first entry held by someone else turns stale.
            self.stale_check = entries
                .iter()
                .filter(|e| !e.is_free() && e.controller_name != self.cfg.identity)
                .map(|e| {
                    let left = self
                        .cfg
                        .stale_after
                        .saturating_sub(self.observer.unchanged_for(e, now));
                    Instant::now() + left + Duration::from_millis(1)
                })
                .min();
        }
        if let Some(list) = outcome.write
            && (shard.is_some() || self.heartbeat_due)
        {
            let pre = version.map_or(Precondition::Absent, Precondition::Version);
            self.outgoing = Some(Write {
                value: encode(&list).into_bytes(),
                pre,
            });
            self.in_flight = Some(InFlight {
                sent: Instant::now(),
                shard,
                entries: list,
                known_stopped,
            });
        }
        self.heartbeat_due = false;
    }

    fn warn_once(&mut self, warnings: Vec<String>) {
        if warnings != self.last_warnings {
            for w in &warnings {
                tracing::warn!(identity = %self.cfg.identity, "{w}");
            }
            self.last_warnings = warnings;
        }
    }

    pub(super) fn on_write(&mut self, result: Result<u64, StoreError>) {
        let Some(f) = self.in_flight.take() else {
            return;
        };
        match result {
            Ok(version) => {
                self.conflicts = 0;
                self.failures = 0;
                self.newest = self.newest.max(version);
                self.stats.writes += 1;
                let before = self.held;
                self.apply_map(f.entries, Some(version));
                self.held = f.shard;
                self.valid_until = f.shard.map(|_| f.sent + self.cfg.validity());
                if f.shard.is_some() && f.shard != before {
                    let stable = Instant::now().duration_since(self.stable_since);
                    self.fast_start = f.known_stopped && stable >= self.cfg.start_delay();
                    tracing::info!(identity = %self.cfg.identity, shard = ?f.shard, fast = self.fast_start, "claimed");
                }
            }
            Err(StoreError::Conflict { .. }) => {
                self.conflicts += 1;
                self.heartbeat_due = true;
                let at = Instant::now() + self.backoff();
                self.read_request = Some(at);
            }
            Err(e) => {
                // Applied or not, we cannot tell: the hold is not extended; try again.
                self.heartbeat_due = true;
                self.store_error(&e);
            }
        }
    }

    /// The clusters of shard `s`: Argo CD's controller-level shard among `count`, and among
    /// the map's length too while it differs.
    fn owned(&mut self, s: u32) -> BTreeSet<String> {
        let count = self.count;
        let len = self
            .map
            .as_ref()
            .map_or(0, |m| u32::try_from(m.entries.len()).unwrap_or(u32::MAX));
        let mine = self.shards_for(count).to_vec();
        let other = (len != 0 && len != count).then(|| self.shards_for(len).to_vec());
        let s = i64::from(s);
        self.clusters
            .iter()
            .enumerate()
            .filter(|(i, c)| {
                !c.skip_reconcile && mine[*i] == s && other.as_ref().is_none_or(|o| o[*i] == s)
            })
            .map(|(_, c)| c.id.clone())
            .collect()
    }

    fn shards_for(&mut self, count: u32) -> &[ArgoShard] {
        if !self.assignments.contains_key(&count) {
            let a = ArgoControllerAssignment::compute_prepared(
                self.cfg.algorithm,
                count,
                &self.clusters,
                &mut self.prepared,
            );
            self.assignments.insert(count, a.shards().to_vec());
        }
        &self.assignments[&count]
    }

    /// Brings the clusters acted on in line with what is held now: stops at once, starts at
    /// once on the fast path, otherwise after the start delay.
    pub(super) fn recompute(&mut self) {
        let now = Instant::now();
        let lapsed_at = self.valid_until.filter(|u| *u <= now);
        let desired = match (self.held, self.valid_until) {
            (Some(s), Some(u)) if u > now && self.count > 0 && !self.stats.stopping => {
                self.owned(s)
            }
            _ => BTreeSet::new(),
        };
        let stops: Vec<String> = self.acting.difference(&desired).cloned().collect();
        for c in stops {
            self.acting.remove(&c);
            tracing::info!(identity = %self.cfg.identity, cluster = %c, lapsed = lapsed_at.is_some(), "stopped");
            self.report(Ownership::Stopped(c), lapsed_at);
        }
        self.pending.retain(|c, _| desired.contains(c));
        let delay = self.cfg.start_delay();
        for c in desired {
            if !self.acting.contains(&c) && !self.pending.contains_key(&c) {
                let at = if self.fast_start { now } else { now + delay };
                self.pending.insert(c, at);
            }
        }
        self.fast_start = false;
        let due: Vec<String> = self
            .pending
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(c, _)| c.clone())
            .collect();
        for c in due {
            self.pending.remove(&c);
            self.acting.insert(c.clone());
            self.stats.handovers += 1;
            tracing::info!(identity = %self.cfg.identity, cluster = %c, "started");
            self.report(Ownership::Started(c), None);
        }
    }

    /// Stops everything (shutdown).
    pub(super) fn stop_all(&mut self) {
        self.pending.clear();
        for c in std::mem::take(&mut self.acting) {
            self.report(Ownership::Stopped(c), None);
        }
    }

    /// The write that frees our entry, if the map we know has it as ours.
    pub(super) fn release_write(&self) -> Option<Write> {
        let s = i64::from(self.held?);
        let map = self.map.as_ref()?;
        let version = map.version?;
        let at = map
            .entries
            .iter()
            .position(|e| e.shard_number == s && e.controller_name == self.cfg.identity)?;
        let mut entries = map.entries.clone();
        entries[at] = ShardEntry::free(s);
        Some(Write {
            value: encode(&entries).into_bytes(),
            pre: Precondition::Version(version),
        })
    }

    pub(super) fn released(&mut self) {
        self.held = None;
        self.valid_until = None;
    }

    fn report(&mut self, change: Ownership, lapsed_at: Option<Instant>) {
        if self.held.is_some() {
            self.last_shard = self.held;
        }
        let _ = self.events.send(OwnershipChange {
            identity: self.cfg.identity.clone(),
            change,
            shard: self.held.or(self.last_shard),
            generation: u64::from(self.count),
            lapsed_at,
        });
    }

    pub(super) fn snapshot(&self) -> ArgoStatus {
        ArgoStatus {
            shard: self.held,
            valid_until: self.held.and(self.valid_until),
            acting: self.acting.iter().cloned().collect(),
            pending: self.pending.len(),
            replicas: self.count,
            ..self.stats.clone()
        }
    }
}
