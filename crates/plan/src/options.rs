//! What to plan: algorithms, replica counts, shard layout, and the text forms the CLI
//! parses them from (`balanced,legacy` or `all`; `3..8` or `2,4,8`; `a,b,c`).

use fleetshard_core::ShardSpec;
use fleetshard_core::argo::ArgoAlgorithm;
use fleetshard_core::placement::{BALANCED, PlacementConfig};

use fleetshard_core::placement::hysteresis::Hysteresis;

use crate::PlanError;
use crate::costs::MeasuredCosts;
use crate::previous::PreviousPlan;

/// Largest replica count a plan accepts. Argo CD would take up to `i32::MAX`, but a plan
/// allocates per shard, and no controller runs ten thousand replicas: a typo is likelier.
pub const MAX_REPLICAS: u32 = 10_000;

/// Most plans one invocation may ask for (algorithms × replica counts).
pub const MAX_PLANS: usize = 1_000;

/// A distribution algorithm a plan can use: fleetshard's own or one of Argo CD's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// fleetshard's balanced placement (`fleetshard_core::placement`).
    Balanced,
    /// One of Argo CD's algorithms, bit for bit.
    Argo(ArgoAlgorithm),
}

impl Algorithm {
    /// Every algorithm, in the order `all` expands to: ours first, then Argo CD's from the
    /// most to the least balanced, which is also the order people compare them in.
    pub const ALL: [Algorithm; 4] = [
        Algorithm::Balanced,
        Algorithm::Argo(ArgoAlgorithm::ConsistentHashing),
        Algorithm::Argo(ArgoAlgorithm::RoundRobin),
        Algorithm::Argo(ArgoAlgorithm::Legacy),
    ];

    /// The name on the command line and in reports.
    pub const fn name(self) -> &'static str {
        match self {
            Algorithm::Balanced => BALANCED,
            Algorithm::Argo(a) => a.name(),
        }
    }

    /// Parses one exact name.
    pub fn parse(name: &str) -> Result<Self, PlanError> {
        Self::ALL
            .into_iter()
            .find(|a| a.name() == name)
            .ok_or_else(|| PlanError::UnknownAlgorithm {
                name: name.to_owned(),
                valid: valid_names(),
            })
    }

    /// Parses `all` or a comma-separated list of names; duplicates are dropped, the first
    /// occurrence keeps its place (the first algorithm is the primary plan).
    pub fn parse_list(text: &str) -> Result<Vec<Self>, PlanError> {
        let mut out = Vec::new();
        for part in text.split(',').map(str::trim) {
            let add: Vec<Algorithm> = if part == "all" {
                Self::ALL.to_vec()
            } else {
                vec![Self::parse(part)?]
            };
            for a in add {
                if !out.contains(&a) {
                    out.push(a);
                }
            }
        }
        Ok(out)
    }
}

/// `balanced, consistent-hashing, round-robin, legacy, all` — for error messages and help.
pub fn valid_names() -> String {
    let mut names: Vec<&str> = Algorithm::ALL.iter().map(|a| a.name()).collect();
    names.push("all");
    names.join(", ")
}

/// Parses replica counts: `N`, an inclusive range `A..B` (`A..=B` too; descending ranges
/// count down, to plan a scale-down), or a comma-separated list of those. Counts keep
/// their order, since movement is measured from each count to the next.
pub fn parse_replicas(text: &str) -> Result<Vec<u32>, PlanError> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim) {
        let range = part.split_once("..=").or_else(|| part.split_once(".."));
        match range {
            Some((a, b)) => {
                let (a, b) = (replica_count(a, text)?, replica_count(b, text)?);
                if a <= b {
                    out.extend(a..=b);
                } else {
                    out.extend((b..=a).rev());
                }
            }
            None => out.push(replica_count(part, text)?),
        }
        if out.len() > MAX_PLANS {
            return Err(PlanError::InvalidReplicas {
                value: text.to_owned(),
                reason: format!("more than {MAX_PLANS} replica counts"),
            });
        }
    }
    Ok(out)
}

fn replica_count(part: &str, whole: &str) -> Result<u32, PlanError> {
    let part = part.trim();
    let invalid = |reason: String| PlanError::InvalidReplicas {
        value: whole.to_owned(),
        reason,
    };
    let n: i64 = part.parse().map_err(|_| {
        invalid(format!(
            "{part:?} is not a whole number (expected N, A..B or a comma-separated list)"
        ))
    })?;
    if n < 0 {
        return Err(PlanError::NegativeReplicas {
            value: whole.to_owned(),
        });
    }
    if n > i64::from(MAX_REPLICAS) {
        return Err(invalid(format!("{n} is more than {MAX_REPLICAS} replicas")));
    }
    Ok(n as u32)
}

/// Parses a comma-separated list of zones (empty items are an error: `a,,b` is a typo).
pub fn parse_zones(text: &str) -> Result<Vec<String>, PlanError> {
    text.split(',')
        .map(str::trim)
        .map(|z| {
            if z.is_empty() {
                Err(PlanError::InvalidShardLayout(format!(
                    "empty zone name in {text:?}"
                )))
            } else {
                Ok(z.to_owned())
            }
        })
        .collect()
}

/// Parses a comma-separated list of shard capacities (whole numbers ≥ 1).
pub fn parse_capacities(text: &str) -> Result<Vec<u32>, PlanError> {
    text.split(',')
        .map(str::trim)
        .map(|c| match c.parse::<u32>() {
            Ok(n) if n >= 1 => Ok(n),
            _ => Err(PlanError::InvalidShardLayout(format!(
                "shard capacity {c:?} in {text:?} is not a whole number ≥ 1"
            ))),
        })
        .collect()
}

/// Shard layout for `replicas` shards: `template[i % len]` for shard `i` (the template is
/// cycled when shorter), or zone-less capacity-1 shards for an empty template.
pub fn shard_specs(template: &[ShardSpec], replicas: u32) -> Vec<ShardSpec> {
    (0..replicas as usize)
        .map(|i| {
            if template.is_empty() {
                ShardSpec::default()
            } else {
                template[i % template.len()].clone()
            }
        })
        .collect()
}

/// Overrides the zones and/or capacities of a shard template. The result is as long as
/// the longest of the three lists; each list is cycled to that length, so `--shard-zones
/// a,b,c` alone describes three shards per cycle, whatever the fleet file said.
pub fn override_template(
    template: &[ShardSpec],
    zones: Option<&[String]>,
    capacities: Option<&[u32]>,
) -> Vec<ShardSpec> {
    let len = [
        template.len(),
        zones.map_or(0, <[_]>::len),
        capacities.map_or(0, <[_]>::len),
    ]
    .into_iter()
    .max()
    .unwrap_or(0);
    (0..len)
        .map(|i| {
            let base = if template.is_empty() {
                ShardSpec::default()
            } else {
                template[i % template.len()].clone()
            };
            ShardSpec {
                zone: match zones {
                    Some(z) if !z.is_empty() => Some(z[i % z.len()].clone()),
                    _ => base.zone,
                },
                capacity: match capacities {
                    Some(c) if !c.is_empty() => c[i % c.len()],
                    _ => base.capacity,
                },
            }
        })
        .collect()
}

/// Everything a plan run needs besides the fleet.
#[derive(Debug, Clone)]
pub struct PlanOptions {
    /// Algorithms to compare; the first is the primary plan.
    pub algorithms: Vec<Algorithm>,
    /// Replica counts, in sweep order.
    pub replicas: Vec<u32>,
    /// Shard layout template (zones, capacities), cycled over each replica count.
    pub shard_template: Vec<ShardSpec>,
    /// Tolerance and zone policy of the balanced placement (tolerance also draws the bound
    /// for Argo CD's algorithms, to compare them on the same terms).
    pub config: PlacementConfig,
    /// An earlier plan to measure movement from (and, for `balanced`, to stay close to).
    pub previous: Option<PreviousPlan>,
    /// Measured costs, slices and hysteresis.
    pub costs: CostOptions,
}

/// How measured costs shape a plan (`--costs`, `--split-clusters`, `--hysteresis`).
#[derive(Debug, Clone, Default)]
pub struct CostOptions {
    /// Measured cost per cluster id; `None`: every cluster costs its estimate.
    pub measured: Option<MeasuredCosts>,
    /// `balanced`: split a cluster costing more than `(1 + ε)` shares into slices.
    pub split_clusters: bool,
    /// `balanced` from a previous placement: keep units in place unless their shard is
    /// beyond the band and the move pays for itself; `None`: the engine's placement as is.
    pub hysteresis: Option<Hysteresis>,
}

impl PlanOptions {
    /// Checks the options before any work is done.
    pub fn validate(&self) -> Result<(), PlanError> {
        if self.algorithms.is_empty() {
            return Err(PlanError::Empty("algorithm"));
        }
        if self.replicas.is_empty() {
            return Err(PlanError::Empty("replica count"));
        }
        if self.algorithms.len() * self.replicas.len() > MAX_PLANS {
            return Err(PlanError::InvalidReplicas {
                value: format!(
                    "{} algorithms × {} replica counts",
                    self.algorithms.len(),
                    self.replicas.len()
                ),
                reason: format!("more than {MAX_PLANS} plans"),
            });
        }
        if let Some(h) = self.costs.hysteresis {
            let valid = |x: f64| x.is_finite() && (0.0..=10.0).contains(&x);
            if !valid(h.band) || !valid(h.takeover_cost) {
                return Err(PlanError::InvalidHysteresis(h.band, h.takeover_cost));
            }
        }
        let t = self.config.tolerance;
        if !(t.is_finite() && (0.0..=10.0).contains(&t)) {
            return Err(PlanError::InvalidTolerance(t));
        }
        if let Some(s) = self.shard_template.iter().find(|s| s.capacity == 0) {
            return Err(PlanError::InvalidShardLayout(format!(
                "shard capacity 0 (zone {:?}); capacities are ≥ 1",
                s.zone.as_deref().unwrap_or("")
            )));
        }
        Ok(())
    }
}
