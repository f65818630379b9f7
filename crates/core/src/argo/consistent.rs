//! `consistent-hashing`: consistent hashing with bounded loads, weighted by application
//! count (`sharding.go:171-239`, `consistent.go`).

use blake2b_simd::many::{HashManyJob, hash_many};

use super::counts::ServerCounts;
use super::ring_table;
use crate::model::Cluster;

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
    // In chunks, so the jobs (a few hundred bytes of state each) stay in cache.
    const CHUNK: usize = 128;
    let params = blake2b_simd::Params::new();
    let mut out = Vec::with_capacity(keys.len());
    let mut jobs: Vec<HashManyJob<'_>> = Vec::with_capacity(CHUNK);
    for chunk in keys.chunks(CHUNK) {
        jobs.clear();
        jobs.extend(chunk.iter().map(|k| HashManyJob::new(&params, k.as_ref())));
        hash_many(jobs.iter_mut());
        out.extend(jobs.iter().map(|j| first_word(j.to_hash().as_bytes())));
    }
    out
}

/// The hash ring of upstream's `consistent.New()` after `Add("0") … Add("R-1")`: 1000
/// points per shard with keys `"{shard}{i}"`, where an identical key (from R = 12 on, e.g.
/// `"110"`) belongs to the later, higher-numbered shard (W6).
#[derive(Debug, Clone)]
pub struct ConsistentHashRing {
    replicas: u32,
    /// Ring points sorted by hash, each with its owning shard; hashes are distinct.
    points: Vec<(u64, u32)>,
    /// Every shard's point hashes, shard by shard, each shard's sorted.
    by_shard: Vec<u64>,
    /// Where each shard's points start in `by_shard` (one more entry than shards).
    shard_starts: Vec<usize>,
    /// Where each run of points with the same top [`Self::prefix_bits`] bits of their hash
    /// starts in `points` (one more entry than there are prefixes), so that finding a hash's
    /// place reads about two points instead of searching 100k.
    starts: Vec<u32>,
    /// Bits of a hash that index `starts`: about one point per prefix.
    prefix_bits: u32,
}

impl ConsistentHashRing {
    /// Builds the ring for `replicas` shards: from the build-time table up to
    /// [`ring_table::TABLE_SHARDS`] shards, hashed here above.
    pub fn new(replicas: u32) -> Self {
        let points = if replicas <= ring_table::TABLE_SHARDS {
            ring_table::points(replicas)
        } else {
            Self::hashed_points(replicas)
        };
        // One buffer filled by counting sort: 100 vectors grown point by point cost
        // thousands of reallocations, slow right after a large load frees its memory.
        let mut shard_starts = vec![0; replicas as usize + 1];
        for &(_, s) in &points {
            shard_starts[s as usize + 1] += 1;
        }
        for s in 0..replicas as usize {
            shard_starts[s + 1] += shard_starts[s];
        }
        let mut by_shard = vec![0; points.len()];
        let mut next = shard_starts.clone();
        for &(h, s) in &points {
            by_shard[next[s as usize]] = h;
            next[s as usize] += 1;
        }
        let prefix_bits = points.len().max(2).ilog2().min(24);
        let mut starts = Vec::with_capacity((1 << prefix_bits) + 1);
        for (i, &(h, _)) in points.iter().enumerate() {
            let prefix = (h >> (64 - prefix_bits)) as usize;
            while starts.len() <= prefix {
                starts.push(i as u32);
            }
        }
        starts.resize((1 << prefix_bits) + 1, points.len() as u32);
        ConsistentHashRing {
            replicas,
            points,
            by_shard,
            shard_starts,
            starts,
            prefix_bits,
        }
    }

    /// The ring's points hashed at run time, sorted by hash; of equal hashes the higher
    /// shard's point is kept.
    fn hashed_points(replicas: u32) -> Vec<(u64, u32)> {
        use std::io::Write;
        // All keys in one buffer: 100k small allocations would cost more than the hashing.
        let count = replicas as usize * REPLICATION_FACTOR as usize;
        let mut bytes = Vec::with_capacity(count * 8);
        let mut ends = Vec::with_capacity(count);
        for shard in 0..replicas {
            for i in 0..REPLICATION_FACTOR {
                write!(bytes, "{shard}{i}").expect("writing to a Vec cannot fail");
                ends.push(bytes.len());
            }
        }
        let keys: Vec<&[u8]> = ends
            .iter()
            .scan(0, |start, &end| {
                Some(&bytes[std::mem::replace(start, end)..end])
            })
            .collect();
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
        deduped
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
        // Points of a lower prefix are all below `hash`, of a higher one all above.
        let prefix = (hash >> (64 - self.prefix_bits)) as usize;
        let (lo, hi) = (
            self.starts[prefix] as usize,
            self.starts[prefix + 1] as usize,
        );
        let i = lo + self.points[lo..hi].partition_point(|&(h, _)| h <= hash);
        if i == self.points.len() { 0 } else { i }
    }

    /// Upstream's `GetLeast`: the shard of the first point strictly after `hash`
    /// (clockwise, wrapping) whose shard is below `bound`.
    ///
    /// Upstream walks point by point, which crosses thousands of points when most shards
    /// are full (skewed loads make that common). This walks a few points, then asks each
    /// non-full shard for its own first point after `hash` and takes the nearest, which is
    /// the same point.
    fn least_loaded(&self, hash: u64, load: &[u64], bound: u64) -> u32 {
        const WALK: usize = 16;
        let mut i = self.first_after(hash);
        for _ in 0..WALK {
            let s = self.points[i].1;
            if load[s as usize] < bound {
                return s;
            }
            i += 1;
            if i == self.points.len() {
                i = 0;
            }
        }
        // Nearest clockwise: points after `hash` first (not wrapped), then the smallest.
        let mut best: Option<((bool, u64), u32)> = None;
        for (s, bounds) in self.shard_starts.windows(2).enumerate() {
            let points = &self.by_shard[bounds[0]..bounds[1]];
            if load[s] >= bound || points.is_empty() {
                continue;
            }
            let k = points.partition_point(|&h| h <= hash);
            let key = if k < points.len() {
                (false, points[k])
            } else {
                (true, points[0])
            };
            if best.is_none_or(|(b, _)| key < b) {
                best = Some((key, s as u32));
            }
        }
        // Some shard is always below the bound (it exceeds the mean load).
        best.map_or(0, |(_, s)| s)
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
/// (`createConsistentHashingWithBoundLoads`). Returns the shard of each position in
/// `clusters`; clusters of equal ids all get the shard of the last processed of them (upstream
/// keys the result by id).
pub(super) fn place(
    ring: &ConsistentHashRing,
    clusters: &[&Cluster],
    app_counts: &ServerCounts,
) -> Vec<u32> {
    let sorted = super::sorted_by_id(clusters);
    let ids: Vec<&[u8]> = sorted.iter().map(|&i| clusters[i].id.as_bytes()).collect();
    let hashes = argo_hash_many(&ids);

    let mut load = vec![0u64; ring.replicas as usize];
    let mut total = 0u64;
    let mut out = vec![0; clusters.len()];
    for (&i, h) in sorted.iter().zip(hashes) {
        let shard = ring.least_loaded(h, &load, load_bound(total, ring.replicas));
        out[i] = shard;
        let n = app_counts.get(&clusters[i].server);
        load[shard as usize] += n;
        total += n;
    }
    // Equal ids are adjacent in sorted order, last processed last: it wins for all.
    for run in sorted.chunk_by(|&a, &b| clusters[a].id == clusters[b].id) {
        if let [.., last] = run {
            let shard = out[*last];
            for &i in run {
                out[i] = shard;
            }
        }
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

    /// The shortcut in `least_loaded` answers exactly what upstream's walk answers.
    #[test]
    fn least_loaded_equals_the_plain_walk() {
        let ring = ConsistentHashRing::new(7);
        let walk = |hash: u64, load: &[u64], bound: u64| {
            let mut i = ring.first_after(hash);
            loop {
                let s = ring.points[i].1;
                if load[s as usize] < bound {
                    return s;
                }
                i = (i + 1) % ring.points.len();
            }
        };
        let mut x = 0x1234_5678_9abc_def0_u64;
        for round in 0..2000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // Between 1 and 7 shards full.
            let full = 1 + (x >> 60) as usize % 7;
            let load: Vec<u64> = (0..7)
                .map(|s| {
                    if (s + round as usize) % 7 < full && full < 7 {
                        10
                    } else {
                        0
                    }
                })
                .collect();
            let probe = if round % 3 == 0 {
                ring.points[(x >> 20) as usize % ring.points.len()].0
            } else {
                x
            };
            assert_eq!(
                ring.least_loaded(probe, &load, 5),
                walk(probe, &load, 5),
                "round {round}"
            );
        }
    }

    /// The prefix index finds the same point as a search of the whole ring, at every
    /// point, beside it, at the ends, and at random hashes.
    #[test]
    fn first_after_equals_a_search_of_the_whole_ring() {
        for r in [1, 3, 100, 129] {
            let ring = ConsistentHashRing::new(r);
            let search = |hash: u64| {
                let i = ring.points.partition_point(|&(h, _)| h <= hash);
                if i == ring.points.len() { 0 } else { i }
            };
            let mut probes = vec![0, 1, u64::MAX, u64::MAX - 1, 1 << 63];
            for &(h, _) in ring.points.iter().step_by(7) {
                probes.extend([h.wrapping_sub(1), h, h.wrapping_add(1)]);
            }
            let mut x = u64::from(r);
            for _ in 0..5000 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                probes.push(x);
            }
            for hash in probes {
                assert_eq!(ring.first_after(hash), search(hash), "R = {r}, {hash:#x}");
            }
        }
    }

    /// The build-time table answers exactly the points hashed at run time, collisions
    /// included (R = 12 is the first with equal keys; 128 is the table's last).
    #[test]
    fn table_ring_equals_the_hashed_ring() {
        for r in [1, 2, 11, 12, 13, 37, 100, 127, ring_table::TABLE_SHARDS] {
            assert_eq!(
                ring_table::points(r),
                ConsistentHashRing::hashed_points(r),
                "R = {r}"
            );
        }
        let above = ConsistentHashRing::new(ring_table::TABLE_SHARDS + 1);
        assert_eq!(
            above.points,
            ConsistentHashRing::hashed_points(ring_table::TABLE_SHARDS + 1)
        );
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
