//! Distribution speed on synthetic fleets (10 apps per cluster on a Zipf spread), the same
//! shapes as Argo CD's figures in argo-compat §9 (`docs/glossary.md`). Run:
//! `cargo bench -p fleetshard-core`.
//! Results and machine: `docs/performance.md`.

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use fleetshard_core::argo::{
    ArgoAlgorithm, ArgoControllerAssignment, ArgoPrepared, ConsistentHashRing,
};
use fleetshard_core::placement::{BalancedPlacer, PlacementConfig};
use fleetshard_core::{Cluster, Fleet, ShardSpec};
use fleetshard_fleetgen::FleetSpec;
use std::hint::black_box;
use std::time::Duration;

const SIZES: [usize; 3] = [1_000, 10_000, 50_000];
const SHARDS: [u32; 2] = [10, 100];

fn fleet(clusters: usize) -> (Fleet, Vec<u64>) {
    let fleet = FleetSpec::new(clusters).with_seed(7).generate();
    let loads = fleet.loads();
    (fleet, loads)
}

/// A benchmark group sized for this 2-core machine: 10 samples, 0.5 s warm-up, 2 s.
fn quick_group<'a>(
    c: &'a mut Criterion,
    name: impl Into<String>,
) -> criterion::BenchmarkGroup<'a, criterion::measurement::WallTime> {
    let mut group = c.benchmark_group(name);
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    group
}

fn label(clusters: usize, shards: u32) -> String {
    format!("{}k/R={shards}", clusters / 1000)
}

fn argo(c: &mut Criterion) {
    for alg in ArgoAlgorithm::ALL {
        let mut group = quick_group(c, format!("argo/{}", alg.name()));
        for size in SIZES {
            let (f, _) = fleet(size);
            for r in SHARDS {
                group.bench_function(BenchmarkId::from_parameter(label(size, r)), |b| {
                    b.iter(|| {
                        ArgoControllerAssignment::compute(alg, black_box(r), &f.clusters, &f.apps)
                    })
                });
            }
        }
        group.finish();
    }
    // The parts of consistent hashing that depend only on the apps or only on the replica
    // count, and the computation with both prepared (a controller keeps app counts current
    // from events and builds a ring once per replica count).
    let mut group = quick_group(c, "argo/prepare");
    for r in SHARDS {
        group.bench_function(BenchmarkId::new("ring", r), |b| {
            b.iter(|| ConsistentHashRing::new(black_box(r)))
        });
    }
    for size in SIZES {
        let (f, _) = fleet(size);
        group.bench_function(
            BenchmarkId::new("app-counts", format!("{}k", size / 1000)),
            |b| b.iter(|| ArgoPrepared::new(&f.apps)),
        );
    }
    group.finish();
    let mut group = quick_group(c, "argo/consistent-hashing-prepared");
    for size in SIZES {
        let (f, _) = fleet(size);
        let mut prepared = ArgoPrepared::new(&f.apps);
        for r in SHARDS {
            prepared.ring(r);
            group.bench_function(BenchmarkId::from_parameter(label(size, r)), |b| {
                b.iter(|| {
                    ArgoControllerAssignment::compute_prepared(
                        ArgoAlgorithm::ConsistentHashing,
                        r,
                        &f.clusters,
                        &mut prepared,
                    )
                })
            });
        }
    }
    group.finish();
}

fn balanced(c: &mut Criterion) {
    let mut group = quick_group(c, "balanced/place");
    for size in SIZES {
        let (f, loads) = fleet(size);
        for r in SHARDS {
            let shards = vec![ShardSpec::default(); r as usize];
            group.bench_function(BenchmarkId::from_parameter(label(size, r)), |b| {
                b.iter(|| {
                    BalancedPlacer::new(PlacementConfig::default(), shards.clone()).place(
                        &f.clusters,
                        &loads,
                        None,
                    )
                })
            });
        }
    }
    group.finish();

    // Re-placing with the previous assignment (what the distributor does on any change).
    let mut group = quick_group(c, "balanced/replace-with-previous");
    for size in SIZES {
        let (f, loads) = fleet(size);
        let shards = vec![ShardSpec::default(); 100];
        let before = BalancedPlacer::new(PlacementConfig::default(), shards.clone()).place(
            &f.clusters,
            &loads,
            None,
        );
        let previous = before.as_previous(&f.clusters);
        group.bench_function(BenchmarkId::from_parameter(label(size, 100)), |b| {
            b.iter(|| {
                BalancedPlacer::new(PlacementConfig::default(), shards.clone()).place(
                    &f.clusters,
                    &loads,
                    Some(&previous),
                )
            })
        });
    }
    group.finish();

    let mut group = c.benchmark_group("balanced/add-one-cluster");
    group
        .sample_size(30)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    for size in [10_000, 50_000] {
        let (f, loads) = fleet(size);
        let mut placer =
            BalancedPlacer::new(PlacementConfig::default(), vec![ShardSpec::default(); 100]);
        placer.place(&f.clusters, &loads, None);
        let new = Cluster::new(
            "ffffffff-0000-4000-8000-000000000000",
            "https://new.fleet.example",
        );
        group.bench_function(BenchmarkId::from_parameter(label(size, 100)), |b| {
            b.iter_batched_ref(
                || placer.clone(),
                |p| p.add_cluster(&new, 10),
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, argo, balanced);
criterion_main!(benches);
