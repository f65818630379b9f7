//! The records this replica writes for itself: its shard lease and its presence while it
//! holds no shard (the distributor role is `role.rs`'s). Each is claimed with
//! compare-and-swap, renewed on the replica's own timer, and released on purpose when it is
//! given up.

use std::time::Duration;

use super::seen::View;
use super::{Action, Pending, Replica, WritePurpose};
use crate::fenced::records::{PresenceRecord, ShardRecord, encode, presence_key, shard_key};
use crate::lease::{HeldLease, Mono};
use crate::store::Precondition;

impl Replica {
    /// Our records must still name us. A write whose reply was lost may have applied: the
    /// record is still ours, at a newer version, which we adopt (without extending the
    /// lease: we do not know when it applied).
    pub(super) fn check_ownership(&mut self, view: &View, out: &mut Vec<Action>) {
        if let Some(h) = &self.shard {
            match view.shards.get(&h.shard) {
                Some(s)
                    if self.is_me(&s.record.holder, s.record.incarnation) && !s.record.released =>
                {
                    let v = s.version;
                    if let Some(h) = &mut self.shard {
                        h.version = h.version.max(v);
                    }
                }
                _ => self.lose_shard(out),
            }
        }
        self.check_role(view);
    }

    /// A renew that landed after this replica's deadline had passed (its reply late or
    /// lost) leaves a record that names this very incarnation on a shard it no longer
    /// holds: to everyone else it looks live for another lease duration, and the
    /// acknowledgement it carries holds their handover barriers back (simulation seed
    /// 666,924,577,494 of the scaling configuration: 9.4 s without an owner). Such a record
    /// is released at once, with compare-and-swap on its version: this replica has acted on
    /// nothing of that shard since its deadline. (A stray below the count while this
    /// replica holds no shard is taken back by [`Replica::claim_shard`] instead.)
    pub(super) fn release_strays(&mut self, view: &View, out: &mut Vec<Action>) {
        let held = self.shard.as_ref().map(|h| h.shard);
        for (&n, seen) in &view.shards {
            let stray = self.is_me(&seen.record.holder, seen.record.incarnation)
                && !seen.record.released
                && Some(n) != held
                && (n >= self.count || held.is_some());
            let busy = self.has_pending(|p| {
                matches!(p, Pending::ReleaseStray { shard } | Pending::ClaimShard { shard, .. } if *shard == n)
            });
            if !stray || busy {
                continue;
            }
            let record = ShardRecord {
                released: true,
                beat: seen.record.beat + 1,
                ..seen.record.clone()
            };
            let ticket = self.ticket(Pending::ReleaseStray { shard: n });
            out.push(Action::Write {
                ticket,
                purpose: WritePurpose::ReleaseShard,
                key: shard_key(&self.cfg.root, n),
                value: encode(&record),
                pre: Precondition::Version(seen.version),
            });
        }
    }

    /// When the next renewal is due: of the shard record, the distributor's separate
    /// record, or (`presence: true`) the presence record, which is renewed at a listing's
    /// step. The runner wakes then: renewals come every renew period, not up to a timer
    /// tick or a poll later — observers (`status`, other replicas' at-risk signal) judge a
    /// holder by that period. `None` while stopping or holding nothing to renew.
    pub fn next_renewal(&self) -> Option<(Mono, bool)> {
        if self.stopping {
            return None;
        }
        let every = self.cfg.timing.renew_every;
        let shard = self.shard.as_ref().map(|h| (h.renew_at, false));
        let distributor = self
            .distributor
            .as_ref()
            .filter(|d| d.bound.is_none())
            .map(|d| (d.last_sent.after(every), false));
        let presence = self
            .presence
            .as_ref()
            .filter(|_| self.shard.is_none())
            .map(|p| (p.last_sent.after(every), true));
        shard.into_iter().chain(distributor).chain(presence).min()
    }

    pub(super) fn claim_or_renew_shard(&mut self, view: &View, now: Mono, out: &mut Vec<Action>) {
        if self.shard.is_some() {
            self.renew_shard(now, out);
            return;
        }
        if self.has_pending(|p| matches!(p, Pending::ClaimShard { .. } | Pending::ReleaseShard)) {
            return;
        }
        self.claim_shard(view, now, out);
    }

    /// Renews the held shard when due: every `renew_every`, and at once when there is a
    /// generation to acknowledge. A renew does not wait for a stalled one: both carry the
    /// same compare-and-swap version, so at most one applies, and each confirmed send
    /// extends the lease from its own send time.
    pub(super) fn renew_shard(&mut self, now: Mono, out: &mut Vec<Action>) {
        let applied = self.applied;
        let ack_in_flight = self
            .has_pending(|p| matches!(p, Pending::RenewShard { acked, .. } if *acked >= applied));
        let releasing = self.has_pending(|p| matches!(p, Pending::ReleaseShard));
        let Some(h) = &mut self.shard else {
            return;
        };
        // A generation is acknowledged only once what it took from us has stopped.
        let stopped = self.stopping_clusters.is_empty();
        let acked = if stopped { applied } else { h.acked };
        let every = self.cfg.timing.renew_every;
        let ack = applied > h.acked && stopped && !ack_in_flight;
        if !(ack || now >= h.renew_at) || releasing {
            return;
        }
        h.renew_at = if ack {
            spread_after(h.shard, self.count, every, now)
        } else {
            now.after(every)
        };
        let record = ShardRecord {
            holder: self.cfg.identity.clone(),
            incarnation: self.cfg.incarnation,
            beat: h.beat + 1,
            acked,
            released: false,
            zone: self.cfg.zone.clone(),
            capacity: Some(self.cfg.capacity),
        };
        let (key, pre) = (
            shard_key(&self.cfg.root, h.shard),
            Precondition::Version(h.version),
        );
        let ticket = self.ticket(Pending::RenewShard {
            sent: HeldLease::sending(now),
            beat: record.beat,
            acked: record.acked,
        });
        out.push(Action::Write {
            ticket,
            purpose: WritePurpose::RenewShard,
            key,
            value: encode(&record),
            pre,
        });
    }

    /// Claims a free shard below the count: never held, released, expired by our own
    /// observation, or still naming this very incarnation (our deadline passed but nobody
    /// took it: the compare-and-swap on that version proves it, so re-acquiring at once is
    /// safe). Our own identity's shard first (a restart keeps its clusters), then the
    /// lowest number.
    fn claim_shard(&mut self, view: &View, now: Mono, out: &mut Vec<Action>) {
        let free = (0..self.count).filter_map(|n| match view.shards.get(&n) {
            None => Some((n, Precondition::Absent, 0, false, false)),
            Some(s)
                if s.record.released
                    || !s.verdict.is_live()
                    || self.is_me(&s.record.holder, s.record.incarnation) =>
            {
                Some((
                    n,
                    Precondition::Version(s.version),
                    s.record.beat,
                    s.record.holder == self.cfg.identity,
                    !s.record.released && !s.verdict.is_live(),
                ))
            }
            _ => None,
        });
        let Some((n, pre, beat, _, takeover)) =
            free.max_by_key(|&(n, _, _, mine, _)| (mine, std::cmp::Reverse(n)))
        else {
            return;
        };
        let record = ShardRecord {
            holder: self.cfg.identity.clone(),
            incarnation: self.cfg.incarnation,
            beat: beat + 1,
            // Clusters of a lapsed lease may still be stopping: acknowledge nothing yet.
            acked: if self.stopping_clusters.is_empty() {
                self.applied
            } else {
                0
            },
            released: false,
            zone: self.cfg.zone.clone(),
            capacity: Some(self.cfg.capacity),
        };
        let ticket = self.ticket(Pending::ClaimShard {
            shard: n,
            sent: HeldLease::sending(now),
            beat: record.beat,
            acked: record.acked,
            takeover,
        });
        out.push(Action::Write {
            ticket,
            purpose: WritePurpose::ClaimShard,
            key: shard_key(&self.cfg.root, n),
            value: encode(&record),
            pre,
        });
    }

    /// Gives the held shard up on purpose: marked released (with the generation applied, so
    /// it also acknowledges), free for others at once. Everything it had is stopped first,
    /// and the release is written only once the stops are reported done (the caller keeps
    /// asking, every step).
    pub(super) fn release_shard(&mut self, out: &mut Vec<Action>) {
        if self.has_pending(|p| matches!(p, Pending::ReleaseShard)) || self.shard.is_none() {
            return;
        }
        self.stop_all(out);
        if !self.stopping_clusters.is_empty() {
            return;
        }
        let Some(h) = &self.shard else {
            return;
        };
        let record = ShardRecord {
            holder: self.cfg.identity.clone(),
            incarnation: self.cfg.incarnation,
            beat: h.beat + 1,
            acked: self.applied,
            released: true,
            zone: self.cfg.zone.clone(),
            capacity: Some(self.cfg.capacity),
        };
        let (key, pre) = (
            shard_key(&self.cfg.root, h.shard),
            Precondition::Version(h.version),
        );
        let ticket = self.ticket(Pending::ReleaseShard);
        out.push(Action::Write {
            ticket,
            purpose: WritePurpose::ReleaseShard,
            key,
            value: encode(&record),
            pre,
        });
    }

    /// On shutdown: the shard, the distributor role and the presence record, released.
    pub(super) fn send_releases(&mut self, out: &mut Vec<Action>) {
        self.release_shard(out);
        let pending_dist = self.has_pending(|p| matches!(p, Pending::ReleaseDistributor));
        if let (Some(d), false) = (&self.distributor, pending_dist) {
            let (beat, pre) = (d.beat + 1, Precondition::Version(d.version));
            let shard = d.bound;
            self.write_distributor(beat, true, shard, pre, Pending::ReleaseDistributor, out);
        }
        if self.presence.is_some() && !self.has_pending(|p| matches!(p, Pending::Presence { .. })) {
            self.write_presence(None, true, Mono::default(), out);
        }
    }

    /// While it holds no shard, a replica keeps a presence record (renewed like a lease) so
    /// the distributor can count it as a spare; once it holds one, it marks the record
    /// released. A record left by an earlier incarnation is taken over.
    pub(super) fn keep_presence(&mut self, view: &View, now: Mono, out: &mut Vec<Action>) {
        // While a claim is in flight the presence record is left as it is: a release sent
        // beside the claim may land first, and a distributor listing between the two would
        // see the released shard with no spare waiting for it and move its clusters away,
        // only to move them back once the claim lands (each cluster moving twice in a
        // rolling update).
        if self.has_pending(|p| matches!(p, Pending::Presence { .. } | Pending::ClaimShard { .. }))
        {
            return;
        }
        let stored = view.presence.get(&self.cfg.identity);
        if self.shard.is_some() {
            // Ours, unreleased: say we are no longer a spare.
            if let Some(s) =
                stored.filter(|s| !s.record.released && s.record.holder == self.cfg.identity)
            {
                let base = Some((s.version, s.record.beat));
                self.write_presence(base, true, now, out);
            }
            return;
        }
        let due = self
            .presence
            .as_ref()
            .is_none_or(|p| now.since(p.last_sent) >= self.cfg.timing.renew_every);
        if due {
            let base = match &self.presence {
                Some(p) => Some((p.version, p.beat)),
                None => stored.map(|s| (s.version, s.record.beat)),
            };
            self.write_presence(base, false, now, out);
        }
    }

    /// Writes the presence record over `base` (version, beat), or creates it.
    fn write_presence(
        &mut self,
        base: Option<(u64, u64)>,
        released: bool,
        now: Mono,
        out: &mut Vec<Action>,
    ) {
        let base = base.or_else(|| self.presence.as_ref().map(|p| (p.version, p.beat)));
        let (pre, beat) = match base {
            Some((v, b)) => (Precondition::Version(v), b + 1),
            None => (Precondition::Absent, 1),
        };
        let record = PresenceRecord {
            holder: self.cfg.identity.clone(),
            incarnation: self.cfg.incarnation,
            beat,
            released,
        };
        let ticket = self.ticket(Pending::Presence {
            beat,
            sent: now,
            released,
        });
        out.push(Action::Write {
            ticket,
            purpose: WritePurpose::Presence,
            key: presence_key(&self.cfg.root, &self.cfg.identity),
            value: encode(&record),
            pre,
        });
    }
}

/// When shard `n` of `count`, claimed or acknowledged at `at`, renews next: `n/count` of a
/// period later (shard 0: a whole period). Every holder claims its shard or acknowledges a
/// generation at about the same moment, which would keep their renewals in step from then
/// on; this spreads them over the period, so an observer (`status`) sees two of them in
/// 2/N of it. Renewing sooner is always safe; it costs one write per claim or generation.
pub(super) fn spread_after(n: u32, count: u32, every: Duration, at: Mono) -> Mono {
    let count = count.max(1);
    let slot = n % count;
    if slot == 0 {
        return at.after(every);
    }
    at.after(every.mul_f64(f64::from(slot) / f64::from(count)))
}
