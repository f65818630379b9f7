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
    /// The first listing, at this time, showed a store with no assignment.
    Since(Mono),
}

impl Replica {
    /// Notes what the first decoded listing says; later listings change nothing.
    pub(super) fn note_cold_start(&mut self, view: &View, now: Mono) {
        if matches!(self.cold_start, ColdStart::Unknown) {
            let cold = view.assignment_version.is_none() && self.last_doc.is_none();
            self.cold_start = if cold {
                ColdStart::Since(now)
            } else {
                ColdStart::Warm
            };
        }
    }

    /// Whether a shard nobody has held yet is expected at `now` (its holder is still
    /// starting) rather than vacant.
    pub(super) fn expecting_holders(&self, now: Mono) -> bool {
        match self.cold_start {
            ColdStart::Since(since) => now < since.after(self.cfg.timing.duration),
            ColdStart::Unknown | ColdStart::Warm => false,
        }
    }

    /// Whether the first generation waits at `now`: with the automatic count, until half
    /// the lease duration has passed since the cold first listing (the count is the
    /// replicas seen, and the others' presence records take a moment to appear).
    pub(super) fn first_generation_waits(&self, view: &View, now: Mono) -> bool {
        let ColdStart::Since(since) = self.cold_start else {
            return false;
        };
        matches!(self.cfg.shards, ShardCount::Auto { .. })
            && view.assignment_version.is_none()
            && now < since.after(self.cfg.timing.duration / 2)
    }
}
