//! Assignments (which shard holds which cluster), the load they put on each shard, and
//! what changes between two of them.

use std::collections::BTreeMap;

/// Which shard each cluster is on, keyed by cluster id. Clusters that no shard manages
/// (skip-reconcile, or an Argo CD shard of `-1`) are simply absent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Assignment {
    shards: BTreeMap<String, u32>,
}

impl Assignment {
    /// An empty assignment.
    pub fn new() -> Self {
        Self::default()
    }

    /// Puts `cluster` on `shard`, replacing any earlier entry.
    pub fn insert(&mut self, cluster: impl Into<String>, shard: u32) {
        self.shards.insert(cluster.into(), shard);
    }

    /// The shard of `cluster`, if it has one.
    pub fn get(&self, cluster: &str) -> Option<u32> {
        self.shards.get(cluster).copied()
    }

    /// `(cluster id, shard)` pairs in id order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u32)> {
        self.shards.iter().map(|(k, &v)| (k.as_str(), v))
    }

    /// Number of assigned clusters.
    pub fn len(&self) -> usize {
        self.shards.len()
    }

    /// Whether no cluster is assigned.
    pub fn is_empty(&self) -> bool {
        self.shards.is_empty()
    }

    /// Clusters whose shard differs between `self` (before) and `after`, weighted by
    /// `load_of` (the load *after*, or before for clusters that left).
    pub fn movement_to(&self, after: &Assignment, load_of: impl Fn(&str) -> u64) -> Movement {
        let mut m = Movement::default();
        for (id, &shard) in &after.shards {
            let load = load_of(id);
            m.clusters_total += 1;
            m.load_total += load;
            match self.shards.get(id) {
                Some(&old) if old == shard => {}
                Some(_) => {
                    m.clusters_moved += 1;
                    m.load_moved += load;
                }
                None => m.clusters_added += 1,
            }
        }
        m.clusters_removed = self
            .shards
            .keys()
            .filter(|id| !after.shards.contains_key(*id))
            .count();
        m
    }
}

impl FromIterator<(String, u32)> for Assignment {
    fn from_iter<I: IntoIterator<Item = (String, u32)>>(iter: I) -> Self {
        Assignment {
            shards: iter.into_iter().collect(),
        }
    }
}

/// What changed between two assignments. Added and removed clusters are not "moved":
/// they had no owner to hand over from, or have none to hand over to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Movement {
    /// Clusters present in both whose shard changed.
    pub clusters_moved: usize,
    /// Load of the moved clusters.
    pub load_moved: u64,
    /// Clusters present only after.
    pub clusters_added: usize,
    /// Clusters present only before.
    pub clusters_removed: usize,
    /// Clusters assigned after.
    pub clusters_total: usize,
    /// Load assigned after.
    pub load_total: u64,
}

impl Movement {
    /// Moved load as a fraction of the total (0 when there is no load).
    pub fn load_fraction(&self) -> f64 {
        ratio(self.load_moved, self.load_total)
    }

    /// Moved clusters as a fraction of all clusters after.
    pub fn cluster_fraction(&self) -> f64 {
        ratio(self.clusters_moved as u64, self.clusters_total as u64)
    }
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// What one shard carries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShardLoad {
    /// Clusters on the shard.
    pub clusters: usize,
    /// Load on the shard (apps, or configured weights).
    pub load: u64,
}

/// Per-shard totals and how even they are.
#[derive(Debug, Clone, PartialEq)]
pub struct Balance {
    /// One entry per shard `0..replicas`.
    pub shards: Vec<ShardLoad>,
    /// Load of clusters with no valid shard (unmanaged, or a shard outside `0..replicas`).
    pub unassigned_load: u64,
    /// Clusters with no valid shard.
    pub unassigned_clusters: usize,
}

impl Balance {
    /// Totals per shard for `shards[i]` (the shard of cluster `i`, if any) and `loads[i]`.
    /// Shards outside `0..replicas` count as unassigned.
    pub fn of(replicas: u32, shards: &[Option<i64>], loads: &[u64]) -> Self {
        let mut out = Balance {
            shards: vec![ShardLoad::default(); replicas as usize],
            unassigned_load: 0,
            unassigned_clusters: 0,
        };
        for (shard, &load) in shards.iter().zip(loads) {
            match shard.filter(|&s| s >= 0 && s < i64::from(replicas)) {
                Some(s) => {
                    let e = &mut out.shards[s as usize];
                    e.clusters += 1;
                    e.load += load;
                }
                None => {
                    out.unassigned_clusters += 1;
                    out.unassigned_load += load;
                }
            }
        }
        out
    }

    /// Mean load per shard.
    pub fn mean_load(&self) -> f64 {
        if self.shards.is_empty() {
            return 0.0;
        }
        self.shards.iter().map(|s| s.load as f64).sum::<f64>() / self.shards.len() as f64
    }

    /// Heaviest shard's load.
    pub fn max_load(&self) -> u64 {
        self.shards.iter().map(|s| s.load).max().unwrap_or(0)
    }

    /// Lightest shard's load.
    pub fn min_load(&self) -> u64 {
        self.shards.iter().map(|s| s.load).min().unwrap_or(0)
    }

    /// max / mean (1.0 is perfect; 0 when there is no load).
    pub fn max_over_mean(&self) -> f64 {
        let mean = self.mean_load();
        if mean == 0.0 {
            0.0
        } else {
            self.max_load() as f64 / mean
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assignment(pairs: &[(&str, u32)]) -> Assignment {
        pairs.iter().map(|&(k, v)| (k.to_owned(), v)).collect()
    }

    #[test]
    fn movement_counts_moves_additions_and_removals() {
        let before = assignment(&[("a", 0), ("b", 1), ("c", 1)]);
        let after = assignment(&[("a", 0), ("b", 0), ("d", 1)]);
        let m = before.movement_to(&after, |id| if id == "b" { 5 } else { 1 });
        assert_eq!(
            (
                m.clusters_moved,
                m.load_moved,
                m.clusters_added,
                m.clusters_removed
            ),
            (1, 5, 1, 1)
        );
        assert_eq!((m.clusters_total, m.load_total), (3, 7));
        assert!((m.load_fraction() - 5.0 / 7.0).abs() < 1e-12);
    }

    #[test]
    fn balance_ignores_out_of_range_shards() {
        let b = Balance::of(
            2,
            &[Some(0), Some(1), Some(1), Some(-1), Some(2), None],
            &[4, 1, 3, 9, 9, 9],
        );
        assert_eq!(
            b.shards,
            vec![
                ShardLoad {
                    clusters: 1,
                    load: 4
                },
                ShardLoad {
                    clusters: 2,
                    load: 4
                }
            ]
        );
        assert_eq!((b.unassigned_clusters, b.unassigned_load), (3, 27));
        assert_eq!(b.max_over_mean(), 1.0);
    }
}
