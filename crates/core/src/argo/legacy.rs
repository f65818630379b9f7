//! `legacy`: FNV-1a 32 of the cluster id modulo the replica count (`sharding.go:106-132`).

use super::ArgoShard;

/// FNV-1a, 32 bits, over the bytes: offset basis `0x811C9DC5`, prime `0x01000193`.
pub fn fnv1a32(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811C_9DC5_u32, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// The legacy shard of an unpinned cluster; `replicas` is non-zero.
pub(super) fn shard(id: &str, replicas: u32) -> ArgoShard {
    if id.is_empty() {
        return 0;
    }
    // Upstream: int(int32(fnv % uint32(replicas))); the value is < replicas <= i32::MAX.
    i64::from(fnv1a32(id.as_bytes()) % replicas)
}
