//! Deleting the records of replicas and shards that are gone.
//!
//! A spare keeps a presence record (`replicas/<identity>`) renewed like a lease; a replica
//! that dies, or is scaled away, leaves it behind, and with pod names random (a
//! Deployment) such records would pile up forever. The distributor deletes a presence
//! record it has seen unchanged for [`PRESENCE_GRACE`] on its own clock (every replica
//! renews its record every `renew_every` while it is a spare, so a live spare's record is
//! never that old), with compare-and-swap on the version it judged: a replica that came
//! back and renewed in between changes the version, and the delete does nothing. A live
//! replica whose record was deleted anyway (a partition longer than the grace) creates it
//! again on its next renew (its write fails, it re-reads, the record is absent).
//!
//! The record of a shard at or beyond the committed count is deleted too once it is
//! released or has expired by the distributor's observation (its holder stopped every
//! cluster: the lease's timing argument, as for a takeover), again with compare-and-swap on
//! the version judged. Nobody claims such a shard, so without this its last holder's record
//! stays forever, and a replica that starts afterwards (a restarted pod) must watch it for
//! a whole lease duration before its handover barrier may pass it: every start of the new
//! replica waited on a record of a holder long dead (simulation seed 1,005,205,671,012 of
//! the scaling configuration).
//!
//! A delete the store refuses (a Role without `delete` on Leases, an outage) is reported
//! once as a warning and tried again a grace later, not at every step.
//!
//! Nothing depends on presence records for safety: they only count spares (`auto` shard
//! counts) and list them in `status`. A record that is released (its replica holds a
//! shard, or stopped) is no longer renewed, and goes the same way.

use std::time::Duration;

use super::seen::View;
use super::{Action, Pending, Replica, Ticket, WritePurpose};
use crate::fenced::records::{presence_key, shard_key};
use crate::lease::{Mono, Verdict};
use crate::store::{Precondition, StoreError};

/// How long a presence record must have been seen unchanged before the distributor
/// deletes it: long enough that `status` still shows a spare that just died, and far
/// beyond any pause a live replica comes back from.
pub const PRESENCE_GRACE: Duration = Duration::from_secs(300);

impl Replica {
    /// The distributor's round: deletes the presence records seen unchanged for
    /// [`PRESENCE_GRACE`] (not this replica's own), and the records of shards beyond the
    /// committed count that are released or expired; none already being deleted.
    pub(super) fn forget_dead_records(&mut self, view: &View, now: Mono, out: &mut Vec<Action>) {
        let root = self.cfg.root.clone();
        self.refused_deletes.retain(|k, _| {
            view.presence.keys().any(|id| presence_key(&root, id) == *k)
                || view.shards.keys().any(|&n| shard_key(&root, n) == *k)
        });
        let mut dead = Vec::new();
        for (identity, seen) in &view.presence {
            let gone = matches!(
                seen.verdict,
                Verdict::Expired { unchanged_for } if unchanged_for >= PRESENCE_GRACE
            );
            if gone && *identity != self.cfg.identity {
                let key = presence_key(&root, identity);
                dead.push((key, seen.version, WritePurpose::ForgetPresence));
            }
        }
        if let Some((_, doc)) = &view.assignment {
            let mine = self.shard.as_ref().map(|h| h.shard);
            for (&n, seen) in view.shards.range(doc.shards..) {
                let gone = seen.record.released || !seen.verdict.is_live();
                if gone && Some(n) != mine {
                    dead.push((shard_key(&root, n), seen.version, WritePurpose::ForgetShard));
                }
            }
        }
        for (key, version, purpose) in dead {
            let deleting =
                self.has_pending(|p| matches!(p, Pending::Forget { key: k, .. } if *k == key));
            let refused = self.refused_deletes.get(&key).is_some_and(|&at| now < at);
            if deleting || refused {
                continue;
            }
            let ticket = self.ticket(Pending::Forget {
                key: key.clone(),
                sent: now,
            });
            out.push(Action::Delete {
                ticket,
                purpose,
                key,
                pre: Precondition::Version(version),
            });
        }
    }

    /// The outcome of an [`Action::Delete`]. After a conflict (the record changed) the
    /// record is judged afresh; a delete the store refused is tried again a grace later.
    pub fn on_delete(&mut self, ticket: Ticket, result: Result<(), StoreError>) {
        let Some(Pending::Forget { key, sent }) = self.pending.remove(&ticket) else {
            return;
        };
        match result {
            // Gone: a record under that key later is a new one, judged afresh.
            Ok(()) => self.observer.forget(&key),
            Err(StoreError::Conflict { .. }) => {}
            Err(e) => {
                self.warnings.push(format!(
                    "deleting the record {key} of a replica or shard that is gone failed \
                     (tried again in {}s): {e}",
                    PRESENCE_GRACE.as_secs(),
                ));
                self.refused_deletes
                    .insert(key, Mono(sent.0 + PRESENCE_GRACE));
            }
        }
    }
}
