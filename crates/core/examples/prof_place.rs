//! Throwaway profiling harness (not committed).
use fleetshard_core::ShardSpec;
use fleetshard_core::argo::{ArgoAlgorithm, ArgoControllerAssignment};
use fleetshard_core::placement::{PlacementConfig, place};
use fleetshard_fleetgen::FleetSpec;
fn main() {
    let which = std::env::args().nth(1).unwrap_or_default();
    let f = FleetSpec::new(10_000).with_seed(7).generate();
    let loads = f.loads();
    if which == "ch" {
        let a = ArgoControllerAssignment::compute(
            ArgoAlgorithm::ConsistentHashing,
            10,
            &f.clusters,
            &f.apps,
        );
        println!("{}", a.shards().len());
    } else {
        let shards = vec![ShardSpec::default(); 100];
        let p = place(
            &f.clusters,
            &loads,
            &shards,
            None,
            &PlacementConfig::default(),
        );
        println!("{}", p.shards.len());
    }
}
