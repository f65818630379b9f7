//! A listing of a fleet's root, read the one way everything reads it: keys classified by
//! [`RecordKey::classify`] (the key layout lives here and in `records.rs` only) and values
//! decoded with the same checks the replica applies. The replica judges leases on top of
//! this; `fleetshard status` shows it as it is.

use std::collections::BTreeMap;

use super::MAX_SHARDS;
use super::inventory::InventoryRecord;
use super::records::{
    AssignmentDoc, CorruptRecord, DesiredShards, DistributorRecord, PresenceRecord, ShardRecord,
    decode, decode_lease,
};
use crate::store::Listing;

/// What a key under a fleet's root is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordKey<'a> {
    /// The distributor lease.
    Distributor,
    /// The committed assignment.
    Assignment,
    /// The desired shard count.
    DesiredShards,
    /// Shard `n`'s lease (`n` below [`MAX_SHARDS`]).
    Shard(u32),
    /// A spare's presence record, by identity.
    Presence(&'a str),
    /// A replica's inventory record, by identity (`inventory.rs`).
    Inventory(&'a str),
    /// Under `shards/` but not a shard number below [`MAX_SHARDS`]: reported, never read.
    NotAShard,
    /// Anything else (another fleet's keys, app statuses beside the root): ignored.
    Other,
}

impl<'a> RecordKey<'a> {
    /// Classifies `key` under `root`.
    pub fn classify(root: &str, key: &'a str) -> RecordKey<'a> {
        let Some(rest) = key.strip_prefix(root) else {
            return RecordKey::Other;
        };
        match rest {
            "distributor" => RecordKey::Distributor,
            "assignment" => RecordKey::Assignment,
            "desired-shards" => RecordKey::DesiredShards,
            _ => {
                if let Some(n) = rest.strip_prefix("shards/") {
                    return n
                        .parse::<u32>()
                        .ok()
                        .filter(|&num| num < MAX_SHARDS && num.to_string() == n)
                        .map_or(RecordKey::NotAShard, RecordKey::Shard);
                }
                if let Some(id) = rest.strip_prefix("inventory/").filter(|id| !id.is_empty()) {
                    return RecordKey::Inventory(id);
                }
                match rest.strip_prefix("replicas/") {
                    Some(id) if !id.is_empty() => RecordKey::Presence(id),
                    _ => RecordKey::Other,
                }
            }
        }
    }
}

/// What is wrong with a key classified [`RecordKey::NotAShard`].
pub fn not_a_shard(key: &str) -> CorruptRecord {
    CorruptRecord {
        key: key.to_owned(),
        reason: format!("not a shard number below {MAX_SHARDS}"),
    }
}

/// Decodes the desired shard count, refusing one outside `1..=MAX_SHARDS`.
pub fn decode_desired(key: &str, value: &[u8]) -> Result<u32, CorruptRecord> {
    let d = decode::<DesiredShards>(key, value)?;
    if (1..=MAX_SHARDS).contains(&d.shards) {
        Ok(d.shards)
    } else {
        Err(CorruptRecord {
            key: key.to_owned(),
            reason: format!("shards: {} is outside 1..={MAX_SHARDS}", d.shards),
        })
    }
}

/// A listing of a fleet's root, decoded. Every record keeps the version it was read at.
#[derive(Debug, Clone, Default)]
pub struct FencedSnapshot {
    /// Shard lease records by number (also those beyond the current count).
    pub shards: BTreeMap<u32, (u64, ShardRecord)>,
    /// The distributor lease record.
    pub distributor: Option<(u64, DistributorRecord)>,
    /// Presence records by identity.
    pub presence: BTreeMap<String, (u64, PresenceRecord)>,
    /// Inventory records by identity.
    pub inventories: BTreeMap<String, (u64, InventoryRecord)>,
    /// The committed assignment.
    pub assignment: Option<(u64, AssignmentDoc)>,
    /// The desired shard count (`fleetshard scale`).
    pub desired: Option<u32>,
    /// Records that could not be read, with their keys and reasons.
    pub corrupt: Vec<CorruptRecord>,
}

impl FencedSnapshot {
    /// Decodes the records of `root` in `listing`.
    pub fn decode(root: &str, listing: &Listing) -> FencedSnapshot {
        let mut s = FencedSnapshot::default();
        for e in &listing.entries {
            let (key, value, version) = (e.key.as_str(), e.value.as_slice(), e.version);
            let result = match RecordKey::classify(root, key) {
                RecordKey::Distributor => decode_lease::<DistributorRecord>(key, value)
                    .map(|r| s.distributor = Some((version, r))),
                RecordKey::Assignment => {
                    decode::<AssignmentDoc>(key, value).map(|d| s.assignment = Some((version, d)))
                }
                RecordKey::DesiredShards => decode_desired(key, value).map(|n| s.desired = Some(n)),
                RecordKey::Shard(n) => decode_lease::<ShardRecord>(key, value).map(|r| {
                    s.shards.insert(n, (version, r));
                }),
                RecordKey::Presence(id) => decode_lease::<PresenceRecord>(key, value).map(|r| {
                    s.presence.insert(id.to_owned(), (version, r));
                }),
                RecordKey::Inventory(id) => decode_lease::<InventoryRecord>(key, value).map(|r| {
                    s.inventories.insert(id.to_owned(), (version, r));
                }),
                RecordKey::NotAShard => Err(not_a_shard(key)),
                RecordKey::Other => Ok(()),
            };
            if let Err(c) = result {
                s.corrupt.push(c);
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fenced::records::{
        assignment_key, desired_shards_key, distributor_key, encode, presence_key, shard_key,
    };
    use crate::store::Entry;

    #[test]
    fn keys_are_classified_as_the_records_module_writes_them() {
        let root = "f/";
        assert_eq!(
            RecordKey::classify(root, &distributor_key(root)),
            RecordKey::Distributor
        );
        assert_eq!(
            RecordKey::classify(root, &assignment_key(root)),
            RecordKey::Assignment
        );
        assert_eq!(
            RecordKey::classify(root, &desired_shards_key(root)),
            RecordKey::DesiredShards
        );
        assert_eq!(
            RecordKey::classify(root, &shard_key(root, 7)),
            RecordKey::Shard(7)
        );
        assert_eq!(
            RecordKey::classify(root, &presence_key(root, "pod-a")),
            RecordKey::Presence("pod-a")
        );
        assert_eq!(
            RecordKey::classify(root, &crate::fenced::inventory_key(root, "pod-a")),
            RecordKey::Inventory("pod-a")
        );
        for bad in ["f/shards/x", "f/shards/4096", "f/shards/01", "f/shards/"] {
            assert_eq!(
                RecordKey::classify(root, bad),
                RecordKey::NotAShard,
                "{bad}"
            );
        }
        for other in [
            "g/distributor",
            "f/replicas/",
            "f/inventory/",
            "f/assignments",
            "fleetshard-status/apps/a/b",
        ] {
            assert_eq!(
                RecordKey::classify(root, other),
                RecordKey::Other,
                "{other}"
            );
        }
    }

    #[test]
    fn a_snapshot_keeps_what_decodes_and_names_what_does_not() {
        let root = "f/";
        let entry = |key: String, value: Vec<u8>, version| Entry {
            key,
            value,
            version,
        };
        let shard = ShardRecord {
            holder: "a".into(),
            incarnation: 1,
            beat: 1,
            acked: 0,
            released: false,
            zone: None,
            capacity: None,
        };
        let listing = Listing {
            revision: 9,
            entries: vec![
                entry(shard_key(root, 0), encode(&shard), 3),
                entry(shard_key(root, 1), b"garbage".to_vec(), 4),
                entry(desired_shards_key(root), br#"{"shards":0}"#.to_vec(), 5),
                entry(assignment_key(root), b"{".to_vec(), 6),
            ],
        };
        let s = FencedSnapshot::decode(root, &listing);
        assert_eq!(s.shards.get(&0), Some(&(3, shard)));
        assert_eq!(s.desired, None);
        assert!(s.assignment.is_none());
        let keys: Vec<&str> = s.corrupt.iter().map(|c| c.key.as_str()).collect();
        assert_eq!(keys, ["f/shards/1", "f/desired-shards", "f/assignment"]);
        assert!(
            s.corrupt[1].reason.contains("outside 1..="),
            "{}",
            s.corrupt[1]
        );
    }
}
