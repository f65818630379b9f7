//! A fleet starting cold: every replica of a new fleet starts at about the same moment, and
//! the first to claim a shard becomes the distributor before the others have claimed
//! theirs. Were the shards nobody has held yet vacant at once, its first generation would
//! give it the whole fleet, and the next ones would take nine tenths of it back a few
//! hundred milliseconds later — the herd: one replica starting every cluster (a kube
//! client, lists and watches each), its memory peak kept by the allocator, and in a pod
//! with a memory limit an OOM kill that starts the herd again.
//!
//! So when this replica's first listing shows no assignment at all (nobody has ever
//! committed one: nothing runs anywhere, and no cluster can lose an owner), the shards
//! nobody has held yet count as **expected**, not vacant, for one lease duration from that
//! listing: each gets its share in the first generation, and its holder starts it when it
//! claims the shard. A shard still unclaimed when the lease duration is over is vacant, and
//! its clusters move to the held shards as they would have at once (a fleet with fewer
//! replicas than shards waits that long for full coverage, once, at its first start).
//!
//! With the automatic shard count (`auto`), the count itself is the replicas seen, which at
//! the first listing is this one alone: the first generation waits for half the lease
//! duration, so that the others' presence records are counted, and is then committed with
//! the remaining half to be claimed in.
//!
//! Only the shards of the fleet's first generation are expected: a shard added by a scale-up
//! inside that lease duration is vacant at once, as any other time (expecting it would move
//! clusters away from their running owners to a shard nobody holds yet).
//!
//! A replica that found an assignment, or has one from earlier (a store replaced under a
//! running fleet), never waits: there, a shard nobody holds is vacant at once as before.

use super::seen::View;
use super::{Replica, ShardCount};
use crate::lease::Mono;

/// What this replica's first listing said of the fleet's start.
#[derive(Debug, Clone, Copy, Default)]
pub(super) enum ColdStart {
    /// No listing decoded yet.
    #[default]
    Unknown,
    /// The store held an assignment (or this replica knew one): nothing is expected.
    Warm,
    /// The first listing, at `since`, showed a store with no assignment; `shards` is the
    /// count of the first assignment seen since (`None`: none yet).
    Since { since: Mono, shards: Option<u32> },
}

impl Replica {
    /// Notes what the first decoded listing says, and the count of the first assignment
    /// seen after a cold one.
    pub(super) fn note_cold_start(&mut self, view: &View, now: Mono) {
        match &mut self.cold_start {
            ColdStart::Unknown => {
                let cold = view.assignment_version.is_none() && self.last_doc.is_none();
                self.cold_start = if cold {
                    ColdStart::Since {
                        since: now,
                        shards: None,
                    }
                } else {
                    ColdStart::Warm
                };
            }
            ColdStart::Since { shards, .. } if shards.is_none() => {
                *shards = view.assignment.as_ref().map(|(_, doc)| doc.shards);
            }
            _ => {}
        }
    }

    /// Whether shard `n`, which nobody has held yet, is expected at `now` (its holder is
    /// still starting) rather than vacant: one of the first generation's shards, within a
    /// lease duration of the cold first listing.
    pub(super) fn expecting_holder(&self, n: u32, now: Mono) -> bool {
        match self.cold_start {
            ColdStart::Since { since, shards } => {
                now < since.after(self.cfg.timing.duration) && shards.is_none_or(|c| n < c)
            }
            ColdStart::Unknown | ColdStart::Warm => false,
        }
    }

    /// Whether the first generation waits at `now`: with the automatic count, until half
    /// the lease duration has passed since the cold first listing (the count is the
    /// replicas seen, and the others' presence records take a moment to appear).
    pub(super) fn first_generation_waits(&self, view: &View, now: Mono) -> bool {
        let ColdStart::Since { since, .. } = self.cold_start else {
            return false;
        };
        matches!(self.cfg.shards, ShardCount::Auto { .. })
            && view.assignment_version.is_none()
            && now < since.after(self.cfg.timing.duration / 2)
    }
}
