//! Rendezvous (highest-random-weight) preferences: each cluster ranks every shard by a
//! hash of (cluster id, shard). The ranking of the surviving shards never changes when a
//! shard is added or removed, which is what keeps movement minimal.
//!
//! The hashes are fixed here (FNV-1a 64 and the MurmurHash3 finaliser), not taken from
//! `std`, whose hasher may change between Rust releases: replicas built by different
//! compilers must agree.

/// MurmurHash3's 64-bit finaliser: a bijective mixer with full avalanche.
pub(super) fn mix64(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// A cluster's rendezvous key: FNV-1a of the id, mixed. Stable across processes and
/// versions (it is what placement is built on), so also what spreads other per-id work.
pub fn stable_hash(id: &str) -> u64 {
    let h = id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    mix64(h)
}

/// A shard's salt.
pub(super) fn shard_salt(shard: u32) -> u64 {
    mix64(u64::from(shard).wrapping_add(0x9e37_79b9_7f4a_7c15))
}

/// How much the cluster with `key` prefers the shard with `salt` (higher is preferred).
pub(super) fn score(key: u64, salt: u64) -> u64 {
    mix64(key ^ salt)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_pinned() {
        // These values are part of the placement contract: changing them moves clusters.
        assert_eq!(stable_hash(""), mix64(0xcbf2_9ce4_8422_2325));
        assert_eq!(mix64(0), 0);
        assert_eq!(
            score(stable_hash("a"), shard_salt(0)),
            score(stable_hash("a"), shard_salt(0))
        );
        assert_ne!(
            score(stable_hash("a"), shard_salt(0)),
            score(stable_hash("a"), shard_salt(1))
        );
        assert_eq!(
            stable_hash("cluster-1"),
            0x7ad6_b6ce_6335_e1c4,
            "hash drifted"
        );
    }
}
