//! `consistent-hashing`: consistent hashing with bounded loads, weighted by application
//! count (`sharding.go:171-239`, `consistent.go`).

use std::collections::HashMap;

use blake2b_simd::many::{HashManyJob, hash_many};

use crate::model::{App, Cluster};

/// Virtual nodes per shard upstream.
const REPLICATION_FACTOR: u32 = 1000;

/// Upstream's hash: the first 8 bytes of unkeyed BLAKE2b-512, read little-endian.
pub fn argo_hash(key: &[u8]) -> u64 {
    first_word(blake2b_simd::blake2b(key).as_bytes())
}

fn first_word(digest: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&digest[..8]);
    u64::from_le_bytes(word)
}

/// [`argo_hash`] over many keys at once (SIMD lanes where the CPU has them).
fn argo_hash_many<K: AsRef<[u8]>>(keys: &[K]) -> Vec<u64> {
    let params = blake2b_simd::Params::new();
    let mut jobs: Vec<HashManyJob<'_>> = keys
        .iter()
        .map(|k| HashManyJob::new(&params, k.as_ref()))
        .collect();
    hash_many(jobs.iter_mut());
    jobs.iter()
        .map(|j| first_word(j.to_hash().as_bytes()))
        .collect()
}

/// The hash ring of upstream's `consistent.New()` after `Add("0") … Add("R-1")`: 1000
/// points per shard with keys `"{shard}{i}"`, where an identical key (from R = 12 on, e.g.
/// `"110"`) belongs to the later, higher-numbered shard (W6).
#[derive(Debug, Clone)]
pub struct ConsistentHashRing {
    replicas: u32,
    /// Ring points sorted by hash, each with its owning shard; hashes are distinct.
    points: Vec<(u64, u32)>,
}

impl ConsistentHashRing {
    /// Builds the ring for `replicas` shards.
    pub fn new(replicas: u32) -> Self {
        let mut keys = Vec::with_capacity(replicas as usize * REPLICATION_FACTOR as usize);
        for shard in 0..replicas {
            for i in 0..REPLICATION_FACTOR {
                keys.push(format!("{shard}{i}"));
            }
        }
        let hashes = argo_hash_many(&keys);
        let mut points: Vec<(u64, u32)> = hashes
            .into_iter()
            .enumerate()
            .map(|(k, h)| (h, (k / REPLICATION_FACTOR as usize) as u32))
            .collect();
        points.sort_unstable();
        // Equal hashes collapse into one point; the map write of the later (higher) shard
        // wins, which after sorting by (hash, shard) is the last of each run.
        let mut deduped: Vec<(u64, u32)> = Vec::with_capacity(points.len());
        for p in points {
            match deduped.last_mut() {
                Some(last) if last.0 == p.0 => *last = p,
                _ => deduped.push(p),
            }
        }
        ConsistentHashRing {
            replicas,
            points: deduped,
        }
    }

    /// The replica count the ring was built for.
    pub fn replicas(&self) -> u32 {
        self.replicas
    }

    /// Distinct ring points owned by each shard (1000 each for R ≤ 11; fewer for some
    /// shards above, because of key collisions).
    pub fn points_per_shard(&self) -> Vec<usize> {
        let mut counts = vec![0; self.replicas as usize];
        for &(_, s) in &self.points {
            counts[s as usize] += 1;
        }
        counts
    }

    /// Index of the first point strictly after `hash`, wrapping around.
    fn first_after(&self, hash: u64) -> usize {
        let i = self.points.partition_point(|&(h, _)| h <= hash);
        if i == self.points.len() { 0 } else { i }
    }
}

/// Upstream's `loadOK` bound: `ceil(max(1, (total + 1) / replicas) × 1.25)`, with the
/// integer division first.
pub(super) fn load_bound(total: u64, replicas: u32) -> u64 {
    let avg = ((total + 1) / u64::from(replicas)).max(1);
    // ceil(avg * 1.25) exactly, without floating point.
    (5 * avg).div_ceil(4)
}

/// Places every cluster, in id-sorted order, on the least-far shard under the bound
/// (`createConsistentHashingWithBoundLoads`). Returns `id → shard`; of equal ids the last
/// processed wins.
pub(super) fn place<'a>(
    ring: &ConsistentHashRing,
    clusters: &[&'a Cluster],
    apps: &[App],
) -> HashMap<&'a str, u32> {
    let sorted = super::sorted_by_id(clusters);
    let app_counts = super::argo_app_counts(apps);
    let ids: Vec<&[u8]> = sorted.iter().map(|c| c.id.as_bytes()).collect();
    let hashes = argo_hash_many(&ids);

    let mut load = vec![0u64; ring.replicas as usize];
    let mut total = 0u64;
    let mut out = HashMap::with_capacity(sorted.len());
    for (c, h) in sorted.into_iter().zip(hashes) {
        let bound = load_bound(total, ring.replicas);
        let mut i = ring.first_after(h);
        // Terminates: the bound exceeds the mean, so some shard is always under it.
        let shard = loop {
            let s = ring.points[i].1;
            if load[s as usize] < bound {
                break s;
            }
            i += 1;
            if i == ring.points.len() {
                i = 0;
            }
        };
        out.insert(c.id.as_str(), shard);
        let n = app_counts.get(c.server.as_str()).copied().unwrap_or(0);
        load[shard as usize] += n;
        total += n;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_vectors() {
        assert_eq!(argo_hash(b""), 0x0359_0142_f702_6a78);
        assert_eq!(argo_hash(b"00"), 0x2689_45de_f254_477a);
        assert_eq!(argo_hash(b"1"), 0xa623_dbe2_5b8f_ed1c);
        assert_eq!(
            argo_hash_many(&["", "00", "1"]),
            vec![argo_hash(b""), argo_hash(b"00"), argo_hash(b"1")]
        );
    }

    #[test]
    fn bound_table() {
        // avg:   0→1 1 2 3 4 5 8 10 100  (total = avg*replicas - 1 with replicas 1)
        let cases = [
            (0, 2),
            (1, 2),
            (2, 3),
            (3, 4),
            (4, 5),
            (5, 7),
            (8, 10),
            (10, 13),
            (100, 125),
        ];
        for (avg, bound) in cases {
            let total = if avg == 0 { 0 } else { avg - 1 };
            assert_eq!(load_bound(total, 1), bound, "avg {avg}");
        }
        // (T+1)/n truncates first: T=4, n=3 → avg 1 → bound 2.
        assert_eq!(load_bound(4, 3), 2);
    }

    #[test]
    fn ring_collisions_match_upstream_counts() {
        for r in 1..=11 {
            assert!(
                ConsistentHashRing::new(r)
                    .points_per_shard()
                    .iter()
                    .all(|&n| n == 1000)
            );
        }
        assert_eq!(ConsistentHashRing::new(12).points_per_shard()[1], 900);
        assert_eq!(ConsistentHashRing::new(20).points_per_shard()[1], 100);
        let r50 = ConsistentHashRing::new(50).points_per_shard();
        assert_eq!(&r50[1..5], &[100, 100, 100, 100]);
        let r100 = ConsistentHashRing::new(100);
        let p100 = r100.points_per_shard();
        assert!(p100[1..10].iter().all(|&n| n == 100));
        assert_eq!(r100.points.len(), 91_900);
        let p128 = ConsistentHashRing::new(128).points_per_shard();
        assert_eq!(p128[1], 80);
        assert!(p128[2..12].iter().all(|&n| n == 100));
        assert_eq!(p128[12], 300);
        assert_eq!(p128[0], 1000, "shard 0 never collides");
        assert!(p128.iter().all(|&n| n >= 10));
    }
}
