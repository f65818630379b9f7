//! `fleetshard pin`'s plan: balanced shard pins for Argo CD's own application controller,
//! written into each cluster Secret's `shard` field.
//!
//! Argo CD's controller obeys a Secret's `data.shard` when it is an integer below its
//! replica count (one ≥ the count runs on shard 0, a negative one on no shard; argo-compat
//! §3) and places every other cluster with its own algorithm. [`plan_pins`] computes, as a
//! pure function, the pins that make the controller's shards balanced:
//!
//! - the current valid shards are the *previous assignment* of the balanced placement, so
//!   a pin moves only when balance needs it (minimal movement; a second run moves
//!   nothing);
//! - clusters the user pinned by hand ([`PinEntry::manual`], annotation
//!   [`MANUAL_PIN_ANNOTATION`]) and Argo CD's built-in in-cluster entry (no Secret to
//!   write) are *fixed*: they stay where Argo CD's controller runs them today
//!   ([`ArgoControllerAssignment`]) and count toward that shard's load;
//! - a Secret whose `shard` is not an integer, or is out of `0..replicas`, is reassigned and
//!   reported by name;
//! - loads before and after are what Argo CD's controller runs, per shard, with balanced
//!   placement's cluster load (base plus apps, or the weight).

use std::collections::BTreeSet;

use fleetshard_core::argo::{ArgoAlgorithm, ArgoControllerAssignment, is_built_in_in_cluster};
use fleetshard_core::placement::{
    PlacementConfig, PlacementWarning, PreviousPlacement, ZonePlan, place,
};
use fleetshard_core::{App, Assignment, Cluster, ShardSpec};

mod render;

pub use render::render_pin_text;

/// The annotation that marks a cluster Secret as pinned by hand: `pin` leaves its `shard`
/// alone and counts it toward its shard's load. The only value is [`MANUAL_PIN_VALUE`].
pub const MANUAL_PIN_ANNOTATION: &str = "fleetshard.io/pin";
/// The value of [`MANUAL_PIN_ANNOTATION`].
pub const MANUAL_PIN_VALUE: &str = "manual";

/// A cluster Secret's `shard` as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CurrentShard {
    /// No `shard` key.
    Unset,
    /// An integer (Go's `strconv.Atoi`), in range or not.
    Shard(i64),
    /// A value that is not an integer (Argo CD ignores it, with a warning).
    NotInteger(String),
}

impl CurrentShard {
    /// Reads a `shard` value as Argo CD does: Go's `strconv.Atoi` and Rust's `i64` parser
    /// accept the same text (decimal digits, optional sign).
    pub fn parse(value: Option<&str>) -> Self {
        match value {
            None => CurrentShard::Unset,
            Some(s) => s.parse::<i64>().map_or_else(
                |_| CurrentShard::NotInteger(s.to_owned()),
                CurrentShard::Shard,
            ),
        }
    }

    /// The pin Argo CD reads (`None`: none, it places the cluster itself).
    fn pin(&self) -> Option<i64> {
        match self {
            CurrentShard::Shard(n) => Some(*n),
            _ => None,
        }
    }
}

impl std::fmt::Display for CurrentShard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CurrentShard::Unset => f.write_str("-"),
            CurrentShard::Shard(n) => write!(f, "{n}"),
            CurrentShard::NotInteger(s) => write!(f, "{s:?}"),
        }
    }
}

/// One entry of Argo CD's cluster list, as `pin` sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinEntry {
    /// The cluster (its `shard` is ignored: [`PinEntry::current`] is what counts).
    pub cluster: Cluster,
    /// The Secret, `namespace/name`; `None` for Argo CD's built-in in-cluster entry.
    pub secret: Option<String>,
    /// The Secret's `shard` now.
    pub current: CurrentShard,
    /// Pinned by hand ([`MANUAL_PIN_ANNOTATION`]): never written.
    pub manual: bool,
}

/// What `pin` plans for.
#[derive(Debug, Clone)]
pub struct PinOptions {
    /// Argo CD's controller replicas (`ARGOCD_CONTROLLER_REPLICAS`), at least 1.
    pub replicas: u32,
    /// The replicas' zones and capacities (`replicas` long).
    pub shards: Vec<ShardSpec>,
    /// The balanced placement's knobs.
    pub config: PlacementConfig,
    /// The algorithm Argo CD's controller runs, for the clusters it places itself (the
    /// built-in in-cluster entry, manual entries without a usable pin).
    pub argo: ArgoAlgorithm,
    /// Zones that were local in the previous pass (hysteresis, `--watch`).
    pub local_zones: BTreeSet<String>,
}

/// What happens to one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PinAction {
    /// Its `shard` is already the planned one.
    Keep,
    /// Its `shard` is written.
    Write(u32),
    /// Pinned by hand: left alone.
    Manual,
    /// Argo CD's built-in in-cluster entry: no Secret to write.
    BuiltIn,
    /// Not placed, and left alone: skip-reconcile, a manual negative pin, a Secret
    /// shadowed by a later one with the same server.
    Untouched(String),
}

/// One entry's line of the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinRow {
    /// The cluster's name (`data.name`).
    pub name: String,
    /// Its server.
    pub server: String,
    /// The Secret (`namespace/name`), if any.
    pub secret: Option<String>,
    /// The `shard` as written now.
    pub current: CurrentShard,
    /// The shard Argo CD's controller runs it on now (negative: none).
    pub before: i64,
    /// The shard it runs on once the plan is written (negative: none).
    pub after: i64,
    /// What `pin` does.
    pub action: PinAction,
}

/// One shard's clusters and load, before and after.
#[derive(Debug, Clone, PartialEq)]
pub struct ShardLoad {
    /// The shard.
    pub shard: u32,
    /// Clusters now.
    pub clusters_before: usize,
    /// Load now.
    pub load_before: u64,
    /// Clusters after.
    pub clusters_after: usize,
    /// Load after.
    pub load_after: u64,
    /// The balanced placement's target load.
    pub target: f64,
}

/// `pin`'s plan: what to write, and what it changes.
#[derive(Debug, Clone)]
pub struct PinPlan {
    /// Replica count.
    pub replicas: u32,
    /// Argo CD's algorithm (for entries it places itself).
    pub argo: ArgoAlgorithm,
    /// One row per entry of Argo CD's cluster list, in its order.
    pub rows: Vec<PinRow>,
    /// Per shard, before and after.
    pub shards: Vec<ShardLoad>,
    /// ε of the placement: the bound of a shard is `(1 + ε) × target`.
    pub tolerance: f64,
    /// Things the operator should know, each naming the Secret (or the entry) and field.
    pub notes: Vec<String>,
    /// How zones shaped the placement, in words.
    pub zones: String,
    /// Zones left local, for the next pass's hysteresis.
    pub local_zones: BTreeSet<String>,
}

impl PinPlan {
    /// The writes: (`namespace/name`, shard), in row order.
    pub fn writes(&self) -> impl Iterator<Item = (&str, u32)> {
        self.rows
            .iter()
            .filter_map(|r| match (&r.action, &r.secret) {
                (PinAction::Write(s), Some(secret)) => Some((secret.as_str(), *s)),
                _ => None,
            })
    }
}

/// Plans balanced pins for `entries` (Argo CD's cluster list) with `apps`. Pure.
pub fn plan_pins(entries: &[PinEntry], apps: &[App], options: &PinOptions) -> PinPlan {
    let n = options.replicas.max(1);
    let mut notes = Vec::new();
    // The fleet as Argo CD's controller reads it now.
    let as_read: Vec<Cluster> = entries
        .iter()
        .map(|e| Cluster {
            shard: e.current.pin(),
            ..e.cluster.clone()
        })
        .collect();
    let before = ArgoControllerAssignment::compute(options.argo, n, &as_read, apps);
    let superseded: BTreeSet<usize> = before.superseded().iter().copied().collect();

    // What the placement sees: fixed entries pinned where Argo CD runs them, the others
    // free, starting from their valid current shard.
    let mut placed: Vec<Cluster> = Vec::with_capacity(entries.len());
    let mut placed_index: Vec<Option<usize>> = vec![None; entries.len()];
    let mut untouched: Vec<Option<String>> = vec![None; entries.len()];
    let mut previous = Assignment::new();
    for (i, e) in entries.iter().enumerate() {
        let what = describe(e);
        if e.cluster.skip_reconcile {
            untouched[i] = Some("skip-reconcile: no shard manages it".to_owned());
            continue;
        }
        if superseded.contains(&i) {
            let why = format!(
                "a later Secret has the same server {}; Argo CD keys clusters by server and ignores this one",
                e.cluster.server
            );
            notes.push(format!("{what}: {why}; left alone"));
            untouched[i] = Some(why);
            continue;
        }
        let fixed = e.manual || e.secret.is_none();
        let mut cluster = e.cluster.clone();
        if fixed {
            let at = before.shards()[i];
            if at < 0 {
                let why = format!("shard {at} is negative: no replica of Argo CD manages it");
                notes.push(format!(
                    "{what}: data.shard: {why}; pinned by hand, left alone"
                ));
                untouched[i] = Some(why);
                continue;
            }
            if e.manual {
                note_manual(&mut notes, &what, &e.current, n, at);
            } else {
                notes.push(format!(
                    "{what}: Argo CD's built-in in-cluster entry has no Secret, so it cannot be \
                     pinned; its {} algorithm runs it on shard {at}, counted there (create a \
                     cluster Secret for {} to pin it)",
                    options.argo.name(),
                    e.cluster.server
                ));
            }
            cluster.shard = Some(at);
        } else {
            cluster.shard = None;
            match &e.current {
                CurrentShard::Shard(s) if (0..i64::from(n)).contains(s) => {
                    previous.insert(e.cluster.id.clone(), *s as u32);
                }
                CurrentShard::Shard(s) => notes.push(format!(
                    "{what}: data.shard: {s} is outside 0..{n} (Argo CD runs it on shard {}); reassigned",
                    before.shards()[i]
                )),
                CurrentShard::NotInteger(s) => notes.push(format!(
                    "{what}: data.shard: {s:?} is not an integer (Argo CD ignores it); reassigned"
                )),
                CurrentShard::Unset => {}
            }
        }
        placed_index[i] = Some(placed.len());
        placed.push(cluster);
    }

    let loads = options.config.loads(&placed, apps);
    let prev = PreviousPlacement {
        assignment: previous,
        local_zones: options.local_zones.clone(),
        homes: Assignment::new(),
    };
    let placement = place(
        &placed,
        &loads,
        &options.shards,
        Some(&prev),
        &options.config,
    );
    for w in &placement.warnings {
        // Out-of-range pins cannot happen (fixed entries are pinned in range); the rest
        // name clusters by id, which the rows name by Secret.
        if !matches!(w, PlacementWarning::PinOutOfRange { .. }) {
            notes.push(format!("placement: {w}"));
        }
    }

    // The fleet as Argo CD's controller reads it after the writes.
    let mut rows = Vec::with_capacity(entries.len());
    let mut after_fleet = as_read.clone();
    for (i, e) in entries.iter().enumerate() {
        let planned = placed_index[i].and_then(|p| placement.shards[p]);
        let action = if let Some(why) = untouched[i].take() {
            PinAction::Untouched(why)
        } else if e.secret.is_none() {
            PinAction::BuiltIn
        } else if e.manual {
            PinAction::Manual
        } else {
            match planned {
                Some(s) if e.current == CurrentShard::Shard(i64::from(s)) => PinAction::Keep,
                Some(s) => PinAction::Write(s),
                None => PinAction::Untouched("not placed".to_owned()),
            }
        };
        if let PinAction::Write(s) = action {
            after_fleet[i].shard = Some(i64::from(s));
        }
        rows.push(PinRow {
            name: e.cluster.name.clone(),
            server: e.cluster.server.clone(),
            secret: e.secret.clone(),
            current: e.current.clone(),
            before: before.shards()[i],
            after: 0,
            action,
        });
    }
    let after = ArgoControllerAssignment::compute(options.argo, n, &after_fleet, apps);
    let all_loads = options.config.loads(&as_read, apps);
    let mut shards: Vec<ShardLoad> = (0..n)
        .map(|s| ShardLoad {
            shard: s,
            clusters_before: 0,
            load_before: 0,
            clusters_after: 0,
            load_after: 0,
            target: placement.targets.get(s as usize).copied().unwrap_or(0.0),
        })
        .collect();
    for (i, row) in rows.iter_mut().enumerate() {
        row.after = after.shards()[i];
        if entries[i].cluster.skip_reconcile || superseded.contains(&i) {
            continue;
        }
        if let Some(l) = usize::try_from(row.before)
            .ok()
            .and_then(|s| shards.get_mut(s))
        {
            l.clusters_before += 1;
            l.load_before += all_loads[i];
        }
        if let Some(l) = usize::try_from(row.after)
            .ok()
            .and_then(|s| shards.get_mut(s))
        {
            l.clusters_after += 1;
            l.load_after += all_loads[i];
        }
    }
    let zones = match &placement.zones {
        ZonePlan::Unused => "none known".to_owned(),
        ZonePlan::Fallback(why) => format!("not used: {why}"),
        ZonePlan::Aware(z) => format!(
            "aware ({} zones, {} kept local)",
            z.len(),
            z.iter().filter(|z| z.local).count()
        ),
    };
    let local_zones = placement.as_previous(&placed).local_zones;
    PinPlan {
        replicas: n,
        argo: options.argo,
        rows,
        shards,
        tolerance: options.config.tolerance,
        notes,
        zones,
        local_zones,
    }
}

/// The entry as notes name it: its Secret, else the built-in entry's server.
fn describe(e: &PinEntry) -> String {
    match &e.secret {
        Some(s) => format!("Secret {s}"),
        None if is_built_in_in_cluster(&e.cluster) => {
            format!("in-cluster entry {}", e.cluster.server)
        }
        None => format!("cluster {} ({})", e.cluster.name, e.cluster.server),
    }
}

/// Notes about a manual pin Argo CD does not obey as written.
fn note_manual(notes: &mut Vec<String>, what: &str, current: &CurrentShard, n: u32, at: i64) {
    let why = match current {
        CurrentShard::Shard(s) if *s < i64::from(n) => return,
        CurrentShard::Shard(s) => format!("{s} is outside 0..{n}"),
        CurrentShard::NotInteger(s) => format!("{s:?} is not an integer"),
        CurrentShard::Unset => "missing".to_owned(),
    };
    notes.push(format!(
        "{what}: data.shard: {why}; pinned by hand ({MANUAL_PIN_ANNOTATION}: {MANUAL_PIN_VALUE}), \
         so left alone; Argo CD runs it on shard {at}, counted there"
    ));
}

#[cfg(test)]
mod tests;
