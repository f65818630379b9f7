//! The report: plain data, serialisable, shared by every renderer.
//!
//! The JSON form is a contract used by scripts and checks: the top-level object is the
//! primary plan (first algorithm, first replica count), and `plans` lists every plan in
//! the same shape when there is more than one. Fields are only ever added.

use serde::Serialize;

/// Every plan of one invocation, primary first.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// One per (algorithm, replica count), algorithm-major, in the order asked for.
    pub plans: Vec<PlanReport>,
}

impl Report {
    /// The primary plan (first algorithm at the first replica count).
    pub fn primary(&self) -> &PlanReport {
        &self.plans[0]
    }

    /// Records the time spent loading the inputs on every plan (they share the inputs).
    pub fn set_load_ms(&mut self, ms: f64) {
        for p in &mut self.plans {
            p.timings.load_ms = ms;
        }
    }
}

/// One algorithm at one replica count.
#[derive(Debug, Clone, Serialize)]
pub struct PlanReport {
    /// Algorithm name (`balanced`, `consistent-hashing`, `round-robin`, `legacy`).
    pub algorithm: String,
    /// Replica (shard) count.
    pub replicas: u32,
    /// ε: a shard's bound is `(1 + ε) × target`.
    pub tolerance: f64,
    /// The fleet as a whole.
    pub fleet: FleetSummary,
    /// One row per input cluster, in input order.
    pub clusters: Vec<ClusterRow>,
    /// One row per shard `0..replicas`.
    pub shards: Vec<ShardRow>,
    /// Managed clusters with no shard in `0..replicas` (Argo CD's `-1`, negative pins, no
    /// shards at all). Skip-reconcile clusters are not counted: nobody is meant to own them.
    pub unassigned: Unassigned,
    /// How even the shards are.
    pub balance: BalanceSummary,
    /// Movement from the previous plan (`--previous`) or, in a replica sweep, from the
    /// previous replica count; absent when there is nothing to compare with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub movement: Option<MovementSummary>,
    /// Zones: how they shaped the plan, per-zone shares, cross-zone load.
    pub zones: ZonesSummary,
    /// What the operator should look at.
    pub warnings: Vec<Warning>,
    /// Where the time went.
    pub timings: Timings,
}

/// Totals over the whole fleet.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FleetSummary {
    /// Input clusters (including skip-reconcile and duplicates).
    pub clusters: usize,
    /// Clusters some shard should manage (not skip-reconcile).
    pub managed_clusters: usize,
    /// Input applications.
    pub apps: usize,
    /// Total load of the managed clusters: their cost (measured, or the scaled estimate).
    #[serde(serialize_with = "crate::report::serialize_load")]
    pub load: f64,
    /// Every zone seen on a cluster or a shard, sorted.
    pub zones: Vec<String>,
}

/// One cluster and where the plan puts it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ClusterRow {
    /// The cluster Secret's `metadata.uid`.
    pub id: String,
    /// `data.name`.
    pub name: String,
    /// Normalised server URL.
    pub server: String,
    /// Argo CD algorithms: the controller's shard, exactly (may be `-1` or a negative pin).
    /// `balanced`: the shard, or `null` when unmanaged.
    pub shard: Option<i64>,
    /// Applications that resolve to the cluster.
    pub apps: u64,
    /// Its cost: measured (`--costs`), else its estimate (configured weight, or else
    /// `apps` plus the cluster base load) in the measured unit.
    #[serde(serialize_with = "crate::report::serialize_load")]
    pub load: f64,
    /// Whether the cluster Secret carries a `shard` pin.
    pub pinned: bool,
    /// The pin's value, as written.
    pub pin: Option<i64>,
    /// Its zone label.
    pub zone: Option<String>,
    /// `argocd.argoproj.io/skip-reconcile`: no shard manages it, whatever `shard` says.
    pub skip_reconcile: bool,
    /// A split cluster's slices (`--split-clusters`), in slice order; absent for a cluster
    /// placed whole. A split cluster's `shard` is its slice 0's.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub slices: Vec<SliceRow>,
}

/// One slice of a split cluster: a stable part of its applications, placed as a unit.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SliceRow {
    /// Slice index, `0..k`.
    pub slice: u32,
    /// Its shard (`null`: unmanaged).
    pub shard: Option<i64>,
    /// Applications in the slice.
    pub apps: u64,
    /// Its cost: the cluster's cost times the slice's share of the cluster's apps.
    #[serde(serialize_with = "crate::report::serialize_load")]
    pub load: f64,
}

/// One shard's share of the work.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ShardRow {
    /// Shard number.
    pub shard: u32,
    /// The replica's zone.
    pub zone: Option<String>,
    /// Relative capacity.
    pub capacity: u32,
    /// Clusters on it.
    pub clusters: usize,
    /// Applications of those clusters.
    pub apps: u64,
    /// Their load: the cost of its clusters and slices.
    #[serde(serialize_with = "crate::report::serialize_load")]
    pub load: f64,
    /// `load` / the fleet's total load.
    pub share: f64,
    /// Fair load for its capacity (balanced placement's target; the same formula for the
    /// Argo CD algorithms, which ignore capacity).
    pub target: f64,
    /// `(1 + ε) × target`.
    pub bound: f64,
    /// `load > bound`.
    pub over_bound: bool,
}

/// Managed clusters without a shard.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct Unassigned {
    /// How many.
    pub clusters: usize,
    /// Their applications.
    pub apps: u64,
    /// Their load.
    #[serde(serialize_with = "crate::report::serialize_load")]
    pub load: f64,
    /// `load` / the fleet's total load.
    pub share: f64,
}

/// How even the shards are.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct BalanceSummary {
    /// Heaviest shard's load.
    #[serde(serialize_with = "crate::report::serialize_load")]
    pub max: f64,
    /// Mean load per shard.
    pub mean: f64,
    /// `max / mean` (1.0 is perfect; 0 without load).
    pub max_over_mean: f64,
    /// Lightest shard's load.
    #[serde(serialize_with = "crate::report::serialize_load")]
    pub min: f64,
    /// Largest `load / target` over the shards (what the bound is measured against when
    /// capacities differ; 0 without load).
    pub max_over_target: f64,
    /// Every shard is within its bound.
    pub within_bound: bool,
}

/// What a plan moves compared with an earlier one.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MovementSummary {
    /// What the plan is compared with.
    pub from: MovementFrom,
    /// Clusters (and slices) on a different shard.
    pub clusters_moved: usize,
    /// Their load.
    #[serde(serialize_with = "crate::report::serialize_load")]
    pub load_moved: f64,
    /// Clusters that had no shard before.
    pub clusters_added: usize,
    /// Clusters that had a shard before and have none now.
    pub clusters_removed: usize,
    /// Clusters with a shard now.
    pub clusters_total: usize,
    /// Load with a shard now.
    #[serde(serialize_with = "crate::report::serialize_load")]
    pub load_total: f64,
    /// `load_moved / load_total`.
    pub load_fraction: f64,
    /// `clusters_moved / clusters_total`.
    pub cluster_fraction: f64,
}

/// The earlier plan a movement is measured from.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct MovementFrom {
    /// `previous` (the `--previous` file) or `sweep` (the previous replica count).
    pub kind: String,
    /// Its algorithm, when known.
    pub algorithm: Option<String>,
    /// Its replica count, when known.
    pub replicas: Option<u32>,
}

/// Zones in a plan.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ZonesSummary {
    /// `aware` (zone-aware placement), `fallback` (zones ignored, see `reason`), `unused`
    /// (no zones in the input) or `ignored` (an Argo CD algorithm: it knows no zones).
    pub mode: String,
    /// Why zones were not used, for `fallback`.
    pub reason: Option<String>,
    /// One row per zone, sorted by name (empty without zones).
    pub zones: Vec<ZoneRow>,
    /// Load placed on a shard in another zone than its cluster's.
    pub cross_zone: CrossZoneSummary,
}

/// One zone.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ZoneRow {
    /// Zone name.
    pub zone: String,
    /// Shards in the zone.
    pub shards: usize,
    /// Clusters labelled with the zone.
    pub clusters: usize,
    /// The zone's share of total shard capacity.
    pub capacity_share: f64,
    /// The zone's clusters' share of the load.
    pub demand_share: f64,
    /// `demand_share / capacity_share − 1` (`null` when the zone has no shards).
    pub expected_overload: Option<f64>,
    /// Share of the load the plan actually put on the zone's shards.
    pub load_share: f64,
    /// Zone-aware plans: the zone keeps all its clusters (`false`: it spills). `null`
    /// otherwise.
    pub local: Option<bool>,
    /// Zone-aware plans: the load the zone's shards were given as a target.
    pub target_load: Option<f64>,
}

/// Cross-zone placement.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Default)]
pub struct CrossZoneSummary {
    /// Clusters on a shard of another zone.
    pub clusters: usize,
    /// Their load.
    #[serde(serialize_with = "crate::report::serialize_load")]
    pub load: f64,
    /// All placed load with a zone on both sides.
    #[serde(serialize_with = "crate::report::serialize_load")]
    pub zoned_load: f64,
    /// `load / zoned_load`.
    pub fraction: f64,
}

/// Something the operator should see.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, Hash)]
pub struct Warning {
    /// Where it comes from: `input` (a loader), `fleet` (duplicates, unresolved
    /// destinations), `placement`, `zones`, `argo` (Argo CD behaviour worth knowing), `cli`.
    pub source: String,
    /// One line.
    pub message: String,
}

impl Warning {
    /// A warning from `source`.
    pub fn new(source: &str, message: impl Into<String>) -> Self {
        Warning {
            source: source.to_owned(),
            message: message.into(),
        }
    }
}

/// Milliseconds spent, measured by the caller (the report builder reads no clock).
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Default)]
pub struct Timings {
    /// Reading and parsing the input files (shared by all plans of a run).
    pub load_ms: f64,
    /// Computing this plan's distribution.
    pub distribute_ms: f64,
}

/// Serialises a load as a whole number when it is one (estimates always are), so plans
/// without measured costs read as they always did; a fractional cost as it is.
pub(crate) fn serialize_load<S: serde::Serializer>(load: &f64, s: S) -> Result<S::Ok, S::Error> {
    if load.fract() == 0.0 && (0.0..9.0e15).contains(load) {
        s.serialize_u64(*load as u64)
    } else {
        s.serialize_f64(*load)
    }
}

/// The JSON document: the primary plan's fields at the top level, every plan in `plans`
/// when there are several.
#[derive(Serialize)]
struct JsonDoc<'a> {
    #[serde(flatten)]
    primary: &'a PlanReport,
    #[serde(skip_serializing_if = "Option::is_none")]
    plans: Option<&'a [PlanReport]>,
}

/// The report as one pretty-printed JSON object, newline-terminated.
pub fn render_json(report: &Report) -> String {
    let doc = JsonDoc {
        primary: report.primary(),
        plans: (report.plans.len() > 1).then_some(report.plans.as_slice()),
    };
    // Serialising plain structs of strings and numbers cannot fail; non-finite floats
    // (which JSON cannot hold) are never produced, and serde_json would write null.
    let mut out = serde_json::to_string_pretty(&doc)
        .unwrap_or_else(|e| format!("{{\"error\":{:?}}}", e.to_string()));
    out.push('\n');
    out
}
