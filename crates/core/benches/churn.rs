//! Balance and movement of every algorithm on the benchmark fleets, as a Markdown table for
//! `docs/performance.md`. Run: `cargo bench -p fleetshard-core --bench churn -- [ZIPF]`
//! (the Zipf exponent of the apps-per-cluster spread; 1.0 by default).
//!
//! Movement is the fraction of *load* (apps) whose cluster changes shard, among clusters
//! present before and after. Argo CD's algorithms are stateless (no previous assignment);
//! `balanced` is given the previous assignment, as fleetshard's distributor always is.

use fleetshard_core::argo::{ArgoAlgorithm, ArgoControllerAssignment};
use fleetshard_core::placement::{PlacementConfig, place};
use fleetshard_core::{App, Assignment, Balance, Cluster, Fleet, ShardSpec};
use fleetshard_fleetgen::{FleetSpec, Skew};

#[derive(Clone, Copy)]
enum Alg {
    Argo(ArgoAlgorithm),
    Balanced,
}

impl Alg {
    fn name(self) -> &'static str {
        match self {
            Alg::Argo(a) => a.name(),
            Alg::Balanced => "balanced",
        }
    }

    /// Shard per cluster, optionally staying close to `previous` (balanced only).
    fn assign(
        self,
        clusters: &[Cluster],
        apps: &[App],
        loads: &[u64],
        r: u32,
        previous: Option<&Assignment>,
    ) -> Vec<Option<i64>> {
        match self {
            Alg::Argo(a) => ArgoControllerAssignment::compute(a, r, clusters, apps)
                .shards()
                .iter()
                .map(|&s| Some(s))
                .collect(),
            Alg::Balanced => {
                let prev = previous.map(|a| fleetshard_core::placement::PreviousPlacement {
                    assignment: a.clone(),
                    ..Default::default()
                });
                let shards = vec![ShardSpec::default(); r as usize];
                place(
                    clusters,
                    loads,
                    &shards,
                    prev.as_ref(),
                    &PlacementConfig::default(),
                )
                .shards
                .iter()
                .map(|s| s.map(i64::from))
                .collect()
            }
        }
    }
}

fn assignment(clusters: &[Cluster], shards: &[Option<i64>]) -> Assignment {
    clusters
        .iter()
        .zip(shards)
        .filter_map(|(c, s)| s.filter(|&s| s >= 0).map(|s| (c.id.clone(), s as u32)))
        .collect()
}

fn moved_pct(before: &Assignment, after: &Assignment, fleet: &Fleet, loads: &[u64]) -> f64 {
    let by_id: std::collections::HashMap<&str, u64> = fleet
        .clusters
        .iter()
        .map(|c| c.id.as_str())
        .zip(loads.iter().copied())
        .collect();
    // Count only clusters present on both sides.
    let common: Assignment = after
        .iter()
        .filter(|(id, _)| before.get(id).is_some())
        .map(|(id, s)| (id.to_owned(), s))
        .collect();
    100.0
        * before
            .movement_to(&common, |id| by_id.get(id).copied().unwrap_or(0))
            .load_fraction()
}

fn with_cluster(fleet: &Fleet, id: &str) -> Fleet {
    let mut f = fleet.clone();
    let server = format!("https://{id}.extra.example");
    f.clusters.push(Cluster::new(id, &server));
    for k in 0..10 {
        f.apps.push(App::to_server(
            "argocd",
            &format!("extra-{id}-{k}"),
            &server,
        ));
    }
    f
}

fn main() {
    let exponent: f64 = std::env::args()
        .filter(|a| a != "--bench")
        .nth(1)
        .map_or(1.0, |a| a.parse().expect("ZIPF must be a number"));
    let algs = [
        Alg::Argo(ArgoAlgorithm::Legacy),
        Alg::Argo(ArgoAlgorithm::RoundRobin),
        Alg::Argo(ArgoAlgorithm::ConsistentHashing),
        Alg::Balanced,
    ];
    println!(
        "| fleet | R | algorithm | max/mean (best possible) | R→R+1 moved | R→R−1 moved (excl. removed shard) | +1 cluster (lowest id) | +1 cluster (random id) | −1 cluster (lowest id) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for size in [1_000usize, 10_000, 50_000] {
        let fleet = FleetSpec::new(size)
            .with_seed(7)
            .with_skew(Skew::Zipf { exponent })
            .generate();
        let loads = fleet.loads();
        let lowest = fleet
            .clusters
            .iter()
            .map(|c| c.id.as_str())
            .min()
            .unwrap()
            .to_owned();
        for r in [10u32, 100] {
            for alg in algs {
                let base = alg.assign(&fleet.clusters, &fleet.apps, &loads, r, None);
                let a0 = assignment(&fleet.clusters, &base);
                let bal = Balance::of(r, &base, &loads);

                let up = assignment(
                    &fleet.clusters,
                    &alg.assign(&fleet.clusters, &fleet.apps, &loads, r + 1, Some(&a0)),
                );
                let down_raw = alg.assign(&fleet.clusters, &fleet.apps, &loads, r - 1, Some(&a0));
                let down = assignment(&fleet.clusters, &down_raw);
                // Among clusters not on the removed shard (the last one for every algorithm).
                let kept: Assignment = a0
                    .iter()
                    .filter(|&(_, s)| s != r - 1)
                    .map(|(id, s)| (id.to_owned(), s))
                    .collect();
                let down_moved = moved_pct(&kept, &down, &fleet, &loads);

                let plus_low = with_cluster(&fleet, "00000000-0000-4000-8000-000000000000");
                let pl_loads = plus_low.loads();
                let pl = assignment(
                    &plus_low.clusters,
                    &alg.assign(&plus_low.clusters, &plus_low.apps, &pl_loads, r, Some(&a0)),
                );
                let plus_rand = with_cluster(&fleet, "7f3e1c2a-5b6d-4e8f-9a0b-1c2d3e4f5a6b");
                let pr_loads = plus_rand.loads();
                let pr = assignment(
                    &plus_rand.clusters,
                    &alg.assign(
                        &plus_rand.clusters,
                        &plus_rand.apps,
                        &pr_loads,
                        r,
                        Some(&a0),
                    ),
                );

                let mut minus = fleet.clone();
                let gone = minus.clusters.iter().position(|c| c.id == lowest).unwrap();
                let gone_server = minus.clusters.remove(gone).server;
                minus
                    .apps
                    .retain(|a| a.destination.server.as_deref() != Some(gone_server.as_str()));
                let m_loads = minus.loads();
                let mi = assignment(
                    &minus.clusters,
                    &alg.assign(&minus.clusters, &minus.apps, &m_loads, r, Some(&a0)),
                );

                let best = (*loads.iter().max().unwrap() as f64 / bal.mean_load()).max(1.0);
                println!(
                    "| {}k | {r} | {} | {:.3} ({best:.2}) | {:.1} % | {:.1} % | {:.1} % | {:.1} % | {:.1} % |",
                    size / 1000,
                    alg.name(),
                    bal.max_over_mean(),
                    moved_pct(&a0, &up, &fleet, &loads),
                    down_moved,
                    moved_pct(&a0, &pl, &plus_low, &pl_loads),
                    moved_pct(&a0, &pr, &plus_rand, &pr_loads),
                    moved_pct(&a0, &mi, &minus, &m_loads),
                );
            }
        }
    }
}
