//! Building a [`Report`]: run each algorithm at each replica count and describe the result.

use std::collections::{BTreeSet, HashMap};

use fleetshard_core::argo::{ArgoAlgorithm, ArgoControllerAssignment, ArgoPrepared};
use fleetshard_core::placement::hysteresis::{self, Proposal};
use fleetshard_core::placement::slices::{self, UnitHomes};
use fleetshard_core::placement::{self, Placement, PreviousPlacement};
use fleetshard_core::{Assignment, Fleet, ShardSpec};

use crate::costs::cluster_costs;
use crate::describe::describe;
use crate::options::{Algorithm, PlanOptions, shard_specs};
use crate::report::{FleetSummary, MovementFrom, MovementSummary, Report, Timings, Warning};
use crate::units::{self, Units};
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
pub(crate) enum Computed {
    Argo,
    Balanced(Placement),
}

/// One plan's placement: its units and, per unit, the shard it reports.
pub(crate) struct Planned {
    pub computed: Computed,
    pub units: Units,
    pub shards: Vec<Option<i64>>,
}

/// Per-cluster facts every plan needs, computed once.
pub(crate) struct FleetFacts<'a> {
    pub fleet: &'a Fleet,
    pub apps: Vec<u64>,
    /// Base-plus-apps estimates (or weights): the engine's loads without measured costs.
    pub estimates: Vec<u64>,
    /// What each cluster costs ([`crate::costs`]); the estimates without `--costs`.
    pub costs: Vec<f64>,
    /// Whether costs were measured (then the engine places by scaled costs).
    pub measured: bool,
    pub summary: FleetSummary,
    pub common_warnings: Vec<Warning>,
}

impl<'a> FleetFacts<'a> {
    fn new(input: &'a PlanInput, options: &PlanOptions) -> Self {
        let (fleet, template) = (&input.fleet, &options.shard_template);
        let apps = fleet.app_counts();
        // What a cluster costs (measured, or its apps plus a base), for every algorithm's
        // figures alike; Argo CD's algorithms place by app counts all the same.
        let estimates = options.config.loads(&fleet.clusters, &fleet.apps);
        let ids: Vec<&str> = fleet.clusters.iter().map(|c| c.id.as_str()).collect();
        let measured = options.costs.measured.as_ref();
        let (costs, unknown) = cluster_costs(&ids, &estimates, measured);
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
            load: (0..costs.len())
                .filter(|&i| managed(i))
                .map(|i| costs[i])
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
        if let Some(m) = measured {
            common_warnings.extend(unknown.iter().map(|id| {
                Warning::new(
                    "costs",
                    format!(
                        "{}: cluster {id:?} is not in the fleet; its cost is ignored",
                        m.source
                    ),
                )
            }));
        }
        FleetFacts {
            fleet,
            apps,
            estimates,
            costs,
            measured: measured.is_some(),
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
            let (planned, ms) = stopwatch
                .time(|| compute(algorithm, &facts, &shards, previous, options, &mut argo));
            let mut plan = describe(algorithm, &planned, &facts, &shards, options);
            plan.timings = Timings {
                load_ms: 0.0,
                distribute_ms: ms,
            };
            let assignment = unit_assignment(&planned, &facts, replicas);
            if let Some((from, prev)) = &before {
                let prev = inherit_previous(&prev.assignment, &planned.units);
                plan.movement = Some(movement(from.clone(), &prev, &assignment, &planned));
            }
            let next_previous = match &planned.computed {
                Computed::Balanced(p) => p.as_previous(&planned.units.clusters),
                Computed::Argo => PreviousPlacement {
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
) -> Planned {
    let fleet = facts.fleet;
    match algorithm {
        Algorithm::Argo(a) => {
            let mut unused = ArgoPrepared::default();
            let prepared = if a == ArgoAlgorithm::ConsistentHashing {
                argo.get_or_insert_with(|| ArgoPrepared::new(&fleet.apps))
            } else {
                &mut unused
            };
            let assignment = ArgoControllerAssignment::compute_prepared(
                a,
                shards.len() as u32,
                &fleet.clusters,
                prepared,
            );
            Planned {
                shards: assignment.shards().iter().map(|&s| Some(s)).collect(),
                computed: Computed::Argo,
                units: units::whole_clusters(facts),
            }
        }
        Algorithm::Balanced => balanced(facts, shards, previous, options),
    }
}

/// Balanced placement of the plan's units: the engine's placement, then hysteresis from
/// the previous placement (if any and asked for), then slices of one cluster apart.
fn balanced(
    facts: &FleetFacts<'_>,
    shards: &[ShardSpec],
    previous: Option<&PreviousPlacement>,
    options: &PlanOptions,
) -> Planned {
    let tolerance = options.config.tolerance;
    let units = if options.costs.split_clusters {
        let ids: Vec<&str> = previous.map_or_else(Vec::new, |p| {
            p.assignment.iter().map(|(id, _)| id).collect()
        });
        let band = options.costs.hysteresis.map_or(0.0, |h| h.band);
        units::split_clusters(facts, shards, tolerance, previous.map(|_| (&ids[..], band)))
    } else {
        units::whole_clusters(facts)
    };
    let previous = previous.map(|p| PreviousPlacement {
        assignment: inherit_previous(&p.assignment, &units),
        ..p.clone()
    });
    let mut placement = placement::place(
        &units.clusters,
        &units.loads,
        shards,
        previous.as_ref(),
        &options.config,
    );
    if let (Some(knobs), Some(prev)) = (options.costs.hysteresis, &previous) {
        let ids: Vec<String> = units.units.iter().map(|u| u.id.clone()).collect();
        let fixed: Vec<bool> = units.clusters.iter().map(|c| c.shard.is_some()).collect();
        let proposal = Proposal {
            ids: &ids,
            loads: &units.loads,
            shards: &placement.shards,
            fixed: &fixed,
            targets: &placement.targets,
        };
        placement.shards = hysteresis::hold(&prev.assignment, proposal, knobs);
    }
    if units.units.iter().any(|u| u.slice.is_some()) {
        let groups: Vec<Option<usize>> = units
            .units
            .iter()
            .map(|u| u.slice.map(|_| u.cluster))
            .collect();
        let bounds: Vec<f64> = placement
            .targets
            .iter()
            .map(|t| t * (1.0 + tolerance))
            .collect();
        slices::separate_slices(&mut placement.shards, &groups, &units.loads, &bounds);
    }
    Planned {
        shards: placement.shards.iter().map(|s| s.map(i64::from)).collect(),
        computed: Computed::Balanced(placement),
        units,
    }
}

/// The previous assignment, extended to units it does not name (`slices::UnitHomes`): a
/// slice starts where the same slice was under another count, or where its cluster was
/// whole, and a cluster placed whole again starts where its slice 0 was.
fn inherit_previous(previous: &Assignment, units: &Units) -> Assignment {
    let homes = UnitHomes::new(previous.iter());
    let mut out = previous.clone();
    for u in &units.units {
        if let Some(s) = homes.get(&u.id) {
            out.insert(u.id.clone(), s);
        }
    }
    out
}

/// The plan's managed units with a shard in range, by unit id.
fn unit_assignment(planned: &Planned, facts: &FleetFacts<'_>, replicas: u32) -> Assignment {
    let replicas = i64::from(replicas);
    planned
        .units
        .units
        .iter()
        .zip(&planned.shards)
        .filter(|(u, _)| !facts.fleet.clusters[u.cluster].skip_reconcile)
        .filter_map(|(u, s)| {
            let s = s.filter(|&s| (0..replicas).contains(&s))?;
            Some((u.id.clone(), s as u32))
        })
        .collect()
}

fn movement(
    from: MovementFrom,
    before: &Assignment,
    after: &Assignment,
    planned: &Planned,
) -> MovementSummary {
    let cost: HashMap<&str, f64> = planned
        .units
        .units
        .iter()
        .map(|u| (u.id.as_str(), u.cost))
        .collect();
    let m = before.movement_to(after, |_| 0);
    let (mut load_moved, mut load_total) = (0.0, 0.0);
    for (id, shard) in after.iter() {
        let c = cost.get(id).copied().unwrap_or(0.0);
        load_total += c;
        if before.get(id).is_some_and(|b| b != shard) {
            load_moved += c;
        }
    }
    MovementSummary {
        from,
        clusters_moved: m.clusters_moved,
        load_moved,
        clusters_added: m.clusters_added,
        clusters_removed: m.clusters_removed,
        clusters_total: m.clusters_total,
        load_total,
        load_fraction: ratio(load_moved, load_total),
        cluster_fraction: m.cluster_fraction(),
    }
}

/// `a / b`, 0 when `b` is 0.
pub(crate) fn ratio(a: f64, b: f64) -> f64 {
    if b == 0.0 { 0.0 } else { a / b }
}
