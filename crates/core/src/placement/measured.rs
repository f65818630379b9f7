//! Measured costs as placement loads, one rule for `plan --costs` and for the distributor
//! of a running fleet.
//!
//! A cluster with a measured cost costs that. A cluster without one keeps its estimate
//! (base plus apps, or its weight), scaled into the measured unit by the median ratio of
//! measured cost to estimate over the clusters that have both: half the measured clusters
//! cost more than their estimate says, half less, so the unmeasured ones are guessed at
//! neither extreme. Without any measured cluster the estimate is the cost. The engine
//! places integer loads: [`engine_loads`] scales costs proportionally to a large total.

use std::collections::BTreeMap;

/// The total [`engine_loads`] scales costs to: large enough that rounding is far below
/// any tolerance, small enough that sums of loads never overflow.
pub const ENGINE_TOTAL: f64 = 1e9;

/// What each cluster costs (same order as `ids`): its measured cost, or its estimate
/// (`estimates`, the base-plus-apps loads) times the median measured/estimate ratio.
pub fn cluster_costs(
    ids: &[&str],
    estimates: &[u64],
    measured: &BTreeMap<String, f64>,
) -> Vec<f64> {
    let mut ratios: Vec<f64> = ids
        .iter()
        .zip(estimates)
        .filter(|(_, e)| **e > 0)
        .filter_map(|(id, &e)| measured.get(*id).map(|m| m / e as f64))
        .collect();
    ratios.sort_by(f64::total_cmp);
    let scale = match ratios.len() {
        0 => 1.0,
        n if n % 2 == 1 => ratios[n / 2],
        n => (ratios[n / 2 - 1] + ratios[n / 2]) / 2.0,
    };
    ids.iter()
        .zip(estimates)
        .map(|(id, &e)| measured.get(*id).copied().unwrap_or(e as f64 * scale))
        .collect()
}

/// Costs as engine loads: proportional, summing to about [`ENGINE_TOTAL`] (all zero when
/// nothing costs anything).
pub fn engine_loads(costs: &[f64]) -> Vec<u64> {
    let total: f64 = costs.iter().filter(|c| c.is_finite() && **c > 0.0).sum();
    if total <= 0.0 {
        return vec![0; costs.len()];
    }
    costs
        .iter()
        .map(|&c| {
            if c.is_finite() && c > 0.0 {
                (c * ENGINE_TOTAL / total).round() as u64
            } else {
                0
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unmeasured_clusters_are_scaled_by_the_median_ratio() {
        let m: BTreeMap<String, f64> = [("a", 20.0), ("b", 90.0), ("c", 400.0), ("gone", 1.0)]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        // Ratios 2, 3, 4 (median 3); d's estimate 5 becomes 15.
        let costs = cluster_costs(&["a", "b", "c", "d"], &[10, 30, 100, 5], &m);
        assert_eq!(costs, vec![20.0, 90.0, 400.0, 15.0]);
        assert_eq!(cluster_costs(&["a"], &[7], &BTreeMap::new()), vec![7.0]);
    }

    #[test]
    fn engine_loads_keep_proportions_and_refuse_nonsense() {
        let loads = engine_loads(&[1.0, 3.0, 0.0, f64::NAN, -2.0]);
        assert_eq!(loads[1], 3 * loads[0]);
        assert_eq!(loads[0] + loads[1], ENGINE_TOTAL as u64);
        assert_eq!(&loads[2..], &[0, 0, 0]);
        assert_eq!(engine_loads(&[0.0, 0.0]), vec![0, 0]);
    }
}
