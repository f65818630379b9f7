//! The distributor role (`fenced/role.rs` says how it is judged and why it is safe): taken
//! only by a replica holding a shard, bound to that shard's record while every live replica
//! has announced the bound form, else kept on the separate, renewed record that older
//! releases read; switched between the two forms with compare-and-swap as the fleet changes.

use super::seen::View;
use super::{Action, Distributing, Pending, Replica, WritePurpose};
use crate::fenced::PROTOCOL;
use crate::fenced::records::{DistributorRecord, distributor_key, encode};
use crate::fenced::role::{RoleLease, ShardSeen, role_lease};
use crate::lease::{HeldLease, Mono};
use crate::store::Precondition;

impl Replica {
    /// Whether the role this replica took is still its own at `now`: not being released
    /// (others may take it the moment they see the release), and the separate form's lease
    /// is valid, or (the bound form) the shard it is bound to is held, valid and not being
    /// released.
    pub(super) fn role_valid(&self, now: Mono) -> bool {
        !self.has_pending(|p| matches!(p, Pending::ReleaseDistributor)) && self.role_held(now)
    }

    /// Whether the lease under the role is still valid at `now` (a release being sent
    /// aside: until it is answered the role is kept, to be released again if it fails).
    pub(super) fn role_held(&self, now: Mono) -> bool {
        let Some(d) = &self.distributor else {
            return false;
        };
        match d.bound {
            None => d.lease.is_valid(now),
            Some(n) => {
                self.shard
                    .as_ref()
                    .is_some_and(|h| h.shard == n && h.lease.is_valid(now))
                    && !self.has_pending(|p| matches!(p, Pending::ReleaseShard))
            }
        }
    }

    /// When the role lapses unless a renew (of the record, or of the bound shard) is
    /// confirmed first.
    pub(super) fn role_valid_until(&self) -> Option<Mono> {
        let d = self.distributor.as_ref()?;
        match d.bound {
            None => d.lease.valid_until(),
            Some(_) => self.shard.as_ref()?.lease.valid_until(),
        }
    }

    /// The stored record must still name us; a write whose reply was lost may have applied,
    /// so its version and form are adopted from the listing (a bound record lives through
    /// the shard, a separate one through its own renewals: whichever the store holds is the
    /// one others judge by).
    pub(super) fn check_role(&mut self, view: &View) {
        if self.distributor.is_none() {
            return;
        }
        match &view.distributor {
            Some(s) if self.is_me(&s.record.holder, s.record.incarnation) && !s.record.released => {
                let (v, bound) = (s.version, s.record.shard);
                if let Some(d) = &mut self.distributor
                    && v >= d.version
                {
                    d.version = v;
                    d.bound = bound;
                }
            }
            _ => self.distributor = None,
        }
    }

    /// Every live replica (a live, unreleased shard or presence record) announced the bound
    /// form in an inventory record of the same incarnation. One that did not (an older
    /// release, an unreadable record, a replica whose inventory is not published yet) keeps
    /// the separate form.
    fn fleet_announced(view: &View) -> bool {
        let announced = |holder: &str, incarnation: u64| {
            view.inventories
                .get(holder)
                .and_then(|(_, r)| r.as_ref())
                .is_some_and(|r| {
                    r.incarnation == incarnation && r.protocol.is_some_and(|p| p >= PROTOCOL)
                })
        };
        let shards = view.shards.values().map(|s| {
            let r = &s.record;
            (&r.holder, r.incarnation, r.released, s.verdict)
        });
        let presence = view.presence.values().map(|s| {
            let r = &s.record;
            (&r.holder, r.incarnation, r.released, s.verdict)
        });
        shards
            .chain(presence)
            .filter(|(_, _, released, verdict)| !released && verdict.is_live())
            .all(|(holder, incarnation, ..)| announced(holder, incarnation))
    }

    /// Whether nobody holds the role by this replica's judgement of `view`.
    fn role_free(view: &View) -> bool {
        let Some(s) = &view.distributor else {
            return true;
        };
        let lookup = |n| match view.shards.get(&n) {
            None => ShardSeen::Absent,
            // The stand-in of an unreadable record (`seen.rs`) names nobody.
            Some(seen) if seen.record.holder.is_empty() => ShardSeen::Unreadable,
            Some(seen) => ShardSeen::Record(&seen.record),
        };
        match role_lease(&s.record, lookup) {
            RoleLease::Free => true,
            RoleLease::Own => !s.verdict.is_live(),
            RoleLease::Shard(n) => !view.shards.get(&n).is_some_and(|x| x.verdict.is_live()),
        }
    }

    /// Takes the role when it is free (or still names us), or switches the held role's form
    /// as the fleet changes. The separate form's periodic renewals are the tick's.
    pub(super) fn claim_or_renew_distributor(
        &mut self,
        view: &View,
        now: Mono,
        out: &mut Vec<Action>,
    ) {
        if self.distributor.is_some() && !self.role_held(now) {
            self.distributor = None;
        }
        let bound_ok = Self::fleet_announced(view);
        let releasing = self.has_pending(|p| matches!(p, Pending::ReleaseShard));
        let my_shard = self
            .shard
            .as_ref()
            .filter(|h| h.lease.is_valid(now) && !releasing)
            .map(|h| h.shard);
        if let Some(d) = &self.distributor {
            let busy = self.has_pending(|p| {
                matches!(
                    p,
                    Pending::RenewDistributor { .. } | Pending::ReleaseDistributor
                )
            });
            if busy {
                return;
            }
            let (beat, pre) = (d.beat + 1, Precondition::Version(d.version));
            let sent = HeldLease::sending(now);
            match (d.bound, bound_ok, my_shard) {
                // Everyone reads the bound form now: bind the role to our shard.
                (None, true, Some(n)) => {
                    let pending = Pending::RenewDistributor {
                        sent,
                        beat,
                        bound: Some(n),
                    };
                    self.write_distributor(beat, false, Some(n), pre, pending, out);
                }
                // Bound form wanted but no shard to bind to: give the role to a holder.
                (None, true, None) => {
                    self.write_distributor(beat, true, None, pre, Pending::ReleaseDistributor, out);
                }
                // A live replica that has not announced the bound form: back to the
                // separate, renewed record before it takes an unrenewed one over.
                (Some(_), false, _) => {
                    if let Some(d) = &mut self.distributor {
                        d.last_sent = now;
                    }
                    let pending = Pending::RenewDistributor {
                        sent,
                        beat,
                        bound: None,
                    };
                    self.write_distributor(beat, false, None, pre, pending, out);
                }
                _ => {}
            }
            return;
        }
        let Some(n) = my_shard else {
            return;
        };
        if self.has_pending(|p| matches!(p, Pending::ClaimDistributor { .. })) {
            return;
        }
        let (beat, pre) = match &view.distributor {
            None => (1, Precondition::Absent),
            Some(s) => {
                // Ours already (a claim whose reply was lost): take it back at once, as for
                // shards; otherwise only once free by our own observation.
                let mine = self.is_me(&s.record.holder, s.record.incarnation);
                if !mine && !Self::role_free(view) {
                    return;
                }
                (s.record.beat + 1, Precondition::Version(s.version))
            }
        };
        let bound = bound_ok.then_some(n);
        let pending = Pending::ClaimDistributor {
            sent: HeldLease::sending(now),
            beat,
            bound,
        };
        self.write_distributor(beat, false, bound, pre, pending, out);
    }

    /// Writes the distributor record (a claim, renew, change of form or release) with `pre`.
    pub(super) fn write_distributor(
        &mut self,
        beat: u64,
        released: bool,
        shard: Option<u32>,
        pre: Precondition,
        pending: Pending,
        out: &mut Vec<Action>,
    ) {
        let record = DistributorRecord {
            holder: self.cfg.identity.clone(),
            incarnation: self.cfg.incarnation,
            beat,
            released,
            shard,
        };
        let ticket = self.ticket(pending);
        out.push(Action::Write {
            ticket,
            purpose: WritePurpose::Distributor,
            key: distributor_key(&self.cfg.root),
            value: encode(&record),
            pre,
        });
    }

    /// Renews the separate form's record when due (not waiting for a stalled renew, as for
    /// shards). The bound form has nothing to renew: the shard's renewals carry it.
    pub(super) fn renew_distributor(&mut self, now: Mono, out: &mut Vec<Action>) {
        let Some(d) = &mut self.distributor else {
            return;
        };
        if d.bound.is_some() || now.since(d.last_sent) < self.cfg.timing.renew_every {
            return;
        }
        d.last_sent = now;
        let (beat, pre) = (d.beat + 1, Precondition::Version(d.version));
        let pending = Pending::RenewDistributor {
            sent: HeldLease::sending(now),
            beat,
            bound: None,
        };
        self.write_distributor(beat, false, None, pre, pending, out);
    }

    /// A claim of the role was confirmed.
    pub(super) fn role_claimed(
        &mut self,
        sent: crate::lease::RenewSent,
        version: u64,
        beat: u64,
        bound: Option<u32>,
    ) {
        let mut lease = HeldLease::new();
        lease.confirmed(sent, &self.cfg.timing);
        self.distributor = Some(Distributing {
            lease,
            version,
            beat,
            last_sent: sent.at(),
            bound,
        });
    }
}
