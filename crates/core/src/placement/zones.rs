//! Zone-aware placement after Kubernetes Topology Aware Hints: each zone's share of the
//! load follows its share of capacity; a zone keeps its clusters on its own shards while
//! its expected overload stays under a threshold (with hysteresis), and spills its excess
//! to zones with spare capacity beyond it. Insufficient data falls back to zone-agnostic
//! placement with a stated reason.

use std::collections::{BTreeMap, BTreeSet};

use super::ZonePolicy;
use crate::model::ShardSpec;

/// How zones shaped a placement.
#[derive(Debug, Clone, PartialEq)]
pub enum ZonePlan {
    /// Neither shards nor clusters carry zones: nothing to do.
    Unused,
    /// Zones were ignored, for this reason.
    Fallback(ZoneFallback),
    /// Zone-aware placement, one report per zone (sorted by name).
    Aware(Vec<ZoneReport>),
}

/// Why zone-aware placement was not used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ZoneFallback {
    /// Zone-aware placement is switched off.
    #[error("zone-aware placement is disabled")]
    Disabled,
    /// A shard has no zone.
    #[error("shard {shard} has no zone")]
    ShardWithoutZone {
        /// The shard.
        shard: u32,
    },
    /// A managed cluster has no zone label.
    #[error("cluster {cluster} has no zone label (topology.kubernetes.io/zone)")]
    ClusterWithoutZone {
        /// Cluster id.
        cluster: String,
    },
    /// Clusters sit in a zone where no shard runs.
    #[error("zone {zone} has clusters but no shard")]
    ZoneWithoutShards {
        /// The zone.
        zone: String,
    },
    /// A zone with clusters has fewer shards than required.
    #[error("zone {zone} has {shards} shard(s); zone-aware placement needs {required}")]
    TooFewShards {
        /// The zone.
        zone: String,
        /// Its shards.
        shards: usize,
        /// The minimum.
        required: usize,
    },
}

/// One zone in zone-aware placement.
#[derive(Debug, Clone, PartialEq)]
pub struct ZoneReport {
    /// Zone name.
    pub zone: String,
    /// Shards in the zone.
    pub shards: usize,
    /// The zone's share of total shard capacity.
    pub capacity_share: f64,
    /// The zone's share of the load (its clusters').
    pub demand_share: f64,
    /// `demand_share / capacity_share − 1`: how much hotter than average the zone's shards
    /// would run if it kept all its clusters.
    pub expected_overload: f64,
    /// The zone keeps all its clusters (otherwise it spills beyond its fair share).
    pub local: bool,
    /// The load the zone's shards are given as a target.
    pub target_load: f64,
}

/// The zone layout the engine works with.
#[derive(Debug, Clone)]
pub(super) struct ZoneLayout {
    /// Zone index of each shard.
    pub shard_zone: Vec<usize>,
    /// Zone index of each cluster (managed clusters only; others `usize::MAX`).
    pub cluster_zone: Vec<usize>,
    /// Per zone: keeps its clusters local.
    pub local: Vec<bool>,
    /// Per zone: takes spill from other zones (local, with spare capacity).
    pub receives: Vec<bool>,
    /// Per shard: target load.
    pub targets: Vec<f64>,
    /// The report.
    pub reports: Vec<ZoneReport>,
}

impl ZoneLayout {
    /// Whether a cluster of zone `cluster_zone` may run on a shard of zone `shard_zone`:
    /// at home always; elsewhere only when its zone spills and that zone takes spill. (A
    /// vacant shard has no zone here, `usize::MAX`, and hosts nothing from elsewhere.)
    pub fn may_host(&self, cluster_zone: usize, shard_zone: usize) -> bool {
        cluster_zone == shard_zone
            || (!self.local[cluster_zone] && self.receives.get(shard_zone) == Some(&true))
    }
}

/// What zone planning needs to know about the clusters (parallel slices).
pub(super) struct ZoneInput<'a> {
    /// Cluster ids (for fallback reasons).
    pub ids: &'a [String],
    /// Each cluster's zone label.
    pub zones: &'a [Option<String>],
    /// Clusters that take part.
    pub managed: &'a [bool],
    /// Valid pins.
    pub pins: &'a [Option<u32>],
    /// Effective loads.
    pub loads: &'a [u64],
}

/// Decides whether zones apply and, if so, the targets. A pinned cluster's load counts in
/// the zone of the shard it is pinned to, where it will run, and a pinned cluster needs no
/// zone of its own.
pub(super) fn plan(
    input: &ZoneInput<'_>,
    shards: &[ShardSpec],
    policy: &ZonePolicy,
    previous_local: Option<&BTreeSet<String>>,
) -> Result<ZoneLayout, ZonePlan> {
    let clusters = input.ids.len();
    let takes_part = |i: usize| input.managed[i];
    let any_shard_zone = shards.iter().any(|s| s.zone.is_some());
    let any_cluster_zone = (0..clusters).any(|i| takes_part(i) && input.zones[i].is_some());
    if !any_shard_zone && !any_cluster_zone {
        return Err(ZonePlan::Unused);
    }
    let fallback = |f| Err(ZonePlan::Fallback(f));
    if !policy.enabled {
        return fallback(ZoneFallback::Disabled);
    }
    if let Some(s) = shards.iter().position(|s| s.zone.is_none()) {
        return fallback(ZoneFallback::ShardWithoutZone { shard: s as u32 });
    }
    if let Some(i) = (0..clusters)
        .find(|&i| takes_part(i) && input.pins[i].is_none() && input.zones[i].is_none())
    {
        return fallback(ZoneFallback::ClusterWithoutZone {
            cluster: input.ids[i].clone(),
        });
    }

    // Zones known to shards, in name order, and their capacity.
    let mut index: BTreeMap<&str, usize> = BTreeMap::new();
    for s in shards {
        let z = s.zone.as_deref().unwrap_or_default();
        let next = index.len();
        index.entry(z).or_insert(next);
    }
    // Renumber in name order so reports and ties do not depend on shard order.
    for (i, v) in index.values_mut().enumerate() {
        *v = i;
    }
    let zones = index.len();
    let names: Vec<&str> = index.keys().copied().collect();
    let mut capacity = vec![0.0; zones];
    let mut shard_count = vec![0usize; zones];
    let shard_zone: Vec<usize> = shards
        .iter()
        .map(|s| {
            let z = index[s.zone.as_deref().unwrap_or_default()];
            capacity[z] += f64::from(s.capacity);
            shard_count[z] += 1;
            z
        })
        .collect();

    let mut demand = vec![0.0; zones];
    let mut cluster_zone = vec![usize::MAX; clusters];
    let mut clustered = vec![false; zones];
    for (i, zone_of) in cluster_zone.iter_mut().enumerate() {
        if !takes_part(i) {
            continue;
        }
        let home = match (&input.zones[i], input.pins[i]) {
            (Some(zone), _) => match index.get(zone.as_str()) {
                Some(&z) => Some(z),
                // A pinned cluster may come from a zone without shards; it runs on its pin.
                None if input.pins[i].is_some() => None,
                None => return fallback(ZoneFallback::ZoneWithoutShards { zone: zone.clone() }),
            },
            (None, _) => None,
        };
        let runs_in = match (input.pins[i], home) {
            (Some(p), _) => shard_zone[p as usize],
            (None, Some(z)) => z,
            // Ruled out above; answered rather than assumed.
            (None, None) => {
                return fallback(ZoneFallback::ClusterWithoutZone {
                    cluster: input.ids[i].clone(),
                });
            }
        };
        *zone_of = home.unwrap_or(runs_in);
        demand[runs_in] += input.loads[i] as f64;
        clustered[runs_in] = true;
    }
    for z in 0..zones {
        if clustered[z] && shard_count[z] < policy.min_shards_per_zone {
            return fallback(ZoneFallback::TooFewShards {
                zone: names[z].to_owned(),
                shards: shard_count[z],
                required: policy.min_shards_per_zone,
            });
        }
    }

    let total_load: f64 = demand.iter().sum();
    let total_capacity: f64 = capacity.iter().sum();
    let fair: Vec<f64> = capacity
        .iter()
        .map(|c| total_load * c / total_capacity)
        .collect();
    let overload: Vec<f64> = (0..zones)
        .map(|z| {
            if fair[z] > 0.0 {
                demand[z] / fair[z] - 1.0
            } else {
                0.0
            }
        })
        .collect();
    let was_local = |z: usize| previous_local.is_some_and(|p| p.contains(names[z]));
    let local: Vec<bool> = (0..zones)
        .map(|z| {
            overload[z] < policy.engage_overload
                || (was_local(z) && overload[z] < policy.disengage_overload)
        })
        .collect();

    // Spilling zones keep their fair share; local zones with spare capacity take the
    // spill in proportion to their spare. Spare always covers the spill, because demand
    // and fair shares have the same sum.
    let spill: f64 = (0..zones)
        .filter(|&z| !local[z])
        .map(|z| demand[z] - fair[z])
        .sum();
    let spare: Vec<f64> = (0..zones)
        .map(|z| {
            if local[z] {
                (fair[z] - demand[z]).max(0.0)
            } else {
                0.0
            }
        })
        .collect();
    let total_spare: f64 = spare.iter().sum();
    let zone_target: Vec<f64> = (0..zones)
        .map(|z| {
            if !local[z] {
                fair[z]
            } else if total_spare > 0.0 {
                demand[z] + spill * spare[z] / total_spare
            } else {
                demand[z]
            }
        })
        .collect();
    let targets = shards
        .iter()
        .zip(&shard_zone)
        .map(|(s, &z)| zone_target[z] * f64::from(s.capacity) / capacity[z])
        .collect();
    let share = |x: f64, total: f64| if total > 0.0 { x / total } else { 0.0 };
    let reports = (0..zones)
        .map(|z| ZoneReport {
            zone: names[z].to_owned(),
            shards: shard_count[z],
            capacity_share: share(capacity[z], total_capacity),
            demand_share: share(demand[z], total_load),
            expected_overload: overload[z],
            local: local[z],
            target_load: zone_target[z],
        })
        .collect();
    // Spill goes only where there is spare: never to another spilling zone, nor to a
    // local zone already at or above its fair share.
    let receives = (0..zones).map(|z| spare[z] > 0.0).collect();
    Ok(ZoneLayout {
        shard_zone,
        cluster_zone,
        local,
        receives,
        targets,
        reports,
    })
}
