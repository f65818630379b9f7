//! Cutting a fleet into placement units: which clusters are split, into how many slices,
//! and what each unit holds. `plan --split-clusters` and the fenced distributor (`run
//! --split-clusters`) both cut the fleet here, so a plan shows what the distributor
//! commits.
//!
//! A managed, unpinned cluster is split when its cost exceeds `(1 + ε)` shares (a share:
//! the fleet's cost over the shards' capacity, times the largest capacity): below that it
//! fits a shard's bound whole, and slicing it would only add owners. It becomes the fewest
//! slices whose even parts fit one share, at most one per shard and per app, and keeps a
//! previous count while its cost stays inside the hysteresis band around it
//! ([`kept_slice_count`]): a new count restarts every slice of the cluster.

use rustc_hash::FxHashMap;

use super::slices::{apps_per_slice, kept_slice_count};
use crate::model::{App, Cluster};

/// How a fleet is cut.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Split {
    /// A cluster is split above `factor` shares (`1 + ε`, the most a shard may carry).
    pub factor: f64,
    /// The hysteresis band a slice count is kept within (0: none).
    pub band: f64,
}

/// One placement unit of a cut fleet.
#[derive(Debug, Clone, PartialEq)]
pub struct SplitUnit {
    /// The cluster (index) it is, or is a slice of.
    pub cluster: usize,
    /// `(slice, slices)` for a slice; `None` for a whole cluster.
    pub slice: Option<(u32, u32)>,
    /// Its applications.
    pub apps: u64,
    /// Its part of the cluster's cost: its share of the cluster's applications (an even
    /// part when the cluster has none); 1 for a whole cluster.
    pub part: f64,
}

/// What one shard should carry: `total` cost over the shards' `capacities`, times the
/// largest capacity (0 without shards).
pub fn share(total: f64, capacities: impl IntoIterator<Item = u32>) -> f64 {
    let (mut sum, mut largest) = (0.0, 0.0f64);
    for c in capacities {
        let c = f64::from(c.max(1));
        sum += c;
        largest = largest.max(c);
    }
    if sum > 0.0 {
        total * largest / sum
    } else {
        0.0
    }
}

/// The slice count of each cluster (1: whole). `costs` and `apps` per cluster; a pinned or
/// unmanaged cluster is never split; `previous` holds the committed counts by cluster id.
pub fn slice_counts(
    clusters: &[Cluster],
    costs: &[f64],
    apps: &[u64],
    share: f64,
    shards: u32,
    previous: &FxHashMap<&str, u32>,
    split: Split,
) -> Vec<u32> {
    clusters
        .iter()
        .enumerate()
        .map(|(i, c)| {
            if c.skip_reconcile || c.shard.is_some() {
                return 1;
            }
            let most = u64::from(shards).min(apps.get(i).copied().unwrap_or(0)) as u32;
            let was = previous.get(c.id.as_str()).copied().unwrap_or(1);
            let cost = costs.get(i).copied().unwrap_or(0.0);
            kept_slice_count(cost, share, split.factor, most, was, split.band)
        })
        .collect()
}

/// The units of `clusters` cut into `counts` slices each (1: whole), a cluster's slices
/// in slice order, clusters in input order; `None` when no cluster is split.
pub fn split_units(clusters: &[Cluster], apps: &[App], counts: &[u32]) -> Option<Vec<SplitUnit>> {
    if counts.iter().all(|&k| k <= 1) {
        return None;
    }
    let per_slice = apps_per_slice(clusters, apps, counts);
    let mut out =
        Vec::with_capacity(clusters.len() + counts.iter().map(|&k| k as usize).sum::<usize>());
    for (i, row) in per_slice.iter().enumerate() {
        let k = counts.get(i).copied().unwrap_or(1);
        let total: u64 = row.iter().sum();
        if k <= 1 {
            out.push(SplitUnit {
                cluster: i,
                slice: None,
                apps: total,
                part: 1.0,
            });
            continue;
        }
        for (n, &held) in row.iter().enumerate() {
            let part = if total == 0 {
                1.0 / f64::from(k)
            } else {
                held as f64 / total as f64
            };
            out.push(SplitUnit {
                cluster: i,
                slice: Some((n as u32, k)),
                apps: held,
                part,
            });
        }
    }
    Some(out)
}

/// A slice as a model cluster for the placement engine: its cluster's labels, zone and
/// address, no pin and no weight of its own.
pub fn slice_cluster(of: &Cluster, id: String) -> Cluster {
    Cluster {
        id,
        shard: None,
        weight: None,
        ..of.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fleet() -> (Vec<Cluster>, Vec<App>) {
        let clusters: Vec<Cluster> = (0..4)
            .map(|i| Cluster::new(format!("c{i}"), format!("https://c{i}")))
            .collect();
        let mut apps = Vec::new();
        for (i, n) in [(0, 600), (1, 100), (2, 100), (3, 200)] {
            for a in 0..n {
                apps.push(App::to_server(
                    "argocd",
                    &format!("c{i}-{a}"),
                    &format!("https://c{i}"),
                ));
            }
        }
        (clusters, apps)
    }

    #[test]
    fn only_a_cluster_beyond_its_share_is_split_and_its_slices_hold_all_its_apps() {
        let (clusters, apps) = fleet();
        let costs = [600.0, 100.0, 100.0, 200.0];
        let counts: Vec<u64> = vec![600, 100, 100, 200];
        let split = Split {
            factor: 1.1,
            band: 0.0,
        };
        let share = share(1_000.0, [1, 1, 1, 1]);
        assert_eq!(share, 250.0);
        let k = slice_counts(
            &clusters,
            &costs,
            &counts,
            share,
            4,
            &FxHashMap::default(),
            split,
        );
        assert_eq!(k, vec![3, 1, 1, 1]);
        let units = split_units(&clusters, &apps, &k).unwrap();
        assert_eq!(units.len(), 6);
        let slices: Vec<&SplitUnit> = units.iter().filter(|u| u.cluster == 0).collect();
        assert_eq!(slices.iter().map(|u| u.apps).sum::<u64>(), 600);
        assert!((slices.iter().map(|u| u.part).sum::<f64>() - 1.0).abs() < 1e-9);
        assert!(slices.iter().all(|u| u.slice.is_some_and(|(_, k)| k == 3)));
        // Pinned, or nothing split: whole.
        let mut pinned = clusters.clone();
        pinned[0].shard = Some(0);
        let k = slice_counts(
            &pinned,
            &costs,
            &counts,
            share,
            4,
            &FxHashMap::default(),
            split,
        );
        assert_eq!(k, vec![1, 1, 1, 1]);
        assert_eq!(split_units(&pinned, &apps, &k), None);
        // A committed count inside the band is kept.
        let previous = FxHashMap::from_iter([("c0", 2)]);
        let band = Split { band: 0.1, ..split };
        let k = slice_counts(
            &clusters,
            &[540.0, 150.0, 150.0, 140.0],
            &counts,
            250.0,
            4,
            &previous,
            band,
        );
        assert_eq!(k[0], 2, "540 needs 3 slices of 250, 2 within 10 %");
    }
}
