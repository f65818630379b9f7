//! Precomputes the points of Argo CD's consistent-hashing ring (`argo/ring_table.rs`).
//!
//! A ring point is a fixed function of its shard and index: the first 8 bytes, read
//! little-endian, of unkeyed BLAKE2b-512 of the key `"{shard}{index}"`. For shards below
//! `TABLE_SHARDS` every point is computed here once, sorted by (hash, shard), and written to
//! `$OUT_DIR/ring_points.bin` as 9-byte records (hash little-endian, then the shard), so
//! that building a ring at run time is one filtering pass instead of 100k hashes and a sort.

use std::io::Write;

/// Shards covered by the table; the ring of a larger replica count is hashed at run time.
/// Keep in step with `TABLE_SHARDS` in `src/argo/ring_table.rs`.
const TABLE_SHARDS: u32 = 128;
/// Virtual nodes per shard upstream.
const REPLICATION_FACTOR: u32 = 1000;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let mut points: Vec<(u64, u8)> =
        Vec::with_capacity((TABLE_SHARDS * REPLICATION_FACTOR) as usize);
    let mut key = Vec::with_capacity(16);
    for shard in 0..TABLE_SHARDS {
        for i in 0..REPLICATION_FACTOR {
            key.clear();
            write!(key, "{shard}{i}").expect("writing to a Vec cannot fail");
            let digest = blake2b_simd::blake2b(&key);
            let mut word = [0u8; 8];
            word.copy_from_slice(&digest.as_bytes()[..8]);
            let shard = u8::try_from(shard).expect("TABLE_SHARDS fits a byte");
            points.push((u64::from_le_bytes(word), shard));
        }
    }
    points.sort_unstable();
    let mut bytes = Vec::with_capacity(points.len() * 9);
    for (hash, shard) in points {
        bytes.extend_from_slice(&hash.to_le_bytes());
        bytes.push(shard);
    }
    let out = std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR for build scripts");
    let path = std::path::Path::new(&out).join("ring_points.bin");
    std::fs::write(&path, bytes).expect("writing the ring table to OUT_DIR");
}
