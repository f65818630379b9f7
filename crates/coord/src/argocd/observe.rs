//! Staleness without clock trust (W13, product guarantee G6).
//!
//! Argo CD declares an entry stale when its own wall clock is more than 3H past the
//! holder's written `HeartbeatTime`, so a clock skew above 3H (30 s by default) causes false
//! takeovers, or blocks real ones. fleetshard instead asks: *for how long have I, reading
//! the map, seen this entry unchanged?* A live holder changes its entry on every heartbeat
//! (the claim guarantees it), so an entry unchanged for longer than 3H on the reader's own
//! monotonic clock belongs to a holder that stopped. Only durations measured by one clock
//! are compared; the written time is an opaque token.
//!
//! The cost: a replica that has just started has seen nothing for long, so it waits a full
//! 3H before taking over an entry that was already dead when it started.

use std::collections::BTreeMap;
use std::time::Duration;

use super::mapping::ShardEntry;
use super::time::WallTime;
use crate::lease::Mono;

/// Remembers, for each entry content seen in the mapping, when this replica first saw it.
///
/// "Now" is a reading of this process's monotonic clock ([`Mono`], as the lease protocol
/// uses). Call [`ChangeObserver::observe`] on every
/// read of the mapping, and pass [`ChangeObserver::unchanged_for`] to
/// [`super::get_or_update_shard`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChangeObserver {
    /// (shard number, controller, heartbeat) → when first seen with exactly this content.
    first_seen: BTreeMap<(i64, String, WallTime), Mono>,
}

impl ChangeObserver {
    /// An observer that has seen nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records the mapping as read at monotonic time `now`: contents seen before keep their
    /// first sighting, new ones start now, contents no longer present are forgotten.
    pub fn observe(&mut self, entries: &[ShardEntry], now: Mono) {
        let mut next = BTreeMap::new();
        for entry in entries {
            let key = key_of(entry);
            let since = self.first_seen.get(&key).copied().unwrap_or(now);
            next.insert(key, since);
        }
        self.first_seen = next;
    }

    /// How long `entry`, with exactly this content, has been seen unchanged as of monotonic
    /// time `now`: zero for a content never observed (so it counts as fresh).
    pub fn unchanged_for(&self, entry: &ShardEntry, now: Mono) -> Duration {
        self.first_seen
            .get(&key_of(entry))
            .map_or(Duration::ZERO, |&since| now.since(since))
    }
}

fn key_of(entry: &ShardEntry) -> (i64, String, WallTime) {
    (
        entry.shard_number,
        entry.controller_name.clone(),
        entry.heartbeat_time,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn at(s: u64) -> Mono {
        Mono(secs(s))
    }

    #[test]
    fn ages_count_from_the_first_sighting_of_a_content() {
        let a1 = ShardEntry::held(0, "a", WallTime::from_unix_seconds(100));
        let a2 = ShardEntry::held(0, "a", WallTime::from_unix_seconds(110));
        let free = ShardEntry::free(1);
        let mut seen = ChangeObserver::new();
        assert_eq!(seen.unchanged_for(&a1, at(5)), Duration::ZERO);
        seen.observe(&[a1.clone(), free.clone()], at(10));
        seen.observe(&[a1.clone(), free.clone()], at(20));
        assert_eq!(seen.unchanged_for(&a1, at(45)), secs(35));
        assert_eq!(seen.unchanged_for(&free, at(45)), secs(35));
        // A heartbeat resets the age; the old content is forgotten.
        seen.observe(&[a2.clone(), free.clone()], at(50));
        assert_eq!(seen.unchanged_for(&a2, at(60)), secs(10));
        assert_eq!(seen.unchanged_for(&a1, at(60)), Duration::ZERO);
        // A monotonic reading before the sighting (misuse) does not underflow.
        assert_eq!(seen.unchanged_for(&a2, at(1)), Duration::ZERO);
    }

    #[test]
    fn the_written_time_is_only_a_token() {
        // A holder whose clock is an hour behind, or years ahead, is judged the same way.
        let mut seen = ChangeObserver::new();
        let behind = ShardEntry::held(0, "slow", WallTime::from_unix_seconds(1));
        let ahead = ShardEntry::held(1, "fast", WallTime::from_unix_seconds(4_000_000_000));
        seen.observe(&[behind.clone(), ahead.clone()], at(0));
        assert_eq!(seen.unchanged_for(&behind, at(7)), secs(7));
        assert_eq!(seen.unchanged_for(&ahead, at(7)), secs(7));
    }

    #[test]
    fn duplicate_numbers_are_aged_separately() {
        let x = ShardEntry::held(0, "x", WallTime::from_unix_seconds(1));
        let y = ShardEntry::held(0, "y", WallTime::from_unix_seconds(1));
        let mut seen = ChangeObserver::new();
        seen.observe(std::slice::from_ref(&x), at(0));
        seen.observe(&[x.clone(), y.clone()], at(30));
        assert_eq!(seen.unchanged_for(&x, at(40)), secs(40));
        assert_eq!(seen.unchanged_for(&y, at(40)), secs(10));
    }
}
