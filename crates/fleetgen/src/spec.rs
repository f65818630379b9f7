//! What to generate: [`FleetSpec`], [`Skew`], and what can be wrong with a spec.

/// How applications are spread over clusters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Skew {
    /// As even as possible: every cluster gets `⌊mean⌋` or `⌈mean⌉` apps — exactly the
    /// mean when it is a whole number — and the clusters that get one extra are picked by
    /// the seed.
    Uniform,
    /// The cluster of rank `r` (1-based) gets a share proportional to `1 / r^exponent`;
    /// the rank → cluster mapping is shuffled by the seed. Exponent 1 (the default) is the
    /// classic Zipf law used by the benchmark fleets: at 1 000 clusters the busiest one
    /// holds ~13 % of all apps and the top 10 % of clusters ~69 %.
    Zipf {
        /// The Zipf exponent `s ≥ 0` (0 is uniform; larger is more skewed).
        exponent: f64,
    },
    /// Every application independently picks a cluster uniformly at random (a
    /// multinomial spread: roughly Poisson per cluster).
    Random,
}

impl Skew {
    /// Zipf with the classic exponent 1.
    pub const fn zipf() -> Self {
        Skew::Zipf { exponent: 1.0 }
    }
}

impl Default for Skew {
    /// [`Skew::zipf`]: the shape of the benchmark fleets.
    fn default() -> Self {
        Skew::zipf()
    }
}

/// A recipe for a synthetic fleet; [`FleetSpec::generate`] turns it into a
/// [`fleetshard_core::Fleet`], the same one for the same spec on every platform.
///
/// ```
/// use fleetshard_fleetgen::{FleetSpec, Skew};
///
/// let fleet = FleetSpec {
///     zones: vec!["eu-west-1a".into(), "eu-west-1b".into()],
///     seed: 7,
///     ..FleetSpec::new(100)
/// }
/// .generate();
/// assert_eq!(fleet.clusters.len(), 100);
/// assert_eq!(fleet.apps.len(), 1000);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct FleetSpec {
    /// Number of clusters.
    pub clusters: usize,
    /// Mean applications per cluster (default 10); the fleet has exactly
    /// `round(clusters × apps_per_cluster)` applications (see [`FleetSpec::total_apps`]).
    pub apps_per_cluster: f64,
    /// How applications are spread over clusters (default [`Skew::zipf`]).
    pub skew: Skew,
    /// Availability zones for the clusters' [`ZONE_LABEL`](fleetshard_core::model::ZONE_LABEL);
    /// empty (the default) means no zone or region labels. The region label is derived
    /// from the zone with [`region_of`](crate::region_of).
    pub zones: Vec<String>,
    /// Relative weights of `zones`, same length; empty (the default) means equal weights.
    /// Zone sizes are exact: each zone gets its weighted share of the clusters, rounded so
    /// that the sizes add up (equal weights → sizes differ by at most one), and which
    /// cluster lands in which zone is shuffled by the seed.
    pub zone_weights: Vec<u32>,
    /// The seed: every random choice derives from it (default 0).
    pub seed: u64,
    /// Fraction of clusters given a `shard` pin (default 0): `round(clusters × fraction)`
    /// clusters, chosen by the seed, each pinned to a shard drawn uniformly from
    /// `0..replicas`.
    pub pinned_fraction: f64,
    /// Replica count that pins are drawn from; must be positive when any cluster is pinned.
    pub replicas: usize,
}

impl FleetSpec {
    /// `clusters` clusters with every other field at its default: 10 apps per cluster on a
    /// Zipf (exponent 1) spread, no zones, seed 0, no pins.
    pub fn new(clusters: usize) -> Self {
        FleetSpec {
            clusters,
            apps_per_cluster: 10.0,
            skew: Skew::default(),
            zones: Vec::new(),
            zone_weights: Vec::new(),
            seed: 0,
            pinned_fraction: 0.0,
            replicas: 0,
        }
    }

    /// This spec with another seed.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// This spec with another skew.
    pub fn with_skew(mut self, skew: Skew) -> Self {
        self.skew = skew;
        self
    }

    /// This spec with another mean number of apps per cluster.
    pub fn with_apps_per_cluster(mut self, mean: f64) -> Self {
        self.apps_per_cluster = mean;
        self
    }

    /// This spec with clusters spread evenly over `zones`.
    pub fn with_zones<S: Into<String>>(mut self, zones: impl IntoIterator<Item = S>) -> Self {
        self.zones = zones.into_iter().map(Into::into).collect();
        self.zone_weights.clear();
        self
    }

    /// This spec with `fraction` of the clusters pinned into `0..replicas`.
    pub fn with_pins(mut self, fraction: f64, replicas: usize) -> Self {
        self.pinned_fraction = fraction;
        self.replicas = replicas;
        self
    }

    /// The exact number of applications the fleet will have: `round(clusters × mean)`
    /// (halves round away from zero). Meaningful only for a valid spec.
    pub fn total_apps(&self) -> usize {
        (self.clusters as f64 * self.apps_per_cluster).round() as usize
    }

    /// The number of clusters that get a `shard` pin: `round(clusters × pinned_fraction)`.
    /// Meaningful only for a valid spec.
    pub fn pinned_clusters(&self) -> usize {
        (self.clusters as f64 * self.pinned_fraction).round() as usize
    }

    /// Checks the spec; [`FleetSpec::try_generate`] does this first.
    pub fn validate(&self) -> Result<(), SpecError> {
        let mean = self.apps_per_cluster;
        if !mean.is_finite() || mean < 0.0 {
            return Err(SpecError::AppsPerCluster(mean));
        }
        // Keep every count exactly representable in an f64.
        if self.clusters as f64 * mean > MAX_APPS {
            return Err(SpecError::TooManyApps(self.clusters as f64 * mean));
        }
        if let Skew::Zipf { exponent } = self.skew
            && !(exponent.is_finite() && exponent >= 0.0)
        {
            return Err(SpecError::ZipfExponent(exponent));
        }
        if !self.zone_weights.is_empty() {
            if self.zone_weights.len() != self.zones.len() {
                return Err(SpecError::ZoneWeights {
                    zones: self.zones.len(),
                    weights: self.zone_weights.len(),
                });
            }
            if self.zone_weights.iter().all(|&w| w == 0) {
                return Err(SpecError::ZeroZoneWeights);
            }
        }
        let fraction = self.pinned_fraction;
        if !(0.0..=1.0).contains(&fraction) {
            return Err(SpecError::PinnedFraction(fraction));
        }
        if self.pinned_clusters() > 0 && self.replicas == 0 {
            return Err(SpecError::PinsWithoutReplicas);
        }
        Ok(())
    }
}

impl Default for FleetSpec {
    /// [`FleetSpec::new`] with zero clusters; set `clusters` with struct update syntax.
    fn default() -> Self {
        FleetSpec::new(0)
    }
}

/// Upper bound on `clusters × apps_per_cluster` (2^40 — far beyond any memory).
const MAX_APPS: f64 = (1u64 << 40) as f64;

/// Why a [`FleetSpec`] cannot be generated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SpecError {
    /// `apps_per_cluster` is negative, infinite or NaN.
    #[error("apps_per_cluster must be a finite number ≥ 0, not {0}")]
    AppsPerCluster(f64),
    /// `clusters × apps_per_cluster` is absurdly large.
    #[error("clusters × apps_per_cluster = {0} is too many applications")]
    TooManyApps(f64),
    /// The Zipf exponent is negative, infinite or NaN.
    #[error("the Zipf exponent must be a finite number ≥ 0, not {0}")]
    ZipfExponent(f64),
    /// `zone_weights` is neither empty nor as long as `zones`.
    #[error("{weights} zone weights for {zones} zones")]
    ZoneWeights {
        /// Number of zones.
        zones: usize,
        /// Number of weights.
        weights: usize,
    },
    /// Every zone weight is zero.
    #[error("zone weights are all zero")]
    ZeroZoneWeights,
    /// `pinned_fraction` is outside `0..=1` or NaN.
    #[error("pinned_fraction must be within 0..=1, not {0}")]
    PinnedFraction(f64),
    /// Some clusters are to be pinned but `replicas` is zero.
    #[error("pinned_fraction > 0 needs replicas > 0 to pin into")]
    PinsWithoutReplicas,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_benchmark_shape() {
        let s = FleetSpec::new(1000);
        assert_eq!(s.apps_per_cluster, 10.0);
        assert_eq!(s.skew, Skew::Zipf { exponent: 1.0 });
        assert_eq!(s.total_apps(), 10_000);
        assert_eq!(s.pinned_clusters(), 0);
        assert_eq!(s.validate(), Ok(()));
        assert_eq!(FleetSpec::default().clusters, 0);
    }

    #[test]
    fn total_rounds_the_product() {
        assert_eq!(FleetSpec::new(3).with_apps_per_cluster(2.5).total_apps(), 8);
        assert_eq!(
            FleetSpec::new(4).with_apps_per_cluster(2.5).total_apps(),
            10
        );
        assert_eq!(FleetSpec::new(7).with_apps_per_cluster(0.0).total_apps(), 0);
    }

    #[test]
    fn invalid_specs_are_rejected() {
        let bad = |s: FleetSpec| s.validate().unwrap_err();
        assert_eq!(
            bad(FleetSpec::new(1).with_apps_per_cluster(-1.0)),
            SpecError::AppsPerCluster(-1.0)
        );
        assert!(matches!(
            bad(FleetSpec::new(1).with_apps_per_cluster(f64::NAN)),
            SpecError::AppsPerCluster(_)
        ));
        assert!(matches!(
            bad(FleetSpec::new(usize::MAX)),
            SpecError::TooManyApps(_)
        ));
        assert_eq!(
            bad(FleetSpec::new(1).with_skew(Skew::Zipf { exponent: -0.5 })),
            SpecError::ZipfExponent(-0.5)
        );
        let mut s = FleetSpec::new(4).with_zones(["a", "b"]);
        s.zone_weights = vec![1];
        assert_eq!(
            bad(s.clone()),
            SpecError::ZoneWeights {
                zones: 2,
                weights: 1
            }
        );
        s.zone_weights = vec![0, 0];
        assert_eq!(bad(s), SpecError::ZeroZoneWeights);
        assert_eq!(
            bad(FleetSpec::new(10).with_pins(1.5, 3)),
            SpecError::PinnedFraction(1.5)
        );
        assert_eq!(
            bad(FleetSpec::new(10).with_pins(0.5, 0)),
            SpecError::PinsWithoutReplicas
        );
        // Too few clusters for any pin: nothing to pin, so no replicas needed.
        assert_eq!(FleetSpec::new(1).with_pins(0.1, 0).validate(), Ok(()));
    }

    #[test]
    fn builders_set_their_fields() {
        let s = FleetSpec::new(5)
            .with_seed(9)
            .with_skew(Skew::Uniform)
            .with_zones(vec!["z1".to_string()])
            .with_pins(0.2, 3);
        assert_eq!(
            (s.seed, s.skew, s.zones.len(), s.pinned_fraction, s.replicas),
            (9, Skew::Uniform, 1, 0.2, 3)
        );
    }
}
