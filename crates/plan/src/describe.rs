//! Describing one computed plan: per-shard rows, per-cluster rows (with slices), balance,
//! unassigned load, zones and warnings, all in the plan's cost unit.

use std::collections::BTreeMap;

use fleetshard_core::placement::{self, PlacementWarning, ZonePlan};
use fleetshard_core::{Fleet, ShardSpec};

use crate::build::{Computed, FleetFacts, Planned, ratio};
use crate::options::{Algorithm, PlanOptions};
use crate::report::{
    BalanceSummary, ClusterRow, CrossZoneSummary, PlanReport, ShardRow, SliceRow, Timings,
    Unassigned, Warning, ZoneRow, ZonesSummary,
};

/// Describes `planned` (one algorithm at one replica count) for the report.
pub(crate) fn describe(
    algorithm: Algorithm,
    planned: &Planned,
    facts: &FleetFacts<'_>,
    shards: &[ShardSpec],
    options: &PlanOptions,
) -> PlanReport {
    let fleet = facts.fleet;
    let units = &planned.units.units;
    let replicas = shards.len() as u32;
    let tolerance = options.config.tolerance;
    let in_range = |s: Option<i64>| s.filter(|&s| (0..i64::from(replicas)).contains(&s));
    // The shard each unit effectively has (None: nobody).
    let effective: Vec<Option<i64>> = units
        .iter()
        .zip(&planned.shards)
        .map(|(u, &s)| {
            if fleet.clusters[u.cluster].skip_reconcile {
                None
            } else {
                s
            }
        })
        .collect();
    let total = facts.summary.load;
    // Cost per engine load unit: 1 when the engine placed by the estimates themselves.
    let engine_total: f64 = (0..units.len())
        .filter(|&u| !fleet.clusters[units[u].cluster].skip_reconcile)
        .map(|u| planned.units.loads[u] as f64)
        .sum();
    let scale = if facts.measured || units.iter().any(|u| u.slice.is_some()) {
        ratio(total, engine_total)
    } else {
        1.0
    };

    let mut load = vec![0.0f64; shards.len()];
    let mut apps = vec![0u64; shards.len()];
    let mut holders: Vec<Vec<usize>> = vec![Vec::new(); shards.len()];
    for (u, unit) in units.iter().enumerate() {
        if let Some(s) = in_range(effective[u]) {
            load[s as usize] += unit.cost;
            apps[s as usize] += unit.apps;
            holders[s as usize].push(unit.cluster);
        }
    }
    let targets: Vec<f64> = match &planned.computed {
        Computed::Balanced(p) if p.targets.len() == shards.len() => {
            p.targets.iter().map(|t| t * scale).collect()
        }
        _ => {
            let cap: f64 = shards.iter().map(|s| f64::from(s.capacity)).sum();
            shards
                .iter()
                .map(|s| ratio(total * f64::from(s.capacity), cap))
                .collect()
        }
    };
    let shard_rows: Vec<ShardRow> = shards
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            let bound = targets[i] * (1.0 + tolerance);
            let mut clusters = holders[i].clone();
            clusters.dedup();
            ShardRow {
                shard: i as u32,
                zone: spec.zone.clone(),
                capacity: spec.capacity,
                clusters: clusters.len(),
                apps: apps[i],
                load: load[i],
                share: ratio(load[i], total),
                target: targets[i],
                bound,
                // A tiny relative slack so that a shard exactly at its bound is not
                // flagged by floating-point noise in the target or the costs.
                over_bound: load[i] > bound * (1.0 + 1e-9) + 1e-9,
            }
        })
        .collect();

    let mut clusters: Vec<ClusterRow> = fleet
        .clusters
        .iter()
        .enumerate()
        .map(|(i, c)| ClusterRow {
            id: c.id.clone(),
            name: c.name.clone(),
            server: c.server.clone(),
            shard: None,
            apps: facts.apps[i],
            load: facts.costs[i],
            pinned: c.shard.is_some(),
            pin: c.shard,
            zone: c.zone().map(str::to_owned),
            skip_reconcile: c.skip_reconcile,
            slices: Vec::new(),
        })
        .collect();
    let mut unassigned = Unassigned::default();
    let mut unassigned_clusters = Vec::new();
    for (u, unit) in units.iter().enumerate() {
        let row = &mut clusters[unit.cluster];
        match unit.slice {
            None => row.shard = planned.shards[u],
            Some(k) => {
                if k == 0 {
                    row.shard = planned.shards[u];
                }
                row.slices.push(SliceRow {
                    slice: k,
                    shard: planned.shards[u],
                    apps: unit.apps,
                    load: unit.cost,
                });
            }
        }
        if !row.skip_reconcile && in_range(effective[u]).is_none() {
            unassigned.apps += unit.apps;
            unassigned.load += unit.cost;
            unassigned_clusters.push(unit.cluster);
        }
    }
    unassigned_clusters.dedup();
    unassigned.clusters = unassigned_clusters.len();
    unassigned.share = ratio(unassigned.load, total);

    let max_over_target = shard_rows
        .iter()
        .map(|r| ratio(r.load, r.target))
        .fold(0.0, f64::max);
    let mean = ratio(load.iter().sum(), load.len() as f64);
    let max = load.iter().copied().fold(0.0, f64::max);
    let balance_summary = BalanceSummary {
        max,
        mean,
        max_over_mean: ratio(max, mean),
        min: if load.is_empty() {
            0.0
        } else {
            load.iter().copied().fold(f64::INFINITY, f64::min)
        },
        max_over_target,
        within_bound: shard_rows.iter().all(|r| !r.over_bound),
    };

    let mut warnings = facts.common_warnings.clone();
    match &planned.computed {
        Computed::Balanced(p) => {
            warnings.extend(p.warnings.iter().map(|w| placement_warning(w, scale)));
            if let ZonePlan::Fallback(reason) = &p.zones
                && *reason != placement::ZoneFallback::Disabled
            {
                warnings.push(Warning::new(
                    "zones",
                    format!("zone-aware placement not used: {reason}"),
                ));
            }
            let split: Vec<&ClusterRow> =
                clusters.iter().filter(|c| !c.slices.is_empty()).collect();
            for c in split {
                warnings.push(Warning::new(
                    "slices",
                    format!(
                        "cluster {}: split in {} slices (cost {} > {:.1} × a shard's share)",
                        row_label(c),
                        c.slices.len(),
                        c.load,
                        crate::units::split_factor(tolerance),
                    ),
                ));
            }
        }
        Computed::Argo => warnings.extend(argo_warnings(fleet, &planned.shards, replicas)),
    }

    PlanReport {
        algorithm: algorithm.name().to_owned(),
        replicas,
        tolerance,
        fleet: facts.summary.clone(),
        clusters,
        shards: shard_rows,
        unassigned,
        balance: balance_summary,
        movement: None,
        zones: zones_summary(planned, facts, shards, &effective, scale),
        warnings,
        timings: Timings::default(),
    }
}

fn row_label(c: &ClusterRow) -> String {
    if c.name.is_empty() {
        format!("{:?}", c.id)
    } else {
        format!("{} ({:?})", c.name, c.id)
    }
}

/// A placement warning, its loads in the plan's cost unit (`scale`: cost per engine load).
fn placement_warning(w: &PlacementWarning, scale: f64) -> Warning {
    let message = match w {
        PlacementWarning::HotCluster {
            cluster,
            load,
            bound,
        } if scale != 1.0 => PlacementWarning::HotCluster {
            cluster: cluster.clone(),
            load: (*load as f64 * scale).round() as u64,
            bound: bound * scale,
        }
        .to_string(),
        PlacementWarning::ShardOverBound { shard, load, bound } if scale != 1.0 => {
            PlacementWarning::ShardOverBound {
                shard: *shard,
                load: (*load as f64 * scale).round() as u64,
                bound: bound * scale,
            }
            .to_string()
        }
        w => w.to_string(),
    };
    Warning::new("placement", message)
}

/// What an operator comparing with Argo CD should know: clusters nobody manages and pins
/// Argo CD overrides.
fn argo_warnings(fleet: &Fleet, shards: &[Option<i64>], replicas: u32) -> Vec<Warning> {
    let mut out = Vec::new();
    if replicas == 0 && !fleet.clusters.is_empty() {
        out.push(Warning::new(
            "argo",
            "0 replicas: no controller runs, so no cluster is managed",
        ));
        return out;
    }
    for (c, s) in fleet.clusters.iter().zip(shards) {
        if c.skip_reconcile {
            continue;
        }
        let label = cluster_label(c);
        match (c.shard, s) {
            (Some(pin), _) if pin < 0 => out.push(Warning::new(
                "argo",
                format!("cluster {label}: negative pin {pin}; Argo CD keeps it, so no replica manages the cluster"),
            )),
            (Some(pin), _) if pin >= i64::from(replicas) && replicas > 1 => out.push(Warning::new(
                "argo",
                format!("cluster {label}: pin {pin} is not below {replicas} replicas; Argo CD's controller puts it on shard 0"),
            )),
            (_, Some(-1)) => out.push(Warning::new(
                "argo",
                format!("cluster {label}: Argo CD assigns shard -1, so no replica manages the cluster"),
            )),
            _ => {}
        }
    }
    out
}

fn cluster_label(c: &fleetshard_core::Cluster) -> String {
    if c.name.is_empty() {
        format!("{:?}", c.id)
    } else {
        format!("{} ({:?})", c.name, c.id)
    }
}

fn zones_summary(
    planned: &Planned,
    facts: &FleetFacts<'_>,
    shards: &[ShardSpec],
    effective: &[Option<i64>],
    scale: f64,
) -> ZonesSummary {
    let clusters = &facts.fleet.clusters;
    let has_zones = !facts.summary.zones.is_empty();
    let (mode, reason, aware) = match &planned.computed {
        Computed::Argo if has_zones => ("ignored", None, None),
        Computed::Argo => ("unused", None, None),
        Computed::Balanced(p) => match &p.zones {
            ZonePlan::Unused => ("unused", None, None),
            ZonePlan::Fallback(r) => ("fallback", Some(r.to_string()), None),
            ZonePlan::Aware(z) => ("aware", None, Some(z)),
        },
    };
    let total_cap: f64 = shards.iter().map(|s| f64::from(s.capacity)).sum();
    let total_load = facts.summary.load;
    #[derive(Default)]
    struct Acc {
        shards: usize,
        capacity: f64,
        clusters: usize,
        demand: f64,
        placed: f64,
    }
    let mut acc: BTreeMap<&str, Acc> = facts
        .summary
        .zones
        .iter()
        .map(|z| (z.as_str(), Acc::default()))
        .collect();
    for s in shards {
        if let Some(a) = s.zone.as_deref().and_then(|z| acc.get_mut(z)) {
            a.shards += 1;
            a.capacity += f64::from(s.capacity);
        }
    }
    let mut cross = CrossZoneSummary::default();
    for (u, unit) in planned.units.units.iter().enumerate() {
        let c = &clusters[unit.cluster];
        // A skip-reconcile cluster costs nothing to anyone.
        let cost = if c.skip_reconcile { 0.0 } else { unit.cost };
        if let Some(a) = c.zone().and_then(|z| acc.get_mut(z)) {
            a.clusters += usize::from(unit.slice.unwrap_or(0) == 0);
            a.demand += cost;
        }
        let shard = effective[u]
            .filter(|&s| (0..shards.len() as i64).contains(&s))
            .map(|s| &shards[s as usize]);
        let Some(shard) = shard else { continue };
        if let Some(a) = shard.zone.as_deref().and_then(|z| acc.get_mut(z)) {
            a.placed += cost;
        }
        if let (Some(cz), Some(sz)) = (c.zone(), shard.zone.as_deref()) {
            cross.zoned_load += cost;
            if cz != sz {
                cross.clusters += 1;
                cross.load += cost;
            }
        }
    }
    cross.fraction = ratio(cross.load, cross.zoned_load);
    let zones = acc
        .into_iter()
        .map(|(zone, a)| {
            let report = aware.and_then(|z| z.iter().find(|r| r.zone == zone));
            // In a zone-aware plan the engine's shares are authoritative (its demand counts
            // a pinned cluster where it runs), so the row agrees with its overload.
            let capacity_share = report.map_or(ratio(a.capacity, total_cap), |r| r.capacity_share);
            let demand_share = report.map_or(ratio(a.demand, total_load), |r| r.demand_share);
            ZoneRow {
                zone: zone.to_owned(),
                shards: a.shards,
                clusters: a.clusters,
                capacity_share,
                demand_share,
                expected_overload: report.map(|r| r.expected_overload).or_else(|| {
                    (capacity_share > 0.0).then(|| demand_share / capacity_share - 1.0)
                }),
                load_share: ratio(a.placed, total_load),
                local: report.map(|r| r.local),
                target_load: report.map(|r| r.target_load * scale),
            }
        })
        .collect();
    ZonesSummary {
        mode: mode.to_owned(),
        reason,
        zones,
        cross_zone: cross,
    }
}
