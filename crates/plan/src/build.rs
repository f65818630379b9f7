//! Building a [`Report`]: run each algorithm at each replica count and describe the result.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use fleetshard_core::argo::{ArgoAlgorithm, ArgoControllerAssignment, ArgoPrepared};
use fleetshard_core::placement::{self, Placement, PlacementWarning, PreviousPlacement, ZonePlan};
use fleetshard_core::{Assignment, Balance, Fleet, ShardSpec};

use crate::options::{Algorithm, PlanOptions, shard_specs};
use crate::report::{
    BalanceSummary, ClusterRow, CrossZoneSummary, FleetSummary, MovementFrom, MovementSummary,
    PlanReport, Report, ShardRow, Timings, Unassigned, Warning, ZoneRow, ZonesSummary,
};
use crate::{PlanError, Stopwatch};

/// The fleet to plan for and what loading it had to say.
#[derive(Debug, Clone, Default)]
pub struct PlanInput {
    /// Clusters and applications.
    pub fleet: Fleet,
    /// Warnings from loading the inputs (shown in every plan).
    pub warnings: Vec<Warning>,
}

/// What one algorithm computed, before it is described.
enum Computed {
    Argo(ArgoControllerAssignment),
    Balanced(Placement),
}

/// Per-cluster facts every plan needs, computed once.
struct FleetFacts<'a> {
    fleet: &'a Fleet,
    apps: Vec<u64>,
    loads: Vec<u64>,
    load_by_id: HashMap<&'a str, u64>,
    summary: FleetSummary,
    common_warnings: Vec<Warning>,
}

impl<'a> FleetFacts<'a> {
    fn new(input: &'a PlanInput, options: &PlanOptions) -> Self {
        let (fleet, template) = (&input.fleet, &options.shard_template);
        let apps = fleet.app_counts();
        // What a cluster costs (its apps plus a base), for every algorithm's figures alike;
        // Argo CD's algorithms place by app counts all the same.
        let loads = options.config.loads(&fleet.clusters, &fleet.apps);
        let mut load_by_id = HashMap::with_capacity(fleet.clusters.len());
        for (c, &l) in fleet.clusters.iter().zip(&loads) {
            load_by_id.entry(c.id.as_str()).or_insert(l);
        }
        let zones: BTreeSet<String> = fleet
            .clusters
            .iter()
            .filter_map(|c| c.zone().map(str::to_owned))
            .chain(template.iter().filter_map(|s| s.zone.clone()))
            .collect();
        let managed = |i: usize| !fleet.clusters[i].skip_reconcile;
        let summary = FleetSummary {
            clusters: fleet.clusters.len(),
            managed_clusters: (0..fleet.clusters.len()).filter(|&i| managed(i)).count(),
            apps: fleet.apps.len(),
            load: (0..loads.len())
                .filter(|&i| managed(i))
                .map(|i| loads[i])
                .sum(),
            zones: zones.into_iter().collect(),
        };
        let mut common_warnings = input.warnings.clone();
        common_warnings.extend(
            fleet
                .problems()
                .into_iter()
                .map(|p| Warning::new("fleet", p.to_string())),
        );
        FleetFacts {
            fleet,
            apps,
            loads,
            load_by_id,
            summary,
            common_warnings,
        }
    }
}

/// Runs every algorithm at every replica count of `options` and describes the results.
///
/// Plans come algorithm-major, replica counts in the order given. Within one algorithm the
/// counts form a sweep: each plan's movement is measured from the previous count (the
/// first from `options.previous`, if any), and `balanced` places each count starting from
/// the previous one, as a controller scaling step by step would. `stopwatch` times only
/// the distribution itself.
pub fn build_report(
    input: &PlanInput,
    options: &PlanOptions,
    stopwatch: &mut impl Stopwatch,
) -> Result<Report, PlanError> {
    options.validate()?;
    let facts = FleetFacts::new(input, options);
    // Argo CD's app counts and rings, shared by every consistent-hashing plan; prepared
    // inside the first one's timing, so its `distribute_ms` includes them. Legacy and
    // round-robin never read them, and never pay for them.
    let mut argo: Option<ArgoPrepared> = None;
    let mut plans = Vec::with_capacity(options.algorithms.len() * options.replicas.len());
    for &algorithm in &options.algorithms {
        // What the next plan is compared with and, for balanced, starts from.
        let mut before: Option<(MovementFrom, PreviousPlacement)> =
            options.previous.as_ref().map(|p| {
                let from = MovementFrom {
                    kind: "previous".to_owned(),
                    algorithm: p.algorithm.clone(),
                    replicas: p.replicas,
                };
                (from, p.as_placement())
            });
        for &replicas in &options.replicas {
            let shards = shard_specs(&options.shard_template, replicas);
            let previous = before.as_ref().map(|(_, p)| p);
            let (computed, ms) = stopwatch
                .time(|| compute(algorithm, &facts, &shards, previous, options, &mut argo));
            let mut plan = describe(algorithm, &computed, &facts, &shards, options);
            plan.timings = Timings {
                load_ms: 0.0,
                distribute_ms: ms,
            };
            let assignment = plan_assignment(&plan, &facts);
            if let Some((from, prev)) = &before {
                plan.movement = Some(movement(
                    from.clone(),
                    &prev.assignment,
                    &assignment,
                    &facts,
                ));
            }
            let next_previous = match &computed {
                Computed::Balanced(p) => p.as_previous(&facts.fleet.clusters),
                Computed::Argo(_) => PreviousPlacement {
                    homes: Default::default(),
                    assignment,
                    local_zones: BTreeSet::new(),
                },
            };
            let from = MovementFrom {
                kind: "sweep".to_owned(),
                algorithm: Some(algorithm.name().to_owned()),
                replicas: Some(replicas),
            };
            before = Some((from, next_previous));
            plans.push(plan);
        }
    }
    Ok(Report { plans })
}

fn compute(
    algorithm: Algorithm,
    facts: &FleetFacts<'_>,
    shards: &[ShardSpec],
    previous: Option<&PreviousPlacement>,
    options: &PlanOptions,
    argo: &mut Option<ArgoPrepared>,
) -> Computed {
    let fleet = facts.fleet;
    match algorithm {
        Algorithm::Argo(a) => {
            let mut unused = ArgoPrepared::default();
            let prepared = if a == ArgoAlgorithm::ConsistentHashing {
                argo.get_or_insert_with(|| ArgoPrepared::new(&fleet.apps))
            } else {
                &mut unused
            };
            Computed::Argo(ArgoControllerAssignment::compute_prepared(
                a,
                shards.len() as u32,
                &fleet.clusters,
                prepared,
            ))
        }
        Algorithm::Balanced => Computed::Balanced(placement::place(
            &fleet.clusters,
            &facts.loads,
            shards,
            previous,
            &options.config,
        )),
    }
}

/// The plan as an [`Assignment`]: managed clusters with a shard in range.
fn plan_assignment(plan: &PlanReport, facts: &FleetFacts<'_>) -> Assignment {
    let replicas = i64::from(plan.replicas);
    plan.clusters
        .iter()
        .zip(&facts.fleet.clusters)
        .filter(|(_, c)| !c.skip_reconcile)
        .filter_map(|(row, _)| {
            let s = row.shard.filter(|&s| (0..replicas).contains(&s))?;
            Some((row.id.clone(), s as u32))
        })
        .collect()
}

fn movement(
    from: MovementFrom,
    before: &Assignment,
    after: &Assignment,
    facts: &FleetFacts<'_>,
) -> MovementSummary {
    let m = before.movement_to(after, |id| facts.load_by_id.get(id).copied().unwrap_or(0));
    MovementSummary {
        from,
        clusters_moved: m.clusters_moved,
        load_moved: m.load_moved,
        clusters_added: m.clusters_added,
        clusters_removed: m.clusters_removed,
        clusters_total: m.clusters_total,
        load_total: m.load_total,
        load_fraction: m.load_fraction(),
        cluster_fraction: m.cluster_fraction(),
    }
}

fn ratio(a: f64, b: f64) -> f64 {
    if b == 0.0 { 0.0 } else { a / b }
}

fn describe(
    algorithm: Algorithm,
    computed: &Computed,
    facts: &FleetFacts<'_>,
    shards: &[ShardSpec],
    options: &PlanOptions,
) -> PlanReport {
    let fleet = facts.fleet;
    let replicas = shards.len() as u32;
    let tolerance = options.config.tolerance;
    // The shard each cluster reports, and the one it effectively has (None: nobody).
    let reported: Vec<Option<i64>> = match computed {
        Computed::Argo(a) => a.shards().iter().map(|&s| Some(s)).collect(),
        Computed::Balanced(p) => p.shards.iter().map(|s| s.map(i64::from)).collect(),
    };
    let effective: Vec<Option<i64>> = reported
        .iter()
        .zip(&fleet.clusters)
        .map(|(&s, c)| if c.skip_reconcile { None } else { s })
        .collect();
    let managed_loads: Vec<u64> = (0..fleet.clusters.len())
        .map(|i| {
            if fleet.clusters[i].skip_reconcile {
                0
            } else {
                facts.loads[i]
            }
        })
        .collect();
    let balance = Balance::of(replicas, &effective, &managed_loads);
    let apps_balance = Balance::of(replicas, &effective, &facts.apps);
    let total = facts.summary.load as f64;

    let targets: Vec<f64> = match computed {
        Computed::Balanced(p) if p.targets.len() == shards.len() => p.targets.clone(),
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
            let b = balance.shards[i];
            let bound = targets[i] * (1.0 + tolerance);
            ShardRow {
                shard: i as u32,
                zone: spec.zone.clone(),
                capacity: spec.capacity,
                clusters: b.clusters,
                apps: apps_balance.shards[i].load,
                load: b.load,
                share: ratio(b.load as f64, total),
                target: targets[i],
                bound,
                // A tiny slack so that a shard exactly at its bound is not flagged by
                // floating-point noise in the target.
                over_bound: b.load as f64 > bound + 1e-9,
            }
        })
        .collect();

    let clusters: Vec<ClusterRow> = fleet
        .clusters
        .iter()
        .enumerate()
        .map(|(i, c)| ClusterRow {
            id: c.id.clone(),
            name: c.name.clone(),
            server: c.server.clone(),
            shard: reported[i],
            apps: facts.apps[i],
            load: facts.loads[i],
            pinned: c.shard.is_some(),
            pin: c.shard,
            zone: c.zone().map(str::to_owned),
            skip_reconcile: c.skip_reconcile,
        })
        .collect();

    let mut unassigned = Unassigned::default();
    for (i, c) in fleet.clusters.iter().enumerate() {
        let in_range = effective[i].is_some_and(|s| (0..i64::from(replicas)).contains(&s));
        if !c.skip_reconcile && !in_range {
            unassigned.clusters += 1;
            unassigned.apps += facts.apps[i];
            unassigned.load += facts.loads[i];
        }
    }
    unassigned.share = ratio(unassigned.load as f64, total);

    let max_over_target = shard_rows
        .iter()
        .map(|r| ratio(r.load as f64, r.target))
        .fold(0.0, f64::max);
    let balance_summary = BalanceSummary {
        max: balance.max_load(),
        mean: balance.mean_load(),
        max_over_mean: balance.max_over_mean(),
        min: balance.min_load(),
        max_over_target,
        within_bound: shard_rows.iter().all(|r| !r.over_bound),
    };

    let mut warnings = facts.common_warnings.clone();
    match computed {
        Computed::Balanced(p) => {
            warnings.extend(p.warnings.iter().map(placement_warning));
            if let ZonePlan::Fallback(reason) = &p.zones
                && *reason != placement::ZoneFallback::Disabled
            {
                warnings.push(Warning::new(
                    "zones",
                    format!("zone-aware placement not used: {reason}"),
                ));
            }
        }
        Computed::Argo(_) => warnings.extend(argo_warnings(fleet, &reported, replicas)),
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
        zones: zones_summary(computed, facts, shards, &effective, &managed_loads),
        warnings,
        timings: Timings::default(),
    }
}

fn placement_warning(w: &PlacementWarning) -> Warning {
    Warning::new("placement", w.to_string())
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
    computed: &Computed,
    facts: &FleetFacts<'_>,
    shards: &[ShardSpec],
    effective: &[Option<i64>],
    loads: &[u64],
) -> ZonesSummary {
    let clusters = &facts.fleet.clusters;
    let has_zones = !facts.summary.zones.is_empty();
    let (mode, reason, aware) = match computed {
        Computed::Argo(_) if has_zones => ("ignored", None, None),
        Computed::Argo(_) => ("unused", None, None),
        Computed::Balanced(p) => match &p.zones {
            ZonePlan::Unused => ("unused", None, None),
            ZonePlan::Fallback(r) => ("fallback", Some(r.to_string()), None),
            ZonePlan::Aware(z) => ("aware", None, Some(z)),
        },
    };
    let total_cap: f64 = shards.iter().map(|s| f64::from(s.capacity)).sum();
    let total_load: f64 = loads.iter().sum::<u64>() as f64;
    #[derive(Default)]
    struct Acc {
        shards: usize,
        capacity: f64,
        clusters: usize,
        demand: u64,
        placed: u64,
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
    for (i, c) in clusters.iter().enumerate() {
        if let Some(a) = c.zone().and_then(|z| acc.get_mut(z)) {
            a.clusters += 1;
            a.demand += loads[i];
        }
        let shard = effective[i]
            .filter(|&s| (0..shards.len() as i64).contains(&s))
            .map(|s| &shards[s as usize]);
        let Some(shard) = shard else { continue };
        if let Some(a) = shard.zone.as_deref().and_then(|z| acc.get_mut(z)) {
            a.placed += loads[i];
        }
        if let (Some(cz), Some(sz)) = (c.zone(), shard.zone.as_deref()) {
            cross.zoned_load += loads[i];
            if cz != sz {
                cross.clusters += 1;
                cross.load += loads[i];
            }
        }
    }
    if let Computed::Balanced(p) = computed {
        // The engine's own count is authoritative for its plan; ours is the same formula.
        cross.clusters = p.cross_zone.clusters;
        cross.load = p.cross_zone.load;
        cross.zoned_load = p.cross_zone.zoned_load;
    }
    cross.fraction = ratio(cross.load as f64, cross.zoned_load as f64);
    let zones = acc
        .into_iter()
        .map(|(zone, a)| {
            let report = aware.and_then(|z| z.iter().find(|r| r.zone == zone));
            // In a zone-aware plan the engine's shares are authoritative (its demand counts
            // a pinned cluster where it runs), so the row agrees with its overload.
            let capacity_share = report.map_or(ratio(a.capacity, total_cap), |r| r.capacity_share);
            let demand_share =
                report.map_or(ratio(a.demand as f64, total_load), |r| r.demand_share);
            ZoneRow {
                zone: zone.to_owned(),
                shards: a.shards,
                clusters: a.clusters,
                capacity_share,
                demand_share,
                expected_overload: report.map(|r| r.expected_overload).or_else(|| {
                    (capacity_share > 0.0).then(|| demand_share / capacity_share - 1.0)
                }),
                load_share: ratio(a.placed as f64, total_load),
                local: report.map(|r| r.local),
                target_load: report.map(|r| r.target_load),
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
