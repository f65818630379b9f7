//! The claim round and the release, and the outcomes of their writes.

use fleetshard_util::backoff as util;
use fleetshard_util::rng::SplitMix64;
use std::time::Duration;

use super::{Action, ArgoReplica, InFlight, Out, Purpose, Ticket};
use crate::argocd::{ClaimRequest, ShardEntry, WallTime, Warning, encode, get_or_update_shard};
use crate::lease::Mono;
use crate::store::{Precondition, StoreError};

impl ArgoReplica {
    /// From when a shard this replica gains by a graceful release it saw is started at once
    /// (the fast path of the module docs): once the count and the map's length have been
    /// stable for the start delay. Before that, every gain waits the delay. A replica without
    /// a shard is a useful rolling-update surge pod only from then on, so its readiness
    /// waits for it.
    pub fn fast_takeover_from(&self) -> Mono {
        self.stable_since.after(self.cfg.start_delay())
    }

    /// One claim round if due: on the heartbeat (holders), or whenever a replica without a
    /// shard reads the map (it claims a free or stale entry at once).
    pub(super) fn maybe_claim(&mut self, now: Mono, wall: WallTime, out: &mut Out) {
        if self.write.is_some() || self.count == 0 || self.stopping {
            return;
        }
        let Some((entries, version)) = self.map.as_ref().map(|m| (m.entries.clone(), m.version))
        else {
            return;
        };
        if self.held.is_some() && !self.timers.heartbeat_due {
            return;
        }
        let request = ClaimRequest {
            identity: &self.cfg.identity,
            replicas: self.count,
            pin: self.cfg.pin,
            now: wall,
            stale_after: self.cfg.stale_after,
        };
        let observer = &self.observer;
        let outcome =
            match get_or_update_shard(&entries, &request, |e| observer.unchanged_for(e, now)) {
                Ok(o) => o,
                Err(e) => {
                    self.warn_once(vec![e.to_string()]);
                    self.stats.claim = None;
                    self.timers.heartbeat_due = false;
                    return;
                }
            };
        let warnings: Vec<String> = outcome.warnings.iter().map(ToString::to_string).collect();
        self.warn_once(warnings);
        let shard = outcome.shard();
        let gives_up = self.held.is_some() && shard != self.held;
        if gives_up {
            // The round gave our entry up (a pinned replica moving to its pin): stop first.
            self.held = None;
            self.valid_until = None;
            self.recompute(now, out);
        }
        let stale_takeover = shard.is_some_and(|s| {
            outcome
                .warnings
                .iter()
                .any(|w| matches!(w, Warning::StaleTakeover { shard, .. } if *shard == s))
        });
        let known_stopped = stale_takeover || shard.is_some_and(|s| self.freed.contains(&s));
        self.stats.claim = Some(outcome.status);
        self.timers.stale_check = None;
        if shard.is_none() {
            // Wake up exactly when the first entry held by someone else turns stale.
            self.timers.stale_check = entries
                .iter()
                .filter(|e| !e.is_free() && e.controller_name != self.cfg.identity)
                .map(|e| {
                    let left = self
                        .cfg
                        .stale_after
                        .saturating_sub(self.observer.unchanged_for(e, now));
                    now.after(left + Duration::from_millis(1))
                })
                .min();
        }
        if let Some(list) = outcome.write
            && (shard.is_some() || self.timers.heartbeat_due)
        {
            let pre = version.map_or(Precondition::Absent, Precondition::Version);
            let ticket = self.ticket();
            self.write = Some(InFlight {
                ticket,
                sent: None,
                value: encode(&list).into_bytes(),
                pre,
                purpose: Purpose::Claim {
                    shard,
                    entries: list,
                    known_stopped,
                    stale_takeover,
                },
            });
            // A write that gives our entry up waits until our stops are done.
            if !gives_up || self.draining.is_empty() {
                self.send_held_back(now, out);
            }
        }
        self.timers.heartbeat_due = false;
    }

    /// Sends the write held back, if any.
    pub(super) fn send_held_back(&mut self, now: Mono, out: &mut Out) {
        if let Some(w) = self.write.as_mut().filter(|w| w.sent.is_none()) {
            w.sent = Some(now);
            out.writes.push(Action::Write {
                ticket: w.ticket,
                key: self.cfg.key.clone(),
                value: w.value.clone(),
                pre: w.pre,
            });
        }
    }

    /// The map with our entry freed, and its version, if the map we know has it as ours.
    pub(super) fn release_entries(&self) -> Option<(Vec<ShardEntry>, u64)> {
        let s = i64::from(self.held?);
        let map = self.map.as_ref()?;
        let version = map.version?;
        let at = map
            .entries
            .iter()
            .position(|e| e.shard_number == s && e.controller_name == self.cfg.identity)?;
        let mut entries = map.entries.clone();
        // Free, keeping our last heartbeat: a free entry with a time is one its holder
        // released after its stops (an entry the map gained, or a repair freed, has none),
        // which is what lets a replica that saw the release start at once.
        entries[at].controller_name.clear();
        Some((entries, version))
    }

    /// While stopping: frees our entry once every stop is done and nothing is in flight.
    pub(super) fn send_release(&mut self, now: Mono, out: &mut Out) {
        if !self.stopping || self.write.is_some() || !self.draining.is_empty() {
            return;
        }
        let Some((entries, version)) = self.release_entries() else {
            return;
        };
        let ticket = self.ticket();
        self.write = Some(InFlight {
            ticket,
            sent: None,
            value: encode(&entries).into_bytes(),
            pre: Precondition::Version(version),
            purpose: Purpose::Release,
        });
        self.send_held_back(now, out);
    }

    /// Stale entries (of holders that stopped heartbeating) this replica took over and the
    /// store confirmed: the failovers it performed.
    pub fn failovers(&self) -> u64 {
        self.stats.failovers
    }

    /// The outcome of a write: a confirmed claim or heartbeat extends the validity from
    /// when it was *sent*; a conflict or an error is retried after the backoff (a release at
    /// once after a conflict: the next read says whether the entry is still ours).
    pub fn on_write(
        &mut self,
        ticket: Ticket,
        result: Result<u64, StoreError>,
        now: Mono,
    ) -> Vec<Action> {
        let mut out = Out::default();
        self.expire(now, &mut out);
        let ours = |w: &mut InFlight| w.ticket == ticket && w.sent.is_some();
        // Another ticket (not sent, or from before a restart of the driver) is ignored.
        let mut release_next = false;
        if let Some(f) = self.write.take_if(ours) {
            // A write that was not the release (it was out when shutdown began) lets the
            // release go now; a failed release waits for a read first.
            release_next = matches!(f.purpose, Purpose::Claim { .. });
            let sent = f.sent.unwrap_or(now);
            match (f.purpose, result) {
                (
                    Purpose::Claim {
                        shard,
                        entries,
                        known_stopped,
                        stale_takeover,
                    },
                    Ok(version),
                ) => {
                    if stale_takeover && shard != self.held {
                        self.stats.failovers += 1;
                    }
                    self.claim_confirmed(shard, entries, known_stopped, sent, version, now);
                }
                (Purpose::Release, Ok(version)) => {
                    self.newest = self.newest.max(version);
                    self.held = None;
                    self.valid_until = None;
                }
                (Purpose::Release, Err(StoreError::Conflict { .. })) => out.read = true,
                (Purpose::Claim { .. }, Err(StoreError::Conflict { .. })) => {
                    self.backoff.conflicts += 1;
                    self.timers.heartbeat_due = true;
                    self.read_after_backoff(now);
                }
                (_, Err(e)) => {
                    // Applied or not, we cannot tell: the hold is not extended; try again.
                    self.timers.heartbeat_due = true;
                    self.store_error(&e, now);
                }
            }
        }
        if release_next {
            self.send_release(now, &mut out);
        }
        self.recompute(now, &mut out);
        out.into_actions()
    }

    fn claim_confirmed(
        &mut self,
        shard: Option<u32>,
        entries: Vec<ShardEntry>,
        known_stopped: bool,
        sent: Mono,
        version: u64,
        now: Mono,
    ) {
        self.backoff.conflicts = 0;
        self.backoff.failures = 0;
        self.newest = self.newest.max(version);
        self.stats.writes += 1;
        let before = self.held;
        self.apply_map(entries, Some(version), now);
        self.held = shard;
        self.valid_until = shard.map(|_| sent.after(self.cfg.validity()));
        if shard.is_some() && shard != before {
            let stable = now.since(self.stable_since);
            self.fast_start = known_stopped && stable >= self.cfg.start_delay();
        }
    }
}

/// Conflicts and store errors in a row, for the backoff, and its jitter.
#[derive(Debug, Clone)]
pub(super) struct Backoff {
    pub(super) conflicts: u32,
    pub(super) failures: u32,
    pub(super) rng: SplitMix64,
}

impl Backoff {
    /// Capped exponential backoff with jitter: 25 ms doubling per conflict or store error in
    /// a row, at most `cap`, times a factor in [0.5, 1).
    pub(super) fn next(&mut self, cap: Duration) -> Duration {
        let streak = (self.conflicts + self.failures).min(8);
        let jitter = 0.5 + (self.rng.next_u64() % 1000) as f64 / 2000.0;
        util::Backoff::doubling(Duration::from_millis(25), cap)
            .delay(streak)
            .mul_f64(jitter)
    }
}
