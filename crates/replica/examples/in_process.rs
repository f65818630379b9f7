//! Starting replicas inside your own process: two fenced-mode replicas share a
//! `memory://` store and split a fixed fleet of six clusters (no reconciler), then one
//! leaves gracefully and the other takes its clusters over.
//!
//! Run: `cargo run -p fleetshard-replica --example in_process`

use std::collections::BTreeMap;
use std::time::Duration;

use fleetshard_controller::inventory::InventoryContent;
use fleetshard_coord::fenced::ShardCount;
use fleetshard_core::{App, Cluster};
use fleetshard_replica::{
    ControllerSettings, FencedSettings, FleetSource, ProtocolSettings, ReconcilerKind, Replica,
    ReplicaSettings, StoreUrl,
};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let clusters: Vec<Cluster> = (0..6)
        .map(|i| Cluster::new(format!("c{i}"), format!("https://c{i}.example")))
        .collect();
    let apps = clusters
        .iter()
        .map(|c| App::to_server("argocd", &format!("app-{}", c.id), &c.server))
        .collect();
    let fleet = InventoryContent {
        clusters,
        apps,
        credentials: BTreeMap::new(),
        specs: BTreeMap::new(),
        projects: BTreeMap::new(),
        repositories: Default::default(),
        argocd_cm: BTreeMap::new(),
    };
    let store = StoreUrl::Memory.open()?;
    let mut replicas = Vec::new();
    for (i, identity) in ["left", "right"].into_iter().enumerate() {
        let settings = ReplicaSettings {
            identity: identity.into(),
            incarnation: i as u64 + 1,
            store: StoreUrl::Memory,
            root: "fleetshard/".into(),
            listen: "127.0.0.1:0".parse()?,
            dashboard: false,
            zone: None,
            capacity: 1,
            audit_log: None,
            allow_empty_fleet: false,
            fleet: FleetSource::Fixed(fleet.clone()),
            controller: ControllerSettings {
                reconciler: ReconcilerKind::None,
                ..ControllerSettings::default()
            },
            protocol: ProtocolSettings::Fenced(FencedSettings {
                shards: ShardCount::Fixed(2),
                ..FencedSettings::default()
            }),
        };
        let replica = Replica::build_on(settings, store.clone()).await?.spawn()?;
        println!(
            "{identity}: serving /readyz and /metrics on http://{}",
            replica.addr
        );
        replicas.push(replica);
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    for (name, r) in ["left", "right"].iter().zip(&replicas) {
        let v = r.view();
        println!(
            "{name}: shard {:?}, {} clusters, {:?}",
            v.shard, v.acting, v.ready
        );
    }
    let left = replicas.remove(0);
    println!("left leaves: released = {}", left.shutdown().await?);
    tokio::time::sleep(Duration::from_secs(3)).await;
    println!("right now acts on {} clusters", replicas[0].view().acting);
    replicas.remove(0).shutdown().await?;
    Ok(())
}
