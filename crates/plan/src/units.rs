//! Placement units: what a plan places. A cluster is one unit; with `--split-clusters`,
//! a cluster that costs more than a shard should carry is several, its slices
//! (`fleetshard_core::placement::slices`), each with its share of the cluster's cost.

use fleetshard_core::placement::measured::engine_loads;
use fleetshard_core::placement::slices::{committed_slices, slice_unit_id};
use fleetshard_core::placement::slicing::{self, Split};
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

/// Units for balanced placement on `shards` with `--split-clusters`, cut by
/// `placement::slicing` (the distributor's own cut): a managed, unpinned cluster whose
/// cost exceeds `share × split_factor` becomes the fewest slices whose even parts fit one
/// share. A slice's cost is the cluster's cost times its share of the cluster's apps.
/// With `previous` (a previous assignment's unit ids and the hysteresis band), a cluster
/// keeps its previous slice count while its cost stays inside the band around it.
pub(crate) fn split_clusters(
    facts: &FleetFacts<'_>,
    shards: &[ShardSpec],
    tolerance: f64,
    previous: Option<(&[&str], f64)>,
) -> Units {
    let fleet = facts.fleet;
    let share = slicing::share(facts.summary.load, shards.iter().map(|s| s.capacity));
    let was = committed_slices(previous.map_or(&[][..], |(ids, _)| ids).iter().copied());
    let split = Split {
        factor: split_factor(tolerance),
        band: previous.map_or(0.0, |(_, band)| band),
    };
    let counts = slicing::slice_counts(
        &fleet.clusters,
        &facts.costs,
        &facts.apps,
        share,
        shards.len() as u32,
        &was,
        split,
    );
    let Some(cut) = slicing::split_units(&fleet.clusters, &fleet.apps, &counts) else {
        return whole_clusters(facts);
    };
    let mut out = Units::default();
    for u in cut {
        let c = &fleet.clusters[u.cluster];
        let (id, cluster) = match u.slice {
            None => (c.id.clone(), c.clone()),
            Some((n, k)) => {
                let id = slice_unit_id(&c.id, n, k);
                (id.clone(), slicing::slice_cluster(c, id))
            }
        };
        out.units.push(Unit {
            cluster: u.cluster,
            slice: u.slice.map(|(n, _)| n),
            id,
            cost: facts.costs[u.cluster] * u.part,
            apps: u.apps,
        });
        out.clusters.push(cluster);
    }
    let costs: Vec<f64> = out.units.iter().map(|u| u.cost).collect();
    out.loads = engine_loads(&costs);
    out
}
