//! Embedding the distribution engine: place a fleet on three replicas with fleetshard's
//! balanced placement, see what Argo CD's consistent hashing would do with the same fleet,
//! then scale to four replicas from the previous placement and count what moved.
//!
//! Run: `cargo run -p fleetshard-core --example embed_engine`

use fleetshard_core::argo::{ArgoAlgorithm, ArgoControllerAssignment};
use fleetshard_core::placement::{PlacementConfig, PreviousPlacement, place};
use fleetshard_core::{App, Assignment, Cluster, ShardSpec};

fn main() {
    // Twelve clusters; cluster i runs 1 + i % 5 apps.
    let clusters: Vec<Cluster> = (0..12)
        .map(|i| Cluster::new(format!("cluster-{i:02}"), format!("https://c{i}.example")))
        .collect();
    let apps: Vec<App> = clusters
        .iter()
        .enumerate()
        .flat_map(|(i, c)| {
            (0..1 + i % 5)
                .map(move |a| App::to_server("argocd", &format!("{}-{a}", c.id), &c.server))
        })
        .collect();
    let shards = |n: u32| -> Vec<ShardSpec> { (0..n).map(|_| ShardSpec::default()).collect() };
    let config = PlacementConfig::default();
    // A cluster's load: a base cost plus its apps (or its weight, when set).
    let loads = config.loads(&clusters, &apps);

    let three = place(&clusters, &loads, &shards(3), None, &config);
    println!(
        "balanced, 3 replicas: load per shard {:?}",
        per_shard(&three.shards, &loads, 3)
    );

    // What Argo CD's own controller computes for the same fleet (bit for bit).
    let argo =
        ArgoControllerAssignment::compute(ArgoAlgorithm::ConsistentHashing, 3, &clusters, &apps);
    let argo_shards: Vec<Option<u32>> = argo
        .shards()
        .iter()
        .map(|s| u32::try_from(*s).ok())
        .collect();
    println!(
        "Argo CD consistent-hashing, 3 replicas: load per shard {:?}",
        per_shard(&argo_shards, &loads, 3)
    );

    // Scale to four, starting from the three-replica placement: few clusters move.
    let mut assignment = Assignment::new();
    for (c, s) in clusters.iter().zip(&three.shards) {
        if let Some(s) = s {
            assignment.insert(c.id.clone(), *s);
        }
    }
    let previous = PreviousPlacement {
        assignment,
        ..PreviousPlacement::default()
    };
    let four = place(&clusters, &loads, &shards(4), Some(&previous), &config);
    let moved = three
        .shards
        .iter()
        .zip(&four.shards)
        .filter(|(a, b)| a != b)
        .count();
    println!(
        "balanced, 4 replicas: load per shard {:?}; {moved} of {} clusters moved",
        per_shard(&four.shards, &loads, 4),
        clusters.len()
    );
}

/// The load each shard carries.
fn per_shard(shards: &[Option<u32>], loads: &[u64], n: u32) -> Vec<u64> {
    let mut out = vec![0; n as usize];
    for (s, l) in shards.iter().zip(loads) {
        if let Some(s) = s {
            out[*s as usize] += l;
        }
    }
    out
}
