//! Heap bytes of a replica's inventory and its app index, at N clusters × 10 apps.
//!
//! `cargo bench -p fleetshard-controller --bench inventory_heap -- [CLUSTERS…]` (default
//! 1000 10000)
//!
//! For each size, fleetgen writes the fleet as Argo CD exports it (a cluster Secret `List`
//! and an Application `List`, as `fleetshard fleet generate --format argocd --skew uniform`
//! does); the manifest loader reads both texts, as `fleetshard run --clusters --apps` does;
//! the content is published into an [`Inventory`], and a [`ShardWork`] indexes it
//! (as `follow_inventory` does; then every cluster owned, and the refresh queue emptied).
//! Counted by a counting global allocator (bytes asked of the allocator, not its rounding): the heap
//! live after each step, relative to the heap before loading (the texts excluded). The
//! index is then dropped and the inventory taken apart to attribute its bytes (the keys the
//! index shares go with the specs that own them); the bench checks that the parts add up
//! to what was live once published, and that the heap is back at its start once
//! everything is dropped.

use std::collections::BTreeMap;

use fleetshard_controller::inventory::{Inventory, InventoryContent, specs_by_app_key};
use fleetshard_controller::{AppKey, ShardWork, WorkQueue};
use fleetshard_fleetgen::{FleetSpec, REPO_URL, Skew, TARGET_REVISION};
use fleetshard_manifest::{AppSource, AppSpec, spec_key};
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

/// Bytes live on the heap now, and allocations live.
///
/// `stats_alloc` already adds a reallocation's growth to `bytes_allocated` (and its
/// shrinking to `bytes_deallocated`); its `bytes_reallocated` is the same net change
/// again, a statistic, not more live bytes. (Adding it counted every buffer's growth
/// twice: about 54 MiB at 10,000 clusters that no drop ever freed.)
fn live() -> (i64, i64) {
    let s = GLOBAL.stats();
    let bytes = s.bytes_allocated as i64 - s.bytes_deallocated as i64;
    (bytes, s.allocations as i64 - s.deallocations as i64)
}

fn mib(bytes: i64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// The two export texts of `clusters` × 10 apps.
fn exports(clusters: usize) -> (String, String) {
    let spec = FleetSpec::new(clusters).with_skew(Skew::Uniform);
    let fleet = spec.generate();
    let specs: BTreeMap<(String, String), AppSpec> = fleet
        .apps
        .iter()
        .zip(spec.app_paths())
        .map(|(app, path)| {
            let source = AppSource {
                repo_url: REPO_URL.to_owned(),
                target_revision: TARGET_REVISION.to_owned(),
                path,
                directory: Default::default(),
                raw: Default::default(),
            };
            (
                spec_key(app),
                AppSpec {
                    source,
                    ..AppSpec::default()
                },
            )
        })
        .collect();
    (
        fleetshard_manifest::to_secret_list_yaml(&fleet.clusters),
        fleetshard_manifest::to_application_list_yaml(&fleet.apps, &specs),
    )
}

/// One step's figures: its heap now (relative to the base), its allocations.
#[derive(Clone, Copy)]
struct Step {
    bytes: i64,
    allocs: i64,
}

impl Step {
    fn since(base: (i64, i64)) -> Self {
        let (b, a) = live();
        Step {
            bytes: b - base.0,
            allocs: a - base.1,
        }
    }
}

fn measure(clusters: usize) {
    let (cluster_text, app_text) = exports(clusters);
    let base = live();
    let mut phases: Vec<(&str, Step)> = Vec::new();

    // Load as `fleetshard run --clusters --apps` does.
    let c = fleetshard_manifest::parse_clusters_with_credentials(&cluster_text, "clusters.yaml")
        .expect("clusters parse");
    phases.push(("clusters parsed", Step::since(base)));
    let a = fleetshard_manifest::parse_apps_with_specs(&app_text, "apps.yaml").expect("apps parse");
    let loaded = Step::since(base);
    phases.push(("apps parsed (loader output)", loaded));
    let mut content = InventoryContent {
        clusters: c.value.fleet.clusters,
        credentials: c.value.credentials,
        repositories: c.value.repositories,
        apps: a.value.fleet.apps,
        specs: specs_by_app_key(a.value.specs),
        ..InventoryContent::default()
    };
    phases.push(("specs made compact", Step::since(base)));
    // The loader's warnings and leftovers are not the inventory's.
    drop((c.warnings, a.warnings, a.value.projects));
    phases.push(("warnings dropped", Step::since(base)));
    let mut problems = Vec::new();
    content.complete_argo_cluster_list(true, "clusters.yaml", &mut problems);
    phases.push(("cluster list completed", Step::since(base)));
    let apps = content.apps.len();
    let inventory = Inventory::new();
    inventory.publish(content, problems, true);
    let published = Step::since(base);
    phases.push(("published", published));

    let work = ShardWork::new(
        WorkQueue::with_default_limits(),
        WorkQueue::with_default_limits(),
        Default::default(),
    );
    let snap = inventory.snapshot();
    work.set_inventory_sharing(&snap.clusters, &snap.apps, &snap.specs);
    let indexed = Step::since(base);
    phases.push(("indexed", indexed));
    // Every cluster owned: the start queues every app; the workers then empty the queue,
    // whose sets keep their capacity.
    for c in snap.clusters.iter() {
        work.start_cluster(&c.id);
    }
    let queued = work.refresh_queue().len();
    let keys: Vec<AppKey> = snap.apps.iter().map(AppKey::of).collect();
    work.refresh_queue().remove_many(&keys);
    drop(keys);
    assert!(work.refresh_queue().is_empty());
    let started = Step::since(base);
    phases.push(("every cluster started, queue emptied", started));

    // Take the inventory apart: what each part frees.
    drop(work);
    phases.push(("ShardWork dropped", Step::since(base)));
    drop(inventory);
    let mut rest = snap;
    let specs = std::mem::take(&mut rest.specs);
    let apps_vec = std::mem::take(&mut rest.apps);
    let before = live();
    drop(specs);
    let after_specs = live();
    drop(apps_vec);
    let after_apps = live();
    drop(rest);
    let after_rest = live();
    phases.push(("inventory dropped", Step::since(base)));
    drop((
        c.value.fleet.apps,
        c.value.specs,
        c.value.shards,
        c.value.projects,
        a.value.fleet.clusters,
        a.value.shards,
        a.value.credentials,
        a.value.repositories,
    ));
    phases.push(("the loader's leftovers dropped", Step::since(base)));
    let (inv, index) = (published.bytes, indexed.bytes - published.bytes);
    let parts = before.0 - after_rest.0;
    let left = Step::since(base);
    println!(
        "{clusters} clusters × {apps} apps:\n  \
         loader output: {:.1} MiB ({} allocations)\n  \
         inventory (published): {:.1} MiB ({} allocations, {:.0} bytes per app): specs {:.1} MiB, \
         apps {:.1} MiB, clusters and the rest {:.1} MiB\n  \
         ShardWork index: {:.1} MiB ({} allocations, {:.0} bytes per app)\n  \
         inventory + index: {:.1} MiB\n  \
         after owning every cluster ({queued} apps queued, then dequeued): +{:.1} MiB",
        mib(loaded.bytes),
        loaded.allocs,
        mib(inv),
        published.allocs,
        inv as f64 / apps as f64,
        mib(before.0 - after_specs.0),
        mib(after_specs.0 - after_apps.0),
        mib(after_apps.0 - after_rest.0),
        mib(index),
        indexed.allocs - published.allocs,
        index as f64 / apps as f64,
        mib(inv + index),
        mib(started.bytes - indexed.bytes),
    );
    println!("  live after each step (relative to before loading):");
    for (name, step) in &phases {
        println!(
            "    {name}: {:.1} MiB ({} allocations)",
            mib(step.bytes),
            step.allocs
        );
    }
    // The figures add up, or they are not printed as if they did: what was live once the
    // inventory was published is its parts (the loader's leftovers are a few empty
    // collections), and once everything is dropped the heap is back where it started.
    assert!(
        (inv - parts).abs() <= SLACK,
        "published {inv} bytes, but its parts free {parts}"
    );
    assert!(
        left.bytes.abs() <= SLACK,
        "{} bytes ({} allocations) still live once everything is dropped",
        left.bytes,
        left.allocs
    );
}

/// What the checks above allow: a few small allocations made once (a lazily created
/// global, say).
const SLACK: i64 = 64 * 1024;

fn main() {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .map(|a| a.parse().expect("a number of clusters"))
        .collect();
    let sizes = if sizes.is_empty() {
        vec![1_000, 10_000]
    } else {
        sizes
    };
    for n in sizes {
        measure(n);
    }
}
