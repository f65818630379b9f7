//! Resident memory of the inventory at 10k clusters and 100k applications.
//!
//! `cargo bench -p fleetshard-controller --bench inventory_memory -- [inventory | directory [APP_FILES]]`
//!
//! - `inventory` (default): the published [`Inventory`] alone — a generated fleet (fleetgen,
//!   seed 0, 10 apps per cluster, every app with a spec of a repository URL, a path and a
//!   revision as Argo CD apps have) moved into one snapshot. Measured: resident memory before
//!   generating and after publishing (the generator's temporaries are freed by then).
//! - `directory`: the whole directory source path — the fleet written as a cluster
//!   `SecretList` and `APP_FILES` `ApplicationList`s (default 1; YAML, as `kubectl get -o yaml` exports them),
//!   then a [`DirectorySource`] started on it until the inventory is ready. Measured: resident
//!   memory before starting the source and once it is ready (the source's per-file last
//!   good objects plus the published snapshot: two copies of the fleet), and the load time.
//!
//! Resident memory is `/proc/self/statm`'s second field × 4 KiB pages (Linux).

use std::collections::BTreeMap;
use std::time::Duration;

use fleetshard_controller::inventory::{
    DirectoryConfig, DirectorySource, Inventory, InventoryContent, specs_by_app_key,
};
use fleetshard_core::Fleet;
use fleetshard_fleetgen::FleetSpec;
use fleetshard_manifest::{AppSource, AppSpec, spec_key};

const CLUSTERS: usize = 10_000;

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm (Linux)");
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("statm's resident field");
    pages * 4096
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// The generated fleet and each app's spec, by `(namespace, name)`.
fn generate() -> (Fleet, BTreeMap<(String, String), AppSpec>) {
    let mut fleet = FleetSpec::new(CLUSTERS).generate();
    let mut specs = BTreeMap::new();
    for app in &mut fleet.apps {
        app.project = "default".to_owned();
        let spec = AppSpec {
            source: AppSource {
                repo_url: "https://git.example.com/platform/apps.git".to_owned(),
                path: format!("apps/{}", app.name),
                target_revision: "HEAD".to_owned(),
                directory: Default::default(),
                raw: Default::default(),
            },
            ..AppSpec::default()
        };
        specs.insert(spec_key(app), spec);
    }
    (fleet, specs)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mode = std::env::args()
        .filter(|a| a != "--bench")
        .nth(1)
        .unwrap_or_else(|| "inventory".to_owned());
    match mode.as_str() {
        "inventory" => inventory_alone(),
        "directory" => {
            let files = std::env::args()
                .filter(|a| a != "--bench")
                .nth(2)
                .map_or(1, |n| n.parse().expect("a number of application files"));
            directory(files.max(1)).await
        }
        other => panic!("unknown mode {other:?}; use inventory or directory"),
    }
}

fn inventory_alone() {
    let before = rss_bytes();
    let (fleet, specs) = generate();
    let (clusters, apps) = (fleet.clusters.len(), fleet.apps.len());
    let inventory = Inventory::new();
    inventory.publish(
        InventoryContent {
            clusters: fleet.clusters,
            apps: fleet.apps,
            specs: specs_by_app_key(specs),
            ..Default::default()
        },
        Vec::new(),
        true,
    );
    let after = rss_bytes();
    let snap = inventory.snapshot();
    assert_eq!((snap.clusters.len(), snap.apps.len()), (clusters, apps));
    println!(
        "inventory alone: {clusters} clusters, {apps} apps: resident {:.1} MiB -> {:.1} MiB \
         (+{:.1} MiB, {:.0} bytes per app incl. its share of clusters)",
        mib(before),
        mib(after),
        mib(after - before),
        (after - before) as f64 / apps as f64
    );
}

async fn directory(files: usize) {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let (fleet, specs) = generate();
        let secrets = fleetshard_manifest::to_secret_list_yaml(&fleet.clusters);
        std::fs::write(dir.path().join("clusters.yaml"), &secrets).expect("write");
        let chunk = fleet.apps.len().div_ceil(files);
        let mut total = 0;
        for (i, apps) in fleet.apps.chunks(chunk).enumerate() {
            let apps = fleetshard_manifest::to_application_list_yaml(apps, &specs);
            total += apps.len();
            std::fs::write(dir.path().join(format!("apps-{i:04}.yaml")), &apps).expect("write");
        }
        println!(
            "files: clusters.yaml {:.1} MiB, {files} application file(s) {:.1} MiB in all",
            mib(secrets.len() as u64),
            mib(total as u64)
        );
    }
    let before = rss_bytes();
    let inventory = Inventory::new();
    let mut rx = inventory.subscribe();
    let start = tokio::time::Instant::now();
    let config = DirectoryConfig {
        dir: dir.path().to_owned(),
        poll_interval: Duration::from_secs(1),
        in_cluster_enabled: false,
    };
    let task = tokio::spawn(DirectorySource::new(config).run(inventory.clone()));
    let snap = rx
        .wait_for(|s| s.ready)
        .await
        .expect("inventory alive")
        .clone();
    let load = start.elapsed();
    assert!(snap.problems.is_empty(), "{:?}", snap.problems.first());
    // Let the parser's temporaries be returned before measuring.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let after = rss_bytes();
    println!(
        "directory source: {} clusters, {} apps loaded in {:.2} s: resident {:.1} MiB -> \
         {:.1} MiB (+{:.1} MiB)",
        snap.clusters.len(),
        snap.apps.len(),
        load.as_secs_f64(),
        mib(before),
        mib(after),
        mib(after - before)
    );
    task.abort();
}
