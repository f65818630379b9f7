//! The ordered shedding and filling (`rebalance.rs`) give exactly the placement of the
//! first, scanning implementation (`reference.rs`) — every cluster's shard, homes, targets,
//! zones and warnings — from scratch and from a previous placement, with and without
//! zones, pins, vacant shards, skew, ties and no loads at all; and incremental updates
//! move the same clusters.

use proptest::prelude::*;

use super::BalancedPlacer;
use crate::model::{Cluster, ShardSpec, ZONE_LABEL};
use crate::placement::{Placement, PlacementConfig, PreviousPlacement};

const ZONES: [&str; 3] = ["za", "zb", "zc"];

/// A random fleet and two shard layouts (before and after).
#[derive(Debug, Clone)]
struct Case {
    clusters: Vec<Cluster>,
    loads: Vec<u64>,
    before: Vec<ShardSpec>,
    after: Vec<ShardSpec>,
    vacant: Vec<u32>,
    tolerance: f64,
}

fn case() -> impl Strategy<Value = Case> {
    let cluster = (0u32..10_000, 0usize..4, 0u8..20);
    (
        prop::collection::vec(cluster, 1..300),
        1usize..9,
        1usize..9,
        0usize..4,
        0u8..4,
        prop::collection::vec(0u32..9, 0..3),
        0.0f64..0.3,
    )
        .prop_map(|(raw, before, after, zones, loads, vacant, tolerance)| {
            // Loads: skewed with a tail, mild, all equal (ties by id), or none (unit loads).
            let load = |r: u32| match loads {
                0 => {
                    u64::from(r % 20)
                        + if r.is_multiple_of(97) {
                            u64::from(r % 400)
                        } else {
                            0
                        }
                }
                1 => u64::from(r % 20),
                2 => 5,
                _ => 0,
            };
            let clusters: Vec<Cluster> = raw
                .iter()
                .enumerate()
                .map(|(i, &(r, z, pin))| {
                    // Ids in an order unrelated to the index.
                    let mut c =
                        Cluster::new(format!("c{:05}-{i}", r % 997), format!("https://c{i}"));
                    if zones > 0 {
                        c.labels.insert(ZONE_LABEL.into(), ZONES[z % zones].into());
                    }
                    if pin == 0 {
                        c.shard = Some(i64::from(r % 9));
                    }
                    c
                })
                .collect();
            let loads = raw.iter().map(|&(r, _, _)| load(r)).collect();
            let specs = |n: usize| -> Vec<ShardSpec> {
                (0..n)
                    .map(|s| ShardSpec {
                        zone: (zones > 0).then(|| ZONES[s % zones].to_owned()),
                        capacity: 1 + (s % 2) as u32,
                    })
                    .collect()
            };
            Case {
                clusters,
                loads,
                before: specs(before),
                after: specs(after),
                vacant,
                tolerance,
            }
        })
}

fn placer(case: &Case, shards: &[ShardSpec], reference: bool) -> BalancedPlacer {
    let config = PlacementConfig {
        tolerance: case.tolerance,
        ..PlacementConfig::default()
    };
    let mut p = BalancedPlacer::new(config, shards.to_vec()).with_vacant(case.vacant.clone());
    p.reference = reference;
    p
}

fn both(
    case: &Case,
    shards: &[ShardSpec],
    previous: Option<&PreviousPlacement>,
) -> (Placement, Placement) {
    let new = placer(case, shards, false).place(&case.clusters, &case.loads, previous);
    let old = placer(case, shards, true).place(&case.clusters, &case.loads, previous);
    (new, old)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(fleetshard_util::cases::property_cases(ProptestConfig::default().cases, 400)))]

    #[test]
    fn the_same_placement_as_the_scan(case in case()) {
        let (new, old) = both(&case, &case.before, None);
        prop_assert_eq!(&new, &old);
        let previous = new.as_previous(&case.clusters);
        let (new, old) = both(&case, &case.after, Some(&previous));
        prop_assert_eq!(&new, &old);
    }

    #[test]
    fn the_same_incremental_moves_as_the_scan(case in case(), extra in 0u64..500, drop in 0usize..300) {
        let mut new = placer(&case, &case.after, false);
        let mut old = placer(&case, &case.after, true);
        new.place(&case.clusters, &case.loads, None);
        old.place(&case.clusters, &case.loads, None);
        let added = Cluster::new("zz-added", "https://added");
        prop_assert_eq!(new.add_cluster(&added, extra), old.add_cluster(&added, extra));
        let gone = &case.clusters[drop % case.clusters.len()].id;
        prop_assert_eq!(new.remove_cluster(gone), old.remove_cluster(gone));
        prop_assert_eq!(new.assignment(), old.assignment());
    }
}

/// The shapes the benchmarks time, small: one shard to three and back, all loads equal.
#[test]
fn scaling_by_three_matches_the_scan() {
    let clusters: Vec<Cluster> = (0..2_000)
        .map(|i| {
            Cluster::new(
                format!("id-{:05}", (i * 7919) % 2_000),
                format!("https://c{i}"),
            )
        })
        .collect();
    for loads in [
        vec![0; 2_000],
        (0..2_000).map(|i| (i % 13) as u64).collect(),
    ] {
        let case = Case {
            clusters: clusters.clone(),
            loads,
            before: vec![ShardSpec::default(); 1],
            after: vec![ShardSpec::default(); 3],
            vacant: Vec::new(),
            tolerance: 0.1,
        };
        let (one, _) = both(&case, &case.before, None);
        let (three, old) = both(&case, &case.after, Some(&one.as_previous(&case.clusters)));
        assert_eq!(three, old);
        let (back, old) = both(
            &case,
            &case.before,
            Some(&three.as_previous(&case.clusters)),
        );
        assert_eq!(back, old);
    }
}
