//! Synthetic measured costs: what each cluster of a generated fleet costs a replica, for
//! `plan --costs` and the placement figures.

use fleetshard_core::Fleet;
use fleetshard_core::placement::DEFAULT_CLUSTER_BASE_LOAD;

use crate::rng::{SplitMix64, exp_nonpos, ln};
use crate::spec::FleetSpec;

/// The stream measured costs draw from (after `generate.rs`'s five).
const STREAM_COSTS: u64 = 6;

impl FleetSpec {
    /// A measured cost per cluster of `fleet` (same order): its estimate (the default
    /// base plus its apps) times a per-app cost factor drawn log-uniformly from
    /// `1..spread` by the seed, so that an app of one cluster can cost `spread` × one of
    /// another (a cluster of 2,000-object apps against one of small apps). A `spread`
    /// below 1 counts as 1.
    pub fn costs(&self, fleet: &Fleet, spread: f64) -> Vec<f64> {
        let mut rng = SplitMix64::stream(self.seed, STREAM_COSTS);
        let ln_spread = if spread > 1.0 { ln(spread) } else { 0.0 };
        fleet
            .app_counts()
            .into_iter()
            .map(|apps| {
                // u uniform in [0, 1): the factor spread^u = spread · e^((u − 1) ln spread).
                let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                let factor = if ln_spread > 0.0 {
                    spread * exp_nonpos((u - 1.0) * ln_spread)
                } else {
                    1.0
                };
                (apps + DEFAULT_CLUSTER_BASE_LOAD) as f64 * factor
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use crate::FleetSpec;

    #[test]
    fn costs_are_seeded_and_spread_as_asked() {
        let spec = FleetSpec::new(200).with_seed(3);
        let fleet = spec.generate();
        let costs = spec.costs(&fleet, 50.0);
        assert_eq!(costs, spec.costs(&fleet, 50.0), "same spec, same costs");
        let apps = fleet.app_counts();
        let factors: Vec<f64> = costs
            .iter()
            .zip(&apps)
            .map(|(c, a)| c / (a + 5) as f64)
            .collect();
        let lo = factors.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = factors.iter().copied().fold(0.0, f64::max);
        assert!(lo >= 1.0 && hi < 50.0 && hi / lo > 30.0, "{lo}..{hi}");
        assert!(
            spec.costs(&fleet, 0.5)
                .iter()
                .zip(&apps)
                .all(|(c, a)| *c == (a + 5) as f64)
        );
    }
}
