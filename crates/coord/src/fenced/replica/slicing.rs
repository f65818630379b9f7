//! Slices at the distributor (`run --split-clusters`): before placement, the fleet is cut
//! into units by `placement::slicing` (the cut `plan --split-clusters` shows), a split
//! cluster's slices committed under their unit ids (`cluster#slice-N-of-K`); after it,
//! slices of one cluster that landed on one shard are spread where the bounds allow.
//!
//! What keeps one owner per app: every committed generation holds a cluster either whole
//! or as all `K` slices of one count, each app of it in exactly one (a pure function of
//! its identity and `K`); a replica admits an app only under a unit it owns
//! (`ShardWork`), and a new unit of a cluster starts only once every unit of that cluster
//! that left a shard has been let go (`handoffs.rs`, by cluster, and `handover.rs` for
//! this replica's own stops). A count that changes changes every unit id of the cluster,
//! so no owner of an old slice holds a new one.

use std::collections::BTreeMap;

use fleetshard_core::model::app_counts;
use fleetshard_core::placement::slices::{
    UnitHomes, committed_slices, separate_slices, slice_unit_id,
};
use fleetshard_core::placement::slicing::{self, Split};
use fleetshard_core::placement::{Placement, PreviousPlacement};
use fleetshard_core::{App, Cluster};

use super::distribute::PlacementJob;

/// A fleet cut into units: the units as clusters, their loads, and for a slice the index
/// of its cluster (the group [`separate_slices`] keeps apart).
#[derive(Debug)]
pub(super) struct Cut {
    pub clusters: Vec<Cluster>,
    pub loads: Vec<u64>,
    /// Each unit's part of its cluster's estimate (base plus apps): what taking it over
    /// costs.
    pub work: Vec<u64>,
    pub groups: Vec<Option<usize>>,
}

impl PlacementJob {
    /// The fleet cut into units, when splitting is on and some cluster is split.
    pub(super) fn cut(&self, clusters: &[Cluster], loads: &[u64], apps: &[App]) -> Option<Cut> {
        let split = self.split?;
        let shards = self.inputs.shards;
        if shards < 2 {
            return None;
        }
        let costs: Vec<f64> = loads.iter().map(|&l| l as f64).collect();
        let share = slicing::share(
            costs.iter().sum(),
            self.inputs.specs.iter().map(|s| s.capacity),
        );
        let counts = slicing::slice_counts(
            clusters,
            &costs,
            &app_counts(clusters, apps),
            share,
            shards,
            &committed_slices(self.doc.clusters.keys().map(String::as_str)),
            split,
        );
        let units = slicing::split_units(clusters, apps, &counts)?;
        let estimates = self.config.loads(clusters, apps);
        let mut cut = Cut {
            clusters: Vec::with_capacity(units.len()),
            loads: Vec::with_capacity(units.len()),
            work: Vec::with_capacity(units.len()),
            groups: Vec::with_capacity(units.len()),
        };
        for u in units {
            let c = &clusters[u.cluster];
            let load = loads.get(u.cluster).copied().unwrap_or(0);
            let estimate = estimates.get(u.cluster).copied().unwrap_or(0);
            match u.slice {
                None => {
                    cut.clusters.push(c.clone());
                    cut.loads.push(load);
                    cut.work.push(estimate);
                    cut.groups.push(None);
                }
                Some((n, k)) => {
                    cut.clusters
                        .push(slicing::slice_cluster(c, slice_unit_id(&c.id, n, k)));
                    cut.loads.push((load as f64 * u.part).round() as u64);
                    cut.work.push((estimate as f64 * u.part).round() as u64);
                    cut.groups.push(Some(u.cluster));
                }
            }
        }
        Some(cut)
    }

    /// The previous placement the engine starts from: the committed document, extended
    /// to units it does not name (a re-split cluster's slices start where the same slice,
    /// or the whole cluster, was: `slices::UnitHomes`).
    pub(super) fn previous_for(&self, units: &[Cluster]) -> PreviousPlacement {
        let doc = &self.doc;
        let mut assignment: BTreeMap<String, u32> = doc.clusters.clone();
        if self.split.is_some() {
            let homes = UnitHomes::new(doc.clusters.iter().map(|(k, &v)| (k.as_str(), v)));
            for u in units {
                if !assignment.contains_key(&u.id)
                    && let Some(s) = homes.get(&u.id)
                {
                    assignment.insert(u.id.clone(), s);
                }
            }
        }
        PreviousPlacement {
            assignment: assignment.into_iter().collect(),
            homes: doc.homes.iter().map(|(k, &v)| (k.clone(), v)).collect(),
            local_zones: Default::default(),
        }
    }

    /// Spreads slices of one cluster that share a shard (within each shard's bound).
    pub(super) fn separate(&self, cut: &Cut, placement: &mut Placement) {
        let tolerance = self.split.map_or(0.0, |s| s.factor - 1.0);
        let bounds: Vec<f64> = placement
            .targets
            .iter()
            .map(|t| t * (1.0 + tolerance))
            .collect();
        separate_slices(&mut placement.shards, &cut.groups, &cut.loads, &bounds);
    }
}

/// The cut a distributor configured with `split_clusters` makes: split above `1 + ε`
/// shares, counts kept within the hysteresis band (none without hysteresis).
pub(super) fn split_of(config: &super::ReplicaConfig) -> Option<Split> {
    config.split_clusters.then(|| Split {
        factor: 1.0 + config.placement.tolerance,
        band: config.hysteresis.map_or(0.0, |h| h.band),
    })
}
