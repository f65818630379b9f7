//! Reading back an earlier `plan --output json` to measure movement from it.

use std::collections::BTreeSet;

use fleetshard_core::Assignment;
use fleetshard_core::placement::PreviousPlacement;
use fleetshard_core::placement::slices::slice_unit_id;
use serde::Deserialize;

use crate::PlanError;

/// An earlier plan: where each cluster was, and which zones kept their clusters local.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PreviousPlan {
    /// The earlier plan's algorithm name, when it said.
    pub algorithm: Option<String>,
    /// The earlier plan's replica count, when it said.
    pub replicas: Option<u32>,
    /// Where each cluster was (clusters with no shard, or a negative one, are absent); a
    /// split cluster's slices by their unit ids (`cluster#slice-N-of-K`).
    pub assignment: Assignment,
    /// Zones that were local in the earlier plan (balanced placement's hysteresis).
    pub local_zones: BTreeSet<String>,
}

/// Only the fields needed are read, so a plan written by a newer fleetshard (more fields)
/// still loads; `plans` is ignored, the top level being the primary plan.
#[derive(Deserialize)]
struct Doc {
    algorithm: Option<String>,
    replicas: Option<u32>,
    clusters: Vec<DocCluster>,
    #[serde(default)]
    zones: Option<DocZones>,
}

#[derive(Deserialize)]
struct DocCluster {
    id: String,
    shard: Option<i64>,
    /// A split cluster's slices: each is placed as its own unit.
    #[serde(default)]
    slices: Vec<DocSlice>,
}

#[derive(Deserialize)]
struct DocSlice {
    slice: u32,
    shard: Option<i64>,
}

#[derive(Deserialize)]
struct DocZones {
    #[serde(default)]
    zones: Vec<DocZone>,
}

#[derive(Deserialize)]
struct DocZone {
    zone: String,
    #[serde(default)]
    local: Option<bool>,
}

impl PreviousPlan {
    /// Parses the JSON `plan --output json` printed; `source` names the file in errors.
    pub fn from_json(text: &str, source: &str) -> Result<Self, PlanError> {
        let doc: Doc = serde_json::from_str(text).map_err(|e| PlanError::PreviousPlan {
            source_name: source.to_owned(),
            message: format!("not a plan written by `fleetshard plan --output json`: {e}"),
        })?;
        let mut assignment = Assignment::new();
        for c in &doc.clusters {
            // A fleet with a duplicate id lists it twice; the first is the placed one (the
            // balanced placement leaves later duplicates unplaced), so keep the first.
            if assignment.get(&c.id).is_some() {
                continue;
            }
            // Argo CD's -1 and negative pins mean "no replica": nothing to move from.
            if !c.slices.is_empty() {
                for sl in &c.slices {
                    if let Some(shard) = sl.shard.and_then(|s| u32::try_from(s).ok()) {
                        let count = u32::try_from(c.slices.len()).unwrap_or(u32::MAX);
                        assignment.insert(slice_unit_id(&c.id, sl.slice, count), shard);
                    }
                }
            } else if let Some(shard) = c.shard.and_then(|s| u32::try_from(s).ok()) {
                assignment.insert(c.id.clone(), shard);
            }
        }
        let local_zones = doc
            .zones
            .map(|z| {
                z.zones
                    .into_iter()
                    .filter(|z| z.local == Some(true))
                    .map(|z| z.zone)
                    .collect()
            })
            .unwrap_or_default();
        Ok(PreviousPlan {
            algorithm: doc.algorithm,
            replicas: doc.replicas,
            assignment,
            local_zones,
        })
    }

    /// The form balanced placement stays close to.
    pub fn as_placement(&self) -> PreviousPlacement {
        PreviousPlacement {
            assignment: self.assignment.clone(),
            local_zones: self.local_zones.clone(),
            // Plans have no vacant shards, so nothing is displaced.
            homes: Default::default(),
        }
    }
}
