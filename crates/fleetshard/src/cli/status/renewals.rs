//! Which lease records `status` shows renewed, and when it may stop watching.
//!
//! A record whose version changed while watched was renewed: waiting for every record to
//! change takes up to a renew period (1.25 s), until the last holder's turn. The store's
//! order answers sooner, still with no clock but this process's (G6): versions are store
//! revisions, one total order of every write. A *witness* is a replica seen renewing once
//! (its record's beat one higher, same holder and incarnation): its previous write, at the
//! version the first read saw, came one renew period before the renewal just seen, as its
//! own clock measures. So a record written after that previous write was written within a
//! renew period before the witness's renewal — what a change seen in the watch shows.
//!
//! A paused witness renews late (up to its renew deadline, 3 s, after which it stops),
//! which would stretch that. So with three replicas or more, two witnesses are needed and
//! the later of their previous writes is the line; with two, the one renewing first
//! vouches for the other; one alone must be seen renewing. Proofs by order are drawn only
//! at a read where a new witness was first seen (its renewal at most a poll old); at other
//! reads only changes count, and a watch that runs its whole window judges by changes
//! alone. The bound: a record shown renewed was written within a renew period and a poll
//! of the answer — if the newest witness had itself been paused, within its renew deadline
//! (with two replicas, both then faulty at once). The answer comes after the second of N
//! replicas' renewals, about 2/(N+1) of a renew period (the first of two, 1/3), instead of
//! the last, N/(N+1).

use std::collections::{BTreeMap, BTreeSet};

use fleetshard_coord::fenced::FencedSnapshot;
use fleetshard_coord::store::Listing;

/// A lease record as the first read saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FirstSeen {
    version: u64,
    holder: String,
    incarnation: u64,
    beat: u64,
}

/// The watch of the lease records of one `status` read.
#[derive(Debug)]
pub(super) struct RenewalWatch {
    root: String,
    /// The unreleased lease records of the first read, by key: those every answer judges.
    leases: BTreeMap<String, FirstSeen>,
    /// Witnesses seen so far: (holder, incarnation) → the version of its previous write.
    witnesses: BTreeMap<(String, u64), u64>,
    /// Witnesses a proof by order needs: two, one with two replicas, none (no proof by
    /// order) with one.
    needed: usize,
}

impl RenewalWatch {
    /// Starts from the first read.
    pub(super) fn new(root: &str, first: &Listing) -> Self {
        let leases = leases(root, first);
        let replicas: BTreeSet<(&str, u64)> = leases
            .values()
            .map(|l| (l.holder.as_str(), l.incarnation))
            .collect();
        let needed = replicas.len().saturating_sub(1).min(2);
        RenewalWatch {
            root: root.to_owned(),
            leases,
            witnesses: BTreeMap::new(),
            needed,
        }
    }

    /// Takes a later read. Returns the keys shown renewed (changed since the first read, or
    /// proven by order) when every lease record of the first read is among them: the
    /// answer may be given now. `None`: keep watching.
    pub(super) fn all_renewed(&mut self, now: &Listing) -> Option<BTreeSet<String>> {
        let current = leases(&self.root, now);
        let version = |key: &str| now.entries.iter().find(|e| e.key == key).map(|e| e.version);
        let mut new_witness = false;
        for (key, was) in &self.leases {
            let Some(is) = current.get(key) else { continue };
            if is.holder == was.holder
                && is.incarnation == was.incarnation
                && is.beat == was.beat.saturating_add(1)
            {
                let previous = self
                    .witnesses
                    .entry((was.holder.clone(), was.incarnation))
                    .or_insert_with(|| {
                        new_witness = true;
                        was.version
                    });
                *previous = (*previous).max(was.version);
            }
        }
        let line = (new_witness && self.needed > 0 && self.witnesses.len() >= self.needed)
            .then(|| self.witnesses.values().copied().max())
            .flatten();
        let renewed: BTreeSet<String> = self
            .leases
            .iter()
            .filter(|(key, was)| {
                let v = version(key);
                v != Some(was.version) || line.is_some_and(|l| v.is_some_and(|v| v > l))
            })
            .map(|(key, _)| key.clone())
            .collect();
        (renewed.len() == self.leases.len()).then_some(renewed)
    }
}

/// The unreleased lease records of `listing`: shard records, presence records, and the
/// distributor's record in its separate form (a bound one is never renewed: its shard's
/// record is).
fn leases(root: &str, listing: &Listing) -> BTreeMap<String, FirstSeen> {
    let snap = FencedSnapshot::decode(root, listing);
    let seen = |version: u64, holder: &str, incarnation: u64, beat: u64| FirstSeen {
        version,
        holder: holder.to_owned(),
        incarnation,
        beat,
    };
    let shards = snap
        .shards
        .iter()
        .filter(|(_, (_, r))| !r.released)
        .map(|(n, (v, r))| {
            let key = format!("{root}shards/{n}");
            (key, seen(*v, &r.holder, r.incarnation, r.beat))
        });
    let presence = snap
        .presence
        .iter()
        .filter(|(_, (_, r))| !r.released)
        .map(|(id, (v, r))| {
            let key = format!("{root}replicas/{id}");
            (key, seen(*v, &r.holder, r.incarnation, r.beat))
        });
    let distributor = snap
        .distributor
        .iter()
        .filter(|(_, r)| !r.released && r.shard.is_none())
        .map(|(v, r)| {
            let key = format!("{root}distributor");
            (key, seen(*v, &r.holder, r.incarnation, r.beat))
        });
    shards.chain(presence).chain(distributor).collect()
}

#[cfg(test)]
mod tests;
