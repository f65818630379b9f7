//! Placement units: what a plan places. A cluster is one unit; with `--split-clusters`,
//! a cluster that costs more than a shard should carry is several, its slices
//! (`fleetshard_core::placement::slices`), each with its share of the cluster's cost.

use fleetshard_core::placement::measured::engine_loads;
use fleetshard_core::placement::slices::{
    apps_per_slice, committed_slices, kept_slice_count, slice_unit_id,
};
use fleetshard_core::{Cluster, ShardSpec};

use crate::build::FleetFacts;

/// One placement unit.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Unit {
    /// The cluster (index in the fleet) it belongs to.
    pub cluster: usize,
    /// Its slice index, for a slice of a split cluster.
    pub slice: Option<u32>,
    /// The id placement knows it by: the cluster id, or `cluster#slice-N-of-K`.
    pub id: String,
    /// Its cost, in the plan's unit.
    pub cost: f64,
    /// Applications it holds.
    pub apps: u64,
}

/// The units of one plan and the engine's integer loads for them.
#[derive(Debug, Clone, Default)]
pub(crate) struct Units {
    /// Every unit, a cluster's slices in slice order, clusters in input order.
    pub units: Vec<Unit>,
    /// The units as model clusters, for the placement engine (a slice carries its
    /// cluster's labels and no pin).
    pub clusters: Vec<Cluster>,
    /// The engine's load per unit.
    pub loads: Vec<u64>,
}

/// One unit per cluster: Argo CD's granularity, and balanced without splitting.
pub(crate) fn whole_clusters(facts: &FleetFacts<'_>) -> Units {
    let fleet = facts.fleet;
    let units = (0..fleet.clusters.len())
        .map(|i| Unit {
            cluster: i,
            slice: None,
            id: fleet.clusters[i].id.clone(),
            cost: facts.costs[i],
            apps: facts.apps[i],
        })
        .collect();
    let loads = if facts.measured {
        engine_loads(&facts.costs)
    } else {
        facts.estimates.clone()
    };
    Units {
        units,
        clusters: fleet.clusters.clone(),
        loads,
    }
}

/// The split factor: a cluster is split when it costs more than `(1 + ε)` shares, the
/// most a shard may carry. A cluster below that fits a shard's bound whole, so slicing it
/// would only add owners; one above it cannot be placed within the bound at all.
pub(crate) fn split_factor(tolerance: f64) -> f64 {
    1.0 + tolerance
}

/// Units for balanced placement on `shards` with `--split-clusters`: a managed, unpinned
/// cluster whose cost exceeds `share × split_factor` (share: total cost over total
/// capacity, times the largest capacity) becomes the fewest slices whose even parts fit
/// one share, at most one per shard and per app. A slice's cost is the cluster's cost
/// times its share of the cluster's apps. With `previous` (a previous assignment's unit
/// ids and the hysteresis band), a cluster keeps its previous slice count while its cost
/// stays inside the band around it.
pub(crate) fn split_clusters(
    facts: &FleetFacts<'_>,
    shards: &[ShardSpec],
    tolerance: f64,
    previous: Option<(&[&str], f64)>,
) -> Units {
    let fleet = facts.fleet;
    let capacity: f64 = shards.iter().map(|s| f64::from(s.capacity.max(1))).sum();
    let largest = shards
        .iter()
        .map(|s| f64::from(s.capacity.max(1)))
        .fold(0.0, f64::max);
    let share = if capacity > 0.0 {
        facts.summary.load * largest / capacity
    } else {
        0.0
    };
    let was = committed_slices(previous.map_or(&[][..], |(ids, _)| ids).iter().copied());
    let counts: Vec<u32> = fleet
        .clusters
        .iter()
        .enumerate()
        .map(|(i, c)| {
            if c.skip_reconcile || c.shard.is_some() {
                return 1;
            }
            let most = (shards.len() as u64).min(facts.apps[i]) as u32;
            let (was, band) = previous
                .map(|(_, band)| (was.get(c.id.as_str()).copied().unwrap_or(1), band))
                .unwrap_or((1, 0.0));
            kept_slice_count(
                facts.costs[i],
                share,
                split_factor(tolerance),
                most,
                was,
                band,
            )
        })
        .collect();
    if counts.iter().all(|&k| k <= 1) {
        return whole_clusters(facts);
    }
    let per_slice = apps_per_slice(&fleet.clusters, &fleet.apps, &counts);
    let mut out = Units::default();
    for (i, c) in fleet.clusters.iter().enumerate() {
        if counts[i] <= 1 {
            out.units.push(Unit {
                cluster: i,
                slice: None,
                id: c.id.clone(),
                cost: facts.costs[i],
                apps: facts.apps[i],
            });
            out.clusters.push(c.clone());
            continue;
        }
        let total_apps: u64 = per_slice[i].iter().sum();
        for (k, &apps) in per_slice[i].iter().enumerate() {
            let id = slice_unit_id(&c.id, k as u32, counts[i]);
            let part = if total_apps == 0 {
                1.0 / f64::from(counts[i])
            } else {
                apps as f64 / total_apps as f64
            };
            out.units.push(Unit {
                cluster: i,
                slice: Some(k as u32),
                id: id.clone(),
                cost: facts.costs[i] * part,
                apps,
            });
            out.clusters.push(Cluster {
                id,
                shard: None,
                weight: None,
                ..c.clone()
            });
        }
    }
    let costs: Vec<f64> = out.units.iter().map(|u| u.cost).collect();
    out.loads = engine_loads(&costs);
    out
}
