//! The consistent-hashing ring's points for shards below [`TABLE_SHARDS`], precomputed at
//! build time (`crates/core/build.rs`) and sorted by (hash, shard).
//!
//! A point depends only on its shard and index (`argo_hash("{shard}{index}")`), so the ring
//! of any replica count `R ≤ TABLE_SHARDS` is the table's points of shards below `R`, in
//! the table's order: one pass, no hashing, no sort. Hashing the 100k points of R = 100 at
//! run time took about 25 ms, more than the rest of a cold computation together.

/// Shards covered by the table (the same constant as in `build.rs`).
pub(super) const TABLE_SHARDS: u32 = 128;

/// 9-byte records: the point's hash (little-endian), then its shard.
static POINTS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/ring_points.bin"));

/// The ring points of shards below `replicas` (at most [`TABLE_SHARDS`]), sorted by hash;
/// of equal hashes (equal keys, such as `"1"+"10"` and `"11"+"0"`) the higher shard's
/// point is kept, as upstream's later `Add` overwrites the earlier.
pub(super) fn points(replicas: u32) -> Vec<(u64, u32)> {
    debug_assert!(replicas <= TABLE_SHARDS);
    let mut out: Vec<(u64, u32)> = Vec::with_capacity(replicas as usize * 1000);
    for record in POINTS.chunks_exact(9) {
        let shard = u32::from(record[8]);
        if shard >= replicas {
            continue;
        }
        let mut word = [0u8; 8];
        word.copy_from_slice(&record[..8]);
        let point = (u64::from_le_bytes(word), shard);
        match out.last_mut() {
            // Sorted by (hash, shard): the later of equal hashes is the higher shard.
            Some(last) if last.0 == point.0 => *last = point,
            _ => out.push(point),
        }
    }
    out
}
