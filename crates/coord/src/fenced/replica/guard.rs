//! The distributor's drop guard: a new generation that would drop more than a set share of
//! the committed generation's clusters (an emptied or truncated fleet file, a wrong
//! directory, a watch that lost its objects) is not committed until that smaller view has
//! held, unchanged, for a grace period. Meanwhile the dropped clusters stay assigned where
//! the committed generation had them (a cluster whose shard is vacant or beyond the count
//! goes to a live shard), and the replica says so: one warning when the episode starts and
//! one when it ends ([`Replica::take_warnings`]), and [`Replica::held_back`] for metrics and
//! `status`.
//!
//! Time is the step's `now`; "unchanged" means the same set of dropped clusters (an
//! inventory whose loads move meanwhile still counts as held). The grace is this
//! distributor's observation: a newly elected one starts it again, which only delays the
//! drop.

use std::collections::{BTreeMap, HashSet};

use fleetshard_core::placement::slices::UnitId;
use std::time::Duration;

use super::Replica;
use crate::fenced::inventory::ids_digest;
use crate::fenced::records::AssignmentDoc;
use crate::lease::Mono;

/// How the distributor guards against a fleet that shrinks at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DropGuard {
    /// The largest share of the committed generation's clusters, in percent, that a new
    /// generation may drop at once (100: never held back).
    pub max_drop_percent: u32,
    /// How long a view that drops more must have held, unchanged, before it is committed.
    pub grace: Duration,
    /// An empty inventory may be committed (after the grace, as any large drop). Without
    /// it (the default, `run` without `--allow-empty-fleet`) a view with no clusters is
    /// held back for as long as it lasts: an emptied fleet file or a watch that lost its
    /// objects never leaves the whole fleet unowned.
    pub allow_empty: bool,
}

impl Default for DropGuard {
    /// 50 %, 12 s (three lease durations: an inventory source that lost its objects
    /// usually has them back by then).
    fn default() -> Self {
        DropGuard {
            max_drop_percent: 50,
            grace: Duration::from_secs(12),
            allow_empty: false,
        }
    }
}

impl DropGuard {
    /// Checks the settings: a share is at most 100 %.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_drop_percent > 100 {
            return Err(format!(
                "max drop {} % is above 100 %",
                self.max_drop_percent
            ));
        }
        Ok(())
    }
}

/// A drop the distributor holds back now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeldBack {
    /// The committed generation's clusters.
    pub previous: u64,
    /// How many of them the new view drops (kept assigned meanwhile).
    pub dropped: u64,
    /// When this view was first seen.
    pub since: Mono,
    /// When it may be committed, if it holds until then.
    pub until: Mono,
    /// Which clusters it drops ([`ids_digest`]).
    pub(super) digest: u64,
    /// The grace has passed and the drop is being committed (held back until the commit
    /// shows: a commit that fails is retried, not a new episode).
    pub(super) committing: bool,
}

/// What a placement found about drops, for [`Replica::note_drop`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct DropSeen {
    pub previous: u64,
    pub dropped: u64,
    pub digest: u64,
}

/// The guard's state inside a replica.
#[derive(Debug, Clone, Default)]
pub(super) struct GuardState {
    pub config: DropGuard,
    pub held: Option<HeldBack>,
}

/// What a placement did about drops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DropCheck {
    /// No drop beyond the share.
    Within,
    /// A drop beyond the share that has held for the grace: committed.
    Released,
    /// A drop beyond the share, held back: the dropped clusters were kept.
    Held(DropSeen),
}

/// Keeps the clusters `assigned` drops from `doc`, unless the drop is within the share or
/// is exactly the drop `allow` names (one that has held for the grace); an empty view is
/// always held back unless the guard allows an empty fleet.
pub(super) fn keep_dropped(
    guard: &DropGuard,
    allow: Option<u64>,
    doc: &AssignmentDoc,
    shards: u32,
    vacant: &[u32],
    assigned: &mut BTreeMap<String, u32>,
    homes: &mut BTreeMap<String, u32>,
) -> DropCheck {
    // Counted by cluster: a cluster split into slices, re-split or joined again is not
    // dropped, and one dropped is kept with every unit it had (a generation holds a
    // cluster whole or as all the slices of one count, never both: `slicing.rs`).
    let kept: HashSet<&str> = assigned
        .keys()
        .map(|id| UnitId::parse(id).cluster)
        .collect();
    let previous = doc
        .clusters
        .keys()
        .map(|id| UnitId::parse(id).cluster)
        .collect::<HashSet<_>>()
        .len() as u64;
    let dropped: Vec<(&String, u32)> = doc
        .clusters
        .iter()
        .filter(|(id, _)| !kept.contains(UnitId::parse(id).cluster))
        .map(|(id, &s)| (id, s))
        .collect();
    let n = dropped
        .iter()
        .map(|(id, _)| UnitId::parse(id).cluster)
        .collect::<HashSet<_>>()
        .len() as u64;
    let emptied = assigned.is_empty() && n > 0 && !guard.allow_empty;
    if !emptied && (n == 0 || n * 100 <= u64::from(guard.max_drop_percent) * previous) {
        return DropCheck::Within;
    }
    let digest = ids_digest(dropped.iter().map(|(id, _)| id.as_str()));
    if allow == Some(digest) && !emptied {
        return DropCheck::Released;
    }
    let live: Vec<u32> = (0..shards).filter(|s| !vacant.contains(s)).collect();
    for (id, shard) in dropped {
        let home = doc.homes.get(id).copied();
        let at = if shard < shards && !vacant.contains(&shard) {
            shard
        } else if live.is_empty() {
            shard.min(shards.saturating_sub(1))
        } else {
            // A fixed choice among the live shards: the same inputs keep it in place.
            live[(ids_digest(std::iter::once(id.as_str())) % live.len() as u64) as usize]
        };
        assigned.insert(id.clone(), at);
        if let Some(h) = home.filter(|&h| h != at && h < shards) {
            homes.insert(id.clone(), h);
        }
    }
    DropCheck::Held(DropSeen {
        previous,
        dropped: n,
        digest,
    })
}

impl Replica {
    /// Sets how this replica's distributor guards against a fleet that shrinks at once
    /// (default: [`DropGuard::default`]).
    pub fn with_drop_guard(mut self, guard: DropGuard) -> Self {
        self.guard.config = guard;
        self
    }

    /// The drop this replica, as distributor, holds back now (`None`: none, or not the
    /// distributor).
    pub fn held_back(&self) -> Option<HeldBack> {
        self.guard.held
    }

    /// The drop that has held for the grace at `now` and may be committed.
    pub(super) fn drop_allowed(&self, now: Mono) -> Option<u64> {
        self.guard.held.filter(|h| now >= h.until).map(|h| h.digest)
    }

    /// No longer the distributor: whatever it held back is the next one's to judge.
    pub(super) fn forget_drop(&mut self) {
        self.guard.held = None;
    }

    /// What a placement found: an episode starts (said once), goes on (the grace restarts
    /// when the dropped set changes), is committed once it held for the grace (said once),
    /// or ends — the committed generation no longer drops beyond the share, because the
    /// drop is in it or the inventory came back (said, in the second case).
    pub(super) fn note_drop(&mut self, check: DropCheck, now: Mono) {
        let grace = self.guard.config.grace;
        let held = |s: DropSeen| HeldBack {
            previous: s.previous,
            dropped: s.dropped,
            since: now,
            until: Mono(now.0 + grace),
            digest: s.digest,
            committing: false,
        };
        let seen = match check {
            DropCheck::Held(s) => Some(s),
            DropCheck::Released => {
                if let Some(h) = self.guard.held.as_mut().filter(|h| !h.committing) {
                    h.committing = true;
                    self.warnings.push(format!(
                        "distributor: dropping {} of {} clusters: the smaller inventory held \
                         for {}s",
                        h.dropped,
                        h.previous,
                        grace.as_secs_f64()
                    ));
                }
                return;
            }
            DropCheck::Within => None,
        };
        match (seen, self.guard.held) {
            (Some(s), Some(h)) if h.digest == s.digest => {}
            (Some(s), Some(_)) => self.guard.held = Some(held(s)),
            (Some(s), None) if s.dropped == s.previous && !self.guard.config.allow_empty => {
                self.warnings.push(format!(
                    "distributor: the inventory has none of the {} committed clusters; they \
                     stay assigned for as long as it lasts (an empty fleet is committed only \
                     with --allow-empty-fleet)",
                    s.previous
                ));
                self.guard.held = Some(held(s));
            }
            (Some(s), None) => {
                self.warnings.push(format!(
                    "distributor: the inventory drops {} of the {} clusters of the committed \
                     generation (more than {} %); they stay assigned until this smaller view \
                     has held for {}s",
                    s.dropped,
                    s.previous,
                    self.guard.config.max_drop_percent,
                    grace.as_secs_f64()
                ));
                self.guard.held = Some(held(s));
            }
            (None, Some(h)) => {
                // Committed (the drop is in the generation now), or the inventory is back.
                if !h.committing {
                    self.warnings.push(format!(
                        "distributor: the inventory no longer drops more than {} % of the \
                         committed clusters; nothing held back",
                        self.guard.config.max_drop_percent
                    ));
                }
                self.guard.held = None;
            }
            (None, None) => {}
        }
    }
}
