//! What each replica says about its inventory, so that replicas (and `fleetshard status`)
//! notice when they do not see the same fleet: a digest of the clusters, their count, the
//! inventory's problems (duplicate ids or servers, unreadable objects), and — from the
//! distributor — a drop of clusters it is holding back (`replica/guard.rs`).
//!
//! It is a record of its own, `inventory/<identity>` under the root, written only when
//! what it says changes (never renewed): its holder is live while the holder's shard,
//! presence or distributor record with the same incarnation is. A record of its own rather
//! than a field of the lease records because those refuse unknown fields (a field written
//! by a newer release may change what a lease means): a field added there would make every
//! older replica read a newer one's lease as unreadable during a rolling upgrade — and an
//! unreadable live shard record holds the handover barrier (it acknowledged nothing) until
//! it expires. Older releases ignore keys they do not know, so this record costs them
//! nothing.

use fleetshard_core::Cluster;
use serde::{Deserialize, Serialize};

/// Key of a replica's inventory record.
pub fn inventory_key(root: &str, identity: &str) -> String {
    format!("{root}inventory/{identity}")
}

/// A replica's inventory as it publishes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InventoryRecord {
    /// The replica's identity.
    pub holder: String,
    /// Its incarnation: the record speaks for that process only.
    pub incarnation: u64,
    /// [`inventory_digest`] of its clusters, as [`digest_text`] (16 hex digits).
    pub digest: String,
    /// How many clusters its inventory has.
    pub clusters: u64,
    /// How many problems its inventory has (duplicate ids or servers, unreadable objects:
    /// its log names them, `fleetshard_inventory_problems` counts them by severity).
    #[serde(default)]
    pub problems: u64,
    /// From the distributor: a drop of clusters it holds back, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_back: Option<HeldBackRecord>,
    /// The fenced protocol revision its writer speaks ([`PROTOCOL`]); absent from older
    /// releases' records (which read this record without refusing unknown fields, so the
    /// field is safe to add).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<u32>,
}

/// The fenced protocol revision this release speaks, announced in its inventory record:
/// 2 = the distributor role bound to its holder's shard record (`role.rs`). A replica
/// without it (an older release, or one that has not published its inventory yet) keeps
/// the distributor on the separate, renewed lease.
pub const PROTOCOL: u32 = 2;

/// A drop of clusters the distributor holds back, as published.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldBackRecord {
    /// The committed generation's clusters.
    pub previous: u64,
    /// How many of them the inventory no longer has (kept assigned meanwhile).
    pub dropped: u64,
    /// How long the smaller view must hold, unchanged, before it is committed (seconds).
    pub grace_secs: u64,
}

/// What a replica's inventory looks like, given to the replica by its runner whenever it
/// changes ([`crate::fenced::Replica::set_inventory`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct InventorySummary {
    /// [`inventory_digest`] of the clusters.
    pub digest: u64,
    /// How many clusters.
    pub clusters: u64,
    /// How many problems the inventory has.
    pub problems: u64,
}

impl InventorySummary {
    /// The summary of `clusters` with `problems` problems: O(N log N), run it off any
    /// task that renews leases.
    pub fn of(clusters: &[Cluster], problems: usize) -> Self {
        InventorySummary {
            digest: inventory_digest(clusters),
            clusters: clusters.len() as u64,
            problems: problems as u64,
        }
    }
}

/// A digest of what placement and ownership depend on in `clusters` — each cluster's id,
/// server, pinned shard and zone — independent of their order, stable across releases and
/// platforms (FNV-1a, 64 bits, over the sorted clusters, every field length-prefixed).
/// Names, labels other than the zone and loads are left out: replicas that agree on these
/// four agree on who owns what.
pub fn inventory_digest(clusters: &[Cluster]) -> u64 {
    let mut keys: Vec<(&str, &str, Option<i64>, Option<&str>)> = clusters
        .iter()
        .map(|c| (c.id.as_str(), c.server.as_str(), c.shard, c.zone()))
        .collect();
    keys.sort_unstable();
    let mut h = Fnv64::new();
    h.u64(keys.len() as u64);
    for (id, server, pin, zone) in keys {
        h.str(id);
        h.str(server);
        match pin {
            Some(p) => {
                h.u64(1);
                h.u64(p as u64);
            }
            None => h.u64(0),
        }
        match zone {
            Some(z) => {
                h.u64(1);
                h.str(z);
            }
            None => h.u64(0),
        }
    }
    h.0
}

/// A digest of a set of ids given in order (the drop guard's "which clusters went").
pub fn ids_digest<'a>(ids: impl Iterator<Item = &'a str>) -> u64 {
    let mut h = Fnv64::new();
    for id in ids {
        h.str(id);
    }
    h.0
}

/// A digest as people read it, the one form everywhere: 16 hexadecimal digits.
pub fn digest_text(digest: u64) -> String {
    format!("{digest:016x}")
}

/// FNV-1a, 64 bits: spelled out, so the digest never depends on a library's hasher.
struct Fnv64(u64);

impl Fnv64 {
    fn new() -> Self {
        Fnv64(0xcbf2_9ce4_8422_2325)
    }

    fn bytes(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    fn u64(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }

    fn str(&mut self, s: &str) {
        self.u64(s.len() as u64);
        self.bytes(s.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(id: &str, server: &str) -> Cluster {
        Cluster::new(id, server)
    }

    #[test]
    fn the_digest_ignores_order_and_sees_every_field_it_covers() {
        let a = cluster("a", "https://a");
        let b = cluster("b", "https://b");
        let base = inventory_digest(&[a.clone(), b.clone()]);
        assert_eq!(base, inventory_digest(&[b.clone(), a.clone()]));
        // Fixed by definition: the same on every platform and release.
        assert_eq!(digest_text(inventory_digest(&[])), "a8c7f832281a39c5");
        let mut pinned = a.clone();
        pinned.shard = Some(1);
        let mut zoned = a.clone();
        zoned
            .labels
            .insert(fleetshard_core::model::ZONE_LABEL.into(), "z1".into());
        let moved = cluster("a", "https://a2");
        for other in [pinned, zoned, moved] {
            assert_ne!(base, inventory_digest(&[other, b.clone()]));
        }
        assert_ne!(base, inventory_digest(std::slice::from_ref(&a)));
        // Field boundaries count: ("ab", "c") is not ("a", "bc").
        assert_ne!(
            inventory_digest(&[cluster("ab", "https://c")]),
            inventory_digest(&[cluster("a", "https://bc")]),
        );
        let mut named = a.clone();
        named.name = "renamed".into();
        assert_eq!(base, inventory_digest(&[named, b]));
    }

    #[test]
    fn records_without_the_optional_fields_still_decode() {
        let r: InventoryRecord = serde_json::from_str(
            r#"{"holder":"a","incarnation":1,"digest":"00000000000000ff","clusters":3}"#,
        )
        .unwrap();
        assert_eq!((r.problems, r.held_back), (0, None));
    }
}
