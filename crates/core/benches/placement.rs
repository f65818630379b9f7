//! Every path of the balanced placement the distributor takes, at 10k and 50k clusters:
//! from scratch, and from the previous assignment after a change — the shard count ±1 and
//! ×3 (1→3, 3→1, 10→30, 30→90), one cluster more or fewer, a zone's replicas added; 1→3 also with
//! no apps (every load ties) and with the default load (a base per cluster plus its apps). Each is one full
//! `BalancedPlacer::place`, as the distributor runs it. Run:
//! `cargo bench -p fleetshard-core --bench placement` (a filter such as `-- 1→3` picks
//! paths). Results and machine: `docs/performance.md`.

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use fleetshard_core::placement::{BalancedPlacer, PlacementConfig, PreviousPlacement};
use fleetshard_core::{Cluster, ShardSpec};
use fleetshard_fleetgen::{FleetSpec, shards};
use std::time::Duration;

const SIZES: [usize; 2] = [10_000, 50_000];
const ZONES: [&str; 3] = ["zone-a", "zone-b", "zone-c"];

/// One path: the input of the timed placement.
struct Path {
    name: &'static str,
    clusters: Vec<Cluster>,
    loads: Vec<u64>,
    shards: Vec<ShardSpec>,
    previous: Option<PreviousPlacement>,
}

fn place(
    clusters: &[Cluster],
    loads: &[u64],
    shards: &[ShardSpec],
    previous: Option<&PreviousPlacement>,
) -> PreviousPlacement {
    BalancedPlacer::new(PlacementConfig::default(), shards.to_vec())
        .place(clusters, loads, previous)
        .as_previous(clusters)
}

fn paths(size: usize) -> Vec<Path> {
    let fleet = FleetSpec::new(size).with_seed(7).generate();
    let (clusters, loads) = (fleet.clusters.clone(), fleet.loads());
    let based = PlacementConfig::default().loads(&fleet.clusters, &fleet.apps);
    let plain = |n: usize| vec![ShardSpec::default(); n];
    let from = |n: usize| Some(place(&clusters, &loads, &plain(n), None));
    let mut out = vec![
        Path {
            name: "scratch R=10",
            clusters: clusters.clone(),
            loads: loads.clone(),
            shards: plain(10),
            previous: None,
        },
        Path {
            name: "unchanged R=10",
            clusters: clusters.clone(),
            loads: loads.clone(),
            shards: plain(10),
            previous: from(10),
        },
        Path {
            name: "10→11",
            clusters: clusters.clone(),
            loads: loads.clone(),
            shards: plain(11),
            previous: from(10),
        },
        Path {
            name: "10→9",
            clusters: clusters.clone(),
            loads: loads.clone(),
            shards: plain(9),
            previous: from(10),
        },
        Path {
            name: "1→3",
            clusters: clusters.clone(),
            loads: loads.clone(),
            shards: plain(3),
            previous: from(1),
        },
        // No apps yet: every cluster counts 1, so weights tie and order is by id.
        Path {
            name: "1→3 no apps",
            clusters: clusters.clone(),
            loads: vec![0; size],
            shards: plain(3),
            previous: Some(place(&clusters, &vec![0; size], &plain(1), None)),
        },
        // The default load: a base per cluster plus its apps (what `plan` and `run` use).
        Path {
            name: "1→3 base load",
            clusters: clusters.clone(),
            loads: based.clone(),
            shards: plain(3),
            previous: Some(place(&clusters, &based, &plain(1), None)),
        },
        // ×3 at a larger count: 20 new shards fill at once.
        Path {
            name: "10→30",
            clusters: clusters.clone(),
            loads: loads.clone(),
            shards: plain(30),
            previous: from(10),
        },
        // The widest fill: 60 new shards, each filled from the 30 old ones.
        Path {
            name: "30→90",
            clusters: clusters.clone(),
            loads: loads.clone(),
            shards: plain(90),
            previous: from(30),
        },
        Path {
            name: "3→1",
            clusters: clusters.clone(),
            loads: loads.clone(),
            shards: plain(1),
            previous: from(3),
        },
    ];
    // One cluster more (as heavy as the heaviest), one fewer (the heaviest).
    let heaviest = (0..size).max_by_key(|&i| loads[i]).unwrap_or(0);
    let mut more = (clusters.clone(), loads.clone());
    more.0.push(Cluster::new(
        "ffffffff-0000-4000-8000-000000000000",
        "https://new.fleet.example",
    ));
    more.1.push(loads[heaviest]);
    out.push(Path {
        name: "+1 cluster R=10",
        clusters: more.0,
        loads: more.1,
        shards: plain(10),
        previous: from(10),
    });
    let mut fewer = (clusters.clone(), loads.clone());
    fewer.0.remove(heaviest);
    fewer.1.remove(heaviest);
    out.push(Path {
        name: "-1 cluster R=10",
        clusters: fewer.0,
        loads: fewer.1,
        shards: plain(10),
        previous: from(10),
    });
    // Clusters in three zones, replicas in two (zones are then ignored: a zone has no
    // shard); then three replicas of the third zone join, and the zones are obeyed.
    let zoned = FleetSpec::new(size)
        .with_seed(7)
        .with_zones(ZONES)
        .generate();
    let zoned_loads = zoned.loads();
    let before = shards(6, &ZONES[..2]);
    let mut after = before.clone();
    after.extend(shards(3, &ZONES[2..]));
    let previous = place(&zoned.clusters, &zoned_loads, &before, None);
    out.push(Path {
        name: "zone added 6→9",
        clusters: zoned.clusters,
        loads: zoned_loads,
        shards: after,
        previous: Some(previous),
    });
    out
}

fn placement(c: &mut Criterion) {
    let mut group = c.benchmark_group("balanced/paths");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    for size in SIZES {
        for p in paths(size) {
            let id = BenchmarkId::new(p.name, format!("{}k", size / 1000));
            group.bench_function(id, |b| {
                b.iter(|| {
                    BalancedPlacer::new(PlacementConfig::default(), p.shards.clone()).place(
                        &p.clusters,
                        &p.loads,
                        p.previous.as_ref(),
                    )
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, placement);
criterion_main!(benches);
