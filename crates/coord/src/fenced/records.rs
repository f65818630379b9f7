//! What fenced lease mode keeps in the store, and its encoding (JSON: readable with any
//! store's own tools). A record that does not decode is reported, never read as absent: a
//! lease record counts as present at its version (judged and claimed like any other), and
//! the last good assignment and desired count are kept by whoever had them (G7).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Key of shard `n`'s lease record, under `root`.
pub fn shard_key(root: &str, n: u32) -> String {
    format!("{root}shards/{n}")
}

/// Key of the distributor lease.
pub fn distributor_key(root: &str) -> String {
    format!("{root}distributor")
}

/// Key of the committed assignment.
pub fn assignment_key(root: &str) -> String {
    format!("{root}assignment")
}

/// Key of a replica's presence record (written while it holds no shard: a spare).
pub fn presence_key(root: &str, identity: &str) -> String {
    format!("{root}replicas/{identity}")
}

/// Key of the desired shard count (`fleetshard scale N`).
pub fn desired_shards_key(root: &str) -> String {
    format!("{root}desired-shards")
}

/// Whether `key` is a lease record (renewed by its holder, about once a second) under any
/// fleet root: its path after the root is `shards/N`, `distributor` or `replicas/ID`, i.e.
/// its last segment is `distributor`, or its last two are `shards` and a shard number, or
/// `replicas` and an identity. Backends with a native lease object (Kubernetes) store these
/// keys there.
pub fn is_lease_key(key: &str) -> bool {
    let mut segments = key.rsplit('/');
    let last = segments.next().unwrap_or_default();
    match (last, segments.next()) {
        ("distributor", _) => true,
        (n, Some("shards")) => n.parse::<u32>().is_ok_and(|n| n.to_string() == last),
        (id, Some("replicas")) => !id.is_empty(),
        _ => false,
    }
}

/// A shard's lease record, rewritten by its holder every renew.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardRecord {
    /// The holder's identity (stable across restarts: the pod name).
    pub holder: String,
    /// The holder process's incarnation (new at every start).
    pub incarnation: u64,
    /// Renew counter: every renew changes the record, which is what observers watch.
    pub beat: u64,
    /// The highest assignment generation the holder has applied (stopped what it lost).
    pub acked: u64,
    /// The holder gave the shard up (graceful shutdown): it is free at once.
    #[serde(default)]
    pub released: bool,
    /// The holder's zone (`--zone`), for zone-aware placement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// The holder's capacity (`--capacity`, by default its CPUs), for capacity-aware
    /// placement. Absent in records of older releases: shares are then equal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<u32>,
}

/// The distributor role's record, in one of two forms (`role.rs`):
///
/// - **bound** (`shard` set): written once, when the role is taken; the role lives as long
///   as that shard's record names the same holder and incarnation, unreleased and live, so
///   the holder's shard renewals confirm it and the record itself is never renewed;
/// - **separate** (`shard` absent, byte for byte the older releases' lease): renewed like a
///   lease and judged by its own version. Written while any live replica has not announced
///   the bound form (an older release, which refuses the `shard` field and would take an
///   unrenewed record over).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DistributorRecord {
    /// Holder identity.
    pub holder: String,
    /// Holder incarnation.
    pub incarnation: u64,
    /// Renew counter.
    pub beat: u64,
    /// The holder gave the role up (graceful shutdown): anyone may take it at once.
    #[serde(default)]
    pub released: bool,
    /// The shard whose record carries the role (the bound form), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<u32>,
}

/// A replica's presence while it holds no shard, renewed like a lease: it is how the
/// distributor counts spares (for `auto` shard counts) and how `status` lists them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PresenceRecord {
    /// Holder identity.
    pub holder: String,
    /// Holder incarnation.
    pub incarnation: u64,
    /// Renew counter.
    pub beat: u64,
    /// The replica holds a shard now, or stopped: it is not a spare.
    #[serde(default)]
    pub released: bool,
}

/// The shard count an operator asked for (`fleetshard scale N`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DesiredShards {
    /// Shards wanted.
    pub shards: u32,
}

/// A committed assignment generation.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AssignmentDoc {
    /// Generation number; each commit is the previous plus one.
    pub generation: u64,
    /// Shard count the assignment is for.
    pub shards: u32,
    /// Cluster id → shard.
    pub clusters: BTreeMap<String, u32>,
    /// Clusters displaced from a vacant shard → that shard.
    #[serde(default)]
    pub homes: BTreeMap<String, u32>,
}

/// An incarnation as people read it, the one form everywhere (status table and JSON,
/// logs): 16 hexadecimal digits. A string, because JSON numbers above 2^53 lose digits in
/// JavaScript and jq.
pub fn incarnation_text(incarnation: u64) -> String {
    format!("{incarnation:016x}")
}

/// A record that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: not a valid record: {reason}")]
pub struct CorruptRecord {
    /// The key.
    pub key: String,
    /// What is wrong.
    pub reason: String,
}

/// Encodes a record.
pub fn encode<T: Serialize>(record: &T) -> Vec<u8> {
    // Serialising these plain structs cannot fail.
    serde_json::to_vec(record).unwrap_or_default()
}

/// The largest lease record (shard, distributor, presence) read: a real one is about 150
/// bytes, so anything bigger is refused as corrupt without being parsed.
pub const MAX_LEASE_RECORD_BYTES: usize = 64 * 1024;

/// Decodes a record, naming the key on failure. Records refuse unknown fields: a field
/// written by a newer release may change what the record means, so it is reported as
/// unreadable (and, for a lease, judged by its version like any other) rather than read
/// with the field silently dropped.
pub fn decode<T: for<'de> Deserialize<'de>>(key: &str, bytes: &[u8]) -> Result<T, CorruptRecord> {
    serde_json::from_slice(bytes).map_err(|e| CorruptRecord {
        key: key.to_owned(),
        reason: e.to_string(),
    })
}

/// Decodes a lease record, refusing one over [`MAX_LEASE_RECORD_BYTES`] unparsed.
pub fn decode_lease<T: for<'de> Deserialize<'de>>(
    key: &str,
    bytes: &[u8],
) -> Result<T, CorruptRecord> {
    if bytes.len() > MAX_LEASE_RECORD_BYTES {
        return Err(CorruptRecord {
            key: key.to_owned(),
            reason: format!(
                "{} bytes, more than a lease record's {MAX_LEASE_RECORD_BYTES}",
                bytes.len()
            ),
        });
    }
    decode(key, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_keys_are_recognised_under_any_root() {
        for k in [
            "fleetshard/shards/0",
            "a/b/shards/12",
            "shards/3",
            "fleetshard/distributor",
            "distributor",
            "fleetshard/replicas/pod-a",
        ] {
            assert!(is_lease_key(k), "{k}");
        }
        for k in [
            "fleetshard/assignment",
            "fleetshard/config/shards",
            "fleetshard/shards/01",
            "fleetshard/shards/x",
            "fleetshard/shards/",
            "fleetshard/replicas/",
            "fleetshard/distributors",
            "",
        ] {
            assert!(!is_lease_key(k), "{k}");
        }
        assert!(is_lease_key(&shard_key("r/", 7)) && is_lease_key(&distributor_key("r/")));
        assert!(!is_lease_key(&assignment_key("r/")));
    }

    #[test]
    fn records_round_trip_and_garbage_is_refused() {
        let r = ShardRecord {
            holder: "pod-a".into(),
            incarnation: 7,
            beat: 3,
            acked: 2,
            released: false,
            zone: None,
            capacity: None,
        };
        assert_eq!(decode::<ShardRecord>("k", &encode(&r)).unwrap(), r);
        let sized = ShardRecord {
            capacity: Some(4),
            ..r.clone()
        };
        assert_eq!(decode::<ShardRecord>("k", &encode(&sized)).unwrap(), sized);
        // A record of an older release, without a capacity, still reads.
        let old = br#"{"holder":"pod-a","incarnation":7,"beat":3,"acked":2,"zone":"z"}"#;
        assert_eq!(decode::<ShardRecord>("k", old).unwrap().capacity, None);
        let e = decode::<ShardRecord>("fleetshard/shards/1", b"{\"holder\":1}").unwrap_err();
        assert_eq!(e.key, "fleetshard/shards/1");
        assert!(
            decode::<AssignmentDoc>(
                "a",
                b"{\"generation\":1,\"shards\":2,\"clusters\":{},\"extra\":0}"
            )
            .is_err()
        );
    }
}
