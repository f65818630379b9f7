//! Making a decoded mapping safe to act on (W20).
//!
//! Argo CD trusts the list: entries are appended by count, `ShardNumber` is never checked,
//! so a hand-edited or half-written map can hand out one shard twice or a shard that does
//! not exist. fleetshard first brings the list into a shape every replica can act on, with
//! a rule that depends on the list alone, so that all replicas repair it the same way and do
//! not fight over it.

use std::collections::{BTreeMap, BTreeSet};

use super::claim::{ClaimError, MAX_REPLICAS, Warning};
use super::mapping::ShardEntry;
use super::time::WallTime;

/// The mapping for `replicas` shards, repaired: exactly one entry for each shard number
/// `0..replicas`, no identity holding two entries, every heartbeat readable back.
///
/// The rule, applied in this order:
/// 1. Entries numbered `replicas` or more are dropped: that is a scale-down (W11: only the
///    removed shards' entries go; every other owner keeps its entry). Negative numbers are
///    dropped too. A number that is negative or not below the list's length cannot come
///    from Argo CD's own appends and is reported ([`Warning::ShardNumberOutOfRange`]).
/// 2. Of two entries with one number, a held entry wins over a free one, otherwise the first
///    in list order (the one Argo CD's readers find first); the other is dropped
///    ([`Warning::DuplicateShardNumber`]).
/// 3. An identity holding several entries keeps the first in list order (the one Argo CD's
///    hostname lookup finds); the others are freed ([`Warning::DuplicateController`]).
/// 4. A heartbeat outside the years 0–9999, which Go writes but cannot read back, is
///    clamped into them ([`Warning::UnreadableHeartbeat`]).
/// 5. Missing numbers are appended as free entries in ascending order; one below the list's
///    length is a gap and is reported ([`Warning::MissingShardNumber`]); one beyond it is a
///    scale-up.
///
/// Kept entries stay in their list order, so a list that needs no repair comes back equal.
/// Errors only for a replica count the mapping cannot represent (zero, or above
/// [`MAX_REPLICAS`]).
pub fn repair(
    entries: &[ShardEntry],
    replicas: u32,
) -> Result<(Vec<ShardEntry>, Vec<Warning>), ClaimError> {
    if replicas == 0 {
        return Err(ClaimError::NoReplicas);
    }
    if replicas > MAX_REPLICAS {
        return Err(ClaimError::TooManyReplicas {
            replicas,
            max: MAX_REPLICAS,
        });
    }
    let len = entries.len();
    let mut warnings = Vec::new();
    let mut list: Vec<ShardEntry> = Vec::with_capacity(replicas as usize);
    // Shard number → index in `list`.
    let mut slot: BTreeMap<u32, usize> = BTreeMap::new();

    for entry in entries {
        let number = entry.shard_number;
        let in_list_range = usize::try_from(number).is_ok_and(|n| n < len);
        let wanted = u32::try_from(number).ok().filter(|&n| n < replicas);
        if !in_list_range {
            warnings.push(Warning::ShardNumberOutOfRange {
                shard: number,
                controller: entry.controller_name.clone(),
                entries: len,
                kept: wanted.is_some(),
            });
        }
        let Some(number) = wanted else {
            continue;
        };
        let mut entry = entry.clone();
        if !entry.heartbeat_time.is_readable() {
            let replaced_by = entry
                .heartbeat_time
                .clamp(WallTime::EARLIEST_READABLE, WallTime::LATEST_READABLE)
                .truncated();
            warnings.push(Warning::UnreadableHeartbeat {
                shard: number,
                controller: entry.controller_name.clone(),
                time: entry.heartbeat_time,
                replaced_by,
            });
            entry.heartbeat_time = replaced_by;
        }
        match slot.get(&number) {
            None => {
                slot.insert(number, list.len());
                list.push(entry);
            }
            Some(&at) => {
                let first = &mut list[at];
                let (kept, dropped) = if first.is_free() && !entry.is_free() {
                    let dropped = std::mem::replace(first, entry);
                    (first.controller_name.clone(), dropped.controller_name)
                } else {
                    (first.controller_name.clone(), entry.controller_name)
                };
                warnings.push(Warning::DuplicateShardNumber {
                    shard: number,
                    kept,
                    dropped,
                });
            }
        }
    }

    let mut holders: BTreeMap<String, u32> = BTreeMap::new();
    for entry in &mut list {
        if entry.is_free() {
            continue;
        }
        let number = shard_of(entry);
        match holders.get(&entry.controller_name) {
            None => {
                holders.insert(entry.controller_name.clone(), number);
            }
            Some(&kept) => {
                warnings.push(Warning::DuplicateController {
                    controller: std::mem::take(&mut entry.controller_name),
                    kept,
                    released: number,
                });
                *entry = ShardEntry::free(entry.shard_number);
            }
        }
    }

    let present: BTreeSet<u32> = slot.into_keys().collect();
    for number in (0..replicas).filter(|n| !present.contains(n)) {
        if (number as usize) < len {
            warnings.push(Warning::MissingShardNumber { shard: number });
        }
        list.push(ShardEntry::free(i64::from(number)));
    }
    Ok((list, warnings))
}

/// The shard number of an entry [`repair`] kept (always in `0..replicas`).
pub(crate) fn shard_of(entry: &ShardEntry) -> u32 {
    u32::try_from(entry.shard_number).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests;
